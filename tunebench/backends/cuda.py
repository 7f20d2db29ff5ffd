"""The CUDA target: templates compiled by nvcc to cubins, loaded and timed through PyCUDA.

Compilation is the nvcc command PyCUDA's SourceModule runs (``nvcc --cubin -arch=sm_XY -O3``),
run by us, so that the tuning process and ``tunebench compile-check`` build without PyCUDA, a
driver or a device; the cubin is kept in the on-disk compile cache and loaded with PyCUDA's
``module_from_buffer``. Inputs are copied to the device once per shape; every candidate gets
freshly allocated outputs, poisoned with NaN before its verifying call, and in-place inputs are
restored from a pristine device copy before every call. After the verifying call, every other
input is compared with the args builder's: device memory cannot be made read-only, and a write
into an input every later candidate reads would fail those as wrong results (it is the writer's
``out_of_bounds``, and the input is copied again). Each timed launch sits between two CUDA
events, after a memset of a buffer twice the L2 size has evicted the kernel's data from L2 and a
lead kernel has kept the GPU busy while the host enqueues the launch
(:meth:`CudaBackend.time_launch`). One CUDA context per process: the primary context of device 0.

A variant's ``launch`` gives each config's grid, block and, for a kernel with ``extern __shared__``
memory, its bytes per block. Before any measurement, a candidate whose launch exceeds what its
compiled function can make (threads for its registers, static and dynamic shared memory against
the device's opt-in limit, grid and block limits, a grid that is no multiple of the kernel's
``__cluster_dims__`` or a cluster beyond the portable 8 blocks) is refused with a
:class:`~tunebench.backends.base.ResourceError`, recorded as ``pruned_resources``; so is one
whose static shared or local memory ptxas refuses to build (:func:`resource_refusal`). A kernel
that syncs its whole grid, which the PTX kept beside each cubin tells, stops the task at its first
load (:func:`entry_of`): tunebench makes no cooperative launch; so does a launch that gives a
kernel using ``extern __shared__`` memory none of it (:func:`launch_refusal`, compile-check's check).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tunebench.backends.base import (
    GUARD_BYTES,
    GUARD_FILL,
    INTEGER_CTYPES,
    POISONS,
    Backend,
    Build,
    CompileError,
    KernelError,
    ResourceError,
    Runner,
    explain,
    guard_damage,
    input_damage,
    not_contiguous,
    render,
)
from tunebench.backends.cache import BuildCache, cache_key, run_compiler, scratch
from tunebench.backends.launch import (DEFAULT_SHARED, FunctionResources, Launch, compiled_kernels,
                                       entry_refusal, entry_symbol, launch_of, launch_problem)
from tunebench.backends.params import Param, args_problem, debug_functions, packed
from tunebench.dtypes import as_bits

if TYPE_CHECKING:  # the declarations it builds: a floor above, never imported at run time
    from tunebench.kernel import Kernel, Variant

#: The nvcc options of every CUDA build (``tunebench compile-check`` uses the same).
NVCC_OPTIONS = ("-O3",)
#: What a build whose DWARF is read for its parameters' C types adds (device debug information).
DEBUG_FLAGS = ("-G",)
#: The variant's options a ``-G`` build leaves out: ptxas refuses to optimise debug code ("Optimized
#: debugging not supported"), and ``-dopt=on`` builds it without its DWARF.
_NOT_DEBUGGED = ("-dopt", "--dopt")
_PTXAS = ("-Xptxas", "--ptxas-options")


def debug_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """``flags`` for a ``-G`` build, and ``-G``: without what optimises the device code (see
    :data:`_NOT_DEBUGGED`; ``-Xptxas -O3`` built nothing, and every argument's C type went
    unchecked, unsaid). Only the parameters' types are read of it."""
    kept, skip = [], False
    for i, flag in enumerate(flags):
        if skip:
            skip = False
            continue
        option, _, joined = flag.partition("=")
        if option in _NOT_DEBUGGED:
            skip = not joined
            continue
        if option in _PTXAS:
            value = joined or (flags[i + 1] if i + 1 < len(flags) else "")
            skip = not joined
            rest = ",".join(v for v in value.split(",") if v and not v.startswith("-O"))
            kept += [f"{option}={rest}"] if rest else []
            continue
        kept.append(flag)
    return (*kept, *DEBUG_FLAGS)
CTYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16", "float64": "double",
          "float8_e4m3fn": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2", **INTEGER_CTYPES}
#: The header a dtype's C type is declared in, included ahead of the config's #defines so that
#: no param name can clash with the header's own identifiers.
CTYPE_HEADERS = {"float16": "cuda_fp16.h", "bfloat16": "cuda_bf16.h", "float8_e4m3fn": "cuda_fp8.h",
                 "float8_e5m2": "cuda_fp8.h"}
