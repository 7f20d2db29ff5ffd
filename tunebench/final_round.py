"""The final round of a tune: its fastest configs and the baseline, measured again together.

Trials of one search are minutes apart, and the machine drifts by more than what separates the
fastest configs; a pick must also hold in a fresh process, under every buffer placement a caller
may pass (see :mod:`tunebench.backends.memory`). So the finalists (the fastest configs by their
trials) and the baseline are measured interleaved on every shape in :data:`FINAL_PROCESSES`
fresh processes (:func:`tunebench.compare.compare`). The winner is the finalist with the best
bucket objective over the medians across processes; it replaces the heuristic only if it leads
it by :data:`MIN_GAIN` over the bucket, in every process on every shape, and by its own trials
too: a config that led only while the round ran (the heuristic's two threads once took 0.126 ms
there against 0.075 in its trial a minute before and 0.073 in the gate after) is no pick.

Then the winner and the baseline alone, as the gate will measure them, meet again in
:data:`REFERENCE_PROCESSES` more fresh processes: their per-process ratios are the reference
the gate judges later runs against, spread and all. A winner that does not lead in every one of
them, or whose lead there falls below MIN_GAIN over the bucket, is not adopted either: the
heuristic stays, and a tuned config is never reported faster than the heuristic where it is
not. The trials' best/baseline ratio is kept beside those ratios: taken minutes earlier, it
widens the reference to what separate times show as well.

Where a shape cannot be measured, nothing is confirmed and the heuristic stays, with the reason
in the record. Where a process stays disturbed by other load, the round judged nothing: it is
recorded (``disturbed``) but not read, so the pick of an earlier round stands (a busy re-run
dropped a confirmed 3x pick for the heuristic, and published the disturbed times). So too where
the winner is the pick of the round before and its fresh processes contradict each other, one
reading it more than MIN_GAIN ahead and another not ahead at all: load the monitor did not see (a
busy re-run read 0.45x-1.22x of a pick five processes had confirmed at 1.57x, and dropped it), not
a verdict against a pick once confirmed in every process. A new winner read so is not adopted. A heuristic whose config
failed in its trials (a wrong result, a crash) is no competitor: the finalists are measured
alone, the fastest over the bucket is adopted, and the record keeps ``baseline_failure``.
"""

from __future__ import annotations

import datetime
import math
import statistics

from tunebench import __version__
from tunebench.buckets import Bucket
from tunebench.compare import Comparison, compare, verified
from tunebench.kernel import Kernel, Variant
from tunebench.lookup import fits, latest_confirmation
from tunebench.records import RecordStore, config_key, config_text
from tunebench.replay import Replay
from tunebench.summary import DISTURBED

FINAL_PROCESSES = 3
REFERENCE_PROCESSES = 5
#: The lead over the baseline that a tuned config needs to replace it: a smaller one is within
#: what separate runs move on memory-bound kernels, and a config adopted on it fails the gate
#: on noise.
MIN_GAIN = 0.05
#: Seconds of calls per process and shape in a comparison, at most: its 30 rounds are cut to
#: fit them where a kernel is slow (a fast one takes its 30 rounds in far less).
BUDGET_S = 1.0


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _arms(baseline: dict, configs: list[dict], baseline_failure: str | None) -> list[dict]:
    """The configs a round compares on one shape, each once: the heuristic's, unless it fails
    (no competitor), and the finalists'; one alone is measured against nothing."""
    return list({config_key(c): c for c in [*([] if baseline_failure else [baseline]), *configs]}.values())


def round_builds(variant: Variant, dtype: str, bucket: Bucket, finalists: list[dict[tuple, dict]],
                 baseline_failure: str | None) -> list[dict]:
    """The configs :func:`final_round` measures (arguments as it takes them), each once: what the
    builds ahead compile before its workers start."""
    builds = []
    for shape in bucket.shapes:
        arms = _arms(variant.baseline(shape, dtype), [f[shape] for f in finalists], baseline_failure)
        builds += [c for c in arms if len(arms) > 1 and c not in builds]
    return builds


