import ctypes
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import tunebench
from tests.conftest import AXPB_C, TWICE_C, ascii_locale
from tunebench.backends.base import BuildEnvironmentError, CompileError, explain, own_include_dirs, preprocess
from tunebench.backends.cache import BuildCache, CompilerKilled, default_root, run_compiler
from tunebench import compile_check
from tunebench.backends import compiler, cpu, cuda
from tunebench.backends.cpu import CpuBackend, libraries_last, missing_entry
from tunebench.buckets import Bucket, Buckets
from tunebench.kernel import (Kernel, KernelError, Variant, changed_files, comment_edits, hashed_files, inline_includes,
                              kept_variant)
from tunebench.measure import MeasureSettings, measure
from tunebench.space import Space


def scaling(name: str, variant: Variant, factor: float, n: int) -> Kernel:
    """A kernel ``y = factor * x`` of one bucket, measured on ``(n,)``, around ``variant``."""
    return Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(n,)])]),
                  args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                  "y": np.empty(shape[0], np.float32), "n": np.int32(shape[0])},
                  reference=lambda x, n: factor * x, outputs=["y"], cpu=variant)


@pytest.fixture
def axpb(tmp_path):
    (tmp_path / "axpb.c").write_text(AXPB_C)

    def args(shape, dtype, rng):
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], np.float32),
                "n": np.int32(shape[0]), "a": np.float32(3.0), "b": np.float32(1.0)}

    variant = Variant(source=tmp_path / "axpb.c", entry="axpb",
                      space=Space({"vec": [1, 4], "unroll": [1, 2], "mode": [0, 1, 2]}),
                      heuristic=lambda shape: {"vec": 4, "unroll": 1, "mode": 0})
    kernel = Kernel("axpb_backend_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=args, reference=lambda x, n, a, b: 3.0 * x + 1.0, outputs=["y"], cpu=variant)
    return kernel, variant


def assert_recorded_build_scales(name: str, tuned: Variant, text: str, texts: dict, config: dict) -> None:
    """The gate's build of the recorded template (``text`` as tuned, its files' ``texts``; see
    :func:`kept_variant`) computes ``y = 3 * x``, as tuned, whatever the files read today."""
    kept = {file: texts[digest] for file, digest in hashed_files(text, "k.c").items() if digest in texts}
    recorded = kept_variant(dataclasses.replace(tuned, text=text), kept)
    got, want = run_once(CpuBackend(), scaling(name, recorded, 3.0, 9), recorded, config, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def scale_headers(project: Path, include: str, folders: dict[str, Path], reads: str) -> None:
    """A project whose template includes ``include`` (scale.h), a scale.h in each of ``folders``:
    the one named ``reads`` scales by 3, the others by 5 (a build of another's is seen)."""
    for name, folder in folders.items():
        folder.mkdir(parents=True)
        (folder / "scale.h").write_text(f"#define FACTOR {'3.0f' if name == reads else '5.0f'}\n")
    (project / "pyproject.toml").write_text("")
    (project / "suites").mkdir()
    (project / "suites" / "k.c").write_text(f"#include {include}\nvoid k(const float *x, float *y, int n)\n"
                                            "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")


def nvcc_preprocessed(build: Path, variant: Variant) -> str:
    """The device code nvcc preprocesses from the copy of ``variant`` it builds in ``build`` (the
    working folder), with the flags it builds it with."""
    (build / "k.cu").write_text(cuda.source(variant, {"tile": 1}, "float32"))
    return subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                          capture_output=True, text=True, check=True, cwd=build).stdout


def scaling_variant(origin: Path, flags: tuple[str, ...]) -> Variant:
    """The one-config CUDA kernel ``k.cu`` of ``origin`` (``y = FACTOR * ... * x``), built with ``flags``."""
    return Variant(source="k.cu", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                   flags=flags, launch=lambda c, shape: (1, 32), origin=origin)


def scales_by(build: Path, variant: Variant, product: str) -> bool:
    """Whether nvcc's preprocessed device code of ``variant`` computes ``y[i] = <product> * x[i]``."""
    return f"y[i] = {product} * x[i]" in nvcc_preprocessed(build, variant)


def recorded_build(declared, text: str, texts: dict[str, str]) -> Variant:
    """The gate's build as tuned: ``declared()``'s with the template ``text`` and, of the files it
    hashes, the texts ``texts`` (by digest) the records keep."""
    kept = {file: texts[digest] for file, digest in hashed_files(text, "k.cu").items()}
    return kept_variant(dataclasses.replace(declared(), text=text), kept)


def assert_hash_follows(declared, variant: Variant, built: Path, *unread: Path) -> None:
    """An edit of the headers ``unread`` (the build reads none) keeps ``variant``'s source hash as
    ``declared()`` gives it again, and one of ``built``, the header it reads, changes it."""
    for header in unread:
        header.write_text("#define FACTOR 6.0f\n")
    assert declared().source_hash == variant.source_hash
    built.write_text("#define FACTOR 4.0f\n")
    assert declared().source_hash != variant.source_hash


def run_once(backend, kernel, variant, config, n=1000):
    build = backend.build(kernel, variant, config, "float32")
    args = kernel.build_args((n,), "float32")
    runner = backend.load(build, kernel, variant, config, (n,), args)
    runner.reset()
    runner.call()
    return runner.outputs()[0], kernel.expected(args)[0]


def test_a_compiled_candidate_computes_the_kernel(axpb):
    kernel, variant = axpb
    got, want = run_once(CpuBackend(), kernel, variant, {"vec": 4, "unroll": 2, "mode": 0}, n=1003)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_each_config_gets_its_own_library_and_a_second_build_compiles_nothing(axpb, compile_cache):
    kernel, variant = axpb
    backend = CpuBackend()
    a = backend.build(kernel, variant, {"vec": 1, "unroll": 1, "mode": 0}, "float32")
    b = backend.build(kernel, variant, {"vec": 4, "unroll": 1, "mode": 0}, "float32")
    assert a.handle != b.handle and not a.cached and a.compile_time_s > 0
    assert (backend.cache.compiled, backend.cache.reused) == (2, 0)
    again = CpuBackend().build(kernel, variant, {"vec": 1, "unroll": 1, "mode": 0}, "float32")
    assert again.cached and again.handle == a.handle
    assert str(a.handle).startswith(str(compile_cache))


def test_a_compile_error_carries_the_compiler_message_and_is_cached(axpb, compile_cache):
    kernel, variant = axpb
    backend = CpuBackend()
    with pytest.raises(CompileError, match="mode 2 does not compile"):
        backend.build(kernel, variant, {"vec": 1, "unroll": 1, "mode": 2}, "float32")
    with pytest.raises(CompileError, match="mode 2 does not compile"):
        backend.build(kernel, variant, {"vec": 1, "unroll": 1, "mode": 2}, "float32")
    assert (backend.cache.compiled, backend.cache.reused) == (1, 1)
    assert len(list(compile_cache.glob("*.err"))) == 1


def test_measure_verifies_before_timing_and_keeps_every_sample(axpb):
    kernel, variant = axpb
    backend = CpuBackend()
    settings = MeasureSettings(warmup_s=0.001, max_time_s=0.01, min_samples=5, max_samples=50)
    for mode, status in ((0, "ok"), (1, "wrong_result")):
        config = {"vec": 4, "unroll": 1, "mode": mode}
        args = kernel.build_args((1000,), "float32")
        runner = backend.load(backend.build(kernel, variant, config, "float32"), kernel, variant,
                              config, (1000,), args)
        result = measure(runner, kernel.expected(args), kernel.outputs, [(1e-5, 1e-6)], settings)
        assert result.status == status
        if status == "ok":
            assert 5 <= len(result.samples) <= 50 and all(s > 0 for s in result.samples)
        else:
            assert result.samples == [] and result.max_error == pytest.approx(1.0)


def test_a_python_int_argument_is_refused_with_its_name(axpb):
    kernel, _ = axpb
    kernel.args = lambda shape, dtype, rng: {"x": np.zeros(4, np.float32), "y": np.zeros(4, np.float32),
                                             "n": 4, "a": np.float32(1), "b": np.float32(0)}
    with pytest.raises(KernelError, match="argument 'n' is an int"):
        kernel.build_args((4,), "float32")


def test_an_args_builder_returning_a_list_or_lacking_an_output_says_so(axpb):
    """A Kernel Tuner list was "dictionary update sequence element #0 has length 100000", and a
    missing output "must be a numpy array"."""
    kernel, _ = axpb
    kernel.args = lambda shape, dtype, rng: [np.zeros(4, np.float32), np.zeros(4, np.float32), np.int32(4)]
    with pytest.raises(KernelError, match=r"the args builder returned a list; return a dict of argument name -> "):
        kernel.build_args((4,), "float32")
    kernel.args = lambda shape, dtype, rng: {"x": np.zeros(4, np.float32), "out": np.zeros(4, np.float32)}
    with pytest.raises(KernelError, match=r"output 'y' is not among the args builder's arguments \(x, out\)"):
        kernel.build_args((4,), "float32")


def test_a_float64_scalar_for_a_float_parameter_is_a_declaration_error_before_any_call(axpb):
    """ctypes would pass a double the function never reads: every config a wrong result."""
    kernel, variant = axpb
    given = kernel.args
    kernel.args = lambda shape, dtype, rng: {**given(shape, dtype, rng), "a": np.float64(3.0)}
    with pytest.raises(KernelError, match=r"kernel 'axpb_backend_test': argument 'a' \(float64 scalar\) where the "
                                          r"kernel's 4th parameter \(float a\) takes a 4-byte float: give it np.float32"):
        run_once(CpuBackend(), kernel, variant, {"vec": 4, "unroll": 1, "mode": 0})


def test_the_fingerprint_holds_the_thread_count(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    fp = CpuBackend().fingerprint()
    assert fp["target"] == "cpu" and fp["threads"] == 1 and fp["name"]


#: Prints this machine's device id, as a tune files its records under it.
DEVICE_ID = ("from tunebench.backends.cpuinfo import identify\nfrom tunebench.device import device_id\n"
             "print(device_id(identify()))")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores allowed, to pin a run to one of them")
def test_threads_beyond_the_cores_allowed_are_a_device_of_their_own():
    """OMP_NUM_THREADS=2 under taskset -c 0 was filed as the 2-core run's 2-thread device: a tune's
    trials of two threads sharing a core, judged clean and 2.1x slower (row_reduce short_rows,
    0.695 ms against 0.338), went into its records, to be reused and gated there."""
    def device(cores: set[int]) -> str:
        env = {**os.environ, "OMP_NUM_THREADS": "2"}
        return subprocess.run([sys.executable, "-c", DEVICE_ID], env=env, capture_output=True, text=True, check=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, cores)).stdout.strip()

    two = sorted(os.sched_getaffinity(0))[:2]
    spread, shared = device(set(two)), device({two[0]})
    assert "-2t-" in spread and "-2t-1c-" in shared, (spread, shared)


def test_a_local_header_is_inlined_and_covered_by_the_source_hash(tmp_path):
    (tmp_path / "scale.h").write_text("#define SCALE 3.0f\n")
    (tmp_path / "axpb.c").write_text('#include "scale.h"\n' + AXPB_C.replace("a * x", "SCALE * x"))
    variant = Variant(source=tmp_path / "axpb.c", entry="axpb", space=Space({"vec": [1], "unroll": [1], "mode": [0]}),
                      heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0})
    assert "#define SCALE 3.0f" in variant.template and '#line 2 "axpb.c"' in variant.template
    before, before_hash = variant.template, variant.source_hash  # a variant reads its files again once they change
    kernel = Kernel("axpb_include_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                    "y": np.empty(shape[0], np.float32), "n": np.int32(shape[0]),
                                                    "a": np.float32(0), "b": np.float32(1)},
                    reference=lambda x, n, a, b: 3.0 * x + 1.0, outputs=["y"], cpu=variant)
    got, want = run_once(CpuBackend(), kernel, variant, {"vec": 1, "unroll": 1, "mode": 0})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (tmp_path / "scale.h").write_text("#define SCALE 4.0f\n")
    changed = Variant(source=tmp_path / "axpb.c", entry="axpb", space=variant.space, heuristic=variant.heuristic)
    assert changed.source_hash != before_hash
    assert changed_files(before, changed.template, "axpb.c") == ["scale.h"]  # the gate names the edit


#: Hashes and builds the template argv[1] names, and prints its source hash and whether it computed.
BUILD_IN_LOCALE = """\
import sys
import numpy as np
from tests.test_cpu_backend import TWICE_SPACE, run_once, scaling
from tunebench.backends.cpu import CpuBackend
from tunebench.kernel import Variant
variant = Variant(source=sys.argv[1], entry="twice", space=TWICE_SPACE, heuristic=lambda shape: {"reps": 1, "pad": 0})
got, want = run_once(CpuBackend(), scaling("twice_locale_test", variant, 2.0, 100), variant, {"reps": 1, "pad": 0})
print(variant.source_hash, np.allclose(got, want))
"""
TWICE_SPACE = Space({"reps": [1], "pad": [0]})


