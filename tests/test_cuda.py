"""The CUDA target. Builds are real nvcc runs, checked wherever nvcc is (CI included); the faults
and shared memory tests tune real kernels on a real GPU and run only where PyCUDA can use one."""

import dataclasses
import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tinydb import TinyDB

from tests.conftest import SHARED_CU, SHARED_SUITE, STATIC_SHARED_CU
from tests.test_plugin import TUNE
from tunebench import Bucket, Buckets, Kernel, Space, Variant, backends
from tunebench.backends import build_key, cuda_status
from tunebench.backends.base import Build, CompileError, ResourceError, input_damage, same_bytes
from tunebench.backends.cache import BuildCache
from tunebench.backends.cuda import (LEAD_PTX, CudaBackend, CudaCompiler, CudaRunner, entry_of, launch_refusal, nvcc_archs,
                                     nvcc_command, transferable)
from tunebench.backends.launch import (FunctionResources, Launch, arch_limits, compiled_kernels, cubin_kernels,
                                       entry_symbol, launch_of, register_threads, resource_problem)
from tunebench.backends.params import Param, args_problem
from tunebench.dtypes import numpy_dtype
from tunebench.kernel import REGISTRY, KernelError
from tunebench.measure import Measurement, MeasureSettings

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


def scale_kernel(tmp_path, launch=lambda config, shape: (((shape[0] + 127) // 128,), (128,)),
                 values: dict | None = None, heuristic: dict | None = None) -> Kernel:
    """``scale.cu`` over ``values`` (a space of ``broken`` alone by default), one bucket of one shape."""
    (tmp_path / "scale.cu").write_text(SCALE_CU)
    return Kernel(
        "scale", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
        cuda=Variant(source=str(tmp_path / "scale.cu"), entry="scale", space=Space(values or {"broken": [0, 1]}),
                     heuristic=lambda shape: heuristic or {"broken": 0}, dtypes=("float32", "float16"),
                     launch=launch))


@needs_nvcc
def test_a_param_named_as_a_template_parameter_of_a_header_beside_it_is_named_by_the_build_error(tmp_path):
    """nvcc quotes the line as expanded (``template <int 64>``) and names no macro: the error was
    "expected a ',' or '>'" in tile.cuh alone, where the CPU target names the param."""
    (tmp_path / "tile.cuh").write_text("template <int BLOCK>\n__device__ float tile(const float *x) "
                                       "{ return x[BLOCK]; }\n")
    (tmp_path / "k.cu").write_text('#include "tile.cuh"\n'
                                   'extern "C" __global__ void k(const float *x, float *y) { y[0] = tile<4>(x); }\n')
    kernel = Kernel("clash", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                    cuda=Variant(source=str(tmp_path / "k.cu"), entry="k", space=Space({"BLOCK": [64, 128]}),
                                 heuristic=lambda shape: {"BLOCK": 64}, launch=lambda config, shape: ((1,), (64,))))
    with pytest.raises(CompileError) as error:
        CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).build(kernel, kernel.variant("cuda"), {"BLOCK": 64},
                                                                   "float32")
    assert "(tunebench: param 'BLOCK' is #defined ahead of tile.cuh, whose line 1 reads 'BLOCK' as a name: " \
           "rename it)" in str(error.value), str(error.value)


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
def test_a_cuda_builds_refusal_is_kept_under_the_key_its_compile_cache_names_it_by(tmp_path):
    """What a refused trial keeps, and is reused under alone (see session.BUILD_VERDICTS), is the
    key of the build as the device's tune compiles it: the compile cache's, which follows the
    command (an arch-specific variant's sm_90a) as the records could not."""
    kernel = scale_kernel(tmp_path)
    variant = kernel.variant("cuda")
    with pytest.raises(CompileError, match="broken builds fail"):
        CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).build(kernel, variant, {"broken": 1}, "float32")
    device = {"compute_capability": "9.0"}
    key = build_key("cuda", device, variant, {"broken": 1}, "float32")
    assert [p.name for p in (tmp_path / "cache").glob("*.err")] == [f"scale-cuda-{key}.err"]
    assert build_key("cuda", device, dataclasses.replace(variant, arch_specific=True), {"broken": 1}, "float32") != key


class BuildingWorkers:
    """Workers of a device-less tune of the cuda target: each trial builds its cubin as the
    device's worker does (a compile error is its status) and takes ``step`` ms; a comparison
    samples each arm so."""

    timeout = None

    def __init__(self, arch: str):
        self.builder = CudaCompiler(arch)
        self.builds = {}

    @staticmethod
    def compiler(kernel, variant):
        return backends.compiler("cuda", variant)

    def trial(self, job):
        from tunebench.workers import CompareJob

        if isinstance(job, CompareJob):
            return {"status": "ok", "samples": {"": {label: [float(config["step"])] * 5 for label, config, _ in job.arms}},
                    "cost_s": 0.0}
        kernel = REGISTRY[job.kernel]
        try:
            build = self.builder.build(kernel, kernel.variant("cuda"), job.config, job.dtype)
        except CompileError as e:
            return {"status": "compile_error", "error": str(e), "cost_s": 0.0}
        self.builds[build.handle.name] = not build.cached
        return {"status": "ok", "samples": [float(job.config["step"])] * 5, "measure_s": 0.0,
                "compile_time_s": build.compile_time_s, "cost_s": 0.0}

    def mark(self):
        pass

    def pause(self, seconds):
        pass

    def restart(self):
        pass

    def close(self):
        pass


@needs_nvcc
def test_a_finished_cuda_task_resumed_with_an_empty_compile_cache_runs_no_compiler(tmp_path, monkeypatch):
    """A GPU machine is lent afresh, its compile cache empty: every finished task compiled each
    candidate its search asked again with nvcc, ahead, only to reuse every trial, in each session's
    lease. A refusal of a build is reused under today's key (see session.BUILD_VERDICTS), unbuilt."""
    from tunebench.builds import Ahead
    from tunebench.records import RecordStore
    from tunebench.session import Tuner

    kernel = scale_kernel(tmp_path, values={"broken": [0, 1], "step": [1, 2, 3]}, heuristic={"broken": 0, "step": 3})
    variant = kernel.variant("cuda")
    device = {"target": "cuda", "name": "NVIDIA Test", "compute_capability": "9.0", "sm_count": 1}
    runs = []
    for cache in ("first", "empty"):
        monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / cache))
        workers, ahead = BuildingWorkers("sm_90"), Ahead("cuda", device)
        tuner = Tuner("cuda", device, RecordStore.for_device(tmp_path / "records", device), workers, root=tmp_path,
                      ahead=ahead)
        (bucket,) = kernel.buckets
        task = tuner.task(kernel, variant, "float32", bucket)
        task.candidates = variant.space.enumerate()[0]
        task.run()
        runs.append((task, ahead, workers))
    (first, first_ahead, first_workers), (again, again_ahead, again_workers) = runs
    # every config built once: the heuristic's by its worker, the others ahead (the refused one too)
    assert first.new == 6 and first_ahead.compiled == 5
    assert first.summary_row()["best_config"] == "broken:0 step:1"
    assert again.new == 0 and again.reused == 6 and again.summary_row()["best_config"] == "broken:0 step:1"
    assert again_ahead.compiled == 0 and not again_workers.builds
    assert not (tmp_path / "empty").exists() or not any((tmp_path / "empty").iterdir())


@needs_nvcc
def test_builds_ahead_stop_at_the_trial_budget(tmp_path, monkeypatch):
    """The host builds the candidates the strategy will ask next, as many as it has cores: at a
    task's end, past the trial budget, those were never measured (on a GPU host of 16 cores, up to
    15 nvcc builds for each task). Of 8 candidates and a budget of 3, 3 are built beside the
    heuristic's, whatever the pool's size."""
    from tunebench.builds import Ahead
    from tunebench.records import RecordStore
    from tunebench.session import Budget, Tuner

    monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / "cache"))
    kernel = scale_kernel(tmp_path, values={"broken": [0], "step": [1, 2, 3, 4, 5, 6, 7, 8]},
                          heuristic={"broken": 0, "step": 8})
    variant = kernel.variant("cuda")
    device = {"target": "cuda", "name": "NVIDIA Test", "compute_capability": "9.0", "sm_count": 1}
    workers, ahead = BuildingWorkers("sm_90"), Ahead("cuda", device, workers=8)
    tuner = Tuner("cuda", device, RecordStore.for_device(tmp_path / "records", device), workers, root=tmp_path,
                  ahead=ahead, strategy="brute_force", budget=Budget(trials=3))
    (bucket,) = kernel.buckets
    task = tuner.task(kernel, variant, "float32", bucket)
    task.candidates = variant.space.enumerate()[0]
    task.run()
    assert len(task.outcomes) == 3
    assert len(ahead.artefacts | set(workers.builds)) == 4


@needs_nvcc
def test_a_cuda_compile_error_says_what_nvcc_said_and_is_compiled_once(tmp_path):
    kernel = scale_kernel(tmp_path)
    compiler = CudaCompiler("sm_90", BuildCache(tmp_path / "cache"))
    for _ in range(2):
        with pytest.raises(CompileError, match="broken builds fail"):
            compiler.build(kernel, kernel.variant("cuda"), {"broken": 1}, "float32")
    assert compiler.cache.compiled == 1
    with pytest.raises(CompileError, match="dtype complex64 has no CUDA type"):
        compiler.build(kernel, kernel.variant("cuda"), {"broken": 0}, "complex64")
    for dtype in ("int8", "bfloat16"):  # bfloat16: __nv_bfloat16, its header included by tunebench
        assert compiler.build(kernel, kernel.variant("cuda"), {"broken": 0}, dtype).handle.read_bytes()[:4] == b"\x7fELF"


