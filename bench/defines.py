"""How long ``tunebench.tuned(...).defines(shape)`` takes per call, a framework's build flags
asked per launch: the median of 7 runs of 20,000 calls, in µs, on the committed records of the
AMD EPYC f26m2 device, run from the project root it measures (a checkout of the code before
beside it, run in turn, compares the two).

    python bench/defines.py
"""

import statistics
import sys
import timeit
import warnings
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))  # the checkout it is run from, not this file's

import tunebench  # noqa: E402

warnings.simplefilter("ignore")
handle = tunebench.tuned("layernorm", device="cpu-amd-epyc-f26m2-2t-506d4e", records="records", suites="suites")
shape = (300, 8192)
handle.defines(shape)
runs = [timeit.timeit(lambda: handle.defines(shape), number=20000) / 20000 * 1e6 for _ in range(7)]
print(f"{statistics.median(runs):.1f}")
