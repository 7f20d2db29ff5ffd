"""The reviewer's report: ``report.md``, a self-contained ``report.html`` and PNG plots, made from
the record store alone (every task describes its bucket and baseline there).

Per device: a table of tuned against heuristic per (kernel, bucket, dtype) the suites declare (the
others named apart), the latest gate
verdicts, and four figures: the speedup of each task, its time history across commits (gate runs
and tuning confirmations, regressions and slowdowns measured through the noise marked), tuning
convergence (best so far against trial) and the distribution of its successful trials. ``compare``
adds what changed since a git revision.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import html
import io
import math
import os
import statistics
import subprocess
import tarfile
import tempfile
import textwrap
import warnings
from collections import Counter, defaultdict
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from tunebench.backends import built_otherwise  # noqa: E402
from tunebench.buckets import Bucket  # noqa: E402
from tunebench.device import describe, microarchitecture_known  # noqa: E402
from tunebench.kernel import Kernel, KernelError  # noqa: E402
from tunebench.lookup import (Choice, _load_once, _measured, _source_now, _times, confirmed_ms,  # noqa: E402
                              heuristic_failed, judged_by, latest_confirmation, lookup, project, this_device,
                              tune_command)
from tunebench.records import (SAME_MACHINE_CODE, RecordsError, RecordStore, config_key, config_text,  # noqa: E402
                               holds_back, records_files, revision, stores, unmerged, verdict_text)
from tunebench.summary import brief  # noqa: E402


#: How best()'s note on a pick tuned with an earlier template ends (see lookup's ``_ranking``).
TUNES_THIS_ONE = "and the gate checks the config on it"


@dataclass
class TaskView:
    """One (kernel, target, dtype, bucket) as the records tell it."""

    kernel: str
    target: str
    dtype: str
    bucket: Bucket
    source_hash: str
    objectives: dict[tuple, float]  # config key -> bucket objective, complete configs only
    baseline_ms: float | None
    statuses: dict[str, int]  # trial status -> how many trials (one per config and shape) ended so
    convergence: list[float]  # best objective so far after each complete config, in trial order
    configs: dict[tuple, dict]  # config key -> the config as recorded, in its params' order
    checks: list[dict] = field(default_factory=list)
    final: tuple | None = None  # the config key the final round of the latest tune chose
    confirmed: tuple[float, float] | None = None  # (best, heuristic) ms from that final round
    heuristic: frozenset = frozenset()  # the config keys the heuristic picks on the bucket's shapes
    served: Choice | None = None  # what best() serves on the bucket's first shape, where it answers
    spread: tuple[float, float] | None = None  # the speedup's lowest and highest over the final round's processes
    changed: str | None = None  # what of its declaration changed since its tune, which best() does not say
    turned_down: tuple[float, float] | None = None  # that range of the winner a round that kept the heuristic refused
    today_source: str | None = None  # the template's hash as a suite declares it today (None: the records alone)
    recorded: int = 0  # the trials the records hold of its bucket and template, on any shape and declaration
    compiler: str | None = None  # what built its latest tune's trials (None: records from before it was kept)

    @property
    def label(self) -> str:
        return f"{self.kernel}[{self.bucket.name}-{self.dtype}]"

    @property
    def best(self) -> tuple[tuple, float] | None:
        if self.final in self.objectives:
            return self.final, self.objectives[self.final]
        return min(self.objectives.items(), key=lambda kv: kv[1], default=None)

    @property
    def speedup(self) -> float | None:
        """The final round's, else the trials' (see :attr:`times`)."""
        best, base = self.times
        return base / best if best and base else None

    @property
    def heuristic_best(self) -> bool:
        """Whether the heuristic's own config is what is served: best() serves it, or (where it
        does not answer) the final round kept it or the trials ranked it first."""
        if self.served is not None:
            return self.served.source == "heuristic"
        if self.confirmed:
            return self.confirmed[0] == self.confirmed[1]
        return self.best is not None and self.heuristic == {self.best[0]}

    @property
    def served_config(self) -> dict | None:
        """The config served on the bucket: best()'s, else the final round's or the trials' best."""
        if self.served is not None:
            return self.served.config
        return self.configs[self.best[0]] if self.best else None

    @property
    def serves_final(self) -> bool:
        """Whether what is served is the latest final round's pick, whose processes' spread the
        table shows: not where its space no longer holds it (a range of 1.09x beside 1.00x)."""
        return self.served is None or self.final is None or config_key(self.served.config) == self.final

    @property
    def times(self) -> tuple[float | None, float | None]:
        """(best, heuristic) ms as best() gives them (the final round's where one confirmed the
        pick); where it does not answer, the final round's, else the trials' objectives."""
        if self.served is not None and self.served.objective_ms is not None:
            return self.served.objective_ms, self.served.baseline_ms
        if self.served is not None and self.served.source == "heuristic":  # its time, not a candidate's
            return self.served.baseline_ms, self.served.baseline_ms
        if self.confirmed:
            return self.confirmed
        best = self.best
        return (best[1] if best else None), self.baseline_ms

    @property
    def shown_spread(self) -> tuple[float, float] | None:
        """The range the table shows beside the speedup: the final round's of what is served, where
        it holds the speedup as shown. The two come from the round's records apart (the speedup
        from its published times, the range from its processes' ratios), and a hand edit of the
        times alone showed 2.48x (1.24-1.40)."""
        if not (self.spread and self.confirmed and self.serves_final and self.speedup):
            return None
        low, high = (round(x, 2) for x in self.spread)
        return self.spread if low <= round(self.speedup, 2) <= high else None

    @property
    def apart(self) -> str | None:
        """Why the table shows no range beside a speedup its final round's range does not hold."""
        if self.shown_spread or not (self.spread and self.confirmed and self.serves_final and self.speedup):
            return None
        return (f"its speedup, {self.speedup:.2f}x, lies outside the range its final round's processes measured "
                f"({self.spread[0]:.2f}-{self.spread[1]:.2f}): the speedup is of the times the round recorded, the "
                f"range of its processes' ratios, and a round records the two alike, so one of them was edited since "
                f"(by hand, or in a merge conflict resolved by hand): the table shows no range")

    @property
    def notes(self) -> list[str]:
        """What best() says of its answer (a template changed since the tune, a pick no final round
        confirmed, why the heuristic stayed), what else of the declaration changed since, and where
        the latest gate found the changed template slower (or measured it so without a failure,
        through noise too heavy to judge that check, or unsure: the gate's rule, see
        :func:`~tunebench.records.holds_back`), that a tune must not come first: said of an earlier
        source where the template changed again since that gate, which did not measure today's build, and that its
        slowdown is not in today's build where the template is back to its source as tuned."""
        said = [] if self.served is None else [self.served.note, self.served.reason
                                               if self.served.source == "heuristic" else None]
        if self.same_code:  # best()'s "tunes this one" beside it read as a slowed kernel's
            said[0] = self.same_code + said[0][said[0].index(TUNES_THIS_ONE) + len(TUNES_THIS_ONE):]
        said += [self.apart, self.unconfirmed_since]
        gate = self.last_gate or {}
        verdicts = gate.get("verdicts", [])
        against = [v["outcome"] for v in verdicts if v["what"].startswith("best against the ")]  # its source or flags
        holding = [v["outcome"] for v in verdicts if holds_back(v["what"], v["outcome"])]
        # beside best()'s "tunes this one", which a pull request that slowed its template took, and passed the gate
        failed = gate.get("outcome") == "fail"
        if failed and "fail" in against:
            seen, first = "its latest gate found {} slower than its build as tuned", "fix that first"
        elif holding:  # failed: on another check
            first = "gate again on a quiet machine before a tune"
            if "noisy" in holding:  # measured slower in every process, which the noise kept from a verdict
                seen = ("its latest gate failed, and measured {} slower than its build as tuned through the noise"
                        if failed else "its latest gate, too busy to judge it, measured {} slower than its build as "
                        "tuned in every process")
            else:  # unsure: its median beyond the limit, not every process slower
                seen = (f"its latest gate {'failed, and' if failed else 'was unsure: it'} measured {{}} slower than "
                        f"its build as tuned by its median, though not every process saw it slower")
        else:
            return [n for n in (*said, self.changed) if n]
        if self.today_source in (None, gate.get("source_hash")):
            build, then = "today's build", (f"{first}; a tune now would make the slower code the reference, and the "
                                            f"gate would pass it")
        else:  # the template changed again since that gate: what it measured is no longer today's build
            build = f"an earlier source's build ({f'at {revision(gate)}' if gate.get('git_commit') else 'outside git'})"
            then = "gate today's build before a tune, which would make it the reference"
        # reverted since to the source as tuned: that gate's slowdown is gone, and best()'s "tunes this one" too
        reverted = self.today_source == self.source_hash != gate.get("source_hash")
        held = (f"{seen.format(build)}, but the template is back to its source as tuned: that slowdown is not in "
                f"today's build" if reverted else f"{seen.format(build)}: {then}")
        before = [n for n in (*said, self.changed) if n]
        # "but" answers the note before it (best()'s "tunes this one"): first, it opens on nothing
        return [*before, f"but {held}" if before and not reverted else held]

    @property
    def unconfirmed_since(self) -> str | None:
        """Where the task's latest final round confirmed nothing (other load), and an earlier one's
        figures are shown: a re-tune that confirmed nothing showed them unmarked, as if it had."""
        rounds = [c for c in self.checks if c.get("kind") == "tune"]
        if not (rounds and rounds[-1].get("disturbed") and self.confirmed):
            return None
        return (f"its latest final round (at {revision(rounds[-1])}) confirmed nothing ({brief(rounds[-1]['problem'])}): "
                f"the figures are an earlier round's")

    @property
    def same_code(self) -> str | None:
        """Where best() serves a pick tuned with an earlier template and the latest gate, of
        today's, found its build the machine code of the build as tuned on every shape: what is
        said in place of best()'s "tunes this one", which a comment's edit and a slowed kernel
        alike were told."""
        gate = self.last_gate or {}
        against = [v for v in gate.get("verdicts", []) if v["what"].startswith("best against the ")]
        if not (self.served and self.served.note and self.served.note.startswith("tuned with an earlier")
                and TUNES_THIS_ONE in self.served.note
                and against and gate.get("source_hash") == self.today_source
                and all(v.get("unmeasured") == SAME_MACHINE_CODE for v in against)):
            return None
        return (f"tuned with an earlier template, and today's builds of the pick are its machine code as tuned, by "
                f"its latest gate (at {revision(gate)}): what changed since is comments or whitespace, and the pick "
                f"holds; a tune keeps its trials and records its round under today's template")

    @property
    def last_gate(self) -> dict | None:
        """The latest gate run of what is served now that judged it: a run that could not judge
        (skipped as too noisy, or unsure) does not replace one that did at the same commit before it
        (see :attr:`unjudged`), even with runs of other code between them (a branch gated meanwhile).
        A quiet failure rerun beside other load read "noisy: 1.52x slower", and no Regressions
        section listed it. Passed over are runs that could not judge and runs of another template: a
        judged run of this one (the newest run's, or today's) at another commit stops the walk, as a
        later quiet pass at another commit must not bring back an older failure at this one."""
        runs = self._gate_runs()
        newest = runs[0] if runs else {}
        templates = {newest.get("source_hash"), self.today_source or newest.get("source_hash")}
        for run in runs:
            if _judged(run) and _same_code(run, runs[0]):
                return run
            if _judged(run) and run.get("source_hash") in templates:
                break
        return runs[0] if runs else None

    @property
    def unjudged(self) -> list[dict]:
        """The gate runs after :attr:`last_gate`, at its commit, that could not judge it, newest first."""
        runs, last = self._gate_runs(), self.last_gate
        return [run for run in runs[:runs.index(last)] if _same_code(run, last)] if last is not None else []

    def _gate_runs(self) -> list[dict]:
        """The gate runs of what is served now, newest first: not one before the latest tune (it
        judged an earlier pick), one that measured another config (it judged another pick, a merged
        branch's), or one of other shapes (it judged the bucket before its representative shapes
        changed; today's gate skips it)."""
        tunes = [i for i, c in enumerate(self.checks) if c["kind"] == "tune" and not c.get("disturbed")]
        served = self.served_config  # checks are in the order made (a merge sorts them by time)
        shapes = set(self.bucket.shapes)
        found = []
        for check in reversed([c for c in self.checks[tunes[-1] + 1 if tunes else 0:] if c["kind"] == "gate"
                               and {tuple(e["shape"]) for e in c.get("shapes", [])} in (set(), shapes)]):
            measured = [e.get("configs", {}).get("best") for e in check.get("shapes", [])]
            if served is None or self.heuristic_best or all(m in (None, served) for m in measured):
                found.append(check)
        return found