def test_a_template_is_read_and_built_as_utf8_whatever_the_locale(tmp_path):
    """Read in the locale's encoding, a template with a "µs" in a comment hashed otherwise under a
    Latin-1 locale (LANG=en_US on Debian: the gate said the template had changed since the tune),
    and under an ASCII one was refused as "not UTF-8 text"."""
    (tmp_path / "note.h").write_text("/* a few µs a call — no more */\n", encoding="utf-8")
    (tmp_path / "twice.c").write_text('#include "note.h"\n' + TWICE_C, encoding="utf-8")
    here = Variant(source=tmp_path / "twice.c", entry="twice", space=TWICE_SPACE, heuristic=lambda shape: {})
    ran = subprocess.run([sys.executable, "-c", BUILD_IN_LOCALE, str(tmp_path / "twice.c")], env=ascii_locale(),
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [here.source_hash, "True"]



def test_a_compiler_killed_by_a_signal_caches_nothing_and_is_no_compile_error(tmp_path):
    """Ctrl-C while gcc ran cached "gcc exited -2" as the config's compile error, for every later
    run, --tune-fresh and --tune-retry-failed alike."""
    cache = BuildCache(tmp_path)
    killed = ["sh", "-c", "kill -INT $$", "{src}", "{out}"]
    with pytest.raises(CompilerKilled, match="sh was killed by SIGINT while compiling"):
        cache.get("k", "int f;", "t", (".c", ".so"), lambda src, out: run_compiler(killed, src, out))
    assert not list(tmp_path.glob("*.err"))
    (err,) = [p.with_suffix(".err") for p in tmp_path.glob("k-*.c")]
    err.write_text("gcc exited -2")  # what an earlier tunebench cached
    path, _, cached = cache.get("k", "int f;", "t", (".c", ".so"),
                                lambda src, out: run_compiler(["cp", "{src}", "{out}"], src, out))
    assert path.exists() and not cached


def test_a_rendered_input_that_cannot_be_written_is_the_machines_fault_not_the_candidates(tmp_path):
    """A source file of the flags is rendered beside the build: a disk that refused it was a raw
    OSError, recorded as the candidate's crash (and out of compile-check's threads, a traceback)."""
    gone = tmp_path / "gone" / "k.so"
    with pytest.raises(BuildEnvironmentError, match=r"^the rendered copy of /src/helper.c could not be written to "
                                                    rf"{gone.parent} \(No such file or directory\)"):
        run_compiler(["cp", "/src/helper.c", "{out}"], tmp_path / "k.c", gone, {"/src/helper.c": "int h;"})


def test_a_compiler_kept_from_writing_its_files_caches_nothing_and_is_no_compile_error(tmp_path):
    """A full TMPDIR's "No space left on device" was cached as the heuristic's compile error: the
    task stopped on every later run, --tune-fresh and --tune-retry-failed alike."""
    cache = BuildCache(tmp_path)
    full = ["sh", "-c", "echo 'big.c:3000:1: fatal error: error writing to /tmp/ccQx1.s: No space left on device' >&2;"
            " exit 1", "{src}", "{out}"]  # gcc's words, at the source's last line
    with pytest.raises(BuildEnvironmentError, match=r"^sh could not read or write its files \(No space left on "
                                                    r"device: big.c:3000:1: fatal error: error writing to "
                                                    r"/tmp/ccQx1.s: No space left on device\)"):
        cache.get("k", "int f;", "t", (".c", ".so"), lambda src, out: run_compiler(full, src, out))
    assert not list(tmp_path.glob("*.err")) and not list(tmp_path.glob("*.so*"))
    (err,) = [p.with_suffix(".err") for p in tmp_path.glob("k-*.c")]
    err.write_text("cc1: error writing to /tmp/ccQx1.s: No space left on device")  # what an earlier tunebench cached
    path, _, cached = cache.get("k", "int f;", "t", (".c", ".so"),
                                lambda src, out: run_compiler(["cp", "{src}", "{out}"], src, out))
    assert path.exists() and not cached
    oom = ["sh", "-c", "echo 'x86_64-conda-linux-gnu-gcc: fatal error: Killed signal terminated program cc1' >&2; "
           "exit 1", "{src}", "{out}"]
    with pytest.raises(CompilerKilled, match=r"sh was killed \(x86_64-conda-linux-gnu-gcc: fatal error: Killed "
                                             r"signal terminated program cc1\) while compiling"):  # the driver exits 1
        cache.get("k", "int g;", "t", (".c", ".so"), lambda src, out: run_compiler(oom, src, out))
    assert list(tmp_path.glob("*.err")) == [err]  # the one written above alone


def test_nvcc_leaves_none_of_its_temporary_files_and_a_c_compiler_keeps_the_users_tmpdir(tmp_path, monkeypatch):
    """nvcc left an empty ``*.lgenfe.bc`` in /tmp at each CUB candidate that failed to compile: it
    gets a temporary folder of its own, removed after it, wherever the run ends. A C compiler keeps
    the user's (a wrapper such as sccache starts a server that would outlive one of ours)."""
    (outside := tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(outside))
    monkeypatch.chdir(tmp_path)
    cache = BuildCache(Path("cache"))  # relative, as TUNEBENCH_CACHE may be: a compiler that changes folder finds it
    (nvcc := tmp_path / "nvcc").write_text('#!/bin/sh\ncd / && touch "$TMPDIR/k.lgenfe.bc" && echo "k.cu(1): error: no" >&2'
                                           '\nexit 1\n')
    nvcc.chmod(0o755)
    with pytest.raises(CompileError, match="error: no"):
        cache.get("k", "int f;", "t", (".cu", ".cubin"), lambda src, out: run_compiler([str(nvcc), "{src}"], src, out))
    assert not list(outside.iterdir()) and not list((tmp_path / "cache").glob(".tmp-*"))
    said = ["sh", "-c", 'echo "k.c:1:1: error: TMPDIR=$TMPDIR" >&2; exit 1', "{src}", "{out}"]
    with pytest.raises(CompileError, match=f"TMPDIR={outside}$"):
        cache.get("k", "int g;", "t", (".c", ".so"), lambda src, out: run_compiler(said, src, out))


def test_a_compiler_stopped_by_a_limit_or_out_of_memory_caches_nothing_and_is_no_compile_error(tmp_path):
    """Under ``ulimit -f`` gcc's assembler died of SIGXFSZ ("File size limit exceeded signal
    terminated program as"), which was cached as the template's compile error and reused once the
    limit was lifted; "cc1: out of memory" under ``ulimit -v`` alike."""
    cache = BuildCache(tmp_path)
    source = "".join(f"int g{i}(int x) {{ return x * {i}; }}\n" for i in range(50))  # more than 1 KiB built
    limited = ["sh", "-c", "ulimit -f 1; exec gcc -O2 -shared -fPIC -o {out} {src}"]
    with pytest.raises(CompilerKilled, match=r"^sh was killed \(gcc: .*File size limit exceeded signal terminated "
                                             r"program \w+\) while compiling: the machine or its limits stopped it"):
        cache.get("k", source, "t", (".c", ".so"), lambda src, out: run_compiler(limited, src, out))
    assert not list(tmp_path.glob("*.err")) and not list(tmp_path.glob("*.so*"))
    path, _, cached = cache.get("k", source, "t", (".c", ".so"),
                                lambda src, out: run_compiler(["gcc", "-O2", "-shared", "-fPIC", "-o", "{out}",
                                                               "{src}"], src, out))
    assert path.exists() and not cached  # the limit lifted, the same source builds
    oom = ["sh", "-c", "echo 'cc1: out of memory allocating 4096 bytes after a total of 434176 bytes' >&2; exit 1",
           "{src}", "{out}"]
    with pytest.raises(CompilerKilled, match=r"^sh ran out of memory \(cc1: out of memory allocating"):
        cache.get("k", "int g;", "t", (".c", ".so"), lambda src, out: run_compiler(oom, src, out))
    (err,) = [p.with_suffix(".err") for p in tmp_path.glob("k-*.c") if not p.with_suffix(".so").exists()]
    assert not err.exists()
    err.write_text("gcc: internal compiler error: File size limit exceeded signal terminated program cc1")  # as cached before
    path, _, cached = cache.get("k", "int g;", "t", (".c", ".so"),
                                lambda src, out: run_compiler(["cp", "{src}", "{out}"], src, out))
    assert path.exists() and not cached
    # gcc's own crash on one candidate's code is that candidate's compile error, not the machine's
    ice = ["sh", "-c", "echo 'gcc: internal compiler error: Segmentation fault signal terminated program cc1' >&2; "
           "exit 4", "{src}", "{out}"]
    assert "Segmentation fault" in run_compiler(ice, tmp_path / "k.c", tmp_path / "k.so")


def test_a_compile_cache_that_cannot_be_written_is_named_with_what_to_set(tmp_path):
    """Its PermissionError was each candidate's crash, recorded and reused by later runs."""
    (tmp_path / "cache").write_text("")  # a file where the folder would be
    cache = BuildCache(tmp_path / "cache")
    with pytest.raises(BuildEnvironmentError, match=rf"^the compile cache {tmp_path / 'cache'} cannot be written "
                                                    rf"\(FileExistsError: .*set TUNEBENCH_CACHE to a writable folder"):
        cache.get("k", "int f;", "t", (".c", ".so"), lambda src, out: run_compiler(["cp", "{src}", "{out}"], src, out))


def test_a_user_without_a_home_gets_a_compile_cache_of_its_own_in_the_temp_folder(monkeypatch, tmp_path):
    """A container's arbitrary uid with HOME unset: Path.home() raised, and pytest --tune ended in an
    INTERNALERROR. The folder is this user's alone: another could make it first and plant libraries."""
    for name in ("TUNEBENCH_CACHE", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)

    def homeless():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", homeless)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    found = default_root()
    assert found == tmp_path / f"tunebench-cache-{os.getuid()}" and found.stat().st_mode & 0o777 == 0o700
    found.chmod(0o755)  # as an earlier tunebench made it: closed to the others now
    assert default_root() == found and found.stat().st_mode & 0o777 == 0o700
    found.rmdir()
    found.symlink_to(tmp_path)  # what another user could put there
    with pytest.raises(BuildEnvironmentError, match="is not a folder of this user's alone"):
        default_root()


def test_a_user_whose_home_cannot_be_written_builds_in_a_compile_cache_of_its_own_in_the_temp_folder(
        monkeypatch, tmp_path, axpb):
    """``docker run -u 1000`` (HOME=/) or nobody's /nonexistent: every build failed "the compile
    cache /.cache/tunebench cannot be written", and so did the gate on unchanged code."""
    for name in ("TUNEBENCH_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/proc")  # no folder can be made there, by root either
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kernel, variant = axpb
    got, want = run_once(CpuBackend(), kernel, variant, {"vec": 4, "unroll": 2, "mode": 0})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert default_root() == tmp_path / f"tunebench-cache-{os.getuid()}"


def test_a_compiler_that_is_not_there_says_so_itself(tmp_path):
    """Its FileNotFoundError was said to be a compile cache that cannot be written, and then each
    candidate's crash."""
    with pytest.raises(BuildEnvironmentError, match=r"^no-such-cc cannot be run \(No such file or directory\)"):
        BuildCache(tmp_path).get("k", "int f;", "t", (".c", ".so"),
                                 lambda src, out: run_compiler(["no-such-cc", "{src}", "{out}"], src, out))


def test_a_templates_own_error_text_is_a_compile_error_whatever_its_words(tmp_path):
    """An #error saying "Permission denied" stopped the task as the machine's failure."""
    said = ["sh", "-c", "echo 'k.c:2:2: error: #error TILE too large: Permission denied; No space left on device' >&2; "
            "exit 1", "{src}", "{out}"]
    with pytest.raises(CompileError, match="TILE too large: Permission denied"):
        BuildCache(tmp_path).get("k", "int f;", "t", (".c", ".so"), lambda src, out: run_compiler(said, src, out))


def test_local_headers_are_read_as_the_compiler_reads_them_and_named_from_the_template(tmp_path):
    """A #pragma once header included again from another folder, inside a disabled branch and
    then for real, two headers including each other, one without a last newline: the kernel
    compiles and computes; an error in a header names it by its path."""
    (tmp_path / "detail").mkdir()
    (tmp_path / "common.h").write_text('#pragma once\n#include "detail/loads.h"\n'
                                       "static float twice(float v) { return v + v; }\n")
    (tmp_path / "detail" / "loads.h").write_text('#pragma once\n#include "../common.h"\n'
                                                  "static float load(const float *x, int i) { return x[i]; }")
    (tmp_path / "k.c").write_text('#ifdef NOT_DEFINED\n#include "common.h"\n#endif\n#include "common.h"\n'
                                  '#include "detail/loads.h"\nvoid k(const float *x, float *y, int n)\n'
                                  '{\n    for (int i = 0; i < n; ++i) y[i] = twice(load(x, i));\n}\n')

    def declared():
        variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({"tile": [1]}),
                          heuristic=lambda shape: {"tile": 1})
        return variant, scaling("headers_test", variant, 2.0, 100)

    variant, kernel = declared()
    got, want = run_once(CpuBackend(), kernel, variant, {"tile": 1}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (tmp_path / "detail" / "loads.h").write_text('#pragma once\n#include "../common.h"\nstatic float load(const '
                                                  'float *x, int i) { return x[i] + BROKEN_HERE; }\n')
    with pytest.raises(CompileError, match=r"detail/loads.h:3:.*BROKEN_HERE"):
        CpuBackend().build(declared()[1], declared()[0], {"tile": 1}, "float32")
    (tmp_path / "common.h").write_text('#include "detail/loads.h"\n')  # no guard: the compiler would loop
    with pytest.raises(KernelError, match="loads.h: common.h includes itself, without a guard"):
        declared()[0].template  # noqa: B018


def test_local_headers_that_include_each_other_are_inlined_once_each_and_a_commented_include_is_none(tmp_path):
    """Each header was copied at every #include of it (copies grew as Fibonacci's numbers with the
    depth of the includes), and an #include in a comment was inlined, its header's own comment
    closing the template's."""
    (tmp_path / "lib").mkdir()
    depth = 18
    for i in range(depth):  # h_i includes h_{i+1} and h_{i+2}; guards and #pragma once alike
        guard = ["#pragma once"] if i % 2 else [f"#ifndef LIB_H{i}", f"#define LIB_H{i}"]
        body = [*guard, *(f'#include "h{j}.h"' for j in (i + 1, i + 2) if j < depth),
                f"static inline int f{i}(void) {{ return {i}; }}", *([] if i % 2 else ["#endif"])]
        (tmp_path / "lib" / f"h{i}.h").write_text("\n".join(body) + "\n")
    (tmp_path / "old.h").write_text("/* kept for reference */\nstatic int old_helper(void) { return 0; }\n")
    (tmp_path / "k.c").write_text('/* we used to include\n#include "old.h"\n   but no longer */\n#include "lib/h0.h"\n'
                                  f"int k(void) {{ return f0() + f{depth - 1}(); }}\n")
    text = inline_includes(tmp_path / "k.c")
    assert all(text.count(f"int f{i}(void)") == 1 for i in range(depth)), len(text)
    assert "old_helper" not in text and '#include "old.h"' in text  # the comment, as written
    (tmp_path / "out.c").write_text(text)
    subprocess.run(["gcc", "-c", "-Wall", "-Werror", "-o", str(tmp_path / "out.o"), str(tmp_path / "out.c")], check=True)


@pytest.mark.parametrize("files, template, folder", [
    # a header that begins with a default, not a guard: its #if is a condition on its include
    ({"cfg.h": "#ifndef BLOCK\n#define BLOCK 2\n#endif\n#ifdef USE_X\n#include \"x.h\"\n#endif\n"
               "int cfg(void) { return BLOCK; }\n", "x.h": "#pragma once\nint x_fn(void) { return 7; }\n"},
     '#include "cfg.h"\n#include "x.h"\nint k(void) { return x_fn() + cfg(); }\n', None),
    # an X-macro file, read twice on purpose; a "guard" with an #else, read twice for its #else
    ({"ops.def": "#ifndef OP\n#define OP(x)\n#endif\nOP(add)\nOP(sub)\n#undef OP\n",
      "a.h": "#ifndef A_H\n#define A_H\nint first = 1;\n#else\nint second = 2;\n#endif\n"},
     '#define OP(x) int x##_a;\n#include "ops.def"\n#define OP(x) int x##_b;\n#include "ops.def"\n'
     '#include "a.h"\n#include "a.h"\nint k(void) { return add_b + sub_a + first + second; }\n', None),
    # an include in a // comment continued by a backslash, and in a macro's body
    ({"d.h": "int dup(void) { return 1; }\n"},
     '#include "d.h"\n// old: \\\n#include "d.h"\n#define TWICE 1 \\\n#include "d.h"\nint k(void) { return dup(); }\n',
     None),
    # headers that include each other under #if !defined guards, an include opening a comment, a form feed
    ({"p.h": '#if !defined(P_H)\n#define P_H\n#include "q.h"\nint p_fn(void) { return 1; }\n#endif\n',
      "q.h": '#if !defined(Q_H)\n#define Q_H\n#include "p.h"\nint q_fn(void) { return 2; }\n#endif\n'},
     '#include "p.h" /* the helpers,\n   see p.h */\n\f\nint k(void) { return p_fn() + q_fn(); }\n'
     '_Static_assert(__LINE__ == 5, "line");\n', None),
    # a #pragma once header beside the template that is in its header folder too, as a library's header reads it
    ({"a.h": "#pragma once\nstatic int a_fn(void) { return 1; }\n", "b.h": '#pragma once\n#include "a.h"\n'},
     '#include "a.h"\n#include <b.h>\nint k(void) { return a_fn(); }\n', "."),
    # a header folder above the template's: a header beside it, not named from the folder, is inlined
    ({"common.h": "static int scale(void) { return 2; }\n"},
     '#include "common.h"\nint k(void) { return scale(); }\n', ".."),
])
def test_headers_are_read_where_and_as_often_as_the_compiler_reads_them(tmp_path, files, template, folder):
    """Each was read otherwise (a header skipped, read twice, or read in a comment): gcc refused
    the template it builds, which it compiles as written (with the header folder its flags give)."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "k.c").write_text(template)
    given = (tmp_path / folder).resolve() if folder else None
    flags = [f"-I{given}"] if given else []
    subprocess.run(["gcc", "-c", *flags, "-o", "as_written.o", "k.c"], cwd=tmp_path, check=True)
    (tmp_path / "build").mkdir()  # where a build compiles it, with the flags' header folder, not beside it
    (tmp_path / "build" / "k.c").write_text(inline_includes(tmp_path / "k.c", dirs=(given,) if given else (),
                                                            library={}))
    subprocess.run(["gcc", "-c", *flags, "-o", "k.o", "k.c"], cwd=tmp_path / "build", check=True)


#: A header library's computed include, as Thrust's ``#include __THRUST_DEVICE_SYSTEM_TAG_HEADER``.
LIBRARY = {"lib/config.h": "#pragma once\n#define LIB_POLICY_HEADER <lib/policy.h>\n",
           "lib/policy.h": "#pragma once\nstatic inline float lib_scale(void) { return 2.0f; }\n",
           "lib/all.h": '#pragma once\n#include "config.h"\n#include "policy.h"\n#include LIB_POLICY_HEADER\n'}


def test_a_header_librarys_computed_include_builds_and_an_edit_of_any_header_it_reads_is_another_source(tmp_path):
    """Inlined, the library's headers met the real files its ``#include MACRO`` made the compiler
    read, and every #pragma once header was defined twice (a vendored CUB failed to build)."""
    for name, text in LIBRARY.items():
        (tmp_path / "include" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "include" / name).write_text(text)
    (tmp_path / "k.c").write_text("#include <lib/all.h>\nvoid k(const float *x, float *y, int n)\n"
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = lib_scale() * x[i];\n}\n")

    def declared():
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=("-Iinclude",), origin=tmp_path)
        return variant, scaling("library_test", variant, 2.0, 9)

    variant, kernel = declared()
    assert "#include <lib/all.h>" in variant.template and "return 2.0f" not in variant.template
    assert [line for line in variant.template.splitlines() if line.startswith("#line 1")] == [
        f'#line 1 "include/lib/{name}"' for name in ("all.h", "config.h", "policy.h")]
    got, want = run_once(CpuBackend(), kernel, variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    before = variant.source_hash
    (tmp_path / "include" / "lib" / "policy.h").write_text(LIBRARY["lib/policy.h"].replace("2.0f", "2.5f"))
    assert declared()[0].source_hash != before


def test_a_computed_include_beside_the_template_builds_and_an_edit_of_a_header_it_may_read_is_another_source(
        tmp_path):
    """``#include IMPL``, a param naming the header: the build, of a copy elsewhere, found no
    header ("impl_a.h: No such file"), and with ``-I.`` an edited impl_a.h kept the old source
    hash, so its old trials and builds were reused (--tune-fresh too) and a wrong kernel passed."""
    (tmp_path / "src").mkdir()
    for name, factor in (("impl_a.h", "2.0f"), ("impl_b.h", "2.0f * 1.0f")):
        (tmp_path / "src" / name).write_text(f"static inline float scale(void) {{ return {factor}; }}\n")
    (tmp_path / "src" / "k.c").write_text("#include IMPL\nvoid k(const float *x, float *y, int n)\n"
                                          "{\n    for (int i = 0; i < n; ++i) y[i] = scale() * x[i];\n}\n")

    def declared():
        variant = Variant(source="src/k.c", entry="k", space=Space({"IMPL": ['"impl_a.h"', '"impl_b.h"']}),
                          heuristic=lambda shape: {"IMPL": '"impl_a.h"'}, origin=tmp_path)
        return variant, scaling("computed_include_test", variant, 2.0, 9)

    variant, kernel = declared()
    for impl in ('"impl_a.h"', '"impl_b.h"'):
        got, want = run_once(CpuBackend(), kernel, variant, {"IMPL": impl}, n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    before = variant.source_hash
    (tmp_path / "src" / "impl_a.h").write_text("static inline float scale(void) { return 3.0f; }\n")
    edited, kernel = declared()
    assert edited.source_hash != before
    got, want = run_once(CpuBackend(), kernel, edited, {"IMPL": '"impl_a.h"'}, n=9)
    np.testing.assert_allclose(got, 1.5 * want, rtol=1e-6)  # the edited header built, not the cached build


def test_a_computed_include_of_a_param_naming_its_header_bare_says_to_quote_it(tmp_path):
    """``"impl_a.h"`` in Python is ``impl_a.h`` to the preprocessor: gcc said only that #include
    expects "FILENAME" or <FILENAME>, of a line that reads no file name."""
    (tmp_path / "impl_a.h").write_text("static inline float scale(void) { return 2.0f; }\n")
    (tmp_path / "k.c").write_text("#include IMPL\nvoid k(const float *x, float *y, int n)\n"
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = scale() * x[i];\n}\n")
    variant = Variant(source="k.c", entry="k", space=Space({"IMPL": ["impl_a.h"]}),
                      heuristic=lambda shape: {"IMPL": "impl_a.h"}, origin=tmp_path)
    with pytest.raises(CompileError) as error:
        CpuBackend().build(scaling("bare_include_test", variant, 2.0, 9), variant, {"IMPL": "impl_a.h"}, "float32")
    assert '#include expects "FILENAME" or <FILENAME>' in str(error.value)
    assert str(error.value).endswith(
        "(tunebench: param 'IMPL' is impl_a.h, which #include IMPL at k.c line 1 reads bare: quote the header's name "
        "in its value, '\"impl_a.h\"' (or '<impl_a.h>' for a header of the include path))")


def test_a_computed_include_of_a_param_naming_a_file_bare_is_a_declaration_error_before_any_build(tmp_path):
    """Every config with the value failed to compile alike, each with gcc's error and the hint; a
    value that is an identifier may be a macro naming a header, and is left to the compiler."""
    (tmp_path / "impl_a.h").write_text("static inline float scale(void) { return 2.0f; }\n")
    (tmp_path / "k.c").write_text('#define IMPL_A "impl_a.h"\n#include IMPL\nvoid k(const float *x, float *y, '
                                  "int n)\n{\n    for (int i = 0; i < n; ++i) y[i] = scale() * x[i];\n}\n")
    for values, fault in ((['"impl_a.h"', "IMPL_A"], None), (['"impl_a.h"', "impls/impl_a.h"], "impls/impl_a.h")):
        variant = Variant(source="k.c", entry="k", space=Space({"IMPL": values}),
                          heuristic=lambda shape: {"IMPL": '"impl_a.h"'}, origin=tmp_path)
        kernel = scaling("bare_include_declared", variant, 2.0, 9)
        if fault is None:
            kernel.check(variant, "cpu")
            continue
        with pytest.raises(KernelError, match=re.escape(
                f"kernel 'bare_include_declared', the cpu variant: param 'IMPL' is {fault}, which #include IMPL at k.c "
                f"line 2 reads bare: quote the header's name in its value, '\"{fault}\"' (or '<{fault}>' for a header of the "
                f"include path)")):
            kernel.check(variant, "cpu")


@pytest.mark.parametrize("included", ["lib.h", "lib/detail.h"])  # the header the template includes, or one it does
def test_a_computed_include_in_a_header_of_an_include_folder_naming_a_file_bare_is_a_declaration_error(
        tmp_path, included):
    """Only the template's own ``#include IMPL`` was checked: one of a header the compiler reads
    from an -I folder passed collection, and every config with the value failed to compile alike."""
    (tmp_path / "inc" / "lib").mkdir(parents=True)
    (tmp_path / "inc" / "impl.h").write_text("static inline float scale(void) { return 2.0f; }\n")
    (tmp_path / "inc" / "lib.h").write_text("#pragma once\n" + ("#include IMPL\n" if included == "lib.h"
                                                                 else '#include "lib/detail.h"\n'))
    (tmp_path / "inc" / "lib" / "detail.h").write_text("#pragma once\n/* the implementation */\n#include IMPL\n")
    (tmp_path / "k.c").write_text('#include "lib.h"\nvoid k(const float *x, float *y, int n)\n'
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = scale() * x[i];\n}\n")
    where = "inc/lib.h line 2" if included == "lib.h" else "inc/lib/detail.h line 3"
    hint = (f"param 'IMPL' is impl.h, which #include IMPL at {where} reads bare: quote the header's name in its "
            f"value, '\"impl.h\"' (or '<impl.h>' for a header of the include path)")
    for values in (['"impl.h"', "impl.h"], ['"impl.h"', "<impl.h>"]):
        variant = Variant(source="k.c", entry="k", space=Space({"IMPL": values}),
                          heuristic=lambda shape: {"IMPL": '"impl.h"'}, flags=("-Iinc",), origin=tmp_path)
        kernel = scaling("bare_in_header", variant, 2.0, 9)
        if "impl.h" not in values:
            kernel.check(variant, "cpu")
            continue
        with pytest.raises(KernelError, match=re.escape(f"kernel 'bare_in_header', the cpu variant: {hint}")):
            kernel.check(variant, "cpu")
        with pytest.raises(CompileError) as error:  # gcc refuses it, and its error gets the hint too
            CpuBackend().build(kernel, variant, {"IMPL": "impl.h"}, "float32")
        assert '#include expects "FILENAME" or <FILENAME>' in str(error.value)
        assert str(error.value).endswith(f"(tunebench: {hint})")


@pytest.mark.parametrize("value, flags, edited", [
    ('"impls/a.h"', (), "impls/a.h"),  # a header in a folder below
    ('"a.h"', (), "detail/d.h"),  # a header the one named includes
    ('"impl_a.h"', ("-Iinc",), "inc/impl_a.h"),  # a header of an include folder
])
def test_every_header_a_computed_include_of_a_param_may_read_is_hashed(tmp_path, value, flags, edited):
    """Only the headers beside the template were hashed: an edit of any of these reused the old
    trials and builds."""
    for name in ("impls/a.h", "a.h", "detail/d.h", "inc/impl_a.h"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "impls" / "a.h").write_text("static inline float scale(void) { return 2.0f; }\n")
    (tmp_path / "a.h").write_text('#include "detail/d.h"\n')
    (tmp_path / "detail" / "d.h").write_text("static inline float scale(void) { return 2.0f; }\n")
    (tmp_path / "inc" / "impl_a.h").write_text("static inline float scale(void) { return 2.0f; }\n")
    (tmp_path / "k.c").write_text("#include IMPL\nvoid k(const float *x, float *y, int n)\n"
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = scale() * x[i];\n}\n")

    def declared():
        variant = Variant(source="k.c", entry="k", space=Space({"IMPL": [value]}), flags=flags,
                          heuristic=lambda shape: {"IMPL": value}, origin=tmp_path)
        return variant, scaling("computed_param_test", variant, 2.0, 9)

    variant, kernel = declared()
    got, want = run_once(CpuBackend(), kernel, variant, {"IMPL": value}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    before = variant.source_hash
    (tmp_path / edited).write_text("static inline float scale(void) { return 3.0f; }\n")
    assert declared()[0].source_hash != before


@pytest.mark.parametrize("target, flags, value, reads", [
    ("cpu", ("-I../../lib/include",), "<../common/x.h>", "lib"),  # gcc has the template's folder as -iquote:
    ("cpu", ("-I../../lib/include",), '"../common/x.h"', "proj"),  # a quoted include's alone
    ("cuda", ("-I../../lib/include",), '"../common/x.h"', "lib"),  # nvcc has it as an -I after the flags'
    ("cuda", ("-isystem", "../../lib/include"), '"../common/x.h"', "proj"),  # ahead of every -isystem folder
])
def test_a_computed_include_leading_out_of_its_folder_hashes_the_header_the_build_reads(tmp_path, target, flags, value,
                                                                                        reads):
    """A computed include of ``../common/x.h`` beside ``-I../../lib/include``: the hash looked for
    it beside the template first (proj/common/x.h), in the order of neither build: gcc, given a
    copy's folder as -iquote, searches it for a quoted include alone (an angle one reads
    lib/common/x.h), and nvcc, given it as an -I after the flags', reads lib/common/x.h for a
    quoted one too, and proj/common/x.h ahead of an -isystem folder's (which was looked in first, as
    a "dir" of the flags). An edit of the header built kept the source hash, and its trials; one of
    the header never read was another source. The hash follows each build's order."""
    for where, factor in (("lib", "3.0f"), ("proj", "5.0f")):
        (tmp_path / where / "common").mkdir(parents=True)
        (tmp_path / where / "common" / "x.h").write_text(f"#define FACTOR {factor}\n")
    (tmp_path / "lib" / "include").mkdir()
    (tmp_path / "proj" / "suites").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    template = tmp_path / "proj" / "suites" / ("k.cu" if target == "cuda" else "k.c")
    template.write_text("#include IMPL\n" + (
        'extern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n"
        if target == "cuda" else
        "void k(const float *x, float *y, int n)\n{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n"))
    config = {"IMPL": value}

    def declared():
        return Variant(source=template.name, entry="k", space=Space({"IMPL": [value]}), heuristic=lambda shape: config,
                       flags=flags, launch=(lambda c, shape: (1, 32)) if target == "cuda" else None,
                       origin=template.parent)

    variant = declared()
    read, other = (tmp_path / where / "common" / "x.h" for where in (reads, "proj" if reads == "lib" else "lib"))
    named = [line for line in variant.template.splitlines() if line.startswith("#line 1")]
    assert named == [f'#line 1 "{os.path.relpath(read, template.parent)}"']
    factor = 3.0 if reads == "lib" else 5.0
    if target == "cpu":
        got, want = run_once(CpuBackend(), scaling(f"computed_out_test_{value[0] == '<':d}", variant, factor, 9),
                             variant, config, n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    elif shutil.which("nvcc"):  # the copy the build compiles, with its flags
        (tmp_path / "build").mkdir()
        (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, config, "float32"))
        code = subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                              cwd=tmp_path / "build", capture_output=True, text=True, check=True).stdout
        assert f"y[i] = {factor}f * x[i]" in code
    assert_hash_follows(declared, variant, read, other)


def test_a_header_a_computed_include_of_a_param_names_linked_beside_the_template_hashes_alike_in_every_checkout(
        tmp_path):
    """``IMPL='"link.h"'``, a link beside the template to a file installed apart: the compiler reads
    it by the link's path, which moves with the checkout; named by its target's path from the
    template's folder, a checkout at another depth was another source."""
    real = tmp_path / "opt" / "x.h"
    real.parent.mkdir()
    real.write_text("#define FACTOR 3.0f\n")
    found = []
    for top in (tmp_path / "a", tmp_path / "b" / "c" / "d"):
        (top / "proj" / "suites").mkdir(parents=True)
        (top / "proj" / "pyproject.toml").write_text("")
        (top / "proj" / "suites" / "link.h").symlink_to(real)
        (top / "proj" / "suites" / "k.c").write_text(
            "#include IMPL\nvoid k(const float *x, float *y, int n)\n"
            "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
        variant = Variant(source="k.c", entry="k", space=Space({"IMPL": ['"link.h"']}),
                          heuristic=lambda shape: {"IMPL": '"link.h"'}, origin=top / "proj" / "suites")
        assert [line for line in variant.template.splitlines() if line.startswith("#line")] == ['#line 1 "link.h"']
        found.append(variant.source_hash)
    assert found[0] == found[1]

def test_a_computed_include_of_a_header_in_a_quote_folder_of_the_flags_hashes_the_one_built(tmp_path):
    """``IMPL='"impl.h"'``, a header of the name beside the template and in the flags'
    ``-iquote ../alt``: gcc builds a copy of the template, given its folder as an -iquote after
    the flags' (see :func:`~tunebench.backends.cpu.copy_flags`), so it reads alt/impl.h, where
    the hash looked beside the template first: an edit of the header built kept the source
    hash, and its trials, and one of the header never read was another source."""
    for where, factor in (("alt", "3.0f"), ("suites", "5.0f")):
        (tmp_path / where).mkdir()
        (tmp_path / where / "impl.h").write_text(f"#define FACTOR {factor}\n")
    (tmp_path / "suites" / "k.c").write_text("#include IMPL\nvoid k(const float *x, float *y, int n)\n"
                                             "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    config = {"IMPL": '"impl.h"'}

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"IMPL": [config["IMPL"]]}), heuristic=lambda shape: config,
                       flags=("-iquote", "../alt"), origin=tmp_path / "suites")

    variant = declared()
    assert [line for line in variant.template.splitlines() if line.startswith("#line 1")] == [
        '#line 1 "../alt/impl.h"']
    got, want = run_once(CpuBackend(), scaling("computed_quote_test", variant, 3.0, 9), variant, config, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_hash_follows(declared, variant, tmp_path / "alt" / "impl.h", tmp_path / "suites" / "impl.h")


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_computed_include_of_a_macro_hashes_the_headers_of_the_flags_folders_the_copy_searches_first(tmp_path,
                                                                                                       target):
    """``#define K_IMPL "impl.h"`` / ``#include K_IMPL`` in the template, impl.h beside it and in
    the flags' ``-iquote ../alt`` (a CUDA variant's ``-I../alt``): the build of the template's
    copy is given its folder after the flags' folders (see
    :func:`~tunebench.backends.cpu.copy_flags`, :func:`~tunebench.backends.cuda.copy_flags`),
    so it reads alt/impl.h, where the hash named the template folder's headers alone: an edit
    of the header built kept the source hash, and its trials."""
    if target == "cuda" and not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for where, factor in (("alt", "3.0f"), ("suites", "5.0f")):
        (tmp_path / where).mkdir()
        (tmp_path / where / "impl.h").write_text(f"#define FACTOR {factor}\n")
    body = ("{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n" if target == "cpu" else
            "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n")
    source = "k.c" if target == "cpu" else "k.cu"
    (tmp_path / "suites" / source).write_text(
        '#define K_IMPL "impl.h"\n#include K_IMPL\n'
        + ("" if target == "cpu" else 'extern "C" __global__ ') + "void k(const float *x, float *y, int n)\n" + body)

    def declared():
        return Variant(source=source, entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=("-iquote", "../alt") if target == "cpu" else ("-I../alt",),
                       launch=None if target == "cpu" else lambda c, shape: (1, 32), origin=tmp_path / "suites")

    variant = declared()
    text, texts = variant.template, variant.file_texts
    if target == "cpu":
        got, want = run_once(CpuBackend(), scaling("computed_macro_quote_test", variant, 3.0, 9), variant,
                             {"tile": 1}, n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        (tmp_path / "build").mkdir()
        (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, {"tile": 1}, "float32"))
        code = subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                              cwd=tmp_path / "build", capture_output=True, text=True, check=True).stdout
        assert "y[i] = 3.0f * x[i]" in code
    (tmp_path / "alt" / "impl.h").write_text("#define FACTOR 4.0f\n")
    assert declared().source_hash != variant.source_hash
    if target == "cpu":  # the gate's build of the recorded template reads the header as tuned
        assert_recorded_build_scales("computed_macro_quote_gate_test", variant, text, texts, {"tile": 1})


@pytest.mark.parametrize("target, reach, flags, x_h", [
    ("cpu", '"../lib/x/x.h"', ("-I../lib/inc",), '#include "scale.h"'),  # an ordinary include of a header inlined
    ("cpu", "<x.h>", ("-I../lib/x", "-I../lib/inc"), '#include "scale.h"'),  # of a library's header, read in place
    ("cpu", "<x.h>", ("-I../lib/x", "-I../lib/inc"), "#include SCALE"),  # a computed include of a library's header
    ("cuda", "<x.h>", ("-I../lib/x", "-isystem", "../lib/inc"), "#include <scale.h>"),  # nvcc's: an -I folder
])
def test_an_include_the_copy_reads_searches_the_folders_of_its_computed_includes_where_the_build_does(
        tmp_path, target, reach, flags, x_h):
    """c/pick.h, inlined (no -I folder gives "../c/pick.h"), holds ``#include IMPL``, so the build of the template's copy is given c/
    as an -iquote folder after the flags' (a CUDA variant's, an -I folder: see
    :func:`~tunebench.backends.cpu.copy_flags`, :func:`~tunebench.backends.cuda.copy_flags`),
    which gcc searches for every quoted include it reads, nvcc for every include: lib/x/x.h's
    scale.h is c/'s, where the hash searched the flags' folders alone and named lib/inc/'s. An
    edit of the header built kept the source hash, and its trials."""
    if target == "cuda" and not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    folders = {"c": tmp_path / "proj" / "c", "inc": tmp_path / "proj" / "lib" / "inc"}
    scale_headers(tmp_path / "proj", '"../c/pick.h"', folders, "c")
    (folders["c"] / "pick.h").write_text(f"#include IMPL\n#include {reach}\n")
    (folders["c"] / "impl.h").write_text("/* the implementation picked */\n")
    (tmp_path / "proj" / "lib" / "x").mkdir()
    (tmp_path / "proj" / "lib" / "x" / "x.h").write_text(x_h + "\n")
    config = {"IMPL": '"impl.h"', **({"SCALE": '"scale.h"'} if "SCALE" in x_h else {})}

    def declared():
        return Variant(source="k.c", entry="k", space=Space({name: [value] for name, value in config.items()}),
                       heuristic=lambda shape: config, flags=flags,
                       launch=None if target == "cpu" else lambda c, shape: (1, 32), origin=tmp_path / "proj" / "suites")

    variant = declared()
    if target == "cpu":
        name = "copy_quote_folder_test_" + re.sub(r"\W", "", reach + x_h)
        got, want = run_once(CpuBackend(), scaling(name, variant, 3.0, 9), variant, config, n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:  # the copy the build compiles, with its flags
        (tmp_path / "build").mkdir()
        (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, config, "float32"))
        code = subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                              cwd=tmp_path / "build", capture_output=True, text=True, check=True).stdout
        assert "y[i] = 3.0f * x[i]" in code
    assert_hash_follows(declared, variant, folders["c"] / "scale.h", folders["inc"] / "scale.h")