#: What poisons an output under pattern 0, as (bytes per memset word, word): a NaN per element
#: (a float64 NaN's high word, repeated, is still a NaN; a complex one's parts are NaNs), else the
#: byte 0xA5; pattern 1 is the byte 0x3C (see :data:`~tunebench.backends.base.POISONS`). The 2-byte floats are set 16 bits at
#: a time, so an odd length is poisoned to its last element; 0x7F is a NaN in both 8-bit floats.
#: By dtype name: the extension floats' dtypes are ml_dtypes', imported only where a kernel uses one.
POISON = {"float32": (4, 0x7FC00000), "float16": (2, 0x7E00), "bfloat16": (2, 0x7FC0), "float64": (4, 0x7FF80000),
          "float8_e4m3fn": (1, 0x7F), "float8_e5m2": (1, 0x7F), "complex64": (4, 0x7FC00000),
          "complex128": (4, 0x7FF80000)}


def nvcc() -> str:
    """The nvcc that builds candidates: on PATH, else under ``$CUDA_HOME``."""
    home = os.environ.get("CUDA_HOME")
    path = shutil.which("nvcc") or (home and shutil.which("nvcc", path=os.path.join(home, "bin")))
    if not path:
        raise FileNotFoundError("nvcc is not on PATH (nor under $CUDA_HOME/bin): CUDA builds need it")
    return path


def code_flags(variant: Variant) -> list[str]:
    """The flags of a build that decide its code, the device's ``-arch`` apart (``sm_90a`` for an
    arch-specific variant on an sm_90): what a framework building the template itself passes."""
    return [*NVCC_OPTIONS, *copy_flags(variant)]


def copy_flags(variant: Variant) -> tuple[str, ...]:
    """The flags of a build of the template's copy in the build cache: the variant's, and ``-I``
    each folder a computed include reads from (see
    :attr:`~tunebench.kernel.Variant.computed_include_dirs`; nvcc has no ``-iquote``), spelt as
    nvcc takes it (:func:`option_path`)."""
    return (*variant.build_flags, *(f"-I{option_path(d)}" for d in variant.computed_include_dirs))


#: What nvcc, or the shell it runs its host compiler in, misreads in a path written bare as the
#: value of one of nvcc's own options (``-I``, ``-include``, ``-isystem``): a comma, at which
#: nvcc splits the value into a list (``\\,`` is no escape), and a backslash or backquote, which
#: that shell reads as an escape or a command (nvcc writes the value there in double quotes).
_MISREAD = re.compile(r"[,\\`]")


def option_path(path: str | Path) -> str:
    """``path`` as the value of one of nvcc's own options, as nvcc takes it: where it holds a
    character of :data:`_MISREAD`, in double quotes, inside which nvcc splits at no comma, each
    backslash and backquote escaped for the shell (``-I"/home/u/proj,v2/inc"``); as it is
    otherwise, so that a plain path's flags, which the compile cache keys on, stay the same.
    Written bare, a project under ``proj,v2/`` was the folders ``/home/u/proj`` and ``v2/inc`` to
    nvcc, and no build found a header. nvcc takes no ``'`` or ``"`` in such a path however it is
    written (it refuses a ``"``, and gives its shell a ``'`` escaped, which that reads as ``\\'``),
    nor a final backslash (which escapes the closing quote): a :class:`KernelError` naming it, where
    the build said "Stray '\"' character", or built from another folder's header of the name."""
    path = str(path)
    if "'" in path or '"' in path or path.endswith("\\"):
        raise KernelError(f"{path}: nvcc takes no ' or \" in the path of a folder or file of its own options, nor one "
                          f"ending in a backslash, however it is written: move the project to a folder named without them")
    if not _MISREAD.search(path):
        return path
    return '"' + re.sub(r"[\\`]", lambda found: "\\" + found.group(), path) + '"'


def option_list(value: str) -> list[tuple[int, str, str]]:
    """The paths of the value of one of nvcc's own options, as nvcc reads its list (``-Ia,b``:
    the folders a and b): each word between commas outside double quotes, with where it starts,
    as written and as the path it reads, its quotes gone and the shell's escapes of a backslash
    and a backquote read (see :func:`option_path`, which it reads back). Split at every comma,
    ``-I"/proj,v2/inc"`` was two folders, neither of them the one nvcc searches."""
    words, start, quoted = [], 0, False
    for i, char in enumerate(value):
        if char == '"' and value[i - 1:i] != "\\":
            quoted = not quoted
        elif char == "," and not quoted:
            words.append((start, value[start:i]))
            start = i + 1
    words.append((start, value[start:]))
    return [(start, word, re.sub(r"\\([\\`])", r"\1", re.sub(r'(?<!\\)"', "", word))) for start, word in words]


def macro_list(value: str) -> list[str]:
    """The macros of the value of nvcc's own -D (``-DA=1,B=2``: two), each as nvcc gives it its
    host compiler's preprocessor (``nvcc --dryrun``): split at each comma outside double quotes,
    which it keeps (``-DK_IMPL="impls/a,b.h"``: one macro, the string ``"impls/a,b.h"``), a
    backslash escaping the character after it, given without the backslash (``-DK_IMPL=\\"a.h\\"``:
    ``"a.h"``; ``\\,`` a comma, no split); none of an empty word. An -Xcompiler's value it reads
    so too, and writes its words into its host compiler's command line between spaces (see
    :func:`tunebench.kernel.compiler_reads`). Its -I list it reads otherwise
    (see :func:`option_list`: no escape, the quotes gone). Split at every comma, the macro was
    ``"impls/a`` and named no header: the header nvcc read was unhashed. The shell nvcc hands the
    line to is not followed: a ``$VAR``, a backquote or ``\\\\`` in a macro is read as written."""
    macros, word = [], ""
    for _, char, split in list_characters(value):
        if split:
            macros.append(word)
            word = ""
        else:
            word += char
    return [macro for macro in (*macros, word) if macro]


