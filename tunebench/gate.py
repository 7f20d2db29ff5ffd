"""The performance gate: is a task's recorded best config still fast, and still worth it?

Timings drift by 10-35 % between runs and differ from one process to the next, so the gate
never trusts a raw ratio between today and the record, nor one process's interval. Per shape it
measures interleaved, in :attr:`GateSettings.processes` fresh worker processes
(:mod:`tunebench.compare`), today's best config against today's heuristic and, when the
template or the variant's flags changed, against the best built as recorded (the recorded
template, the tune's flags); every check is made on the per-process ratios:

- **best/baseline**: fails when the median ratio is beyond ``1 + threshold`` and every process
  saw the best slower than the heuristic.
- **best against the recorded source**, or **the tune's flags** (template or flags changed):
  the same rule on best/recorded. Flags that slow every config alike (``-O0``) pass
  best/baseline; they fail here. A recorded build that fails today (a flag this compiler
  refuses) is named and left out: it is no fault of today's code. A file the recorded build
  reads where it is (a source file of the flags, a header of the include folders), edited
  since, is read as the records keep its text (see :func:`_kept_texts`): a helper made 15 %
  slower slows every config alike, which only this check shows. Where the records keep its
  hash alone (records from before), the recorded build is left out: built with today's copy,
  it is not the recorded build (a helper's slowdown was held to itself, and its build cached
  as the tune's). Where the two builds hold the same machine code (an edit of comments or
  whitespace: see :mod:`~tunebench.backends.machine_code`), the check is not measured, as their
  ratio would be noise alone (one process read 1.097x against a 1.100x limit): it passes saying
  so, its verdict without ratios.
- **best/baseline against the tuning-time ratios** (template unchanged): the final round of the
  tune measured the same ratio in several fresh processes, and the trials minutes before it.
  Where today's ratio is beyond the highest of them by the threshold, the verdict says
  ``DRIFT``, and it never fails the item: with nothing changed, separate runs moved this ratio
  by 30 % on this project's own VM (0.37x at tuning time, 0.48x in one gate run of twenty), far
  more than the spread of the processes of one run. A regression is caught by the two checks
  above, which compare within each process.

A check whose median is beyond its limit but not every process agrees is ambiguous: more fresh
processes are measured, up to ``max_processes``; it then fails only if the median is beyond the
limit and every process is beyond the reference (1, or the highest tuning-time ratio), and is
otherwise ``UNSURE``: the item passes, its reason saying what was not settled.

Where the machine stayed disturbed by other load, the item is skipped with what was seen,
unless a process came out clean and a failing check clears its limit by more than the spread of
the processes (see :func:`trusted`); the
items after it measure without the retries (the machine is known to be busy) until a process
comes out clean.
Where the heuristic's time today is far from its recorded time, the machine is not the one that
tuned (or is not itself today): the tuning-time check is not made, and the verdict says so.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tunebench import __version__, backends
from tunebench.backends import cpuinfo, quota
from tunebench.backends.cpu import SHORT_CALL_MS, call_overhead_us
from tunebench.buckets import Bucket
from tunebench.compare import RETRIES, Comparison, compare, verified
from tunebench.device import threads_apart, threads_on
from tunebench.final_round import BUDGET_S, now
from tunebench.interference import remedy
from tunebench.kernel import (BINARY_SUFFIXES, Kernel, KernelError, Variant, changed_files, hashed_files,
                              unkept_files)
from tunebench.lookup import (Summary, failed_under, fits, heuristic_failed, kernel_renamed, latest_confirmation,
                              shape_times)
from tunebench.records import (EARLIER_NAME, FILE_TEXT_BYTES, SAME_MACHINE_CODE, NotWritable, RecordStore,
                               config_key, config_text, holds_back, stores, verdict_text)
from tunebench.replay import Replay
from tunebench.summary import brief

#: The heuristic's time today over its recorded time beyond which (or below whose inverse) the
#: machine is not the one that tuned the records.
OTHER_MACHINE = 1.5


@dataclass(frozen=True)
class GateSettings:
    threshold: float = 0.10  # a slowdown beyond 10 % is a regression
    processes: int = 3  # fresh processes measured at first ...
    max_processes: int = 7  # ... more while a check is ambiguous, up to this
    budget_s: float = BUDGET_S  # seconds of calls per process and shape

    def __post_init__(self):
        for name, kind, form in (("threshold", numbers.Real, "a number"), ("processes", numbers.Integral, "a count"),
                                 ("max_processes", numbers.Integral, "a count"), ("budget_s", numbers.Real, "a number")):
            value = getattr(self, name)  # a marker's processes=2.5 was a TypeError deep in the measuring
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ValueError(f"{name} {value!r}: {form}")
            # as plain numbers: an np.float32 threshold made a limit the records' JSON cannot hold
            object.__setattr__(self, name, int(value) if kind is numbers.Integral else float(value))
        if not 0 < self.threshold < 1:  # 1.10 would pass a kernel 2.1x slower: a ratio written for a fraction
            raise ValueError(f"threshold {self.threshold!r}: a slowdown fraction between 0 and 1 (0.10 fails a "
                             f"slowdown beyond 10 %, a ratio of 1.10)")
        if not 1 <= self.processes <= self.max_processes:
            raise ValueError(f"processes {self.processes!r}, max_processes {self.max_processes!r}: need "
                             f"1 <= processes <= max_processes")
        if not self.budget_s > 0:
            raise ValueError(f"budget_s {self.budget_s!r}: seconds of calls, above 0")


@dataclass
class GateRun:
    """What the gate items of one pytest run share: where they measure and what they read."""

    target: str
    fingerprint: dict
    store: RecordStore
    workers: object  # a tunebench.workers.Workers
    commit: str | None
    dirty: bool | None
    busy: bool = False  # the last item found every process disturbed


@dataclass
class Verdict:
    """One check on one shape: the per-process ratios, their median and what they mean."""

    what: str
    shape: tuple
    ratios: list[float]
    limit: float  # the ratio beyond which the check fails
    outcome: str  # "pass", "fail", "ambiguous", or "drift", "noisy" or "unsure" (informative, never a failure)
    #: Why a check passed unmeasured, without ratios: two builds of one config that hold the same machine code
    unmeasured: str = ""

    @property
    def median(self) -> float | None:
        """The median ratio; None where the check was not measured (see :attr:`unmeasured`)."""
        return statistics.median(self.ratios) if self.ratios else None

    def doc(self) -> dict:
        """The verdict as the records keep it (its ratio, :attr:`median`, is worked out again)."""
        return {"what": self.what, "shape": list(self.shape), "ratios": self.ratios, "limit": self.limit,
                "outcome": self.outcome, **({"unmeasured": self.unmeasured} if self.unmeasured else {})}

    def line(self) -> str:
        return f"{self.outcome.upper():9} {verdict_text(self.doc())}"


@dataclass
class GateResult:
    outcome: str  # "pass", "fail" or "skip"
    reason: str = ""
    verdicts: list[Verdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    comparisons: dict = field(default_factory=dict)  # shape -> Comparison
    configs: dict = field(default_factory=dict)  # shape -> label -> config

    def headline(self) -> str:
        """A failure in one line: all a CI's test report (JUnit's message, pytest's short summary)
        and the gate's summary show of it, so it names the check, the shape, the ratio and the limit."""
        failed = [v for v in self.verdicts if v.outcome == "fail"]
        if not failed:  # why nothing could be compared: a crash, a wrong result
            return self.reason
        leading = _leading(failed)  # the failure the advice is about
        # a heuristic changed since the tune that now beats the pick: no slowdown, and no "regression"; nor a call
        # to tune beside a slowdown of the build as tuned without a failure (through the noise, or unsure), which a
        # tune would record (see _held_back)
        retold = (all(v.what == "best/baseline" for v in failed)
                  and any(n.startswith("the heuristic changed since the tune") for n in self.notes)
                  and _held_back(self.verdicts, leading.shape) is None)
        what = "the heuristic, changed since the tune, now beats the tuned pick (tune again)" if retold else "regression"
        lead = leading.line().split(maxsplit=1)[1]
        more = len(failed) - 1
        return f"{what}: {lead}" + (f" (and {more} more FAIL line{'s' if more > 1 else ''})" if more else "")


