"""The pytest plugin (entry point ``pytest11``): options, suite collection, deselection, summary.

Each module-level :class:`~tunebench.Kernel` in a collected test module is a suite. With
``--tune`` it yields, per (dtype, bucket), one item for the baseline and one per candidate
config; candidates that violate a constraint are deselected. The first item of a task to run
tunes the whole task in the strategy's order (see :mod:`tunebench.session`); every item then
reports its own candidate: passed, failed with its status, or skipped when not sampled.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import pytest

from tunebench.backends import TARGETS, fingerprint, resolve
from tunebench.backends.cache import retry_refusals
from tunebench.backends.cpu import SHORT_CALL_MS, call_overhead_us
from tunebench.backends.cpuinfo import quota_note
from tunebench.builds import Ahead
from tunebench.builds import counts as build_counts
from tunebench.cli import positive
from tunebench.cluster import ClusterWorkers
from tunebench.replay import Replay
from tunebench.device import describe, device_id
from tunebench.gate import devices
from tunebench.items import (GATE, GATE_ITEMS, GATE_RESULTS, REPLAYED, SEEN, TUNER, UNAVAILABLE, Gate, Item, Message,
                             Suite, Trial, gate_ini, gate_records, measuring, placing_options, records_folder,
                             strict)
from tunebench.buckets import BucketError
from tunebench.kernel import (Kernel, KernelError, KernelTableWarning, declared_twice, pin_templates, run_options,
                              table_entries)
from tunebench.measure import MeasureSettings
from tunebench.progress import SUMMARY, Progress, report_teststatus
from tunebench.records import RecordsError, config_text
from tunebench.space import SpaceError
from tunebench.session import FIXED_REPEATS, NOISY_SPREAD, Budget, Tuner, refused_checkout
from tunebench.strategies import DEFAULT as DEFAULT_STRATEGY
from tunebench.strategies import MODULES as STRATEGIES
from tunebench.strategies import options as strategy_options
from tunebench.summary import some, spent, table
from tunebench.user_code import raised
from tunebench.workers import WorkerError


DECLARATION_ERRORS = (BucketError, SpaceError, KernelError)


def _target(text: str) -> str:
    if text in TARGETS or (text.startswith("replay:") and len(text) > len("replay:")):
        return text
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(TARGETS)} or replay:PATH, got {text!r}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tunebench", "tunebench: kernel auto-tuning")
    group.addoption("--tune", action="store_true",
                    help="tune every suite: measure candidate configs and record every trial")
    group.addoption("--tune-target", default="auto", type=_target, metavar="{auto,cpu,cuda,replay:PATH}",
                    help="where kernels run: auto (cuda where a usable GPU is present, else cpu), "
                         "cpu, cuda, or replay:PATH (answers from a Kernel Tuner cache or a "
                         "tunebench records file instead of hardware) (default: auto)")
    group.addoption("--tune-strategy", default=DEFAULT_STRATEGY, metavar="NAME",
                    help=f"search strategy: {', '.join(STRATEGIES)} (default: {DEFAULT_STRATEGY})")
    group.addoption("--tune-strategy-option", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting of the search strategy, as its module documents them (population=20 for "
                         "genetic, initial=8 for hybrid); repeat for several")
    group.addoption("--tune-trials", type=positive(int), default=None, metavar="N",
                    help="budget: at most N candidates per kernel, dtype and bucket (the baseline "
                         "is always measured on top); default: the tune_trials and tune_time ini values, unless "
                         "--tune-time is given, else none")
    group.addoption("--tune-time", type=positive(float), default=None, metavar="SECONDS",
                    help="budget: stop asking for candidates once a kernel, dtype and bucket has taken "
                         "SECONDS of wall time, builds included (the final round apart); default: the "
                         "tune_time and tune_trials ini values, unless --tune-trials is given, else none")
    group.addoption("--tune-timeout", type=positive(float), default=10.0, metavar="SECONDS",
                    help="kill a candidate one of whose calls, or the loading of its build, runs longer than "
                         "SECONDS, however many calls a measurement makes (compiling is not counted), and record "
                         "it as timeout (default: 10)")
    group.addoption("--tune-repeats", type=positive(int), default=None, metavar="N",
                    help="take exactly N samples per trial (a fixed protocol) instead of sampling "
                         "adaptively with early stopping")
    group.addoption("--tune-seed", type=int, default=0, metavar="N",
                    help="seed of the strategies' random choices (default: 0)")
    group.addoption("--tune-builders", type=positive(int), default=None, metavar="N",
                    help="compiles at once on this host, of the candidates the strategy asks next "
                         "(default: one per core)")
    group.addoption("--tune-cluster", default=None, metavar="ADDRESS",
                    help="measure on every device of a Ray cluster: ray://HOST:PORT, or auto for the "
                         "cluster this machine is part of (pip install 'ray>=2.11')")
    group.addoption("--tune-cluster-cpus", type=positive(int), default=1, metavar="N",
                    help="cores of one device of the cpu target on a cluster (default: 1)")
    group.addoption("--tune-retry-failed", action="store_true",
                    help="measure recorded trials that failed (compile error, crash, wrong result, timeout) "
                         "again instead of reusing them")
    group.addoption("--tune-fresh", action="store_true",
                    help="reuse nothing recorded: measure every trial and the final round anew")
    parser.addini("gate_threshold", "gate: a slowdown beyond this fraction is a regression (default 0.10)",
                  type=_number(float), default="0.10")
    parser.addini("gate_processes", "gate: fresh processes each comparison is measured in at first (default 3)",
                  type=_number(int), default="3")
    parser.addini("gate_max_processes", "gate: the most processes for an ambiguous comparison (default 7)",
                  type=_number(int), default="7")
    group.addoption("--gate-strict", action="store_true", default=None,
                    help="the gate fails, instead of skipping, a task it cannot measure: nothing recorded for "
                         "this device, the target unavailable, the machine too busy (for a required CI check)")
    parser.addini("gate_strict", "default of --gate-strict for this project", type="bool", default=False)
    parser.addini("tune_trials", "default of --tune-trials for this project", type=_number(int), default="")
    parser.addini("tune_time", "default of --tune-time for this project", type=_number(float), default="")
    group.addoption("--tune-records", default=None, metavar="DIR",
                    help="record store directory, one TinyDB file per device (default: records/ "
                         "under the rootdir, or where no ini file sets it, the project's root as best() finds it)")


#: The cgroup's CPU quota as the run began (:func:`quota_note`): before the CPU target sets
#: OMP_NUM_THREADS to what it runs, which the note would read as the user's.
QUOTA = pytest.StashKey[str | None]()


#: This run's --rootdir and -c, and the records folder they give (see :func:`placing_options`).
PLACED = pytest.StashKey[tuple]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[QUOTA] = quota_note()
    config.stash[PLACED] = placing_options(config)
    run_options(config.stash[PLACED], True)
    config.addinivalue_line(
        "markers", "tunebench_gate(threshold=0.1, processes=3, max_processes=7, budget_s=1.0): gate settings for the "
                   "suites of a module (pytestmark) or of one kernel (Kernel(marks=[...]))")
    config.stash[TUNER] = None
    config.stash[GATE] = None
    config.stash[GATE_RESULTS] = []
    config.stash[UNAVAILABLE] = {}
    config.stash[SEEN] = {}
    config.stash[REPLAYED] = None
    retry_refusals(False)  # this run's start: a tune before it in this process (an IDE's, pytester's) set its own
    if not config.getoption("tune"):
        gate_ini(config)  # a bad setting is one line now, not a traceback per gate item
        gate_records(config)
    if config.getoption("tune"):
        strategy = config.getoption("tune_strategy")
        if strategy not in STRATEGIES:
            raise pytest.UsageError(f"--tune-strategy {strategy}: unknown; choose from {', '.join(STRATEGIES)}")
        try:
            options = strategy_options(strategy, config.getoption("tune_strategy_option"))
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        try:
            found = measuring(config)
        except (RecordsError, WorkerError) as e:
            raise pytest.UsageError(str(e)) from None
        if found is not None:
            target, fp, store, workers = found
            retry_refusals(config.getoption("tune_retry_failed"))
            config.stash[TUNER] = Tuner(
                target, fp, store, workers, strategy=strategy,
                budget=_budget(config),
                seed=config.getoption("tune_seed"), root=config.rootpath,
                settings=MeasureSettings(repeats=config.getoption("tune_repeats")),
                retry_failed=config.getoption("tune_retry_failed"), fresh=config.getoption("tune_fresh"),
                strategy_options=options,
                ahead=None if isinstance(workers, (Replay, ClusterWorkers)) else Ahead(
                    target, fp, config.getoption("tune_builders")))
            config.stash[TUNER].progress = Progress(config)
            pin_templates(True)  # one text of each template for the whole tune


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    return report_teststatus(report, config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """A skip of a tunebench item is the suite's, not the line of tunebench that raised it: ``-rs``
    and JUnit name the suite file (and fold its skips by reason)."""
    report = yield
    if report.skipped and isinstance(item, Item) and isinstance(report.longrepr, tuple):
        report.longrepr = (*item.getparent(Suite).where(), report.longrepr[2])
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem) -> None:
    """A gate item the run reached, whatever becomes of it (a skip mark, an error before its verdict)."""
    gates = item.config.stash.get(GATE_ITEMS, {})
    if item.nodeid in gates:
        gates[item.nodeid] = True


def pytest_unconfigure(config: pytest.Config) -> None:
    run_options(config.stash.get(PLACED, None), False)
    for run in (config.stash.get(TUNER, None), config.stash.get(GATE, None)):
        if run:
            pin_templates(False)
            run.workers.close()
            try:
                run.store.compact()  # the records file holds every trial once the run is over
            except RecordsError as e:  # a full disk: the journal keeps them, and the next run folds them
                print(f"tunebench: {e}", file=sys.stderr)
    tuner = config.stash.get(TUNER, None)
    if tuner and tuner.ahead:
        tuner.ahead.close()


def _number(kind):
    """An ini option's type for a number: pytest's own TOML table (``[tool.pytest]``) holds it
    unquoted (``tune_trials = 30``), which an option of text refuses; pytest before 9.2 takes
    no other type, and its value is text (read as a number where it is used)."""
    return kind | str if pytest.version_tuple[:2] >= (9, 2) else None


def _budget(config: pytest.Config) -> Budget:
    """The command line's budget, else the ini file's: a budget given on the command line replaces
    the ini's whole (``--tune-time 600`` stopped after the project's ``tune_trials = 30``)."""
    ini = {}
    for name, kind in (("tune_trials", int), ("tune_time", float)):
        try:
            ini[name] = positive(kind)(config.getini(name)) if config.getini(name) else None
        except argparse.ArgumentTypeError as e:
            raise pytest.UsageError(f"ini option {name}: {e}") from None
    given = {name: config.getoption(name) for name in ini}
    chosen = given if any(v is not None for v in given.values()) else ini
    return Budget(chosen["tune_trials"], chosen["tune_time"])


class SuiteModule(pytest.Module):
    """A test module whose import fails on a declaration error (overlapping buckets, an invalid
    space, a kernel without output) reports that error in one line, not a traceback, ending with
    the line of the suite's code that raised it: in a generated table, which entry is at fault."""

    def repr_failure(self, excinfo):  # a Collector's takes no style
        cause = excinfo.value.__cause__ if excinfo.errisinstance(self.CollectError) else excinfo.value
        if isinstance(cause, DECLARATION_ERRORS):
            return Message(f"{self.path}: {raised(cause)}", (str(self.path), None))
        return super().repr_failure(excinfo)


