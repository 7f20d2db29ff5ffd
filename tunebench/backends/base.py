"""The one small interface every target implements: build, load arguments, call, time, describe.

Everything above a backend (measurement, sessions, records, the plugin) is target-independent:
it sees :class:`Build` and :class:`Runner` objects and timings in milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import os
import re
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tunebench.dtypes import is_float
from tunebench.space import closest

if TYPE_CHECKING:  # the declarations a backend builds: a floor above, never imported at run time
    from tunebench.backends.cache import BuildCache
    from tunebench.kernel import Kernel, Variant


class KernelError(ValueError):
    """An invalid kernel declaration or argument builder; the message names the kernel. Raised
    by the declaration's own checks (:mod:`tunebench.kernel`) and by a backend that finds the
    entry point, launch or arguments wrong against what it built."""


class CompileError(RuntimeError):
    """The compiler rejected a candidate; ``str()`` is an excerpt of its message, ``cached``
    whether the compile cache served it (nothing compiled now), ``earlier`` whether it was cached
    before this run began (an earlier tune's verdict, which a message may call so: one this run
    compiled, for another task or on another device, or another job sharing the cache, is not)."""

    def __init__(self, message: str, cached: bool = False, earlier: bool = False):
        super().__init__(message)
        self.cached, self.earlier = cached, earlier


class BuildEnvironmentError(RuntimeError):
    """The machine, not the candidate, kept a build from being made: a compile cache that cannot
    be written, a temporary folder that is full. No verdict on any candidate: nothing is cached or
    recorded, and the task stops saying what to fix (every candidate was a lasting failure)."""


class ResourceError(RuntimeError):
    """A candidate that cannot launch on this device (too many threads, registers, shared memory)."""


@dataclass
class Build:
    """A compiled candidate: ``handle`` is backend-specific (a library path, a module)."""

    handle: Any
    compile_time_s: float
    cached: bool
    dtype: str | None = None  # the element type it was compiled for


class Runner(ABC):
    """One candidate loaded with one shape's arguments, ready to call; ``typed``: whether the
    arguments were checked against the entry point's C types (a float64 array for a ``float *``
    is then a declaration error, and no wrong result is the args builder's dtype)."""

    typed = False

    @abstractmethod
    def reset(self, pattern: int = 0) -> None:
        """Poison the outputs (with :data:`POISONS`' ``pattern``) and restore in-place inputs, so
        a stale result can never pass."""

    @abstractmethod
    def call(self) -> None:
        """One complete, synchronous call."""

    @abstractmethod
    def timed_call(self) -> float:
        """One call, timed by the backend's clock; milliseconds."""

    @abstractmethod
    def outputs(self) -> list[np.ndarray]:
        """The outputs as host arrays, in the order the kernel declares them."""

    @abstractmethod
    def overrun(self) -> str | None:
        """Where the last calls wrote outside their outputs, if they did: into the guard zones
        around them, or into an input not declared in place."""

    def close(self) -> None:  # noqa: B027 - most runners hold nothing to release
        """Release what :meth:`Backend.load` took."""


class Backend(ABC):
    """A target: ``cpu`` (gcc + ctypes) or ``cuda`` (PyCUDA)."""

    name: str
    cache: BuildCache  # the on-disk compile cache, which counts compiles and reuses
    #: The buffer placements a trial is measured under (see tunebench.backends.memory); a
    #: device allocator that always aligns alike has one.
    placements: tuple[str, ...] = ("device",)
    #: Whether compiling on the host leaves the device's measurements undisturbed (a GPU), or
    #: competes with them for the same cores (the CPU target).
    builds_beside_measurement = False

    @abstractmethod
    def fingerprint(self) -> dict:
        """What identifies the device: records are kept per fingerprint."""

    @abstractmethod
    def build(self, kernel: Kernel, variant: Variant, config: Mapping, dtype: str) -> Build:
        """Compile (or fetch from the compile cache); raises :class:`CompileError`."""

    def conditions(self) -> dict:
        """What the device was doing while it was measured (clocks, temperature, governor)."""
        return {}

    @abstractmethod
    def load(self, build: Build, kernel: Kernel, variant: Variant, config: Mapping, shape: tuple,
             args: Mapping[str, Any], placement: str, writable_inputs: bool = False) -> Runner:
        """Bind one shape's arguments, placed as ``placement`` says (one of :attr:`placements`);
        raises :class:`ResourceError` if it cannot launch. Inputs not declared in place are made
        read-only where the target can (the CPU: a write into one faults), else compared after a
        call (:meth:`Runner.overrun`), as with ``writable_inputs``: a fault names no input."""

    def drop_inputs(self) -> None:  # noqa: B027 - only a target that keeps inputs between loads has any
        """Free the copies of inputs kept for later loads (a GPU's device copies), once no later
        load can use them; each is freed as the last runner using it closes."""


#: The C type of each integer dtype, spelled alike for gcc and nvcc without a header.
INTEGER_CTYPES = {"int8": "signed char", "uint8": "unsigned char", "int16": "short", "uint16": "unsigned short",
                  "int32": "int", "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long"}

#: Bytes of guard zone before and after every output buffer, and the byte they are filled with.
GUARD_BYTES = 4096
GUARD_FILL = 0x5A


def guard_damage(name: str, before: np.ndarray, after: np.ndarray, what: str = "output") -> str | None:
    """A message naming the buffer (an output, or an in-place input) and how far from it a
    kernel wrote, if a guard changed."""
    hit_before = np.flatnonzero(before != GUARD_FILL)
    hit_after = np.flatnonzero(after != GUARD_FILL)
    if hit_after.size:
        return f"wrote past the end of {what} {name!r} (up to {int(hit_after[-1]) + 1} bytes beyond it)"
    if hit_before.size:
        return f"wrote before the start of {what} {name!r} (up to {len(before) - int(hit_before[0])} bytes)"
    return None