def judge(ratios: Sequence[float], what: str, shape: tuple, limit: float, floor: float, final: bool) -> Verdict:
    """Pass while the median ratio is within ``limit``; fail when every process is beyond
    ``limit``, or, at the last measurement, when the median is beyond it and every process is
    beyond ``floor`` (what the ratio is without any change); else ambiguous, and at the last
    measurement unsure: no failure, but not the pass it was said to be (a median 1.5x beyond a
    1.1x limit read PASS where one process of seven saw no slowdown)."""
    med = statistics.median(ratios)
    if med <= limit:
        outcome = "pass"
    elif min(ratios) > limit or (final and min(ratios) > floor):
        outcome = "fail"
    else:
        outcome = "unsure" if final else "ambiguous"
    return Verdict(what, shape, list(ratios), limit, outcome)


def _arms(best: dict, baseline: dict | None, recorded: dict | None, as_recorded: dict | None) -> tuple:
    """The best, the heuristic, and the best built as recorded (``recorded``: the variant's
    fields that differ since the tune, its template text and its flags; ``as_recorded``: the
    config that build reads, see :func:`_recorded_config`), each where it is one."""
    arms = [("best", best, None)]
    if baseline is not None and baseline != best:
        arms.append(("baseline", baseline, None))
    if recorded and as_recorded is not None:
        arms.append(("recorded", as_recorded, recorded))
    return tuple(arms)


def _one_renamed(then: dict, today: dict) -> bool:
    """Whether ``today`` names one param of ``then`` otherwise, at the value ``then`` gives it
    (block:256 -> tile:256), and no other param otherwise (their values are the caller's to
    compare)."""
    lacking, new = then.keys() - today.keys(), today.keys() - then.keys()
    return len(lacking) == len(new) == 1 and then[min(lacking)] == today[min(new)]


def _recorded_config(today: dict, then: dict) -> dict | None:
    """The config the recorded template is built with, for today's ``today`` whose tune
    recorded ``then``: today's (a param added since is one the recorded template does not
    read), with each param of ``then`` that today's does not name at its value as tuned where
    that is what today's stands for: params removed alone, or one renamed that kept its value.
    Built with today's alone, a param renamed since (block -> tile) was a compile error of a
    kernel that has none, and a gate that judged nothing. None where it cannot be told (one
    renamed and given another value, several renamed, one removed and another added): given its
    value as tuned, a heuristic changed under a new name was measured as a slower template."""
    lacking = then.keys() - today.keys()
    if lacking and today.keys() - then.keys() and not _one_renamed(then, today):
        return None
    return {**today, **{p: then[p] for p in lacking}}


def recorded_best(store: RecordStore, kernel: Kernel, target: str, dtype: str,
                  bucket: Bucket) -> tuple[dict[tuple, dict], str] | None:
    """The config per shape the latest final round chose, and the source it was tuned with: the
    config ``best()`` serves. Trials no final round judged are never gated: nothing serves them.
    A round that kept the heuristic chose today's heuristic, as best() serves it: its config of
    the tune's day measured against a faster rule since failed the gate."""
    variant = kernel.variant(target)
    task = next(iter(store.tasks(kernel=kernel.name, target=target, dtype=dtype, bucket=bucket.name)), {})
    setup = kernel.setup_hash(variant, dtype, task.get("declaration"))
    check = latest_confirmation(store, kernel.name, target, dtype, bucket, variant.source_hash, setup, variant.entry)
    if check is None:
        return None
    rules = {tuple(e["shape"]): variant.baseline(tuple(e["shape"]), dtype) for e in check["shapes"]}
    if "winner" in check and check["winner"] is None:
        return rules, check["source_hash"]
    picks = {tuple(e["shape"]): e["best"] for e in check["shapes"]}
    if check.get("setup_hash", setup) != setup:  # a round of an earlier declaration: its pick may fail under today's
        failed, _ = failed_under(Summary.of(store), kernel.name, dtype, bucket, variant.source_hash, setup,
                                 list(rules.values()))
        if any(config_key(c) in failed for c in picks.values()):  # best() serves the heuristic
            return rules, check["source_hash"]
    return picks, check["source_hash"]


def _suites_of(kernel: Kernel, records_dir: Path) -> Path:
    """The folder of suites a renamed kernel's old name is looked for in: the project's suites
    beside its records where the kernel is declared there, else the folder that declares it (the
    run may have collected one suite of several: the others are read too)."""
    suites = records_dir.parent / "suites"  # as lookup.project has it, without its refusal of a folder not made yet
    declared = kernel.declared_in
    if declared is None or suites.is_dir() and suites.resolve() in declared.parents:
        return suites
    return declared.parent


