"""How long `pytest --tune --tune-target cuda --collect-only` takes on a suite whose CUDA template
tests a bool param with #ifdef and a header of its -I folder reads the param's value where the
last param is at its last value (a false suspect, which nvcc's preprocessor clears there alone,
after 16 settings of the others), beside four params of 4 to 6 values: the first
collection of the suite, and a second one of the same suite. Writes a throwaway project into a
temporary folder and collects it in fresh pytest processes, as a user would, with one compile
cache; prints the seconds of each. Needs nvcc (no GPU).

    python bench/constant_params.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL = """\
#include "twice.cuh"
extern "C" __global__ void k(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef fast
    if (i < n) y[i] = TWICE(x[i]) * VEC * TILE * UNROLL;
#else
    if (i < n) y[i] = x[i] + x[i];
#endif
}
"""
HEADER = "#if fast && UNROLL == 8\n#define TWICE(v) (2 * (v))\n#else\n#define TWICE(v) ((v) * 2)\n#endif\n"
SUITE = '''
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

k = Kernel(
    "k", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(4096,)])]),
    args=lambda shape, dtype, rng: {"x": np.zeros(shape[0], dtype), "y": np.zeros(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, y, n: 2 * x, outputs=["y"],
    cuda=Variant(source="k.cu", entry="k", flags=("-Iinc",),
                 heuristic=lambda shape: {"fast": False, "block": 128, "VEC": 1, "TILE": 1, "UNROLL": 1},
                 space=Space({"fast": [False, True], "block": [32, 64, 128, 256, 512, 1024], "VEC": [1, 2, 4, 8],
                              "TILE": [1, 2, 4, 8, 16], "UNROLL": [1, 2, 4, 8]}),
                 launch=lambda config, shape: (-(-shape[0] // config["block"]), config["block"])),
)
'''


def collect(folder: Path) -> float:
    """The seconds of one collection of the suite in ``folder``, in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "--tune", "--tune-target", "cuda", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "test_k.py"], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "TUNEBENCH_CACHE": str(folder / "cache"),
                               "PYTHONPATH": str(Path.cwd())})  # the checkout it is run from
    if proc.returncode != 0:
        sys.exit(f"collection failed:\n{proc.stdout}\n{proc.stderr}")
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "inc").mkdir()
        (folder / "inc" / "twice.cuh").write_text(HEADER)
        (folder / "k.cu").write_text(KERNEL)
        (folder / "test_k.py").write_text(SUITE)
        print(f"first collection {collect(folder):.1f} s, second {collect(folder):.1f} s")


if __name__ == "__main__":
    main()
