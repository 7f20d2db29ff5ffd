"""The pytest nodes of tunebench, and the run contexts they find in the config's stash.

A module-level :class:`~tunebench.Kernel` becomes a :class:`Suite` collector. With ``--tune`` it
yields a :class:`Trial` per (dtype, bucket, candidate) plus one for the baseline; without, a
:class:`Gate` per (dtype, bucket). A variant that cannot run here is one :class:`Unavailable`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest
from _pytest._code.code import ReprFileLocation, TerminalRepr

from tunebench import benchmark_json
from tunebench.backends import cuda_status, fingerprint, resolve
from tunebench.buckets import Bucket
from tunebench.device import device_id
from tunebench.cluster import ClusterWorkers
from tunebench.gate import GateRun, GateSettings, gate
from tunebench.kernel import Kernel, KernelError, Variant, from_here, pin_templates, project_root, reached
from tunebench.lookup import project
from tunebench.progress import UNSAMPLED
from tunebench.records import NotWritable, RecordsError, RecordStore, config_key, unmerged
from tunebench.replay import Replay, ReplayError
from tunebench.session import Task, TaskFailed, git_state
from tunebench.space import SpaceError
from tunebench.workers import WorkerError, Workers

TUNER = pytest.StashKey["Tuner | None"]()
GATE = pytest.StashKey["GateRun | bool | None"]()  # None: not made yet, False: cannot run here
GATE_RESULTS = pytest.StashKey[list]()  # (item, GateResult), for the summary
GATE_ITEMS = pytest.StashKey[dict]()  # the gate's items selected, by node id -> whether the run reached it
UNAVAILABLE = pytest.StashKey[dict]()  # target -> (why it cannot run here, whether it was asked for)
SEEN = pytest.StashKey[dict]()  # kernel name -> (Kernel, node id), to collect each suite once
REPLAYED = pytest.StashKey["Kernel | None"]()  # the suite of a replayed Kernel Tuner cache


def _replaying(config: pytest.Config, path: str):
    """``--tune-target replay:PATH``: trials answered from a recorded space. A Kernel Tuner
    cache is a suite of its own (target "replay"); a tunebench records file replays the suites
    that recorded it, on their recorded target. Records go to a fresh folder unless --tune-records."""
    try:
        replay = Replay(path, seed=config.getoption("tune_seed"))
        if replay.suite_of_its_own:
            config.stash[REPLAYED] = replay.kernel()
            target = "replay"
        else:
            target = RecordStore(path).fingerprint["target"]
    except (ReplayError, RecordsError) as e:
        raise pytest.UsageError(f"--tune-target replay:{path}: {e}") from None
    records = config.getoption("tune_records") or tempfile.mkdtemp(prefix="tunebench-replay-")
    return target, replay.fingerprint, _store(config, records, replay.fingerprint), replay


def measuring(config: pytest.Config):
    """(target, fingerprint, record store, workers) for this run, or None (with the reason in
    UNAVAILABLE) when the requested target cannot run here."""
    requested = config.getoption("tune_target")
    if requested.startswith("replay:"):
        return _replaying(config, requested.split(":", 1)[1])
    records = records_folder(config)
    cluster = config.getoption("tune_cluster")
    if cluster:  # the devices are the cluster's: this machine needs no GPU of its own
        workers = ClusterWorkers(cluster, requested, config.rootpath, timeout=config.getoption("tune_timeout"),
                                 cpus_per_device=config.getoption("tune_cluster_cpus"),
                                 retry_failed=config.getoption("tune_retry_failed"))
        return workers.target, workers.fingerprint, _store(config, records, workers.fingerprint), workers
    target, why_not_cuda = resolve(requested)
    if requested == "cuda":
        ok, why_not_cuda = cuda_status()
        if not ok:
            config.stash[UNAVAILABLE]["cuda"] = f"cuda target unavailable: {why_not_cuda}", True
            return None
    elif why_not_cuda:
        config.stash[UNAVAILABLE]["cuda"] = f"cuda target not used: {why_not_cuda}", False
    fp = fingerprint(target)
    store = _store(config, records, fp)
    return target, fp, store, Workers(target, timeout=config.getoption("tune_timeout"), loading=store.loading)


def records_folder(config: pytest.Config) -> Path:
    """--tune-records, else ``records/`` in the project's root (:func:`_project_records`)."""
    given = config.getoption("tune_records")
    return Path(given) if given else _project_records(config)


