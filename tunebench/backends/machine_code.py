"""Whether two builds hold the same machine code: a template edited in its comments or
whitespace alone builds it again, and a ratio of the same code measured twice is noise alone
(the gate read 1.097x against a 1.100x limit for a comment in a header).

Read from the ELF files, conservatively: everything a build's code does when run, its ELF header
and segments and the bytes and placement of every section that carries behaviour, must be alike.
Left out is only what differs between two builds of unchanged code in different folders (gcc 12
and clang 19 at -O3 -g -march=native -fopenmp, the shipped suites and others): the build ID (a
hash of the whole file), the debug sections (the paths and names of the sources, their lines)
and, in a shared library, the sections it does not load (its symbol table names the source file).
A cubin is read whole by the driver (its symbols, its kernels' attributes in ``.nv.info``), so all
but its debug sections count; nvcc's cubins of unchanged code are alike throughout. What the
compiler writes into the code from a line number or a file name (``assert``, ``__LINE__``, clang's
OpenMP source locations in ``.rodata``) makes other code: measured, as any other change is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

#: Sections that differ between two builds of the same code: the build ID, and the debug information.
IGNORED = (".note.gnu.build-id",)
DEBUG_PREFIXES = (".debug", ".zdebug", ".nv_debug")
#: The ELF header's fields of the code (not those of the file's layout: where its section headers lie).
HEADER = ("e_ident", "e_type", "e_machine", "e_version", "e_entry", "e_flags")
SHF_ALLOC = 0x2


def same_code(a: Path, b: Path) -> bool:
    """Whether the ELF files ``a`` and ``b`` (two shared libraries, two cubins) hold the same code;
    False where that cannot be told: either is not ELF (nor a whole one: cut short), or pyelftools
    is not installed (then nothing is compared, and the builds are measured)."""
    try:
        code = _code(a)
        return code is not None and code == _code(b)
    except ImportError:
        return False


def _code(path: Path) -> tuple | None:
    """What of an ELF file decides what its code does when run (see the module docstring); None
    where it is not one, or not a whole one."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        try:  # a truncated file fails where its headers or sections are read, past its end
            elf = ELFFile(f)
            library = elf["e_type"] == "ET_DYN"
            header = tuple(_plain(elf.header[key]) for key in HEADER)
            segments = tuple(_plain(s.header) for s in elf.iter_segments())
            sections = tuple((s.name, _plain({k: v for k, v in s.header.items() if k not in ("sh_name", "sh_offset")}),
                              b"" if s["sh_type"] == "SHT_NOBITS" else s.data())
                             for s in elf.iter_sections()
                             if s.name not in IGNORED and not s.name.startswith(DEBUG_PREFIXES)
                             and (not library or s["sh_flags"] & SHF_ALLOC))
        except ELFError:
            return None
    return header, segments, sections


def _plain(value):
    """A header's field as a comparable value (pyelftools gives nested containers for some)."""
    if isinstance(value, Mapping):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    return value
