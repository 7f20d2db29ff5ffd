"""An entry point's parameters as its compiled artefact lists them, and the args builder's
arguments checked against them before a call.

A kernel is called with the arguments as the args builder gives them: a CUDA launch packs their
bytes, ctypes passes each as its numpy dtype's C type. A float64 for a ``float`` parameter is no
error to either; every config then reads a wrong value and fails as a wrong result, with no word
on why. So the parameters are read from what the compiler wrote, without running anything: a
cubin lists each one's bytes (:func:`tunebench.backends.launch.cubin_kernels`), a shared library
built with ``-g`` its C types (:func:`library_functions`, from the DWARF), and a mismatch is one
declaration error that names the argument. A cubin also gives each parameter's offset, which
must be where PyCUDA packs the argument (:func:`launch_offsets`).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tunebench.dtypes import is_float, kind

#: DWARF base type encodings (DW_ATE_*) that hold a float, and those that hold an integer.
FLOAT_ENCODINGS = {0x4}
COMPLEX_ENCODINGS = {0x3}  # DW_ATE_complex_float: float _Complex, double _Complex
INTEGER_ENCODINGS = {0x2, 0x5, 0x6, 0x7, 0x8}
UNSIGNED_ENCODINGS = {0x2, 0x7, 0x8}
#: Type qualifiers and aliases, looked through to the type they name.
ALIASES = {"DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type",
           "DW_TAG_atomic_type"}
POINTERS = {"DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_rvalue_reference_type"}
#: The C types of the floats two of a size share (float16 and bfloat16, the two 8-bit floats),
#: CUDA's structs and the compilers' own, by name, each with the one dtype whose bits it holds:
#: a float16 array read as ``__nv_bfloat16`` has the right size and every value wrong.
NAMED_FLOATS = {"__half": "float16", "_Float16": "float16", "__nv_bfloat16": "bfloat16", "__bf16": "bfloat16",
                "__nv_fp8_e4m3": "float8_e4m3fn", "__nv_fp8_e5m2": "float8_e5m2"}
#: The structs that are a complex, by name: C++'s ``std::complex<float>``, ``thrust::complex`` and
#: ``cuda::std::complex`` alike, and nvcc's own ``float _Complex``; their DWARF names a struct.
COMPLEX_STRUCTS = ("complex<float>", "complex<double>", "_Complex_float", "_Complex_double")


@dataclass(frozen=True)
class Param:
    """One parameter: its bytes; where a shared library's DWARF says more, its kind
    (``pointer``, ``float``, ``int``, ``complex`` or ``other``), its C spelling, whether an integer is
    unsigned, and for a pointer what it points to (None for ``void *``); where a cubin says so,
    its offset in a launch's argument buffer. ``dtype``: of a float in :data:`NAMED_FLOATS`,
    the dtype it holds. A CUDA vector type's kind is ``vector``."""

    size: int
    kind: str | None = None
    ctype: str | None = None
    unsigned: bool = False
    pointee: Param | None = None
    offset: int | None = None  # in a launch's argument buffer, where a cubin says
    name: str | None = None  # as the source names it, where the DWARF says
    dtype: str | None = None
    element: Param | None = None  # of a CUDA vector type (uchar4, float2, __half2): its x, y, z and w's type
    holds_pointers: bool = False  # a struct or class with a pointer among its members or bases' (std::vector)

    @property
    def scalar(self) -> str | None:
        """The numpy scalar type that passes this parameter by value, if a numpy type does."""
        if self.dtype is not None:
            return "np.float16" if self.dtype == "float16" else f"ml_dtypes.{self.dtype}"
        if self.ctype in ("bool", "_Bool"):
            return "np.bool_"
        if self.kind == "float" and self.size in (2, 4, 8):
            return f"np.float{self.size * 8}"
        if self.complex is not None:
            return f"np.{self.complex}"
        if self.kind == "int" and self.size in (1, 2, 4, 8):
            return f"np.{'u' if self.unsigned else ''}int{self.size * 8}"
        return None

    @property
    def complex(self) -> str | None:
        """The numpy complex dtype whose parts a parameter taken by value holds: a complex's, or a
        CUDA vector's of two floats (``float2``, which ``cuFloatComplex`` is); None for any other."""
        pair = self.kind == "vector" and self.element.kind == "float" and self.element.dtype is None \
            and self.size == 2 * self.element.size
        return f"complex{self.size * 8}" if (self.kind == "complex" or pair) and self.size in (8, 16) else None


