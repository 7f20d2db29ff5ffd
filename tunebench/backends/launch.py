"""How a CUDA config launches: its grid, block and dynamic shared memory, and whether a device
(or, without one, an architecture) can make that launch.

A variant's ``launch(config, shape)`` is the user's code; what it answers is checked here, once,
so that a wrong form is a declaration error naming the config and shape, and a launch beyond the
limits is a ``pruned_resources`` trial on the device (without one, compile-check reads the
cubin: the heuristic's config beyond an architecture's limits fails the check, a candidate's is
noted), never a crash in the middle of a tune. The cubin also lists the entry point's
parameters, against which the args builder's arguments are checked (:mod:`tunebench.backends.params`).
"""

from __future__ import annotations

import inspect
import math
import re
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tunebench.backends.base import BLOCK_SIZE_NAMES, KernelError, source_line, without_comments
from tunebench.backends.params import Param
from tunebench.user_code import raised

if TYPE_CHECKING:  # the declarations it builds: a floor above, never imported at run time
    from tunebench.kernel import Kernel, Variant

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
    takes exactly three); a whole float (``np.ceil``'s) counts as an int. A launch that raises or
    answers in another form is the declaration's fault."""
    def whole(v) -> bool:  # an int, or a float with nothing after the point (np.ceil's answer); a bool is a typo
        return (isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))) or (
            isinstance(v, (float, np.floating)) and float(v).is_integer())

    def dims(value) -> tuple[int, int, int]:
        values = (value,) if whole(value) else tuple(value)
        if not 1 <= len(values) <= 3 or not all(whole(v) for v in values):
            raise TypeError
        return (*(int(v) for v in values), 1, 1)[:3]

    if variant.launch is None:
        raise KernelError(f"kernel {kernel.name!r}: the cuda variant has no launch=(config, shape) -> (grid, block)")
    given = (dict(config), tuple(shape), *((dtype,) if takes(variant.launch, "dtype") else ()))
    where = f"kernel {kernel.name!r}: the cuda variant's launch{given}"
    try:
        answer = variant.launch(*given)
    except Exception as e:  # noqa: BLE001 - the user's code, reported with its cause
        raise KernelError(f"{where} raised {raised(e)}") from None
    try:
        if not isinstance(answer, (tuple, list)) or len(answer) not in (2, 3):
            raise TypeError
        shared = answer[2] if len(answer) == 3 else 0
        if not whole(shared) or shared < 0:
            raise TypeError
        made = Launch(dims(answer[0]), dims(answer[1]), int(shared))
    except TypeError:
        raise KernelError(f"{where} returned {answer!r}: it must return (grid, block) or (grid, block, "
                          f"shared_bytes), a grid or block an int or up to three whole numbers") from None
    if min(*made.grid, *made.block) < 1:  # the arithmetic's fault, not a limit: it would launch nothing
        fix = ("round the grid up: (n + per_block - 1) // per_block" if min(made.grid) < 1 else
               "a block's dimension is its threads along it: at least 1 each")  # a block's 0 took the grid's hint
        raise KernelError(f"{where} returned grid {made.grid}, block {made.block}: a dimension below 1 launches "
                          f"nothing ({fix})")
    return made


def kernel_tuner_launch(params: Iterable[str]) -> str | None:
    """The launch Kernel Tuner makes where a script gives no grid (the block its ``block_size_x``,
    ``_y``, ``_z`` params, the grid the problem size over them, rounded up), written as a
    ``launch=`` for a port that left it out; None where the space has none of those params."""
    names = list(BLOCK_SIZE_NAMES)
    given = [n for n in names if n in set(params)]
    if not given:
        return None
    sizes = [f"config[{n!r}]" if n in given else str(BLOCK_SIZE_NAMES[n])
             for n in names[:names.index(given[-1]) + 1]]
    grid = [f"shape[{i}]" if size == "1" else f"(shape[{i}] + {size} - 1) // {size}" for i, size in enumerate(sizes)]
    return f"lambda config, shape: (({', '.join(grid)}{',' * (len(grid) == 1)}), ({', '.join(sizes)}{',' * (len(sizes) == 1)}))"