def not_recorded(store: RecordStore, kernel: Kernel, bucket: Bucket, dtype: str) -> str:
    """Why there is nothing to gate, naming this device and those that have records of the kernel."""
    task = next(iter(store.tasks(kernel=kernel.name, bucket=bucket.name, dtype=dtype)), None)
    what = f"{kernel.name} {bucket.name} {dtype} on this device, {store.device}"
    command = kernel.tune_command(store.path.parent)
    rounds = store.checks(kernel=kernel.name, dtype=dtype, bucket=bucket.name, kind="tune")
    judged = [[tuple(e["shape"]) for e in c["shapes"]] for c in rounds]
    if judged and set(judged[-1]) != set(bucket.shapes):
        return (f"nothing to gate for {what}: the bucket's representative shapes changed since its final round, "
                f"which judged {', '.join(map(str, judged[-1]))}; `{command}` tunes it again")
    if rounds and rounds[-1].get("disturbed"):
        return (f"nothing to gate for {what}: its final round confirmed nothing ({brief(rounds[-1]['problem'])}), so best() "
                f"serves the heuristic; `{command}` on a quieter machine tunes it again")
    if task and any(len(t) == len(bucket.shapes) for t in shape_times(store, kernel.name, dtype, bucket,
                                                                      task["source_hash"]).values()):
        return (f"nothing to gate for {what}: its tune ended before its final round (interrupted, or the machine "
                f"too busy), or its round's check is gone from the records (removed by hand: `git log -p -- {store.path}` "
                f"shows it), so no pick is confirmed and best() serves the heuristic; `{command}` resumes the tune")
    shapes = set(bucket.shapes)
    triage = store.triage()
    # of this bucket's tunes: another bucket's on its shapes (its name before a rename) are none of its
    unsettled, ran = ([t for t in found if (t["kernel"], t["dtype"], t.get("bucket")) == (kernel.name, dtype, bucket.name)
                       and tuple(t["shape"]) in shapes and t["status"] in ("ok", "early_stopped")]
                      for found in (triage.unsettled, triage.latest))
    if unsettled:
        # a clean trial beside them (a tune stopped before it recorded the task) is no pick without a final round
        some = (f"{len(unsettled)} of its {len(ran)} trials that ran were" if len(ran) > len(unsettled) else
                f"its {len(unsettled)} trials that ran were" if len(unsettled) > 1 else "its 1 trial that ran was")
        then = ", and no final round confirmed a pick" if len(ran) > len(unsettled) else ""
        return (f"nothing to gate for {what}: {some} measured only while other load disturbed the machine{then}, so "
                f"best() serves the heuristic; `{command}` on a quieter machine measures again")
    if task:
        return (f"nothing to gate for {what}: it was tuned here, but no config completed every shape (the tune's "
                f"failures say why); tune it again once fixed")
    trials = store.trials(kernel=kernel.name, bucket=bucket.name, dtype=dtype)
    variant = kernel.variant(store.device.split("-", 1)[0])
    failed = heuristic_failed([t for t in trials if variant and t["source_hash"] == variant.source_hash])
    if failed:  # of today's template: one fixed since is no longer what stops the tune
        return f"nothing to gate for {what}: {failed}, which stops its tune: fix it, then `{command}`"
    if trials and variant and all(t["source_hash"] != variant.source_hash for t in trials):
        return (f"nothing to gate for {what}: its trials are of an earlier {variant.path.name} (or a header it "
                f"includes), and no tune of today's measured the heuristic; `{command}` tunes it, and says what "
                f"stops it")
    if trials:
        return (f"nothing to gate for {what}: its trials are recorded, but its tune stopped before it measured the "
                f"heuristic on every shape (the machine too busy, or interrupted); `{command}` resumes the tune")
    if store.orphan:  # "never tuned here" was false, and its command refused
        return f"nothing to gate for {what}: no records file; {store.orphan}"
    former = renamed_from(store, kernel, bucket, dtype)
    if former:
        return (f"nothing recorded for {what}: it is recorded as bucket {former!r} with the same range and shapes: "
                f"renamed? best() serves the heuristic for it until you name it {former!r} again, or run "
                f"`{command}` here to record it under its new name")
    target = store.device.split("-", 1)[0]  # another target's records are another kernel's code: not named
    records_dir = store.path.parent
    if not store.tasks(kernel=kernel.name, target=target, dtype=dtype):
        recorded_as = kernel_renamed(store.tasks(), kernel, target, dtype, records_dir, _suites_of(kernel, records_dir))
        if recorded_as:
            return f"nothing recorded for {what}: {recorded_as}"
    unread: list[str] = []
    readable = stores(store.path.parent, unread)
    card = f"{store.path.parent / store.device.rpartition('-')[0]}-"  # this card's file under an earlier id
    renamed = next((e for e in unread if e.startswith(card) and EARLIER_NAME in e), None)
    if renamed:  # a driver's version in the id, which this run's driver does not match: "never tuned here"
        return f"nothing recorded for {what}: {renamed}"
    others = [s for s in readable
              if s.path != store.path and s.tasks(kernel=kernel.name, target=target, bucket=bucket.name, dtype=dtype)]
    threads = [s for s in others if threads_apart(store.fingerprint or {}, s.fingerprint or {})]
    if threads:  # this machine, tuned with another thread count: the fix is in the CI's environment
        n, here = threads[0].fingerprint["threads"], store.fingerprint
        now, apart = f"{here['threads']}{threads_on(here)}", "thread counts" if n != here["threads"] else "core counts"
        return (f"nothing recorded for {what}: it is recorded with {n} thread{'' if n == 1 else 's'}"
                f"{threads_on(threads[0].fingerprint)} ({', '.join(s.device for s in threads)}); this run has {now} "
                f"({_thread_source()}), and timings do not carry across {apart}: {_as_tuned(n)}, or run `{command}` "
                f"here to record it with {now}")
    held = (f"; {store.path.parent} holds it for {', '.join(s.device for s in others)}: timings do not carry across "
            f"devices" if others else ": it was never tuned here")
    return f"nothing recorded for {what}{held}; run `{command}` here to record it"


def _thread_source() -> str:
    """What gave this run its thread count: OMP_NUM_THREADS, a cgroup's CPU quota below the cores
    allowed, or the cores."""
    given, found = os.environ.get("OMP_NUM_THREADS"), quota.limit()
    if given:
        return f"OMP_NUM_THREADS={given}"
    return f"the cgroup's CPU quota, {found}" if found and found.cpus < cpuinfo.cores_allowed() else \
        "the cores it may run on"


def _as_tuned(n: int) -> str:
    """How to gate the tune's ``n`` threads: OMP_NUM_THREADS alone only where this run may keep
    them busy; beside fewer cores they would share them, and under a smaller quota be throttled
    in every period (a gate that skips as too busy)."""
    allowed, found = cpuinfo.cores_allowed(), quota.limit()
    asked = f" with OMP_NUM_THREADS={n}" if os.environ.get("OMP_NUM_THREADS") else ""
    if n > allowed:
        return f"gate on {n} cores{asked} as it was tuned (taskset, a container's cpuset)"
    if found and n > found.cpus:
        return f"raise the limit to {n} CPUs{asked} as it was tuned"
    return f"gate with OMP_NUM_THREADS={n} as it was tuned"


def renamed_from(store: RecordStore, kernel: Kernel, bucket: Bucket, dtype: str) -> str | None:
    """The name a bucket is recorded under with today's range and representative shapes: its
    records, under their old name, serve no shape of it."""
    today = bucket.describe()
    return next((t["bucket"] for t in store.tasks(kernel=kernel.name, dtype=dtype) if t["bucket"] != bucket.name
                 and t["range"]["ranges"] == today["ranges"] and t["range"]["shapes"] == today["shapes"]), None)


