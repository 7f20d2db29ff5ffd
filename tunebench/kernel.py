"""The declaration of a kernel: what to compile, how to feed it, how to check it, today's rule.

A :class:`Kernel` is target-independent (name, buckets, argument builder, reference, FLOP and
byte counts); each target it runs on has a :class:`Variant` (source template, entry point, space,
heuristic baseline). A module-level ``Kernel`` in a collected test module is a tuning suite.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import inspect
import json
import math
import numbers
import os
import re
import shlex
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from _pytest.config.findpaths import load_config_dict_from_file  # what pytest itself reads them with

from tunebench.backends.base import (COMPUTED_INCLUDE, INCLUDE, INCLUDE_ENV, PATH_ENV, KernelError, bare_include,
                                     constant_param, constant_settings, constant_suspects, directive_names,
                                     folder_header, header_hashes, header_place, long_option, option_values,
                                     overridden, own_include_dirs, preprocess, undefined_heuristic_values, unreadable)
from tunebench.backends.cache import BuildCache, compiler_temp
from tunebench.backends.launch import (keywords, kernel_tuner_launch, launch_of, stray_parameter, takes,
                                       takes_keyword)
from tunebench.buckets import Buckets
from tunebench.comments import code_of, lexed_alike
from tunebench.dtypes import kind, numpy_dtype, significand_bits
from tunebench.records import config_text
from tunebench.ported import refuse_ported
from tunebench.space import Space, SpaceError, closest
from tunebench.stamps import racy
from tunebench.user_code import is_users, raised

__import__("tomllib")  # pytest's reader imports it per call, for a pyproject.toml: imported with this module

#: Default (rtol, atol) per dtype: |out - ref| <= atol + rtol * |ref| must hold everywhere.
DEFAULT_TOLERANCE = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (8e-2, 8e-3),  # float16's, scaled by the 8 times coarser rounding (2**-8, not 2**-11)
    # an 8-bit float kernel computes in float and rounds once, at its output: one step of the
    # significand (its eps) over the smallest normal, not ten as above, which would pass anything
    "float8_e4m3fn": (2.0**-3, 2.0**-6),
    "float8_e5m2": (2.0**-2, 2.0**-14),
    **{f"{sign}{bits}": (0.0, 0.0) for sign in ("int", "uint") for bits in (8, 16, 32, 64)},  # exact
}
#: A complex dtype's: its parts' float's, as |out - ref| of two complex values is off about as
#: much as a part is (measure.py compares complex outputs so).
DEFAULT_TOLERANCE.update(complex64=DEFAULT_TOLERANCE["float32"], complex128=DEFAULT_TOLERANCE["float64"])

def _tolerance_pair(given) -> bool:
    """Whether a tolerance is (rtol, atol), two numbers >= 0."""
    try:
        rtol, atol = given
    except (TypeError, ValueError):
        return False
    return all(isinstance(t, numbers.Real) and not isinstance(t, bool) and t >= 0 for t in (rtol, atol))


def _dtype_name(name: str) -> bool:
    """Whether a tolerance key names a dtype (numpy's, or bfloat16 and the 8-bit floats)."""
    try:
        return numpy_dtype(name).name == name
    except (TypeError, ValueError):
        return False


#: The options naming a folder of the project's own headers, written ``-Idir`` or ``-I dir``
#: (gcc takes both; -I long too, ``--include-directory dir`` or ``=dir``: see
#: :data:`~tunebench.backends.base.LONG_OPTIONS`): their headers are inlined into the template,
#: so an edit is another source.
DIR_OPTIONS = ("-iquote", "-I")
#: The options naming a folder of headers searched after the others: the project's own where
#: the folder is given relative to the suite (inlined as -I's are), a system's where absolute
#: (``-isystem /usr/local/cuda/include``: resolved, not inlined, for kilobytes of libc headers in
#: every template and a hash that moves with the system).
SYSTEM_DIR_OPTIONS = ("-isystem", "-idirafter")
#: The options naming a file the compiler reads ahead of the template, written ``-include file``
#: (or long, ``--include file``, ``--imacros=file``: see :data:`~tunebench.backends.base.LONG_OPTIONS`):
#: one found from the suite's folder upwards is hashed as an input file is; another is the
#: compiler's to find, in the folder the run started from, then on its include path: hashed
#: where found there or in a folder of the flags or CPATH (``-I ../inc -include cfg.h``), not
#: where a system's (``-include math.h``).
FILE_OPTIONS = ("-include", "-imacros")
#: nvcc's spellings of its -include (it has no -imacros, and refuses ``-includecfg.h``): ``-include
#: cfg.h`` and ``--pre-include cfg.h``, each joined with "=" too (``-include=cfg.h``, which gcc
#: reads as a file "=cfg.h"), each given a file list (``-include a.h,b.h``, two files).
NVCC_FILE_OPTIONS = ("-include", "--pre-include")
#: nvcc's spellings of -I: ``-I dir`` (``-Idir``) and ``--include-path dir``, each joined with "="
#: too (``-I=dir``, which gcc reads as a folder of its sysroot), each given a folder list (``-I
#: a,b``, both searched, in order, as ``-Ia -Ib``).
NVCC_DIR_OPTIONS = ("-I", "--include-path")
#: nvcc's spellings of -isystem, read as those of -I are (``-isystem a,b``, ``--system-include=a``;
#: it refuses ``-isystema``).
NVCC_SYSTEM_DIR_OPTIONS = ("-isystem", "--system-include")
#: Options whose value is the next flag, which names no input file (``-Xlinker libfoo.so``,
#: ``-MF deps.o``, ``-D NAME=x.c``).
VALUE_OPTIONS = ("-o", "-D", "-U", "-x", "-l", "-L", "-u", "-T", "-B", "-MF", "-MT", "-MQ", "-Xlinker",
                 "-Xassembler", "-Xpreprocessor", "-specs", "-Xcompiler", "--compiler-options", "-Xptxas", "-ccbin",
                 "-aux-info")
#: nvcc's spellings of the option giving its host compiler (gcc) the flags of its value (see
#: :func:`compiler_words`), written alone or joined with "=": ``-Xcompiler -include,cfg.h``.
COMPILER_OPTIONS = ("-Xcompiler", "--compiler-options")
#: What an argument of no option names where it ends so: an input file compiled or linked with the template.
INPUT_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".o", ".a", ".so")
#: The input files whose bytes are their content (no text whose headers could be inlined).
BINARY_SUFFIXES = (".o", ".a", ".so")


class Named(NamedTuple):
    """A path the flags name (see :func:`flag_paths`), and where in them."""

    before: str  # its flag's text ahead of it: -I of -Idir, --include= of --include=cfg.h, "" of -I dir's dir,
    # -include, of -Xcompiler -include,"cfg.h" (it, its path as written, "cfg.h", and after make up the flag)
    given: str  # the path as given, as the compiler reads it: ../cfg.h of an -Xcompiler's -include,"../cfg.h"
    kind: str  # "dir", "system", "file" or "include" (see flag_paths)
    after: str  # its flag's text after it: ,-DX of -Wp,-include,cfg.h,-DX, else ""
    flag: int  # the index of its flag
    option: str  # the option it is the value of, as the compiler reads it: -include of --pre-include; "" of a file
    first: int  # the index of the flag its option starts at: -include's of -include cfg.h, else its own


def flag_paths(flags: Sequence[str], nvcc: bool = False) -> list[Named]:
    """Each path the flags name, in their order (see :class:`Named`): "dir" for a folder of the
    project's headers, "system" for one of a system's (see :data:`SYSTEM_DIR_OPTIONS`), "file"
    for an input file, "include" for a file an option reads ahead. An option alone, ``-I`` of
    ``-I dir``, names none: its next flag does; gcc takes ``-includecfg.h`` as ``-include cfg.h``.
    The preprocessor's own words (:func:`preprocessor_words`) are read for the files they name,
    each of ``-Wp,-include,a.h,-include,b.h``; where ``nvcc`` reads the flags (it refuses -Wp), its
    host compiler's instead (:func:`compiler_words`: ``-Xcompiler -include,cfg.h``, ``-Xcompiler
    -I../inc``), and its spellings of -include and -I too (:data:`NVCC_FILE_OPTIONS`,
    :data:`NVCC_DIR_OPTIONS`, :data:`NVCC_SYSTEM_DIR_OPTIONS`), each path of a list (``-include
    a.h,b.h``, ``-Ia,b``, ``-isystem a,b``). The host
    compiler's folders come first, as nvcc gives it its words ahead of its own -I folders
    (``nvcc --dryrun``: ``gcc -E -I../inc -I"../other"``), where it searches them: read as one
    of nvcc's -I folders, in the flags' order, a header of another -I folder was hashed, and
    read as none (its value an -Xcompiler's), the header gcc read was unhashed."""
    found: list[Named] = []
    taken = None  # what the flag before, an option alone, takes: its kind and option
    for i, flag in enumerate(flags):
        option, value = long_option(flag) or (flag, None)  # the short option a long spelling is
        name, equals, given = flag.partition("=")
        if nvcc and name in (*NVCC_FILE_OPTIONS, *NVCC_DIR_OPTIONS, *NVCC_SYSTEM_DIR_OPTIONS):  # -include=cfg.h, -I=inc
            option = ("-I" if name in NVCC_DIR_OPTIONS else "-isystem" if name in NVCC_SYSTEM_DIR_OPTIONS
                      else "-include")
            value = given if equals else None
        joined = next((o for o in (*DIR_OPTIONS, *SYSTEM_DIR_OPTIONS, *FILE_OPTIONS)
                       if flag.startswith(o) and flag != o), None)
        if taken:
            what, option = taken
            if nvcc and (what == "include" or option in ("-I", "-isystem")):  # -include a.h,b.h; -I a,b; -isystem a,b
                found += _listed("", flag, i, option, i - 1, what)
            elif what != "value":
                found.append(Named("", flag, "dir" if what == "system" and not os.path.isabs(flag) else what, "", i,
                                   option, i - 1))
            taken = None
        elif value is None and option in (*DIR_OPTIONS, *SYSTEM_DIR_OPTIONS, *FILE_OPTIONS, *VALUE_OPTIONS):
            taken = ("dir" if option in DIR_OPTIONS else "system" if option in SYSTEM_DIR_OPTIONS
                     else "include" if option in FILE_OPTIONS else "value"), option
        elif value is not None and option in FILE_OPTIONS:  # --include=cfg.h; nvcc's --pre-include=cfg.h
            before = flag[:len(flag) - len(value)]
            found += (_listed(before, value, i, option, i) if nvcc  # -include=a.h,b.h
                      else [Named(before, value, "include", "", i, option, i)])
        elif value is not None and option in (*DIR_OPTIONS, "-isystem"):  # --include-directory=inc; nvcc's -I=a,b
            before = flag[:len(flag) - len(value)]
            kind = "dir" if option in DIR_OPTIONS else "system"
            found += (_listed(before, value, i, option, i, kind) if nvcc
                      else [Named(before, value, kind, "", i, option, i)])
        elif joined:
            path = flag[len(joined):]
            kind = ("include" if joined in FILE_OPTIONS else
                    "system" if joined in SYSTEM_DIR_OPTIONS and os.path.isabs(path) else "dir")
            found += (_listed(joined, path, i, joined, i, kind) if nvcc and joined == "-I"  # -Ia,b
                      else [Named(joined, path, kind, "", i, joined, i)])
        elif not flag.startswith("-") and flag.endswith(INPUT_SUFFIXES):
            found.append(Named("", flag, "file", "", i, "", i))
    words = compiler_words(flags) if nvcc else preprocessor_words(flags)
    reads = compiler_reads if nvcc else str  # a host compiler's word as the shell gives it: -include,"cfg.h"
    ahead = set()  # the host compiler's folders, which nvcc gives it ahead of its own
    for named in flag_paths([reads(word) for _, _, word in words]) if words else ():
        i, start, word = words[named.flag]  # where in its flag the word names it, as written
        end = start + len(word) - len(named.after)
        start += len(named.before)
        # its path as written there reads as the path (an option quoted with it, "-I../inc", is left unread)
        read = (word.startswith(named.before) and word.endswith(named.after)
                and reads(flags[i][start:end]) == named.given)
        if read and (named.kind == "include" or nvcc and named.kind in ("dir", "system")):
            opens, at, _ = words[named.first]  # its option word's flag, the value of an -Xpreprocessor (-Xcompiler)
            alone = compiler_value(flags, opens) == 0 if nvcc else at == 0  # before it, which it starts from then
            found.append(named._replace(before=flags[i][:start], flag=i, first=opens - alone, after=flags[i][end:]))
            if named.kind != "include":
                ahead.add(found[-1])
    return sorted(found, key=lambda named: (named not in ahead, named.flag, len(named.before)))


def _listed(before: str, given: str, flag: int, option: str, first: int, kind: str = "include") -> list[Named]:
    """Each path of nvcc's list ``given`` (``a.h,b.h``: it reads both, in order; ``a,b`` of
    ``-I``: it searches both; ``"/proj,v2/inc"`` one, see
    :func:`~tunebench.backends.cuda.option_list`), the value of ``option`` after ``before`` in
    its flag, of ``kind`` (a "system" folder given relative a "dir": see
    :data:`SYSTEM_DIR_OPTIONS`); none of an empty word, which nvcc drops (``-Ia,``: no folder
    ``""``, the suite's)."""
    from tunebench.backends.cuda import option_list  # nvcc's reading: a floor below
    return [Named(before + given[:start], name, "dir" if kind == "system" and not os.path.isabs(name) else kind,
                  given[start + len(word):], flag, option, first)
            for start, word, name in option_list(given) if name]


def _comma_words(text: str) -> list[tuple[int, str]]:
    """The words of ``text`` split at its commas, each with where in it it starts."""
    words, start = [], 0
    for word in text.split(","):
        words.append((start, word))
        start += len(word) + 1
    return words


def preprocessor_words(flags: Sequence[str]) -> list[tuple[int, int, str]]:
    """The words the flags give gcc's preprocessor alone, each with its flag's index and where in
    that flag it starts: each of ``-Wp,-DK_IMPL="impl.h",-include,cfg.h``'s, split at its commas,
    and the flag after ``-Xpreprocessor``. gcc and clang read them as the preprocessor's own
    options, an -include or a -D among them (nvcc refuses both spellings)."""
    words = []
    for i, flag in enumerate(flags):
        if flag.startswith("-Wp,"):
            words += [(i, len("-Wp,") + start, word) for start, word in _comma_words(flag[len("-Wp,"):])]
        elif i and flags[i - 1] == "-Xpreprocessor":
            words.append((i, 0, flag))
    return words


def compiler_words(flags: Sequence[str]) -> list[tuple[int, int, str]]:
    """The words nvcc gives its host compiler, each with its flag's index and where in that flag it
    starts: the value of each -Xcompiler (see :data:`COMPILER_OPTIONS`) split at its commas, as
    nvcc splits it, and at its spaces, as the shell nvcc runs the host compiler in splits the
    command line it writes them into (``-Xcompiler "-include cfg.h"``; see :func:`_compiler_split`).
    nvcc's ``--cubin`` build has the host compiler preprocess the device code with them (``nvcc
    --dryrun``: ``gcc -E -include cfg.h``), so the cubin reads an -include file, -I folder or -D
    macro among them. Each word as written, quotes and all (see :func:`compiler_reads`)."""
    words = []
    for i, flag in enumerate(flags):
        start = compiler_value(flags, i)
        if start is not None:
            words += [(i, start + at, word) for at, word in _compiler_split(flag[start:])]
    return words


def _compiler_split(value: str) -> list[tuple[int, str]]:
    """The words of an -Xcompiler's value, each as written with where in it it starts: split at
    each comma nvcc splits its lists at (see :func:`~tunebench.backends.cuda.list_characters`: none
    inside its double quotes, ``\\,`` a comma), which it gives the shell as a space, and at each
    space the shell sees outside its quotes. Split at every comma and space,
    ``-include,'../my inc/cfg.h'`` was read as a file ``'../my`` and a word ``inc/cfg.h'``, where
    gcc reads the file ``../my inc/cfg.h``."""
    from tunebench.backends.cuda import list_characters  # nvcc's reading: a floor below
    words: list[tuple[int, str]] = []
    start, quote, escaped = None, "", False
    for i, char, split in list_characters(value):
        char = " " if split else char  # what the shell gets of it
        if escaped or quote == "'" and char != "'" or quote == '"' and char not in '"\\':
            escaped = False
        elif char == "\\":  # the shell's escape (written \\ to nvcc): the character after it is the word's
            escaped = True
        elif char in "'\"":
            quote = "" if quote else char
        elif char.isspace():
            if start is not None:
                words.append((start, value[start:i]))
            start = None
            continue
        start = i if start is None else start
    return words + ([(start, value[start:])] if start is not None else [])


def compiler_value(flags: Sequence[str], i: int) -> int | None:
    """Where in flag ``i`` the value of an -Xcompiler (see :data:`COMPILER_OPTIONS`) starts, the
    words nvcc gives its host compiler: 0 after ``-Xcompiler`` alone, past the "=" of
    ``-Xcompiler=...``; None where the flag holds none."""
    name, equals, _ = flags[i].partition("=")
    if equals and name in COMPILER_OPTIONS:
        return len(name) + 1
    return 0 if i and flags[i - 1] in COMPILER_OPTIONS else None


def compiler_reads(word: str) -> str:
    """A word of :func:`compiler_words` as the host compiler reads it: nvcc reads it as its own
    lists (see :func:`~tunebench.backends.cuda.macro_list`: the backslash of each escape dropped,
    ``\\"`` is ``"``, no split inside double quotes) and gives each comma it splits at as a
    space, then the shell it runs the compiler in reads its quotes (``-DK_IMPL='"impl.h"'``, the
    spelling that builds, is ``-DK_IMPL="impl.h"``; ``-include,"../inc/cfg.h"``'s file is
    ``../inc/cfg.h``; ``-DX="a,b"`` is X ``a,b``, ``nvcc --dryrun``: ``gcc -DX="a,b"``); as written
    where the shell would not read it as one word. Read as written, the macro named no header, and
    one in a subfolder (``'"impls/a.h"'``) was hashed by none, and a quoted file or folder was none;
    read with every comma a space, ``'"impls,v2/a.h"'`` named no header either."""
    from tunebench.backends.cuda import macro_list  # nvcc's reading: a floor below
    try:
        read = shlex.split(" ".join(macro_list(word)))
    except ValueError:  # a quote its word does not close
        return word
    return read[0] if len(read) == 1 else word


