"""The CPU target: C (or C++) templates compiled by gcc into shared libraries, called through ctypes.

Each variant is its own uniquely named library (see the compile cache); arguments are passed as
raw pointers and as the C types their numpy scalar dtypes name, after a check against the entry
point's parameters as the library's DWARF lists them (a build is ``-g``: the code is the same,
see :mod:`tunebench.backends.params`). Timing is a monotonic ns clock
around one call. The OpenMP thread count is fixed before any kernel library loads and is part of
the device fingerprint.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tunebench.backends.base import (
    GUARD_BYTES,
    GUARD_FILL,
    INTEGER_CTYPES,
    Backend,
    Build,
    BuildEnvironmentError,
    CompileError,
    KernelError,
    Runner,
    explain,
    guard_damage,
    input_damage,
    not_contiguous,
    option_values,
    poison,
    preprocess,
    render,
    render_inputs,
    template_lines,
)
from tunebench.backends.cache import BuildCache, cache_key, run_compiler
from tunebench.backends.cpuinfo import identify, thread_count
from tunebench.backends.memory import PLACEMENTS, placed
from tunebench.backends.params import Param, args_problem, library_functions

if TYPE_CHECKING:  # the declarations it builds: a floor above, never imported at run time
    from tunebench.kernel import Kernel, Variant

CC = os.environ.get("TUNEBENCH_CC", "gcc")
CXX = os.environ.get("TUNEBENCH_CXX", "g++")
#: Templates with these suffixes are C++ (templates, the standard library), compiled by ``CXX``;
#: any other template is C, compiled by ``CC``.
CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx")
#: ``-z defs``: a symbol the library needs and nothing linked defines (a helper declared and
#: never written, in one config's branch) is the linker's error, naming it, rather than
#: dlopen's at load, which is no build's status.
FLAGS = ("-O3", "-g", "-march=native", "-fopenmp", "-fPIC", "-shared", "-Wl,-z,defs")
STANDARD = {"c": "-std=gnu11", "c++": "-std=gnu++17"}
#: The dtypes no C compiler has a type for (8-bit floats): a template reads them as their bits.
BITS_ONLY = ("float8_e4m3fn", "float8_e5m2")
#: _Float16 from gcc 12; __bf16 only from gcc 13 and clang 17 (see :func:`dtype_problem`); the
#: complex dtypes as C has them (a C++ template's: :data:`CXX_CTYPES`).
CTYPES = {"float32": "float", "float64": "double", "float16": "_Float16", "bfloat16": "__bf16",
          "complex64": "float _Complex", "complex128": "double _Complex", **INTEGER_CTYPES,
          **dict.fromkeys(BITS_ONLY, "unsigned char")}
#: A C++ template's complex dtypes: ``std::complex``, which a C++ kernel's author computes with
#: (``std::conj``, ``std::abs``, ``.real()`` take it; g++ accepts C's ``float _Complex`` too, but
#: no function of the standard library does). It takes no ``2 * z`` (an int), only ``2.0f * z``,
#: as any std::complex code has it; the ABI passes both alike (see :class:`_Complex`).
CXX_CTYPES = {"complex64": "std::complex<float>", "complex128": "std::complex<double>"}
#: The header that declares each of :data:`CXX_CTYPES`, included ahead of the template (where no
#: param's #define can rewrite it): a template naming only TB_DTYPE needs no include of its own.
CXX_HEADERS = dict.fromkeys(CXX_CTYPES, "complex")
#: The dtypes whose C type only some compilers can compute in, each with a use that needs it: its
#: arithmetic, and the conversions to it from a float and from a double (a literal: ``x * 0.1``),
#: each a call into the runtime library where -march has no instruction for it (a double's even
#: with AVX512-BF16, whose instructions convert floats), which :func:`linking` must find defined.
ARITHMETIC = {"bfloat16": "__bf16 tb_probe(__bf16 a, float b, double c)\n"
                          "{ return (__bf16)(a * (__bf16)b + a) + (__bf16)c; }\n"}
#: What a build adds where the runtime library the compiler links by default lacks a dtype's
#: conversions, which it calls where -march has no instructions for them: clang on Debian links
#: gcc 12's libgcc, without ``__truncsfbf2`` and ``__truncdfbf2``; compiler-rt's builtins have them.
COMPILER_RT = ("--rtlib=compiler-rt",)
#: C++'s linkage declaration, which C has no such syntax for (see :func:`cxx_in_c`).
_EXTERN_C = re.compile(r'\bextern\s+"C"')


class _Complex(ctypes.Structure):
    """A complex scalar passed by value: ctypes has no complex type, and the x86-64 ABI passes
    ``float _Complex`` and ``double _Complex`` (and C++'s ``std::complex``, a class of one) as it
    passes a struct of the real and the imaginary part, in the same registers (gcc's code for the
    two is the same); built from the Python complex a numpy one gives."""

    def __init__(self, value: complex):
        super().__init__(value.real, value.imag)


class ComplexFloat(_Complex):
    _fields_ = [("real", ctypes.c_float), ("imag", ctypes.c_float)]


class ComplexDouble(_Complex):
    _fields_ = [("real", ctypes.c_double), ("imag", ctypes.c_double)]


SCALARS = {
    np.dtype(np.int8): ctypes.c_int8, np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint8): ctypes.c_uint8, np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.bool_): ctypes.c_bool,  # a C99 bool flag, as a foreign signature has it
    np.dtype(np.complex64): ComplexFloat, np.dtype(np.complex128): ComplexDouble,
}


def language(variant: Variant) -> str:
    """``c++`` for a template named like a C++ file, else ``c``: the build's compiler, C types and
    suffix, and the compiler a trial keeps, whatever its flags (see :func:`read_as`)."""
    return "c++" if Path(variant.source).suffix in CXX_SUFFIXES else "c"


def read_as(variant: Variant) -> str:
    """What the compiler reads the template as, ``c`` or ``c++``: the last ``-x c`` or ``-x c++``
    of the flags ahead of it, however spelled (:func:`flags_language`), else :func:`language`. gcc
    given ``("-x", "c++")`` for a ``.c`` template runs cc1plus, which searches CPLUS_INCLUDE_PATH,
    not C_INCLUDE_PATH, and takes C++'s standard (see :func:`standard`); its build is otherwise
    still C's (gcc, C's complex types), as the records of its tunes name it."""
    return flags_language(variant.flags) or language(variant)


def flags_language(flags: tuple[str, ...]) -> str | None:
    """The language the last ``-x c`` or ``-x c++`` of the flags ahead of the source names, None
    where none does (or ``-x none`` follows it: the source's name decides). Each spelling gcc and
    clang take counts alike: ``-x c++``, ``-xc++``, ``--language c++``, ``--language=c++`` (the
    long ones were C's, built with -std=gnu11 and without the C++ standard library), and gcc's
    abbreviations, ``--lang c++`` (see :func:`~tunebench.backends.base.option_values`)."""
    given = None
    for named in option_values(libraries_last(flags)[0], "-x"):
        given = named if named in ("c", "c++") else None if named == "none" else given
    return given


def standard(flags: tuple[str, ...], lang: str) -> str:
    """The ``-std`` of a build of a ``lang`` template with ``flags``: the standard of the language
    the compiler reads it as (:func:`flags_language`), not of its name. C's given to a ``.c`` read
    as C++ (``-x c++``) was ignored by gcc with a warning (an error under ``-Werror``) and refused
    by clang ("not allowed with 'C++'"); C++'s, -std=gnu++17, is the one gcc >= 11 read it in
    without it: the same code, so its recorded trials stand (the declaration and the compiler they
    keep name no standard), while its builds' cache key, which does, has it built once again."""
    return STANDARD[flags_language(flags) or lang]


def compiler(lang: str) -> str:
    return CXX if lang == "c++" else CC


def ctype(dtype: str, lang: str) -> tuple[str, str | None]:
    """TB_DTYPE's type for a dtype in a template of ``lang``, and the header that declares it
    (None where the language has the type itself)."""
    if lang == "c++" and dtype in CXX_CTYPES:
        return CXX_CTYPES[dtype], CXX_HEADERS[dtype]
    return CTYPES[dtype], None


def _declared(text: str, header: str | None) -> str:
    """``text`` after the ``#include`` of ``header``, where there is one."""
    return f"#include <{header}>\n{text}" if header else text


def source(variant: Variant, config: Mapping, dtype: str) -> str:
    """What the compiler builds for a config and dtype: the rendered template, after the header
    that declares TB_DTYPE's type where it needs one (a C++ complex)."""
    name, header = ctype(dtype, language(variant))
    return _declared(render(variant, config, name), header)


def source_inputs(variant: Variant, config: Mapping, dtype: str) -> dict[str, str]:
    """The source files built with the template (see :func:`render_inputs`), each as
    :func:`source` gives the template: a helper reading TB_DTYPE declares it alike."""
    name, header = ctype(dtype, language(variant))
    return {path: _declared(text, header) for path, text in render_inputs(variant, config, name).items()}


def code_flags(variant: Variant, dtypes: Iterable[str] = ()) -> list[str]:
    """The flags of a build that decide its code (:func:`compile_flags`): what a framework
    building the template itself passes for the code tunebench measured; where a build in one of
    ``dtypes`` links the conversions the compiler calls from a runtime it does not link by
    default, that runtime's flag too, once (:func:`runtime_flags`), and where gcc reads a C
    template as C++, the C++ standard library (:func:`cxx_library`): link flags (a ``-c`` compile
    ignores them, clang with a warning), without which the framework's library is left needing a
    symbol nothing defines, and fails to link or to load; they change no code, so a build in
    another dtype given them links as it did."""
    runtime = dict.fromkeys(f for dtype in dtypes for f in runtime_flags(variant, dtype))
    return [*compile_flags(variant), *runtime, *(CXX_LIBRARY_ANYWHERE if cxx_library(variant) else ())]


def compile_flags(variant: Variant) -> list[str]:
    """The flags of a build that decide its code, not its form as a library nor what it links:
    those the preprocessor reads it with (:func:`preprocessing`)."""
    return [f for f in FLAGS if f not in ("-g", "-fPIC", "-shared", "-Wl,-z,defs")] + [
        standard(variant.flags, language(variant)), *copy_flags(variant)]


#: :func:`cxx_library` as a framework's build links it wherever it puts :func:`code_flags`: a plain
#: ``-lstdc++`` ahead of the source was dropped under ``--as-needed`` (Debian's and Ubuntu's gcc
#: pass it), which keeps a library only where the files before it need it, and the framework's
#: library failed to load ("undefined symbol: _Znwm", operator new).
CXX_LIBRARY_ANYWHERE = ("-Wl,--push-state,--no-as-needed,-lstdc++,--pop-state",)


def preprocessing(variant: Variant, config: Mapping) -> tuple[str, list[str], str] | None:
    """How a build reads a config's template, to tell whether a param's values make another code
    (see :func:`~tunebench.backends.base.constant_param`): the compiler's path and version (the
    verdict is kept under them), the command (gcc -E, the variant's flags, from its folder, -H to
    list the headers it reads: see :func:`~tunebench.backends.base.preprocess`; as the language
    the compiler reads it as, a ``.c`` under ``-x c++`` as C++) and the text it reads; None where
    the compiler is not there (it judges nothing then)."""
    lang = language(variant)
    path = shutil.which(compiler(lang))
    if path is None:
        return None
    dtype = variant.dtypes[0] if variant.dtypes[0] in CTYPES else "float32"  # the code's type, which no #if reads
    return (version_of(path), [path, "-E", "-P", "-H", *compile_flags(variant), "-x", read_as(variant), "-"],
            source(variant, config, dtype))


def missing_entry(variant: Variant, functions: Mapping[str, Any] | None, config: Mapping) -> str | None:
    """Where the library built from a variant's ``config`` (its ``functions``, as
    :func:`library_functions` reads them; None where they cannot be read and the loader found no
    such name) does not itself define the entry point, what is said, by compile-check and a tune
    alike: a name only a library it links defines (libm's ``expf``) is found by the loader all the
    same, and was called with the kernel's arguments. Whether the entry is static is read from the
    config's code as the compiler reads it (:func:`preprocessing`): a ``static`` a macro brings
    (``#define LOCAL static inline``) was not said, and one a comment or an unused macro names must not be."""
    if functions is not None and variant.entry in functions:
        return None
    hint = ' (declare it extern "C": C++ names are mangled)' if read_as(variant) == "c++" else ""
    static = rf"(?m)^[ \t]*(?![\s#])[^\n#]*?\bstatic\b[^;{{}}()#]*\b{re.escape(variant.entry)}\s*\("  # no directive's
    reading = preprocessing(variant, config)
    code = reading and preprocess(reading[1], reading[2], variant.origin)
    if code and re.search(static, code):
        hint += " (it is static, which keeps a function to its file: drop static from its definition)"
    said = f"{variant.path.name} exports no function {variant.entry!r}{hint}"
    return said if functions is None else f"{said}; it exports: {', '.join(sorted(functions)) or 'none'}"


def cxx_in_c(variant: Variant, error: str) -> str:
    """The hint for a template compiled as C whose line the error names holds ``extern "C"``: a
    Kernel Tuner C kernel (its lang="C" builds with g++, in extern "C") ported as a ``.c`` file,
    which gcc refuses with no more than "expected identifier or '(' before string constant"."""
    if read_as(variant) != "c":
        return ""
    lines, name = template_lines(variant), re.escape(variant.path.name)
    numbers = map(int, re.findall(rf"{name}(?::|\()(\d+)", error))
    if not any(_EXTERN_C.search(lines[n - 1]) for n in numbers if 0 < n <= len(lines)):
        return ""
    return (f'\n(tunebench: {variant.path.name} is compiled as C, and extern "C" is C++ (Kernel Tuner\'s lang="C" '
            f'builds with g++): name the template .cpp, or give it flags=("-x", "c++"))')


def copy_flags(variant: Variant) -> tuple[str, ...]:
    """The flags of a build of the template's copy in the build cache: the variant's, and
    ``-iquote`` each folder a computed include reads from (see
    :attr:`~tunebench.kernel.Variant.computed_include_dirs`), searched beside the copy no more."""
    return (*variant.build_flags, *(f"-iquote{d}" for d in variant.computed_include_dirs))


def build_flags(variant: Variant, dtype: str) -> tuple[str, ...]:
    """The flags a build of the variant in a dtype adds to :data:`FLAGS`: its copy's
    (:func:`copy_flags`), the runtime it links (:func:`runtime_flags`) and the C++ standard
    library where gcc reads a C template as C++ (:func:`cxx_library`)."""
    return (*copy_flags(variant), *runtime_flags(variant, dtype), *cxx_library(variant))


def cxx_library(variant: Variant) -> tuple[str, ...]:
    """``-lstdc++`` where a template named as C is read as C++ (its flags' ``-x c++``: see
    :func:`read_as`): gcc links no C++ standard library, as g++ does a ``.cpp``'s, so its
    ``std::vector`` or ``new`` was an undefined reference. A library, so it follows the source
    and the variant's own libraries (see :func:`libraries_last`), and it is in the build's key:
    the link error cached before is not reused."""
    return ("-lstdc++",) if language(variant) == "c" and read_as(variant) == "c++" else ()


#: A library on the command line: ``-lfoo``, ``-l foo``, or an archive or shared object by its path.
_LIBRARY = re.compile(r"-l.*|[^-].*\.(a|so(\.\d+)*)")


def libraries_last(flags: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The flags that go ahead of the source, and those that follow it: from the first library
    (``-lfoo``, ``-l foo``, ``libfoo.a`` or ``.so`` by its path), or the first linker option
    before it (``-Wl,-Bstatic``, ``-Xlinker``, which govern the libraries after them), on, in their
    order: the linker takes from a library only what the files before it need, so one ahead of
    the template linked nothing, an undefined reference under ``-z defs``. Compiler options among
    them apply wherever they stand. Without a library, every flag stays ahead (as cached builds had them)."""
    first = next((i for i, f in enumerate(flags) if _LIBRARY.fullmatch(f)), None)
    if first is None:
        return tuple(flags), ()
    first = next(i for i, f in enumerate(flags) if i == first or f.startswith(("-Wl,", "-Xlinker")))
    return tuple(flags[:first]), tuple(flags[first:])


def gcc_command(flags: tuple[str, ...] = (), lang: str = "c") -> list[str]:
    """The command compiling the ``lang`` source ``{src}`` to the shared library ``{out}``."""
    before, after = libraries_last(flags)
    return [compiler(lang), *FLAGS, standard(flags, lang), *before, "-o", "{out}", "{src}", *after, "-lm"]


def recipe(variant: Variant, config: Mapping, dtype: str) -> tuple[str, str, list[str]]:
    """A config's build in a dtype: the source compiled, the compile cache's tag of its command
    (the compiler's version, the flags, the ISA -march=native builds for: a build is only valid on
    a CPU with the same) and the command."""
    lang = language(variant)
    flags = build_flags(variant, dtype)
    before, after = libraries_last(flags)  # a library's place is part of the build: one ahead failed to link
    tag = " ".join((compiler_version(lang), *FLAGS, standard(flags, lang), *before, *native_isa(),
                    *(("{src}", *after) if after else ())))
    return source(variant, config, dtype), tag, gcc_command(flags, lang)


def build_key(variant: Variant, config: Mapping, dtype: str) -> str:
    """The compile cache's key of a config's build in a dtype (see :func:`recipe`)."""
    text, tag, _ = recipe(variant, config, dtype)
    return cache_key(tag, text)


def source_suffix(lang: str) -> str:
    """What the compiler recognises the language by."""
    return ".cpp" if lang == "c++" else ".c"


def compiler_version(lang: str = "c") -> str:
    """The compiler of ``lang`` and its full version, part of every build's cache key."""
    return version_of(compiler(lang))


def compiler_identity(lang: str = "c") -> str | None:
    """The compiler of ``lang`` as a trial keeps it: the file it is (``gcc``, ``/usr/bin/gcc`` and
    ``gcc-12`` are one ``x86_64-linux-gnu-gcc-12``) and its full version; None where it is not
    found or gives no version."""
    path = shutil.which(compiler(lang))
    named = version_of(path) if path else ""
    version = named[len(path):].strip() if path and named.startswith(path) else ""
    return f"{os.path.basename(os.path.realpath(path))} {version}" if version else None


def quotes_system_folders(lang: str) -> bool:
    """Whether ``lang``'s compiler looks for a quoted include in an -iquote folder it also
    searches as a system's (-isystem, C_INCLUDE_PATH's): clang keeps it in its '#include "..."'
    chain (``clang -v -E``), where gcc drops it ('ignoring duplicate directory')."""
    path = shutil.which(compiler(lang))
    return bool(path) and _is_clang(path)


@cache
def _is_clang(program: str) -> bool:
    """Whether ``program`` is a clang, by what it says of itself: its file's name does not tell
    (LLVM's own layout: ``clang`` a link to ``clang-19``; a wrapper of any name)."""
    try:
        said = subprocess.run([program, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return False
    return "clang version" in said


@cache
def version_of(program: str) -> str:
    """A compiler and its full version (gcc's ``-dumpfullversion``; clang, which has no such
    option, gives it with ``-dumpversion``); a compiler that gives none, or is not found (its
    builds then say so), is named alone."""
    for option in ("-dumpfullversion", "-dumpversion"):
        try:
            out = subprocess.run([program, option], capture_output=True, text=True)
        except OSError:
            break
        if out.returncode == 0 and out.stdout.strip():
            return f"{program} {out.stdout.strip()}"
    return program


@cache
def computes_in(program: str, lang: str, dtype: str) -> bool:
    """Whether a compiler computes in the dtype's C type in ``lang`` (gcc 12 has no ``__bf16``,
    gcc 13 does), by compiling a use of it."""
    command = [program, "-x", lang, STANDARD[lang], "-march=native", "-fsyntax-only", "-"]
    try:
        return subprocess.run(command, input=ARITHMETIC[dtype], capture_output=True, text=True).returncode == 0
    except OSError:  # not found: no build works, and each says so
        return False


@cache
def linking(program: str, lang: str, dtype: str, flags: tuple[str, ...]) -> tuple[tuple[str, ...] | None, str]:
    """How a library computing in a dtype the compiler has (:func:`computes_in`) links when built
    with ``flags`` as a build is: (what it adds to link: nothing, or :data:`COMPILER_RT`, "") or,
    where neither links, (None, what failed: :func:`link_failure`). The syntax alone does not tell: a
    conversion -march has no instruction for is a call into the runtime library. gcc, which knows
    no ``--rtlib``, fails it as a compiler without compiler-rt does. A probe the machine kept from
    running (its temp folder, a compiler killed or not found) is a :class:`BuildEnvironmentError`
    saying so, no verdict: it is not kept, and the next call probes again."""
    said = ""
    try:
        with tempfile.TemporaryDirectory(prefix="tunebench-probe-") as tmp:
            src = Path(tmp) / f"probe{source_suffix(lang)}"
            src.write_text(ARITHMETIC[dtype], encoding="utf-8")
            for runtime in ((), COMPILER_RT):
                command = [program, *flags, STANDARD[lang], *runtime, "-o", "{out}", "{src}", "-lm"]
                error = run_compiler(command, src, Path(tmp) / "probe.so")
                if error is None:
                    return runtime, ""
                said = said or error
    except (OSError, BuildEnvironmentError) as e:
        raise BuildEnvironmentError(f"whether a library computing in {CTYPES[dtype]} links could not be probed, "
                                    f"building one with {program}: {e}") from None
    return None, link_failure(said)


def link_failure(said: str) -> str:
    """A failed build's words in short: the first symbol the linker missed (GNU ld's ``undefined
    reference to `X'``, lld's ``undefined symbol: X``), else the last line it said."""
    missing = re.search(r"undefined reference to [`']([^']+)'|undefined symbol: (\S+)", said)
    if missing:
        return f"{missing.group(1) or missing.group(2)} undefined"
    return f"its build said: {(said.strip().splitlines() or ['nothing'])[-1]}"


def compiler_rt_package(lang: str) -> str:
    """Debian's package of the compiler-rt for ``lang``'s compiler: ``libclang-rt-N-dev``, N its
    major version where it is a clang (any other's, gcc's, is no name of it)."""
    identity = compiler_identity(lang) or ""
    if identity.startswith("clang "):
        return f"libclang-rt-{identity.split()[1].split('.')[0]}-dev"
    return "libclang-rt-N-dev, for clang N"


def dtype_reader(variant: Variant) -> str | None:
    """The first file of a build of the variant that names ``TB_DTYPE``: the template, else a
    source file its flags build with it (:attr:`~tunebench.kernel.Variant.input_sources`, by its
    path from the template's folder); None where none does: they read the elements their own way
    (a bfloat16 as its 16 bits, ``unsigned short``), and any compiler builds and links them."""
    if "TB_DTYPE" in variant.template:
        return variant.path.name
    return next((os.path.relpath(path, variant.path.parent) for path, text in variant.input_sources.items()
                 if "TB_DTYPE" in text), None)


def runtime_flags(variant: Variant, dtype: str) -> tuple[str, ...]:
    """What a build of the variant in a dtype adds to link the conversions its compiler calls
    (see :func:`linking`): nothing where no file of it computes in TB_DTYPE (:func:`dtype_reader`,
    as :func:`dtype_problem` asks), whose build calls none; probed once per compiler and flags,
    before any build pays for it."""
    lang = language(variant)
    program = compiler(lang)
    if dtype not in ARITHMETIC or dtype_reader(variant) is None or not computes_in(program, lang, dtype):
        return ()
    return linking(program, lang, dtype, FLAGS)[0] or ()


def dtype_problem(dtype: str, variant: Variant) -> str | None:
    """Why this machine's compiler cannot build the variant's template in a dtype (None where it
    can). Where no file of the build names ``TB_DTYPE`` (:func:`dtype_reader`), they read the
    elements their own way and build with any compiler. A link probe the machine kept from
    running refuses the dtype saying why: a collection error, or compile-check's failure of the
    kernel's declaration, not an exception out of either (its builds' commands then ask the
    probe it kept)."""
    if dtype not in CTYPES:
        return f"dtype {dtype!r} has no C type on the cpu target ({', '.join(CTYPES)})"
    reader = dtype_reader(variant) if dtype in BITS_ONLY or dtype in ARITHMETIC else None
    if reader is None:
        return None
    if dtype in BITS_ONLY:
        return (f"dtype {dtype!r}: no C compiler has an 8-bit float type for TB_DTYPE in {reader}: read "
                f"the elements there as their bits (unsigned char) and convert by hand")
    lang = language(variant)
    if not computes_in(compiler(lang), lang, dtype):
        env = "TUNEBENCH_CXX" if lang == "c++" else "TUNEBENCH_CC"
        return (f"dtype {dtype!r}: {compiler_version(lang)} has no {CTYPES[dtype]} arithmetic, which "
                f"{reader} needs for TB_DTYPE (gcc >= 13 and clang >= 17 have it: name one with {env}=), "
                f"or read the elements there as their 16 bits (unsigned short) and convert by hand")
    try:
        runtime, failure = linking(compiler(lang), lang, dtype, FLAGS)
    except BuildEnvironmentError as e:  # the machine's: refused with what kept the probe from running
        return f"dtype {dtype!r}: {e}"
    if runtime is None:
        march = next(f for f in FLAGS if f.startswith("-march="))
        return (f"dtype {dtype!r}: {compiler_version(lang)} computes in {CTYPES[dtype]}, but a library doing so "
                f"does not link ({failure}): where the {march} it builds for has no instruction for a conversion "
                f"to it, the compiler calls one in its runtime library, which lacks them; gcc >= 13's libgcc and "
                f"clang's compiler-rt (Debian: {compiler_rt_package(lang)}) have them, or read the elements in "
                f"{reader} as their 16 bits (unsigned short) and convert by hand")
    return None


@cache
def native_isa() -> tuple[str, ...]:
    """The ISA extensions -march=native compiles for here: a build is only valid on a CPU with
    the same, so they are part of the compile cache's key."""
    return tuple(identify()["isa"])


#: A call shorter than this (ms) is timed much as the cost of calling it from Python, which every
#: sample includes: such a kernel's speedups read smaller than they are.
SHORT_CALL_MS = 0.01


@functools.cache
def call_overhead_us(calls: int = 20000) -> float:
    """What one ctypes call of a C function with a few pointer arguments costs here (µs): the
    part of each sample that is not the kernel (measured once a process)."""
    memcmp = ctypes.CDLL(None).memcmp
    memcmp.argtypes, memcmp.restype = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t), ctypes.c_int
    buffer = ctypes.c_void_p(id(memcmp))
    start = time.perf_counter_ns()
    for _ in range(calls):
        memcmp(buffer, buffer, 0)
    return (time.perf_counter_ns() - start) / calls / 1e3


class Buffers:
    """A shape's arguments as the kernel sees them under one placement: inputs copied into
    trapped regions and made read-only (in-place ones stay writable; all stay writable with
    ``writable_inputs``, and a write into one is found by comparing instead: ``written``), each
    buffer the kernel writes (an output, an in-place input) between guard zones inside a trapped
    region (see :mod:`tunebench.backends.memory`): ``zones``, (name, kind, before, after). The
    runners of one shape share them, as a trial's consecutive calls do: runners compared
    interleaved with buffers of their own would evict each other's data from the caches and time
    the memory rather than the kernel."""

    def __init__(self, kernel: Kernel, args: Mapping[str, Any], placement: str, writable_inputs: bool = False):
        self.source = args  # held, so that its id() names these buffers while they live
        self.placement = placement
        self.written: list[str] = []  # inputs compared after each call: the writable ones not declared in place
        self.regions = []
        self.zones: list[tuple[str, str, np.ndarray, np.ndarray]] = []
        self.outputs = [self._guarded(n, "output", args[n], i) for i, n in enumerate(kernel.outputs)]
        first = len(kernel.outputs)
        aliases = kernel.aliases(args)  # one array given twice is one buffer, as the caller's call has it
        self.args = {}
        for i, (name, value) in enumerate(args.items()):
            if name in kernel.outputs or name in aliases or not isinstance(value, np.ndarray):
                self.args[name] = value  # an alias's buffer is set below, in its place among the arguments
                continue
            if name in kernel.inplace or writable_inputs:  # written, or written to find a write
                copy = self._guarded(name, "in-place input" if name in kernel.inplace else "input", value, first + i)
            else:
                region, raw = placed(value.nbytes, first + i, self.placement)
                self.regions.append(region)
                copy = raw.view(value.dtype).reshape(value.shape)
            np.copyto(copy, value)
            if name not in kernel.inplace:
                if writable_inputs:
                    self.written.append(name)
                else:
                    self.regions[-1].protect(writable=False)
            self.args[name] = copy
        self.args.update(zip(kernel.outputs, self.outputs))
        self.args.update({name: self.args[target] for name, target in aliases.items()})

    def _guarded(self, name: str, kind: str, like: np.ndarray, index: int) -> np.ndarray:
        """A buffer the kernel writes, shaped as ``like``, with :data:`GUARD_BYTES` of guard
        before it and, after it, every byte to the end of its last page: a write past the guard
        would land in writable slack unseen, and one past the pages faults on the trap."""
        region, _ = placed(like.nbytes + 2 * GUARD_BYTES, index, self.placement)
        self.regions.append(region)
        pages, start = region.pages(), region.offset + GUARD_BYTES
        self.zones.append((name, kind, pages[:start], pages[start + like.nbytes:]))
        return pages[start:start + like.nbytes].view(like.dtype).reshape(like.shape)


def args_refusal(args: Mapping[str, Any]) -> str | None:
    """Why the CPU target cannot call a kernel with these arguments (compile-check says it too,
    before the tune): an array not C-contiguous, a scalar ctypes cannot pass by value."""
    refused = not_contiguous(args)
    if refused:
        return refused
    for name, value in args.items():
        if not isinstance(value, np.ndarray) and value.dtype not in SCALARS:
            instead = ("it is a long double complex, whose parts ctypes passes only as Python floats (53 bits of "
                       "their 64): pass it as a 1-element array to a kernel that takes a pointer to it"
                       if value.dtype.kind == "c"
                       else "pass it as a 1-element array to a kernel that takes a pointer to it, or its fields as "
                            "separate scalars" if value.dtype.kind in "VS"  # a struct, bytes
                       else "pass np.float32(...) and declare it `float` in the kernel, converting there")
            return (f"scalar {name!r} has dtype {value.dtype}, which the CPU target cannot pass by value (it "
                    f"passes {', '.join(d.name for d in SCALARS)}): {instead}")
    return None


class CpuRunner(Runner):
    def __init__(self, fn, kernel: Kernel, buffers: Buffers):
        self._fn = fn
        self._buffers = buffers  # the memory lives as long as the runner
        self._zones, self._outputs, self._args = buffers.zones, buffers.outputs, buffers.args
        self._pristine = {n: buffers.source[n] for n in (*kernel.inplace, *kernel.inout)}
        self._poisoned = [out for n, out in zip(kernel.outputs, self._outputs) if n not in kernel.inout]
        self._cargs = [a.ctypes.data_as(ctypes.c_void_p) if isinstance(a, np.ndarray)
                       else SCALARS[a.dtype](a.item()) for a in self._args.values()]

    def reset(self, pattern: int = 0) -> None:
        for _, _, before, after in self._zones:
            before[:] = GUARD_FILL
            after[:] = GUARD_FILL
        for out in self._poisoned:  # in-out outputs start from their values instead
            poison(out, pattern)
        self._restore()

    def overrun(self) -> str | None:
        found = [guard_damage(name, before, after, kind) for name, kind, before, after in self._zones]
        found += [input_damage(n, self._buffers.source[n], self._args[n]) for n in self._buffers.written]
        return next(filter(None, found), None)

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
    placements = tuple(PLACEMENTS)

    def __init__(self, cache: BuildCache | None = None):
        self.cache = cache or BuildCache()
        self._buffers: dict[tuple, Buffers] = {}  # (placement, writable inputs) -> the latest shape's buffers
        self._functions: dict[str, dict[str, tuple[Param, ...] | None] | None] = {}  # library -> its functions
        os.environ.setdefault("OMP_NUM_THREADS", str(thread_count()))

    def fingerprint(self) -> dict:
        return identify()

    def conditions(self) -> dict:
        """Threads, the frequency governor where readable, the clock now (the load and other
        processes' share are :mod:`tunebench.interference`'s)."""
        found = {"threads": thread_count()}
        try:
            found["governor"] = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
        except OSError:
            pass
        try:
            mhz = [float(ln.split(":")[1]) for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("cpu MHz")]
            found["mhz"] = round(sum(mhz) / len(mhz)) if mhz else None
        except (OSError, ValueError):
            pass
        return found

    def build(self, kernel: Kernel, variant: Variant, config: Mapping, dtype: str) -> Build:
        problem = dtype_problem(dtype, variant)
        if problem:
            raise CompileError(problem)
        text, tag, command = recipe(variant, config, dtype)
        try:
            path, seconds, cached = self.cache.get(f"{kernel.name}-cpu", text, tag,
                                                   (source_suffix(language(variant)), ".so"),
                                                   lambda src, out: run_compiler(
                                                       command, src, out, source_inputs(variant, config, dtype)))
        except CompileError as e:
            said = explain(variant, config, str(e)) + cxx_in_c(variant, str(e))
            raise CompileError(said, cached=e.cached, earlier=e.earlier) from None
        return Build(handle=path, compile_time_s=seconds, cached=cached)

    def load(self, build: Build, kernel: Kernel, variant: Variant, config: Mapping, shape: tuple,
             args: Mapping[str, Any], placement: str = "staggered", writable_inputs: bool = False) -> Runner:
        refused = args_refusal(args)
        if refused:
            raise KernelError(f"kernel {kernel.name!r}: {refused}")
        functions = self._library_functions(build)
        missing = missing_entry(variant, functions, config) if functions is not None else None
        if missing:
            raise KernelError(f"kernel {kernel.name!r}: {missing}")
        try:
            fn = getattr(ctypes.CDLL(str(build.handle)), variant.entry)
        except AttributeError:  # unchecked above where pyelftools is not installed (the GPU image)
            raise KernelError(f"kernel {kernel.name!r}: {missing_entry(variant, None, config)}") from None
        except OSError as e:  # a cache where nothing may run: every candidate was recorded crashed, and reused
            if "failed to map segment" not in str(e) and "not permitted" not in str(e):
                raise
            raise BuildEnvironmentError(
                f"{build.handle.parent}: a build there cannot be loaded ({e}): the folder's filesystem does not let "
                f"programs run from it (mounted noexec?); set TUNEBENCH_CACHE to a folder on another and tune again "
                f"(nothing is recorded)") from None
        fn.restype = None
        params = functions.get(variant.entry) if functions is not None else None
        mismatch = args_problem(args, params) if params is not None else None
        if mismatch:
            raise KernelError(f"kernel {kernel.name!r}: {mismatch}")
        if any(b.source is not args for b in self._buffers.values()):
            self._buffers.clear()  # one shape's at a time: they can be large
        if (placement, writable_inputs) not in self._buffers:
            self._buffers[placement, writable_inputs] = Buffers(kernel, args, placement, writable_inputs)
        runner = CpuRunner(fn, kernel, self._buffers[placement, writable_inputs])
        runner.typed = params is not None
        return runner

    def _library_functions(self, build: Build) -> dict[str, tuple[Param, ...] | None] | None:
        """The functions the library itself defines, each with its parameters as its DWARF lists
        them (see :func:`library_functions`): the entry point is looked up among them, and the
        arguments checked against its parameters (a declaration error, before a call that would
        read a wrong value in every config). None where pyelftools is not installed: unchecked."""
        key = str(build.handle)
        if key not in self._functions:
            try:
                self._functions[key] = library_functions(build.handle)
            except ImportError:
                self._functions[key] = None
        return self._functions[key]