@pytest.mark.parametrize("flags, defines", [
    (("-I", "../inc"), '#define K_IMPL "impl.h"\n'),
    (("-I../inc",), "#define K_IMPL <impl.h>\n"),
    (("-isystem", "../inc"), '#define K_IMPL "impl.h"\n'),
    (("-idirafter", "../inc"), "#define K_IMPL <impl.h>\n"),
    # a value naming another macro, which the hash does not follow: any header of the folders searched
    (("-I", "../inc"), '#define IMPL_OF_Q "impl.h"\n#define K_IMPL IMPL_OF_Q\n'),
    # the flags' value, ahead of the template's default
    (("-I", "../inc", '-DK_IMPL="impl.h"'), '#ifndef K_IMPL\n#define K_IMPL "other.h"\n#endif\n'),
    (("-I", "../inc", "--define", 'K_IMPL="impl.h"'), '#ifndef K_IMPL\n#define K_IMPL "other.h"\n#endif\n'),  # gcc's
    # gcc gives the preprocessor -Wp's words as its own options
    (("-I", "../inc", '-Wp,-DK_IMPL="impl.h"'), '#ifndef K_IMPL\n#define K_IMPL "other.h"\n#endif\n'),
    (("-I", "../inc", '-Wp,-UK_IMPL,-D,K_IMPL="impl.h"'), '#ifndef K_IMPL\n#define K_IMPL "other.h"\n#endif\n'),
    # a value whose macro the preprocessor expands between < and >: a name of no header, not impl.h's
    (("-I", "../inc"), "#define IMPL_NAME impl.h\n#define K_IMPL <IMPL_NAME>\n"),
])
def test_a_computed_include_of_a_macro_naming_a_header_of_a_header_folder_of_the_flags_hashes_it(tmp_path, flags,
                                                                                                  defines):
    """``#define K_IMPL "impl.h"`` / ``#include K_IMPL`` in the template, impl.h in the flags'
    ``-I ../inc`` alone (or their -isystem, -idirafter folder; ``<impl.h>`` alike): gcc reads it
    there, where the hash looked beside the template and in the flags' -iquote folders alone: an
    edit of the header built kept the source hash, and its trials."""
    for where in ("inc", "suites"):
        (tmp_path / where).mkdir()
    (tmp_path / "inc" / "impl.h").write_text("#define FACTOR 3.0f\n")
    (tmp_path / "suites" / "other.h").write_text("#define FACTOR 5.0f\n")
    (tmp_path / "suites" / "k.c").write_text(f"{defines}#include K_IMPL\nvoid k(const float *x, float *y, int n)\n"
                                             "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, origin=tmp_path / "suites")

    variant = declared()
    text, texts = variant.template, variant.file_texts
    got, want = run_once(CpuBackend(), scaling("computed_macro_folder_test", variant, 3.0, 9), variant, {"tile": 1},
                         n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_hash_follows(declared, variant, tmp_path / "inc" / "impl.h")
    # the gate's build of the recorded template reads the header as tuned
    assert_recorded_build_scales("computed_macro_folder_gate_test", variant, text, texts, {"tile": 1})


def assert_define_names_the_header(tmp_path: Path, monkeypatch, flags: tuple[str, ...], header: str) -> None:
    """The CUDA variant of ``flags`` whose template's ``#include K_IMPL`` (of the default "other.h")
    nvcc reads as inc/``header``: built scaling by 3, its source hash following an edit of that
    header and none of inc/unread.h, and the gate's build of the recorded template reading it as tuned."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for where in (str(Path("inc", header).parent), "suites", "build"):
        (tmp_path / where).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "build")
    (tmp_path / "inc" / header).write_text("#define FACTOR 3.0f\n")
    (tmp_path / "inc" / "unread.h").write_text("#define FACTOR 7.0f\n")
    (tmp_path / "suites" / "other.h").write_text("#define FACTOR 5.0f\n")
    (tmp_path / "suites" / "k.cu").write_text(
        '#ifndef K_IMPL\n#define K_IMPL "other.h"\n#endif\n#include K_IMPL\n'
        'extern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n")

    def declared():
        return scaling_variant(tmp_path / "suites", flags)

    def scales_by_3(variant):
        return scales_by(tmp_path / "build", variant, "3.0f")

    variant = declared()
    text, texts = variant.template, variant.file_texts
    assert scales_by_3(variant)
    assert_hash_follows(declared, variant, tmp_path / "inc" / header, tmp_path / "inc" / "unread.h")
    assert scales_by_3(recorded_build(declared, text, texts))


@pytest.mark.parametrize("flags", [
    ("-I../inc", '-DUNUSED=1,K_IMPL="impls/impl.h"'),
    ("-I../inc", "-D", 'UNUSED=1,K_IMPL="impls/impl.h"'),
    ("-I../inc", '-D=UNUSED=1,K_IMPL="impls/impl.h"'),
    ("-I../inc", "--define-macro", 'UNUSED=1,K_IMPL="impls/impl.h"'),
    ("-I../inc", '--define-macro=UNUSED=1,K_IMPL="impls/impl.h"'),
    # its host compiler's -D, whose value the shell nvcc runs it in reads, quoted for it (or escaped for both)
    ("-I../inc", "-Xcompiler", """-DK_IMPL='"impls/impl.h"'"""),
    ("-I../inc", """-Xcompiler=-DUNUSED,-DK_IMPL='"impls/impl.h"'"""),
    ("-I../inc", "--compiler-options", r'-DK_IMPL=\\\"impls/impl.h\\\"'),
    ("-I../inc", """--compiler-options=-DUNUSED -DK_IMPL='"impls/impl.h"'"""),
])
def test_each_macro_an_nvcc_define_gives_names_the_header_its_computed_include_reads(tmp_path, monkeypatch, flags):
    """nvcc reads -D's value as a list: ``-DUNUSED=1,K_IMPL="impls/impl.h"`` defines both
    (``nvcc -E`` reads inc/impls/impl.h); and gives its host compiler, which preprocesses the
    device code, -Xcompiler's -D. The hash read one macro, UNUSED, of the value
    '1,K_IMPL="impls/impl.h"', and no -Xcompiler flag, so K_IMPL was the template's default
    alone, "other.h", and the header nvcc read was unhashed: an edit kept the source hash, and
    its trials. An -Xcompiler's -D is no -D of nvcc's own: read as one too, with the shell's
    quotes, its value named no header, and every header of the folders was hashed (an edit of
    inc/unread.h, which no build reads, measured it again). The gate's build of the recorded
    template reads it as tuned."""
    assert_define_names_the_header(tmp_path, monkeypatch, flags, "impls/impl.h")


@pytest.mark.parametrize("flags, header", [
    (("-I../inc", '-DK_IMPL="impls,v2/impl.h"'), "impls,v2/impl.h"),
    (("-I../inc", "--define-macro", 'UNUSED="a,b",K_IMPL="impls,v2/impl.h"'), "impls,v2/impl.h"),
    (("-I../inc", r'-DK_IMPL=\"impls/impl.h\"'), "impls/impl.h"),  # nvcc's escapes: "impls/impl.h"
    (("-I../inc", r'-DK_IMPL=\"impls\,v2/impl.h\"'), "impls,v2/impl.h"),  # \, is a comma, no split
    # its host compiler's -D, whose value nvcc reads so too: gcc -DK_IMPL='"impls,v2/impl.h"'
    (("-I../inc", "-Xcompiler", """-DK_IMPL='"impls,v2/impl.h"'"""), "impls,v2/impl.h"),
    (("-I../inc", "-Xcompiler", """-DUNUSED="a,b",-DK_IMPL='"impls,v2/impl.h"'"""), "impls,v2/impl.h"),
    # \\ is a backslash to nvcc, the " after it opens its quotes: gcc -DK_IMPL=\"impls,v2/impl.h\"
    (("-I../inc", "-Xcompiler", r'-DK_IMPL=\\"impls,v2/impl.h\\"'), "impls,v2/impl.h"),
])
def test_an_nvcc_define_list_splits_at_no_comma_inside_double_quotes_and_reads_its_escapes(
        tmp_path, monkeypatch, flags, header):
    """nvcc splits -D's list at no comma inside double quotes, and keeps them:
    ``-DK_IMPL="impls,v2/impl.h"`` is the one macro, the header's name (``nvcc --dryrun``: ``-D
    "K_IMPL=\\"impls,v2/impl.h\\""``); a backslash escapes the character after it, dropped.
    Split at every comma and read without the escapes, K_IMPL was ``"impls`` or
    ``\\"impls/impl.h\\"``, which named no header: the header nvcc read, in a subfolder, was
    unhashed (an edit kept the source hash, and its trials), and every header of the folders was
    hashed instead."""
    assert_define_names_the_header(tmp_path, monkeypatch, flags, header)


def test_a_computed_include_of_a_header_read_in_place_skips_an_iquote_folder_that_is_not_there(tmp_path):
    """A header of the flags' -I folder holding ``#include K_IMPL`` of a value the hash cannot
    name, beside an -iquote folder of another machine's (absolute, not checked): the variant
    could not be read ("cannot be read (No such file or directory)") where gcc skips the folder."""
    for where in ("inc", "suites"):
        (tmp_path / where).mkdir()
    (tmp_path / "inc" / "impl.h").write_text("#define FACTOR 3.0f\n")
    (tmp_path / "inc" / "lib.h").write_text('#define IMPL_OF_Q "impl.h"\n#define K_IMPL IMPL_OF_Q\n#include K_IMPL\n')
    (tmp_path / "suites" / "k.c").write_text("#include <lib.h>\nvoid k(const float *x, float *y, int n)\n"
                                             "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=("-I", "../inc", "-iquote", "/nonexistent-tunebench/include"), origin=tmp_path / "suites")

    variant = declared()
    got, want = run_once(CpuBackend(), scaling("computed_in_place_test", variant, 3.0, 9), variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_hash_follows(declared, variant, tmp_path / "inc" / "impl.h")


@pytest.mark.parametrize("include", ["param", "macro"])
def test_a_computed_include_of_an_inlined_header_hashes_the_header_of_the_folder_the_build_searches_first(
        tmp_path, include):
    """The template (``#include KIND``) and the header it inlines from sub/ (``#include IMPL``, a
    param's '"impl.h"', or a macro sub/h.h defines) both hold a computed include: gcc builds a
    copy of the template, sub/h.h inlined, given their folders as -iquote folders in that order
    (see :func:`~tunebench.backends.cpu.copy_flags`), so sub/h.h's include reads the template's
    impl.h, where the hash looked beside sub/h.h alone: an edit of the header built kept the
    source hash, and its trials."""
    (tmp_path / "suites" / "sub").mkdir(parents=True)
    (tmp_path / "suites" / "kind.h").write_text("/* the kind */\n")
    (tmp_path / "suites" / "impl.h").write_text("#define FACTOR 3.0f\n")
    (tmp_path / "suites" / "sub" / "impl.h").write_text("#define FACTOR 5.0f\n")
    (tmp_path / "suites" / "sub" / "h.h").write_text("#include IMPL\n" if include == "param"
                                                     else '#define H_IMPL "impl.h"\n#include H_IMPL\n')
    (tmp_path / "suites" / "k.c").write_text('#include KIND\n#include "sub/h.h"\n'
                                             "void k(const float *x, float *y, int n)\n{\n"
                                             "    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    config = {"KIND": '"kind.h"', **({"IMPL": '"impl.h"'} if include == "param" else {})}

    def declared():
        return Variant(source="k.c", entry="k", space=Space({name: [v] for name, v in config.items()}),
                       heuristic=lambda shape: config, origin=tmp_path / "suites")

    variant = declared()
    got, want = run_once(CpuBackend(), scaling(f"computed_in_two_folders_test_{include}", variant, 3.0, 9), variant,
                         config, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (tmp_path / "suites" / "impl.h").write_text("#define FACTOR 4.0f\n")
    assert declared().source_hash != variant.source_hash


def test_a_computed_include_read_from_another_files_folder_linked_by_an_absolute_path_hashes_alike_in_every_checkout(
        tmp_path):
    """The template's ``#include IMPL`` ('"impl_a.h"'), which its folder lacks, and an inlined
    mylib/x.h holding a computed include too (``#include KIND``), mylib a link by an absolute
    path to a package installed apart: gcc reads the package's impl_a.h (its folder an -iquote
    folder of the copy after the template's), which the hash, looking beside the template alone,
    never read; it is named by its absolute path, so a checkout at another depth is the same
    source."""
    package = tmp_path / "opt" / "mylib"
    package.mkdir(parents=True)
    (package / "x.h").write_text("#include KIND\n")
    (package / "kind.h").write_text("/* the kind */\n")
    (package / "impl_a.h").write_text("#define FACTOR 3.0f\n")
    tops = (tmp_path / "a", tmp_path / "b" / "c" / "d")
    for top in tops:
        (top / "suites").mkdir(parents=True)
        (top / "suites" / "mylib").symlink_to(package)
        (top / "suites" / "k.c").write_text('#include IMPL\n#include "mylib/x.h"\n'
                                            "void k(const float *x, float *y, int n)\n{\n"
                                            "    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    config = {"IMPL": '"impl_a.h"', "KIND": '"kind.h"'}

    def declared(top):
        return Variant(source="k.c", entry="k", space=Space({name: [v] for name, v in config.items()}),
                       heuristic=lambda shape: config, origin=top / "suites")

    near, deep = (declared(top) for top in tops)
    for variant in (near, deep):
        assert f'#line 1 "{package.resolve() / "impl_a.h"}"' in variant.template.splitlines()
    assert near.source_hash == deep.source_hash
    got, want = run_once(CpuBackend(), scaling("computed_linked_folder_test", near, 3.0, 9), near, config, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (package / "impl_a.h").write_text("#define FACTOR 4.0f\n")
    assert declared(tops[0]).source_hash != near.source_hash


def test_a_cuda_computed_include_of_an_inlined_header_hashes_the_header_of_the_folder_nvcc_searches_first(tmp_path):
    """The same of a CUDA variant: nvcc's copy is given the folders as -I folders in that order
    (see :func:`~tunebench.backends.cuda.copy_flags`), and reads the template's impl.h for
    sub/h.h's ``#include IMPL``, where the hash named sub/impl.h."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    (tmp_path / "suites" / "sub").mkdir(parents=True)
    for name, text in (("kind.h", "/* the kind */\n"), ("impl.h", "#define FACTOR 3.0f\n"),
                       ("sub/impl.h", "#define FACTOR 5.0f\n"), ("sub/h.h", "#include IMPL\n")):
        (tmp_path / "suites" / name).write_text(text)
    (tmp_path / "suites" / "k.cu").write_text(
        '#include KIND\n#include "sub/h.h"\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n")
    config = {"KIND": '"kind.h"', "IMPL": '"impl.h"'}
    variant = Variant(source="k.cu", entry="k", space=Space({name: [v] for name, v in config.items()}),
                      heuristic=lambda shape: config, launch=lambda c, shape: (1, 32), origin=tmp_path / "suites")
    assert [line for line in variant.template.splitlines() if line.startswith("#line 1")] == [
        '#line 1 "sub/h.h"', '#line 1 "kind.h"', '#line 1 "impl.h"']
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, config, "float32"))
    code = subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                          cwd=tmp_path / "build", capture_output=True, text=True, check=True).stdout
    assert "y[i] = 3.0f * x[i]" in code


@pytest.mark.parametrize("include", ["param", "macro"])
def test_a_computed_include_in_a_folder_linked_by_an_absolute_path_hashes_alike_in_every_checkout(tmp_path, include):
    """GNU stow's folded ``include/mylib``, a link by an absolute path to a package installed
    apart, its x.h including a header a macro names (``#include IMPL``, a param's
    '"impl_a.h"', or a macro x.h defines): the compiler reads it beside the link's target, at
    one place on every machine, which was named from the template's folder
    ("../../../stow/..."), so a checkout at another depth was another source. It is named by its
    absolute path, as a "../" leaving such a folder is."""
    package = tmp_path / "stow" / "mylib" / "include" / "mylib"
    package.mkdir(parents=True)
    (package / "x.h").write_text("#include IMPL\n" if include == "param"
                                 else '#define X_IMPL "impl_a.h"\n#include X_IMPL\n')
    (package / "impl_a.h").write_text("#define FACTOR 3.0f\n")
    config = {"IMPL": '"impl_a.h"'} if include == "param" else {"tile": 1}
    tops = (tmp_path / "a", tmp_path / "b" / "c" / "d")
    for top in tops:
        (top / "proj" / "include").mkdir(parents=True)
        (top / "proj" / "suites").mkdir()
        (top / "proj" / "pyproject.toml").write_text("")
        (top / "proj" / "include" / "mylib").symlink_to(package)
        (top / "proj" / "suites" / "k.c").write_text("#include <mylib/x.h>\nvoid k(const float *x, float *y, int n)\n"
                                                     "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")

    def declared(top):
        return Variant(source="k.c", entry="k", space=Space({name: [v] for name, v in config.items()}),
                       heuristic=lambda shape: config, flags=("-I../include",), origin=top / "proj" / "suites")

    near, deep = (declared(top) for top in tops)
    for variant in (near, deep):
        assert f'#line 1 "{package.resolve() / "impl_a.h"}"' in variant.template.splitlines()
    assert near.source_hash == deep.source_hash
    got, want = run_once(CpuBackend(), scaling(f"linked_computed_test_{include}", near, 3.0, 9), near, config, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (package / "impl_a.h").write_text("#define FACTOR 4.0f\n")
    assert declared(tops[0]).source_hash != near.source_hash


def test_a_header_of_a_folder_of_the_flags_linked_by_an_absolute_path_hashes_alike_in_every_checkout(tmp_path):
    """``-I../include``, the project's include/ a link by an absolute path to a library installed
    apart (``/opt/mylib/include``): the compiler reads its scale.h there, at one place on every
    machine, which was named from the template's folder ("../../../opt/...", in the #line of
    its hash and in the declared flags), so a checkout at another depth was another source and
    one's records were not the other's. The folder is named by its absolute path, as one the
    flags give so is."""
    library = tmp_path / "opt" / "mylib" / "include"
    library.mkdir(parents=True)
    (library / "scale.h").write_text("#define FACTOR 3.0f\n")
    tops = (tmp_path / "a", tmp_path / "b" / "c" / "d")
    for top in tops:
        (top / "proj" / "suites").mkdir(parents=True)
        (top / "proj" / "pyproject.toml").write_text("")
        (top / "proj" / "include").symlink_to(library)
        (top / "proj" / "suites" / "k.c").write_text("#include <scale.h>\nvoid k(const float *x, float *y, int n)\n"
                                                     "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")

    def declared(top):
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=("-I../include",), origin=top / "proj" / "suites")

    near, deep = (declared(top) for top in tops)
    for variant in (near, deep):
        assert f'#line 1 "{library.resolve() / "scale.h"}"' in variant.template.splitlines()
        assert variant.declared_flags == f"-I{library.resolve()}"
    assert near.source_hash == deep.source_hash
    got, want = run_once(CpuBackend(), scaling("linked_folder_test", near, 3.0, 9), near, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (library / "scale.h").write_text("#define FACTOR 4.0f\n")
    assert declared(tops[0]).source_hash != near.source_hash


@pytest.mark.parametrize("monorepo", [False, True])
@pytest.mark.parametrize("reached", ["computed", "parent", "folder"])
def test_a_link_by_an_absolute_path_into_the_checkout_hashes_alike_in_every_checkout(tmp_path, reached, monorepo):
    """``include/mylib`` (or the -I folder ``include`` itself) a link by an absolute path into
    the same checkout (``ln -s $PWD/src/mylib include/mylib``, as CMake makes them): each checkout
    has its own, and the compiler reads the checkout's own files through it. Taken for a link to
    a package installed apart, the headers read through it (a computed include's beside it, a
    "../" leaving it, a header of the folder and the declared flag) were named by the
    checkout's absolute path, so every checkout was another source and one's records were not
    the other's. They are named from the template's folder, as the link's target is. So too in
    a monorepo (``monorepo``), the pytest project ``kernels/`` (its own pyproject.toml) and the
    link's target the git checkout's ``src/``, outside the project: measured against the
    project, the link was taken for one apart."""
    found = []
    for top in (tmp_path / "a" / "repo", tmp_path / "b" / "c" / "repo"):
        project = top / "kernels" if monorepo else top
        up = "../" if monorepo else ""  # from the project to the checkout's top
        (project / "suites").mkdir(parents=True)
        (project / "pyproject.toml").write_text("")
        (top / ".git").mkdir()
        if reached == "folder":
            (top / "src" / "include").mkdir(parents=True)
            (top / "src" / "include" / "scale.h").write_text("#define FACTOR 3.0f\n")
            (project / "include").symlink_to(top / "src" / "include")
            include, read = "scale.h", [f"../{up}src/include/scale.h"]
        else:
            (top / "src" / "mylib").mkdir(parents=True)
            (top / "src" / "detail").mkdir()
            (top / "src" / "mylib" / "x.h").write_text(
                "#include IMPL\n" if reached == "computed" else '#include "../detail/z.h"\n')
            (top / "src" / "mylib" / "impl_a.h").write_text("#define FACTOR 3.0f\n")
            (top / "src" / "detail" / "z.h").write_text("#define FACTOR 3.0f\n")
            (project / "include").mkdir()
            (project / "include" / "mylib").symlink_to(top / "src" / "mylib")
            include = "mylib/x.h"
            read = ["../include/mylib/x.h",
                    f"../{up}src/mylib/impl_a.h" if reached == "computed" else f"../{up}src/detail/z.h"]
        (project / "suites" / "k.c").write_text(f"#include <{include}>\nvoid k(const float *x, float *y, int n)\n"
                                                 "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
        config = {"IMPL": '"impl_a.h"'}
        variant = Variant(source="k.c", entry="k", space=Space({"IMPL": [config["IMPL"]]}),
                          heuristic=lambda shape: config, flags=("-I../include",), origin=project / "suites")
        assert [line for line in variant.template.splitlines() if line.startswith("#line 1")] == [
            f'#line 1 "{name}"' for name in read]
        assert variant.declared_flags == (f"-I../{up}src/include" if reached == "folder" else "-I../include")
        found.append(variant.source_hash)
    assert found[0] == found[1]
    name = f"own_link_test_{reached}{'_monorepo' if monorepo else ''}"
    got, want = run_once(CpuBackend(), scaling(name, variant, 3.0, 9), variant, config, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_library_under_the_home_folder_of_a_dotfiles_repository_hashes_alike_in_every_checkout(tmp_path,
                                                                                                 monkeypatch):
    """A ``.git`` in the home folder (a dotfiles repository) is no checkout of the project: taken
    for one, ``include`` linked by an absolute path to ``~/.local/include/mylib`` was a link into
    the checkout, named relative to each project's folder (``-I../../../.local/...``), and two
    checkouts of the project hashed apart."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    library = home / ".local" / "include" / "mylib"
    library.mkdir(parents=True)
    (library / "scale.h").write_text("#define FACTOR 3.0f\n")
    found = []
    for project in (home / "a" / "proj", home / "b" / "c" / "proj"):
        (project / "suites").mkdir(parents=True)
        (project / "pyproject.toml").write_text("")
        (project / "include").symlink_to(library)
        (project / "suites" / "k.c").write_text("#include <scale.h>\nvoid k(const float *x, float *y, int n)\n"
                                                "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=("-I../include",), origin=project / "suites")
        assert variant.declared_flags == f"-I{library}"
        found.append(variant.source_hash)
    assert found[0] == found[1]


def test_include_next_is_no_computed_include(tmp_path):
    """A shim's ``#include_next <stdlib.h>`` took its folder for one: every header there was
    hashed, and the folder given to the compiler."""
    (tmp_path / "k.c").write_text("#include_next <stdlib.h>\nint k(void) { return 0; }\n")
    variant = Variant(source="k.c", entry="k", space=Space({"u": [1]}), heuristic=lambda shape: {"u": 1},
                      origin=tmp_path)
    assert variant.computed_include_dirs == ()


#: The same kernel as a C++ user writes it: a template over the unrolled width, the standard library.
AXPB_CPP = """\
#include <algorithm>
#include <array>

template <int W>
static void block(const TB_DTYPE *x, TB_DTYPE *y, TB_DTYPE a, TB_DTYPE b)
{
    std::array<TB_DTYPE, W> v;
    std::copy_n(x, W, v.begin());
    for (auto &e : v) e = a * e + b;
    std::copy(v.begin(), v.end(), y);
}

ENTRY void axpb(const TB_DTYPE *x, TB_DTYPE *y, int n, TB_DTYPE a, TB_DTYPE b)
{
    int i = 0;
    for (; i + vec <= n; i += vec) block<vec>(x + i, y + i, a, b);
    for (; i < n; i = std::min(i + 1, n)) y[i] = a * x[i] + b;
}
"""


@pytest.mark.parametrize("suffix", [".cpp", ".cc", ".hpp"])  # .hpp: a header-only library's entry
def test_a_cpp_template_is_compiled_as_cpp_and_its_extern_c_entry_called(axpb, tmp_path, suffix):
    kernel, variant = axpb
    (tmp_path / f"axpb{suffix}").write_text('#define ENTRY extern "C"\n' + AXPB_CPP)
    cpp = Variant(source=tmp_path / f"axpb{suffix}", entry="axpb", space=Space({"vec": [1, 8]}),
                  heuristic=lambda shape: {"vec": 8})
    kernel = Kernel("axpb_cpp_test", buckets=kernel.buckets, args=kernel.args, reference=kernel.reference,
                    outputs=["y"], cpu=cpp)
    backend = CpuBackend()
    assert backend.build(kernel, cpp, {"vec": 8}, "float32").handle.with_suffix(".cpp").exists()
    for vec in (1, 8):
        got, want = run_once(backend, kernel, cpp, {"vec": vec}, n=1003)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_cpp_entry_without_extern_c_is_named_with_the_reason(tmp_path, axpb):
    kernel, _ = axpb
    (tmp_path / "axpb.cpp").write_text("#define ENTRY\n" + AXPB_CPP)
    cpp = Variant(source=tmp_path / "axpb.cpp", entry="axpb", space=Space({"vec": [4]}),
                  heuristic=lambda shape: {"vec": 4})
    kernel = Kernel("axpb_mangled_test", buckets=kernel.buckets, args=kernel.args, reference=kernel.reference,
                    outputs=["y"], cpu=cpp)
    with pytest.raises(KernelError, match=r"axpb.cpp exports no function 'axpb' \(declare it extern \"C\": C\+\+ "
                                          r"names are mangled\); it exports: _Z4axpb"):
        run_once(CpuBackend(), kernel, cpp, {"vec": 4})


def test_a_static_entry_point_is_named_with_the_reason(axpb):
    """A foreign kernel's ``static inline void transpose(...)`` was said to export nothing, with no
    word of why; and so was one whose ``static`` a macro brings (``LOCAL void transpose(...)``)."""
    kernel, _ = axpb
    path = kernel.variant("cpu").path
    text = path.read_text()

    def said() -> str:
        variant = Variant(source=path, entry="axpb", space=Space({"vec": [1]}), heuristic=lambda shape: {"vec": 1})
        return missing_entry(variant, {}, {"vec": 1})

    for said_static in ("/* the helpers are static */\n", "#define LOCAL static inline\n",  # no reason of its
                        "#if 0\nstatic void axpb(void);\n#endif\n"):
        path.write_text(said_static + text.replace("void axpb(", "void axpb_renamed(", 1))
        assert said() == "axpb.c exports no function 'axpb'; it exports: none"
    path.write_text("#define LOCAL static inline\n" + text.replace("void axpb(", "LOCAL void axpb(", 1))
    assert said() == ("axpb.c exports no function 'axpb' (it is static, which keeps a function to its file: drop "
                      "static from its definition); it exports: none")
    path.write_text(text.replace("void axpb(", "static inline void axpb(", 1))
    static = Variant(source=path, entry="axpb", space=Space({"vec": [1], "unroll": [1], "mode": [0]}),
                     heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0})
    kernel = Kernel("axpb_static_test", buckets=kernel.buckets, args=kernel.args, reference=kernel.reference,
                    outputs=["y"], cpu=static)
    with pytest.raises(KernelError, match=r"axpb.c exports no function 'axpb' \(it is static, which keeps a function to "
                                          r"its file: drop static from its definition\)"):
        run_once(CpuBackend(), kernel, static, {"vec": 1, "unroll": 1, "mode": 0})


def test_an_entry_point_only_a_library_the_kernel_links_defines_is_refused_as_compile_check_refuses_it(axpb):
    kernel, _ = axpb
    path = kernel.variant("cpu").path  # a template that calls libm: a library built from it links libm
    path.write_text("#include <math.h>\nfloat axpb_exp(float v) { return expf(v); }\n" + path.read_text())
    expf = Variant(source=path, entry="expf", space=Space({"vec": [1], "unroll": [1], "mode": [0]}),
                   heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0})
    kernel = Kernel("axpb_expf_test", buckets=kernel.buckets, args=kernel.args, reference=kernel.reference,
                    outputs=["y"], cpu=expf)  # libm's expf, called with the kernel's pointers, gave NaN
    with pytest.raises(KernelError, match=r"^kernel 'axpb_expf_test': axpb.c exports no function 'expf'; it exports: "
                                          r"axpb, axpb_exp$"):
        run_once(CpuBackend(), kernel, expf, {"vec": 1, "unroll": 1, "mode": 0})


def test_an_entry_point_not_there_is_a_declaration_error_where_pyelftools_cannot_list_the_functions(axpb,
                                                                                                    monkeypatch):
    """The GPU image has no pyelftools: the loader's AttributeError crashed every candidate."""
    import tunebench.backends.cpu as cpu

    def unreadable(path):
        raise ImportError("pyelftools")

    monkeypatch.setattr(cpu, "library_functions", unreadable)
    kernel, _ = axpb
    nosuch = Variant(source=kernel.variant("cpu").path, entry="nosuch", space=Space({"vec": [1], "unroll": [1], "mode": [0]}),
                     heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0})
    kernel = Kernel("axpb_nosuch_test", buckets=kernel.buckets, args=kernel.args, reference=kernel.reference,
                    outputs=["y"], cpu=nosuch)
    with pytest.raises(KernelError, match=r"^kernel 'axpb_nosuch_test': axpb.c exports no function 'nosuch'$"):
        run_once(CpuBackend(), kernel, nosuch, {"vec": 1, "unroll": 1, "mode": 0})


def test_an_entry_point_chosen_at_load_by_a_resolver_is_the_librarys_own(axpb):
    """target_clones builds the entry as a GNU ifunc, whose symbol is no STT_FUNC: it was refused
    as "exports no function 'axpb'; it exports: axpb.resolver"."""
    kernel, _ = axpb
    path = kernel.variant("cpu").path
    path.write_text(path.read_text().replace("void axpb(", '__attribute__((target_clones("avx2", "default"))) void axpb('))
    got, want = run_once(CpuBackend(), kernel, kernel.variant("cpu"), {"vec": 1, "unroll": 1, "mode": 0})
    np.testing.assert_allclose(got, want, rtol=1e-6)


#: A param named as a C library function (``div``): defined ahead of <stdlib.h>, it rewrites the
#: header's own declaration of div().
DIV_C = """\
#include <stdlib.h>
MARKER
void scale(const float *x, float *y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = x[i] / div + abs(0);
#if broken
#error "broken on line 7"
#endif
}
"""


@pytest.mark.parametrize("marker, compiles", [("// tunebench: params", True), ("", False), ("before", False)])
def test_params_go_where_the_template_says_after_the_headers_a_param_name_would_rewrite(tmp_path, marker, compiles):
    """Without the marker, or with it above the header, the defines rewrite the header's div():
    the error names the param and the header's line that reads it."""
    template = DIV_C.replace("#include <stdlib.h>\nMARKER", "// tunebench: params\n#include <stdlib.h>") \
        if marker == "before" else DIV_C.replace("MARKER", marker)
    (tmp_path / "div.c").write_text(template)
    variant = Variant(source=tmp_path / "div.c", entry="scale", space=Space({"div": [2, 4], "broken": [0, 1]}),
                      heuristic=lambda shape: {"div": 2, "broken": 0})
    kernel = scaling("div_test", variant, 0.25, 100)
    backend = CpuBackend()
    if not compiles:
        with pytest.raises(CompileError, match=r"expected identifier(.|\n)*\(tunebench: param 'div' is #defined "
                                               r"ahead of an included header, which reads 'div' as a name: rename it\)"
                                               r"\n\(tunebench: the error lies outside the template's own lines: .* "
                                               r"`// tunebench: params` after the includes"
                                               + (r" puts the defines there \(this template's comes before one\)"
                                                  if marker else r" puts the defines there\)$")):
            backend.build(kernel, variant, {"div": 4, "broken": 0}, "float32")  # div() declared as 4()
        return
    got, want = run_once(backend, kernel, variant, {"div": 4, "broken": 0}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(CompileError, match="div.c:7:.*broken on line 7"):  # the template's own line numbers
        backend.build(kernel, variant, {"div": 4, "broken": 1}, "float32")


@pytest.mark.parametrize("link", [("-lscale",), ("-l", "scale"), ("LIB",), ("-Wl,-Bstatic", "-lscale", "-Wl,-Bdynamic")])
def test_a_library_the_variant_links_is_linked_after_the_template(tmp_path, link):
    """``flags=("-lfoo",)`` went ahead of the template on gcc's command line, where the linker
    reads a library before anything needs it: every config was a compile error, "undefined
    reference", under ``-z defs`` (an archive given by its path, ``libfoo.a``, the same)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "scale.c").write_text("float tb_scale(float x) { return 0.25f * x; }\n")
    subprocess.run(["gcc", "-c", "-fPIC", "-o", lib / "scale.o", lib / "scale.c"], check=True)
    subprocess.run(["ar", "rcs", lib / "libscale.a", lib / "scale.o"], check=True)
    if "-Wl,-Bstatic" in link:  # the shared one, which the linker prefers, is another: -Bstatic must stay with -lscale
        (lib / "shared.c").write_text("float tb_scale(float x) { return 0.5f * x; }\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", lib / "libscale.so", lib / "shared.c"], check=True)
    (tmp_path / "scale.c").write_text("float tb_scale(float x);\n"
                                      "void scale(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) "
                                      "y[i] = tb_scale(x[i]) * TILE / TILE; }\n")
    flags = (str(lib / "libscale.a"),) if link == ("LIB",) else (f"-L{lib}", *link)
    variant = Variant(source=tmp_path / "scale.c", entry="scale", space=Space({"TILE": [2]}),
                      heuristic=lambda shape: {"TILE": 2}, flags=flags)
    got, want = run_once(CpuBackend(), scaling("linked_test", variant, 0.25, 100), variant, {"TILE": 2}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert libraries_last(("-O2", "/opt/libfoo.so.1", "-DX")) == (("-O2",), ("/opt/libfoo.so.1", "-DX"))  # a version


def test_a_param_name_that_rewrites_a_local_header_points_at_the_header_and_the_marker(tmp_path):
    """A kernel's own header reading the param's name (``template <int TILE>``) failed with "rename
    it" alone: gcc's "in expansion of macro" note hid the header's line and the marker that keeps
    the defines out of the header, which is how a header's own names are kept."""
    (tmp_path / "detail").mkdir()
    (tmp_path / "detail" / "tile.h").write_text("static inline float first(const float *x, int TILE) { return x[0] * TILE; }\n")
    (tmp_path / "tile.c").write_text('#include "detail/tile.h"\n'
                                     "void scale(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = "
                                     "x[i] * 0.25f + 0 * first(x, TILE); }\n")
    variant = Variant(source=tmp_path / "tile.c", entry="scale", space=Space({"TILE": [2, 4]}),
                      heuristic=lambda shape: {"TILE": 2})
    with pytest.raises(CompileError, match=r"\(tunebench: param 'TILE' is #defined ahead of tile.h, whose line 1 "
                                           r"reads 'TILE' as a name: rename it\)\n\(tunebench: the error lies outside the "
                                           r"template's own lines: .* `// tunebench: params` after the includes"):
        CpuBackend().build(scaling("tile_test", variant, 0.25, 100), variant, {"TILE": 2}, "float32")


def test_a_param_named_as_the_templates_own_argument_is_named_in_the_compile_error(tmp_path):
    (tmp_path / "axpb.c").write_text(AXPB_C)
    variant = Variant(source=tmp_path / "axpb.c", entry="axpb", space=Space({"vec": [1], "unroll": [1], "mode": [0],
                                                                             "n": [4]}),
                      heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0, "n": 4})
    kernel = Kernel("axpb_clash_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"], cpu=variant)
    with pytest.raises(CompileError, match=r"in expansion of macro .n.(.|\n)*\(tunebench: param 'n' is #defined "
                                           r"ahead of line 5, which reads 'n' as a name: rename one\)") as error:
        CpuBackend().build(kernel, variant, {"vec": 1, "unroll": 1, "mode": 0, "n": 4}, "float32")
    # the #define is placed as the params', not as a line of the compile cache's copy of the source
    assert str(error.value).startswith("<tunebench params>:") and ".cache" not in str(error.value)


def test_tb_unroll_unrolls_a_loop_by_a_param_where_a_pragma_would_not_expand_it(tmp_path):
    (tmp_path / "sum.c").write_text("void total(const float *x, float *y, int n)\n{\n    float s = 0;\n"
                                    "    TB_UNROLL(UNROLL)\n    for (int i = 0; i < n; ++i) s += x[i];\n"
                                    "    y[0] = s;\n}\n")
    variant = Variant(source=tmp_path / "sum.c", entry="total", space=Space({"UNROLL": [1, 8]}),
                      heuristic=lambda shape: {"UNROLL": 8}, flags=("-Wall", "-Werror"))
    kernel = Kernel("unroll_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                    "y": np.empty(1, np.float32), "n": np.int32(shape[0])},
                    reference=lambda x, n: np.array([x.sum()]), outputs=["y"], cpu=variant)
    got, want = run_once(CpuBackend(), kernel, variant, {"UNROLL": 8})
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_header_of_an_include_folder_is_hashed_and_found_from_the_suites_folder(tmp_path, monkeypatch):
    """Edited, it is measured again (its trials were reused); the -I folder is the suite's, from
    wherever the run starts, and kept relative in the declaration, as another checkout has it."""
    (tmp_path / "include" / "mylib").mkdir(parents=True)
    (tmp_path / "include" / "mylib" / "scale.h").write_text("#define MYLIB_SCALE 3.0f\n")
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "k.c").write_text("#include <mylib/scale.h>\n#include <math.h>\n"
                                             "void k(const float *x, float *y, int n)\n"
                                             "{\n    for (int i = 0; i < n; ++i) y[i] = fabsf(MYLIB_SCALE * x[i]);\n}\n")

    def declared():
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=("-I../include",), origin=tmp_path / "suites")
        return variant, scaling("include_dir_test", variant, 3.0, 9)

    monkeypatch.chdir(tmp_path / "include")  # not where the suite is
    variant, kernel = declared()
    assert '#line 1 "../include/mylib/scale.h"' in variant.template and "#include <math.h>" in variant.template
    before = variant.source_hash  # a variant reads its files again once they change
    assert kernel.declaration(variant, "float32")["flags"] == "-I../include"
    got, want = run_once(CpuBackend(), kernel, variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (tmp_path / "include" / "mylib" / "scale.h").write_text("#define MYLIB_SCALE 4.0f\n")
    assert declared()[0].source_hash != before


def test_headers_edited_in_their_comments_alone_are_named_where_the_records_keep_their_texts(tmp_path):
    """The template (its #line markers moved), an inlined header and a header of an include
    folder, compared by its texts: without the earlier text (records from before texts
    were kept), or with a macro's value edited, it is another source (see comment_edits)."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "scale.h").write_text("#define SCALE 3.0f /* three */\n")
    (tmp_path / "local.h").write_text("/* local */\n#define LOCAL 1\n")
    (tmp_path / "k.c").write_text('#include "local.h"\n#include <scale.h>\n'
                                  "void k(const float *x, float *y, int n)\n"
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = LOCAL * SCALE * x[i];\n}\n")

    def read() -> Variant:
        return Variant(source=tmp_path / "k.c", entry="k", space=Space({"tile": [1]}),
                       heuristic=lambda shape: {"tile": 1}, flags=(f"-I{tmp_path / 'include'}",))

    before = read()
    tuned, texts = before.template, dict(before.file_texts)  # read now: as the records keep them
    (tmp_path / "local.h").write_text("/* local,\n   on two lines */\n\n#define LOCAL 1 // one\n")
    (tmp_path / "include" / "scale.h").write_text("#define SCALE 3.0f /* three, as floats */\n")
    (tmp_path / "k.c").write_text("// k: y = x scaled\n" + (tmp_path / "k.c").read_text())  # moves the #line markers
    after = read()
    assert after.source_hash != before.source_hash
    header = str(tmp_path / "include" / "scale.h")
    assert comment_edits(tuned, after.template, "k.c", {**texts, **after.file_texts}, "c", after.flags) == sorted(
        [header, "k.c", "local.h"])
    assert comment_edits(tuned, after.template, "k.c", after.file_texts, "c", after.flags) is None
    (tmp_path / "include" / "scale.h").write_text("#define SCALE 3.5f /* three, as floats */\n")
    edited = read()
    assert comment_edits(tuned, edited.template, "k.c", {**texts, **edited.file_texts}, "c", edited.flags) is None


def test_a_stray_header_of_usr_local_include_is_no_part_of_a_templates_source(tmp_path, monkeypatch):
    """gcc reads its own stdint.h ahead of one left in /usr/local/include (clang the other way
    round): hashed, such a header made the shipped CUDA templates another source on that machine
    alone, their records stale there. Only the folders a user names (CPATH) count."""
    for variable in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(variable, raising=False)
    assert Path("/usr/local/include").is_dir()  # as on every Debian machine: the case is real here
    assert own_include_dirs("c") == own_include_dirs("c++") == ()
    monkeypatch.setenv("CPATH", f"{tmp_path}{os.pathsep}/usr/local/include")
    assert own_include_dirs("c") == (tmp_path.resolve(), Path("/usr/local/include").resolve())


@pytest.mark.parametrize("variable", ["CPATH", "C_INCLUDE_PATH"])
def test_a_header_the_compiler_finds_on_its_own_include_path_is_hashed_and_an_edit_is_another_source(
        tmp_path, monkeypatch, variable):
    """A header found through CPATH (no flag names its folder) was in no text the source hash
    covered: edited to compute something else, a tune reused the old header's trials and the
    compile cache served its builds. It is hashed, named by its own path (it lies outside the
    project); a toolchain's folder on
    the path (CUDA's) and the system's headers (<math.h>) stay out, as a template none of whose
    headers is there hashes as without the variable."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "myscale.h").write_text("#define MYSCALE 3.0f\n")
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "cuda_runtime.h").write_text("")
    (tmp_path / "cuda" / "cuda_helper.h").write_text("#define CUDA_HELPER 1\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "k.c").write_text("#include <myscale.h>\n#include <math.h>\nvoid k(const float *x, float *y, int n)\n"
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = fabsf(MYSCALE * x[i]);\n}\n")
    (tmp_path / "proj" / "plain.c").write_text("#include <math.h>\n#include <cuda_helper.h>\n"
                                      "void k(float *x) { x[0] = sqrtf(x[0]); }\n")

    def declared(source="k.c"):
        return Variant(source=source, entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       origin=tmp_path / "proj")

    plain = declared("plain.c").source_hash
    monkeypatch.setenv(variable, os.pathsep.join((str(tmp_path / "cuda"), "", "relative", str(tmp_path / "inc"))))
    assert declared("plain.c").source_hash == plain
    variant = declared()
    assert f'#line 1 "{tmp_path.resolve() / "inc" / "myscale.h"}"' in variant.template
    assert "#include <math.h>" in variant.template and "cuda" not in variant.template
    got, want = run_once(CpuBackend(), scaling("own_include_path_test", variant, 3.0, 9), variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (tmp_path / "inc" / "myscale.h").write_text("#define MYSCALE 4.0f\n")
    assert declared().source_hash != variant.source_hash


@pytest.mark.parametrize("source, target, flags, other, own", [
    ("k.c", "cpu", (), "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"),
    ("k.cpp", "cpu", (), "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"),
    ("k.c", "cpu", ("-x", "c++"), "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"),
    ("k.c", "cpu", ("--lang", "c++"), "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"),  # gcc's abbreviation of --language
    ("k.cu", "cpu", (), "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"),
    ("k.cu", "cuda", (), "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"),
    ("k.cuh", "cuda", (), "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")])
def test_a_header_of_the_other_languages_include_path_is_no_part_of_a_templates_source(
        tmp_path, monkeypatch, source, target, flags, other, own):
    """gcc, clang and nvcc search C_INCLUDE_PATH for C alone and CPLUS_INCLUDE_PATH for C++ alone:
    each was taken as searched for both, so a C template hashed a header the compiler never reads
    ("myscale.h: No such file", or another header of the name read), and an edit of it was
    another source. Only the variable of the language the build reads the template as (and
    CPATH) counts: a CUDA variant's is C++ whatever its name (a .cuh was taken for C, and the
    header nvcc reads hashed not at all), a CPU one's as gcc builds it (a .c under ``-x c++`` is
    C++, a .cu template shared with the CUDA variant is C; each was taken for the other)."""
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "myscale.h"
    header.write_text("#define MYSCALE 3.0f\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / source).write_text(
        '#include <myscale.h>\n#ifdef __cplusplus\nextern "C"\n#endif\nvoid k(const float *x, float *y, int n)\n'
        "{\n    for (int i = 0; i < n; ++i) y[i] = MYSCALE * x[i];\n}\n")
    for variable in ("CPATH", other, own):
        monkeypatch.delenv(variable, raising=False)

    def declared():
        return Variant(source=source, entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, launch=(lambda config, shape: (1, 32)) if target == "cuda" else None,
                       origin=tmp_path / "proj")

    def read(variant):  # what the target's build reads for MYSCALE, None where it finds no myscale.h
        if target == "cuda":
            reading = cuda.preprocessing(variant, {"tile": 1})
            if reading is None:
                pytest.skip("nvcc is not on PATH")
            code = preprocess(reading[1], reading[2], variant.origin)
            return code and re.search(r"y\[i\] = (\S+) \* x\[i\]", code).group(1)
        kernel = scaling(f"path_test_{source[2:]}_{target}_{len(flags)}", variant, 3.0, 9)
        try:
            got, want = run_once(CpuBackend(), kernel, variant, {"tile": 1}, n=9)
        except CompileError as e:
            assert "myscale.h" in str(e)
            return None
        return f"{got[0] / (want[0] / 3.0):.1f}f"

    plain = declared().source_hash
    monkeypatch.setenv(other, str(tmp_path / "inc"))
    variant = declared()
    assert variant.source_hash == plain
    assert read(variant) is None  # the compiler does not read it either
    monkeypatch.setenv(own, str(tmp_path / "inc"))
    variant = declared()
    assert f'#line 1 "{tmp_path.resolve() / "inc" / "myscale.h"}"' in variant.template
    assert read(variant) == "3.0f"
    header.write_text("#define MYSCALE 4.0f\n")
    assert declared().source_hash != variant.source_hash

@pytest.mark.parametrize("option, variable, reads", [
    ("-isystem", "CPATH", "env"),  # gcc reads CPATH's folders as -I ones after the flags': ahead of -isystem's
    ("-isystem", "C_INCLUDE_PATH", "flags"),  # and C_INCLUDE_PATH's as -isystem ones after the flags'
    ("-idirafter", "C_INCLUDE_PATH", "env"),  # an -idirafter folder after every other
])
def test_a_header_of_a_system_folder_of_the_flags_and_of_the_compilers_own_path_hashes_the_one_built(
        tmp_path, monkeypatch, option, variable, reads):
    """scale.h in a folder of the flags' ``-isystem ../sys`` and in one of CPATH: gcc reads CPATH's
    (``gcc -v -E`` lists CPATH's folders after the flags' -I folders, ahead of their -isystem
    ones; C_INCLUDE_PATH's after those, -idirafter's last), where the hash looked in every folder
    of the flags first: an edit of the header built kept the source hash, and its trials, and one
    of the header never read was another source."""
    folders = {"flags": tmp_path / "proj" / "sys", "env": tmp_path / "env"}
    read, other = folders[reads], folders["env" if reads == "flags" else "flags"]
    for folder, factor in ((read, "3.0f"), (other, "5.0f")):
        folder.mkdir(parents=True)
        (folder / "scale.h").write_text(f"#define FACTOR {factor}\n")
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    (tmp_path / "proj" / "suites").mkdir()
    (tmp_path / "proj" / "suites" / "k.c").write_text("#include <scale.h>\nvoid k(const float *x, float *y, int n)\n"
                                                      "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, str(folders["env"]))

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=(option, "../sys"), origin=tmp_path / "proj" / "suites")

    variant = declared()
    got, want = run_once(CpuBackend(), scaling(f"search_order_test_{option[2:]}_{variable}", variant, 3.0, 9),
                         variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_hash_follows(declared, variant, read / "scale.h", other / "scale.h")


def test_a_header_of_an_isystem_folder_the_flags_give_ahead_of_an_i_folder_is_searched_after_it(tmp_path):
    """``flags=("-isystem", "../sys", "-I../inc")``, scale.h in both: gcc searches every -I folder
    ahead of the -isystem ones, wherever the flags name them, and reads inc/scale.h, where the
    hash looked in the flags' order: an edit of the header built kept the source hash."""
    for where, factor in (("inc", "3.0f"), ("sys", "5.0f")):
        (tmp_path / where).mkdir()
        (tmp_path / where / "scale.h").write_text(f"#define FACTOR {factor}\n")
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "k.c").write_text("#include <scale.h>\nvoid k(const float *x, float *y, int n)\n"
                                             "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=("-isystem", "../sys", "-I../inc"), origin=tmp_path / "suites")

    variant = declared()
    got, want = run_once(CpuBackend(), scaling("isystem_first_test", variant, 3.0, 9), variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_hash_follows(declared, variant, tmp_path / "inc" / "scale.h", tmp_path / "sys" / "scale.h")


@pytest.mark.parametrize("cc", ["gcc", "clang-19", "cc, a clang"])
@pytest.mark.parametrize("include, flags, variable, env, reads", [
    ("<scale.h>", ("-isystem", "../i", "-isystem", "../s"), "CPATH", "s", "i"),  # CPATH's s dropped: s after i
    ("<scale.h>", ("-I../x", "-isystem", "../s"), "C_INCLUDE_PATH", "x", "s"),  # the -I x dropped: x after s
    ("<scale.h>", ("-isystem", "../s", "-idirafter", "../s", "-isystem", "../i"), "C_INCLUDE_PATH", "x", "s"),
    ('"scale.h"', ("-iquote", "../x", "-I../s"), "C_INCLUDE_PATH", "x", {"gcc": "s", "clang-19": "x"}),
    ('"scale.h"', ("-iquote", "../x", "-isystem", "../x", "-I../s"), "CPATH", "i", {"gcc": "s", "clang-19": "x"}),
    ("<scale.h>", ("-I../x", "-isystem", "../s", "-isystem", "{proj}/x"), "C_INCLUDE_PATH", "i", "s"),  # x after s
    ("<scale.h>", ("-isystem", "../s", "-isystem", "{proj}/x"), "CPATH", "x", "s"),  # CPATH's x dropped: x after s
])
def test_a_folder_given_twice_is_searched_where_the_compiler_keeps_it(tmp_path, monkeypatch, cc, include, flags,
                                                                       variable, env, reads):
    """A folder the flags or the compiler's own path (CPATH, C_INCLUDE_PATH) give twice: gcc
    keeps one (``gcc -v -E``: 'ignoring duplicate directory'), one given as a system folder
    (``-isystem``, C_INCLUDE_PATH's, ``-idirafter``) at its place as one, else the first, and
    reads scale.h from the first folder of what it keeps: where the hash looked in the copy
    it drops (CPATH's ``s`` ahead of the flags' -isystem ones, the flags' ``-I../x`` ahead of
    their -isystem ones, an -isystem ``s`` after C_INCLUDE_PATH's, as an -idirafter one, an
    ``-iquote ../x`` ahead of the -I folders for a quoted include), it
    named another folder's header than the one built: an edit of the header built kept the
    source hash, and its trials. A system folder given by an absolute path (``{proj}``, whose
    own headers are a system's) counts: a copy of the flags' -I or CPATH's is searched at its
    place (read at theirs, x's header was hashed where gcc built s's).
    clang 19 (TUNEBENCH_CC) keeps them as gcc does, but for an
    -iquote folder given as a system's too, which it searches for a quoted include
    (``clang -v -E``'s '#include "..."' chain): dropped there as gcc's, the hash named
    ``s``'s header where clang built ``x``'s. A clang is known by what it says of itself, not its
    name (``cc, a clang``: a wrapper, as LLVM's own ``clang`` is a link to ``clang-19``)."""
    program = "clang-19" if cc == "cc, a clang" else cc
    if not shutil.which(program):
        pytest.skip(f"{program} is not on PATH")
    if cc == "cc, a clang":
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "cc").write_text('#!/bin/sh\nexec clang-19 "$@"\n')
        (tmp_path / "bin" / "cc").chmod(0o755)
        monkeypatch.setattr(cpu, "CC", str(tmp_path / "bin" / "cc"))
    else:
        monkeypatch.setattr(cpu, "CC", cc)
    reads = reads[program] if isinstance(reads, dict) else reads
    kernel_name = "duplicate_folder_test_" + re.sub(r"\W", "", cc + "".join(flags))
    flags = tuple(flag.format(proj=tmp_path / "proj") for flag in flags)
    folders = {name: tmp_path / "proj" / name for name in ("i", "s", "x")}
    scale_headers(tmp_path / "proj", include, folders, reads)
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, str(folders[env]))

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, origin=tmp_path / "proj" / "suites")

    variant = declared()
    got, want = run_once(CpuBackend(), scaling(kernel_name, variant, 3.0, 9), variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_hash_follows(declared, variant, folders[reads] / "scale.h",
                        *(folder / "scale.h" for name, folder in folders.items() if name != reads))

@pytest.mark.parametrize("include, flags, reads", [
    ("<scale.h>", ("-iquote", "../q"), "env"),  # gcc never searches an -iquote folder for an angle include
    ('"scale.h"', ("-I../inc", "-iquote", "../q"), "q"),  # and searches it for a quoted one ahead of the -I folders
])
def test_a_quote_folder_of_the_flags_is_searched_for_a_quoted_include_alone_ahead_of_the_others(
        tmp_path, monkeypatch, include, flags, reads):
    """scale.h in the flags' ``-iquote ../q``, their ``-I../inc`` and CPATH's folder: gcc searches
    an -iquote folder for a quoted include alone, ahead of every -I folder (``gcc -v -E`` lists
    it in the '#include "..."' chain, apart), where the hash looked in it as in an -I folder, in
    the flags' order: it named ../q/scale.h for ``<scale.h>``, which gcc built from CPATH's, and
    ../inc/scale.h for ``"scale.h"``, which gcc built from ../q: an edit of the header built kept
    the source hash, and its trials, and one of a header never read was another source."""
    folders = {"q": tmp_path / "proj" / "q", "inc": tmp_path / "proj" / "inc", "env": tmp_path / "env"}
    scale_headers(tmp_path / "proj", include, folders, reads)
    for name in ("C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CPATH", str(folders["env"]))

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, origin=tmp_path / "proj" / "suites")

    variant = declared()
    got, want = run_once(CpuBackend(), scaling(f"quote_chain_test_{reads}", variant, 3.0, 9), variant, {"tile": 1},
                         n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_hash_follows(declared, variant, folders[reads] / "scale.h",
                        *(folder / "scale.h" for name, folder in folders.items() if name != reads))


def test_a_cuda_computed_include_of_a_header_of_cpath_and_of_a_system_folder_of_the_flags_hashes_the_one_built(
        tmp_path, monkeypatch):
    """``IMPL='"x.h"'`` of a CUDA variant, x.h in a CPATH folder and in the flags' ``-isystem
    ../sys``: nvcc's host compiler reads CPATH's (searched after the -I folders, the copy's
    folder among them, ahead of the -isystem ones), where the hash looked in the -isystem
    folder first."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for where, factor in (("env", "3.0f"), ("proj/sys", "5.0f")):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "x.h").write_text(f"#define FACTOR {factor}\n")
    (tmp_path / "proj" / "suites").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    (tmp_path / "proj" / "suites" / "k.cu").write_text(
        '#include IMPL\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n")
    monkeypatch.setenv("CPATH", str(tmp_path / "env"))
    config = {"IMPL": '"x.h"'}
    variant = Variant(source="k.cu", entry="k", space=Space({"IMPL": [config["IMPL"]]}), heuristic=lambda shape: config,
                      flags=("-isystem", "../sys"), launch=lambda c, shape: (1, 32), origin=tmp_path / "proj" / "suites")
    assert [line for line in variant.template.splitlines() if line.startswith("#line 1")] == [
        f'#line 1 "{tmp_path.resolve() / "env" / "x.h"}"']
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, config, "float32"))
    code = subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                          cwd=tmp_path / "build", capture_output=True, text=True, check=True).stdout
    assert "y[i] = 3.0f * x[i]" in code


@pytest.mark.parametrize("variable, reads", [("CPLUS_INCLUDE_PATH", "s"), ("C_INCLUDE_PATH", "x")])
def test_a_cuda_computed_include_searches_an_i_folder_of_the_flags_the_include_path_names_where_nvcc_does(
        tmp_path, monkeypatch, variable, reads):
    """``IMPL='"scale.h"'`` of a CUDA variant, scale.h in the flags' ``-I../x`` and ``-isystem
    ../s``, x named by ``variable`` too: nvcc reads the template as C++, so CPLUS_INCLUDE_PATH's x
    is a system folder to it, searched after the -isystem ones (the -I one dropped as its
    duplicate: it builds s/'s), C_INCLUDE_PATH's no folder of its (x/'s). The hash searched every
    -I folder of the flags ahead of the copy's, whatever the include path named, and named x/'s:
    an edit of the header built kept the source hash, and its trials."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    folders = {name: tmp_path / "proj" / name for name in ("x", "s")}
    scale_headers(tmp_path / "proj", "IMPL", folders, reads)
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, str(folders["x"]))
    config = {"IMPL": '"scale.h"'}

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"IMPL": [config["IMPL"]]}), heuristic=lambda shape: config,
                       flags=("-I../x", "-isystem", "../s"), launch=lambda c, shape: (1, 32),
                       origin=tmp_path / "proj" / "suites")

    variant = declared()
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, config, "float32"))
    code = subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                          cwd=tmp_path / "build", capture_output=True, text=True, check=True).stdout
    assert "y[i] = 3.0f * x[i]" in code
    assert_hash_follows(declared, variant, folders[reads] / "scale.h",
                        *(folder / "scale.h" for name, folder in folders.items() if name != reads))