def final_round(store: RecordStore, workers, kernel: Kernel, variant: Variant, target: str, dtype: str,
                bucket: Bucket, finalists: list[dict[tuple, dict]], commit: str | None,
                setup_hash: str | None = None, trial_ms: list[dict[tuple, float]] | None = None,
                baseline_trial_ms: dict[tuple, float] | None = None, baseline_failure: str | None = None,
                compiler: str | None = None, dirty: bool | None = None,
                served: set[tuple] | None = None) -> dict:
    """Measure the finalists (shape -> config each) and the baseline, pick and confirm the
    winner (see the module docstring); the round is recorded as a ``checks`` document
    (``kind: tune``) and returned. ``trial_ms`` are the finalists' times by their trials (shape ->
    ms each), ``baseline_trial_ms`` the baseline's. ``baseline_failure``: how the heuristic's
    config failed in its trials (a wrong result, a crash): then it is no competitor, and the
    fastest finalist is adopted without a lead over it. ``compiler``: what built them (see
    :func:`tunebench.backends.compiler`), kept with the round: another's round judged other code.
    ``dirty``: whether the tree held uncommitted changes (the report marks the round so).
    ``served``: where given, the shapes whose heuristic's config a worker refused with a compile
    error cached before this run are added to it (what a cluster's stop says; not recorded)."""
    entries, problem, disturbed, failed = [], None, False, False
    dropped: set[tuple] = set()  # finalists that failed in the round: judged no further
    earlier = latest_confirmation(store, kernel.name, target, dtype, bucket, variant.source_hash, setup_hash,
                                  variant.entry)
    picked = {(tuple(e["shape"]), config_key(e["best"])) for e in earlier["shapes"]} if earlier else set()
    # a replay (a Kernel Tuner cache, or records replayed) holds the representative shapes alone
    checked = [] if isinstance(workers, Replay) else bucket.verify
    unverified = _unverified(workers, kernel, variant, target, dtype, checked, [f[bucket.shapes[0]] for f in finalists])
    dropped.update(config_key(u["config"]) for u in unverified)
    failed = any(key == config_key(u["config"]) for _, key in picked for u in unverified)  # the earlier pick: no longer
    rule = {s: variant.baseline(s, dtype) for s in bucket.shapes}
    refused = None  # why no finalist is adopted, where every one but the heuristic's failed on a verify shape: a verdict
    if unverified and all(config_key(f[bucket.shapes[0]]) in dropped or f == rule for f in finalists):
        u, but = unverified[0], " but the heuristic's own config" if rule in finalists else ""
        refused = f"every finalist{but} failed on a verify shape: [{config_text(u['config'])}] on " \
                  f"{tuple(u['shape'])} ended {u['status']}: {u['error']}"
    # the heuristic's own, where no config is adopted served there as on the bucket's shapes: said, not judged
    wrong_rule = [u for s in checked for u in _unverified(workers, kernel, variant, target, dtype, [s],
                                                          [variant.baseline(s, dtype)])
                  if u["status"] != "outside_constraints"][:1]  # a heuristic outside the space is said apart
    for shape in bucket.shapes:
        baseline = variant.baseline(shape, dtype)
        configs = [f[shape] for f in finalists]
        entry = {"shape": list(shape), "finalists": configs, "baseline": baseline}
        if trial_ms and baseline_trial_ms and shape in baseline_trial_ms:
            entry["finalist_trial_ms"] = [t.get(shape) for t in trial_ms]
            entry["baseline_trial_ms"] = baseline_trial_ms[shape]
        entries.append(entry)
        while True:  # a finalist that fails here (right in its trials, wrong now) is dropped, the rest measured again
            live = [c for c in configs if config_key(c) not in dropped]
            unique = _arms(baseline, live, baseline_failure)
            if len(unique) <= 1:  # every finalist the baseline, or dropped
                comp = None
                break
            labels = {config_key(c): str(i) for i, c in enumerate(unique)}
            comp = compare(workers, kernel.name, shape, dtype, [(labels[config_key(c)], c, None) for c in unique],
                           FINAL_PROCESSES, BUDGET_S)
            at_fault = unique[int(comp.failure["arm"])] if comp.failure and comp.failure.get("arm") else None
            if at_fault is None or (at_fault == baseline and not baseline_failure):
                failed = failed or comp.failure is not None  # a config that fails says something, disturbed or not
                if at_fault is not None:  # the heuristic's own (its trials built it): the task may stop on it
                    entry["baseline_failed"] = {k: comp.failure[k] for k in ("status", "error")}
                    if comp.failure.get("cached") and served is not None:  # an earlier run's: said, not recorded
                        served.add(shape)
                break
            # a finalist dropped, the others measured again: a round that then stays disturbed judged nothing,
            # and the earlier round's pick stands, unless it is the config that failed now
            failed = failed or (shape, config_key(at_fault)) in picked
            dropped.add(config_key(at_fault))
            entry.setdefault("dropped", []).append({"config": at_fault, **{k: comp.failure[k] for k in
                                                                           ("status", "error")}})
        if comp is None:
            if entry.get("dropped") and all(c == baseline for c in live):
                but = " but the heuristic's own config" if live else ""
                problem = problem or f"every finalist{but} failed on {shape}: {entry['dropped'][0]['error']}"
            continue
        problem, disturbed = (problem, disturbed) if problem else _unusable(
            comp, shape, {labels[config_key(c)]: c for c in unique})
        if comp.objectives:
            entry["finalist_ms"] = [comp.median(labels[config_key(c)]) if config_key(c) in labels else None
                                    for c in configs]
            if not baseline_failure:
                entry["baseline_ms"] = comp.median("0")
                entry["leads"] = [config_key(c) in labels and max(comp.ratios(labels[config_key(c)], "0")) < 1
                                  for c in configs]
    winner = None if problem else _fastest(bucket, entries, len(finalists)) if baseline_failure else \
        _winner(bucket, entries)
    why_not = None
    if winner is not None and not baseline_failure:
        problem, disturbed, why_not = _reference(workers, kernel, dtype, bucket, entries, finalists[winner], picked)
        if problem or why_not:
            winner = None
    for entry in entries:
        entry["best"] = finalists[winner][tuple(entry["shape"])] if winner is not None else entry["baseline"]
    doc = {"kernel": kernel.name, "target": target, "dtype": dtype, "bucket": bucket.name, "kind": "tune",
           "source_hash": variant.source_hash, "setup_hash": setup_hash, "shapes": entries, "winner": winner,
           "problem": problem, **({"baseline_failure": baseline_failure} if baseline_failure else {}),
           **({"compiler": compiler} if compiler else {}), "entry": variant.entry,  # another function's round is not this one's
           **({"verify": [list(s) for s in checked], "unverified": unverified, "heuristic_unverified": wrong_rule}
              if checked else {}),
           **({"disturbed": True} if disturbed and not failed else {}),  # judged nothing: an earlier pick stands
           "reason": problem or why_not or refused or (
               f"the heuristic's config fails ({baseline_failure}): the fastest finalist is adopted without a lead "
               f"over it" if baseline_failure else "" if winner is not None else _no_lead(bucket, entries)),
           "git_commit": commit, "git_dirty": dirty, "timestamp": now(), "tunebench_version": __version__}
    store.add_check(doc)
    return doc


