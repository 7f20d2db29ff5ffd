"""The default strategy with its hyperparameter refits bounded at ``bayes.FIT_POINTS`` points
against unbounded refits, on long searches: the bound saves CPU, and this measures what it costs
in the configs found past it.

Each space is searched by ``tunebench.replay.simulate`` up to ``--budget`` trials (or until no
candidate is left), seeds 0..K-1, scored as bench/heldout.py scores (the fraction of the
optimum reached) at 300, 500 and the budget, and by the trials to 0.97, 0.99 and 1.0. Both
searches ask the same configs until the model holds more than ``FIT_POINTS`` points, so each seed
is first searched for ``FIT_POINTS`` trials: one at the optimum by then stays there under either
bound (its trace is carried on at 1.0), and only the others are searched to the budget, bounded
and unbounded, their first ``FIT_POINTS`` trials checked to agree. Prints one markdown row per
space; the CPU seconds are those of the searches to the budget.

    nice -n 19 .venv/bin/python bench/fit_points.py --seeds 5 spaces/*.json.gz
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one process, one core

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from exhaust import trials_to  # noqa: E402
from strategies import DEFAULT  # noqa: E402

from tunebench.replay import Replay, simulate  # noqa: E402
from tunebench.strategies import bayes  # noqa: E402

AT = (300, 500)
TARGETS = (0.97, 0.99, 1.0)


def searched(path: Path, budget: int, seed: int, fit_points: int) -> tuple[list[float], float]:
    """The trace of one search with the refits bounded at ``fit_points``, and its CPU seconds."""
    bound, bayes.FIT_POINTS = bayes.FIT_POINTS, fit_points
    try:
        began = time.process_time()
        trace = simulate(path, DEFAULT, budget, seed)
        return trace, time.process_time() - began
    finally:
        bayes.FIT_POINTS = bound


def row(traces: list[list[float]], budget: int) -> list[str]:
    """Median fraction at each of AT and the budget; median trials to each target (reached)."""
    cells = [f"{statistics.median(t[min(n, len(t)) - 1] for t in traces):.4f}" for n in (*AT, budget)]
    for target in TARGETS:
        reached = [trials_to(t, target) or math.inf for t in traces]
        median = statistics.median(reached)
        cells.append(f"{'never' if median == math.inf else f'{median:g}'} "
                     f"({sum(n < math.inf for n in reached)})")
    return cells


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--budget", type=int, default=1000, help="trials per search (default: 1000)")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..K-1 (default: 5)")
    args = p.parse_args()
    bound = bayes.FIT_POINTS
    columns = [f"@{n}" for n in (*AT, "end")] + [f"to {t:g}" for t in TARGETS]
    print("| space | configs | seeds short of the optimum at trial "
          f"{bound} | CPU s, bounded / unbounded | " + " | ".join(f"{c}, bounded / unbounded" for c in columns)
          + " | those seeds: trials to the optimum, bounded / unbounded |")
    print("|---" * (5 + len(columns)) + "|")
    for path in sorted(args.files, key=lambda f: f.name):
        budget = min(args.budget, len(Replay(path).recording().candidates))
        bounded, unbounded, cpu, apart = [], [], ([], []), []
        for seed in range(args.seeds):
            first, _ = searched(path, min(bound, budget), seed, bound)
            if first[-1] >= 1.0:
                bounded.append(first + [1.0] * (budget - len(first)))
                unbounded.append(bounded[-1])
                continue
            for traces, seconds, fit_points in zip((bounded, unbounded), cpu, (bound, sys.maxsize)):
                trace, took = searched(path, budget, seed, fit_points)
                assert trace[:len(first)] == first, (path.name, seed, fit_points)
                traces.append(trace)
                seconds.append(took)
            apart.append(f"seed {seed}: " + " / ".join(str(trials_to(t[-1], 1.0) or "never")
                                                       for t in (bounded, unbounded)))
        short = len(cpu[0])
        spent = " / ".join(f"{statistics.median(c):.1f}" if c else "-" for c in cpu)
        cells = [f"{a} / {b}" for a, b in zip(row(bounded, budget), row(unbounded, budget))]
        print(f"| {path.name} | {budget} | {short} of {args.seeds} | {spent} | " + " | ".join(cells)
              + f" | {'; '.join(apart) or '-'} |", flush=True)


if __name__ == "__main__":
    main()