def _given(value) -> tuple[str, np.dtype]:
    dtype = value.dtype if isinstance(value, np.ndarray) else np.asarray(value).dtype
    return ("array" if isinstance(value, np.ndarray) else "scalar"), dtype


def _described(what: str, dtype: np.dtype) -> str:
    if kind(dtype) == "V":
        return f"{dtype.itemsize}-byte struct" if what == "scalar" else f"array of {dtype.itemsize}-byte structs"
    return f"{dtype} {what}"


def _bytes(what: str, dtype: np.dtype) -> str:
    """What an argument passes, in bytes, where its description does not say it (a struct's does)."""
    if what == "array":
        return ", passed as an 8-byte pointer"
    return "" if kind(dtype) == "V" else f", {dtype.itemsize} bytes"


def _kind_of(dtype: np.dtype) -> str:
    return "float" if kind(dtype) == "f" else "complex" if kind(dtype) == "c" else "int" if dtype.kind in "iub" \
        else "other"


#: The numpy scalars of a parameter's size, for a parameter whose C type is not known.
SCALARS_OF_SIZE = {1: "np.int8, np.uint8, np.bool_, ml_dtypes.float8_e4m3fn",
                   2: "np.float16, ml_dtypes.bfloat16, np.int16", 4: "np.float32, np.int32",
                   8: "np.float64, np.int64"}


#: The kinds of a parameter passed by value as its bytes: a struct, a CUDA vector type.
STRUCTS = ("other", "vector")


def _mismatch(what: str, dtype: np.dtype, param: Param) -> str | None:
    """Why one argument does not fit its parameter (None where it does, or cannot be told)."""
    bytes_ = f"{param.size} byte{'s' if param.size != 1 else ''}"
    if param.kind is None:  # only the bytes are known: an array passes an 8-byte pointer
        size = 8 if what == "array" else dtype.itemsize
        if size == param.size:
            return None
        return (f"takes {bytes_}: give it a numpy scalar of its C type, of {bytes_} ("
                + (f"{SCALARS_OF_SIZE[param.size]}, ..." if param.size in SCALARS_OF_SIZE else "a numpy struct scalar "
                   "for a struct") + ")")
    if what == "array":
        if param.kind != "pointer":
            return "takes a value: pass a numpy scalar, or declare the parameter a pointer"
        to = param.pointee
        if to is not None and to.kind == "complex" and (dtype.kind != "c" or dtype.itemsize != to.size):
            return f"points to {to.ctype}: give an array of np.complex{to.size * 8}"
        # a vector type's elements, as a pointer to its element type's are: a float32 array for a uchar4 * passed
        vector, to = (to, to.element) if to is not None and to.element is not None else (None, to)
        of = f"{vector.ctype}, of " if vector else ""
        if to is not None and to.holds_pointers:
            return (f"points to {to.ctype}, which holds pointers (a C++ container's, or a struct's): no numpy array "
                    "is one; take a pointer to its elements (const float *) and their count")
        if to is not None and to.kind == "other" and kind(dtype) == "V" and to.size and dtype.itemsize != to.size:
            return (f"points to {to.size}-byte {to.ctype} structs: give an array of a numpy struct dtype of its "
                    f"fields, {to.size} bytes as C lays them out")
        if to is None or to.kind not in ("float", "int") or to.ctype == "char":  # void *, char *: any bytes
            return None
        if _other_float(dtype, to):
            return f"points to {of}{to.ctype}, which holds {to.dtype}: give an array of {to.scalar}"
        if kind(dtype) in "cV":  # complex, records
            return None
        if to.size != dtype.itemsize:
            return f"points to {of}{to.size}-byte {to.ctype}: give an array of {to.scalar or to.ctype}"
        if to.kind == "float" and _kind_of(dtype) == "int":  # a float's bits read as an integer type are the
            return f"points to {of}{to.ctype}, a float: give an array of {to.scalar or to.ctype}"  # template's way
        if to.kind == "int" and dtype.kind in "iub" and to.unsigned != (dtype.kind in "ub"):
            return f"points to {of}{to.ctype}, {'un' if to.unsigned else ''}signed: give an array of {to.scalar}"
        return None
    if param.kind == "pointer":
        return "takes a pointer: pass an array"
    if _other_float(dtype, param):
        return f"holds {param.dtype}: give it {param.scalar}"
    if param.kind in ("float", "int") and (param.size != dtype.itemsize or param.kind != _kind_of(dtype)):
        article = "an" if param.size == 8 else "a"
        return (f"takes {article} {param.size}-byte {param.kind}: give it "
                f"{param.scalar or 'a numpy scalar of its C type'}")
    if kind(dtype) != "V" and (param.complex or (param.kind == "vector" and kind(dtype) == "c")) \
            and dtype.name != param.complex:  # a complex, checked as a float is: its parts' size and kind
        if param.kind == "vector":
            return (f"takes two {param.element.size}-byte floats: give it np.{param.complex}, its real part x and its "
                    f"imaginary part y" if param.complex else "is no complex: give it a numpy struct scalar of its fields")
        return f"takes {'an' if param.size == 8 else 'a'} {param.size}-byte complex: give it np.{param.complex}"
    if param.kind in STRUCTS and param.size and param.size != dtype.itemsize:  # as a cubin's bytes are checked
        return f"takes {bytes_}: give it a numpy struct scalar of its fields, {bytes_} as C lays them out"
    return None