def _judged(gate: dict) -> bool:
    """Whether a gate run judged what it measured: a failure, or a pass that settled every check
    (not one skipped as too noisy, nor a pass with a check unsure)."""
    return gate["outcome"] == "fail" or (gate["outcome"] == "pass" and all(
        v["outcome"] != "unsure" for v in gate.get("verdicts", [])))


def _same_code(one: dict, other: dict) -> bool:
    """Whether two gate runs measured the same code: one commit, clean in both (a dirty tree may
    hold other code from one run to the next), one template, and one declaration (its setup_hash:
    records older than it have none in either)."""
    return (bool(one.get("git_commit")) and one.get("git_commit") == other.get("git_commit")
            and not one.get("git_dirty") and not other.get("git_dirty")
            and one.get("source_hash") == other.get("source_hash")
            and one.get("setup_hash") == other.get("setup_hash"))


def task_views(store: RecordStore, suites: Path | None = None) -> list[TaskView]:
    """Every described task of a store; ``suites`` where the suites are not the project's ``suites/``."""
    views = []
    trials = store.trials()
    suites_dir = project(store.path.parent, suites)[1]
    kernels = _load_once(suites_dir)[1] if suites_dir.exists() else {}
    for task in store.tasks():
        decl = kernels.get(task["kernel"])
        bucket, today, setup_hash = judged_by(task, decl)  # as best() reads the task
        if bucket.name != task["bucket"]:  # a task added by hand, its range another bucket's: its own name, as the
            # records key it (it read as a second row of that bucket, and no suite was said not to declare it); a
            # copy renamed, as a key no bucket may take (large-copy) stopped the report
            bucket = copy.copy(bucket)
            bucket.name = task["bucket"]
        # the template of the final round best() reads: today's where one judged it (a template edited back
        # to one tuned before), else the latest tune's, which it serves until today's is tuned
        check = latest_confirmation(store, task["kernel"], task["target"], task["dtype"], bucket, today, setup_hash,
                                    task.get("entry"))
        source_hash = check["source_hash"] if check else task["source_hash"]
        mine = [t for t in trials if t["kernel"] == task["kernel"] and t["dtype"] == task["dtype"]
                and t["source_hash"] == source_hash and tuple(t["shape"]) in set(bucket.shapes)]
        # as best() ranks them: of the task's entry point, and of its declaration where a trial of it
        # ran to the end (a reference or args builder replaced since left its wrong results in the row)
        mine = [t for t in mine if task.get("entry") is None or t.get("entry") in (None, task["entry"])]
        declared = [t for t in mine if t.get("setup_hash") == task.get("setup_hash")]
        mine = declared if _measured(declared, task["kernel"], task["dtype"], source_hash) else mine
        times = _times(_measured(mine, task["kernel"], task["dtype"], source_hash), bucket)
        objectives = {k: bucket.objective(t) for k, t in times.items() if len(t) == len(bucket.shapes)}
        # the heuristic as tuned, on the tune's shapes: today's bucket may hold one it never ran on
        base = {tuple(b["shape"]): times.get(config_key(b["config"]), {}).get(tuple(b["shape"]))
                for b in task["baseline"]}
        statuses: dict[str, int] = defaultdict(int)
        for t in mine:
            statuses[t["status"]] += 1
        # a round that kept the heuristic measured its winner against it, and turned it down: that
        # range is the winner's, not the kept heuristic's (1.00x (1.01-1.07) read as its own)
        spread = _spread(check, bucket) if check else None
        kept = check is not None and check.get("winner", 0) is None
        views.append(TaskView(
            task["kernel"], task["target"], task["dtype"], bucket, source_hash, objectives,
            bucket.objective(base) if all(base.get(s) is not None for s in bucket.shapes) else None,
            dict(statuses), _convergence(mine, objectives),
            {config_key(t["config"]): t["config"] for t in mine},
            store.checks(kernel=task["kernel"], target=task["target"], dtype=task["dtype"],
                         bucket=task["bucket"]),
            config_key(check["shapes"][0]["best"]) if check else None, confirmed_ms(check, bucket) if check else None,
            frozenset(config_key(b["config"]) for b in task["baseline"]), _served(store, task, bucket, suites),
            None if kept else spread, _changed(task, decl, store.path.parent), turned_down=spread if kept else None,
            today_source=_source_now(decl.variant(task["target"]) if decl is not None else None),
            recorded=sum(t["kernel"] == task["kernel"] and t["dtype"] == task["dtype"] and t["source_hash"] == source_hash
                         and t.get("bucket") == task["bucket"] for t in trials), compiler=task.get("compiler")))
    return sorted(views, key=lambda v: (v.kernel, v.dtype, v.bucket.name))


