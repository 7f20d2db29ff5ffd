"""Adaptive measurement against a fixed 30-repeat protocol, on a brute-force CPU tune.

Tunes every shipped suite twice with ``--tune-strategy brute_force`` and no budget, into two
fresh record stores: once with ``--tune-repeats 30`` (the fixed protocol), once adaptively
(the default: stop on a narrow confidence interval, early-stop clear losers). Compares the
measurement time (warm-up and sampling; verification is the same in both) and, per bucket,
the two runs' picks, head to head. Writes docs/adaptive.md.

    python bench/adaptive.py               # about 25 minutes on 2 cores, compiling included
    python bench/adaptive.py --keep DIR    # keep the two record stores in DIR; a second call
                                           # with the same DIR only redoes the comparison
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tunebench.lookup import final_choice, load_suites, shape_times
from tunebench.measure import MeasureSettings
from tunebench.records import RecordStore
from tunebench.workers import CompareJob, Workers

ROOT = Path(__file__).resolve().parents[1]
#: Interleaved rounds of the head-to-head between the two runs' picks.
ROUNDS = 60


def tune(records: Path, *extra: str) -> float:
    command = [sys.executable, "-m", "pytest", "suites", "--tune", "--tune-target", "cpu",
               "--tune-strategy", "brute_force", "-o", "tune_trials=", "--tune-records", str(records),
               "-q", "-p", "no:cacheprovider", *extra]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def times_of(store: RecordStore, kernel, variant, dtype: str, bucket, config: dict) -> dict:
    """shape -> the recorded median ms of ``config`` in ``store``."""
    return {s: store.lookup(kernel.name, variant.source_hash, s, dtype, config)["stats"]["median"]
            for s in bucket.shapes}


def head_to_head(workers: Workers, kernel, dtype: str, bucket, pick: dict, other: dict) -> float:
    """The bucket objective of ``pick`` over that of ``other``, both measured interleaved now:
    the two runs were minutes apart, and the machine's speed drifts more than 2 % in that time."""
    medians = {"pick": {}, "other": {}}
    for shape in bucket.shapes:
        arms = (("pick", pick[shape], None), ("other", other[shape], None))
        result = workers.trial(CompareJob(kernel.name, shape, dtype, arms, ROUNDS, MeasureSettings()))
        if result["status"] != "ok":
            sys.exit(f"{kernel.name} {bucket.name} {shape}: {result['status']}: {result.get('error')}")
        for label, values in result["samples"].items():
            medians[label][shape] = statistics.median(values)
    return bucket.objective(medians["pick"]) / bucket.objective(medians["other"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="keep the record stores here (reused when present)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        runs = {}
        for name, extra in (("fixed", ("--tune-repeats", "30")), ("adaptive", ())):
            wall_file = where / name / "wall_s"
            if not wall_file.exists():  # a run cut short starts again from nothing
                shutil.rmtree(where / name, ignore_errors=True)
                (where / name).mkdir(parents=True)
                wall_file.write_text(str(tune(where / name, *extra)))
            wall = float(wall_file.read_text())
            (path,) = (where / name).glob("*.json")
            runs[name] = (RecordStore(path), wall)
            print(f"{name}: {wall:.0f} s", flush=True)
        fixed, adaptive = runs["fixed"][0], runs["adaptive"][0]
        measure = {n: sum(t.get("measure_s") or 0 for t in s.trials()) for n, s in
                   (("fixed", fixed), ("adaptive", adaptive))}
        samples = {n: sum(len(t["samples"]) for t in s.trials()) for n, s in
                   (("fixed", fixed), ("adaptive", adaptive))}
        early = sum(t["status"] == "early_stopped" for t in adaptive.trials())
        rows, worst = [], 1.0
        workers = Workers("cpu")
        for kernel in sorted(load_suites(ROOT / "suites"), key=lambda k: k.name):
            variant = kernel.variant("cpu")
            for dtype in variant.dtypes:
                for bucket in kernel.buckets_for("cpu"):
                    picks = {name: final_choice(store, kernel.name, "cpu", dtype, bucket, variant.source_hash)
                             for name, store in (("fixed", fixed), ("adaptive", adaptive))}
                    times = shape_times(fixed, kernel.name, dtype, bucket, variant.source_hash)
                    candidates = sum(len(t) == len(bucket.shapes) for t in times.values())
                    own = {name: bucket.objective({s: times_of(store, kernel, variant, dtype, bucket, c)[s]
                                                   for s, c in picks[name].items()})
                           for name, store in (("fixed", fixed), ("adaptive", adaptive))}
                    if picks["fixed"] == picks["adaptive"]:
                        verdict = "same"
                    else:
                        ratio = head_to_head(workers, kernel, dtype, bucket, picks["adaptive"], picks["fixed"])
                        worst = max(worst, ratio)
                        verdict = f"{ratio:.3f}x"
                    rows.append(f"| {kernel.name} | {bucket.name} | {candidates} | {own['fixed']:.4g} | "
                                f"{own['adaptive']:.4g} | {verdict} |")
        workers.close()
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

Per bucket: each run's pick is the winner of its final round (its four fastest configs by their
trials and the baseline, measured again interleaved; the final round is not counted in the
measurement time above, and is alike in both runs). "same" when both runs picked the same
config; otherwise the adaptive pick's bucket objective over the fixed pick's, the two measured
head to head, interleaved ({ROUNDS} rounds per shape), after both runs: the runs were minutes
apart, and the machine drifts more than 2 % in that time, so their own medians cannot settle a
2 % question. Times are the bucket objective (weighted geometric mean of the median times on the
bucket's shapes) of each pick in its own run, ms.

| kernel | bucket | candidates | fixed: pick ms | adaptive: pick ms | adaptive pick / fixed pick, head to head |
|---|---|---|---|---|---|
""" + "\n".join(rows) + f"""

Worst adaptive pick: {worst:.3f}x the fixed run's pick, head to head (the target is within 1.02x).
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
