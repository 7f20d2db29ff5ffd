"""An entry point's parameters read from a real gcc build, and arguments checked against them."""

import subprocess

import numpy as np

from tunebench.backends.cpu import gcc_command
from tunebench.backends.params import Param, args_problem, launch_offsets, library_functions, ordinal, packed

SIGNATURES_C = """\
#include <stdarg.h>
#include <stdint.h>
typedef float real;
enum mode { FAST, SAFE };
struct pair { int a, b; };
void typed(const real *restrict x, double *y, const int64_t n, unsigned short k, enum mode m, _Float16 h,
           struct pair p, void *scratch) {}
void variadic(int n, ...) {}
static void hidden(int n) {}
void uses_hidden(void) { hidden(1); }
"""


def build(tmp_path, source: str, lang: str = "c"):
    src = tmp_path / ("k.c" if lang == "c" else "k.cpp")
    src.write_text(source)
    out = tmp_path / "k.so"
    subprocess.run([c.format(src=src, out=out) for c in gcc_command((), lang)], check=True, capture_output=True)
    return out


def test_the_dwarf_of_a_build_gives_each_parameters_kind_bytes_and_c_type(tmp_path):
    functions = library_functions(build(tmp_path, SIGNATURES_C))
    assert set(functions) >= {"typed", "variadic", "uses_hidden"} and "hidden" not in functions
    x, y, n, k, m, h, p, scratch = functions["typed"]
    assert (x.kind, x.size, x.pointee) == ("pointer", 8, Param(4, "float", "float"))  # through typedef, const
    assert y.pointee.scalar == "np.float64" and y.ctype == "double *"
    assert (n.kind, n.size, n.scalar) == ("int", 8, "np.int64")
    assert (k.kind, k.size, k.scalar) == ("int", 2, "np.uint16")
    assert (m.kind, m.size) == ("int", 4) and h.scalar == "np.float16"
    assert (p.kind, p.size) == ("other", 8) and scratch.pointee.ctype == "void"
    assert functions["variadic"] is None  # a variable number of parameters: not checked
    assert functions["uses_hidden"] == ()


def test_a_complex_array_is_checked_against_the_complex_type_it_is_given_for(tmp_path):
    """A complex128 array for a float _Complex * passed: every config, the baseline's too, was wrong."""
    (z, n) = library_functions(build(tmp_path, "void c(float _Complex *z, int n) {}\n"))["c"]
    assert (z.pointee.kind, z.pointee.size) == ("complex", 8)
    assert args_problem({"z": np.zeros(4, np.complex64), "n": np.int32(4)}, (z, n)) is None
    assert args_problem({"z": np.zeros(4, np.complex128), "n": np.int32(4)}, (z, n)) == (
        "argument 'z' (complex128 array) where the kernel's 1st parameter (complex float *z) points to complex float: "
        "give an array of np.complex64")
    assert "give an array of np.complex64" in args_problem({"z": np.zeros(4, np.float64), "n": np.int32(4)}, (z, n))


def test_a_complex_scalar_is_checked_as_a_float_is_in_size_and_kind(tmp_path):
    """A float32 for a float _Complex taken by value, a complex64 for a double (its 8 bytes) or
    for a std::complex<double>: each passed, and every config read garbage."""
    z, w, d = library_functions(build(tmp_path, "void k(float _Complex z, double _Complex w, double d) {}\n"))["k"]
    (c,) = library_functions(build(tmp_path, '#include <complex>\nextern "C" void p(std::complex<double> c) {}\n',
                                   "c++"))["p"]
    fits = {"z": np.complex64(1j), "w": np.complex128(1j), "d": np.float64(1)}
    assert args_problem(fits, (z, w, d)) is None and args_problem({"c": np.complex128(1j)}, (c,)) is None
    assert args_problem({"z": np.float32(1), "w": np.complex64(1j), "d": np.complex64(1j)}, (z, w, d)) == (
        "argument 'z' (float32 scalar) where the kernel's 1st parameter (complex float z) takes an 8-byte complex: "
        "give it np.complex64; argument 'w' (complex64 scalar) where the kernel's 2nd parameter (complex double w) "
        "takes a 16-byte complex: give it np.complex128; argument 'd' (complex64 scalar) where the kernel's 3rd "
        "parameter (double d) takes an 8-byte float: give it np.float64")
    assert args_problem({"c": np.complex64(1j)}, (c,)) == (
        "argument 'c' (complex64 scalar) where the kernel's 1st parameter (complex<double> c) takes a 16-byte "
        "complex: give it np.complex128")


