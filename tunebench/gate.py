"""The performance gate: is a task's recorded best config still fast, and still worth it?

Timings of separate runs on one machine drift by 10-35 %, so the gate never trusts a raw ratio
between today and the record. It measures *interleaved* in one run (see
:func:`tunebench.measure.interleave`) and works on matched per-round ratios:

- (b) best against baseline: today's best config against today's heuristic config.
- (a) best against the record: when the template changed since the record, today's best against
  the recorded template's best (rebuilt from the ``sources`` table); when it did not, today's
  best/baseline ratio against the same ratio measured interleaved when the task was tuned (the
  *confirmation*, :func:`confirm`), so a machine that is slower today as a whole passes.

A ratio's verdict comes from the distribution-free confidence interval of its median: pass when
the interval lies below ``1 + threshold``, fail when it lies above, ambiguous otherwise; an
ambiguous shape is measured again with twice the rounds, up to ``max_rounds``, and then fails
only if its median is beyond the threshold and the interval excludes 1 (significantly slower).
The raw comparison with the recorded samples (Mann-Whitney) is reported beside, for the record.
"""

from __future__ import annotations

import datetime
import statistics
from dataclasses import dataclass, field

from tunebench import __version__
from tunebench.buckets import Bucket
from tunebench.kernel import Kernel, Variant
from tunebench.lookup import latest_confirmation, shape_times
from tunebench.measure import MeasureSettings
from tunebench.records import RecordStore, config_key
from tunebench.stats import mann_whitney_p, median_ci
from tunebench.summary import config_text
from tunebench.workers import CompareJob

#: The lead over the baseline, in the final round, that a tuned config needs to replace it: a
#: smaller one is within what separate runs here move (5-15 % on memory-bound kernels), and a
#: config adopted on it fails the gate's best-against-baseline check on noise.
MIN_GAIN = 0.05


@dataclass(frozen=True)
class GateSettings:
    threshold: float = 0.10  # a slowdown beyond 10 % is a regression
    confidence: float = 0.95
    rounds: int = 30  # interleaved rounds at first ...
    max_rounds: int = 240  # ... doubled while ambiguous, up to this


@dataclass
class GateRun:
    """What the gate items of one pytest run share: where they measure and what they read."""

    target: str
    fingerprint: dict
    store: RecordStore
    workers: object  # a tunebench.workers.Workers
    commit: str | None
    dirty: bool | None


@dataclass
class Verdict:
    """One ratio on one shape: its median, confidence interval and what it means."""

    what: str
    shape: tuple
    median: float
    lo: float
    hi: float
    outcome: str  # "pass", "fail" or "ambiguous"

    def line(self, threshold: float) -> str:
        return (f"{self.outcome.upper():9} {self.what} on {self.shape}: {self.median:.3f}x "
                f"[{self.lo:.3f}, {self.hi:.3f}] (threshold {1 + threshold:.2f}x)")


@dataclass
class GateResult:
    outcome: str  # "pass", "fail" or "skip"
    reason: str = ""
    verdicts: list[Verdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples: dict = field(default_factory=dict)  # shape -> label -> ms samples
    configs: dict = field(default_factory=dict)  # shape -> label -> config


def judge(ratios: list[float], what: str, shape: tuple, settings: GateSettings, final: bool) -> Verdict:
    """The verdict on matched ratios (see the module docstring)."""
    lo, hi = median_ci(ratios, settings.confidence)
    med = statistics.median(ratios)
    limit = 1 + settings.threshold
    if hi <= limit:
        outcome = "pass"
    elif lo > limit:
        outcome = "fail"
    elif final:
        outcome = "fail" if med > limit and lo > 1 else "pass"
    else:
        outcome = "ambiguous"
    return Verdict(what, shape, med, lo, hi, outcome)


def _ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b)]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _arms(best: dict, baseline: dict, recorded_text: str | None) -> tuple:
    arms = [("best", best, None)]
    if baseline != best:
        arms.append(("baseline", baseline, None))
    if recorded_text is not None:
        arms.append(("recorded", best, recorded_text))
    return tuple(arms)