@needs_nvcc
def test_static_shared_memory_no_block_gets_is_a_resource_refusal_not_a_compile_error(tmp_path):
    """ptxas refuses 64 KiB of static shared memory (48 KiB at most): the config is beyond a
    limit, pruned as a launch beyond the device's is, where it was the template's compile_error."""
    (tmp_path / "stage.cu").write_text(STATIC_SHARED_CU)
    kernel = Kernel("stage", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                    cuda=Variant(source=str(tmp_path / "stage.cu"), entry="stage", space=Space({"kib": [1, 64]}),
                                 heuristic=lambda shape: {"kib": 1},
                                 launch=lambda config, shape: ((shape[0] + 255) // 256, 256)))
    compiler = CudaCompiler("sm_90", BuildCache(tmp_path / "cache"))
    assert compiler.build(kernel, kernel.variant("cuda"), {"kib": 1}, "float32").handle.exists()
    for _ in range(2):  # the refusal comes from the compile cache the second time
        with pytest.raises(ResourceError, match=r"^ptxas: Entry function 'stage' uses too much shared data "
                                                r"\(0x10000 bytes, 0xc000 max\)$"):
            compiler.build(kernel, kernel.variant("cuda"), {"kib": 64}, "float32")
    assert compiler.cache.compiled == 2


@needs_nvcc
def test_a_kernel_that_syncs_its_grid_is_refused_at_its_first_load_and_one_that_syncs_its_block_is_not(tmp_path):
    """tunebench makes no cooperative launch: on the GPU every config of it failed alike, one by
    one, each with an obscure error. The cubin does not say it; the PTX of its build, kept beside
    it in the compile cache, does, cached or not."""
    from tests.test_compile_check import SYNCS_CU

    cache = BuildCache(tmp_path / "cache")
    for scope in ("grid", "thread_block"):
        (tmp_path / f"{scope}.cu").write_text(SYNCS_CU.replace("SYNC", scope))
        kernel = Kernel(scope, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1024,)])]),
                        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                        cuda=Variant(source=str(tmp_path / f"{scope}.cu"), entry=f"{scope}_sum",
                                     space=Space({"UNUSED": [1]}), heuristic=lambda shape: {"UNUSED": 1},
                                     launch=lambda config, shape: (shape[0] // 128, 128)))
        for cached in (False, True):
            build = CudaCompiler("sm_90", cache).build(kernel, kernel.variant("cuda"), {"UNUSED": 1}, "float32")
            assert build.cached is cached
            kernels = compiled_kernels(build.handle)
            if scope == "thread_block":
                assert entry_of(kernel, kernel.variant("cuda"), kernels) == "thread_block_sum"
                continue
            with pytest.raises(KernelError, match=r"^kernel 'grid': grid.cu's 'grid_sum': the kernel syncs its whole "
                                                  r"grid \(cg::this_grid\(\).sync\(\)\), which only a cooperative "
                                                  r"launch allows"):
                entry_of(kernel, kernel.variant("cuda"), kernels)
    assert sorted(p.suffix for p in cache.root.iterdir()) == [".cu", ".cu", ".cubin", ".cubin", ".ptx", ".ptx"]


def _host_filled(tmp_path, ahead: str = "") -> tuple[Kernel, Build]:
    """A kernel reading __constant__ weights only the host fills (``ahead`` its source's first
    lines), and its build."""
    from tests.test_compile_check import CONSTANT_CU

    (tmp_path / "host.cu").write_text(ahead + CONSTANT_CU.replace("FILLED", "").replace("NAME", "host"),
                                      encoding="utf-8")
    kernel = Kernel("host", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1024,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                    cuda=Variant(source=str(tmp_path / "host.cu"), entry="host_sum", space=Space({"UNUSED": [1]}),
                                 heuristic=lambda shape: {"UNUSED": 1}, launch=lambda config, shape: (8, 128)))
    return kernel, CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).build(kernel, kernel.variant("cuda"),
                                                                                {"UNUSED": 1}, "float32")


@needs_nvcc
def test_a_kernel_reading_constant_memory_only_the_host_fills_is_refused_at_its_first_load(tmp_path):
    """tunebench copies nothing into __constant__ memory: a Kernel Tuner style kernel whose filter
    the host fills read zeros in every config, each a wrong result blamed on the reference."""
    kernel, build = _host_filled(tmp_path)
    with pytest.raises(KernelError, match=r"^kernel 'host': host.cu's 'host_sum': the kernel reads __constant__ "
                                          r"float weights\[4\] \(host.cu line 1\), which no initialiser fills"):
        entry_of(kernel, kernel.variant("cuda"), compiled_kernels(build.handle))


@needs_nvcc
def test_a_builds_kept_source_and_ptx_are_read_as_utf8_whatever_the_locale(tmp_path):
    """The kept .cu was read in the locale's encoding: under LC_ALL=C a template with a comment
    beyond ASCII failed its first load with UnicodeDecodeError, where it is written as UTF-8."""
    from tests.conftest import ascii_locale

    _, build = _host_filled(tmp_path, "// weights in µs\n")
    assert "µs" in build.handle.with_suffix(".cu").read_text(encoding="utf-8")
    read = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from tunebench.backends.launch "
                           "import compiled_kernels; print([str(c) for c in compiled_kernels(Path(sys.argv[1]))['host_sum']"
                           ".unfilled_constants])", str(build.handle)],
                          env=ascii_locale(), capture_output=True, text=True)
    assert (read.returncode, read.stdout.strip()) == (0, "['float weights[4] (host.cu line 2)']"), read.stderr[-2000:]


@needs_nvcc
def test_a_launch_compile_check_fails_is_refused_before_measuring_with_what_the_build_and_device_say(tmp_path):
    """Only grid sync was refused: a kernel using extern __shared__ memory launched with 0 bytes
    of it, and a grid that is no multiple of the kernel's cluster or a cluster beyond 8 blocks,
    passed to the GPU (the device's function does not say them; its build's PTX does)."""
    from tests.test_compile_check import CLUSTER_CU

    (tmp_path / "stage.cu").write_text(SHARED_CU)
    (tmp_path / "cluster.cu").write_text(CLUSTER_CU)
    device_fn = SimpleNamespace(shared_size_bytes=0, num_regs=16, max_threads_per_block=1024)  # as PyCUDA's says
    compiler, limits = CudaCompiler("sm_90", BuildCache(tmp_path / "cache")), arch_limits("sm_90")

    def refusal(source: str, config: dict, made: Launch) -> str | None:
        kernel = Kernel("stage", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                        cuda=Variant(source=str(tmp_path / source), entry="stage", space=Space({"cx": [1, 3, 16]}),
                                     heuristic=lambda shape: {"cx": 1}, launch=lambda config, shape: (4, 256)))
        build = compiler.build(kernel, kernel.variant("cuda"), config, "float32")
        fn = FunctionResources.of(device_fn, compiled_kernels(build.handle)["stage"])
        return launch_refusal(kernel, kernel.variant("cuda"), config, (1000,), made, fn, limits)

    with pytest.raises(KernelError, match=r"^kernel 'stage': stage.cu's 'stage' launched for \{'cx': 1\} on shape "
                                          r"\(1000,\): the kernel uses extern __shared__ memory, and the launch gives "
                                          r"it 0 bytes: return \(grid, block, shared_bytes\)$"):
        refusal("stage.cu", {"cx": 1}, Launch((4, 1, 1), (256, 1, 1)))
    assert refusal("stage.cu", {"cx": 1}, Launch((4, 1, 1), (256, 1, 1), 1024)) is None
    assert refusal("cluster.cu", {"cx": 3}, Launch((4, 1, 1), (256, 1, 1))) == (
        "grid (4, 1, 1) is not a multiple of the function's cluster (3, 1, 1)")
    assert refusal("cluster.cu", {"cx": 3}, Launch((6, 1, 1), (256, 1, 1))) is None
    assert refusal("cluster.cu", {"cx": 16}, Launch((16, 1, 1), (256, 1, 1))).startswith(
        "a cluster of 16 blocks ((16, 1, 1)), beyond the portable 8")


@needs_nvcc
def test_a_computed_include_of_a_param_naming_its_header_bare_says_to_quote_it(tmp_path):
    """nvcc's preprocessor said only that #include expects "FILENAME" or <FILENAME>."""
    (tmp_path / "impl.cuh").write_text("__device__ float twice(float v) { return 2 * v; }\n")
    (tmp_path / "k.cu").write_text('#include IMPL\nextern "C" __global__ void k(const float *x, float *y) '
                                   "{ y[0] = twice(x[0]); }\n")
    kernel = Kernel("bare", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                    cuda=Variant(source=str(tmp_path / "k.cu"), entry="k", space=Space({"IMPL": ["impl.cuh"]}),
                                 heuristic=lambda shape: {"IMPL": "impl.cuh"}, launch=lambda config, shape: (1, 1)))
    with pytest.raises(CompileError) as error:
        CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).build(kernel, kernel.variant("cuda"),
                                                                   {"IMPL": "impl.cuh"}, "float32")
    assert '#include expects "FILENAME" or <FILENAME>' in str(error.value)
    assert str(error.value).endswith(
        "(tunebench: param 'IMPL' is impl.cuh, which #include IMPL at k.cu line 1 reads bare: quote the header's name "
        "in its value, '\"impl.cuh\"' (or '<impl.cuh>' for a header of the include path))")
    quoted = CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).build(kernel, kernel.variant("cuda"),
                                                                        {"IMPL": '"impl.cuh"'}, "float32")
    assert quoted.handle.exists()


def with_launch(tmp_path, launch) -> tuple[Kernel, Variant]:
    kernel = scale_kernel(tmp_path, launch)
    return kernel, kernel.variant("cuda")


@pytest.mark.parametrize("answer, expected", [
    (((8,), (128,)), Launch((8, 1, 1), (128, 1, 1), 0)),
    ((8, 128), Launch((8, 1, 1), (128, 1, 1), 0)),  # ints, as CuPy and Triton users write them
    (((4, 2), (32, 8), 65536), Launch((4, 2, 1), (32, 8, 1), 65536)),  # extern __shared__ bytes
    ([np.int64(3), (np.int32(64), 2, 2), np.int64(0)], Launch((3, 1, 1), (64, 2, 2), 0)),
    ((np.ceil(1000 / 256), 256.0), Launch((4, 1, 1), (256, 1, 1), 0)),  # whole floats, as np.ceil gives them
])
def test_a_launch_gives_grid_block_and_dynamic_shared_memory_in_the_forms_users_write(tmp_path, answer, expected):
    kernel, variant = with_launch(tmp_path, lambda config, shape: answer)
    assert launch_of(kernel, variant, {"broken": 0}, (1000,)) == expected


