"""tunebench compile-check: real nvcc (and gcc) builds of every template, no device needed."""

import shutil
import textwrap

import pytest

from tests.conftest import SHARED_CU, SHARED_SUITE
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
    lines = capsys.readouterr().out.splitlines()
    kernels = [ln.split()[0] for ln in lines if not ln.startswith(" ")]
    assert sorted(kernels) == ["layernorm", "matmul_add", "row_reduce", "softmax"]
    assert all("sm_80 sm_90" in ln and " ok " in ln for ln in lines if not ln.startswith(" "))


@needs_nvcc
def test_a_template_that_fails_to_compile_fails_the_check_naming_kernel_and_config(tmp_path, capsys):
    (tmp_path / "fill.cu").write_text(BROKEN_CU)
    (tmp_path / "test_fill.py").write_text(textwrap.dedent(BROKEN_SUITE))
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert "fill  cuda  float32  sm_90  2 configs, 2 builds, 2 launches  FAILED 1 of 2 builds" in out
    assert "float32 sm_90 [tile:2]: " in out and 'tile 2 is broken' in out


def test_every_shipped_cpu_kernel_compiles_with_gcc(capsys):
    assert main(["compile-check", "--target", "cpu", "--sample", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4



@needs_nvcc
def test_a_launch_in_another_form_or_beyond_an_architectures_shared_memory_fails_the_check(tmp_path, capsys):
    """Found here, not on the GPU: a launch a tune could not make on an A100 (200 KiB of dynamic
    shared memory per block, more than sm_80's 163 KiB; an H100 has 227 KiB) and one without a block."""
    (tmp_path / "stage.cu").write_text(SHARED_CU)
    (tmp_path / "test_stage.py").write_text(textwrap.dedent(SHARED_SUITE))
    assert main(["compile-check", "--suites", str(tmp_path), "--sample", "3"]) == 1
    out = capsys.readouterr().out
    assert "stage  cuda  float32  sm_80 sm_90  3 configs, 6 builds, 5 launches  FAILED 3 of 5 launches" in out
    assert "kernel 'stage': the cuda variant's launch({'kib': 0}, (1000,)) returned (1000,): it must return (grid, block)" in out
    for shape in ("(1000,)", "(5000,)"):
        assert (f"sm_80 [kib:200] shape {shape}: 204800 bytes of shared memory per block, the device allows "
                f"166912") in out
    assert "sm_90 [kib:200]" not in out
    assert main(["compile-check", "--suites", str(tmp_path), "--arch", "sm_90"]) == 1  # the launch without a block