def undescribed(store: RecordStore) -> list[str]:
    """Tasks with trials but no description: their tune stopped before the heuristic was timed on
    every shape (a busy machine, an interrupt, the heuristic's own failure). They have no row, and
    without this line no mention. Where the heuristic's own trial was disturbed or failed, it says
    so: "stopped before the heuristic ran" was untrue of a task whose one trial was the heuristic's."""
    described = {(t["kernel"], t["dtype"], t["bucket"]) for t in store.tasks()}
    trials: dict[tuple, list[dict]] = defaultdict(list)
    for t in store.trials():
        key = (t["kernel"], t["dtype"], t.get("bucket"))
        if key not in described:
            trials[key].append(t)
    lines = []
    for (kernel, dtype, bucket), found in sorted(trials.items(), key=lambda kv: tuple(map(str, kv[0]))):
        disturbed = sum(t.get("verdict") == "disturbed" for t in found)
        heuristic = sorted({tuple(t["shape"]) for t in found if t.get("baseline") and t.get("verdict") == "disturbed"})
        failed = heuristic_failed(found)
        why = (f"{failed}, which stops its tune" if failed else
               f"the heuristic's measurement on {', '.join(map(str, heuristic))} was disturbed by other load"
               if heuristic else "its tune stopped before the heuristic ran on every shape")
        lines.append(f"{kernel} {bucket} {dtype}: {len(found)} trial{'s' if len(found) != 1 else ''} recorded"
                     + (f" ({disturbed} disturbed by other load)" if disturbed else "")
                     + f", but {why}, so best() serves the heuristic; "
                     + ("fix it, then tune again" if failed else "a tune resumes it"))
    return lines


def damaged(store: RecordStore) -> list[str]:
    """Each damaged line of the store's journal or archive (a store opened ``skip_damaged``): the
    report shows the device's other records, which one such line hid, and names it, to be removed
    before these records are read otherwise (a tune stops on a damaged journal line; best() and
    the gate answer from the file as last read whole, or not at all)."""
    return [f"{why}; {store.device} is reported without it: remove the line before the next tune "
            f"(`{tune_command(None, store.path.parent)}`) or gate on this device" for why in store.damaged or []]


def unfolded(store: RecordStore) -> str | None:
    """The trials a run left in the journal (killed, or unable to write the file), where there are:
    the report counts them, as every reader does, but the records file a reviewer commits does not
    hold them until a pytest run on this device folds them in. Read only: the report folds nothing."""
    waiting = len(store.pending())  # measurements: a trial measured again is a line more
    if not waiting:
        return None
    held = f"{store.path.name} lacks {waiting} measurement{'s' if waiting != 1 else ''} counted here, still in its journal"
    if store.running():  # it folds them itself, every 30 s and as it ends
        return f"{held} {store.journal}: a run still going on this device folds them in as it ends"
    return (f"{held} {store.journal} (left by a run killed, or unable to write the file): the next pytest run on this "
            f"device folds the journal in (`{tune_command(None, store.path.parent)}` resumes the tune); run it "
            f"before committing {store.path.name}" + (", once its damaged lines are removed" if store.damaged else ""))


def untuned(store: RecordStore, records: Path, suites: Path | None) -> list[str]:
    """The tasks the suites declare for this device's target of which it holds nothing (a bucket
    or dtype a pull request added, a kernel never tuned here): the gate skips them and passes, and
    the report said nothing of them, as if every declared task were tuned. Those with trials are
    :func:`undescribed`'s."""
    suites_dir = project(records, suites)[1]
    kernels = _load_once(suites_dir)[1] if suites_dir.exists() else {}
    target = (store.fingerprint or {}).get("target")
    held = {(t["kernel"], t["dtype"], t["bucket"]) for t in store.tasks()} | {
        (t["kernel"], t["dtype"], t.get("bucket")) for t in store.trials()}
    lines = []
    for kernel in kernels.values():
        variant = kernel.variant(target) if target else None
        for bucket in kernel.buckets_for(target) if variant else []:
            lines += [f"{kernel.name} {bucket.name} {dtype}: best() serves the heuristic; "
                      f"`{kernel.tune_command(store.path.parent)}` tunes it"
                      for dtype in variant.dtypes if (kernel.name, dtype, bucket.name) not in held]
    return lines


def undeclared(views: list[TaskView], records: Path, suites: Path | None,
               unimported: Collection[str] = ()) -> tuple[list[TaskView], list[str]]:
    """The tasks no suite declares any more (a kernel renamed, a bucket or dtype removed), each
    with what is missing, and the others, as the export decides: it writes the suites' kernels,
    their target's buckets and dtypes (best() serves no other bucket or dtype of a declared kernel,
and answers for an undeclared kernel from the records alone). Where no suite is found (the
    records alone), every task is reported as declared; so is a task of a kernel in ``unimported``
    (today's) that no suite declares while some suite failed to import (a revision's suite that
    today's tunebench cannot import: its tasks are no more new since than the records are; a
    kernel undeclared then and now is no more dropped since)."""
    suites_dir = project(records, suites)[1]
    failed, kernels = _load_once(suites_dir) if suites_dir.exists() else ([], {})
    if not kernels:
        return views, []
    kept, gone = [], []
    for v in views:
        kernel = kernels.get(v.kernel)
        variant = kernel.variant(v.target) if kernel else None
        missing = ("the kernel" if kernel is None else f"its {v.target} variant" if variant is None else
                   "the bucket" if v.bucket.name not in {b.name for b in kernel.buckets_for(v.target)} else
                   "the dtype" if v.dtype not in variant.dtypes else None)
        if missing is None or (failed and kernel is None and v.kernel in unimported):
            kept.append(v)
        else:
            gone.append(f"{v.kernel} {v.bucket.name} {v.dtype}: {len(v.configs)} configs recorded, but no suite under "
                        f"{suites_dir} declares {missing}"
                        + (f" (these failed to import: {'; '.join(failed)})" if failed and kernel is None else "")
                        + (": best() still answers for it by name from the records alone, and an export leaves "
                           "them out" if missing in ("the kernel", f"its {v.target} variant") else
                           ": best() serves none of them, and an export leaves them out"))
    return kept, gone


def _served(store: RecordStore, task: dict, bucket: Bucket, suites: Path | None = None) -> Choice | None:
    """What best() serves on the bucket's first shape from these records (the project's suites
    beside them where there are, else the records alone): the report says what a framework gets.
    None where best() does not answer for this task (the error is its own to say)."""
    with warnings.catch_warnings():  # a report is no framework's launch: its notes carry what they say
        warnings.simplefilter("ignore")
        try:
            choice = lookup(task["kernel"], bucket.shapes[0], store.device, dtype=task["dtype"],
                            records=store.path.parent, suites=suites if suites and suites.is_dir() else None)
        except Exception:  # noqa: BLE001 - a declaration or records fault: the report shows the records
            return None
    return choice if choice.bucket == bucket.name else None


def _changed(task: dict, decl: Kernel | None, records: Path) -> str | None:
    """What the row says where its declaration changed since its tune but for the template (best()
    says that itself): best() serves the pick judged under the earlier without a word, and a
    reviewer saw no sign that its figures are another reference's, tolerance's or flags'."""
    variant = decl.variant(task["target"]) if decl is not None else None
    if variant is None or task["dtype"] not in variant.dtypes:
        return None
    try:
        changed = [p for p in decl.changed_since(variant, task["dtype"], task.get("declaration")) if p != "template"]
    except KernelError:  # shipped without its template: nothing to compare
        return None
    return (f"the {', '.join(changed)} changed since the tune: best() serves the config the tune chose under the "
            f"earlier declaration, and the gate measures it with today's; `{decl.tune_command(records)}` tunes the "
            f"task again") if changed else None


def _spread(check: dict, bucket: Bucket) -> tuple[float, float] | None:
    """The speedup's lowest and highest over a final round's fresh processes, the bucket objective
    of each shape's highest best/heuristic ratio and of each one's lowest: one figure hid that
    layernorm's 1.22x was 1.16x in one process and 1.52x in another. Each shape is measured in
    processes of its own, so the i-th processes of two shapes are no pair: read as one, they gave
    a stencil's published 5.96x a range of 5.97-6.19x, which left it out. A shape where the pick is
    its heuristic is not measured again (ratio 1.0, as the round judges the lead): left out, a
    bucket of several shapes showed no range."""
    entries = check["shapes"]
    ratios = [e.get("ratios") or ([1.0] if e["best"] == e["baseline"] else None) for e in entries]
    if not any(e.get("ratios") for e in entries) or None in ratios or any(
            "ratios" in e and "confirmed_ms" not in e for e in entries):  # records before a round kept its pair's times
        return None
    shapes = [tuple(e["shape"]) for e in entries]
    return (1 / bucket.objective(dict(zip(shapes, map(max, ratios)))),
            1 / bucket.objective(dict(zip(shapes, map(min, ratios)))))


def _convergence(trials: list[dict], objectives: dict[tuple, float]) -> list[float]:
    """Best objective so far, config after config, in the order their trials were recorded."""
    order = list(dict.fromkeys(config_key(t["config"]) for t in trials))
    best, out = math.inf, []
    for key in order:
        best = min(best, objectives.get(key, math.inf))
        out.append(best)
    return out


def _check_ms(check: dict, bucket: Bucket) -> float | None:
    """The best config's time in a final round (bucket objective of its per-shape medians over fresh
    processes, as it publishes them, see :func:`~tunebench.lookup.final_ms`; records from before
    them kept the samples instead); None where the round measured other shapes than the bucket's
    today (its representative shapes changed since): another objective's time."""
    medians = _tuned_ms(check)
    return bucket.objective(medians) if medians and set(medians) == set(bucket.shapes) else None


