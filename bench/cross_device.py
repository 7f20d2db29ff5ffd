"""A strategy warmed with the same kernel's results on another device, against cold: the pairs of
../shared/replay that share a space (one kernel on two devices), each way.

The warm data is every config that ran on the other device, as (key, objective / its best)
(``Recording.scores``), the form the session hands a strategy from other devices. Prints the
median fraction of the optimum after 50 and 100 trials over seeds 0..K-1, cold and warm
(``tunebench.replay.simulate``), one row per (target, source) pair.

    nice -n 19 .venv/bin/python bench/cross_device.py annealing --seeds 10
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one process, one core

import argparse
import statistics
from pathlib import Path

from tunebench.replay import Replay, simulate

REPLAY = Path(__file__).resolve().parents[2] / "shared" / "replay"
#: One kernel's space on two devices.
PAIRS = [("dedispersion_milo_A4000.json.gz", "dedispersion_milo_MI250X.json.gz"),
         ("convolution_RTX_2080_Ti.json.gz", "convolution_RTX_3090.json"),
         ("convolution_milo_A6000.json.gz", "convolution_milo_W6600.json.gz"),
         ("pnpoly_RTX_2080_Ti.json.gz", "pnpoly_RTX_3090.json")]
AT = (50, 100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("strategy")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0..K-1 (default: 10)")
    args = p.parse_args()
    print("| target | warm from | cold @50 | cold @100 | warm @50 | warm @100 |")
    print("|---|---|---|---|---|---|")
    for a, b in PAIRS:
        for target, source in ((a, b), (b, a)):
            warm = Replay(REPLAY / source).recording().scores()
            cells = []
            for given in ((), warm):
                traces = [simulate(REPLAY / target, args.strategy, max(AT), seed, warm=given)
                          for seed in range(args.seeds)]
                cells += [f"{statistics.median(t[n - 1] for t in traces):.3f}" for n in AT]
            print(f"| {target} | {source} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