def confirm(store: RecordStore, workers, kernel: Kernel, variant: Variant, target: str, dtype: str,
            bucket: Bucket, finalists: list[dict[tuple, dict]], settings: GateSettings,
            commit: str | None) -> dict:
    """The final round of a tune: the finalists (the fastest configs by their trials, each
    measured minutes apart from the others, so drift may have ranked them) and the baseline,
    measured interleaved on every shape. The winner is the finalist with the lowest bucket
    objective of these medians, unless it leads the baseline by less than ``MIN_GAIN``: then the
    heuristic stays. Its best/baseline ratio, measured then as the gate measures it
    (those two arms alone), is the reference later gate runs compare with. Where a shape cannot
    be measured, the trials' order stands."""
    shapes, medians, base = [], [{} for _ in finalists], {}
    for shape in bucket.shapes:
        baseline = variant.baseline(shape)
        configs = [f[shape] for f in finalists]
        unique = list({config_key(c): c for c in [*configs, baseline]}.values())
        entry = {"shape": list(shape), "finalists": configs, "baseline": baseline}
        if len(unique) > 1:
            arms = tuple((str(i), c, None) for i, c in enumerate(unique))
            result = workers.trial(CompareJob(kernel.name, shape, dtype, arms, settings.rounds, MeasureSettings()))
            if result["status"] != "ok":
                entry["error"] = f"{result['status']} ({result.get('arm')}): {result.get('error')}"
            else:
                ms = {config_key(c): statistics.median(result["samples"][str(i)]) for i, c in enumerate(unique)}
                entry["finalist_ms"] = [ms[config_key(c)] for c in configs]
                entry["baseline_ms"] = base[shape] = ms[config_key(baseline)]
                for m, value in zip(medians, entry["finalist_ms"]):
                    m[shape] = value
        shapes.append(entry)
    winner = finalists[0]
    if len(base) == len(bucket.shapes):
        scores = [bucket.objective(m) for m in medians]
        fastest = min(range(len(finalists)), key=scores.__getitem__)
        winner = (finalists[fastest] if scores[fastest] <= (1 - MIN_GAIN) * bucket.objective(base)
                  else {s: variant.baseline(s) for s in bucket.shapes})
    for entry in shapes:
        shape = tuple(entry["shape"])
        entry["best"] = best = winner[shape]
        if best != entry["baseline"] and "error" not in entry:
            # the reference is measured as the gate will measure it: these two arms alone
            job = CompareJob(kernel.name, shape, dtype, _arms(best, entry["baseline"], None), settings.rounds,
                             MeasureSettings())
            result = workers.trial(job)
            if result["status"] != "ok":
                entry["error"] = f"{result['status']} ({result.get('arm')}): {result.get('error')}"
            else:
                entry["samples"] = result["samples"]
                entry["ratio"] = statistics.median(_ratios(result["samples"]["best"], result["samples"]["baseline"]))
    doc = {"kernel": kernel.name, "target": target, "dtype": dtype, "bucket": bucket.name, "kind": "tune",
           "source_hash": variant.source_hash, "shapes": shapes, "git_commit": commit, "timestamp": _now(),
           "tunebench_version": __version__}
    store.add_check(doc)
    return doc


def recorded_best(store: RecordStore, kernel: Kernel, variant: Variant, target: str, dtype: str,
                  bucket: Bucket) -> tuple[dict[tuple, dict], str] | None:
    """The recorded best config per shape and the source it was tuned with: from the latest
    confirmation, else ranked from the trials of the latest source recorded for the task."""
    check = latest_confirmation(store, kernel.name, target, dtype, bucket.name)
    if check is not None:
        return {tuple(e["shape"]): e["best"] for e in check["shapes"]}, check["source_hash"]
    task = next(iter(store.tasks(kernel=kernel.name, target=target, dtype=dtype, bucket=bucket.name)), None)
    if task is None:
        return None
    times = shape_times(store, kernel.name, dtype, bucket, task["source_hash"])
    ranked = {k: bucket.objective(t) for k, t in times.items() if len(t) == len(bucket.shapes)}
    if not ranked:
        return None
    best = dict(min(ranked, key=ranked.get))
    return {s: best for s in bucket.shapes}, task["source_hash"]