def _tuned_ms(check: dict) -> dict[tuple, float] | None:
    """A final round's published time of its pick per shape (see :func:`_check_ms`), None where a
    shape has none."""
    medians = {tuple(entry["shape"]): _entry_ms(check, entry) for entry in check["shapes"]}
    return None if None in medians.values() else medians


def _entry_ms(check: dict, entry: dict) -> float | None:
    """A final round's published time of its pick in its entry for a shape (see :func:`_tuned_ms`)."""
    if check.get("winner") is not None and "confirmed_ms" in entry:  # met alone with the heuristic: published
        return entry["confirmed_ms"][0]
    if check.get("winner") is not None and "finalist_ms" in entry:
        return entry["finalist_ms"][check["winner"]]
    if "winner" in check and "baseline_ms" in entry:
        return entry["baseline_ms"]
    return _sampled_ms(entry)


def _sampled_ms(entry: dict) -> float | None:
    """The best config's median sample in a check's entry for a shape: records from before
    published times kept the samples instead."""
    samples = sorted(entry.get("samples", {}).get("best") or [])
    return samples[len(samples) // 2] if samples else None


def _gate_ms(gate: dict, tune: dict | None, bucket: Bucket) -> tuple[float, str] | None:
    """A gate run's time of the best as its verdicts judged it and what its point is: "" where
    its tune's time is scaled on every shape (see :func:`_scaled_ms`); :data:`ESTIMATED` where
    some shapes have none to scale, each taken at its raw time (see :func:`_raw_ms`) times the
    day's drift, the geometric mean of scaled over raw time on the shapes that have both;
    :data:`RAW`, its raw time on every shape, where none has. Raw on some shapes and scaled on the
    others, the point was on neither scale: the objective, a geometric mean over the shapes, was
    the true point times the drift to the weight of the raw shapes. Where no shape has both to
    measure the drift on and one has no raw time (a shape left unmeasured as tuned, at the tune's
    time, or an old record's, kept before every compared shape had one), that mix is all there is,
    a hollow point too (:data:`RAW`): dropped, a passing run left the history. None where a shape
    has neither."""
    scaled = {shape: _scaled_ms(gate, tune, shape) for shape in bucket.shapes}
    if None not in scaled.values():
        return bucket.objective(scaled), ""
    raw = {shape: _raw_ms(gate, shape) for shape in bucket.shapes}
    if not all(scaled[shape] is not None or raw[shape] for shape in bucket.shapes):
        return None
    both = [shape for shape in bucket.shapes if scaled[shape] is not None and raw[shape]]
    if both:
        drift = statistics.geometric_mean([scaled[shape] / raw[shape] for shape in both])
        return bucket.objective({shape: raw[shape] * drift if scaled[shape] is None else scaled[shape]
                                 for shape in bucket.shapes}), ESTIMATED
    return bucket.objective(raw if all(raw.values()) else
                            {shape: raw[shape] or scaled[shape] for shape in bucket.shapes}), RAW


def _scaled_ms(gate: dict, tune: dict | None, shape: tuple) -> float | None:
    """A gate run's time of the best on ``shape`` as its verdict judged it there: ``tune``'s time
    times the median ratio of the check that decided it (the one that failed or was kept as noisy,
    else the best against its build as tuned, else against the heuristic). Its raw time drifts with
    the machine: a failed gate's 6.5 ms sat below its tune's 7.15 ms, its verdict 1.14x slower.
    None where that check has no tuned time to scale: the best against its build of another
    config than the tune's pick (a merged branch's), against another heuristic (changed since the
    tune), a check from before (against the tuning-time ratio), or a tune with no time of the
    shape. A check passed unmeasured (the same machine code) has no ratio. A shape the run left
    unmeasured as tuned is the tune's time (see :func:`_as_tuned`)."""
    entry = next((e for e in tune["shapes"] if tuple(e["shape"]) == shape), None) if tune else None
    if entry is not None and _as_tuned(gate, tune, entry):
        return _entry_ms(tune, entry) or None
    verdicts = [v for v in gate.get("verdicts", []) if tuple(v["shape"]) == shape and not v.get("unmeasured")]
    if entry is None or not verdicts:
        return None
    verdict = min(verdicts, key=lambda v: (v["outcome"] not in ("fail", "noisy"),
                                           not v["what"].startswith("best against the "),
                                           v["what"] != "best/baseline"))
    measured = next((e.get("configs", {}) for e in gate["shapes"] if tuple(e["shape"]) == shape), {})
    if verdict["what"].startswith("best against the ") and measured.get("best") == entry.get("best"):
        ms = _entry_ms(tune, entry)
    elif verdict["what"] == "best/baseline" and measured.get("baseline") == entry.get("baseline"):
        ms = entry["confirmed_ms"][1] if tune.get("winner") is not None and "confirmed_ms" in entry else \
            entry.get("baseline_ms")
    else:
        ms = None
    if not ms:
        return None
    # the median over its processes; records from before per-process ratios kept the median alone
    return ms * (statistics.median(verdict["ratios"]) if "ratios" in verdict else verdict["median"])


def _as_tuned(gate: dict, tune: dict, entry: dict) -> bool:
    """Whether a gate run that did not fail left the shape of the tune's ``entry`` unmeasured, as
    the gate does where the pick is today's heuristic there and its template is the tune's: the
    best alone, nothing to measure it against (no verdict, no time). Its build there is the
    tune's, so its time is the tune's: dropped, every passing run of a task whose round kept the
    heuristic left the history, and so did a run on a heuristic changed since to the pick on one
    shape. Only where its declaration's hash is the tune's too: an args builder changed since, the
    gate verifies the best alone too. A run recorded before gate records kept that hash (every
    record committed before it) is taken as the tune's, as the gate took the tune's own missing
    hash; dropped, such runs left the history. A failed run's may be the shape its best crashed
    on (its record does not say which)."""
    shape = tuple(entry["shape"])
    measured = next((e for e in gate["shapes"] if tuple(e["shape"]) == shape), {})
    return (gate.get("outcome") != "fail" and gate.get("source_hash") == tune.get("source_hash")
            and gate.get("setup_hash", tune.get("setup_hash")) == tune.get("setup_hash")
            and measured.get("configs") == {"best": entry.get("best")} and not measured.get("objectives")
            and "best_ms" not in measured and not any(tuple(v["shape"]) == shape for v in gate.get("verdicts", [])))


def _raw_ms(gate: dict, shape: tuple) -> float | None:
    """A gate run's own time of the best on ``shape`` (its median, records from before kept the
    samples), where :func:`_scaled_ms` has none to scale: dropped, a passing run after a heuristic
    change left its history empty. None where it did not measure the shape."""
    entry = next((e for e in gate["shapes"] if tuple(e["shape"]) == shape), None)
    return None if entry is None else entry["best_ms"] if "best_ms" in entry else _sampled_ms(entry)


# -- figures ----------------------------------------------------------------------------------
def _grid(n: int, title: str):
    cols = min(3, max(n, 1))
    rows = math.ceil(max(n, 1) / cols)
    # tight_layout leaves room for the caption's height, not for its distance from the top (2 % of a
    # tall figure's), nor for lines matplotlib wraps as it draws: the first row's titles ran under it.
    # Wrapped here (about 9 characters an inch), 0.1 in from the top, the figure taller by its lines
    # (one panel under a caption of six lines had no room left: tight_layout gave up).
    lines = "\n".join(textwrap.fill(line, int(9 * 4.6 * cols), break_on_hyphens=False) for line in title.split("\n"))
    height = 3.2 * rows + 0.2 * (lines.count("\n") + 1)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, height), squeeze=False)
    fig.suptitle(lines, y=1 - 0.1 / height)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat)


def _empty(ax, text: str) -> None:
    """Say why a panel has no data, on bare axes: matplotlib's default limits drew a 0-1 axis, or
    negative milliseconds, around nothing."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_speedup(views: list[TaskView], path: Path, device: str) -> Path:
    shown = [v for v in views if v.speedup]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(shown) + 1.5))
    ax.barh([v.label for v in shown], [v.speedup for v in shown],
            color=["tab:green" if v.speedup >= 1 else "tab:red" for v in shown])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.invert_yaxis()
    ax.set_xlabel("speedup of the tuned config over the heuristic (bucket objective;\n"
                  "* by the trials alone: no final round measured it)")
    ax.set_title(f"tuned vs heuristic, {device}")
    for i, v in enumerate(shown):
        ax.text(v.speedup, i, f" {v.speedup:.2f}x{'' if v.confirmed else '*'}", va="center")
    return _save(fig, path)


def history(view: TaskView) -> list[tuple[dict, float, str]]:
    """(check, ms of the best config, "" or what a gate run's point holds other than its tune's
    time as its verdicts scaled it: :data:`ESTIMATED` or :data:`RAW`) of every final round and
    gate run that has a time (see :func:`_gate_ms`), and of every failed
    gate run, which may have none (a wrong result, a crash): at the time before it. A round or
    gate run that other load disturbed (skipped as too noisy) is no point: its times are the
    load's; but a slowdown a skipped gate run measured through the noise is (a point of its own)."""
    points, last, tune = [], None, None
    for c in view.checks:
        if c.get("disturbed") or (c.get("outcome") == "skip" and not through_the_noise(c)):
            continue
        tune = c if c["kind"] == "tune" else tune
        ms, unscaled = (_check_ms(c, view.bucket), "") if c["kind"] == "tune" else \
            _gate_ms(c, tune, view.bucket) or (None, "")
        if ms is not None or c.get("outcome") == "fail":
            points.append((c, ms if ms is not None else last or 0.0, unscaled))
            last = ms if ms is not None else last
    return points