def stray_parameter(fn: Callable, given: int) -> str | None:
    """The first parameter of a suite's launch function or heuristic beyond the ``given`` it is
    called with that nothing fills (not ``dtype``, nor defaulted): ``lambda config, shape, dt``
    raised a TypeError at every config, on the GPU, not at collection."""
    try:
        params = list(inspect.signature(fn).parameters.values())[given:]
    except (TypeError, ValueError):
        return None
    named = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return next((p.name for p in params if p.kind in named and p.default is p.empty and p.name != "dtype"), None)


def takes(fn: Callable, name: str) -> bool:
    """Whether a suite's function has a parameter ``name``: a launch function or heuristic with
    ``dtype`` is given the task's dtype (shared memory sized by the element, a vector width of 16
    bytes), an args builder with ``config`` the config (a workspace sized by a param)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def takes_keyword(fn: Callable, name: str) -> bool:
    """Whether a suite's function has a parameter ``name`` that a keyword fills (not ``*name``,
    ``**name`` nor a positional-only one): a reference ``reference(**config)`` takes every input,
    and was given the config too."""
    try:
        parameter = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                        inspect.Parameter.POSITIONAL_OR_KEYWORD)


def keywords(fn: Callable) -> set[str] | None:
    """The keyword arguments a suite's function takes; None where it takes any (``**kwargs``) or
    has no signature (a builtin): a reference is given the inputs it names, a function under
    ``apply`` the params it names."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                     inspect.Parameter.POSITIONAL_OR_KEYWORD)}


#: Shared memory a block may have (KiB, with the opt-in) per architecture, from the CUDA
#: programming guide's table of compute capabilities (an architecture-specific target, sm_90a or
#: sm_100f, has its architecture's).
ARCH_SHARED_KIB = {"sm_70": 96, "sm_75": 64, "sm_80": 163, "sm_86": 99, "sm_87": 163, "sm_88": 99, "sm_89": 99,
                   "sm_90": 227, "sm_100": 227, "sm_101": 227, "sm_103": 227, "sm_110": 227, "sm_120": 99,
                   "sm_121": 99}


def shared_kib(arch: str) -> int | None:
    """The shared memory a block of ``arch`` may have (KiB), None where it is not known here."""
    return ARCH_SHARED_KIB.get(arch.rstrip("af"))


def arch_limits(arch: str) -> dict:
    """What a device of ``arch`` launches at most, for a check without one (an architecture
    :func:`shared_kib` does not know gets its shared memory unchecked, and compile-check says so)."""
    kib = shared_kib(arch)
    return {"threads": 1024, "block": (1024, 1024, 64), "grid": (2**31 - 1, 65535, 65535),
            "shared": math.inf if kib is None else kib * 1024}


@dataclass(frozen=True)
class Constant:
    """A ``__constant__`` array or scalar as the build's source declares it: what a refusal of it
    names, and where to change it."""

    name: str
    ctype: str  # its elements' type, as written: float2
    dims: str  # [VERTICES]
    place: str  # where the compiler places its declaration: pnpoly.cu line 6

    def __str__(self) -> str:
        return f"{self.ctype} {self.name}{self.dims} ({self.place})"

    @property
    def parameter(self) -> str:
        """The kernel's parameter that would take its values as an argument: a scalar's by value, an
        array's as a pointer to its elements, or to its rows where it has more dimensions than one
        (``const float (*__restrict__ w)[4]``, which its code indexes as it did the array)."""
        if not self.dims:
            return f"{self.ctype} {self.name}"
        rows = self.dims[self.dims.index("]") + 1:]
        return f"const {self.ctype} " + (f"(*__restrict__ {self.name}){rows}" if rows else f"*__restrict__ {self.name}")


