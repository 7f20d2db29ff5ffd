"""The CUDA target. Builds are real nvcc runs, checked wherever nvcc is (CI included); the faults
test tunes a real kernel on a real GPU and runs only where PyCUDA can use one."""

import shutil
import textwrap

import pytest
from tinydb import TinyDB

from tests.test_plugin import TUNE
from tunebench import Bucket, Buckets, Kernel, Space, Variant
from tunebench.backends import cuda_status
from tunebench.backends.base import CompileError
from tunebench.backends.cache import BuildCache
from tunebench.backends.cuda import CudaCompiler

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_gpu = pytest.mark.skipif(not cuda_status()[0], reason=f"no usable GPU: {cuda_status()[1]}")

SCALE_CU = """\
#if broken
#error "broken builds fail"
#endif
extern "C" __global__ void scale(const TB_DTYPE *x, TB_DTYPE *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i];
}
"""


def scale_kernel(tmp_path) -> Kernel:
    (tmp_path / "scale.cu").write_text(SCALE_CU)
    return Kernel(
        "scale", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
        cuda=Variant(source=str(tmp_path / "scale.cu"), entry="scale", space=Space({"broken": [0, 1]}),
                     heuristic=lambda shape: {"broken": 0}, dtypes=("float32", "float16"),
                     launch=lambda config, shape: (((shape[0] + 127) // 128,), (128,))))


@needs_nvcc
def test_a_cuda_build_is_a_cubin_compiled_per_architecture_and_reused(tmp_path):
    """The tuning process compiles ahead without PyCUDA, a driver or a device (none of which CI has)."""
    kernel = scale_kernel(tmp_path)
    cache = BuildCache(tmp_path / "cache")
    first = CudaCompiler("sm_90", cache).build(kernel, kernel.variant("cuda"), {"broken": 0}, "float16")
    assert not first.cached and first.compile_time_s > 0
    cubin = first.handle.read_bytes()
    assert cubin[:4] == b"\x7fELF" and b"scale" in cubin
    again = CudaCompiler("sm_90", cache).build(kernel, kernel.variant("cuda"), {"broken": 0}, "float16")
    assert again.cached and again.handle == first.handle and cache.compiled == 1
    other = CudaCompiler("sm_80", cache).build(kernel, kernel.variant("cuda"), {"broken": 0}, "float16")
    assert other.handle != first.handle and not other.cached


@needs_nvcc
def test_a_cuda_compile_error_says_what_nvcc_said_and_is_compiled_once(tmp_path):
    kernel = scale_kernel(tmp_path)
    compiler = CudaCompiler("sm_90", BuildCache(tmp_path / "cache"))
    for _ in range(2):
        with pytest.raises(CompileError, match="broken builds fail"):
            compiler.build(kernel, kernel.variant("cuda"), {"broken": 1}, "float32")
    assert compiler.cache.compiled == 1
    with pytest.raises(CompileError, match="dtype bfloat16 has no CUDA type"):
        compiler.build(kernel, kernel.variant("cuda"), {"broken": 0}, "bfloat16")
    assert compiler.build(kernel, kernel.variant("cuda"), {"broken": 0}, "int8").handle.read_bytes()[:4] == b"\x7fELF"


#: One fault per value of ``fault``; n is odd, so a float16 output ends in half a 32-bit word.
FAULTY_CU = """\
#if fault == 2
#error "fault 2 does not compile"
#endif
extern "C" __global__ void faulty(const TB_DTYPE *x, TB_DTYPE *y, int n)
{
    volatile int spin = 1;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#if fault == 4
    if (i < n - 1) y[i] = x[i] + x[i];  /* never writes the last element */
#else
    if (i < n) y[i] = x[i] + x[i];
#endif
#if fault == 1
    if (i == n / 2) y[i] = x[i];  /* wrong answer */
#elif fault == 3
    if (i == 0) y[n + 16] = x[0];  /* past the end of the output */
#elif fault == 5
    if (i == 0) __trap();  /* a device fault: the context is spoilt */
#elif fault == 7
    if (i == 0) while (spin) {}  /* hang */
#endif
}
"""

FAULTY_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

faulty = Kernel(
    "faulty",
    buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100001,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32).astype(dtype),
                                    "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
    reference=lambda x, n: 2.0 * x.astype(np.float64), outputs=["y"],
    cuda=Variant(source="faulty.cu", entry="faulty", heuristic=lambda shape: {"fault": 0},
                 space=Space({"fault": range(8)}), dtypes=("float32", "float16"),
                 # fault 6: a block of 2048 threads, more than any GPU launches
                 launch=lambda config, shape: (((shape[0] + 255) // 256,), (2048 if config["fault"] == 6 else 256,))),
)
"""

EXPECTED = {0: "ok", 1: "wrong_result", 2: "compile_error", 3: "out_of_bounds", 4: "wrong_result",
            5: "crashed", 6: "pruned_resources", 7: "timeout"}


@needs_gpu
def test_every_cuda_fault_is_recorded_with_its_status_and_the_good_candidate_wins(pytester):
    pytester.path.joinpath("faulty.cu").write_text(FAULTY_CU)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE))
    tune = [a if a != "cpu" else "cuda" for a in TUNE]
    result = pytester.runpytest("test_faulty.py", *tune, "--tune-timeout", "2", "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("cuda-*.json")
    trials = TinyDB(path).table("trials").all()
    found = {(t["dtype"], t["config"]["fault"]): t for t in trials}
    assert set(found) == {(d, f) for d in ("float32", "float16") for f in EXPECTED}
    for (dtype, fault), trial in found.items():
        assert trial["status"] in ({"ok", "early_stopped"} if fault == 0 else {EXPECTED[fault]}), (dtype, fault, trial)
    # fault 4 runs after fault 0 left right answers in memory: only poisoning catches it
    assert all("(100000,)" in found[(d, 4)]["error"] for d in ("float32", "float16"))
    assert all("past the end of output 'y'" in found[(d, 3)]["error"] for d in ("float32", "float16"))
    assert all("2048 threads" in found[(d, 6)]["error"] for d in ("float32", "float16"))
    assert result.ret == 1  # the faulty candidates fail their items
