"""A tune under a container's CPU quota: what tunebench says, against what the quota did.

Runs ``pytest suites --tune -k EXPR`` into a fresh record store once per quota (none, or so many
CPUs per 100 ms period), in a cgroup of its own made at the top of the cpu hierarchy (it takes root
and a writable cgroup v1 cpu hierarchy, or v2 with the cpu controller), and reports per run: the summary's rows
and stop messages, the device id the records went to, the trials' verdicts, how many of their
reasons name the quota, the clean trials holding a sample 5 ms or more above their median (a
stall), and the periods the cgroup was throttled (its own ``cpu.stat``). Each run starts once the
machine is quiet (under 10 % busy over 3 s, waited on for up to 10 minutes): it is shared.

    python bench/quota.py --quotas none 1.0 0.5 -k "row_reduce and (long_rows or few_rows)" --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A sample this far above its trial's median (ms) is a stall no kernel here has of its own.
STALL_MS = 5.0


def cgroup_parent() -> tuple[Path, str]:
    """Where to make the run's cgroup: v1's cpu hierarchy, else a v2 mount with the cpu controller."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, fs = line.split(" - ")[0].split(), line.split(" - ")[1].split()
        if fs[0] == "cgroup" and "cpu" in fs[2].split(","):
            return Path(fields[4]), "v1"
        if fs[0] == "cgroup2" and "cpu" in (Path(fields[4]) / "cgroup.controllers").read_text().split():
            return Path(fields[4]), "v2"
    raise SystemExit("no cgroup hierarchy with the cpu controller is mounted here")


def throttled(folder: Path) -> tuple[int, float]:
    """(periods throttled, ms throttled) of the cgroup so far."""
    stat = dict(line.split() for line in (folder / "cpu.stat").read_text().splitlines())
    ms = int(stat["throttled_time"]) / 1e6 if "throttled_time" in stat else int(stat["throttled_usec"]) / 1e3
    return int(stat["nr_throttled"]), ms


def quiet(limit_s: float = 600.0) -> float:
    """Waits until the machine is under 10 % busy over 3 s; the busy share then."""
    began = time.monotonic()
    while True:
        a = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        time.sleep(3)
        b = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        d = [y - x for x, y in zip(a, b)]
        busy = 1 - (d[3] + d[4]) / sum(d)
        if busy < 0.1 or time.monotonic() - began > limit_s:
            return busy


def digest(records: Path) -> dict:
    trials = [t for path in records.glob("*.json") for t in json.loads(path.read_text())["trials"].values()]
    timed = [t for t in trials if "samples" in t]
    stalls = []  # ms above the median, of each clean trial's slowest sample that stalled
    for t in timed:
        samples = [x for xs in t.get("placements", {"": t["samples"]}).values() for x in xs]
        if t.get("verdict") == "clean" and max(samples) - statistics.median(samples) >= STALL_MS:
            stalls.append(round(max(samples) - statistics.median(samples), 1))
    return {"devices": sorted(p.stem for p in records.glob("*.json")),
            "timed": len(timed), "verdicts": dict(Counter(t.get("verdict") for t in timed)),
            "quota_named": sum(any("quota" in r for r in t.get("interference", [])) for t in timed),
            "clean_with_stall": len(stalls), "stalls_ms": sorted(stalls)}


def run(cpus: float | None, expr: str, parent: Path, version: str) -> dict:
    folder = parent / f"tunebench-bench-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    try:
        if version == "v1":
            (folder / "cpu.cfs_quota_us").write_text(str(-1 if cpus is None else int(cpus * 100000)))
        else:
            (folder / "cpu.max").write_text(f"{'max' if cpus is None else int(cpus * 100000)} 100000")
        busy = quiet()
        before = throttled(folder)
        with tempfile.TemporaryDirectory() as records:
            began = time.monotonic()
            done = subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', folder, sys.executable,
                                   "-m", "pytest", "suites", "--tune", "--tune-target", "cpu", "-k", expr,
                                   "--tune-records", records, "-p", "no:cacheprovider"],
                                  cwd=ROOT, capture_output=True, text=True)
            wall = time.monotonic() - began
            found = digest(Path(records))
        after = throttled(folder)
    finally:
        for _ in range(50):
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    lines = done.stdout.splitlines()
    said = [line for line in lines if line.startswith(("tunebench: the cgroup", "stopped: ", "row_reduce", "softmax",
                                                         "layernorm", "matmul_add", "interference: "))]
    return {"cpus": cpus, "busy_before": round(busy, 3), "wall_s": round(wall, 1), "exit": done.returncode,
            "throttled_periods": after[0] - before[0], "throttled_ms": round(after[1] - before[1]), **found,
            "said": said}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quotas", nargs="+", default=["none", "1.0", "0.5"], help="CPUs per 100 ms, or none")
    parser.add_argument("-k", dest="expr", default="row_reduce and (long_rows or few_rows)")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args()
    parent, version = cgroup_parent()
    runs = []
    for q in args.quotas:
        runs.append(run(None if q == "none" else float(q), args.expr, parent, version))
        print(json.dumps(runs[-1], indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