def through_the_noise(gate: dict | None) -> list[dict]:
    """The verdicts of a gate run kept as ``noisy``: a slowdown measured beyond its limit in every
    process of a machine too busy to judge it. The run is a skip, which the report showed as any
    other ("skip at 0b02385"), and a 1.20x slowdown the noise hid went unseen."""
    return [v for v in (gate or {}).get("verdicts", []) if v["outcome"] == "noisy"]


def failure_text(gate: dict, unjudged: list[dict] = ()) -> str:
    """A failed gate run's reason, with the slowdowns it measured through the noise beside its
    failure (another shape's, a busy process's): listed apart too, under a heading that says
    "neither a failure nor a pass", a failed task read as two findings, one of them no failure. One
    its reason names already (the slowdown of the build as tuned that holds back the tune its advice
    asks for, "takes 1.50x the time of its build as tuned on (2048,)") is not named twice. The
    slowdown of the latest run after it at its commit that could not judge (``unjudged``, newest
    first), a skip the row names ("noisy: 1.70x slower"), follows: it was named nowhere below the table.
    That run's is its own measurement, named unless its very verdict is: its 1.502x read "1.50x" as
    the failure's advice did of 1.498x, and was dropped as named already."""
    noisy = [v for v in through_the_noise(gate) if f"{statistics.median(v['ratios']):.2f}x the time of its build "
             f"as tuned on {tuple(v['shape'])}" not in gate["reason"] and verdict_text(v) not in gate["reason"]]
    text = gate["reason"] + (f"; also slower through the noise (the machine too busy to judge it): "
                             f"{'; '.join(map(verdict_text, noisy))}" if noisy else "")
    later = [v for v in through_the_noise(unjudged[0]) if verdict_text(v) not in text] \
        if unjudged and unjudged[0]["outcome"] == "skip" else []
    return text + (f"; a later run at it, too busy to judge, measured it slower through the noise: "
                   f"{'; '.join(map(verdict_text, later))}" if later else "")


def plot_history(views: list[TaskView], path: Path, device: str) -> Path:
    fig, axes = _grid(len(views), f"time of the best config across commits, {device}\n{HISTORY}")
    for ax, v in zip(axes, views):
        points = history(v)
        xs = range(len(points))
        ax.plot(xs, [ms for _, ms, _ in points], marker="o", color="tab:blue")
        for outcome, marker, color, label in (("fail", "X", "tab:red", "gate run failed"),
                                              ("skip", "D", "tab:orange", "gate run too noisy, slower through it")):
            marked = [(x, ms) for x, (c, ms, _) in zip(xs, points) if c.get("outcome") == outcome]
            if marked:
                ax.plot(*zip(*marked), linestyle="none", marker=marker, markersize=12 if marker == "X" else 8,
                        color=color, label=label)
        for label, marker in ((RAW, "o"), (ESTIMATED, "s")):  # hollow: not its verdicts' scaling alone (see HISTORY)
            hollow = [(x, ms) for x, (_, ms, unscaled) in zip(xs, points) if unscaled == label]
            if hollow:
                ax.plot(*zip(*hollow), linestyle="none", marker=marker, markersize=8, color="tab:blue",
                        markerfacecolor="white", label=label)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        many = len(points) > 6  # labels side by side ran into one another
        ax.set_xticks(list(xs), _run_labels([c for c, _, _ in points]),
                      fontsize=6 if many else 7, rotation=60 if many else 0)
        ax.set_title(v.label, fontsize=9)
        ax.set_ylabel("ms")
        if points:  # from zero: a change of a few per cent must not look like a cliff
            ax.set_ylim(0, 1.15 * max(ms for _, ms, _ in points))
        else:  # "no ... recorded" was untrue of runs kept of other shapes, or skipped
            _empty(ax, f"no data: none of its {len(v.checks)} final rounds and gate runs\ntimed today's shapes "
                       f"undisturbed" if v.checks else "no data: no final round or gate run recorded")
    return _save(fig, path)


def _run_labels(checks: list[dict]) -> list[str]:
    """Each run's commit and kind, numbered in order where runs share them: two gate runs at one
    commit were both "0b02385+dirty gate", the failed one and the one that passed after."""
    labels = [f"{revision(c)}\n{c['kind']}" for c in checks]
    shared, seen = Counter(labels), Counter()
    for i, label in enumerate(labels):
        seen[label] += 1
        labels[i] += f" #{seen[label]}" if shared[label] > 1 else ""
    return labels


#: What the history's points are, under its title.
HISTORY = ("final rounds: the time each published; gate runs: their tune's time x the median of the ratios of the "
           "check that decided them, interleaved in each process (the failing one, else against the build as tuned, "
           "else against the heuristic), not their raw time, which drifts with the machine, and on a shape they left "
           "unmeasured (the pick today's heuristic, the template and declaration the tune's) the tune's time; hollow: "
           "a gate run's raw time, where that check has no time of its tune to scale on any shape (another pick or "
           "heuristic than the tune's, a check against the tuning-time ratio, a tune without a time) or on none that "
           "has a raw time too (shapes left unmeasured, or untimed in an old record, beside the others raw); a "
           "hollow square, partly estimated: on the shapes with none, its raw time times the day's drift on the "
           "others (their scaled over their raw time, a geometric mean)")
#: A hollow point's legend: a gate run's raw time on every shape, none scaled by its verdicts, or where no shape has
#: both, each one's raw time else its scaled one (the tune's time where it left the shape unmeasured as tuned; see
#: :func:`_gate_ms`).
RAW = "raw time on shapes without a scaled one"
#: A hollow square's: some shapes scaled by its verdicts, the others by the day's drift on them (see :func:`_gate_ms`).
ESTIMATED = "partly estimated: some shapes by the day's drift"


def plot_convergence(views: list[TaskView], path: Path, device: str) -> Path:
    fig, axes = _grid(len(views), f"tuning convergence (by the trials' times, not the final round's), {device}")
    for ax, v in zip(axes, views):
        finite = [ms if math.isfinite(ms) else None for ms in v.convergence]
        ax.set_title(v.label, fontsize=9)
        ax.set_xlabel("trial (config)")
        ax.set_ylabel("best so far, ms")
        if not any(finite):
            _empty(ax, "no data: no config measured to the end")
            continue
        ax.step(range(1, len(finite) + 1), finite, where="post")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # a count of configs
        if v.baseline_ms:
            ax.axhline(v.baseline_ms, color="tab:orange", linestyle="--", label="heuristic")
            ax.legend(fontsize=7)
    return _save(fig, path)


def distribution_lines(view: TaskView) -> list[tuple[float, str, str, str]]:
    """(ms, colour, line style, label) of the figures drawn over a task's distribution. Where no
    final round confirmed a pick, the best line is the trials' fastest, marked unconfirmed: the
    table's best is then the heuristic best() serves, and drawn as "best" it sat on the heuristic's
    line with most configs well left of it. It is the config best()'s note names where it names
    one, which may have stopped early on a shape: the fastest run to the end drew another."""
    fastest = min(view.objectives.values(), default=None)
    named = view.served.unconfirmed_ms if view.served is not None else None
    best_ms, base_ms = view.times
    where = "final round" if view.confirmed else "trials"
    lines = []
    if view.confirmed and best_ms:
        lines.append((best_ms, "tab:green", "-", "best (final round)"))
    elif named or fastest:
        lines.append((named or fastest, "tab:green", "-", "best by its trials (unconfirmed)"))
    if base_ms:
        lines.append((base_ms, "tab:orange", "--", f"heuristic ({where})"))
    if view.confirmed and fastest:
        lines.append((fastest, "tab:green", ":", "best by its trials"))
    return lines