def _project_records(config: pytest.Config) -> Path:
    """``records/`` in pytest's rootdir where a configuration file or --rootdir placed it, else in
    the root ``best()`` finds from the paths the run was given (see
    :func:`~tunebench.kernel.project_root`): pytest's rootdir is then wherever it was run, and
    ``pytest P/suites --tune`` run beside the project wrote records/ there."""
    root = config.rootpath
    if config.inipath is None and not config.option.rootdir:
        root = project_root(Path(os.path.commonpath(_given(config)))) or root
    return root / "records"


def _given(config: pytest.Config) -> list[Path]:
    """The paths the run was given, resolved (its working directory where none), but for a suite
    file's own link: a suite is of the project it was reached in, as its templates are and the
    folder best() reads for it (see :class:`~tunebench.kernel.Kernel`'s origin); a file linked in
    from another project recorded into that one's records/, and was refused."""
    here = config.invocation_params.dir
    paths = [Path(os.path.abspath(here / arg.split("::")[0])) for arg in config.args] or [here]
    return [reached(p) for p in paths]


def records_apart(config: pytest.Config, kernel: Kernel, suite: Path) -> str | None:
    """Why this run cannot record or gate ``kernel``: a run keeps one records folder, and a tune
    into it is never served where that is neither ``records/`` of the suite's own project nor
    the folder ``best()`` reads for the kernel (:func:`~tunebench.lookup.project`:
    ``$TUNEBENCH_ROOT`` first); a suite of no project (no records/, suites/ or ini file above it)
    is never refused. ``pytest A/suites B/suites --tune`` from their parent, or
    ``pytest .`` at a monorepo's top, without an ini file, wrote one records/ there. A suite
    gating a kernel another project's module declares (an editable library) records with its
    own project's. None where the run was told its folder (--tune-records, --rootdir, -c, a replay)."""
    if (config.getoption("tune_records") or config.option.rootdir or config.option.inifilename
            or config.getoption("tune_target").startswith("replay:")):
        return None
    home = project_root(suite.parent)
    if home is None:  # a suite of no project yet: its first tune's records/ makes the one best() finds
        return None
    read = None
    with contextlib.suppress(LookupError, OSError):  # best() says what is wrong with $TUNEBENCH_ROOT
        read = project(kernel=kernel)[0]
    used = records_folder(config).resolve()
    if used in {f.resolve() for f in (read, home / "records") if f}:
        return None
    own = from_here(home)
    projects = sorted({str(from_here(r)) for r in map(project_root, _given(config)) if r is not None})
    several = f", given the paths of {len(projects)} projects ({', '.join(projects)})" if len(projects) > 1 else ""
    tune = " --tune" if config.getoption("tune") else ""
    return (f"kernel {kernel.name!r} is of the project in {own}, whose records/ best() and the report read, while a "
            f"run keeps one records folder and this one's is {used}{several}: run each project's suites on their own "
            f"(`pytest {from_here(suite)}{tune}`), or name the folder with --tune-records")


def placing_options(config: pytest.Config) -> tuple[tuple[str, ...], Path, Path]:
    """This run's options that place its configuration and records apart from a plain run's
    (``--rootdir``, ``-c``), the records folder they give and the one it uses: what a suggested
    command keeps, for those records (see :func:`~tunebench.kernel.run_options`)."""
    options = []
    if config.option.rootdir:
        options += ["--rootdir", str(from_here(config.rootpath))]
    if config.option.inifilename:
        options += ["-c", str(from_here(config.inipath))]
    return tuple(options), _project_records(config), records_folder(config)