def _unverified(workers, kernel: Kernel, variant: Variant, target: str, dtype: str, shapes: list[tuple],
                configs: list[dict]) -> list[dict]:
    """Each of ``configs`` that fails on one of the verify ``shapes`` (see
    :class:`~tunebench.buckets.Bucket`), with the first it fails on: best() serves a pick there,
    where no trial ran it. One whose constraints do not hold there (a pick recorded before the
    shape was added: no candidate since) fails it too: best() would serve another config there,
    unverified."""
    if not shapes:
        return []
    dims = kernel.buckets_for(target).dims
    found = []
    for config in {config_key(c): c for c in configs}.values():
        for shape in shapes:
            failure = verified(workers, kernel.name, shape, dtype, config) if fits(variant, config, shape, dims) else {
                "status": "outside_constraints", "error": "the space's constraints do not hold for it there"}
            if failure:
                found.append({"shape": list(shape), "config": config, **failure})
                break
    return found


def _fastest(bucket: Bucket, entries: list[dict], count: int) -> int | None:
    """Where the heuristic's config fails: the finalist with the best bucket objective (shapes
    where the finalists are one config count alike), None where a shape was not measured."""
    if not all("finalist_ms" in e or len({config_key(c) for c in e["finalists"]}) == 1 for e in entries):
        return None
    measured = [i for i in range(count) if all(e["finalist_ms"][i] is not None for e in entries if "finalist_ms" in e)]
    return min(measured, key=lambda i: sum(w * math.log(e["finalist_ms"][i])
                                           for e, w in zip(entries, bucket.shape_weights) if "finalist_ms" in e),
               default=None)