def devices(store: RecordStore) -> list[RecordStore]:
    """Every readable records file beside ``store``'s, its own included: one that cannot be read
    (another device's, conflicted) is left out, not the others with it."""
    return stores(store.path.parent, unread=[])


def gate(store: RecordStore, workers, kernel: Kernel, variant: Variant, target: str, dtype: str,
         bucket: Bucket, settings: GateSettings, commit: str | None, busy: bool = False,
         dirty: bool | None = None) -> GateResult:
    """Re-measure one task's recorded best and decide (see the module docstring); ``busy``: an
    earlier item found the machine disturbed, so disturbed processes are not measured again;
    ``dirty``: the tree held uncommitted changes, kept with the run for the report's history."""
    retries = 0 if busy else RETRIES
    task = next(iter(store.tasks(kernel=kernel.name, target=target, dtype=dtype, bucket=bucket.name)), {})
    retargeted = kernel.retargeted(variant, task)
    if retargeted:  # as best() serves: the heuristic
        return GateResult("skip", f"nothing to gate for {kernel.name} {bucket.name} {dtype}: {retargeted}, so best() "
                                  f"serves the heuristic; `{kernel.tune_command(store.path.parent)}` tunes it")
    found = recorded_best(store, kernel, target, dtype, bucket)
    if found is None:
        return GateResult("skip", not_recorded(store, kernel, bucket, dtype))
    best, recorded_hash = found
    dims = kernel.buckets_for(target).dims
    gone = [(c, s) for s, c in best.items() if not variant.space.holds(c) or not fits(variant, c, s, dims)]
    if gone and best != {s: variant.baseline(s, dtype) for s in bucket.shapes}:  # as best() serves: not the pick
        config, shape = gone[0]
        why = ("is no longer in the space, so best() serves the heuristic" if not variant.space.holds(config) else
               f"breaks a constraint on {shape} today, so best() serves another config there")
        return GateResult("skip", (f"nothing to gate for {kernel.name} {bucket.name} {dtype}: the recorded pick "
                                   f"[{config_text(config)}] {why}; `{kernel.tune_command(store.path.parent)}` tunes it "
                                   f"again"))
    result = GateResult("pass")
    today = kernel.declaration(variant, dtype, task.get("declaration"))
    changed = [part for part in kernel.changed_since(variant, dtype, task.get("declaration"))
               if part != "template"]  # the template has its own note below
    compiler = backends.compiler(target, variant)
    compilers = (task["compiler"], compiler) if backends.built_otherwise(task.get("compiler"), compiler) else None
    if compilers:  # gcc for clang: every config's code
        changed.append(f"compiler ({compilers[0]} -> {compilers[1]})")
    tuned_flags = (task["declaration"]["flags"], today["flags"]) if "flags" in changed else None
    # the best built as recorded: the recorded template (its headers inlined, so no -I folder of the tune's is
    # read), with the tune's flags as declared where they changed (records from before those were kept hold only
    # their joined text, which cannot be split back)
    tune_flags = tuple(task["flags"]) if tuned_flags and task.get("flags") is not None else None
    setup = kernel.setup_hash(variant, dtype, task.get("declaration"))
    check = latest_confirmation(store, kernel.name, target, dtype, bucket, variant.source_hash, setup, variant.entry)
    recorded_text, kept, as_tuned, edited = None, None, "", []
    if recorded_hash != variant.source_hash:
        recorded_text = store.source(recorded_hash)
        edited = changed_files(recorded_text, variant.template, variant.path.name) if recorded_text else []
        built = dataclasses.replace(variant, flags=tune_flags) if tune_flags is not None else variant
        unkept = _unkept(built, recorded_text) if recorded_text else []
        kept = _kept_texts(store, recorded_text, variant.path.name, unkept) if unkept else None
        as_tuned = f" ({', '.join(unkept)} as tuned)" if kept is not None else ""
        why = ("the recorded source is not in the records, so it is" if not recorded_text else
               f"the records keep only the hash{'es' if len(unkept) > 1 else ''} of {', '.join(unkept)} as tuned, "
               f"so the recorded source cannot be built again, and is" if unkept and kept is None else None)
        result.notes.append(
            f"the template changed since the record ({recorded_hash} -> {variant.source_hash}"
            + (f": {', '.join(edited)} edited" if edited else "") + "); "
            + (f"{why} not compared with today's build"
               + ("" if tune_flags is not None else ", and only the baseline comparison is made")
               + (_texts_remedy(kernel, store, check, unkept) if unkept and kept is None else "") if why else
               "today's build is compared with the recorded one"
               + (f", built with {', '.join(unkept)} as tuned (the records keep "
                  f"{'their texts' if len(unkept) > 1 else 'its text'})" if as_tuned else "")))
        if why:
            recorded_text = None
    recorded = {}
    if recorded_text is not None or tune_flags is not None:
        recorded["text"] = recorded_text if recorded_text is not None else variant.template
    if tune_flags is not None:
        recorded["flags"] = tune_flags
    if kept is not None:
        recorded["files"] = kept
    against = "best against the " + " and ".join(
        what for what, held in (("recorded source", recorded_text is not None), ("tune's flags", tune_flags is not None))
        if held) + as_tuned
    if changed:
        result.notes.append(f"the {', '.join(changed)} changed since the tune: the gate measures with today's"
                            + (f", and holds today's build of the best to its build with the tune's flags "
                               f"[{tuned_flags[0]}]" if tune_flags is not None else "")
                            + f", and `{kernel.tune_command(store.path.parent)}` tunes the task again with them")
    # a pick whose final round judged another declaration (a re-tune under a broken reference confirmed nothing,
    # and took today's declaration into the task) is verified, as one that changed since the tune is; a round
    # from before rounds kept their declaration's hash judged the task's as recorded
    unconfirmed = check is None or check.get("setup_hash", setup) != setup
    reference = {tuple(e["shape"]): _reference(e) for e in check["shapes"]} if check else {}
    noisy = []
    rules = {tuple(e["shape"]): e["baseline"] for e in check["shapes"]} if check else {}  # the heuristic as tuned
    picks = {tuple(e["shape"]): e["best"] for e in check["shapes"]} if check else {}  # the config as tuned
    untold = False  # a shape's recorded template reads params whose values today's config cannot tell
    failing = rules if check and check.get("baseline_failure") else {}
    unverified = _unverified(workers, kernel, variant, dtype, bucket, best, dims)
    if unverified:  # a round that verified no finalist there is measured again by a tune, its trials reused
        fix = (_still_served(kernel, store, task, setup) if check and {tuple(s) for s in check.get("verify", [])}
               >= set(bucket.verify) else f"best() still serves it until the task is tuned again: "
               f"`{kernel.tune_command(store.path.parent)}` verifies its finalists there and adopts none that "
               f"fails, and commit the records")
        result.outcome, result.reason = "fail", f"{unverified}; {fix}"
        return _recorded(store, result, kernel, variant, target, dtype, bucket, setup, commit, dirty)
    for shape in bucket.shapes:
        baseline = variant.baseline(shape, dtype)
        # a param removed alone, or one renamed that kept its value, is the same rule: the recorded template
        # reads it at its value as tuned (see _recorded_config), and a slower edit fails against it
        retold = shape in rules and rules[shape] != baseline and not (
            all(baseline.get(p, v) == v for p, v in rules[shape].items())
            and (baseline.keys() <= rules[shape].keys() or _one_renamed(rules[shape], baseline)))
        if retold and best[shape] == baseline and check.get("winner", 0) is not None:  # today's rule is the pick
            result.notes.append(f"the heuristic changed since the tune on {shape} ([{config_text(rules[shape])}] -> "
                                f"[{config_text(baseline)}]) to the config its final round adopted: there is no "
                                f"other config to measure it against")
        elif retold and best[shape] == baseline:  # the round kept the rule of its day: best() serves today's
            result.notes.append(f"the heuristic changed since the tune on {shape} ([{config_text(rules[shape])}] -> "
                                f"[{config_text(baseline)}]), whose final round kept the old one: best() serves "
                                f"today's, so there is no other config to measure it against; "
                                f"`{kernel.tune_command(store.path.parent)}` tunes against it")
        elif retold:  # the tuning-time ratios were measured against the rule of the tune's day
            result.notes.append(f"the heuristic changed since the tune on {shape} ([{config_text(rules[shape])}] -> "
                                f"[{config_text(baseline)}]): the best is measured against today's, and not "
                                f"against the tuning-time ratios; `{kernel.tune_command(store.path.parent)}` tunes against it")
        if failing.get(shape) == baseline:  # known since the tune: no competitor, and no news
            result.notes.append(f"the heuristic [{config_text(baseline)}] is not measured on {shape}: it failed "
                                f"when tuned ({check['baseline_failure']})")
            baseline = None
        # the recorded text reads the names it was tuned with (today's template, where only the flags changed, today's)
        tuned = picks.get(shape, best[shape]) if recorded_text is not None else best[shape]
        as_recorded = _recorded_config(best[shape], tuned)
        lacking = ", ".join(sorted(tuned.keys() - best[shape].keys()))
        if recorded and lacking and as_recorded is not None:
            result.notes.append(f"the recorded template reads {lacking}, which today's config on {shape} does not "
                                f"name (renamed or removed since the tune): it is built with "
                                f"[{config_text(as_recorded)}], their values as tuned, today's build with "
                                f"[{config_text(best[shape])}]")
        elif recorded and as_recorded is None:
            untold = True
            result.notes.append(
                f"the recorded template reads {lacking}, which today's config on {shape} does not name, and today's "
                f"[{config_text(best[shape])}] is not the config as tuned [{config_text(tuned)}] with params removed "
                f"or one renamed: which of its values they stand for cannot be told, so the template's edit is not "
                f"judged there; `{kernel.tune_command(store.path.parent)}` tunes it again")
        arms = _arms(best[shape], baseline, recorded, as_recorded)
        result.configs[shape] = {label: config for label, config, _ in arms}
        comp = None
        # one arm where the declaration or the template changed (a tolerance, the args, the code): verified, as it
        # may fail today
        while len(arms) > 1 or changed or unconfirmed or recorded_hash != variant.source_hash:
            try:
                comp = compare(workers, kernel.name, shape, dtype, arms,
                               settings.processes if len(arms) > 1 else 1, settings.budget_s, retries=retries,
                               drop_same=("recorded", "best"))
            except KernelError as e:  # the arguments fit no arm's build: today's fault, unless only the record's
                if "recorded" not in result.configs[shape]:
                    raise
                why = (f"does not fit today's declaration ({e}; the build is of the template as recorded, called "
                       f"with today's arguments)")
            else:
                if not comp.failure or comp.failure["arm"] != "recorded":
                    break
                why = f"ended {comp.failure['status']} today ({comp.failure['error']})"
            # the record's build failed, not today's code: on this and every later shape, it is left out (where
            # today's does too, the comparison without it says so)
            result.notes.append(f"the {_arm_name('recorded', result.configs[shape])} on {shape} {why}: today's "
                                f"build is not compared with it")
            recorded, comp = {}, None
            arms = _arms(best[shape], baseline, recorded, as_recorded)
            del result.configs[shape]["recorded"]
        if comp is None:
            continue
        unmeasured = []  # after the measured checks of the shape, as they are listed where it is measured
        if comp.same_code:  # one config built into the same code twice: a measurement could tell noise alone
            arms = tuple(arm for arm in arms if arm[0] in comp.labels)
            unmeasured.append(Verdict(against, shape, [], 1 + settings.threshold, "pass",
                                      SAME_MACHINE_CODE))
            since = [f"{', '.join(edited)} edited" if edited else "the template edited"] if recorded_text else []
            since += [f"the flags [{tuned_flags[0]}] -> [{tuned_flags[1]}]"] if tune_flags is not None else []
            name = _arm_name('best', result.configs[shape])
            result.notes.append(f"today's build of the {name} on {shape} is the machine code of its build as "
                                f"recorded: what changed since the tune ({'; '.join(since)}) left the {name}'s machine "
                                f"code on {shape} as built from the recorded source, so the two are not measured "
                                f"against each other, as their ratio would be noise alone")
        if len(arms) == 1 and not comp.failure and not comp.same_code:
            result.notes.append(f"the {_arm_name('best', result.configs[shape])} on {shape} verified under "
                                f"today's declaration; nothing to measure it against")
            continue
        # the tuning-time ratios are best/baseline: none to hold where the heuristic is no arm (the pick, or failed)
        ref = reference.get(shape) if recorded_text is None and not retold and "baseline" in comp.labels else None
        entry = next((e for e in check["shapes"] if tuple(e["shape"]) == shape), {}) if check else {}
        if ref and not comp.failure and not _same_machine(store, kernel, recorded_hash, shape, dtype, baseline, comp,
                                                          result, entry, tuned_flags, compilers):
            ref = None
        while True:
            if comp.failure:
                f = comp.failure
                result.outcome = "fail"
                result.reason = (f"the {_arm_name(f['arm'], result.configs[shape])} on {shape} ended "
                                 f"{f['status']}: {f['error']}")
                if f["arm"] == "best" and best[shape] != variant.baseline(shape, dtype):
                    result.reason += "; " + _still_served(kernel, store, task, setup)
                elif f["arm"] == "best":  # the heuristic, served: where every config failed too, no tune helps
                    wrong = failed_under(Summary.of(store), kernel.name, dtype, bucket, variant.source_hash, setup,
                                         [variant.baseline(s, dtype) for s in bucket.shapes])[1]
                    result.reason += f"; {wrong}" if wrong else ""
                held = _held_back(result.verdicts, shape)  # an earlier shape's, slower without a failure
                if held is not None:
                    result.reason += "; but " + _held_back_text(held, result.configs)
                return _recorded(store, result, kernel, variant, target, dtype, bucket, setup, commit, dirty)
            final = len(comp.objectives) >= settings.max_processes
            verdicts = checks(comp, shape, settings.threshold, ref, final, against)
            if final or all(v.outcome != "ambiguous" for v in verdicts):
                break
            comp = compare(workers, kernel.name, shape, dtype, arms,
                           min(2, settings.max_processes - len(comp.objectives)), settings.budget_s, into=comp,
                           retries=retries)
        result.comparisons[shape] = comp
        short = min(comp.median(label) for label in comp.labels)
        if target == "cpu" and short < SHORT_CALL_MS:
            result.notes.append(f"short calls on {shape}: {short * 1e3:.2g} µs a call, each timed with the cost of a "
                                f"call from Python (about {call_overhead_us():.2g} µs here), so the threshold applies "
                                f"to the call, not the kernel: a slower kernel reads as a smaller ratio (give the "
                                f"bucket a larger representative shape)")
        if comp.disturbed and verdicts:  # the best alone (its recorded build the same code) has nothing to judge
            noisy.append(f"on {shape}: {comp.disturbed[0]}")
            verdicts = trusted(verdicts, comp)
        result.verdicts += verdicts + unmeasured
        if as_recorded is not None:  # its recorded time, under the names it was tuned with
            result.notes.append(_raw(store, kernel.name, recorded_hash, shape, dtype,
                                     {p: as_recorded[p] for p in tuned}, comp, entry))
        faster = [v for v in verdicts if v.what == against and recorded_text is not None and v.outcome == "pass"
                  and max(v.ratios) < 1 / (1 + settings.threshold)]
        if faster:  # a later slowdown up to this gain would pass against the old record
            result.notes.append(f"the template is faster than the recorded one on {shape} "
                                f"({faster[0].median:.2f}x in every process): "
                                f"`{kernel.tune_command(store.path.parent)}` and commit the records to hold the gate to it")
    if not result.verdicts and not noisy:  # a pass that measured nothing says why
        whom = "the heuristic failed when tuned" if failing else "the recorded best is the heuristic config"
        why = ("the template is unchanged" if recorded_hash == variant.source_hash else
               "the template it was tuned with reads params today's config cannot tell" if untold else
               "the build of the template it was tuned with failed today" if recorded_text is not None else
               "the template it was tuned with is not in the records")
        result.notes.append(f"nothing was measured: {whom} and {why}, so there is nothing to measure the best "
                            f"against in this run")
    failed = [v for v in result.verdicts if v.outcome == "fail"]
    unsure = [v for v in result.verdicts if v.outcome == "unsure"]
    if unsure and not failed and not noisy:  # a pass, said with what it could not settle
        result.reason = (f"{_unsure_text(unsure)}; run the gate again, on a quieter machine, or with more processes "
                         f"(gate_max_processes)")
    if failed:
        result.outcome = "fail"
        result.notes.insert(0, _fix(result.verdicts, against, result.configs, kernel, store))
        result.reason = "; ".join([*(" ".join(v.line().split()) for v in failed), result.notes[0]])
    elif noisy:
        result.outcome = "skip"
        seen = "; ".join(noisy)
        busy = remedy(seen, "run the gate on a quiet machine", target)
        # what was measured leads, then the advice, then what was seen (after every arm's samples, 700-2800
        # characters, "not gated (--gate-strict): machine too noisy ..." was rerun as a flaky job): a slowdown the
        # noise hid, or an unsure one, with its ratio; else that no check failed (naming a DRIFT beyond its own
        # limit, so the lead stays true beside that line), and why that is no verdict (true of a skip and of a
        # --gate-strict failure alike)
        through = [_through_the_noise(v, result.comparisons[v.shape]) for v in result.verdicts if v.outcome == "noisy"]
        measured = [*through, _unsure_text(unsure)] if unsure else through
        drift = [v for v in result.verdicts if v.outcome == "drift"]  # a note beyond its own limit, never a failure
        drifted = (f" ({' and '.join(f'{v.what} on {v.shape}' for v in drift)} drifted beyond "
                   f"{'its limit' if len(drift) == 1 else 'their limits'}, a note, never a failure)" if drift else "")
        result.reason = "; ".join([*(measured or [f"no check failed its limit through the noise{drifted}, but not "
                                                  f"judged, as the noise could hide a failure"]),
                                   f"machine too noisy to gate: {busy} ({seen})"])
    return _recorded(store, result, kernel, variant, target, dtype, bucket, setup, commit, dirty)


