"""How a CUDA config launches: its grid, block and dynamic shared memory, and whether a device
(or, without one, an architecture) can make that launch.

A variant's ``launch(config, shape)`` is the user's code; what it answers is checked here, once,
so that a wrong form is a declaration error naming the config and shape, and a launch beyond the
limits is a ``pruned_resources`` trial (on the device) or a compile-check failure (without one),
never a crash in the middle of a tune.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tunebench.kernel import Kernel, KernelError, Variant

#: Shared memory (bytes, static and dynamic together) a block may have without its function
#: asking for more; up to the device's opt-in limit (227 KiB on an H100), the function's maximum
#: dynamic shared memory is raised first.
DEFAULT_SHARED = 48 * 1024


@dataclass(frozen=True)
class Launch:
    """How a config launches on a shape: grid and block as (x, y, z), and the bytes of dynamic
    shared memory (``extern __shared__``) of each block."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int = 0

    def __call__(self, fn, args: list) -> None:
        fn(*args, grid=self.grid, block=self.block, shared=self.shared)


def launch_of(kernel: Kernel, variant: Variant, config: Mapping, shape: tuple) -> Launch:
    """The variant's ``launch(config, shape)``: ``(grid, block)`` or ``(grid, block, shared_bytes)``,
    a grid or block an int or a tuple of up to three, padded to three (PyCUDA takes exactly three).
    A launch that raises or answers in another form is the declaration's fault."""
    def dims(value) -> tuple[int, int, int]:
        values = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
        if not 1 <= len(values) <= 3 or not all(isinstance(v, (int, np.integer)) for v in values):
            raise TypeError
        return (*(int(v) for v in values), 1, 1)[:3]

    where = f"kernel {kernel.name!r}: the cuda variant's launch({dict(config)}, {tuple(shape)})"
    if variant.launch is None:
        raise KernelError(f"kernel {kernel.name!r}: the cuda variant has no launch=(config, shape) -> (grid, block)")
    try:
        answer = variant.launch(dict(config), tuple(shape))
    except Exception as e:  # noqa: BLE001 - the user's code, reported with its cause
        raise KernelError(f"{where} raised {type(e).__name__}: {e}") from None
    try:
        if not isinstance(answer, (tuple, list)) or len(answer) not in (2, 3):
            raise TypeError
        shared = answer[2] if len(answer) == 3 else 0
        if not isinstance(shared, (int, np.integer)) or shared < 0:
            raise TypeError
        return Launch(dims(answer[0]), dims(answer[1]), int(shared))
    except TypeError:
        raise KernelError(f"{where} returned {answer!r}: it must return (grid, block) or (grid, block, "
                          f"shared_bytes), a grid or block an int or up to three ints") from None


#: Shared memory a block may have (KiB, with the opt-in) per architecture, from the CUDA
#: programming guide's table of compute capabilities.
ARCH_SHARED_KIB = {"sm_70": 96, "sm_75": 64, "sm_80": 163, "sm_86": 99, "sm_87": 163, "sm_89": 99, "sm_90": 227}


def arch_limits(arch: str) -> dict:
    """What a device of ``arch`` launches at most, for a check without one (an architecture
    missing from :data:`ARCH_SHARED_KIB` gets its shared memory unchecked)."""
    return {"threads": 1024, "block": (1024, 1024, 64), "grid": (2**31 - 1, 65535, 65535),
            "shared": ARCH_SHARED_KIB.get(arch, math.inf) * 1024}


@dataclass(frozen=True)
class FunctionResources:
    """What a compiled function takes per thread and block, which bounds the blocks it launches."""

    registers: int
    max_threads_per_block: int
    static_shared: int

    @classmethod
    def of(cls, fn) -> FunctionResources:
        return cls(fn.num_regs, fn.max_threads_per_block, fn.shared_size_bytes)


def resource_problem(limits: Mapping, launch: Launch, fn: FunctionResources | None = None) -> str | None:
    """Why the device (its ``limits``) or the compiled function cannot make this launch, if it
    cannot: checked before any measurement, so the candidate is recorded as ``pruned_resources``,
    not as crashed. Without the loaded function (a compile check), its registers and static shared
    memory are not counted."""
    threads = math.prod(launch.block)
    if fn is not None and threads > fn.max_threads_per_block:
        return (f"block of {threads} threads, but with {fn.registers} registers per thread the function "
                f"launches at most {fn.max_threads_per_block}")
    if threads > limits["threads"]:
        return f"block of {threads} threads, the device launches at most {limits['threads']}"
    static = 0 if fn is None else fn.static_shared
    if static + launch.shared > limits["shared"]:
        parts = f" ({static} static, {launch.shared} dynamic)" if static and launch.shared else ""
        return f"{static + launch.shared} bytes of shared memory per block{parts}, the device allows {limits['shared']}"
    for what, dims, limit in (("block", launch.block, limits["block"]), ("grid", launch.grid, limits["grid"])):
        if any(d < 1 or d > lim for d, lim in zip(dims, limit)):
            return f"{what} {dims} is outside the device's limits {limit}"
    return None
