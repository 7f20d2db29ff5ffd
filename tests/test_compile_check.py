"""tunebench compile-check: real nvcc (and gcc) builds of every template, no device needed."""

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import AXPB_C, AXPB_SUITE, SHARED_CU, SHARED_SUITE, STATIC_SHARED_CU
from tests.test_cuda import CUB_CU as CUDA_CUB
from tunebench import Bucket, Buckets, Kernel, Space, Variant
from tunebench.backends import cpu, cuda, launch
from tunebench.backends.base import KernelError
from tunebench.cli import main

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

BROKEN_CU = """\
#if tile == 2
#error "tile 2 is broken"
#endif
extern "C" __global__ void fill(float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tile;
}
"""

BROKEN_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

fill = Kernel(
    "fill", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
    reference=lambda n: np.ones(int(n)), outputs=["y"],
    cuda=Variant(source="fill.cu", entry="fill", space=Space({"tile": [1, 2]}),
                 heuristic=lambda shape: {"tile": 1},
                 launch=lambda config, shape: (((shape[0] + 127) // 128,), (128,))),
)
"""


@needs_nvcc
def test_every_shipped_cuda_kernel_compiles_for_sm80_and_sm90(capsys):
    assert main(["compile-check", "--target", "cuda", "--sample", "3"]) == 0
    *lines, summary = capsys.readouterr().out.splitlines()
    kernels = [ln.split()[0] for ln in lines if not ln.startswith(" ")]
    assert sorted(kernels) == ["layernorm", "matmul_add", "row_reduce", "softmax"]
    assert all("sm_80 sm_90" in ln and " ok " in ln for ln in lines if not ln.startswith(" "))
    assert summary == "compile-check cuda: 4 of 4 kernels ok"


@needs_nvcc
def test_a_template_that_fails_to_compile_fails_the_check_naming_kernel_and_config(tmp_path, capsys):
    (tmp_path / "fill.cu").write_text(BROKEN_CU)
    (tmp_path / "test_fill.py").write_text(textwrap.dedent(BROKEN_SUITE))
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert "fill  cuda  float32  sm_90  2 configs, 2 builds, 2 launches  FAILED 1 of 2 builds" in out
    assert "float32 sm_90 [tile:2]: " in out and 'tile 2 is broken' in out
    assert out.endswith("compile-check cuda: 0 of 1 kernels ok; failed: fill\n")


#: A block reduction with CUB (test_cuda's, its params line in place): seconds of nvcc, long enough to be killed in.
CUB_CU = CUDA_CUB.replace("MARKER", "// tunebench: params")

CUB_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

block_sum = Kernel(
    "block_sum", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(4096,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "out": np.empty(32, np.float32),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: x.astype(np.float64).reshape(32, 128).sum(axis=1), outputs=["out"],
    cuda=Variant(source="block_sum.cu", entry="block_sum", space=Space({"BLOCK_THREADS": [128]}),
                 heuristic=lambda shape: {"BLOCK_THREADS": 128}, launch=lambda config, shape: (32, 128)),
)
"""


@needs_nvcc
def test_a_compile_check_killed_mid_compile_leaves_nothing_in_the_temp_folder_after_the_next(tmp_path):
    """A CI job's timeout killed compile-check (its whole process group) while nvcc ran: the
    build's folder stayed in /tmp for good, nvcc's files in it (a ``*.lgenfe.bc`` among them).
    The next check removes it, and its own go with it."""
    (outside := tmp_path / "tmp").mkdir()
    (tmp_path / "block_sum.cu").write_text(CUB_CU)
    (tmp_path / "test_block_sum.py").write_text(CUB_SUITE)
    command = [sys.executable, "-c", "import sys; from tunebench.cli import main; sys.exit(main(sys.argv[1:]))",
               "compile-check", "--suites", str(tmp_path), "--arch", "sm_90"]
    env = {**os.environ, "TMPDIR": str(outside)}
    proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(outside.glob("tunebench-check-*/.tmp-*/*lgenfe.bc")) and time.monotonic() < deadline:
            assert proc.poll() is None, "the check ended before nvcc's files were seen"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(outside.glob("tunebench-check-*/.tmp-*/*"))
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert not list(outside.iterdir())

def test_every_shipped_cpu_kernel_compiles_with_gcc(capsys, monkeypatch):
    assert main(["compile-check", "--target", "cpu", "--sample", "2"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 5  # a line per kernel, and the summary
    monkeypatch.chdir("suites")  # from a subfolder: the project's suites, as best and report find them
    assert main(["compile-check", "--target", "cpu", "--sample", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == out.splitlines()[-1]
    assert main(["compile-check", "--suites", "nosuch"]) == 2
    assert "--suites nosuch: no such folder or file" in capsys.readouterr().err


def test_each_kernel_is_said_as_it_is_checked_so_a_run_killed_midway_keeps_what_it_checked(tmp_path):
    """compile-check printed nothing until every kernel was checked, into a pipe only at exit:
    five Kernel Tuner ports ran 4.5 minutes in silence, and one whose reference took more memory
    than the machine has was killed with the run, which printed nothing at all, not the kernels
    it had checked. The reference runs in the check's process: here it kills it as the
    out-of-memory killer did."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "axpb.c").write_text(AXPB_C)
    suite = AXPB_SUITE.replace("MODES", "[0]")
    killer = suite.split("axpb = Kernel(")[1].replace('"axpb",', '"killer",', 1).replace(
        "reference=lambda x, n, a, b: a * x.astype(np.float64) + b",
        "reference=lambda x, n, a, b: os.kill(os.getpid(), signal.SIGKILL)")
    (tmp_path / "test_axpb.py").write_text("import os, signal\n" + suite + "killer = Kernel(" + killer)
    run = subprocess.run([sys.executable, "-c", "import sys; from tunebench.cli import main; sys.exit(main(sys.argv[1:]))",
                          "compile-check", "--suites", str(tmp_path), "--target", "cpu", "--sample", "1"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == -signal.SIGKILL, run.stderr[-2000:]
    assert re.match(r"axpb +cpu +float32 +host +\d+ configs, \d+ builds +ok ", run.stdout), (run.stdout, run.stderr[-2000:])
    assert "killer" not in run.stdout


def test_a_heuristic_config_outside_the_space_is_noted_not_failed_on_the_target_the_suites_declare(tmp_path, capsys):
    (tmp_path / "axpb.c").write_text(AXPB_C)
    suite = AXPB_SUITE.replace("MODES", "[0]").replace('"kernels/axpb.c"', repr(str(tmp_path / "axpb.c")))
    (tmp_path / "test_axpb.py").write_text(suite.replace('{"vec": 2, "unroll": 1, "mode": 0}',
                                                         '{"vec": 4, "unroll": 2, "mode": 0}'))
    assert main(["compile-check", "--suites", str(tmp_path)]) == 0  # no --target: the suite's only one, cpu
    out = capsys.readouterr().out
    assert out.count("    the heuristic's config is outside the space: [vec:4 unroll:2 mode:0] on (1000,): breaks "
                     "constraint <lambda> at test_axpb.py:") == 1
    assert out.endswith("compile-check cpu: 1 of 1 kernels ok\n")


def test_the_sample_is_of_candidates_besides_the_heuristic(tmp_path, capsys):
    """5 valid configs, the heuristic one of them: ``--sample 4`` checks all 5, whatever the
    seed (a sample that drew the heuristic checked 4)."""
    (tmp_path / "axpb.c").write_text(AXPB_C)
    suite = AXPB_SUITE.replace("MODES", "[0]").replace('"kernels/axpb.c"', repr(str(tmp_path / "axpb.c")))
    (tmp_path / "test_axpb.py").write_text(suite)
    for seed in range(4):
        assert main(["compile-check", "--suites", str(tmp_path), "--sample", "4", "--seed", str(seed)]) == 0
        assert "axpb  cpu  float32  host  5 configs, 5 builds  ok" in capsys.readouterr().out


def test_a_cpu_argument_of_another_c_type_and_a_missing_entry_fail_the_check_naming_them(tmp_path, capsys):
    """ctypes passes a float64 as the double a ``float`` parameter never reads: every config a
    wrong result. The library's DWARF gives each parameter's C type."""
    (tmp_path / "axpb.c").write_text(AXPB_C)
    suite = AXPB_SUITE.replace("MODES", "[0]").replace('"kernels/axpb.c"', repr(str(tmp_path / "axpb.c")))
    (tmp_path / "test_axpb.py").write_text(suite.replace('"b": np.float32(0.5)', '"b": 0.5 * np.ones(1)[0]'))
    (tmp_path / "test_renamed.py").write_text(suite.replace('    "axpb",', '    "renamed",').replace(
        'entry="axpb"', 'entry="axpby"'))
    assert main(["compile-check", "--target", "cpu", "--suites", str(tmp_path), "--sample", "1"]) == 1
    out = capsys.readouterr().out
    assert "axpb     cpu  float32  host  2 configs, 2 builds  FAILED its entry point" in out
    assert ("    float32 arguments: argument 'b' (float64 scalar) where the kernel's 5th parameter (float b) takes a "
            "4-byte float: give it np.float32") in out
    assert "    float32 [vec:2 unroll:1 mode:0] and 1 more: axpb.c exports no function 'axpby'; it exports: axpb" in out
    assert out.endswith("compile-check cpu: 0 of 2 kernels ok; failed: axpb, renamed\n")


def test_a_kernel_whose_compiler_is_missing_fails_alone_and_the_others_are_checked(tmp_path, capsys, monkeypatch):
    """Since the check is said kernel by kernel, a C++ kernel checked after a C one on a machine
    without g++ raised out of the run: the C one said, the summary never printed, exit status 2."""
    monkeypatch.setattr(cpu, "CXX", "g++-tunebench-none")
    (tmp_path / "axpb.c").write_text(AXPB_C)
    (tmp_path / "axpb.cpp").write_text(AXPB_C)
    suite = AXPB_SUITE.replace("MODES", "[0]").replace('"kernels/axpb.c"', repr(str(tmp_path / "axpb.c")))
    (tmp_path / "test_axpb.py").write_text(suite)
    (tmp_path / "test_cxx.py").write_text(suite.replace('    "axpb",', '    "cxx",').replace("axpb.c'", "axpb.cpp'"))
    assert main(["compile-check", "--target", "cpu", "--suites", str(tmp_path), "--sample", "1"]) == 1
    out = capsys.readouterr().out
    assert "axpb  cpu  float32  host  2 configs, 2 builds  ok" in out, out
    assert "cxx   cpu  float32  host  2 configs, 0 builds  FAILED its compiler" in out, out
    assert "    compiler: g++-tunebench-none is not on PATH: the cpu compile check of axpb.cpp needs it\n" in out, out
    assert out.endswith("compile-check cpu: 1 of 2 kernels ok; failed: cxx\n"), out


def test_arguments_named_as_the_kernels_parameters_in_another_order_fail_the_check(tmp_path, capsys):
    """a and b, both floats, swapped: every size and type fits, and every config is a wrong result."""
    (tmp_path / "axpb.c").write_text(AXPB_C)
    suite = AXPB_SUITE.replace("MODES", "[0]").replace('"kernels/axpb.c"', repr(str(tmp_path / "axpb.c")))
    swapped = suite.replace('"a": np.float32(2.0), "b": np.float32(0.5)', '"b": np.float32(0.5), "a": np.float32(2.0)')
    assert swapped != suite
    (tmp_path / "test_axpb.py").write_text(swapped)
    assert main(["compile-check", "--target", "cpu", "--suites", str(tmp_path), "--sample", "1"]) == 1
    assert ("float32 arguments: the args builder gives x, y, n, b, a, in that order, and the kernel takes x, y, n, a, "
            "b: arguments are passed by position, so return them in the kernel's order") in capsys.readouterr().out


ROWS_C = """\
#include <stddef.h>
void grid(size_t ny, size_t nx, const float (*restrict in)[nx], float (*restrict out)[nx])
{
    for (size_t j = 0; j < ny; ++j)
        for (size_t i = 0; i < nx; ++i) out[j][i] = 2 * in[j][i] + 0 * TILE;
}
"""

ROWS_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

grid = Kernel(
    "grid", buckets=Buckets("YX", [Bucket("all", Y=(1, None), X=(1, None), shapes=[(64, 48)])]),
    args=lambda shape, dtype, rng: {"ny": np.uint64(shape[0]), "nx": np.uint64(shape[1]),
                                    "inp": rng.random(shape).astype(GIVEN), "out": np.empty(shape, dtype)},
    reference=lambda inp, ny, nx: 2 * inp.astype(np.float64), outputs=["out"],
    cpu=Variant(source=SOURCE, entry="grid", space=Space({"TILE": [1, 2]}), heuristic=lambda shape: {"TILE": 1}),
)
"""


@pytest.mark.parametrize("given, said", [
    ("np.float64", "argument 'inp' (float64 array) where the kernel's 3rd parameter (float *in) points to 4-byte "
                   "float: give an array of np.float32"),
    ("np.float32", None),
])
def test_a_c99_pointer_to_rows_is_checked_as_a_pointer_to_its_elements(tmp_path, capsys, given, said):
    """float (*in)[nx] took any array: a float64 one made every config a wrong result, "got inf"."""
    (tmp_path / "grid.c").write_text(ROWS_C)
    (tmp_path / "test_grid.py").write_text(ROWS_SUITE.replace("GIVEN", given).replace(
        "SOURCE", repr(str(tmp_path / "grid.c"))))
    assert main(["compile-check", "--target", "cpu", "--suites", str(tmp_path), "--sample", "1"]) == (1 if said else 0)
    out = capsys.readouterr().out
    assert (f"    float32 arguments: {said}" in out) if said else "arguments" not in out, out


@pytest.mark.parametrize("ctype, given, said", [
    ("float", "np.int32", "argument 'x' (int32 array) where the kernel's 1st parameter (float *x) points to float, "
                          "a float: give an array of np.float32"),
    ("signed char", "np.uint8", "argument 'x' (uint8 array) where the kernel's 1st parameter (signed char *x) points "
                                "to signed char, signed: give an array of np.int8"),
    ("unsigned int", "np.float32", None),  # a float's bits read as an integer: the template's own way
    ("char", "np.uint8", None),  # plain char: bytes
])
def test_an_array_of_the_same_size_read_as_another_kind_or_sign_fails_the_check(tmp_path, capsys, ctype, given, said):
    """An int32 array for a float pointer passed as it was: every config a wrong result, 'got nan'."""
    (tmp_path / "axpb.c").write_text(AXPB_C.replace("void axpb(const real *x", f"void axpb(const {ctype} *x"))
    suite = AXPB_SUITE.replace("MODES", "[0]").replace('"kernels/axpb.c"', repr(str(tmp_path / "axpb.c")))
    (tmp_path / "test_axpb.py").write_text(suite.replace(
        '"x": rng.random(n, dtype=np.float32).astype(dtype)', f'"x": (8 * rng.random(n)).astype({given})'))
    assert main(["compile-check", "--target", "cpu", "--suites", str(tmp_path), "--sample", "1"]) == (1 if said else 0)
    out = capsys.readouterr().out
    assert (f"    float32 arguments: {said}" in out) if said else "arguments" not in out, out



@pytest.mark.parametrize("name, change, said", [
    ("raises", ('{"vec": 2, "unroll": 1, "mode": 0}', '{"vec": {1: 2}[shape[0]], "unroll": 1, "mode": 0}'),
     "declaration: the cpu variant: heuristic raised KeyError: 1000 for shape (1000,)"),
    ("floats", ('"vec": 2, "unroll": 1', '"vec": 4 / 2, "unroll": 1'),
     "declaration: the cpu variant: heuristic for shape (1000,) gives vec=2.0, a float, where the space's values of "
     "vec are ints"),
    ("typo", ("lambda vec, unroll:", "lambda vec, unrol:"),
     "declaration: the cpu variant: constraint <lambda> at test_typo.py:21 names unknown param 'unrol' (did you "
     "mean 'unroll'?)"),
    ("work", ("bytes=lambda shape, dtype:", "flops=lambda shape, dtype:"),
     "declaration: kernel 'work': flops((1000,)) raised TypeError: <lambda>() missing 1 required positional argument: "
     "'dtype' (it is called as flops=lambda shape: ...)"),
    ("nowork", ("bytes=lambda shape, dtype: 2 * shape[0]", "bytes=lambda shape, dtype: None and shape[0]"),
     "declaration: kernel 'nowork': bytes((1000,), 'float32') gave None, not a number of bytes per call"),
    ("pyint", ('"n": np.int32(n)', '"n": n'),  # the builder's argument at fault, said once and not as its raising
     "float32 arguments: kernel 'pyint': argument 'n' is an int; use a numpy array or a numpy scalar such as "
     "np.int32(...) so that its C type is explicit\ncompile-check"),
    # what the CPU target refuses at the tune's first trial, which stops the task (a hunt's float16 scalar)
    ("halfscalar", ('"b": np.float32(0.5)', '"b": np.float16(0.5)'),
     "float32 arguments: kernel 'halfscalar': scalar 'b' has dtype float16, which the CPU target cannot pass by "
     "value"),
    ("strided", ('"y": np.empty(n, dtype)', '"y": np.empty(2 * n, dtype)[::2]'),
     "float32 arguments: kernel 'strided': array 'y' is not C-contiguous: build it with np.ascontiguousarray(...)"),
    ("reference", ("a * x.astype(np.float64) + b", "(a * x + b).reshape(-1, 1)"),
     "float32 reference: kernel 'reference': the reference returned shape (1000, 1) for output 'y', which the "
     "args builder declares (1000,)"),
    # a port of a Kernel Tuner script's answer=[None, expected, None, None, None]
    ("answer", ("a * x.astype(np.float64) + b", "[None, a * x.astype(np.float64) + b, None, None, None]"),
     "float32 reference: kernel 'answer': reference returned 5 outputs, expected 1 (y): return the outputs alone, "
     "in that order, not Kernel Tuner's answer of one per argument with None for the others"),
])
def test_a_declaration_at_fault_fails_its_kernel_alone_naming_the_fault(tmp_path, capsys, name, change, said):
    """Each was a bare message for the whole check (a KeyError's key alone), or passed here and
    failed only on the device."""
    (tmp_path / "axpb.c").write_text(AXPB_C)
    suite = AXPB_SUITE.replace("MODES", "[0]").replace('"kernels/axpb.c"', repr(str(tmp_path / "axpb.c")))
    (tmp_path / "test_axpb.py").write_text(suite)
    (tmp_path / f"test_{name}.py").write_text(suite.replace('    "axpb",', f'    "{name}",').replace(*change))
    assert main(["compile-check", "--target", "cpu", "--suites", str(tmp_path), "--sample", "1"]) == 1
    out = capsys.readouterr().out
    assert f"    {said}" in out, out
    assert "axpb  " in out and out.endswith(f"compile-check cpu: 1 of 2 kernels ok; failed: {name}\n")


@needs_nvcc
def test_a_launch_in_another_form_fails_the_check_and_one_beyond_an_architecture_is_noted_or_fails(tmp_path, capsys):
    """Found here, not on the GPU: a launch without a block, and 200 KiB of dynamic shared memory
    per block, more than sm_80's 163 KiB (an H100 has 227): a tune prunes such a candidate on an
    A100, but the heuristic's config is always measured."""
    (tmp_path / "stage.cu").write_text(SHARED_CU)
    (tmp_path / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE))
    assert main(["compile-check", "--suites", str(tmp_path), "--sample", "3"]) == 1
    out = capsys.readouterr().out
    # the launch in another form fails on each of its 4 launches (2 shapes, 2 architectures), each counted
    assert "stage  cuda  float32  sm_80 sm_90  3 configs, 6 builds, 12 launches  FAILED 4 of 12 launches" in out
    assert "kernel 'stage': the cuda variant's launch({'kib': 0}, (1000,)) returned (1000,): it must return (grid, block)" in out
    assert ("pruned where tuned: float32 sm_80 [kib:200] shape (1000,) and 1 more: 204800 bytes (200 KiB) of shared "
            "memory per block, sm_80 allows 166912 (163 KiB)") in out  # one line for both shapes
    assert "sm_90 [kib:200]" not in out
    other = tmp_path / "heuristic"  # another suite: a module once imported is not imported again
    other.mkdir()
    (other / "stage.cu").write_text(SHARED_CU)
    (other / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE).replace(
        '"kib": [0, 1, 200]', '"kib": [1, 200]').replace('heuristic=lambda shape: {"kib": 1}',
                                                         'heuristic=lambda shape: {"kib": 200}'))
    assert main(["compile-check", "--suites", str(other), "--sample", "3"]) == 1
    assert ("float32 sm_80 [kib:200] shape (1000,) and 1 more: the heuristic's config: 204800 bytes (200 KiB) of "
            "shared memory per block, sm_80 allows 166912 (163 KiB)") in capsys.readouterr().out
    # the heuristic's config breaking a constraint that reads the shape: measured there all the same (it was
    # left unchecked, as a candidate the constraint deselects)
    constrained = tmp_path / "constrained"
    constrained.mkdir()
    (constrained / "stage.cu").write_text(SHARED_CU)
    (constrained / "test_stage.py").write_text((other / "test_stage.py").read_text().replace(
        'space=Space({"kib": [1, 200]})', 'space=Space({"kib": [1, 200]}, constraints=[lambda N, kib: kib < 100 or N > 10**6])'))
    assert main(["compile-check", "--suites", str(constrained), "--sample", "3"]) == 1
    assert ("float32 sm_80 [kib:200] shape (1000,) and 1 more: the heuristic's config: 204800 bytes (200 KiB) of "
            "shared memory per block, sm_80 allows 166912 (163 KiB)") in capsys.readouterr().out


@needs_nvcc
def test_every_architecture_nvcc_builds_has_its_shared_memory_limit_and_each_is_checked_once(tmp_path, capsys):
    (tmp_path / "stage.cu").write_text(SHARED_CU)
    (tmp_path / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE).replace(
        '"kib": [0, 1, 200]', '"kib": [1, 120]'))
    assert [a for a in cuda.nvcc_archs() if launch.shared_kib(a) is None] == []  # sm_88, sm_103, sm_121 ...
    assert launch.shared_kib("sm_121") == launch.shared_kib("sm_121a") == 99
    main(["compile-check", "--suites", str(tmp_path), "--sample", "1", "--arch", "sm_121", "--arch", "sm_121"])
    out = capsys.readouterr().out
    assert "stage  cuda  float32  sm_121  2 configs, 2 builds" in out  # asked twice, checked once
    assert "[kib:120] shape (1000,) and 1 more: 122880 bytes (120 KiB) of shared memory per block, sm_121 allows" in out
    assert main(["compile-check", "--suites", str(tmp_path), "--target", "cpu", "--arch", "sm_90"]) == 2
    assert "--arch is a CUDA architecture" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a usage error, as for any other malformed option
        main(["compile-check", "--suites", str(tmp_path), "--sample", "-1"])
    assert "argument --sample: expected a non-negative int, got '-1'" in capsys.readouterr().err


@needs_nvcc
def test_static_shared_memory_ptxas_refuses_is_noted_for_a_candidate_and_fails_the_heuristic(tmp_path, capsys):
    """As dynamic shared memory beyond an architecture's limit is: a tune prunes the candidate
    (it failed the whole check as a compile error), the heuristic's config is always measured."""
    for heuristic, rc in ((1, 0), (64, 1)):
        suite = tmp_path / f"heuristic{heuristic}"  # a module once imported is not imported again
        suite.mkdir()
        (suite / "stage.cu").write_text(STATIC_SHARED_CU)
        (suite / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE).replace(
            '"kib": [0, 1, 200]', '"kib": [1, 2, 64]').replace('{"kib": 1}', f'{{"kib": {heuristic}}}'))
        assert main(["compile-check", "--suites", str(suite), "--sample", "2", "--arch", "sm_90"]) == rc
        out = capsys.readouterr().out
        refusal = "ptxas: Entry function 'stage' uses too much shared data (0x10000 bytes, 0xc000 max)"
        assert (f"    pruned where tuned: float32 sm_90 [kib:64]: {refusal}\n" in out) == (heuristic == 1), out
        assert (f"    float32 sm_90 [kib:64]: the heuristic's config: {refusal}\n" in out) == (heuristic == 64), out


@needs_nvcc
def test_a_kernel_using_extern_shared_memory_launched_without_its_bytes_fails_the_check(tmp_path, capsys):
    """It passed, and on the GPU reads and writes past the block's shared memory; a kernel
    whose code never reaches its module's extern array is not held to it."""
    (tmp_path / "stage.cu").write_text(SHARED_CU + SHARED_CU.replace("void stage", "void copy").replace(
        "staged[threadIdx.x] = i < n ? x[i] : 0.0f;\n    __syncthreads();\n    if (i < n) y[i] = staged[threadIdx.x];",
        "if (i < n) y[i] = x[i];"))
    (tmp_path / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE).replace(
        '"kib": [0, 1, 200]', '"kib": [1, 2]').replace("config[\"kib\"] * 1024", "(config[\"kib\"] - 1) * 1024"))
    (tmp_path / "test_copy.py").write_text(textwrap.dedent(SHARED_SUITE).replace('"stage",', '"copy",').replace(
        'entry="stage"', 'entry="copy"').replace('"kib": [0, 1, 200]', '"kib": [1]').replace(
        "config[\"kib\"] * 1024", "0"))
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert ("    float32 sm_90 [kib:1] shape (1000,) and 1 more: the kernel uses extern __shared__ memory, and the "
            "launch gives it 0 bytes: return (grid, block, shared_bytes)\n") in out
    assert "[kib:2]" not in out and "copy   cuda  float32  sm_90  1 configs, 1 builds, 2 launches  ok" in out, out


@needs_nvcc
def test_an_architecture_nvcc_does_not_build_is_one_error_before_any_build(capsys):
    assert main(["compile-check", "--arch", "sm_90", "--arch", "sm_99"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and re.fullmatch(
        r"tunebench compile-check: nvcc \(\S+\) builds no sm_99; it builds (sm_\d+ )*sm_90( sm_\d+)*: a device of "
        r"another architecture needs a CUDA toolkit that supports it\n", captured.err)
    assert cuda.arch_problem("sm_90a") is None  # the architecture-specific features of one it builds
    for typo in ("90", "sm90", "compute_90"):  # not a toolkit that lacks it: a name that is none
        assert cuda.arch_problem(typo) == (f"{typo!r} is no architecture name: give sm_ and the compute "
                                           f"capability's digits (sm_80, sm_90)")


#: An instruction sm_90 lacks and sm_90a has (as wgmma and TMA multicast).
SPECIFIC_CU = """\
extern "C" __global__ void fill(float *y, int n)
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] = 1.0f;
}
"""

SPECIFIC_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def kernel(name, specific):
    return Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(4096,)])]),
                  args=lambda shape, dtype, rng: {"y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
                  reference=lambda n: np.ones(n), outputs=["y"],
                  cuda=Variant(source="specific.cu", entry="fill", space=Space({"BLOCK": [128, 256]}),
                               arch_specific=specific, heuristic=lambda shape: {"BLOCK": 256},
                               launch=lambda c, s: ((s[0] + c["BLOCK"] - 1) // c["BLOCK"], c["BLOCK"])))

specific = kernel("specific", True)
plain = kernel("plain", False)
"""


@needs_nvcc
def test_an_arch_specific_variant_builds_for_sm90a_and_a_plain_one_is_told_to_declare_it(tmp_path, capsys):
    (tmp_path / "specific.cu").write_text(SPECIFIC_CU)
    (tmp_path / "test_specific.py").write_text(SPECIFIC_SUITE)
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_80", "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert "specific  cuda  float32  sm_90a  2 configs, 2 builds, 2 launches  ok" in out
    assert ("    not built for sm_80 (arch_specific): sm_80 has no architecture-specific target sm_80a (they begin "
            "with sm_90a)") in out
    assert "plain     cuda  float32  sm_80 sm_90  2 configs, 4 builds, 4 launches  FAILED 4 of 4 builds" in out
    assert re.search(r"\n    float32 sm_90 \[BLOCK:256\] and 1 more: ptxas <its ptx>, line \d+; error +: Instruction "
                     r"'setmaxnreg.inc' not supported on .target 'sm_90'", out)  # one message: the temporary file named alike
    assert "declare the variant arch_specific=True" in out
    # the device sm_90a names is an sm_90: a plain variant is built for sm_90 there, as a tune builds it
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90a"]) == 1
    out = capsys.readouterr().out
    assert "specific  cuda  float32  sm_90a  2 configs, 2 builds, 2 launches  ok" in out
    assert "plain     cuda  float32  sm_90  2 configs, 2 builds, 2 launches  FAILED 2 of 2 builds" in out
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_80"]) == 1
    out = capsys.readouterr().out
    assert ("specific  cuda  float32  sm_80  2 configs, 0 builds  FAILED its declaration" in out
            and "declaration: arch_specific, and no --arch given has an architecture-specific target" in out)


#: Kernels a compile alone does not fault: templates whose mangled names change with the config
#: (one instantiation per build, found by the entry's name; two of one name, which one to call?),
#: and a static array that leaves too little shared memory for the launch's dynamic share on sm_80.
MANGLED_CU = """\
namespace ops {
template <int B> __global__ void tiled(float *y) { __shared__ float s[B]; s[threadIdx.x % B] = 1; __syncthreads();
                                                   y[threadIdx.x] = s[B - 1 - threadIdx.x % B]; }
template <int B> __global__ void twice(float *y) { y[threadIdx.x] = B; }
}
template __global__ void ops::tiled<kib>(float *);
template __global__ void ops::twice<kib>(float *);
template __global__ void ops::twice<kib + 1>(float *);
extern "C" __global__ void staged(float *y) { extern __shared__ float d[]; __shared__ float s[8192];
                                              s[threadIdx.x] = 1; d[threadIdx.x] = 2; __syncthreads();
                                              y[threadIdx.x] = s[threadIdx.x + 1] + d[threadIdx.x]; }
"""

TWO_SUITES = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def variant(entry, dtypes=("float32",)):
    return Variant(source="mangled.cu", entry=entry, space=Space({"kib": [1, 140]}), dtypes=dtypes,
                   heuristic=lambda shape: {"kib": 1}, launch=lambda config, shape: (1, 256, config["kib"] * 1024))

def kernel(name, **given):
    return Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(256,)])]),
                  args=lambda shape, dtype, rng: {"y": np.empty(shape[0], dtype)}, reference=lambda: np.full(256, 3.0),
                  outputs=["y"], cuda=variant(**given))

tiled = kernel("tiled", entry="tiled")
ops_tiled = kernel("ops_tiled", entry="ops::tiled")
twice = kernel("twice", entry="twice")
absent = kernel("absent", entry="absent")
staged = kernel("staged", entry="staged")
cplx = kernel("cplx", entry="staged", dtypes=("complex64",))
"""


@needs_nvcc
def test_a_template_entry_is_found_per_config_by_its_name_and_a_bad_entry_or_dtype_fails_its_kernel_alone(
        tmp_path, capsys):
    """A ``__global__`` template instantiated with the params is found by its name, with or
    without its namespace, in every config; an entry that names none or two, or a dtype without
    a C type, fails its kernel alone, found without a GPU (a tune would fail every config there)."""
    (tmp_path / "mangled.cu").write_text(MANGLED_CU)
    (tmp_path / "test_two.py").write_text(TWO_SUITES)
    assert main(["compile-check", "--suites", str(tmp_path), "--sample", "2"]) == 1
    out = capsys.readouterr().out
    assert ("cplx       cuda  complex64  sm_80 sm_90  0 configs, 0 builds  FAILED its declaration" in out
            and "declaration: dtype 'complex64' has no C type on the cuda target" in out)
    assert "tiled      cuda  float32  sm_80 sm_90  2 configs, 4 builds, 4 launches  ok" in out
    assert "ops_tiled  cuda  float32  sm_80 sm_90  2 configs, 4 builds, 4 launches  ok" in out
    assert "twice      cuda  float32  sm_80 sm_90  2 configs, 4 builds, 4 launches  FAILED 4 of 4 launches" in out
    assert ("float32 sm_80 [kib:140] and 1 more: mangled.cu has 2 __global__ functions named 'twice': ops::twice "
            "(_ZN3ops5twiceILi140EEEvPf), ops::twice (_ZN3ops5twiceILi141EEEvPf); instantiate one per build") in out
    assert "absent     cuda  float32  sm_80 sm_90  2 configs, 4 builds, 4 launches  FAILED 4 of 4 launches" in out
    # named alone, not mangled, the message is the same for every config: said once, "and 3 more"
    assert ("float32 sm_80 [kib:1] and 3 more: mangled.cu has no __global__ 'absent' (extern \"C\", or one "
            "instantiation of a template); its kernels: ops::tiled, ops::twice, staged\n") in out
    # 32 KiB static + 140 KiB dynamic: more than sm_80's 163 KiB, within sm_90's 227 KiB; a candidate: noted
    assert "staged     cuda  float32  sm_80 sm_90  2 configs, 4 builds, 4 launches  ok" in out
    assert ("pruned where tuned: float32 sm_80 [kib:140] shape (256,): 176128 bytes (172 KiB) of shared memory per "
            "block (32768 static, 143360 dynamic), sm_80 allows 166912 (163 KiB)") in out
    assert "sm_90 [kib:140]" not in out


ARGS_CU = """\
extern "C" __global__ void scale(const float *x, float *y, int n, float alpha)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
"""

ARGS_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def kernel(name, **scalars):
    return Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(4096,), (256,)])]),
                  args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                  "y": np.empty(shape[0], dtype), **scalars},
                  reference=lambda x, **rest: 2 * x, outputs=["y"],
                  cuda=Variant(source="args.cu", entry="scale", space=Space({"block": [128, 256]}),
                               heuristic=lambda shape: {"block": 256},
                               launch=lambda config, shape: ((shape[0] + 255) // 256, config["block"])))

fits = kernel("fits", n=np.int32(4096), alpha=np.float32(2))
wide = kernel("wide", n=np.int64(4096), alpha=np.float32(2))
extra = kernel("extra", n=np.int32(4096), alpha=np.float32(2), beta=np.float32(0))
swapped = kernel("swapped", n=np.float32(2), alpha=np.int32(4096))
"""


@needs_nvcc
def test_arguments_that_do_not_fit_the_kernels_parameters_fail_the_check_naming_the_argument(tmp_path, capsys):
    """A launch packs the bytes as given: an int64 for an int shifts every parameter after it, and
    on a GPU every config would be a wrong result with no word on why. The cubin lists the
    parameters' sizes; two 4-byte scalars swapped fit those, and are told apart by the C types
    of a -G build's DWARF."""
    (tmp_path / "args.cu").write_text(ARGS_CU)
    (tmp_path / "test_args.py").write_text(ARGS_SUITE)
    assert main(["compile-check", "--suites", str(tmp_path), "--sample", "2", "--arch", "sm_80", "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert "fits     cuda  float32  sm_80 sm_90  2 configs, 4 builds, 8 launches  ok" in out
    assert ("float32 arguments: argument 'n' (int64 scalar) where the kernel's 3rd parameter (int n) takes a 4-byte "
            "int: give it np.int32") in out  # the C type, from the DWARF, before the bytes the cubin gives
    assert ("float32 arguments: the args builder gives 5 arguments (x, y, n, alpha, beta), the kernel takes 4") in out
    assert "wide     cuda  float32  sm_80 sm_90  2 configs, 4 builds, 8 launches  FAILED 8 of 8 launches" in out
    assert "swapped  cuda  float32  sm_80 sm_90  2 configs, 4 builds, 8 launches  FAILED 8 of 8 launches" in out
    assert ("float32 arguments: argument 'n' (float32 scalar) where the kernel's 3rd parameter (int n) takes a 4-byte int: "
            "give it np.int32") in out


@needs_nvcc
@pytest.mark.parametrize("flags", [("-Xptxas", "-O3"), ("--ptxas-options=-v,-O2",), ("-dopt=on",)])
def test_the_c_types_are_checked_whatever_optimises_the_device_code(tmp_path, capsys, flags):
    """ptxas refuses to optimise a -G build, and -dopt=on built one without its DWARF: two 4-byte
    scalars swapped passed the check, its C types unread and unsaid."""
    (tmp_path / "args.cu").write_text(ARGS_CU)
    suite = ARGS_SUITE.split("fits = ")[0].replace('entry="scale",', f'entry="scale", flags={flags!r},')
    (tmp_path / "test_args.py").write_text(suite + "swapped = kernel('swapped', n=np.float32(2), alpha=np.int32(4096))\n")
    assert main(["compile-check", "--suites", str(tmp_path), "--sample", "1", "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert ("float32 arguments: argument 'n' (float32 scalar) where the kernel's 3rd parameter (int n) takes a 4-byte int: "
            "give it np.int32") in out, out


def refused(tmp_path, capsys, *names: str) -> str:
    """What compile-check says of the kernels ``names`` (each ``<name>.cu``'s ``<name>_sum``, no
    alpha), one of which at least it fails."""
    suite = ARGS_SUITE.split("fits = ")[0].replace('"args.cu", entry="scale"', 'f"{name}.cu", entry=f"{name}_sum"')
    (tmp_path / "test_kernels.py").write_text(suite.replace("alpha=np.float32(2)", "") + "".join(
        f"{name} = kernel('{name}', n=np.int32(4096))\n" for name in names))
    assert main(["compile-check", "--suites", str(tmp_path), "--sample", "1", "--arch", "sm_90"]) == 1
    return capsys.readouterr().out


SYNCS_CU = """\
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void SYNC_sum(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
    cg::this_SYNC().sync();
    if (i < n) y[i] += y[(i + 1) % n];
}
"""


@needs_nvcc
def test_a_kernel_that_syncs_its_grid_fails_the_check_and_one_that_syncs_its_block_passes(tmp_path, capsys):
    """grid.sync() needs a cooperative launch, which tunebench does not make: it passed, and on
    the GPU every config would fail alike."""
    for scope in ("grid", "thread_block"):
        (tmp_path / f"{scope}.cu").write_text(SYNCS_CU.replace("SYNC", scope))
    out = refused(tmp_path, capsys, "grid", "thread_block")
    assert re.search(r"^grid +cuda .* FAILED", out, re.M) and re.search(r"^thread_block +cuda .* ok", out, re.M), out
    assert "the kernel syncs its whole grid (cg::this_grid().sync()), which only a cooperative launch allows" in out


CONSTANT_CU = """\
__constant__ float weights[4]FILLED;

extern "C" __global__ void NAME_sum(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = weights[i % 4] * x[i];
}
"""


@needs_nvcc
def test_a_kernel_reading_constant_memory_only_the_host_fills_fails_the_check(tmp_path, capsys):
    """Kernel Tuner's style fills __constant__ arrays from the host (cmem_args); tunebench copies
    nothing there, so every config would read zeros and fail as a wrong result on the GPU, the
    reference blamed: the check passed it. An array with an initialiser is the template's own,
    zeros among them (nvcc's PTX writes those with no initialiser, as the host's)."""
    filled = {"host": "", "inited": " = {1, 2, 3, 4}", "zeros": " = {0, 0, 0, 0}", "braced": "{}", "zero": " = {0}"}
    for name, given in filled.items():
        (tmp_path / f"{name}.cu").write_text(CONSTANT_CU.replace("FILLED", given).replace("NAME", name))
    out = refused(tmp_path, capsys, *filled)
    assert re.search(r"^host +cuda .* FAILED", out, re.M), out
    assert all(re.search(rf"^{name} +cuda .* ok", out, re.M) for name in filled if name != "host"), out
    assert ("the kernel reads __constant__ float weights[4] (host.cu line 1), which no initialiser fills, and "
            "tunebench copies nothing into constant memory") in out, out


@needs_nvcc
def test_a_constant_array_in_a_namespace_only_the_host_fills_fails_the_check(tmp_path, capsys):
    """nvcc's PTX names a namespace's __constant__ array by its mangled name (_ZN4conv7weightsE),
    which was compared with the source's bare name: the check passed a kernel whose weights the
    host alone fills, and on the GPU every config would read zeros."""
    spaced = {"spaced": "", "spaced_inited": " = {1, 2, 3, 4}", "spaced_static": ""}
    for name, given in spaced.items():
        static = "static " if name.endswith("static") else ""  # _ZN..._INTERNAL_<the file>...4conv7weightsE
        (tmp_path / f"{name}.cu").write_text(CONSTANT_CU.replace("__constant__ float weights[4]FILLED;", (
            f"namespace conv {{ {static}__constant__ float weights[4]{given}; }}\nusing conv::weights;")).replace("NAME", name))
    out = refused(tmp_path, capsys, *spaced)
    assert re.search(r"^spaced +cuda .* FAILED", out, re.M) and re.search(r"^spaced_inited +cuda .* ok", out, re.M), out
    assert re.search(r"^spaced_static +cuda .* FAILED", out, re.M), out
    assert "the kernel reads __constant__ float weights[4] (spaced.cu line 1), which no initialiser fills" in out, out
    assert "the kernel reads __constant__ float weights[4] (spaced_static.cu line 1), which no initialiser" in out, out


POLYGON_CU = """\
#include "slopes.cuh"
#define VERTICES 600
__constant__ float2 vertices[VERTICES];

extern "C" __global__ void polygon_sum(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (vertices[i % VERTICES].x + slopes[i % VERTICES]) * x[i];
}
"""


@needs_nvcc
def test_a_refusal_of_constant_memory_names_each_arrays_declaration_and_the_parameter_that_takes_it(tmp_path, capsys):
    """Kernel Tuner's pnpoly keeps its polygon in __constant__ float2 arrays that cmem_args fill:
    the refusal offered a `const float *` for every array (a float2's would be read as floats),
    named neither where the array lies (a header beside the template) nor Kernel Tuner's feature
    it replaces, and said 'which has' of two arrays."""
    (tmp_path / "polygon.cu").write_text(POLYGON_CU)
    (tmp_path / "slopes.cuh").write_text("#pragma once\n__constant__ float slopes[600];\n")
    out = refused(tmp_path, capsys, "polygon")
    assert ("the kernel reads __constant__ float slopes[600] (slopes.cuh line 2), float2 vertices[VERTICES] "
            "(polygon.cu line 3), which no initialiser fills, and tunebench copies nothing into constant memory "
            "(Kernel Tuner's cmem_args fill them from the host): every config would read zeros; pass each as an "
            "argument the args builder gives (const float *__restrict__ slopes, const float2 *__restrict__ "
            "vertices), or give each its values in the template") in out, out


@needs_nvcc
def test_a_constant_scalar_only_the_host_fills_is_offered_as_a_parameter_by_value(tmp_path, capsys):
    """cmem_args fill a __constant__ scalar as well as an array: the refusal offered a pointer
    to it, `const unsigned int *__restrict__ scale`, where the args builder's np.uint32 is
    passed by value."""
    (tmp_path / "scalar.cu").write_text(CONSTANT_CU.replace("FILLED;", " = {1, 2, 3, 4};\n__constant__ unsigned int scale;")
                                        .replace("weights[i % 4]", "weights[i % 4] * scale").replace("NAME", "scalar"))
    out = refused(tmp_path, capsys, "scalar")
    assert ("the kernel reads __constant__ unsigned int scale (scalar.cu line 2), which no initialiser fills, and "
            "tunebench copies nothing into constant memory (Kernel Tuner's cmem_args fill it from the host): every "
            "config would read zeros; pass it as an argument the args builder gives (unsigned int scale), or give it "
            "its values in the template") in out, out


@needs_nvcc
def test_a_comment_naming_constant_memory_is_not_read_as_a_declaration(tmp_path, capsys):
    """A comment above the array naming __constant__ began its declaration: the refusal named
    '__constant__ , filled by the host __constant__ float weights[4]' at the comment's line, and
    offered that as the parameter."""
    (tmp_path / "noted.cu").write_text(CONSTANT_CU.replace("__constant__ float weights[4]FILLED;", (
        "// weights: __constant__, filled by the host\n__constant__ float weights[4];")).replace("NAME", "noted"))
    out = refused(tmp_path, capsys, "noted")
    assert ("the kernel reads __constant__ float weights[4] (noted.cu line 2), which no initialiser fills, and "
            "tunebench copies nothing into constant memory (Kernel Tuner's cmem_args fill it from the host): every "
            "config would read zeros; pass it as an argument the args builder gives (const float *__restrict__ "
            "weights), or give it its values in the template") in out, out


@needs_nvcc
def test_an_aligned_constant_array_only_the_host_fills_fails_the_check(tmp_path, capsys):
    """A declaration was read up to a parenthesis: an array declared __align__(16) or
    __attribute__((aligned(16))) passed the check, and on the GPU every config would read zeros."""
    aligned = {"aligned": "__constant__ __align__(16) float weights[4];",
               "attributed": "__constant__ float __attribute__((aligned(16))) weights[4];"}
    for name, declared in aligned.items():
        (tmp_path / f"{name}.cu").write_text(CONSTANT_CU.replace("__constant__ float weights[4]FILLED;", declared)
                                             .replace("NAME", name))
    out = refused(tmp_path, capsys, *aligned)
    for name in aligned:
        assert re.search(rf"^{name} +cuda .* FAILED", out, re.M), out
        assert (f"the kernel reads __constant__ float weights[4] ({name}.cu line 1), which no initialiser fills" in out
                and "(const float *__restrict__ weights)" in out), out


SHAPES_CU = """\
__constant__ float taps[4][4];
__constant__ float a[4], b[4];
namespace one { __constant__ float w[4]; }
namespace two { __constant__ float w[4] = {0}; }

extern "C" __global__ void shapes_sum(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (taps[i % 4][1] + a[i % 4] + b[i % 4] + one::w[i % 4] + two::w[i % 4]) * x[i];
}
"""


@needs_nvcc
def test_a_refusal_of_constant_memory_reads_each_declaration_as_the_compiler_does(tmp_path, capsys):
    """A 2-D array was offered as 'const float *' (its code's taps[i][1] no longer compiles), two
    arrays of one declaration as one named 'float a[4], b[4]', and a name in two namespaces as the
    first's: two::w, whose template fills it with zeros, was refused as one::w."""
    (tmp_path / "shapes.cu").write_text(SHAPES_CU)
    out = refused(tmp_path, capsys, "shapes")
    assert ("the kernel reads __constant__ float taps[4][4] (shapes.cu line 1), float a[4] (shapes.cu line 2), "
            "float b[4] (shapes.cu line 2), float w[4] (shapes.cu line 3), which no initialiser fills") in out, out
    assert ("pass each as an argument the args builder gives (const float (*__restrict__ taps)[4], const float "
            "*__restrict__ a, const float *__restrict__ b, const float *__restrict__ w)") in out, out


@needs_nvcc
def test_a_build_for_c_types_that_fails_is_said_not_passed_over(tmp_path, capsys):
    """Its error was dropped: the arguments' C types went unchecked, and the check said ok."""
    (tmp_path / "args.cu").write_text('#ifdef __CUDACC_DEBUG__\n#error "no debug build here"\n#endif\n' + ARGS_CU)
    (tmp_path / "test_args.py").write_text(ARGS_SUITE.split("wide = ")[0])
    assert main(["compile-check", "--suites", str(tmp_path), "--sample", "1", "--arch", "sm_90"]) == 0
    out = capsys.readouterr().out
    assert "    C types unchecked: float32: the -G build that gives the entry point's C types failed, so the " \
           "arguments' are not checked against them: " in out and "no debug build here" in out, out


@needs_nvcc
def test_a_dtype_none_of_whose_builds_compiled_is_not_said_again_as_its_c_types_unchecked(tmp_path, capsys):
    """Kernel Tuner's reduction reads `#pragma unroll loop_unroll_factor_0`, which no config
    builds: under the builds' error, with its hint, came the same error again as 'C types
    unchecked', as though the arguments were the next thing to look at."""
    (tmp_path / "fill.cu").write_text(BROKEN_CU.replace("#if tile == 2", "#if tile"))
    (tmp_path / "test_fill.py").write_text(textwrap.dedent(BROKEN_SUITE))
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert "FAILED 2 of 2 builds" in out and "tile 2 is broken" in out and "C types unchecked" not in out, out


def test_a_build_for_c_types_keeps_the_flags_but_what_optimises_device_code():
    from tunebench.backends.cuda import debug_flags
    assert debug_flags(("-Xptxas", "-v,-O3", "-dopt", "on", "-lineinfo", "--ptxas-options=-O2", "-DX=1")) == (
        "-Xptxas=-v", "-lineinfo", "-DX=1", "-G")


NEGATE_CU = """\
extern "C" __global__ void neg(const TB_DTYPE *x, TB_DTYPE *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = TB_DTYPE(-float(x[i]));  /* cuda_fp8.h has no arithmetic: through float */
}
"""

NEGATE_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

neg = Kernel(
    "neg", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.uniform(-4, 4, shape[0]).astype(dtype), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: -x.astype(np.float64), outputs=["y"],
    cuda=Variant(source="neg.cu", entry="neg", space=Space({"block": [128, 256]}),
                 heuristic=lambda shape: {"block": 128}, dtypes=("float8_e4m3fn", "float8_e5m2"),
                 launch=lambda config, shape: ((shape[0] + config["block"] - 1) // config["block"], config["block"])),
)
"""


@needs_nvcc
def test_an_8_bit_float_kernel_builds_in_its_cuda_type_and_an_array_of_it_for_a_float_pointer_fails(tmp_path, capsys):
    """``__nv_fp8_e4m3`` and ``__nv_fp8_e5m2`` with cuda_fp8.h included by tunebench, as
    ``__half`` is: an 8-bit float array is checked against the pointer it is given to."""
    as_float = NEGATE_CU.replace("const TB_DTYPE *x", "const float *x").replace("float(x[i])", "x[i]")
    for folder, template in (("fp8", NEGATE_CU), ("float", as_float),
                             ("e4m3", NEGATE_CU.replace("const TB_DTYPE *x", "const __nv_fp8_e4m3 *x"))):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "neg.cu").write_text(template)
        (tmp_path / folder / "test_neg.py").write_text(NEGATE_SUITE)
    assert main(["compile-check", "--suites", str(tmp_path / "fp8"), "--arch", "sm_90"]) == 0
    assert "neg  cuda  float8_e4m3fn,float8_e5m2  sm_90  2 configs, 4 builds, 4 launches  ok" in capsys.readouterr().out
    assert main(["compile-check", "--suites", str(tmp_path / "float"), "--arch", "sm_90"]) == 1
    assert ("float8_e5m2 arguments: argument 'x' (float8_e5m2 array) where the kernel's 1st parameter (float *x) "
            "points to 4-byte float: give an array of np.float32") in capsys.readouterr().out
    # one byte each, and no value read right: the DWARF's C type tells them apart
    assert main(["compile-check", "--suites", str(tmp_path / "e4m3"), "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert ("float8_e5m2 arguments: argument 'x' (float8_e5m2 array) where the kernel's 1st parameter "
            "(__nv_fp8_e4m3 *x) points to __nv_fp8_e4m3, which holds float8_e4m3fn: give an array of "
            "ml_dtypes.float8_e4m3fn") in out and "float8_e4m3fn arguments" not in out


HALF_C = """\
void twice(const _Float16 *x, _Float16 *y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = x[i] + x[i];
}
"""

HALF_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

twice = Kernel(
    "twice", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.uniform(-4, 4, shape[0]).astype(dtype), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: 2 * x.astype(np.float64), outputs=["y"],
    cpu=Variant(source="half.c", entry="twice", space=Space({"b": [1, 2]}), heuristic=lambda shape: {"b": 1},
                dtypes=("float16", "bfloat16")),
)
"""


def test_a_bfloat16_array_for_a_float16_pointer_fails_the_check_though_both_are_two_bytes(tmp_path, capsys):
    """A template written in _Float16, declared in bfloat16 too: every bfloat16 value would be
    read wrong, and every config fail as a wrong result with no word on why."""
    (tmp_path / "half.c").write_text(HALF_C)
    (tmp_path / "test_half.py").write_text(HALF_SUITE)
    assert main(["compile-check", "--suites", str(tmp_path), "--target", "cpu"]) == 1
    out = capsys.readouterr().out
    assert ("bfloat16 arguments: argument 'x' (bfloat16 array) where the kernel's 1st parameter (_Float16 *x) points "
            "to _Float16, which holds float16: give an array of np.float16; argument 'y' (bfloat16 array)") in out
    assert "float16 arguments" not in out.replace("bfloat16 arguments", "")


def test_a_suite_that_fails_to_import_fails_the_check_alone_and_the_others_are_checked(tmp_path, capsys):
    """A syntax error in one suite stopped the whole check, the others unchecked."""
    (tmp_path / "half.c").write_text(HALF_C)
    (tmp_path / "test_half.py").write_text(HALF_SUITE.replace('"float16", "bfloat16"', '"float16",'))
    (tmp_path / "test_broken.py").write_text("def broken(:\n")
    assert main(["compile-check", "--suites", str(tmp_path), "--target", "cpu"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"FAILED to import: {tmp_path / 'test_broken.py'}: SyntaxError: invalid syntax "
                      f"(test_broken.py, line 1)")
    assert out[1].startswith("twice  cpu  float16  host  2 configs, 2 builds  ok")
    assert out[2:] == ["compile-check cpu: 1 of 1 kernels ok", "compile-check: 1 suite failed to import (above)"]


def test_a_compiler_kept_from_writing_fails_the_check_saying_so_not_with_a_traceback():
    from tunebench.compile_check import _compile

    full = ["sh", "-c", "echo 'k.c:1:1: fatal error: error writing to /tmp/ccQx1.s: No space left on device' >&2; "
            "exit 1", "{src}", "{out}"]
    error, found = _compile(full, "int f;", ".c", "k.c", None)
    assert error.startswith("sh could not read or write its files (No space left on device: ") and found == {}


COMPLEX_CU = """\
#include <cuComplex.h>
extern "C" __global__ void cscale(const cuFloatComplex *x, cuFloatComplex *y, ORDER)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = cuCmulf(x[i], z);
}
"""

COMPLEX_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def args(shape, dtype, rng):
    x = (rng.random(shape[0]) + 1j * rng.random(shape[0])).astype(np.complex64)
    return {"x": x, "y": np.empty(shape[0], np.complex64), ARGS}

cplx = Kernel("cplx", buckets=Buckets("N", [Bucket("all", N=(1, None), shapes=[(4096,)])]), args=args,
              reference=lambda x, **rest: x * np.complex64(2 + 1j), outputs=["y"],
              cuda=Variant(source="cplx.cu", entry="cscale", heuristic=lambda s: {"T": 256},
                           launch=lambda c, s: (-(-s[0] // c["T"]), c["T"]), space=Space({"T": [128, 256]})))
"""


@needs_nvcc
@pytest.mark.parametrize("order, args, said", [
    ("int n, cuFloatComplex z", '"n": np.int32(shape[0]), "z": np.complex64(2 + 1j)',
     "argument 'z' (complex64 scalar) lands at byte 20 of the launch's arguments, where the kernel reads its parameter "
     "at byte 24"),
    ("cuFloatComplex z, int n", '"z": np.complex64(2 + 1j), "n": np.int32(shape[0])', None),
])
def test_a_complex_scalar_is_checked_where_pycuda_packs_it_not_a_traceback_for_every_kernel(tmp_path, capsys, order,
                                                                                           args, said):
    """struct has no code for a complex: the check stopped with a traceback, every kernel's result lost."""
    (tmp_path / "cplx.cu").write_text(COMPLEX_CU.replace("ORDER", order))
    (tmp_path / "test_cplx.py").write_text(COMPLEX_SUITE.replace("ARGS", args))
    status = main(["compile-check", "--suites", str(tmp_path), "--target", "cuda", "--arch", "sm_90", "--sample", "1"])
    out = capsys.readouterr().out
    assert status == (1 if said else 0), out
    assert said is None or said in out


@needs_nvcc
def test_an_array_not_in_c_order_fails_the_cuda_check_as_the_cpu_one(tmp_path, capsys):
    """The copy to the device re-lays it in C order: a column-major kernel would read it
    transposed, every config a wrong result; the CUDA check passed it."""
    (tmp_path / "stage.cu").write_text(SHARED_CU)
    (tmp_path / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE).replace(
        '"x": rng.random(shape[0], dtype=np.float32)', '"x": np.asfortranarray(rng.random((shape[0], 2), dtype=np.float32))'))
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90", "--sample", "1"]) == 1
    assert ("float32 arguments: kernel 'stage': array 'x' is not C-contiguous: build it with np.ascontiguousarray(...)"
            in capsys.readouterr().out)


#: A kernel that reaches its extern shared array through two device functions, neither inlined.
NESTED_SHARED_CU = """\
extern __shared__ float smem[];
__device__ __noinline__ float inner(float v) { smem[threadIdx.x] = v; __syncthreads(); return smem[0]; }
__device__ __noinline__ float outer(float v) { return inner(v) * 2.f; }
extern "C" __global__ void nest(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = outer(i < n ? x[i] : 0.f);
    if (i < n) y[i] = v;
}
extern "C" __global__ void plain(const float *x, float *y, int n) { if (threadIdx.x < n) y[threadIdx.x] = x[0]; }
"""


@needs_nvcc
def test_extern_shared_memory_reached_through_calls_at_any_depth_is_found(tmp_path):
    """Two levels of device functions (a -G build inlines none) hid the use: the check passed a
    launch with 0 bytes of it."""
    (tmp_path / "nest.cu").write_text(NESTED_SHARED_CU)
    subprocess.run([cuda.nvcc(), "-ptx", "-arch=sm_90", "-o", str(tmp_path / "nest.ptx"), str(tmp_path / "nest.cu")],
                   check=True)
    assert launch.extern_shared_users((tmp_path / "nest.ptx").read_text()) == {"nest"}


@needs_nvcc
def test_an_architecture_or_family_target_before_its_first_is_one_error():
    """sm_90f was taken: every build of an arch-specific variant failed in nvcc, and a plain one
    was built as sm_90 without a word."""
    assert cuda.arch_problem("sm_90f") == "sm_90 has no family-specific target sm_90f (they begin with sm_100f)"
    assert cuda.arch_problem("sm_80a") == ("sm_80 has no architecture-specific target sm_80a (they begin with "
                                           "sm_90a)")


@pytest.mark.parametrize("flag", ["-rdc=true", "-dc", "--relocatable-device-code=true", "-ewp"])
def test_a_cuda_variant_that_makes_relocatable_device_code_is_refused_naming_the_flag(flag):
    """A cubin with an external device function unresolved compiled, passed compile-check, and
    could not be loaded on the GPU."""
    with pytest.raises(KernelError, match=rf"kernel 'rdc': the cuda variant's flags \['{flag}'\] make relocatable "):
        Kernel("rdc", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(9,)])]),
               args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
               cuda=Variant(source="k.cu", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                            flags=(flag,)))


CLUSTER_CU = """\
extern "C" __global__ void __cluster_dims__(cx, 1, 1) stage(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


@needs_nvcc
def test_a_cluster_the_grid_is_no_multiple_of_or_beyond_the_portable_size_fails_the_check(tmp_path, capsys):
    """Both passed, and fail at launch: a grid of 4 and 20 blocks in clusters of 3, and a cluster
    of 16 blocks, which needs an opt-in tunebench does not make."""
    (tmp_path / "stage.cu").write_text(CLUSTER_CU)
    (tmp_path / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE).replace(
        'space=Space({"kib": [0, 1, 200]})', 'space=Space({"cx": [1, 2, 3, 16]})').replace(
        'heuristic=lambda shape: {"kib": 1}', 'heuristic=lambda shape: {"cx": 2}').replace(
        '    if config["kib"] == 0:\n        return (shape[0],)  # a launch that forgot its block\n', '').replace(
        ', config["kib"] * 1024  # dynamic shared memory per block', ''))
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90", "--sample", "4"]) == 0
    out = capsys.readouterr().out
    assert "[cx:3] shape (1000,): grid (4, 1, 1) is not a multiple of the function's cluster (3, 1, 1)" in out
    assert "[cx:16] shape (1000,) and 1 more: a cluster of 16 blocks ((16, 1, 1)), beyond the portable 8" in out, out


@needs_nvcc
def test_a_cuda_variant_without_a_launch_fails_its_declaration_offering_kernel_tuners_default(tmp_path, capsys):
    """A port of a Kernel Tuner script, which derives the launch from the problem size and the
    block_size_x/_y params, leaves it out: every config was built, then each launch failed."""
    (tmp_path / "stage.cu").write_text(SHARED_CU)
    suite = textwrap.dedent(SHARED_SUITE).replace(", launch=launch", "")
    tuner = "tuner = " + suite.split("stage = ")[1].replace('"stage",', '"tuner",', 1).replace(
        '{"kib": [0, 1, 200]}', '{"kib": [0, 1], "block_size_x": [32, 64], "block_size_y": [1, 2]}').replace(
        '{"kib": 1}', '{"kib": 1, "block_size_x": 32, "block_size_y": 1}')
    (tmp_path / "test_stage.py").write_text(suite + tuner)
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert "stage  cuda  float32  sm_90  0 configs, 0 builds  FAILED its declaration" in out
    assert ("    declaration: kernel 'stage', the cuda variant: no launch=(config, shape) -> (grid, block), which gives "
            "each config's grid and block on a shape\n") in out, out
    assert ("    declaration: kernel 'tuner', the cuda variant: no launch=(config, shape) -> (grid, block), which gives "
            "each config's grid and block on a shape; Kernel Tuner's default, the problem size over the block_size "
            "params, is launch=lambda config, shape: (((shape[0] + config['block_size_x'] - 1) // "
            "config['block_size_x'], (shape[1] + config['block_size_y'] - 1) // config['block_size_y']), "
            "(config['block_size_x'], config['block_size_y'])), shape[i] where the script's problem_size[i] was\n") in out
