"""The interference detector on synthetic samples and machine readings, and what a tuning run
does with a disturbed measurement."""

import collections
import contextlib
import ctypes
import json
import os
import random
import subprocess
import sys
import textwrap
import time

import pytest
from tinydb import TinyDB

from tests.conftest import AXPB_SUITE, busy_processes, said
from tests.test_plugin import TUNE
from tunebench import interference
from tunebench.compare import compare, undisturbed
from tunebench.interference import BusyThreads, Monitor, OwnTime, cpu_ticks, machine_signals, sample_signals, verdict
from tunebench.records import RecordStore


def clean(n=60, median=0.8, spread=0.03, seed=0):
    """Quiet-machine samples: a few per cent around the median, skewed slightly upwards."""
    rng = random.Random(seed)
    return [median * (1 + abs(rng.gauss(0, spread))) for _ in range(n)]


def test_clean_samples_show_nothing():
    for seed in range(20):
        assert sample_signals(clean(seed=seed)) == []
        assert sample_signals(clean(n=5, seed=seed)) == []


def test_tick_quantised_outliers_are_named_with_their_tick():
    # two OpenMP threads on two contended cores: a preempted thread stalls the call a 4 ms slice
    rng = random.Random(1)
    samples = [0.5 + rng.uniform(0, 0.01) + (4.0 * rng.choice([1, 1, 2]) if rng.random() < 1 / 3 else 0)
               for _ in range(60)]  # at no fixed beat: a kernel of two speeds keeps one
    (reason,) = [r for r in sample_signals(samples) if "above the fast ones" in r]
    assert "in multiples of a 4 ms scheduler tick" in reason


def test_every_sample_slowed_shows_as_a_low_quantile_far_below_the_median():
    rng = random.Random(2)
    samples = [0.1 + rng.uniform(0, 0.005) for _ in range(8)] + [8.0 + rng.uniform(0, 0.02) for _ in range(52)]
    reasons = sample_signals(samples)
    assert any("most calls were slowed" in r for r in reasons)


def test_two_modes_are_found():
    rng = random.Random(3)
    samples = [1.0 + rng.uniform(0, 0.02) for _ in range(30)] + [1.6 + rng.uniform(0, 0.02) for _ in range(30)]
    assert any(r.startswith("two modes: 30 samples up to") for r in sample_signals(samples))


def test_one_slow_sample_of_five_is_no_second_mode():
    # a trial's five samples with one slow call: its median holds, and two modes need a quarter
    # of the samples on each side (retrying such trials cost 20 of 27 re-measurements of a quiet tune)
    assert sample_signals([0.0668, 0.0660, 0.0664, 0.0984, 0.0662]) == []
    assert any(r.startswith("two modes: 3 samples up to") for r in sample_signals([0.34, 0.33, 0.50, 0.335, 0.51]))


@pytest.mark.parametrize("conditions, disturbed", [
    ({"others_cpu": 0.02, "steal": 0.0, "cores": 2, "threads": 2}, False),
    ({"others_cpu": 0.30, "steal": 0.0, "cores": 2, "threads": 2}, True),  # 0.6 cores wanted, none free
    ({"others_cpu": 0.50, "steal": 0.0, "cores": 2, "threads": 1}, False),  # one busy core, one left free
    ({"others_cpu": 0.80, "steal": 0.0, "cores": 2, "threads": 1}, True),
    ({"others_cpu": 0.00, "steal": 0.12, "cores": 2, "threads": 2}, True),
    ({"loadavg_1m": 6.5, "cores": 2, "threads": 2}, True),  # too short a window: the load speaks
    ({"loadavg_1m": 6.5, "others_cpu": 0.0, "steal": 0.0, "cores": 2, "threads": 2}, False),
])
def test_the_machine_disturbs_once_others_want_more_than_the_kernel_leaves_free(conditions, disturbed):
    assert bool(machine_signals(conditions)) == disturbed


@pytest.mark.parametrize("steal, usual, disturbed", [
    (0.08, 0.08, False),  # a VM whose hypervisor steals 8 % steadily: every measurement alike
    (0.11, 0.08, False),
    (0.14, 0.08, True),  # a burst above it
    (0.06, 0.0, True),  # a quiet host's 6 % is a burst
    (0.06, None, True),  # conditions recorded before the usual steal was
])
def test_the_hypervisors_steal_disturbs_where_it_is_well_above_the_hosts_usual(steal, usual, disturbed):
    """A steal of 5 % or more disturbed every measurement, so on a VM stealing a steady 8 % every
    tune stopped on its first three trials and recorded nothing."""
    conditions = {"others_cpu": 0.0, "steal": steal, "cores": 2, "threads": 2,
                  **({} if usual is None else {"steal_usual": usual})}
    found = machine_signals(conditions)
    assert bool(found) == disturbed, found
    if disturbed and usual:
        assert found == [f"the hypervisor stole {steal:.0%} of the CPU time, where it steals {usual:.0%} as a rule"]


def test_the_monitor_reads_the_hosts_usual_steal_since_boot(tmp_path, monkeypatch):
    """/proc/stat counts since boot: a host that stole 900 of its cores' 10 000 ticks so far
    steals 9 % as a rule, and a span in which it stole 10 % is no burst."""
    stat = tmp_path / "stat"
    before = "cpu  4000 0 0 5100 0 0 0 900 0 0\ncpu0 4000 0 0 5100 0 0 0 900 0 0\n"
    stat.write_text(before)
    monkeypatch.setattr(interference, "PROC_STAT", stat)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monitor = Monitor()
    stat.write_text(before.replace(" 5100 ", " 5127 ").replace(" 900 ", " 903 "))  # 3 of 30 ticks stolen
    time.sleep(0.3)
    found = monitor.conditions()
    assert found["steal"] == 0.1 and found["steal_usual"] == pytest.approx(903 / 10030, abs=1e-3), found
    assert machine_signals({**found, "others_cpu": 0.0, "threads": 1}) == []