def list_characters(value: str) -> Iterator[tuple[int, str, bool]]:
    """The characters of a list nvcc reads (its -D's value, an -Xcompiler's), each with where it
    is written and whether nvcc splits the list at it: a comma outside double quotes; a backslash
    escapes the character after it (``\\"`` no quote, ``\\,`` no split), given without the
    backslash. The one rule of :func:`macro_list` and :func:`tunebench.kernel.compiler_words`:
    with a copy of it that missed the quotes, ``-Xcompiler -DK_IMPL=\\\\"impls,v2/a.h\\\\"`` was
    split at a comma nvcc keeps, and the header nvcc read was unhashed."""
    quoted, escaped = False, False
    for i, char in enumerate(value):
        if escaped:
            yield i - 1, char, False
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            yield i, char, char == "," and not quoted
            quoted ^= char == '"'


def nvcc_command(arch: str, flags: tuple[str, ...] = ()) -> list[str]:
    """The command compiling ``{src}`` to the cubin ``{out}`` for ``arch`` (``sm_90``)."""
    return [nvcc(), "--cubin", f"-arch={arch}", *NVCC_OPTIONS, *flags, "-o", "{out}", "{src}"]


def recipe(arch: str, variant: Variant, config: Mapping, dtype: str,
           debug: bool = False) -> tuple[str, str, list[str]]:
    """A config's build in a dtype for ``arch`` (the variant's: :func:`variant_arch`): the source
    compiled, the compile cache's tag of its command and the command; ``debug``: its ``-G`` build."""
    flags = debug_flags(copy_flags(variant)) if debug else copy_flags(variant)
    tag = " ".join((nvcc_version(), arch, *NVCC_OPTIONS, *flags))
    return source(variant, config, dtype), tag, nvcc_command(arch, flags)


def build_key(arch: str, variant: Variant, config: Mapping, dtype: str) -> str:
    """The compile cache's key of a config's build in a dtype on a device of ``arch`` (see :func:`recipe`)."""
    text, tag, _ = recipe(variant_arch(arch, variant), variant, config, dtype)
    return cache_key(tag, text)


def compile_keeping_ptx(command: Sequence[str], src: Path, out: Path) -> str | None:
    """:func:`~tunebench.backends.cache.run_compiler`'s run of an nvcc ``command``, the PTX it makes
    kept beside ``src`` under its name, as the cache names the cubin (see
    :func:`~tunebench.backends.launch.compiled_kernels`): the cubin does not say which kernels sync
    their grid. nvcc's other intermediate files go."""
    with scratch(src.parent, "nvcc-keep-") as keep:
        ptx = Path(keep) / f"{src.stem}.ptx"
        error = run_compiler([*command, "--keep", "--keep-dir", keep], src, out)
        if error is None and ptx.exists():  # none made (another nvcc's naming): no kernel's launch is known to need one
            os.replace(ptx, src.with_suffix(".ptx"))
        return error and error.replace(str(ptx), "<its ptx>")