def same_bytes(a: np.ndarray, b: np.ndarray, chunk: int = 1 << 21) -> bool:
    """Whether two contiguous arrays of one size hold the same bytes, compared as 8-byte words
    where the size allows, a chunk at a time: byte by byte, a 512 MB input took 1.5 s to compare
    (after every verifying call of a GPU candidate) on a 2-core VM, as words 0.06 s."""
    width = next(w for w in (8, 4, 2, 1) if a.nbytes % w == 0)
    x, y = a.reshape(-1).view(np.uint8).view(f"u{width}"), b.reshape(-1).view(np.uint8).view(f"u{width}")
    return all(np.array_equal(x[i:i + chunk], y[i:i + chunk]) for i in range(0, x.size, chunk))


def input_damage(name: str, given: np.ndarray, now: np.ndarray) -> str | None:
    """A message naming the input a call changed and how much of it, if it changed one it was
    not declared to write: a target without read-only memory (a GPU) finds it by comparing."""
    if same_bytes(given, now):
        return None
    changed = np.count_nonzero(given.reshape(-1).view(np.uint8) != now.reshape(-1).view(np.uint8))
    return (f"wrote into input {name!r} ({changed} of {given.nbytes} bytes changed), which the kernel does not "
            f"declare inplace= (or inout=, for an output it also reads): declare it, or stop writing it")


#: The byte of each poison pattern: pattern 0 fills floats (complex ones too) with NaN and other
#: outputs with 0xA5 bytes; pattern 1 fills every output with 0x3C bytes (not the guards' 0x5A). Where the reference
#: itself is NaN, or is 0xA5's value, an element left unwritten passes pattern 0: pattern 1 tells.
POISONS = (0xA5, 0x3C)


def poison(array: np.ndarray, pattern: int = 0) -> None:
    """Fill an output with a value no correct kernel writes everywhere: NaN, or a bit pattern."""
    if pattern == 0 and (is_float(array.dtype) or array.dtype.kind == "c"):
        array.fill(np.nan)
    else:
        array.reshape(-1).view(np.uint8).fill(POISONS[pattern])  # a 0-d array has no bytes view


def poison_value(dtype: np.dtype, pattern: int = 0):
    """What an unwritten element of this dtype reads as under a poison pattern."""
    found = np.empty(1, dtype)
    poison(found, pattern)
    return found[0]


#: A template line where the params' ``#define`` lines go, where they must not open the template:
#: after the library headers whose own identifiers a param's name would replace (a param
#: ``BLOCK_THREADS`` defined ahead of ``#include <cub/cub.cuh>`` rewrites CUB's templates).
PARAMS_HERE = re.compile(r"^[ \t]*//[ \t]*tunebench:[ \t]*params[ \t]*(?:\n|\Z)", re.MULTILINE)
_LINE = re.compile(r'^#line (\d+) "([^"]*)"\n', re.MULTILINE)
#: Where a compiler's message places the params' ``#define`` lines (as gcc names ``-D`` flags
#: ``<command-line>``), not in the compile cache's copy of the source.
PARAMS_FILE = "<tunebench params>"


#: The pragma that unrolls a loop, per target: ``TB_UNROLL(n)`` before a loop unrolls it ``n``
#: times where ``n`` is a param (``#pragma unroll UNROLL`` would not expand the param's macro).
UNROLL_PRAGMA = {"cpu": "GCC unroll", "cuda": "unroll"}


def macros(config: Mapping, ctype: str, target: str = "cpu") -> dict[str, str]:
    """What a template is built with, as macro -> its value: the config's params, the dtype's C
    type as ``TB_DTYPE`` and ``TB_UNROLL(n)``; the same for a framework's own build
    (:meth:`tunebench.apply.Tuned.defines`)."""
    return {**{name: _c_value(value) for name, value in config.items()}, "TB_DTYPE": ctype,
            "TB_PRAGMA_(x)": "_Pragma(#x)", "TB_UNROLL(n)": f"TB_PRAGMA_({UNROLL_PRAGMA[target]} n)"}


def render(variant: Variant, config: Mapping, ctype: str, target: str = "cpu") -> str:
    """The template with the config's params and the dtype as ``#define`` lines (and
    ``TB_UNROLL``): at its ``// tunebench: params`` line, else ahead of it; ``#line`` keeps the
    compiler's messages on the template's own lines."""
    return _with_params(variant.template, variant.path.name, config, ctype, target)


def render_inputs(variant: Variant, config: Mapping, ctype: str) -> dict[str, str]:
    """Each source file the flags build with the template (see
    :attr:`~tunebench.kernel.Variant.input_sources`), by the path the flags give the compiler,
    rendered as the template is: a helper.c reading ``VEC`` or ``TB_DTYPE`` found neither."""
    return {str(path): _with_params(text, os.path.relpath(path, variant.path.parent), config, ctype)
            for path, text in variant.input_sources.items()}


def _with_params(text: str, name: str, config: Mapping, ctype: str, target: str = "cpu") -> str:
    """``text``, the file ``name``, with the defines placed (see :func:`render`)."""
    defines = f'#line 1 "{PARAMS_FILE}"\n' + "".join(
        f"#define {macro} {value}\n" for macro, value in macros(config, ctype, target).items())
    marker = params_line(text, name)
    if marker is None:
        return f"{defines}#line 1 \"{name}\"\n{text}"
    start, end, line, file = marker
    return f"#line 1 \"{name}\"\n{text[:start]}{defines}#line {line + 1} \"{file}\"\n{text[end:]}"


@functools.lru_cache(maxsize=64)
def params_line(text: str, name: str) -> tuple[int, int, int, str] | None:
    """Where ``text``, the file ``name``, has its ``// tunebench: params`` line: its start and end
    offsets, and the line and file a compiler names for it (an inlined header's lines are not the
    template's); None where it has none. Kept per text: a framework asks per launch
    (:meth:`~tunebench.apply.Tuned.source`, ``defines()``), and the search over the whole
    template was most of the time of each (an edited template is another text, searched anew)."""
    marker = PARAMS_HERE.search(text)
    if marker is None:
        return None
    return marker.start(), marker.end(), *source_line(text, marker.start(), name)