def _unverified(workers, kernel: Kernel, variant: Variant, dtype: str, bucket: Bucket, best: dict[tuple, dict],
                dims: Sequence[str]) -> str | None:
    """How the recorded pick fails on a verify shape of the bucket (see
    :class:`~tunebench.buckets.Bucket`), where best() serves it unmeasured: today's template or
    declaration may break it there, or its round predates the shape. The heuristic, served where no
    config was adopted, is the suite's own rule: not the tune's to verify."""
    pick = best[bucket.shapes[0]]
    if isinstance(workers, Replay) or best == {s: variant.baseline(s, dtype) for s in bucket.shapes}:
        return None
    for shape in bucket.verify:
        if not fits(variant, pick, shape, dims):  # recorded before the shape was added: no candidate since
            return (f"the best [{config_text(pick)}] breaks a constraint on verify shape {shape}, where best() serves "
                    f"another config, unverified")
        failure = verified(workers, kernel.name, shape, dtype, pick)
        if failure:
            return f"the best [{config_text(pick)}] on verify shape {shape} ended {failure['status']}: {failure['error']}"
    return None


def _leading(failures: list[Verdict]) -> Verdict:
    """The failure a failing item leads with, in its advice and its one line: today's build slower
    than its build as tuned where that failed too (the change's to fix, see :func:`_fix`), else the
    first. Led by best/baseline, the line a CI's report shows named the milder slowdown, a re-tune's
    to settle, beside advice about the other."""
    return next((v for v in failures if v.what.startswith("best against the ")), failures[0])