def spelt(flags: Sequence[str], named: Named, path: str | Path, nvcc: bool = False) -> str:
    """``path`` as written in the place of ``named`` in ``flags``: in an -Xcompiler's words (see
    :func:`compiler_words`), quoted for the shell nvcc runs its host compiler in and each comma and
    backslash and double quote escaped for nvcc, which reads them inside single quotes too
    (``-include,'/my proj\\,v2/cfg.h'``), as :func:`compiler_reads`
    reads it back; where ``nvcc`` reads the flags, in the value of one of its own options as it
    takes it (``-I"/proj,v2/inc"``: see :func:`~tunebench.backends.cuda.option_path`); elsewhere,
    and a path of none of those characters, as it is. Written bare, an
    absolute path under ``my proj/`` was two words to the shell, and one under ``proj,v2/`` two to
    nvcc: no build found the file ("/my: No such file or directory")."""
    path = str(path)
    if compiler_value(flags, named.flag) is None:
        if nvcc and named.option:
            from tunebench.backends.cuda import option_path  # nvcc's spelling: a floor below
            return option_path(path)
        return path
    return compiler_word(path)


def compiler_word(path: str | Path) -> str:
    """``path`` as written in an -Xcompiler's words (see :func:`spelt`): quoted for the shell nvcc
    runs its host compiler in, each comma, backslash and double quote escaped for nvcc."""
    return re.sub(r'[\\,"]', lambda found: "\\" + found.group(), shlex.quote(str(path)))


def as_written(flags: Sequence[str], named: Named, text: str | None = None) -> str:
    """The flags that name ``named`` as written, from its option's (``-I ../a,../b``, ``-Xcompiler
    -fPIC,-include,../inc/``), for a message; with ``text`` in the place of its path where given,
    a spelling the compiler takes. Told the option as tunebench reads it (``-I`` of
    ``--include-path``) or the flag alone (``../a,../b``, ``-fPIC,-include,../inc/`` without its
    -Xcompiler), the user was shown a flag they did not write, and one nvcc refuses."""
    *ahead, flag = flags[named.first:named.flag + 1]
    return " ".join((*ahead, flag if text is None else named.before + text + named.after))


def written_flags(flags: Sequence[str], texts: Iterable[tuple[Named, str]]) -> list[list[str]]:
    """Per flag, the flags it is written as with each path of ``texts`` (one the flags name, see
    :func:`flag_paths`, with what to write in its place) written so. A -Wp word that then holds a
    comma, at which gcc splits it (an absolute path under ``proj,v2/``: "cc1: error: too many
    filenames given"), is given by -Xpreprocessor (see :func:`_preprocessor_flags`)."""
    spans: dict[int, list[tuple[int, int, str]]] = {}  # per flag, (start, end, text) of each path written
    for named, text in texts:
        spans.setdefault(named.flag, []).append((len(named.before), len(flags[named.flag]) - len(named.after), text))
    written = []
    for i, flag in enumerate(flags):
        if flag.startswith("-Wp,") and any("," in text for _, _, text in spans.get(i, ())):
            written.append(_preprocessor_flags(flag, spans[i]))
            continue
        for start, end, text in sorted(spans.get(i, ()), reverse=True):  # the last first: the others' places hold
            flag = flag[:start] + text + flag[end:]
        written.append([flag])
    return written


def _preprocessor_flags(flag: str, spans: list[tuple[int, int, str]]) -> list[str]:
    """A -Wp flag with the texts of ``spans`` (see :func:`written_flags`) in place: each word that
    then holds a comma given by -Xpreprocessor, as is its option's word before it where the path
    is the whole word (``-Xpreprocessor -include -Xpreprocessor /proj,v2/cfg.h``: the words gcc
    gives the preprocessor, in their order); the others stay -Wp flags."""
    words, apart = [], set()  # the words written, and those given by -Xpreprocessor
    for k, (start, word) in enumerate(_comma_words(flag[len("-Wp,"):])):
        start += len("-Wp,")
        for at, end, text in sorted((s for s in spans if start <= s[0] <= start + len(word)), reverse=True):
            word = word[:at - start] + text + word[end - start:]
            if "," in text:
                apart.update({k - 1, k} if at == start and k else {k})
        words.append(word)
    written: list[str] = []
    for k, word in enumerate(words):
        if k in apart:
            written += ["-Xpreprocessor", word]
        elif k and k - 1 not in apart:  # the -Wp flag of the word before
            written[-1] += "," + word
        else:
            written.append("-Wp," + word)
    return written


#: nvcc options that choose the architecture: tunebench's own, never a variant's flags.
ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code")
#: nvcc flags that make relocatable (or extensible whole-program) device code: a cubin PyCUDA
#: loads alone, its external device functions unresolved (it compiled and passed compile-check,
#: and could not load on the GPU).
RDC_FLAGS = ("-rdc=true", "--relocatable-device-code=true", "-dc", "--device-c", "-rdc", "--relocatable-device-code",
             "-ewp", "--extensible-whole-program")

#: The files whose folder is a project's root (pytest's rootdir, where ``records/`` goes), in
#: the order pytest tries them (pytest.toml from pytest 9: an older pytest finds no pytest table in it).
INI_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _configures_pytest(path: Path) -> bool:
    """Whether ``path`` holds pytest's configuration, as pytest judges it (a pyproject.toml without
    a pytest table, a setup.cfg without ``[tool:pytest]``, do not). Its reader is imported with
    this module, not here: a lookup's message names the tune command, and its first import there,
    in a child forked while another thread ran it, waited forever on that import's lock."""
    try:
        return path.is_file() and load_config_dict_from_file(path) is not None
    except Exception:  # noqa: BLE001 - a file pytest fails on: then no run of ours has this root either
        return False


@functools.lru_cache(maxsize=1024)
def rootdir(start: Path) -> Path | None:
    """The rootdir pytest takes for a run on ``start`` (no ``--rootdir`` or ``-c``), where a tune
    writes ``records/``: the nearest folder with a file holding pytest's configuration, else the
    nearest with a pyproject.toml, else with a setup.py; None where there is none. A monorepo's
    pytest.ini above a project's own pyproject.toml is its root: lookups looked beside the
    pyproject.toml, and served nothing the tune had recorded. Kept per folder for the process
    (a lookup of each new shape asks it: reading the files took 0.4 ms): a pytest configuration
    added while a process runs is seen by the next process."""
    chain = (start, *start.parents)
    return (next((d for d in chain if any(_configures_pytest(d / f) for f in INI_FILES)), None)
            or next((d for d in chain if (d / "pyproject.toml").is_file()), None)
            or next((d for d in chain if (d / "setup.py").is_file()), None))


def project_root(start: Path) -> Path | None:
    """The root of the project holding ``start``, whose ``records/`` the tune, the gate, the report
    and ``best()`` all read: pytest's :func:`rootdir`, else the nearest folder holding
    ``records/`` or ``suites/`` (a first tune's); None where there is none. Without a pytest
    configuration, pytest's rootdir is wherever it is run: run from ``suites/``, the tune wrote
    ``suites/records``. (Not the git checkout's top, nor a farther ``records/`` than a project's
    own ``suites/``: a monorepo's projects would share it.)"""
    chain = (start, *start.parents)
    return rootdir(start) or next((d for d in chain if (d / "records").is_dir() or (d / "suites").is_dir()), None)


#: Per pytest run under way in this process (a pytester run nests in another), where its options
#: place the configuration and records apart from a plain run's (``--rootdir``, ``-c``): those
#: options, the records folder they give, and the one the run uses (--tune-records).
_RUNS: list[tuple[tuple[str, ...], Path, Path]] = []


def run_options(run: tuple[tuple[str, ...], Path, Path] | None, running: bool) -> None:
    """A run's ``--rootdir`` and ``-c`` kept in the commands its messages suggest, while it runs:
    dropped, the suggested tune read another ini file (its budget, its gate settings) or rootdir."""
    if running:
        _RUNS.append(run)
    elif run in _RUNS:
        _RUNS.remove(run)


def tune_options(records: str | Path | None, default: Path) -> str:
    """What a suggested tune command adds after ``--tune``: the run's ``--rootdir`` and ``-c`` (see
    :func:`run_options`) where ``records`` is the folder that run uses, and ``--tune-records`` where
    ``records`` is not the folder the command writes without it (``default`` for a plain run)."""
    options, placed, used = _RUNS[-1] if _RUNS else ((), None, None)
    if options and Path(records if records is not None else default).resolve() == used.resolve():
        default = placed
    else:  # another project's records (a framework's own test run looking a kernel up): its options are not theirs
        options = ()
    if records is not None and Path(records).resolve() != Path(default).resolve():
        options = (*options, "--tune-records", str(from_here(Path(records).resolve())))
    return "".join(f" {shlex.quote(o)}" for o in options)


def from_here(path: Path) -> Path:
    """A path as the working directory reaches it, for a command to give."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def reached(path: Path) -> Path:
    """A suite file or folder as a run reaches it, absolute: its folders resolved, as a run finds
    the project whose records/ it writes, but not a suite file's own link: a file linked in from
    another project is of the one it is reached in, as its templates are."""
    path = Path(path)
    return path.resolve() if path.is_dir() else path.parent.resolve() / path.name


#: Every declared kernel by name, so that ``best()`` can fall back on its heuristic.
REGISTRY: dict[str, Kernel] = {}


def declared_twice(name: str, where: object) -> str:
    """What is said of a kernel name two suites declare (pytest's collection and the lookups')."""
    return f"kernel name {name!r} is declared twice, here and in {where}: records keep one task per name"


_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\b", re.MULTILINE)
#: CUDA's built-in variables: a param of the name is #defined over them.
CUDA_BUILTINS = ("warpSize", "threadIdx", "blockIdx", "blockDim", "gridDim")
#: What a computed include may name beside the file holding it.
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp", ".tcc")


def inline_includes(path: Path, within: tuple[Path, ...] = (), top: Path | None = None,
                    dirs: tuple[Path, ...] = (), searched: tuple[Path, ...] = (), read: dict[Path, bool] | None = None,
                    library: dict[Path, bool] | None = None, once: set[Path] | None = None,
                    conditional: bool = False, anchored: bool = False, fixed: tuple[Path, ...] = (),
                    quoted: tuple[Path, ...] = ()) -> str:
    """The file's text with every ``#include "header"`` found beside it replaced by the header's
    text, recursively, as the compiler reads it: #line markers name it from the template's folder
    for the compiler's messages, a ``#pragma once`` header is wrapped in a guard of its own, and a
    header including one it is inside is skipped where a guard or ``#pragma once`` would skip it,
    as is one (``once``) a guard or ``#pragma once`` keeps to its first inclusion, where that
    inclusion was under no ``#if`` (``conditional``): a set of headers that include each other
    was copied at every include, exponentially many times. An ``#include`` in a comment is none.
    The source hash then covers the headers too, so an edited header is measured again, and the
    build needs no include path for them. A header one of ``dirs`` gives by the name included (the
    variant's ``-I`` folders: a library, CUB or CUTLASS vendored) is left to the compiler, which
    the flags give those folders: its ``#include MACRO`` lines, which only a preprocessor resolves, read the
    real files again beside inlined copies (every ``#pragma once`` header defined twice). It and
    the headers it includes, as far as they can be found, go into ``library`` to be hashed, as
    do those found in the rest of ``searched``, the folders the compiler looks for a header in,
    in its order (the flags' and those it searches of its own, CPATH: see
    :meth:`Variant._searched`; ``dirs`` where none is given; a quoted header's first in
    ``quoted``, see :meth:`Variant._quoted`): a quoted header beside the file is
    read there whatever the folders of its own hold, so it is inlined still (CPATH naming the
    template's folder left it to the compiler, another source text); each with whether it is
    anchored, named by its absolute path (see :func:`_library`; ``fixed``: the folders that are).
    ``read``, where given, gets each file read, with whether it is anchored. A file reached by an
    absolute path (``anchored``: a file of the flags given so, an ``#include "/opt/lib/x.h"``)
    lies there in every checkout, and is named by that path with the headers it includes, not
    from ``top``: from a checkout at another depth, "../../opt/lib/x.h" was another source."""
    top = top or path.parent
    once = set() if once is None else once
    out = []
    if read is not None:
        read.setdefault(path, anchored)
    lines = _lines(path)
    codes = _code(lines)
    depth, guard = 0, 1 if within and _include_guard(codes) else 0  # a header's guard is no condition on its includes
    for number, (line, code) in enumerate(zip(lines, codes), 1):
        if within and _PRAGMA_ONCE.match(code):
            out.append("\n")  # the guard around the inlined text does its work
            continue
        depth += 1 if _OPENS.match(code) else -1 if _CLOSES.match(code) else 0
        found = INCLUDE.match(code)
        header = found and found.group(1) and path.parent / found.group(1)
        if not header or not header.is_file() or not os.path.isabs(found.group(1)) and any(
                (d / found.group(1)).resolve() == header.resolve() for d in dirs):
            # not beside it, or the header a header folder gives by that name too (none gives an absolute
            # name), which the compiler may
            if found and library is not None:  # read again from there: the compiler's to include, hashed
                _library(path, found, searched or dirs, library, top, anchored, fixed, quoted)
            out.append(line)
            continue
        header_lines = _lines(header)
        header_codes = _code(header_lines)
        absolute = anchored or os.path.isabs(found.group(1))
        name, resolved = _name(header, top, absolute), header.resolve()
        pragma_once = any(_PRAGMA_ONCE.match(c) for c in header_codes)
        guarded = pragma_once or _include_guard(header_codes)
        rest = _after_include(line)  # a comment the include line opens goes on
        if resolved in once:
            out.append(rest)  # the compiler skips it: it was read in full already
            continue
        if resolved in within:
            if guarded:
                out.append(rest)  # the compiler skips it there: it is being read already
                continue
            raise KernelError(f"{path.name}: {header.name} includes itself, without a guard")
        inside_if = conditional or depth > guard
        inner = inline_includes(header, (*within, resolved), top, dirs, searched, read, library, once, inside_if,
                                absolute, fixed, quoted)
        if guarded and not inside_if:
            once.add(resolved)
        inner += "" if inner.endswith("\n") else "\n"
        if pragma_once:
            guard_name = "TB_ONCE_" + re.sub(r"\W", "_", name)
            inner = f'#ifndef {guard_name}\n#define {guard_name}\n#line 1 "{name}"\n{inner}#endif\n'
        else:
            inner = f'#line 1 "{name}"\n{inner}'
        here = _name(path, top, anchored)
        out.append(f'{inner}#line {number + 1} "{here}"\n' if rest == "\n" else f'{inner}#line {number} "{here}"\n{rest}')
    return "".join(out)


def _name(path: Path, top: Path, anchored: bool) -> str:
    """A file's name in an inlined text's #line markers (see :func:`inline_includes`)."""
    return os.path.normpath(path) if anchored else os.path.relpath(path, top)


def _computed(files: Mapping[Path, bool], dirs: tuple[Path, ...], values: Mapping[str, Sequence], top: Path,
              fixed: tuple[Path, ...] = (), copied_after: tuple[Path, ...] | None = None,
              quoted_after: tuple[Path, ...] | None = None, quoted: tuple[Path, ...] = (),
              defined: Callable[[], Mapping[str, Sequence[str]]] = dict) -> tuple[dict[Path, None], dict[Path, bool]]:
    """(the folders of the ``files`` holding a computed include, see :data:`COMPUTED_INCLUDE`;
    the headers such an include may read, to hash), each once, named as
    :func:`~tunebench.backends.base.folder_header` names them (a header linked into an include
    folder by the link's path: by its target's, named from the template's folder, it was another
    source in a checkout at another depth, and hashed twice; the file's folder resolved, as a
    checkout reached through a link named it through the link), each header with whether it
    is anchored (see :func:`_library`: ``files`` gives each file's; one beside a file of a
    folder linked by an absolute path is, see :func:`_linked_apart`, ``top`` the template's
    folder). An include of a
    param (``#include IMPL``) reads each header its ``values`` name (``'"impls/a.h"'``), found as
    the build finds it, with the headers it includes: where the files are read in place, a quoted
    one beside the file, then in ``quoted`` (the flags' -iquote folders), then in ``dirs``, an
    angle one in ``dirs`` alone; where ``quoted_after`` is given (gcc's copies), a quoted one in
    those folders (the flags' -iquote ones), then in the folders of the files holding one, in
    their order, then in ``dirs`` (gcc is given those folders as ``-iquote`` folders after the
    flags', see :func:`~tunebench.backends.cpu.copy_flags`, which ``<../common/x.h>`` never
    searches: searched beside it first, '"impl.h"' was hashed from the template's folder where
    gcc read it from an -iquote folder's, and one of a header inlined from sub/ from sub/, where
    gcc read the template's folder's); where
    ``copied_after`` is given (nvcc's copies, see :func:`~tunebench.backends.cuda.copy_flags`),
    either in those folders of ``dirs`` (the flags' -I folders), then the folders of the files
    (``-I`` folders after the flags'), then the rest (CPATH's, their -isystem folders), as
    nothing lies beside a copy: searched beside it first, '"../common/x.h"' was hashed from the
    template's folder where nvcc read it from an -I folder's. An include of a macro
    (``#define K_IMPL "impl.h"``) is one of a param of the values ``defined()`` gives it too
    (what the files and flags define it as, see :func:`_definitions`: asked for only where a
    file holds a computed include). One of a value naming no header (``STR(impl.h)``, another
    macro), or of none known, may read any header of any folder its build searches: beside the
    file, or a copy's, the flags' folders it searches ahead of the files' (``quoted_after``'s or
    ``copied_after``'s: named so, the template folder's impl.h was hashed where gcc read the
    flags' -iquote folder's), then those folders, then the rest of ``dirs`` (searched no
    further, ``-I ../inc``'s impl.h, which gcc read, was hashed by none: an edit of it kept the
    source hash, and its trials)."""
    holding = []  # each file holding a computed include: resolved as ``at`` below, whether anchored, the macros
    folders: dict[Path, bool] = {}  # their folders, in order, each with whether a file of it is anchored
    for file, anchored in ((f, a) for f, a in files.items() if f.suffix not in BINARY_SUFFIXES):
        at = file.parent.resolve() / file.name  # a link beside it by its path there, not through the checkout's
        macros = [found.group(1) for code in _code(file.read_text(encoding="utf-8", errors="replace").splitlines())
                  for found in [COMPUTED_INCLUDE.match(code)] if found]
        if macros:
            anchored = anchored or _linked_apart(file.parent, top)
            folders[at.parent] = folders.get(at.parent, False) or anchored
            holding.append((at, anchored, macros))
    copies = copied_after is not None or quoted_after is not None
    apart = (*fixed, *(folder for folder, anchored in folders.items() if anchored))  # a header of one named so
    # the flags' folders a copy's build searches ahead of the files' (one not there, it skips)
    ahead = [d for d in (copied_after if copied_after is not None else quoted_after) or () if d.is_dir()]
    headers: dict[Path, bool] = {}
    for at, anchored, macros in holding:
        for macro in macros:
            given = [*values.get(macro, ()), *defined().get(macro, ())]
            named = [m for v in given if isinstance(v, str) for m in [INCLUDE.match(f"#include {v}")] if m]
            # a value naming no header of the folders (``<IMPL_NAME>``, whose macro the preprocessor expands;
            # ``<memory_resource>``, a system one, beside which Thrust's header reads its folder's) tells nothing
            unknown = len(named) < len(given) or not given
            for include in named:
                after = copied_after if copied_after is not None else quoted_after if include.group(1) else None
                if after is None:  # gcc's angle one, or one of a file read in place
                    unknown |= folder_header(at, include, dirs, quoted) is None
                    _library(at, include, dirs, headers, top, anchored, fixed, quoted)
                else:  # looked for as an angle include is, in the folders alone: the files' among them, a link
                    # there named by its path
                    angle, order = (INCLUDE.match(f"#include <{include.group(1) or include.group(2)}>"),
                                    (*after, *folders, *(d for d in dirs if d not in after)))
                    unknown |= folder_header(at, angle, order) is None
                    _library(at, angle, order, headers, top, anchored, apart)
            if unknown:
                searched = [*ahead, *folders] if copies else [at.parent, *(d for d in quoted if d.is_dir())]
                searched += [d for d in dirs if d not in searched and d.is_dir()]
                headers.update({header: anchored if folder == at.parent and not copies
                                else folders.get(folder, folder in fixed)
                                for folder in searched for header in _folder_headers(folder)})
    return dict.fromkeys(folders), headers


def _folder_headers(folder: Path) -> list[Path]:
    """The headers a folder holds (by :data:`HEADER_SUFFIXES`), in name order, each named as
    :func:`~tunebench.backends.base.folder_header` names it: a file that is no link by its name
    in the folder resolved, which resolving each alone took seconds for a folder of hundreds
    searched for a computed include, in every variant; a link as that function names it."""
    real = folder.resolve()
    with os.scandir(folder) as entries:
        found = sorted((e.name, e.is_symlink()) for e in entries
                       if os.path.splitext(e.name)[1] in HEADER_SUFFIXES and e.is_file())
    return [folder_header(folder / name, INCLUDE.match(f'#include "{name}"'), (folder,)) if linked else real / name
            for name, linked in found]


def _definitions(files: Iterable[Path], flags: Sequence[str], nvcc: bool = False) -> dict[str, list[str]]:
    """Each macro the ``files`` ``#define`` (their text files) or the ``flags`` define (``-D``,
    ``--define-macro`` and gcc's abbreviations of it, ``--def``: see
    :func:`~tunebench.backends.base.option_values`; nvcc's ``-D=K``, and where ``nvcc`` reads the
    flags, each of a list, ``-DA=1,K_IMPL="impl.h"``, two macros to it, as it reads them (see
    :func:`~tunebench.backends.cuda.macro_list`); the preprocessor's own,
    ``-Wp,-DK=1``, see :func:`preprocessor_words`, or nvcc's host compiler's, ``-Xcompiler -DK=1``,
    see :func:`compiler_words`: ``1`` where given no value),
    with every value it is given, as written (a function-like macro's with its parameters): the
    headers an include of it (``#include K_IMPL``) may read, which the preprocessor alone knows
    for sure."""
    found: dict[str, list[str]] = {}
    for file in files:
        if file.suffix not in BINARY_SUFFIXES:
            for code in _code(file.read_text(encoding="utf-8", errors="replace").splitlines()):
                define = _DEFINE.match(code)
                if define:
                    found.setdefault(define.group(1), []).append(define.group(2).strip())
    # -Wp,-DK_IMPL="impl.h"; nvcc's -Xcompiler -DK_IMPL='"impl.h"'
    words = ([compiler_reads(word) for _, _, word in compiler_words(flags)] if nvcc
             else [word for _, _, word in preprocessor_words(flags)])
    # nvcc's own, not a word it gives its host compiler, read above (-Xcompiler -DK_IMPL='"impl.h"': as nvcc's,
    # its value '"impl.h"' named no header, and every header of every folder was hashed)
    own = [flag if not nvcc or compiler_value(flags, k) is None else "" for k, flag in enumerate(flags)]
    defined = [given.removeprefix("=") for given in option_values(own, "-D")]
    if nvcc:  # -DA=1,B=2; -DK_IMPL="impls/a,b.h", one
        from tunebench.backends.cuda import macro_list  # nvcc's reading: a floor below
        defined = [macro for given in defined for macro in macro_list(given)]
    for given in (*defined, *(given.removeprefix("=") for given in option_values(words, "-D"))):
        if given:
            name, equals, value = given.partition("=")
            found.setdefault(name, []).append(value if equals else "1")
    return found


def _computed_in(text: str, template: Path) -> dict[Path, None]:
    """The folders of the files an expanded source inlines (by its #line markers) that hold a
    computed include, each resolved and once: a recorded template's, whose build of a copy
    elsewhere found no header such an include reads beside them ("extra.h: No such file")."""
    return {(template.parent / name).parent.resolve(): None for name, lines in _by_file(text, template.name).items()
            if any(COMPUTED_INCLUDE.match(code) for code in _code(lines))}


def _library(path: Path, include: re.Match, dirs: tuple[Path, ...], found: dict[Path, bool], top: Path,
             anchored: bool = False, fixed: tuple[Path, ...] = (), quoted: tuple[Path, ...] = ()) -> None:
    """Add to ``found`` the header an include of ``path`` names where one of ``dirs`` holds it
    (a quoted one is looked for beside the file first, then in ``quoted``: see
    :func:`~tunebench.backends.base.header_place`), and every header that one includes, as
    far as they can be found, each once: the files a build reads from the folders, to hash. Each
    with whether it is anchored, named by its absolute path (see :meth:`Variant._named`), as what
    it is found from is: found in a folder of ``fixed`` (an absolute -I folder, a CPATH folder
    outside the project: see :meth:`Variant._anchored`), or beside an anchored file
    (``anchored`` is ``path``'s) wherever a "../" leads, or by a "../" leaving a folder linked
    apart from the checkout of ``top``, the template's folder (see :func:`_leaves_link`), it is;
    beside a relative folder's header, not.
    Where it lies does not tell: judged so, a checkout under the library's prefix (a CI runner's
    /opt/runner) named an absolute -I folder's "../../common/x.h" from the template's folder,
    and a "../" leaving a linked folder for a library installed apart was named so too: another
    source at another depth."""
    pending = [(path, include, anchored)]
    while pending:
        at, wanted, at_anchored = pending.pop()
        header = folder_header(at, wanted, dirs, quoted)
        if header is None or header in found:
            continue
        place = header_place(at, wanted, dirs, quoted)
        found[header] = reached = ((at_anchored if place == at.parent else place in fixed)
                                   or _leaves_link(place, wanted.group(1) or wanted.group(2), top))
        codes = _code(header.read_text(encoding="utf-8", errors="replace").splitlines())
        pending.extend((header, nested, reached) for nested in reversed([INCLUDE.match(c) for c in codes]) if nested)


def _linked_apart(folder: Path, top: Path) -> bool:
    """Whether a folder lies where it does through a folder linked apart (see :func:`_apart`)
    that does not hold ``top`` (stow's folded ``include/mylib`` of a package installed apart):
    the folder resolved is the link's target's, at one place on every machine, which named from
    the template's folder ("../../../stow/...") made a checkout at another depth another
    source. A link holding the checkout moves with it."""
    return any(_apart(d, top) for d in (folder, *folder.parents) if not top.is_relative_to(d))


def checkout_root(start: Path) -> Path | None:
    """The top of the git checkout holding ``start``: the nearest folder holding ``.git`` (a
    folder, or a file in a worktree or a submodule) below the home folder; None outside git. A
    ``.git`` of the home folder or above is a dotfiles repository, not the project's: taken for its
    checkout, a library installed apart under ``~/.local`` was named relative to each checkout."""
    home = Path.home()
    return next((d for d in (start, *start.parents)
                 if (d / ".git").exists() and not home.is_relative_to(d)), None)


def _apart(link: Path, top: Path) -> bool:
    """Whether ``link`` is a link by an absolute path to a place outside the checkout of ``top``
    (see :func:`checkout_root`; outside git, its project: :func:`project_root`): a package
    installed apart, at one place on every machine. A link by a relative path moves with the
    folder holding it, and one by an absolute path into the checkout (``ln -s
    $PWD/src/mylib include/mylib``, as CMake makes them; a monorepo's project's
    ``include`` linked to the checkout's ``common/include``, outside the project) leads to each
    checkout's own files: named by their absolute path, every checkout was another source."""
    return (link.is_symlink() and os.path.isabs(os.readlink(link))
            and not link.resolve().is_relative_to((checkout_root(top) or project_root(top) or top).resolve()))


def _leaves_link(place: Path, name: str, top: Path) -> bool:
    """Whether the first ".." of an include's name to leave a linked folder, from ``place``,
    leaves one linked apart (see :func:`_apart`: stow's folded ``include/mylib`` of a package
    installed apart, its ``x.h`` including "../detail/z.h"): the compiler reads beside the link's
    target, at one place on every machine."""
    at = place
    for part in Path(name).parts:
        if part == ".." and at.is_symlink():
            return _apart(at, top)
        at = at.parent if part == ".." else at / part
    return False


#: A ``#define``: the macro's name, and the rest (a function-like macro's parameters, its value).
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)(.*)$")
_OPENS = re.compile(r"^\s*#\s*if(?:n?def)?\b")
_CLOSES = re.compile(r"^\s*#\s*endif\b")
_GUARD_OPENS = re.compile(r"#\s*(?:ifndef\s+(\w+)|if\s+!\s*defined\s*(?:\(\s*(\w+)\s*\)|\s(\w+)))\s*$")
#: A string or character literal, or the start or end of a comment.
_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//|/\*|\*/')


def _lines(path: Path) -> list[str]:
    """A source file's lines as the compiler counts them (at newlines alone: Python's splitlines
    also splits at form feeds, and every #line marker after one was off by one). A file that is
    not UTF-8 text is a :class:`KernelError` naming it."""
    try:
        text = path.read_text(encoding="utf-8")  # not the locale's: a Latin-1 one hashed another text
    except UnicodeDecodeError as e:
        raise KernelError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}): tunebench reads a template and "
                          f"its headers as UTF-8") from None
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _after_include(line: str) -> str:
    """What follows an include on its line, where it opens a comment that goes on to the next
    lines (``#include "a.h" /* helpers,`` ...), which must stay open; else a newline."""
    include = INCLUDE.match(line)
    opens = _code([line, "x"])[1] == ""  # the line after it is in the comment
    return line[include.end():] if include and opens else "\n"