def source_line(text: str, offset: int, name: str) -> tuple[int, str]:
    """The line and file a compiler names for ``offset`` of an expanded source, by its last
    ``#line`` marker before it (``name``'s lines before any): where a message about the build
    points the user, in the template or a header it inlines."""
    last = None
    for last in _LINE.finditer(text, 0, offset):
        pass
    return ((int(last.group(1)) + text.count("\n", last.end(), offset), last.group(2)) if last
            else (text.count("\n", 0, offset) + 1, name))


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)[ \t]*(.*)$")
#: An ``#include "header"`` or ``#include <header>``: the header's name, quoted or bracketed.
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def without_comments(text: str) -> str:
    """``text`` with each comment blanked to its newlines (a space where it has none, as the
    compiler reads it): what is read of the code after, and the lines it counts, are the source's."""
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n") or " ", text)


def overridden(variant: Variant, params: Sequence[str]) -> str | None:
    """Where the template, or a header of its header folders that it includes (``-I``: left to the
    compiler, not inlined), #defines a param after tunebench's #define of it, outside a branch that
    only a missing param takes (``#ifndef P``, ``#if !defined(P)``, a branch after ``#ifdef P``)
    or ``#if 0``, or after an ``#undef`` of it: every config then builds the same code, and the
    tune measures noise; gcc only warns of it (None where none does)."""
    marker = PARAMS_HERE.search(variant.template)
    after = variant.template.count("\n", 0, marker.end()) if marker else 0  # lines before the params' defines
    frames: list[list[str]] = []  # per open #if: its branches' conditions so far, the current one last
    undone: set[str] = set()  # params #undef-ed after their #define
    for index, file, number, directive, rest in _directives(variant, headers=True):
        condition = _condition(rest)
        name = (re.match(r"\w+", rest) or [None])[0]
        if directive in ("if", "ifdef", "ifndef"):
            frames.append([{"if": condition, "ifdef": f"defined({condition})",
                            "ifndef": f"!defined({condition})"}[directive]])
        elif directive in ("elif", "else") and frames:
            frames[-1].append(condition if directive == "elif" else "")
        elif directive == "endif" and frames:
            frames.pop()
        elif directive == "undef" and index >= after and name in params:
            undone.add(name)
        elif directive == "define" and index >= after and name in params and (
                name in undone or not any(_only_without(frame, name) for frame in frames)):
            return (f"{file} line {number} #defines param {name!r} after tunebench's #define of it"
                    + (" and an #undef of it" if name in undone else "") + ", so every config builds the same "
                    f"code: put it under #ifndef {name} (a default the param overrides), or drop it")
    return None


def _directives(variant: Variant, headers: bool = False):
    """The template's preprocessor directives, comments out: (line index, the file and line the
    compiler names, directive, the rest of the line). ``headers``: with those of each header of
    its header folders that it includes, at the index of the include (see :func:`_header_directives`)."""
    code = without_comments(variant.template)  # the lines kept
    file, number, seen = variant.path.name, 0, set()
    for index, line in enumerate(code.split("\n")):
        number += 1
        mark = _LINE.match(line + "\n")
        if mark:
            file, number = mark.group(2), int(mark.group(1)) - 1
            continue
        found = _DIRECTIVE.match(line)
        if found:
            yield index, file, number, found.group(1), found.group(2)
            if headers and found.group(1) == "include":
                for directive in _header_directives(variant, variant.path.parent / file, found.group(2), seen):
                    yield index, *directive


def _header_directives(variant: Variant, at: Path, operand: str, seen: set[Path]):
    """The directives of the header an ``#include operand`` in the file ``at`` reads from one of
    the variant's header folders (a library's, left to the compiler), and of those it includes
    from them, each header once (as its guard would have it; ``seen``): (the file from the
    template's folder, line, directive, the rest of the line). None for a system header."""
    include = INCLUDE.match(f"#include {operand}")
    header = include and folder_header(at, include, variant.include_dirs)
    if not header or header.resolve() in seen:
        return
    seen.add(header.resolve())
    name = os.path.relpath(header, variant.path.parent)
    try:
        text = header.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise unreadable(e) from None
    code = without_comments(text)
    for number, line in enumerate(code.split("\n"), 1):
        found = _DIRECTIVE.match(line)
        if found:
            yield name, number, found.group(1), found.group(2)
            if found.group(1) == "include":
                yield from _header_directives(variant, header, found.group(2), seen)


def unreadable(error: OSError) -> KernelError:
    """What is said of a file a build reads (the template, a header, a file of its flags) that
    cannot be read (permission denied, a folder where a file is expected): its path and why,
    where the raw error was a traceback at collection naming no suite."""
    return KernelError(f"{error.filename}: cannot be read ({error.strerror}): tunebench reads every file a build "
                       f"reads, to hash it with the template")


def header_place(at: Path, include: re.Match, dirs: Sequence[Path], quoted: Sequence[Path] = ()) -> Path | None:
    """The folder the compiler finds the header of an include (:data:`INCLUDE`) in the file ``at``
    from: beside the file where it is quoted, then in ``quoted`` (the flags' -iquote folders,
    which gcc searches for a quoted include alone), else the first of ``dirs`` holding it; None
    where none does."""
    name = include.group(1) or include.group(2)
    places = ([at.parent, *quoted] if include.group(1) else []) + list(dirs)
    return next((d for d in places if (d / name).is_file()), None)


def folder_header(at: Path, include: re.Match, dirs: Sequence[Path], quoted: Sequence[Path] = ()) -> Path | None:
    """The header an include (:data:`INCLUDE`) in the file ``at`` names where one of the header
    folders ``dirs`` holds it, as the compiler finds it (a quoted one beside the file first,
    then in ``quoted``: see :func:`header_place`); None where none does (a system header).
    Resolved where it lies in a folder; a link placed in one (GNU stow's prefix on CPATH) to a
    file elsewhere is the link's path: the compiler reads it there, and its target was taken for
    no folder's header, never hashed. Only where that path is the file: the compiler follows a
    linked folder before a "../" of the name (stow's folded ``include/mylib``, its ``x.h``
    including "../detail/z.h", reads the target's sibling), which the path's text, without it,
    named another file or none ("cannot be read"). Else, a name leading out of the folder that
    holds it ("../common/x.h" beside a header of an -I folder), the file the compiler reads,
    resolved: taken for no folder's header, an edit of it was served the old one's trials."""
    place = header_place(at, include, dirs, quoted)
    if place is None:
        return None
    header = place / (include.group(1) or include.group(2))
    dirs = (*quoted, *dirs)
    if any(header.resolve().is_relative_to(d.resolve()) for d in dirs):
        return header.resolve()
    linked = Path(os.path.normpath(header))
    return linked if (any(linked.is_relative_to(os.path.normpath(d)) for d in dirs) and linked.is_file()
                      and os.path.samefile(linked, header)) else header.resolve()