def test_a_c_template_declaring_extern_c_is_refused_with_the_hint_that_it_is_cxx(tmp_path):
    """A Kernel Tuner C kernel (lang="C" builds with g++, in extern "C") ported as a ``.c`` file:
    gcc's only word was "expected identifier or '(' before string constant"."""
    (tmp_path / "k.c").write_text('extern "C" void k(const float *x, float *y, int n)\n'
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = x[i] * 2;\n}\n")
    variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                      origin=tmp_path)
    kernel = Kernel("extern_c_in_c_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(9,)])]),
                    args=lambda shape, dtype, rng: {"x": rng.random(9, dtype), "y": np.empty(9, dtype),
                                                    "n": np.int32(9)},
                    reference=lambda x, n: 2 * x, outputs=["y"], cpu=variant)
    with pytest.raises(CompileError) as refused:
        CpuBackend(BuildCache(tmp_path / "cache")).build(kernel, variant, {"tile": 1}, "float32")
    said = str(refused.value)
    assert "k.c:1:" in said and "error:" in said  # the compiler's own message kept
    assert ('(tunebench: k.c is compiled as C, and extern "C" is C++ (Kernel Tuner\'s lang="C" builds with g++): '
            'name the template .cpp, or give it flags=("-x", "c++"))') in said