def _other_float(dtype: np.dtype, param: Param) -> bool:
    """Whether a float of one dtype is given for a named float of another of its size (bits
    read as an integer type are the template's own way, and no mismatch)."""
    return param.dtype is not None and is_float(dtype) and dtype.itemsize == param.size and dtype.name != param.dtype


def packed(value):
    """A scalar as PyCUDA can pack it into a launch: a float16, bfloat16 or 8-bit float by its
    bits (PyCUDA's struct has no code for them), a bool as a byte (not a numpy number to PyCUDA);
    anything else as it is."""
    if isinstance(value, np.generic) and is_float(value.dtype) and value.dtype.itemsize in (1, 2):
        return value.view(np.uint8 if value.dtype.itemsize == 1 else np.uint16)
    if isinstance(value, np.bool_):
        return np.uint8(value)
    return value


#: PyCUDA's format codes that Python's struct lacks, as struct spells their layout: a complex
#: scalar is two floats aligned as one (a ``cuFloatComplex``, a float2, wants 8: the check says so).
COMPLEX_CODES = {"F": "2f", "D": "2d"}


def launch_offsets(args: Mapping) -> list[int]:
    """Where PyCUDA packs each argument in a launch's buffer: C struct rules, by its format
    codes (a pointer ``P``, a numpy scalar its dtype's, a numpy struct ``Ns``, unaligned)."""
    form, offsets = "", []
    for value in args.values():
        value = packed(value)
        code = "P" if isinstance(value, np.ndarray) else f"{value.itemsize}s" if isinstance(value, np.void) \
            else np.asarray(value).dtype.char
        code = COMPLEX_CODES.get(code, code)
        if code in ("g", "G"):  # a long double: no code in PyCUDA's struct either (the CUDA target refuses it)
            code = f"{value.itemsize}s"
        offsets.append(struct.calcsize(form + code) - struct.calcsize(code))
        form += code
    return offsets