def _condition(text: str) -> str:
    """A condition with ``defined(P)`` spelt so, without spaces."""
    return re.sub(r"\s+", "", re.sub(r"defined\s*\(?\s*(\w+)\s*\)?", r"defined(\1)", text))


def constant_suspects(variant: Variant, values: Mapping[str, tuple]) -> list[tuple[str, str]]:
    """Params whose values the template may not tell apart, so that every config would build the
    same code and the tune measure noise, unsaid by gcc, each with why: a bool param the template
    only tests for being defined (``#ifdef P``; tunebench #defines False as 0, which is defined),
    a param whose values are names the template never #defines, compared in #if (there each
    is 0), a param read nowhere where a name spelt nearly so is (``tile`` where the template
    reads ``TILE``, its own default). Suspects only: a header, the compiler or token pasting may
    define or read what this reading of the text cannot see, so the target's preprocessor
    confirms them (see :func:`constant_param`)."""
    code = without_comments(variant.template)
    directives = list(_directives(variant))
    found: list[tuple[str, str]] = []
    for param in sorted(n for n, vs in values.items() if set(vs) == {False, True} and all(isinstance(v, bool)
                                                                                       for v in vs)):
        tests = re.compile(rf"\bdefined\s*\(?\s*{param}\b|^[ \t]*#[ \t]*(?:ifn?def|define|undef)[ \t]+{param}\b",
                           re.MULTILINE)
        tested = [m for m in tests.finditer(code) if not re.match(r"\s*#\s*(?:define|undef)\b", m.group(0))]
        if tested and not re.search(rf"\b{param}\b", tests.sub("", code)):
            where = next((f"{file} line {number}" for _, file, number, directive, rest in directives
                          if re.search(rf"\bdefined\s*\(?\s*{param}\b", rest)
                          or (directive in ("ifdef", "ifndef") and rest.split()[:1] == [param])), variant.path.name)
            found.append((param, f"{where} tests whether bool param {param!r} is defined, which it always is (False "
                                 f"is #defined as 0): every config builds the same code; test its value, #if {param}"))
    named = {n: vs for n, vs in values.items() if len(vs) > 1 and all(isinstance(v, str) and v.isidentifier()
                                                                       for v in vs)}
    defined = _defined_in_directives(directives)
    for file, number, param in _compared_in_if(directives, set(named)):
        if param not in dict(found) and not set(named[param]) & defined:
            shown = ", ".join(f"#define {v} {i}" for i, v in enumerate(named[param]))
            found.append((param, f"{file} line {number} compares param {param!r} in #if, but none of its values "
                                 f"({', '.join(named[param])}) is a macro it #defines: in #if each is 0, so every "
                                 f"config builds the same code; #define them ({shown}) or give ints"))
    read = set(re.findall(r"\b[A-Za-z_]\w*\b", "\n".join((code, *map(without_comments, variant.file_texts.values())))))
    for param in sorted(n for n, vs in values.items() if len(vs) > 1 and n not in read and n not in dict(found)):
        meant = closest(param, sorted(read - set(values)), cutoff=0.8)  # misspelt: the template reads a near name
        if meant:
            found.append((param, f"param {param!r} is read nowhere in {variant.path.name} nor in the files its build "
                                 f"reads, which read {meant!r}: every config builds the same code; name the param "
                                 f"as the template reads it"))
    return found


def _defined_in_directives(directives: Iterable[tuple]) -> set[str]:
    """The names the directives (see :func:`_directives`) #define."""
    return {d for _, _, _, directive, rest in directives if directive == "define" for d in re.findall(r"^\w+", rest)}


def _compared_in_if(directives: Iterable[tuple], params: Collection[str]) -> list[tuple[str, int, str]]:
    """(file, line, param) of each of ``params`` that an ``#if`` or ``#elif`` reads as a value,
    not only tests for being defined."""
    found = []
    for _, file, number, directive, rest in directives:
        if directive in ("if", "elif"):
            words = set(re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"defined\(\w+\)", "", _condition(rest))))
            found += [(file, number, param) for param in sorted(words & set(params))]
    return found


def undefined_heuristic_values(variant: Variant, configs: Iterable[Mapping[str, Any]]) -> list[tuple[dict, str, str]]:
    """Where a heuristic config (of ``configs``) gives a param that the template compares in
    ``#if`` a name outside the space's values that neither its directives nor the build's -D flags
    #define: (the config, the value, what is said of it), each value once. Suspects alone: a header
    found through -I or -include, or the compiler's built-ins, may define it, which the target's
    preprocessor tells (see :meth:`tunebench.kernel.Kernel.check`). Undefined, in #if it is 0, so
    the baseline silently builds as whichever value is 0. The space's own values are
    :func:`constant_suspects`'s to judge."""
    values = variant.space.values
    directives = list(_directives(variant))
    defined = _defined_in_directives(directives) | {
        given.removeprefix("=").partition("=")[0] for given in option_values(variant.build_flags, "-D")}
    found: dict[str, tuple[dict, str, str]] = {}
    for config in configs:
        given = {n: v for n, v in config.items()
                 if isinstance(v, str) and v.isidentifier() and v not in values[n] and v not in defined}
        for file, number, param in _compared_in_if(directives, set(given)):
            value = given[param]
            found.setdefault(value, (dict(config), value, (
                f"the heuristic gives param {param!r} the value {value!r}, outside the space "
                f"({', '.join(map(str, values[param]))}), which {file} line {number} compares in #if, but no #define "
                f"gives {value!r}: in #if it is 0, so the baseline builds another config than it names; "
                f"#define {value} or give one of the space's values")))
    return list(found.values())


