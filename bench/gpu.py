"""Every shipped CUDA kernel on this GPU: the tuned config and the heuristic against the device's
measured copy bandwidth and against PyTorch's own CUDA kernel for the same operation, all timed
one way, tunebench's (``CudaBackend.time_launch``: the L2 flushed, then CUDA events around the
launch on the default stream).

For each (kernel, bucket, dtype, representative shape) the tuned config (this device's records,
through ``tunebench.lookup``) and the heuristic are built and loaded as a tune loads them, and
checked against the suite's reference; PyTorch runs on torch tensors holding the same inputs, its
output checked the same way. Rounds interleave the three in a rotating order, after a warm-up;
the figure is the median. GB/s counts the bytes the suite declares per call (read and written);
the copy bandwidth is a device-to-device memcpy of 1 GiB, counted the same way (read and
written), so "% copy" compares like with like. matmul_add is reported in GFLOP/s.

    python bench/gpu.py [--rounds 100] [--kernel NAME] [--out docs/results-gpu-table.md] [--json docs/results-gpu.json]

Needs a GPU, PyCUDA and PyTorch (with CUDA); exits 1 if any implementation gives a wrong answer.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunebench.backends.cuda import CudaBackend  # noqa: E402
from tunebench.device import describe  # noqa: E402
from tunebench.lookup import load_suites, lookup, this_device  # noqa: E402
from tunebench.measure import compare, verify  # noqa: E402
from tunebench.records import config_text  # noqa: E402

COPY_BYTES = 1 << 30
WARMUP_CALLS = 10

#: PyTorch's implementation of each shipped kernel: (its name, (torch, tensors, args) -> output).
PEERS = {
    "row_reduce": ("torch.sum", lambda torch, t, a: torch.sum(t["x"], dim=1, out=t["out"])),
    "layernorm": ("torch.nn.functional.layer_norm", lambda torch, t, a: torch.nn.functional.layer_norm(
        t["x"], (int(a["R"]),), t["gamma"], t["beta"], float(a["eps"]))),
    "softmax": ("torch.softmax", lambda torch, t, a: torch.softmax(t["x"], dim=1)),
    "matmul_add": ("torch.addmm", lambda torch, t, a: torch.addmm(t["C"], t["A"], t["B"], out=t["out"])),
}


def on_gpu(torch, array: np.ndarray):
    """A torch tensor on the GPU with the array's values: a bfloat16 one (ml_dtypes', which torch
    does not read) by its bits."""
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).cuda().view(torch.bfloat16)
    return torch.from_numpy(array).cuda()


def interleaved(calls: dict, rounds: int) -> dict[str, float]:
    """Median ms of each timed call, in a rotating order round after round, after a warm-up."""
    for call in calls.values():
        for _ in range(WARMUP_CALLS):
            call()
    labels, samples = list(calls), {label: [] for label in calls}
    for r in range(rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            samples[label].append(calls[label]())
    return {label: statistics.median(v) for label, v in samples.items()}


def copy_bandwidth(backend: CudaBackend, rounds: int) -> float:
    """GB/s of a device-to-device copy of COPY_BYTES: bytes read plus bytes written, per second."""
    drv = backend.drv
    src, dst = drv.mem_alloc(COPY_BYTES), drv.mem_alloc(COPY_BYTES)
    try:
        drv.memset_d32(src, 0x3F800000, COPY_BYTES // 4)
        ms = interleaved({"copy": lambda: backend.time_launch(lambda: drv.memcpy_dtod(dst, src, COPY_BYTES))},
                         rounds)["copy"]
    finally:
        src.free()
        dst.free()
    return 2 * COPY_BYTES / (ms * 1e6)


def shape_row(backend: CudaBackend, torch, kernel, bucket, dtype: str, shape: tuple, device: str,
              rounds: int) -> dict:
    variant = kernel.variant("cuda")
    choice = lookup(kernel, shape, device, dtype=dtype, records=ROOT / "records", suites=ROOT / "suites")
    args = kernel.build_args(shape, dtype)
    expected = kernel.expected(args)
    tolerances = kernel.tolerances(dtype, args)
    runners, wrong = {}, {}
    for label, config in (("tuned", choice.config), ("heuristic", variant.baseline(shape, dtype))):
        build = backend.build(kernel, variant, config, dtype)
        runners[label] = backend.load(build, kernel, variant, config, shape, args)
        failed = verify(runners[label], expected, kernel.outputs, tolerances)
        if failed.status != "ok":
            wrong[label] = failed.error
    peer_name, peer = PEERS[kernel.name]
    tensors = {k: on_gpu(torch, v) for k, v in args.items() if isinstance(v, np.ndarray)}
    got = peer(torch, tensors, args)
    torch.cuda.synchronize()
    got = got.float() if got.dtype == torch.bfloat16 else got  # exact: .numpy() refuses torch.bfloat16
    _, error = compare([got.cpu().numpy()], expected, kernel.outputs, tolerances)
    if error:
        wrong["torch"] = error
    try:
        ms = interleaved({"tuned": runners["tuned"].timed_call, "heuristic": runners["heuristic"].timed_call,
                          "torch": lambda: backend.time_launch(lambda: peer(torch, tensors, args))}, rounds)
    finally:
        for runner in runners.values():
            runner.close()
    return {"kernel": kernel.name, "bucket": bucket.name, "dtype": dtype, "shape": list(shape),
            "tuned_config": choice.config, "source": choice.source, "peer": peer_name, "ms": ms,
            "bytes": kernel.bytes(shape, dtype) if kernel.bytes else None,
            "flops": kernel.flops(shape) if kernel.flops else None, "wrong": wrong}


def run(rounds: int, only: list[str]) -> dict:
    import torch
    backend = CudaBackend()
    # time_launch's events see the legacy default stream and the streams that wait on it: not a
    # non-blocking one, where PyTorch's ops would run unseen and read as nothing
    assert torch.cuda.current_stream().cuda_stream == 0, "PyTorch's current stream is not the default one"
    device = this_device("cuda")
    result = {"device": device, "fingerprint": backend.fingerprint(), "torch": torch.__version__,
              "copy_gb_s": copy_bandwidth(backend, rounds), "rows": []}
    # a line of its own first: a run stopped by a time limit still has the figure its rows are read against
    print(json.dumps({"copy_gb_s": result["copy_gb_s"]}), flush=True)
    for kernel in sorted(load_suites(ROOT / "suites"), key=lambda k: k.name):
        variant = kernel.variant("cuda")
        if variant is None or (only and kernel.name not in only):
            continue
        for dtype in variant.dtypes:
            for bucket in kernel.buckets_for("cuda"):
                for shape in bucket.shapes:
                    row = shape_row(backend, torch, kernel, bucket, dtype, tuple(shape), device, rounds)
                    print(json.dumps(row), flush=True)
                    result["rows"].append(row)
    return result


def rate(row: dict, label: str, copy_gb_s: float) -> str:
    """GFLOP/s where the suite declares flops, else GB/s and its share of the copy bandwidth."""
    ms = row["ms"][label]
    if row["flops"]:
        return f"{row['flops'] / (ms * 1e6):,.0f} GFLOP/s"
    gb_s = row["bytes"] / (ms * 1e6)
    return f"{gb_s:,.0f} GB/s ({100 * gb_s / copy_gb_s:.0f} %)"


def table(result: dict) -> list[str]:
    copy = result["copy_gb_s"]
    lines = [f"Device: {describe(result['fingerprint'])}; PyTorch {result['torch']}; device-to-device copy "
             f"{copy:,.0f} GB/s (read + written).", "",
             "| kernel | bucket | dtype | shape | heuristic ms | tuned ms | tuned / heuristic | tuned rate (% copy) | "
             "PyTorch | PyTorch ms | PyTorch rate (% copy) | tuned / PyTorch | tuned config |", "|" + "---|" * 13]
    for row in result["rows"]:
        ms = row["ms"]
        config = config_text(row["tuned_config"])
        lines.append(
            f"| {row['kernel']} | {row['bucket']} | {row['dtype']} | {'x'.join(map(str, row['shape']))} | "
            f"{ms['heuristic']:.4g} | {ms['tuned']:.4g} | {ms['tuned'] / ms['heuristic']:.2f}x | "
            f"{rate(row, 'tuned', copy)} | `{row['peer']}` | {ms['torch']:.4g} | {rate(row, 'torch', copy)} | "
            f"{ms['tuned'] / ms['torch']:.2f}x | {config}{'' if row['source'] == 'tuned' else ' (the heuristic)'} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="interleaved rounds per shape (default 100)")
    parser.add_argument("--kernel", action="append", default=[], help="only this kernel (repeat for several)")
    parser.add_argument("--out", type=Path, help="write the table (markdown) here")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    result = run(args.rounds, args.kernel)
    lines = table(result)
    print("\n".join(lines))
    wrong = [(r["kernel"], r["bucket"], r["dtype"], r["shape"], r["wrong"]) for r in result["rows"] if r["wrong"]]
    for w in wrong:
        print("WRONG:", w)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