def test_a_run_that_watched_a_steady_steal_for_a_while_takes_it_for_the_hosts_usual(tmp_path, monkeypatch):
    """A VM up for weeks (1 % stolen since boot) whose new neighbour steals a steady 8 %: every
    measurement was disturbed, as since boot it read as a burst. Not before the run has watched
    it for :data:`STEADY_S`: its first measurements' steal is no usual of the host's."""
    stat = tmp_path / "stat"
    monkeypatch.setattr(interference, "PROC_STAT", stat)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(interference, "STEADY_S", 0.4)
    ticks = {"user": 9_900_000, "steal": 100_000}

    def tick(seconds):  # a second is 100 ticks of the core, 8 of them stolen
        ticks["user"] += round(92 * seconds)
        ticks["steal"] += round(8 * seconds)
        stat.write_text(f"cpu0 {ticks['user']} 0 0 0 0 0 0 {ticks['steal']} 0 0\n")

    tick(0)
    monitor = Monitor()
    tick(60)
    time.sleep(0.3)
    first = monitor.conditions()
    assert first["steal"] == 0.08 and first["steal_usual"] == 0.01, first
    assert machine_signals({**first, "others_cpu": 0.0}) == [
        "the hypervisor stole 8% of the CPU time, where it steals 1% as a rule"]
    tick(60)
    time.sleep(0.3)
    later = monitor.conditions()
    assert later["steal"] == 0.08 and later["steal_usual"] == 0.08, later
    assert machine_signals({**later, "others_cpu": 0.0}) == []


def test_the_machine_reason_counts_the_cores_the_kernel_leaves_free_in_cores():
    """It read "(1.6 of 2 cores, 1 left free by the kernel's threads)": one what, a reviewer asked."""
    (one,) = machine_signals({"others_cpu": 0.80, "steal": 0.0, "cores": 2, "threads": 1})
    assert one.endswith("(1.6 of 2 cores, 1 core left free by the kernel's threads)"), one
    (none,) = machine_signals({"others_cpu": 0.30, "steal": 0.0, "cores": 2, "threads": 2})
    assert none.endswith("(0.6 of 2 cores, 0 cores left free by the kernel's threads)"), none


def test_a_verdict_names_the_placement_and_the_arm_that_were_disturbed():
    quiet, noisy = clean(), [4.5 if i in (1, 2, 5, 9, 10, 11, 16, 22, 23, 29, 30, 34, 38) else 0.5 for i in range(40)]
    found = verdict({"staggered": {"best": quiet, "baseline": quiet}, "malloc": {"best": noisy, "baseline": quiet}},
                    {"others_cpu": 0.0, "steal": 0.0, "cores": 2})
    assert found["verdict"] == "disturbed" and all(r.startswith("malloc best: ") for r in found["interference"])
    assert verdict({"only": quiet}, {"cores": 2})["verdict"] == "clean"


def test_the_monitor_sees_another_process_take_the_cpu():
    monitor = Monitor()
    time.sleep(0.6)
    monitor.conditions()
    with busy_processes(2):
        time.sleep(0.8)
        busy = monitor.conditions()
    # two spinning processes: most of two cores' time, whatever else ran (this test's own does not count)
    assert busy["others_cpu"] > 0.6 * 2 / max(2, os.cpu_count()) and busy["window_s"] >= 0.5


