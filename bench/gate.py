"""The gate's false alarms and catches, measured: a fresh tune, then gate runs with nothing
changed (A/A) and with one kernel made 15 % slower, on a quiet machine and beside busy processes.

Works on a copy of the project (suites, kernels, pyproject.toml) in a temporary folder:

1. ``pytest suites --tune`` there (the project's budget), unless ``--records DIR`` gives records
   to copy instead; with ``--load N``, N busy processes run beside the tune too, and the bench
   reports whether it stopped with the busy line or recorded picks (compared with ``--quiet-records``).
2. ``--runs`` gate runs (``pytest suites``) with nothing changed;
3. ``--runs`` gate runs with ``--slow KERNEL``'s template changed so that every call takes 15 %
   longer (its entry point spins for 15 % of the time the original took);

with ``--load N`` busy processes (a spinning Python each) beside every gate run. Each run's items
are read from the gate's own records (``checks`` of kind ``gate``).

    python bench/gate.py --runs 20 --json docs/gate-quiet.json
    python bench/gate.py --runs 10 --load 2 --records records --json docs/gate-busy.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunebench.lookup import this_device  # noqa: E402

SLOWER = 1.15

SPIN = """
#undef {entry}
#include <time.h>
static double tb_now(void) {{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }}
void {entry}({params})
{{
    double t0 = tb_now();
    {entry}_unslowed({args});
    double stop = t0 + {factor} * (tb_now() - t0);
    while (tb_now() < stop) {{}}
}}
"""


def slowed(template: str, entry: str, factor: float = SLOWER) -> str:
    """The template with ``entry`` wrapped so that each call takes ``factor`` times as long."""
    found = re.search(rf"\bvoid\s+{entry}\s*\(([^)]*)\)\s*\{{", template)
    if found is None:
        raise SystemExit(f"no definition of void {entry}(...) in the template")
    params = " ".join(found.group(1).split())
    args = ", ".join(re.findall(r"(\w+)\s*(?:,|$)", params))
    return f"#define {entry} {entry}_unslowed\n{template}\n" + SPIN.format(entry=entry, params=params, args=args,
                                                                         factor=factor)


def _spin(stop) -> None:
    while not stop.is_set():
        pass


class Load:
    """``n`` busy processes while the block runs."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        ctx = multiprocessing.get_context("fork")
        self.stop = ctx.Event()
        self.procs = [ctx.Process(target=_spin, args=(self.stop,), daemon=True) for _ in range(self.n)]
        for p in self.procs:
            p.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for p in self.procs:
            p.join()


def pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-q", *args],
                          cwd=project, capture_output=True, text=True)


def gate_checks(project: Path) -> list[dict]:
    path = project / "records" / f"{this_device('cpu')}.json"
    data = json.loads(path.read_text())
    return [c for c in data.get("checks", {}).values() if c["kind"] == "gate"]


def gate_runs(project: Path, runs: int, load: int, label: str) -> list[dict]:
    out = []
    for i in range(runs):
        before = len(gate_checks(project))
        began = time.monotonic()
        with Load(load):
            done = pytest(project, "-p", "no:randomly")
        checks = gate_checks(project)[before:]
        out.append({"run": i, "exit": done.returncode, "seconds": round(time.monotonic() - began, 1),
                    "items": [{"task": f"{c['kernel']}[{c['bucket']}-{c['dtype']}]", "outcome": c["outcome"],
                               "reason": c["reason"],
                               "verdicts": [(v["what"].split(" (")[0], round(sorted(v["ratios"])[len(v["ratios"]) // 2], 3),
                                             v["outcome"]) for v in c["verdicts"]]} for c in checks]})
        counts = {k: sum(it["outcome"] == k for it in out[-1]["items"]) for k in ("pass", "fail", "skip")}
        print(f"{label} run {i + 1}/{runs}: exit {done.returncode}, {counts}, {out[-1]['seconds']} s", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the tune and every gate run")
    parser.add_argument("--slow", default="layernorm", help="the kernel made 15 %% slower (default layernorm)")
    parser.add_argument("--records", type=Path, help="copy these records instead of tuning afresh")
    parser.add_argument("--quiet-records", type=Path,
                        help="with --load and no --records: a quiet tune's records to compare the picks with")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args()
    project = Path(tempfile.mkdtemp(prefix="tunebench-gate-"))
    for part in ("suites", "kernels"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", project)
    result = {"load": args.load, "slow": args.slow, "factor": SLOWER}
    if args.records:
        shutil.copytree(args.records, project / "records", ignore=shutil.ignore_patterns(".*"))
    else:
        began = time.monotonic()
        with Load(args.load):
            tune = pytest(project, "--tune")
        tail = [ln for ln in tune.stdout.splitlines() if ln.startswith(("stopped:", "interference:"))]
        result["tune"] = {"exit": tune.returncode, "seconds": round(time.monotonic() - began, 1), "lines": tail,
                          "table": [ln for ln in tune.stdout.splitlines() if re.match(r"^\w+\s+\w+\s+float", ln)]}
        print(f"tune: exit {tune.returncode} in {result['tune']['seconds']} s", *tail, sep="\n", flush=True)
    result["unchanged"] = gate_runs(project, args.runs, args.load, "unchanged")
    template = next((project / "kernels").glob(f"{args.slow}.c"))
    template.write_text(slowed(template.read_text(), args.slow))
    result["slower"] = gate_runs(project, args.runs, args.load, f"{args.slow} 15% slower")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    shutil.rmtree(project)
    return 0


if __name__ == "__main__":
    sys.exit(main())