@dataclass(frozen=True)
class FunctionResources:
    """What a compiled function takes per block, which bounds the blocks it launches: its static
    shared memory, and on the device its registers and the most threads they allow; read from a
    cubin, the bytes of each of its parameters, in order."""

    static_shared: int = 0
    registers: int | None = None
    max_threads_per_block: int | None = None
    params: tuple[Param, ...] | None = None
    launch_bounds: int | None = None  # the threads its ``__launch_bounds__`` allows, from a cubin
    extern_shared: bool = False  # its code reaches an ``extern __shared__`` array (from the PTX)
    grid_sync: bool = False  # its code reads the grid's sync workspace, which a cooperative launch sets (the PTX)
    cluster: tuple[int, ...] | None = None  # its ``__cluster_dims__`` (from the PTX)
    unfilled_constants: tuple[Constant, ...] = ()  # the ``__constant__`` variables it reads that no initialiser fills (the PTX)

    @classmethod
    def of(cls, fn, built: FunctionResources | None = None) -> FunctionResources:
        """Of a function loaded on the device (PyCUDA): fewer threads than its registers allow
        are its ``__launch_bounds__``; what the PTX of its build says (``built``: its entry in
        :func:`compiled_kernels`), which the driver does not, is taken from there."""
        bounded = fn.max_threads_per_block < register_threads(fn.num_regs)
        found = cls(fn.shared_size_bytes, fn.num_regs, fn.max_threads_per_block,
                    launch_bounds=fn.max_threads_per_block if bounded else None)
        return found if built is None else replace(found, extern_shared=built.extern_shared, grid_sync=built.grid_sync,
                                                   cluster=built.cluster, unfilled_constants=built.unfilled_constants)


#: Attributes of a cubin's ``.nv.info`` sections: a kernel's parameter and its
#: ``__launch_bounds__`` threads (in its own section), a function's registers (in the shared one).
KPARAM_INFO, MAX_THREADS, REGCOUNT = 0x17, 0x05, 0x2F

#: Registers a block may hold on every architecture from sm_70 on, the unit a warp's are
#: allocated in, and the sub-partitions (schedulers) of an SM: what bounds a block's threads by
#: the function's registers per thread.
BLOCK_REGISTERS, WARP_REGISTER_UNIT, SUB_PARTITIONS = 65536, 256, 4


def _attributes(info: bytes):
    """(attribute, value bytes) of a ``.nv.info`` section: records of a format byte, an attribute
    byte and two more bytes (the value, or for format 4 the length of the value that follows)."""
    i = 0
    while i + 4 <= len(info):
        form, attribute = info[i], info[i + 1]
        if form != 4:  # no value, a byte or a 16-bit value: in the record's own four bytes
            yield attribute, info[i + 2:i + 4]
            i += 4
            continue
        length = struct.unpack_from("<H", info, i + 2)[0]
        yield attribute, info[i + 4:i + 4 + length]
        i += 4 + length


def _params(info: bytes) -> tuple[Param, ...]:
    """Each parameter's bytes and offset, by ordinal, from a kernel's ``.nv.info`` attributes: a
    parameter's are its index, ordinal, offset and a word whose top 14 bits are its size."""
    found = {}
    for attribute, value in _attributes(info):
        if attribute == KPARAM_INFO and len(value) >= 12:
            _, ordinal, offset, word = struct.unpack_from("<IHHI", value)
            found[ordinal] = Param((word >> 18) & 0x3FFF, offset=offset)
    return tuple(found[n] for n in sorted(found))


def _launch_bounds(info: bytes) -> int | None:
    """The threads a kernel's ``__launch_bounds__`` allows per block, None where it has none."""
    for attribute, value in _attributes(info):
        if attribute == MAX_THREADS and len(value) >= 12:
            return math.prod(struct.unpack_from("<III", value))
    return None