def test_a_scalar_of_another_size_than_a_struct_the_dwarf_names_is_refused_as_a_cubins_bytes_are(tmp_path):
    """Only a cubin's bytes were checked for a struct by value: on the CPU, whose library's DWARF
    names it, a float32 for a 12-byte struct passed, and every config read garbage."""
    y, t, n = library_functions(build(tmp_path, "struct tri { float a, b, c; };\n"
                                                "void k(float *y, struct tri t, int n) {}\n"))["k"]
    tri = np.dtype([("a", np.float32), ("b", np.float32), ("c", np.float32)])
    fits = {"y": np.zeros(4, np.float32), "t": np.zeros((), tri)[()], "n": np.int32(4)}
    assert args_problem(fits, (y, t, n)) is None
    assert args_problem({**fits, "t": np.float32(1)}, (y, t, n)) == (
        "argument 't' (float32 scalar, 4 bytes) where the kernel's 2nd parameter (tri t) takes 12 bytes: give it a "
        "numpy struct scalar of its fields, 12 bytes as C lays them out")
    padded = np.dtype([("a", np.float32), ("b", np.float32), ("c", np.float32), ("pad", np.float32)])
    assert args_problem({**fits, "t": np.zeros((), padded)[()]}, (y, t, n)).startswith(
        "argument 't' (16-byte struct) where the kernel's 2nd parameter (tri t) takes 12 bytes: ")


def test_an_array_of_structs_of_another_size_than_the_struct_pointed_to_is_refused(tmp_path):
    """A params struct passed by pointer took any array: a float64 field for the struct's float
    made the structs 16 bytes for 12, the check passed, and every config read garbage."""
    p, y = library_functions(build(tmp_path, "struct cfg { int n, m; float scale; };\n"
                                             "void k(const struct cfg *p, float *y) {}\n"))["k"]
    fields = [("n", np.int32), ("m", np.int32)]
    fits = {"p": np.zeros(1, fields + [("scale", np.float32)]), "y": np.zeros(4, np.float32)}
    assert args_problem(fits, (p, y)) is None
    assert args_problem({**fits, "p": np.zeros(1, fields + [("scale", np.float64)])}, (p, y)) == (
        "argument 'p' (array of 16-byte structs) where the kernel's 1st parameter (cfg *p) points to 12-byte cfg "
        "structs: give an array of a numpy struct dtype of its fields, 12 bytes as C lays them out")


