"""Every shipped CPU kernel's tuned config and heuristic against numpy and PyTorch CPU, as a
framework calls them: plain numpy buffers (numpy's own allocation), one process, interleaved.

For each (kernel, bucket, representative shape) the tuned config (``tunebench.best`` on this
device's records) and the heuristic are built with the project's flags and called through ctypes
on the arrays the suite's args builder returns; numpy's and PyTorch's own implementation of the
same operation run on the same buffers (``torch.from_numpy`` shares them). Every output is
checked against the suite's reference. Rounds interleave the tuned config and the heuristic in a
rotating order, each timed call after an untimed one of the same implementation; then the tuned
config, numpy and PyTorch the same way, apart, because a peer's thread pool spins on after its
call and slows whichever call follows (the heuristic measured 1.01-1.06x against itself when all
four rotated together); "tuned / torch" is from the second. The figure is the median; the whole
comparison is repeated in ``--runs`` fresh processes.

    python bench/peers.py [--runs 3] [--rounds 200] [--out docs/peers.md]

PyTorch is optional (``pip install -e '.[peers]'``); without it, its columns say so.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunebench.backends.cpu import SCALARS, CpuBackend  # noqa: E402
from tunebench.lookup import load_suites, lookup, this_device  # noqa: E402
from tunebench.measure import compare  # noqa: E402
from tunebench.records import config_text  # noqa: E402

EPS = 1e-5


def peers(kernel: str, args: dict):
    """(numpy, torch or None) callables computing the kernel on ``args`` into its output."""
    try:
        import torch
    except ImportError:
        torch = None
    t = {k: torch.from_numpy(v) for k, v in args.items() if isinstance(v, np.ndarray)} if torch else {}
    if kernel == "row_reduce":
        x, out = args["x"], args["out"]
        return (lambda: np.sum(x, axis=1, out=out),
                torch and (lambda: torch.sum(t["x"], dim=1, out=t["out"])))
    if kernel == "layernorm":
        x, g, b, y = args["x"], args["gamma"], args["beta"], args["y"]

        def numpy_layernorm():
            mean = x.mean(axis=1, keepdims=True)
            np.multiply((x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + EPS), g, out=y)
            np.add(y, b, out=y)
        return (numpy_layernorm, torch and (lambda: t["y"].copy_(torch.nn.functional.layer_norm(
            t["x"], (x.shape[1],), t["gamma"], t["beta"], EPS))))
    if kernel == "softmax":
        x, y = args["x"], args["y"]

        def numpy_softmax():
            np.exp(x - x.max(axis=1, keepdims=True), out=y)
            np.divide(y, y.sum(axis=1, keepdims=True), out=y)
        return numpy_softmax, torch and (lambda: torch.softmax(t["x"], dim=1, out=t["y"]))
    if kernel == "matmul_add":
        A, B, C, out = args["A"], args["B"], args["C"], args["out"]

        def numpy_matmul_add():
            np.matmul(A, B, out=out)
            np.add(out, C, out=out)
        return numpy_matmul_add, torch and (lambda: torch.addmm(t["C"], t["A"], t["B"], out=t["out"]))
    raise KeyError(kernel)


def built(backend: CpuBackend, kernel, config: dict, dtype: str, args: dict):
    """A call of the config's build on the plain numpy buffers of ``args``."""
    variant = kernel.variant("cpu")
    fn = getattr(ctypes.CDLL(str(backend.build(kernel, variant, config, dtype).handle)), variant.entry)
    fn.restype = None
    cargs = [a.ctypes.data_as(ctypes.c_void_p) if isinstance(a, np.ndarray) else SCALARS[a.dtype](a.item())
             for a in args.values()]
    return lambda: fn(*cargs)


