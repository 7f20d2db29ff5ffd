"""Backends (targets) behind one interface; this module picks and creates them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import cache

from tunebench.backends.base import Backend, Build, CompileError, ResourceError, Runner

TARGETS = ("auto", "cpu", "cuda")

__all__ = ["TARGETS", "Backend", "Build", "CompileError", "ResourceError", "Runner", "builder", "create", "cuda_status", "dtype_problem", "fingerprint", "resolve"]

#: Run in a child process, so that probing never initialises CUDA (or crashes) in this one:
#: CUDA must first start in the worker process that measures.
_PROBE = ("import json, pycuda.driver as d; from tunebench.backends.cuda import fingerprint_of; d.init(); "
          "print(json.dumps(fingerprint_of(d, d.Device(0)) if d.Device.count() else None))")


@cache
def _cuda_probe() -> tuple[dict | None, str]:
    """(fingerprint of device 0, "") where CUDA can be used, else (None, why). Never raises."""
    if importlib.util.find_spec("pycuda") is None:
        return None, "PyCUDA is not installed (pip install pycuda on a machine with a GPU and the CUDA toolkit)"
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"probing the CUDA driver failed ({e})"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return None, f"PyCUDA cannot use the CUDA driver ({lines[-1] if lines else proc.returncode})"
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return (found, "") if found else (None, "the CUDA driver sees no device")


def cuda_status() -> tuple[bool, str]:
    """Whether a CUDA driver and device can be used here, and if not, why."""
    found, why = _cuda_probe()
    return found is not None, why


def fingerprint(target: str) -> dict:
    """The device fingerprint of a target, taken without starting CUDA in this process."""
    if target == "cpu":
        from tunebench.backends.cpuinfo import identify
        return identify()
    if target == "cuda":
        found, why = _cuda_probe()
        if found is None:
            raise RuntimeError(f"cuda target unavailable: {why}")
        return found
    raise ValueError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")


def resolve(target: str) -> tuple[str, str | None]:
    """The concrete target for a ``--tune-target`` value, and why cuda was passed over (auto)."""
    if target != "auto":
        return target, None
    ok, why = cuda_status()
    return ("cuda", None) if ok else ("cpu", why)


def builder(target: str, fingerprint: dict):
    """What compiles a target's candidates in the tuning process itself, without its device
    (None for a target that builds nothing: replay)."""
    if target == "cpu":
        from tunebench.backends.cpu import CpuBackend
        return CpuBackend()
    if target == "cuda":
        from tunebench.backends.cuda import CudaCompiler
        return CudaCompiler(arch_of(fingerprint))
    return None


def arch_of(fingerprint: dict) -> str:
    """The architecture a CUDA device's fingerprint names, as nvcc builds for it (``sm_90``)."""
    return f"sm_{str(fingerprint['compute_capability']).replace('.', '')}"


def compiler(target: str, variant) -> str | None:
    """The compiler that builds a variant's candidates on a target, with its version: a trial
    built by another (TUNEBENCH_CC=clang, a new nvcc) is measured again, not reused. None where
    it builds nothing (replay) or cannot be asked (the build then says why)."""
    try:
        if target == "cpu":
            from tunebench.backends import cpu
            return cpu.compiler_identity(cpu.language(variant))
        if target == "cuda":
            from tunebench.backends.cuda import nvcc_version
            return nvcc_version()
    except (OSError, subprocess.SubprocessError):
        return None
    return None


def build_key(target: str, fingerprint: dict, variant, config: dict, dtype: str) -> str | None:
    """The compile cache's key of a config's build on a target: the source and command as tunebench
    compiles them today. A refusal of the build (a compile error) is recorded with it and reused
    under it alone: the compiler's identity alone kept one that tunebench's own command had caused
    (C's -std for a template read as C++) for good. None where the target builds nothing (replay)
    or cannot be asked (no nvcc: the build says why)."""
    try:
        if target == "cpu":
            from tunebench.backends import cpu
            return cpu.build_key(variant, config, dtype)
        if target == "cuda":
            from tunebench.backends import cuda
            return cuda.build_key(arch_of(fingerprint), variant, config, dtype)
    except (OSError, subprocess.SubprocessError):
        return None
    return None


def built_otherwise(recorded: str | None, today: str | None) -> bool:
    """Whether what a record says built it is another compiler than today's, as a message may
    claim: not where either is unknown (records from before the compiler was kept, a compiler
    that cannot be asked)."""
    return None not in (recorded, today) and recorded != today


def built_by(recorded: str | None, today: str | None) -> bool:
    """Whether a recorded measurement may stand for today's build: made by today's compiler, or
    today's target builds nothing (replay). One that does not say (kept before the compiler
    was) may be any compiler's: reused under TUNEBENCH_CC=clang, it published gcc's figures."""
    return today is None or recorded == today


def dtype_problem(target: str, dtype: str, variant) -> str | None:
    """Why a target cannot build a variant's template in a dtype: no C type for it, or (cpu) a
    compiler without that type's arithmetic; None where it can, or builds nothing (replay)."""
    if target == "cpu":
        from tunebench.backends.cpu import dtype_problem as cpu_problem
        return cpu_problem(dtype, variant)
    if target == "cuda":
        from tunebench.backends.cuda import CTYPES
        return None if dtype in CTYPES else f"dtype {dtype!r} has no C type on the cuda target ({', '.join(CTYPES)})"
    return None


def create(target: str) -> Backend:
    """A backend instance for a concrete target name."""
    if target == "cpu":
        from tunebench.backends.cpu import CpuBackend
        return CpuBackend()
    if target == "cuda":
        from tunebench.backends.cuda import CudaBackend
        return CudaBackend()
    raise ValueError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")