def args_problem(args: Mapping, params: tuple[Param, ...]) -> str | None:
    """Where the args builder's arguments do not fit the entry point's parameters: their number,
    or each one's kind or bytes (a CUDA launch packs the bytes as given, so a float64 for a ``float``
    shifts every parameter after it; ctypes passes it as a ``double`` the function never reads)."""
    given = [(name, *_given(v)) for name, v in args.items()]
    if len(given) != len(params):
        return (f"the args builder gives {len(given)} arguments ({', '.join(n for n, _, _ in given)}), the kernel "
                f"takes {len(params)}")
    names = [p.name for p in params]
    if set(names) == set(args) and names != list(args):  # the same names, another order: passed as given
        return (f"the args builder gives {', '.join(args)}, in that order, and the kernel takes {', '.join(names)}: "
                f"arguments are passed by position, so return them in the kernel's order")
    wrong = []  # every argument at fault, so that one run names them all
    for n, ((name, what, dtype), param, value) in enumerate(zip(given, params, args.values())):
        why = _mismatch(what, dtype, param)
        if why:
            size = _bytes(what, dtype) if param.kind in (None, *STRUCTS) else ""
            declared = f" ({_declaration(param)})" if param.ctype or param.name else ""
            zero_d = isinstance(value, np.ndarray) and value.ndim == 0
            wrong.append(f"argument {name!r} ({'0-d ' if zero_d else ''}{_described(what, dtype)}{size}) where the "
                         f"kernel's {ordinal(n + 1)} parameter{declared} {why}"
                         + (f" (a 0-d array is passed as a pointer: give its scalar, {name}[()])" if zero_d else ""))
    if wrong:
        return "; ".join(wrong)
    offsets = launch_offsets(args) if any(p.offset is not None for p in params) else [None] * len(params)
    for (name, what, dtype), param, offset in zip(given, params, offsets):
        if param.offset is not None and param.offset != offset:
            complex_ = dtype is not None and np.dtype(dtype).kind == "c" and np.dtype(dtype).itemsize in (8, 16)
            pair = f"{'float' if complex_ and np.dtype(dtype).itemsize == 8 else 'double'}2"
            how = (f"a complex scalar aligned as one of its floats, where the kernel's {pair} (cu{pair[0].upper()}"
                   f"{pair[1:-1]}Complex) is aligned as a whole" if complex_ else "a numpy struct unaligned")
            fix = ("pass it first, or its parts as two scalars" if complex_
                   else "pass a struct first, or its fields as separate scalars")
            return (f"argument {name!r} ({_described(what, dtype)}) lands at byte {offset} of the launch's "
                    f"arguments, where the kernel reads its parameter at byte {param.offset} (aligned as C aligns "
                    f"it; PyCUDA packs {how}): {fix}")
    return None


def _declaration(param: Param) -> str:
    """A parameter as C declares it, as far as it is known: ``float *x``, ``int n``, ``float``."""
    ctype, name = param.ctype or "", param.name or ""
    return f"{ctype}{'' if ctype.endswith('*') or not ctype or not name else ' '}{name}"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st: a parameter's place as a reader counts it."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _resolve(die):
    """The type a DIE's DW_AT_type names, through typedefs and qualifiers (None for void)."""
    while die is not None and "DW_AT_type" in die.attributes:
        die = die.get_DIE_from_attribute("DW_AT_type")
        if die.tag not in ALIASES:
            return die
    return None


def _param(die, pointee: bool = True) -> Param:
    """A type DIE (None: void) as a :class:`Param`."""
    if die is None:
        return Param(0, "other", "void")
    attrs = die.attributes
    name = attrs["DW_AT_name"].value.decode() if "DW_AT_name" in attrs else None
    size = attrs["DW_AT_byte_size"].value if "DW_AT_byte_size" in attrs else 0
    if die.tag in POINTERS:
        to = _param(_resolve(die), pointee=False) if pointee else None
        return Param(size or 8, "pointer", f"{to.ctype if to else '?'} *", pointee=to)
    if name in NAMED_FLOATS:
        return Param(size, "float", name, dtype=NAMED_FLOATS[name])
    if name in COMPLEX_STRUCTS:
        return Param(size, "complex", name)
    if die.tag == "DW_TAG_base_type":
        encoding = attrs["DW_AT_encoding"].value
        kind = ("float" if encoding in FLOAT_ENCODINGS else "int" if encoding in INTEGER_ENCODINGS
                else "complex" if encoding in COMPLEX_ENCODINGS else "other")
        return Param(size, kind, name, unsigned=encoding in UNSIGNED_ENCODINGS)
    if die.tag == "DW_TAG_enumeration_type":
        return Param(size, "int", f"enum {name or ''}".strip())
    if die.tag == "DW_TAG_array_type":  # a C99 pointer to rows, float (*x)[n]: its elements are what it holds
        return _param(_resolve(die), pointee)
    element = _vector_element(die)
    if element is not None:
        return Param(size, "vector", name, element=element)
    return Param(size, "other", name or die.tag[len("DW_TAG_"):].replace("_type", ""),
                 holds_pointers=_holds_pointers(die))


#: The DIEs of a struct's or class's own members and bases, whose types make up its bytes.
MEMBERS = ("DW_TAG_member", "DW_TAG_inheritance")