def measure(calls: dict, rounds: int) -> dict[str, float]:
    """Median ms of each call, interleaved in a rotating order, each timed call after an untimed one."""
    for call in calls.values():  # warm up: the first calls are several times slower
        start = time.perf_counter()
        while time.perf_counter() - start < 0.05:
            call()
    labels, samples = list(calls), {label: [] for label in calls}
    for r in range(rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            calls[label]()
            start = time.perf_counter_ns()
            calls[label]()
            samples[label].append((time.perf_counter_ns() - start) / 1e6)
    return {label: statistics.median(v) for label, v in samples.items()}


def run(rounds: int) -> list[dict]:
    backend = CpuBackend()
    rows = []
    for kernel in sorted(load_suites(ROOT / "suites"), key=lambda k: k.name):
        variant = kernel.variant("cpu")
        for dtype in variant.dtypes:
            for bucket in kernel.buckets_for("cpu"):
                for shape in bucket.shapes:
                    choice = lookup(kernel, shape, dtype=dtype, records=ROOT / "records", suites=ROOT / "suites")
                    args = kernel.build_args(shape, dtype)  # numpy's own allocation, as a framework has it
                    expected = kernel.expected(args)
                    calls = {"tuned": built(backend, kernel, choice.config, dtype, args),
                             "heuristic": built(backend, kernel, variant.baseline(shape, dtype), dtype, args)}
                    numpy_call, torch_call = peers(kernel.name, args)
                    calls["numpy"] = numpy_call
                    if torch_call:
                        calls["torch"] = torch_call
                    wrong = {}
                    for label, call in calls.items():
                        for out in kernel.outputs:
                            args[out].fill(np.nan)
                        call()
                        _, error = compare([args[o] for o in kernel.outputs], expected, kernel.outputs,
                                           kernel.tolerances(dtype, args))
                        if error:
                            wrong[label] = error
                    # the pair apart from the peers (see the module docstring)
                    ms = measure({k: calls[k] for k in ("tuned", "heuristic")}, rounds)
                    peers_ms = measure({k: v for k, v in calls.items() if k != "heuristic"}, rounds)
                    ms.update({k: v for k, v in peers_ms.items() if k not in ms})
                    rows.append({"kernel": kernel.name, "bucket": bucket.name, "dtype": dtype, "shape": list(shape),
                                 "tuned_config": choice.config, "source": choice.source, "ms": ms,
                                 "tuned_with_peers_ms": peers_ms["tuned"], "wrong": wrong})
    return rows


def _child(rounds: int, conn) -> None:
    conn.send(run(rounds))


def table(runs: list[list[dict]]) -> list[str]:
    """Markdown rows: per shape, the median over runs of each implementation's median."""
    lines = ["| kernel | bucket | shape | heuristic ms | tuned ms | tuned / heuristic (runs) | numpy ms | torch ms | "
             "tuned / torch | tuned config |", "|" + "---|" * 10]
    for i, row in enumerate(runs[0]):
        ms = {label: statistics.median(r[i]["ms"][label] for r in runs) for label in row["ms"]}
        ratios = [r[i]["ms"]["tuned"] / r[i]["ms"]["heuristic"] for r in runs]
        torch_ms = ms.get("torch")
        with_peers = statistics.median(r[i]["tuned_with_peers_ms"] for r in runs)
        vs_torch = "-" if torch_ms is None else f"{with_peers / torch_ms:.2f}x"
        config = config_text(row["tuned_config"])
        lines.append(
            f"| {row['kernel']} | {row['bucket']} | {'x'.join(map(str, row['shape']))} | {ms['heuristic']:.4g} | "
            f"{ms['tuned']:.4g} | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | "
            f"{ms['numpy']:.4g} | {'-' if torch_ms is None else f'{torch_ms:.4g}'} | "
            f"{vs_torch} | "
            f"{config}{'' if row['source'] == 'tuned' else ' (the heuristic)'} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes (default 3)")
    parser.add_argument("--rounds", type=int, default=200, help="interleaved rounds per shape (default 200)")
    parser.add_argument("--out", type=Path, help="write the table (markdown) here")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        parent, child = multiprocessing.get_context("spawn").Pipe()
        proc = multiprocessing.get_context("spawn").Process(target=_child, args=(args.rounds, child))
        proc.start()
        runs.append(parent.recv())
        proc.join()
    lines = table(runs)
    print("\n".join(lines))
    wrong = [(r["kernel"], r["bucket"], r["shape"], r["wrong"]) for run_ in runs for r in run_ if r["wrong"]]
    for w in wrong:
        print("WRONG:", w)
    if args.json:
        args.json.write_text(json.dumps({"device": this_device("cpu"), "runs": runs}, indent=1))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