def _held_back(verdicts: list[Verdict], shape: tuple) -> Verdict | None:
    """A check that holds back a tune (see :func:`~tunebench.records.holds_back`), on ``shape``
    where one is: a failure beside it asks for a quiet gate first."""
    held = [v for v in verdicts if holds_back(v.what, v.outcome)]
    return next((v for v in held if v.shape == shape), held[0] if held else None)


def _fix(verdicts: list[Verdict], against: str, configs: dict[tuple, dict], kernel: Kernel,
         store: RecordStore) -> str:
    """What a failure among ``verdicts`` asks of the pull request, with which config and how much
    slower. Slower than its build as tuned is the change's to fix, first of all (where the pick
    lost its lead too): a re-tune would record the slower code as the reference, and the gate
    passes it from then on. A pick that no longer leads the heuristic alone is the tune's to
    replace, unless its build was measured slower than as tuned through the noise, or unsure (see
    :func:`_held_back`): then a quiet gate comes first."""
    failed = _leading([v for v in verdicts if v.outcome == "fail"])
    command = kernel.tune_command(store.path.parent)
    best = _arm_name("best", configs[failed.shape])
    if failed.what == against:
        return (f"today's build of the {best} takes {failed.median:.2f}x the time of its build as tuned on "
                f"{failed.shape}: fix what the change slowed; only where the slowdown is meant, `{command}` and "
                f"commit the records, which makes the slower code the reference")
    lost = f"the {best} takes {failed.median:.2f}x the heuristic's time on {failed.shape}, so it no longer leads"
    held = _held_back(verdicts, failed.shape)
    if held is not None:
        return f"{lost}; but {_held_back_text(held, configs)}"
    return f"{lost}: `{command}` picks again, and commit the records"


