"""What a reading of the run's own CPU time (``interference.OwnTime``) costs, and how often it
falls, which a reading that counts each tick once never does: a fall is time of the run's own
read as another process's, and the measurement whose window ends there may be judged disturbed.

Three scenes, each ``--seconds`` long, readings ``--every`` ms apart as measurements take them
(0: back to back, as a race shows most): alone (this process and two idle children, as a run's
workers); beside two loops of short-lived children burning 30 ms each (a build pool's compilers);
beside a child that starts a grandchild burning 0.3 s every 0.5 s and ends while it burns
(orphans init adopts). Per scene: the cost of a reading (median, 90th percentile), the readings
that fell, and the 0.5 s windows (the monitor's horizon) whose own time is short of the largest
reading before them by more than CONTENTION_CORES of a core: those the run's own processes alone
could have judged disturbed; and the cores' worth of CPU time the run's processes read as
taking in all (the orphans' grandchildren burn 0.6 of a core). Reads the checkout's own tunebench:
to compare with an earlier commit, run a copy of it in that commit's worktree.

    python bench/own_time.py [--seconds 10] [--every 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tunebench.interference import CONTENTION_CORES, HORIZON_S, OwnTime  # noqa: E402

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass"
IDLE = [sys.executable, "-c", "import sys; sys.stdin.read()"]
CHURN = [sys.executable, "-c", f"import subprocess, sys\nwhile True: subprocess.run([sys.executable, '-c', {BURN.format(s=0.03)!r}])"]
LAUNCH = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {BURN.format(s=0.3)!r}]); time.sleep(0.1)"
ORPHANS = [sys.executable, "-c", f"import subprocess, sys, time\nwhile True:\n    subprocess.run([sys.executable, '-c', {LAUNCH!r}])\n    time.sleep(0.4)"]
SCENES = {"alone": [IDLE, IDLE], "churn": [CHURN, CHURN], "orphans": [ORPHANS]}


def scene(commands: list[list[str]], seconds: float, every: float) -> dict:
    children = [subprocess.Popen(c, stdin=subprocess.PIPE) for c in commands]
    own, ticks_s = OwnTime(), os.sysconf("SC_CLK_TCK")
    readings, costs = [], []
    try:
        own.ticks()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began = time.perf_counter()
            value = own.ticks()
            costs.append((time.perf_counter() - began) * 1e3)
            readings.append((time.monotonic(), value))
            time.sleep(every)
    finally:
        for child in children:
            child.kill()
            child.wait()
    falls = sum(b < a for (_, a), (_, b) in zip(readings, readings[1:]))
    peak, most = [], 0
    for _, value in readings:
        most = max(most, value)
        peak.append(most)
    windows = short = start = 0
    for i, (t, value) in enumerate(readings):
        while start + 1 < i and t - readings[start + 1][0] >= HORIZON_S:
            start += 1
        span = t - readings[start][0]
        if span < HORIZON_S:
            continue
        windows += 1
        lost = (peak[i] - value) - (peak[start] - readings[start][1])
        short += lost > CONTENTION_CORES * span * ticks_s
    costs.sort()
    return {"readings": len(readings), "reading_ms_median": round(statistics.median(costs), 3),
            "reading_ms_p90": round(costs[int(0.9 * len(costs))], 3), "falls": falls,
            "windows": windows, "windows_short": short,
            "own_cores": round((readings[-1][1] - readings[0][1]) / ticks_s / (readings[-1][0] - readings[0][0]), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=0.0, help="ms between readings")
    args = parser.parse_args()
    found = {name: scene(commands, args.seconds, args.every / 1e3) for name, commands in SCENES.items()}
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