@pytest.mark.parametrize("launch, message", [
    (lambda config, shape: ((1,),), r"returned \(\(1,\),\): it must return \(grid, block\) or \(grid, block, "
                                    r"shared_bytes\)"),
    (lambda config, shape: ((1,), (127.5,)), r"returned \(\(1,\), \(127.5,\)\)"),
    (lambda config, shape: ((1,), (1, 2, 3, 4)), r"returned"),
    (lambda config, shape: ((shape[0] // 128,), shape[0] > 0), r"returned \(\(7,\), True\)"),  # a 1-thread block
    (lambda config, shape: ((1,), (128,), -1), r"returned"),
    (lambda config, shape: ((1,), (config["tile"],)), r"\(\{'broken': 0\}, \(1000,\)\) raised KeyError: 'tile'"),
    (lambda config, shape: (shape[0] // 4096, 256), r"returned grid \(0, 1, 1\), block \(256, 1, 1\): a dimension "
                                                    r"below 1 launches nothing \(round the grid up"),
    (lambda config, shape: (1, (32, 32, 64 // 128)), r"block \(32, 32, 0\): a dimension below 1 launches nothing "
                                                     r"\(a block's dimension is its threads along it"),
])
def test_a_launch_that_raises_or_answers_in_another_form_is_a_declaration_error_naming_config_and_shape(
        tmp_path, launch, message):
    kernel, variant = with_launch(tmp_path, launch)
    with pytest.raises(KernelError, match=r"kernel 'scale': the cuda variant's launch.*" + message):
        launch_of(kernel, variant, {"broken": 0}, (1000,))


def test_a_launch_beyond_what_the_function_or_the_device_allows_is_refused_saying_why():
    h100 = {"threads": 1024, "block": (1024, 1024, 64), "grid": (2**31 - 1, 65535, 65535), "shared": 227 * 1024}
    fn = FunctionResources(static_shared=16384, registers=128, max_threads_per_block=512)
    assert resource_problem(h100, Launch((8, 1, 1), (512, 1, 1), 100_000), fn) is None
    assert resource_problem(h100, Launch((8, 1, 1), (1024, 1, 1)), fn) == (
        "block of 1024 threads, but with 128 registers per thread the function launches at most 512")
    assert resource_problem(h100, Launch((8, 1, 1), (256, 1, 1), 220 * 1024), fn) == (
        "241664 bytes (236 KiB) of shared memory per block (16384 static, 225280 dynamic), the device allows "
        "232448 (227 KiB)")
    assert resource_problem(h100, Launch((70000, 70000, 1), (256, 1, 1)), fn) == (
        "grid (70000, 70000, 1) is outside the device's limits (2147483647, 65535, 65535)")
    # the architecture's block limit first: the function's own bound, from its registers, is never above it
    assert resource_problem(h100, Launch((8, 1, 1), (2048, 1, 1)), FunctionResources(
        registers=31, max_threads_per_block=1024)) == "block of 2048 threads, the device launches at most 1024"
    # without a device: the architecture's limits, the launch's own shared memory
    assert resource_problem(arch_limits("sm_80"), Launch((1, 1, 1), (64, 1, 1), 200 * 1024), where="sm_80") == (
        "204800 bytes (200 KiB) of shared memory per block, sm_80 allows 166912 (163 KiB)")
    assert resource_problem(arch_limits("sm_90"), Launch((1, 1, 1), (64, 1, 1), 200 * 1024)) is None
    assert resource_problem(arch_limits("sm_90"), Launch((1, 1, 1), (2048, 1, 1)), where="sm_90") == (
        "block of 2048 threads, sm_90 launches at most 1024")


def test_a_launch_that_takes_the_dtype_sizes_its_shared_memory_by_the_element(tmp_path):
    kernel, variant = with_launch(tmp_path, lambda config, shape, dtype: (1, 256, 256 * np.dtype(dtype).itemsize))
    assert launch_of(kernel, variant, {"broken": 0}, (1000,), "float16").shared == 512
    assert launch_of(kernel, variant, {"broken": 0}, (1000,), "float32").shared == 1024


@needs_nvcc
def test_a_cubin_names_its_kernels_their_static_shared_memory_and_parameters(tmp_path):
    (tmp_path / "k.cu").write_text(
        "template <int B> __global__ void tiled(float *y) { __shared__ float s[B]; s[threadIdx.x] = 1; "
        "__syncthreads(); y[threadIdx.x] = s[B - 1 - threadIdx.x]; }\n"
        "template __global__ void tiled<256>(float *);\n"
        'extern "C" __global__ void staged(float *y) { __shared__ float s[4096]; s[threadIdx.x] = 1; '
        "__syncthreads(); y[threadIdx.x] = s[threadIdx.x + 1]; }\n"
        "struct __align__(16) Clamp4 { float lo, hi, eps, pad; };\n"
        'extern "C" __global__ void clamp(const float *x, float *y, int n, Clamp4 c) { y[0] = x[0] + n + c.lo; }\n')
    for arch in ("sm_80", "sm_90"):
        out = tmp_path / f"{arch}.cubin"
        subprocess.run([a.format(src=tmp_path / "k.cu", out=out) for a in nvcc_command(arch)], check=True)
        kernels = cubin_kernels(out)
        assert set(kernels) == {"staged", "clamp", "_Z5tiledILi256EEvPf"}, arch
        assert [(p.size, p.offset) for p in kernels["clamp"].params] == [(8, 0), (8, 8), (4, 16), (16, 32)]
        assert kernels["staged"].static_shared == 16384 and kernels["_Z5tiledILi256EEvPf"].static_shared == 1024
        assert kernels["staged"].params == kernels["_Z5tiledILi256EEvPf"].params == (Param(8, offset=0),)  # a pointer each, at byte 0


REGISTERS_CU = """\
extern "C" __global__ void __launch_bounds__(256) bounded(const float *x, float *y) { y[threadIdx.x] = x[threadIdx.x]; }
extern "C" __global__ void heavy(const float *x, float *y, int n)
{
    float acc[96];
#pragma unroll
    for (int k = 0; k < 96; ++k) acc[k] = x[(threadIdx.x * 97 + k * 131) % n];
    float s = 0;
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int k = 0; k < 96; ++k) s = s * acc[(k + r) % 96] + acc[k];
    y[threadIdx.x] = s;
}
"""


@needs_nvcc
def test_a_cubin_bounds_a_blocks_threads_by_launch_bounds_and_registers_as_the_device_would(tmp_path):
    """Without a GPU, a launch the device would refuse is refused all the same: more threads than
    ``__launch_bounds__`` allows, or than the function's registers leave room for."""
    (tmp_path / "k.cu").write_text(REGISTERS_CU)
    for arch in ("sm_80", "sm_90"):  # an sm_80 cubin's code section holds its registers too: they were never read
        out = tmp_path / f"{arch}.cubin"
        command = [a.format(src=tmp_path / "k.cu", out=out) for a in nvcc_command(arch)] + ["-Xptxas", "-v"]
        built = subprocess.run(command, check=True, capture_output=True, text=True)
        used = int(re.search(r"Compiling entry function 'heavy'.*?Used (\d+) registers", built.stderr, re.S).group(1))
        kernels = cubin_kernels(out)
        assert kernels["heavy"].registers == used > 64 and kernels["bounded"].launch_bounds == 256, arch
        limits = arch_limits(arch)
        assert resource_problem(limits, Launch((1, 1, 1), (512, 1, 1)), kernels["bounded"], arch) == (
            "block of 512 threads, but the function's __launch_bounds__ allows at most 256")
        most = kernels["heavy"].max_threads_per_block
        assert most == register_threads(used) < 1024
        assert resource_problem(limits, Launch((1, 1, 1), (most, 1, 1)), kernels["heavy"], arch) is None
        assert resource_problem(limits, Launch((1, 1, 1), (1024, 1, 1)), kernels["heavy"], arch) == (
            f"block of 1024 threads, but with {used} registers per thread the function launches at most {most}")


def test_a_blocks_threads_by_registers_are_as_the_device_allocates_them():
    """Warps rounded up to the SM's 4 sub-partitions, as cuda_occupancy.h checks a launch: 80
    registers were said to launch 800 threads, which the device refuses."""
    assert [register_threads(n) for n in (32, 64, 72, 80, 96, 112, 128, 192, 255)] == [
        1024, 1024, 896, 768, 640, 512, 512, 256, 256]


@needs_nvcc
def test_a_debug_build_gives_the_c_types_a_cubin_built_for_speed_reduces_to_bytes(tmp_path):
    """What tells a float32 given for an ``int`` (or a float64 array for a ``float *``) from the
    right argument at tune time, on the device, before a launch; a config that does not build
    leaves only the bytes checked."""
    kernel = scale_kernel(tmp_path)
    variant, compiler = kernel.variant("cuda"), CudaCompiler("sm_90", BuildCache(tmp_path / "cache"))
    types = compiler.parameter_types(kernel, variant, {"broken": 0}, "float32", "scale")
    assert [(p.kind, p.ctype, p.size) for p in types] == [
        ("pointer", "float *", 8), ("pointer", "float *", 8), ("int", "int", 4)]
    x = np.zeros(4, np.float32)
    assert args_problem({"x": x, "y": x, "n": np.int32(4)}, types) is None
    assert args_problem({"x": x, "y": x, "n": np.float32(4)}, types) == (
        "argument 'n' (float32 scalar) where the kernel's 3rd parameter (int n) takes a 4-byte int: give it np.int32")
    assert "points to 4-byte float: give an array of np.float32" in args_problem(
        {"x": x.astype(np.float64), "y": x, "n": np.int32(4)}, types)
    assert compiler.parameter_types(kernel, variant, {"broken": 1}, "float32", "scale") is None


def entry_types(tmp_path, entry: str, output: str, code: str):
    """The C types of the parameters of ``entry``, a kernel of its own file of ``code``, as its
    -G build's debug info gives them (what arguments are checked against)."""
    (tmp_path / f"{entry}.cu").write_text(code)
    kernel = Kernel(entry, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=[output],
                    cuda=Variant(source=str(tmp_path / f"{entry}.cu"), entry=entry, space=Space({"UNUSED": [1]}),
                                 heuristic=lambda shape: {"UNUSED": 1}, launch=lambda config, shape: (1, 32)))
    return CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).parameter_types(
        kernel, kernel.variant("cuda"), {"UNUSED": 1}, "float32", entry)


@needs_nvcc
def test_a_pointer_to_a_cuda_vector_type_is_checked_against_its_elements_type(tmp_path):
    """A ``uchar4 *`` took an array of any dtype: a float32 image read as bytes, every config wrong."""
    types = entry_types(tmp_path, "vec", "acc", (
        '#include <cuda_fp16.h>\nextern "C" __global__ void vec(const uchar4 *img, double4 *acc, float2 *z, '
        'const __half2 *h, char3 *c) { acc[0].x = img[0].x + z[0].y + __low2float(h[0]) + c[0].z; }\n'))
    fits = {"img": np.zeros((8, 4), np.uint8), "acc": np.zeros((8, 4)), "z": np.zeros(8, np.complex64),
            "h": np.zeros((8, 2), np.float16), "c": np.zeros((8, 3), np.int8)}
    assert args_problem(fits, types) is None
    assert args_problem({**fits, "img": np.zeros((8, 4), np.float32), "acc": np.zeros((8, 4), np.float32),
                         "h": np.zeros((8, 2), np.float32), "c": np.zeros((8, 3), np.uint8)}, types) == (
        "argument 'img' (float32 array) where the kernel's 1st parameter (uchar4 *img) points to uchar4, of 1-byte "
        "unsigned char: give an array of np.uint8; argument 'acc' (float32 array) where the kernel's 2nd parameter "
        "(double4 *acc) points to double4, of 8-byte double: give an array of np.float64; argument 'h' (float32 "
        "array) where the kernel's 4th parameter (__half2 *h) points to __half2, of 2-byte __half: give an array of "
        "np.float16; argument 'c' (uint8 array) where the kernel's 5th parameter (char3 *c) points to char3, of "
        "signed char, signed: give an array of np.int8")
    assert args_problem({**fits, "z": np.zeros(8, np.int32)}, types).endswith(
        "(float2 *z) points to float2, of float, a float: give an array of np.float32")


@needs_nvcc
def test_an_arch_specific_variant_is_built_apart_for_sm90a_and_is_a_declaration_error_before_sm90(tmp_path):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float *y) { asm volatile("setmaxnreg.inc.sync.'
                                   'aligned.u32 240;"); y[threadIdx.x] = B; }\n')
    cache = BuildCache(tmp_path / "cache")

    def declared(specific: bool) -> Kernel:
        return Kernel("k", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(32,)])]),
                      args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                      cuda=Variant(source=str(tmp_path / "k.cu"), entry="k", space=Space({"B": [1]}),
                                   heuristic=lambda shape: {"B": 1}, launch=lambda config, shape: (1, 32),
                                   arch_specific=specific))

    specific, plain = declared(True), declared(False)
    built = CudaCompiler("sm_90", cache).build(specific, specific.variant("cuda"), {"B": 1}, "float32")
    assert "k" in cubin_kernels(built.handle)
    with pytest.raises(CompileError, match="not supported on .target 'sm_90'(.|\n)*declare the variant arch_specific"):
        CudaCompiler("sm_90", cache).build(plain, plain.variant("cuda"), {"B": 1}, "float32")
    with pytest.raises(KernelError, match="kernel 'k': the cuda variant is arch_specific, and sm_80 has no "
                                          "architecture-specific target sm_80a"):
        CudaCompiler("sm_80", cache).build(specific, specific.variant("cuda"), {"B": 1}, "float32")
    assert specific.declaration(specific.variant("cuda"), "float32")["flags"] == "(arch-specific)"


def test_device_inputs_are_copied_per_set_of_host_arguments_not_per_shape(tmp_path):
    """Device inputs were kept by kernel, shape and dtypes: an args builder taking the config (a
    split-K's workspace of ``splits * M``, declared inplace) got the first config's device copies
    (a 256 B workspace restored over 2048 B), and a shape built again by an unseeded args builder
    ran the kernel on the old values, the reference on the new. The configs of a shape measured
    on its one set of arguments still share one copy; a float16 task's index array is its own."""
    uploads = []

    class Copied:  # a device copy, as PyCUDA's driver gives one
        def __init__(self, host):
            self.host = host.copy()
            uploads.append(self)

        def free(self):
            pass

    def args(shape, dtype, rng, config):
        m, k = shape
        return {"ids": np.arange(m, dtype=np.int32), "a": rng.random((m, k)).astype(dtype),
                "out": np.empty(m, dtype), "work": np.zeros(config["splits"] * m, dtype), "M": np.int32(m)}

    (tmp_path / "k.cu").write_text("__global__ void splitk() {}\n")
    kernel = Kernel("splitk_inputs", buckets=Buckets(["M", "K"], [Bucket("all", M=(1, None), K=(1, None),
                                                                         shapes=[(64, 32)])]),
                    args=args, outputs=["out"], inplace=["work"], reference=lambda a: a.sum(axis=1),
                    cuda=Variant(source=str(tmp_path / "k.cu"), entry="splitk", space=Space({"splits": [1, 8]}),
                                 heuristic=lambda shape: {"splits": 1}, launch=lambda config, shape: (1, 32)))
    backend = object.__new__(CudaBackend)  # the host side alone: no GPU, no context
    backend._inputs, backend.drv = OrderedDict(), SimpleNamespace(to_device=Copied)
    held = kernel.build_args((64, 32), "float32", {"splits": 1})
    for given in (held, held, kernel.build_args((64, 32), "float32", {"splits": 8}), held):
        on_device = backend._device_inputs(kernel, given).bufs
        assert on_device["work@pristine"].host.nbytes == given["work"].nbytes
    assert len(uploads) == 2 * 3  # ids, a and work's pristine copy: for the held arguments, and for splits=8's
    again = {**held, "a": held["a"] + 1}  # the shape built again, other values
    np.testing.assert_array_equal(backend._device_inputs(kernel, again).bufs["a"].host, again["a"])
    float16 = kernel.build_args((64, 32), "float16", {"splits": 1})
    assert backend._device_inputs(kernel, float16).bufs["a"].host.dtype == np.float16


class StubDriver:
    """PyCUDA's driver as the CUDA backend's host side uses it, on no device: each allocation
    (``mem_alloc``, ``to_device``) ``live`` until freed (then in ``freed``, in order);
    ``uploads``: how many host arrays were copied to the device."""

    def __init__(self):
        self.live, self.freed, self.uploads = set(), [], 0

    def mem_alloc(self, nbytes: int) -> "StubAllocation":
        return StubAllocation(self)

    def to_device(self, host: np.ndarray) -> "StubAllocation":
        self.uploads += 1
        return StubAllocation(self)


class StubAllocation:
    """A device allocation of a :class:`StubDriver`: its pointer as ``int()``."""

    def __init__(self, driver: StubDriver):
        self.driver, self.ptr = driver, 0x1000 * (len(driver.live) + len(driver.freed) + 1)
        driver.live.add(self.ptr)

    def __int__(self) -> int:
        return self.ptr

    def free(self) -> None:
        self.driver.live.discard(self.ptr)
        self.driver.freed.append(self.ptr)


def stub_backend(driver: StubDriver) -> CudaBackend:
    """The CUDA backend's host side on ``driver``: no GPU, no context; each load a runner on the
    device inputs the backend keeps for its arguments, as :meth:`CudaBackend.load` makes it."""
    backend = object.__new__(CudaBackend)
    backend._inputs, backend.drv = OrderedDict(), driver
    backend.build = lambda kernel, variant, config, dtype: Build(Path(f"{kernel.name}.cubin"), 0.0, True, dtype)
    backend.load = lambda build, kernel, variant, config, shape, args, placement="device": CudaRunner(
        backend, None, None, kernel, args, backend._device_inputs(kernel, args))
    return backend


def splitk_kernel(name: str, tmp_path: Path, per_config: bool = True) -> Kernel:
    """A kernel of ``a`` into ``out`` on (64,), with a workspace ``work`` in place, over splits
    1, 2 and 4; ``per_config``: its args builder takes the config (a workspace of ``splits * M``),
    so that each config has a set of arguments of its own."""
    def args(shape, dtype, rng, config):
        return {"a": rng.random(shape).astype(dtype), "out": np.empty(shape, dtype),
                "work": np.zeros(config["splits"] * shape[0], dtype)}

    (tmp_path / "k.cu").write_text("__global__ void splitk() {}\n")
    return Kernel(name, buckets=Buckets(["M"], [Bucket("all", M=(1, None), shapes=[(64,)])]),
                  args=args if per_config else lambda shape, dtype, rng: args(shape, dtype, rng, {"splits": 4}),
                  outputs=["out"], inplace=["work"], reference=lambda a: a,
                  cuda=Variant(source=str(tmp_path / "k.cu"), entry="splitk", space=Space({"splits": [1, 2, 4]}),
                               heuristic=lambda shape: {"splits": 1}, launch=lambda config, shape: (1, 32)))


def test_device_inputs_a_runner_uses_are_freed_only_once_it_closes(tmp_path):
    """A comparison loads every arm before it times one; where the args builder takes the config,
    each arm's inputs are a set of their own, and of the two sets kept, the third arm's load freed
    the first's while its runner still called on them (a final round's five arms, a gate's three).
    In use, none is freed; closed, the sets beyond the two latest are; and a set the worker has
    dropped is held by no copy of it here."""
    kernel = splitk_kernel("splitk_arms", tmp_path)
    driver = StubDriver()
    backend = stub_backend(driver)
    given = {s: kernel.build_args((64,), "float32", {"splits": s}) for s in (1, 2, 4)}
    runners = {s: CudaRunner(backend, None, None, kernel, a, backend._device_inputs(kernel, a))
               for s, a in given.items()}
    inputs = {s: [int(b) for b in held.bufs.values()] for s, held in zip(given, backend._inputs.values())}
    assert not driver.freed and len(backend._inputs) == 3  # all three arms' inputs in use
    backend._drop(next(iter(backend._inputs)))  # as where another set came at its arguments' address
    assert not driver.freed
    runners[1].close()
    assert set(inputs[1]) <= set(driver.freed)  # by the last runner using them
    for closed in runners.values():
        closed.close()
    backend._device_inputs(kernel, kernel.build_args((64,), "float32", {"splits": 8}))
    # with splits=8's, the two latest
    assert set(inputs[1] + inputs[2]) <= set(driver.freed) and set(inputs[4]) <= driver.live
    host = weakref.ref(given[4]["a"])
    del given, runners, closed
    gc.collect()
    assert host() is None  # the worker's trim frees what it dropped


def _measured_by_stubs(monkeypatch) -> None:
    """The worker's jobs measure nothing (the stub driver runs no kernel): every call verifies,
    and times 1 ms."""
    ok = SimpleNamespace(status="ok", error=None)
    monkeypatch.setattr("tunebench.workers.verify", lambda *args: ok)
    monkeypatch.setattr("tunebench.workers.verify_after", lambda *args: ok)
    monkeypatch.setattr("tunebench.workers.warm_up", lambda runner, settings: (1, 1.0))
    monkeypatch.setattr("tunebench.workers.interleave", lambda runners, rounds, primed: {k: [1.0] for k in runners})
    monkeypatch.setattr("tunebench.workers.measure_placements", lambda runners, *args: Measurement(
        "ok", [1.0], {p: [1.0] for p in runners}))


#: A worker's job as the tests run it: a parent that answers "load", runners unwatched.
PARENT = SimpleNamespace(send=lambda message: None, recv=lambda: "load")


def unwatched(build, load, arm=0, placement=-1):
    """A job's load, as the worker's watch makes it, without the clock and the process state."""
    return load()


def test_a_comparisons_device_inputs_are_freed_as_it_ends(tmp_path, monkeypatch):
    """A comparison's arms (each with a set of arguments of its own, where the args builder takes
    the config) left their input copies on the device until a later load freed them: the gate's
    worker sat idle holding them beside the user's other GPU work, or the tune's next task's first
    trial (a larger shape) ran short of memory beside them. No later job uses them: every
    comparison runs in a worker of its own (see tunebench.compare.compare)."""
    from tunebench.workers import CompareJob, _compare
    _measured_by_stubs(monkeypatch)
    splitk_kernel("splitk_compared", tmp_path)
    driver = StubDriver()
    arms = tuple((f"splits {s}", {"splits": s}, None) for s in (1, 2, 4))
    job = CompareJob("splitk_compared", (64,), "float32", arms, 5, MeasureSettings())
    result = _compare(stub_backend(driver), job, (OrderedDict(), tmp_path / "kept"), PARENT, unwatched)
    assert result["status"] == "ok", result
    assert driver.uploads == 3 * 2 and not driver.live  # each arm's a and work's pristine copy: none left


def test_a_tunes_configs_on_one_shape_upload_its_inputs_once(tmp_path, monkeypatch):
    """Why a worker keeps device inputs between jobs: the trials of a search, config after config
    on one shape's arguments, share one copy (a large GPU shape's upload takes as long as its
    trial's timed calls)."""
    from tunebench.workers import TrialJob, _trial
    _measured_by_stubs(monkeypatch)
    splitk_kernel("splitk_tuned", tmp_path, per_config=False)
    driver, prepared = StubDriver(), (OrderedDict(), tmp_path / "kept")
    backend = stub_backend(driver)
    for splits in (1, 2, 4):
        job = TrialJob("splitk_tuned", {"splits": splits}, (64,), "float32", MeasureSettings())
        assert _trial(backend, job, prepared, PARENT, unwatched)["status"] == "ok"
    assert driver.uploads == 2  # a and work's pristine copy, once


def test_an_input_a_call_changed_is_named_with_how_much_of_it_changed():
    given = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert input_damage("x", given, given.copy()) is None
    now = given.copy()
    now[1, 2] = -1
    assert input_damage("x", given, now).startswith("wrote into input 'x' (")
    assert "of 24 bytes changed), which the kernel does not declare inplace=" in input_damage("x", given, now)
    nan = np.full(3, np.nan, np.float32)
    assert input_damage("x", nan, nan.copy()) is None  # compared by bits: a NaN input left alone is unchanged


@pytest.mark.parametrize("size, dtype", [(1001, np.float32), (1001, np.int8), (5, np.float16)])
def test_inputs_are_compared_by_words_chunk_by_chunk_down_to_their_last_byte(size, dtype):
    given = np.arange(size).astype(dtype)
    assert same_bytes(given, given.copy(), chunk=7)
    for at in (0, size // 2, size - 1):
        now = given.copy()
        now.reshape(-1).view(np.uint8)[at * given.itemsize + given.itemsize - 1] ^= 1
        assert not same_bytes(given, now, chunk=7)
        assert input_damage("x", given, now).startswith("wrote into input 'x' (1 of ")


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float16", "complex64", "f4,f4,f4"])
def test_every_dtype_reaches_the_devices_copies_as_a_buffer_of_its_bits_in_the_same_memory(dtype):
    """PyCUDA's copies read and fill host arrays by the buffer protocol, which refuses ml_dtypes'
    floats: every bfloat16 candidate crashed on an H200 before. A record (a float3) it takes as
    it is."""
    host = np.arange(-3, 3, dtype=np.float32).astype(np.dtype(dtype) if "," in dtype else numpy_dtype(dtype))
    host = host.reshape(2, 3)
    bits = transferable(host)
    assert memoryview(bits).nbytes == host.nbytes and bytes(memoryview(bits)) == host.tobytes()
    size = host.itemsize
    memoryview(bits).cast("B")[:size] = host[1, 2:].tobytes()  # as a device-to-host copy fills it
    assert host[0, 0] == host[1, 2]


#: One fault per value of ``fault``; n is odd, so a 2-byte output ends in half a 32-bit word.
FAULTY_CU = """\
#if fault == 2
#error "fault 2 does not compile"
#endif
__device__ volatile int spin = 1;  /* never cleared: nvcc removed a local one's loop */

extern "C" __global__ void faulty(const TB_DTYPE *x, TB_DTYPE *y, int n)
{
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
                 space=Space({"fault": range(8)}), dtypes=DTYPES,
                 # fault 6: a block of 2048 threads, more than any GPU launches
                 launch=lambda config, shape: (((shape[0] + 255) // 256,), (2048 if config["fault"] == 6 else 256,))),
)
"""

FAULTY_DTYPES = ("float32", "float16", "bfloat16")
EXPECTED = {0: "ok", 1: "wrong_result", 2: "compile_error", 3: "out_of_bounds", 4: "wrong_result",
            5: "crashed", 6: "pruned_resources", 7: "timeout"}


@needs_gpu
def test_every_cuda_fault_is_recorded_with_its_status_and_the_good_candidate_wins(pytester):
    pytester.path.joinpath("faulty.cu").write_text(FAULTY_CU)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE).replace("DTYPES",
                                                                                              repr(FAULTY_DTYPES)))
    tune = [a if a != "cpu" else "cuda" for a in TUNE]
    result = pytester.runpytest("test_faulty.py", *tune, "--tune-timeout", "2", "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("cuda-*.json")
    trials = TinyDB(path).table("trials").all()
    found = {(t["dtype"], t["config"]["fault"]): t for t in trials}
    assert set(found) == {(d, f) for d in FAULTY_DTYPES for f in EXPECTED}
    for (dtype, fault), trial in found.items():
        assert trial["status"] in ({"ok", "early_stopped"} if fault == 0 else {EXPECTED[fault]}), (dtype, fault, trial)
    # fault 4 runs after fault 0 left right answers in memory: only poisoning catches it
    assert all("(100000,)" in found[(d, 4)]["error"] for d in FAULTY_DTYPES)
    assert all("past the end of output 'y'" in found[(d, 3)]["error"] for d in FAULTY_DTYPES)
    assert all("2048 threads" in found[(d, 6)]["error"] for d in FAULTY_DTYPES)
    assert result.ret == 1  # the faulty candidates fail their items


@needs_gpu
def test_dynamic_shared_memory_beyond_48_kib_launches_and_beyond_the_device_is_pruned(pytester):
    """200 KiB asks the function for more than the default 48 KiB (an H100 or H200 allows 227);
    300 KiB is more than any GPU allows a block, found before a timed run."""
    pytester.path.joinpath("stage.cu").write_text(SHARED_CU)
    pytester.path.joinpath("test_stage.py").write_text(SHARED_SUITE.replace("[0, 1, 200]", "[1, 64, 200, 300]"))
    tune = [a if a != "cpu" else "cuda" for a in TUNE]
    pytester.runpytest("test_stage.py", *tune, "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("cuda-*.json")
    found = {t["config"]["kib"]: t for t in TinyDB(path).table("trials").all()}
    assert {kib: t["status"] in ("ok", "early_stopped") for kib, t in found.items()} == {
        1: True, 64: True, 200: True, 300: False}
    assert found[300]["status"] == "pruned_resources" and "307200 bytes (300 KiB) of shared memory" in found[300]["error"]


@pytest.mark.parametrize("tune", [(), TUNE])
def test_a_cuda_variants_declaration_error_fails_collection_on_a_machine_without_a_gpu(pytester, tune):
    """Found where the suite is written, not first on the GPU machine it was written for."""
    pytester.path.joinpath("stage.cu").write_text(SHARED_CU)
    pytester.path.joinpath("test_stage.py").write_text(SHARED_SUITE.replace(
        'Space({"kib": [0, 1, 200]})', 'Space({"kib": [0, 1, 200]}, constraints=[lambda kb: kb < 100])'))
    result = pytester.runpytest("test_stage.py", "--collect-only", "-p", "no:cacheprovider", *tune)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "names unknown param 'kb' (did you mean 'kib'?)" in result.stdout.str()


#: writes=1 writes into its input x, which it does not declare in place; n's type is a param.
WRITER_CU = """\
extern "C" __global__ void writer(TB_DTYPE *x, TB_DTYPE *y, N_TYPE n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i];
#if writes
    if (i < n) x[i] = -1;
#endif
}

namespace ops {
template <int B> __global__ void twice(const float *x, float *y, int n)
{
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i];
}
}
template __global__ void ops::twice<block>(const float *, float *, int);
"""

WRITER_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def kernel(name, n_type, entry="writer"):
    return Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100001,)])]),
                  args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                  "y": np.empty(shape[0], np.float32), "n": np.int32(shape[0])},
                  reference=lambda x, n: 2.0 * x.astype(np.float64), outputs=["y"],
                  cuda=Variant(source="writer.cu", entry=entry, heuristic=lambda shape: {"writes": 0, "block": 256},
                               space=Space({"writes": [0, 1], "block": [128, 256]}), flags=(f"-DN_TYPE={n_type}",),
                               launch=lambda config, shape: ((shape[0] + 255) // 256 * 2, config["block"])))

writer = kernel("writer", "int")
misread = kernel("misread", "float")
templated = kernel("templated", "int", entry="twice")
"""


@needs_gpu
def test_a_write_into_an_input_fails_its_writer_alone_and_an_argument_of_another_c_type_fails_the_task(pytester):
    """Device memory cannot be made read-only: the writer is found by comparing its inputs after
    the verifying call, and the inputs are copied again for the candidates after it. A float32
    given for an int fits the cubin's 4 bytes; the -G build's C types find it before a launch.
    A template instantiated with a param launches under each config's mangled name."""
    pytester.path.joinpath("writer.cu").write_text(WRITER_CU)
    pytester.path.joinpath("test_writer.py").write_text(WRITER_SUITE)
    tune = [a if a != "cpu" else "cuda" for a in TUNE]
    result = pytester.runpytest("test_writer.py", *tune, "--tune-strategy", "brute_force", "-k", "writer")
    (path,) = (pytester.path / "records").glob("cuda-*.json")
    found = {(t["config"]["writes"], t["config"]["block"]): t for t in TinyDB(path).table("trials").all()
             if t["kernel"] == "writer"}  # -k writer selects the module's every kernel
    assert {k: t["status"] for k, t in found.items() if k[0] == 1} == {(1, 128): "out_of_bounds", (1, 256): "out_of_bounds"}
    # -1.0 over random values in [0, 1): every top byte changes, a lower one may happen to match
    assert all(re.search(r"wrote into input 'x' \(\d+ of 400004 bytes changed\)", t["error"])
               and int(re.search(r"\((\d+) of", t["error"]).group(1)) > 100001 for k, t in found.items() if k[0])
    assert all(t["status"] in ("ok", "early_stopped") for k, t in found.items() if k[0] == 0), found
    result = pytester.runpytest("test_writer.py", *tune, "--tune-strategy", "brute_force", "-k", "misread")
    result.stdout.fnmatch_lines(["*argument 'n' (int32 scalar) where the kernel's 3rd parameter (float n) takes a "
                                 "4-byte float: give it np.float32*"])
    assert not [t for t in TinyDB(path).table("trials").all() if t["kernel"] == "misread"]
    result = pytester.runpytest("test_writer.py", *tune, "--tune-strategy", "brute_force", "-k", "templated")
    templated = [t for t in TinyDB(path).table("trials").all() if t["kernel"] == "templated"]
    assert len(templated) == 4 and all(t["status"] in ("ok", "early_stopped") for t in templated), templated


#: A block reduction written with CUB, whose templates name their parameters BLOCK_THREADS.
CUB_CU = """\
#include <cub/cub.cuh>
MARKER
extern "C" __global__ void block_sum(const float *x, float *out, int n)
{
    typedef cub::BlockReduce<float, BLOCK_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage scratch;
    int i = blockIdx.x * BLOCK_THREADS + threadIdx.x;
    float total = Reduce(scratch).Sum(i < n ? x[i] : 0.0f);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""


@needs_nvcc
@pytest.mark.parametrize("marker, compiles", [("// tunebench: params", True), ("", False), ("before", False)])
def test_a_cub_kernel_tunes_a_param_named_as_cubs_own_after_its_params_line(tmp_path, marker, compiles, monkeypatch):
    """Without the params line, or with it above CUB's include, the error names the param and
    the line of CUB's that reads it; nvcc's temporary files go with the build (it left an empty
    ``*.lgenfe.bc`` in /tmp at each such error)."""
    (outside := tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(outside))
    template = "// tunebench: params\n" + CUB_CU.replace("MARKER", "") if marker == "before" else \
        CUB_CU.replace("MARKER", marker)
    (tmp_path / "block_sum.cu").write_text(template)
    kernel = Kernel(
        "block_sum", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(4096,)])]),
        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["out"],
        cuda=Variant(source=str(tmp_path / "block_sum.cu"), entry="block_sum",
                     space=Space({"BLOCK_THREADS": [128, 256]}), heuristic=lambda shape: {"BLOCK_THREADS": 256},
                     launch=lambda config, shape: ((shape[0] + config["BLOCK_THREADS"] - 1) // config["BLOCK_THREADS"],
                                                   config["BLOCK_THREADS"])))
    compiler = CudaCompiler("sm_90", BuildCache(tmp_path / "cache"))
    if compiles:
        assert compiler.build(kernel, kernel.variant("cuda"), {"BLOCK_THREADS": 128}, "float32").handle.exists()
    else:
        with pytest.raises(CompileError, match=r"cub(.|\n)*\(tunebench: param 'BLOCK_THREADS' is #defined ahead of "
                                               r"\w+\.cuh, whose line \d+ reads 'BLOCK_THREADS' as a name: rename it\)\n"
                                               r"\(tunebench: the error lies outside the template's own lines.*"
                                               + (r"\(this template's comes before one\)" if marker else r"there\)$")):
            compiler.build(kernel, kernel.variant("cuda"), {"BLOCK_THREADS": 128}, "float32")
    assert not list(outside.iterdir())



#: A build of CUB_CU in a process of its own, in the cache and TMPDIR the test gives.
KILLED_BUILD = """\
import sys
from tunebench import Bucket, Buckets, Kernel, Space, Variant
from tunebench.backends.cache import BuildCache
from tunebench.backends.cuda import CudaCompiler

kernel = Kernel("block_sum", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(4096,)])]),
                args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["out"],
                cuda=Variant(source=sys.argv[1], entry="block_sum", space=Space({"BLOCK_THREADS": [128, 256]}),
                             heuristic=lambda shape: {"BLOCK_THREADS": 256}, launch=lambda config, shape: (1, 128)))
