"""Faults are data: crashes, hangs, wrong answers, compile errors and stray writes are recorded
with their status, and the tuning run goes on to find the good candidates' best."""

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tinydb import TinyDB

from tests.test_plugin import TUNE

#: Every measurement of these tests' runs is judged clean (quiet_verdicts, through a conftest.py where
#: pytest runs in a process of its own): beside other load a tune's final round confirms nothing, as
#: documented, and the best good candidate the summary names goes unchecked. A busy machine's tunes
#: have tests of their own (test_interference.py).
pytestmark = pytest.mark.usefixtures("quiet_verdicts")

#: ``fault`` plants one fault per value; ``passes`` makes the good candidates differ in speed.
FAULTY_C = """\
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
typedef TB_DTYPE real;
#if fault == 4
#error "fault 4 does not compile"
#endif
void faulty(const real *x, real *y, int n)
{
    volatile int spin = 1;
    for (int p = 0; p < passes; ++p) {
        for (int i = 0; i < n; ++i) y[i] = 2 * x[i];
        __asm__ volatile("" ::: "memory");
    }
#if fault == 1
    *(volatile int *)0 = 1;  /* segfault */
#elif fault == 2
    while (spin) {}  /* hang */
#elif fault == 3
    y[n / 2] += 1;  /* wrong answer */
#elif fault == 5
    y[n + 16] = 0;  /* out-of-bounds write */
#elif fault == 6
    fputs("faulty: n must be even\\n", stderr);  /* as assert() says why, then aborts */
    abort();
#elif fault == 7
    y[n + (8 << 20)] = 0;  /* far past the output: 32 MB beyond its end */
#elif fault == 8
    ((real *)x)[0] = 0;  /* into an input the kernel does not declare in place */
#elif fault == 9
    if (fork() == 0) return;  /* a child that returns into the worker, as the parent does */
#elif fault == 10
    y[n + 1034] = 0;  /* past the 4 KiB guard, into the rest of its page */
#elif fault == 12
    ((real *)x)[n] = 0;  /* one past the end of an input */
#elif fault == 14
    if (fork() == 0) {  /* a child that lingers, as a candidate's helper process may */
        FILE *f = fopen("lingering.pid", "w");
        fprintf(f, "%d", (int)getpid());
        fclose(f);
        for (;;) pause();
    }
#elif fault == 15
    for (int fd = 3; fd < 64; ++fd) (void)!write(fd, "\\0\\0\\0\\0", 4);  /* a message of no bytes */
#elif fault == 16
    { float one = 1.0f; for (int fd = 3; fd < 64; ++fd) (void)!write(fd, &one, 4); }  /* a length, no message */
#elif fault == 17
    if (fork() == 0) _exit(0);  /* a helper process, waited for as C code does: until none is left */
    while (wait(NULL) > 0) {}
#elif fault == 13
    for (int fd = 3; fd < 64; ++fd) (void)!write(fd, "faulty: debug\\n", 14);  /* into every descriptor */
#endif
}
#if fault == 11
__attribute__((constructor)) static void hang_on_load(void) { for (volatile int spin = 1; spin;) {} }
#endif
"""

FAULTY_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