def _held_back_text(held: Verdict, configs: dict[tuple, dict]) -> str:
    """What a :func:`_held_back` check asks beside advice to tune (a lost lead, a crash's "picks
    another"): the report's note says not to tune, and so does the gate."""
    seen = ("a slowdown measured through the noise in every process" if held.outcome == "noisy" else
            "its median over the processes, though not every one saw it slower (unsure)")
    return (f"today's build of the {_arm_name('best', configs[held.shape])} takes {held.median:.2f}x the time of "
            f"its build as tuned on {held.shape}, {seen}: gate again on a quiet machine before a tune, which would "
            f"make the slower code the reference")


def _still_served(kernel: Kernel, store: RecordStore, task: dict, setup: str) -> str:
    """Where the recorded best fails today: best() reads the tune's trials and final round, never
    a gate run (kept as history), so it serves that config until the task is tuned again; a tune
    of an unchanged template and declaration reuses its recorded trial, so only a fresh one
    measures it again."""
    command = kernel.tune_command(store.path.parent) + (" --tune-fresh" if task.get("setup_hash") == setup else "")
    return (f"best() still serves it until the task is tuned again: fix what makes it fail, or `{command}` records "
            f"its failure and picks another, and commit the records")


def _unkept(built: Variant, text: str) -> list[str]:
    """The files the recorded template ``text`` keeps as their hash alone that its build, with
    the flags of ``built`` (the tune's, or the variant's), would read otherwise today (see
    :func:`~tunebench.kernel.unkept_files`): a file of the flags edited since the tune. One of
    the flags gone fails that build, which says so. A file only today's source names (a header
    its new ``#include`` reads, one of the name found in a folder searched earlier today: another
    CPATH folder, an -I folder ahead of the tune's) is none the recorded build reads (it reads
    the tune's copy of the other, searched ahead of every folder of its build: see
    :func:`~tunebench.kernel.kept_variant`): named, the gate said the recorded build was "built
    with  as tuned", or that the records keep only its hash."""
    try:
        found = unkept_files(text, built.template, built.path.name)
    except KernelError:
        return []
    hashed = hashed_files(text, built.path.name)
    return [file for file in found if file in hashed]


def _texts_remedy(kernel: Kernel, store: RecordStore, check: dict | None, unkept: list[str]) -> str:
    """How records from before file texts were kept get them: a tune of the template as tuned
    adds them to its source (a tune of today's files adds today's). A binary file (an object, a
    library) has no text to keep."""
    if all(Path(name).suffix in BINARY_SUFFIXES for name in unkept):
        return ""
    commit = (check or {}).get("git_commit")
    where = f"a checkout of the commit that tuned it ({commit[:12]})" if commit else "a checkout of its files as tuned"
    return (f" (records from before file texts were kept get them from `{kernel.tune_command(store.path.parent)}` on "
            f"{where}, reusing its trials, {FILE_TEXT_BYTES >> 10} KiB a version at most; commit the records)")


def _kept_texts(store: RecordStore, text: str, template: str, unkept: list[str]) -> dict[str, str] | None:
    """The records' texts of the files the recorded template ``text`` keeps as their hash alone,
    by the path it names them by (from the folder of ``template``), for its build to read as
    tuned wherever it is built (see :func:`~tunebench.kernel.kept_variant`: a cluster's device is
    another host). None where the records keep no text of a file of ``unkept`` (records from
    before kept none): the build would read today's."""
    hashes, texts = hashed_files(text, template), store.file_texts()
    if any(hashes[file] not in texts for file in unkept):
        return None
    return {file: texts[digest] for file, digest in hashes.items() if digest in texts}


def _reference(entry: dict) -> list[float] | None:
    """The tuning-time best/baseline ratios of a shape: one per fresh process of the final
    round's reference, and the trials' (minutes apart from those); records from before kept one."""
    found = list(entry.get("ratios") or ([entry["ratio"]] if entry.get("ratio") else []))
    if found and entry.get("trial_ratio"):
        found.append(entry["trial_ratio"])
    return found or None


def _arm_name(label: str | None, configs: dict) -> str:
    what = {"best": "recorded best", "baseline": "heuristic", "recorded": "recorded build of the best"}
    config = configs.get(label)
    return f"{what.get(label, label)} [{config_text(config)}]" if config is not None else label or "comparison"


def checks(comp: Comparison, shape: tuple, threshold: float, reference: list[float] | None,
           final: bool, against: str = "best against the recorded source") -> list[Verdict]:
    limit = 1 + threshold
    verdicts = []
    if "baseline" in comp.labels:
        vs_base = comp.ratios("best", "baseline")
        verdicts.append(judge(vs_base, "best/baseline", shape, limit, 1.0, final))
        if reference:  # informative: separate runs move this ratio by more than any threshold
            top = max(reference)
            verdict = judge(vs_base, f"best/baseline against the tuning-time ratios ({min(reference):.3f}-"
                                     f"{top:.3f}x)", shape, top * limit, top, True)
            verdicts.append(dataclasses.replace(verdict, outcome="drift" if verdict.outcome == "fail" else "pass"))
    if "recorded" in comp.labels:
        verdicts.append(judge(comp.ratios("best", "recorded"), against, shape,
                              limit, 1.0, final))
    return verdicts


def trusted(verdicts: list[Verdict], comp: Comparison) -> list[Verdict]:
    """The verdicts of a comparison some of whose processes stayed disturbed: a failure stands
    only where a process came out clean and it clears its limit by more than the spread of the
    processes; another is kept as ``noisy`` (in the records: the item is a skip), never a failure. Where every
    process stayed disturbed, none stands: a load on one core slows a multi-threaded config in
    every process alike (its threads wait at a barrier while a serial arm runs on the free
    core), a bias no spread shows: unchanged code read 1.57x. Nor for arms that look serial: an
    OpenMP arm's helper thread, starved by the load, counted as no thread of its own, and two
    serial arms of a true 1.05x read 0.54x-1.63x beside two spinning processes (a review's
    measurements). Nor for one config built two ways (the best against its build as recorded):
    beside two spinning processes, an OpenMP build of a serial template, about 0.45x its time,
    read 130.6-131.2x in three processes, and a comment added to a serial kernel of 5 ms calls
    1.26-1.32x; an OpenMP build whose process counted one thread and whose samples showed no
    load read 524x (docs/ci.md). A slowdown the noise hid is named in the skip's reason."""
    def beyond_noise(verdict: Verdict) -> bool:
        spread = (max(verdict.ratios) - min(verdict.ratios)) / verdict.median
        return min(verdict.ratios) > verdict.limit * (1 + spread)

    clean = len(comp.disturbed) < len(comp.objectives)
    return [v if v.outcome != "fail" or (clean and beyond_noise(v)) else dataclasses.replace(v, outcome="noisy")
            for v in verdicts]


