"""How a CUDA config launches: its grid, block and dynamic shared memory, and whether a device
(or, without one, an architecture) can make that launch.

A variant's ``launch(config, shape)`` is the user's code; what it answers is checked here, once,
so that a wrong form is a declaration error naming the config and shape, and a launch beyond the
limits is a ``pruned_resources`` trial (on the device) or a compile-check failure (without one),
never a crash in the middle of a tune.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

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


def launch_of(kernel: Kernel, variant: Variant, config: Mapping, shape: tuple, dtype: str | None = None) -> Launch:
    """The variant's ``launch(config, shape)``, or ``launch(config, shape, dtype)`` where it has a
    parameter ``dtype`` (shared memory sized by the element): ``(grid, block)`` or ``(grid, block,
    shared_bytes)``, a grid or block an int or a tuple of up to three, padded to three (PyCUDA
    takes exactly three). A launch that raises or answers in another form is the declaration's
    fault."""
    def dims(value) -> tuple[int, int, int]:
        values = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
        if not 1 <= len(values) <= 3 or not all(isinstance(v, (int, np.integer)) for v in values):
            raise TypeError
        return (*(int(v) for v in values), 1, 1)[:3]

    if variant.launch is None:
        raise KernelError(f"kernel {kernel.name!r}: the cuda variant has no launch=(config, shape) -> (grid, block)")
    given = (dict(config), tuple(shape), *((dtype,) if _takes_dtype(variant.launch) else ()))
    where = f"kernel {kernel.name!r}: the cuda variant's launch{given}"
    try:
        answer = variant.launch(*given)
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


def _takes_dtype(launch: Callable) -> bool:
    """Whether a launch function has a parameter named ``dtype``."""
    try:
        return "dtype" in inspect.signature(launch).parameters
    except (TypeError, ValueError):
        return False


#: Shared memory a block may have (KiB, with the opt-in) per architecture, from the CUDA
#: programming guide's table of compute capabilities.
ARCH_SHARED_KIB = {"sm_70": 96, "sm_75": 64, "sm_80": 163, "sm_86": 99, "sm_87": 163, "sm_89": 99, "sm_90": 227,
                   "sm_90a": 227, "sm_100": 227, "sm_100a": 227, "sm_120": 99, "sm_120a": 99}


def arch_limits(arch: str) -> dict:
    """What a device of ``arch`` launches at most, for a check without one (an architecture
    missing from :data:`ARCH_SHARED_KIB` gets its shared memory unchecked)."""
    return {"threads": 1024, "block": (1024, 1024, 64), "grid": (2**31 - 1, 65535, 65535),
            "shared": ARCH_SHARED_KIB.get(arch, math.inf) * 1024}


@dataclass(frozen=True)
class FunctionResources:
    """What a compiled function takes per block, which bounds the blocks it launches: its static
    shared memory, and on the device its registers and the most threads they allow."""

    static_shared: int = 0
    registers: int | None = None
    max_threads_per_block: int | None = None

    @classmethod
    def of(cls, fn) -> FunctionResources:
        """Of a function loaded on the device (PyCUDA)."""
        return cls(fn.shared_size_bytes, fn.num_regs, fn.max_threads_per_block)


def cubin_kernels(path: Path) -> dict[str, FunctionResources]:
    """The ``__global__`` functions of a cubin by their (mangled, unless ``extern "C"``) names,
    with their static shared memory, read from its ELF sections without a device: a kernel has
    ``.text.<name>`` and ``.nv.info.<name>``; ``.nv.shared.<name>`` is its static shared memory
    (on sm_90 counting from the 1 KiB the system reserves, which is taken off)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        sections = {s.name: s["sh_size"] for s in ELFFile(f).iter_sections()}
    reserved = 1024 if any(n.startswith(".nv.shared.reserved") for n in sections) else 0
    return {name[len(".text."):]: FunctionResources(
        max(sections.get(f".nv.shared.{name[len('.text.'):]}", 0) - reserved, 0))
        for name in sections if name.startswith(".text.") and f".nv.info.{name[len('.text.'):]}" in sections}


def resource_problem(limits: Mapping, launch: Launch, fn: FunctionResources = FunctionResources(),
                     where: str = "the device") -> str | None:
    """Why ``where`` (its ``limits``: the device, or an architecture without one) or the compiled
    function cannot make this launch, if it cannot: checked before any measurement, so the
    candidate is recorded as ``pruned_resources``, not as crashed."""
    threads = math.prod(launch.block)
    if fn.max_threads_per_block is not None and threads > fn.max_threads_per_block:
        return (f"block of {threads} threads, but with {fn.registers} registers per thread the function "
                f"launches at most {fn.max_threads_per_block}")
    if threads > limits["threads"]:
        return f"block of {threads} threads, {where} launches at most {limits['threads']}"
    used = fn.static_shared + launch.shared
    if used > limits["shared"]:
        parts = f" ({fn.static_shared} static, {launch.shared} dynamic)" if fn.static_shared and launch.shared else ""
        return (f"{used} bytes ({used / 1024:g} KiB) of shared memory per block{parts}, {where} allows "
                f"{limits['shared']} ({limits['shared'] / 1024:g} KiB)")
    if 0 in launch.grid:
        return f"grid {launch.grid} has no block (a shape too small for the launch's arithmetic?)"
    for what, dims, limit in (("block", launch.block, limits["block"]), ("grid", launch.grid, limits["grid"])):
        if any(d < 1 or d > lim for d, lim in zip(dims, limit)):
            return f"{what} {dims} is outside {where}'s limits {limit}"
    return None