def pytest_pycollect_makemodule(module_path, parent):
    return SuiteModule.from_parent(parent, path=module_path)


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj):
    """A module-level Kernel is a suite, and so is each of a table of them (a generator's
    ``KERNELS = {op: Kernel(...) for op in OPS}`` collected nothing, unsaid). A table of them in a
    table holding other values is warned of, at collection alone (a lookup per launch stays quiet)."""
    entries = table_entries(name, obj, lambda said: collector.warn(KernelTableWarning(said)))
    return [suite for entry in entries for suite in _suite(collector, *entry)] if entries else None


def _suite(collector: pytest.Collector, entry: str, obj: Kernel) -> list[Suite]:
    """The kernel's suite, or, where another suite has its name, one that fails alone: raised
    here, the error failed the whole module, every other kernel of a generated table with it."""
    seen = collector.config.stash[SEEN]
    first, where = seen.get(obj.name, (None, None))
    if first is obj:
        return []  # the same suite imported elsewhere: collected once
    if first is not None:  # named by its entry: the node id of the suite kept is not its own (-k, --lf)
        return [Suite.from_parent(collector, name=entry, kernel=obj, refused=declared_twice(obj.name, where))]
    seen[obj.name] = obj, collector.nodeid + (f" ({entry})" if entry != obj.name else "")
    obj.collected_from = Path(collector.path)
    obj.reached_from(collector.path)
    return [Suite.from_parent(collector, name=obj.name, kernel=obj)]