def _unusable(comp: Comparison, shape: tuple, configs: dict[str, dict]) -> tuple[str | None, bool]:
    """What kept a comparison from judging its arms (``configs`` by label), and whether it was
    only other load (then it says nothing of them: a config that fails does)."""
    if comp.failure:
        f = comp.failure
        which = f"the config [{config_text(configs[f['arm']])}]" if f.get("arm") in configs else "a config"
        return f"on {shape} {which} ended {f['status']}: {f['error']}", False
    if comp.disturbed:
        return f"{DISTURBED}{shape}: {comp.disturbed[0]}", True
    return None, False


def _winner(bucket: Bucket, entries: list[dict]) -> int | None:
    """The finalist with the best bucket objective, if it leads the baseline by MIN_GAIN
    there and in every process on every shape."""
    if any("baseline_ms" not in e for e in entries):
        return None  # a shape where every finalist is the baseline: nothing was measured
    shapes = [tuple(e["shape"]) for e in entries]
    base = bucket.objective({s: e.get("baseline_ms") for s, e in zip(shapes, entries)})
    scores = []
    for i in range(len(entries[0]["finalists"])):
        if all(e.get("leads", [False] * (i + 1))[i] for e in entries) and _led_in_trials(bucket, entries, i):
            scores.append((bucket.objective({s: e["finalist_ms"][i] for s, e in zip(shapes, entries)}), i))
    if not scores:
        return None
    score, best = min(scores)
    return best if score <= (1 - MIN_GAIN) * base else None


def _no_lead(bucket: Bucket, entries: list[dict]) -> str:
    """Why no finalist replaced the heuristic, naming the one faster over the bucket that lost
    on a shape: one config cannot serve such a bucket, and splitting it can. One that lost on
    every shape (a bucket of one shape) is no case for a split: a round measured anew may confirm it."""
    if all("baseline" in e and all(config_key(c) == config_key(e["baseline"]) for c in e["finalists"]) for e in entries):
        return ("the heuristic's own config is the only finalist: the search's other configs were slower, "
                "failed, or stayed disturbed by other load")
    why = f"no finalist leads the heuristic by {MIN_GAIN:.0%} on every shape, in every process"
    if any("finalist_ms" not in e or "baseline_ms" not in e for e in entries):
        return why
    shapes = [tuple(e["shape"]) for e in entries]
    base = bucket.objective({s: e["baseline_ms"] for s, e in zip(shapes, entries)})
    score, i = min(((bucket.objective({s: e["finalist_ms"][i] for s, e in zip(shapes, entries)}), i)
                    for i in range(len(entries[0]["finalists"]))
                    if all(e["finalist_ms"][i] is not None for e in entries)), default=(math.inf, 0))
    lost = [s for s, e in zip(shapes, entries) if not e["leads"][i]]
    if score > (1 - MIN_GAIN) * base or not lost:
        return why
    lead = (f"{why}: [{config_text(entries[0]['finalists'][i])}] takes {score / base:.2f}x the heuristic's time over "
            f"the bucket, but is not faster in every process on {', '.join(map(str, lost))}")
    if len(lost) == len(shapes):
        return (f"{lead}; the heuristic is served, and `--tune-fresh` on a quiet machine measures the round "
                f"again")
    return f"{lead}; split the bucket between its shapes for each part to get its own config"