def test_a_c_template_read_as_cxx_by_its_flags_is_built_as_c_by_gcc(tmp_path):
    """``flags=("-x", "c++")`` on a ``.c`` template has gcc read it as C++ (cc1plus, which searches
    CPLUS_INCLUDE_PATH), and that alone: taken for a C++ template, its build ran g++ with
    -std=gnu++17, so a complex64 TB_DTYPE became std::complex<float> (``x[i] * 2`` no longer
    compiled), and the compiler a trial keeps became g++, so a project's recorded trials were
    all measured again ("the compiler changed since the last tune")."""
    (tmp_path / "k.c").write_text('extern "C" void k(const TB_DTYPE *x, TB_DTYPE *y, int n)\n'
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = x[i] * 2;\n}\n")
    variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                      flags=("-x", "c++"), dtypes=("complex64",), origin=tmp_path)
    kernel = Kernel("x_cxx_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(9,)])]),
                    args=lambda shape, dtype, rng: {"x": (rng.random(9) + 1j * rng.random(9)).astype(dtype),
                                                    "y": np.empty(9, dtype), "n": np.int32(9)},
                    reference=lambda x, n: 2 * x, outputs=["y"], cpu=variant)
    assert variant.language == "c++"  # the include path variable it reads
    assert compiler("cpu", variant) == cpu.compiler_identity("c")  # gcc's, as its records have it
    backend = CpuBackend()
    build = backend.build(kernel, variant, {"tile": 1}, "complex64")
    args = kernel.build_args((9,), "complex64")
    runner = backend.load(build, kernel, variant, {"tile": 1}, (9,), args)
    runner.reset()
    runner.call()
    np.testing.assert_allclose(runner.outputs()[0], kernel.expected(args)[0], rtol=1e-6)


def test_a_c_template_read_as_cxx_by_its_flags_is_preprocessed_and_told_of_mangling_as_cxx(tmp_path):
    """The reading that tells whether a param's values make another code, and the hint of a
    missing entry, took a ``.c`` under ``-x c++`` for C (a trailing ``-x c`` overrode the flags'):
    ``__cplusplus`` unset there, and no word of C++'s mangled names."""
    (tmp_path / "k.c").write_text("#ifdef __cplusplus\nint cxx;\n#endif\nvoid k(const float *x, float *y, int n) {}\n")
    variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                      flags=("-x", "c++"), origin=tmp_path)
    reading = cpu.preprocessing(variant, {"tile": 1})
    assert "int cxx;" in preprocess(reading[1], reading[2], variant.origin)
    assert 'declare it extern "C"' in missing_entry(variant, {"_Z1kPKfPfi": None}, {"tile": 1})


#: A ``.c`` template that only C++ reads (``-x c++``), and that needs the C++ standard library.
VECTOR_SCALE_C = (
    "#include <vector>\n"
    'extern "C" void scale(const float *x, float *y, int n)\n'
    "{\n    std::vector<float> copy(x, x + n);\n    float *factor = new float(2.0f * tile / tile);\n"
    "    for (int i = 0; i < n; ++i) y[i] = *factor * copy[i];\n    delete factor;\n}\n")


def vector_scale_project(root: Path, flags: tuple[str, ...]) -> None:
    """A project tuning :data:`VECTOR_SCALE_C` as ``scale.c`` with ``flags``."""
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / "scale.c").write_text(VECTOR_SCALE_C)
    (root / "suites").mkdir()
    (root / "suites" / "test_scale.py").write_text(
        "import numpy as np\n"
        "from tunebench import Bucket, Buckets, Kernel, Space, Variant\n"
        'scale = Kernel("scale_cxx", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),\n'
        '               args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),\n'
        '                                               "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},\n'
        '               reference=lambda x, n: 2.0 * x, outputs=["y"],\n'
        f'               cpu=Variant(source="scale.c", entry="scale", flags={flags!r},\n'
        '                           heuristic=lambda shape: {"tile": 1}, space=Space({"tile": [1, 4]})))\n')