def _include_guard(codes: list[str]) -> bool:
    """Whether a header's directives (its lines as :func:`_code` gives them) are an include guard
    around all of it: ``#ifndef X`` (or ``#if !defined(X)``) and ``#define X`` first (after a
    ``#pragma once``), the ``#endif`` that closes them last, and no ``#else`` or ``#elif`` of
    theirs between. A header that begins with a default (``#ifndef BLOCK`` / ``#define BLOCK 256``
    / ``#endif``), or an X-macro file, is read again at each include."""
    lines = [c.strip() for c in codes if c.strip() and not _PRAGMA_ONCE.match(c)]
    opening = _GUARD_OPENS.match(lines[0]) if len(lines) > 2 else None
    if opening is None or not re.match(rf"#\s*define\s+{next(filter(None, opening.groups()))}\b", lines[1]):
        return False
    depth = 0
    for i, line in enumerate(lines):
        depth += 1 if _OPENS.match(line) else -1 if _CLOSES.match(line) else 0
        if depth == 1 and re.match(r"#\s*(else|elif)\b", line):
            return False
        if depth == 0:
            return i == len(lines) - 1
    return False


def _code(lines: list[str]) -> list[str]:
    """Each line with its comments taken out (a ``/* */`` comment may span lines), and a line
    that continues the one before it (a backslash at its end, in a ``//`` comment too) blanked,
    to read the preprocessor's directives from: an ``#include`` in a comment or a macro is none."""
    out, comment, continued = [], False, False
    for line in lines:
        kept, at = [], 0
        while at < len(line):
            if comment:
                end = line.find("*/", at)
                if end < 0:
                    break
                comment, at = False, end + 2
                kept.append(" ")
                continue
            token = _TOKENS.search(line, at) if "/" in line or '"' in line or "'" in line else None
            if token is None:
                kept.append(line[at:])
                break
            kept.append(line[at:token.start()])
            if token.group() == "//":
                break
            if token.group() == "/*":
                comment = True
            else:
                kept.append(token.group())  # a literal, kept whole: a "/*" in it opens no comment
            at = token.end()
        out.append("" if continued else "".join(kept))
        continued = not comment and line.rstrip("\r\n").endswith("\\")
    return out


_LINE_MARK = re.compile(r'^#line \d+ "([^"]+)"$')
#: What :attr:`Variant.template` keeps of a file the compiler reads where it is: its hash.
_HASH_ALONE = re.compile(r"/\* built with this (?:file of the flags|header of the include folders): "
                         r"sha256 (\w+) \*/$")


#: Seconds between checks that a template's files are unchanged (as lookups check the records).
REREAD_S = 1.0
_PINNED = [0]  # runs measuring in this process now (a tune, a gate): templates keep the text they read


def pin_templates(measuring: bool) -> None:
    """A tune or a gate measures one text of each template from its start to its end (one run
    more, or one fewer): read again midway, an edit made during a tune had its trials, builds and
    final round recorded under the declaration of the text the run began with."""
    _PINNED[0] = max(0, _PINNED[0] + (1 if measuring else -1))


def _stamps(files: tuple[Path, ...], since: int) -> tuple | None:
    """Each file's size, times and inode now (None where it is gone): an edit, a checkout or a
    copy over it changes them. None where one is racy for a read begun at ``since`` (see
    :mod:`tunebench.stamps`): an edit may follow unseen by them (an editor's second save)."""
    found = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            found.append(None)
            continue
        if racy(st, since):
            return None
        found.append((st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns))
    return tuple(found)


def changed_files(before: str, after: str, template: str) -> list[str]:
    """The files, the template or a header it inlines (:func:`inline_includes`' #line markers
    name them), whose text differs between two expanded sources: where an edit lies, for a note
    that would otherwise name the template alone."""
    old, new = _by_file(before, template), _by_file(after, template)
    return sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))


def comment_edits(before: str, after: str, template: str, texts: Mapping[str, str], language: str,
                  flags: Sequence[str]) -> list[str] | None:
    """The files (see :func:`changed_files`) whose comments or whitespace alone changed between
    two expanded sources, where no code did (see :func:`~tunebench.comments.code_of`): the same
    files, each kept as its hash alone compared by its text in ``texts`` (by hash: the records'
    and today's), the rest as the expanded text. A #line marker's number is left out (tunebench's,
    and one of the template's own written as they are), as a comment line moves it, and
    ``__LINE__`` with it: the code a trial ran is the same, its line numbers apart. None where code changed, or a changed file's text is not in ``texts``
    (records from before they were kept, a binary file), or gcc cannot lex one, or the build's
    ``flags`` read comments otherwise (see :func:`~tunebench.comments.lexed_alike`): another source."""
    edited = changed_files(before, after, template)
    if not edited or not lexed_alike(flags) or _by_file(before, template).keys() != _by_file(after, template).keys():
        return None
    old, new = hashed_files(before, template), hashed_files(after, template)
    apart = [file for file in edited if file in old or file in new]
    if any(old.get(file) not in texts or new.get(file) not in texts for file in apart):
        return None
    for a, b in [(before, after), *((texts[old[file]], texts[new[file]]) for file in apart)]:
        found = code_of(_unnumbered(a), language)
        if found is None or found != code_of(_unnumbered(b), language):
            return None
    return edited


def _unnumbered(text: str) -> str:
    """An expanded source with each #line marker's number left out: the file it names stays."""
    return "\n".join(f'#line "{mark.group(1)}"' if (mark := _LINE_MARK.match(line)) else line
                     for line in text.split("\n"))


def unkept_files(before: str, after: str, template: str) -> list[str]:
    """The files that either expanded source keeps as its hash alone (a file of the flags, a
    header of the include folders: see :attr:`Variant.template`) and the other does not, or
    hashes otherwise: a build of ``before``, read from the files as they are when ``after`` was
    expanded, is not the build ``before`` names."""
    old, new = _by_file(before, template), _by_file(after, template)
    return sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name)
                  and any(lines and all(_HASH_ALONE.match(line) for line in lines)
                          for lines in (old.get(name), new.get(name))))


def hashed_files(text: str, template: str) -> dict[str, str]:
    """The files an expanded source keeps as their hash alone (see :attr:`Variant.template`),
    each with that hash: what a build of it reads where it lies, as it was."""
    return {name: found[-1].group(1) for name, lines in _by_file(text, template).items()
            for found in [[_HASH_ALONE.match(line) for line in lines]] if found and all(found)}


def kept_variant(built: Variant, texts: Mapping[str, str]) -> Variant:
    """``built`` as it builds reading ``texts`` (the records' texts of files edited since the
    tune, by path from its template's folder) in their place: each written to a folder of this
    host's compile cache at its own path (a cluster's device has not the driver's), a file of the
    flags named there, and each header folder's copy searched ahead of every folder of the build
    (see :func:`_copies_first`; a header including ``"sub/x.h"`` or a sibling finds the copy), as
    is each computed include's folder's (made where no copy lies in it, for its
    ``"../impls/a.h"``) and that of each folder the tune's compiler found a header in of its own
    (CPATH: see :func:`_own_folders`); an ``-include`` file the compiler found along its include
    path is named by its copy's path (gcc looks in its working folder ahead of every folder); a
    file a "../" reaches through a linked folder is copied where that "../" leads from the copy
    too (see :func:`_through_links`). Each other file the template hashes is copied as it lies
    where it still hashes as recorded (see :func:`_untexted`), and a copy of a system folder's
    header is marked one (see :func:`_as_system`). The folder is named by what it holds: written
    once."""
    copies = {_where(built, file): text for file, text in texts.items()}
    copies.update(_untexted(built, texts, copies))
    written = _as_system(built, {**copies, **_through_links(copies)})
    name = hashlib.sha256(json.dumps({str(path): text for path, text in written.items()},
                                     sort_keys=True).encode()).hexdigest()[:16]
    folder = BuildCache().copies(written, name, built.computed_include_dirs)
    copied = {}  # each file the flags name whose copy is kept: the copy
    for p, named in zip(built._paths, built._named_paths):
        if named.kind not in ("file", "include"):
            continue
        path = p if p is not None else Path(named.given)
        if named.kind == "include" and named.given in built._compilers_files:  # named bare, the build's working
            path = _compilers_file(built, named.given, copies)  # folder's file of the name was read ahead of the copy
        copy = folder / path.relative_to(path.anchor) if path is not None and path.is_absolute() else None
        if copy is not None and copy.exists():
            copied[named] = copy
    written = written_flags(built.flags, [  # each file by its copy where kept, else as the build names it
        (named, spelt(built.flags, named, copied.get(named, p), built.launch is not None))
        for p, named in zip(built._paths, built._named_paths)
        if named.kind != "system" and (p is not None or named in copied)])
    flags = (*_copies_first(built, folder, copies), *(flag for each in written for flag in each))
    return dataclasses.replace(built, flags=flags)