@pytest.hookimpl(tryfirst=True)  # before -k/-m, so every constraint violation is counted
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                   items: list[pytest.Item]) -> None:
    replayed = config.stash[REPLAYED]
    if replayed is not None:  # a replayed Kernel Tuner cache has no test module: a suite of the session
        items[:0] = Suite.from_parent(session, name=replayed.name, kernel=replayed).collect()
    invalid = [i for i in items if isinstance(i, Trial) and not i.valid]
    if invalid:
        items[:] = [i for i in items if not (isinstance(i, Trial) and not i.valid)]
        for item in invalid:
            item.task.deselected += 1
        config.hook.pytest_deselected(items=invalid)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Each task's selected candidates, in its space's order whatever order the items run in: a
    plugin shuffling them (pytest-randomly) made the same --tune-seed ask other candidates. And
    before anything is measured here, once, the cgroup's CPU quota where it cuts the CPU target's
    threads or throttles them (see :func:`quota_note`)."""
    selected = [i for i in session.items if isinstance(i, Trial) and i.key is not None]
    session.config.stash[GATE_ITEMS] = {i.nodeid: False for i in session.items if isinstance(i, Gate)}
    for item in sorted(selected, key=lambda i: i.order):
        item.task.candidates.append(item.key)
    run = session.config.stash.get(TUNER, None) or session.config.stash.get(GATE, None)
    local = run and run.target == "cpu" and not isinstance(run.workers, (Replay, ClusterWorkers))
    notes = (session.config.stash[QUOTA] if local else None,
             refused_checkout(session.config.rootpath) if run and not run.commit else None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for note in filter(None, notes if reporter else ()):
        reporter.write_line(f"tunebench: {note}", yellow=True)


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook: absent under -p no:benchmark
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """The device, also where pytest-benchmark asks before the gate's run exists (``--benchmark-
    compare`` loads at configure time: without it, every compare on the same machine warned that
    the machine differs)."""
    run = config.stash.get(TUNER, None) or config.stash.get(GATE, None)
    if run:
        machine_info["tunebench"] = {"device": run.store.device, "fingerprint": run.fingerprint}
        return
    target = config.getoption("tune_target")
    records = records_folder(config)
    if target.startswith("replay:") or config.getoption("tune_cluster") or not Path(records).is_dir():
        return  # not a project tunebench gates here (no records), or a device found only later
    try:
        fp = fingerprint(resolve(target)[0])
    except (RuntimeError, OSError):  # the cuda target asked for, unusable here: its suites say so later
        return
    machine_info["tunebench"] = {"device": device_id(fp), "fingerprint": fp}


def _were(n: int) -> str:
    return "was" if n == 1 else "were"


def _them(n: int) -> str:
    return "it" if n == 1 else "them"


def _leftover(terminalreporter, run) -> None:
    """Trials a run left in the journal, killed or unable to write the file (a full disk), folded
    by this one: where they were measured at another commit, they now sit in this checkout's
    records, not in that commit's."""
    found = run.store.leftover
    if not found:
        return
    commits = sorted({t["git_commit"][:12] for t in found if t.get("git_commit")})
    elsewhere = [c for c in commits if run.commit is None or not run.commit.startswith(c)]
    why = f"could not fold them ({run.store.unfolded})" if run.store.unfolded else \
        "did not fold them (killed, or unable to write the records)"
    terminalreporter.write_line(
        f"records: {len(found)} trials of an earlier run that {why} were in {run.store.journal} "
        f"and are now folded into {run.store.path}; "
        + (f"measured at commit {', '.join(commits)}" if commits else "measured outside a git checkout")
        + (f", while this checkout is at {run.commit[:12]}: commit them where they belong" if elsewhere and run.commit
           else ""), yellow=True)