def test_a_c_template_read_as_cxx_by_its_flags_links_the_cxx_standard_library(pytester, quiet_verdicts):
    """gcc reading a ``.c`` template as C++ (its flags' ``-x c++``) links no C++ standard
    library, as g++ does a ``.cpp``'s: a template using ``std::vector`` or ``new`` failed every
    config's build (under ``-z defs``: "undefined reference to `operator new(unsigned long)'"),
    and the README told the user to rename it."""
    vector_scale_project(pytester.path, ("-x", "c++"))
    result = pytester.runpytest("suites", "--tune", "--tune-target", "cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_a_compile_error_recorded_under_another_build_command_is_built_again(pytester, monkeypatch, quiet_verdicts):
    """A recorded compile error was reused by source, declaration and compiler alone: once
    tunebench stopped giving a ``.c`` under ``-x c++`` C's -std (an error under its -Werror), a
    project tuned before still stopped at its heuristic on the old error, every run, unless
    --tune-retry-failed. The error stands for today's build command alone."""
    vector_scale_project(pytester.path, ("-x", "c++", "-Werror"))
    tune = ("suites", "--tune", "--tune-target", "cpu", "-p", "no:cacheprovider")
    with monkeypatch.context() as before:
        before.setattr(cpu, "standard", lambda flags, lang: cpu.STANDARD[lang])  # the -std of its name, as it was
        result = pytester.runpytest(*tune)
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*-std=gnu11*[-Werror]*"])
    pytester.runpytest(*tune).assert_outcomes(passed=3)


def test_a_frameworks_own_build_of_a_c_template_read_as_cxx_with_its_flags_loads(tmp_path, declared_apart):
    """Tuned.flags() (cpu.code_flags) left out the C++ standard library that a ``.c`` template under
    ``-x c++`` links: a framework's build with them, ahead of its source as README's framework
    section composes them, made a library that failed to load ("undefined symbol: _Znwm", its
    ``new``). The preprocessor reading the template (``gcc -E``) is given no library."""
    (tmp_path / "scale.c").write_text(VECTOR_SCALE_C)
    (tmp_path / "records").mkdir()
    variant = Variant(source="scale.c", entry="scale", space=Space({"tile": [1, 4]}),
                      heuristic=lambda shape: {"tile": 1}, flags=("-x", "c++"), origin=tmp_path)
    handle = tunebench.tuned(scaling("scale_cxx_framework", variant, 2.0, 100), records=tmp_path / "records")
    own = tmp_path / "own.so"
    built = subprocess.run(["gcc", *handle.flags(), "-fPIC", "-shared", *handle.defines((100,)),
                            str(tmp_path / "scale.c"), "-o", str(own)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    x, y = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    ctypes.CDLL(str(own)).scale(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), 100)
    np.testing.assert_array_equal(y, 2 * x)
    assert not [f for f in cpu.preprocessing(variant, {"tile": 1})[1] if "stdc++" in f]


@pytest.mark.parametrize("cc", ["gcc", "clang-19"])
def test_a_c_template_read_as_cxx_by_its_flags_is_built_read_and_given_with_the_cxx_standard(
        tmp_path, monkeypatch, declared_apart, cc):
    """A ``.c`` template under ``-x c++`` was built, preprocessed and given to a framework
    (``flags()``) with C's -std=gnu11: clang (TUNEBENCH_CC, or the framework's) refused it
    ("invalid argument '-std=gnu11' not allowed with 'C++'"), every config a compile error, and
    gcc ignored it saying so, an error under the variant's own -Werror. Each gets C++'s standard."""
    if not shutil.which(cc):
        pytest.skip(f"{cc} is not on PATH")
    monkeypatch.setattr(cpu, "CC", cc)
    (tmp_path / "scale.c").write_text(VECTOR_SCALE_C)
    (tmp_path / "records").mkdir()
    variant = Variant(source="scale.c", entry="scale", space=Space({"tile": [1, 4]}),
                      heuristic=lambda shape: {"tile": 1}, flags=("-x", "c++", "-Werror"), origin=tmp_path)
    kernel = scaling("scale_cxx_standard_" + re.sub(r"\W", "", cc), variant, 2.0, 100)
    got, want = run_once(CpuBackend(), kernel, variant, {"tile": 4}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    reading = cpu.preprocessing(variant, {"tile": 4})
    assert "std::vector<float> copy" in (preprocess(reading[1], reading[2], variant.origin) or "")
    handle = tunebench.tuned(kernel, records=tmp_path / "records")
    own = tmp_path / "own.so"
    built = subprocess.run([cc, *handle.flags(), "-fPIC", "-shared", *handle.defines((100,)),
                            str(tmp_path / "scale.c"), "-o", str(own)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    x, y = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    ctypes.CDLL(str(own)).scale(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), 100)
    np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("cc", ["gcc", "clang-19"])
@pytest.mark.parametrize("spelled", [("--language=c++",), ("--language", "c++"), ("--lang", "c++"), ("--la", "c++")])
def test_a_c_template_read_as_cxx_by_the_flags_long_language_option_is_built_as_cxx(tmp_path, monkeypatch, cc,
                                                                                     spelled):
    """gcc and clang read ``--language=c++`` and ``--language c++`` as ``-x c++``, and tunebench
    read ``-x`` alone: such a ``.c`` template was built with C's -std=gnu11 (clang: "not allowed
    with 'C++'") and no C++ standard library (gcc: "undefined reference to `operator new'"), and
    given to a framework without either. gcc takes an unambiguous abbreviation of it written
    alone too (``--lang c++``), which was read as no language at all."""
    if not shutil.which(cc):
        pytest.skip(f"{cc} is not on PATH")
    if cc.startswith("clang") and spelled[0] != "--language" and not spelled[0].startswith("--language="):
        pytest.skip("clang takes no abbreviation of a long option")
    monkeypatch.setattr(cpu, "CC", cc)
    (tmp_path / "scale.c").write_text(VECTOR_SCALE_C)
    variant = Variant(source="scale.c", entry="scale", space=Space({"tile": [1, 4]}),
                      heuristic=lambda shape: {"tile": 1}, flags=spelled, origin=tmp_path)
    kernel = scaling("scale_long_language_" + re.sub(r"\W", "", cc + "".join(spelled)), variant, 2.0, 100)
    got, want = run_once(CpuBackend(), kernel, variant, {"tile": 4}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert variant.language == "c++"  # the include path variable it reads
    assert {"-std=gnu++17", *cpu.CXX_LIBRARY_ANYWHERE} <= set(cpu.code_flags(variant))


@pytest.mark.parametrize("cxx", ["g++", "clang++-19"])
@pytest.mark.parametrize("spelled", [("-x", "c"), ("--language=c",), ("--language", "c")])
def test_a_cxx_template_read_as_c_by_its_flags_is_built_with_the_c_standard(tmp_path, monkeypatch, cxx, spelled):
    """The other way round: a ``.cpp`` template under ``-x c`` was built with C++'s -std=gnu++17,
    which clang refused for C and g++ ignored saying so, an error under the variant's -Werror;
    ``--language`` names the language as ``-x`` does."""
    if not shutil.which(cxx):
        pytest.skip(f"{cxx} is not on PATH")
    monkeypatch.setattr(cpu, "CXX", cxx)
    (tmp_path / "scale.cpp").write_text("void scale(const float *x, float *y, int n)\n"
                                        "{\n    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i] * tile / tile;\n}\n")
    variant = Variant(source="scale.cpp", entry="scale", space=Space({"tile": [1, 4]}),
                      heuristic=lambda shape: {"tile": 1}, flags=(*spelled, "-Werror"), origin=tmp_path)
    kernel = scaling("scale_c_standard_" + re.sub(r"\W", "", cxx + "".join(spelled)), variant, 2.0, 100)
    got, want = run_once(CpuBackend(), kernel, variant, {"tile": 4}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("through", ["CPATH", "-I"])
def test_a_header_linked_into_an_include_folder_from_elsewhere_is_hashed_and_built_as_recorded(
        tmp_path, monkeypatch, through):
    """A stowed prefix (GNU stow) on CPATH: the header a link in the folder to a file
    elsewhere. It was taken for no folder's header (its target lies outside), so an edit of it
    reused the old one's trials, and the gate's recorded build read today's. Hashed by the
    link's path, and the recorded build reads the records' copy."""
    real = tmp_path / "stow" / "mylib" / "include" / "myscale.h"
    real.parent.mkdir(parents=True)
    real.write_text("#define MYSCALE 3.0f\n")
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "myscale.h").symlink_to(real)
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "k.c").write_text("#include <myscale.h>\nvoid k(const float *x, float *y, int n)\n"
                                           "{\n    for (int i = 0; i < n; ++i) y[i] = MYSCALE * x[i];\n}\n")
    monkeypatch.setenv("CPATH", str(tmp_path / "local") if through == "CPATH" else "")

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=(f"-I{tmp_path / 'local'}",) if through == "-I" else (), origin=tmp_path / "proj")

    tuned = declared()
    text, texts = tuned.template, tuned.file_texts
    assert f'#line 1 "{tmp_path.resolve() / "local" / "myscale.h"}"' in text
    real.write_text("#define MYSCALE 2.0f\n")
    assert declared().source_hash != tuned.source_hash
    assert_recorded_build_scales(f"linked_header_test_{through[-1]}", tuned, text, texts, {"tile": 1})


@pytest.mark.parametrize("link", ["absolute", "relative"])
@pytest.mark.parametrize("decoy", [False, True])
def test_a_parent_include_in_a_folder_linked_into_an_include_folder_reads_the_targets_sibling(tmp_path, decoy, link):
    """GNU stow's folded tree: ``include/mylib`` a link to the stowed package's folder, whose
    ``x.h`` includes "../detail/z.h". The compiler follows the link, then the "..": it reads
    the package's detail/z.h. The link's path was taken without the link, include/detail/z.h:
    none was a KernelError ("cannot be read"), and the project's own file of that name (never
    read) was hashed, an edit of it another source; then the package's z.h was hashed not at
    all, an edit of it served the old trials. The file the compiler reads is hashed, by its path:
    through a link by an absolute path (a package installed apart, outside the project), by its
    absolute path, which is the same in a checkout at another depth; through a link by a
    relative one (as stow makes them), from the template's folder, as the link moves with it.
    The gate's build of the recorded template, z.h edited since, reads the tune's: the copy of
    the linked folder is a plain one, from whose x.h "../detail/z.h" led to no copy ("No such
    file"), or past it to a file of that name (``detail/z.h`` of the project)."""
    package = tmp_path / "stow" / "mylib" / "include"
    (package / "mylib").mkdir(parents=True)
    (package / "detail").mkdir()
    (package / "mylib" / "x.h").write_text('#include "../detail/z.h"\n')
    (package / "detail" / "z.h").write_text("#define MYSCALE 3.0f\n")
    (tmp_path / "proj" / "include").mkdir(parents=True)
    (tmp_path / "proj" / "include" / "mylib").symlink_to(
        package / "mylib" if link == "absolute" else Path("../../stow/mylib/include/mylib"))
    (tmp_path / "proj" / "suites").mkdir()
    (tmp_path / "proj" / "suites" / "k.c").write_text(
        "#include <mylib/x.h>\nvoid k(const float *x, float *y, int n)\n"
        "{\n    for (int i = 0; i < n; ++i) y[i] = MYSCALE * x[i];\n}\n")
    own = tmp_path / "proj" / "include" / "detail" / "z.h"
    if decoy:
        for found in (own, tmp_path / "proj" / "detail" / "z.h"):
            found.parent.mkdir()
            found.write_text("#define MYSCALE 5.0f\n")

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=("-I../include",), origin=tmp_path / "proj" / "suites")

    variant = declared()
    text, texts = variant.template, variant.file_texts
    read = package / "detail" / "z.h" if link == "absolute" else "../../stow/mylib/include/detail/z.h"
    assert [line for line in variant.template.splitlines() if line.startswith("#line 1")] == [
        '#line 1 "../include/mylib/x.h"', f'#line 1 "{read}"']
    if decoy:
        own.write_text("#define MYSCALE 6.0f\n")
        assert declared().source_hash == variant.source_hash
    got, want = run_once(CpuBackend(), scaling(f"folded_link_test_{decoy:d}_{link}", variant, 3.0, 9), variant,
                         {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (package / "detail" / "z.h").write_text("#define MYSCALE 4.0f\n")
    assert declared().source_hash != variant.source_hash
    assert_recorded_build_scales(f"folded_link_recorded_{decoy:d}_{link}", variant, text, texts, {"tile": 1})


@pytest.mark.parametrize("through", ["-I", "CPATH", "computed"])
def test_a_header_an_include_folders_header_includes_from_outside_it_is_hashed_and_built_as_recorded(
        tmp_path, monkeypatch, through):
    """A header of an -I folder (or of a CPATH one) including "../common/factor.h", which the
    compiler reads beside it, outside every header folder (as a computed include's
    '"../common/factor.h"' is read beside the template): the header was taken for no folder's,
    never hashed, so an edit of it (a factor 3 made 2) was served the old trials. It is hashed,
    named from the template's folder, and the recorded build reads the records' copy (the
    computed include's looked for it from a copy of the template's folder that was not there,
    and read today's)."""
    (tmp_path / "suites").mkdir()
    (tmp_path / "include").mkdir()
    (tmp_path / "common").mkdir()
    factor = tmp_path / "common" / "factor.h"
    factor.write_text("#define FACTOR 3.0f\n")
    (tmp_path / "include" / "scale.h").write_text('#include "../common/factor.h"\n')
    (tmp_path / "suites" / "k.c").write_text(
        ("#include IMPL\n" if through == "computed" else "#include <scale.h>\n")
        + "void k(const float *x, float *y, int n)\n"
        "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    monkeypatch.setenv("CPATH", str(tmp_path / "include") if through == "CPATH" else "")
    config = {"IMPL": '"../common/factor.h"'}

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"IMPL": [config["IMPL"]]}), heuristic=lambda shape: config,
                       flags=("-I../include",) if through == "-I" else (), origin=tmp_path / "suites")

    tuned = declared()
    text, texts = tuned.template, tuned.file_texts
    assert '#line 1 "../common/factor.h"' in text
    factor.write_text("#define FACTOR 2.0f\n")
    assert declared().source_hash != tuned.source_hash
    assert_recorded_build_scales(f"parent_include_test_{through[-1]}", tuned, text, texts, config)


@pytest.mark.parametrize("library", ["installed", "sibling"])
def test_a_header_reached_by_a_parent_include_from_a_library_folder_hashes_alike_in_every_checkout(
        tmp_path, library):
    """An -I folder's header including "../common/factor.h", outside every header folder and the
    project: named from the template's folder, a library installed at one place (-I/opt/lib/include)
    made a checkout at another depth another source ("../../../opt/..." against "../../../../../opt/...").
    It is named as the folder nearest it is: by its absolute path beside an absolute folder, from the
    template's folder beside a sibling checkout's (-I../../lib/include), which moves with it."""
    def project(top: Path) -> Variant:
        lib = tmp_path / "opt" / "lib" if library == "installed" else top / "lib"
        (lib / "include").mkdir(parents=True, exist_ok=True)
        (lib / "common").mkdir(exist_ok=True)
        (lib / "include" / "scale.h").write_text('#include "../common/factor.h"\n')
        (lib / "common" / "factor.h").write_text("#define FACTOR 3.0f\n")
        (top / "proj" / "suites").mkdir(parents=True)
        (top / "proj" / "pyproject.toml").write_text("")
        (top / "proj" / "suites" / "k.c").write_text(
            "#include <scale.h>\nvoid k(const float *x, float *y, int n)\n"
            "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
        folder = str(lib / "include") if library == "installed" else "../../lib/include"
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=(f"-I{folder}",), origin=top / "proj" / "suites")

    near, deep = project(tmp_path / "a"), project(tmp_path / "b" / "c" / "d")
    named = [line for line in near.template.splitlines() if "factor.h" in line]
    assert named == ([f'#line 1 "{tmp_path / "opt" / "lib" / "common" / "factor.h"}"'] if library == "installed"
                     else ['#line 1 "../../lib/common/factor.h"'])
    assert near.source_hash == deep.source_hash


@pytest.mark.parametrize("reached", ["prefix", "link"])
def test_a_header_a_parent_include_reaches_from_a_library_at_one_place_hashes_alike_in_every_checkout(
        tmp_path, reached):
    """A library installed at one place (``opt/``), a header of it including one by "../":
    through an absolute -I folder (``-I/opt/mylib/include``, its scale.h including
    "../../common/factor.h"), or through a folder of the project linked there by an absolute
    path (``include/vendor``, its x.h including "../common/factor.h"). Named as the folder
    nearest it was, a checkout under the library's prefix (a CI runner's /opt/runner/_work) named
    it from the template's folder where another checkout named it by its path, and through the
    link a checkout at another depth named it another file ("../../../../opt/..." against
    "../../../../../../opt/..."): each another source. It is anchored as the header it is
    reached from: named by its absolute path in every checkout."""
    opt = tmp_path / "opt"
    if reached == "prefix":
        (opt / "mylib" / "include").mkdir(parents=True)
        (opt / "mylib" / "include" / "scale.h").write_text('#include "../../common/factor.h"\n')
        factor, flag, include = opt / "common" / "factor.h", f"-I{opt / 'mylib' / 'include'}", "scale.h"
        checkouts = (tmp_path / "home" / "u", opt / "runner" / "_work")
    else:
        (opt / "vendor" / "include" / "vendor").mkdir(parents=True)
        (opt / "vendor" / "include" / "vendor" / "x.h").write_text('#include "../common/factor.h"\n')
        factor, flag, include = opt / "vendor" / "include" / "common" / "factor.h", "-I../include", "vendor/x.h"
        checkouts = (tmp_path / "a", tmp_path / "b" / "c" / "d")
    factor.parent.mkdir(parents=True)
    factor.write_text("#define FACTOR 3.0f\n")
    found = []
    for top in checkouts:
        (top / "proj" / "suites").mkdir(parents=True)
        (top / "proj" / "include").mkdir()
        (top / "proj" / "pyproject.toml").write_text("")
        if reached == "link":
            (top / "proj" / "include" / "vendor").symlink_to(opt / "vendor" / "include" / "vendor")
        (top / "proj" / "suites" / "k.c").write_text(
            f"#include <{include}>\nvoid k(const float *x, float *y, int n)\n"
            "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=(flag,), origin=top / "proj" / "suites")
        assert f'#line 1 "{factor}"' in variant.template
        found.append(variant.source_hash)
    assert found[0] == found[1]


def test_a_linked_header_with_a_computed_include_hashes_alike_in_every_checkout(tmp_path):
    """A header linked into the project's include folder from elsewhere, holding ``#include IMPL``
    (which may read any header beside it): the folder's headers were listed by their targets,
    the link's named from the template's folder ("../../../opt/lib/x.h"), so a checkout at
    another depth was another source, and the header was hashed twice, by both names."""
    real = tmp_path / "opt" / "lib" / "x.h"
    real.parent.mkdir(parents=True)
    real.write_text("#include IMPL\n")
    found = []
    for checkout in (tmp_path / "alice" / "proj", tmp_path / "runner" / "work" / "x" / "proj"):
        (checkout / "suites").mkdir(parents=True)
        (checkout / "include").mkdir()
        (checkout / "include" / "x.h").symlink_to(real)
        (checkout / "include" / "impl_a.h").write_text("#define MYSCALE 3.0f\n")
        (checkout / "suites" / "k.c").write_text(
            '#define IMPL "impl_a.h"\n#include <x.h>\nvoid k(const float *x, float *y, int n)\n'
            "{\n    for (int i = 0; i < n; ++i) y[i] = MYSCALE * x[i];\n}\n")
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), flags=("-I../include",),
                          heuristic=lambda shape: {"tile": 1}, origin=checkout / "suites")
        found.append(variant.source_hash)
        assert [line for line in variant.template.splitlines() if line.startswith("#line 1")] == [
            '#line 1 "../include/x.h"', '#line 1 "../include/impl_a.h"']
    assert found[0] == found[1]
    got, want = run_once(CpuBackend(), scaling("linked_computed_test", variant, 3.0, 9), variant, {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_linked_header_beside_a_computed_include_hashes_alike_through_a_linked_checkout(tmp_path):
    """A template's ``#include IMPL`` (a macro of its own: it may read any header beside it), one
    of them a link to a file elsewhere: reached through a linked folder (pytest given the path
    through it), the link was named through the checkout's link, another source there."""
    real = tmp_path / "opt" / "beside.h"
    real.parent.mkdir()
    real.write_text("#define OTHER 1\n")
    checkout = tmp_path / "alice" / "proj"
    (checkout / "suites").mkdir(parents=True)
    (checkout / "suites" / "link.h").symlink_to(real)
    (checkout / "suites" / "impl.h").write_text("#define MYSCALE 3.0f\n")
    (checkout / "suites" / "k.c").write_text('#define IMPL "impl.h"\n#include IMPL\n'
                                             "void k(float *x) { x[0] *= MYSCALE; }\n")
    (tmp_path / "linked").symlink_to(tmp_path / "alice")
    found = [Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                     origin=root / "proj" / "suites")
             for root in (tmp_path / "alice", tmp_path / "linked")]
    assert found[0].source_hash == found[1].source_hash, [v.template for v in found]


@pytest.mark.parametrize("flags", [(), ("-I../include",)])
def test_a_header_of_the_project_found_through_cpath_hashes_alike_in_every_checkout(tmp_path, monkeypatch, flags):
    """A CI script's ``export CPATH=$PWD/include`` (beside ``-I../include``, or alone): the
    project's header was named by the checkout's path, so the source hash, and with -I the
    declared flags too, differed in every other checkout, and its gate skipped or failed the
    unchanged kernel. Named from the template's folder, as a project file is; with -I the source
    is the one it was without CPATH."""
    found = []
    for checkout in (tmp_path / "alice" / "proj", tmp_path / "runner" / "work" / "x" / "proj"):
        (checkout / "suites").mkdir(parents=True)
        (checkout / "include").mkdir()
        (checkout / "suites" / "k.c").write_text("#include <myscale.h>\nvoid k(float *x) { x[0] *= MYSCALE; }\n")
        (checkout / "include" / "myscale.h").write_text("#define MYSCALE 3.0f\n")
        for cpath in ("", str(checkout / "include")):
            monkeypatch.setenv("CPATH", cpath)
            variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), flags=flags,
                              heuristic=lambda shape: {"tile": 1}, origin=checkout / "suites")
            found.append((variant.source_hash, variant.declared_flags))
            if cpath:
                assert '#line 1 "../include/myscale.h"' in variant.template
    assert found[1] == found[3] and {flags for _, flags in found} == {" ".join(flags)}
    assert (found[0] == found[1]) == bool(flags)


@pytest.mark.parametrize("folder", ["suites", "include"])
def test_cpath_naming_the_folder_of_a_quoted_header_beside_the_template_leaves_the_source_alone(
        tmp_path, monkeypatch, folder):
    """``export CPATH=$PWD/kernels`` (or ``$PWD/include``, the template including
    "../include/scale.h"): the compiler reads a quoted header from beside the file whatever
    CPATH holds, but a folder of CPATH giving it too left it to the compiler, no longer inlined,
    and the source was another (six of the shipped CUDA hashes, their reduction.cuh)."""
    (tmp_path / "suites").mkdir()
    (tmp_path / "include").mkdir()
    (tmp_path / "suites" / "local.h").write_text("#define LOCAL 1.0f\n")
    (tmp_path / "include" / "scale.h").write_text("#define SCALE 3.0f\n")
    (tmp_path / "suites" / "k.c").write_text(
        '#include "local.h"\n#include "../include/scale.h"\nvoid k(const float *x, float *y, int n)\n'
        "{\n    for (int i = 0; i < n; ++i) y[i] = LOCAL * SCALE * x[i];\n}\n")

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       origin=tmp_path / "suites")

    monkeypatch.delenv("CPATH", raising=False)
    without = declared()
    monkeypatch.setenv("CPATH", str(tmp_path / folder))
    assert declared().template == without.template and "#include" not in without.template


def test_a_recorded_template_builds_a_header_of_the_compilers_own_include_path_as_the_records_keep_it(
        tmp_path, monkeypatch):
    """The gate builds the recorded template of a header found through CPATH and edited since the
    tune with the records' copy of it, searched ahead of CPATH: the factor as tuned, not today's."""
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "myscale.h"
    header.write_text("#define MYSCALE 3.0f\n")
    (tmp_path / "k.c").write_text("#include <myscale.h>\nvoid k(const float *x, float *y, int n)\n"
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = MYSCALE * x[i];\n}\n")
    monkeypatch.setenv("CPATH", str(tmp_path / "inc"))
    tuned = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                    origin=tmp_path)
    text, texts = tuned.template, tuned.file_texts
    header.write_text("#define MYSCALE 2.0f\n")
    kept = {name: texts[digest] for name, digest in hashed_files(text, "k.c").items()}
    assert list(kept) == ["inc/myscale.h"]  # a project's header, named as its files are
    recorded = kept_variant(dataclasses.replace(tuned, text=text), kept)
    got, want = run_once(CpuBackend(), scaling("own_include_recorded_test", recorded, 3.0, 9), recorded, {"tile": 1},
                         n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("name, flags, include, tuned", [
    ("later_dir", ("-I../a", "-I../b"), '"scale.h"', "b"),  # an -I folder after another
    ("quoted_dir", ("-iquote", "../a", "-I../b"), '"scale.h"', "b"),  # a quoted include's, ahead of every -I one
    ("system_dir", ("-I../a", "-isystem", "../b"), "<scale.h>", "b"),  # a system's, after every -I folder
    ("cpath", ("-I../a",), "<scale.h>", "cpath"),  # CPATH's, after the flags' -I folders
    ("sibling", ("-I../a", "-I../b", "-I../c"), '"pick.h"', "c"),  # b/pick.h's "scale.h", found in c
    ("computed", ("-iquote", "../a"), "IMPL", "suites"),  # a computed include's, beside the template
])
def test_a_header_new_since_the_tune_in_a_folder_searched_ahead_of_the_tunes_leaves_the_recorded_build_as_tuned(
        tmp_path, monkeypatch, name, flags, include, tuned):
    """A header of the name the tune read, added since to a folder the compiler searches ahead of
    the one the tune read it from (a/scale.h): each folder's copy of the records' texts was
    searched just ahead of that folder, so the recorded build read the new header, and the gate
    passed a slower one as the recorded build "with b/scale.h as tuned". It reads the copy."""
    project = tmp_path / "proj"
    for folder in ("a", "b", "c", "cpath", "suites"):
        (project / folder).mkdir(parents=True)
    (project / "b" / "pick.h").write_text('#include "scale.h"\n')
    (project / tuned / "scale.h").write_text("#define FACTOR 3.0f\n")
    (project / "suites" / "k.c").write_text(f"#include {include}\nvoid k(const float *x, float *y, int n)\n"
                                            "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    monkeypatch.setenv("CPATH", str(project / "cpath"))
    config = {"IMPL": '"scale.h"'} if include == "IMPL" else {"tile": 1}
    tuned = Variant(source="k.c", entry="k", space=Space({param: [value] for param, value in config.items()}),
                    heuristic=lambda shape: config, flags=flags, origin=project / "suites")
    text, texts = tuned.template, tuned.file_texts
    (project / "a" / "scale.h").write_text("#define FACTOR 5.0f\n")
    assert_recorded_build_scales(f"shadowed_{name}_test", tuned, text, texts, config)


def factor_kernel(project: Path, includes: str, flags: tuple) -> tuple[Variant, dict]:
    """suites/k.c of ``project``, which scales by the FACTOR its ``includes`` define, built with
    ``flags``: its variant and its one config."""
    (project / "suites" / "k.c").write_text(includes + "void k(const float *x, float *y, int n)\n"
                                            "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    config = {"tile": 1}
    return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: config,
                   flags=flags, origin=project / "suites"), config


@pytest.mark.parametrize("untexted", ["latin-1", "past the budget"])
def test_a_header_the_records_keep_no_text_of_is_read_as_tuned_ahead_of_one_of_its_name_with_a_text(
        tmp_path, untexted):
    """a/scale.h, read by the tune through ``<scale.h>`` (``-I../a -I../b``), has no text in the
    records (not UTF-8; or past their budget, a vendored library's), and b/scale.h, of its name,
    read by b/pick.h's "scale.h" beside it, has one: b's copy alone was searched ahead of every
    folder, so the recorded build read it for ``<scale.h>`` too, and scaled by 5. a's is copied
    as it lies, its bytes still hashing as recorded."""
    project = tmp_path / "proj"
    for folder in ("a", "b", "suites"):
        (project / folder).mkdir(parents=True)
    (project / "a" / "scale.h").write_bytes(b"/* (c) M\xfcller */\n#define FACTOR 3.0f\n" if untexted == "latin-1"
                                            else b"#define FACTOR 3.0f\n")
    (project / "b" / "scale.h").write_text("#ifndef FACTOR\n#define FACTOR 5.0f\n#endif\n")
    (project / "b" / "pick.h").write_text('#include "scale.h"\n')
    tuned, config = factor_kernel(project, "#include <scale.h>\n#include <pick.h>\n", ("-I../a", "-I../b"))
    text, texts = tuned.template, tuned.file_texts
    digest = hashed_files(text, "k.c")["../a/scale.h"]
    assert (digest in texts) == (untexted != "latin-1")
    texts = {d: t for d, t in texts.items() if d != digest}  # as the records keep them
    assert_recorded_build_scales(f"untexted_{untexted.replace(' ', '_').replace('-', '')}_test", tuned, text, texts,
                                 config)


def test_a_header_the_records_keep_no_text_of_is_left_where_it_lies_where_no_copy_has_its_name(tmp_path):
    """vendor/factor.h, past the records' budget (a vendored library's), has a name no kept text
    has, so no copy is read in its place: copied too, every header of a vendored library was
    written and scanned for each edit of one of them (seconds per build, megabytes per edit).
    The recorded build reads it where it lies, as tuned."""
    project = tmp_path / "proj"
    (project / "vendor").mkdir(parents=True)
    (project / "suites").mkdir()
    (project / "vendor" / "scale.h").write_text('#include "factor.h"\n#define FACTOR (3.0f * ONE)\n')
    (project / "vendor" / "factor.h").write_text("#define ONE 1.0f\n")
    tuned, config = factor_kernel(project, "#include <scale.h>\n", ("-isystem", "../vendor"))
    text, texts = tuned.template, tuned.file_texts
    digest = hashed_files(text, "k.c")["../vendor/factor.h"]
    texts = {d: t for d, t in texts.items() if d != digest}  # past the budget, as the records keep them
    recorded = kept_variant(dataclasses.replace(tuned, text=text),
                            {file: texts[d] for file, d in hashed_files(text, "k.c").items() if d in texts})
    copied = {path.name for flag in recorded.flags if flag.startswith("-I")
              for path in Path(flag[2:]).rglob("*") if path.is_file()}
    assert copied == {"scale.h"}
    assert_recorded_build_scales("untexted_left_test", tuned, text, texts, config)


@pytest.mark.parametrize("flags, cpath, bom", [
    (("-isystem", "../vendor"), None, ""),
    (("-idirafter", "../vendor"), None, ""),
    ((), "C_INCLUDE_PATH", ""),  # read as an -isystem folder (CPATH's as an -I one: a header that warns fails the tune)
    (("-isystem", "../vendor"), None, "\ufeff"),  # a UTF-8 BOM: the mark ahead of it was a "stray '#'"
])
def test_a_system_folders_header_that_warns_builds_as_recorded_under_werror(tmp_path, monkeypatch, flags, cpath, bom):
    """The copy of a system folder's header is searched from an -I folder (ahead of every folder of
    the build): one that warns under ``-Wall -Werror``, as the tune's build of it did not, failed
    the recorded build ("unused variable"), and the gate compared nothing with it. The copy is
    marked a system header, its lines numbered as the file's, after the BOM of one that begins
    with one."""
    project = tmp_path / "proj"
    (project / "vendor").mkdir(parents=True)
    (project / "suites").mkdir()
    (project / "vendor" / "scale.h").write_text(bom + "#define FACTOR 3.0f\n"
                                                "static inline float unused_helper(float v) { int w; return v; }\n")
    (project / "suites" / "k.c").write_text("#include <scale.h>\nvoid k(const float *x, float *y, int n)\n"
                                            "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    if cpath:
        monkeypatch.setenv(cpath, str(project / "vendor"))
    config = {"tile": 1}
    tuned = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: config,
                    flags=(*flags, "-Wall", "-Werror"), origin=project / "suites")
    run_once(CpuBackend(), scaling("system_werror_tuned_test", tuned, 3.0, 9), tuned, config, n=9)
    assert_recorded_build_scales("system_werror_test", tuned, tuned.template, tuned.file_texts, config)
    recorded = kept_variant(tuned, {"../vendor/scale.h": bom + "#define FACTOR 3.0f\n#error line two\n"})
    with pytest.raises(CompileError, match=r"vendor/scale\.h:2:\d+: error: #error line two"):
        run_once(CpuBackend(), scaling("system_werror_line_test", recorded, 3.0, 9), recorded, config, n=9)


def test_a_source_file_of_the_flags_in_a_system_folder_builds_as_recorded_under_werror(tmp_path):
    """A source file the flags name is no header, wherever it lies: its copy, from an -isystem
    folder, marked a system header failed the recorded build under ``-Werror`` ("#pragma
    system_header ignored outside include file"). It is copied as it is."""
    project = tmp_path / "proj"
    (project / "vendor").mkdir(parents=True)
    (project / "suites").mkdir()
    (project / "vendor" / "factor.c").write_text("float factor(void) { return 3.0f; }\n")
    (project / "suites" / "k.c").write_text("float factor(void);\nvoid k(const float *x, float *y, int n)\n"
                                            "{\n    for (int i = 0; i < n; ++i) y[i] = factor() * x[i];\n}\n")
    config = {"tile": 1}
    tuned = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: config,
                    flags=("-isystem", "../vendor", "../vendor/factor.c", "-Werror"), origin=project / "suites")
    assert_recorded_build_scales("system_flags_file_test", tuned, tuned.template, tuned.file_texts, config)


def test_a_checkout_with_crlf_line_endings_is_the_same_source(tmp_path):
    """The template and its local headers were read with their newlines as Python reads text,
    a header of an include folder by its bytes: a checkout with core.autocrlf (or ``eol=crlf``)
    said that header had changed since the tune, and measured every trial again."""
    files = {"suites/k.c": '#include "local.h"\n#include <mylib/scale.h>\nvoid k(const float *x, float *y, int n)\n'
                           "{\n    for (int i = 0; i < n; ++i) y[i] = LOCAL * MYLIB_SCALE * x[i];\n}\n",
             "suites/local.h": "#define LOCAL 1.0f\n", "include/mylib/scale.h": "#define MYLIB_SCALE 3.0f\n"}
    found = []
    for checkout, eol in ((tmp_path / "lf", "\n"), (tmp_path / "crlf", "\r\n")):
        for name, text in files.items():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (checkout / name).write_bytes(text.replace("\n", eol).encode())
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=("-I../include",), origin=checkout / "suites")
        got, want = run_once(CpuBackend(), scaling("crlf_test", variant, 3.0, 9), variant, {"tile": 1}, n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        found.append(variant.source_hash)
    assert found[0] == found[1]


def test_a_header_of_an_include_folder_given_absolute_is_the_same_source_from_a_checkout_at_any_depth(tmp_path):
    """A library's folder outside the project (``-I/opt/mylib/include``) was written from the
    suite's folder, in the declaration and the template's hash: a fresh clone at another depth (a CI
    runner's workspace) said the flags and the template had changed since the tune, and measured
    every trial again."""
    (tmp_path / "opt" / "mylib").mkdir(parents=True)
    (tmp_path / "opt" / "mylib" / "scale.h").write_text("#define MYLIB_SCALE 3.0f\n")
    flags = (f"-I{tmp_path / 'opt'}",)
    found = []
    for checkout in (tmp_path / "proj", tmp_path / "runner" / "work" / "proj"):
        (checkout / "suites").mkdir(parents=True)
        (checkout / "suites" / "k.c").write_text("#include <mylib/scale.h>\nvoid k(const float *x, float *y, int n)\n"
                                                 "{\n    for (int i = 0; i < n; ++i) y[i] = MYLIB_SCALE * x[i];\n}\n")
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=flags, origin=checkout / "suites")
        kernel = scaling("absolute_include_test", variant, 3.0, 9)
        got, want = run_once(CpuBackend(), kernel, variant, {"tile": 1}, n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        found.append((variant.source_hash, kernel.declaration(variant, "float32")["flags"]))
    assert found[0] == found[1] and found[0][1] == flags[0]


@pytest.mark.parametrize("flags", [(), ("-I../include",)])
def test_a_header_included_by_an_absolute_path_is_the_same_source_from_a_checkout_at_any_depth(tmp_path, flags):
    """``#include "/opt/mylib/scale.h"``, which includes its own ``"factor.h"``: both were named
    from the template's folder in its #line markers, so a clone at another depth hashed another
    source (and a gate there said on unchanged code that the template had changed since the
    tune). An edit of the nested header is still another source, with an -I folder in the flags
    too (the absolute name joined to the folder was taken for a header it gives, and left unhashed)."""
    mylib = tmp_path / "opt" / "mylib"
    mylib.mkdir(parents=True)
    (mylib / "scale.h").write_text('#include "factor.h"\n')
    (mylib / "factor.h").write_text("#define MYLIB_SCALE 3.0f\n")
    found = []
    for checkout in (tmp_path / "proj", tmp_path / "runner" / "work" / "proj"):
        (checkout / "suites").mkdir(parents=True)
        (checkout / "include").mkdir()
        (checkout / "suites" / "k.c").write_text(f'#include "{mylib / "scale.h"}"\nvoid k(const float *x, float *y, '
                                                 "int n)\n{\n    for (int i = 0; i < n; ++i) y[i] = MYLIB_SCALE * x[i];\n}\n")
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=flags, origin=checkout / "suites")
        got, want = run_once(CpuBackend(), scaling("absolute_path_include_test", variant, 3.0, 9), variant,
                             {"tile": 1}, n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        found.append(variant.source_hash)
    assert found[0] == found[1]
    (mylib / "factor.h").write_text("#define MYLIB_SCALE 2.0f\n")
    edited = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                     flags=flags, origin=tmp_path / "proj" / "suites")
    assert edited.source_hash != found[0]