def _store(config: pytest.Config, records, fp: dict) -> RecordStore:
    """This device's store; the gate reads one it cannot write (a read-only checkout), and its
    runs go unrecorded. A tune starts no file beside an orphaned archive (see :func:`orphaned`),
    and neither runs where git holds this device's file unmerged (see :func:`unmerged`; another
    device's is not this run's, as in :func:`~tunebench.records.stores`)."""
    why = unmerged(records).get((Path(records) / f"{device_id(fp)}.json").resolve())
    if why:
        raise RecordsError(why)
    try:
        store = RecordStore.for_device(records, fp)
    except NotWritable:
        if config.getoption("tune"):
            raise
        return RecordStore.for_device(records, fp, read_only=True)
    if store.orphan and config.getoption("tune"):  # a file started beside it would read it again
        raise RecordsError(f"{store.orphan}; a tune starts no records file beside it")
    return store


def _gate_run(config: pytest.Config) -> GateRun | None:
    """The gate's context, made when the first suite is collected without --tune (False: the
    target cannot run here)."""
    if config.stash[GATE] is None:
        try:
            found = measuring(config)
        except (RecordsError, WorkerError) as e:  # one collection error for the run; the other suites collect nothing
            config.stash[GATE] = False
            raise SuiteError(str(e)) from None
        config.stash[GATE] = found and GateRun(*found, *git_state(config.rootpath, found[2].path.parent))
        if found:
            pin_templates(True)  # released when the run ends (see plugin.pytest_unconfigure)
    return config.stash[GATE] or None



class ItemFailed(Exception):
    """A failed candidate or gate: shown as its message, without a traceback."""


class Message(TerminalRepr):
    """A failure shown as its message, without a traceback. The short test summary repeats only
    its first line: pytest repeats a plain-string failure whole there on CI (``$CI`` set) and
    with ``-vv``, which printed every gate verdict twice."""

    def __init__(self, text: str, where: tuple[str, int | None]):
        """``where``: the file and line ``--tb=line`` names (the suite's declaration)."""
        self.text = text
        self.reprcrash = ReprFileLocation(where[0], where[1] or 0, text.split("\n", 1)[0])

    def toterminal(self, tw) -> None:
        tw.line(self.text)


class Item(pytest.Item):
    """A tunebench item: a failure is shown as its message; a skip is its suite's (see the plugin)."""

    @classmethod
    def from_parent(cls, parent, *, name: str, **kwargs):
        """Its node id given as text, as pytest parses one back: pytest 9 keeps an id's ``[...]``
        apart from its names, and an id made of a name holding it matched no id cached by --lf,
        --ff or --sw."""
        return super().from_parent(parent, name=name, nodeid=f"{parent.nodeid}::{name}", **kwargs)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (ItemFailed, KernelError, RecordsError, WorkerError)):
            return Message(str(excinfo.value), self.getparent(Suite).where())
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        """The suite file and the kernel's declaration line there (0-based, else the first): a skip
        mark (``Kernel(marks=[pytest.mark.skip])``) is reported at it, and pytest asserts a line."""
        line = self.getparent(Suite).where()[1]
        return self.path, line - 1 if line else 0, f"{self.parent.name}::{self.name}"


class SuiteError(Exception):
    """A suite that cannot be collected; shown without a traceback."""