@cache
def nvcc_version() -> str:
    """nvcc's build line: cubins of another nvcc are compiled again, not reused."""
    out = subprocess.run([nvcc(), "--version"], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


@cache
def nvcc_archs() -> tuple[str, ...]:
    """The architectures this nvcc builds cubins for (``sm_80``, ...)."""
    out = subprocess.run([nvcc(), "--list-gpu-code"], capture_output=True, text=True, check=True).stdout
    return tuple(out.split())


def arch_problem(arch: str) -> str | None:
    """Why this nvcc cannot build for ``arch`` (``sm_90``, or ``sm_90a`` for its
    architecture-specific features, which exist from compute capability 9.0), if it cannot: one
    error before any build, not every candidate of every kernel failing alike."""
    found = re.fullmatch(r"(sm_(\d+?)\d)([af]?)", arch)
    if not found:
        return f"{arch!r} is no architecture name: give sm_ and the compute capability's digits (sm_80, sm_90)"
    if found.group(1) in nvcc_archs():
        if not found.group(3) or int(found.group(2)) >= {"a": 9, "f": 10}[found.group(3)]:
            return None
        return (f"{found.group(1)} has no {'architecture' if found.group(3) == 'a' else 'family'}-specific target "
                f"{arch} (they begin with {'sm_90a' if found.group(3) == 'a' else 'sm_100f'})")
    return (f"nvcc ({nvcc_version().removeprefix('Build ')}) builds no {arch}; it builds {' '.join(nvcc_archs())}: "
            f"a device of another architecture needs a CUDA toolkit that supports it")


def variant_arch(arch: str, variant: Variant) -> str:
    """What a variant is built for on the device ``arch`` names: its architecture-specific target
    (``sm_90a``) where it declares ``arch_specific``, else the plain one, as a tune on that device
    builds it (``sm_90`` for ``sm_90a`` too: a plain variant that needs sm_90a fails there)."""
    if variant.arch_specific:
        return arch if arch[-1] in "af" else f"{arch}a"
    return arch.rstrip("af")


def explain_build(variant: Variant, config: Mapping, error: str) -> str:
    """nvcc's error, explained as :func:`~tunebench.backends.base.explain` does; and where ptxas
    refuses an instruction on a plain target, that only an architecture-specific one has it."""
    error = explain(variant, config, error, gpu=True)
    if not variant.arch_specific and re.search(r"not supported on \.target 'sm_\d+'", error):
        error += ("\n(tunebench: an instruction only an architecture-specific target has, as sm_90a's wgmma and "
                  "setmaxnreg: declare the variant arch_specific=True)")
    return error


def resource_refusal(error: str) -> str | None:
    """ptxas's refusal of a build for the static shared or local memory it asks, which no block
    gets on the architecture (static shared memory stops at 48 KiB): a config beyond a limit, as
    a launch beyond the device's is, pruned there rather than failed; None for any other error."""
    found = re.search(r"(Entry function|Function) '[^'\n]*' uses too much (shared|local) data[^\n]*", error)
    return f"ptxas: {found.group(0).strip()}" if found else None


def source(variant: Variant, config: Mapping, dtype: str) -> str:
    """What nvcc compiles for a config and dtype: a user's float16 kernel needs no include."""
    header = f"#include <{CTYPE_HEADERS[dtype]}>\n" if dtype in CTYPE_HEADERS else ""
    return header + render(variant, config, CTYPES[dtype], "cuda")


def preprocessing(variant: Variant, config: Mapping) -> tuple[str, list[str], str] | None:
    """How a build reads a config's template for the device, to tell whether a param's values make
    another code (see :func:`~tunebench.backends.base.constant_param`): nvcc's path and version (the
    verdict is kept under them), the command (nvcc -E, the variant's flags, the host compiler's -H
    to list the headers it reads: see :func:`~tunebench.backends.base.preprocess`) and the text it
    reads; None where nvcc is not there (a machine without CUDA collects the suite all the same)."""
    dtype = variant.dtypes[0] if variant.dtypes[0] in CTYPES else "float32"  # the code's type, which no #if reads
    try:
        path = nvcc()
    except FileNotFoundError:
        return None
    return (f"{path} {nvcc_version()}",
            [path, "-E", "-Xcompiler", "-P", "-Xcompiler", "-H", *code_flags(variant), "-x", "cu", "-"],
            source(variant, config, dtype))


def fingerprint_of(drv, device) -> dict:
    """What changes a GPU's timings: model, compute capability, SM count, memory size and bus,
    clocks, driver and the CUDA version PyCUDA was built with."""
    attr = drv.device_attribute
    major, minor = device.compute_capability()
    return {"target": "cuda", "name": device.name(), "compute_capability": f"{major}.{minor}",
            "sm_count": device.get_attribute(attr.MULTIPROCESSOR_COUNT),
            "memory_gib": round(device.total_memory() / 2**30, 1),
            "memory_bus_bits": device.get_attribute(attr.GLOBAL_MEMORY_BUS_WIDTH),
            "sm_clock_mhz": device.get_attribute(attr.CLOCK_RATE) // 1000,
            "memory_clock_mhz": device.get_attribute(attr.MEMORY_CLOCK_RATE) // 1000,
            "driver": drv.get_driver_version(), "cuda": ".".join(map(str, drv.get_version()))}


def transferable(array: np.ndarray) -> np.ndarray:
    """The array as PyCUDA's copies take it: by the buffer protocol, which refused ml_dtypes'
    floats (every bfloat16 candidate crashed on an H200), so those go as their bits
    (:func:`~tunebench.dtypes.as_bits`; a copy into the view fills the array)."""
    return as_bits(np.ascontiguousarray(array))


def args_refusal(args: Mapping[str, Any]) -> str | None:
    """Why the CUDA target cannot launch a kernel with these arguments as given (compile-check
    says it too): an array not in C order, which the copy to the device would re-lay; a long
    double scalar, which CUDA has no type for (nor PyCUDA a code)."""
    for name, value in args.items():
        if isinstance(value, np.generic) and value.dtype.char in "gG":
            return f"scalar {name!r} is a {value.dtype}, which CUDA has no type for: pass np.float64 (or two)"
    return not_contiguous(args)


class DeviceInputs:
    """One set of host arguments' input copies on the device (see
    :meth:`CudaBackend._device_inputs`), with the runners using them. The host arrays are held
    weakly: the worker's memory trim frees them (held here, they were beyond its count), and a set
    built later at a freed one's address is told apart by its arrays."""

    def __init__(self, args: Mapping[str, Any], bufs: dict):
        self.arrays = [weakref.ref(v) for v in args.values() if isinstance(v, np.ndarray)]
        self.bufs = bufs
        self.users = 0
        self.dropped = False  # no longer kept: freed when its last runner closes

    def copies(self, args: Mapping[str, Any]) -> bool:
        """Whether these are copies of ``args``' arrays (not of a set since freed)."""
        arrays = [v for v in args.values() if isinstance(v, np.ndarray)]
        return len(arrays) == len(self.arrays) and all(ref() is a for ref, a in zip(self.arrays, arrays))

    def release(self) -> None:
        """A runner using them closed."""
        self.users -= 1
        if self.dropped and not self.users:
            self.free()

    def free(self) -> None:
        for buf in self.bufs.values():
            buf.free()


class CudaRunner(Runner):
    def __init__(self, backend: CudaBackend, fn, launch: Launch, kernel: Kernel, args: Mapping[str, Any],
                 held: DeviceInputs):
        self._backend, self._fn, self._launch = backend, fn, launch
        inputs = held.bufs
        drv = backend.drv
        self._names = kernel.outputs
        self._host_out = [np.empty_like(args[n]) for n in kernel.outputs]
        # fresh per candidate, each output inside an allocation with a guard zone on either side;
        # the driver's memset and memcpy take a pointer as a Python int, a launch as a numpy scalar
        self._alloc = [drv.mem_alloc(a.nbytes + 2 * GUARD_BYTES) for a in self._host_out]
        self._dev_out = [int(a) + GUARD_BYTES for a in self._alloc]
        out_index = {n: i for i, n in enumerate(kernel.outputs)}
        # in-place inputs and in-out outputs start every call from a pristine device copy (one
        # given as another argument's array is that argument's buffer, restored as that one);
        # an in-place input is the candidate's own, guarded as an output is: a write past it must
        # not land in the pristine copy that every later candidate starts from
        shared = kernel.aliases(args)
        scratch = [n for n in kernel.inplace if n not in shared]
        self._scratch_alloc = [drv.mem_alloc(args[n].nbytes + 2 * GUARD_BYTES) for n in scratch]
        self._scratch = {n: (int(a) + GUARD_BYTES, args[n].nbytes) for n, a in zip(scratch, self._scratch_alloc)}
        self._pristine = [(self._scratch[n][0], inputs[f"{n}@pristine"], args[n].nbytes) for n in scratch] + [
            (self._dev_out[out_index[n]], inputs[f"{n}@pristine"], args[n].nbytes) for n in kernel.inout]
        self._inout = {out_index[n] for n in kernel.inout}
        self._inputs = inputs
        self._read_only = {n: np.ascontiguousarray(v) for n, v in args.items()
                           if n in inputs and n not in kernel.inplace}
        self._call_args = [np.uintp(self._dev_out[out_index[t]]) if t in out_index
                           else np.uintp(self._scratch[t][0]) if t in self._scratch
                           else inputs[t] if isinstance(v, np.ndarray) else packed(v)
                           for n, v in args.items() for t in [shared.get(n, n)]]
        self._held: DeviceInputs | None = held  # never freed while this runner may call on them
        held.users += 1

    def reset(self, pattern: int = 0) -> None:
        drv = self._backend.drv
        for i, (host, alloc, dev) in enumerate(zip(self._host_out, self._alloc, self._dev_out)):
            drv.memset_d8(alloc, GUARD_FILL, GUARD_BYTES)
            drv.memset_d8(dev + host.nbytes, GUARD_FILL, GUARD_BYTES)
            if i in self._inout:
                continue  # restored below: it starts from the args builder's values
            width, word = POISON.get(host.dtype.name, (1, POISONS[0])) if pattern == 0 else (1, POISONS[pattern])
            memset = {1: drv.memset_d8, 2: drv.memset_d16, 4: drv.memset_d32}[width]
            memset(dev, word, host.nbytes // width)
        for dev, nbytes in self._scratch.values():
            drv.memset_d8(dev - GUARD_BYTES, GUARD_FILL, GUARD_BYTES)
            drv.memset_d8(dev + nbytes, GUARD_FILL, GUARD_BYTES)
        self._restore()
        drv.Context.synchronize()

    def overrun(self) -> str | None:
        drv = self._backend.drv
        for name, host, alloc, dev in zip(self._names, self._host_out, self._alloc, self._dev_out):
            before, after = np.empty(GUARD_BYTES, np.uint8), np.empty(GUARD_BYTES, np.uint8)
            drv.memcpy_dtoh(before, alloc)
            drv.memcpy_dtoh(after, dev + host.nbytes)
            damage = guard_damage(name, before, after)
            if damage:
                return damage
        for name, (dev, nbytes) in self._scratch.items():
            before, after = np.empty(GUARD_BYTES, np.uint8), np.empty(GUARD_BYTES, np.uint8)
            drv.memcpy_dtoh(before, dev - GUARD_BYTES)
            drv.memcpy_dtoh(after, dev + nbytes)
            damage = guard_damage(name, before, after, "in-place input")
            if damage:
                return damage
        for name, given in self._read_only.items():
            now = np.empty(given.shape, given.dtype)
            drv.memcpy_dtoh(transferable(now), self._inputs[name])
            damage = input_damage(name, given, now)
            if damage:  # copied once per shape for every candidate: the next must not see the damage
                drv.memcpy_htod(self._inputs[name], transferable(given))
                return damage
        return None

    def _restore(self) -> None:
        for dev, pristine, nbytes in self._pristine:
            self._backend.drv.memcpy_dtod(dev, pristine, nbytes)

    def call(self) -> None:
        self._restore()
        self._launch(self._fn, self._call_args)
        self._backend.drv.Context.synchronize()

    def timed_call(self) -> float:
        # restored before the flush (the copy must not leave the inputs in L2), and again before any retry
        return self._backend.time_launch(lambda: self._launch(self._fn, self._call_args), self._restore)

    def outputs(self) -> list[np.ndarray]:
        for host, dev in zip(self._host_out, self._dev_out):
            self._backend.drv.memcpy_dtoh(transferable(host), dev)
        return self._host_out

    def close(self) -> None:
        for alloc in (*self._alloc, *self._scratch_alloc):
            alloc.free()
        self._alloc, self._scratch_alloc = [], []
        if self._held is not None:
            self._held.release()
            self._held = None


class CudaCompiler:
    """Compiles CUDA candidates for one architecture without a device or a context: the tuning
    process compiles ahead with one while the worker's GPU measures."""

    builds_beside_measurement = True

    def __init__(self, arch: str, cache: BuildCache | None = None):
        self.arch = arch
        self.cache = cache or BuildCache()

    def build(self, kernel: Kernel, variant: Variant, config: Mapping, dtype: str, debug: bool = False) -> Build:
        """The config's cubin; ``debug``: built with ``-G`` instead, never measured, whose DWARF
        gives the parameters' C types (see :meth:`parameter_types`)."""
        if dtype not in CTYPES:
            raise CompileError(f"dtype {dtype} has no CUDA type ({', '.join(CTYPES)})")
        arch = variant_arch(self.arch, variant)
        unsupported = arch_problem(arch) if arch != self.arch else None
        if unsupported:
            raise KernelError(f"kernel {kernel.name!r}: the cuda variant is arch_specific, and {unsupported}")
        text, tag, command = recipe(arch, variant, config, dtype, debug)
        try:
            path, seconds, cached = self.cache.get(f"{kernel.name}-cuda", text, tag, (".cu", ".cubin"),
                                                   lambda src, out: compile_keeping_ptx(command, src, out))
        except CompileError as e:
            refused = resource_refusal(str(e))
            if refused:
                raise ResourceError(refused) from None
            raise CompileError(explain_build(variant, config, str(e)), cached=e.cached, earlier=e.earlier) from None
        return Build(handle=path, compile_time_s=seconds, cached=cached, dtype=dtype)

    def parameter_types(self, kernel: Kernel, variant: Variant, config: Mapping, dtype: str,
                        symbol: str) -> tuple[Param, ...] | None:
        """The C types of the parameters of the entry point ``symbol``, from a ``-G`` build of the
        config: the optimised cubin lists only their bytes, and a float32 given for an ``int``, or
        two 4-byte scalars swapped, fit those and read garbage in every config. None where that
        build fails or says nothing of them (the bytes are still checked)."""
        try:
            return debug_functions(self.build(kernel, variant, config, dtype, debug=True).handle).get(symbol)
        except (CompileError, ResourceError, ImportError):
            return None


def entry_of(kernel: Kernel, variant: Variant, kernels: Mapping[str, FunctionResources] | None) -> str:
    """The symbol of the variant's entry point among a build's ``kernels`` (its name where they are
    not known: pyelftools is not installed); a KernelError naming the kernel where the build has
    none, or where :func:`~tunebench.backends.launch.entry_refusal` refuses it (it syncs its whole
    grid, it reads unfilled constant memory): refused once, before any measurement, where every
    config would fail alike, each with an obscure error or a wrong result."""
    if kernels is None:
        return variant.entry
    try:
        symbol = entry_symbol(variant.entry, kernels, variant.path.name)
    except KernelError as e:
        raise KernelError(f"kernel {kernel.name!r}: {e}") from None
    refusal = entry_refusal(kernels[symbol])
    if refusal:
        raise KernelError(f"kernel {kernel.name!r}: {variant.path.name}'s {variant.entry!r}: {refusal}")
    return symbol


def launch_refusal(kernel: Kernel, variant: Variant, config: Mapping, shape: tuple, launch: Launch,
                   fn: FunctionResources, limits: Mapping) -> str | None:
    """Why a tune does not measure this launch of the entry point ``fn`` (as the device and its
    build's PTX give it), checked as compile-check checks it
    (:func:`~tunebench.backends.launch.launch_problem`): a KernelError naming the kernel, config
    and shape where the launch is at fault, which stops the task; else what the device cannot
    launch, a candidate pruned (a grid that is no multiple of the kernel's cluster among it)."""
    try:
        return launch_problem(limits, launch, fn)
    except KernelError as e:
        raise KernelError(f"kernel {kernel.name!r}: {variant.path.name}'s {variant.entry!r} launched for "
                          f"{dict(config)} on shape {tuple(shape)}: {e}") from None


#: A kernel that spins on the GPU's nanosecond timer for the ns it is given (and stops should the
#: timer step back). Queued between the L2 flush and the start event, it keeps the GPU busy while
#: the host enqueues the timed launch: the host's own launch time (Python, argument packing, a
#: framework's dispatch) stays out of the events' window. PTX for sm_50 on, JIT-compiled by the
#: driver for any later device, so it needs no nvcc at run time. NVIDIA's nvbench blocks the same
#: way (on a host flag, which a launch that synchronizes deadlocks; a timer cannot).
LEAD_PTX = """.version 6.0
.target sm_50
.address_size 64
.visible .entry tb_lead(.param .u64 ns)
{
  .reg .u64 %rd<5>;
  .reg .pred %p;
  ld.param.u64 %rd1, [ns];
  mov.u64 %rd2, %globaltimer;
  add.u64 %rd3, %rd2, %rd1;
SPIN:
  mov.u64 %rd4, %globaltimer;
  setp.lt.u64 %p, %rd4, %rd2;
  @%p bra DONE;
  setp.lt.u64 %p, %rd4, %rd3;
  @%p bra SPIN;
DONE:
  ret;
}
"""
#: The lead's shortest and longest, in ns, and the tries of a call. The lead is twice the host's
#: time to enqueue the last launch, at least LEAD_NS: it follows a slow host and comes back down
#: with it. A call whose window held the GPU waiting is timed again with a longer lead, unless
#: its launch took the host LEAD_MAX_NS or more (it synchronizes, or the host stalled), which no
#: lead covers.
LEAD_NS, LEAD_MAX_NS, LEAD_TRIES = 20_000, 2_000_000, 4


class CudaBackend(CudaCompiler, Backend):
    name = "cuda"

    def __init__(self, cache: BuildCache | None = None):
        import pycuda.driver as drv  # ImportError where there is no CUDA driver
        self.drv = drv
        drv.init()
        self.device = drv.Device(0)
        self.context = self.device.retain_primary_context()
        self.context.push()
        atexit.register(self._release)
        attr = drv.device_attribute
        major, minor = self.device.compute_capability()
        CudaCompiler.__init__(self, f"sm_{major}{minor}", cache)
        unsupported = arch_problem(self.arch)
        if unsupported:
            raise RuntimeError(f"{self.device.name()}: {unsupported}")
        self.limits = {  # as arch_limits(), this device's
            "threads": self.device.get_attribute(attr.MAX_THREADS_PER_BLOCK),
            "shared": self.device.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            "block": tuple(self.device.get_attribute(a) for a in (
                attr.MAX_BLOCK_DIM_X, attr.MAX_BLOCK_DIM_Y, attr.MAX_BLOCK_DIM_Z)),
            "grid": tuple(self.device.get_attribute(a) for a in (
                attr.MAX_GRID_DIM_X, attr.MAX_GRID_DIM_Y, attr.MAX_GRID_DIM_Z)),
        }
        l2 = self.device.get_attribute(attr.L2_CACHE_SIZE)
        self._flush_words = max(2 * l2 // 4, 1)
        self._flush = drv.mem_alloc(self._flush_words * 4)
        self.start, self.end = drv.Event(), drv.Event()
        try:
            self._lead = drv.module_from_buffer(LEAD_PTX.encode()).get_function("tb_lead")
            self._lead.prepare("Q")
        except drv.Error:  # no PTX JIT (CUDA_DISABLE_PTX_JIT=1): timed as before the lead, host time and all
            self._lead = None
        self.lead_ns = LEAD_NS
        self._modules: dict[str, Any] = {}
        self._kernels: dict[str, dict[str, FunctionResources] | None] = {}  # each cubin's kernels
        self._types: dict[tuple[str, str], tuple[Param, ...] | None] = {}  # (kernel, dtype) -> its parameters' C types
        self._inputs: OrderedDict[tuple, DeviceInputs] = OrderedDict()  # the last arguments' device inputs

    def _release(self) -> None:
        try:
            self.context.pop()
        except Exception:  # noqa: BLE001 - the process is exiting; nothing to save
            pass

    def fingerprint(self) -> dict:
        return fingerprint_of(self.drv, self.device)

    def conditions(self) -> dict:
        """SM and memory clocks, temperature and power now, through NVML where it is installed."""
        try:
            import pynvml
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByPciBusId(self.device.pci_bus_id())
            return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "memory_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                    "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
                    "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000}
        except Exception as e:  # noqa: BLE001 - conditions are informative; never fail a trial
            return {"nvml": f"unavailable ({type(e).__name__})"}

    def flush_l2(self) -> None:
        self.drv.memset_d32(self._flush, 0, self._flush_words)

    def time_launch(self, launch, before=lambda: None) -> float:
        """Milliseconds of the GPU work ``launch()`` queues on the default stream (and on streams
        that wait on it: not a non-blocking one's), between two events, after ``before()`` (an
        in-place input's restore), the L2 flush and the lead: how every timing of this target is
        taken, a peer's too. Where the start event had passed once both events were queued, the
        GPU sat idle waiting for the host inside the window: the call is timed again, ``before()``
        and all, with a longer lead."""
        for _ in range(LEAD_TRIES):
            before()
            self.flush_l2()
            if self._lead is not None:
                self._lead.prepared_call((1, 1), (1, 1, 1), self.lead_ns)
            began = time.perf_counter_ns()
            self.start.record()
            launch()
            host_ns = time.perf_counter_ns() - began
            self.end.record()
            waited = self.start.query()  # after the end's record: nothing of the window was queued late
            self.end.synchronize()
            needed = min(LEAD_MAX_NS, max(LEAD_NS, 2 * host_ns))
            if not waited:
                self.lead_ns = needed
                break
            if self._lead is None or host_ns >= LEAD_MAX_NS:
                break
            self.lead_ns = max(needed, min(2 * self.lead_ns, LEAD_MAX_NS))
        return self.start.time_till(self.end)

    def load(self, build: Build, kernel: Kernel, variant: Variant, config: Mapping, shape: tuple,
             args: Mapping[str, Any], placement: str = "device", writable_inputs: bool = False) -> Runner:
        refused = args_refusal(args)
        if refused:
            raise KernelError(f"kernel {kernel.name!r}: {refused}")
        launch = launch_of(kernel, variant, config, shape, build.dtype)
        key = str(build.handle)
        if key not in self._modules:
            self._modules[key] = self.drv.module_from_buffer(build.handle.read_bytes())
        symbol = entry_of(kernel, variant, self._kernels_of(build))
        try:
            fn = self._modules[key].get_function(symbol)
        except self.drv.LogicError:
            raise KernelError(f"kernel {kernel.name!r}: {variant.path.name} has no __global__ "
                              f"{variant.entry!r}") from None
        mismatch = self._args_problem(build, kernel, variant, config, symbol, args)
        if mismatch:
            raise KernelError(f"kernel {kernel.name!r}: {mismatch}")
        built = (self._kernels_of(build) or {}).get(symbol)
        problem = launch_refusal(kernel, variant, config, shape, launch, FunctionResources.of(fn, built), self.limits)
        if problem:
            raise ResourceError(problem)
        if fn.shared_size_bytes + launch.shared > DEFAULT_SHARED:  # beyond it, only where the function asks
            fn.set_attribute(self.drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.shared)
        runner = CudaRunner(self, fn, launch, kernel, args, self._device_inputs(kernel, args))
        runner.typed = bool(self._types.get((kernel.name, build.dtype)))
        return runner

    def _kernels_of(self, build: Build) -> dict[str, FunctionResources] | None:
        """The build's kernels as its cubin and PTX list them; None where pyelftools is not installed."""
        key = str(build.handle)
        if key not in self._kernels:
            try:
                self._kernels[key] = compiled_kernels(build.handle)
            except ImportError:
                self._kernels[key] = None
        return self._kernels[key]

    def _args_problem(self, build: Build, kernel: Kernel, variant: Variant, config: Mapping, symbol: str,
                      args: Mapping[str, Any]) -> str | None:
        """Where the arguments do not fit the entry point's parameters (see
        :func:`~tunebench.backends.params.args_problem`): their C types, read once per kernel and
        dtype, which name the numpy type to give, then their bytes and offsets as this build's
        cubin lists them: a declaration error, before a launch that would read shifted or
        misread bytes. Unchecked where pyelftools is not installed."""
        found = (self._kernels_of(build) or {}).get(symbol)
        typed = (kernel.name, build.dtype)
        if found and typed not in self._types:
            self._types[typed] = self.parameter_types(kernel, variant, config, build.dtype, symbol)
        types = self._types.get(typed)
        return (args_problem(args, types) if types else None) or (args_problem(args, found.params) if found else None)

    def _device_inputs(self, kernel: Kernel, args: Mapping[str, Any]) -> DeviceInputs:
        """Input arrays on the device, copied once per set of host arguments the worker holds (kept
        while a runner uses them, else dropped, the oldest first, where a new set's load finds two
        kept, and all as a comparison ends: see :meth:`drop_inputs`): every config of a shape
        measured on its one set shares the copy, and other arguments of the same shape and dtypes
        are copied afresh: a config's own (a split-K's workspace of ``splits * M``), or a shape's
        built again (an unseeded args builder's other values). A copy a runner uses is never freed
        under it: a comparison loads all its arms, each of its own arguments where the args
        builder takes the config, before it times one (the third arm's load freed the first's
        inputs)."""
        key = (kernel.name, id(args))
        if key in self._inputs and not self._inputs[key].copies(args):  # another set, where a dropped one was
            self._drop(key)
        if key not in self._inputs:
            for idle in [k for k, held in self._inputs.items() if not held.users][:max(0, len(self._inputs) - 1)]:
                self._drop(idle)
            bufs = {}
            shared = kernel.aliases(args)
            for name, value in args.items():
                if not isinstance(value, np.ndarray) or name in shared or (
                        name in kernel.outputs and name not in kernel.inout):
                    continue
                if name not in (*kernel.outputs, *kernel.inplace):  # an in-place input is each runner's own
                    bufs[name] = self.drv.to_device(transferable(value))
                if name in (*kernel.inplace, *kernel.inout):
                    bufs[f"{name}@pristine"] = self.drv.to_device(transferable(value))
            self._inputs[key] = DeviceInputs(args, bufs)
        return self._inputs[key]

    def drop_inputs(self) -> None:
        """Forget every set of arguments' device copies (see :meth:`_drop`)."""
        for key in list(self._inputs):
            self._drop(key)

    def _drop(self, key: tuple) -> None:
        """Forget a set of arguments' device copies: freed now, or by the last runner using them."""
        held = self._inputs.pop(key)
        held.dropped = True
        if not held.users:
            held.free()
