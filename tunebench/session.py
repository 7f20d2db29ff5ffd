"""The tuning session: strategy -> build -> measure -> record, for each (kernel, dtype, bucket).

A :class:`Task` tunes one kernel on one bucket for one dtype: it measures the baseline (the
heuristic config of every representative shape) first, then asks its strategy for candidates
until the budget (trials, seconds) or the strategy ends. Trials run in worker processes (see
:mod:`tunebench.workers`); every trial becomes a record at once, whatever its status; a trial
already recorded for the same source, shape, dtype and config is reused, not measured. A search
ends with a final round (:mod:`tunebench.final_round`): its fastest configs and the baseline,
measured again interleaved in fresh processes, decide the winner; the summary's figures are
that round's.

A trial the worker judges disturbed by other load (:mod:`tunebench.interference`) is measured
again after a pause (:func:`tunebench.compare.undisturbed`); one that stays disturbed is
recorded as such, never counts as a time, and is measured again by the next run. When
:data:`BUSY_STRIKES` trials in a row stay disturbed, the task stops with what was seen: a tune
of a busy machine records noise, not picks. The tasks after it measure each trial once where
the machine shows other load, without the retries and their pauses (the machine is known to be
busy), and stop at the first that does, until a trial comes out clean (six tasks took 180 s to
stop, each after its retries); a trial disturbed by its samples alone is retried as before. A search
that timed no config undisturbed on every shape without that many in a row (a small budget) fails
as such a stop does (see :meth:`Task.untimed`).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tunebench import __version__, backends
from tunebench.builds import Ahead
from tunebench.buckets import Bucket
from tunebench.cluster import ClusterWorkers
from tunebench.compare import undisturbed
from tunebench.final_round import final_round, now, round_builds
from tunebench.interference import QUOTA_REASON, machine_signals, quota_remedy, remedy
from tunebench.kernel import (Kernel, KernelError, Variant, changed_files, comment_edits, declaration_hash,
                              hashed_files)
from tunebench.lookup import confirmed_ms, fits, latest_confirmation, related_results
from tunebench.measure import MeasureSettings
from tunebench.records import DEATHS, FAILED, RecordStore, config_key, config_text, revision
from tunebench.replay import Replay
from tunebench.stats import median_ci, spread, summarize
from tunebench.strategies import DEFAULT as DEFAULT_STRATEGY
from tunebench.strategies import get as get_strategy
from tunebench.strategies.base import search
from tunebench.workers import OUTSIDE_KILLS, TrialJob, WorkerKilled
from tunebench.summary import all_wrong, brief

#: What a task's stop on the heuristic's compile error adds where an earlier run's verdict served it.
RECORDED_REFUSAL = " (as an earlier tune recorded it, not built again: --tune-retry-failed builds it)"
#: The fastest outcomes of a search that meet again, interleaved, in its final round.
FINALISTS = 4
#: A fixed protocol takes this many samples: what the summary's saved time is measured against.
FIXED_REPEATS = 30
#: Samples spread wider than this (10th to 90th percentile over the median) are counted as noisy.
NOISY_SPREAD = 0.25
#: Where a trial's worker spends its time: compiling (where no compile ahead did), building the
#: shape's inputs and reference, loading the candidate, verifying it (before and after its timed
#: calls), timing it.
PHASES = ("compile_time_s", "prepare_s", "load_s", "verify_s", "measure_s")
#: Trials in a row that stay disturbed after their retries before a task stops (one, measured
#: once as it showed other load, once a task of the run has stopped so: the machine is known to be busy).
BUSY_STRIKES = 3

#: The statuses a config's build decides: its compile error, and a refusal of what it built (on a
#: GPU, by ptxas or at the launch, for the registers and shared memory its cubin asks). A trial keeps
#: its build's key (:func:`tunebench.backends.build_key`); one of these is reused under today's alone.
BUILD_VERDICTS = ("compile_error", "pruned_resources")


def _died(deaths: list[str | None]) -> str:
    """What ended the :data:`DEATHS` runs in a row that measured a config (see RecordStore.measuring)."""
    signals = " or ".join(sorted({d for d in deaths if d}))
    if not signals:
        return (f"the tuning run died {len(deaths)} times while measuring this config (the candidate killed it, as "
                f"kill(getppid(), ...) does, or the out-of-memory killer took it)")
    return (f"its worker was killed by {signals} in {len(deaths)} runs in a row while measuring this config, "
            f"{OUTSIDE_KILLS} times in each{' (or the run died)' if None in deaths else ''}, by the candidate itself "
            f"(as raise() or kill(0, ...) does) or by something outside")


def fixed_rest_s(placements: Mapping[str, Sequence[float]]) -> float:
    """Seconds the fixed protocol's :data:`FIXED_REPEATS` samples would have taken beyond a trial's
    own, under each placement it timed: every placement is timed (the slowest one's count alone
    left the others' out, and read the adaptive protocol's share of it too high)."""
    return sum((FIXED_REPEATS - len(s)) * statistics.median(s) for s in placements.values()) / 1e3


class TaskFailed(RuntimeError):
    """The task this candidate belongs to failed earlier in the run (its error was shown once)."""


def stopped(doc: dict, strikes: int, retries: int, known: bool = False) -> str:
    """Why a task stopped after ``strikes`` trials in a row stayed disturbed (``doc``, the last, or
    the latest a quota throttled); ``known``: an earlier task of the run stopped so, and the trial
    was not retried once it showed other load (see :data:`BUSY_STRIKES`)."""
    seen = "; ".join(doc.get("interference", []))

    def how(state: str) -> str:
        if known:
            measured = ("measured once without retries or pauses" if not retries else
                        f"its other load seen at retry {retries} of a disturbance in its samples alone, not retried further")
            return f"its trial stayed {state}, {measured}, as an earlier task of this run stopped disturbed"
        return f"{strikes} trial(s) in a row stayed {state} after {retries} retries"

    if doc.get("conditions", {}).get("throttled"):  # no quieter moment comes: the limit is the container's
        return (f"stopped: {QUOTA_REASON} throttled the measurements ({seen}); {how('disturbed')}. Times measured "
                f"under it would be noise: {quota_remedy(doc['target'])}")
    if machine_signals(doc.get("conditions", {})):
        return (f"stopped: the machine is busy ({seen}); {how('disturbed')}. Times measured now would be noise: "
                f"tune when the machine is quiet")
    return (f"stopped: the samples kept changing speed while the machine's own readings were quiet ({seen}); "
            f"{how('so')}: the host changing speed (another "
            f"VM's load, invisible here), or a kernel whose calls run at two speeds (every other call slow, say). "
            f"Times measured now would not hold: tune again later, and where it persists on a quiet machine, "
            f"look at the kernel's own timing")


class MachineBusy(RuntimeError):
    """Trials kept being disturbed by other load: what was seen, and what to do."""


@dataclass(frozen=True)
class Budget:
    """Per (kernel, dtype, bucket): at most ``trials`` candidates and ``seconds`` of wall time
    (:meth:`Task.elapsed`)."""

    trials: int | None = None
    seconds: float | None = None


@dataclass
class Outcome:
    """A config (or the per-shape baseline) evaluated on every representative shape of a bucket."""

    configs: dict[tuple, dict]  # shape -> config
    trials: dict[tuple, dict]  # shape -> record

    @property
    def status(self) -> str:
        """``ok`` when every shape gave a time, else the worst of its shapes': the first failure (a
        wrong result, a crash), else out of resources (it cannot run on that shape), else stopped
        early (it ran, slower). Read in shape order, a config stopped early on one shape passed
        though it was wrong, or could not run, on another."""
        statuses = [t["status"] for t in self.trials.values()]
        return next((s for worst in (FAILED, ("pruned_resources",), ("early_stopped",)) for s in statuses
                     if s in worst), "ok")

    @property
    def error(self) -> str | None:
        """The error of the first shape whose status is the outcome's: another shape's said another status's."""
        status = self.status
        return next((t.get("error") for t in self.trials.values() if t["status"] == status), None)

    @property
    def failure(self) -> str | None:
        """``status on shape: error`` of the first shape whose status is the outcome's (a wrong
        result, a crash, out of resources), None where the config ran on every shape (an early stop
        is no failure)."""
        status = self.status
        return None if status in ("ok", "early_stopped") else next(
            f"{status} on {s}: {t['error']}" for s, t in self.trials.items() if t["status"] == status)

    @property
    def times(self) -> dict[tuple, float]:
        """Median ms per shape, wherever samples were taken (early-stopped trials too)."""
        return {s: t["stats"]["median"] for s, t in self.trials.items() if t.get("stats")}

    @property
    def clean_times(self) -> dict[tuple, float] | None:
        """:attr:`times` where no trial was disturbed by other load, else None: no reference."""
        return None if any(t.get("verdict") == "disturbed" for t in self.trials.values()) else self.times