def register_threads(registers: int) -> int:
    """The most threads a block of a function with ``registers`` per thread holds: each warp's
    registers are allocated in units of 256, a block holds 64 Ki (128 registers: 512 threads),
    and the hardware checks a block's warps rounded up to a multiple of the SM's 4 sub-partitions
    (cuda_occupancy.h: 80 registers launch 768 threads, not 800)."""
    per_warp = -(-registers * 32 // WARP_REGISTER_UNIT) * WARP_REGISTER_UNIT
    warps = BLOCK_REGISTERS // per_warp // SUB_PARTITIONS * SUB_PARTITIONS if per_warp else 32
    return min(1024, warps * 32)


def cubin_kernels(path: Path) -> dict[str, FunctionResources]:
    """The ``__global__`` functions of a cubin by their (mangled, unless ``extern "C"``) names,
    with their static shared memory and parameters, read from its ELF sections without a device:
    a kernel has ``.text.<name>``, ``.nv.info.<name>`` and its parameters' constant bank
    ``.nv.constant0.<name>`` (a device function left uninlined has the first two);
    ``.nv.shared.<name>`` is its static shared memory (on sm_90 counting from the 1 KiB the
    system reserves, which is taken off)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        sizes = {s.name: s["sh_size"] for s in elf.iter_sections()}
        # a kernel's symbol is the low 24 bits of its code's sh_info: before sm_90 the top 8 hold its registers
        symbols = {s.name[len(".text."):]: s["sh_info"] & 0xFFFFFF for s in elf.iter_sections()
                   if s.name.startswith(".text.")}
        infos = {s.name[len(".nv.info."):]: s.data() for s in elf.iter_sections() if s.name.startswith(".nv.info.")}
        shared = elf.get_section_by_name(".nv.info")
        registers = dict(struct.unpack_from("<II", value) for attribute, value in
                         (_attributes(shared.data()) if shared is not None else ())
                         if attribute == REGCOUNT and len(value) >= 8)  # function symbol -> registers
    reserved = 1024 if any(n.startswith(".nv.shared.reserved") for n in sizes) else 0
    found = {}
    for name, info in infos.items():
        if f".text.{name}" not in sizes or f".nv.constant0.{name}" not in sizes:
            continue
        count, bounds = registers.get(symbols[name]), _launch_bounds(info)
        limits = [n for n in (bounds, register_threads(count) if count else None) if n]
        found[name] = FunctionResources(max(sizes.get(f".nv.shared.{name}", 0) - reserved, 0), count,
                                        min(limits) if limits else None, _params(info), bounds)
    return found


def compiled_kernels(cubin: Path) -> dict[str, FunctionResources]:
    """The cubin's kernels (:func:`cubin_kernels`), each with whether it uses ``extern __shared__``
    memory or syncs its grid, and its cluster dims, from the PTX nvcc made of it, kept beside it
    under its name (``k.ptx`` for ``k.cubin``; a cubin cached without one says none of them)."""
    ptx, source = cubin.with_suffix(".ptx"), cubin.with_suffix(".cu")
    text = ptx.read_text(encoding="utf-8", errors="replace") if ptx.exists() else ""  # nvcc's: ASCII
    users, clusters, syncing = extern_shared_users(text), cluster_dims(text), grid_sync_users(text)
    constants = unfilled_constants(text, source.read_text(encoding="utf-8") if source.exists() else "")
    return {name: replace(fn, extern_shared=name in users, cluster=clusters.get(name), grid_sync=name in syncing,
                          unfilled_constants=constants.get(name, ())) for name, fn in cubin_kernels(cubin).items()}


#: Why a kernel that syncs its whole grid is refused (compile-check fails it, a tune stops at it).
GRID_SYNC = ("the kernel syncs its whole grid (cg::this_grid().sync()), which only a cooperative launch allows, and "
             "tunebench launches each kernel as any other: split it into two kernels where it syncs the grid")


def entry_refusal(fn: FunctionResources) -> str | None:
    """Why an entry point fails every config alike, whatever its launch: it syncs its grid, or it
    reads constant memory that only the host could fill (None where neither)."""
    if fn.grid_sync:
        return GRID_SYNC
    if fn.unfilled_constants:
        constants, one = fn.unfilled_constants, len(fn.unfilled_constants) == 1
        each = "it" if one else "each"
        return (f"the kernel reads __constant__ {', '.join(map(str, constants))}, which no initialiser fills, and tunebench "
                f"copies nothing into constant memory (Kernel Tuner's cmem_args fill {'it' if one else 'them'} from the "
                f"host): every config would read zeros; pass {each} as an argument the args builder gives "
                f"({', '.join(c.parameter for c in constants)}), or give {each} its values in the template")
    return None


#: What may stand between ``__constant__`` and a declarator besides the type's words:
#: ``__align__(16)``, ``__attribute__((aligned(16)))``; no part of the type.
_ATTRIBUTE = re.compile(r"__align__\s*\(\s*\w+\s*\)|__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
#: A ``__constant__`` declaration without an initialiser, to its ``;``: its type, attributes and
#: declarators (a dimension may hold parentheses); never across another ``__constant__``.
_CONSTANT = re.compile(rf"__constant__((?:{_ATTRIBUTE.pattern}|\[[^\]]*\]|(?!__constant__)[^;={{}}()\[])*);")
#: One declarator of it: its pointer stars, name and dimensions.
_DECLARATOR = re.compile(r"(.*?)(\**)\s*\b(\w+)\s*((?:\[[^\]]*\]\s*)*)", re.S)
#: A namespace's opening brace (its name; none for an anonymous one), or another brace.
_SCOPE = re.compile(r"\bnamespace\s+((?:\w+\s*::\s*)*\w+)?\s*\{|[{}]")
#: Words of a declaration that are no part of its elements' type.
_STORAGE = {"__device__", "static", "extern", "const", "volatile"}


def _declared_constants(source: str) -> dict[tuple[str, ...], Constant]:
    """The ``__constant__`` variables ``source`` declares without an initialiser, by their
    namespaces and name (comments out: a comment naming ``__constant__`` is no declaration)."""
    code, declared = without_comments(source), {}
    scopes: list[tuple[str, ...]] = []  # per open brace: the namespaces it opens (none for another)
    braces = iter(_SCOPE.finditer(code))
    brace = next(braces, None)
    for found in _CONSTANT.finditer(code):
        while brace is not None and brace.start() < found.start():
            if brace[0] == "}":
                scopes = scopes[:-1]
            else:
                scopes.append(tuple(re.split(r"\s*::\s*", brace[1])) if brace[1] else ())
            brace = next(braces, None)
        line, file = source_line(code, found.start(), "the source")
        parts = re.split(r",(?![^\[<]*[\]>])", _ATTRIBUTE.sub(" ", found[1]))  # a comma in [] or <> splits none
        first = _DECLARATOR.fullmatch(parts[0])
        if first is None:
            continue
        ctype = " ".join(w for w in first[1].split() if w not in _STORAGE)
        later = [d for p in parts[1:] if (d := _DECLARATOR.fullmatch(p)) and not d[1].strip()]  # stars, name, dims
        for declarator in [first, *later]:
            name = (*(n for scope in scopes for n in scope), declarator[3])
            declared.setdefault(name, Constant(declarator[3], " ".join(filter(None, (ctype, declarator[2]))),
                                               re.sub(r"\s+", "", declarator[4]), f"{file} line {line}"))
    return declared


def _source_name(symbol: str) -> tuple[str, ...]:
    """A PTX symbol's namespaces and name, as a source declares them: nvcc's internal name of a
    static one's file, and an anonymous namespace, are no name the source writes."""
    parts = (qualified_name(symbol) or symbol).split("::")
    return tuple(p for p in parts if not p.startswith(("_INTERNAL", "_GLOBAL__N"))) or (symbol,)


def unfilled_constants(ptx: str, source: str) -> dict[str, tuple[Constant, ...]]:
    """The kernels (by symbol) whose code reads ``__constant__`` variables (arrays or scalars)
    declared without an initialiser, each with those: a host's ``cudaMemcpyToSymbol`` fills such
    a variable, and tunebench launches with the args builder's arguments alone. The PTX writes
    zeros (``= {0}``) as no initialiser too, so a variable counts only where the build's ``source``
    declares it without one (one the source does not show, from a header of the include folders,
    is not judged). The PTX names a variable in a namespace by its mangled symbol
    (``_ZN4conv7weightsE``): it is the source's of those namespaces and that name, and said as the
    source declares it, where its #line markers place it."""
    declared = _declared_constants(source)
    found = {a: declared[name] for a in re.findall(r"^\.const\b[^\n=;]*?(\w+)(?:\[\d*\])?\s*;", ptx, re.M)
             for name in [_source_name(a)] if name in declared}  # PTX symbol -> its declaration
    readers = {a: _reaching(ptx, [rf"\b{re.escape(a)}\b"]) for a in found}
    return {k: tuple(c for a, c in found.items() if k in readers[a]) for k in set().union(*readers.values())}


def extern_shared_users(ptx: str) -> set[str]:
    """The kernels (by symbol) whose code reaches an ``extern __shared__`` array, directly or
    through a device function: the PTX says it, where the cubin and the DWARF name the array at
    the module's level only. Such a kernel launched with no dynamic shared bytes reads and
    writes past the block's shared memory."""
    arrays = re.findall(r"^\.extern \.shared\b[^\n]*?(\w+)\[\]", ptx, re.M)
    return _reaching(ptx, [rf"\b{re.escape(a)}\b" for a in arrays]) if arrays else set()


def grid_sync_users(ptx: str) -> set[str]:
    """The kernels (by symbol) whose code reads the grid's sync workspace (``%envreg1``/``2``, what
    ``cg::this_grid()`` is made of): only a cooperative launch sets it, and tunebench launches
    none; launched as any other kernel, its ``grid.sync()`` fails on the GPU, every config alike."""
    return _reaching(ptx, [r"%envreg[12]\b"])


def _reaching(ptx: str, patterns: list[str]) -> set[str]:
    """The kernels (by symbol) whose code matches one of ``patterns``, directly or through a
    device function it calls."""
    parts = re.split(r"^(?:\.visible |\.weak )?\.(entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", ptx, flags=re.M)
    bodies = list(zip(parts[1::3], parts[2::3], parts[3::3]))

    def reaches(body: str, found: list[str]) -> bool:
        return any(re.search(p, body) for p in patterns) or any(re.search(rf"\b{re.escape(n)}\b", body) for n in found)

    functions: list[str] = []
    while True:  # through calls at any depth (a -G build inlines nothing: two levels went unseen)
        more = [name for kind, name, body in bodies
                if kind == "func" and name not in functions and reaches(body, functions)]
        if not more:
            break
        functions += more
    return {name for kind, name, body in bodies if kind == "entry" and reaches(body, functions)}


def cluster_dims(ptx: str) -> dict[str, tuple[int, ...]]:
    """The kernels (by symbol) declared with ``__cluster_dims__``, and those dims: a launch's grid
    must be a multiple of them, and a cluster beyond 8 blocks needs an opt-in tunebench does not
    make (both passed compile-check, and fail at launch)."""
    found = {}
    for name, directives in re.findall(r"^(?:\.visible |\.weak )?\.entry\s+(\w+)([^{]*)\{", ptx, flags=re.M):
        dims = re.search(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", directives)
        if dims:
            found[name] = tuple(int(d or 1) for d in dims.groups())
    return found


#: The most blocks a cluster holds without the non-portable opt-in.
PORTABLE_CLUSTER = 8


def qualified_name(symbol: str) -> str | None:
    """A C++ function's name with its namespaces (``ns::softmax``) from its Itanium-mangled
    symbol (``_ZN2ns7softmaxILi256EEvPfi``), template arguments and parameters left off; None
    for a name that is not mangled. A ``__global__`` function is never a class member, so a
    nested name is namespaces and the function."""
    found = re.match(r"_ZL?(N[rVKRO]*)?", symbol)
    if found is None:
        return None
    i, parts = found.end(), []
    while True:
        if symbol.startswith("St", i) and not parts:
            parts.append("std")
            i += 2
            continue
        digits = re.match(r"\d+", symbol[i:])
        if digits is None:
            break
        start = i + len(digits.group())
        i = start + int(digits.group())
        parts.append(symbol[start:i])
        if not found.group(1):
            break
    return "::".join(parts) or None


def entry_symbol(entry: str, kernels: Mapping[str, object], source: str) -> str:
    """The cubin function a variant's ``entry`` names (``kernels``: the cubin's, by symbol): an
    ``extern "C"`` one by its name, else the one instantiation of a ``__global__`` template (or
    C++ function) of that name, with or without its namespaces, whose mangled symbol changes with
    every config's template arguments. A KernelError names what the cubin has instead."""
    if entry in kernels:
        return entry
    named = {s: qualified_name(s) for s in kernels}
    found = [s for s, q in named.items() if q and (q == entry or q.endswith(f"::{entry}"))]
    if not found and "<" not in entry:  # ops::scale for ops::v2::scale: an inline or anonymous namespace between
        found = [s for s, q in named.items() if q and "<" not in q and _within(entry.split("::"), q.split("::"))]
    if len(found) == 1:
        return found[0]
    if found:
        listed = ", ".join(sorted(f"{named[s]} ({s})" for s in found))
        raise KernelError(f"{source} has {len(found)} __global__ functions named {entry!r}: {listed}; instantiate "
                          f"one per build (its template arguments from the params), or give the entry its mangled name")
    # by their names alone: the mangled ones differ per config, and one message is said once for all
    listed = ", ".join(sorted({named[s] or s for s in kernels})) or "none"
    # Kernel Tuner instantiates the template its entry names ("add<float>"); nvcc builds those the source names
    bare, hint = entry.split("<", 1)[0], ""
    if not kernels:
        hint = (f"; where {bare} is a __global__ template, it is built only where the source instantiates it, as "
                f"`template __global__ void {bare}<TB_DTYPE>(...);` after it")
    elif bare != entry and any(q and (q == bare or q.endswith(f"::{bare}")) for q in named.values()):
        hint = f"; name it without its template arguments, entry={bare!r}, which the build instantiates"
    raise KernelError(f"{source} has no __global__ {entry!r} (extern \"C\", or one instantiation of a template); "
                      f"its kernels: {listed}{hint}")


def _within(entry: list[str], parts: list[str]) -> bool:
    """Whether a qualified name's ``parts`` hold the entry's, in order, ending alike: the names
    between are namespaces C++ looks through (inline, as CUTLASS's versioned ones, or anonymous)."""
    rest = iter(parts)
    return entry[-1] == parts[-1] and all(part in rest for part in entry)


#: Why a launch that gives a kernel using ``extern __shared__`` memory none of it is refused.
EXTERN_SHARED = ("the kernel uses extern __shared__ memory, and the launch gives it 0 bytes: return (grid, block, "
                 "shared_bytes)")


def launch_problem(limits: Mapping, launch: Launch, fn: FunctionResources, where: str = "the device") -> str | None:
    """What a tune checks before measuring a launch, and compile-check without a device, alike: a
    KernelError (:data:`EXTERN_SHARED`) where the launch is at fault on any device, as a launch in
    another form is (it would read and write past the block's shared memory), else
    :func:`resource_problem`'s answer, the cluster's among it, which prunes a candidate."""
    if fn.extern_shared and not launch.shared:
        raise KernelError(EXTERN_SHARED)
    return resource_problem(limits, launch, fn, where)


def resource_problem(limits: Mapping, launch: Launch, fn: FunctionResources = FunctionResources(),
                     where: str = "the device") -> str | None:
    """Why ``where`` (its ``limits``: the device, or an architecture without one) or the compiled
    function cannot make this launch, if it cannot: checked before any measurement, so the
    candidate is recorded as ``pruned_resources``, not as crashed."""
    threads = math.prod(launch.block)
    if threads > limits["threads"]:  # first: the function's own bound is never above it
        return f"block of {threads} threads, {where} launches at most {limits['threads']}"
    if fn.launch_bounds is not None and threads > fn.launch_bounds:
        return f"block of {threads} threads, but the function's __launch_bounds__ allows at most {fn.launch_bounds}"
    if fn.max_threads_per_block is not None and threads > fn.max_threads_per_block:
        return (f"block of {threads} threads, but with {fn.registers} registers per thread the function "
                f"launches at most {fn.max_threads_per_block}")
    used = fn.static_shared + launch.shared
    if used > limits["shared"]:
        parts = f" ({fn.static_shared} static, {launch.shared} dynamic)" if fn.static_shared and launch.shared else ""
        return (f"{used} bytes ({used / 1024:g} KiB) of shared memory per block{parts}, {where} allows "
                f"{limits['shared']} ({limits['shared'] / 1024:g} KiB)")
    for what, dims, limit in (("block", launch.block, limits["block"]), ("grid", launch.grid, limits["grid"])):
        if any(d < 1 or d > lim for d, lim in zip(dims, limit)):
            return f"{what} {dims} is outside {where}'s limits {limit}"
    if fn.cluster is not None:
        if math.prod(fn.cluster) > PORTABLE_CLUSTER:
            return (f"a cluster of {math.prod(fn.cluster)} blocks ({fn.cluster}), beyond the portable "
                    f"{PORTABLE_CLUSTER}, which needs an opt-in tunebench does not make")
        if any(g % c for g, c in zip(launch.grid, fn.cluster)):
            return f"grid {launch.grid} is not a multiple of the function's cluster {fn.cluster}"
    return None