def _holds_pointers(die) -> bool:
    """Whether a struct's or class's bytes hold a pointer, in a member or a base at any depth (a
    C++ container's, std::vector's begin and end): no numpy array's data is one."""
    for child in die.iter_children():
        if child.tag not in MEMBERS or child.attributes.get("DW_AT_external"):  # a static member holds no bytes
            continue
        member = _resolve(child)
        while member is not None and member.tag == "DW_TAG_array_type":  # its bytes are its elements' (its
            member = _resolve(member)  # DIE's children are subranges, no members: an array of rows too)
        if member is not None and (member.tag in POINTERS or (member.tag != "DW_TAG_base_type"
                                                              and _holds_pointers(member))):
            return True
    return False


#: The members of a CUDA vector type (uchar4, float2, double4, __half2), in order.
VECTOR_MEMBERS = ("x", "y", "z", "w")


def _vector_element(die) -> Param | None:
    """The element type of a CUDA vector type's DIE (a struct of one to four members ``x``, ``y``,
    ``z``, ``w`` of one float or integer type); None for any other type."""
    if die.tag != "DW_TAG_structure_type":
        return None
    members = [m for m in die.iter_children() if m.tag == "DW_TAG_member"]
    names = tuple(m.attributes["DW_AT_name"].value.decode() if "DW_AT_name" in m.attributes else "" for m in members)
    if not members or names != VECTOR_MEMBERS[:len(members)]:
        return None
    types = {_param(_resolve(m), pointee=False) for m in members}
    element = types.pop()
    return element if not types and element.kind in ("float", "int") else None


def _parameters(function) -> tuple[Param, ...] | None:
    """A subprogram DIE's parameters; None where it takes a variable number."""
    params = []
    for child in function.iter_children():
        if child.tag == "DW_TAG_unspecified_parameters":
            return None
        if child.tag == "DW_TAG_formal_parameter":
            name = child.attributes.get("DW_AT_name")
            params.append(dataclasses.replace(_param(_resolve(child)), name=name.value.decode() if name else None))
    return tuple(params)


#: A function's symbol types: a plain one, or one chosen at load by a resolver (GNU ifunc, as
#: ``target_clones`` builds; pyelftools names type 10 STT_LOOS, the first of the OS's own).
FUNCTION_SYMBOLS = ("STT_FUNC", "STT_GNU_IFUNC", "STT_LOOS")


def library_functions(path: Path) -> dict[str, tuple[Param, ...] | None]:
    """The functions a shared library exports, by name, each with its parameters as the DWARF
    of a ``-g`` build gives them (None where it has none, or takes a variable number)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        symbols = elf.get_section_by_name(".dynsym")
        exported = {s.name for s in symbols.iter_symbols() if s["st_info"]["type"] in FUNCTION_SYMBOLS
                    and s["st_shndx"] != "SHN_UNDEF"} if symbols else set()
        return {**dict.fromkeys(exported), **dwarf_functions(elf, exported)}


def debug_functions(path: Path) -> dict[str, tuple[Param, ...] | None]:
    """Every function of a cubin built with ``-G``, by its symbol (mangled, unless ``extern
    "C"``), with its parameters' C types from the DWARF: a cubin built for speed lists only their
    bytes, which cannot tell an ``int`` from a ``float``."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        return dwarf_functions(ELFFile(f))


def dwarf_functions(elf, wanted: set[str] | None = None) -> dict[str, tuple[Param, ...] | None]:
    """The functions the DWARF of an ELF file describes (those ``wanted``, else all), by their
    symbol, each with its parameters. Its sections are read as they are: a cubin's relocations
    are of types pyelftools does not apply, and a linked library has none left."""
    found: dict[str, tuple[Param, ...] | None] = {}
    if not elf.has_dwarf_info():
        return found
    for cu in elf.get_dwarf_info(relocate_dwarf_sections=False).iter_CUs():
        for die in cu.iter_DIEs():
            attrs = die.attributes
            name = next((attrs[a].value.decode() for a in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name",
                                                           "DW_AT_name") if a in attrs), None)
            if die.tag != "DW_TAG_subprogram" or name is None or found.get(name) is not None \
                    or (wanted is not None and name not in wanted):
                continue
            found[name] = _parameters(die)
            if wanted is not None and len(found) == len(wanted) and all(v is not None for v in found.values()):
                return found  # the rest are headers' declarations and types
    return found
