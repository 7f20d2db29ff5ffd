"""How fast ``tunebench.best()`` answers a framework: the first call in a fresh process and
every call after it, on a records file of ``--trials`` trials.

The records are the committed ones for this machine's device (or for the device
``$TUNEBENCH_DEVICE`` names, which the probes' lookups then read too, as a framework's process
does), grown to ``--trials`` trials with copies of its trials under new configs (so every task has
thousands of configs to rank), in a temporary project with the shipped suites. Each measurement
runs in a fresh Python process: the first call (which opens and indexes the records), then
``--calls`` calls over a mix of shapes inside, on the edges of and outside the buckets, then 13 %
as many calls, each asking a shape not asked before (a framework's dynamic shapes: what an answer
costs the first time).

    python bench/lookup.py [--trials 10000] [--calls 100000] [--out docs/lookup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunebench.lookup import this_device  # noqa: E402

SHAPES = [(4, 65536), (300, 8192), (16, 2049), (4096, 512), (2048, 2048), (0, 512), (10**6, 10**6), (8, 1024, 1024),
          (256, 256, 256), (512, 512, 512), (384, 100, 100)]

PROBE = """
import itertools, json, sys, time
t0 = time.perf_counter()
import tunebench
imported = time.perf_counter()
shapes = {shapes!r}
kernels = {{2: ["layernorm", "softmax", "row_reduce"], 3: ["matmul_add"]}}
calls = [(k, s) for s in shapes for k in kernels[len(s)]]
first = time.perf_counter()
tunebench.best(*calls[0])
first = time.perf_counter() - first
for k, s in calls:  # every answer once, so that the loop below times the steady state
    tunebench.best(k, s)
n = {calls}
start = time.perf_counter()
for i in range(n):
    tunebench.best(*calls[i % len(calls)])
per_call = (time.perf_counter() - start) / n
fresh = [(k, (100000 + i, 4096)) for i, k in zip(range(n // 10), itertools.cycle(kernels[2]))]
fresh += [("matmul_add", (1000 + i, 256, 256)) for i in range(n // 30)]
start = time.perf_counter()
for k, s in fresh:  # a framework's dynamic shapes: each asked for the first time
    tunebench.best(k, s)
per_new_shape = (time.perf_counter() - start) / len(fresh)
print(json.dumps({{"import_s": imported - t0, "first_call_s": first, "per_call_s": per_call,
                  "per_new_shape_s": per_new_shape}}))
"""


def grow(records: Path, trials: int, seed: int = 0) -> int:
    """Copies of the file's trials under new configs (a ``copy`` param), up to ``trials``."""
    data = json.loads(records.read_text())
    rng = random.Random(seed)
    have = list(data["trials"].values())
    for i in range(len(have), trials):
        doc = dict(rng.choice(have))
        doc["config"] = {**doc["config"], "copy": i}
        data["trials"][str(i + 1)] = doc
    records.write_text(json.dumps(data))
    return len(data["trials"])


def probe(project: Path, calls: int) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE.format(shapes=SHAPES, calls=calls)], cwd=project,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per measurement (default 5)")
    parser.add_argument("--out", type=Path, help="write the figures (JSON) here")
    args = parser.parse_args()
    device = this_device() if os.environ.get("TUNEBENCH_DEVICE", "").strip() else this_device("cpu")
    source = ROOT / "records" / f"{device}.json"
    if not source.exists():
        raise SystemExit(f"no records for {device} ({source}): run pytest suites --tune first, or name a "
                         f"device with committed records by $TUNEBENCH_DEVICE")
    project = Path(tempfile.mkdtemp(prefix="tunebench-lookup-"))
    shutil.copytree(ROOT / "suites", project / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "kernels", project / "kernels")
    shutil.copy(ROOT / "pyproject.toml", project)
    (project / "records").mkdir()
    records = project / "records" / source.name
    shutil.copy(source, records)
    total = grow(records, args.trials)
    runs = {"cold": [], "warm": []}
    for i in range(args.repeats):
        shutil.rmtree(project / "records" / ".index", ignore_errors=True)  # no index yet: built by the call
        runs["cold"].append(probe(project, args.calls))
        runs["warm"].append(probe(project, args.calls))  # the index the cold run wrote
        print(f"run {i + 1}: cold {runs['cold'][-1]}, warm {runs['warm'][-1]}", flush=True)
    result = {"device": device, "trials": total, "records_bytes": records.stat().st_size, "calls": args.calls,
              "runs": runs}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    shutil.rmtree(project)
    return 0


if __name__ == "__main__":
    sys.exit(main())