def test_a_checkout_reached_through_a_symlink_is_the_same_source_and_declaration(tmp_path):
    """A header of an -I folder, and one a file of the flags includes, were named from the suite's
    folder as given (the symlink) to their resolved paths: ``pytest /ci/link/test_k.py`` on the tune's
    unchanged checkout said the template and flags had changed since the tune ("../../real/p/
    include/extra.h edited", the flags "-I../../real/p/include"), and a tune measured every trial again."""
    real = tmp_path / "real" / "p"
    for folder in ("suites", "include", "src"):
        (real / folder).mkdir(parents=True)
    (real / "include" / "extra.h").write_text("#define EXTRA 0\n")
    (real / "src" / "inner.h").write_text("#define INNER 1\n")
    (real / "src" / "helper.c").write_text('#include "inner.h"\nint helper(void) { return INNER; }\n')
    (real / "suites" / "k.c").write_text('#include "extra.h"\nvoid k(float *x) { x[0] = EXTRA; }\n')
    (tmp_path / "link").symlink_to(real)
    found = [(v.source_hash, v.declared_flags) for checkout in (real, tmp_path / "link")
             for v in [Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                               flags=("-I../include", "../src/helper.c"), origin=checkout / "suites")]]
    assert found[0] == found[1] and found[0][1] == "-I../include ../src/helper.c"


@pytest.mark.parametrize("flags", [(), ("src/helper.c",)])
def test_a_recorded_template_builds_the_header_a_computed_include_reads_as_the_records_keep_it(tmp_path, flags):
    """``#include IMPL`` beside the template, or in a source file of the flags: the recorded
    template's build (the gate's, the header edited since) was told no folder to find the header
    in ("factor.h: No such file or directory"), so the gate left it out. It reads the records'
    copy of the header: the factor as tuned, not today's."""
    (tmp_path / "src").mkdir()
    body = "void k(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = factor() * x[i]; }\n"
    if flags:
        (tmp_path / "src" / "helper.c").write_text("#include IMPL\nfloat factor(void) { return FACTOR; }\n")
        (tmp_path / "k.c").write_text("float factor(void);\n" + body)
    else:
        (tmp_path / "k.c").write_text("#include IMPL\nstatic float factor(void) { return FACTOR; }\n" + body)
    header = tmp_path / ("src" if flags else "") / "factor.h"
    header.write_text("#define FACTOR 3.0f\n")
    config = {"IMPL": '"factor.h"'}
    tuned = Variant(source="k.c", entry="k", space=Space({"IMPL": ['"factor.h"']}), heuristic=lambda shape: config,
                    flags=flags, origin=tmp_path)
    text, texts = tuned.template, tuned.file_texts
    header.write_text("#define FACTOR 2.0f\n")
    assert_recorded_build_scales("computed_recorded_test", tuned, text, texts, config)


def test_an_include_written_without_a_space_is_inlined_too(tmp_path):
    """``#include"h.h"`` is valid C: missed, it reaches the compiler, which builds in the cache's
    folder, where the header is not, and every config fails to compile."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "near.h").write_text("#define NEAR 1\n")
    (tmp_path / "lib" / "far.h").write_text("#define FAR 2\n")
    (tmp_path / "k.c").write_text('#include"near.h"\n#  include<far.h>\nint k(void) { return NEAR + FAR; }\n')
    library = {}
    text = inline_includes(tmp_path / "k.c", dirs=(tmp_path / "lib",), library=library)
    assert "#define NEAR 1" in text and "#include\"near.h\"" not in text  # beside it: inlined
    assert list(library) == [(tmp_path / "lib" / "far.h").resolve()]  # in a header folder: found, to be hashed


@pytest.mark.parametrize("flag", ["-arch=sm_90a", "-arch sm_90"])  # one flag with its value after a space too
def test_a_cuda_variant_that_sets_the_architecture_is_refused_naming_the_flag(flag):
    with pytest.raises(KernelError, match=rf"kernel 'archs': the cuda variant's flags \['{flag}'\] set the "
                                          r"architecture"):
        Kernel("archs", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(9,)])]),
               args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"],
               cuda=Variant(source="k.cu", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                            flags=(flag,)))


def test_an_error_that_no_renamed_name_gives_gets_no_hint_and_the_params_line_stands_alone(tmp_path):
    (tmp_path / "k.c").write_text("// tunebench: params go below\nvoid k(float *y, int n)\n{\n"
                                  "    for (int i = 0; i < UNROLL; ++i) y[i] = undeclared_name;\n}\n")
    variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({"UNROLL": [4]}),
                      heuristic=lambda shape: {"UNROLL": 4})
    kernel = Kernel("no_hint_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(9,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"], cpu=variant)
    with pytest.raises(CompileError) as error:  # a comment that only begins like the params line is a comment
        CpuBackend().build(kernel, variant, {"UNROLL": 4}, "float32")
    assert "k.c:4:" in str(error.value) and "undeclared_name" in str(error.value)
    assert "tunebench:" not in str(error.value)


FLAGGED_C = """\
#include <stdbool.h>
#include <stddef.h>
void flagged(const float *x, float *y, size_t n, bool negate)
{
    for (size_t i = 0; i < n; ++i) y[i] = negate ? -x[i] : x[i];
}
"""


@pytest.mark.parametrize("negate", [True, False])
def test_a_bool_flag_of_a_foreign_signature_is_passed_as_np_bool(tmp_path, negate):
    """The argument check asked for np.bool_, and the CPU target then refused it: "declare it float"."""
    (tmp_path / "flagged.c").write_text(FLAGGED_C)
    variant = Variant(source=tmp_path / "flagged.c", entry="flagged", space=Space({"u": [1]}),
                      heuristic=lambda shape: {"u": 1})
    kernel = Kernel(f"flagged_{negate}", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                    "y": np.empty(shape[0], np.float32), "n": np.uint64(shape[0]),
                                                    "negate": np.bool_(negate)},
                    reference=lambda x, n, negate: -x if negate else x, outputs=["y"], cpu=variant)
    got, want = run_once(CpuBackend(), kernel, variant, {"u": 1}, n=100)
    np.testing.assert_array_equal(got, want)


def test_a_pragma_hint_leaves_the_other_hints_of_a_compile_error(tmp_path):
    (tmp_path / "k.c").write_text("#pragma GCC unroll U\nvoid k(float *y) { y[0] = f(1); }\n")
    variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({"U": [4], "f": [2]}),
                      heuristic=lambda shape: {"U": 4, "f": 2})
    error = ("k.c:1:19: error: 'U' undeclared\n<tunebench params>:3:11: error: called object is not a function\n"
             "note: in expansion of macro 'f'\n")
    said = explain(variant, {"U": 4, "f": 2}, error)
    assert "#pragma unroll does not expand param 'U'" in said
    assert "param 'f' is #defined, and the error is where its name is read: rename it" in said


def test_an_error_gcc_places_at_the_params_defines_names_the_template_line_that_expands_them(tmp_path, compile_cache):
    """A ``;`` missing before ``TB_UNROLL(n)``: gcc's error named only "<tunebench params>:4", a
    file the user never wrote, and the template's line was in a note further down."""
    (tmp_path / "k.c").write_text("void k(float *y, int n)\n{\n    int s = 0\n    TB_UNROLL(U)\n"
                                  "    for (int i = 0; i < n; ++i) y[i] = 2 * y[i];\n}\n")
    variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({"U": [4]}), heuristic=lambda shape: {"U": 4})
    with pytest.raises(CompileError) as error:
        CpuBackend().build(scaling("unroll_after_a_missing_semicolon", variant, 2.0, 9), variant, {"U": 4}, "float32")
    said = str(error.value)
    assert re.search(r"^<tunebench params>:(\d+):\d+: error: ", said, re.MULTILINE), said
    assert re.search(r"\(tunebench: the error at <tunebench params>:\d+ \(the #define lines tunebench writes for the "
                     r"params, TB_DTYPE and TB_UNROLL\) is in k\.c line 4, where it expands TB_UNROLL\)", said), said


def test_a_warnings_macro_notes_are_left_out_of_a_compile_error_with_the_warning(tmp_path, compile_cache):
    """A param read as a name on line 3 (an error), one overflowing a char on line 4 (gcc's
    -Woverflow warning): the error kept the warning's "in expansion of macro" note, so its hint
    named line 4, and the rename hint blamed BIG, which is no name there."""
    (tmp_path / "k.c").write_text("void k(float *y, int n)\n{\n    float U = 2;\n    char c = BIG;\n"
                                  "    for (int i = 0; i < n; ++i) y[i] = 2 * y[i] + c;\n}\n")
    config = {"U": 4, "BIG": 1000}
    variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({p: [v] for p, v in config.items()}),
                      heuristic=lambda shape: config)
    with pytest.raises(CompileError) as error:
        CpuBackend().build(scaling("a_warning_after_an_error", variant, 2.0, 9), variant, config, "float32")
    said = str(error.value)
    assert "k.c:3:11: note: in expansion of macro 'U'" in said.replace("\u2018", "'").replace("\u2019", "'"), said
    assert "BIG" not in said and "is in k.c line 3, where it expands U)" in said, said


def test_a_kernel_tuner_c_templates_block_size_z_left_undefined_says_what_to_write(tmp_path, compile_cache):
    """Kernel Tuner #defines block_size_z in every build, C ones too; gcc said only 'undeclared'."""
    (tmp_path / "k.c").write_text("void k(float *y) { y[0] = block_size_x * block_size_z; }\n")
    variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({"block_size_x": [4]}),
                      heuristic=lambda shape: {"block_size_x": 4})
    kernel = Kernel("k", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1,)])]),
                    args=lambda shape, dtype, rng: {"y": np.empty(1, np.float32)}, reference=lambda: np.ones(1),
                    outputs=["y"], cpu=variant)
    with pytest.raises(CompileError, match=r"block_size_z.* undeclared(.|\n)*\(tunebench: 'block_size_z' is #defined "
                                           r"by Kernel Tuner in every build \(1 where not tuned\), by tunebench only "
                                           r"as a param: add block_size_z: \[1\] to the space"):
        CpuBackend().build(kernel, variant, {"block_size_x": 4}, "float32")


def test_a_kernel_tuner_c_templates_grid_size_is_no_gridDim_and_clangs_words_are_read(tmp_path):
    """A C template on the CPU has no gridDim to read (the hint said to), and clang says
    'use of undeclared identifier' (TUNEBENCH_CC=clang), which no hint followed."""
    (tmp_path / "k.c").write_text("void k(float *y) { y[0] = grid_size_x; }\n")
    variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({"block_size_x": [4]}),
                      heuristic=lambda shape: {"block_size_x": 4})
    for error in ("k.c:1:27: error: 'grid_size_x' undeclared (first use in this function)",
                  "k.c:1:27: error: use of undeclared identifier 'grid_size_x'"):
        said = explain(variant, {"block_size_x": 4}, error)
        assert "'grid_size_x' is #defined by Kernel Tuner in every build (the launch's grid), not by tunebench: add " \
               "grid_size_x to the space, or a default to the template" in said, said
        assert "gridDim" not in said


