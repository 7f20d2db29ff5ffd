"""The pytest plugin (entry point ``pytest11``): options, suite collection, deselection, summary.

Each module-level :class:`~tunebench.Kernel` in a collected test module is a suite. With
``--tune`` it yields, per (dtype, bucket), one item for the baseline and one per candidate
config; candidates that violate a constraint are deselected. The first item of a task to run
tunes the whole task in the strategy's order (see :mod:`tunebench.session`); every item then
reports its own candidate: passed, failed with its status, or skipped when not sampled.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tunebench.backends import TARGETS, cuda_status, fingerprint, resolve
from tunebench.kernel import Kernel, KernelError
from tunebench.measure import MeasureSettings
from tunebench.records import RecordsError, RecordStore
from tunebench.session import FIXED_REPEATS, Budget, Task, Tuner
from tunebench.workers import Workers
from tunebench.space import SpaceError
from tunebench.strategies import MODULES as STRATEGIES
from tunebench.summary import table

TUNER = pytest.StashKey["Tuner | None"]()
UNAVAILABLE = pytest.StashKey[dict]()  # target -> why it cannot run here
SEEN = pytest.StashKey[dict]()  # kernel name -> Kernel, to collect each suite once


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tunebench", "tunebench: kernel auto-tuning")
    group.addoption("--tune", action="store_true",
                    help="tune every suite: measure candidate configs and record every trial")
    group.addoption("--tune-target", default="auto", choices=TARGETS,
                    help="where kernels run: auto (cuda where a usable GPU is present, else cpu), "
                         "cpu or cuda (default: auto)")
    group.addoption("--tune-strategy", default="random", metavar="NAME",
                    help=f"search strategy: {', '.join(STRATEGIES)} (default: random)")
    group.addoption("--tune-trials", type=_positive(int), default=None, metavar="N",
                    help="budget: at most N candidates per kernel, dtype and bucket (the baseline "
                         "is always measured on top); default: the tune_trials ini value, else none")
    group.addoption("--tune-time", type=_positive(float), default=None, metavar="SECONDS",
                    help="budget: stop asking for candidates after SECONDS per kernel, dtype and "
                         "bucket; default: the tune_time ini value, else none")
    group.addoption("--tune-timeout", type=_positive(float), default=10.0, metavar="SECONDS",
                    help="kill a candidate that runs longer than SECONDS (loading, verifying and "
                         "measuring it; compiling is not counted) and record it as timeout (default: 10)")
    group.addoption("--tune-repeats", type=_positive(int), default=None, metavar="N",
                    help="take exactly N samples per trial (a fixed protocol) instead of sampling "
                         "adaptively with early stopping")
    group.addoption("--tune-seed", type=int, default=0, metavar="N",
                    help="seed of the strategies' random choices (default: 0)")
    parser.addini("tune_trials", "default of --tune-trials for this project", default="")
    parser.addini("tune_time", "default of --tune-time for this project", default="")
    group.addoption("--records", default=None, metavar="DIR",
                    help="record store directory, one TinyDB file per device (default: records/ "
                         "under the rootdir)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TUNER] = None
    config.stash[UNAVAILABLE] = {}
    config.stash[SEEN] = {}
    if not config.getoption("tune"):
        return
    strategy = config.getoption("tune_strategy")
    if strategy not in STRATEGIES:
        raise pytest.UsageError(f"--tune-strategy {strategy}: unknown; choose from {', '.join(STRATEGIES)}")
    requested = config.getoption("tune_target")
    target, why_not_cuda = resolve(requested)
    if requested == "cuda":
        ok, why_not_cuda = cuda_status()
        if not ok:
            config.stash[UNAVAILABLE]["cuda"] = f"cuda target unavailable: {why_not_cuda}"
            return
    elif why_not_cuda:
        config.stash[UNAVAILABLE]["cuda"] = f"cuda target not used: {why_not_cuda}"
    records = config.getoption("records")
    records = Path(records) if records else config.rootpath / "records"
    try:
        fp = fingerprint(target)
        store = RecordStore.for_device(records, fp)
    except RecordsError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[TUNER] = Tuner(
        target, fp, store, Workers(target, timeout=config.getoption("tune_timeout")), strategy=strategy,
        budget=Budget(_budget(config, "tune_trials", int), _budget(config, "tune_time", float)),
        seed=config.getoption("tune_seed"), root=config.rootpath,
        settings=MeasureSettings(repeats=config.getoption("tune_repeats")))


def pytest_unconfigure(config: pytest.Config) -> None:
    tuner = config.stash.get(TUNER, None)
    if tuner is not None:
        tuner.workers.close()


def _budget(config: pytest.Config, name: str, kind):
    """The command line's value, else the ini file's, else None (no limit)."""
    value = config.getoption(name)
    if value is None and config.getini(name):
        try:
            value = _positive(kind)(config.getini(name))
        except argparse.ArgumentTypeError as e:
            raise pytest.UsageError(f"ini option {name}: {e}") from None
    return value


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj):
    if not isinstance(obj, Kernel):
        return None
    seen = collector.config.stash[SEEN]
    if seen.get(obj.name) is obj:
        return []  # the same suite imported elsewhere: collected once
    if obj.name in seen:
        raise pytest.UsageError(f"{collector.nodeid}: kernel name {obj.name!r} is declared twice")
    seen[obj.name] = obj
    return Suite.from_parent(collector, name=obj.name, kernel=obj)


class SuiteError(Exception):
    """A suite that cannot be collected; shown without a traceback."""


class Suite(pytest.Collector):
    """One kernel's tuning items on the session's target."""

    def __init__(self, *, kernel: Kernel, **kwargs):
        super().__init__(**kwargs)
        self.kernel = kernel

    def collect(self):
        if not self.config.getoption("tune"):
            return []  # tuning items exist only under --tune
        items = [Unavailable.from_parent(self, name=t, reason=why)
                 for t, why in self.config.stash[UNAVAILABLE].items() if self.kernel.variant(t)]
        tuner = self.config.stash[TUNER]
        if tuner is None:
            return items
        target = tuner.target
        variant = self.kernel.variant(target)
        if variant is None:
            return items + [Unavailable.from_parent(
                self, name=target, reason=f"kernel {self.kernel.name} has no {target} variant")]
        try:
            valid, invalid = variant.space.enumerate()
            for bucket in self.kernel.buckets_for(target):
                for shape in bucket.shapes:
                    variant.baseline(shape)
        except (SpaceError, KernelError) as e:
            raise SuiteError(f"suite {self.nodeid}: {e}") from None
        names = variant.space.names
        for dtype in variant.dtypes:
            for bucket in self.kernel.buckets_for(target):
                task = tuner.task(self.kernel, variant, dtype, bucket)
                prefix = f"{bucket.name}-{dtype}"
                items.append(Trial.from_parent(self, name=f"{prefix}[baseline]", task=task, key=None))
                for keys, ok in ((valid, True), (invalid, False)):
                    items.extend(Trial.from_parent(
                        self, name=f"{prefix}[{'-'.join(f'{n}:{v}' for n, v in zip(names, key))}]",
                        task=task, key=key, valid=ok) for key in keys)
        return items

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, SuiteError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class CandidateFailed(Exception):
    """A candidate whose trial failed: compile error, wrong result, ..."""


class Trial(pytest.Item):
    """One candidate config (``key``; None for the baseline) of one task."""

    def __init__(self, *, task: Task, key: tuple | None, valid: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.task, self.key, self.valid = task, key, valid

    def runtest(self) -> None:
        self.task.run()
        outcome = self.task.baseline if self.key is None else self.task.outcomes.get(self.key)
        if outcome is None:
            pytest.skip(f"not sampled: {self.task.stop_reason}")
        if outcome.status == "pruned_resources":
            pytest.skip(f"pruned_resources: {outcome.error}")
        if outcome.status not in ("ok", "early_stopped"):  # an early-stopped candidate works, slower
            raise CandidateFailed(f"{outcome.status}: {outcome.error}")
        self.user_properties.append(("objective_ms", self.task.estimate(outcome)))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (CandidateFailed, KernelError, RecordsError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{self.name}"


class Unavailable(pytest.Item):
    """Stands for a suite's variant that cannot run here, skipped with the reason."""

    def __init__(self, *, reason: str, **kwargs):
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self) -> None:
        pytest.skip(self.reason)

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{self.name}"