#: The most settings of the params a template's directives read that a suspect is preprocessed
#: under in every combination (see :func:`constant_settings`); beyond, each pair of their values.
COMBINATIONS = 64


def constant_settings(read: Collection[str], suspects: list[tuple[str, str]],
                      values: Mapping[str, Sequence]) -> dict[str, list[dict]]:
    """Per suspect, the settings of the other params it is preprocessed under (see
    :func:`constant_param`): all at their first values, each other param at each of its others
    (a param read only behind another's later value), then the params the directives name
    (``read``, see :func:`directive_names`), in every combination, or where there are more than
    :data:`COMBINATIONS`, each pair of their later values at least once (a suspect read only
    behind ``#if a == 2 && b == 2``, which no setting of one param at a time reaches). Params no
    directive names decide no #if, and stay at their first values there. They follow from
    ``read``, ``suspects`` and ``values``: a kept verdict is found by those, and these are
    worked out only to judge again (0.26 s for 4 params of 32 values, 0.46 s for 6)."""
    first = {n: vs[0] for n, vs in values.items()}
    found = {}
    for param, _ in suspects:
        settings = [first] + [{**first, n: v} for n, vs in values.items() if n != param for v in vs[1:]]
        deciding = [n for n, vs in values.items() if n != param and n in read and len(vs) > 1]
        if math.prod(len(values[n]) for n in deciding) <= COMBINATIONS:
            settings += [{**first, **dict(zip(deciding, c))} for c in itertools.product(*(values[n] for n in deciding))]
        else:
            settings += [{**first, **{deciding[i]: values[deciding[i]][v] for i, v in row.items()}}
                         for row in _pairs_covered([len(values[n]) for n in deciding])]
        found[param] = [s for i, s in enumerate(settings) if s not in settings[:i]]
    return found


def directive_names(variant: Variant) -> set[str]:
    """The names the preprocessor's directives hold, comments out, in the template (its local
    headers inlined) and in every file its build may read as well (a header of the include
    folders, one a computed include may read: :attr:`~tunebench.kernel.Variant.file_texts`)."""
    names = set()
    for text in (variant.template, *variant.file_texts.values()):
        for line in without_comments(text).split("\n"):
            found = _DIRECTIVE.match(line)
            names.update(re.findall(r"\b[A-Za-z_]\w*\b", found.group(2)) if found else ())
    return names


def _pairs_covered(counts: list[int]) -> list[dict[int, int]]:
    """Rows of value indices (param index -> value index, the others' first) in which each pair
    of later values of two of the params (their counts of values given) meets at least once,
    chosen greedily: some tens of rows where every combination would be thousands."""
    uncovered = dict.fromkeys(((i, x), (j, y)) for i, j in itertools.combinations(range(len(counts)), 2)
                              for x in range(1, counts[i]) for y in range(1, counts[j]))
    rows = []
    while uncovered:
        row = dict(next(iter(uncovered)))
        for k in range(len(counts)):
            if k not in row:  # the value meeting the most pairs not yet met with those chosen
                row[k] = max(range(counts[k]), key=lambda v: sum(tuple(sorted(((m, w), (k, v)))) in uncovered
                                                                 for m, w in row.items()))
        for pair in itertools.combinations(sorted(row.items()), 2):
            uncovered.pop(pair, None)
        rows.append(row)
    return rows


def constant_param(suspects: list[tuple[str, str]], values: Mapping[str, Sequence],
                   settings: Mapping[str, list[dict]], preprocessed: Callable[[dict], str | None]) -> str | None:
    """Why the first suspect (see :func:`constant_suspects`) is a param whose every value the
    target's preprocessor reads as the same code (``preprocessed``: a config's template as its
    build reads it, None where the preprocessor fails), under each of its ``settings`` of the
    other params (see :func:`constant_settings`); None where none is."""
    for param, why in suspects:
        if all(_one_code(preprocessed, [{**other, param: value} for value in values[param]])
               for other in settings[param]):
            return why
    return None


#: The environment variables that add folders to a compiler's include path (gcc's, clang's, and
#: nvcc's, whose host compiler preprocesses), by the language it reads the source as: a folder
#: list each, the first's searched as -I folders after the flags' (ahead of their -isystem ones),
#: the second's as -isystem folders after the flags' (``gcc -v -E`` lists the order). CPATH for
#: both, C_INCLUDE_PATH for C alone and CPLUS_INCLUDE_PATH for C++ alone (a .cu is C++ to nvcc): a
#: header of the other's folder is not read.
PATH_ENV = {"c": ("CPATH", "C_INCLUDE_PATH"), "c++": ("CPATH", "CPLUS_INCLUDE_PATH")}
#: The environment variables that add to a compiler's include path (nvcc's flags too): the same
#: header name found through another is another file.
INCLUDE_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")
#: A header whose folder is a toolchain's (libc's, CUDA's), not a user's: see :func:`own_include_dirs`.
TOOLCHAIN_HEADERS = ("stdlib.h", "cuda_runtime.h")


def own_include_dirs(lang: str, variables: Sequence[str] | None = None) -> tuple[Path, ...]:
    """The folders of a user's headers that the compiler searches of its own, with no flag naming
    them, reading a source of ``lang`` (``c`` or ``c++``): those its :data:`PATH_ENV` variables
    list (``variables`` of them, where given: each is searched at its own place), each resolved
    and once. A header the template includes from one is read where it
    lies, so it is hashed as a header of the flags' -I folders is (an edited one was another
    kernel served the old one's trials); such a folder is searched ahead of the compiler's own.
    Left out: /usr/local/include, which gcc searches after its own folder (its stdint.h, omp.h)
    and clang before it, so a stray header there would be hashed on that machine alone, perhaps
    never read (the shipped CUDA templates' stdint.h):
    its headers are the machine's, as /usr/include's are; a relative entry (an empty one too),
    which the compiler reads from the folder it runs in, the build's; one named in no UTF-8, which a template's text
    (UTF-8, as it is read) cannot name; a toolchain's folder put on the path (one holding a
    :data:`TOOLCHAIN_HEADERS` file: CPATH=/usr/local/cuda/include, as module systems set it),
    whose headers change with the compiler, which the records name apart, and would hash
    kilobytes of CUDA headers into every template on that machine alone; and one this user
    cannot search, which the compiler skips too (its PermissionError was a traceback out of
    ``best()``)."""
    listed = [entry for var in PATH_ENV[lang] if variables is None or var in variables
              for entry in os.environ.get(var, "").split(os.pathsep)]
    found: dict[Path, None] = {}
    for entry in listed:
        folder = Path(entry)
        try:
            if (folder.is_absolute() and _utf8(entry) and folder.is_dir()
                    and not any((folder / h).is_file() for h in TOOLCHAIN_HEADERS)):
                found[folder.resolve()] = None
        except OSError:  # a folder this user cannot search (EACCES)
            continue
    return tuple(found)