CudaCompiler("sm_90", BuildCache(BuildCache().root)).build(kernel, kernel.variant("cuda"), {"BLOCK_THREADS": 128},
                                                           "float32")
"""


@needs_nvcc
def test_nvccs_files_of_a_build_killed_mid_compile_go_with_the_next_build(tmp_path, monkeypatch):
    """A tune killed while nvcc ran (a CI job's timeout kills its whole process group) left nvcc's
    temporary folder and the one keeping its PTX in the compile cache for good, nvcc's files
    (a ``*.lgenfe.bc`` among them) in them: the next build removes them."""
    (outside := tmp_path / "tmp").mkdir()
    (tmp_path / "block_sum.cu").write_text(CUB_CU.replace("MARKER", "// tunebench: params"))
    env = {**os.environ, "TMPDIR": str(outside), "TUNEBENCH_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, str(tmp_path / "block_sum.cu")], env=env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "cache").glob(".tmp-*/*lgenfe.bc")) and time.monotonic() < deadline:
            assert proc.poll() is None, "the build ended before nvcc's files were seen"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list((tmp_path / "cache").glob(".tmp-*/*")) and list((tmp_path / "cache").glob("nvcc-keep-*"))
    monkeypatch.setenv("TMPDIR", str(outside))
    kernel = Kernel(
        "block_sum", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(4096,)])]),
        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["out"],
        cuda=Variant(source=str(tmp_path / "block_sum.cu"), entry="block_sum",
                     space=Space({"BLOCK_THREADS": [128, 256]}), heuristic=lambda shape: {"BLOCK_THREADS": 256},
                     launch=lambda config, shape: (1, 128)))
    compiler = CudaCompiler("sm_90", BuildCache(tmp_path / "cache"))
    assert compiler.build(kernel, kernel.variant("cuda"), {"BLOCK_THREADS": 256}, "float32").handle.exists()
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()] == []
    assert not list(outside.iterdir())

@needs_nvcc
def test_tb_unroll_unrolls_by_a_param_where_nvccs_pragma_unroll_does_not_expand_it(tmp_path):
    body = ("extern \"C\" __global__ void total(const float *x, float *y, int n)\n{\n    float s = 0;\n"
            "    UNROLL_LINE\n    for (int i = 0; i < n; ++i) s += x[i];\n    y[0] = s;\n}\n")
    compiler = CudaCompiler("sm_90", BuildCache(tmp_path / "cache"))
    for line, compiles in (("TB_UNROLL(UNROLL)", True), ("#pragma unroll UNROLL", False)):
        (tmp_path / "total.cu").write_text(body.replace("UNROLL_LINE", line))
        kernel = Kernel("total", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                        cuda=Variant(source=str(tmp_path / "total.cu"), entry="total", space=Space({"UNROLL": [4]}),
                                     heuristic=lambda shape: {"UNROLL": 4}, launch=lambda config, shape: (1, 1)))
        if compiles:
            assert compiler.build(kernel, kernel.variant("cuda"), {"UNROLL": 4}, "float32").handle.exists()
        else:
            with pytest.raises(CompileError, match='identifier "UNROLL" is undefined(.|\n)*\\(tunebench: line 4: '
                                                   "#pragma unroll does not expand param 'UNROLL': write "
                                                   "TB_UNROLL\\(UNROLL\\) before the loop instead\\)"):
                compiler.build(kernel, kernel.variant("cuda"), {"UNROLL": 4}, "float32")


@needs_nvcc
def test_a_kernel_tuner_templates_block_size_y_or_grid_size_x_left_undefined_says_what_to_write(tmp_path):
    """Kernel Tuner #defines block_size_x, _y, _z and grid_size_x, _y, _z in every build; a ported
    template tuning block_size_x alone failed with nvcc's 'identifier "block_size_y" is undefined'."""
    (tmp_path / "scale2d.cu").write_text(
        "extern \"C\" __global__ void scale2d(float *y, int w, int h)\n{\n"
        "    int i = blockIdx.x * block_size_x + threadIdx.x, j = blockIdx.y * block_size_y + threadIdx.y;\n"
        "    if (i < w && j < h) y[j * w + i] = grid_size_x;\n}\n")
    kernel = Kernel("scale2d", buckets=Buckets(["W", "H"], [Bucket("all", W=(1, None), H=(1, None), shapes=[(8, 8)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                    cuda=Variant(source=str(tmp_path / "scale2d.cu"), entry="scale2d",
                                 space=Space({"block_size_x": [32]}), heuristic=lambda shape: {"block_size_x": 32},
                                 launch=lambda config, shape: (1, 32)))
    with pytest.raises(CompileError) as refused:
        CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).build(kernel, kernel.variant("cuda"),
                                                                   {"block_size_x": 32}, "float32")
    said = str(refused.value)
    assert ("(tunebench: 'block_size_y' is #defined by Kernel Tuner in every build (1 where not tuned), by tunebench "
            "only as a param: add block_size_y: [1] to the space, or a default to the template (#ifndef block_size_y "
            "/ #define block_size_y 1 / #endif))") in said
    assert ("(tunebench: 'grid_size_x' is #defined by Kernel Tuner in every build (the launch's grid), not by "
            "tunebench: read gridDim.x instead)") in said
    assert "'block_size_x' is #defined by Kernel Tuner" not in said  # a param: #defined here too


@needs_nvcc
@pytest.mark.parametrize("param, line", [("blockDim", "int i = blockIdx.x * blockDim.x + threadIdx.x;"),
                                         ("max", "y[0] = max(x[0], 1.0f);")])
def test_a_param_named_as_a_cuda_builtin_or_function_is_named_in_the_compile_error(tmp_path, param, line):
    """nvcc said only "expression must have class type" or "apparent call must have (pointer-to-)
    function type", naming no param."""
    (tmp_path / "k.cu").write_text(f'extern "C" __global__ void k(const float *x, float *y)\n{{\n    {line}\n'
                                   f'    y[1] = x[1];\n}}\n')
    kernel = Kernel("builtin_named", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
                    cuda=Variant(source=str(tmp_path / "k.cu"), entry="k", space=Space({param: [4]}),
                                 heuristic=lambda shape: {param: 4}, launch=lambda config, shape: (1, 1)))
    with pytest.raises(CompileError, match=rf"\(tunebench: param '{param}' is #defined ahead of line 3, which reads "
                                           rf"'{param}' as a name: rename one\)"):
        CudaCompiler("sm_90", BuildCache(tmp_path / "cache")).build(kernel, kernel.variant("cuda"), {param: 4},
                                                                    "float32")


ALIAS_CU = """\
extern "C" __global__ void scale(const float *x, float *y, float *s, float *t, int n)
{   /* an in-place call has its own path, as a library's often has; the other is planted wrong */
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = x == y ? 2 * y[i] : -1; s[i] = 0; t[i] = 0; }
}
"""


@needs_gpu
@pytest.mark.parametrize("given", [
    {"x": "a", "y": "a", "s": "b", "t": "c"},  # a read-only input as an inout output
    {"x": "a", "y": "a", "s": "b", "t": "b"},  # and two scratch inputs as one
])
def test_one_array_given_for_two_cuda_arguments_is_one_device_buffer(tmp_path, given):
    from tunebench.measure import MeasureSettings
    from tunebench.workers import TrialJob, Workers

    (tmp_path / "scale.cu").write_text(ALIAS_CU)

    def args(shape, dtype, rng):
        arrays = {k: rng.random(shape[0], dtype=np.float32) for k in "abc"}
        return {**{name: arrays[k] for name, k in given.items()}, "n": np.int32(shape[0])}

    Kernel("scale_aliased_cuda", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]), args=args,
           reference=lambda x, y, s, t, n: 2.0 * x, outputs=["y"], inout=["y"], inplace=["s", "t"],
           cuda=Variant(source=str(tmp_path / "scale.cu"), entry="scale", space=Space({"step": [1]}),
                        heuristic=lambda shape: {"step": 1},
                        launch=lambda config, shape: (((shape[0] + 127) // 128,), (128,))))
    workers = Workers("cuda")
    try:
        result = workers.trial(TrialJob("scale_aliased_cuda", {"step": 1}, (1000,), "float32",
                                        MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert result["status"] == "ok", result


SCRATCH_CU = """\
extern "C" __global__ void use(const float *x, float *y, float *s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { s[i] = x[i]; y[i] = 2.0f * s[i]; }
#if past
    if (i == 0) s[n] = 1.0f;  /* one float past the in-place input */
#endif
}
"""


@needs_gpu
def test_a_write_past_an_in_place_input_is_out_of_bounds_and_spoils_no_later_candidate(tmp_path):
    """An in-place input had no guard: the write passed, and landed in the pristine copy beside it,
    from which every later candidate on the shape started."""
    from tunebench.measure import MeasureSettings
    from tunebench.workers import TrialJob, Workers

    (tmp_path / "use.cu").write_text(SCRATCH_CU)
    Kernel("scratch_guarded_cuda", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1 << 19,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                           "y": np.empty(shape[0], np.float32),
                                           "s": np.zeros(shape[0], np.float32), "n": np.int32(shape[0])},
           reference=lambda x, s, n: 2.0 * x, outputs=["y"], inplace=["s"],
           cuda=Variant(source=str(tmp_path / "use.cu"), entry="use", space=Space({"past": [0, 1]}),
                        heuristic=lambda shape: {"past": 0},
                        launch=lambda config, shape: (((shape[0] + 255) // 256,), (256,))))
    workers = Workers("cuda")
    try:
        statuses = [workers.trial(TrialJob("scratch_guarded_cuda", {"past": past}, (1 << 19,), "float32",
                                           MeasureSettings(repeats=3)))["status"] for past in (1, 0)]
    finally:
        workers.close()
    assert statuses == ["out_of_bounds", "ok"]


def test_an_entry_named_without_an_inline_or_anonymous_namespace_between_is_found():
    """CUTLASS's and CUB's versioned namespaces (ops::v2::scale) and anonymous ones: the entry as
    the source names it, ops::scale, was "no __global__ 'ops::scale'"."""
    kernels = {"_ZN3ops2v25scaleEPf": None, "_ZN3ops12_GLOBAL__N_15shiftEPf": None}
    assert entry_symbol("ops::scale", kernels, "inl.cu") == "_ZN3ops2v25scaleEPf"
    assert entry_symbol("ops::shift", kernels, "inl.cu") == "_ZN3ops12_GLOBAL__N_15shiftEPf"
    with pytest.raises(KernelError, match="inl.cu has no __global__ 'other::scale'"):
        entry_symbol("other::scale", kernels, "inl.cu")


def test_a_kernel_tuner_template_entry_says_to_instantiate_it_or_to_drop_its_template_arguments():
    """Kernel Tuner instantiates the template its entry names (``vector_add<float>``); nvcc builds
    only what the source instantiates, and the error said "its kernels: none" and no more."""
    with pytest.raises(KernelError, match=r"its kernels: none; where add is a __global__ template, it is built only "
                                          r"where the source instantiates it, as `template __global__ void "
                                          r"add<TB_DTYPE>\(\.\.\.\);`"):
        entry_symbol("add<float>", {}, "add.cu")
    instantiated = {"_ZN3ops3addIfEEvPT_S2_i": None}  # ops::add<float>
    for entry in ("add<float>", "ops::add<float>"):
        with pytest.raises(KernelError, match=rf"has no __global__ '{re.escape(entry)}' .*its kernels: ops::add; name "
                                              rf"it without its template arguments, entry='{entry.split('<')[0]}'"):
            entry_symbol(entry, instantiated, "add.cu")
    with pytest.raises(KernelError) as refused:  # a name of no kernel there: no hint
        entry_symbol("sub<float>", instantiated, "add.cu")
    assert str(refused.value).endswith("its kernels: ops::add")


#: A kernel whose code only tests whether bool param ``fast`` is defined, always so.
IFDEF_CU = """\
#include "twice.cuh"
extern "C" __global__ void k(const float *x, float *y, int n)
{
#ifdef fast
    y[0] = TWICE(x[0]);
#else
    y[0] = x[0] + x[0];
#endif
}
"""


@needs_nvcc
@pytest.mark.parametrize("template, header, grid, said", [
    (IFDEF_CU, "#define TWICE(v) (2 * (v))\n", lambda c, s: -(-s[0] // c["block"]),
     "k.cu line 4 tests whether bool param 'fast' is defined, which it always is (False is #defined as 0): every "
     "config builds the same code; test its value, #if fast"),
    (IFDEF_CU.replace("#ifdef fast", "#if fast"), "#define TWICE(v) (2 * (v))\n", lambda c, s: -(-s[0] // c["block"]),
     None),
    (IFDEF_CU, "#define TWICE(v) (2 * (v))\n", lambda c, s: -(-s[0] // c["block"]) * (2 if c["fast"] else 1),
     None),  # the launch tells its values apart
    (IFDEF_CU, "#if fast\n#define TWICE(v) (2 * (v))\n#else\n#define TWICE(v) ((v) * 2)\n#endif\n",
     lambda c, s: -(-s[0] // c["block"]), None),  # a header of an -I folder reads its value: nvcc -E sees it
])
def test_a_cuda_template_that_only_tests_whether_a_bool_param_is_defined_is_a_declaration_error(
        tmp_path, template, header, grid, said):
    """gcc's preprocessor confirmed it for the CPU target alone: a CUDA kernel with the mistake
    built one code for every config, and the tune measured noise."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "twice.cuh").write_text(header)
    (tmp_path / "k.cu").write_text(template)
    variant = Variant(source=str(tmp_path / "k.cu"), entry="k", flags=(f"-I{tmp_path / 'inc'}",),
                      space=Space({"fast": [False, True], "block": [64, 128]}),
                      heuristic=lambda shape: {"fast": False, "block": 128},
                      launch=lambda config, shape: (grid(config, shape), config["block"]))
    kernel = Kernel("defined", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"], cuda=variant)
    if said is None:
        kernel.check(variant, "cuda")
        return
    with pytest.raises(KernelError, match=re.escape(f"kernel 'defined', the cuda variant: {said}")):
        kernel.check(variant, "cuda")


@needs_nvcc
def test_the_preprocessors_verdict_on_a_suspect_is_kept_so_a_second_collection_runs_no_nvcc(tmp_path, monkeypatch):
    """A suspect's check ran nvcc -E (0.1 to 0.3 s) for each value under each setting of the
    others at every collection: seconds a collection for a kernel of several params, accepted or not."""
    real = shutil.which("nvcc")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text(f'#!/bin/sh\ncase " $* " in *" -E "*) echo >> {tmp_path / "runs"}; '
                                           f'[ -e {tmp_path / "stopped"} ] && exit 1;; esac\nexec {real} "$@"\n')
    (tmp_path / "bin" / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    (tmp_path / "inc").mkdir()
    (tmp_path / "k.cu").write_text(IFDEF_CU)

    def collected(header: str) -> tuple[str | None, int]:
        """A fresh declaration's check, with the header given: what it says and the nvcc -E runs."""
        (tmp_path / "inc" / "twice.cuh").write_text(header)
        (tmp_path / "runs").write_text("")
        variant = Variant(source=str(tmp_path / "k.cu"), entry="k", flags=(f"-I{tmp_path / 'inc'}",),
                          space=Space({"fast": [False, True], "block": [64, 128], "unroll": [1, 4]}),
                          heuristic=lambda shape: {"fast": False, "block": 128, "unroll": 1},
                          launch=lambda config, shape: (-(-shape[0] // config["block"]), config["block"]))
        kernel = Kernel("kept", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                        args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"], cuda=variant)
        try:
            kernel.check(variant, "cuda")
            said = None
        except KernelError as e:
            said = str(e)
        return said, len((tmp_path / "runs").read_text().splitlines())

    reads = "#if fast && unroll == 4\n#define TWICE(v) (2 * (v))\n#else\n#define TWICE(v) ((v) * 2)\n#endif\n"
    assert collected(reads) == (None, 6)  # each value of fast with the others at their first, block 128, unroll 4
    assert collected(reads) == (None, 0)
    (tmp_path / "stopped").touch()  # nvcc fails (the machine's doing, as far as tunebench can tell)
    assert collected("#define TWICE(v) (2 * (v))\n") == (None, 1)  # an edited header: another template
    (tmp_path / "stopped").unlink()
    said, runs = collected("#define TWICE(v) (2 * (v))\n")  # judged again: the failed runs' verdict was not kept
    assert "tests whether bool param 'fast' is defined" in said and runs == 6
    assert collected("#define TWICE(v) (2 * (v))\n") == (said, 0)



#: A collection's check of a CUDA declaration, in a process of its own (the template's folder given).
CHECKED = """\
import sys
from pathlib import Path
from tunebench import Bucket, Buckets, Kernel, Space, Variant

folder = Path(sys.argv[1])
variant = Variant(source=str(folder / "k.cu"), entry="k", flags=(f"-I{folder / 'inc'}",),
                  space=Space({"fast": [False, True], "block": [64, 128]}),
                  heuristic=lambda shape: {"fast": False, "block": 128},
                  launch=lambda config, shape: (-(-shape[0] // config["block"]), config["block"]))
kernel = Kernel("checked", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"], cuda=variant)
kernel.check(variant, "cuda")
"""


@needs_nvcc
def test_nvcc_e_killed_with_a_collection_leaves_nothing_in_the_temp_folder_after_the_next(tmp_path):
    """The preprocessor's check of constant params runs nvcc -E at collection, with the user's
    TMPDIR: a collection killed meanwhile (a CI job's timeout) left nvcc's files there for good.
    nvcc -E gets a folder of its own, which the next check removes."""
    (outside := tmp_path / "tmp").mkdir()
    real = shutil.which("nvcc")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text(  # at its first -E, the collection is killed while nvcc has its files
        f'#!/bin/sh\ncase " $* " in *" -E "*) if [ ! -e {tmp_path / "killed"} ]; then touch {tmp_path / "killed"} '
        f'"$TMPDIR/tmpxft_00001234_00000000"; kill -KILL $PPID; exit 1; fi;; esac\nexec {real} "$@"\n')
    (tmp_path / "bin" / "nvcc").chmod(0o755)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "twice.cuh").write_text("#if fast\n#define TWICE(v) (2 * (v))\n#else\n"
                                                "#define TWICE(v) ((v) * 2)\n#endif\n")
    (tmp_path / "k.cu").write_text(IFDEF_CU)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "TMPDIR": str(outside),
           "TUNEBENCH_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).parents[1])}
    run = subprocess.run([sys.executable, "-c", CHECKED, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == -9 and list(outside.iterdir()), run.stderr[-2000:]
    run = subprocess.run([sys.executable, "-c", CHECKED, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not list(outside.iterdir())

@needs_nvcc
def test_a_complex_scalar_is_checked_against_the_complex_a_kernel_takes_by_value_in_size_and_kind(tmp_path):
    """A cuFloatComplex took a float64 (its 8 bytes), a thrust::complex<float> a complex128 and
    nvcc's float _Complex a float32: each passed, and every config read garbage."""
    types = entry_types(tmp_path, "cplx", "y", (
        "#include <cuComplex.h>\n#include <thrust/complex.h>\n#include <cuda/std/complex>\n"
        'extern "C" __global__ void cplx(float *y, cuFloatComplex a, thrust::complex<float> b, '
        "cuda::std::complex<double> c, float _Complex d, int2 e)\n"
        "{ y[0] = a.x + b.real() + (float)c.real() + __real__ d + e.x; }\n"))
    fits = {"y": np.zeros(8, np.float32), "a": np.complex64(1j), "b": np.complex64(1j), "c": np.complex128(1j),
            "d": np.complex64(1j), "e": np.zeros((), [("x", np.int32), ("y", np.int32)])[()]}
    assert args_problem(fits, types) is None
    assert args_problem({**fits, "a": np.float64(1), "b": np.complex128(1j), "c": np.float64(1), "d": np.float32(1),
                         "e": np.complex64(1j)}, types) == (
        "argument 'a' (float64 scalar, 8 bytes) where the kernel's 2nd parameter (float2 a) takes two 4-byte floats: "
        "give it np.complex64, its real part x and its imaginary part y; argument 'b' (complex128 scalar) where the "
        "kernel's 3rd parameter (complex<float> b) takes an 8-byte complex: give it np.complex64; argument 'c' "
        "(float64 scalar) where the kernel's 4th parameter (complex<double> c) takes a 16-byte complex: give it "
        "np.complex128; argument 'd' (float32 scalar) where the kernel's 5th parameter (_Complex_float d) takes an "
        "8-byte complex: give it np.complex64; argument 'e' (complex64 scalar, 8 bytes) where the kernel's 6th "
        "parameter (int2 e) is no complex: give it a numpy struct scalar of its fields")


def test_a_complex128_after_a_pointer_is_named_as_a_double2_and_a_long_double_is_refused_not_a_traceback():
    """A cuDoubleComplex was advised as a cuFloatComplex, and a long double scalar raised struct's
    error out of the argument check."""
    from tunebench.backends import cuda

    args = {"x": np.zeros(4), "c": np.complex128(1 + 2j)}
    said = args_problem(args, (Param(8, kind="pointer", offset=0), Param(16, offset=16)))
    assert "lands at byte 8" in said and "the kernel's double2 (cuDoubleComplex)" in said, said
    assert "pass it first, or its parts as two scalars" in said
    assert cuda.args_refusal({**args, "l": np.clongdouble(1)}) == (
        "scalar 'l' is a complex256, which CUDA has no type for: pass np.float64 (or two)")
    args_problem({**args, "l": np.longdouble(1)}, (Param(8, kind="pointer", offset=0), Param(16, offset=16),
                                                   Param(16, offset=32)))  # no struct.error


@needs_nvcc
def test_the_lead_kernels_ptx_assembles_for_every_architecture_this_nvcc_builds(tmp_path):
    """The driver JIT-compiles the lead on the device; ptxas, beside nvcc, compiles the same PTX."""
    ptxas = shutil.which("ptxas") or str(Path(shutil.which("nvcc")).with_name("ptxas"))
    (tmp_path / "lead.ptx").write_text(LEAD_PTX)
    for arch in nvcc_archs():
        done = subprocess.run([ptxas, f"-arch={arch}", str(tmp_path / "lead.ptx"), "-o", str(tmp_path / f"{arch}.cubin")],
                              capture_output=True, text=True)
        assert done.returncode == 0, (arch, done.stderr)


@needs_gpu
def test_the_lead_keeps_the_hosts_time_enqueueing_a_launch_outside_the_timed_window():
    """A launch the host takes 1 ms to enqueue (a framework's dispatch, a busy host) is timed as
    the GPU work alone, once the lead has grown to cover it; and it comes back down after."""
    import statistics
    import time

    from tunebench.backends.cuda import LEAD_NS, CudaBackend
    backend = CudaBackend()
    alone = statistics.median(backend.time_launch(backend.flush_l2) for _ in range(20))
    late = [backend.time_launch(lambda: (time.sleep(0.001), backend.flush_l2())) for _ in range(20)]
    assert statistics.median(late[5:]) < alone + 0.3, (alone, late)
    for _ in range(20):
        backend.time_launch(backend.flush_l2)
    assert backend.lead_ns < 10 * LEAD_NS, backend.lead_ns
    # a launch that synchronizes inside cannot be covered: its call still ends, with a time
    assert backend.time_launch(lambda: (backend.flush_l2(), backend.drv.Context.synchronize())) > 0


@needs_gpu
def test_a_calls_every_try_restores_its_in_place_inputs_first():
    """A retried call starts from the pristine inputs as the first try did: an in-place kernel
    timed again on its own output ran on other data. A launch that synchronizes is retried every
    time (the GPU always waited for it), until the tries run out."""
    from tunebench.backends.cuda import LEAD_TRIES, CudaBackend
    backend, done = CudaBackend(), []
    backend.time_launch(lambda: (done.append("launch"), backend.drv.Context.synchronize()),
                        lambda: done.append("restore"))
    assert done == ["restore", "launch"] * LEAD_TRIES