def _through_the_noise(verdict: Verdict, comp: Comparison) -> str:
    """A failing check that :func:`trusted` kept as ``noisy``, as a skip's reason says it: the
    check and its ratio first, then that every process measured it (a failure's verdict), and why
    it does not fail. A skip that ended "measured through the noise: NOISY ..." was read as noise,
    not as a 2x slowdown seen in all three processes."""
    why = ("every process stayed disturbed, and a load can bias such a ratio alike in all of them"
           if len(comp.disturbed) == len(comp.objectives) else
           "it clears its limit by less than the spread of the processes")
    return (f"slower through the noise: {verdict_text(verdict.doc())}, measured in every process; "
            f"no verdict, as {why}")


def _unsure_text(unsure: list[Verdict]) -> str:
    """Checks left ``unsure``, each with its ratio and the processes' range: under load, a skip that
    said only "machine too noisy" left 1.02x and 1.8x alike."""
    tail = ("the median is beyond the limit, but not every process saw the best slower, so it does not fail"
            if len(unsure) == 1 else
            "each median is beyond its limit, but not every process saw the best slower, so they do not fail")
    return f"unsure: {' and '.join(verdict_text(v.doc()) for v in unsure)}: {tail}"


def _final_ms(entry: dict, config: dict) -> float | None:
    """``config``'s time in a final round's entry for a shape, where the round measured it: met
    alone with the other of the pair, else among the finalists (a median over fresh processes,
    where one trial's median may be a noisy one's)."""
    if config == entry.get("baseline"):
        return entry["confirmed_ms"][1] if "confirmed_ms" in entry else entry.get("baseline_ms")
    if config == entry.get("best") and "confirmed_ms" in entry:
        return entry["confirmed_ms"][0]
    finalists = entry.get("finalists", [])
    return entry["finalist_ms"][finalists.index(config)] if config in finalists and entry.get("finalist_ms") else None


def _recorded_ms(store: RecordStore, kernel: str, source_hash: str, shape: tuple, dtype: str, config: dict,
                 entry: dict) -> float | None:
    """``config``'s recorded time on ``shape``: the final round's, else its trial's median."""
    found = _final_ms(entry, config) if entry else None
    if found is not None:
        return found
    doc = store.lookup(kernel, source_hash, shape, dtype, config)
    return doc["stats"]["median"] if doc and doc.get("stats") else None


def _same_machine(store: RecordStore, kernel: Kernel, source_hash: str, shape: tuple, dtype: str, baseline: dict,
                  comp: Comparison, result: GateResult, entry: dict, flags: tuple[str, str] | None,
                  compilers: tuple[str, str] | None) -> bool:
    """Whether the heuristic's time today is near its recorded one; if not, say so, naming the
    compiler and the flags where they changed since the tune (``compilers``, ``flags``: the tune's
    and today's) ahead of the host: a build slower for every config alike passes best/baseline
    (-O0 made both 6.8x slower, gcc for clang 2x, and the note blamed the host)."""
    then = _recorded_ms(store, kernel.name, source_hash, shape, dtype, baseline, entry)
    if not then:
        return True
    ratio = comp.median("baseline") / then
    if 1 / OTHER_MACHINE <= ratio <= OTHER_MACHINE:
        return True
    rebuilt = ([f"the compiler changed since the tune ({compilers[0]} -> {compilers[1]})"] if compilers else []) + (
        [f"the variant's flags changed since the tune ([{flags[0]}] -> [{flags[1]}])"] if flags is not None else [])
    result.notes.append(
        f"the heuristic takes {ratio:.2f}x its recorded time on {shape}: "
        + (f"{' and '.join(rebuilt)}, which may build every config {'slower' if ratio > 1 else 'faster'} alike, a "
           f"change best/baseline cannot show; or " if rebuilt else "")
        + f"this machine matches the records' fingerprint but measures {'slower' if ratio > 1 else 'faster'} than "
        f"when they were tuned (another host of the type, a driver or OS update, or other load on one of the two "
        f"runs: on the tune's where today is faster), so best/baseline is not compared with the tuning-time "
        f"ratios; where this machine is to be the reference, run `{kernel.tune_command(store.path.parent)}` here")
    return False


def _raw(store: RecordStore, kernel: str, source_hash: str, shape: tuple, dtype: str, config: dict,
         comp: Comparison, entry: dict) -> str:
    """Today's best against its recorded time, directly: informative, drift and all."""
    then = _recorded_ms(store, kernel, source_hash, shape, dtype, config, entry)
    if not then:
        return f"no recorded trial of [{config_text(config)}] on {shape}"
    ms = comp.median("best")
    return f"raw, not interleaved: best on {shape} now {ms:.4g} ms, recorded {then:.4g} ms ({ms / then:.3f}x)"


def _recorded(store: RecordStore, result: GateResult, kernel: Kernel, variant: Variant, target: str,
              dtype: str, bucket: Bucket, setup: str, commit: str | None, dirty: bool | None) -> GateResult:
    """Keep the gate run in the records, for the report's history across commits (not on a
    read-only checkout: the plugin says so), with ``setup``, the declaration's hash its trials and
    final rounds carry: a shape it left unmeasured is its tune's build only where that is the
    tune's (an args builder changed since, the gate verified the best alone and kept no time)."""
    if store.read_only or store.unwritten:
        return result
    doc = {
        "kernel": kernel.name, "target": target, "dtype": dtype, "bucket": bucket.name, "kind": "gate",
        "source_hash": variant.source_hash, "setup_hash": setup, "outcome": result.outcome, "reason": result.reason,
        "shapes": [{"shape": list(s), "configs": result.configs.get(s, {}),
                    "objectives": result.comparisons[s].objectives if s in result.comparisons else [],
                    **({"best_ms": result.comparisons[s].median("best")} if s in result.comparisons else {})}
                   for s in bucket.shapes],
        "verdicts": [v.doc() for v in result.verdicts],
        "git_commit": commit, "git_dirty": dirty, "timestamp": now(), "tunebench_version": __version__,
    }
    try:
        store.add_check(doc)
    except NotWritable as e:  # a full disk: the verdict stands, and the plugin says it was not kept
        store.unwritten = str(e)
    return result