def _utf8(name: str) -> bool:
    """Whether a name read from the environment is UTF-8 text (not bytes of another encoding)."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


#: gcc's and clang's long spellings of the options the hash reads, by the short option each is,
#: with the shortest abbreviation of it gcc takes: written alone, its value the next flag (gcc 12
#: takes an unambiguous one so, ``--lang c++``, ``--imacro cfg.h``, ``--def K=1``; none joined,
#: ``--lang=c++`` it refuses, nor of ``--include``, which ``--include-directory`` makes ambiguous,
#: nor of ``--include-directory``, ``--include-dir`` it refuses; clang takes none).
#: Read as ``-x`` alone, a ``.c`` template under ``--lang c++`` was hashed with C_INCLUDE_PATH's
#: headers where gcc's cc1plus read CPLUS_INCLUDE_PATH's; ``--include-directory=inc`` was read as
#: no folder, so a header gcc found in it was unhashed.
LONG_OPTIONS = {"--language": ("-x", "--la"), "--include": ("-include", "--include"),
                "--imacros": ("-imacros", "--im"), "--define-macro": ("-D", "--def"),
                "--include-directory": ("-I", "--include-directory")}


def long_option(flag: str) -> tuple[str, str | None] | None:
    """The short option a flag spells long (see :data:`LONG_OPTIONS`) and the value it joins with
    ``=``, None where written alone (its value the next flag): ``("-include", "cfg.h")`` for
    ``--include=cfg.h``, ``("-x", None)`` for ``--lang``; None for any other flag."""
    name, equals, value = flag.partition("=")
    for spelled, (short, shortest) in LONG_OPTIONS.items():
        if name == spelled and equals:
            return short, value
        if not equals and flag.startswith(shortest) and spelled.startswith(flag):
            return short, None
    return None


def option_values(flags: Sequence[str], short: str) -> list[str]:
    """The values the flags give an option of :data:`LONG_OPTIONS` (``-x``, ``-D``), in order,
    however gcc and clang spell it: ``-x c++``, ``-xc++``, ``--language c++``,
    ``--language=c++``, ``--lang c++`` (see :func:`long_option`)."""
    found = []
    for before, flag in zip(("", *flags), flags):
        long = long_option(flag)
        if before == short or long_option(before) == (short, None):
            found.append(flag)
        elif flag.startswith(short) and flag != short:
            found.append(flag[len(short):])
        elif long and long[0] == short and long[1] is not None:
            found.append(long[1])
    return found


#: A line of the compiler's -H list on stderr: a dot per level of inclusion, then the header read.
_HEADER_READ = re.compile(r"^\.+ (.+)$", re.MULTILINE)


def preprocess(command: list[str], text: str, cwd: Path | None, tmp: str | None = None,
               headers: dict[str, str | None] | None = None) -> str | None:
    """What a preprocessor's ``command`` (reading the source from its stdin, run in ``cwd``, with
    ``tmp`` its TMPDIR where given) makes of ``text``; None where it fails or is not there: it
    judges nothing then. ``headers``, where given, gets each header the run read (listed by the
    compiler's -H, in ``command``) with :func:`header_hashes`': one found on the compiler's own
    include path (CPATH, /usr/local/include, CUDA's include folder) is in no text tunebench reads.
    Its output is read as file names are (a header's folder may be named in no UTF-8)."""
    try:
        done = subprocess.run(command, input=text, capture_output=True, text=True, errors="surrogateescape", cwd=cwd,
                              env=None if tmp is None else {**os.environ, "TMPDIR": tmp})
    except OSError:
        return None
    if done.returncode != 0:
        return None
    if headers is not None:
        headers.update(header_hashes(str(Path(cwd or Path.cwd(), n)) for n in _HEADER_READ.findall(done.stderr)))
    return done.stdout


def header_hashes(paths: Iterable[str]) -> dict[str, str | None]:
    """Each file's path with a hash of its bytes, None where it cannot be read (gone since)."""
    found: dict[str, str | None] = {}
    for path in paths:
        try:
            found[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
        except OSError:
            found[path] = None
    return found


def _one_code(preprocessed: Callable[[dict], str | None], configs: list[dict]) -> bool:
    """Whether the configs' templates preprocess to one text; False where the preprocessor fails."""
    texts = set()
    for config in configs:
        text = preprocessed(config)
        if text is None:
            return False
        texts.add(text)
        if len(texts) > 1:
            return False
    return True


def _only_without(branches: list[str], param: str) -> bool:
    """Whether the current branch of an #if (its conditions, spaces out, ``defined(P)`` spelt so,
    the current last) is taken only where ``param`` is not #defined, or never: ``0``, one that
    reads ``!defined(P)`` (not negated whole: a refusal on a condition it cannot judge would stop
    a valid suite), or one after a branch of ``defined(P)``."""
    current = _bare(branches[-1]) if branches[-1] != "" else None
    if current == "0" or (current and f"!defined({param})" in current and not current.startswith("!(")):
        return True
    return f"defined({param})" in (_bare(b) for b in branches[:-1])


def _bare(condition: str) -> str:
    """A condition without the parentheses around the whole of it: ``(0)`` is ``0``."""
    while condition.startswith("(") and condition.endswith(")"):
        depth = 0
        for i, c in enumerate(condition):
            depth += (c == "(") - (c == ")")
            if depth == 0 and i < len(condition) - 1:
                return condition  # (a)&&(b): the first closes before the end
        condition = condition[1:-1]
    return condition


#: ``#include IMPL``: a header only the preprocessor can name (a param, a macro); not ``#include_next``.
COMPUTED_INCLUDE = re.compile(r"^\s*#\s*include\s+([A-Za-z_]\w*)")
#: What the preprocessor (gcc's, nvcc's) says of an ``#include`` whose macro names no "FILENAME" or <FILENAME>.
_BARE_INCLUDE = re.compile(r'#include expects "FILENAME" or <FILENAME>')


#: A value that can only be a file's name (``impl.h``, ``impls/a.cuh``), which no macro's can be.
_FILE_NAME = re.compile(r"[\w+-]*[./][\w./+-]*")


def _included(variant: Variant) -> dict[str, str]:
    """The names the computed includes (``#include IMPL``) read, each with where it is first read
    (file and line): the template's, and those of the headers of its header folders that it
    includes (``-I``: the compiler's to read, not inlined, yet a bare value fails there alike)."""
    found: dict[str, str] = {}
    for _, file, number, directive, rest in _directives(variant, headers=True):
        computed = COMPUTED_INCLUDE.match(f"#include {rest}") if directive == "include" else None
        if computed:
            found.setdefault(computed.group(1), f"{file} line {number}")
    return found


def _quote(param: str, value: str, where: str) -> str:
    """How to give a header's name that ``#include param``, at ``where``, reads bare."""
    quoted, bracketed = f'"{value}"', f"<{value}>"
    return (f"param {param!r} is {value}, which #include {param} at {where} reads bare: quote the header's name in "
            f"its value, {quoted!r} (or {bracketed!r} for a header of the include path)")


def _bare_includes(variant: Variant, config: Mapping, error: str) -> list[str]:
    """Where the preprocessor refused an ``#include P`` of a param: each such param whose value
    names its header bare (``"impl.cuh"`` in Python is ``impl.cuh`` to it), with how to quote it."""
    if not _BARE_INCLUDE.search(error):
        return []
    included = _included(variant)
    return [_quote(p, v, included[p]) for p, v in config.items()
            if p in included and isinstance(v, str) and not v.startswith(('"', "<"))]


def bare_include(variant: Variant, values: Mapping[str, Sequence]) -> str | None:
    """Where a param that an ``#include P`` of the template, or of a header of its header folders,
    reads has a value naming a file bare (``"impl.h"`` in Python is ``impl.h`` to the
    preprocessor, which refuses it in every config that has it), told before any build; a value
    that is an identifier may be a macro naming a header, and is left to the compiler (and the
    hint of :func:`_bare_includes`)."""
    included = _included(variant)
    return next((_quote(p, v, included[p]) for p in sorted(set(included) & set(values)) for v in values[p]
                 if isinstance(v, str) and _FILE_NAME.fullmatch(v)), None)


#: What compilers say where a name was rewritten into a number or a type by a #define (gcc,
#: g++, nvcc): only these errors get a hint that a param's name may be at fault.
RENAMED = re.compile(r"expected (?:an )?identifier|expected unqualified-id|before numeric constant|"
                     r"expected a \"[,;)>]\"|expected declaration specifiers|"
                     # a param named as a function or a struct read as one: max(a, b), blockDim.x
                     r"apparent call must have|called object is not a function|must have class type|"
                     r"in something not a structure or union")
#: A pragma whose argument the preprocessor leaves as it is: a param's name there is no number.
_UNROLL_BY_NAME = re.compile(r"\s*#\s*pragma\s+(?:GCC\s+)?unroll\s+(\w+)")
#: The params Kernel Tuner takes a block's threads along x, y and z from, and each one's value
#: where the space has no such param: it #defines them in every build, tunebench the space's alone.
BLOCK_SIZE_NAMES = {"block_size_x": 256, "block_size_y": 1, "block_size_z": 1}
#: A name the compiler does not know (nvcc, gcc and g++, clang say so thus).
_UNDEFINED = re.compile(r"identifier \"(\w+)\" is undefined|[‘'](\w+)[’'] (?:undeclared|was not declared)"
                        r"|undeclared identifier [‘'](\w+)[’']")


def explain(variant: Variant, config: Mapping, error: str, gpu: bool = False) -> str:
    """A compiler's error, with why a param may be at fault where the error is one a rewritten
    name gives (:data:`RENAMED`): a line of the template it names that reads a param's name;
    else, where the error lies outside the template's own lines and the template includes
    headers ahead of its params, that the defines may have rewritten the header (``//
    tunebench: params`` puts them after it: a header of the kernel's own, ``template <int TILE>``,
    is named so, not only by gcc's note of the macro's expansion); else a param's #define it says
    was expanded. Any error gets the hints of :func:`_bare_includes` and of a ``#pragma unroll`` of
    a param. ``gpu``: the build is the CUDA target's (a grid is the launch's there)."""
    name, hints = variant.path.name, []
    noted = _bare_includes(variant, config, error)  # hints whatever the error: a bare #include's, a #pragma's
    noted += _expanded_at(error, name)
    lines = template_lines(variant)
    for number in map(int, re.findall(rf"{re.escape(name)}(?::|\()(\d+)", error)):
        pragma = _UNROLL_BY_NAME.match(lines[number - 1]) if 0 < number <= len(lines) else None
        if pragma and pragma.group(1) in config:  # nvcc: identifier "ITEMS" is undefined
            noted.append(f"line {number}: #pragma unroll does not expand param {pragma.group(1)!r}: write "
                         f"TB_UNROLL({pragma.group(1)}) before the loop instead")
    for undefined in dict.fromkeys(n for names in _UNDEFINED.findall(error) for n in names if n and n not in config):
        noted += _kernel_tuner_define(undefined, gpu)
    if not RENAMED.search(error):
        return error + "".join(f"\n(tunebench: {h})" for h in dict.fromkeys(noted))
    for found in re.finditer(rf"{re.escape(name)}(?::|\()(\d+)", error):
        number = int(found.group(1))
        line = lines[number - 1] if 0 < number <= len(lines) else ""
        hints += [f"param {p!r} is #defined ahead of line {number}, which reads {p!r} as a name: rename one"
                  for p in config if re.search(rf"\b{re.escape(p)}\b", line) and not line.lstrip().startswith("#")]
    outside = [f for f in re.findall(rf"^({re.escape(PARAMS_FILE)}|\S+?)(?::|\()\d+", error, re.MULTILINE)
               if not f.endswith(name)]  # a header, or a #define read where the header wanted a name
    marker = PARAMS_HERE.search(variant.template)
    after = variant.template[marker.end():] if marker else variant.template  # what the defines come before
    inlined = re.search(r'^#line 1 "', after, re.MULTILINE)  # a header beside it, inlined after the defines
    if not hints and outside and (re.search(r"#\s*include\s*<", after) or inlined):
        named = {}  # param -> the first header line that reads it
        for header, number, line in _header_lines(error, variant.path.parent):
            for p in config:
                if p not in named and re.search(rf"\b{re.escape(p)}\b", line):
                    named[p] = f"param {p!r} is #defined ahead of {header}, whose line {number} reads {p!r} as a name"
        params = list(config)  # their #define lines, in this order, open the defines (see render)
        for number in map(int, re.findall(rf"^{re.escape(PARAMS_FILE)}(?::|\()(\d+)", error, re.MULTILINE)):
            p = params[number - 1] if 0 < number <= len(params) else None
            if p is not None and p not in named:  # gcc places an error in a system header at the #define
                named[p] = f"param {p!r} is #defined ahead of an included header, which reads {p!r} as a name"
        hints += [f"{h}: rename it" for h in named.values()]
        hints.append("the error lies outside the template's own lines: a param's #define ahead of an included "
                     "header may rewrite its identifiers; a line `// tunebench: params` after the includes puts "
                     "the defines there" + (" (this template's comes before one)" if marker else ""))
    hints += [f"param {p!r} is #defined, and the error is where its name is read: rename it" for p in config
              if re.search(rf"in expansion of macro .{re.escape(p)}.", error) and not hints]
    return error + "".join(f"\n(tunebench: {h})" for h in dict.fromkeys(noted + hints))


def template_lines(variant: Variant) -> list[str]:
    """The template's own lines (its recorded text where it has one), which a compiler's error
    numbers as the template's; none where the file cannot be read."""
    try:
        return variant.path.read_text(encoding="utf-8", errors="replace").splitlines() if variant.text is None else variant.text.splitlines()
    except OSError:
        return []


def _expanded_at(error: str, name: str) -> list[str]:
    """The template's line behind each gcc error it places at a ``#define`` of the params (a ``;``
    missing before ``TB_UNROLL(n)`` is "<tunebench params>:4:23: error: expected ';' before
    '#pragma'"), read from gcc's "in expansion of macro" notes under it: the line named first is
    not one the user wrote. Only the notes right under the error are its own (the compile cache's
    excerpt drops warnings, whose notes then follow it too). The first three: the rest are most
    likely the first's consequences."""
    hints = []
    expansion = re.compile(r"^\S[^:\n]*:\d+:\d+: note: in expansion of macro .(\w+).")
    lines = error.splitlines()
    for i, text in enumerate(lines):
        head = re.match(rf"{re.escape(PARAMS_FILE)}:(\d+):\d+: (?:fatal )?error: ", text)
        if not head:
            continue
        site = None  # the last note of the run under it is the outermost expansion: the template's own line
        for note in lines[i + 1:]:
            if note[:1].isspace():  # gcc's quote of a line and its caret
                continue
            if not expansion.match(note):
                break
            at = re.match(rf"{re.escape(name)}:(\d+):\d+: ", note)
            site = (at.group(1), expansion.match(note).group(1)) if at else site
        if site:
            hints.append(f"the error at {PARAMS_FILE}:{head.group(1)} (the #define lines tunebench writes for the "
                         f"params, TB_DTYPE and TB_UNROLL) is in {name} line {site[0]}, where it expands {site[1]}")
    return hints[:3]


def _kernel_tuner_define(name: str, gpu: bool) -> list[str]:
    """Why a Kernel Tuner template's ``block_size_y`` or ``grid_size_x`` is undefined here (Kernel
    Tuner #defines them in every build, tunebench the space's params alone), and what to write: a
    C template on the CPU has no gridDim to read."""
    axis = name[-1]
    if name in BLOCK_SIZE_NAMES:
        value = BLOCK_SIZE_NAMES[name]
        return [f"{name!r} is #defined by Kernel Tuner in every build ({value} where not tuned), by tunebench only "
                f"as a param: add {name}: [{value}] to the space, or a default to the template (#ifndef {name} / "
                f"#define {name} {value} / #endif)"]
    if name in {f"grid_size_{a}" for a in "xyz"}:
        return [f"{name!r} is #defined by Kernel Tuner in every build (the launch's grid), not by tunebench: "
                + (f"read gridDim.{axis} instead" if gpu else f"add {name} to the space, or a default to the "
                   f"template (#ifndef {name} / #define {name} 1 / #endif)")]
    return []


def _header_lines(error: str, folder: Path) -> list[tuple[str, int, str]]:
    """(header, line number, its text) of each line a compiler's error places in a header, as gcc
    (``/usr/include/stdlib.h:123:5:``) and nvcc (``.../util_arch.cuh(146):``) name them: by its
    absolute path, or, inlined, by its path from the template's ``folder`` (nvcc quotes the line
    as expanded, ``template <int 64>``, and names no macro: the file's own line shows the param)."""
    found = []
    for path, number in dict.fromkeys(re.findall(r"^([^:(\s]+)(?::|\()(\d+)", error, re.MULTILINE)):
        try:
            lines = (folder / path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        if 0 < int(number) <= len(lines):
            found.append((Path(path).name, int(number), lines[int(number) - 1]))
    return found


def _c_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def not_contiguous(args: Mapping[str, Any]) -> str | None:
    """An array argument not laid out in C order, which no target passes as given: the CPU's
    pointer would walk it wrong, and a CUDA copy re-lays it in C order, where a column-major
    kernel reads it transposed (every config a wrong result, with no word on why)."""
    for name, value in args.items():
        if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
            return f"array {name!r} is not C-contiguous: build it with np.ascontiguousarray(...)"
    return None