def test_an_array_for_a_container_or_struct_holding_pointers_is_refused_and_a_plain_struct_is_not(tmp_path):
    """An extern "C" entry taking a std::vector<float> & took a float32 array: every config
    crashed with SIGSEGV (the floats read as the vector's pointers), with no word on why."""
    functions = library_functions(build(tmp_path, "#include <vector>\nstruct xy { float x, y; };\n"
                                                  "struct view { const float *data; long n; };\n"
                                                  'extern "C" void k(std::vector<float> &v, const view *w, xy *p)'
                                                  " { v[0] = w->n + p->x; }\n"
                                                  # an array member's DIE has subranges for children, no members
                                                  "typedef const float *row[2];\n"
                                                  "struct rows { const float *r[4]; int n; };\n"
                                                  "struct vectors { std::vector<float> v[2]; };\n"
                                                  "struct grid { row g[3][2]; };\n"
                                                  "struct tile { float t[4][4]; int n; };\n"
                                                  'extern "C" void arrays(rows *r, const vectors &v, grid *g, '
                                                  "tile *t) { t->n = r->n + v.v[0].size() + !g->g[0][0][0]; }\n",
                                        "c++"))
    v, w, p = functions["k"]
    floats = np.zeros(8, np.float32)
    assert args_problem({"v": floats}, (v,)) == (
        "argument 'v' (float32 array) where the kernel's 1st parameter (vector<float, std::allocator<float> > *v) "
        "points to vector<float, std::allocator<float> >, which holds pointers (a C++ container's, or a struct's): no "
        "numpy array is one; take a pointer to its elements (const float *) and their count")
    assert args_problem({"w": np.zeros(1, [("data", np.uint64), ("n", np.int64)])}, (w,)).startswith(
        "argument 'w' (array of 16-byte structs) where the kernel's 1st parameter (view *w) points to view, which "
        "holds pointers")
    assert args_problem({"p": floats}, (p,)) is None  # pairs of floats, as the struct lays them out
    *holding, tile = functions["arrays"]
    for param, held in zip(holding, ("rows", "vectors", "grid")):
        assert args_problem({param.name: floats}, (param,)).startswith(
            f"argument {param.name!r} (float32 array) where the kernel's 1st parameter ({held} *{param.name}) "
            f"points to {held}, which holds pointers")
    assert args_problem({"t": np.zeros(17, np.float32)}, (tile,)) is None  # floats and an int's 4 bytes


def test_an_extern_c_entry_of_a_cpp_build_is_read_under_its_own_name(tmp_path):
    functions = library_functions(build(tmp_path, 'template <int V> void f(float *x) {}\n'
                                                  'extern "C" void entry(float &x, long n) { f<4>(&x); }\n', "c++"))
    assert [(p.kind, p.size) for p in functions["entry"]] == [("pointer", 8), ("int", 8)]


def test_each_misfit_is_named_with_what_to_give():
    floats, ints = Param(8, "pointer", "float *", pointee=Param(4, "float", "float")), Param(4, "int", "int")
    fits = {"x": np.zeros(4, np.float32), "n": np.int32(4)}
    assert args_problem(fits, (floats, ints)) is None
    assert args_problem({"x": np.zeros(4, np.uint8), "n": np.int32(4)}, (Param(8, "pointer", "void *"), ints)) is None
    assert args_problem({"x": np.zeros(4, np.float32), "n": np.int32(4)}, (Param(  # a float's bits, as integers
        8, "pointer", "unsigned int *", pointee=Param(4, "int", "unsigned int", unsigned=True)), ints)) is None
    assert args_problem({"x": np.zeros(4, np.int32), "n": np.int32(4)}, (floats, ints)) == (
        "argument 'x' (int32 array) where the kernel's 1st parameter (float *) points to float, a float: give an "
        "array of np.float32")  # integers read as floats' bits: every value wrong
    assert args_problem({"x": np.zeros(4, np.complex64), "n": np.int32(4)}, (floats, ints)) is None  # interleaved
    assert args_problem({**fits, "n": np.float32(4)}, (floats, ints)) == (
        "argument 'n' (float32 scalar) where the kernel's 2nd parameter (int) takes a 4-byte int: give it np.int32")
    assert args_problem({**fits, "x": np.zeros(4)}, (floats, ints)) == (
        "argument 'x' (float64 array) where the kernel's 1st parameter (float *) points to 4-byte float: give an "
        "array of np.float32")
    assert "takes a pointer: pass an array" in args_problem({**fits, "x": np.float32(1)}, (floats, ints))
    assert "takes a value: pass a numpy scalar" in args_problem({**fits, "n": np.zeros(4, np.int32)}, (floats, ints))
    assert args_problem(fits, (floats,)) == "the args builder gives 2 arguments (x, n), the kernel takes 1"
    assert args_problem({"x": np.zeros(4), "n": np.int64(4)}, (floats, ints)) == (  # all at once: one run names them
        "argument 'x' (float64 array) where the kernel's 1st parameter (float *) points to 4-byte float: give an "
        "array of np.float32; argument 'n' (int64 scalar) where the kernel's 2nd parameter (int) takes a 4-byte int: "
        "give it np.int32")
    assert "takes an 8-byte int" in args_problem({**fits, "n": np.int32(4)}, (floats, Param(8, "int", "long")))
    flag = Param(1, "int", "bool", unsigned=True)  # DW_ATE_boolean
    assert args_problem({**fits, "n": np.int32(1)}, (floats, flag)).endswith("takes a 1-byte int: give it np.bool_")
    assert args_problem({**fits, "n": np.bool_(True)}, (floats, flag)) is None
    # a cubin lists bytes only
    assert args_problem({**fits, "n": np.int64(4)}, (Param(8), Param(4))) == (
        "argument 'n' (int64 scalar, 8 bytes) where the kernel's 2nd parameter takes 4 bytes: give it a numpy scalar "
        "of its C type, of 4 bytes (np.float32, np.int32, ...)")
    assert args_problem({**fits, "n": np.float32(4)}, (Param(8), Param(2))).endswith(
        "of 2 bytes (np.float16, ml_dtypes.bfloat16, np.int16, ...)")  # a __half given as a float32
    assert args_problem({**fits, "n": np.float32(4)}, (Param(8), Param(1))).endswith(
        "takes 1 byte: give it a numpy scalar of its C type, of 1 byte (np.int8, np.uint8, np.bool_, "
        "ml_dtypes.float8_e4m3fn, ...)")  # an __nv_fp8_e4m3 given as a float32
    struct = np.dtype([("n", np.int64), ("alpha", np.float64)])
    assert args_problem({**fits, "n": np.zeros((), struct)}, (Param(8), Param(16))) == (
        "argument 'n' (0-d array of 16-byte structs, passed as an 8-byte pointer) where the kernel's 2nd parameter "
        "takes 16 bytes: give it a numpy scalar of its C type, of 16 bytes (a numpy struct scalar for a struct) (a 0-d "
        "array is passed as a pointer: give its scalar, n[()])")
    assert args_problem({**fits, "n": np.zeros((), struct)[()]}, (Param(8), Param(16))) is None
    # a struct's size said once: it was "(16-byte struct, 16 bytes)"
    assert args_problem({**fits, "n": np.zeros((), struct)[()]}, (Param(8), Param(12))) == (
        "argument 'n' (16-byte struct) where the kernel's 2nd parameter takes 12 bytes: give it a numpy scalar of its "
        "C type, of 12 bytes (a numpy struct scalar for a struct)")


