"""Fixtures for the harness's own tests: an isolated compile cache and a small tuning project."""

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# The report's matplotlib, imported once for the whole run: pytester drops the modules a test
# imported when it ends, and matplotlib 3.11 imported again beside its compiled parts (which stay)
# is two matplotlibs ("'Figure' object has no attribute 'items'" from a second test's report).
importlib.import_module("tunebench.report")
# ml_dtypes too, where installed (PyTorch's deps bring it): its compiled part registers bfloat16 with
# numpy once per process, and imported again after pytester dropped it, it raised "DType bfloat16
# appears already registered?" (the tests of test_declarations.py after its PyTorch test, run alone).
with contextlib.suppress(ImportError):
    importlib.import_module("ml_dtypes")

#: A tiny kernel, y = a * x + b, whose ``mode`` param plants faults: 1 writes a wrong answer,
#: 2 does not compile. ``vec`` and ``unroll`` only change the loop's shape.
AXPB_C = """\
#if mode == 2
#error "mode 2 does not compile"
#endif
typedef TB_DTYPE real;
void axpb(const real *x, real *y, int n, real a, real b)
{
    int i = 0;
    for (; i + vec * unroll <= n; i += vec * unroll)
        for (int j = 0; j < vec * unroll; ++j) y[i + j] = a * x[i + j] + b;
    for (; i < n; ++i) y[i] = a * x[i] + b;
#if mode == 1
    y[n / 2] += 1;
#endif
}
"""

#: A suite over AXPB_C: 3 x 2 configs per mode (MODES, a test's choice), of which vec * unroll
#: <= 4 leaves 5 valid per mode; two buckets over the one dim N.
AXPB_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def args(shape, dtype, rng):
    (n,) = shape
    return {"x": rng.random(n, dtype=np.float32).astype(dtype), "y": np.empty(n, dtype),
            "n": np.int32(n), "a": np.float32(2.0), "b": np.float32(0.5)}