def plot_distribution(views: list[TaskView], path: Path, device: str) -> Path:
    """The configs' times by their trials, and the table's best and heuristic figures over them
    (the final round's where it ran: measured again, in fresh processes, they may lie elsewhere)."""
    fig, axes = _grid(len(views), f"configs measured to the end, by their trials (early-stopped ones left out), "
                                  f"and the table's figures, {device}")
    for ax, v in zip(axes, views):
        values = sorted(v.objectives.values())
        if values:  # one time alone: numpy's bins span it by 0.5 either side, in ms a negative time
            ax.hist(values, bins=min(30, max(5, len(values) // 3)), color="tab:gray",
                    range=(0.9 * values[0], 1.1 * values[0]) if values[0] == values[-1] else None)
        for ms, color, style, label in distribution_lines(v):
            ax.axvline(ms, color=color, linestyle=style, label=label)
        ax.set_title(f"{v.label}: {len(values)} config{'' if len(values) == 1 else 's'}", fontsize=9)
        ax.set_xlabel("bucket objective, ms")
        ax.set_ylabel("configs")
        if not values and not ax.lines:
            _empty(ax, "no data: no config measured to the end")
            continue
        ax.xaxis.set_major_locator(MaxNLocator(4))  # long tick labels of narrow ranges ran into one another
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count: 0.2 of a config is none
        if ax.get_legend_handles_labels()[0]:  # none drawn: an empty legend is matplotlib's warning
            ax.legend(fontsize=7)
    return _save(fig, path)


# -- the documents ----------------------------------------------------------------------------
def _rows(views: list[TaskView]) -> list[list[str]]:
    rows = []
    for v in views:
        served = v.served_config
        best_ms, base_ms = v.times
        gate = v.last_gate
        mark = "" if v.confirmed else "*"
        idle = gate and gate["outcome"] == "pass" and not gate.get("verdicts") and not any(
            e.get("objectives") for e in gate.get("shapes", []))  # a fail is never idle: a crash measures nothing
        rows.append([v.kernel, v.bucket.name, v.dtype, str(len(v.configs)),
                     f"{best_ms:.4g}{mark}" if best_ms else "-", f"{base_ms:.4g}{mark}" if base_ms else "-",
                     f"{v.speedup:.2f}x{mark}" + (f" ({v.shown_spread[0]:.2f}-{v.shown_spread[1]:.2f})"
                                                  if v.shown_spread else "") if v.speedup else "-",
                     ("the heuristic" + (f" (its final round turned down a winner measured at {v.turned_down[0]:.2f}-"
                                         f"{v.turned_down[1]:.2f}x)" if v.turned_down and v.serves_final else "")
                      if v.heuristic_best else config_text(served) if served else "-"),
                     ", ".join(f"{k} {n}" for k, n in sorted(v.statuses.items())
                               if k not in ("ok", "early_stopped")) or "-",
                     str(v.statuses.get("early_stopped", 0)),
                     _gate_text(gate, idle, v.unjudged) if gate else "-"])
    return rows


def _gate_text(gate: dict, idle: bool, unjudged: list[dict]) -> str:
    """A row's last gate: its outcome at its commit, and the later runs there that could not judge
    it (see :attr:`TaskView.last_gate`), the latest's outcome."""
    text = f"{_outcome(gate, idle)} at {revision(gate)}"
    if unjudged:
        later = "a later run" if len(unjudged) == 1 else f"{len(unjudged)} later runs"
        latest = _outcome(unjudged[0]) if unjudged[0]["outcome"] == "skip" else "unsure"
        text += f"; {later} at it could not judge ({latest})"
    return text


def _named_noisy(view: TaskView) -> dict | None:
    """The gate run whose slowdown through the noise the row names ("noisy: 1.20x slower"), to be
    listed below the table: the last gate, or the latest run after it that could not judge (a pass
    then a noisy skip at its commit named the skip's slowdown in the row alone). None beside a
    failure, which Regressions lists with its own and this one (see :func:`failure_text`)."""
    last = view.last_gate
    run = (view.unjudged or [last])[0]
    return run if last and last["outcome"] != "fail" and run["outcome"] == "skip" and through_the_noise(run) else None


def _outcome(gate: dict, idle: bool = False) -> str:
    """A gate run's outcome, and a slowdown it kept as noisy (a skip, never a pass)."""
    noisy = [statistics.median(v["ratios"]) for v in through_the_noise(gate)]
    return (f"noisy: {max(noisy):.2f}x slower" if noisy and gate["outcome"] == "skip" else
            f"{gate['outcome']}{' (nothing to measure)' if idle else ''}")


HEAD = ["kernel", "bucket", "dtype", "configs", "best ms", "heuristic ms", "speedup", "best config",
        "failed trials", "early trials", "last gate"]

#: What the table's times are, under it in both documents.
TIMES = ("Times are the bucket objective: the weighted geometric mean of the median times on the bucket's "
         "representative shapes, as the final round measured them (in fresh processes, under every buffer "
         "placement), the speedup's range over those processes in brackets (none from records older than the "
         "range, nor where it does not hold the speedup, which the notes say, nor beside a heuristic the round "
         "kept: the range it measured is of the winner it turned down, which the best config gives); * where the records hold no final round's times (none ran, or one from "
         "before they were kept) and the trials' are shown. The best config is what best() serves; the last "
         "gate, the latest gate run of it since its tune and the commit it ran at (an older commit's where a "
         "later gate measured nothing on this device), \"noisy: 1.20x slower\" where that run was skipped as too "
         "noisy but measured a slowdown through the noise (its check's median ratio, listed below the table: under "
         "Regressions, beside the failure, where a failure at that commit stands); a run that could not judge "
         "(skipped as too noisy, or unsure) after one that did at the same commit does not replace it, and is "
         "named after it.")


LEGEND = ("configs: every config measured on the bucket's shapes with this source and declaration (args builder, "
          "reference, tolerance, outputs), by every run, the heuristic's included; failed trials: the trials (one "
          "per config and shape) that failed, by status; early trials: the trials stopped once clearly slower than "
          "the best so far, as the search means to (trials, not configs: a config stopped on two shapes counts twice).")


#: The heading of the tasks whose latest gate run measured a slowdown through the noise, and what it means.
NOISY = "Slowdowns measured through the noise (latest gate run: kept as noisy, neither a failure nor a pass)"
NOISY_WHY = ("The machine was too busy for the gate to judge these checks, though every process measured the best "
             "slower and their median is beyond the limit: gate again on a quiet machine before trusting its speed.")


LEGACY = ("These records were made before the microarchitecture was fingerprinted: the gate never runs on "
          "them again, and their last gate is history, judged by the rules of its day.")


def _markdown_table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


#: A change of a best's time since --compare's revision beyond this is flagged, where no
#: threshold is given: the gate's default (the command line gives the project's, from its ini).
FLAGGED = 0.10


def _before(old: RecordStore, views: list[TaskView]) -> dict[tuple, TaskView]:
    """A revision's task views by (kernel, dtype, bucket), as a comparison takes them: from records
    made before final rounds, best() then served the trials' best, unconfirmed, not the heuristic
    it serves on them today."""
    legacy = not old.checks(kind="tune")
    return {(v.kernel, v.dtype, v.bucket.name): dataclasses.replace(v, served=None) if legacy else v for v in views}


def _changes(before: dict[tuple, TaskView], views: list[TaskView],
             threshold: float = FLAGGED) -> tuple[list[list[str]], int]:
    """A row per task whose best changed since ``before`` (:func:`_before`: a revision's tasks,
    judged by the suites as they were then: a space that no longer holds the pick must read as a
    change), its time as a signed change, + slower, which the speedup's ``x`` would read the other
    way round, or that is gone since (its bucket, dtype or kernel no longer declared or recorded) or
    has no time now, and how many tasks did not change. A row is flagged where its lead over the heuristic moved
    beyond ``threshold``: the two are measured in one run, and times of separate runs drift by as
    much (by its time only where a lead is unknown, or where the task was tuned again on another
    template: a slowdown of the template slows the heuristic too, and leaves the lead as it was);
    * marks a figure no final round confirmed. A task whose best is the same is a row too where
    :func:`_edits` finds its heuristic's time, its lead or its trials changed."""
    before = dict(before)
    rows, same, notable = [], 0, threshold
    for v in views:
        was = before.pop((v.kernel, v.dtype, v.bucket.name), None)
        now, then = v.served_config, was.served_config if was else None  # what best() serves, then and now
        now_ms, then_ms = v.times[0], was.times[0] if was else None
        if was is not None and then_ms is None and now_ms is None and now == then:  # nothing timed, then or now
            same += 1
            continue
        if was is None or then is None or then_ms is None:
            rows.append([v.kernel, v.bucket.name, v.dtype, "-", _ms(now_ms, v), _lead(was, v),
                         "new task" if was is None else "nothing timed then", ""])
            continue
        what = "same config" if now == then else (
            f"{'the heuristic' if was.heuristic_best else config_text(then)} -> "
            f"{'the heuristic' if v.heuristic_best or now is None else config_text(now)}")
        edited = was.source_hash != v.source_hash  # tuned again on another template: both of its arms slow alike
        what += ", template changed" if edited else ""
        if now is None or now_ms is None:  # a pick timed then and none now (its shapes or space changed since)
            dropped = not was.heuristic_best and (now is None or v.heuristic_best)
            rows.append([v.kernel, v.bucket.name, v.dtype, _ms(then_ms, was), "-", _lead(was, v),
                         f"{what}, nothing timed now", "**dropped**" if dropped else ""])
            continue
        change = now_ms / then_ms - 1
        edits = _edits(was, v, timed=bool(round(change, 2)))
        what += "".join(f", {e}" for e in edits)
        if now == then and round(change, 2) == 0 and not edits:  # the table's figures: a change it would show as +0%
            same += 1
            continue
        lead = bool(was.speedup and v.speedup)
        moved = was.speedup / v.speedup - 1 if lead else change  # + : it leads by less
        # the words of what moved: a best 42 % faster whose heuristic got faster still read **slower**
        worse, better = ("**lead shrank**", "lead grew") if lead else ("**slower**", "faster")
        flag = worse if moved > notable else better if moved < -notable else ""
        if not flag and edited and change > notable:  # a slower template's lead over its own heuristic held
            flag = "**slower, template changed**"
        shown = change if round(change, 2) else 0.0  # under half a per cent: +0%, never -0%
        rows.append([v.kernel, v.bucket.name, v.dtype, _ms(then_ms, was), f"{_ms(now_ms, v)} ({shown:+.0%})",
                     _lead(was, v), what, flag])
    for was in before.values():  # a pick a framework got then, and gets no more
        tuned = was.served_config is not None and not was.heuristic_best
        rows.append([was.kernel, was.bucket.name, was.dtype, _ms(was.times[0], was), "-", _lead(was, None),
                     f"gone: {'the heuristic' if not tuned else config_text(was.served_config)} then, no row now",
                     "**dropped**" if tuned else ""])
    return rows, same


def _edits(was: TaskView, now: TaskView, timed: bool) -> list[str]:
    """What changed of a task beside its best's config and time (``timed``: that time changed, as
    its row shows, with the lead beside it), as the table would show it (not +0%): its heuristic's
    time, else its lead, trials removed (records only grow: fewer is a hand edit or a lost merge)
    and the served config's own trials gone, and the bucket's range or representative shapes
    (best() serves another bucket on shapes that left it). A hand edit that doubled the heuristic's time (a faked
    2.48x from 1.24x) read as unchanged, its best's config and time the same. A compiler changed
    since comes first: it moves every config's time (clang's -64% read as the tune's gain)."""
    edits = [f"compiler {was.compiler} -> {now.compiler}"] if built_otherwise(was.compiler, now.compiler) else []
    base_then, base_now = was.times[1], now.times[1]
    if not timed and base_then and base_now and round(base_now / base_then - 1, 2):
        edits.append(f"heuristic {base_then:.4g} -> {base_now:.4g} ms")
    elif not timed and was.speedup and now.speedup and round(was.speedup / now.speedup - 1, 2):
        edits.append(f"speedup {was.speedup:.2f}x -> {now.speedup:.2f}x")
    edits += [f"range {d} {_bounds(was.bucket.ranges.get(d))} -> {_bounds(now.bucket.ranges.get(d))}"
              for d in dict.fromkeys([*was.bucket.ranges, *now.bucket.ranges])
              if was.bucket.ranges.get(d) != now.bucket.ranges.get(d)]
    if list(was.bucket.shapes) != list(now.bucket.shapes):
        edits.append(f"shapes {', '.join(map(str, was.bucket.shapes))} -> {', '.join(map(str, now.bucket.shapes))}")
    if was.bucket.verify != now.bucket.verify:  # a pick then wrong on one may be another now: said beside its time
        edits.append(f"verify shapes {', '.join(map(str, was.bucket.verify)) or 'none'} -> "
                     f"{', '.join(map(str, now.bucket.verify)) or 'none'}")
    if was.source_hash == now.source_hash:  # one template's trials: another's are another count
        # all of them, as records only grow: the row's own (today's shapes and declaration) read a shape dropped
        # since, and tuned again without it, as trials removed
        removed = was.recorded - now.recorded
        edits += [f"{removed} trial{'s' if removed != 1 else ''} removed"] if removed > 0 else []
        served = now.served_config
        if served is not None and config_key(served) in was.configs and config_key(served) not in now.configs \
                and was.bucket.shapes == now.bucket.shapes:
            edits.append("the served config's trials removed")
    return edits


def _bounds(bounds: tuple | None) -> str:
    """A dim's range as a bucket's repr writes it (``4097..``: no upper bound), ``-`` where none."""
    return "-" if bounds is None else f"{bounds[0]}..{'' if bounds[1] is None else bounds[1]}"


def _ms(ms: float | None, view: TaskView) -> str:
    return f"{ms:.4g}{'' if view.confirmed else '*'}" if ms else "-"


def _lead(was: TaskView | None, now: TaskView | None) -> str:
    """The speedup over the heuristic then and now, as the main table shows it."""
    return " -> ".join(f"{v.speedup:.2f}x{'' if v.confirmed else '*'}" if v and v.speedup else "-" for v in (was, now))


@contextmanager
def records_at(revision: str, records: Path, root: Path) -> Iterator[Path | None]:
    """The records folder as it was at a git revision, in its project as it was then (the folder
    above it: its suites and kernel sources, which say what best() served then), or None where
    the folder did not exist; a revision git does not know is a :class:`ValueError` naming it.
    The copy lives in a temporary folder for the ``with`` block only."""
    known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], cwd=root,
                           capture_output=True, text=True)
    if known.returncode != 0:
        raise ValueError(f"--compare {revision}: not a git revision of {root}")
    top, here = root.resolve(), records.resolve()
    with tempfile.TemporaryDirectory(prefix="tunebench-report-") as folder:
        then = _extracted(revision, here.relative_to(top).as_posix(), root, folder)
        if then is None:
            moved = _moved_from(revision, here, top)
            then = _extracted(revision, moved, root, folder) if moved else None
        yield then