def gate(store: RecordStore, workers, kernel: Kernel, variant: Variant, target: str, dtype: str,
         bucket: Bucket, settings: GateSettings, commit: str | None) -> GateResult:
    """Re-measure one task's recorded best and decide (see the module docstring)."""
    found = recorded_best(store, kernel, variant, target, dtype, bucket)
    if found is None:
        return GateResult("skip", f"nothing recorded for {kernel.name} {bucket.name} {dtype} on "
                                  f"device {store.device}: run pytest --tune first")
    best, recorded_hash = found
    result = GateResult("pass")
    recorded_text = None
    if recorded_hash != variant.source_hash:
        recorded_text = store.source(recorded_hash)
        result.notes.append(
            f"the template changed since the record ({recorded_hash} -> {variant.source_hash}); "
            + ("today's build is compared with the recorded one" if recorded_text else
               "the recorded source is not in the records, so only the baseline comparison is made"))
    check = latest_confirmation(store, kernel.name, target, dtype, bucket.name)
    reference = {tuple(e["shape"]): e.get("ratio") for e in check["shapes"]} if check else {}
    for shape in bucket.shapes:
        baseline = variant.baseline(shape)
        arms = _arms(best[shape], baseline, recorded_text)
        result.configs[shape] = {label: config for label, config, _ in arms}
        samples: dict[str, list[float]] = {label: [] for label, _, _ in arms}
        rounds = settings.rounds
        while True:
            measured = workers.trial(CompareJob(kernel.name, shape, dtype, arms, rounds, MeasureSettings()))
            if measured["status"] != "ok":
                result.outcome = "fail"
                result.reason = (f"the {measured.get('arm')} config on {shape} ended {measured['status']}: "
                                 f"{measured.get('error')}")
                return _recorded(store, result, kernel, variant, target, dtype, bucket, commit)
            for label, values in measured["samples"].items():
                samples[label] += values
            total = len(samples["best"])
            final = total >= settings.max_rounds
            verdicts = []
            if "baseline" in samples:
                vs_base = _ratios(samples["best"], samples["baseline"])
                verdicts.append(judge(vs_base, "best/baseline", shape, settings, final))
                if recorded_text is None and reference.get(shape):
                    verdicts.append(judge([r / reference[shape] for r in vs_base],
                                          "best/baseline against the tuning-time ratio", shape, settings, final))
            if "recorded" in samples:
                verdicts.append(judge(_ratios(samples["best"], samples["recorded"]),
                                      "best against the recorded source", shape, settings, final))
            if final or all(v.outcome != "ambiguous" for v in verdicts):
                break
            rounds = min(total, settings.max_rounds - total)
        result.samples[shape] = samples
        result.verdicts += verdicts
        result.notes.append(_raw(store, kernel.name, recorded_hash, shape, dtype, best[shape], samples["best"]))
    if not result.verdicts:
        result.notes.append("the recorded best is the heuristic config and the template is unchanged: "
                            "there is nothing to measure it against in this run")
    if any(v.outcome == "fail" for v in result.verdicts):
        result.outcome = "fail"
        result.reason = "; ".join(v.line(settings.threshold) for v in result.verdicts if v.outcome == "fail")
    return _recorded(store, result, kernel, variant, target, dtype, bucket, commit)


def _raw(store: RecordStore, kernel: str, source_hash: str, shape: tuple, dtype: str, config: dict,
         now: list[float]) -> str:
    """Today's best against its recorded samples, directly: informative, drift and all."""
    doc = store.lookup(kernel, source_hash, shape, dtype, config)
    if not doc or not doc.get("samples"):
        return f"no recorded samples of [{config_text(config)}] on {shape}"
    then = doc["samples"]
    ratio = statistics.median(now) / statistics.median(then)
    return (f"raw, not interleaved: best on {shape} now {statistics.median(now):.4g} ms, recorded "
            f"{statistics.median(then):.4g} ms ({ratio:.3f}x, Mann-Whitney p={mann_whitney_p(now, then):.2g})")


def _recorded(store: RecordStore, result: GateResult, kernel: Kernel, variant: Variant, target: str,
              dtype: str, bucket: Bucket, commit: str | None) -> GateResult:
    """Keep the gate run in the records, for the report's history across commits."""
    store.add_check({
        "kernel": kernel.name, "target": target, "dtype": dtype, "bucket": bucket.name, "kind": "gate",
        "source_hash": variant.source_hash, "outcome": result.outcome, "reason": result.reason,
        "shapes": [{"shape": list(s), "configs": result.configs.get(s, {}), "samples": result.samples.get(s, {})}
                   for s in bucket.shapes],
        "verdicts": [{"what": v.what, "shape": list(v.shape), "median": v.median, "lo": v.lo, "hi": v.hi,
                      "outcome": v.outcome} for v in result.verdicts],
        "git_commit": commit, "timestamp": _now(), "tunebench_version": __version__,
    })
    return result

