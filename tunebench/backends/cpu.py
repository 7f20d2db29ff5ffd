"""The CPU target: C templates compiled by gcc into shared libraries, called through ctypes.

Each variant is its own uniquely named library (see the compile cache); arguments are passed as
raw pointers and as the C types their numpy scalar dtypes name. Timing is a monotonic ns clock
around one call. The OpenMP thread count is fixed before any kernel library loads and is part of
the device fingerprint.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import subprocess
import time
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from tunebench.backends.base import (
    GUARD_BYTES,
    GUARD_FILL,
    Backend,
    Build,
    CompileError,
    Runner,
    guard_damage,
    poison,
    render,
)
from tunebench.backends.cache import BuildCache
from tunebench.kernel import Kernel, KernelError, Variant

CC = os.environ.get("TUNEBENCH_CC", "gcc")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
PAGE = mmap.PAGESIZE
STAGGER = 5 * 64  # cache-line aligned, and a different offset in the page for each of 12 buffers
CTYPES = {"float32": "float", "float64": "double"}
SCALARS = {
    np.dtype(np.int8): ctypes.c_int8, np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
}


@cache
def compiler_version() -> str:
    out = subprocess.run([CC, "-dumpfullversion"], capture_output=True, text=True, check=True)
    return f"{CC} {out.stdout.strip()}"


def thread_count() -> int:
    """OMP_NUM_THREADS if set, else the cores this process may run on."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    return int(env) if env.isdigit() and int(env) > 0 else len(os.sched_getaffinity(0))


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint() -> dict:
    """CPU model, architecture and OpenMP thread count: what makes timings comparable."""
    return {"target": "cpu", "name": cpu_model(), "machine": platform.machine(), "threads": thread_count()}


def placed(nbytes: int, index: int) -> np.ndarray:
    """``nbytes`` of memory starting ``index`` * STAGGER bytes past a page boundary, on small
    pages. Where malloc puts an array depends on what the process freed before, whether the kernel
    grants a transparent huge page varies from run to run, and a vectorised kernel's speed depends
    on both (rows straddling cache lines, streams aliasing modulo the page, cache sets): the
    same config then measured 0.5x or 0.9x of another in separate runs. A fixed placement per
    buffer makes runs repeatable, staggered so that no two streams alias."""
    offset = (index * STAGGER) % PAGE
    region = mmap.mmap(-1, nbytes + offset or PAGE)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        region.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(region, np.uint8)[offset:offset + nbytes]


def placed_copy(array: np.ndarray, index: int) -> np.ndarray:
    copy = placed(array.nbytes, index).view(array.dtype).reshape(array.shape)
    np.copyto(copy, array)
    return copy


class Buffers:
    """A shape's arguments as the kernel sees them: inputs copied (arguments are shared, and a
    kernel may scribble on them), each output inside a buffer with a guard zone on each side, all
    placed (see :func:`placed`). The runners of one shape share them, as a trial's consecutive
    calls do: runners compared interleaved with buffers of their own would evict each other's
    data from the caches and time the memory rather than the kernel."""

    def __init__(self, kernel: Kernel, args: Mapping[str, Any]):
        self.source = args  # held, so that its id() names these buffers while they live
        self.guarded = [placed(args[n].nbytes + 2 * GUARD_BYTES, i) for i, n in enumerate(kernel.outputs)]
        self.outputs = [g[GUARD_BYTES:GUARD_BYTES + args[n].nbytes].view(args[n].dtype).reshape(args[n].shape)
                        for g, n in zip(self.guarded, kernel.outputs)]
        first = len(kernel.outputs)
        self.args = {n: placed_copy(v, first + i) if isinstance(v, np.ndarray) else v
                     for i, (n, v) in enumerate(args.items())}
        self.args.update(zip(kernel.outputs, self.outputs))