#: Burns the seconds of CPU time it is given, says so, and waits for its stdin to close.
BURN = """import sys, time
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""
#: Runs the command it is given and waits for it: the burner under it is this process's grandchild,
#: as a worker's compile is.
THROUGH = (sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])")
TICKS_S = os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def burnt(seconds: float, *through: str):
    """A process this one started (through ``through``), which has burnt ``seconds`` of CPU time
    and runs no more until the block closes its stdin; it is waited for by the block's end."""
    child = subprocess.Popen([*through, sys.executable, "-c", BURN, str(seconds)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "burnt\n"
        yield child
    finally:
        child.stdin.close()
        child.wait()


def test_a_process_the_run_started_is_its_own_while_it_runs():
    """A compile under a worker, not yet waited for, was another process's: builds ahead beside a
    GPU measurement disturbed it."""
    own = OwnTime()
    before = own.ticks()
    with burnt(1.0, *THROUGH):
        running = own.ticks()
    assert running - before >= 0.8 * TICKS_S  # its second, whatever else the machine ran


def test_a_process_waited_for_adds_what_it_ran_since_the_last_reading_not_its_whole_time():
    own = OwnTime()
    with burnt(1.0) as child:
        before = own.ticks()
        child.stdin.close()
        child.wait()  # having run nothing more
        after = own.ticks()
    assert after - before < 0.5 * TICKS_S  # none of its second


def test_a_compile_waited_for_during_a_measurement_hides_no_other_process():
    """A compile that burnt 1.5 s before a 0.6 s window and was waited for in it counted whole in
    the window as the run's own, more than two cores gave: two other processes spinning beside it
    read as none."""
    with burnt(1.5) as compile_:
        monitor = Monitor()
        with busy_processes(2):
            time.sleep(0.6)
            compile_.stdin.close()
            compile_.wait()
            busy = monitor.conditions()
    assert busy["others_cpu"] * busy["cores"] > 1, busy  # of the two spinning cores' worth


#: Starts short-lived children one after another, each burning a few ticks, as a build pool's
#: compilers come and go.
CHURN = """import subprocess, sys
while True:
    subprocess.run([sys.executable, "-c", "import time; end = time.process_time() + 0.03\\nwhile time.process_time() < end: pass"])
"""


def test_a_child_waited_for_while_the_run_is_read_is_counted_once():
    """A child that its parent waited for between the reading of the parent and its own was in
    neither for a reading: the run's time fell by its ticks (a build pool's compile read as another
    process's time, and the measurement beside it disturbed), and rose by them at the next."""
    own = OwnTime()
    churn = [subprocess.Popen([sys.executable, "-c", CHURN]) for _ in range(2)]
    try:
        readings, end = [own.ticks()], time.monotonic() + 3
        while time.monotonic() < end:  # back to back: a child ends during a reading now and then
            readings.append(own.ticks())
    finally:
        for process in churn:
            process.kill()
            process.wait()
    falls = [(a, b) for a, b in zip(readings, readings[1:]) if b < a]
    assert not falls, f"{len(falls)} of {len(readings)} readings fell: {falls[:5]}"


def test_a_process_of_the_run_whose_parent_ended_stays_the_runs_and_its_ticks_once_it_ends():
    """A grandchild whose parent ended is init's: its ticks left the run's at the next reading,
    and what it ran after was another process's time (a helper a compiler left running). Once it
    ends, init waits for it, not the run: its ticks stay."""
    launch = "import subprocess, sys; subprocess.Popen(sys.argv[1:]); sys.stdin.readline()"
    burner = "import os; print(os.getpid(), flush=True)\n" + BURN
    own = OwnTime()
    with subprocess.Popen([sys.executable, "-c", launch, sys.executable, "-c", burner, "1.0"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as parent:
        grandchild = int(parent.stdout.readline())
        seen = own.ticks()  # the grandchild under its parent
        parent.stdin.write("end\n")
        parent.stdin.flush()
        parent.wait()  # the grandchild is init's now, and burns on
        assert parent.stdout.readline() == "burnt\n"
        orphaned = own.ticks()
        parent.stdin.close()  # the grandchild ends
    end = time.monotonic() + 10
    while os.path.exists(f"/proc/{grandchild}") and time.monotonic() < end:  # till init has waited for it
        time.sleep(0.05)
    ended = own.ticks()
    assert orphaned - seen >= 0.5 * TICKS_S and ended >= orphaned, (seen, orphaned, ended)


def proc_stat(*cores: tuple[int, int]) -> str:
    """A /proc/stat (6.18) of cores with (user, idle) ticks each, the "cpu" line their sum."""
    lines = [f"cpu{i} {user} 0 0 {idle} 0 0 0 0 0 0" for i, (user, idle) in enumerate(cores)]
    total = f"cpu  {sum(u for u, _ in cores)} 0 0 {sum(i for _, i in cores)} 0 0 0 0 0 0"
    return "\n".join([total, *lines, "intr 61660371 0 0", "ctxt 81028411", "btime 1795858086"]) + "\n"


@pytest.mark.parametrize("busy, disturbed", [(0, True), (1, False)])
def test_the_monitor_reads_the_cores_the_run_may_run_on(tmp_path, monkeypatch, busy, disturbed):
    """Run on core 0 alone of 4 (taskset, a container's cpuset, a batch job's cores): another
    process on core 0 took half of it and was read as an eighth of the machine, 0.5 of 4 cores
    with 3 left free by a 1-thread kernel: clean. One on core 1 takes nothing of it."""
    stat = tmp_path / "stat"
    stat.write_text(proc_stat((100, 1000), (100, 1000), (100, 1000), (100, 1000)))
    monkeypatch.setattr(interference, "PROC_STAT", stat)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monitor = Monitor()
    later = [(100, 1030)] * 4
    later[busy] = (115, 1015)  # 0.3 s at 100 ticks a second: half of a core
    stat.write_text(proc_stat(*later))
    time.sleep(0.3)  # a window /proc/stat's ticks resolve
    found = monitor.conditions()
    assert found["cores"] == 1 and (found["others_cpu"] > 0.4) == disturbed, found
    assert bool(machine_signals({**found, "threads": 1})) == disturbed


def test_a_proc_stat_that_numbers_the_cores_otherwise_is_read_whole():
    """A container's /proc/stat (lxcfs) numbers its cores from 0, where the affinity names the
    host's (4 and 5): no line matched, so the run read no CPU time at all and judged every
    measurement on the load average alone. Whole, as before the cores allowed were read."""
    text = proc_stat((100, 1000), (300, 800))
    assert cpu_ticks(text, {0, 1}) == cpu_ticks(text, {4, 5}) == (400, 0, 0, 1800, 0, 0, 0, 0, 0, 0)
    assert cpu_ticks(text, {1}) == (300, 0, 0, 800, 0, 0, 0, 0, 0, 0)


def test_the_load_average_is_judged_against_the_machines_cores_not_those_the_run_may_run_on(monkeypatch):
    """The load average counts the whole machine (a container's host): on 1 core of 2 allowed,
    a load of 2.5 read as one beyond "1 cores", and the first measurements of a run (no window
    /proc/stat resolves yet) were judged disturbed on a machine with a core to spare."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "getloadavg", lambda: (4.5, 0.0, 0.0))
    found = Monitor().conditions()
    assert found["cores"] == 1 and "others_cpu" not in found, found
    assert machine_signals({**found, "threads": 1}) == []
    monkeypatch.setattr(os, "getloadavg", lambda: (5.5, 0.0, 0.0))
    assert machine_signals({**Monitor().conditions(), "threads": 1}) == ["load average 5.5 on 4 cores"]


class FlakyWorkers:
    """Answers ``disturbed`` a given number of times, then ``clean``."""

    def __init__(self, disturbed, others_cpu=0.9):
        self.left, self.restarts, self.calls, self.paused = disturbed, 0, 0, []
        self.others_cpu = others_cpu

    def restart(self):
        self.restarts += 1

    def pause(self, seconds):
        self.paused.append(seconds)

    def trial(self, job):
        self.calls += 1
        self.left -= 1
        return {"status": "ok", "samples": [1.0], "verdict": "disturbed" if self.left >= 0 else "clean",
                "interference": ["other processes took 90% of the CPU time"], "cost_s": 0.1,
                "conditions": {"others_cpu": self.others_cpu, "steal": 0.0, "cores": 2, "threads": 2}}


def test_a_disturbed_measurement_is_repeated_after_growing_pauses_and_then_kept_marked():
    pauses = []
    workers = FlakyWorkers(disturbed=2)
    result = undisturbed(workers, job=None, sleep=pauses.append)
    assert result["verdict"] == "clean" and result["retries"] == 2 and pauses == [0.5, 1.0]
    assert result["cost_s"] == pytest.approx(0.3)
    pauses.clear()
    stuck = undisturbed(FlakyWorkers(disturbed=10), job=None, fresh=True, sleep=pauses.append)
    assert stuck["verdict"] == "disturbed" and stuck["retries"] == 3 and pauses == [0.5, 1.0, 2.0]


def test_a_measurement_disturbed_in_its_samples_alone_is_waited_on_longer():
    # the machine's readings clean: the host changed speed, which passes in seconds here
    pauses = []
    result = undisturbed(FlakyWorkers(disturbed=5, others_cpu=0.0), job=None, sleep=pauses.append)
    assert result["verdict"] == "clean" and result["retries"] == 5 and pauses == [0.5, 1.0, 2.0, 4.0, 8.0]
    pauses.clear()
    stuck = undisturbed(FlakyWorkers(disturbed=20, others_cpu=0.0), job=None, sleep=pauses.append)
    assert stuck["verdict"] == "disturbed" and sum(pauses) == 31.5 and stuck["retries"] == 6
    pauses.clear()  # the machine known to be busy: measured once, as before
    once = undisturbed(FlakyWorkers(disturbed=20, others_cpu=0.0), job=None, sleep=pauses.append, retries=0)
    assert once["verdict"] == "disturbed" and once["retries"] == 0 and pauses == []


class SampledWorkers(FlakyWorkers):
    """A comparison's worker whose every process is disturbed in its samples alone."""

    def trial(self, job):
        return {**super().trial(job), "samples": {"staggered": {label: [1.0] * 5 for label, _, _ in job.arms}}}


def test_once_a_process_stays_disturbed_the_comparison_measures_the_rest_once():
    workers = SampledWorkers(disturbed=100, others_cpu=0.0)
    comp = compare(workers, "k", (8,), "float32", [("0", {}, None), ("1", {}, None)], processes=3)
    assert len(comp.disturbed) == 3 and workers.calls == 7 + 1 + 1  # retried until the patience ran out once


#: axpb on two OpenMP threads: a thread on every core of this 2-core machine.
AXPB_OMP_C = """\
#if mode == 2
#error "mode 2 does not compile"
#endif
typedef TB_DTYPE real;
void axpb(const real *x, real *y, int n, real a, real b)
{
    #pragma omp parallel for num_threads(2)
    for (int i = 0; i < n; ++i) y[i] = a * x[i] + b + (mode == 1 && i == n / 2);
}
"""


def test_a_tune_beside_two_busy_processes_stops_with_one_failure_saying_what_it_saw(project, pytester):
    root = project()
    (root / "kernels" / "axpb.c").write_text(AXPB_OMP_C)  # anything else running disturbs it
    with busy_processes(2):
        result = pytester.runpytest("suites", *TUNE, "-p", "no:randomly")
    assert result.parseoutcomes().get("failed") == 1  # one item says it; the other tasks' items skip
    result.stdout.fnmatch_lines(["*stopped: the machine is busy (other processes took *% of the CPU time*",
                                 "*stopped, disturbed: * tasks (axpb?small-float32?*); the first failure above "
                                 "says by what (a busy machine, or samples that changed speed while the machine "
                                 "looked quiet)*"])
    assert said(result, "stopped: the machine is busy") == 1
    rows = [line.split() for line in result.stdout.lines if line.startswith("axpb ")]
    (path,) = (root / "records").glob("*.json")  # every trial was measured by this run: the summary counts each
    assert sum(int(row[4]) for row in rows) == len(json.loads(path.read_text())["trials"]), rows
    # no final round confirmed a pick: each row is what best() serves, the heuristic, as the report says
    # (the trials' fastest, 1.38x*, stood beside a report of 1.00x*)
    assert all(" ".join(row).count("vec:") <= 1 for row in rows), rows
    # a task the busy machine stopped in its heuristic's trials still names the heuristic's config ('-' before)
    assert len(rows) == 2 and all(" ".join(row).endswith("vec:2 unroll:1 mode:0") for row in rows), rows


def test_a_busy_stop_counts_the_config_it_cut_short_among_those_that_stayed_disturbed(project, pytester):
    """The trial that stops a task belongs to no outcome: the interference line left its config out,
    and so a task the busy machine stopped in its heuristic's own trials altogether, though the
    records hold their disturbed trials."""
    root = project()
    (root / "kernels" / "axpb.c").write_text(AXPB_OMP_C)  # anything else running disturbs it
    with busy_processes(2):
        result = pytester.runpytest("suites", *TUNE, "-p", "no:randomly")
    result.stdout.fnmatch_lines(["stopped, disturbed: *"])
    (path,) = (root / "records").glob("*.json")
    stayed = collections.Counter(bucket for bucket, _ in {
        (t["bucket"], json.dumps(t["config"], sort_keys=True)) for t in json.loads(path.read_text())["trials"].values()
        if t.get("verdict") == "disturbed"})
    whose = ", ".join(f"axpb[{bucket}-float32] {stayed[bucket]}" for bucket in ("small", "large") if stayed[bucket])
    total = sum(stayed.values())
    (line,) = [line for line in result.stdout.lines if line.startswith("interference: ")]
    assert f", {total} config{'s' if total != 1 else ''} stayed disturbed (not used: {whose})," in line, line


#: Spins ``threads`` OpenMP threads (a serial loop where it is 1) for ``seconds``.
SPIN_C = """\
#include <omp.h>
void spin(int threads, double seconds)
{
    double end = omp_get_wtime() + seconds;
    volatile long n = 0;
    #pragma omp parallel num_threads(threads)
    while (omp_get_wtime() < end) n++;
}
"""


def test_the_threads_a_kernel_ran_are_counted_not_the_ones_asked_for(tmp_path):
    """A serial kernel was taken to run OMP_NUM_THREADS threads: on a 2-core machine with one
    other busy process, every trial was disturbed though the kernel had a core of its own."""
    (tmp_path / "spin.c").write_text(SPIN_C)
    subprocess.run(["gcc", "-O2", "-fopenmp", "-shared", "-fPIC", "-o", tmp_path / "spin.so", tmp_path / "spin.c"],
                   check=True)
    spin = ctypes.CDLL(str(tmp_path / "spin.so")).spin
    spin.argtypes = [ctypes.c_int, ctypes.c_double]
    spin(2, 0.01)  # the pool is up, and idle from here on
    for threads in (1, 2):
        busy = BusyThreads()
        spin(threads, 0.3)
        assert busy.count() == threads
    assert machine_signals({"others_cpu": 0.5, "steal": 0.0, "cores": 2, "threads": 1}) == []


def test_a_trial_records_the_threads_its_kernel_ran(project, pytester, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    # axpb has no OpenMP; on 4 M values its trials span tens of ms, where no helper thread's wake-up counts
    root = project(suite=AXPB_SUITE.replace('Bucket("small", N=(1, 4096), shapes=[(1000,)])',
                                            'Bucket("small", N=(1, 4_000_000), shapes=[(4_000_000,)])').replace(
        'Bucket("large", N=(4097, None), shapes=[(20000,), (50000,)])',
        'Bucket("large", N=(4_000_001, None), shapes=[(8_000_000,)])'))
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small")
    trials = TinyDB(next((root / "records").glob("*.json"))).table("trials").all()
    assert {t["conditions"]["threads"] for t in trials if t["status"] == "ok"} == {1}


def test_a_tune_stopped_where_only_the_samples_changed_speed_does_not_call_the_machine_busy():
    """A kernel whose every other call is slow, on a quiet machine, was "stopped: the machine is
    busy ... tune when the machine is quiet", which no quiet machine would change."""
    from tunebench.session import stopped
    quiet = {"interference": ["two modes: 10 samples up to 1.0 ms, 10 from 2.0 ms"],
             "conditions": {"others_cpu": 0.0, "cores": 2, "threads": 1}}
    busy = {**quiet, "conditions": {"others_cpu": 0.9, "cores": 2, "threads": 1}}
    assert stopped(busy, 3, 3).startswith("stopped: the machine is busy (two modes: ")
    said = stopped(quiet, 3, 6)
    assert said.startswith("stopped: the samples kept changing speed while the machine's own readings were quiet "
                           "(two modes: ") and "or a kernel whose calls run at two speeds" in said


def test_a_helper_threads_wake_up_in_a_short_span_is_not_a_thread_of_the_kernel_and_its_openmp_threads_are(
        monkeypatch):
    """A serial kernel's trial of 3 ms recorded 2 threads: an idle helper ran a quarter of the span
    (CI, a 0.5 µs axpb under OMP_NUM_THREADS=2); an OpenMP thread runs nearly all of it."""
    import threading

    import tunebench.interference as interference

    me = str(threading.get_native_id())  # the kernel's calling thread: its reading lags over a short span
    for helper_ns, threads in ((780_000, 1), (2_900_000, 2)):
        readings = iter([{me: 0, "2": 10_000_000}, {me: 0, "2": 10_000_000 + helper_ns}])
        clock = iter([100.0, 100.003])
        monkeypatch.setattr(interference, "_run_ns", lambda: next(readings))
        monkeypatch.setattr(interference.time, "perf_counter", lambda: next(clock))
        assert BusyThreads().count() == threads


def test_a_kernel_whose_calls_alternate_in_speed_is_not_taken_for_a_busy_machine():
    """Every other call sweeps a 16 MB buffer: its trials were disturbed by their samples alone,
    retried for 31.5 s each, and the task stopped as "the machine is busy" on a quiet machine."""
    rng = random.Random(4)
    for period, slow, extra in ((2, 0.23, 0.0), (3, 0.23, 0.0), (2, 2.5, 2.0)):  # 2 ms more: no scheduler's tick
        samples = [(slow if i % period == 0 else slow - 0.22 - extra) + rng.uniform(0, 0.002) for i in range(40)]
        assert sample_signals(samples) == [], (period, slow)
    # the same two speeds in bursts, as a load makes them, are still seen
    bursts = [0.01 + rng.uniform(0, 0.002) for _ in range(20)] + [0.23 + rng.uniform(0, 0.002) for _ in range(20)]
    assert any(r.startswith("two modes") for r in sample_signals(bursts))


def test_the_summary_counts_each_config_that_stayed_disturbed_once_the_heuristics_too(twice_project, pytester,
                                                                                       monkeypatch):
    """The search asked the heuristic's own config, measured once as the baseline: the summary
    counted it twice ("5 configs stayed disturbed" of a space of 4)."""
    import tunebench.interference
    import tunebench.session
    import tunebench.workers

    def disturbed(samples, conditions):
        return {"conditions": dict(conditions), "verdict": "disturbed", "interference": ["a planted disturbance"]}

    monkeypatch.setattr(tunebench.interference, "verdict", disturbed)
    monkeypatch.setattr(tunebench.workers.Workers, "pause", lambda self, seconds: None)  # retries at once
    monkeypatch.setattr(tunebench.session, "BUSY_STRIKES", 10)
    result = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-strategy", "brute_force",
                                "--tune-trials", "4")
    (row,) = [line for line in result.stdout.lines if line.startswith("twice ")]
    assert row.split()[3] == "4", row  # configs
    result.stdout.fnmatch_lines(["*, 4 configs stayed disturbed (not used: twice?small-float32? 4)*"])  # and whose
    # and the task's failure says why it has no pick (its row showed "-" everywhere, without a word)
    result.stdout.fnmatch_lines(["no config was timed undisturbed on every shape of the bucket (4 configs, 4 trials, "
                                 "stayed disturbed by other load after their retries, the last by: a planted "
                                 "disturbance), so none was "
                                 "judged: the heuristic is still served; tune again on a quieter machine: the "
                                 "trials are kept, and the same command resumes the tune"])


def test_a_tune_too_short_for_a_busy_stop_whose_every_trial_stayed_disturbed_fails(twice_project, pytester,
                                                                                  monkeypatch):
    """The heuristic and one candidate, both disturbed: two trials stopped no task (three in a row
    do), and the run exited 0 as if it had tuned, its records holding nothing to trust."""
    import tunebench.interference
    import tunebench.workers

    monkeypatch.setattr(tunebench.workers.Workers, "pause", lambda self, seconds: None)  # retries at once
    tune = ("suites", *TUNE, "-k", "small", "--tune-strategy", "brute_force", "--tune-trials", "1")
    with monkeypatch.context() as m:
        m.setattr(tunebench.interference, "verdict", lambda samples, conditions: {
            "conditions": dict(conditions), "verdict": "disturbed", "interference": ["a planted disturbance"]})
        result = pytester.runpytest(*tune)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes().get("failed") == 1  # the heuristic's item says it; the candidate's passes
    result.stdout.fnmatch_lines(["no config was timed undisturbed on every shape of the bucket (2 configs, 2 trials, "
                                 "stayed disturbed by other load after their retries, *), so none was judged: *; *: "
                                 "the trials are kept, "
                                 "and the same command resumes the tune",
                                 "stopped, disturbed: 1 of 1 tasks (twice?small-float32?)*"])
    (path,) = (twice_project / "records").glob("*.json")
    assert [t["verdict"] for t in RecordStore(path).trials()] == ["disturbed"] * 2
    with monkeypatch.context() as m:  # quieter: the same command measures both again, and judges them
        m.setattr(tunebench.interference, "verdict", lambda samples, conditions: {
            "conditions": dict(conditions), "verdict": "clean", "interference": []})
        pytester.runpytest(*tune).assert_outcomes(passed=2, skipped=3, deselected=5)
    assert [t["verdict"] for t in RecordStore(path).trials()] == ["clean"] * 2


def test_a_heuristic_that_fails_is_its_items_failure_where_every_other_config_stayed_disturbed(
        twice_project, pytester, monkeypatch):
    """The heuristic's config gives a wrong result (judged clean) and every candidate stayed
    disturbed: its item said "tune again on a quieter machine", hiding the bug to fix first."""
    import tunebench.workers
    from tunebench.workers import TrialJob

    source = twice_project / "twice.c"
    source.write_text(source.read_text().replace("y[i] = 2 * x[i] + r * 0;",
                                                 "y[i] = (reps == 4 && pad == 0) ? 0 : 2 * x[i] + r * 0;"))
    trial = tunebench.workers.Workers.trial

    def disturbed(self, job):  # every measured candidate's verdict, the heuristic's wrong result kept
        result = trial(self, job)
        if isinstance(job, TrialJob) and result.get("samples"):
            result["verdict"], result["interference"] = "disturbed", ["a planted disturbance"]
        return result

    monkeypatch.setattr(tunebench.workers.Workers, "trial", disturbed)
    monkeypatch.setattr(tunebench.workers.Workers, "pause", lambda self, seconds: None)  # retries at once
    result = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-strategy", "brute_force", "--tune-trials", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "no config was timed undisturbed" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*wrong_result*"])


def test_a_busy_stop_after_the_search_while_the_records_pick_is_measured_again_is_a_stop_not_a_failure(
        pytester, monkeypatch):
    """The search ended, and the final round's earlier pick, measured again (its template edited
    since), stayed disturbed: the task failed ("the task failed: stopped: the machine is busy"),
    not "stopped, disturbed" with its trials kept for a later tune."""
    import tunebench.interference
    import tunebench.workers
    from tests.test_records_safety import SLOW_C, SLOW_SUITE

    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    suite = (textwrap.dedent(SLOW_SUITE).replace("shapes=[(1000,)]", "shapes=[(1000,), (2000,)]")
             .replace('{"pause": 1, "tag": 0}', '{"pause": 3, "tag": 0}')
             .replace('{"pause": [1, 2], "tag": range(10)}', '{"pause": [1, 3], "tag": [0]}'))
    pytester.path.joinpath("test_slow.py").write_text(suite)
    monkeypatch.setattr(tunebench.workers.Workers, "pause", lambda self, seconds: None)  # retries at once
    with monkeypatch.context() as m:  # the other runs on this machine do not decide the pick
        m.setattr(tunebench.interference, "verdict", lambda samples, conditions: {
            "conditions": dict(conditions), "verdict": "clean", "interference": []})
        pytester.runpytest("test_slow.py", *TUNE, "--tune-strategy", "brute_force").assert_outcomes(passed=3)
    (path,) = (pytester.path / "records").glob("*.json")
    assert [c["shapes"][0]["best"] for c in TinyDB(path).table("checks").all()] == [{"pause": 1, "tag": 0}]
    pytester.path.joinpath("slow.c").write_text(SLOW_C + "int edited;\n")  # code: every trial is measured again
    pytester.path.joinpath("test_slow.py").write_text(suite.replace('"pause": [1, 3]', '"pause": [3, 1]'))
    monkeypatch.setattr(tunebench.interference, "verdict", lambda samples, conditions: {
        "conditions": dict(conditions), "verdict": "disturbed", "interference": ["a planted disturbance"]})
    result = pytester.runpytest("test_slow.py", *TUNE, "--tune-strategy", "brute_force", "--tune-trials", "1")
    assert "the task failed" not in result.stdout.str()
    # "stayed disturbed after 3 retries" where the run's readings showed other load, "stayed so after 6 retries"
    # where they were quiet (CI's machine, alone): the planted verdict's wording is the readings'
    result.stdout.fnmatch_lines(["*stopped: * (a planted disturbance); 3 trial(s) in a row stayed * after * retries*",
                                 "*stopped, disturbed: 1 of 1 tasks (slow?all-float32?)*their trials are kept, and a "
                                 "later tune resumes them*"])
    shapes = {(t["config"]["pause"], tuple(t["shape"])) for t in RecordStore(path).trials()
              if t.get("verdict") == "disturbed"}
    assert (1, (1000,)) in shapes  # the pick's trial that stopped it, kept


def _planted_trials(monkeypatch, verdicts: dict) -> tuple[list, list]:
    """Each trial's verdict taken in turn from ``verdicts`` (shape: "disturbed", "samples",
    "timeout" or "clean", clean once they run out; a disturbed one with a busy machine's readings,
    so its retries are the usual three; "samples" disturbed by its samples alone, the machine's
    readings quiet; a timeout with no samples and no verdict), every comparison's clean: (the
    shapes measured, in order, one per attempt; the retries' pauses), none of them waited."""
    import tunebench.workers
    from tunebench.workers import TrialJob

    trial = tunebench.workers.Workers.trial
    measured, pauses = [], []

    def planted(self, job):
        result = trial(self, job)
        if isinstance(job, TrialJob) and result.get("samples"):
            measured.append(tuple(job.shape))
            left = verdicts.get(tuple(job.shape), [])
            kind = left.pop(0) if left else "clean"
            if kind == "disturbed":
                result.update(verdict="disturbed", interference=["other processes took 90% of the CPU time"],
                              conditions={**result.get("conditions", {}), "others_cpu": 0.9, "cores": 2, "threads": 1})
                return result
            if kind == "samples":
                result.update(verdict="disturbed", interference=["two modes: 21 samples up to 0.06 ms, 9 from 4.1 ms"],
                              conditions={**result.get("conditions", {}), "others_cpu": 0.0, "steal": 0.0,
                                          "steal_usual": 0.0, "throttled": 0, "cores": 2, "threads": 1})
                return result
            if kind == "timeout":
                for key in ("verdict", "interference", "placements"):
                    result.pop(key, None)
                return {**result, "status": "timeout", "error": "timed out after 10 s", "samples": []}
        if "verdict" in result:
            result.update(verdict="clean", interference=[])
        return result

    monkeypatch.setattr(tunebench.workers.Workers, "trial", planted)
    monkeypatch.setattr(tunebench.workers.Workers, "pause", lambda self, seconds: pauses.append(seconds))
    return measured, pauses


def test_once_a_task_stopped_on_the_busy_machine_the_next_measures_one_trial_once_before_it_stops(
        twice_project, pytester, monkeypatch):
    """Six tasks on a busy runner took 180 s to stop: each after a trial retried with its pauses,
    the machine known busy since the first stopped. The next task measures its trial once and
    stops, saying so."""
    measured, pauses = _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 20, (20000,): ["disturbed"] * 20})
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force", "-rs")
    assert measured == [(4096,)] * 12 + [(20000,)]  # three trials after their three retries each; then one, once
    assert pauses == [0.5, 1.0, 2.0] * 3
    result.stdout.fnmatch_lines([
        "stopped, disturbed: 2 of 2 tasks (twice?small-float32?, twice?large-float32?); * quiet); 1 of them at a trial "
        "not retried once it showed other load, as an earlier task had stopped so; their trials are kept*",
        "SKIPPED [[]1[]] *: stopped: the machine is busy (other processes took 90% of the CPU time); its trial stayed "
        "disturbed, measured once without retries or pauses, as an earlier task of this run stopped disturbed. *"
        "(the run failed once for a busy machine, above)"])