def _untexted(built: Variant, texts: Mapping[str, str], copies: Mapping[Path, str]) -> dict[Path, str]:
    """Each file the template ``built`` keeps as its hash alone whose text the records do not keep
    (one not UTF-8, one past :data:`~tunebench.records.FILE_TEXT_BYTES`: a vendored library's)
    and that has the name of one of ``copies`` (the kept texts'), as it lies, by its path, where
    its bytes still hash as recorded (as "surrogateescape" reads them; one that does not is a file
    :func:`unkept_files` names, and the recorded source is not built). Without its copy, a header
    of its name with a copy in a folder the tune searched later was read in its place (``-Ia
    -Ib``: ``<x.h>`` read a's, b/y.h's "x.h" b's, whose copy alone, searched ahead of every
    folder, was then read for both). A copy is read in place of a file of another name by no
    include, so those are left where they lie: copied too, a vendored library's were written
    and scanned whole for each edit of one header (seconds per build, megabytes per edit)."""
    names = {path.name for path in copies}
    found = {}
    for file, digest in hashed_files(built.template, built.path.name).items():
        path = _where(built, file)
        if file in texts or path.name not in names or path.suffix in BINARY_SUFFIXES:
            continue
        try:
            content = path.read_bytes()
        except OSError:
            continue
        if hashlib.sha256(content.replace(b"\r\n", b"\n")).hexdigest()[:16] == digest:  # as it was hashed
            found[path] = content.decode("utf-8", "surrogateescape")
    return found


#: What a copy of a system folder's header begins with: gcc, clang and nvcc's host compiler read it
#: as a system header (no warning of it), its lines numbered as the file's (the source line gcc
#: quotes under a diagnostic is the copy's of that number, two above it).
SYSTEM_HEADER = "#pragma GCC system_header\n#line 1\n"


def _as_system(built: Variant, copies: Mapping[Path, str]) -> dict[Path, str]:
    """``copies`` (texts by the path they copy), each marked a system header
    (:data:`SYSTEM_HEADER`) where the tune's build read it from a system folder (the deepest folder
    of its search holding it is one of :meth:`Variant._system_searched`: -isystem, -idirafter,
    C_INCLUDE_PATH, not CPATH; the folders found once for all copies): the copy is searched from an -I folder (see :func:`_copies_first`), so a header that warns under
    ``-Wall -Werror`` failed the recorded build, and the gate compared nothing with it. A file
    the flags name (an input source is no header) is left as it is. A UTF-8 BOM stays first: the
    mark ahead of it was a "stray '#'" to gcc, clang and nvcc."""
    system = built._system_searched()
    computed = built.computed_include_dirs
    folders = (*system, *built._quoted(computed), *built._searched(computed), built.path.parent.resolve())

    def marked(path: Path, text: str) -> str:
        holding = max((d for d in folders if path.is_relative_to(d)), key=lambda d: len(d.parts), default=None)
        if holding not in system or path in built.flag_files:
            return text
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        return bom + SYSTEM_HEADER + text[len(bom):]
    return {path: marked(path, text) for path, text in copies.items()}


def _copies_first(built: Variant, folder: Path, copies: Mapping[Path, str]) -> tuple[str, ...]:
    """The flags that search the copy in ``folder`` of each header folder of the tune's build
    that holds one (see :func:`kept_variant`) ahead of every folder of the build, in the order
    the tune's build searched them. Each copy searched just ahead of its own folder, a header of
    the name the tune read, added since to a folder searched earlier (``-Ia -Ib``, b's x.h read,
    then an x.h in a; one in the flags' -I folder, CPATH's read), was read in its place, and the
    gate passed a slower one as the recorded build "with b/x.h as tuned". An -I copy of each
    folder an angle include searches (the flags' -I folders, CPATH's, the flags' -isystem and
    -idirafter ones, whose copies are -I folders, gcc searching no system folder ahead of an -I
    one: their headers' copies are marked system headers, see :func:`_as_system`), and,
    where quoted includes search folders of their own (-iquote, a CPU variant's computed
    includes': see :attr:`Variant.computed_include_dirs`), an -iquote copy of those and then of
    every other. nvcc's host compiler, which preprocesses the device code, is given them as
    -Xcompiler words, which it reads ahead of nvcc's own -I folders. The tune's own folders are
    the records' (see :func:`_own_folders`), after those of today that it shares."""
    computed = built.computed_include_dirs
    quoted = built._quoted(computed)
    bracketed = (*built._searched(computed), *_own_folders(built, copies))

    def kept(folders: Iterable[Path]) -> list[Path]:
        return [copy for d in dict.fromkeys(folders) for copy in [folder / d.relative_to(d.anchor)] if copy.is_dir()]

    ahead = [*(("-iquote", copy) for copy in (kept((*quoted, *bracketed)) if quoted else ())),
             *(("-I", copy) for copy in kept(bracketed))]
    if built.launch is None:
        return tuple(option + str(copy) for option, copy in ahead)
    return ("-Xcompiler", ",".join(option + compiler_word(copy) for option, copy in ahead)) if ahead else ()


def _through_links(copies: Mapping[Path, str]) -> dict[Path, str]:
    """The text of each kept file that a quoted include of another reaches through a linked
    folder, by where the include leads from the other's copy: stow's folded ``include/mylib``, its
    ``x.h`` including "../detail/z.h", which the compiler reads beside the link's target. The
    copy of the linked folder is a plain one, so from the copy of x.h "../detail/z.h" led to no
    copy ("No such file") or, past it, to a file of that name beside the link (a decoy, never
    tuned), and a z.h edited since was not built as recorded. Followed on from each such copy."""
    real = {path.resolve(): text for path, text in copies.items()}
    found: dict[Path, str] = {}
    pending = [(path, path, text) for path, text in copies.items()]  # (where a copy lies, the file it copies, text)
    while pending:
        copy, file, text = pending.pop()
        for name in (m.group(1) for m in map(INCLUDE.match, _code(text.split("\n"))) if m and m.group(1)):
            read, led = (file.parent / name).resolve(), Path(os.path.normpath(copy.parent / name))
            if read in real and led not in copies and led not in found:
                found[led] = real[read]
                pending.append((led, read, real[read]))
    return found


def _compilers_file(built: Variant, name: str, copies: Mapping[Path, str]) -> Path | None:
    """The kept file an -include flag the compiler is left to find (see
    :attr:`Variant._compilers_files`) read, from the records alone: one whose path ends in the
    name, the first along the chain the compiler looks in (the working folder, then the include
    path) where several do (inc/cfg.h including "sub/cfg.h"); None where none is kept."""
    chain = (*filter(None, [_working_folder()]), *built._quoted(), *built._searched())
    return min((path for path in copies if path.as_posix().endswith("/" + name)), default=None,
               key=lambda path: next((i for i, d in enumerate(chain) if path == d / name), len(chain)))


def _working_folder() -> Path | None:
    """The folder the run started from, where the compiler looks first for the file of an -include
    flag it is left to find (see :attr:`Variant._compilers_files`); None where it was deleted,
    whose files it finds none of: Path.cwd() raising failed the hash of every such flag
    ("None: cannot be read")."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        return None


def _own_folders(built: Variant, copies: Mapping[Path, str]) -> dict[Path, None]:
    """The folders the tune's compiler found the kept files of no flag in of its own (CPATH,
    C_INCLUDE_PATH: see :func:`~tunebench.backends.base.own_include_dirs`), from the records
    alone: a kept file's path less the name an ``#include`` of the recorded texts, or an
    -include flag the compiler is left to find (see :attr:`Variant._compilers_files`), gives it
    (``<mylib/x.h>`` of ``/opt/inc/mylib/x.h``: ``/opt/inc``). Today's folders were the
    gate's: tuned with CPATH=mylib/1.2/include, gated with 1.3's, the recorded build read 1.3's
    header."""
    given = (*built.include_dirs, *built.flag_files)
    operands = {*built._compilers_files, *(m.group(1) or m.group(2) for text in (built.template, *copies.values())
                                           for m in map(INCLUDE.match, text.splitlines()) if m)}
    return {Path(path.as_posix()[:-len(operand) - 1]): None for path in copies
            if not any(path.is_relative_to(d) for d in given)
            for operand in sorted(operands) if path.as_posix().endswith("/" + operand)}


def _where(built: Variant, name: str) -> Path:
    """The file a name of an expanded source stands for (see :meth:`Variant._named`): made from
    resolved paths, it is joined, not resolved again, so a header linked into an include folder
    (see :func:`~tunebench.backends.base.folder_header`) is copied where the link lies, and the
    copy of the folder finds it."""
    return Path(os.path.normpath(built.path.parent.resolve() / name))


def _by_file(text: str, template: str) -> dict[str, list[str]]:
    """An expanded source's lines, by the file its #line markers name (the template before any)."""
    files, current = {template: []}, template
    for line in text.splitlines():
        mark = _LINE_MARK.match(line)
        if mark:
            current = mark.group(1)
            files.setdefault(current, [])
        else:
            files[current].append(line)
    return files


_UNSET = object()


class _cached(cached_property):
    """``functools.cached_property`` without Python 3.11's lock, one per property shared by every
    instance: a DataLoader's worker forked while a thread of its parent read any variant's files
    waited for ever on it at its own first lookup. Two threads computing a value at once both
    compute it, as 3.12's does."""

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        found = instance.__dict__.get(self.attrname, _UNSET)
        if found is _UNSET:
            found = instance.__dict__[self.attrname] = self.func(instance)
        return found