faulty = Kernel(
    "faulty",
    buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(200000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: 2.0 * x, outputs=["y"],
    cpu=Variant(source="faulty.c", entry="faulty", heuristic=lambda shape: {"passes": 4, "fault": 0},
                space=Space({"passes": [1, 4, 16], "fault": range(9)})),
)
"""

EXPECTED = {0: {"ok", "early_stopped"}, 1: {"crashed"}, 2: {"timeout"}, 3: {"wrong_result"},
            4: {"compile_error"}, 5: {"out_of_bounds"}, 6: {"crashed"}, 7: {"crashed"}, 8: {"out_of_bounds"}}


def test_every_fault_is_recorded_with_its_status_and_the_best_good_candidate_wins(pytester):
    pytester.path.joinpath("faulty.c").write_text(FAULTY_C)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE))
    result = pytester.runpytest("test_faulty.py", *TUNE, "--tune-timeout", "2", "--tune-strategy", "brute_force")
    # 27 candidates + the baseline: the 3 good ones and the baseline pass, 24 faulty ones fail
    result.assert_outcomes(passed=4, failed=24)
    result.stdout.fnmatch_lines([
        "*faulty*all*float32*27*27*0*24*passes:1 fault:0*passes:4 fault:0*",
    ])
    (path,) = (pytester.path / "records").glob("*.json")
    trials = TinyDB(path).table("trials").all()
    assert len(trials) == 27  # every candidate recorded once (the baseline is one of them)
    by_fault = {}
    for t in trials:
        by_fault.setdefault(t["config"]["fault"], []).append(t)
    for fault, statuses in EXPECTED.items():
        assert {t["status"] for t in by_fault[fault]} <= statuses, fault
    assert all("SIGSEGV" in t["error"] for t in by_fault[1])
    assert all("SIGABRT" in t["error"] and t["error"].endswith("; it printed last: faulty: n must be even")
               for t in by_fault[6])
    assert all("timeout" in t["error"] for t in by_fault[2])
    assert all("past the end of output 'y'" in t["error"] for t in by_fault[5])
    assert all("fault 4 does not compile" in t["error"] for t in by_fault[4])
    # a write far past an output faults on a trap, and one into an input on its read-only pages: neither can
    # pass as ok; run again with the inputs writable, the second names the input, the first dies again
    assert all("SIGSEGV" in t["error"] and "not into an input" in t["error"] for t in by_fault[1] + by_fault[7])
    assert all(t["error"].startswith("wrote into input 'x' (4 of 800000 bytes changed)") for t in by_fault[8])


@pytest.mark.parametrize("status", ["crashed", "timeout"])
def test_a_fault_does_not_spoil_the_next_candidate(pytester, status):
    """After a worker is killed, the next candidate runs in a fresh one and passes."""
    fault = {"crashed": 1, "timeout": 2}[status]
    pytester.path.joinpath("faulty.c").write_text(FAULTY_C)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE).replace(
        '"passes": [1, 4, 16], "fault": range(9)', f'"passes": [1, 4], "fault": [{fault}, 0]'))
    result = pytester.runpytest("test_faulty.py", *TUNE, "--tune-timeout", "2", "--tune-strategy", "brute_force")
    # brute force: (1, fault) first, then (1, 0) in a fresh worker, (4, fault), (4, 0) and the baseline
    result.assert_outcomes(passed=3, failed=2)


def test_a_build_whose_loading_hangs_is_a_timeout(pytester):
    """A static initialiser runs when the library loads, before any call: the timeout did not
    cover it, and the candidate ran on (a 15-minute limit) or was recorded as ok."""
    pytester.path.joinpath("faulty.c").write_text(FAULTY_C)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE).replace(
        '"passes": [1, 4, 16], "fault": range(9)', '"passes": [4], "fault": [11, 0]'))
    pytester.runpytest("test_faulty.py", *TUNE, "--tune-timeout", "1", "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("*.json")
    (hung,) = [t for t in TinyDB(path).table("trials").all() if t["config"]["fault"] == 11]
    assert hung["status"] == "timeout" and "a call, or loading the build, ran longer than the 1 s" in hung["error"]


def test_a_candidate_that_writes_into_descriptors_it_does_not_own_costs_its_own_trial(pytester):
    """Text written into the worker's pipe read as a 1.7 GB message: the run waited for it for
    good, past every timeout."""
    pytester.path.joinpath("faulty.c").write_text(FAULTY_C)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE).replace(
        '"passes": [1, 4, 16], "fault": range(9)', '"passes": [1, 4], "fault": [13, 0]'))
    result = pytester.runpytest_subprocess("test_faulty.py", *TUNE, "--tune-strategy", "brute_force", timeout=120)
    result.assert_outcomes(passed=3, failed=2)
    (path,) = (pytester.path / "records").glob("*.json")
    written = [t for t in TinyDB(path).table("trials").all() if t["config"]["fault"] == 13]
    assert len(written) == 2 and all(t["status"] == "crashed" and "its pipe to tunebench" in t["error"]
                                     for t in written), written


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_run_leaves_no_process_a_candidate_forked(pytester, how):
    """The kernel killed the worker with pytest, but not its children: a CI job cancelled (SIGTERM)
    or killed kept them, and its log pipe open, until they ended on their own."""
    pytester.path.joinpath("faulty.c").write_text(FAULTY_C)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE).replace(
        '"passes": [1, 4, 16], "fault": range(9)', '"passes": [1], "fault": [14, 2]'))
    run = subprocess.Popen([sys.executable, "-m", "pytest", "test_faulty.py", *TUNE, "--tune-strategy", "brute_force",
                            "--tune-timeout", "60"], cwd=pytester.path, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    pid_file = pytester.path / "lingering.pid"
    try:
        deadline, written = time.monotonic() + 60, ""
        while not written and time.monotonic() < deadline:  # each call forks one, and rewrites the file
            time.sleep(0.1)
            written = pid_file.read_text() if pid_file.exists() else ""
        lingering = int(written)
        run.send_signal(how)  # while the next candidate hangs
        run.wait(30)
    finally:
        run.kill()
    deadline = time.monotonic() + 10
    while _alive(lingering) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(lingering)


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie has ended: it waits only for its parent to read it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_candidate_that_forks_a_child_returning_into_the_worker_spoils_no_result(pytester):
    """Two processes answered on the worker's pipe: every later result was the one before it (a
    slow config recorded 1500x too fast), and the children outlived the run."""
    pytester.path.joinpath("faulty.c").write_text(FAULTY_C)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE).replace(
        '"passes": [1, 4, 16], "fault": range(9)', '"passes": [1, 16], "fault": [9, 3]'))
    result = pytester.runpytest("test_faulty.py", *TUNE, "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("*.json")
    trials = {(t["config"]["passes"], t["config"]["fault"]): t for t in TinyDB(path).table("trials").all()}
    assert {k: t["status"] for k, t in trials.items() if k[1] == 3} == {(1, 3): "wrong_result", (16, 3): "wrong_result"}
    assert trials[(1, 9)]["status"] in ("ok", "early_stopped") and trials[(16, 9)]["status"] in ("ok", "early_stopped")
    result.assert_outcomes(passed=3, failed=2)


SCRATCH_C = """\
void scratch(const float *x, float *work, float *y, int n)
{
    for (int i = 0; i < n; ++i) work[i] = 2 * x[i];
#if fault == 1
    work[n] = 0;  /* one past the end of the scratch buffer */
#endif
    for (int i = 0; i < n; ++i) y[i] = work[i];
}
"""

SCRATCH_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

scratch = Kernel(
    "scratch", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "work": np.zeros(shape[0], dtype),
                                    "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
    reference=lambda x, work, n: 2.0 * x, outputs=["y"], inplace=["work"],
    cpu=Variant(source="scratch.c", entry="scratch", heuristic=lambda shape: {"fault": 0},
                space=Space({"fault": [0, 1]})),
)
"""


