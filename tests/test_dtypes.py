"""bfloat16 and the 8-bit floats, the dtypes numpy lacks: declared, built, poisoned, checked,
recorded and looked up by name like numpy's own, on a compiler with ``__bf16`` and on one
without it; and the complex dtypes, in a C and a C++ template's type."""

import re
import shutil
import subprocess
import sys
import tempfile

import ml_dtypes

import numpy as np
import pytest
from tinydb import TinyDB

import tunebench
from tests.test_gate import GATE
from tests.test_plugin import TUNE
from tunebench import compile_check, dtypes, measure
from tunebench.backends import cpu, cuda
from tunebench.backends.base import BuildEnvironmentError
from tunebench.backends.cache import run_compiler
from tunebench.backends.params import Param, args_problem, launch_offsets, packed
from tunebench.cli import main

#: Every measurement of these tests' runs is judged clean (quiet_verdicts): beside other load a tune
#: stops and a gate skips, as documented, and how a dtype is built, verified and looked up goes
#: unchecked. A busy machine's tunes have tests of their own (test_interference.py).
pytestmark = pytest.mark.usefixtures("quiet_verdicts")

#: y = x + 3 on bfloat16 data read and written as its 16 bits, so that any C compiler builds it;
#: ``skip`` leaves the last element unwritten.
BITS_C = """\
static float from_bits(unsigned short b) { union { unsigned u; float f; } v = { (unsigned)b << 16 }; return v.f; }
static unsigned short to_bits(float f)  /* rounded to nearest, ties to even */
{
    union { float f; unsigned u; } v = { f };
    return (unsigned short)((v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16);
}
void badd(const unsigned short *x, unsigned short *y, int n)
{
    for (int i = 0; i < n - skip; ++i) y[i] = to_bits(from_bits(x[i]) + 3.0f);
}
"""

#: The same in the compiler's own type, TB_DTYPE (``__bf16`` for bfloat16).
TYPED_C = """\
typedef TB_DTYPE elem;
void badd(const elem *x, elem *y, int n)
{
    for (int i = 0; i < n - skip; ++i) y[i] = (elem)(x[i] + (elem)3.0f);
}
"""

#: The last input is -3, so the element ``skip`` leaves unwritten is expected to be 0: only a
#: NaN poison tells it from a kernel's 0 (0xA5A5, a struct's poison, is -2.9e-16 as a bfloat16).
SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def args(shape, dtype, rng):
    x = rng.uniform(-8, 8, shape[0]).astype(np.float32)
    x[-1] = -3
    return {"x": x.astype(dtype), "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])}

badd = Kernel(
    "badd", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1001,)])]),
    args=args, reference=lambda x, n: x.astype(np.float64) + 3, outputs=["y"],
    cpu=Variant(source="badd.c", entry="badd", heuristic=lambda shape: {"skip": 0}, space=Space({"skip": [0, 1]}),
                dtypes=("bfloat16",)),
)
"""


def tune(pytester, template: str):
    pytester.path.joinpath("badd.c").write_text(template)
    pytester.path.joinpath("test_badd.py").write_text(SUITE)
    return pytester.runpytest("test_badd.py", *TUNE)


def trials(pytester) -> set:
    table = TinyDB(next((pytester.path / "records").glob("*.json"))).table("trials")
    return {(t["dtype"], t["config"]["skip"], t["status"]) for t in table.all()}


def test_a_bfloat16_kernel_tunes_is_verified_against_a_nan_poison_gated_and_looked_up_by_name_or_type(pytester):
    result = tune(pytester, BITS_C)
    result.assert_outcomes(passed=2, failed=1)  # the baseline and skip 0; skip 1 is caught
    assert trials(pytester) == {("bfloat16", 0, "ok"), ("bfloat16", 1, "wrong_result")}
    pytester.runpytest("test_badd.py", *GATE).assert_outcomes(passed=1)  # re-measured and verified again
    asked = {"records": pytester.path / "records", "suites": pytester.path}
    by_name = tunebench.lookup("badd", (1001,), dtype="bfloat16", **asked)
    # skip 0 is the heuristic itself: the records' answer, with its time, is the final round's keep
    assert (by_name.dtype, by_name.config, by_name.objective_ms > 0) == ("bfloat16", {"skip": 0}, True)
    assert by_name.reason.startswith("the final round kept it")
    for dtype in (ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16), np.ones(2, ml_dtypes.bfloat16).dtype):
        assert tunebench.lookup("badd", (1001,), dtype=dtype, **asked) == by_name


def marched(march: str, *extra: str) -> tuple[str, ...]:
    """The builds' flags for ``-march=march`` in place of native, and ``extra``."""
    return (*(f"-march={march}" if f == "-march=native" else f for f in cpu.FLAGS), *extra)