@dataclass(frozen=True)
class Variant:
    """One target's implementation of a kernel.

    - ``source``: the template, a path relative to the declaring file's folder or one of its
      parents (so ``"kernels/row_reduce.c"`` works from ``suites/``); each param of a config is
      prepended as ``#define name value``, and the dtype as ``#define TB_DTYPE <C type>`` (at a
      ``// tunebench: params`` line instead, where the template has one). On the CPU a
      ``.cpp``/``.cc``/``.cxx`` template is C++, any other C (built by gcc with C's TB_DTYPEs under
      the flags' ``-x c++`` too, which has gcc read it as C++, in C++'s standard). Never the code
      itself (a Kernel Tuner script's ``kernel_string``), which is refused saying to write it to a
      file.
    - ``entry``: the function to call.
    - ``space``: the candidate configs.
    - ``heuristic``: ``shape -> config``, the rule of thumb a framework uses today (the baseline).
    - ``dtypes``: the dtypes tuned on this target.
    - ``launch``: CUDA only (a cpu variant with one is refused), ``(config, shape) -> (grid,
      block)``, each an int or a tuple of up to three, or ``(grid, block, shared_bytes)`` for the
      dynamic shared memory (``extern __shared__``) of each block; the entry point is an ``extern
      "C" __global__`` function, or a ``__global__`` template instantiated once per build, named
      without its template arguments.
    - ``flags``: extra compiler flags, a tuple (``("-O2",)``). Header folders (``-Idir`` or ``-I
      dir``, ``-iquote``, ``-isystem``, ``-idirafter``) are read from the declaring file's
      folder, and their headers inlined (see :attr:`template`); files (``-include file``,
      ``-imacros file``, and input files compiled or linked with the template: an argument of no
      option ending ``.c``, ``.cc``, ``.cpp``, ``.cxx``, ``.cu``, ``.o``, ``.a`` or ``.so``) are
      found from that folder upwards, as the template is, and their content is part of the
      source hash: an edited one is built and measured again (an -include or -imacros file
      not found so is the compiler's to find, in the folder the run started from, then on its
      include path: one found there or in a header folder of the flags or CPATH is hashed as
      their headers are). Other paths in flags (``-L``) are
      the compiler's, from wherever the run started, and not hashed.
    - ``buckets``: this target's own buckets, where its representative shapes must differ from
      the kernel's (a GPU needs far larger shapes than a CPU to reach its bandwidth).
    - ``arch_specific``: CUDA only, built for the device's architecture-specific target
      (``sm_90a`` on an H100, whose ``wgmma``, ``setmaxnreg`` and TMA multicast ``sm_90`` lacks);
      such a cubin runs only on that architecture, and one without such a target (before
      compute capability 9.0) cannot build it.
    """

    source: str | Path
    entry: str
    space: Space
    heuristic: Callable[[tuple], Mapping[str, Any]]
    dtypes: tuple[str, ...] = ("float32",)
    launch: Callable[[Mapping[str, Any], tuple], tuple] | None = None
    flags: tuple[str, ...] = ()
    buckets: Buckets | None = None
    arch_specific: bool = False
    origin: Path | None = field(default=None, compare=False)
    text: str | None = None  # a recorded version of the template, used instead of the file

    def __new__(cls, *args, **kwargs):
        refuse_ported("a Variant", kwargs, KernelError)  # grid_div_x=, restrictions=: else Python's bare TypeError
        return super().__new__(cls)

    def __post_init__(self):
        if isinstance(self.source, str) and ("\n" in self.source or "{" in self.source and "(" in self.source):
            # a Kernel Tuner script's kernel_string, ported: else "not found", the whole code quoted as a path (a
            # path may hold braces, "kernels/{gen}/add.cu": code has a parenthesis too)
            first = next((line.strip() for line in self.source.splitlines() if line.strip()), "")
            raise KernelError(f"variant {self.entry!r}: source is the template's file, not its code (given "
                              f"{first[:60]!r}...): write the code to a file beside the suites, "
                              f"kernels/{self.entry}.cu (.c on the CPU), and give its path, "
                              f"source=\"kernels/{self.entry}.cu\"")
        if isinstance(self.dtypes, str) or not all(isinstance(d, str) for d in self.dtypes):
            raise KernelError(f"variant {self.source}: dtypes={self.dtypes!r} must be a tuple of dtype names, "
                              f"as ('float32', 'float16')")
        if isinstance(self.flags, str) or not all(isinstance(f, str) for f in self.flags):  # ("-O2") is a str
            raise KernelError(f"variant {self.source}: flags={self.flags!r} must be a tuple of flags, as ('-O2',)")
        for dtype in self.dtypes:
            try:
                numpy_dtype(dtype)
            except ValueError as e:
                raise KernelError(f"variant {self.source}: {e}") from None

    @_cached
    def path(self) -> Path:
        """The template file, looked up from the declaring file's folder upwards."""
        return self._found(self.source, "source")

    def _found(self, given: str | Path, what: str) -> Path:
        """A file named from the declaring file's folder or one of its parents, or absolute."""
        p = Path(given)
        if p.is_absolute():
            found = p if p.exists() else None
        else:
            start = self.origin or Path.cwd()
            found = next((d / p for d in (start, *start.parents) if (d / p).is_file()), None)
        if found is None:
            raise KernelError(f"{what} {str(given)!r} not found from {self.origin or Path.cwd()} upwards")
        return found

    @_cached
    def _named_paths(self) -> list[Named]:
        """Each path its flags name (see :func:`flag_paths`), as its compiler reads the flags: a
        CUDA variant's (one with a launch) as nvcc does (``--pre-include a.h,b.h``)."""
        return flag_paths(self.flags, nvcc=self.launch is not None)

    @_cached
    def _paths(self) -> tuple[Path | None, ...]:
        """Each path of :attr:`_named_paths` resolved as the template is, not from wherever the
        run started: a folder from the declaring file's folder, a file from there upwards; None
        for an -include file the compiler is to find (see :meth:`_local`)."""
        base = self.origin or Path.cwd()
        return tuple((base / named.given).resolve() if named.kind in ("dir", "system")
                     else self._local(named.given) if named.kind == "include"
                     else self._found(named.given, f"variant {self.source}: the file of flags").resolve()
                     for named in self._named_paths)

    def check_folders(self) -> None:
        """A :class:`KernelError` where a header folder its flags name, relative, is not there. The
        compiler skips such a folder, so a project's ``-Ikernels/include`` written from the
        project's root, not the suite's folder, built nothing but "header not found" errors, each
        config's own (or, where a header of the name was found elsewhere, that other header). Asked
        for the target a run builds alone: another target's folder (a submodule a CPU-only CI does
        not check out) is that machine's. A folder given whole may be another machine's (a
        toolkit's), and is not checked. A folder an ``-include`` names (see :meth:`_included_folder`) is
        an error too, as is a path nvcc takes no spelling of (see
        :func:`~tunebench.backends.cuda.option_path`)."""
        base = self.origin or Path.cwd()
        for named, found in zip(self._named_paths, self._paths):
            if named.kind == "include":
                self._included_folder(named)
                continue
            if named.kind not in ("dir", "system") or os.path.isabs(named.given) or found.is_dir():
                continue
            near = next((d / named.given for d in (*base.parents, Path.cwd()) if (d / named.given).is_dir()), None)
            moved = spelt(self.flags, named, os.path.relpath(near, base), self.launch is not None) if near else ""
            hint = f"; {near} is: write {as_written(self.flags, named, moved)}" if near else ""
            raise KernelError(f"variant {self.source}: flag {as_written(self.flags, named)} names no folder: {found} "
                              f"does not exist (a folder in flags is taken from the declaring file's folder, {base})"
                              f"{hint}")
        try:  # a path nvcc takes no spelling of: one error, not every config's build
            self.build_flags  # spelt for the compiler here
        except KernelError as e:
            raise KernelError(f"variant {self.source}: {e}") from None

    def _included_folder(self, named: Named) -> None:
        """A :class:`KernelError` where an ``-include`` or ``-imacros`` flag names a folder by a path
        (written with a ``/`` at its end, or one found as its file would be, from the declaring
        file's folder upwards): the compiler reads one file ahead of the template, and said only
        "fatal error: include/: No such file or directory", in every config's build. A bare name
        is the compiler's to find: it skips a folder of that name (``-include memory`` beside a
        ``memory/`` folder reads <memory>). It names the flags as written (``-Wp,-include,inc/,-DX``)
        and a header in the folder spelt alike (``-Wp,-include,inc/<header>.h,-DX``; see
        :func:`as_written`): told the option before the path's flag (``-Xpreprocessor``) or the flag
        cut at the path (``-Wp,-include,``), the user was shown a flag gcc does not take."""
        given = named.given
        if "/" not in given:
            return
        path = Path(given)
        start = self.origin or Path.cwd()
        found = next((d for d in ([path] if path.is_absolute() else [d / path for d in (start, *start.parents)])
                      if d.is_dir()), None)
        if found is None and not given.endswith("/"):
            return
        folder = os.path.relpath(found, start) if found and not path.is_absolute() else given.rstrip("/")
        where = f" ({found})" if found else ""
        header = as_written(self.flags, named,
                            f"{spelt(self.flags, named, folder, self.launch is not None)}/<header>.h")
        searched = folder
        if self.launch is not None:  # nvcc's -I takes a list: spelt as it reads one folder
            from tunebench.backends.cuda import option_path  # a floor below
            searched = option_path(folder)
        raise KernelError(f"variant {self.source}: flag {as_written(self.flags, named)} names a "
                          f"folder{where}, and {named.option} reads one file ahead of the template: name a header in "
                          f"it ({header}), or search it for the template's #include lines with -I{searched}")

    def _local(self, given: str) -> Path | None:
        """The file an -include/-imacros flag names, where it is the project's; None where the
        compiler is to find it (``-include math.h``)."""
        try:
            return self._found(given, "").resolve()
        except KernelError:
            return None

    @_cached
    def _compilers_files(self) -> tuple[str, ...]:
        """The names its -include/-imacros flags give that :meth:`_local` leaves to the compiler,
        which looks for them on its include path (see :meth:`_expanded`): ``-I ../inc -include
        cfg.h`` reads inc/cfg.h, hashed as a header of the folder; ``-include math.h`` the system's.
        An empty name (``-include ""``) is none: the compiler's to refuse."""
        return tuple(named.given for p, named in zip(self._paths, self._named_paths)
                     if named.kind == "include" and p is None and named.given and '"' not in named.given)

    @_cached
    def include_dirs(self) -> tuple[Path, ...]:
        """The folders of the project's headers its flags name (``-Idir``, ``-I dir``, ``-iquote``)."""
        return tuple(p for p, named in zip(self._paths, self._named_paths) if named.kind == "dir")

    def _given_by(self, options: tuple[str, ...], kinds: tuple[str, ...] = ("dir",)) -> tuple[Path, ...]:
        """Those of :attr:`include_dirs` an option of ``options`` names (``-isystem ../inc``); with
        ``kinds`` ``("dir", "system")``, a system's folder too (``-isystem /usr/include``: see
        :func:`flag_paths`)."""
        return tuple(p for p, named in zip(self._paths, self._named_paths)
                     if named.kind in kinds and named.option in options)

    def _searched(self, copied: tuple[Path, ...] = ()) -> tuple[Path, ...]:
        """The folders the compiler looks for a header in (an angle include's; a quoted one's after
        its file's folder and :meth:`_quoted`) of :attr:`include_dirs` and its own, in its order,
        as ``gcc -v -E`` lists it (clang's and nvcc's alike): the flags' -I folders, CPATH's (read
        as -I folders after the flags'), then :meth:`_system_searched`'s. In the flags' order
        with CPATH's after them, a header of an -isystem folder was hashed where CPATH's of the
        name was built: an edit of the one built kept the source hash, and its trials. A folder
        given twice is searched once, as the compiler keeps it ('ignoring duplicate directory'):
        at its first place, and one given as a system's too at that place alone (CPATH naming an
        -isystem folder of the flags left it ahead of the -isystem folders before it, whose
        header gcc built). A CUDA variant's build of its copy searches the folders ``copied`` of its
        computed includes too, as -I folders after the flags' (see
        :func:`~tunebench.backends.cuda.copy_flags`)."""
        cpath = own_include_dirs(self.language, PATH_ENV[self.language][:1])
        system = self._system_searched()
        users = (*self.include_dirs, *own_include_dirs(self.language))
        added = copied if self.launch is not None else ()
        return (*dict.fromkeys(d for d in (*self._bracketed(), *added, *cpath) if d not in system),
                *(d for d in system if d in users))

    def _bracketed(self) -> tuple[Path, ...]:
        """The flags' -I folders as the compiler searches them (see :meth:`_searched`), each once,
        none it searches as a system's: a CUDA copy's computed-include folders are searched after
        them. Taken from the flags alone, an -I folder C_INCLUDE_PATH or CPLUS_INCLUDE_PATH names too,
        which the compiler searches after the -isystem folders, was searched ahead of them."""
        system = self._system_searched()
        return tuple(dict.fromkeys(d for d in self._given_by(("-I",)) if d not in system))

    def _system_searched(self) -> tuple[Path, ...]:
        """The folders the compiler searches as a system's, in its order, each at its first place:
        the flags' -isystem folders, C_INCLUDE_PATH's or CPLUS_INCLUDE_PATH's (read as -isystem
        folders after the flags'; see :data:`~tunebench.backends.base.PATH_ENV`), the flags'
        -idirafter folders. Those given by an absolute path (a system's, whose headers are no part
        of the source) count: a folder of the project or of CPATH one repeats is searched at its
        place (``-I../v -isystem ../s -isystem $PWD/v``: gcc read s's header, the hash named v's)."""
        language_path = own_include_dirs(self.language, PATH_ENV[self.language][1:])
        return tuple(dict.fromkeys((*self._given_by(("-isystem",), ("dir", "system")), *language_path,
                                    *self._given_by(("-idirafter",), ("dir", "system")))))

    def _quoted(self, copied: tuple[Path, ...] = ()) -> tuple[Path, ...]:
        """The folders the compiler looks for a quoted include's header in alone, after its file's
        folder and ahead of :meth:`_searched`'s: the flags' -iquote folders (``gcc -v -E`` lists
        them apart, the '#include "..."' chain; gcc searches one given as a system's too, by the
        flags or C_INCLUDE_PATH, there alone, and so nvcc, which reads the template with g++;
        clang keeps it here too, see :func:`~tunebench.backends.cpu.quotes_system_folders`).
        Taken for -I folders, in the flags' order, one named ``<scale.h>`` was hashed from an
        -iquote folder, which gcc never searches for it, and ``"scale.h"`` from an -I folder the
        flags give first, where gcc read the -iquote folder's. A CPU variant's build of its copy
        searches the folders ``copied`` of its computed includes too, as -iquote folders after the
        flags' (see :func:`~tunebench.backends.cpu.copy_flags`)."""
        from tunebench.backends import cpu  # the CPU target's compiler: a floor below
        kept = self.launch is None and cpu.quotes_system_folders(cpu.language(self))  # the build's, whatever -x
        system = () if kept else self._system_searched()
        added = () if self.launch is not None else copied
        return tuple(dict.fromkeys(d for d in (*self._given_by(("-iquote",)), *added) if d not in system))

    @_cached
    def flag_files(self) -> tuple[Path, ...]:
        """The files its flags name (``-include`` and ``-imacros`` files, input files): their
        content is the build's as much as the template's (see :attr:`template`)."""
        return tuple(p for p, named in zip(self._paths, self._named_paths)
                     if named.kind in ("file", "include") and p is not None)

    @_cached
    def _absolute(self) -> tuple[Path, ...]:
        """The folders and files its flags name by an absolute path (a library installed apart from
        the project): the same path in every checkout, where one from the suite's folder is not;
        and the folders they name through a folder linked apart (the project's
        include/ a link to ``/opt/mylib/include``, see :func:`_linked_apart`), which the compiler
        reads at the link's target: named from the template's folder ("../../../opt/..."), a
        checkout at another depth was another source."""
        base = self.origin or Path.cwd()
        return tuple(p for p, named in zip(self._paths, self._named_paths)
                     if p is not None and (os.path.isabs(named.given) or named.kind == "dir"
                                           and _linked_apart(base / named.given, base)))

    def _anchored(self, path: Path, own: tuple[Path, ...] = ()) -> bool:
        """Whether a file the build reads lies under a folder or file its flags give absolute, or
        under one of ``own``, the folders the compiler searches of its own (see
        :func:`~tunebench.backends.base.own_include_dirs`), outside the project and every folder
        its flags give: a CI script's ``export CPATH=$PWD/include`` beside ``-I../include`` named
        the project's header by the checkout's path, and no other checkout had its source. A file
        outside all of these (a "../common/x.h" of a header there) is anchored as the header it
        is reached from is (see :func:`_library`)."""
        if any(path.is_relative_to(given) for given in self._absolute):
            return True
        if not any(path.is_relative_to(d) for d in own):
            return False
        base = self.origin or Path.cwd()
        return not any(path.is_relative_to(d) for d in (*self.include_dirs, (project_root(base) or base).resolve()))

    def _named(self, path: Path, base: Path | None = None, own: tuple[Path, ...] = (), anchored: bool = False) -> str:
        """A file the build reads where it lies (resolved), as the declaration and the template name
        it: from ``base``, a folder resolved (the template's, resolved, where None: unresolved, a
        checkout reached by a symlink named an -I folder's header "../../real/p/include/x.h";
        resolved by the caller, once, not for each of hundreds of headers), or, under a folder or file
        its flags give absolute, or one of ``own`` outside the project (see :meth:`_anchored`), or
        ``anchored`` (reached from such a one: see :func:`_library`), by its own absolute path, so
        that a checkout at another depth is the same source."""
        return (str(path) if anchored or self._anchored(path, own)
                else os.path.relpath(path, base or self.path.parent.resolve()))

    def _written(self, folder: Callable[[Path], str], file: Callable[[Path, str], str]) -> tuple[str, ...]:
        """The flags with each folder and file they name written by ``folder`` and ``file`` (its
        path resolved, and as given; see :func:`written_flags`), spelt where it lies (see :func:`spelt`)."""
        texts = [(named, spelt(self.flags, named, folder(p) if named.kind == "dir" else file(p, named.given),
                               self.launch is not None))
                 for p, named in zip(self._paths, self._named_paths) if p is not None and named.kind != "system"]
        return tuple(flag for flags in written_flags(self.flags, texts) for flag in flags)

    @_cached
    def build_flags(self) -> tuple[str, ...]:
        """The flags as the compiler gets them: each folder and file they name resolved."""
        return self._written(str, lambda p, given: str(p))

    @_cached
    def declared_flags(self) -> str:
        """The flags as a trial's declaration keeps them: a header folder from the declaring
        file's folder and a file as given, so that a checkout elsewhere is the same declaration;
        "(arch-specific)" where it builds for the device's architecture-specific target."""
        base = (self.origin or Path.cwd()).resolve()
        flags = " ".join(self._written(lambda p: self._named(p, base), lambda p, given: given))
        return " ".join(filter(None, (flags, "(arch-specific)" if self.arch_specific else "")))

    @property
    def template(self) -> str:
        """The template with its local headers inlined (see :func:`inline_includes`), and after
        it, for each file its flags name, a comment holding the hash of its content (its own
        headers inlined), and one for each header its header folders give it (``-I``, left to the
        compiler to include), the compiler finds on its own include path (CPATH, C_INCLUDE_PATH:
        see :func:`~tunebench.backends.base.own_include_dirs`; the system's and the toolkit's
        headers are the compiler's, named apart), or a computed include may read (see
        :attr:`computed_include_dirs`):
        an edited file is another source, so
        it is built and measured again, and a #line naming it says where the edit lies. Read
        again once a file it was read from changes (checked at most every :data:`REREAD_S`): a
        long-lived process paired its first text with the config of a tune of the edited one."""
        return self._read()[0]

    @property
    def language(self) -> str:
        """What the compiler reads the template as, ``c`` or ``c++``: a CUDA variant's (one with a
        ``launch``, which the cuda target requires) nvcc builds as a ``.cu``, C++, whatever its
        name (a ``.cuh``); any other gcc reads as :func:`~tunebench.backends.cpu.read_as` says
        (its name, or the flags' ``-x c++``: a shared ``.cu`` template's CPU variant is C to
        gcc). Each reads its own include path variable (see
        :data:`~tunebench.backends.base.PATH_ENV`)."""
        from tunebench.backends.cpu import read_as  # the CPU target's rule: a floor below
        return "c++" if self.launch is not None else read_as(self)

    @property
    def source_hash(self) -> str:
        """A short hash of the template text: a record is reused only for the same source."""
        return self._read()[1]

    @property
    def computed_include_dirs(self) -> tuple[Path, ...]:
        """The folders of the template's files (inlined, see :func:`inline_includes`) that include
        a header a macro names (``#include IMPL``, a param giving ``"impl_a.h"``): the compiler
        looks for it beside the file holding the include, which a build of a copy elsewhere must
        be told. The headers it may read are hashed with the template (see :func:`_computed`). A
        recorded template's are those of the files its text inlines (:func:`_computed_in`) and of
        the source files its flags build with it (the records' copies of each are searched ahead
        of them: see :func:`kept_variant`)."""
        self._read()
        return self.__dict__.get("_computed", ())

    @property
    def file_texts(self) -> dict[str, str]:
        """The text of each file the template keeps as its hash alone (a file of the flags with its
        own headers inlined, a header of the include folders as it lies), by that hash, for the
        records: once one is edited, the gate builds the recorded template with the recorded texts.
        A binary file's (an object, a library) and one that is not UTF-8 have none."""
        self._read()
        return self.__dict__.get("_texts", {})

    @property
    def input_sources(self) -> dict[Path, str]:
        """The source files the flags build with the template (``flags=("../src/helper.c",)``),
        each as its text with its local headers inlined: a build gives each the params' #defines
        as it gives the template (a kernel split over files reads ``VEC`` in each, as a framework
        building them with :meth:`~tunebench.apply.Tuned.defines` gives it)."""
        self._read()
        return self.__dict__.get("_inputs", {})

    def _read(self) -> tuple[str, str]:
        """(template, source hash), kept with the files read for them and their stamps; where
        they cannot be read again (a checkout midway), as last read, until the next check."""
        kept = self.__dict__.get("_kept")  # (text, hash, files, their stamps, when checked)
        now = time.monotonic()
        if kept is not None and (self.text is not None or _PINNED[0] or 0 <= now - kept[4] < REREAD_S):
            return kept[:2]
        since = time.time_ns()  # as the files' reading begins
        if kept is not None and kept[3] is not None and _stamps(kept[2], since) == kept[3]:
            self.__dict__["_kept"] = (*kept[:4], now)
            return kept[:2]
        text, read, inputs, computed, texts = self.text, {}, {}, {}, {}
        own = own_include_dirs(self.language)
        try:
            sources = [p for p, named in zip(self._paths, self._named_paths)
                       if named.kind == "file" and p.suffix not in BINARY_SUFFIXES]
            if text is not None:  # a recorded template (the gate's): its text keeps its files' hashes alone, so
                # the source files its flags build with it are read as they are now
                inputs = {file: inline_includes(file, top=self.path.parent.resolve(), dirs=self.include_dirs,
                                                anchored=self._anchored(file, own)) for file in sources}
                computed = {**_computed_in(text, self.path),  # and the source files', built as copies too
                            **_computed({file: self._anchored(file, own) for file in sources}, self._searched(),
                                        self.space.values, self.path.parent)[0]}
            else:
                text, read, inputs, computed, texts = self._expanded(own, sources)
                if computed:  # the copy's build searches their folders for every include it reads (see
                    # computed_include_dirs): read again, searched so; the files it inlines, which hold the
                    # computed includes, are the same whatever it searches, so the folders are too
                    text, read, inputs, computed, texts = self._expanded(own, sources, tuple(computed))
        except OSError as e:
            if kept is None:
                raise unreadable(e) from None
            self.__dict__["_kept"] = (*kept[:4], now)
            return kept[:2]
        files = tuple(read)
        self.__dict__.update(_computed=tuple(computed), _inputs=inputs, _texts=texts)
        self.__dict__["_kept"] = (text, hashlib.sha256(text.encode()).hexdigest()[:16], files, _stamps(files, since),
                                  now)
        return self.__dict__["_kept"][:2]

    def _expanded(self, own: tuple[Path, ...], sources: list[Path], copied: tuple[Path, ...] = ()
                  ) -> tuple[str, dict[Path, bool], dict[Path, str], dict[Path, None], dict[str, str]]:
        """(template text, the files read with whether each is anchored, :attr:`input_sources`, the
        folders of the computed includes, :attr:`file_texts`) of the template as it lies, the
        headers left to the compiler found as a build of its copy finds them, told the folders
        ``copied`` of its computed includes (see :attr:`computed_include_dirs`): gcc searches them
        for every quoted include, nvcc for every include. Searched as in place, an ordinary
        ``#include "scale.h"`` hashed an -I folder's header where the build read the template
        folder's: an edit of the one built kept the source hash, and its trials."""
        read, library, inputs, texts = {}, {}, {}, {}
        top = self.path.parent.resolve()  # what the text names the files from
        dirs, quoted = self._searched(copied), self._quoted(copied)  # where the build finds what it reads in place
        fixed = tuple(d for d in (*quoted, *dirs) if self._anchored(d, own))  # whose headers are named absolute
        text = inline_includes(self.path, dirs=self.include_dirs, searched=dirs, read=read, library=library,
                               fixed=fixed, quoted=quoted)
        for file in self.flag_files:
            anchored = read.setdefault(file, self._anchored(file, own))
            inlined = None if file.suffix in BINARY_SUFFIXES else inline_includes(
                file, top=top, dirs=self.include_dirs, searched=dirs, read=read,
                library=library, anchored=anchored, fixed=fixed, quoted=quoted)
            digest = hashlib.sha256(file.read_bytes() if inlined is None else inlined.encode()).hexdigest()[:16]
            if inlined is not None:
                texts[digest] = inlined
            if file in sources:
                inputs[file] = inlined
            text += ("" if text.endswith("\n") else "\n") + (
                f'#line 1 "{self._named(file, top, own)}"\n'
                f"/* built with this file of the flags: sha256 {digest} */\n")
        here = _working_folder() or Path(os.devnull)  # deleted: a folder of no file, as to the compiler
        apart = self._anchored(here, (here,))  # outside the project, its files are named absolute, as CPATH's there
        # are: named from the template's folder ("../../../work/cfg.h"), a checkout at another depth was another source
        for given in self._compilers_files:
            # gcc (nvcc's host gcc too) looks for it as for a quoted include of a file in the folder it runs in,
            # the run's: there, then along the quoted chain; read in place where found, with its own headers
            _library(here / "<command-line>", INCLUDE.match(f'#include "{given}"'), dirs, library, top, apart,
                     fixed=fixed, quoted=quoted)
        # a macro a computed include names is a param of the values the files and flags define it as
        defined = functools.cache(lambda: _definitions((*read, *library), self.flags, self.launch is not None))
        # the compiler is told the folders of the files it reads as copies (inlined); a library's files
        # it reads in place
        # a CUDA variant's (one with a launch) copies: nvcc searches their folders after the flags' -I
        # folders, ahead of their -isystem ones; a CPU one's, gcc after the flags' -iquote folders
        computed, beside = _computed(read, dirs, self.space.values, self.path.parent, fixed,
                                     self._bracketed() if self.launch is not None else None, self._quoted(), quoted,
                                     defined)
        _, in_library = _computed(library, dirs, self.space.values, self.path.parent, fixed, quoted=quoted,
                                  defined=defined)
        done = {f.resolve() for f in read}
        names = {f.name for f in done}  # a header of another name that is no link is none of them, unresolved
        for header, anchored in (*beside.items(), *in_library.items()):
            if header.name not in names and not header.is_symlink() or header.resolve() not in done:
                library.setdefault(header, anchored)
        # the compiler reads each where it lies, or may: edited, another source
        for header, anchored in library.items():
            read.setdefault(header, anchored)
            content = header.read_bytes().replace(b"\r\n", b"\n")  # as text is read: CRLF checkouts alike
            digest = hashlib.sha256(content).hexdigest()[:16]
            with contextlib.suppress(UnicodeDecodeError):
                texts[digest] = content.decode()
            text += ("" if text.endswith("\n") else "\n") + (
                f'#line 1 "{self._named(header, top, own, anchored)}"\n/* built with this header of '
                f"the include folders: sha256 {digest} */\n")
        return text, read, inputs, computed, texts

    def baseline(self, shape: tuple, dtype: str) -> dict:
        """The heuristic config for a shape (and the task's ``dtype``, where the heuristic has a
        parameter of that name: a vector width is 16 bytes of the element), checked to have exactly the space's params; numpy
        values are made Python's, as the space's are (records and exports are JSON), a bool for a
        param of ints its int (``USE_SIMD: True`` was recorded and exported), and an int for a param
        of floats its float (``SCALE: 1`` built ``SCALE / 2`` as an integer division, and
        the candidate ``SCALE: 1.0`` took its trial, never built, as 1 == 1.0). A float where
        the space's values are ints (``4096 / 16``) would build ``#define BLOCK 256.0``, another
        kernel than the one tuned, and is refused, as is a heuristic that raises."""
        try:
            given = dict(self.heuristic(tuple(shape), *((dtype,) if takes(self.heuristic, "dtype") else ())))
        except Exception as e:  # noqa: BLE001 - the user's code, reported with its cause
            raise KernelError(f"heuristic raised {raised(e, f'for shape {tuple(shape)}')}") from e
        config = {n: v.item() if isinstance(v, np.generic) else v for n, v in given.items()}
        if set(config) != set(self.space.names):
            missing = [n for n in self.space.names if n not in config]
            meant = {n: closest(n, missing) for n in config if n not in self.space.names}
            said = [f"{n!r} (did you mean {m!r}?)" if m else f"{n!r} is no param of the space" for n, m in meant.items()]
            lacking = [n for n in missing if n not in meant.values()]  # a param added to the space, not to the heuristic
            said += [f"it lacks {', '.join(map(repr, lacking))}"] if lacking else []
            raise KernelError(
                f"heuristic for shape {tuple(shape)} gives params {sorted(config)}, "
                f"the space has {sorted(self.space.names)}" + (f": {', '.join(said)}" if said else ""))
        for name, value in config.items():
            if isinstance(value, bool) and not any(isinstance(v, bool) for v in self.space.values[name]):
                config[name] = int(value)  # a comparison's answer for a 0/1 param: the space's value, as recorded
            elif (type(value) is int and self.space.values[name]
                  and all(isinstance(v, float) for v in self.space.values[name])):
                config[name] = float(value)  # `#define SCALE 1` divides as ints, and 1 == 1.0 took 1.0's trial
            if isinstance(value, float) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in self.space.values[name]):
                raise KernelError(f"heuristic for shape {tuple(shape)} gives {name}={value!r}, a float, where the "
                                  f"space's values of {name} are ints: it would build `#define {name} {value!r}`, "
                                  f"another kernel; give an int (// or int(...))")
        return config


