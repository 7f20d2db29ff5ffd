"""The replay target on a Kernel Tuner cache of about a million configs: load time and memory.

The cache is a shipped one widened: one more param, ``copy`` (0, 1, ...), each value repeating
every recorded entry (its runs included), so that it is as large as asked. In a fresh Python
process each: ``load`` (parse and check every entry), a ``Replay`` of it (what every
``simulate`` call builds), and the recording's candidates and objectives; wall and CPU seconds
and the process's peak resident memory. The code measured is the ``tunebench`` that process imports
(``PYTHONPATH=CHECKOUT`` to measure another).

    nice -n 19 .venv/bin/python bench/replay_scale.py --configs 1000000
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from strategies import REPLAY, read  # noqa: E402

STEPS = """
import resource, sys, time
from tunebench.replay import Replay, load
clocks = lambda: (time.perf_counter(), time.process_time())
began = clocks()
recording = load(sys.argv[1])[1][0]
loaded = clocks()
Replay(sys.argv[1])
replayed = clocks()
len(recording.candidates), recording.optimum
done = clocks()
print(*(b[i] - a[i] for i in (0, 1) for a, b in ((began, loaded), (loaded, replayed), (replayed, done))),
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
"""


def widened(source: Path, configs: int, out: Path) -> int:
    """Write ``source`` widened to at least ``configs`` entries; returns how many."""
    data = read(source)
    copies = math.ceil(configs / len(data["cache"]))
    data["tune_params_keys"] = [*(data.get("tune_params_keys") or data["tune_params"]), "copy"]
    data["tune_params"]["copy"] = list(range(copies))
    data["cache"] = {f"{key},{c}": {**entry, "copy": c} for c in range(copies) for key, entry in data["cache"].items()}
    out.write_text(json.dumps(data))
    return len(data["cache"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", type=int, default=1_000_000)
    p.add_argument("--source", type=Path, default=REPLAY / "dedispersion_milo_A4000.json.gz")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "widened.json"
        entries = widened(args.source, args.configs, path)
        size = path.stat().st_size / 2**20
        *seconds, rss = map(float, subprocess.run(
            [sys.executable, "-c", STEPS, str(path)], cwd=tmp, check=True, capture_output=True, text=True).stdout.split())
    (load, replay, objectives), cpu = seconds[:3], seconds[3:]  # CPU seconds too: wall ones vary with a shared core
    print(f"{args.source.name} widened to {entries} configs ({size:.0f} MiB of JSON): load {load:.1f} s "
          f"({cpu[0]:.1f} s CPU), Replay() {replay:.1f} s ({cpu[1]:.1f} s CPU), candidates and objectives "
          f"{objectives:.1f} s ({cpu[2]:.1f} s CPU), peak memory {rss:.2f} GiB")


if __name__ == "__main__":
    main()
