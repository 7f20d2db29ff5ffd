"""What verifying a large output costs: ``measure.compare`` of 134M values (a GPU's softmax
shape) against their float64 reference, at several chunk sizes, in turn, on this host's cores.

On an H200 a trial of such a shape spent 1.1-1.5 s verifying (twice: before and after its timed
calls) for 3-30 ms of timed calls (docs/results-gpu.md), so this is where a GPU trial's time goes.

    python bench/verify.py [--json docs/verify.json] [--elements 134217728] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from tunebench import measure

CHUNKS = (1 << 16, 1 << 18, 1 << 20)
DTYPES = ("float16", "float32", "float64")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=1 << 27)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    reference = np.random.default_rng(0).random(args.elements)
    outputs = {dtype: reference.astype(dtype) for dtype in DTYPES}
    seconds: dict[str, list[float]] = {f"{dtype} chunk {chunk}": [] for dtype in DTYPES for chunk in CHUNKS}
    default = measure.CHUNK
    for dtype in DTYPES:  # warm: the first touch of fresh memory is paid once, not by the first label
        measure.compare([outputs[dtype]], [reference], ["y"], [(1e-2, 1e-3)])
    for r in range(args.rounds):
        for dtype in DTYPES:
            for chunk in CHUNKS[r % len(CHUNKS):] + CHUNKS[:r % len(CHUNKS)]:  # rotated: no chunk always first
                measure.CHUNK = chunk
                began = time.perf_counter()
                _, wrong = measure.compare([outputs[dtype]], [reference], ["y"], [(1e-2, 1e-3)])
                seconds[f"{dtype} chunk {chunk}"].append(time.perf_counter() - began)
                assert wrong is None, wrong
    measure.CHUNK = default
    result = {"elements": args.elements, "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
              "load_average": os.getloadavg(), "default_chunk": default,
              "seconds": {k: {"median": statistics.median(v), "min": min(v), "all": v} for k, v in seconds.items()}}
    for label, s in result["seconds"].items():
        print(f"{label:28s} median {s['median']:.3f} s  min {s['min']:.3f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