def test_a_task_after_a_busy_stop_goes_on_once_a_trial_comes_out_clean_and_retries_as_on_any_machine(
        twice_project, pytester, monkeypatch):
    """The machine quiet again by the next task: its first trial, measured once, comes out clean,
    and a later trial disturbed once is retried, not taken for the busy machine of before."""
    measured, pauses = _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 20, (20000,): ["clean", "disturbed"]})
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force")
    assert pauses == [0.5, 1.0, 2.0] * 3 + [0.5]
    assert measured[12:] == [(20000,)] * 5  # the heuristic's, a candidate's twice, the two others'
    result.stdout.fnmatch_lines(["stopped, disturbed: 1 of 2 tasks (twice?small-float32?); * quiet); their trials "
                                 "are kept*"])


def test_a_task_served_from_its_records_after_a_busy_stop_does_not_end_the_busy_state(
        twice_project, pytester, monkeypatch):
    """A task whose tune the records hold whole measures no trial, and says nothing of the machine:
    its search's end cleared the busy state all the same, and the task after it went back to its
    retries and pauses on the busy machine."""
    suite = twice_project / "suites" / "test_twice.py"
    text = suite.read_text().replace('shapes=[(20000,)])', 'shapes=[(20000,)]), Bucket("huge", N=(30000, None), '
                                     'shapes=[(40000,)])').replace("N=(4097, None)", "N=(4097, 29999)")
    assert "huge" in text and "4097, 29999" in text
    suite.write_text(text)
    with monkeypatch.context() as quiet:  # the large task tuned whole: served from its records next
        _planted_trials(quiet, {})
        pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force", "-k", "large").assert_outcomes(passed=5)
    measured, pauses = _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 20, (40000,): ["disturbed"] * 20})
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force")
    assert measured == [(4096,)] * 12 + [(40000,)]  # nothing of the large task's; the huge one's trial, once
    assert pauses == [0.5, 1.0, 2.0] * 3
    result.stdout.fnmatch_lines(["stopped, disturbed: 2 of 3 tasks *; 1 of them at a trial not retried once it "
                                 "showed other load, *"])