def _own_copy(value: Any) -> Any:
    """An input as the reference is given it (see :meth:`Kernel.expected`): an array as a copy of
    its own, to write into as it likes (a softmax's ``x -= x.max()``; ``torch.from_numpy``, which
    warns of a read-only one), a scalar as it is."""
    return value.copy() if isinstance(value, np.ndarray) else value


def _required(fn: Callable, name: str) -> bool:
    """Whether ``fn`` must be given ``name``: one of its params without a default (one with a
    default, or a TypeError raised inside it, is no misspelt argument)."""
    return inspect.signature(fn).parameters[name].default is inspect.Parameter.empty


def declaration_hash(declaration: Mapping[str, str]) -> str:
    """A short hash of a declaration's parts (see :meth:`Kernel.setup_hash`): also of one as an
    earlier source of today's code declared it, whose trials count as today's (see
    :func:`comment_edits`)."""
    return hashlib.sha256(json.dumps(declaration, sort_keys=True).encode()).hexdigest()[:16]


def code_hash(fn: Any, seen: set | None = None) -> str:
    """A short hash of what a Python callable computes: its source as Python parses it, and,
    followed through the names it reads, its closure and its defaults, the same of the functions
    it calls and the values of the constants it reads (numbers, strings, numpy scalars and
    arrays: a reference's ``SHIFT = np.float32(0.5)`` or ``make_reference(0.5)``). Formatting and
    comments do not change it, nor the Python version, pytest's assert rewriting or ``-O``, which
    change its bytecode (a CI image on another Python said every reference had changed since the
    tune); a callable without source (made by ``exec``) is hashed by its bytecode."""
    seen = set() if seen is None else seen
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    source = _source(code) if code is not None else None
    if source is None:
        return bytecode_hash(fn, seen)
    text, names, chains = source
    digest = hashlib.sha256(text.encode())
    scope = getattr(fn, "__globals__", {})
    for name in names:
        _read(digest, name, scope.get(name), seen, code_hash)
    closed = dict(zip(code.co_freevars, fn.__closure__ or ()))
    for chain in chains:
        cell = closed.get(chain[0])
        with contextlib.suppress(ValueError):  # a cell not filled yet
            _through(digest, chain, cell.cell_contents if cell is not None else scope.get(chain[0]), seen)
    _closure(digest, fn, code, seen, code_hash)
    return digest.hexdigest()[:16]


def _through(digest, chain: tuple[str, ...], value, seen: set) -> None:
    """Into ``digest``: what ``a.b.c`` reads, followed through modules and objects of the user's
    code (``refops.scaled``, ``SPEC.scale``: an edit of either reused every trial of the old
    reference), never through a library's (numpy's functions change with its version, not the
    suite's). Attributes are read statically: a property is hashed by its code, not run."""
    followed = 0
    for attr in chain[1:]:
        if not is_users(value):
            break
        value = _unwrapped(inspect.getattr_static(value, attr, None), value)
        followed += 1
    if followed:
        _read(digest, ".".join(chain[:followed + 1]), value, seen, code_hash)


#: code object -> (the text its source is hashed by, the names it reads, the attribute chains it
#: reads through them: ``("refops", "scaled")``), or None: read once, at
#: its first hash (a Kernel hashes its functions when declared), not from the file as it is later
#: (an edit on disk during a tune was hashed as what the running process computed), and parsed once
#: (a framework's lookup of each new shape hashes the declaration).
_SOURCES: dict = {}


def _source(code) -> tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]] | None:
    if code not in _SOURCES:
        node = _source_node(code)
        _SOURCES[code] = None if node is None else (
            repr(_shape(node)), tuple(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name))),
            tuple(dict.fromkeys(filter(None, (_chain(n) for n in ast.walk(node) if isinstance(n, ast.Attribute))))))
    return _SOURCES[code]


def _unwrapped(found, owner):
    """What an attribute read statically computes: a static or class method's function, a
    property's getter, a slot's value (a member descriptor reads it without running user code)."""
    if isinstance(found, (staticmethod, classmethod)):
        return found.__func__
    if isinstance(found, property):
        return found.fget
    if isinstance(found, functools.cached_property):
        return found.func
    if isinstance(found, types.MemberDescriptorType) and not isinstance(owner, type):
        with contextlib.suppress(AttributeError):  # a slot not set
            return found.__get__(owner, type(owner))
        return None
    return found


def _chain(node: ast.Attribute) -> tuple[str, ...] | None:
    """``("a", "b", "c")`` of ``a.b.c``; None where it starts from no name (``f().x``)."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return (node.id, *reversed(attrs)) if isinstance(node, ast.Name) else None


def _shape(node):
    """A syntax tree as nested tuples of node types and the fields set, without positions or
    fields left empty: the same on every Python that parses the source alike (``ast.unparse``
    quoted an f-string's keys otherwise from 3.12, and 3.12 added empty ``type_params``)."""
    if isinstance(node, ast.AST):
        return (type(node).__name__, *((name, _shape(value)) for name, value in ast.iter_fields(node)
                                       if value not in (None, []) and name not in ("ctx", "kind", "type_comment")))
    if isinstance(node, list):
        return tuple(_shape(v) for v in node)
    return repr(node)


def bytecode_hash(fn: Any, seen: set | None = None) -> str:
    """:func:`code_hash` by bytecode, constants and the names it reads: what tunebench hashed a
    callable by before, so that records made then are still recognised on the Python that made
    them (:meth:`Kernel.declaration`), and what a callable without source is hashed by."""
    seen = set() if seen is None else seen
    digest = hashlib.sha256()
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        digest.update(_uncoded(fn, seen).encode())
        return digest.hexdigest()[:16]
    scope = getattr(fn, "__globals__", {})

    def walk(c) -> None:
        digest.update(c.co_code)
        digest.update(repr(c.co_names).encode())
        for const in c.co_consts:
            if hasattr(const, "co_code"):
                walk(const)
            else:
                digest.update(repr(const).encode())
        for name in c.co_names:
            _read(digest, name, scope.get(name), seen, bytecode_hash)

    walk(code)
    _closure(digest, fn, code, seen, bytecode_hash)
    return digest.hexdigest()[:16]


def _uncoded(fn: Any, seen: set) -> str:
    """What a callable without code of its own computes: a ``functools.partial`` by its function
    and arguments, an object by its class's ``__call__``; their repr held a memory address, so
    every run said the args builder had changed and measured every trial again."""
    if isinstance(fn, functools.partial):
        digest = hashlib.sha256(code_hash(fn.func, seen).encode())
        for i, value in (*enumerate(fn.args), *fn.keywords.items()):  # a keyword by its name: scale=2 is no shift=2
            if isinstance(i, str):  # named apart from its value, which a function's hash does not name
                digest.update(f"{i}=".encode())
            _read(digest, f"argument {i}", value, seen, code_hash)
        return digest.hexdigest()
    call = getattr(type(fn), "__call__", None)
    if getattr(call, "__code__", None) is not None:
        return f"{type(fn).__qualname__}:{code_hash(call, seen)}"
    return repr(fn)


def _library_function(fn: Any) -> str | None:
    """A numpy or built-in function by its module and name, alike in every process: a ufunc
    (``np.maximum``), a method bound to one (``np.maximum.reduce``), numpy's dispatchers
    (``np.sum``, whose repr names a memory address), a module's built-in (``math.exp``,
    ``operator.add``). A code generator's reference closing over its op's function hashed the same
    for every op. Nothing else without code of its own: what it computes is not known here."""
    if isinstance(fn, np.ufunc):
        return f"numpy.{fn.__name__}"
    if isinstance(fn, types.BuiltinFunctionType):
        owner = fn.__self__
        if isinstance(owner, np.ufunc):
            return f"numpy.{owner.__name__}.{fn.__name__}"
        return f"{fn.__module__}.{fn.__qualname__}" if owner is None or isinstance(owner, types.ModuleType) else None
    if type(fn).__module__ == "numpy" and type(fn).__name__ == "_ArrayFunctionDispatcher":
        return f"{fn.__module__}.{fn.__qualname__}"
    return None


#: A memory address in a repr (``<function <lambda> at 0x7f...>``): another in every process.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")


def _read(digest, name: str, value, seen: set, hashed: Callable) -> None:
    """Into ``digest``: a function ``name`` reads, by ``hashed``, or a constant's value."""
    if hashed is code_hash and callable(value) and not hasattr(value, "__code__") and not _library_function(value):
        if isinstance(value, functools.partial):  # a helper made by partial: by its function and arguments, once
            if id(value) not in seen:  # (one whose function calls it back recursed without end)
                seen.add(id(value))
                digest.update(f"{name}={_uncoded(value, seen)}".encode())
            return
        # a functools.cache helper: left out, an edit of it was unseen (read statically: no user code runs)
        value = inspect.getattr_static(value, "__wrapped__", value)
    if callable(value) and hasattr(value, "__code__"):
        if id(value) not in seen:
            seen.add(id(value))
            digest.update(hashed(value, seen).encode())
    elif isinstance(value, (int, float, str, bytes, bool, tuple)) or (  # a table of weights a reference reads
            hashed is code_hash and (type(value) in (list, dict) or _is_set(value)) and len(value) <= 10_000):
        text = _text(value) if hashed is code_hash else repr(value)  # bytecode_hash: by repr, as before
        if hashed is code_hash and not isinstance(value, (str, bytes)) and _ADDRESS.search(text):
            # a table of functions (CHECKS = {"add": lambda a, b: a + b}): each by what it computes, as its repr
            # names its memory address, another in every process (every run measured every trial again); each
            # entry under its key, the others by their repr, and a table holding itself once
            if id(value) in seen:
                return
            seen.add(id(value))
            if _is_set(value):  # in no order of its own: each item apart, in the order of its hash
                digest.update(f"{name}={{{', '.join(sorted(_item(name, v, set(seen)) for v in _set_items(value)))}}}"
                              .encode())
                return
            for key, item in (dict.items(value) if type(value) is dict else enumerate(value)):
                entry = f"{name}[{_key_text(key, seen)}]"
                digest.update(f"{entry}=".encode())
                if _ADDRESS.search(repr(item)):
                    _read(digest, entry, item, seen, hashed)
                else:
                    digest.update(_text(item).encode())
        else:
            digest.update(f"{name}={text}".encode())
    elif isinstance(value, np.generic):  # by its value, not numpy's repr of the day
        digest.update(f"{name}={value.dtype}:{value.item()!r}".encode())
    elif hashed is code_hash and isinstance(value, np.dtype):  # a generator's index type, np.dtype("int64"): left
        digest.update(f"{name}=dtype:{value.str}:{value}".encode())  # out, its change reused the old one's trials
    elif isinstance(value, np.ndarray):
        digest.update(f"{name}={value.dtype}{value.shape}:".encode() + hashlib.sha256(
            np.ascontiguousarray(value).view(np.uint8)).digest())
    elif hashed is code_hash and _library_function(value):  # a generator's closure holding its op's np.maximum:
        digest.update(f"{name}={_library_function(value)}".encode())  # a fix of it reused the old op's trials
    elif hashed is code_hash and isinstance(value, type) and not is_users(value):  # DT = np.float32 edited to
        digest.update(f"{name}=class {value.__module__}.{value.__qualname__}".encode())  # np.float64: left out


def _item(name: str, value, seen: set) -> str:
    """A set's item as it is hashed: by what it computes where its repr names a memory address."""
    if not _ADDRESS.search(repr(value)):
        return _text(value)
    digest = hashlib.sha256()
    _read(digest, name, value, seen, code_hash)
    return digest.hexdigest()


def _text(value, within: frozenset = frozenset()) -> str:
    """A constant's repr, with a set's items in the order of their own text: a set of strings
    iterates in an order each process's string hashing picks, so a reference reading
    ``("x", {"alpha", "beta"})`` hashed otherwise in every run, and measured every trial again.
    A set of numbers keeps its repr, the same in every process (and the hash it had before); one
    holding a NaN or None is sorted (their hashes, so their places, are their addresses).
    (``within``: the containers it is inside, as repr reads a list holding itself.)"""
    if _is_set(value):  # numbers keep their repr (a NaN's hash, so its place, is its address: sorted)
        items = list(_set_items(value))
        if all(type(v) in (int, float, bool) and v == v for v in items):
            return repr(value)
        return f"{type(value).__name__}({sorted(_text(v, within) for v in items)})"
    if not _container(value):
        return repr(value)
    text = repr(value)
    if "{" not in text or not _holds_set(value):  # (a set's repr has braces: most tuples are read once)
        return text
    if id(value) in within:
        return "..."
    within |= {id(value)}
    if type(value) is dict:
        return f"{{{', '.join(f'{_text(k, within)}: {_text(v, within)}' for k, v in value.items())}}}"
    items = [_text(v, within) for v in value]
    if type(value) not in (tuple, list):  # a namedtuple, as its repr reads, where its fields name every item
        fields = type(value)._fields
        named = type(fields) is tuple and len(fields) == len(items) and all(type(f) is str for f in fields)
        return f"{type(value).__name__}({', '.join(f'{f}={v}' for f, v in zip(fields, items)) if named else ', '.join(items)})"
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})" if type(value) is tuple else f"[{', '.join(items)}]"


def _holds_set(value, within: frozenset = frozenset()) -> bool:
    """Whether a tuple, list or dict holds a set, at any depth (a table holding itself read once)."""
    items = (*dict.keys(value), *dict.values(value)) if type(value) is dict else value
    within |= {id(value)}
    return any(_is_set(v) or _container(v) and id(v) not in within and _holds_set(v, within) for v in items)


def _container(value) -> bool:
    """A tuple, list or dict whose items a set's text may be in, a namedtuple's too (its repr
    iterated a set of strings it holds in each process's order: hashed otherwise in every run)."""
    return type(value) in (tuple, list, dict) or isinstance(value, tuple) and hasattr(type(value), "_fields")


def _is_set(value) -> bool:
    """A set or a frozenset, a subclass's too, by its type (a Mock(spec=set) passes isinstance)."""
    return issubclass(type(value), (set, frozenset))


def _set_items(value):
    """A set's items, as the built-in type iterates them (a subclass of its own may do anything)."""
    return (set.__iter__ if issubclass(type(value), set) else frozenset.__iter__)(value)


def _key_text(key, seen: set) -> str:
    """A table's key as its entry is named in the hash: a function's repr names its memory
    address, another in every process (``{f: 1}`` hashed otherwise in every run), so a function
    is named by what it computes."""
    text = _text(key)
    if not _ADDRESS.search(text):
        return text
    return _library_function(key) or (code_hash(key, seen) if hasattr(key, "__code__") else _ADDRESS.sub(">", text))


def _closure(digest, fn, code, seen: set, hashed: Callable) -> None:
    """Into ``digest``: the values ``fn`` closes over and its defaults."""
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            _read(digest, name, cell.cell_contents, seen, hashed)
        except ValueError:  # a cell not filled yet
            pass
    for i, value in enumerate((*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values())):
        _read(digest, f"default {i}", value, seen, hashed)