def _led_in_trials(bucket: Bucket, entries: list[dict], i: int) -> bool:
    """Whether finalist ``i`` was faster than the baseline by its trials as well (true where the
    trials' times are not known)."""
    if any(e.get("finalist_trial_ms", [None] * (i + 1))[i] is None or "baseline_trial_ms" not in e for e in entries):
        return True
    shapes = [tuple(e["shape"]) for e in entries]
    return (bucket.objective({s: e["finalist_trial_ms"][i] for s, e in zip(shapes, entries)})
            < bucket.objective({s: e["baseline_trial_ms"] for s, e in zip(shapes, entries)}))


def _reference(workers, kernel: Kernel, dtype: str, bucket: Bucket, entries: list[dict],
               winner: dict[tuple, dict], picked: set[tuple]) -> tuple[str | None, bool, str | None]:
    """The winner against the baseline, two arms as the gate measures them, in fresh processes:
    each entry gets ``ratios`` (one per process) and ``ratio`` (their median). (What kept the
    round from measuring, whether only other load did, why the winner is not adopted), None
    where nothing did. Where the winner is the earlier round's pick (``picked``: shape and
    config key), processes that contradict each other (one more than MIN_GAIN ahead, another not
    ahead) judge nothing, unless another shape's processes, contradicting nothing, read it not
    ahead in one."""
    contradicted = None
    for entry in entries:
        shape = tuple(entry["shape"])
        best, baseline = winner[shape], entry["baseline"]
        if best == baseline:
            continue
        comp = compare(workers, kernel.name, shape, dtype, [("best", best, None), ("baseline", baseline, None)],
                       REFERENCE_PROCESSES, BUDGET_S)
        problem, disturbed = _unusable(comp, shape, {"best": best, "baseline": baseline})
        if problem:
            return problem, disturbed, None
        entry["ratios"] = comp.ratios("best", "baseline")
        entry["ratio"] = statistics.median(entry["ratios"])
        # the pair's own times, met alone: what is published (the round of every finalist read the
        # lead 1.77x where these five processes read 1.35x)
        entry["confirmed_ms"] = [comp.median("best"), comp.median("baseline")]
        index = entry["finalists"].index(best)
        if entry.get("finalist_trial_ms") and entry["finalist_trial_ms"][index]:
            entry["trial_ratio"] = entry["finalist_trial_ms"][index] / entry["baseline_trial_ms"]
        low, high = min(entry["ratios"]), max(entry["ratios"])
        if high >= 1 and low < 1 - MIN_GAIN and (shape, config_key(best)) in picked:
            contradicted = contradicted or (f"the fresh processes contradicted each other on {shape}: best/baseline "
                                            f"{low:.3f}x-{high:.3f}x, the pick of the round before more than "
                                            f"{MIN_GAIN:.0%} ahead in one and not ahead in another")
        elif high >= 1:
            return None, False, (f"the winner did not lead the heuristic in every fresh process on {shape} "
                                 f"(best/baseline {low:.3f}x-{high:.3f}x)")
    return (contradicted, True, None) if contradicted else (None, False, _lead_kept(bucket, entries))


def _lead_kept(bucket: Bucket, entries: list[dict]) -> str | None:
    """Why the winner is not adopted when its lead, measured again alone, fell below MIN_GAIN
    over the bucket (None when it held). A 5.5 % lead in the round that read 4 % here was a
    row_reduce pick that took 1.00-1.03x the heuristic's time wherever it was measured after."""
    ratio = bucket.objective({tuple(e["shape"]): e.get("ratio", 1.0) for e in entries})
    if ratio > 1 - MIN_GAIN:
        return (f"the winner's lead shrank below {MIN_GAIN:.0%} when measured again in fresh processes "
                f"(best/baseline {ratio:.3f}x over the bucket)")
    return None