def test_a_write_into_the_slack_past_an_outputs_guard_or_past_a_scratch_buffer_or_an_input_is_out_of_bounds(
        pytester):
    """4 KiB past an output the rest of its page was writable and unchecked: the config won and
    was served; a scratch buffer (inplace=) had no guard at all."""
    pytester.path.joinpath("faulty.c").write_text(FAULTY_C)
    pytester.path.joinpath("test_faulty.py").write_text(textwrap.dedent(FAULTY_SUITE).replace(
        '"passes": [1, 4, 16], "fault": range(9)', '"passes": [4], "fault": [10, 12, 0]'))
    pytester.path.joinpath("scratch.c").write_text(SCRATCH_C)
    pytester.path.joinpath("test_scratch.py").write_text(SCRATCH_SUITE)
    pytester.runpytest("test_faulty.py", "test_scratch.py", *TUNE, "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("*.json")
    trials = {(t["kernel"], t["config"]["fault"]): t for t in TinyDB(path).table("trials").all()}
    assert trials[("faulty", 10)]["status"] == "out_of_bounds"
    assert trials[("faulty", 10)]["error"].startswith("wrote past the end of output 'y' (up to 4140 bytes beyond it)")
    assert trials[("faulty", 12)]["status"] == "out_of_bounds" and trials[("faulty", 12)]["error"].startswith(
        "wrote past the end of input 'x' (up to 4 bytes beyond it) (with the inputs read-only, the write killed the "
        "worker)")  # it was a bare crash: the write landed in the input's slack, with the inputs writable
    assert trials[("scratch", 1)]["status"] == "out_of_bounds"
    assert trials[("scratch", 1)]["error"].startswith("wrote past the end of in-place input 'work' (up to 4 bytes")
    assert {trials[(k, 0)]["status"] for k in ("faulty", "scratch")} <= {"ok", "early_stopped"}


#: ``mode`` 1 is wrong only where malloc would put the output (16 bytes past a page), and slow
#: where the harness staggers it: stopped early there, it was never verified in the other.
PLACED_C = """\
#include <stdint.h>
void placed(const float *x, float *y, int n)
{
    int reps = mode == 1 && ((uintptr_t)y & 4095) != 16 ? 40 : 1;
    for (int r = 0; r < reps; ++r) {
        for (int i = 0; i < n; ++i) y[i] = 2 * x[i];
        __asm__ volatile("" ::: "memory");
    }
#if mode == 1
    if (((uintptr_t)y & 4095) == 16) y[1] += 1;
#elif mode == 2
    if (((uintptr_t)y & 4095) == 16) *(volatile int *)0 = 1;  /* crashes only where malloc puts it */
#endif
}
"""


def test_a_candidate_stopped_early_under_one_placement_is_still_verified_under_the_others(pytester):
    pytester.path.joinpath("placed.c").write_text(PLACED_C)
    pytester.path.joinpath("test_placed.py").write_text(textwrap.dedent(FAULTY_SUITE).replace("faulty", "placed")
                                                        .replace('{"passes": 4, "fault": 0}', '{"mode": 0}')
                                                        .replace('{"passes": [1, 4, 16], "fault": range(9)}',
                                                                 '{"mode": [0, 1]}'))
    pytester.runpytest("test_placed.py", *TUNE, "--tune-strategy", "brute_force").assert_outcomes(passed=2, failed=1)
    (path,) = (pytester.path / "records").glob("*.json")
    (wrong,) = [t for t in TinyDB(path).table("trials").all() if t["config"] == {"mode": 1}]
    assert wrong["status"] == "wrong_result" and wrong["error"].startswith("output 'y': 1 of 200000 values off")
    assert wrong["error"].endswith("(buffers placed malloc)")


def test_a_crash_under_one_placement_names_it_and_that_the_verifying_call_again_did_not_crash(pytester):
    """It said "a write into an input or far past an output hits a trap page", naming no placement,
    though run again with the inputs writable (under the other placement) it had not crashed."""
    pytester.path.joinpath("placed.c").write_text(PLACED_C)
    pytester.path.joinpath("test_placed.py").write_text(textwrap.dedent(FAULTY_SUITE).replace("faulty", "placed")
                                                        .replace('{"passes": 4, "fault": 0}', '{"mode": 0}')
                                                        .replace('{"passes": [1, 4, 16], "fault": range(9)}',
                                                                 '{"mode": [0, 2]}'))
    pytester.runpytest("test_placed.py", *TUNE, "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("*.json")
    (crashed,) = [t for t in TinyDB(path).table("trials").all() if t["config"] == {"mode": 2}]
    assert crashed["status"] == "crashed" and crashed["error"] == (
        "the worker was killed by SIGSEGV: an invalid memory access, which its verifying call with the inputs "
        "writable (buffers placed staggered) did not repeat (buffers placed malloc)")


STATS_C = """\
typedef TB_DTYPE real;
void stats(const real *x, double *sum, real *y, int n)
{
    double s = 0;
    for (int i = 0; i < n; ++i) { y[i] = 2 * x[i] + (bug ? 1 : 0); s += x[i]; }
    *sum = s;
}
"""

STATS_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

stats = Kernel(
    "stats", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32).astype(dtype),
                                    "sum": np.zeros(1), "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
    reference=lambda x, n: (np.array([x.astype(np.float64).sum()]), 2.0 * x), outputs=["sum", "y"],
    cpu=Variant(source="stats.c", entry="stats", heuristic=lambda shape: {"bug": 0}, space=Space({"bug": [0, 1]})),
)
"""


def test_a_wrong_result_blames_no_args_builder_dtype_the_parameters_c_types_already_checked(pytester):
    """Every wrong result of a float32 task ended "the args builder gives 'sum' as float64 ...
    needs .astype(dtype)", though 'sum' is a double * and its type was checked."""
    pytester.path.joinpath("stats.c").write_text(STATS_C)
    pytester.path.joinpath("test_stats.py").write_text(STATS_SUITE)
    pytester.runpytest("test_stats.py", *TUNE, "--tune-strategy", "brute_force")
    (path,) = (pytester.path / "records").glob("*.json")
    (wrong,) = [t for t in TinyDB(path).table("trials").all() if t["config"] == {"bug": 1}]
    assert wrong["status"] == "wrong_result" and wrong["error"].startswith("output 'y': 1000 of 1000 values off")
    assert "astype" not in wrong["error"]