class Suite(pytest.Collector):
    """One kernel's tuning items on the session's target."""

    def __init__(self, *, kernel: Kernel, refused: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.kernel = kernel
        #: Why the suite is not collected (its name taken by another), said by its collection alone.
        self.refused = refused
        #: Whether the kernel is declared in this file. Resolved once: every item's report asks
        #: :meth:`where`, and a resolve per call cost 45 us each (0.5 s of the shipped suites' 12,000 items).
        self._declared_here = kernel.declared_in == Path(self.path).resolve()

    def where(self) -> tuple[str, int | None]:
        """The suite file, and the kernel's declaration line where it is declared there: what a
        skip or a failure of its items names, rather than a line of tunebench."""
        return str(self.path), self.kernel.declared_line if self._declared_here else None

    def _no_variant(self, target: str) -> str:
        """Why this kernel has nothing to run on ``target``: a replayed Kernel Tuner cache's one
        variant is its own suite's, which a user read as a variant their suite lacked."""
        said = f"kernel {self.kernel.name} has no {target} variant"
        replayed = self.config.stash[REPLAYED]
        if target == "replay" and replayed is not None:
            said += (f": a Kernel Tuner cache replays as a suite of its own (kernel {replayed.name}), not through "
                     f"this kernel's suites")
        return said

    def collect(self):
        if self.refused:
            raise SuiteError(f"suite {self.nodeid}: {self.refused}")
        if hasattr(self.config, "workerinput"):  # a pytest-xdist worker, one of several measuring at once
            raise SuiteError(f"suite {self.nodeid}: pytest-xdist (-n) runs suites in several processes at once, "
                             f"whose timings disturb each other: run tunebench suites without -n (-n 0 where addopts "
                             f"sets it, or -p no:xdist where it does not; run the other tests with -n apart); several "
                             f"devices measure at once with --tune-cluster")
        apart = records_apart(self.config, self.kernel, Path(self.path))
        if apart:  # before any of its trials is measured, or the gate reads another project's records
            raise SuiteError(f"suite {self.nodeid}: {apart}")
        for mark in self.kernel.marks:
            self.add_marker(mark)
        tuning = self.config.getoption("tune")
        run = self.config.stash[TUNER] if tuning else _gate_run(self.config)
        # a target of no variant here is said too: --tune-target cuda on CPU-only suites collected nothing, unsaid
        items = [Unavailable.from_parent(self, name=t, reason=why, asked=asked) if self.kernel.variant(t) else
                 Unavailable.from_parent(self, name=t, reason=self._no_variant(t))
                 for t, (why, asked) in self.config.stash[UNAVAILABLE].items() if asked or self.kernel.variant(t)]
        try:  # every target's declaration, though this machine runs one: a typo fails here, not on the GPU box
            for name, declared in self.kernel.variants.items():
                self.kernel.check(declared, name)
        except (SpaceError, KernelError) as e:
            raise SuiteError(f"suite {self.nodeid}: {e}") from None
        if run is None:
            return items
        target = run.target
        variant = self.kernel.variant(target)
        if variant is None:
            return items + [Unavailable.from_parent(self, name=target, reason=self._no_variant(target))]
        try:
            variant.check_folders()
            if not tuning:
                return items + [Gate.from_parent(self, name=f"{b.name}-{d}[gate]", run=run, variant=variant,
                                                 dtype=d, bucket=b)
                                for d in variant.dtypes for b in self.kernel.buckets_for(target)]
            space, buckets = variant.space, self.kernel.buckets_for(target)
            valid, invalid = space.enumerate()
            split = {b.name: _split(space, valid, invalid, b, buckets.dims) for b in buckets}
        except (SpaceError, KernelError) as e:
            raise SuiteError(f"suite {self.nodeid}: {e}") from None
        replay = run.workers if isinstance(run.workers, Replay) and target != "replay" else None
        for dtype in variant.dtypes:
            for bucket in buckets:
                prefix = f"{bucket.name}-{dtype}"
                parts = split[bucket.name]
                if replay is not None:  # a records file replayed: its recorded configs are the candidates
                    recorded = replay.recorded(self.kernel.name, dtype, bucket.name)
                    if recorded is None:
                        items.append(Unavailable.from_parent(self, name=f"{prefix}[replay]", reason=(
                            f"{self.kernel.name}[{prefix}] is not in the recorded space of {replay.path.name}")))
                        continue
                    held = {k for k in parts[0] if config_key(space.config(k)) in recorded}
                    parts = ([k for k in parts[0] if k in held], [k for k in parts[0] if k not in held] + parts[1])
                task = run.task(self.kernel, variant, dtype, bucket)
                task.offered = len(parts[0])
                items.append(Trial.from_parent(self, name=f"{prefix}[baseline]", task=task, key=None))
                for keys, ok in zip(parts, (True, False)):
                    items.extend(Trial.from_parent(
                        self, name=f"{prefix}[{'-'.join(f'{n}:{v}' for n, v in zip(space.names, key))}]",
                        task=task, key=key, valid=ok, order=order) for order, key in enumerate(keys))
        return items

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, SuiteError):
            return Message(str(excinfo.value), self.where())
        return super().repr_failure(excinfo)