@functools.lru_cache(maxsize=16)
def _functions_by_line(text: str) -> dict[tuple[str, int], list[ast.AST]] | None:
    """A file's functions and lambdas by (kind, the line they start on), indexed once: a walk of
    the whole file for each took 21 s to hash a reference reading a table of 1000 lambdas."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found: dict[tuple[str, int], list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Lambda):
            found.setdefault(("lambda", n.lineno), []).append(n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for line in dict.fromkeys((n.lineno, *(d.lineno for d in n.decorator_list))):
                found.setdefault(("def", line), []).append(n)
    return found


def _source_node(code) -> ast.AST | None:
    """The ``def`` or ``lambda`` of ``code`` in its file as written (pytest's assert rewriting
    leaves the file alone), or None where there is none to be sure of."""
    try:
        lines, _ = inspect.findsource(code)
    except (OSError, TypeError, IndexError):
        return None
    index = _functions_by_line("".join(lines))
    if index is None:
        return None
    line = code.co_firstlineno
    if code.co_name == "<lambda>":
        found = index.get(("lambda", line), [])
        starts = [(ln, col) for ln, _, col, _ in code.co_positions() if ln is not None and col]
        if len(found) > 1 and starts:  # several on the line: the innermost one its body is in
            found = [n for n in found if (n.lineno, n.col_offset) <= min(starts) <= (n.end_lineno, n.end_col_offset)]
            found = sorted(found, key=lambda n: (n.lineno, n.col_offset))[-1:]
    else:
        found = [n for n in index.get(("def", line), []) if n.name == code.co_name]
    return found[0] if len(found) == 1 else None


class Kernel:
    """A kernel to tune, declared once for every target it has a variant for.

    - ``args(shape, dtype, rng) -> dict``: the call's arguments in the entry point's order,
      name -> numpy array or numpy scalar (``np.int32(S)``: the scalar's dtype is its C type).
      Called once per shape in a worker while the shape is among the latest it measured (random
      inputs of a large shape take seconds: see :data:`~tunebench.workers.PREPARED_SHAPES`); every
      candidate gets its own copy of the inputs and fresh, poisoned output buffers. One with a
      parameter ``config``, ``args(shape, dtype, rng, config)``, is called once per config and
      shape, the reference with it: a workspace sized by a param (a split-K's ``splits * M``).
    - ``outputs``: the names of the arguments the kernel writes.
    - ``reference(**inputs)``: numpy reference, given the inputs it names (every one where it
      takes ``**kwargs``), as copies of its own (see :meth:`expected`); returns the outputs (one
      array or a tuple in the order of ``outputs``), ideally computed in float64. One with a
      parameter ``config`` is given the config measured, for outputs that a param decides (one
      partial sum per block of ``BLOCK`` elements).
    - ``flops(shape)`` / ``bytes(shape, dtype)``: work per call, for GFLOP/s and GB/s.
    - ``tolerance``: ``{dtype: (rtol, atol)}`` over :data:`DEFAULT_TOLERANCE`, or keyed by an
      output's name for that output alone (see :meth:`tolerances`).
    - ``inout``: arguments the kernel reads and writes (``C = alpha * A @ B + beta * C``):
      outputs that start from the args builder's values, restored before every call, and
      passed to the reference at those values. An output also listed in ``inplace`` is one.
    - ``inplace``: inputs the kernel overwrites as scratch; restored before every call.
    - ``variants``: variants of other targets by name (the replay target's, for one).
    - ``marks``: pytest marks for the kernel's suite, e.g. ``pytest.mark.tunebench_gate(threshold=0.2)``.
    """

    def __new__(cls, *args, **kwargs):
        refuse_ported("a Kernel", kwargs, KernelError)  # answer=, tune_params=: else Python's bare TypeError
        return super().__new__(cls)

    def __init__(self, name: str, *, buckets: Buckets, args: Callable[..., Mapping[str, Any]],
                 reference: Callable[..., Any], outputs: Sequence[str],
                 cpu: Variant | None = None, cuda: Variant | None = None,
                 variants: Mapping[str, Variant] | None = None,
                 flops: Callable[[tuple], float] | None = None,
                 bytes: Callable[[tuple, str], float] | None = None,  # noqa: A002 - the natural name
                 tolerance: Mapping[str, tuple[float, float]] | None = None,
                 inout: Sequence[str] = (), inplace: Sequence[str] = (), marks: Sequence[Any] = ()):
        if not name.isidentifier():
            raise KernelError(f"kernel name {name!r} must be an identifier")
        given = {t: v for t, v in (("cpu", cpu), ("cuda", cuda), *(variants or {}).items()) if v}
        if not given:
            raise KernelError(f"kernel {name!r} has no variant (cpu= or cuda=)")
        self.name = name
        self.buckets = buckets
        self.args = args
        #: Whether the args builder takes the config (see above): its arguments are a config's.
        self.args_per_config = takes(args, "config")
        self.reference = reference
        #: Whether the reference takes the config: its outputs are a config's.
        self.reference_per_config = takes_keyword(reference, "config")
        for fn in (args, reference):  # their source as imported, whatever the file holds when they are hashed
            code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
            if code is not None:
                _source(code)
        self.outputs = tuple(dict.fromkeys([*outputs, *inout]))
        if not self.outputs:
            raise KernelError(f"kernel {name!r} declares no output")
        self.inout = tuple(dict.fromkeys([*inout, *(n for n in inplace if n in self.outputs)]))
        caller = sys._getframe(1)
        declared_in = caller.f_globals.get("__file__")  # the working directory only without one
        #: The file that declares the kernel, for an error a lookup meets in it to name, and the
        #: line, where its items' skips are reported.
        self.declared_in = Path(declared_in).resolve() if declared_in else None
        self.declared_line = caller.f_lineno
        #: The test module pytest collected the kernel from (set at collection): the file that
        #: imports it where a helper module beside it declares it.
        self.collected_from: Path | None = None
        #: The suite file it was first collected or looked up from, as reached (links unresolved),
        #: the file that led to when last followed, when that was last checked and whether it leads
        #: elsewhere now.
        self._reached: list | None = None
        # templates are looked up from the folder as the suite was reached, not where its symlink leads
        # (suites/ linked to a shared folder found no kernels/ beside it)
        origin = Path(os.path.abspath(declared_in)).parent if declared_in else Path.cwd()
        self.variants = {t: v if v.origin else dataclasses.replace(v, origin=origin) for t, v in given.items()}
        if getattr(given.get("cpu"), "launch", None) is not None:  # a variant with a launch is read as CUDA's, C++
            raise KernelError(f"kernel {name!r}: the cpu variant has a launch=(config, shape) -> (grid, block), "
                              f"which only a cuda variant takes: drop it, or declare the variant cuda=")
        arch = [f for f in getattr(given.get("cuda"), "flags", ())  # "-arch=sm_90", and "-arch sm_90" as one flag
                if f.split("=")[0].split(" ")[0] in ARCH_FLAGS]
        if arch:
            raise KernelError(f"kernel {name!r}: the cuda variant's flags {arch} set the architecture, which "
                              f"tunebench sets to the device's own (sm_XY; compile-check's for each --arch)")
        rdc = [f for f in getattr(given.get("cuda"), "flags", ()) if f.replace(" ", "=") in RDC_FLAGS
               or f.split("=")[0] in RDC_FLAGS and not f.endswith("=false")]
        if rdc:
            raise KernelError(f"kernel {name!r}: the cuda variant's flags {rdc} make relocatable device code, which "
                              f"a candidate's cubin cannot be loaded as alone (its external device functions are "
                              f"never linked): define them in the template, or #include their source")
        self.flops = flops
        self.bytes = bytes
        unknown = [k for k in tolerance or {} if k not in self.outputs and not _dtype_name(k)]
        if unknown:  # a misspelt key was the default's exact comparison, unsaid
            meant = closest(unknown[0], [*DEFAULT_TOLERANCE, *self.outputs])
            raise KernelError(f"kernel {name!r}: tolerance key {unknown[0]!r} is neither a dtype nor an output "
                              f"({', '.join(self.outputs)})" + (f": did you mean {meant!r}?" if meant else ""))
        bad = next(((k, v) for k, v in (tolerance or {}).items() if not _tolerance_pair(v)), None)
        if bad:  # a negative one failed every config, each recorded as a wrong result
            raise KernelError(f"kernel {name!r}: tolerance {bad[0]!r} is {bad[1]!r}: give (rtol, atol), each a "
                              f"number >= 0")
        self.tolerance = {**DEFAULT_TOLERANCE, **(tolerance or {})}
        self.inplace = tuple(n for n in inplace if n not in self.outputs)
        self.marks = tuple(marks)
        REGISTRY[name] = self

    def __repr__(self):
        return f"Kernel({self.name!r}, targets={list(self.variants)})"

    def variant(self, target: str) -> Variant | None:
        return self.variants.get(target)

    @property
    def per_config(self) -> bool:
        """Whether a shape's arguments or reference outputs are a config's: the reference's
        outputs computed, and kept, for each config, never served to another from the shape's;
        the arguments too where the args builder takes the config, else built once per shape."""
        return self.args_per_config or self.reference_per_config

    def buckets_for(self, target: str) -> Buckets:
        """The buckets tuned on a target: the variant's own, else the kernel's."""
        variant = self.variants.get(target)
        return variant.buckets if variant is not None and variant.buckets is not None else self.buckets

    def heuristic_strays(self, variant: Variant, target: str, shapes: Sequence[tuple] | None = None) -> list[str]:
        """Where the heuristic's config breaks the space on ``shapes`` (every representative
        shape by default): a constraint, a value it lacks. A rule the candidates are held to and it
        is not (a tail it may drop, a read past a row); it is built and measured all the same."""
        buckets = self.buckets_for(target)
        said: dict[str, None] = {}  # each once: a heuristic of the shape alone is the same in every dtype
        for shape in shapes or [s for b in buckets for s in b.shapes]:
            for dtype in variant.dtypes:
                config = variant.baseline(shape, dtype)
                broken = variant.space.broken(config, shape, buckets.dims)
                if broken:
                    said.setdefault(f"[{config_text(config)}] on {shape}: {'; '.join(broken)}")
        return list(said)

    def build_args(self, shape: tuple, dtype: str, config: Mapping | None = None) -> dict[str, Any]:
        """Fresh arguments for one shape (and ``config``, where the builder takes it: see
        :attr:`args_per_config`); the same values every call (seeded by kernel and shape). The
        dtype's name is made one numpy knows first (bfloat16: see :mod:`tunebench.dtypes`)."""
        numpy_dtype(dtype)
        if self.args_per_config and config is None:
            raise KernelError(f"kernel {self.name!r}: the args builder takes a config, and none was given")
        seed = int.from_bytes(hashlib.sha256(f"{self.name}{shape}{dtype}".encode()).digest()[:8], "little")
        given = self.args(tuple(shape), dtype, np.random.default_rng(seed),
                          **({"config": dict(config)} if self.args_per_config else {}))
        if not isinstance(given, Mapping):  # Kernel Tuner's arguments are a list
            raise KernelError(f"kernel {self.name!r}: the args builder returned a {type(given).__name__}; return a "
                              f"dict of argument name -> numpy array or numpy scalar, in the entry point's order")
        args = dict(given)
        for out in (*self.outputs, *self.inplace):
            if out not in args:
                kind = "output" if out in self.outputs else "inplace input"
                raise KernelError(f"kernel {self.name!r}: {kind} {out!r} is not among the args builder's arguments "
                                  f"({', '.join(args)})")
            if not isinstance(args[out], np.ndarray):
                raise KernelError(f"kernel {self.name!r}: argument {out!r} must be a numpy array")
        for name, value in args.items():
            if not isinstance(value, (np.ndarray, np.generic)):
                given = type(value).__name__
                raise KernelError(
                    f"kernel {self.name!r}: argument {name!r} is {'an' if given[0] in 'aeiou' else 'a'} {given}; "
                    f"use a numpy array or a numpy scalar such as np.int32(...) so that its C type is explicit")
        self.aliases(args)
        return args

    def aliases(self, args: Mapping[str, Any]) -> dict[str, str]:
        """The arguments the args builder gave as one array, each -> the argument whose buffer
        it shares (an output, else a scratch input, else the first given): a framework's in-place
        call ``f(x, x)``, which a kernel may branch on (``x == y``), and whose data the caches
        hold once. An output shared so must be inout: it starts every call from the input's
        values. Arrays that overlap otherwise, one of them written, are refused: no placement could
        give them (read-only ones get a copy each, as any input)."""
        arrays = [(n, v) for n, v in args.items() if isinstance(v, np.ndarray)]
        rank = {n: 0 if n in self.outputs else 1 if n in self.inplace else 2 for n, _ in arrays}
        found: dict[str, str] = {}
        for i, (a, x) in enumerate(arrays):
            for b, y in arrays[i + 1:]:
                if not np.shares_memory(x, y):
                    continue
                if (x.__array_interface__["data"][0], x.shape, x.strides, x.dtype) != (
                        y.__array_interface__["data"][0], y.shape, y.strides, y.dtype):
                    if rank[a] < 2 or rank[b] < 2:
                        raise KernelError(f"kernel {self.name!r}: arguments {a!r} and {b!r} overlap without being "
                                          f"one array (another view of the same memory), and the kernel writes "
                                          f"{a if rank[a] < 2 else b!r}: give each its own array, or the very same one")
                    continue
                if a in self.outputs and b in self.outputs:
                    raise KernelError(f"kernel {self.name!r}: outputs {a!r} and {b!r} are one array: each "
                                      f"output is checked on its own, so give each its own array")
                out = a if a in self.outputs else b if b in self.outputs else None
                if out is not None and out not in self.inout:
                    raise KernelError(f"kernel {self.name!r}: arguments {a!r} and {b!r} are one array, which the "
                                      f"kernel writes as output {out!r}: for an in-place call declare "
                                      f"inout=[{out!r}], so that it starts every call from the input's values; "
                                      f"else give {out!r} an array of its own (np.empty_like)")
                found.setdefault(a, a)
                found[b] = found[a]
        groups: dict[str, list[str]] = {}
        for name, root in found.items():
            groups.setdefault(root, []).append(name)
        return {n: target for names in groups.values()
                for target in [min(names, key=lambda m: rank[m])] for n in names if n != target}

    def expected(self, args: Mapping[str, Any], config: Mapping | None = None) -> list[np.ndarray]:
        """The reference outputs for a set of arguments (and ``config``, where the reference takes
        it: see :attr:`reference_per_config`), in the order of ``outputs``. A reference that
        returns another shape, or a less precise or other kind of number, than the declared
        output is a declaration error: no candidate could match it. Its inputs are copies of its own:
        the worker verifies every config of a shape, and runs the kernel, on the one set of
        arguments it holds, which one writing into them (``x -= m``) changed for the next."""
        named = keywords(self.reference)  # those it names: a transpose's reference(x) needs no `rows, cols`
        if self.reference_per_config:
            if config is None:
                raise KernelError(f"kernel {self.name!r}: the reference takes a config, and none was given")
            if "config" in args:  # which of the two it meant, nothing tells
                raise KernelError(f"kernel {self.name!r}: the reference's parameter 'config' is given the config "
                                  f"measured, and the args builder gives an argument named 'config' too: rename "
                                  f"the argument")
            named = named and named - {"config"}
        inputs = {k: _own_copy(v) for k, v in args.items()
                  if (k not in self.outputs or k in self.inout) and (named is None or k in named)}
        unknown = [n for n in sorted(named or ()) if n not in args and _required(self.reference, n)]
        if unknown:  # a name misspelt: given what it names, it would otherwise be a bare TypeError
            raise KernelError(f"kernel {self.name!r}: the reference takes {unknown[0]!r}, which is no argument the "
                              f"args builder gives ({', '.join(args)})")
        try:
            result = self.reference(**inputs, **({"config": dict(config)} if self.reference_per_config else {}))
        except TypeError as e:  # an output the kernel also reads, not declared so, is not passed
            unsaid = [n for n in self.outputs if n not in inputs and f"'{n}'" in str(e)]
            if unsaid:
                raise KernelError(f"kernel {self.name!r}: the reference takes output {unsaid[0]!r}, which it is "
                                  f"given only where the kernel reads it too: declare inout=[{unsaid[0]!r}] "
                                  f"({type(e).__name__}: {e})") from e
            raise
        if isinstance(result, Mapping):  # by output name
            lacking = [n for n in self.outputs if n not in result]
            if lacking:
                raise KernelError(f"kernel {self.name!r}: the reference returned a dict without output "
                                  f"{lacking[0]!r}: key it by every output's name ({', '.join(self.outputs)})")
            result = [result[n] for n in self.outputs]
        result = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(result) != len(self.outputs):  # None among them: a Kernel Tuner script's answer= list, ported
            answer = (": return the outputs alone, in that order, not Kernel Tuner's answer of one per argument "
                      "with None for the others" if any(r is None for r in result) else "")
            raise KernelError(f"kernel {self.name!r}: reference returned {len(result)} outputs, "
                              f"expected {len(self.outputs)} ({', '.join(self.outputs)}){answer}")
        # a view of an input's copy (x.reshape(N, K)[:, 0]) or of a larger array kept all of it alive beside
        # the held outputs, where the worker's memory share counts the view alone: copied out of it
        given = [v for v in inputs.values() if isinstance(v, np.ndarray)]
        result = [np.asarray(r) for r in result]
        result = [r.copy() if r.base is not None and (getattr(r.base, "nbytes", 0) > r.nbytes or any(
            np.may_share_memory(r, v) for v in given)) else r for r in result]
        for name, got in zip(self.outputs, result):
            want = args[name]
            if got.shape != want.shape:
                raise KernelError(f"kernel {self.name!r}: the reference returned shape {got.shape} for output "
                                  f"{name!r}, which the args builder declares {want.shape}: fix the reference")
            got_kind, want_kind = kind(got.dtype), kind(want.dtype)
            if got_kind not in "biufc" or (got_kind == "c") != (want_kind == "c") or (
                    got_kind == want_kind in "fc" and significand_bits(got.dtype) < significand_bits(want.dtype)) or (
                    got_kind == "f" and want_kind in "iu" and got.dtype.itemsize < 8
                    and significand_bits(got.dtype) < 8 * want.dtype.itemsize - (want_kind == "i")):
                raise KernelError(f"kernel {self.name!r}: the reference returned {got.dtype} for output {name!r} "
                                  f"of {want.dtype}: compute it in {want.dtype} or a more precise type")
        return result

    def check(self, variant: Variant, target: str) -> None:
        """What a variant must hold before anything is built for a target, checked with or
        without its device (collection, compile-check): its template reads (and no param that its
        ``#include P`` reads names a file bare, see :func:`bare_include`), the target has a C
        type for each dtype, each constraint names params and the dims and runs on every config
        and representative shape without raising, some config holds on every bucket, the heuristic gives a
        config of the space for each representative shape, ``flops``/``bytes`` answer a number
        for each (they are first called after the baseline's trial, which their error would
        lose). A :class:`KernelError` (or the space's :class:`SpaceError`) names what is at fault."""
        from tunebench.backends import dtype_problem  # the targets' C types: a floor below

        variant.template  # noqa: B018 - read here, so that a missing file or include is one line
        for what, fn, given in (("heuristic", variant.heuristic, ("shape",)),
                                ("launch", variant.launch, ("config", "shape"))):
            stray = stray_parameter(fn, len(given)) if fn is not None else None
            if stray:
                raise KernelError(f"kernel {self.name!r}, the {target} variant: its {what} has a parameter {stray!r} "
                                  f"beyond ({', '.join(given)}), which nothing gives: the task's dtype is given to "
                                  f"a parameter named dtype")
        if target == "cuda" and variant.launch is None:  # a Kernel Tuner script derives it: its port leaves it out
            offer = kernel_tuner_launch(variant.space.names)
            raise KernelError(f"kernel {self.name!r}, the cuda variant: no launch=(config, shape) -> (grid, block), "
                              f"which gives each config's grid and block on a shape" + (
                                  f"; Kernel Tuner's default, the problem size over the block_size params, is "
                                  f"launch={offer}, shape[i] where the script's problem_size[i] was" if offer else ""))
        builtin = [n for n in variant.space.names if n in CUDA_BUILTINS] if target == "cuda" else []
        if builtin:  # `#define warpSize 16` rewrote the builtin: a reduction over a warp halved, and verified wrong
            raise KernelError(f"kernel {self.name!r}, the cuda variant: param {builtin[0]!r} is a CUDA built-in "
                              f"variable's name, which its #define would rewrite in the kernel: rename the param")
        buckets = self.buckets_for(target)
        try:
            variant.space.check_dims(buckets.dims)
            variant.space.validate(buckets, buckets.dims)
        except SpaceError as e:  # every target's space is checked, where one runs: say which;
            # before its params are read in the template (a param named as a dim: said as that, first)
            raise SpaceError(f"the {target} variant: {e}") from None
        why = overridden(variant, variant.space.names) or bare_include(variant, variant.space.values)
        if not why and target in ("cpu", "cuda"):  # the replay target builds nothing
            from tunebench.backends import cpu, cuda  # the targets' preprocessors: a floor below

            suspects = [(p, said) for p, said in constant_suspects(variant, variant.space.values)
                        if target == "cpu" or self._launched_alike(variant, p)]
            preprocessing = {"cpu": cpu.preprocessing, "cuda": cuda.preprocessing}[target]
            why = _constant_param(f"{self.name}-{target}", variant, suspects, preprocessing) if suspects else None
        if why:
            raise KernelError(f"kernel {self.name!r}, the {target} variant: {why}")
        for dtype in variant.dtypes:
            why = dtype_problem(target, dtype, variant)
            if why:
                raise KernelError(why)
        heuristic = []
        for bucket in buckets:
            for shape in bucket.shapes:
                for dtype in variant.dtypes:
                    try:
                        heuristic.append(variant.baseline(shape, dtype))
                    except KernelError as e:  # a kernel's other variant has a heuristic of its own: say which
                        raise KernelError(f"the {target} variant: {e}") from None
                    self._work(shape, dtype)
        if target in ("cpu", "cuda"):  # the replay target builds nothing
            from tunebench.backends import cpu, cuda  # the targets' preprocessors: a floor below

            preprocessing = {"cpu": cpu.preprocessing, "cuda": cuda.preprocessing}[target]
            for config, value, why in undefined_heuristic_values(variant, heuristic):
                if _undefined(variant, config, value, preprocessing):
                    raise KernelError(f"kernel {self.name!r}, the {target} variant: {why}")

    def _launched_alike(self, variant: Variant, param: str) -> bool:
        """Whether the CUDA variant's launch is one whatever the param's value (the others at their
        first values) on each representative shape and dtype: a param the template cannot tell
        apart may still size the grid, which tells it apart (a launch that raises: not judged)."""
        first = {n: vs[0] for n, vs in variant.space.values.items()}
        try:
            return all(len({launch_of(self, variant, {**first, param: value}, shape, dtype)
                            for value in variant.space.values[param]}) == 1
                       for bucket in self.buckets_for("cuda") for shape in bucket.shapes for dtype in variant.dtypes)
        except KernelError:
            return False

    def _work(self, shape: tuple, dtype: str) -> None:
        """``flops(shape)`` and ``bytes(shape, dtype)`` called as a tune calls them: an error, or
        an answer that is no finite number of at least 0, names the kernel, the shape and the form."""
        for what, fn, args in (("flops", self.flops, (shape,)), ("bytes", self.bytes, (shape, dtype))):
            if fn is None:
                continue
            form = f"{what}=lambda {', '.join(('shape', 'dtype')[:len(args)])}: ..."
            call = f"{what}({', '.join(map(repr, args))})"
            try:
                value = fn(*args)
            except Exception as e:  # noqa: BLE001 - the user's code: any error is the declaration's
                raise KernelError(f"kernel {self.name!r}: {call} raised {raised(e)} "
                                  f"(it is called as {form})") from None
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(value) or value < 0:
                raise KernelError(f"kernel {self.name!r}: {call} gave {value!r}, not a number of "
                                  f"{'FLOPs' if what == 'flops' else 'bytes'} per call")

    def tolerances(self, dtype: str, args: Mapping[str, Any]) -> list[tuple[float, float]]:
        """Each output's (rtol, atol) in a ``dtype`` task: its own name's where ``tolerance`` keys
        it; else, for an integer (or bool) output, its dtype's (exact by default: a count or an
        index off by one is wrong whatever the task computes in); else the looser of the task
        dtype's and the output dtype's (a float32 output of an int8 task is not exact, a float16
        output of a float32 task holds float16's rounding). ``args`` gives each output's array, or
        its dtype (as a trial records it)."""
        found = []
        for name in self.outputs:
            own = numpy_dtype(getattr(args[name], "dtype", args[name])).name
            if name in self.tolerance:
                found.append(self.tolerance[name])
            elif kind(numpy_dtype(own)) in "biu":
                found.append(self.tolerance.get(own, (0.0, 0.0)))
            else:
                task, out = self.tolerance.get(dtype, (0.0, 0.0)), self.tolerance.get(own, (0.0, 0.0))
                found.append((max(task[0], out[0]), max(task[1], out[1])))
        return found

    def declaration(self, variant: Variant, dtype: str, recorded: Mapping[str, str] | None = None) -> dict[str, str]:
        """What decides a trial's outcome besides the config and shape, part by part: a trial is
        reused only while every part is unchanged, and the summary names the parts that did.
        ``recorded``: the task's declaration in the records, whose functions an earlier tunebench
        hashed by their bytecode; where today's bytecode hashes the same, that part is unchanged
        (its records are reused on the Python that made them, not all measured again)."""
        found = {"template": variant.source_hash, "flags": variant.declared_flags, "dtype": dtype,
                 "args builder": code_hash(self.args), "reference": code_hash(self.reference) + self._given,
                 "tolerance": repr(self.tolerance.get(dtype)) + "".join(  # as before where no output is keyed
                     f", {n}: {self.tolerance[n]!r}" for n in self.outputs if n in self.tolerance),
                 "outputs": repr((self.outputs, self.inout, self.inplace))}
        for part, fn, given in (("args builder", self.args, ""), ("reference", self.reference, self._given)):
            was = (recorded or {}).get(part)
            if was not in (None, found[part]) and was == bytecode_hash(fn) + given:
                found[part] = was
        return found

    @property
    def _given(self) -> str:
        """What the declaration adds to the reference's hash where it is given the config: the same
        source computed other outputs (a ``reference(x, config=None)``, given none before)."""
        return " (given the config)" if self.reference_per_config else ""

    def changed_since(self, variant: Variant, dtype: str, recorded: Mapping[str, str] | None) -> list[str]:
        """The parts of a task's recorded declaration (see :meth:`declaration`) that differ today:
        what the gate and the report say changed since the tune."""
        today = self.declaration(variant, dtype, recorded)
        return [part for part, value in (recorded or {}).items() if today.get(part) != value]

    def setup_hash(self, variant: Variant, dtype: str, recorded: Mapping[str, str] | None = None) -> str:
        """A short hash of :meth:`declaration`, kept with each trial and final round."""
        return declaration_hash(self.declaration(variant, dtype, recorded))

    @staticmethod
    def retargeted(variant: Variant, task: Mapping[str, Any]) -> str | None:
        """Where a recorded task was tuned with another entry point than the variant calls now,
        the words that say so: its records measured another function, so none of them is served
        or gated for this one. The entry is kept beside the declaration, not in it, as the
        compiler is (a declaration's hash decides reuse, and records from before it was kept
        would all be measured again); a task from before says nothing, and is taken as this one's."""
        tuned = task.get("entry")
        return None if tuned in (None, variant.entry) else (
            f"tuned with the entry point {tuned}, and the variant calls {variant.entry} now")

    def reached_from(self, path: Path) -> None:
        """Keep the suite file the kernel is collected or looked up from, as reached (links and
        all), and the file it leads to now: the first one's, whose import declared it (see
        :attr:`relinked`)."""
        if self._reached is None:
            self._reached = [Path(os.path.abspath(path)), Path(os.path.realpath(path)), time.monotonic(), False]

    def reached_under(self, folder: str | Path) -> bool:
        """Whether the suite file it was first reached from lies in ``folder``, both as reached
        (links unresolved): that folder's suites are its own, whatever its link leads to now."""
        return self._reached is not None and Path(os.path.abspath(folder)) in self._reached[0].parents

    def followed(self) -> None:
        """Take the file its suite's link leads to now as the one followed: a lookup has just
        imported it (which handed this declaration back, a helper module's) or kept this declaration
        where that file declares none or fails to import. It is :attr:`relinked` again only once the
        link is switched anew: each lookup imported the file again, and went the slow way."""
        if self._reached is not None:
            self._reached[1:] = Path(os.path.realpath(self._reached[0])), time.monotonic(), False

    @property
    def relinked(self) -> bool:
        """Whether the suite file it was collected from leads to another file now than when last
        followed (:meth:`followed`): a link to it, or to a folder above it, switched since (a release
        deployed by a symlink), whose file declares the kernel anew, as a fresh process imports it.
        Checked at most every :data:`REREAD_S`: a lookup asks per launch."""
        reached = self._reached
        if reached is None:
            return False
        now = time.monotonic()
        if not 0 <= now - reached[2] < REREAD_S:
            reached[2:] = now, Path(os.path.realpath(reached[0])) != reached[1]
        return reached[3]

    @property
    def origin(self) -> Path | None:
        """The folder its variants' templates are found from, and its project's records by
        ``best()``: the declaring file's, unless a variant added later names none."""
        return next((v.origin for v in self.variants.values() if v.origin), None)

    def tune_command(self, records: str | Path | None = None) -> str:
        """The command that tunes this kernel, for a message to give: its own suite file (a
        kernel beside the shipped ones is not under suites/), as the working directory reaches
        it, with the run's ``--rootdir`` and ``-c`` and, where ``records`` is not the folder the
        command writes (a plain tune's: ``records/`` in the :func:`project_root` above the suite, its
        one argument), ``--tune-records`` (see :func:`tune_options`): run as said, it resumed nothing.
        The suite is the test module the kernel was collected or looked up from, not a helper that
        declares it (``pytest codegen.py --tune`` collects nothing)."""
        suite = self.collected_from or self.declared_in  # a generator's helper module holds no test
        command = f"pytest {from_here(suite) if suite else 'suites'} --tune"
        start = suite.parent if suite else Path.cwd()
        return command + tune_options(records, (project_root(start) or start) / "records")

    def throughput(self, shape: tuple, dtype: str, ms: float) -> tuple[float, str] | None:
        """GFLOP/s where FLOPs are declared, else GB/s where bytes are; None otherwise."""
        if self.flops is not None:
            return self.flops(shape) / (ms * 1e-3) / 1e9, "GFLOP/s"
        if self.bytes is not None:
            return self.bytes(shape, dtype) / (ms * 1e-3) / 1e9, "GB/s"
        return None


def _constant_param(name: str, variant: Variant, suspects: list[tuple[str, str]],
                    preprocessing: Callable[[Variant, Mapping], tuple[str, list[str], str] | None]) -> str | None:
    """:func:`~tunebench.backends.base.constant_param` by the target's preprocessor, its verdict
    kept in the compile cache under the first config's text, the preprocessor, the environment
    that adds to its include path, the suspects, the values and the names the directives read,
    which give the settings of the others judged (see
    :func:`~tunebench.backends.base.constant_settings`, worked out only where it judges): nvcc -E
    takes 0.1 to 0.3 s a run, and the check ran it dozens of times for a kernel of several params
    of many values at every collection and compile-check. The headers its runs read are kept with
    it, and it is judged again once one is edited: one the compiler finds on its own include path
    is in no text the key holds (a header put since in a folder searched earlier is not seen). A
    verdict that a failed run of the preprocessor had a say in is not kept: the machine may have
    stopped it."""
    values = variant.space.values
    first = preprocessing(variant, {n: vs[0] for n, vs in values.items()})
    if first is None:  # no preprocessor here: it judges nothing
        return None
    failed = []
    headers: dict[str, str | None] = {}  # every header the runs read, with its hash

    def preprocessed(config: Mapping) -> str | None:
        """The config's template as the preprocessor reads it, a failure noted (see above); nvcc's
        temporary files in a folder of their own (see :func:`~tunebench.backends.cache.compiler_temp`)."""
        command, source = preprocessing(variant, config)[1:]
        try:
            with compiler_temp(command, Path(tempfile.gettempdir()), "tunebench-nvcc-") as tmp:
                text = preprocess(command, source, variant.origin, tmp, headers)
        except OSError:  # no folder for it (a full disk): it judges nothing
            text = None
        failed.append(text is None)
        return text

    def judged() -> tuple[dict, bool]:
        """The verdict with the headers its runs read, and whether it holds (no run failed)."""
        why = constant_param(suspects, values, constant_settings(read, suspects, values), preprocessed)
        return {"why": why, "headers": headers}, not any(failed)

    read = directive_names(variant)  # in the key: a verdict holds for the settings judged, which it gives
    key = repr((first, str(variant.origin), {v: os.environ.get(v) for v in INCLUDE_ENV}, suspects, values,
                sorted(read)))
    return BuildCache().verdict(f"{name}-constant-params", key, judged, still=lambda kept: (
        header_hashes(kept["headers"]) == kept["headers"]))["why"]


def _undefined(variant: Variant, config: Mapping, name: str,
               preprocessing: Callable[[Variant, Mapping], tuple[str, list[str], str] | None]) -> bool:
    """Whether ``name`` is no macro at the end of the config's template, as the target's
    preprocessor reads it: a header through -I or -include, or a built-in, may define it. False
    where the preprocessor cannot run: it judges nothing then."""
    how = preprocessing(variant, config)
    if how is None:
        return False
    _, command, source = how
    mark = f"tunebench_undefined_{name}"
    try:
        with compiler_temp(command, Path(tempfile.gettempdir()), "tunebench-nvcc-") as tmp:
            text = preprocess(command, f"{source}\n#ifndef {name}\n{mark}\n#endif\n", variant.origin, tmp)
    except OSError:  # no folder for it (a full disk)
        return False
    return text is not None and mark in text


def kernels_in(name: str, value: Any) -> list[Kernel]:
    """The kernels a module-level ``name`` holds: a Kernel, or those in a table (a dict's values, a
    list, a tuple), as a code generator keeps them: ``KERNELS = {op: Kernel(...) for op in OPS}``
    (with ``None`` for an op it cannot make). Their subclasses too (an ``OrderedDict``, a
    ``defaultdict``, a namedtuple: left out, the suite collected nothing and said nothing), read
    as the built-in type reads them: every test module of any project is asked, and a class of
    its own may do anything when iterated."""
    return [k for _, k in table_entries(name, value)]


#: How deep tables nest where kernels are sought: ``KERNELS[dtype][op]`` is two; and how many
#: tables within a module-level one are looked into (a dict of 300,000 lists took 1.4 s).
TABLE_DEPTH = 3
TABLE_VISITS = 10_000


def table_entries(name: str, value: Any, say: Callable[[str], None] | None = None) -> list[tuple[str, Kernel]]:
    """:func:`kernels_in` with where each sits, ``KERNELS['add']`` (``name`` alone for a Kernel):
    an error about one generated kernel names its entry, as the table's name alone does not.
    Tables in tables too, to :data:`TABLE_DEPTH`, where a table holds kernels alone (and None):
    ``KERNELS = {dtype: {op: Kernel(...)}}`` collected nothing, unsaid, while a unit test's
    parametrize data, ``CASES = [(suite.softmax, (128, 256))]``, is no table of kernels (its
    module would collect the suite's tasks), nor is a module's nested data walked through. A dict
    reached through dicts alone that holds a kernel beside anything else is told to ``say`` (see
    :func:`_mixed`): ``{"gemm": {"f32": Kernel(...), "meta": 3}}`` collected nothing, unsaid."""
    if issubclass(type(value), Kernel):  # by type: a Mock(spec=Kernel) passes isinstance, and has no name
        return [(name, value)]
    return _nested(value, name, TABLE_DEPTH, {id(value)}, say) or []


def _items(value) -> Any:
    """A table's (key, entry) pairs, read as the built-in type reads them (not isinstance: a mock
    or a proxy passes it for a dict, and fails dict.items); () for anything else."""
    kind = type(value)
    return dict.items(value) if issubclass(kind, dict) else enumerate(list.__iter__(value)) \
        if issubclass(kind, list) else enumerate(tuple.__iter__(value)) if issubclass(kind, tuple) else ()


def _nested(value, where: str, depth: int, within: set, say: Callable[[str], None] | None, top: bool = True,
            keyed: bool = True) -> list[tuple[str, Kernel]] | None:
    """("name[key]...", kernel) of a table's kernels, or None where a table below the top holds
    anything but kernels, None and such tables (it is data: the walk ends at its first entry).
    ``keyed``: every table from the top down to this one is a dict."""
    keyed = keyed and issubclass(type(value), dict)
    found = []
    for key, v in _items(value):
        if issubclass(type(v), Kernel):
            found.append((f"{where}[{key!r}]", v))
        elif depth > 1 and issubclass(type(v), (dict, list, tuple)) and id(v) not in within \
                and len(within) < TABLE_VISITS:
            within.add(id(v))
            inner = _nested(v, f"{where}[{key!r}]", depth - 1, within, say, top=False, keyed=keyed)
            if inner is None and not top:
                return None
            found += inner or []
        elif not top and v is not None and id(v) not in within:
            if keyed and say:
                _mixed(value, where, key, v, say)
            return None
    return found


class KernelTableWarning(UserWarning):
    """A table of named kernels within another holds something else beside them: it is read as
    data, and its kernels are neither tuned nor looked up."""


def _mixed(table: dict, where: str, key: Any, value: Any, say: Callable[[str], None]) -> None:
    """Say that a table of named entries within a table of them, reached by keys alone, holds a
    kernel beside ``value``: read as data, its kernels were collected nowhere and looked up by no
    one, unsaid. Not an error: a unit test's cases (``{"small": {"kernel": k, "tol": 1e-3}}``) are
    such a table, and every test module of a project is asked. A row of a list or tuple
    (``[(kernel, shape)]``) is data, and stays unsaid."""
    kernels = [f"{where}[{k!r}]" for k, v in dict.items(table) if issubclass(type(v), Kernel)]
    if kernels:
        say(f"{where}[{key!r}] ({type(value).__name__}) is no Kernel, in a table of kernels within another: such a "
            f"table is read as data, so {', '.join(kernels)} {'is' if len(kernels) == 1 else 'are'} neither tuned nor "
            f"looked up; move {key!r} out of {where} to tune {'it' if len(kernels) == 1 else 'them'} (for data "
            f"that holds kernels, filter KernelTableWarning)")
