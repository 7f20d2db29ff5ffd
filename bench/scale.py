"""How the record store grows: open, look up, add, fold, best(), gate start-up and report on
records files of 10k, 100k and 1M synthetic trials.

The trials are copies of this machine's committed trials (or, without them, of any committed
records file) under new configs, spread over the shipped suites' tasks, written as the store
keeps them: the newest 20,000 in the TinyDB file, the older ones in its archive. Every operation runs in a fresh Python process (wall seconds, the median of
``--repeats``):

- open: ``RecordStore(path)`` (parse, validate, index the file's trials);
- lookup first: the first ``store.lookup(...)`` of the oldest trial (where it is archived, this
  indexes the archive);
- lookup: ``store.lookup(...)`` of a recorded trial, per call after the first;
- add: ``store.add(trial)`` (journal append), per call;
- fold: ``store.compact()`` after 100 adds (the file rewritten with them);
- best (cold / warm): the first ``tunebench.best()`` in a process, without and with the index;
- gate start-up: ``pytest suites --collect-only`` on the records (the gate opens them);
- report: ``tunebench report``.

    python bench/scale.py [--sizes 10000 100000 1000000] [--out docs/scale.json]

With ``--tune``, instead: the wall time of ``pytest suites --tune`` (the project's budget) from
empty records and an empty compile cache, with 1 and with 2 builders on this host
(``--tune-builders``: compiles of the candidates the strategy asks next, in parallel), and on a
local Ray cluster of two one-core CPU devices (``--tune-cluster``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunebench.records import ARCHIVE_ABOVE  # noqa: E402

#: Each step's program. The add and fold steps open the store to write, with its fingerprint: one
#: opened without it only reads, and its compact() folded nothing, in no time.
STEPS = {
    "open": """
import time; from tunebench.records import RecordStore
t = time.perf_counter(); store = RecordStore(PATH); print(time.perf_counter() - t)""",
    "lookup_first": """
import time; from tunebench.records import RecordStore
store = RecordStore(PATH); doc = store.trials()[0]
t = time.perf_counter(); store.lookup(doc["kernel"], doc["source_hash"], doc["shape"], doc["dtype"], doc["config"])
print(time.perf_counter() - t)""",
    "lookup": """
import time; from tunebench.records import RecordStore
store = RecordStore(PATH); doc = store.trials()[len(store.trials()) // 2]
store.lookup(doc["kernel"], doc["source_hash"], doc["shape"], doc["dtype"], doc["config"])
t = time.perf_counter()
for _ in range(1000): store.lookup(doc["kernel"], doc["source_hash"], doc["shape"], doc["dtype"], doc["config"])
print((time.perf_counter() - t) / 1000)""",
    "add": """
import time; from tunebench.records import RecordStore
store = RecordStore(PATH, RecordStore(PATH).fingerprint); doc = dict(store.trials()[0])
t = time.perf_counter()
for i in range(100): store.add({**doc, "config": {**doc["config"], "added": i}})
print((time.perf_counter() - t) / 100)""",
    "fold": """
import time; from tunebench.records import RecordStore
store = RecordStore(PATH, RecordStore(PATH).fingerprint); doc = dict(store.trials()[0])
for i in range(100): store.add({**doc, "config": {**doc["config"], "folded": i}})
t = time.perf_counter(); store.compact(); print(time.perf_counter() - t)""",
    "best_cold": """
import shutil, time, tunebench; shutil.rmtree(RECORDS + "/.index", ignore_errors=True)
t = time.perf_counter(); tunebench.best("layernorm", (300, 8192), DEVICE, records=RECORDS); print(time.perf_counter() - t)""",
    "best_warm": """
import time, tunebench
t = time.perf_counter(); tunebench.best("layernorm", (300, 8192), DEVICE, records=RECORDS); print(time.perf_counter() - t)""",
}


def synthetic(source: Path, target: Path, trials: int, seed: int = 0) -> None:
    """Records of ``trials`` trials as the store keeps them: the source's tables and the newest
    ``ARCHIVE_ABOVE`` trials in the TinyDB file, the older ones in its archive; the trials are
    the source's copied under new configs."""
    data = json.loads(source.read_text())
    have = list(data["trials"].values())
    rng = random.Random(seed)
    archived = max(0, trials - ARCHIVE_ABOVE)
    with open(target.with_name(f"{target.stem}.archive.jsonl"), "w") as f:
        for i in range(archived):
            doc = dict(rng.choice(have))
            f.write(json.dumps({**doc, "config": {**doc["config"], "copy": i}}) + "\n")
    with open(target, "w") as f:
        f.write("{")
        for name in ("device", "tasks", "sources", "checks"):
            f.write(json.dumps(name) + ": " + json.dumps(data.get(name, {})) + ",\n")
        f.write('"trials": {\n')
        for i in range(archived, trials):
            doc = dict(rng.choice(have))
            doc["config"] = {**doc["config"], "copy": i}
            f.write(("," if i > archived else "") + f"  {json.dumps(str(i + 1))}: {json.dumps(doc)}\n")
        f.write(" }}\n")


def timed(code: str, path: Path, device: str, repeats: int) -> float:
    values = []
    for _ in range(repeats):
        program = code.replace("PATH", repr(str(path))).replace("RECORDS", repr(str(path.parent))).replace(
            "DEVICE", repr(device))
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=path.parent.parent)
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        values.append(float(done.stdout.split()[-1]))
    return statistics.median(values)