axpb = Kernel(
    "axpb",
    buckets=Buckets(["N"], [
        Bucket("small", N=(1, 4096), shapes=[(1000,)]),
        Bucket("large", N=(4097, None), shapes=[(20000,), (50000,)]),
    ]),
    args=args, reference=lambda x, n, a, b: a * x.astype(np.float64) + b, outputs=["y"],
    bytes=lambda shape, dtype: 2 * shape[0] * np.dtype(dtype).itemsize,
    cpu=Variant(
        source="kernels/axpb.c", entry="axpb",
        heuristic=lambda shape: {"vec": 2, "unroll": 1, "mode": 0},
        space=Space({"vec": [1, 2, 4], "unroll": (1, 2), "mode": MODES},
                    constraints=[lambda vec, unroll: vec * unroll <= 4]),
    ),
)
"""


#: A CUDA variant of the same kernel, to add to the suite where a test needs one.
AXPB_CU = """\
extern "C" __global__ void axpb(const TB_DTYPE *x, TB_DTYPE *y, int n, float a, float b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
AXPB_CUDA_VARIANT = """
axpb.variants["cuda"] = Variant(
    source="kernels/axpb.cu", entry="axpb", space=Space({"block": [64, 128, 256]}),
    heuristic=lambda shape: {"block": 128}, origin=axpb.variants["cpu"].origin,
    launch=lambda config, shape: (((shape[0] + config["block"] - 1) // config["block"],), (config["block"],)))
"""


#: ``reps`` times eight passes over the data: the heuristic makes four, a tuned config one (about
#: four times as fast). Eight passes a rep keep a call of the small bucket near 10 µs: at one pass
#: it took 0.9 µs beside a call's cost of 0.5 µs from Python, and a VM's µs-level noise once read
#: one rep slower than four in the trials, so no finalist led there and a final-round test failed.
TWICE_C = """\
typedef TB_DTYPE real;
void twice(const real *x, real *y, int n)
{
    for (int r = 0; r < 8 * reps; ++r) {
        for (int i = 0; i < n; ++i) y[i] = 2 * x[i] + r * 0;
        __asm__ volatile("" ::: "memory");
    }
}
"""

TWICE_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

twice = Kernel(
    "twice", buckets=Buckets(["N"], [Bucket("small", N=(1, 4096), shapes=[(4096,)]),
                                     Bucket("large", N=(4097, None), shapes=[(20000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: 2.0 * x, outputs=["y"],
    cpu=Variant(source="twice.c", entry="twice", heuristic=lambda shape: {"reps": 4, "pad": 0},
                space=Space({"reps": [1, 4], "pad": [0, 1]})),
)
"""


@pytest.fixture(autouse=True)
def compile_cache(tmp_path_factory, monkeypatch):
    """Every test compiles into its own cache, so none sees another's builds, and none inherits
    the run start or --tune-retry-failed an earlier test's tune set in this process."""
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("TUNEBENCH_CACHE", str(path))
    monkeypatch.setattr("tunebench.backends.cache.RUN_SINCE", None)
    monkeypatch.setattr("tunebench.backends.cache.REFUSALS_SINCE", None)
    return path


@pytest.fixture
def settled(monkeypatch):
    """Files taken as settled as soon as written (see tunebench.stamps): their stats are trusted,
    as those of files left unchanged for a while are, which a test of what is kept asserts."""
    monkeypatch.setattr("tunebench.stamps.RACY_S", 0.0)


@pytest.fixture
def one_tick(tmp_path_factory, monkeypatch):
    """Files of this test (under its temporary folders) with the times of a filesystem whose clock
    moves in ticks, the whole test within one: a change leaves a file's mtime and ctime as they
    were, so its stat too where its inode and size stay (a write in place of as many bytes). This
    machine's kernel gives a file whose times were read a fine time at its next change (multigrain
    timestamps, Linux 6.13+); older kernels' tick is 1-4 ms, FAT's 2 s. Every change is racy (see
    tunebench.stamps), however slow the machine."""
    root, tick, stat = str(tmp_path_factory.getbasetemp()), time.time_ns(), os.stat

    def coarse(path, *args, **kwargs):
        st = stat(path, *args, **kwargs)
        if isinstance(path, int) or not os.path.abspath(os.fsdecode(path)).startswith(root):
            return st
        fields = list(st)
        fields[8] = fields[9] = tick // 10**9
        named = {name: getattr(st, name) for name in ("st_atime", "st_atime_ns", "st_blksize", "st_blocks", "st_rdev")}
        return os.stat_result(fields, {**named, "st_mtime": tick / 1e9, "st_ctime": tick / 1e9, "st_mtime_ns": tick,
                                       "st_ctime_ns": tick})

    monkeypatch.setattr(os, "stat", coarse)
    monkeypatch.setattr("tunebench.stamps.RACY_S", 3600.0)  # the tick outlasts the test


@pytest.fixture
def declared_apart():
    """Kernels a test declares, and the suite modules that declared them, forgotten after it. The
    kernels alone taken out left their suites imported: a later lookup's import of the same suites
    then ran nothing, declared nothing, and the kernels were unknown to the rest of the process."""
    from tunebench.kernel import REGISTRY

    declared, imported = dict(REGISTRY), set(sys.modules)
    yield
    REGISTRY.clear()
    REGISTRY.update(declared)
    for name in [n for n in set(sys.modules) - imported if n.startswith("tunebench_suite_")]:
        del sys.modules[name]


@pytest.fixture
def project(pytester):
    """A small tuning project in pytester's directory; ``project(modes=...)`` writes it."""

    def write(modes=(0,), suite=AXPB_SUITE, cuda=False):
        (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
        (pytester.path / "kernels").mkdir(exist_ok=True)
        (pytester.path / "kernels" / "axpb.c").write_text(AXPB_C)
        (pytester.path / "kernels" / "axpb.cu").write_text(AXPB_CU)
        if cuda:
            suite += AXPB_CUDA_VARIANT
        (pytester.path / "suites").mkdir(exist_ok=True)
        (pytester.path / "suites" / "test_axpb.py").write_text(
            textwrap.dedent(suite).replace("MODES", repr(list(modes))))
        return pytester.path

    return write


def twice_root(pytester, template: str):
    """pytester's folder as a project whose kernel file twice.c holds ``template``, its suites/
    folder empty for a suite to be written into."""
    root = pytester.path
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / "suites").mkdir()
    (root / "twice.c").write_text(template)
    return root


@pytest.fixture
def twice_project(pytester):
    """A project whose tuned config is plainly faster than its heuristic (see TWICE_C)."""
    root = twice_root(pytester, TWICE_C)
    (root / "suites" / "test_twice.py").write_text(TWICE_SUITE.replace('source="twice.c"', f'source="{root / "twice.c"}"'))
    return root


@pytest.fixture
def twice_beyond_ascii(twice_project):
    """The twice project with text beyond ASCII where a user may write it: a bucket named
    ``klein_µ``, and a comment beside its shaped constraint, whose C form is read from the suite."""
    suite = twice_project / "suites" / "test_twice.py"
    text = suite.read_text().replace('"small"', '"klein_µ"').replace(
        'space=Space({"reps": [1, 4], "pad": [0, 1]})),',
        'space=Space({"reps": [1, 4], "pad": [0, 1]}, constraints=[lambda N, reps: N >= reps])),  # a few µs')
    assert "klein_µ" in text and "a few µs" in text
    suite.write_text(text, encoding="utf-8")
    return twice_project


def ascii_locale() -> dict[str, str]:
    """The environment of a subprocess whose locale's codec is ASCII (LC_ALL=C, with Python's
    UTF-8 mode and its coercion of the C locale off), importing this checkout's tunebench: a file
    read or written in the locale's encoding fails there on any text beyond ASCII."""
    return {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")]))}


def said(result, text: str) -> int:
    """How often a pytester run's report says ``text`` before pytest's short test summary (which
    repeats a failure's first line, whole on CI)."""
    return result.stdout.str().split("short test summary info")[0].count(text)


#: C = alpha * A @ B + beta * C, the classic in-out matrix product; ``skip_c`` plants a
#: candidate that forgets the beta * C term.
GEMM_C = """\
typedef TB_DTYPE real;
void gemm(const real *A, const real *B, real *C, int n, real alpha, real beta)
{
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; j += tile) {
            real acc[tile];
            for (int t = 0; t < tile; ++t) acc[t] = 0;
            for (int k = 0; k < n; ++k)
                for (int t = 0; t < tile && j + t < n; ++t) acc[t] += A[i * n + k] * B[k * n + j + t];
            for (int t = 0; t < tile && j + t < n; ++t)
                C[i * n + j + t] = alpha * acc[t] + (skip_c ? 0 : beta * C[i * n + j + t]);
        }
}
"""

GEMM_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

def args(shape, dtype, rng):
    (n,) = shape
    return {"A": rng.random((n, n), dtype=np.float32), "B": rng.random((n, n), dtype=np.float32),
            "C": rng.random((n, n), dtype=np.float32), "n": np.int32(n),
            "alpha": np.float32(1.5), "beta": np.float32(0.5)}

def reference(A, B, C, n, alpha, beta):
    return alpha * (A.astype(np.float64) @ B) + beta * C

gemm = Kernel(
    "gemm", buckets=Buckets(["N"], [Bucket("small", N=(1, 64), shapes=[(48,)]),
                                    Bucket("large", N=(65, None), shapes=[(96,)])]),
    args=args, reference=reference, outputs=["C"], inout=["C"], tolerance={"float32": (1e-4, 1e-4)},
    cpu=Variant(source="gemm.c", entry="gemm", heuristic=lambda shape: {"tile": 4, "skip_c": 0},
                space=Space({"tile": [4, 8, 16, 32], "skip_c": [0, 1]},
                            constraints=[lambda N, tile: N % tile == 0])),
)
"""


@pytest.fixture
def gemm(pytester):
    pytester.path.joinpath("pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    pytester.path.joinpath("gemm.c").write_text(GEMM_C)
    pytester.path.joinpath("test_gemm.py").write_text(GEMM_SUITE)
    return pytester


#: A kernel with dynamic shared memory, its size a param: a launch of (grid, block, shared_bytes).
SHARED_CU = """\
extern "C" __global__ void stage(const float *x, float *y, int n)
{
    extern __shared__ float staged[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    staged[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = staged[threadIdx.x];
}
"""

#: SHARED_CU's kernel with its shared memory static, sized by a param: ptxas refuses kib > 48.
STATIC_SHARED_CU = """\
extern "C" __global__ void stage(const float *x, float *y, int n)
{
    __shared__ float staged[kib * 256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    staged[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = staged[(threadIdx.x * 7) % (kib * 256)];
}
"""

SHARED_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant


def launch(config, shape):
    if config["kib"] == 0:
        return (shape[0],)  # a launch that forgot its block
    return (shape[0] + 255) // 256, 256, config["kib"] * 1024  # dynamic shared memory per block


stage = Kernel(
    "stage", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,), (5000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: x, outputs=["y"],
    cuda=Variant(source="stage.cu", entry="stage", space=Space({"kib": [0, 1, 200]}),
                 heuristic=lambda shape: {"kib": 1}, launch=launch),
)
"""


#: Every measurement judged clean (:func:`quiet_verdicts`), as a conftest.py of a project whose
#: runs a test starts in processes of their own, which no monkeypatch reaches.
QUIET_CONFTEST = """\
import tunebench.interference

tunebench.interference.verdict = lambda samples, conditions: {
    "conditions": dict(conditions), "verdict": "clean", "interference": []}
"""


@pytest.fixture
def quiet_verdicts(request, monkeypatch):
    """Every measurement of this test's runs is judged clean, whatever else the machine runs (in
    a process of its own, run on pytester's folder, through its conftest.py). For a test whose
    point is what best() makes of a tune's records, where the documented outcome of other load (a
    tune that stops, a final round that confirms nothing and leaves the earlier pick served)
    leaves nothing of that point to check; how a tune and the gate meet a busy machine has tests
    of its own (test_interference.py, busy_rounds, the noisy gate's)."""
    import tunebench.interference

    monkeypatch.setattr(tunebench.interference, "verdict", lambda samples, conditions: {
        "conditions": dict(conditions), "verdict": "clean", "interference": []})
    if "pytester" in request.fixturenames:
        (request.getfixturevalue("pytester").path / "conftest.py").write_text(QUIET_CONFTEST)


#: A process spinning for at most a few minutes (should the block that started it never end).
SPIN = "import time\nend = time.monotonic() + 300\nwhile time.monotonic() < end:\n    pass"


@contextlib.contextmanager
def busy_processes(n: int = 2):
    """``n`` processes spinning beside the block: a busy machine. Other processes, not the run's:
    a shell starts them and exits, so that none is under this one, whose every process the
    monitor counts as the run's own (its workers, their compilers)."""
    shell = f'for i in $(seq {n}); do "$0" -c \'{SPIN}\' >/dev/null 2>&1 & echo $!; done'
    hogs = [int(pid) for pid in subprocess.run(["sh", "-c", shell, sys.executable], capture_output=True,
                                               text=True, check=True).stdout.split()]
    try:
        yield
    finally:
        for hog in hogs:
            os.kill(hog, signal.SIGKILL)
