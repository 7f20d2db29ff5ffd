"""Backends (targets) behind one interface; this module picks and creates them."""

from __future__ import annotations

from tunebench.backends.base import Backend, Build, CompileError, ResourceError, Runner

TARGETS = ("auto", "cpu", "cuda")

__all__ = ["TARGETS", "Backend", "Build", "CompileError", "ResourceError", "Runner", "create",
           "cuda_status", "resolve"]


def cuda_status() -> tuple[bool, str]:
    """Whether a CUDA driver and device can be used here, and if not, why. Never raises."""
    try:
        import pycuda.driver as drv
    except ImportError as e:  # pycuda missing, or present without libcuda.so.1
        return False, f"PyCUDA cannot load the CUDA driver ({e})"
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as e:  # noqa: BLE001 - any driver failure means no usable GPU
        return False, f"the CUDA driver failed to start ({e})"
    if count == 0:
        return False, "the CUDA driver sees no device"
    return True, f"{count} CUDA device(s)"


def resolve(target: str) -> tuple[str, str | None]:
    """The concrete target for a ``--tune-target`` value, and why cuda was passed over (auto)."""
    if target != "auto":
        return target, None
    ok, why = cuda_status()
    return ("cuda", None) if ok else ("cpu", why)


def create(target: str) -> Backend:
    """A backend instance for a concrete target name."""
    if target == "cpu":
        from tunebench.backends.cpu import CpuBackend
        return CpuBackend()
    raise ValueError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")