def _split(space, valid: list[tuple], invalid: list[tuple], bucket: Bucket, dims) -> tuple[list, list]:
    """(valid, invalid) keys in one bucket: a shaped constraint must hold on every representative
    shape for a candidate to be tried there."""
    if not space.shaped:
        return valid, invalid
    fits = space.fitting(valid, bucket, dims)
    misfits = set(valid) - set(fits)
    return fits, [k for k in valid if k in misfits] + invalid


class Trial(Item):
    """One candidate config (``key``; None for the baseline) of one task, ``order``-th in its
    space's enumeration."""

    def __init__(self, *, task: Task, key: tuple | None, valid: bool = True, order: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.task, self.key, self.valid, self.order = task, key, valid, order

    def runtest(self) -> None:
        try:
            self.task.run(asker=self.nodeid)
        except TaskFailed as e:
            pytest.skip(str(e))
        tuner = self.task.tuner
        # the item that ran the task, the baseline's in a plain run, fails: one whose baseline is deselected
        # (-k, --lf, a node id) or was cut short (pytest-timeout) exited 0 with the tune stopped
        if self.task.busy and self.task.busy_by == self.nodeid:  # the run fails once for a busy machine, not per task
            if tuner.busy_reported in (None, self.nodeid):  # its rerun fails again
                tuner.busy_reported = self.nodeid
                raise ItemFailed(self.task.busy)
            pytest.skip(f"{self.task.busy} (the run failed once for a busy machine, above)")  # this task's own
        outcome = self.task.baseline if self.key is None else self.task.outcome(self.key)
        if outcome is None:
            self.user_properties.append(UNSAMPLED)
            pytest.skip(f"not sampled: {self.task.stop_reason}")
        if outcome.status == "pruned_resources":
            pytest.skip(outcome.failure)  # on which of the bucket's shapes
        if outcome.status not in ("ok", "early_stopped"):  # an early-stopped candidate works, slower
            raise ItemFailed(outcome.failure)  # on which of the bucket's shapes
        self.user_properties.append(("objective_ms", self.task.estimate(outcome)))



def strict(config: pytest.Config) -> bool:
    """Whether a gate task that cannot be measured fails (--gate-strict, gate_strict), or is skipped."""
    given = config.getoption("gate_strict")
    return bool(config.getini("gate_strict") if given is None else given)


def _not_measured(config: pytest.Config, reason: str) -> None:
    if strict(config):
        raise ItemFailed(f"not gated (--gate-strict): {reason}")
    pytest.skip(reason)


def gate_ini(config: pytest.Config) -> dict:
    """The gate settings of the ini file, checked: a bad value is one usage error naming it."""
    values = {}
    for option, field, kind, form in (("gate_threshold", "threshold", float, "a fraction, as 0.10 for 10 %"),
                                      ("gate_processes", "processes", int, "a count, as 3"),
                                      ("gate_max_processes", "max_processes", int, "a count, as 7")):
        try:
            values[field] = kind(config.getini(option))
            GateSettings(**values)
        except ValueError as e:
            raise pytest.UsageError(f"ini option {option} = {config.getini(option)}: {e} ({form})") from None
    try:  # read when a task cannot be measured: a bad value was a traceback then, and unseen otherwise
        strict(config)
    except (ValueError, pytest.UsageError) as e:
        raise pytest.UsageError(f"ini option gate_strict: {e} (true or false)") from None
    return values


def gate_records(config: pytest.Config) -> None:
    """The --tune-records folder the gate is to read, checked: a typo skipped every task as never
    tuned (a tune creates the folder)."""
    given = config.getoption("tune_records")
    if given and not Path(given).is_dir():
        hint = ": pass its folder" if Path(given).is_file() else ""
        raise pytest.UsageError(f"--tune-records {given}: not a folder{hint}; the gate reads the records of this "
                                f"device there (`--tune` writes them)")


class Gate(Item):
    """The gate of one task: its recorded best re-measured against the baseline and the record."""

    def __init__(self, *, run: GateRun, variant: Variant, dtype: str, bucket: Bucket, **kwargs):
        super().__init__(**kwargs)
        self.run, self.variant, self.dtype, self.bucket = run, variant, dtype, bucket

    def settings(self) -> GateSettings:
        """The ini file's gate settings, overridden by the closest tunebench_gate marker."""
        mark = self.get_closest_marker("tunebench_gate")
        if mark and mark.args:  # tunebench_gate(0.5) was read as no setting at all: the default threshold gated
            pytest.fail(f"tunebench_gate marker of {self.parent.nodeid}: {', '.join(map(repr, mark.args))} given by "
                        f"position; name each setting (threshold=0.1, processes=3, max_processes=7, budget_s=1.0)",
                        pytrace=False)
        try:
            return GateSettings(**{**gate_ini(self.config), **(mark.kwargs if mark else {})})
        except (TypeError, ValueError) as e:
            problem = e  # failed outside the handler: its message alone, not the chain of errors
        pytest.fail(f"tunebench_gate marker of {self.parent.nodeid}: {problem}", pytrace=False)

    def runtest(self) -> None:
        kernel = self.parent.kernel
        settings = self.settings()
        result = gate(self.run.store, self.run.workers, kernel, self.variant, self.run.target, self.dtype,
                      self.bucket, settings, self.run.commit, busy=self.run.busy, dirty=self.run.dirty)
        self.run.busy = any(c.disturbed and len(c.disturbed) == len(c.objectives)
                            for c in result.comparisons.values())
        results = self.config.stash[GATE_RESULTS]  # a rerun (pytest-rerunfailures) replaces its attempt before
        results[:] = [(item, r) for item, r in results if item is not self] + [(self, result)]
        for shape, comp in result.comparisons.items():
            # every verdict is of the best's time: its benchmark carries them with the ratio each judged (the
            # median of the per-process ratios), which the pooled samples' medians are not
            verdicts = [{**v.doc(), "ratio": v.median} for v in result.verdicts if v.shape == shape]
            for label in comp.labels:  # every sample of every process, under every placement
                values = [ms for process in comp.samples for by_arm in process.values() for ms in by_arm[label]]
                benchmark_json.feed(self.config, f"{self.nodeid}::{label}@{'x'.join(map(str, shape))}",
                                    group=f"{kernel.name}[{self.bucket.name}-{self.dtype}]", samples_ms=values,
                                    extra_info={"config": result.configs[shape][label], "shape": list(shape),
                                                "device": self.run.store.device, "outcome": result.outcome,
                                                "process_ms": [o[label] for o in comp.objectives],
                                                **({"verdicts": verdicts} if label == "best" else {})})
        report = [v.line() for v in result.verdicts] + result.notes
        self.user_properties[:] = [p for p in self.user_properties if p[0] != "tunebench_gate"]  # a rerun's: its own
        self.user_properties.append(("tunebench_gate", "\n".join(report)))  # a CI's JUnit report shows a pass's too
        if result.outcome == "skip":  # and a skip's: what was measured through the noise
            _not_measured(self.config, result.reason)
        if result.outcome == "fail":  # a regression's verdicts, else why nothing could be compared
            failed = any(v.outcome == "fail" for v in result.verdicts)
            raise ItemFailed("\n".join([result.headline(), *(report if failed else result.notes)]))
        self.add_report_section("call", "tunebench gate", "\n".join(report))



class Unavailable(Item):
    """Stands for a suite's variant that cannot run here, skipped with the reason; where its
    target was asked for by name (--tune-target cuda), failed by a tune, which would tune
    nothing (a GPU machine whose PyCUDA is broken must not pass), and by a --gate-strict gate."""

    def __init__(self, *, reason: str, asked: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.reason, self.asked = reason, asked

    def runtest(self) -> None:
        if self.asked and self.config.getoption("tune"):
            raise ItemFailed(f"not tuned: {self.reason}")
        if self.asked:
            _not_measured(self.config, self.reason)
        pytest.skip(self.reason)
