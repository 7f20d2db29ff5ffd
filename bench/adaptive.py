"""Adaptive measurement against a fixed 30-repeat protocol, on a brute-force CPU tune.

Tunes every shipped suite twice with ``--tune-strategy brute_force`` and no budget, into two
fresh record stores: once with ``--tune-repeats 30`` (the fixed protocol), once adaptively
(the default: stop on a narrow confidence interval, early-stop clear losers). Compares the
measurement time (warm-up and sampling; verification is the same in both) and, per bucket,
how the adaptive pick fares in the fixed run's own measurements. Writes docs/adaptive.md.

    python bench/adaptive.py            # about an hour on 2 cores, compiling included
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tunebench.lookup import load_suites, shape_times
from tunebench.records import RecordStore

ROOT = Path(__file__).resolve().parents[1]


def tune(records: Path, *extra: str) -> float:
    command = [sys.executable, "-m", "pytest", "suites", "--tune", "--tune-target", "cpu",
               "--tune-strategy", "brute_force", "-o", "tune_trials=", "--records", str(records),
               "-q", "-p", "no:cacheprovider", *extra]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for name, extra in (("fixed", ("--tune-repeats", "30")), ("adaptive", ())):
            wall = tune(Path(tmp) / name, *extra)
            (path,) = (Path(tmp) / name).glob("*.json")
            runs[name] = (RecordStore(path), wall)
            print(f"{name}: {wall:.0f} s", flush=True)
        fixed, adaptive = runs["fixed"][0], runs["adaptive"][0]
        measure = {n: sum(t.get("measure_s") or 0 for t in s.trials()) for n, s in
                   (("fixed", fixed), ("adaptive", adaptive))}
        samples = {n: sum(len(t["samples"]) for t in s.trials()) for n, s in
                   (("fixed", fixed), ("adaptive", adaptive))}
        early = sum(t["status"] == "early_stopped" for t in adaptive.trials())
        rows, worst = [], 1.0
        for kernel in sorted(load_suites(ROOT / "suites"), key=lambda k: k.name):
            variant = kernel.variant("cpu")
            for dtype in variant.dtypes:
                for bucket in kernel.buckets_for("cpu"):
                    ranked = {}
                    for name, store in (("fixed", fixed), ("adaptive", adaptive)):
                        times = shape_times(store, kernel.name, dtype, bucket, variant.source_hash)
                        ranked[name] = {k: bucket.objective(t) for k, t in times.items()
                                        if len(t) == len(bucket.shapes)}
                    best_fixed = min(ranked["fixed"], key=ranked["fixed"].get)
                    pick = min(ranked["adaptive"], key=ranked["adaptive"].get)
                    ratio = ranked["fixed"][pick] / ranked["fixed"][best_fixed]
                    worst = max(worst, ratio)
                    same = "same" if pick == best_fixed else f"{ratio:.3f}x"
                    rows.append(f"| {kernel.name} | {bucket.name} | {len(ranked['fixed'])} | "
                                f"{ranked['fixed'][best_fixed]:.4g} | {ranked['adaptive'][pick]:.4g} | {same} |")
        trials = len(fixed.trials())
        share = measure["adaptive"] / measure["fixed"]
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
        text = f"""# Adaptive measurement against a fixed 30-repeat protocol

A brute-force CPU tune of every shipped suite (no budget: every valid candidate on every
representative shape, {trials:,} trials), run twice into fresh record stores: with
`--tune-repeats 30` (30 samples per trial after the same warm-up) and with the default adaptive
measurement (at least 5 samples, stop once the 95 % confidence interval of the median is within
2 % of it, early-stop a candidate once its lower bound is 5 % above the best trial's upper bound
on the same shape; 1 s cap per trial).

| | fixed 30 repeats | adaptive |
|---|---|---|
| measurement time (warm-up and sampling, summed over trials) | {measure['fixed']:.1f} s \
| {measure['adaptive']:.1f} s ({share:.0%}) |
| samples taken | {samples['fixed']:,} | {samples['adaptive']:,} |
| trials stopped early | - | {early:,} |
| wall time of the whole run (compiling, verifying, pytest) | {runs['fixed'][1]:.0f} s | {runs['adaptive'][1]:.0f} s |

Per bucket: the best config of the fixed run, and how the adaptive run's pick measured *in the
fixed run* (so both are judged by the same 30-sample medians): "same", or its time over the
fixed run's best. Times are the bucket objective (weighted geometric mean of the median times
on the bucket's shapes), ms.

| kernel | bucket | candidates | fixed: best ms | adaptive: pick ms (own run) | adaptive pick in the fixed run |
|---|---|---|---|---|---|
""" + "\n".join(rows) + f"""

Worst adaptive pick: {worst:.3f}x the fixed run's best (the target is within 1.02x).
Adaptive measurement spent {share:.0%} of the fixed protocol's measurement time (the target is
at most 40 %).

Machine: {cpu}, {os.cpu_count()} cores. Made by `python bench/adaptive.py` (wall time of the
whole benchmark: {runs['fixed'][1] + runs['adaptive'][1]:.0f} s).
"""
        (ROOT / "docs").mkdir(exist_ok=True)
        (ROOT / "docs" / "adaptive.md").write_text(text)
        print(text)


if __name__ == "__main__":
    main()