def _extracted(revision: str, at: str, root: Path, folder: str) -> Path | None:
    """The records folder ``at`` (relative to the repository's top) with its project as they were at
    ``revision``, extracted into ``folder``; None where it did not exist then."""
    project_dir = (Path(at).parent if at != "." else Path(at)).as_posix()  # a records-only repository's
    tree = subprocess.run(["git", "archive", "--format=tar", revision, "--", project_dir], cwd=root,
                          capture_output=True)
    if tree.returncode == 0:  # else the project's folder did not exist then
        with tarfile.open(fileobj=io.BytesIO(tree.stdout)) as tar:
            tar.extractall(folder, **({"filter": _inside} if hasattr(tarfile, "data_filter") else {}))
    then = Path(folder, at)
    return then if then.is_dir() else None


def _moved_from(revision: str, records: Path, top: Path) -> str | None:
    """Where the records folder was at ``revision``, where git finds its records files renamed since
    (`git mv records perf/records`): read at today's path, the revision held none, and every task
    read as new since it. Else the folder that held most of today's records files by name then (a
    file re-tuned since, grown beyond git's rename detection, is no rename to it)."""
    diff = subprocess.run(["git", "diff", "-M", "--name-status", "-z", "--diff-filter=R", revision, "--"], cwd=top,
                          capture_output=True)
    fields = os.fsdecode(diff.stdout).split("\0")
    for status, old, new in zip(fields[0::3], fields[1::3], fields[2::3]):
        if status.startswith("R") and new.endswith(".json") and (top / new).parent == records:
            return Path(old).parent.as_posix()
    listed = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", revision, "--"], cwd=top,
                            capture_output=True)
    names = {p.name for p in records_files(records)}
    held = Counter(Path(f).parent.as_posix() for f in os.fsdecode(listed.stdout).split("\0")
                               if Path(f).name in names)
    return held.most_common(1)[0][0] if held else None