def needs(program: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")


def needs_compiler_rt() -> None:
    """clang-19, and the compiler-rt its bfloat16 builds link their conversions from where -march
    has no instruction for them: Debian's clang-19 only recommends libclang-rt-19-dev, and the
    tests building without it would fail, not skip."""
    needs("clang-19")
    if cpu.linking("clang-19", "c", "bfloat16", marched("x86-64-v3"))[0] is None:
        pytest.skip("clang-19 links no compiler-rt here (Debian: libclang-rt-19-dev), whose conversions to __bf16 "
                    "its builds call")


#: x86-64-v3 has no AVX512-BF16: clang converts to __bf16 by calling __truncsfbf2 there, on any CPU.
@pytest.mark.parametrize("program, march", [("gcc", "native"), ("clang-19", "native"), ("clang-19", "x86-64-v3")])
def test_a_template_computing_in_tb_dtype_needs_a_compiler_with_bf16_arithmetic(pytester, monkeypatch, program,
                                                                                 march):
    """gcc 12 has no ``__bf16``; gcc 13 and clang 17 compute in it. Where the compiler cannot,
    the suite is one collection error naming it and the ways out, not a compile error per config.
    clang 19 builds it where -march lacks the conversions too, linking them from compiler-rt."""
    if program == "clang-19":
        needs_compiler_rt()
    else:
        needs(program)
    monkeypatch.setattr(cpu, "CC", program)
    monkeypatch.setattr(cpu, "FLAGS", marched(march))
    result = tune(pytester, TYPED_C)
    if cpu.computes_in(program, "c", "bfloat16"):
        result.assert_outcomes(passed=2, failed=1)
        assert trials(pytester) == {("bfloat16", 0, "ok"), ("bfloat16", 1, "wrong_result")}
    else:
        result.stdout.fnmatch_lines([f"*test_badd.py::badd: dtype 'bfloat16': {cpu.version_of(program)} has no "
                                     f"__bf16 arithmetic, which badd.c needs for TB_DTYPE (gcc >= 13 and clang >= 17 "
                                     f"have it: name one with TUNEBENCH_CC=), or read the elements there as their "
                                     f"16 bits*"])
        assert not (pytester.path / "records").exists() or not trials(pytester)


def bf16_variant(path, template: str = TYPED_C, dtypes=("bfloat16",), **given):
    """``badd`` in ``template`` at ``path``, declared with ``given`` besides (flags, origin)."""
    path.write_text(template)
    return tunebench.Variant(source=path, entry="badd", space=tunebench.Space({"skip": [0, 1]}),
                             heuristic=lambda shape: {"skip": 0}, dtypes=dtypes, **given)


def bf16_kernel(name: str, variant):
    return tunebench.Kernel(
        name, buckets=tunebench.Buckets(["N"], [tunebench.Bucket("all", N=(1, None), shapes=[(8,)])]),
        args=lambda shape, dtype, rng: {"x": np.ones(shape[0], dtype), "y": np.empty(shape[0], dtype),
                                        "n": np.int32(shape[0])},
        reference=lambda x, n: x.astype(np.float64) + 3, outputs=["y"], cpu=variant)


def test_clang_links_the_bf16_conversions_a_cpu_lacks_from_compiler_rt_and_a_frameworks_build_is_told_to(
        tmp_path, monkeypatch):
    """clang 19 on Debian links gcc 12's libgcc, which has no ``__truncsfbf2``: a build for a CPU
    without AVX512-BF16 (x86-64-v3) links only with ``--rtlib=compiler-rt``, which the probe finds
    before any build, and which the flags a framework builds the template with carry."""
    needs_compiler_rt()
    flags = marched("x86-64-v3")
    assert cpu.linking("clang-19", "c", "bfloat16", flags) == (cpu.COMPILER_RT, "")
    monkeypatch.setattr(cpu, "CC", "clang-19")
    monkeypatch.setattr(cpu, "FLAGS", flags)
    variant = bf16_variant(tmp_path / "badd.c")
    assert cpu.dtype_problem("bfloat16", variant) is None
    assert cpu.code_flags(variant, ["float32"])[-1] == "-std=gnu11"
    own = cpu.code_flags(variant, ["bfloat16"])
    assert own[-1] == "--rtlib=compiler-rt"
    link = ["clang-19", "-fPIC", "-shared", "-Wl,-z,defs", "-Dskip=0", "-DTB_DTYPE=__bf16", "-o", str(tmp_path / "b.so"),
            str(variant.path), "-lm"]
    unlinked = subprocess.run(link + own[:-1], capture_output=True, text=True)
    assert "undefined reference to `__truncsfbf2'" in unlinked.stderr
    done = subprocess.run(link + own, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    kernel = bf16_kernel("badd_flags", variant)
    assert tunebench.tuned(kernel, device="cpu-test", dtype=ml_dtypes.bfloat16).flags() == own
    assert tunebench.tuned(kernel, device="cpu-test").flags(dtype="bfloat16") == own
    # no dtype given: what any dtype it declares links with, as defines() serves the tuned dtype untold
    assert tunebench.tuned(kernel, device="cpu-test").flags() == own
    assert tunebench.tuned(kernel, device="cpu-test").flags(dtype="float32") == own[:-1]


def test_only_a_build_computing_in_tb_dtype_links_the_runtime_of_its_conversions(tmp_path, monkeypatch):
    """A bit-level bfloat16 template (unsigned short, no TB_DTYPE) calls no conversion, yet clang's
    builds of it were given --rtlib=compiler-rt: re-keyed in the build cache, and linked against
    another runtime than the one measured. A source file of its flags computing in TB_DTYPE does
    call them, and links them as a template doing so does."""
    needs_compiler_rt()
    monkeypatch.setattr(cpu, "CC", "clang-19")
    monkeypatch.setattr(cpu, "FLAGS", marched("x86-64-v3"))
    bits = bf16_variant(tmp_path / "bits.c", BITS_C)
    assert cpu.runtime_flags(bits, "bfloat16") == () and cpu.build_flags(bits, "bfloat16") == ()
    assert cpu.code_flags(bits, ["bfloat16"]) == cpu.code_flags(bits)
    (tmp_path / "narrow.c").write_text("TB_DTYPE narrow(float v) { return (TB_DTYPE)v; }\n")
    helped = bf16_variant(tmp_path / "bits.c", BITS_C, flags=("narrow.c",), origin=tmp_path)
    assert cpu.runtime_flags(helped, "bfloat16") == cpu.COMPILER_RT


def test_a_source_file_of_the_flags_computing_in_tb_dtype_is_refused_a_dtype_as_the_template_is(tmp_path):
    """dtype_problem read the template alone: a template of bits whose helper file computes in
    TB_DTYPE was let through in a float8 dtype, and every build failed on the helper."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "widen.c").write_text("float widen(TB_DTYPE v) { return (float)v; }\n")
    variant = bf16_variant(tmp_path / "bits.c", BITS_C, dtypes=("float8_e4m3fn",), flags=("src/widen.c",),
                           origin=tmp_path)
    assert cpu.dtype_problem("float8_e4m3fn", variant) == (
        "dtype 'float8_e4m3fn': no C compiler has an 8-bit float type for TB_DTYPE in src/widen.c: read the elements "
        "there as their bits (unsigned char) and convert by hand")


def test_a_build_converting_a_double_to_bf16_links_where_march_converts_floats(tmp_path, monkeypatch):
    """With AVX512-BF16 (cooperlake) a float converts to ``__bf16`` by an instruction, and the
    probe, which converted only a float, let clang's builds link gcc 12's libgcc; a double (a
    literal no float stands for: ``x * 0.1``) converts by a call to ``__truncdfbf2``, which that
    lacks, and a tune failed at its first build. Built, not run: this CPU need not have AVX512-BF16."""
    needs_compiler_rt()
    monkeypatch.setattr(cpu, "CC", "clang-19")
    monkeypatch.setattr(cpu, "FLAGS", marched("cooperlake"))
    variant = bf16_variant(tmp_path / "badd.c", TYPED_C.replace("x[i] + (elem)3.0f", "x[i] * 0.1"))
    src = tmp_path / "built.c"
    src.write_text(cpu.source(variant, {"skip": 0}, "bfloat16"))
    command = cpu.gcc_command(cpu.build_flags(variant, "bfloat16"))
    assert run_compiler(command, src, tmp_path / "built.so") is None


def test_the_compile_check_of_a_bf16_template_links_as_its_builds_do(tmp_path, monkeypatch):
    """compile-check builds the template with the build's command: on a CPU without AVX512-BF16
    (x86-64-v3), clang 19's link of each config needs compiler-rt's conversions there too."""
    needs_compiler_rt()
    monkeypatch.setattr(cpu, "CC", "clang-19")
    monkeypatch.setattr(cpu, "FLAGS", marched("x86-64-v3"))
    [result] = compile_check.check([bf16_kernel("badd_check", bf16_variant(tmp_path / "badd.c"))], "cpu", jobs=1)
    assert (result.failures, result.launch_failures, result.builds) == ([], [], 2)


def test_a_compiler_computing_in_bf16_whose_conversions_link_from_no_runtime_refuses_the_dtype(tmp_path, monkeypatch):
    """The probe compiled the use alone: clang 19 was said to compute in ``__bf16`` and the tune
    died at its first build. With no runtime library (``-nostdlib``: compiler-rt's is not linked
    either) nothing defines the conversion, and the dtype is refused naming it, the -march the
    builds are for (not this CPU) and the ways out."""
    needs("clang-19")
    monkeypatch.setattr(cpu, "CC", "clang-19")
    monkeypatch.setattr(cpu, "FLAGS", marched("x86-64-v3", "-nostdlib"))
    assert cpu.computes_in("clang-19", "c", "bfloat16")
    refused = cpu.dtype_problem("bfloat16", bf16_variant(tmp_path / "badd.c"))
    major = cpu.version_of("clang-19").split()[-1].split(".")[0]
    assert re.fullmatch(
        rf"dtype 'bfloat16': {re.escape(cpu.version_of('clang-19'))} computes in __bf16, but a library doing so does "
        r"not link \(__trunc[sd]fbf2 undefined\): where the -march=x86-64-v3 it builds for has no instruction for a "
        r"conversion to it, the compiler calls one in its runtime library, which lacks them; gcc >= 13's libgcc and "
        rf"clang's compiler-rt \(Debian: libclang-rt-{major}-dev\) have them, or read the elements in badd.c as their "
        r"16 bits \(unsigned short\) and convert by hand", refused)


#: A compiler with ``__bf16`` (its -fsyntax-only use compiles) killed by SIGKILL at any build.
KILLED_CC = '#!/bin/sh\ncase " $* " in *" -fsyntax-only "*) exit 0;; esac\nkill -KILL $$\n'


@pytest.mark.parametrize("kept_from", ["killed compiler", "no temp folder"])
def test_a_link_probe_the_machine_keeps_from_running_refuses_the_dtype_or_says_so_for_the_flags(
        tmp_path, monkeypatch, kept_from):
    """The probe's CompilerKilled, or the OSError of a temp folder it could not make, came out of
    compile-check and Tuned.flags() bare. Now compile-check fails the declaration with it, and
    flags() says which kernel's flags it kept from being known."""
    cc = tmp_path / "cc"
    cc.write_text(KILLED_CC)
    cc.chmod(0o755)
    monkeypatch.setattr(cpu, "CC", str(cc))
    if kept_from == "no temp folder":
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    cause = "was killed by SIGKILL" if kept_from == "killed compiler" else "No such file or directory"
    probed = "dtype 'bfloat16': whether a library computing in __bf16 links could not be probed, building one with "
    kernel = bf16_kernel(f"badd_{kept_from.split()[0]}", bf16_variant(tmp_path / "badd.c"))
    [result] = compile_check.check([kernel], "cpu", jobs=1)
    [(where, said)] = result.failures
    assert where == "declaration" and said.startswith(f"{probed}{cc}: ") and cause in said
    with pytest.raises(BuildEnvironmentError, match=rf"^kernel '{kernel.name}': its flags are not known: "
                                                    rf"whether a library .* could not be probed.*{cause}"):
        tunebench.tuned(kernel, device="cpu-test").flags()


def test_a_failed_link_is_said_by_the_symbol_either_linker_missed_and_compiler_rt_by_clangs_version(tmp_path,
                                                                                                       monkeypatch):
    """The refusal said '<the last line> undefined' where GNU ld's words were not found (lld says
    'undefined symbol: X'), and named libclang-rt-19-dev whatever clang built."""
    assert cpu.link_failure("probe.c:(.text+0x9): undefined reference to `__truncsfbf2'\ncollect2: error: ld "
                            "returned 1 exit status\n") == "__truncsfbf2 undefined"
    assert cpu.link_failure("ld.lld: error: undefined symbol: __truncdfbf2\n>>> referenced by probe.c\n"
                            "clang: error: linker command failed with exit code 1\n") == "__truncdfbf2 undefined"
    assert cpu.link_failure("probe.c:1:1: error: unknown type name 'x'\n1 error generated.\n") == (
        "its build said: 1 error generated.")
    clang = tmp_path / "clang"  # a clang 18, by the name and version a compiler_identity reads
    clang.write_text('#!/bin/sh\n[ "$1" = -dumpversion ] && echo 18.1.8\n')
    clang.chmod(0o755)
    monkeypatch.setattr(cpu, "CC", str(clang))
    assert cpu.compiler_rt_package("c") == "libclang-rt-18-dev"
    monkeypatch.setattr(cpu, "CC", "gcc")
    assert cpu.compiler_rt_package("c") == "libclang-rt-N-dev, for clang N"


def test_bfloat16_is_a_float_to_every_check_that_numpy_would_call_a_struct():
    bf16 = dtypes.numpy_dtype("bfloat16")
    assert bf16.kind == "V" and dtypes.is_float(bf16) and dtypes.kind(bf16) == "f"
    assert [dtypes.significand_bits(np.dtype(d)) for d in ("float32", "float16")] == [24, 11]
    assert dtypes.significand_bits(bf16) == 8
    scalar = np.array([1.5], bf16)[0]
    assert packed(scalar) == np.uint16(0x3FC0) and packed(np.float16(1.5)) == np.uint16(0x3E00)
    assert launch_offsets({"a": scalar, "b": np.float32(1)}) == [0, 4]
    assert "(bfloat16 scalar) where the kernel's 1st parameter (float) takes a 4-byte float" in args_problem(
        {"a": scalar}, (Param(4, "float", "float"),))
    assert args_problem({"a": np.ones(2, bf16)}, (Param(8, "pointer", "float *", pointee=Param(4, "float", "float")),)
                        ).endswith("points to 4-byte float: give an array of np.float32")


def test_a_reference_coarser_than_its_output_is_told_by_its_significand_not_its_bytes(tmp_path):
    """bfloat16 and float16 are both 2 bytes; a bfloat16 reference cannot check a float16 output."""
    (tmp_path / "k.c").write_text("void k(void *y, int n) {}\n")
    out = {}
    kernel = tunebench.Kernel(
        "coarse16", buckets=tunebench.Buckets(["N"], [tunebench.Bucket("all", N=(1, None), shapes=[(8,)])]),
        args=lambda shape, dtype, rng: {"y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
        reference=lambda n: np.arange(int(n)).astype(out["as"]), outputs=["y"],
        cpu=tunebench.Variant(source=tmp_path / "k.c", entry="k", space=tunebench.Space({"b": [1]}),
                              heuristic=lambda shape: {"b": 1}, dtypes=("float16", "bfloat16")))
    for reference, output in (("bfloat16", "float16"), ("bfloat16", "float32")):
        out["as"] = reference
        with pytest.raises(tunebench.KernelError, match=f"the reference returned bfloat16 for output 'y' of {output}"):
            kernel.expected(kernel.build_args((8,), output))
    for reference, output in (("float16", "bfloat16"), ("float32", "bfloat16"), ("bfloat16", "bfloat16")):
        out["as"] = reference
        assert kernel.expected(kernel.build_args((8,), output))[0].dtype == np.dtype(reference)


def test_a_complex64_reference_cannot_check_a_complex128_output(tmp_path):
    """A complex64 reference of a complex128 task passed the check, and every config, off from it
    by complex64's rounding, was a wrong result."""
    (tmp_path / "k.c").write_text("void k(void *y, int n) {}\n")
    out = {}
    kernel = tunebench.Kernel(
        "coarse_complex", buckets=tunebench.Buckets(["N"], [tunebench.Bucket("all", N=(1, None), shapes=[(8,)])]),
        args=lambda shape, dtype, rng: {"y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
        reference=lambda n: (np.arange(int(n)) * (1 + 1j) / 3).astype(out["as"]), outputs=["y"],
        cpu=tunebench.Variant(source=tmp_path / "k.c", entry="k", space=tunebench.Space({"b": [1]}),
                              heuristic=lambda shape: {"b": 1}, dtypes=("complex64", "complex128")))
    out["as"] = "complex64"
    with pytest.raises(tunebench.KernelError, match="the reference returned complex64 for output 'y' of complex128: "
                                                    "compute it in complex128 or a more precise type"):
        kernel.expected(kernel.build_args((8,), "complex128"))
    for reference, output in (("complex64", "complex64"), ("complex128", "complex64"), ("complex128", "complex128")):
        out["as"] = reference
        assert kernel.expected(kernel.build_args((8,), output))[0].dtype == np.dtype(reference)


def test_an_extension_dtype_whose_package_is_missing_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(dtypes.EXTENSION_FLOATS, "float8_tb", "no_such_dtypes_package")
    with pytest.raises(ValueError, match="dtype 'float8_tb' is no_such_dtypes_package's: pip install "
                                         "no_such_dtypes_package"):
        dtypes.numpy_dtype("float8_tb")
    with pytest.raises(tunebench.KernelError, match="variant k.c: dtype 'float8_tb' is no_such_dtypes_package's"):
        tunebench.Variant(source="k.c", entry="k", space=tunebench.Space({"b": [1]}), heuristic=lambda shape: {"b": 1},
                          dtypes=("float8_tb",))


@pytest.mark.parametrize("name, said", [(",", "is not a numpy dtype"), ("float32,", "is a record of fields"),
                                        ("f4,i4", "is a record of fields")])
def test_a_dtype_name_numpy_reads_as_a_record_or_cannot_parse_is_a_value_error_naming_it(name, said):
    """numpy raised SyntaxError for ",", and took "float32," as a record of one float."""
    with pytest.raises(ValueError, match=re.escape(f"dtype {name!r} {said}")):
        dtypes.numpy_dtype(name)
    with pytest.raises(tunebench.KernelError, match=re.escape(f"dtype {name!r} {said}")):
        tunebench.Variant(source="k.c", entry="k", space=tunebench.Space({"b": [1]}), heuristic=lambda shape: {"b": 1},
                          dtypes=(name,))


FLOAT8 = ("float8_e4m3fn", "float8_e5m2")

#: y = -x on 8-bit floats read and written as their bits: the sign bit flipped, exact in both.
NEGATE_C = """\
void negate(const unsigned char *x, unsigned char *y, int n)
{
    for (int i = 0; i < n - skip; ++i) y[i] = x[i] ^ 0x80u;
}
"""


@pytest.mark.parametrize("dtype", FLOAT8)
def test_an_8_bit_float_kernel_tunes_is_verified_against_a_nan_poison_and_looked_up_by_name_or_type(pytester, dtype):
    """The last input is 0, so the element ``skip`` leaves unwritten is expected to be -0: only a
    NaN poison tells it from a kernel's 0 (0xA5, a struct's poison, is a number in both)."""
    pytester.path.joinpath("negate.c").write_text(NEGATE_C)
    pytester.path.joinpath("test_negate.py").write_text(
        SUITE.replace("badd", "negate").replace("x[-1] = -3", "x[-1] = 0")
        .replace("x.astype(np.float64) + 3", "-x.astype(np.float64)").replace('"bfloat16"', repr(dtype)))
    pytester.runpytest("test_negate.py", *TUNE).assert_outcomes(passed=2, failed=1)
    table = TinyDB(next((pytester.path / "records").glob("*.json"))).table("trials")
    assert {(t["dtype"], t["config"]["skip"], t["status"]) for t in table.all()} == {
        (dtype, 0, "ok"), (dtype, 1, "wrong_result")}
    asked = {"records": pytester.path / "records", "suites": pytester.path}
    by_name = tunebench.lookup("negate", (1001,), dtype=dtype, **asked)
    assert (by_name.dtype, by_name.config) == (dtype, {"skip": 0})
    assert tunebench.lookup("negate", (1001,), dtype=getattr(ml_dtypes, dtype), **asked) == by_name


def test_an_8_bit_float_template_naming_tb_dtype_is_one_collection_error_on_the_cpu(pytester):
    """No C compiler has an 8-bit float type: the suite says how to read the elements instead."""
    pytester.path.joinpath("badd.c").write_text(TYPED_C)
    pytester.path.joinpath("test_badd.py").write_text(SUITE.replace('"bfloat16"', '"float8_e4m3fn"'))
    result = pytester.runpytest("test_badd.py", *TUNE)
    result.stdout.fnmatch_lines(["*test_badd.py::badd: dtype 'float8_e4m3fn': no C compiler has an 8-bit float type "
                                 "for TB_DTYPE in badd.c: read the elements there as their bits (unsigned char)*"])
    assert not (pytester.path / "records").exists() or not trials(pytester)


def test_the_8_bit_floats_are_floats_poisoned_with_a_nan_and_passed_by_their_bits():
    for name, bits in zip(FLOAT8, (4, 3)):
        dtype = dtypes.numpy_dtype(name)
        assert dtype == np.dtype(getattr(ml_dtypes, name)) and dtypes.is_float(dtype)
        assert dtypes.significand_bits(dtype) == bits
        width, word = cuda.POISON[name]
        assert np.isnan(np.array([word], f"u{width}").view(dtype)).all()
        scalar = np.array([1.5], dtype)[0]
        assert packed(scalar).dtype == np.uint8 and packed(scalar) == np.array([1.5], dtype).view(np.uint8)[0]
    # a kernel right to within its output's rounding passes; one step off on top of that does not
    rtol, atol = tunebench.kernel.DEFAULT_TOLERANCE["float8_e4m3fn"]
    exact = np.linspace(-400, 400, 1001)
    rounded = exact.astype(ml_dtypes.float8_e4m3fn)
    assert measure.compare([rounded], [exact], ["y"], [(rtol, atol)])[1] is None
    doubled = (rounded.astype(np.float64) * (1 + 2 * rtol)).astype(ml_dtypes.float8_e4m3fn)
    assert "values off" in measure.compare([doubled], [exact], ["y"], [(rtol, atol)])[1]


#: An int8 GEMV with an int32 accumulator and its float32 scaled value: outputs of two other dtypes
#: than the task's; ``off`` adds one to a single accumulator.
Q8_C = """\
void q8(const signed char *a, const signed char *x, const float *scale, float *y, int *acc, int n, int k)
{
    for (int i = 0; i < n; ++i) {
        int s = 0;
        for (int j = 0; j < k; ++j) s += a[i * k + j] * x[j];
        acc[i] = s + (off && i == 3);
        y[i] = scale[i] * (float)s;
    }
}
"""

Q8_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def args(shape, dtype, rng):
    n, k = shape
    return {"a": rng.integers(-127, 128, (n, k), dtype=np.int8), "x": rng.integers(-127, 128, k, dtype=np.int8),
            "scale": rng.random(n, dtype=np.float32), "y": np.empty(n, np.float32), "acc": np.empty(n, np.int32),
            "n": np.int32(n), "k": np.int32(k)}

def reference(a, x, scale, n, k):
    s = a.astype(np.int64) @ x.astype(np.int64)
    return {"acc": s, "y": scale.astype(np.float64) * s}

q8 = Kernel(
    "q8", buckets=Buckets("NK", [Bucket("all", N=(1, None), K=(1, None), shapes=[(64, 256)])]),
    args=args, reference=reference, outputs=["y", "acc"],
    cpu=Variant(source="q8.c", entry="q8", heuristic=lambda shape: {"off": 0}, space=Space({"off": [0, 1]}),
                dtypes=("int8",)),
)
"""


def test_each_output_is_compared_in_its_own_dtype_not_only_the_tasks(pytester):
    """An int8 task compared its float32 output exactly (every config wrong), and a tolerance
    given for int8 loosened its int32 accumulator too (one off by one passed)."""
    pytester.path.joinpath("q8.c").write_text(Q8_C)
    pytester.path.joinpath("test_q8.py").write_text(Q8_SUITE)
    result = pytester.runpytest("test_q8.py", *TUNE)
    result.assert_outcomes(passed=2, failed=1)
    table = TinyDB(next((pytester.path / "records").glob("*.json"))).table("trials")
    found = {t["config"]["off"]: t for t in table.all()}
    assert (found[0]["status"], found[1]["status"]) == ("ok", "wrong_result")
    assert found[1]["error"].startswith("output 'acc': 1 of 64 values off, largest error 1 at (3,)")
    assert "TB_DTYPE" not in found[1]["error"]  # an integer task's float scale is no forgotten .astype(dtype)
    assert found[0]["tolerances"] == {"y": ["float32", 1e-4, 1e-5], "acc": ["int32", 0.0, 0.0]}
    again = pytester.runpytest("test_q8.py", *TUNE)  # nothing changed: every trial from the records
    assert {t["timestamp"] for t in TinyDB(next((pytester.path / "records").glob("*.json"))).table("trials").all()} \
        == {t["timestamp"] for t in found.values()}
    suite = pytester.path / "test_q8.py"  # the float32 output's tolerance, which the int8 task's declaration lacks
    suite.write_text(suite.read_text().replace('outputs=["y", "acc"],', 'outputs=["y", "acc"], tolerance={"float32": '
                                                                       '(1e-3, 1e-5)},'))
    again = pytester.runpytest("test_q8.py", *TUNE)
    again.assert_outcomes(passed=2, failed=1)
    remeasured = {t["config"]["off"]: t for t in TinyDB(next((pytester.path / "records").glob("*.json")))
                  .table("trials").all()}
    assert remeasured[0]["tolerances"]["y"] == ["float32", 1e-3, 1e-5]


def test_an_output_keyed_by_its_name_has_its_own_tolerance_and_a_misspelt_key_is_an_error():
    kernel = tunebench.Kernel(
        "mixed", buckets=tunebench.Buckets("N", [tunebench.Bucket("all", N=(1, None), shapes=[(8,)])]),
        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y", "idx", "h"],
        tolerance={"idx": (0.0, 1.0), "float32": (1e-3, 1e-6)},
        cpu=tunebench.Variant(source="k.c", entry="k", heuristic=lambda shape: {}, space=tunebench.Space({})))
    args = {"y": np.empty(8, np.float32), "idx": np.empty(8, np.int32), "h": np.empty(8, np.float16)}
    f16 = kernel.tolerance["float16"]
    assert kernel.tolerances("float32", args) == [(1e-3, 1e-6), (0.0, 1.0), (max(1e-3, f16[0]), f16[1])]
    assert kernel.tolerances("int8", {**args, "idx": np.empty(8, np.int64)}) == [(1e-3, 1e-6), (0.0, 1.0), f16]
    with pytest.raises(tunebench.KernelError, match=r"kernel 'typo': tolerance key 'flaot32' is neither a dtype "
                                                    r"nor an output \(y\): did you mean 'float32'\?"):
        tunebench.Kernel("typo", buckets=kernel.buckets, args=kernel.args, reference=kernel.reference,
                         outputs=["y"], tolerance={"flaot32": (1e-3, 0.0)}, cpu=kernel.variants["cpu"])
    for bad in ((-1, 1e-3), (1e-3,), (float("nan"), 0.0), "1e-3"):  # a negative one failed every config, recorded
        with pytest.raises(tunebench.KernelError, match=rf"^kernel 'negative': tolerance 'float32' is "
                                                        rf"{re.escape(repr(bad))}: give \(rtol, atol\), each a number >= 0$"):
            tunebench.Kernel("negative", buckets=kernel.buckets, args=kernel.args, reference=kernel.reference,
                             outputs=["y"], tolerance={"float32": bad}, cpu=kernel.variants["cpu"])


def test_a_complex_task_or_output_is_verified_within_its_parts_floats_tolerance():
    """complex64 and complex128 had no default tolerance: a complex64 task compared exactly, and a
    kernel right to its float32 rounding was a wrong result."""
    for complex_, real in (("complex64", "float32"), ("complex128", "float64")):
        assert tunebench.kernel.DEFAULT_TOLERANCE[complex_] == tunebench.kernel.DEFAULT_TOLERANCE[real]
    kernel = tunebench.Kernel(
        "cmixed", buckets=tunebench.Buckets("N", [tunebench.Bucket("all", N=(1, None), shapes=[(8,)])]),
        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["z"],
        cpu=tunebench.Variant(source="k.c", entry="k", heuristic=lambda shape: {}, space=tunebench.Space({})))
    f32 = kernel.tolerance["float32"]
    assert kernel.tolerances("complex64", {"z": np.empty(8, np.complex64)}) == [f32]
    assert kernel.tolerances("float64", {"z": np.empty(8, np.complex64)}) == [f32]  # the looser: the output's
    exact = np.exp(1j * np.linspace(0, 7, 1001)) * np.linspace(-400, 400, 1001)
    rounded = exact.astype(np.complex64)
    assert measure.compare([rounded], [exact], ["z"], [f32])[1] is None
    off = (rounded.astype(np.complex128) * (1 + 2j * f32[0])).astype(np.complex64)  # off in its phase alone
    assert "values off" in measure.compare([off], [exact], ["z"], [f32])[1]


class PrintedDtype:
    """A framework's dtype object as its printed form and ``name`` attribute show it."""

    def __init__(self, printed: str, name: str | None):
        self.printed, self.name = printed, name

    def __str__(self) -> str:
        return self.printed


@pytest.mark.parametrize("framework, dtype, expected", [
    ("Paddle", PrintedDtype("paddle.float32", "FLOAT32"), "float32"),  # its name is its enum's
    ("Paddle", PrintedDtype("paddle.bfloat16", "BFLOAT16"), "bfloat16"),
    ("MLX", PrintedDtype("mlx.core.float16", None), "float16"),
    ("TensorFlow", PrintedDtype("<dtype: 'float32'>", "float32"), "float32"),
])
def test_a_frameworks_dtype_means_the_numpy_dtype_of_its_name(framework, dtype, expected):
    """Paddle's ``paddle.float32`` was refused: its ``name`` is ``FLOAT32``."""
    assert dtypes.numpy_dtype(dtype).name == expected, framework


#: y = a * x + 1 in complex numbers, TB_DTYPE's in C; ``skip`` leaves the last element unwritten.
CAXPY_C = """\
typedef TB_DTYPE cplx;
void caxpy(const cplx *x, cplx *y, int n, cplx a)
{
    TB_UNROLL(unroll)
    for (int i = 0; i < n - skip; ++i) y[i] = a * x[i] + (cplx)1.0f;
}
"""

#: The same in C++, with the conjugate of x as std::complex gives it: the template includes no
#: <complex> of its own, as one need not for TB_DTYPE.
CAXPY_CPP = """\
typedef TB_DTYPE cplx;
extern "C" void caxpy(const cplx *x, cplx *y, int n, cplx a)
{
    TB_UNROLL(unroll)
    for (int i = 0; i < n - skip; ++i) y[i] = a * std::conj(x[i]) + cplx(1.0f);
}
"""

CAXPY_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def args(shape, dtype, rng):
    (n,) = shape
    x = rng.uniform(-4, 4, n) + 1j * rng.uniform(-4, 4, n)
    return {"x": x.astype(dtype), "y": np.empty(n, dtype), "n": np.int32(n), "a": np.dtype(dtype).type(0.5 - 1.5j)}

caxpy = Kernel(
    "caxpy", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1001,)])]),
    args=args, reference=lambda x, n, a: np.complex128(a) * CONJ(x.astype(np.complex128)) + 1, outputs=["y"],
    cpu=Variant(source="SOURCE", entry="caxpy", heuristic=lambda shape: {"unroll": 1, "skip": 0},
                space=Space({"unroll": [1, 2], "skip": [0, 1]}), dtypes=("complex64",)),
)
"""


@pytest.mark.parametrize("source", ["caxpy.c", "caxpy.cpp"])
def test_a_complex_kernel_in_tb_dtype_tunes_is_verified_gated_served_by_best_and_exported(pytester, source, tmp_path):
    """A complex64 task was refused on the CPU ("dtype 'complex64' has no C type"), whatever the
    template: a complex kernel was declared float32, and best(dtype=complex64) served nothing."""
    template = CAXPY_C if source.endswith(".c") else CAXPY_CPP
    pytester.path.joinpath(source).write_text(template)
    pytester.path.joinpath("test_caxpy.py").write_text(
        CAXPY_SUITE.replace("SOURCE", source).replace("CONJ", "" if source.endswith(".c") else "np.conj"))
    pytester.runpytest("test_caxpy.py", *TUNE).assert_outcomes(passed=3, failed=2)  # the baseline; skip 1 is caught
    table = TinyDB(next((pytester.path / "records").glob("*.json"))).table("trials")
    # verified, each right config then measured to the end or stopped as slower than the best
    assert {(t["dtype"], t["config"]["unroll"], t["config"]["skip"], t["status"] == "wrong_result")
            for t in table.all()} == {("complex64", u, s, s == 1) for u in (1, 2) for s in (0, 1)}
    assert {tuple(t["tolerances"]["y"]) for t in table.all()} == {("complex64", 1e-4, 1e-5)}  # float32's
    pytester.runpytest("test_caxpy.py", *GATE).assert_outcomes(passed=1)  # the complex64 task's records read
    asked = {"records": pytester.path / "records", "suites": pytester.path}
    served = tunebench.lookup("caxpy", (1001,), dtype="complex64", **asked)
    assert (served.dtype, served.config["skip"], served.objective_ms > 0) == ("complex64", 0, True)
    # the records' answer: a faster config, or the heuristic's own where the final round kept it
    assert served.source == "tuned" or served.reason.startswith("the final round kept it")
    for dtype in (np.complex64, np.dtype(np.complex64), PrintedDtype("torch.complex64", "complex64")):
        assert tunebench.best("caxpy", (1001,), dtype=dtype, **asked) == served.config
    # a framework's own build, with the defines and flags the tune built it with
    handle = tunebench.tuned("caxpy", dtype="complex64", **asked)
    compiler = "gcc" if source.endswith(".c") else "g++"
    built = subprocess.run([compiler, *handle.flags(), "-fPIC", "-shared", *handle.defines((1001,)),
                            str(pytester.path / source), "-o", str(tmp_path / "own.so")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    # a framework that loads no suite: the records do not say the template's language, whose type it is
    bare = subprocess.run([sys.executable, "-c", "import tunebench; print(tunebench.tuned('caxpy', "
                           f"dtype='complex64', records={str(asked['records'])!r}).defines((1001,)))"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert ("LookupError: kernel 'caxpy': TB_DTYPE's type in complex64 is its template's language's (float "
            "_Complex in C, std::complex<float> in C++), known from its declaration, which no suite found "
            "declares: pass suites=") in bare.stderr
    # the export: one dispatch function for the complex64 task, agreeing with best()
    assert main(["export", "--out", str(tmp_path), "--records", str(asked["records"]), "--suites",
                 str(pytester.path)]) == 0
    (tmp_path / "main.c").write_text('#include <stdio.h>\n#include "tunebench_configs.h"\nint main(void)\n{\n'
                                     "    tb_caxpy_complex64_config c = tb_caxpy_complex64(1001);\n"
                                     '    printf("%d %d %d\\n", c.tuned, c.unroll, c.skip);\n    return 0;\n}\n')
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(tmp_path / "main.c"), "-o",
                    str(tmp_path / "main"), "-lm"], check=True)
    printed = subprocess.run([tmp_path / "main"], check=True, capture_output=True, text=True).stdout.split()
    assert printed == [str(int(served.source == "tuned")), str(served.config["unroll"]), str(served.config["skip"])]
    # the report in a process of its own: matplotlib, first imported under pytester, is not imported twice
    subprocess.run([sys.executable, "-m", "tunebench.cli", "report", "--records", str(asked["records"]), "--suites",
                    str(pytester.path), "--out", str(tmp_path / "report")], check=True, capture_output=True)
    assert re.search(r"\| caxpy \| all \| complex64 \|", (tmp_path / "report" / "report.md").read_text())