def test_a_trial_that_measured_nothing_after_a_busy_stop_does_not_end_the_busy_state(
        twice_project, pytester, monkeypatch):
    """A timeout (a crash, a compile error) has no samples and no verdict: it says nothing of the
    machine. Taken for a trial that came out clean, it sent the disturbed trials after it back to
    their retries and pauses, and the task on the busy machine went on."""
    with monkeypatch.context() as quiet:  # the large task's heuristic recorded: the next run measures candidates
        _planted_trials(quiet, {})
        pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force", "--tune-trials", "1", "-k", "large")
    measured, pauses = _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 20,
                                                     (20000,): ["timeout"] + ["disturbed"] * 20})
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force")
    assert measured == [(4096,)] * 12 + [(20000,)] * 2  # the timeout, then a trial measured once
    assert pauses == [0.5, 1.0, 2.0] * 3
    result.stdout.fnmatch_lines(["stopped, disturbed: 2 of 2 tasks *; 1 of them at a trial not retried once it showed other load, *"])


def test_on_a_cluster_a_task_after_a_busy_stop_measures_its_trial_once_not_ahead_with_retries(
        twice_project, pytester, monkeypatch):
    """A cluster measures the candidates ahead on its idle devices, each with the usual retries
    and pauses: one stopped the task after a busy stop, whose reason said it was measured once.
    While the machine is known busy nothing is measured ahead."""
    from concurrent.futures import Future

    import tunebench.workers
    with monkeypatch.context() as quiet:  # the large task's heuristic recorded: the next run measures candidates
        _planted_trials(quiet, {})
        pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force", "--tune-trials", "2", "-k", "large")
    measured, pauses = _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 50, (20000,): ["disturbed"] * 50})
    ahead = []

    def submit(self, job):  # as a device of the cluster measures it: undisturbed, with its retries
        ahead.append(tuple(job.shape))
        future = Future()
        future.set_result(undisturbed(self, job))
        return future

    monkeypatch.setattr(tunebench.workers.Workers, "submit", submit, raising=False)
    monkeypatch.setattr(tunebench.workers.Workers, "devices", [0, 1], raising=False)
    monkeypatch.setattr(tunebench.workers.Workers, "idle", lambda self: 1, raising=False)
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force")
    assert (4096,) in ahead and (20000,) not in ahead
    assert measured[-1:] == [(20000,)] and measured.count((20000,)) == 1  # measured once, here
    result.stdout.fnmatch_lines(["stopped, disturbed: 2 of 2 tasks *; 1 of them at a trial not retried once it showed other load, *"])