def git_state(root: Path, records: Path) -> tuple[str | None, bool | None]:
    """The commit checked out at ``root`` and whether anything but the records differs from it
    (None, None outside a git work tree). The records are left out as named and as resolved: a
    ``records`` that is a symlink out of the tree made every trial dirty."""
    exclude = list(dict.fromkeys(
        f":(exclude){folder.relative_to(base)}" for base in (Path(os.path.abspath(root)), root.resolve())
        for folder in (Path(os.path.abspath(records)), records.resolve()) if folder.is_relative_to(base)))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, errors="replace", check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *exclude],
                                cwd=root, capture_output=True, text=True, errors="replace", check=True).stdout
    except (OSError, subprocess.CalledProcessError):  # no git, or a checkout it refuses (see refused_checkout)
        return None, None
    return commit, bool(status.strip())


def refused_checkout(root: Path) -> str | None:
    """Where git refuses to read the checkout at ``root`` as another user's (a CI container run as
    root on the runner's checkout), what the run's records lack and the command that trusts it;
    else None. A note before anything is measured, not a warning, which a project's
    ``filterwarnings = error`` made an error of every suite's collection."""
    try:
        subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, errors="replace",
                       check=True)
    except OSError:
        return None
    except subprocess.CalledProcessError as e:
        if "safe.directory" in (e.stderr or ""):
            return (f"git refuses to read {root} (dubious ownership: another user owns it), so this run's records "
                    f"name no commit; `git config --global --add safe.directory {root}` trusts it")
    return None


def untracked(root: Path, paths: tuple[Path, ...]) -> bool:
    """Whether git leaves any of ``paths`` inside the work tree at ``root`` untracked: a kernel's
    own template or suite that is not in the commit its trials name, however clean the rest."""
    try:  # paths as bytes, unquoted (-z): a non-ASCII name under any locale
        top = Path(os.fsdecode(subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True,
                                              check=True).stdout.strip())).resolve()
        inside = [str(p.resolve().relative_to(top)) for p in paths if p.resolve().is_relative_to(top)]
        listed = os.fsdecode(subprocess.run(["git", "ls-files", "-z", "--", *inside], cwd=top, capture_output=True,
                                            check=True).stdout).split("\0") if inside else []
    except (OSError, subprocess.CalledProcessError):
        return False
    return any(p not in listed for p in inside)


class Tuner:
    """What every task of one tuning run shares: the workers, the records, settings, provenance.

    ``workers`` runs a :class:`~tunebench.workers.TrialJob` and returns its result fields
    (:class:`~tunebench.workers.Workers` for real hardware).
    """

    def __init__(self, target: str, fingerprint: dict, store: RecordStore, workers, *,
                 strategy: str = DEFAULT_STRATEGY, budget: Budget = Budget(), seed: int = 0,
                 settings: MeasureSettings | None = None, root: Path | None = None,
                 retry_failed: bool = False, fresh: bool = False, ahead: Ahead | None = None,
                 strategy_options: dict | None = None):
        self.target = target
        self.fingerprint = fingerprint
        self.store = store
        self.workers = workers
        self.strategy = strategy
        get_strategy(strategy)  # fail now on an unknown name
        self.strategy_options = strategy_options or {}  # its settings (see strategies.options)
        self.budget = budget
        self.seed = seed
        self.settings = settings or MeasureSettings()
        self.retry_failed = retry_failed  # measure failed trials again instead of reusing them
        self.fresh = fresh  # reuse nothing recorded: every trial and the final round anew
        self.ahead = ahead  # compiles the next candidates on the host's cores
        self.measured: set[tuple] = set()  # (task label, shape, config key) measured in this run
        self.root = root or Path.cwd()
        self.commit, self.dirty = git_state(self.root, store.path.parent)
        self.tasks: list[Task] = []
        self.measure_s = 0.0  # time spent measuring new trials
        self.trials_s = 0.0  # all the new trials took, and where their workers spent it (see workers._trial)
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.fixed_s = 0.0  # what the fixed protocol would have spent on them
        self.noisy = 0  # new trials whose samples spread too wide
        self.remeasured = 0  # measurements repeated because the machine was disturbed
        self.left_behind: list[str] = []  # trials that left threads, processes or timers running in their worker
        self.busy: str | None = None  # why a task stopped on a busy machine
        self.busy_reported: str | None = None  # the item that failed with it: the others say "see above"
        self.discarded = 0  # measurements other devices made for candidates never asked for
        self.progress: Callable[[Task, bool], None] = lambda task, done: None  # told after each candidate

    def task(self, kernel: Kernel, variant: Variant, dtype: str, bucket: Bucket) -> Task:
        task = Task(self, kernel, variant, dtype, bucket)
        self.tasks.append(task)
        return task