def wall(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if done.returncode not in (0, 5):
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    return time.perf_counter() - start


def project_copy() -> Path:
    project = Path(tempfile.mkdtemp(prefix="tunebench-scale-"))
    for part in ("suites", "kernels"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", project)
    return project


def tune_walls() -> list[dict]:
    """Wall seconds of a tune from nothing: 1 and 2 builders here, and a local Ray cluster."""
    rows = []
    ray = str(Path(sys.executable).with_name("ray"))
    for label, extra, env in (("1 builder", ["--tune-builders", "1"], {}),
                              ("2 builders", ["--tune-builders", "2"], {}),
                              ("Ray, 2 devices of 1 core", ["--tune-cluster", "127.0.0.1:6391"], {"OMP_NUM_THREADS": "1"})):
        project = project_copy()
        cache = Path(tempfile.mkdtemp(prefix="tunebench-cache-"))
        env = {**os.environ, **env, "TUNEBENCH_CACHE": str(cache), "RAY_AUTH_MODE": "disabled"}
        if "--tune-cluster" in extra:
            temp = tempfile.mkdtemp(prefix="tbray", dir="/tmp")
            subprocess.run([ray, "start", "--head", "--port=6391", "--num-cpus=2", "--include-dashboard=false",
                            f"--temp-dir={temp}", "--disable-usage-stats"], env=env, capture_output=True, check=True)
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "suites", "--tune", "-q", "-p", "no:cacheprovider",
                               *extra], cwd=project, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - began
        if "--tune-cluster" in extra:
            subprocess.run([ray, "stop", "--force"], capture_output=True)
        builds = next((ln for ln in done.stdout.splitlines() if "builds:" in ln), "")
        rows.append({"run": label, "exit": done.returncode, "wall_s": round(seconds, 1), "summary": builds})
        print(json.dumps(rows[-1]), flush=True)
        shutil.rmtree(project)
        shutil.rmtree(cache)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tune", action="store_true", help="time tunes instead (see the module docstring)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.tune:
        rows = tune_walls()
        if args.out:
            args.out.write_text(json.dumps({"tunes": rows}, indent=1) + "\n")
        return 0
    from tunebench.lookup import this_device
    source = ROOT / "records" / f"{this_device('cpu')}.json"
    if not source.exists():
        source = sorted((ROOT / "records").glob("*.json"))[0]
    device = source.stem  # the copies keep the source's device: a file named for another is refused
    results = []
    for size in args.sizes:
        project = project_copy()
        (project / "records").mkdir()
        path = project / "records" / f"{device}.json"
        began = time.perf_counter()
        synthetic(source, path, size)
        archive = path.with_name(f"{path.stem}.archive.jsonl")
        os.sync()  # no step's fsync waits on the write-back of the gigabytes just written
        row = {"trials": size, "bytes": path.stat().st_size, "archive_bytes": archive.stat().st_size,
               "write_s": time.perf_counter() - began}
        for step, code in STEPS.items():
            row[step] = timed(code, path, device, args.repeats)
        row["gate_startup"] = wall([sys.executable, "-m", "pytest", "suites", "--collect-only", "-q",
                                    "-p", "no:cacheprovider"], project)
        row["report"] = wall([sys.executable, "-m", "tunebench.cli", "report", "--records", str(project / "records"),
                              "--out", str(project / "report")], project)
        results.append(row)
        print(json.dumps(row), flush=True)
        shutil.rmtree(project)
    if args.out:
        args.out.write_text(json.dumps({"device": device, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