def test_after_a_busy_stop_a_trial_disturbed_by_its_samples_alone_is_retried(twice_project, pytester, monkeypatch):
    """Samples that change speed while the machine's readings are quiet pass in seconds: the
    machine known busy, one such trial stopped the whole task, where its retry came out clean."""
    measured, pauses = _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 20, (20000,): ["samples"]})
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force")
    assert pauses == [0.5, 1.0, 2.0] * 3 + [0.5]
    assert measured[12:14] == [(20000,)] * 2  # the heuristic's, disturbed, then clean
    result.stdout.fnmatch_lines(["stopped, disturbed: 1 of 2 tasks (twice?small-float32?); * quiet); their trials "
                                 "are kept*"])


def test_after_a_busy_stop_a_trial_whose_retry_shows_other_load_stops_the_task(twice_project, pytester, monkeypatch):
    """The machine known busy, a trial disturbed by its samples alone is retried, and the retry
    showed other processes' load: counted as one strike of three, the task went on measuring
    noise, each of its trials retried so."""
    measured, pauses = _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 20,
                                                     (20000,): ["samples", "disturbed"] * 20})
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force", "-rs")
    assert measured[12:] == [(20000,)] * 2  # the heuristic's, disturbed in its samples, then by the load: stopped
    assert pauses == [0.5, 1.0, 2.0] * 3 + [0.5]
    result.stdout.fnmatch_lines([
        "stopped, disturbed: 2 of 2 tasks *; 1 of them at a trial not retried once it showed other load, *",
        "SKIPPED [[]1[]] *: stopped: the machine is busy (other processes took 90% of the CPU time); its trial stayed "
        "disturbed, its other load seen at retry 1 of a disturbance in its samples alone, not retried further, as an "
        "earlier task of this run stopped disturbed. *"])


def test_after_a_busy_stop_trials_that_stay_disturbed_by_their_samples_stop_as_on_any_machine(
        twice_project, pytester, monkeypatch):
    """Retried so, three in a row that stay disturbed stop the task, saying after how many
    retries, not that a trial was measured once."""
    _planted_trials(monkeypatch, {(4096,): ["disturbed"] * 20, (20000,): ["samples"] * 50})
    result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force", "-rs")
    result.stdout.fnmatch_lines(["stopped, disturbed: 2 of 2 tasks *; their trials are kept*",
                                 "SKIPPED [[]1[]] *: stopped: the samples kept changing speed while the machine's own "
                                 "readings were quiet (two modes: *); 3 trial(s) in a row stayed so after * retries: *"])
    assert "without retries or pauses" not in result.stdout.str()