def _inside(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's ``data`` filter (Python 3.11.4+), a member it refuses left out rather than the
    report ended: a link to an absolute path or out of the project (``/usr/include/stdio.h``)."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def _old_store(folder: Path | None, path: Path, revision: str, root: Path) -> RecordStore | str | None:
    """A device's records file in the folder :func:`records_at` gave: None where it did not exist
    then, and why where it cannot be read, naming it as ``REV:path`` (not the temporary copy)."""
    old = folder / path.name if folder is not None else None
    if old is None or not old.exists():
        return None
    try:
        return RecordStore(old)
    except RecordsError as e:
        named = f"{revision}:{path.resolve().relative_to(root.resolve()).as_posix()}"
        return str(e).replace(str(old), named).replace(str(old.parent), f"{revision}:{path.parent.name}")


def write(records: Path, out: Path, compare: str | None = None,
          suites: Path | None = None,
          threshold: float = FLAGGED) -> tuple[list[Path], list[str], list[str], list[str]]:
    """Write report.md, report.html and the PNG figures under ``out``: their paths, why each
    records file that cannot be read is left out (the report of the others is made, and says so),
    each device's :func:`unfolded` trials and its :func:`damaged` lines, for the terminal too;
    ``threshold``: the gate's, beyond which ``compare`` flags a lead that moved."""
    out.mkdir(parents=True, exist_ok=True)
    conflicted = unmerged(records)
    unreadable, notes, broken = list(conflicted.values()), [], []
    found = [s for s in stores(records, unreadable, skip_damaged=True) if s.path.resolve() not in conflicted]
    if not found:
        raise RecordsError(unreadable[0]) if unreadable else FileNotFoundError(f"no records file under {records}")
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=records, capture_output=True)
    except OSError:  # no git here: a report without --compare needs none
        top = subprocess.CompletedProcess([], 1, b"", b"")
    if compare and top.returncode != 0:  # "not a git revision of" it blamed the revision
        raise ValueError(f"--compare {compare}: {records} is not in a git repository")
    root = Path(os.fsdecode(top.stdout.strip()) or records)  # a path's bytes, as any other path is read
    md, body, written = ["# tunebench report", ""], ["<h1>tunebench report</h1>"], []
    if unreadable:
        md += ["**Not reported**, as their records file cannot be read:", ""] + [f"- {e}" for e in unreadable] + [""]
        body += ["<p><b>Not reported</b>, as their records file cannot be read:</p><ul>"] + [
            f"<li>{html.escape(e)}</li>" for e in unreadable] + ["</ul>"]
    with records_at(compare, records, root) if compare else contextlib.nullcontext() as then:
        then_suites = _suites_at(then, records, suites)
        here = _here()  # this machine's device first: a reviewer of several devices' records read another's first
        for store in sorted(found, key=lambda s: (s.device != here, not microarchitecture_known(s.fingerprint or {}))):
            views, gone = undeclared(task_views(store, suites), records, suites)
            device = store.device
            fp = store.fingerprint or {}
            md += [f"## {device}", "", f"{fp.get('target', '?')}: {describe(fp)}", ""]
            body += [f"<h2>{html.escape(device)}</h2>", f"<p>{html.escape(describe(fp))}</p>"]
            lines = damaged(store)  # after the views, which read every trial
            if lines:  # before the table, which lacks them
                broken += lines
                md += ["**Damaged records**:", ""] + [f"- {line}" for line in lines] + [""]
                body += ["<p><b>Damaged records</b>:</p><ul>"] + [f"<li>{html.escape(line)}</li>" for line in lines] + [
                    "</ul>"]
            waiting = unfolded(store)
            if waiting:  # before the table, whose figures count them
                notes.append(waiting)
                md += [f"**Unfolded journal**: {waiting}", ""]
                body += [f"<p><b>Unfolded journal</b>: {html.escape(waiting)}</p>"]
            rows = _rows(views)
            md += [TIMES, "", _markdown_table(HEAD, rows), "", LEGEND, ""]
            body += [f"<p>{html.escape(TIMES)}</p>", _html_table(HEAD, rows), f"<p>{html.escape(LEGEND)}</p>"]
            gated = microarchitecture_known(fp)  # a legacy file's last gate runs are history: none runs again
            if not gated and any(v.last_gate for v in views):
                md += [LEGACY, ""]
                body += [f"<p>{html.escape(LEGACY)}</p>"]
            failing = [v for v in views if gated and v.last_gate and v.last_gate["outcome"] == "fail"]
            if failing:
                md += ["### Regressions (latest gate run)", ""] + [
                    f"- **{v.label}** (at {revision(v.last_gate)}): {failure_text(v.last_gate, v.unjudged)}" for v in failing] + [""]
                body += ["<h3>Regressions (latest gate run)</h3><ul>"] + [
                    f"<li><b>{html.escape(v.label)}</b> (at {html.escape(revision(v.last_gate))}): "
                    f"{html.escape(failure_text(v.last_gate, v.unjudged))}</li>" for v in failing] + ["</ul>"]
            noisy = [(v, run) for v in views if gated and (run := _named_noisy(v))]
            if noisy:
                md += [f"### {NOISY}", "", NOISY_WHY, ""] + [
                    f"- **{v.label}** (at {revision(run)}): {'; '.join(map(verdict_text, through_the_noise(run)))}"
                    for v, run in noisy] + [""]
                body += [f"<h3>{html.escape(NOISY)}</h3><p>{html.escape(NOISY_WHY)}</p><ul>"] + [
                    f"<li><b>{html.escape(v.label)}</b> (at {html.escape(revision(run))}): "
                    f"{html.escape('; '.join(map(verdict_text, through_the_noise(run))))}</li>"
                    for v, run in noisy] + ["</ul>"]
            if gone:  # not rows of the table, which says what best() serves
                md += ["### Recorded, but no suite declares them (no row)", ""] + [f"- {line}" for line in gone] + [""]
                body += ["<h3>Recorded, but no suite declares them (no row)</h3><ul>"] + [
                    f"<li>{html.escape(line)}</li>" for line in gone] + ["</ul>"]
            stopped = undescribed(store)
            if stopped:
                md += ["### Stopped before the heuristic was timed (no row)", ""] + [f"- {line}" for line in stopped] + [""]
                body += ["<h3>Stopped before the heuristic was timed (no row)</h3><ul>"] + [
                    f"<li>{html.escape(line)}</li>" for line in stopped] + ["</ul>"]
            never = untuned(store, records, suites) if gated else []
            if never:
                md += ["### Declared, but never tuned on this device (no row)", ""] + [f"- {line}" for line in never] + [""]
                body += ["<h3>Declared, but never tuned on this device (no row)</h3><ul>"] + [
                    f"<li>{html.escape(line)}</li>" for line in never] + ["</ul>"]
            noted = [(v.label, n) for v in views for n in v.notes]
            if noted:  # what best() says of its answer (a template changed since the tune, a pick unconfirmed), and
                # what else of a declaration changed since
                heading = "Notes (what best() says, and what changed since the tune)"
                md += [f"### {heading}", ""] + [f"- **{label}**: {n}" for label, n in noted] + [""]
                body += [f"<h3>{heading}</h3><ul>"] + [
                    f"<li><b>{html.escape(label)}</b>: {html.escape(n)}</li>" for label, n in noted] + ["</ul>"]
            if compare:
                old = _old_store(then, store.path, compare, root)
                changes, same = None, 0
                if isinstance(old, RecordStore):  # its tasks the suites declared then, as they were then
                    declared = undeclared(task_views(old, then_suites), old.path.parent, then_suites,
                                          unimported={v.kernel for v in views})[0]
                    changes, same = _changes(_before(old, declared), views, threshold)
                head = ["kernel", "bucket", "dtype", f"best ms at {compare}", "best ms now (time: + slower)",
                        f"speedup at {compare} -> now", "config", f"lead moved beyond {threshold:.0%}"]
                md += [f"### Changes since {compare}", ""]
                body += [f"<h3>Changes since {html.escape(compare)}</h3>"]
                unchanged = f"{same} task{'s' if same != 1 else ''} unchanged since {compare}."
                if changes is None:
                    none = (f"The records of {device} at {compare} cannot be read ({old}): nothing is compared."
                            if isinstance(old, str) else
                            f"No records for {device} at {compare}: all {len(views)} tasks are new since.")
                    md += [none, ""]
                    body += [f"<p>{html.escape(none)}</p>"]
                else:
                    # a slowed template leaves its records as they were: "unchanged" read as "nothing slowed"
                    hidden = [v.label for v in failing if [v.kernel, v.bucket.name, v.dtype] not in
                              [row[:3] for row in changes]]
                    if hidden:
                        unchanged += (f" Of those, {', '.join(hidden)} failed {'its' if len(hidden) == 1 else 'their'} "
                                      f"latest gate (see Regressions): the records change only when a task is tuned.")
                    md += ([_markdown_table(head, changes), ""] if changes else []) + [unchanged, ""]
                    body += ([_html_table(head, [[c[2:-2] if c.startswith("**") else c for c in r] for r in changes])] if changes else []) + [
                        f"<p>{html.escape(unchanged)}</p>"]
            for kind, plot in (("speedup", plot_speedup), ("history", plot_history),
                               ("convergence", plot_convergence), ("distribution", plot_distribution)):
                png = plot(views, out / f"{device}-{kind}.png", device)
                written.append(png)
                md += [f"![{kind}]({png.name})", ""]
                data = base64.b64encode(png.read_bytes()).decode()
                body += [f'<h3>{kind}</h3><img alt="{kind}" src="data:image/png;base64,{data}">']
    # UTF-8, as the page declares, whatever the locale: a suite's names and the devices' descriptions are any text
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    (out / "report.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>tunebench report</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}img{max-width:100%}"
        "</style></head><body>" + "\n".join(body) + "</body></html>\n", encoding="utf-8")
    return [out / "report.md", out / "report.html", *written], unreadable, notes, broken


def _here() -> str | None:
    """This machine's device id (``$TUNEBENCH_DEVICE``'s where set, as best() reads it), None where
    it cannot be fingerprinted: the report is the records', wherever it is made."""
    try:
        return this_device()
    except Exception:  # noqa: BLE001 - no backend to fingerprint here: the devices keep their order
        return None


def _suites_at(then: Path | None, records: Path, suites: Path | None) -> Path | None:
    """The suites given for today as they were at the compared revision, in its copy of the
    project ``then`` is the records folder of; None where none is given (``suites/`` beside the
    records, there too), they lie outside the project or the revision has no such folder."""
    if then is None or suites is None:
        return None
    try:
        found = then.parent / suites.resolve().relative_to(records.resolve().parent)
    except ValueError:
        return None
    return found if found.is_dir() else None


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
            + "</table>")