def test_a_config_calling_a_function_defined_nowhere_is_a_compile_error_naming_it(tmp_path):
    """An undefined symbol is the build's fault, said by the linker before any load: it was a
    ``crashed`` trial (dlopen's error) that took its worker down."""
    (tmp_path / "undef.c").write_text(AXPB_C.replace("    y[n / 2] += 1;", "    helper_nobody_wrote(y);"))
    variant = Variant(source=tmp_path / "undef.c", entry="axpb", space=Space({"vec": [1], "unroll": [1], "mode": [0, 1]}),
                      heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0})
    kernel = Kernel("undef_symbol_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=lambda shape, dtype, rng: {}, reference=lambda: 0, outputs=["y"], cpu=variant)
    with pytest.raises(CompileError, match="helper_nobody_wrote"):
        CpuBackend().build(kernel, variant, {"vec": 1, "unroll": 1, "mode": 1}, "float32")
    CpuBackend().build(kernel, variant, {"vec": 1, "unroll": 1, "mode": 0}, "float32")


@pytest.mark.parametrize("flags", [("-include", "math.h"), ("-include", "stdint.h"), ("-Xlinker", "-soname=libk.so"),
                                   ("-D", "NAME=x.c"), ("-MF", "/dev/null", "-MD"), ("-isystem", "/usr/include")])
def test_flags_naming_what_the_compiler_finds_or_a_value_like_a_file_are_passed_as_given(tmp_path, flags):
    """Each was refused as "the file of flags 'math.h' not found", and -isystem /usr/include
    inlined 51 KB of libc headers into the template. A folder named as the header is no folder
    the flag names: the compiler skips it."""
    (tmp_path / "k.c").write_text("void k(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = x[i]; }\n")
    (tmp_path / "stdint.h").mkdir()
    variant = Variant(source=tmp_path / "k.c", entry="k", space=Space({"u": [1]}), heuristic=lambda shape: {"u": 1},
                      flags=flags, origin=tmp_path)
    variant.check_folders()
    assert variant.build_flags == flags and variant.declared_flags == " ".join(flags)
    assert variant.template == (tmp_path / "k.c").read_text()
    kernel = scaling("passed_flags_test", variant, 1.0, 8)
    got, want = run_once(CpuBackend(), kernel, variant, {"u": 1}, n=8)
    np.testing.assert_allclose(got, want)


def test_a_source_file_the_flags_build_with_the_template_gets_the_params_as_the_template_does(tmp_path):
    """A kernel split over two files, the helper reading a param and TB_DTYPE (as a framework
    building both with defines() gives them): the helper was built as given, '#error VEC not
    defined', and every config failed to build; compile-check said the same."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "helper.h").write_text("#define HELPER_BIAS 0\n")
    (tmp_path / "src" / "helper.c").write_text(
        '#include "helper.h"\n#ifndef VEC\n#error "VEC not defined"\n#endif\n'
        "TB_DTYPE helper(TB_DTYPE v) { return VEC * v + HELPER_BIAS; }\n")
    (tmp_path / "k.c").write_text("float helper(float v);\nvoid k(const float *x, float *y, int n)\n"
                                  "{\n    for (int i = 0; i < n; ++i) y[i] = helper(x[i]);\n}\n")
    variant = Variant(source="k.c", entry="k", space=Space({"VEC": [2, 3]}), flags=("src/helper.c",),
                      heuristic=lambda shape: {"VEC": 2}, origin=tmp_path)
    for vec in (2, 3):
        got, want = run_once(CpuBackend(), scaling(f"split_files_test_{vec}", variant, vec, 9), variant, {"VEC": vec},
                             n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not list(tmp_path.rglob("*-input0.c"))  # the rendered copy is the command's alone
    (checked,) = compile_check.check([scaling("split_files_check", variant, 2, 9)], "cpu", sample=2)
    assert checked.ok, checked.failures


#: A kernel scaling by what a header (``SCALE``) or a helper compiled beside it (``helper``) says.
SCALED_C = """\
INCLUDE
float helper(float v);
void scaled(const float *x, float *y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = HOW + 0 * tile;
}
"""


@pytest.mark.parametrize("flags, include, how", [
    (("-I", "../include"), '#include "cfg.h"', "SCALE * x[i]"),
    # -I's long spellings, which gcc and clang take (no abbreviation): unhashed
    (("--include-directory", "../include"), '#include "cfg.h"', "SCALE * x[i]"),
    (("--include-directory=../include",), '#include "cfg.h"', "SCALE * x[i]"),
    (("-iquote", "../include"), '#include "cfg.h"', "SCALE * x[i]"),
    (("-isystem", "../include"), "#include <cfg.h>", "SCALE * x[i]"),
    (("-idirafter", "../include"), "#include <cfg.h>", "SCALE * x[i]"),
    (("-isystem../include",), "#include <cfg.h>", "SCALE * x[i]"),
    (("-include", "../include/cfg.h"), "", "SCALE * x[i]"),
    (("-imacros../include/cfg.h",), "", "SCALE * x[i]"),  # gcc's -imacros ../include/cfg.h, joined
    # their long spellings, which gcc and clang take (gcc an abbreviation of --imacros too): unhashed
    (("--include", "../include/cfg.h"), "", "SCALE * x[i]"),
    (("--include=../include/cfg.h",), "", "SCALE * x[i]"),
    (("--imacros=../include/cfg.h",), "", "SCALE * x[i]"),
    (("--imacro", "../include/cfg.h"), "", "SCALE * x[i]"),
    (("-Wp,-imacros,../include/cfg.h",), "", "SCALE * x[i]"),  # the preprocessor's own -imacros, which gcc gives it
    (("src/helper.c",), "", "helper(x[i])"),  # found from the suite's folder upwards, as the template is
])
def test_a_file_the_flags_name_is_read_from_the_suites_folder_and_an_edit_to_it_is_built_and_measured_again(
        tmp_path, flags, include, how, monkeypatch):
    (tmp_path / "suites").mkdir()
    (tmp_path / "include").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "scaled.c").write_text(SCALED_C.replace("INCLUDE", include).replace("HOW", how))
    (tmp_path / "include" / "cfg.h").write_text("#define SCALE 2\n")
    (tmp_path / "src" / "helper.c").write_text("float helper(float v) { return 2 * v; }\n")
    monkeypatch.chdir(tmp_path / "include")  # not where the flags are read from

    def declared():
        variant = Variant(source="scaled.c", entry="scaled", space=Space({"tile": [1]}), flags=flags,
                          heuristic=lambda shape: {"tile": 1}, origin=tmp_path / "suites")
        return variant, scaling("scaled_flags_test", variant, SCALE, 8)

    SCALE = 2
    variant, kernel = declared()
    before = variant.source_hash  # a variant reads its files again once they change
    got, want = run_once(CpuBackend(), kernel, variant, {"tile": 1}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (tmp_path / "include" / "cfg.h").write_text("#define SCALE 3\n")
    (tmp_path / "src" / "helper.c").write_text("float helper(float v) { return 3 * v; }\n")
    SCALE = 3
    edited, kernel = declared()
    assert edited.source_hash != before
    assert edited.declared_flags == variant.declared_flags == " ".join(flags)  # as every checkout has them
    backend = CpuBackend()
    assert not backend.build(kernel, edited, {"tile": 1}, "float32").cached
    got, want = run_once(backend, kernel, edited, {"tile": 1}, n=100)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("target, flags, variable", [
    ("cpu", ("-I", "../inc", "-include", "cfg.h"), None),
    ("cpu", ("--include-directory", "../inc", "-include", "cfg.h"), None),  # -I's long spellings
    ("cpu", ("--include-directory=../inc", "-include", "cfg.h"), None),
    ("cpu", ("-iquote", "../inc", "-imacros", "cfg.h"), None),
    ("cpu", ("-isystem", "../inc", "-include", "cfg.h"), None),
    ("cpu", ("-include", "cfg.h"), "CPATH"),
    ("cpu", ("-I../inc", "-includecfg.h"), None),  # gcc's -include cfg.h, joined
    ("cpu", ("-include", "cfg.h"), "working folder"),  # the run's, inc: found there first
    # the preprocessor's own -include, which gcc gives it: -Wp's words (cfg.h among others), -Xpreprocessor's flags
    ("cpu", ("-I../inc", "-Wp,-include,cfg.h,-DUNUSED"), None),
    ("cpu", ("-I../inc", "-Xpreprocessor", "-include", "-Xpreprocessor", "cfg.h"), None),
    ("cuda", ("-I../inc", "-include", "cfg.h"), None),  # nvcc gives it to its host compiler as given
    # nvcc's other spellings of it, unhashed: --pre-include, and each joined with "=" (gcc's "=cfg.h")
    ("cuda", ("-I../inc", "--pre-include", "cfg.h"), None),
    ("cuda", ("-I../inc", "--pre-include=cfg.h"), None),
    ("cuda", ("-I../inc", "-include=cfg.h"), None),
    ("cuda", ("-I../inc", "-Xcompiler", "-include,cfg.h"), None),  # its host compiler's, which reads the device code
    ("cuda", ("--include-path=../inc", "--compiler-options=-include,cfg.h"), None),
])
def test_a_file_an_include_flag_names_that_the_include_path_finds_in_a_folder_of_the_flags_is_hashed(
        tmp_path, monkeypatch, target, flags, variable):
    """``-I ../inc -include cfg.h``: the compiler looks for cfg.h in its working folder, then along
    the quoted include chain, and reads inc/cfg.h and the lib/scale.h it includes; the hash
    looked for it from the suite's folder upwards alone, and left it to the compiler, unhashed:
    an edit of either kept the source hash, and the old trials were served."""
    if target == "cuda" and not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    if variable == "CPATH":
        monkeypatch.setenv(variable, str(tmp_path / "inc"))
    for folder in ("inc", "lib", "suites"):
        (tmp_path / folder).mkdir()
    if variable == "working folder":
        monkeypatch.chdir(tmp_path / "inc")
    (tmp_path / "inc" / "cfg.h").write_text('#include "../lib/scale.h"\n')  # which tells no folder cfg.h is in
    (tmp_path / "lib" / "scale.h").write_text("#define FACTOR 3.0f\n")
    source = "k.c" if target == "cpu" else "k.cu"
    (tmp_path / "suites" / source).write_text(
        ("" if target == "cpu" else 'extern "C" __global__ ') + "void k(const float *x, float *y, int n)\n"
        + ("{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n" if target == "cpu" else
           "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n"))

    def declared():
        return Variant(source=source, entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, launch=None if target == "cpu" else lambda c, shape: (1, 32),
                       origin=tmp_path / "suites")

    variant = declared()
    text, texts = variant.template, variant.file_texts
    if target == "cpu":
        got, want = run_once(CpuBackend(), scaling("include_flag_chain_test", variant, 3.0, 9), variant, {"tile": 1},
                             n=9)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:  # the copy the build compiles, with its flags, from a working folder of no cfg.h
        (tmp_path / "build").mkdir()
        (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, {"tile": 1}, "float32"))
        code = subprocess.run([cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
                              cwd=tmp_path / "build", capture_output=True, text=True, check=True).stdout
        assert "y[i] = 3.0f * x[i]" in code
    assert_hash_follows(declared, variant, tmp_path / "lib" / "scale.h")
    edited = declared().source_hash
    (tmp_path / "inc" / "cfg.h").write_text("#define FACTOR 5.0f\n")
    assert declared().source_hash != edited
    if target == "cpu":  # the gate's build of the recorded template reads both as tuned
        assert_recorded_build_scales("include_flag_chain_gate_test", variant, text, texts, {"tile": 1})


@pytest.mark.parametrize("target, flags", [
    ("cuda", ("--pre-include", "../inc/a.h,../inc/b.h")),
    ("cuda", ("-include", "../inc/a.h,../inc/b.h")),
    ("cuda", ("-include=../inc/a.h,../inc/b.h",)),
    ("cpu", ("-Wp,-include,../inc/a.h,-include,../inc/b.h",)),
    # nvcc's host compiler's -include, which preprocesses the device code: -Xcompiler's words, split at
    # commas by nvcc and at spaces by the shell it runs the compiler in
    ("cuda", ("-Xcompiler", "-include,../inc/a.h,-include,../inc/b.h")),
    ("cuda", ("-Xcompiler=-include,../inc/a.h", "--compiler-options=-imacros,../inc/b.h")),
    ("cuda", ("--compiler-options", "-include ../inc/a.h -include../inc/b.h")),
    ("cuda", ("-Xcompiler", "-include", "-Xcompiler", "../inc/a.h", "-Xcompiler", "--include=../inc/b.h")),
])
def test_each_file_of_an_include_flag_naming_several_is_hashed_and_built_as_tuned(tmp_path, monkeypatch, target,
                                                                                  flags):
    """nvcc reads each file of ``--pre-include a.h,b.h``, gcc each -include of -Wp's words: such a
    flag was refused ("names several files"), and a suite that tuned with it collected no more
    (a CUDA variant's, on a CPU-only run too); -Xcompiler's were read as no file at all. Each
    file is hashed as a flag's one file is, the build finds each from any working folder, and
    the gate's build of the recorded template reads each as tuned."""
    if target == "cuda" and not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for folder in ("proj/inc", "proj/suites", "build"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "build")  # where "../inc/a.h" is no file
    inc = tmp_path / "proj" / "inc"
    (inc / "a.h").write_text("#define FA 3.0f\n")
    (inc / "b.h").write_text("#define FB 1.0f\n")
    source = "k.c" if target == "cpu" else "k.cu"
    (tmp_path / "proj" / "suites" / source).write_text(
        ("" if target == "cpu" else 'extern "C" __global__ ') + "void k(const float *x, float *y, int n)\n"
        + ("{\n    for (int i = 0; i < n; ++i) y[i] = FA * FB * x[i];\n}\n" if target == "cpu" else
           "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FA * FB * x[i];\n}\n"))

    def declared():
        return Variant(source=source, entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, launch=None if target == "cpu" else lambda c, shape: (1, 32),
                       origin=tmp_path / "proj" / "suites")

    def scales_by_3(name, variant):  # its build: on the CPU, run; nvcc's, preprocessed
        if target == "cpu":
            got, want = run_once(CpuBackend(), scaling(name, variant, 3.0, 9), variant, {"tile": 1}, n=9)
            return np.allclose(got, want, rtol=1e-6)
        (tmp_path / "build" / source).write_text(cuda.source(variant, {"tile": 1}, "float32"))
        return "y[i] = 3.0f * 1.0f * x[i]" in subprocess.run(
            [cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), source],
            capture_output=True, text=True, check=True).stdout

    variant = declared()
    assert variant.flag_files == (inc / "a.h", inc / "b.h")
    assert variant.declared_flags == " ".join(flags)
    text, texts = variant.template, variant.file_texts
    assert scales_by_3("include_list_test", variant)
    hashes = {variant.source_hash}
    for header, edit in (("a.h", "#define FA 5.0f\n"), ("b.h", "#define FB 2.0f\n")):
        (inc / header).write_text(edit)
        hashes.add(declared().source_hash)
    assert len(hashes) == 3  # each edit another source
    kept = {file: texts[digest] for file, digest in hashed_files(text, source).items()}
    assert len(kept) == 2
    recorded = kept_variant(dataclasses.replace(declared(), text=text), kept)  # the gate's, as tuned
    assert scales_by_3("include_list_gate_test", recorded)


@pytest.mark.parametrize("project", ["proj", "my proj", "proj,v2", 'q"x'])
@pytest.mark.parametrize("flags", [
    ("-Xcompiler", "-include,../inc/a.h,-I../lib"),
    ("-Xcompiler", """-include,"../inc/a.h",-I'../lib'"""),
    ("--compiler-options", """-include '../inc/a.h' -I "../lib" -DUNUSED='1 2'"""),
    ("-Xcompiler=-include'../inc/a.h'", "-Xcompiler", '--include-directory="../lib"'),
])
def test_a_file_and_folder_of_an_nvcc_host_compiler_word_are_hashed_and_built_as_tuned(
        tmp_path, monkeypatch, flags, project):
    """nvcc writes -Xcompiler's words into the shell command it runs its host compiler with, so
    a path quoted for that shell is read unquoted (``-include,"../inc/a.h"``: gcc reads
    ../inc/a.h). Read with its quotes, the -include file was none of the suite's, unhashed (an
    edit kept the source hash, and the old trials), and the -I folder a folder named
    ``'../lib'``. The build is given each by its absolute path, which nvcc splits at a comma and
    the shell at a space: written bare, a project under ``my proj/`` or ``proj,v2/`` built
    nothing ("/my: No such file or directory"). Each is hashed, the build finds each from any
    working folder, and the gate's build of the recorded template reads both as tuned."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for folder in (f"{project}/inc", f"{project}/lib", f"{project}/suites", "build"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "build")  # where "../inc/a.h" is no file
    inc, lib = tmp_path / project / "inc", tmp_path / project / "lib"
    (inc / "a.h").write_text("#define FA 3.0f\n")
    (lib / "cfg.h").write_text("#define FACTOR 1.0f\n")
    (tmp_path / project / "suites" / "k.cu").write_text(
        '#include "cfg.h"\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FA * FACTOR * x[i];\n}\n")

    def declared():
        return scaling_variant(tmp_path / project / "suites", flags)

    def scales_by_3(variant):
        return scales_by(tmp_path / "build", variant, "3.0f * 1.0f")

    variant = declared()
    variant.check_folders()
    assert (variant.flag_files, variant.include_dirs) == ((inc / "a.h",), (lib,))
    text, texts = variant.template, variant.file_texts
    assert scales_by_3(variant)
    (inc / "a.h").write_text("#define FA 5.0f\n")
    assert declared().source_hash != variant.source_hash
    assert_hash_follows(declared, declared(), lib / "cfg.h")
    assert sorted(hashed_files(text, "k.cu")) == ["../inc/a.h", "../lib/cfg.h"]
    assert scales_by_3(recorded_build(declared, text, texts))


@pytest.mark.parametrize("flags", [
    ("-I../a,../b",),
    ("-I", "../a,../b"),
    ("-I=../a,../b",),
    ("--include-path", "../a,../b"),
    ("--include-path=../a,../b",),
    ("--include-path", "../a", "-I=../b,"),  # an empty word nvcc drops: no folder, the suite's
    # its host compiler's -I, which preprocesses the device code, searched ahead of nvcc's -I folders
    ("-Xcompiler", "-I../a,-I../b"),
    ("--compiler-options", "-I../a -I ../b"),
    ("-I../b", "--compiler-options", "-I../a"),
    ("-Xcompiler=-I../a", "-Xcompiler", "--include-directory=../b"),
    ("--compiler-options", "-I", "--compiler-options", "../a", "-I../b"),
    # -isystem's, read alike
    ("-isystem", "../a,../b"),
    ("--system-include=../a,../b",),
    ("--system-include", "../a", "-isystem=../b"),
])
def test_each_folder_of_an_nvcc_include_path_flag_is_searched_in_order_hashed_and_built_as_tuned(
        tmp_path, monkeypatch, flags):
    """nvcc reads -I's value as a folder list (``-I../a,../b``, searched in order, as ``-I../a
    -I../b``), joined with "=" too (``-I=../a``), and its long spelling ``--include-path`` alike:
    the hash read the list as one folder of that name, and ``-I=`` and ``--include-path`` as
    none, so a header nvcc read through them was unhashed (an edit kept the source hash, and the
    old trials were served). Its host compiler's -I (``-Xcompiler -I../a``) it gives ahead of
    its own -I folders: read as none, its header was unhashed and the build, given it as
    written, found none from another working folder. -isystem's spellings are read as -I's
    (``-isystem ../a,../b``, ``--system-include=../a``): its list was one folder, its long
    spelling and ``-isystem=`` none. Each folder is hashed as an -I folder is,
    in nvcc's order (b's cfg.h is never read), the build finds each from any working folder,
    and the gate's build of the recorded template reads the copies of both, as tuned."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for folder in ("proj/a", "proj/b", "proj/suites", "build", "b"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "build")  # where "../a" is no folder, and "../b" a decoy's
    (tmp_path / "b" / "scale.h").write_text("#define SCALE 7.0f\n")
    a, b = tmp_path / "proj" / "a", tmp_path / "proj" / "b"
    (a / "cfg.h").write_text("#define FACTOR 3.0f\n")
    (b / "cfg.h").write_text("#define FACTOR 5.0f\n")  # behind a's: never read
    (b / "scale.h").write_text("#define SCALE 1.0f\n")
    (tmp_path / "proj" / "suites" / "k.cu").write_text(
        '#include <cfg.h>\n#include <scale.h>\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * SCALE * x[i];\n}\n")

    def declared():
        return scaling_variant(tmp_path / "proj" / "suites", flags)

    def scales_by_3(variant):
        return scales_by(tmp_path / "build", variant, "3.0f * 1.0f")

    variant = declared()
    variant.check_folders()  # each folder is there
    assert variant.include_dirs == (a, b)
    assert variant.declared_flags == " ".join(flags)
    text, texts = variant.template, variant.file_texts
    assert scales_by_3(variant)
    assert_hash_follows(declared, variant, a / "cfg.h", b / "cfg.h")
    edited = declared().source_hash
    (b / "scale.h").write_text("#define SCALE 2.0f\n")
    assert declared().source_hash != edited
    assert sorted(hashed_files(text, "k.cu")) == ["../a/cfg.h", "../b/scale.h"]
    assert scales_by_3(recorded_build(declared, text, texts))


@pytest.mark.parametrize("project", ["proj,v2", "my proj,v2\\b`q$x"])
def test_a_cuda_project_in_a_folder_whose_name_nvcc_misreads_builds_and_builds_as_recorded(tmp_path, monkeypatch,
                                                                                        project):
    """nvcc splits the value of its own -I and -include at commas, and writes it into the shell
    command it runs its host compiler with, which reads a backslash and a backquote: the paths
    tunebench gives it whole (a folder and a file of the flags, a computed include's folder, the
    gate's kept copies) were split under ``proj,v2/`` ("fatal error: /tmp/proj: No such file
    or directory"), and no config built. Each is spelt as nvcc takes it, and the flags as
    declared stay as written: the build reads each header from any working folder, and the
    gate's build of the recorded template reads the copies."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    root = tmp_path / project
    for folder in ("inc", "suites/impls"):
        (root / folder).mkdir(parents=True)
    (tmp_path / "build").mkdir()
    monkeypatch.chdir(tmp_path / "build")  # where "../inc/cfg.h" is no file
    (root / "inc" / "cfg.h").write_text("#define FA 3.0f\n")
    (root / "inc" / "scale.h").write_text("#define FB 1.0f\n")
    (root / "suites" / "impls" / "pick.h").write_text("#include IMPL\n")  # the copy's build searches impls/
    (root / "suites" / "impls" / "impl.h").write_text("#define FC 1.0f\n")
    (root / "suites" / "k.cu").write_text(
        '#include <scale.h>\n#include "impls/pick.h"\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FA * FB * FC * x[i];\n}\n")
    flags, config = ("-I../inc", "-include", "../inc/cfg.h"), {"IMPL": '"impl.h"'}

    def declared():
        return Variant(source="k.cu", entry="k", space=Space({"IMPL": ['"impl.h"']}), heuristic=lambda shape: config,
                       flags=flags, launch=lambda c, shape: (1, 32), origin=root / "suites")

    def scales_by_3(variant):
        (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, config, "float32"))
        return "y[i] = 3.0f * 1.0f * 1.0f * x[i]" in subprocess.run(
            [cuda.nvcc(), "-E", "-Xcompiler", "-P", *cuda.copy_flags(variant), "k.cu"],
            capture_output=True, text=True, check=True).stdout

    variant = declared()
    assert (variant.include_dirs, variant.flag_files) == ((root / "inc",), (root / "inc" / "cfg.h",))
    assert variant.computed_include_dirs == (root / "suites" / "impls",)
    assert variant.declared_flags == " ".join(flags)
    text, texts = variant.template, variant.file_texts
    assert scales_by_3(variant)
    for header in ("cfg.h", "scale.h"):
        (root / "inc" / header).write_text("#define FA 5.0f\n#define FB 2.0f\n")
    (root / "suites" / "impls" / "impl.h").write_text("#define FC 2.0f\n")
    kept = {file: texts[digest] for file, digest in hashed_files(text, "k.cu").items()}
    assert sorted(kept) == ["../inc/cfg.h", "../inc/scale.h", "impls/impl.h"]
    recorded = kept_variant(dataclasses.replace(declared(), text=text), kept)  # the gate's, as tuned
    assert scales_by_3(recorded)


@pytest.mark.parametrize("flags, include", [
    (("-I../a,../b",), "<cfg.h>"),  # nvcc's list
    (("--compiler-options", "-I../a", "-I../b"), "<cfg.h>"),  # its host compiler's, searched ahead of nvcc's own
    (("-I../a", "-isystem", "../b"), "<cfg.h>"),  # a system's, after every -I folder
    (("-Xcompiler", "-iquote,../a", "-I../b"), '"cfg.h"'),  # its host compiler's quoted chain, ahead of every -I
])
def test_a_header_new_since_the_tune_in_a_folder_nvcc_searches_ahead_of_the_tunes_leaves_the_recorded_build_as_tuned(
        tmp_path, monkeypatch, flags, include):
    """nvcc's build of the recorded template read a cfg.h added since to a folder searched ahead
    of the one the tune read it from: each folder's copy was searched just ahead of that folder.
    It reads the copy."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for folder in ("proj/a", "proj/b", "proj/suites", "build"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "build")
    (tmp_path / "proj" / "b" / "cfg.h").write_text("#define FACTOR 3.0f\n")
    (tmp_path / "proj" / "suites" / "k.cu").write_text(
        f'#include {include}\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n")

    def declared():
        return scaling_variant(tmp_path / "proj" / "suites", flags)

    text, texts = declared().template, declared().file_texts
    (tmp_path / "proj" / "a" / "cfg.h").write_text("#define FACTOR 5.0f\n")
    assert scales_by(tmp_path / "build", recorded_build(declared, text, texts), "3.0f")


def test_an_isystem_folders_header_that_warns_builds_as_recorded_by_nvcc_under_werror(tmp_path, monkeypatch):
    """nvcc's host compiler read the copy of an -isystem folder's header from an -I folder: one
    that warns under ``-Werror all-warnings`` failed the recorded build. It is a system header."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / "cache"))
    for folder in ("proj/b", "proj/suites", "build"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "build")
    (tmp_path / "proj" / "b" / "cfg.h").write_text("__device__ inline int f() { int unused; return 0; }\n"
                                                   "#define FACTOR 3.0f\n")
    (tmp_path / "proj" / "suites" / "k.cu").write_text(
        '#include <cfg.h>\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n")

    def declared():
        return scaling_variant(tmp_path / "proj" / "suites", ("-isystem", "../b", "-Werror", "all-warnings"))

    def builds(variant: Variant) -> subprocess.CompletedProcess:
        (tmp_path / "build" / "k.cu").write_text(cuda.source(variant, {"tile": 1}, "float32"))
        return subprocess.run([cuda.nvcc(), "--cubin", "-arch=sm_90", *cuda.copy_flags(variant), "k.cu",
                               "-o", "k.cubin"], capture_output=True, text=True)

    text, texts = declared().template, declared().file_texts
    assert builds(declared()).returncode == 0
    recorded = builds(recorded_build(declared, text, texts))
    assert recorded.returncode == 0, recorded.stderr


def test_a_cuda_flags_folder_quoted_for_nvcc_is_the_one_folder_nvcc_searches(tmp_path, monkeypatch):
    """``-I"../a,b"`` is one folder to nvcc, which splits its list at no comma inside double
    quotes: read as the two folders ``"../a`` and ``b"``, its header was unhashed (an edit kept
    the old trials), and the build was given neither folder."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH")
    for folder in ("a,b", "suites", "build"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "build")
    (tmp_path / "a,b" / "cfg.h").write_text("#define FACTOR 3.0f\n")
    (tmp_path / "suites" / "k.cu").write_text(
        '#include <cfg.h>\nextern "C" __global__ void k(const float *x, float *y, int n)\n'
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = FACTOR * x[i];\n}\n")

    def declared():
        return scaling_variant(tmp_path / "suites", ('-I"../a,b"',))

    variant = declared()
    assert variant.include_dirs == (tmp_path / "a,b",)
    assert variant.declared_flags == '-I"../a,b"'
    assert "y[i] = 3.0f * x[i]" in nvcc_preprocessed(tmp_path / "build", variant)
    assert_hash_follows(declared, variant, tmp_path / "a,b" / "cfg.h")


@pytest.mark.parametrize("flags", [
    ("-Wp,-include,../include/cfg.h,-DKEPT",),
    ("-Wp,-DKEPT,-imacros,../include/cfg.h",),
    ("-Wp,-DKEPT,-include../include/cfg.h",),  # the preprocessor's -include ../include/cfg.h, joined
])
def test_a_file_a_wp_flag_names_in_a_folder_whose_name_holds_a_comma_is_built_and_built_as_recorded(
        tmp_path, monkeypatch, flags):
    """gcc splits -Wp at every comma: written by its absolute path in its word, the file of a
    checkout under ``proj,v2/`` gave "cc1: error: too many filenames given" in every config's
    build. Its other words are still given (an #error without -DKEPT)."""
    project = tmp_path / "proj,v2"
    for folder in ("suites", "include", "elsewhere"):
        (project / folder).mkdir(parents=True)
    monkeypatch.chdir(project / "elsewhere")
    (project / "k.c").write_text("#ifndef KEPT\n#error \"KEPT not defined\"\n#endif\n"
                                 "void k(const float *x, float *y, int n)\n"
                                 "{\n    for (int i = 0; i < n; ++i) y[i] = FACTOR * x[i];\n}\n")
    (project / "include" / "cfg.h").write_text("#define FACTOR 3.0f\n")

    def declared():
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, origin=project / "suites")

    variant = declared()
    text, texts = variant.template, variant.file_texts
    got, want = run_once(CpuBackend(), scaling(f"wp_comma_test_{len(flags[0])}", variant, 3.0, 9), variant,
                         {"tile": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (project / "include" / "cfg.h").write_text("#define FACTOR 5.0f\n")
    assert declared().source_hash != variant.source_hash
    assert_recorded_build_scales(f"wp_comma_gate_test_{len(flags[0])}", declared(), text, texts, {"tile": 1})


def test_an_include_flag_of_an_empty_name_is_left_to_the_compiler(tmp_path):
    """``-include ""`` raised AttributeError while hashing: the name was looked up on the include
    path as ``#include ""``, which is no include."""
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "k.c").write_text("void k(const float *x, float *y, int n) {}\n")
    variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                      flags=("-include", ""), origin=tmp_path / "suites")
    assert variant.source_hash


def test_an_include_flags_file_is_found_along_the_include_path_from_a_deleted_working_folder(tmp_path, monkeypatch):
    """The compiler finds nothing in a deleted working folder and goes on along its include path;
    the hash failed instead ("None: cannot be read"), for a system header's -include too."""
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    for folder in ("inc", "suites", "gone"):
        (tmp_path / folder).mkdir()
    (tmp_path / "inc" / "cfg.h").write_text("#define FACTOR 3.0f\n")
    (tmp_path / "suites" / "k.c").write_text("void k(const float *x, float *y, int n) {}\n")
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()

    def declared(flags):
        return Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                       flags=flags, origin=tmp_path / "suites")

    assert declared(("-include", "math.h")).source_hash
    variant = declared(("-I", "../inc", "-include", "cfg.h"))
    assert_hash_follows(lambda: declared(("-I", "../inc", "-include", "cfg.h")), variant, tmp_path / "inc" / "cfg.h")


def test_an_include_flags_file_found_in_a_working_folder_outside_the_project_is_the_same_source_in_every_checkout(
        tmp_path, monkeypatch):
    """Found in the run's folder outside the project, cfg.h was named from the template's folder
    ("../../../work/cfg.h"), so checkouts at other depths were other sources; it is named by its
    absolute path, as a CPATH folder's header outside the project is."""
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "cfg.h").write_text("#define FACTOR 3.0f\n")
    monkeypatch.chdir(tmp_path / "work")
    hashes = set()
    for root in (tmp_path / "a" / "proj", tmp_path / "b" / "deeper" / "proj"):
        (root / "suites").mkdir(parents=True)
        (root / "pyproject.toml").write_text("")
        (root / "suites" / "k.c").write_text("void k(const float *x, float *y, int n) {}\n")
        variant = Variant(source="k.c", entry="k", space=Space({"tile": [1]}), heuristic=lambda shape: {"tile": 1},
                          flags=("-include", "cfg.h"), origin=root / "suites")
        assert f'#line 1 "{tmp_path / "work" / "cfg.h"}"' in variant.template
        hashes.add(variant.source_hash)
    assert len(hashes) == 1


def test_a_struct_scalar_the_cpu_cannot_pass_by_value_is_told_how_to_pass_it():
    """It was told to pass np.float32(...) and declare it float, as a float16 is."""
    from tunebench.backends.cpu import args_refusal

    tri = np.dtype([("a", np.float32), ("b", np.float32), ("c", np.float32)])
    assert args_refusal({"t": np.zeros((), tri)[()]}) == (
        "scalar 't' has dtype [('a', '<f4'), ('b', '<f4'), ('c', '<f4')], which the CPU target cannot pass by value "
        "(it passes int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, bool, complex64, "
        "complex128): pass it as a 1-element array to a kernel that takes a pointer to it, or its fields as separate "
        "scalars")
    assert args_refusal({"z": np.clongdouble(1j)}).endswith(
        ": it is a long double complex, whose parts ctypes passes only as Python floats (53 bits of their 64): pass "
        "it as a 1-element array to a kernel that takes a pointer to it")
    assert args_refusal({"h": np.float16(1)}).endswith(": pass np.float32(...) and declare it `float` in the kernel, "
                                                       "converting there")


@pytest.mark.parametrize("suffix, ctype, dtype", [(".c", "float _Complex", np.complex64),
                                                  (".c", "double _Complex", np.complex128),
                                                  (".cpp", "std::complex<float>", np.complex64),
                                                  (".cpp", "std::complex<double>", np.complex128)])
def test_a_complex_scalar_is_passed_by_value_as_the_kernel_takes_it(tmp_path, suffix, ctype, dtype):
    """It was refused: "pass its real and imaginary parts as two scalars of their float type"."""
    header, extern = ("<complex.h>", "") if suffix == ".c" else ("<complex>", 'extern "C" ')
    (tmp_path / f"cscale{suffix}").write_text(
        f"#include {header}\n{extern}void cscale(int n, {ctype} a, const {ctype} *x, {ctype} *y, float b)\n"
        f"{{\n    for (int i = 0; i < n; ++i) y[i] = a * x[i] + ({ctype})(b * U);\n}}\n")
    variant = Variant(source=tmp_path / f"cscale{suffix}", entry="cscale", space=Space({"U": [1]}),
                      heuristic=lambda shape: {"U": 1})
    kernel = Kernel(f"cscale_{dtype.__name__}", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(9,)])]),
                    args=lambda shape, _, rng: {"n": np.int32(shape[0]), "a": dtype(2.5 - 1.5j),
                                                "x": (rng.random(shape[0]) + 1j * rng.random(shape[0])).astype(dtype),
                                                "y": np.empty(shape[0], dtype), "b": np.float32(0.5)},
                    reference=lambda n, a, x, b: a * x + b, outputs=["y"], cpu=variant)
    got, want = run_once(CpuBackend(), kernel, variant, {"U": 1}, n=9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (checked,) = compile_check.check([kernel], "cpu", sample=1)
    assert checked.ok, checked.failures


@pytest.mark.parametrize("suffix, dtype, ctype", [(".c", "complex64", "float _Complex"),
                                                  (".c", "complex128", "double _Complex"),
                                                  (".cpp", "complex64", "std::complex<float>"),
                                                  (".cpp", "complex128", "std::complex<double>")])
def test_a_complex_dtype_is_tb_dtype_in_the_templates_language_declared_ahead_of_it_and_its_helpers(
        tmp_path, suffix, dtype, ctype):
    """complex64 and complex128 had no C type on the cpu target: a complex task was refused. A C++
    template's is std::complex, its header included ahead of the template (and of a source file of
    its flags), neither of which includes it itself."""
    extern = 'extern "C" ' if suffix == ".cpp" else ""
    (tmp_path / f"scale{suffix}").write_text("TB_DTYPE scale(TB_DTYPE z) { return z * (TB_DTYPE)S; }\n")
    (tmp_path / f"k{suffix}").write_text(
        f"#include <stddef.h>\n// tunebench: params\nTB_DTYPE scale(TB_DTYPE z);\n"
        f"{extern}void k(const TB_DTYPE *x, TB_DTYPE *y, int n) {{ for (int i = 0; i < n; ++i) y[i] = scale(x[i]); }}\n")
    variant = Variant(source=f"k{suffix}", entry="k", space=Space({"S": [2]}), heuristic=lambda shape: {"S": 2},
                      flags=(f"scale{suffix}",), origin=tmp_path, dtypes=(dtype,))
    include = "#include <complex>\n" if suffix == ".cpp" else ""
    text, (helper,) = cpu.source(variant, {"S": 2}, dtype), cpu.source_inputs(variant, {"S": 2}, dtype).values()
    for rendered in (text, helper):
        assert rendered.startswith(include + '#line 1 "') and f"#define TB_DTYPE {ctype}\n" in rendered
    assert text.index("#include <stddef.h>") < text.index("#define TB_DTYPE")  # the params where the template has them
    kernel = Kernel(f"k_{dtype}{suffix[1:]}", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(9,)])]),
                    args=lambda shape, dtype, rng: {"x": (rng.random(shape[0]) + 1j * rng.random(shape[0])).astype(dtype),
                                                    "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
                    reference=lambda x, n: 2 * x.astype(np.complex128), outputs=["y"], cpu=variant)
    backend = CpuBackend()
    args = kernel.build_args((9,), dtype)
    runner = backend.load(backend.build(kernel, variant, {"S": 2}, dtype), kernel, variant, {"S": 2}, (9,), args)
    runner.call()
    np.testing.assert_allclose(runner.outputs()[0], 2 * args["x"], rtol=1e-6)
    (checked,) = compile_check.check([kernel], "cpu", sample=1)
    assert checked.ok, checked.failures