@pytest.hookimpl(tryfirst=True)  # before -k/-m, so every constraint violation is counted
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    invalid = [i for i in items if isinstance(i, Trial) and not i.valid]
    if invalid:
        items[:] = [i for i in items if not (isinstance(i, Trial) and not i.valid)]
        for item in invalid:
            item.task.deselected += 1
        config.hook.pytest_deselected(items=invalid)


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        if isinstance(item, Trial) and item.key is not None:
            item.task.candidates.append(item.key)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    tuner = config.stash.get(TUNER, None)
    if tuner is None:
        return
    ran = [t for t in tuner.tasks if t.done and t.failure is None]
    if not ran:
        return
    fp = tuner.fingerprint
    terminalreporter.section(
        f"tunebench: {fp['target']} {fp.get('name', '')}, records in {tuner.store.path}")
    for line in table([t.summary_row() for t in ran]):
        terminalreporter.write_line(line)
    share = f", {tuner.measure_s / tuner.fixed_s:.0%} of the time {FIXED_REPEATS} fixed repeats " \
            f"would take" if tuner.fixed_s else ""
    terminalreporter.write_line(
        f"strategy {tuner.strategy}, seed {tuner.seed}; builds: {tuner.workers.compiled} compiled, "
        f"{tuner.workers.reused} from the compile cache; measuring new trials took "
        f"{tuner.measure_s:.1f} s{share}")
    terminalreporter.write_line(
        "time: the weighted geometric mean of the median times on the bucket's shapes; early: "
        "candidates stopped once clearly slower than the best so far")
    for line in tuner.noisy:
        terminalreporter.write_line(f"noisy: {line}", yellow=True)
