"""Whether a trial's confidence interval of the median holds: long runs of one config's timed
calls, in several fresh processes, and a trial's stopping rule replayed on them from many
starting points. A 95 % interval should hold the config's long-run median (all processes' calls
together) about 95 % of the time; consecutive calls are correlated (a slow stretch of the host
slows several in a row), which an interval built for independent calls does not allow for.

    python bench/ci_coverage.py [--processes 3] [--budget 4] [--json docs/ci-coverage.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from tunebench import stats
from tunebench.lookup import load_suites
from tunebench.measure import MeasureSettings
from tunebench.workers import CompareJob, Workers

ROOT = Path(__file__).resolve().parents[1]


def runs(processes: int, budget_s: float) -> dict[str, list[list[float]]]:
    """label -> one list of ms per fresh process, each a config's consecutive timed calls."""
    found: dict[str, list[list[float]]] = {}
    workers = Workers("cpu")
    try:
        for kernel in sorted(load_suites(ROOT / "suites"), key=lambda k: k.name):
            variant = kernel.variant("cpu")
            for bucket in kernel.buckets_for("cpu"):
                shape, dtype = tuple(bucket.shapes[0]), variant.dtypes[0]
                label = f"{kernel.name} {bucket.name} {'x'.join(map(str, shape))} {dtype}"
                job = CompareJob(kernel.name, shape, dtype, (("a", variant.baseline(shape, dtype), None),),
                                 100_000, MeasureSettings(), budget_s)
                for _ in range(processes):
                    workers.restart()
                    result = workers.trial(job)
                    if result["status"] != "ok":
                        raise SystemExit(f"{label}: {result['status']} {result.get('error')}")
                    placements = result["samples"]
                    found.setdefault(label, []).append(placements[min(placements)]["a"])
                print(label, [len(r) for r in found[label]], flush=True)
    finally:
        workers.close()
    return found


def replay(calls: list[float], start: int, settings: MeasureSettings) -> list[float]:
    """The samples a trial starting at ``start`` would take by measure()'s stopping rule (no
    early stop: there is no incumbent), its time cap read from the calls' own times."""
    samples, spent = [], 0.0
    for ms in calls[start:]:
        samples.append(ms)
        spent += ms / 1e3
        n = len(samples)
        if n >= settings.max_samples or (n >= settings.min_samples and spent >= settings.max_time_s):
            return samples
        if n < settings.min_samples or (n - settings.min_samples) % 5:
            continue
        lo, hi = stats.median_ci(samples, settings.confidence)
        if hi - lo <= settings.rel_ci * sorted(samples)[n // 2]:
            return samples
    return []  # the run ended before the trial would have


def coverage(found: dict[str, list[list[float]]], starts: int) -> dict:
    settings, rng = MeasureSettings(), np.random.default_rng(0)
    rows = {}
    for label, per_process in found.items():
        truth = statistics.median([ms for run in per_process for ms in run])
        held, held_within, sizes, errors, lag1 = 0, 0, [], [], []
        for calls in per_process:
            x = np.asarray(calls)
            lag1.append(float(np.corrcoef(x[:-1], x[1:])[0, 1]))
            own = statistics.median(calls)  # the process's own long-run median: drift within it alone
            for start in rng.integers(0, max(1, len(calls) // 2), starts):
                samples = replay(calls, int(start), settings)
                if not samples:
                    continue
                lo, hi = stats.median_ci(samples, settings.confidence)
                held += lo <= truth <= hi
                held_within += lo <= own <= hi
                sizes.append(len(samples))
                errors.append(abs(statistics.median(samples) / truth - 1))
        rows[label] = {"trials": len(sizes), "coverage": held / len(sizes), "coverage_within_process":
                       held_within / len(sizes), "samples_median": statistics.median(sizes),
                       "median_error_p50": statistics.median(errors), "median_error_p95": float(np.quantile(errors, 0.95)),
                       "lag1_autocorrelation": lag1, "truth_ms": truth, "calls": [len(r) for r in per_process]}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of calls per process")
    parser.add_argument("--starts", type=int, default=200, help="trials replayed per process")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--calls", type=Path, help="keep the calls here, or read them back where present "
                        "(then the JSON's load average is the analysis's, not the measurement's)")
    args = parser.parse_args()
    began = time.time()
    if args.calls and args.calls.exists():
        found = json.loads(args.calls.read_text())
    else:
        found = runs(args.processes, args.budget)
        if args.calls:
            args.calls.write_text(json.dumps(found))
    rows = coverage(found, args.starts)
    for label, row in rows.items():
        print(f"{label:42s} coverage {row['coverage']:.0%} (within a process {row['coverage_within_process']:.0%}) of "
              f"{row['trials']} trials, {row['samples_median']:.0f} samples, "
              f"median off by {row['median_error_p50']:.1%} (p95 {row['median_error_p95']:.1%}), "
              f"lag-1 {', '.join(f'{r:.2f}' for r in row['lag1_autocorrelation'])}")
    if args.json:
        args.json.write_text(json.dumps({"load_average": os.getloadavg(), "cpus": os.cpu_count(),
                                         "collected_s": time.time() - began, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