class Task:
    """One (kernel, dtype, bucket) on the tuner's target."""

    def __init__(self, tuner: Tuner, kernel: Kernel, variant: Variant, dtype: str, bucket: Bucket):
        self.tuner, self.kernel, self.variant, self.dtype, self.bucket = tuner, kernel, variant, dtype, bucket
        self.candidates: list[tuple] = []  # valid keys selected for this run, set after collection
        self.offered = 0  # valid keys collected, selected or not (-k, --lf and node ids select among them)
        self.deselected = 0  # constraint-violating configs
        self.outcomes: dict[tuple, Outcome] = {}  # key -> outcome, in the order measured
        self.recalled: tuple[tuple, Outcome] | None = None  # the records' pick, a finalist (see _recall)
        self.baseline: Outcome | None = None
        self.stop_reason: str | None = None  # why the search ended; None until it has run
        self.failure: Exception | None = None  # what broke the task (a declaration error)
        self.failed_by = ""  # the item it was raised to
        self.interrupted: tuple[str, BaseException | None] = ("", None)  # the item cut short, and by what
        self.spent_s = 0.0  # the trials' own time (on the replay target, their recorded cost)
        self.reused_s = 0.0  # what the trials taken from the records cost when they were measured
        self._mark = 0.0  # elapsed() when the latest trial was measured or reused: the next one's cost from it
        self.began: float | None = None  # monotonic time the search began
        self.final: tuple[tuple | None, Outcome] | None = None  # the final round's winner
        self.check: dict | None = None  # the final round's record
        self.unverified: list[dict] = []  # the finalists a round of this run found failing on a verify shape
        self.rule_unverified: list[dict] = []  # the heuristic's config, where that round found it failing on one
        self.strikes = 0  # trials in a row that stayed disturbed
        # the latest of them a quota throttled: the stop names the quota, which no quieter moment lifts,
        # though other load disturbed the last one too
        self.throttled: dict | None = None
        self.busy: str | None = None  # why the task stopped on a busy machine
        self.busy_by = ""  # the item whose run of the task the busy machine stopped: it fails saying so
        self.new = 0  # trials measured and recorded by this run (those of a config a busy stop cut short too)
        self.cut_short: dict | None = None  # the trial a busy stop ended at: recorded, its config in no outcome
        self.probed = False  # stopped at a trial measured once, an earlier task having stopped on the busy machine
        self.declaration = kernel.declaration(variant, dtype)
        # the commit names what was measured only where it holds the kernel's own files too
        self.dirty = tuner.dirty if not tuner.commit or tuner.dirty else untracked(
            tuner.root, (variant.path, *([kernel.declared_in] if kernel.declared_in else [])))
        self.setup_hash = kernel.setup_hash(variant, dtype)
        self._reused: set[tuple] = set()  # trials taken from the records instead of measured, each once
        self._inflight: dict[tuple, Future] = {}  # (shape, config key) -> measured on another device
        self._before: set[tuple] = set()  # candidates an earlier run measured (see _measured_before)
        self.changed: list[str] = []  # the parts of the declaration changed since the task's last tune
        self.tuned_source: str | None = None  # the source hash the task's last tune recorded
        self.tuned_before: dict | None = None  # the latest final round of today's declaration before this run
        self.kept = 0  # trials of an earlier source of today's code recorded as today's (see earlier)
        self.kept_round = False  # its final round too (see _kept_round)
        self._edited: dict[str | None, list[str] | None] = {}  # earlier()'s answers, by source
        self.undeclared = False  # tuned by a tunebench that kept no declaration: its trials are measured again
        self.unbuilt = False  # tuned by a tunebench that kept no compiler: its trials are measured again
        self.waiting = False  # another run holds the task's lock
        self.rounding = False  # in its final round, which its line says (_rounding)
        self.ended = False  # the search and its final round ran to their end (not interrupted)

    def _waiting(self) -> None:
        """Another run holds this task's lock: say so rather than hang without a word."""
        self.waiting = True
        self.tuner.progress(self, False)

    def _rounding(self) -> None:
        """Its final round begins: say so at once (see :mod:`tunebench.progress`), where this run
        measured nothing too, whose line waits for a measured trial. A tune stopped before its
        rounds, resumed on a machine lent afresh, showed no line for a round's whole time (88-116 s
        a task on a GPU), and a log cut short there named no task in progress; a terminal, whose
        line is redrawn at most every 0.2 s, kept a time left through the round."""
        if not self.rounding:
            self.rounding = True
            self.tuner.progress(self, False)

    @cached_property
    def compiler(self) -> str | None:
        """What builds this task's candidates: not part of the declaration (records of every
        earlier version would be measured again), kept beside each trial, and a trial built by
        another is measured again. A cluster's is its devices' own, asked once the search begins
        (at collection the devices have not every suite yet)."""
        return self.tuner.workers.compiler(self.kernel.name, self.variant)

    @cached_property
    def _earlier_sources(self) -> list[tuple[str, str]]:
        """The kernel's other sources in the records, newest first, each with the setup hash its
        trials were recorded under where the rest of the declaration is today's (see :meth:`earlier`)."""
        return [(source, declaration_hash({**self.declaration, "template": source}))
                for source in reversed(self.tuner.store.sources(self.kernel.name)) if source != self.variant.source_hash]

    def earlier(self, source: str | None) -> list[str] | None:
        """The files whose comments or whitespace alone changed since ``source``, an earlier source
        of the kernel in the records, where its code is today's (see
        :func:`~tunebench.kernel.comment_edits`): its trials count as today's, kept, not measured
        again (a comment edited cost hours of tuning on a GPU), once today's source builds for the
        heuristic's config (see :meth:`_kept_trial`); of every version, not the last tune's alone:
        a run cut short keeps the rest of them when resumed. None where its code is another, and
        on a cluster, where the driver's own build says nothing of the
        devices' (their toolchain, their libraries): a kept trial is recorded ok under today's
        source, which a device might not build, so nothing is kept there. Each source is lexed once, and only once a trial of it would be kept or
        the summary names the last tune's: a run that reuses today's own trials lexes nothing, one
        after a comment edit the version it keeps (a kernel of 300 versions lexed them all)."""
        if source not in self._edited:
            text = self.tuner.store.source(source) if source else None
            edited = text and comment_edits(text, self.variant.template, self.variant.path.name, self._kept_texts,
                                            self.variant.language, self.variant.flags)
            here = not isinstance(self.tuner.workers, ClusterWorkers)
            self._edited[source] = edited if edited and here else None
        return self._edited[source]

    @cached_property
    def _kept_texts(self) -> dict[str, str]:
        """Every file text the records keep, and today's, by hash: a header kept as its hash alone
        is compared by them (see :func:`~tunebench.kernel.comment_edits`)."""
        return {**self.tuner.store.file_texts(), **self.variant.file_texts}

    @cached_property
    def _refusal(self) -> tuple[dict, BaseException] | None:
        """The heuristic's config that today's source does not build for, and why (see
        :meth:`~tunebench.builds.Ahead.build`), built as the tune's first trial is, into the
        compile cache: a comment edited may break the build (a ``/*`` in a comment under
        ``-Werror=comment``, a ``??/`` under ``-Wtrigraphs``), and no trial of an earlier source is
        kept as today's then (see :meth:`_kept_trial`). Replay builds nothing; a cluster never asks it."""
        t = self.tuner
        ahead = t.ahead or Ahead(t.target, t.fingerprint, workers=1)
        configs = {config_key(c): c for c in (self.variant.baseline(s, self.dtype) for s in self.bucket.shapes)}
        try:
            for config in configs.values():
                why = ahead.build(self.kernel, self.variant, self.dtype, [], now=config)
                if why is not None:
                    return config, why
            return None
        finally:
            if ahead is not t.ahead:
                ahead.close()

    def heuristic_kept(self) -> int:
        """On how many of the bucket's shapes the records hold the heuristic's trial: a task
        interrupted in its heuristic's own trials has no baseline outcome to count them by."""
        t = self.tuner
        return sum(t.store.lookup(self.kernel.name, self.variant.source_hash, s, self.dtype,
                                  self.variant.baseline(s, self.dtype), self.setup_hash) is not None
                   for s in self.bucket.shapes)

    @property
    def reused(self) -> int:
        """How many trials were taken from the records instead of measured."""
        return len(self._reused)

    @property
    def why_again(self) -> str | None:
        """What the declaration's change since the last tune meant: trials measured again, or
        those of an earlier run with this same declaration reused (a change undone)."""
        if self.undeclared:
            return ("tuned last by a tunebench that kept no declaration (its template, flags, reference...) to "
                    "reuse a trial by: measured again")
        if self.unbuilt and not self.changed:
            return "tuned last by a tunebench that kept no compiler to reuse a trial by: measured again"
        if not self.changed:
            return None
        if self.changed == ["template"] and self.earlier(self.tuned_source):
            what = f"only comments or whitespace changed in {', '.join(self.earlier(self.tuned_source))} since " \
                   f"the last tune"
            if self.kept:
                kept = f"its {self.kept} trials are kept" if self.kept > 1 else "its 1 trial is kept"
                return f"{what}: {kept}{', and its final round' if self.kept_round else ''}"
            if self.kept_round:  # its trials kept by a run stopped before its round
                what += " (its final round kept)"
        else:
            tuned = self.tuner.store.source(self.tuned_source) if "template" in self.changed else None
            edited = changed_files(tuned, self.variant.template, self.variant.path.name) if tuned else []
            parts = [f"template ({', '.join(edited)} edited)" if part == "template" and edited else part
                     for part in self.changed]
            what = f"the {', '.join(parts)} changed since the last tune"
        if self.reused:  # a change undone (a comment edit too): trials recorded for today's source before
            count = f"{self.reused} trials were" if self.reused != 1 else "1 trial was"
            then = self.tuned_before if set(self.changed) - {"compiler", "entry"} else None  # not the declaration's
            if then:  # a revert: "changed since the last tune" alone read as new code measured afresh
                when = (f"at {revision(then)}" if then.get("git_commit") else
                        f"on {then['timestamp'][:10]}" if then.get("timestamp") else "before")
                return f"{what}, back to the declaration tuned {when}: its {count} reused"
            return f"{what}: {count} recorded with this declaration before, and reused"
        return f"{what}: measured again"

    def once(self, outcomes) -> list[Outcome]:
        """The baseline, then ``outcomes`` but the one of the heuristic's own config, which the
        search may ask too: it was measured once, as the baseline."""
        if self.baseline is None:
            return list(outcomes)
        return [self.baseline, *(o for o in outcomes if o.configs != self.baseline.configs)]

    @property
    def all_wrong(self) -> str | None:
        """Where every config that ran to a result gave a wrong one (see :func:`~tunebench.summary.all_wrong`)."""
        if self.baseline is None:
            return None
        others = self.once(self.outcomes.values())[1:]
        return all_wrong((self.baseline.status, self.baseline.error), [o.status for o in others])

    @property
    def heuristic_strays(self) -> str | None:
        """Where the heuristic's config breaks the space on this bucket's shapes, if it does."""
        found = self.kernel.heuristic_strays(self.variant, self.tuner.target, self.bucket.shapes)
        return f"the heuristic's config is outside the space: {found[0]}" if found else None

    @property
    def label(self) -> str:
        return f"{self.kernel.name}[{self.bucket.name}-{self.dtype}]"

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    # -- the search ---------------------------------------------------------------------------
    def run(self, asker: str = "") -> None:
        """Measure the baseline, then candidates in the strategy's order until the budget ends.
        A task that failed raises its error to the item that ``asker`` names (again where that
        item is run again: pytest-rerunfailures' rerun must fail as it did), as does one whose
        final round it cut short (pytest-timeout: nothing was confirmed); others get
        :class:`TaskFailed`."""
        if self.failure is not None:
            if asker and asker == self.failed_by:
                raise self.failure
            raise TaskFailed(f"not run: {self.label} failed, see its first item's error")
        if self.done and not self.ended and asker and asker == self.interrupted[0]:
            raise self.interrupted[1]  # its final round was cut short: nothing confirmed to pass on
        if self.done:
            return
        try:
            with self.tuner.store.task_lock(self.label, waiting=self._waiting):
                self.waiting = False
                self._search()
                self.ended = True
                if self.busy:
                    self.busy_by = asker
        except Exception as e:
            self.failure, self.failed_by = e, asker
            self.stop_reason = f"the task failed: {e}"
            raise
        except BaseException as e:  # pytest-timeout's Failed, Ctrl-C: the trials are kept; a search resumes
            self.interrupted = (asker, e)
            raise

    def elapsed(self) -> float:
        """What the time budget counts: the wall time since the task began (builds, pauses on
        a busy machine, recording and all, as a user's clock does; the final round apart), or on
        the replay target, whose trials take no time, the recorded cost of its trials; and the
        recorded cost of the trials taken from the records: a tune resumed, or run again on the
        same search path, spends what is left of its budget, not a whole one more (another path
        takes fewer of them; the trial budget counts them all, see :meth:`_measured_before`)."""
        if isinstance(self.tuner.workers, Replay):
            return self.spent_s + self.reused_s
        return (time.monotonic() - self.began if self.began is not None else 0.0) + self.reused_s

    def _search(self) -> None:
        self.began = time.monotonic()
        self._mark = self.elapsed()  # a search resumed in this run (after pytest-timeout) starts its own clock
        store = self.tuner.store
        recorded = next(iter(store.tasks(kernel=self.kernel.name, target=self.tuner.target, dtype=self.dtype,
                                         bucket=self.bucket.name)), {})
        # the trials recorded before this task first began are its warm-start data, on every run
        warm_from = (recorded.get("warm_from") if recorded.get("source_hash") == self.variant.source_hash
                     else None)
        warm_from = len(store.trials()) if warm_from is None else warm_from
        if recorded.get("declaration"):  # its functions hashed by their bytecode, where an earlier tunebench did
            self.declaration = self.kernel.declaration(self.variant, self.dtype, recorded["declaration"])
            self.setup_hash = self.kernel.setup_hash(self.variant, self.dtype, recorded["declaration"])
        self.changed = [part for part, value in recorded.get("declaration", {}).items()
                        if self.declaration.get(part) != value]
        self.tuned_source = recorded.get("source_hash")
        self.tuned_before = next((c for c in reversed(store.checks(  # before this run records its own (see why_again)
            kind="tune", kernel=self.kernel.name, target=self.tuner.target, dtype=self.dtype, bucket=self.bucket.name,
            source_hash=self.variant.source_hash, setup_hash=self.setup_hash))
            if backends.built_by(c.get("compiler"), self.compiler) and not Kernel.retargeted(self.variant, c)), None)
        if Kernel.retargeted(self.variant, recorded):
            self.changed.append("entry")
        if backends.built_otherwise(recorded.get("compiler"), self.compiler):
            self.changed.append("compiler")
        self.undeclared = bool(recorded) and "declaration" not in recorded  # nothing to reuse its trials by
        self.unbuilt = bool(recorded) and "compiler" not in recorded and not backends.built_by(None, self.compiler)
        try:
            self.baseline = self._evaluate({s: self.variant.baseline(s, self.dtype) for s in self.bucket.shapes})
        except MachineBusy as e:
            self.tuner.busy = self.stop_reason = self.busy = str(e)
            return
        if self.baseline.status == "compile_error":  # the template itself: no candidate would build
            shape = next(s for s, d in self.baseline.trials.items() if d["status"] == "compile_error")
            config = self.baseline.configs[shape]
            recorded = "" if (self.label, shape, config_key(config)) in self.tuner.measured else RECORDED_REFUSAL
            raise self._uncompiled(config, self.baseline.trials[shape]["error"], recorded)
        # described once the heuristic ran on every shape: a declaration error (an args builder, a
        # reference at fault) raises first, and the records keep the last description that worked
        store.put_task({**self._description(), "warm_from": warm_from})
        store.put_source(self.kernel.name, self.variant.source_hash, self.variant.template, self._file_texts())
        space = self.variant.space
        rng = random.Random(f"{self.tuner.seed}:{self.kernel.name}:{self.dtype}:{self.bucket.name}")
        strategy = get_strategy(self.tuner.strategy)(space, self.candidates, rng, warm=self._warm(warm_from),
                                                     **self.tuner.strategy_options)

        def evaluate(key: tuple) -> float | None:
            config = space.config(key)
            self._speculate(strategy, key)
            if self.tuner.ahead is not None and not self._recorded(config):
                upcoming = [c for c in map(space.config, self._upcoming(strategy, key, self.tuner.ahead.size))
                            if not self._recorded(c)]
                self.tuner.ahead.build(self.kernel, self.variant, self.dtype, upcoming, now=config,
                                       waiting=self.tuner.workers.mark)
            self.outcomes[key] = self._evaluate({s: config for s in self.bucket.shapes})
            self.tuner.progress(self, False)
            return self.estimate(self.outcomes[key])

        budget = self.tuner.budget
        try:
            try:
                measured = self._measured_before()
                self._before = set(measured)
                self.stop_reason = search(strategy, evaluate, trials=budget.trials, seconds=budget.seconds,
                                          spent=self.elapsed, measured=measured)
            finally:
                self._settle()
            self._recall()  # may measure the records' pick again: a busy stop there is the search's too
        except MachineBusy as e:
            self.tuner.busy = self.stop_reason = self.busy = str(e)
            return
        self._confirm()
        self.rounding = False
        self.busy = self.untimed()
        # a clean trial alone says the machine is quiet again (see _measure): a task served from its records says nothing
        self.tuner.busy = self.busy or self.tuner.busy
        self.tuner.progress(self, True)

    def _measured_before(self) -> list[tuple]:
        """The candidates the records hold trials of for today's template on this bucket's shapes,
        to reuse on every one, or that other load disturbed there, in the order first recorded, the
        heuristic's apart (measured as the baseline, asked or not; another bucket's search may have
        asked it): the trial budget counts them however this run's search goes (see :func:`search`),
        as the README's "at most N candidates" promises of a task run again, and one disturbed is
        measured again where the search takes it up, as the README's interference section promises:
        left out, a run on another path spent the budget elsewhere, and never measured it again.
        None without a trial budget, or under --tune-fresh (a search anew)."""
        if self.tuner.budget.trials is None or self.tuner.fresh:
            return []
        space, candidates = self.variant.space, set(self.candidates)
        heuristic = {config_key(c) for c in self.baseline.configs.values()} if self.baseline else set()
        heuristic = heuristic if len(heuristic) == 1 else set()  # one per shape: each a candidate like another
        found = self.tuner.store.recorded_configs(self.kernel.name, self.variant.source_hash, self.dtype,
                                                  self.bucket.shapes)
        return [space.key(c) for c in map(dict, found) if config_key(c) not in heuristic and space.contains(c)
                and space.key(c) in candidates
                and all(self._reusable(c, s, disturbed=True) is not None for s in self.bucket.shapes)]

    def _recall(self) -> None:
        """The config the latest final round adopted, for this source or an earlier one, from its
        recorded trials (measured again where none is reusable, as after a template edit): a
        search that took another path this run (a changed strategy or template, other warm data,
        candidates deselected, a small budget) still meets it in the final round, so a re-run
        never drops a pick the records hold without measuring it again. Not under --tune-fresh."""
        t = self.tuner
        check = None if t.fresh else self._latest_confirmation()
        chosen = {tuple(e["shape"]): e["best"] for e in check["shapes"]} if check else None
        space = self.variant.space
        dims = self.kernel.buckets_for(t.target).dims
        if not chosen or chosen == self.baseline.configs or set(chosen) != set(self.bucket.shapes) \
                or not all(space.contains(c) and space.is_valid(space.key(c)) and space.holds_for(space.key(c), s, dims)
                           for s, c in chosen.items()):
            return
        key = self.variant.space.key(chosen[self.bucket.shapes[0]])
        if key not in self.outcomes and any(self._reusable(c, s) is None for s, c in chosen.items()):
            self._rounding()  # measured again for the round
        # asked by this search too, it still meets the finalists, however its trial ranks now
        self.recalled = (key, self.outcomes[key] if key in self.outcomes else self._evaluate(chosen))

    def _confirm(self) -> None:
        """The final round (see :mod:`tunebench.final_round`) among the fastest outcomes, unless
        the latest one already judged these finalists for this source and declaration."""
        if self.unasked:  # a round of the heuristic alone judged nothing, and was read as its verdict
            return
        finalists, configs = [], []
        for _, key, outcome in self.ranked():  # a candidate may be the baseline's config: once
            config = {s: outcome.configs[s] for s in self.bucket.shapes}
            if config not in configs and len(configs) < FINALISTS:
                finalists.append((key, outcome))
                configs.append(config)
        recalled = self.recalled
        if recalled and self.objective(recalled[1]) is not None and recalled[1].configs not in configs:
            finalists.append(recalled)  # however it ranks by its trials
            configs.append(recalled[1].configs)
        if not finalists:
            return
        t = self.tuner
        check = self._latest_confirmation()
        if not t.fresh and not self._judged(check, configs):
            check = self._kept_round(check, configs) or check
        served: set[tuple] = set()  # the shapes whose heuristic a device refused with an earlier run's error
        if t.fresh or not self._judged(check, configs):
            self._rounding()
            self._build_finalists(configs)
            check = final_round(t.store, t.workers, self.kernel, self.variant, t.target, self.dtype, self.bucket,
                                configs, t.commit, self.setup_hash, [o.times for _, o in finalists],
                                # a heuristic's trial other load disturbed is no reference for the trials' lead
                                self.baseline.clean_times if self.baseline else None,
                                self.baseline.failure if self.baseline else None, self.compiler, self.dirty,
                                served)
            self.unverified, self.rule_unverified = check.get("unverified", []), check.get("heuristic_unverified", [])
        self.check = check
        # a round whose build of the heuristic's config was refused (its trials built it: a library
        # linked removed since) leaves no heuristic to stay: the task stops as on a first build refused
        refused = next((e for e in check["shapes"] if e.get("baseline_failed", {}).get("status") == "compile_error"),
                       None)
        if refused:  # the compile cache's error (a library installed since builds nothing) says how to build it:
            # asked of the builds ahead, which filled the cache before the round; a cluster's device, which
            # built it in the round, said so itself
            cached = (getattr(t.ahead.build(self.kernel, self.variant, self.dtype, [], now=refused["baseline"]),
                              "earlier", False) if t.ahead else tuple(refused["shape"]) in served)
            raise self._uncompiled(refused["baseline"], refused["baseline_failed"]["error"],
                                   RECORDED_REFUSAL if cached else "")
        if check.get("disturbed"):  # it judged nothing: an earlier round's pick, if any, stands (the summary
            return  # says so; the run does not fail: fresh processes on a 2-core VM show two modes by chance)
        chosen = {tuple(e["shape"]): e["best"] for e in check["shapes"]}
        if self.baseline is not None and chosen == self.baseline.configs:
            self.final = (None, self.baseline)  # no finalist led the heuristic in every process
        else:
            self.final = next((f for f, c in zip(finalists, configs) if c == chosen), finalists[0])

    def _kept_round(self, check: dict | None, configs: list[dict]) -> dict | None:
        """``check``, the latest final round, recorded again as today's (``kept_from`` naming its
        source) where it is of an earlier version of today's code (see :meth:`earlier`) and judged
        these finalists: their trials were kept, and a comment edited measured the round again, its
        fresh processes the longest part of a tune resumed (minutes on a GPU). Its figures are the
        measurement's; its commit and time this run's, which holds today's code: the history's axis
        of commits ran back to the old one, and a revert to today's was said "tuned at" a commit
        that never held it."""
        if check is None or (check["source_hash"], check.get("setup_hash")) not in self._earlier_sources \
                or not self.earlier(check["source_hash"]) or self._refusal:
            return None
        kept = {**check, "source_hash": self.variant.source_hash, "setup_hash": self.setup_hash,
                "kept_from": check["source_hash"], "git_commit": self.tuner.commit, "git_dirty": self.dirty,
                "timestamp": now()}
        if not self._judged(kept, configs):
            return None
        self.tuner.store.add_check(kept)
        self.kept_round = True
        return kept

    def _uncompiled(self, config: dict, error: str, recorded: str = "") -> KernelError:
        """The task's stop where the heuristic's config does not compile: no candidate would build."""
        return KernelError(f"kernel {self.kernel.name!r}: {self.variant.path.name} does not compile for the "
                           f"heuristic's config [{config_text(config)}]{recorded}, so the task stops:\n{error}")

    def _build_finalists(self, configs: list[dict]) -> None:
        """The final round's builds, compiled together on the host's cores before its workers
        start: a round measured again for trials the records hold (a tune stopped before its
        round, on a machine lent afresh) found none built ahead (see :meth:`_recorded`), and each
        of its workers compiled every build in turn."""
        ahead = self.tuner.ahead
        if ahead is None:
            return
        builds = round_builds(self.variant, self.dtype, self.bucket, configs,
                              self.baseline.failure if self.baseline else None)
        for config in builds:  # each waited for: the round measures them all at once
            ahead.build(self.kernel, self.variant, self.dtype, builds, now=config, waiting=self.tuner.workers.mark)

    @property
    def unasked(self) -> bool:
        """Whether the run's selection (-k, --lf after a busy stop, node ids) held none of the
        bucket's candidates, and the records hold no pick to meet the heuristic again."""
        return bool(self.offered) and not self.candidates and self.recalled is None

    def _latest_confirmation(self) -> dict | None:
        """The task's latest final round, of this source and declaration where the records hold one."""
        t = self.tuner
        return latest_confirmation(t.store, self.kernel.name, t.target, self.dtype, self.bucket,
                                   self.variant.source_hash, self.setup_hash, self.variant.entry)

    def _served(self, check: dict | None) -> bool:
        """Whether best() still serves a final round's pick: it adopted a config, and today's space
        holds it on its shapes (the lookup's own tests: a param renamed or removed, a value taken out
        or a constraint that excludes it, on its shape too, sends best() and the gate elsewhere)."""
        dims = self.kernel.buckets_for(self.tuner.target).dims  # a shaped constraint may exclude it on its shape
        return (check is not None and check.get("winner") is not None
                and all(self.variant.space.holds(e["best"]) and fits(self.variant, e["best"], tuple(e["shape"]), dims)
                        for e in check["shapes"]))

    def _of(self, check: dict) -> str:
        """Which earlier version a served round judged, where not today's (see :func:`preferred`):
        its pick and figures, shown unmarked, read as measured on today's template."""
        if check["source_hash"] != self.variant.source_hash:
            return " (earlier template)"
        if check.get("setup_hash") not in (None, self.setup_hash):  # a tunebench that kept none: not known
            return " (earlier declaration)"
        return ""

    def _judged(self, check: dict | None, configs: list[dict]) -> bool:
        """Whether the latest final round already judged these finalists, for this source and
        declaration: each was among its finalists (a subset: the config it adopted, recalled
        beside the trials' fastest, must not make a re-run that measured nothing new measure the
        round again and flip its pick), and its pick is one of them or the heuristic. A round that
        could not measure judged nothing, nor one that took a heuristic failing now for a competitor,
        nor one against a heuristic that has changed since (its figures were that one's), nor one
        that did not verify them on every verify shape the bucket has today."""
        if not (check and check["source_hash"] == self.variant.source_hash and "winner" in check
                and ({tuple(s) for s in check.get("verify", [])} >= set(self.bucket.verify)
                     or isinstance(self.tuner.workers, Replay))  # a replay verifies nothing
                and check.get("setup_hash") == self.setup_hash and not check.get("problem")
                and bool(check.get("baseline_failure")) == bool(self.baseline and self.baseline.failure)
                and backends.built_by(check.get("compiler"), self.compiler)  # else it judged other code
                and not Kernel.retargeted(self.variant, check)):
            return False
        if self.baseline is not None and any(e.get("baseline") != self.baseline.configs.get(tuple(e["shape"]))
                                             for e in check["shapes"]):
            return False  # the heuristic changed since: the round's lead was over another config
        picked = {tuple(e["shape"]): e["best"] for e in check["shapes"]}
        return all(c[tuple(e["shape"])] in e.get("finalists", []) for e in check["shapes"] for c in configs) and (
            picked in configs or (self.baseline is not None and picked == self.baseline.configs))

    def _speculate(self, strategy, now: tuple) -> None:
        """On a cluster, measure the candidates the strategy will ask next (after ``now``) on the
        idle devices; their results wait until it asks (see :mod:`tunebench.cluster`). None while
        the machine is known busy (:data:`BUSY_STRIKES`): a device retries a trial with its pauses,
        where the task measures it once; none past the trial budget, which the search never asks."""
        workers, space = self.tuner.workers, self.variant.space
        if not hasattr(workers, "submit") or self.tuner.busy:
            return
        for key in self._upcoming(strategy, now, len(workers.devices)):
            config = space.config(key)
            for shape in self.bucket.shapes:
                slot = (shape, config_key(config))
                if workers.idle() == 0:
                    return
                if slot not in self._inflight and self._reusable(config, shape) is None:
                    self._inflight[slot] = workers.submit(TrialJob(
                        self.kernel.name, config, shape, self.dtype, self.tuner.settings, self._incumbent(shape)))

    def _upcoming(self, strategy, now: tuple, n: int) -> list[tuple]:
        """Up to ``n`` candidates the strategy will ask after ``now`` that the trial budget still
        pays for, counted as :func:`~tunebench.strategies.base.search` counts (those measured before
        too): a device's measurement or a build ahead spent past it is spent on a candidate never
        asked (at a task's end, a GPU host's 16 nvcc builds)."""
        trials = self.tuner.budget.trials
        paid = self._before.union(self.outcomes, [now])
        left = None if trials is None else trials - len(paid)
        keys = []
        for key in strategy.upcoming(n):
            if left is not None and key not in paid:
                if left <= 0:
                    continue
                left -= 1
            keys.append(key)
        return keys

    def _settle(self) -> None:
        """Wait for what the devices still measure for a strategy that did not ask for it, and
        drop it: the records stay what one device would have recorded."""
        for future in self._inflight.values():
            future.exception()
        self.tuner.discarded += len(self._inflight)
        self._inflight.clear()

    def _warm(self, first: int) -> list[tuple[tuple, float]]:
        """Results of this kernel on other buckets and devices, for the strategy to start from:
        of this device, those among its ``first`` trials."""
        t = self.tuner
        space = self.variant.space
        related = related_results(t.store.path.parent, self.kernel.name, t.target, self.dtype,
                                  self.variant.source_hash, (t.store.device, self.bucket.name), first)
        return [(space.key(c), score) for c, score in related if space.contains(c)]

    def progress_line(self) -> str:
        """Trials done of the budget (all from the records, where this run measured none), the best
        so far (the summary's estimator) and the time left."""
        if self.waiting:
            return (f"tunebench {self.label}: another run is tuning this task: waiting for it, to resume "
                    f"from what it records")
        trials, seconds = self.tuner.budget.trials, self.tuner.budget.seconds
        budget = min(trials, len(self.candidates)) if trials else len(self.candidates)
        row = self.summary_row()
        against = (f"{row['speedup']:.2f}x the heuristic" if row["speedup"] else
                   f"the heuristic: {self.baseline.status}" if self.baseline and self.baseline.status != "ok"
                   else "the heuristic not timed undisturbed" if self.baseline else "the heuristic not timed yet")
        found = (f"best {row['best_ms']:.4g} ms ({against}, "
                 f"{'confirmed' if row['confirmed'] else 'by trials, unconfirmed'})"
                 if row["best_ms"] and not row["served"] else
                 f"{row['served']} still served ({row['best_ms']:.4g} ms{', ' + against if row['speedup'] else ''}): "
                 f"no final round confirmed the trials' fastest ({row['trials_ms']:.4g} ms)"
                 if row["served"] and row["best_ms"] and row["trials_ms"] else
                 f"{row['served']} still served: no final round confirmed the trials' fastest" if row["served"]
                 else "best: none yet")
        done = len(self.outcomes)
        left = (seconds - self.elapsed() if seconds else None)
        if done and done < budget:
            by_trials = self.elapsed() / done * (budget - done)
            left = by_trials if left is None else min(left, by_trials)
        # its budget spent (by the trial just done): the search stops, its final round comes; no time
        # estimate where its trials cost none (a replay cache that records no time), a count instead
        spent = done >= budget or seconds is not None and self.elapsed() >= seconds  # as search() stops
        trials_left = f"{budget - done} trial{'s' if budget - done != 1 else ''} left"
        when = "the final round" if self.rounding else "done" if self.done else "the final round" if spent else \
            f"about {math.ceil(left)} s left" if left else trials_left
        recorded = ", all from the records" if done and not self.new else ""
        return f"tunebench {self.label}: {done}/{budget} trials{recorded}, {found}, {when}"

    def estimate(self, outcome: Outcome) -> float | None:
        """The bucket objective from whatever samples there are (early-stopped ones too)."""
        times = outcome.times
        return self.bucket.objective(times) if len(times) == len(self.bucket.shapes) else None

    def objective(self, outcome: Outcome) -> float | None:
        """The bucket objective of an outcome that may win: a time on every shape, undisturbed.
        A trial stopped early on one shape (5 % behind that shape's best so far) still counts by
        its samples: over several shapes it may lead the bucket, which only the final round,
        measuring it to the end, can tell (such a config never reached it, and the heuristic stayed
        where it was 1.5x faster)."""
        clean = all(t.get("verdict") != "disturbed" for t in outcome.trials.values())
        done = all(t["status"] in ("ok", "early_stopped") for t in outcome.trials.values())
        return self.estimate(outcome) if done and clean else None

    def ranked(self) -> list[tuple[float, tuple | None, Outcome]]:
        """(objective, key, outcome) of every outcome that may win, fastest first; the baseline's
        key is None."""
        ranked = [(self.objective(o), k, o) for k, o in self.outcomes.items()]
        if self.baseline is not None:
            ranked.append((self.objective(self.baseline), None, self.baseline))
        return sorted((r for r in ranked if r[0] is not None), key=lambda r: r[0])

    def best(self) -> tuple[tuple | None, Outcome] | None:
        """(key, outcome) of the winner: the final round's once it ran, else the fastest by trials."""
        if self.final is not None:
            return self.final
        ranked = self.ranked()
        return (ranked[0][1], ranked[0][2]) if ranked else None

    def _incumbent(self, shape: tuple) -> float | None:
        """The upper confidence bound of the fastest complete trial on ``shape`` so far."""
        done = [o.trials[shape] for o in (self.baseline, *self.outcomes.values())
                if o is not None and shape in o.trials and o.trials[shape]["status"] == "ok"]
        best = min(done, key=lambda t: t["stats"]["median"], default=None)
        return median_ci(best["samples"], self.tuner.settings.confidence)[1] if best else None

    # -- one config on every shape ------------------------------------------------------------
    def _evaluate(self, configs: Mapping[tuple, dict]) -> Outcome:
        trials = {}
        for shape, config in configs.items():
            t = self.tuner
            doc = self._reusable(config, shape)
            if doc is not None and doc["source_hash"] != self.variant.source_hash:  # of today's code: kept as today's
                doc = {**doc, "source_hash": self.variant.source_hash, "setup_hash": self.setup_hash,
                       "kept_from": doc["source_hash"]}
                t.store.add(doc)
                self.kept += 1
            if doc is not None:
                reused = (shape, config_key(config))
                if (self.label, *reused) not in t.measured and reused not in self._reused:  # the heuristic's: once
                    self._reused.add(reused)
                    self.reused_s += doc["cost_s"] if doc.get("cost_s") is not None else \
                        (doc.get("compile_time_s") or 0.0) + (doc.get("measure_s") or 0.0)  # kept before cost_s
                    self._mark = self.elapsed()
            else:
                doc = self._measure(config, shape)
                t.store.add(doc)
                t.measured.add((self.label, shape, config_key(config)))
                self.new += 1
            trials[shape] = doc
        return Outcome(dict(configs), trials)

    def _reusable(self, config: dict, shape: tuple, disturbed: bool = False) -> dict | None:
        """The recorded trial of this config on this shape, where it may stand for a measurement:
        recorded for this declaration (or an earlier source of today's code: see :meth:`earlier`),
        earlier in this run or else undisturbed (``disturbed``: or not, as the budget counts one
        disturbed, see :meth:`_measured_before`), not failed where failures are retried, and not at
        all under --tune-fresh."""
        t = self.tuner
        doc = t.store.lookup(self.kernel.name, self.variant.source_hash, shape, self.dtype, config, self.setup_hash)
        if doc is None and not t.fresh:  # one of an earlier source of today's code, where one is recorded
            doc = self._kept_trial(config, shape)
        if doc is None or (self.label, shape, config_key(config)) in t.measured:
            return doc
        if t.fresh or (doc.get("verdict") == "disturbed" and not disturbed) or \
                (t.retry_failed and doc["status"] in FAILED):
            return None
        if not backends.built_by(doc.get("compiler"), self.compiler) or Kernel.retargeted(self.variant, doc):
            return None  # another compiler's build, or another function of the template
        if doc["status"] in BUILD_VERDICTS and doc.get("build_key") != self._build_key(config):
            return None  # refused by another build of it: tunebench has built it otherwise since
        if t.settings.repeats is not None and doc["status"] in ("ok", "early_stopped") \
                and doc.get("repeats") != t.settings.repeats:
            return None  # --tune-repeats asks its fixed protocol of every trial it serves
        timeout = getattr(t.workers, "timeout", None)
        if doc["status"] == "timeout" and None not in (doc.get("timeout_s"), timeout) and doc["timeout_s"] < timeout:
            return None  # timed out under a shorter --tune-timeout than today's
        verified = doc.get("tolerances")  # each output's (dtype, rtol, atol); records before it kept none
        if verified and set(verified) == set(self.kernel.outputs):
            today = self.kernel.tolerances(self.dtype, {n: v[0] for n, v in verified.items()})
            if any(list(t) != verified[n][1:] for n, t in zip(self.kernel.outputs, today)):
                return None  # a tolerance that applies to an output of another dtype than the task's changed
        return doc

    def _kept_trial(self, config: dict, shape: tuple) -> dict | None:
        """The trial of this config on this shape recorded for the newest earlier source of
        today's code (see :meth:`earlier`), if any: a source is lexed only where it holds one, and
        today's built for the heuristic's config (:attr:`_refusal`) only where one would be kept (a
        finished task run again compiles nothing, its summary naming a comment edit undone too)."""
        for source, setup in self._earlier_sources:
            doc = self.tuner.store.lookup(self.kernel.name, source, shape, self.dtype, config, setup)
            if doc is not None and self.earlier(source) and not self._refusal:
                return doc
        return None

    def _recorded(self, config: dict) -> bool:
        """Whether the records hold a trial of ``config`` to reuse on every shape of the bucket:
        nothing of it is measured, so nothing is built ahead for it (a finished task resumed with
        an empty compile cache, as on a GPU machine lent afresh, compiled every candidate again)."""
        return all(self._reusable(config, shape) is not None for shape in self.bucket.shapes)

    def _measure(self, config: dict, shape: tuple) -> dict:
        t = self.tuner
        ahead = self._inflight.pop((shape, config_key(config)), None)
        if ahead is None:  # measured by this process's worker: a candidate may kill this run itself
            deaths = t.store.measuring(self._document(config, shape))
            if len(deaths) >= DEATHS:
                t.store.counted()
                return {**self._document(config, shape), "status": "crashed", "cost_s": 0.0, "retries": 0,
                        "error": f"{_died(deaths)}: recorded as crashed, not measured again (--tune-retry-failed "
                                 f"measures it)"}
        busy = bool(t.busy)  # an earlier task stopped on the busy machine: one measurement tells whether it still is
        try:
            result = ahead.result() if ahead is not None else undisturbed(
                t.workers, TrialJob(self.kernel.name, config, shape, self.dtype, t.settings, self._incumbent(shape)),
                known_busy=busy)
        except WorkerKilled as e:  # the candidate's doing or not, a death of this run at it (see DEATHS)
            if ahead is None and t.store.killed(e.signal):
                raise WorkerKilled(f"{e}, and records the config crashed where it is killed so in {DEATHS} runs in a "
                                   f"row (this was run {len(deaths) + 1})", e.signal) from None
            raise
        finally:  # ended, or interrupted (Ctrl-C is no death of the run)
            if ahead is None:
                t.store.measured()
        self.spent_s += result.pop("cost_s")
        t.remeasured += result["retries"]
        if result.get("left_behind"):
            t.left_behind.append(f"{self.label} [{config_text(config)}] on {shape}: {'; '.join(result['left_behind'])}")
        # what the trial took of the budget, all of it (the worker, loading, verifying, retries, the
        # search between trials): a run that reuses it counts that much spent (see elapsed)
        before, self._mark = self._mark, self.elapsed()
        doc = {**self._document(config, shape), **result, "cost_s": self._mark - before}
        t.trials_s += doc["cost_s"]
        for phase in PHASES:
            t.phases[phase] += doc.get(phase) or 0.0
        samples = doc["samples"]
        if samples:
            doc["stats"] = {**summarize(samples), "ci95": list(median_ci(samples))}
            t.measure_s += doc["measure_s"]  # warm-up and sampling; verifying is the same either way
            t.fixed_s += doc["measure_s"] + fixed_rest_s(doc.get("placements") or {"": samples})
            doc["spread"] = spread(samples)
            t.noisy += doc["spread"] > NOISY_SPREAD
        if doc.get("verdict") == "clean":  # not a timeout or a crash: with no samples, they say nothing of the machine
            t.busy = None  # quiet again: the trials after it are retried as on any machine
        if doc.get("verdict") != "disturbed":
            self.strikes, self.throttled = 0, None
        else:
            self.strikes += 1
            if doc.get("conditions", {}).get("throttled"):
                self.throttled = doc
        # the machine known busy and other load seen, at once or at the retry of a disturbance in the samples
        # alone: no more strikes (counted one, the task went on after a busy stop, its trials measured as noise)
        once = busy and bool(machine_signals(doc.get("conditions", {})))
        if self.strikes >= (1 if once else BUSY_STRIKES):
            t.store.add(doc)
            self.new += 1  # recorded, and measured now, though no outcome holds it
            self.cut_short, self.probed = doc, once
            raise MachineBusy(stopped(self.throttled or doc, self.strikes, result["retries"], once))
        return doc

    def _build_key(self, config: dict) -> str | None:
        """The key of the config's build as tunebench compiles it today (see :data:`BUILD_VERDICTS`)."""
        t = self.tuner
        return backends.build_key(t.target, t.fingerprint, self.variant, config, self.dtype)

    def _document(self, config: dict, shape: tuple) -> dict:
        t = self.tuner
        return {
            "kernel": self.kernel.name, "target": t.target, "device": t.store.device,
            "fingerprint": t.fingerprint, "source_hash": self.variant.source_hash, "setup_hash": self.setup_hash,
            "bucket": self.bucket.name, "shape": list(shape), "dtype": self.dtype, "config": config,
            "baseline": config == self.variant.baseline(shape, self.dtype),
            "status": None, "error": None, "max_error": None, "stats": None, "samples": [],
            "compile_time_s": None, "work": self._work(shape), "compiler": self.compiler, "entry": self.variant.entry,
            "build_key": self._build_key(config),
            "repeats": t.settings.repeats, "timeout_s": getattr(t.workers, "timeout", None),  # how it was measured
            "git_commit": t.commit, "git_dirty": self.dirty, "tunebench_version": __version__,
            "strategy": t.strategy, **({"strategy_options": t.strategy_options} if t.strategy_options else {}),
            "timestamp": now(),
        }

    def _work(self, shape: tuple) -> dict:
        k = self.kernel
        return {"flops": k.flops(shape) if k.flops else None,
                "bytes": k.bytes(shape, self.dtype) if k.bytes else None}

    def _file_texts(self) -> dict[str, str]:
        """The texts of the files the template keeps as their hash alone (see
        :attr:`~tunebench.kernel.Variant.file_texts`) whose hash it names: the records keep them
        with this version, and a file read otherwise (edited since) is another version's."""
        named = set(hashed_files(self.variant.template, self.variant.path.name).values())
        return {digest: text for digest, text in self.variant.file_texts.items() if digest in named}

    def _description(self) -> dict:
        return {"kernel": self.kernel.name, "target": self.tuner.target, "dtype": self.dtype,
                "bucket": self.bucket.name, "dims": list(self.kernel.buckets_for(self.tuner.target).dims),
                "range": self.bucket.describe(), "source_hash": self.variant.source_hash,
                "declaration": self.declaration, "setup_hash": self.setup_hash,
                "shaped": self.variant.space.shaped,  # for a lookup without the declaration to say it cannot check
                "flags": list(self.variant.flags),  # as declared: the gate builds the best with them again
                "compiler": self.compiler, "entry": self.variant.entry,
                "baseline": [{"shape": list(s), "config": self.variant.baseline(s, self.dtype)} for s in self.bucket.shapes]}

    # -- reporting ----------------------------------------------------------------------------
    def outcome(self, key: tuple) -> Outcome | None:
        """What this run measured of a candidate: the search's trial of it, or its measurement as
        the records' pick (a pick that fails now is the candidate's failure, not unsampled)."""
        if key in self.outcomes:
            return self.outcomes[key]
        return self.recalled[1] if self.recalled and self.recalled[0] == key else None

    def rate(self, objective_ms: float | None) -> tuple[float, str] | None:
        """GFLOP/s or GB/s at a bucket objective: the weighted geometric mean of the per-shape
        rates, which is that of the work per call over the objective; none where a shape has no
        work (a zero-sized dim), which a geometric mean cannot take."""
        rates = {s: self.kernel.throughput(s, self.dtype, 1.0) for s in self.bucket.shapes}
        if objective_ms is None or any(r is None or r[0] <= 0 for r in rates.values()):
            return None
        unit = next(iter(rates.values()))[1]
        return self.bucket.objective({s: r[0] for s, r in rates.items()}) / objective_ms, unit

    def summary_row(self) -> dict:
        """The task's line of the terminal summary (see :func:`tunebench.summary.table`): the
        final round's figures once it ran (medians over fresh processes), the trials' before."""
        outcomes = [*self.outcomes.values(),
                    *([self.recalled[1]] if self.recalled and self.recalled[0] not in self.outcomes else [])]
        best = self.best()
        best_key, best_outcome = best if best else (None, None)
        base_ms = self.objective(self.baseline) if self.baseline else None
        best_ms = self.objective(best_outcome) if best_outcome else None
        confirmed = self._confirmed()
        if confirmed is not None:
            best_ms, base_ms = confirmed
        served = None  # the config still served where the final round judged nothing: its figures, not the trials'
        check = self.check or {}
        # stopped (a busy machine, Ctrl-C) before a final round: the trials' fastest is no more confirmed
        # than after a disturbed round, and best(), the gate and the report serve what they served before
        unjudged = self.check is None and (self.busy is not None or self.interrupted[1] is not None or self.unasked)
        if check.get("disturbed") or check.get("problem") or unjudged:
            earlier = self._latest_confirmation() if check.get("disturbed") or unjudged else None
            if self._served(earlier):
                served = " | ".join(dict.fromkeys(config_text(e["best"]) for e in earlier["shapes"])) + self._of(earlier)
                confirmed = confirmed_ms(earlier, self.bucket)
                best_ms, base_ms = confirmed if confirmed else (None, base_ms)
            else:
                served, best_ms = "the baseline", base_ms
        # as declared: a task a busy machine stopped in the heuristic's own trials has no baseline outcome
        base_configs = [self.variant.baseline(s, self.dtype) for s in self.bucket.shapes]
        return {
            "kernel": self.kernel.name, "bucket": self.bucket.name, "dtype": self.dtype,
            "configs": len(outcomes),
            "new": self.new,
            "failed": sum(o.status in FAILED for o in outcomes),
            "early": sum(o.status == "early_stopped" for o in outcomes),
            "pruned": sum(o.status == "pruned_resources" for o in outcomes),
            # and the config a busy stop cut short (the heuristic's, where it stopped in its shapes), in no outcome
            "disturbed": len(self.stayed_disturbed(outcomes)) + (self.cut_short is not None),
            "deselected": self.deselected,
            "best_ms": best_ms, "best_rate": self.rate(best_ms),
            "baseline_ms": base_ms,
            "speedup": base_ms / best_ms if base_ms and best_ms else None,
            "confirmed": confirmed is not None,
            "best_config": served or ("-" if best is None else "the baseline" if best_key is None
                                      else config_text(self.variant.space.config(best_key))),
            "baseline_config": " | ".join(dict.fromkeys(config_text(c) for c in base_configs)) or "-",
            "served": served,  # and the trials' fastest, which a progress line names beside it
            "trials_ms": next(iter(self.ranked()), (None,))[0] if served else None,
        }

    def stayed_disturbed(self, outcomes) -> list[Outcome]:
        """Of the baseline and ``outcomes`` (see :meth:`once`), those with a trial that stayed
        disturbed by other load after its retries: no time of theirs is used."""
        return [o for o in self.once(outcomes) if any(t.get("verdict") == "disturbed" for t in o.trials.values())]

    def untimed(self) -> str | None:
        """Why a search that ran to its end judged nothing, where other load disturbed every config
        it timed on some shape of the bucket, without :data:`BUSY_STRIKES` in a row (a short
        search, or one shape disturbed each time): no task stopped, and the run passed as if it had
        tuned. Said as a busy stop: one item fails, the trials are kept, a later tune resumes. Not
        where the heuristic's config failed: that failure is the item's, and is to be fixed first."""
        stayed = self.stayed_disturbed(self.outcomes.values())
        if self.check is not None or self.ranked() or not stayed or (self.baseline and self.baseline.failure):
            return None
        trials = sum(t.get("verdict") == "disturbed" for o in stayed for t in o.trials.values())
        seen = "; ".join(next(t.get("interference", []) for t in stayed[-1].trials.values()
                              if t.get("verdict") == "disturbed"))
        return (f"no config was timed undisturbed on every shape of the bucket ({len(stayed)} config{'s' if len(stayed) != 1 else ''}, {trials} "
                f"trial{'s' if trials != 1 else ''}, stayed disturbed by other load after their retries, the last "
                f"by: {seen}), so none was judged: {self._kept()}; "
                f"{remedy(seen, 'tune again on a quieter machine', self.tuner.target)}: the trials are kept, and the "
                f"same command resumes the tune")

    def unconfirmed(self) -> str | None:
        """Why the final round could not judge the finalists (a failure, a disturbed machine), or
        why it judged them without the heuristic (its config fails), or why it had none to judge."""
        if self.done and self.busy is None and self.unasked:
            return (f"none of its {self.offered} candidates was selected (-k, --lf or node ids), so no final round "
                    f"ran: {self._kept()}; a run selecting them tunes it")
        check = self.check or {}
        if check.get("disturbed"):
            return (f"the final round confirmed nothing ({brief(check['problem'])}): {self._kept()}; "
                    f"{remedy(check['problem'], 'tune again on a quieter machine', self.tuner.target)}")
        if check.get("problem"):
            return f"the final round could not confirm a pick ({check['problem']}): the heuristic stays"
        if check.get("baseline_failure"):
            return (f"the heuristic's config fails ({check['baseline_failure']}): the fastest finalist is "
                    f"served instead, and the gate does not compare with it")
        return None

    def _kept(self) -> str:
        """What is served where this run judged nothing: the latest round's pick, if it still can be."""
        earlier = self._latest_confirmation()
        if self._served(earlier):
            return f"the pick of the round of {earlier['timestamp']} is still served"
        if earlier and earlier.get("winner") is not None:
            return f"the heuristic is served, the pick of the round of {earlier['timestamp']} being no longer in the space"
        return "the heuristic is still served"

    def _confirmed(self) -> tuple[float, float] | None:
        """(best, baseline) bucket objectives in ms from the final round, where it measured them."""
        return confirmed_ms(self.check, self.bucket)
