"""How long `pytest --tune --collect-only` takes on a suite whose space holds 20,000+ valid configs.

Real spaces are that large (../shared/replay/ holds 4,092 and 6,768 configs). Writes a throwaway
project with one such suite into a temporary folder, collects it with 1 and 3 buckets in a fresh
pytest process (as a user would), and writes docs/collection.md.

    python bench/collect_large_space.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SUITE = '''
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant, pow2

def args(shape, dtype, rng):
    return {{"x": np.zeros(shape[0], np.float32), "y": np.zeros(shape[0], np.float32)}}

big = Kernel(
    "big",
    buckets=Buckets(["N"], [{buckets}]),
    args=args, reference=lambda x: x, outputs=["y"],
    cpu=Variant(
        source="big.c", entry="big", heuristic=lambda shape: {{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1}},
        space=Space({{"a": pow2(1, 64), "b": pow2(1, 64), "c": pow2(1, 16), "d": pow2(1, 8),
                     "e": (1, 8), "f": [1, 2, 4]}},
                    constraints=[lambda a, b: a * b <= 2048, lambda c, d: c * d <= 64]),
    ),
)
'''
BUCKETS = ['Bucket("b0", N=(1, 999), shapes=[(512,)])', 'Bucket("b1", N=(1000, 9999), shapes=[(4096,)])',
           'Bucket("b2", N=(10000, None), shapes=[(65536,)])']


def collect(n_buckets: int) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "big.c").write_text("void big(float *x, float *y) {}\n")
        Path(tmp, "test_big.py").write_text(SUITE.format(buckets=", ".join(BUCKETS[:n_buckets])))
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "--tune", "--tune-target", "cpu",
                               "--collect-only", "-q", "-p", "no:cacheprovider", "test_big.py"],
                              cwd=tmp, capture_output=True, text=True,
                              env={**os.environ, "TUNEBENCH_CACHE": str(Path(tmp, "cache"))})
        seconds = time.perf_counter() - start
        tail = proc.stdout.strip().splitlines()[-1]
        if proc.returncode != 0:
            sys.exit(f"collection failed:\n{proc.stdout}\n{proc.stderr}")
        return seconds, tail


def main() -> None:
    rows = []
    for n in (1, 3):
        seconds, tail = collect(n)
        selected, total, deselected = map(int, re.match(r"(\d+)/(\d+) tests collected \((\d+)", tail).groups())
        rows.append(f"| {n} | {(selected - n) // n:,} | {deselected // n:,} | {tail} | {seconds:.1f} s |")
        print(rows[-1])
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    (ROOT / "docs").mkdir(exist_ok=True)
    (ROOT / "docs" / "collection.md").write_text(
        "# Collecting a large space\n\n"
        "A suite with 6 params and 2 constraints (see `bench/collect_large_space.py`), collected with "
        "`pytest --tune --tune-target cpu --collect-only -q` in a fresh process; the wall time is the "
        "whole command's, interpreter start included. Each bucket has one item per valid config and "
        "one for the baseline; constraint-violating configs are collected and deselected.\n\n"
        "| buckets | valid configs | deselected per bucket | pytest says | wall time |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"Machine: {cpu}, {os.cpu_count()} cores, Python {sys.version.split()[0]}.\n\n"
        "Made by `python bench/collect_large_space.py`.\n")

if __name__ == "__main__":
    main()