def test_a_launch_packs_half_and_bool_scalars_by_their_bits_and_a_struct_where_c_would_not():
    """PyCUDA's struct has no half-float code and takes a bool for no number; it packs a numpy
    struct with no alignment, where the kernel reads a 16-byte aligned one at byte 32."""
    half, flag = packed(np.float16(1.0)), packed(np.bool_(True))
    assert (half.dtype, int(half)) == (np.uint16, 0x3C00) and (flag.dtype, int(flag)) == (np.uint8, 1)
    clamp = np.zeros((), np.dtype({"names": ["lo", "hi", "eps", "pad"], "formats": ["<f4"] * 4}, align=True))[()]
    args = {"x": np.zeros(4, np.float32), "y": np.zeros(4, np.float32), "n": np.int32(4), "c": clamp}
    assert launch_offsets(args) == [0, 8, 16, 20]
    assert launch_offsets({"h": np.float16(1), "n": np.int32(4), "b": np.bool_(0), "d": np.float64(1)}) == [0, 4, 8, 16]
    cubin = tuple(Param(size, offset=at) for size, at in ((8, 0), (8, 8), (4, 16), (16, 32)))
    assert args_problem(args, cubin) == (
        "argument 'c' (16-byte struct) lands at byte 20 of the launch's arguments, where the kernel reads its "
        "parameter at byte 32 (aligned as C aligns it; PyCUDA packs a numpy struct unaligned): pass a struct "
        "first, or its fields as separate scalars")
    assert args_problem({"c": clamp, "x": args["x"]}, (Param(16, offset=0), Param(8, offset=16))) is None  # a struct first


def test_a_parameter_is_counted_as_a_reader_counts():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th", "112th"]