def _records_of(store) -> str:
    """Where this device's records are, or that it has none yet: a path that does not exist
    sent readers looking for a file."""
    if store.path.exists():
        return f"records in {store.path}"
    return f"no records file for this device in {store.path.parent} yet"


#: What the tune summary's columns mean, below it.
LEGEND = (
    "best ms, baseline ms: the weighted geometric mean of the median times on the bucket's shapes, from the "
    "final round (fresh processes, every buffer placement; * where none confirmed it)",
    "configs: the candidates this run weighed (the heuristic's own config among them where the search asked it: "
    "measured once, as the baseline)",
    "failed, early: how many candidates failed, or were stopped once clearly slower than the best so far",
    "new: trials measured now, one per config and shape; desel: candidates deselected for breaking a constraint (replaying a records file: or not in it)",
)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    config.stash[SUMMARY] = True
    for run in (config.stash.get(TUNER, None), config.stash.get(GATE, None)):
        if run:
            _leftover(terminalreporter, run)
    results = config.stash.get(GATE_RESULTS, [])
    if results:
        run = config.stash[GATE]
        terminalreporter.section(f"tunebench gate: {run.store.device}, {_records_of(run.store)}")
        if any(result.reason.startswith("nothing recorded") for _, result in results):
            for store in [run.store, *(s for s in devices(run.store) if s.path != run.store.path)]:
                here = "this machine" if store is run.store else "recorded"
                terminalreporter.write_line(f"{here}: {store.device}: {describe(store.fingerprint or {})}")
        for item, result in results:  # a failure's headline too: the verdict in this one screen
            shown = "fail" if result.outcome == "skip" and strict(config) else result.outcome  # as pytest says
            said = result.headline() if result.outcome == "fail" else result.reason
            reason = f"  {' | '.join(said.splitlines())}" if said else ""  # a compiler's lines: one task, one line
            if result.outcome == "pass" and not result.comparisons:  # not a measured pass: say so
                reason = "  nothing to measure (see -rA)"
            terminalreporter.write_line(f"{shown.upper():5} {item.parent.name}::{item.name}{reason}",
                                        red=shown == "fail", green=shown == "pass")
        if run.store.orphan:  # nothing recorded here, for every task: said once
            terminalreporter.write_line(f"records: {run.store.orphan}", yellow=True)
        if run.store.read_only or run.store.unwritten:
            why = run.store.unwritten or f"{run.store.path.parent} cannot be written"
            terminalreporter.write_line(f"records: {why}: this gate run is not kept in the records' history",
                                        yellow=True)
        gated = [result for _, result in results if result.outcome != "skip"]
        idle = sum(result.outcome == "pass" and not result.comparisons for result in gated)  # nothing to measure
        reached = config.stash.get(GATE_ITEMS, {}).values()
        unreached = sum(not r for r in reached)  # -x, --maxfail: "gated 3 of 3 tasks" read as the whole suite
        unmeasured = max(len(results), len(reached) - unreached) - len(gated)  # skipped, or errored before a verdict
        if unmeasured or unreached:
            # each count named: "gated 0 of 2 tasks (1 more passed ...); the others were ..." left "more" and
            # "the others" to be worked out
            said = [f"{idle} passed with nothing to measure"] if idle else []
            if unmeasured:
                said.append(f"{unmeasured} {_were(unmeasured)} not measured"
                            + (f", and --gate-strict fails {_them(unmeasured)}" if strict(config) else
                               f" (--gate-strict, or gate_strict = true, fails {_them(unmeasured)} instead)"))
            if unreached:
                said.append(f"{unreached} {_were(unreached)} not reached: the run stopped first (-x, --maxfail, an "
                            f"interrupt)")
            terminalreporter.write_line(
                f"gated {len(gated) - idle} of {len(gated) + unmeasured + unreached} tasks: {'; '.join(said)}",
                yellow=True)
    tuner = config.stash.get(TUNER, None)
    if tuner is None:
        return
    ran = [t for t in tuner.tasks if t.done and t.failure is None]
    # Ctrl-C: in a task's search, or while it waited for another run's lock on it
    stopped = [t for t in tuner.tasks if (t.began is not None or t.waiting) and not t.ended and t.failure is None]
    if not ran and not stopped:
        return
    fp = tuner.fingerprint
    terminalreporter.section(
        f"tunebench: {fp['target']} {fp.get('name', '')}, records in {tuner.store.path}")
    # the run's own command resumes it, with its budget and strategy (not --tune-fresh: it would measure anew),
    # by the program that ran it: `python -m pytest` where no pytest of this environment may be on PATH
    program = "pytest" if Path(sys.argv[0]).name in ("pytest", "py.test") else f"{shlex.quote(sys.executable)} -m pytest"
    again = " ".join([program, *(shlex.quote(os.fspath(a)) for a in config.invocation_params.args
                                 if a != "--tune-fresh")])
    for task in stopped:
        if task.waiting:  # nothing of it measured here: the run holding its lock goes on recording
            terminalreporter.write_line(
                f"{task.label}: interrupted while waiting for another run tuning it (which holds its lock), before "
                f"this run measured any of its trials; what that run records is kept and `{again}` resumes from it",
                yellow=True)
            continue
        where = (f"its heuristic's trials, after {task.heuristic_kept()} of its {len(task.bucket.shapes)} shapes"
                 if task.baseline is None else f"its {'final round' if task.done else 'search'}, after "
                 f"{len(task.outcomes)} configs and the heuristic")
        kept = (f"their trials are kept and `{again}` resumes from them" if task.baseline is not None
                or task.heuristic_kept() else f"none of its trials had ended, and `{again}` tunes it")
        terminalreporter.write_line(
            f"{task.label}: interrupted in {where}; {kept}. No "
            f"final round confirmed a pick, so best() serves the heuristic there (or an earlier tune's pick) until "
            f"then", yellow=True)
    if not ran:
        return
    rows = [t.summary_row() for t in ran]
    for line in table(rows):
        terminalreporter.write_line(line)
    if tuner.discarded:
        terminalreporter.write_line(f"cluster: {tuner.discarded} measurements made ahead on other devices were "
                                    f"never asked for by the strategy, and dropped")
    unverified = [f"{t.label} [{config_text(u['config'])}] on {tuple(u['shape'])}: {u['status']}"
                  for t in ran for u in t.unverified]
    rules = [f"{t.label} [{config_text(u['config'])}] on {tuple(u['shape'])}: {u['status']}"
             for t in ran for u in t.rule_unverified]
    if unverified:  # fast where timed, wrong where served unmeasured: the template's fault, which the table hides
        terminalreporter.write_line(f"verify shapes: {len(unverified)} finalist{'s' if len(unverified) != 1 else ''} "
                                    f"failed on a bucket's verify shape, and {'is' if len(unverified) == 1 else 'are'} "
                                    f"not adopted: {'; '.join(unverified)} (each error is in the records' final round)",
                                    yellow=True)
    if rules:  # served where no finalist is adopted, as the suite's rule: not the tune's to drop, but said
        terminalreporter.write_line(f"verify shapes: the heuristic's config failed on a bucket's verify shape, and is "
                                    f"served where no config is adopted: {'; '.join(rules)}", yellow=True)
    pruned = [f"{t.label} {r['pruned']}" for t, r in zip(ran, rows) if r["pruned"]]
    if pruned:  # among the configs weighed, in neither failed nor early: a space mostly beyond the device shows
        terminalreporter.write_line(f"pruned: configs beyond the device's resources (shared memory, registers, "
                                    f"threads per block), set aside without a failure: {', '.join(pruned)}")
    short = [t.label for t, r in zip(ran, rows) if tuner.target == "cpu"
             and min(filter(None, (r["best_ms"], r["baseline_ms"])), default=1.0) < SHORT_CALL_MS]
    if short:
        terminalreporter.write_line(
            f"short calls: {', '.join(short)} take under {SHORT_CALL_MS * 1e3:g} µs a call, and each is timed with "
            f"the cost of a call from Python (about {call_overhead_us():.2g} µs here): the kernels' own speedups "
            f"read smaller than they are; more work per call (larger shapes) tunes them", yellow=True)
    reused = sum(t.reused for t in ran)
    if reused:
        terminalreporter.write_line(f"reused: {reused} trial{'s' if reused != 1 else ''} came from the records, measured by an earlier run "
                                    f"(--tune-fresh measures them again, --tune-retry-failed the failed ones)")
    if isinstance(tuner.workers, Replay) and not config.getoption("tune_records"):  # a folder of its own, unsaid
        terminalreporter.write_line(f"records: this replay's are in a temporary folder of its own, "
                                    f"{tuner.store.path.parent}, which nothing removes; --tune-records DIR keeps them "
                                    f"there instead")
    for task in ran:
        for note in (task.why_again, task.unconfirmed(), task.heuristic_strays, task.all_wrong):
            if note:
                terminalreporter.write_line(f"{task.label}: {note}", yellow=True)
    adaptive = tuner.fixed_s and tuner.settings.repeats is None  # --tune-repeats is a fixed protocol itself
    share = f", {tuner.measure_s / tuner.fixed_s:.0%} of the time {FIXED_REPEATS} fixed repeats would take" \
        if adaptive else ""
    if adaptive and tuner.measure_s > tuner.fixed_s:
        share += f" (noisy trials needed more than {FIXED_REPEATS} samples to pin their median)"
    took = f"{tuner.measure_s:.1f} s" if tuner.measure_s >= 0.1 else f"{tuner.measure_s * 1e3:.2g} ms"
    compiled, cached = build_counts(tuner.workers.builds, tuner.ahead)
    settings = "".join(f" {n}={v}" for n, v in tuner.strategy_options.items())
    cores = tuner.ahead.size if tuner.ahead else 0
    terminalreporter.write_line(
        f"strategy {tuner.strategy}{settings}, seed {tuner.seed}; builds: {compiled} compiled "
        f"({tuner.ahead.compiled if tuner.ahead else 0} ahead, on {cores} core{'' if cores == 1 else 's'}), "
        f"{cached} from the compile cache (compiled by an earlier run); measuring new trials took "
        f"{took}{share}")
    where = spent(tuner.trials_s, tuner.phases)
    if where:
        terminalreporter.write_line(where)
    for legend in LEGEND:  # a line per column: one line of them all was 560 characters
        terminalreporter.write_line(legend)
    disturbed = sum(r["disturbed"] for r in rows)
    # which tasks: the table's rows show no such column, and a config left out of a final round was unsaid
    whose = some([f"{t.label} {r['disturbed']}" for t, r in zip(ran, rows) if r["disturbed"]])
    if tuner.remeasured or disturbed or tuner.noisy:
        terminalreporter.write_line(
            f"interference: {tuner.remeasured} measurement{'s' if tuner.remeasured != 1 else ''} repeated on a "
            f"disturbed machine, {disturbed} config{'s' if disturbed != 1 else ''} stayed disturbed (not used"
            f"{f': {whose}' if whose else ''}), "
            f"{tuner.noisy} trial{'s' if tuner.noisy != 1 else ''} noisy (spread over "
            f"{NOISY_SPREAD:.0%}); each trial's verdict and conditions are in the records", yellow=True)
    if tuner.left_behind:  # measured all the same, in a worker replaced after each: the config's own doing
        terminalreporter.write_line(
            f"left behind: {len(tuner.left_behind)} trial{'s' if len(tuner.left_behind) != 1 else ''} left "
            f"threads, processes or timers running in their worker, which was replaced before the next trial: "
            f"{'; '.join(tuner.left_behind[:3])}{' ...' if len(tuner.left_behind) > 3 else ''} (each trial's "
            f"left_behind is in the records)", yellow=True)
    busy = [t for t in ran if t.busy]
    if busy:  # named: a task the machine stopped shows few configs or none, and a later one may have run
        probed = sum(t.probed for t in busy)  # the machine known busy: other load seen, no more retries
        terminalreporter.write_line(
            f"stopped, disturbed: {len(busy)} of {len(ran)} tasks ({some([t.label for t in busy])}); the first "
            f"failure above says by what (a busy machine, or samples that changed speed while the machine looked "
            f"quiet)" + (f"; {probed} of them at a trial not retried once it showed other load, as an earlier "
                         f"task had stopped so" if probed else "")
            + "; their trials are kept, and a later tune resumes them", red=True)
