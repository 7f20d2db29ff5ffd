"""The gate on an edited template beside busy processes: does one config built two ways (today's
template against the recorded one, interleaved in each process) read its true ratio where every
process stays disturbed?

A project in a temporary folder (tests/test_gate.py's chain kernel: a serial one, the same with
``#pragma omp parallel for``, or the serial one on a shape of 5 ms calls) is tuned, then its
template is edited and ``pytest`` gates it ``--runs`` times beside each ``--load`` of spinning
processes (started by this script, so not under the gate's run). Edits: ``neutral`` (a comment:
the source hash changes, the code does not; the gate now finds the two builds the same machine
code and measures no such check, so these runs keep no ratios: see docs/ci.md), ``2x`` (twice
the work), ``to-omp`` (the serial template made OpenMP: faster where quiet), ``to-serial`` (the
OpenMP one made serial). Each run
keeps the item's outcome, the ratios of the check against the recorded source, and per process
whether it stayed disturbed, by what (the machine's readings alone, or also its samples), and
the threads it counted: a project conftest.py wraps ``tunebench.compare.undisturbed`` to log them.

    python bench/gate_edits.py serial --runs 10 --load 2 1 --json docs/gate-busy-edits.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gate import Load  # noqa: E402
from tests.conftest import QUIET_CONFTEST  # noqa: E402
from tests.test_gate import CHAIN_C, CHAIN_SUITE  # noqa: E402
from tunebench.lookup import this_device  # noqa: E402

OMP_C = CHAIN_C.replace("    for (int r = 0; r < reps; ++r)\n        for (int i = 0; i + LANES <= n; i += LANES) {",
                        "    for (int r = 0; r < reps; ++r)\n        #pragma omp parallel for\n"
                        "        for (int i = 0; i <= n - LANES; i += LANES) {")
KINDS = {"serial": (CHAIN_C, 2048), "omp": (OMP_C, 16384), "serial-long": (CHAIN_C, 163840)}
EDITS = {
    "neutral": lambda t: "/* a comment: the source hash changes, the code does not */\n" + t,
    "2x": lambda t: t.replace("#define EXTRA 0", "#define EXTRA 200"),
    "to-omp": lambda t: OMP_C,
    "to-serial": lambda t: CHAIN_C,
}

#: Logs every process of the gate's comparisons: its verdict, the machine's reasons among its
#: reasons, the threads it counted, and the load average as it ended.
LOGGER = """\
import json, os
import tunebench.compare
from tunebench.interference import machine_signals

measured = tunebench.compare.undisturbed

def logged(*args, **kwargs):
    result = measured(*args, **kwargs)
    conditions = result.get("conditions", {})
    with open(os.environ["GATE_EDITS_LOG"], "a") as log:
        log.write(json.dumps({"verdict": result.get("verdict"), "reasons": result.get("interference", []),
                              "machine": machine_signals(conditions), "threads": conditions.get("threads"),
                              "loadavg": os.getloadavg()[0]}) + "\\n")
    return result

tunebench.compare.undisturbed = logged
"""


def pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "test_chain.py", "-p", "no:cacheprovider", "--tune-target",
                           "cpu", "-W", "ignore::pytest.PytestAssertRewriteWarning", *args],
                          cwd=project, capture_output=True, text=True,
                          env={**os.environ, "GATE_EDITS_LOG": str(project / "log.jsonl")})


def gate_checks(project: Path) -> list[dict]:
    data = json.loads((project / "records" / f"{this_device('cpu')}.json").read_text())
    return [c for c in data.get("checks", {}).values() if c["kind"] == "gate"]


def process(logged: dict) -> dict:
    """One process: stayed disturbed by what (``machine``: its readings alone, ``samples``: its
    samples too), or ``clean``; the threads it counted."""
    by = "clean" if logged["verdict"] != "disturbed" else (
        "samples" if len(logged["reasons"]) > len(logged["machine"]) else "machine")
    return {"disturbed_by": by, "threads": logged["threads"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--load", type=int, nargs="+", default=[2, 1], help="spinning processes beside a gate run")
    parser.add_argument("--edits", nargs="+", choices=EDITS, default=["neutral", "2x"])
    parser.add_argument("--quiet-tune", action="store_true",
                        help="judge every measurement of the tune clean (a machine other work keeps busy)")
    parser.add_argument("--json", type=Path, help="add the runs to this file")
    args = parser.parse_args()
    template, size = KINDS[args.kind]
    project = Path(tempfile.mkdtemp(prefix=f"tunebench-gate-edits-{args.kind}-"))
    (project / "chain.c").write_text(template)
    (project / "test_chain.py").write_text(textwrap.dedent(CHAIN_SUITE).replace("(2048,)", f"({size},)"))
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (project / "conftest.py").write_text(LOGGER + (QUIET_CONFTEST if args.quiet_tune else ""))
    try:
        return measure(project, template, args)
    finally:
        shutil.rmtree(project)


def measure(project: Path, template: str, args: argparse.Namespace) -> int:
    """Tune ``project``, then gate each edit of ``template`` beside each load, ``args.runs`` times."""
    tune = pytest(project, "--tune")
    (project / "conftest.py").write_text(LOGGER)
    if tune.returncode or not (project / "records").exists():
        print(tune.stdout[-3000:], file=sys.stderr)
        return 1
    runs = json.loads(args.json.read_text()) if args.json and args.json.exists() else []
    for edit in args.edits:
        (project / "chain.c").write_text(EDITS[edit](template))
        for load in args.load:
            for _ in range(args.runs):
                (project / "log.jsonl").write_text("")
                before, began = len(gate_checks(project)), time.monotonic()
                with Load(load):
                    pytest(project)
                checks = gate_checks(project)[before:]
                if not checks:  # a skip before measuring (nothing to gate): not kept in the records
                    continue
                (check,) = checks
                against = next(v for v in check["verdicts"] if v["what"].startswith("best against"))
                logged = [json.loads(line) for line in (project / "log.jsonl").read_text().splitlines()]
                runs.append({"kind": args.kind, "edit": edit, "load": load, "loadavg": round(logged[0]["loadavg"], 1),
                             "outcome": check["outcome"], "check": against["outcome"],
                             "ratios": [round(r, 3) for r in against["ratios"]],
                             "processes": [process(p) for p in logged],
                             "seconds": round(time.monotonic() - began, 1)})
                print(json.dumps(runs[-1]), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
