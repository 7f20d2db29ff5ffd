"""The default strategy's own CPU time to measure every config of a space of about a thousand, and
how soon it measured the best: a tuning tool's search should cost little next to the
measurement, up to the last candidate.

Each space is a slice of a Kernel Tuner cache: one param held at the value whose configs number
nearest ``--size`` (the param's list cut to that value), searched by
``tunebench.replay.simulate`` until no candidate is left. Prints one markdown row per space;
the CPU seconds are the search's alone (the cache is loaded before the clock starts).

    nice -n 19 .venv/bin/python bench/exhaust.py --seeds 3 ../shared/replay/*.json*
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one process, one core

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from strategies import DEFAULT, read  # noqa: E402

from tunebench.replay import Replay, simulate  # noqa: E402


def sliced(path: Path, size: int, out: Path) -> tuple[str, object, int]:
    """Write the cache with one param held at the value whose configs number nearest ``size``;
    returns (param, value, configs)."""
    data = read(path)
    names = data.get("tune_params_keys") or list(data["tune_params"])
    counts = Counter((n, json.dumps(entry[n])) for entry in data["cache"].values() for n in names)
    (name, value), n = min(counts.items(), key=lambda c: (abs(c[1] - size), c[0]))
    value = json.loads(value)
    data["cache"] = {k: e for k, e in data["cache"].items() if e[name] == value}
    data["tune_params"][name] = [value]
    out.write_text(json.dumps(data))
    return name, value, n


def trials_to(trace: list[float], target: float) -> int | None:
    return next((n for n, f in enumerate(trace, 1) if f >= target), None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--size", type=int, default=1000, help="configs per slice (nearest; default: 1000)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..K-1 (default: 3)")
    args = p.parse_args()
    print("| space (slice) | configs | CPU s per search, median (max) | trials to 0.99, median | to the optimum |")
    print("|---|---|---|---|---|")
    for path in sorted(args.files, key=lambda f: f.name):
        with tempfile.TemporaryDirectory() as tmp:
            cut = Path(tmp) / path.name.removesuffix(".gz")
            name, value, _ = sliced(path, args.size, cut)
            configs = len(Replay(cut).recording().candidates)
            seconds, near, best = [], [], []
            for seed in range(args.seeds):
                began = time.process_time()
                trace = simulate(cut, DEFAULT, configs + 1, seed)
                seconds.append(time.process_time() - began)
                assert len(trace) == configs, (path, seed, len(trace))
                near.append(trials_to(trace, 0.99))
                best.append(trials_to(trace, 1.0))
        print(f"| {path.name} ({name}={value}) | {configs} | {statistics.median(seconds):.1f} ({max(seconds):.1f}) | "
              f"{statistics.median(near)} | {statistics.median(best)} |", flush=True)


if __name__ == "__main__":
    main()