class CpuRunner(Runner):
    def __init__(self, fn, kernel: Kernel, buffers: Buffers):
        self._fn = fn
        self._names = kernel.outputs
        self._guarded, self._outputs, self._args = buffers.guarded, buffers.outputs, buffers.args
        self._pristine = {n: buffers.source[n] for n in kernel.inplace}
        self._cargs = [a.ctypes.data_as(ctypes.c_void_p) if isinstance(a, np.ndarray)
                       else SCALARS[a.dtype](a.item()) for a in self._args.values()]

    def reset(self) -> None:
        for out, guarded in zip(self._outputs, self._guarded):
            guarded[:GUARD_BYTES] = GUARD_FILL
            guarded[-GUARD_BYTES:] = GUARD_FILL
            poison(out)
        self._restore()

    def overrun(self) -> str | None:
        return next((d for d in (guard_damage(n, g[:GUARD_BYTES], g[-GUARD_BYTES:])
                                 for n, g in zip(self._names, self._guarded)) if d), None)

    def _restore(self) -> None:
        for name, original in self._pristine.items():
            np.copyto(self._args[name], original)

    def call(self) -> None:
        self._restore()
        self._fn(*self._cargs)

    def timed_call(self) -> float:
        self._restore()
        start = time.perf_counter_ns()
        self._fn(*self._cargs)
        return (time.perf_counter_ns() - start) / 1e6

    def outputs(self) -> list[np.ndarray]:
        return self._outputs


class CpuBackend(Backend):
    name = "cpu"

    def __init__(self, cache: BuildCache | None = None):
        self.cache = cache or BuildCache()
        self._buffers: Buffers | None = None
        os.environ.setdefault("OMP_NUM_THREADS", str(thread_count()))

    def fingerprint(self) -> dict:
        return fingerprint()

    def conditions(self) -> dict:
        """Threads, the frequency governor where readable, the clock now, the load average."""
        found = {"threads": thread_count(), "loadavg_1m": os.getloadavg()[0]}
        try:
            found["governor"] = open("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read().strip()
        except OSError:
            pass
        try:
            mhz = [float(ln.split(":")[1]) for ln in open("/proc/cpuinfo") if ln.startswith("cpu MHz")]
            found["mhz"] = round(sum(mhz) / len(mhz)) if mhz else None
        except (OSError, ValueError):
            pass
        return found

    def build(self, kernel: Kernel, variant: Variant, config: Mapping, dtype: str) -> Build:
        if dtype not in CTYPES:
            raise CompileError(f"dtype {dtype} has no C type on the cpu target ({', '.join(CTYPES)})")
        source = render(variant, config, CTYPES[dtype])

        def compile_fn(src, out):
            proc = subprocess.run([CC, *FLAGS, *variant.flags, "-o", str(out), str(src), "-lm"],
                                  capture_output=True, text=True)
            return None if proc.returncode == 0 else proc.stderr or f"{CC} exited {proc.returncode}"

        tag = " ".join((compiler_version(), *FLAGS, *variant.flags))
        path, seconds, cached = self.cache.get(f"{kernel.name}-cpu", source, tag, (".c", ".so"), compile_fn)
        return Build(handle=path, compile_time_s=seconds, cached=cached)

    def load(self, build: Build, kernel: Kernel, variant: Variant, config: Mapping, shape: tuple,
             args: Mapping[str, Any]) -> Runner:
        for name, value in args.items():
            if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
                raise KernelError(f"kernel {kernel.name!r}: array {name!r} is not C-contiguous")
            if not isinstance(value, np.ndarray) and value.dtype not in SCALARS:
                raise KernelError(f"kernel {kernel.name!r}: scalar {name!r} has dtype {value.dtype}, "
                                  f"which has no C type here")
        try:
            fn = getattr(ctypes.CDLL(str(build.handle)), variant.entry)
        except AttributeError:
            raise KernelError(f"kernel {kernel.name!r}: {variant.path.name} has no function "
                              f"{variant.entry!r}") from None
        fn.restype = None
        if self._buffers is None or self._buffers.source is not args:
            self._buffers = Buffers(kernel, args)  # one shape's at a time: they can be large
        return CpuRunner(fn, kernel, self._buffers)
