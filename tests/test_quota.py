"""A cgroup's CPU quota (a Kubernetes CPU limit, ``docker --cpus``): read from real cgroup v1 and v2
files, the thread count and the note it gives the CPU target, the verdict on a measurement it
throttled, and, where this machine lets a test make a cgroup, all of it under a real quota."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from tinydb import TinyDB

import tunebench.backends.cpuinfo as cpuinfo
from tests.test_measure import Unwriting
from tests.test_plugin import TUNE
from tests.test_workers import DOUBLE_C
from tunebench import Bucket, Buckets, Kernel, Space, Variant
from tunebench.backends import quota
from tunebench.device import device_id
from tunebench.interference import Throttling, machine_signals, remedy, verdict
from tunebench.measure import MeasureSettings, measure_placements
from tunebench.session import stopped
from tunebench.workers import CompareJob, Workers

#: Files as kernels write them: v1's cpu.stat (6.18, a cgroup throttled at 0.5 CPU), v2's of a
#: throttled cgroup (6.8) and of the root, which counts no throttling.
V1_STAT = "nr_periods 105\nnr_throttled 78\nthrottled_time 2238040002\nnr_bursts 0\nburst_time 0\n"
V2_STAT = ("usage_usec 1187373\nuser_usec 1101390\nsystem_usec 85983\ncore_sched.force_idle_usec 0\n"
           "nr_periods 57\nnr_throttled 46\nthrottled_usec 2367211\nnr_bursts 0\nburst_usec 0\n")
V2_ROOT_STAT = "usage_usec 53447549273\nuser_usec 40404063230\nsystem_usec 13043486042\nnice_usec 5827854912\n"

#: /proc/self/cgroup and /proc/self/mountinfo: a hybrid host (v1 cpu beside a v2 mount without it),
#: a Docker container on v2 with its own cgroup namespace, a Kubernetes container on v1 (its cgroup
#: bind-mounted, no namespace), and a systemd session on v2.
HYBRID = ("9:name=systemd:/\n2:cpuacct:/\n1:cpu:/tbq\n0::/\n",
          "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
          "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
          "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
DOCKER_V2 = ("0::/\n", "1034 1020 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup "
                       "rw,nsdelegate,memory_recursiveprot\n")
KUBERNETES_V1 = ("12:cpu,cpuacct:/kubepods/burstable/pod1234/abcd\n11:memory:/kubepods/burstable/pod1234/abcd\n",
                 "1500 1490 0:31 /kubepods/burstable/pod1234/abcd /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,"
                 "noexec,relatime master:12 - cgroup cgroup rw,cpu,cpuacct\n"
                 "1501 1490 0:32 /kubepods/burstable/pod1234/abcd /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,"
                 "relatime master:13 - cgroup cgroup rw,memory\n")
SYSTEMD_V2 = ("0::/user.slice/user-1000.slice/session-2.scope\n",
              "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
              "rw,nsdelegate,memory_recursiveprot\n")


@pytest.mark.parametrize("files, found", [
    (HYBRID, ["/sys/fs/cgroup/cpu/tbq", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified"]),
    (DOCKER_V2, ["/sys/fs/cgroup"]),
    (KUBERNETES_V1, ["/sys/fs/cgroup/cpu,cpuacct"]),
    (SYSTEMD_V2, ["/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope", "/sys/fs/cgroup/user.slice/"
                  "user-1000.slice", "/sys/fs/cgroup/user.slice", "/sys/fs/cgroup"]),
])
def test_the_cgroup_folders_are_the_process_own_and_each_above_it_up_to_the_mount(files, found):
    assert quota.folders(*files) == [Path(f) for f in found]


def test_quota_files_and_throttling_counters_are_read_as_v1_and_v2_write_them():
    assert quota.cpu_max("max 100000\n") == (None, 100000)
    assert quota.cpu_max("150000 100000\n") == (150000, 100000)
    assert quota.cfs("-1\n", "100000\n") == (None, 100000)
    assert quota.cfs("50000\n", "100000\n") == (50000, 100000)
    assert quota.throttling(V1_STAT) == (78, 2238040002)
    assert quota.throttling(V2_STAT) == (46, 2367211000)
    assert quota.throttling(V2_ROOT_STAT) == (0, 0)


def cgroups(under: Path, **levels: dict[str, str]) -> list[Path]:
    """Folders in ``under``, the first nested deepest, each holding its files: the levels of a
    process's cgroup as :func:`quota.folders` lists them."""
    names = list(levels)
    found = []
    for i, name in enumerate(names):
        folder = under.joinpath(*reversed(names[i:]))
        folder.mkdir(parents=True, exist_ok=True)
        for file, text in levels[name].items():
            (folder / file).write_text(text)
        found.append(folder)
    return found


def test_the_tightest_quota_of_the_levels_holds_and_their_throttling_adds_up(tmp_path):
    # Kubernetes on v2: the container unlimited, its pod at 1.5 CPU, the node's slice unlimited, the root
    levels = cgroups(tmp_path, container={"cpu.max": "max 100000\n", "cpu.stat": V2_STAT},
                     pod={"cpu.max": "150000 100000\n", "cpu.stat": V2_STAT}, kubepods={"cpu.max": "max 100000\n"},
                     top={"cpu.stat": V2_ROOT_STAT})
    found = quota.limit(levels)
    assert (found.cpus, found.threads, found.cgroup, str(found)) == (1.5, 1, levels[1], "1.5 CPU per 100 ms")
    assert quota.throttled(levels) == (92, 4734422000)
    v1 = cgroups(tmp_path / "v1", tbq={"cpu.cfs_quota_us": "50000\n", "cpu.cfs_period_us": "100000\n",
                                       "cpu.stat": V1_STAT},
                 cpu={"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"})
    assert (quota.limit(v1).cpus, quota.limit(v1).threads, quota.throttled(v1)) == (0.5, 1, (78, 2238040002))
    assert quota.limit(cgroups(tmp_path / "free", cpu={"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"},
                               unified={"cpu.stat": V2_ROOT_STAT})) is None


def test_of_several_mounts_of_a_hierarchy_the_one_that_shows_the_process_cgroup_is_read(tmp_path):
    """The first mount of a kind was read: another container's cgroup bind-mounted ahead of the
    process's own gave its quota, and a v2 service's folder a session's."""
    k8s = "12:cpu,cpuacct:/kubepods/burstable/pod1234/abcd\n11:memory:/kubepods/burstable/pod1234/abcd\n"
    other, own, host = tmp_path / "other", tmp_path / "cpu,cpuacct", tmp_path / "host"
    mounts = (f"1500 1490 0:31 /kubepods/besteffort/pod999/ef01 {other} ro,relatime - cgroup cgroup rw,cpu,cpuacct\n"
              f"1501 1490 0:31 /kubepods/burstable/pod1234/abcd {own} ro,relatime - cgroup cgroup rw,cpu,cpuacct\n"
              f"1502 1490 0:32 /kubepods/burstable/pod1234/abcd {tmp_path / 'memory'} ro - cgroup cgroup rw,memory\n")
    cgroups(tmp_path, other={"cpu.cfs_quota_us": "25000\n", "cpu.cfs_period_us": "100000\n"})
    cgroups(tmp_path, **{"cpu,cpuacct": {"cpu.cfs_quota_us": "150000\n", "cpu.cfs_period_us": "100000\n"}})
    levels = quota.folders(k8s, mounts)
    assert levels == [own] and quota.limit(levels).cpus == 1.5
    # the host's hierarchy mounted too, which shows the pod's limit above the container's: it holds
    pod = cgroups(host, abcd={"cpu.cfs_quota_us": "150000\n", "cpu.cfs_period_us": "100000\n"},
                  pod1234={"cpu.cfs_quota_us": "100000\n", "cpu.cfs_period_us": "100000\n"}, burstable={},
                  kubepods={})[1]
    levels = quota.folders(k8s, mounts + f"1503 1490 0:31 / {host} rw - cgroup cgroup rw,cpu,cpuacct\n")
    assert levels[:2] == [pod / "abcd", pod] and levels[-1] == host and quota.limit(levels).cgroup == pod
    # v2: a service's cgroup bind-mounted ahead of the whole hierarchy, beside a v1 mount without cpu
    session = "0::/user.slice/session-2.scope\n"
    service, whole = tmp_path / "service", tmp_path / "cgroup"
    v2 = (f"40 24 0:30 /system.slice/other.service {service} rw - cgroup2 cgroup2 rw\n"
          f"41 24 0:40 / {tmp_path / 'systemd'} rw - cgroup cgroup rw,name=systemd\n"
          f"35 24 0:30 / {whole} rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
    cgroups(tmp_path, service={"cpu.max": "20000 100000\n"})
    scope = cgroups(whole, **{"session-2.scope": {"cpu.max": "max 100000\n"},
                              "user.slice": {"cpu.max": "50000 100000\n"}})
    levels = quota.folders(session, v2)
    assert levels == [*scope, whole] and quota.limit(levels).cpus == 0.5


@pytest.fixture
def under_quota(tmp_path, monkeypatch):
    """``under_quota(cpus)``: this process's cgroup seen as one of 2 cores allowed and a quota of
    ``cpus`` (None: none), its throttling counters in its cpu.stat; OMP_NUM_THREADS unset, and
    restored after (the CPU target sets it to what it runs)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "")
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(cpuinfo, "cores_allowed", lambda: 2)
    folder = tmp_path / "cgroup"

    def make(cpus: float | None) -> Path:
        folder.mkdir(exist_ok=True)
        (folder / "cpu.max").write_text("max 100000\n" if cpus is None else f"{int(cpus * 100000)} 100000\n")
        (folder / "cpu.stat").write_text(V2_STAT)
        monkeypatch.setattr(quota, "folders_of_process", lambda: [folder])
        return folder

    return make


def test_a_quota_below_the_cores_allowed_runs_the_threads_it_keeps_running_on_their_device(under_quota, monkeypatch):
    under_quota(None)
    free = cpuinfo.identify()
    assert (cpuinfo.thread_count(), cpuinfo.quota_note()) == (2, None)  # no quota: as before
    folder = under_quota(1.5)
    limited = cpuinfo.identify()
    assert limited == {**free, "threads": 1}  # nothing else fingerprinted: the 1-thread device's records are its own
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert device_id(cpuinfo.identify()) == device_id(limited)
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cpuinfo.quota_note() == (
        f"the cgroup's CPU quota (1.5 CPU per 100 ms, set in {folder}) gives less than the 2 cores allowed: the CPU "
        f"target runs 1 thread (a thread per core would stall in every period), on the 1-thread device; run the "
        f"tuned kernels with OMP_NUM_THREADS=1 too, or raise the limit to 2 CPUs to tune 2 threads")
    under_quota(4)  # more than the cores: nothing changes
    assert (cpuinfo.identify(), cpuinfo.quota_note()) == (free, None)


def test_threads_asked_beyond_the_quota_are_run_as_asked_and_the_note_says_they_will_be_throttled(under_quota,
                                                                                                     monkeypatch):
    folder = under_quota(1.5)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cpuinfo.thread_count() == 2
    assert cpuinfo.quota_note() == (
        f"the cgroup's CPU quota (1.5 CPU per 100 ms, set in {folder}): OMP_NUM_THREADS asks for 2 threads, which "
        f"the quota stops after 75 ms of every 100 ms period: measurements it throttles are judged disturbed; set "
        f"OMP_NUM_THREADS=1 or raise the limit to 2 CPUs")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpuinfo.quota_note() is None  # it fits


def test_under_one_cpu_even_one_thread_is_throttled_and_the_note_says_to_raise_the_limit(under_quota):
    under_quota(0.5)
    assert cpuinfo.thread_count() == 1
    assert cpuinfo.quota_note().endswith("tune 2 threads; even 1 thread, which the quota stops after 50 ms of every "
                                         "100 ms period: measurements it throttles are judged disturbed; raise the "
                                         "limit to at least 1 CPU")


def test_a_measurement_the_quota_throttled_is_disturbed_naming_the_quota(under_quota):
    folder = under_quota(0.5)
    span = Throttling()
    with span.timing():
        pass
    assert span.conditions() == {"cpu_quota": 0.5, "quota_period_ms": 100.0, "throttled": 0, "throttled_ms": 0.0}
    with span.timing():
        (folder / "cpu.stat").write_text(V2_STAT.replace("nr_throttled 46", "nr_throttled 49").replace(
            "throttled_usec 2367211", "throttled_usec 2467211"))
    throttled = span.conditions()
    assert throttled == {"cpu_quota": 0.5, "quota_period_ms": 100.0, "throttled": 3, "throttled_ms": 100.0}
    found = verdict([1.0] * 20, {"others_cpu": 0.0, "steal": 0.0, "cores": 2, **throttled})
    assert found["verdict"] == "disturbed"
    assert found["interference"] == ["the cgroup's CPU quota (0.5 CPU per 100 ms) throttled the measurement 3 times "
                                     "(100 ms in all)"]
    assert machine_signals({"others_cpu": 0.0, "steal": 0.0, "cores": 2, **span.conditions(),
                            "throttled": 0}) == []  # a quota that stopped nothing disturbs nothing
    under_quota(None)
    assert Throttling().conditions() == {}  # no quota: the records hold nothing new


def throttle(folder: Path) -> None:
    """The quota throttles the cgroup of ``folder`` (:func:`under_quota`'s) once more, for 100 ms."""
    times, ns = quota.throttling((folder / "cpu.stat").read_text())
    (folder / "cpu.stat").write_text(f"nr_throttled {times + 1}\nthrottled_usec {ns // 1000 + 100000}\n")


class ThrottledIn(Unwriting):
    """A kernel that writes its output, and that the quota throttles once in each call of a kind,
    ``when``: "verify" (the untimed calls that verify it), "warm-up" (its first 3 timed calls, of
    equal times) or "sample" (those after)."""

    def __init__(self, folder: Path, when: str):
        super().__init__(np.arange(4.0), None)
        self.folder, self.when, self.timed = folder, when, 0

    def call(self) -> None:
        super().call()
        if self.when == "verify":
            throttle(self.folder)

    def timed_call(self) -> float:
        super().call()
        self.timed += 1
        if self.when == ("warm-up" if self.timed <= 3 else "sample"):
            throttle(self.folder)
        return 1.0


@pytest.mark.parametrize("when, throttled", [("verify", 0), ("warm-up", 0), ("sample", 10)])
def test_only_the_quota_throttling_a_measurement_while_it_samples_disturbs_it(under_quota, when, throttled):
    """A throttle while the candidate was verified (before and after its samples) or warmed up
    stalled no sample; it was counted, and the trial judged disturbed, retried, and its task stopped."""
    folder = under_quota(0.5)
    runners = {placement: ThrottledIn(folder, when) for placement in ("staggered", "malloc")}
    m = measure_placements(runners, [np.arange(4.0)], ["y"], [(0.0, 0.0)], MeasureSettings(warmup_s=5.0, repeats=5))
    assert m.status == "ok" and [r.timed for r in runners.values()] == [8, 8]  # 3 warming up, 5 samples
    assert m.throttling == {"cpu_quota": 0.5, "quota_period_ms": 100.0, "throttled": throttled,
                            "throttled_ms": throttled * 100.0}
    assert bool(machine_signals({"cores": 2, **m.throttling})) == bool(throttled)


@pytest.mark.parametrize("where, counted", [("verify", False), ("warm_up", False), ("interleave", True)])
def test_a_comparison_counts_only_the_quota_throttling_its_interleaved_samples(tmp_path, under_quota, monkeypatch,
                                                                                 where, counted):
    """The final round's and the gate's processes: a throttle while the arms were verified or
    warmed up was counted, and the process judged disturbed."""
    import tunebench.workers

    folder = under_quota(0.5)
    real = getattr(tunebench.workers, where)

    def throttled(*args, **kwargs):
        throttle(folder)
        return real(*args, **kwargs)

    monkeypatch.setattr(tunebench.workers, where, throttled)  # forked: the worker sees it
    (tmp_path / "double.c").write_text(DOUBLE_C)
    name = f"double_throttled_in_{where}"
    Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                           "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
           reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "double.c"), entry="double_it", space=Space({"step": [1, 2]}),
                       heuristic=lambda shape: {"step": 1}))
    workers = Workers("cpu")
    try:
        arms = (("a", {"step": 1}, None), ("b", {"step": 2}, None))
        result = workers.trial(CompareJob(name, (1000,), "float32", arms, 5, MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert result["status"] == "ok", result
    assert (result["conditions"]["throttled"] > 0) == counted, result["conditions"]


def test_a_tune_the_quota_keeps_throttling_stops_saying_so_and_what_to_do():
    doc = {"target": "cpu",
           "interference": ["the cgroup's CPU quota (0.5 CPU per 100 ms) throttled the measurement 3 times (100 ms "
                            "in all)"],
           "conditions": {"others_cpu": 0.0, "cores": 2, "threads": 1, "cpu_quota": 0.5, "quota_period_ms": 100.0,
                          "throttled": 3, "throttled_ms": 100.0}}
    said = stopped(doc, 3, 3)
    assert said.startswith("stopped: the cgroup's CPU quota throttled the measurements (the cgroup's CPU quota (0.5 "
                           "CPU per 100 ms) throttled the measurement 3 times")
    assert "OMP_NUM_THREADS" in said and "raise the limit" in said and "quiet" not in said
    on_gpu = stopped({**doc, "target": "cuda", "conditions": {**doc["conditions"], "sm_clock_mhz": 1980}}, 3, 3)
    assert on_gpu.endswith("Times measured under it would be noise: the host thread that launches and times the "
                           "kernels is throttled with the rest of the container: raise the limit, or keep the "
                           "container's other work off its CPUs while it tunes")


def test_what_to_do_about_a_measurement_the_quota_disturbed_is_never_a_quieter_machine():
    throttled = {"others_cpu": 0.6, "steal": 0.0, "cores": 2, "threads": 1, "cpu_quota": 0.5,
                 "quota_period_ms": 100.0, "throttled": 2, "throttled_ms": 59.1}
    assert remedy("; ".join(machine_signals(throttled)), "tune again on a quieter machine", "cpu") == \
        "run fewer threads than the quota's CPUs (OMP_NUM_THREADS), or raise the limit"
    assert remedy("; ".join(machine_signals({**throttled, "throttled": 0})), "tune again on a quieter machine",
                  "cpu") == "tune again on a quieter machine"


def test_a_gpu_measurement_the_quota_disturbed_is_told_to_raise_the_limit_not_to_run_fewer_cpu_threads():
    """A GPU's kernel is timed by one host thread: no OMP_NUM_THREADS lifts its throttling."""
    throttled = {"others_cpu": 0.0, "steal": 0.0, "cores": 2, "cpu_quota": 0.5, "quota_period_ms": 100.0,
                 "throttled": 2, "throttled_ms": 59.1, "sm_clock_mhz": 1980}
    said = remedy("; ".join(machine_signals(throttled)), "run the gate on a quiet machine", "cuda")
    assert said == ("the host thread that launches and times the kernels is throttled with the rest of the "
                    "container: raise the limit, or keep the container's other work off its CPUs while it tunes")
    assert "OMP_NUM_THREADS" not in said and "fewer threads" not in said


def test_a_tune_under_a_quota_says_so_once_before_it_measures_and_records_the_quota(project, pytester, under_quota):
    root = project()
    folder = under_quota(1.5)
    result = pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small")
    note = f"tunebench: the cgroup's CPU quota (1.5 CPU per 100 ms, set in {folder}) gives less than the 2 cores"
    lines = result.stdout.lines
    assert [line[:len(note)] for line in lines].count(note) == 1
    assert [i for i, line in enumerate(lines) if line.startswith(note)][0] < \
        [i for i, line in enumerate(lines) if line.startswith("suites/test_axpb.py")][0]
    (path,) = (root / "records").glob("*.json")
    assert "-1t-" in path.name
    trials = TinyDB(path).table("trials").all()
    assert trials and all(t["conditions"]["cpu_quota"] == 1.5 and t["conditions"]["throttled"] == 0 for t in trials)
    assert not [r for t in trials for r in t.get("interference", []) if "quota" in r]


def test_a_gate_held_to_fewer_threads_than_the_tune_says_what_holds_it_and_what_to_give_it(
        project, pytester, under_quota, monkeypatch, quiet_verdicts):
    """Beside records of 2 threads, a gate held to 1 by a 1-CPU quota said "this run has 1 (the
    cores it may run on) ... gate with OMP_NUM_THREADS=2 as it was tuned": 2 threads the quota
    throttles in every period, so a gate that skips as too busy; held to 1 core (``taskset -c 0``),
    the same advice ran 2 threads on it, filed as the 2-core tune's device."""
    project()
    under_quota(None)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small")
    (tuned,) = (pytester.path / "records").glob("*.json")
    assert "-2t-" in tuned.name
    monkeypatch.delenv("OMP_NUM_THREADS")
    gate = ("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small", "-rs")
    under_quota(1.0)
    recorded = f"*it is recorded with 2 threads ({tuned.stem}); this run has"
    skips_saying(pytester, gate, f"{recorded} 1 (the cgroup's CPU quota, 1 CPU per 100 ms), and timings do not carry "
                                 f"across thread counts: raise the limit to 2 CPUs as it was tuned, or run `pytest "
                                 f"suites/test_axpb.py --tune` here to record it with 1*")
    under_quota(None)
    monkeypatch.setattr(cpuinfo, "cores_allowed", lambda: 1)  # taskset -c 0
    out = skips_saying(pytester, gate, f"{recorded} 1 (the cores it may run on), and timings do not carry across "
                                       f"thread counts: gate on 2 cores as it was tuned (taskset, a container's "
                                       f"cpuset), or run `pytest suites/test_axpb.py --tune` here to record it with 1*")
    assert "OMP_NUM_THREADS=2" not in out
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # as the skip said before: 2 threads sharing the core
    skips_saying(pytester, gate, f"{recorded} 2 on 1 core (OMP_NUM_THREADS=2), and timings do not carry across core "
                                 f"counts: gate on 2 cores with OMP_NUM_THREADS=2 as it was tuned (taskset, a "
                                 f"container's cpuset), or run `pytest suites/test_axpb.py --tune` here to record it "
                                 f"with 2 on 1 core*")


def skips_saying(pytester, gate: tuple, line: str) -> str:
    """The output of a gate that skipped its one task with ``line`` (a glob)."""
    result = pytester.runpytest(*gate)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([line])
    return result.stdout.str()


def test_a_tune_whose_every_measurement_the_quota_throttles_stops_naming_the_quota(project, pytester, under_quota,
                                                                                    monkeypatch):
    import tunebench.compare

    project()
    under_quota(1.5)
    counts = iter(range(0, 10**6, 7))
    monkeypatch.setattr(quota, "throttled", lambda levels=None: (next(counts), 0))  # every reading: 7 more periods
    monkeypatch.setattr(tunebench.compare, "BACKOFF_S", 0.0)  # the point is the verdict, not the pauses
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert result.parseoutcomes().get("failed") == 1
    # 7 periods per placement timed: 14 with both, 7 where the first stopped early (slower than the best so far)
    result.stdout.re_match_lines([r".*stopped: the cgroup's CPU quota throttled the measurements \(the cgroup's CPU "
                                  r"quota \(1\.5 CPU per 100 ms\) throttled the measurement (7|14) times \(0 ms in all\)"
                                  r".*; 3 trial\(s\) in a row stayed disturbed after 3 retries\. Times measured under it "
                                  r"would be noise: run fewer threads than the quota's CPUs \(OMP_NUM_THREADS\), or raise "
                                  r"the limit"])


def test_a_tune_stopped_where_the_quota_throttled_a_strike_names_the_quota_though_other_load_disturbed_the_last(
        project, pytester, under_quota, monkeypatch):
    """Of three trials in a row that stayed disturbed, the quota throttled the first two and other
    load the last: the stop read the last alone and said "the machine is busy ... tune when the
    machine is quiet", where no quieter moment lifts the quota that throttled the others."""
    import tunebench.session

    project()
    under_quota(1.5)
    readings = iter([{"throttled": 3, "throttled_ms": 40.0, "others_cpu": 0.0, "steal": 0.0}] * 2 +
                    [{"throttled": 0, "throttled_ms": 0.0, "others_cpu": 0.9, "steal": 0.0}])  # steal: none, as planted
    real = tunebench.session.undisturbed

    def disturbed(*args, **kwargs):
        result = real(*args, **kwargs)
        conditions = {**result["conditions"], **next(readings)}
        return {**result, "conditions": conditions, "verdict": "disturbed", "interference": machine_signals(conditions)}

    monkeypatch.setattr(tunebench.session, "undisturbed", disturbed)
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert result.parseoutcomes().get("failed") == 1
    assert next(readings, None) is None  # the three strikes, the last of other load
    result.stdout.fnmatch_lines(["*stopped: the cgroup's CPU quota throttled the measurements (the cgroup's CPU quota "
                                 "(1.5 CPU per 100 ms) throttled the measurement 3 times (40 ms in all)); 3 trial(s) "
                                 "in a row stayed disturbed after * retries. Times measured under it would be noise: "
                                 "run fewer threads than the quota's CPUs (OMP_NUM_THREADS), or raise the limit*"])
    assert "the machine is busy" not in result.stdout.str()

# -- under a real quota, where this machine lets a test make a cgroup -------------------------------

#: Busy for ``MS`` ms a call, then writes its output: past a 0.5-CPU quota within a few calls.
SPIN_C = """\
#include <time.h>
void spin(float *y, int n)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 < MS);
    for (int i = 0; i < n; i++) y[i] = (float)i;
}
"""
SPIN_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

spin = Kernel(
    "spin",
    buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(64,)])]),
    args=lambda shape, dtype, rng: {"y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
    reference=lambda n: np.arange(n, dtype=np.float64), outputs=["y"],
    cpu=Variant(source="spin.c", entry="spin", heuristic=lambda shape: {"MS": 20},
                space=Space({"MS": [20, 21, 22, 23]})),
)
"""


def _cpu_parent() -> tuple[Path, str]:
    """The process's own cgroup folder where a child with a CPU quota can be made: v1's cpu
    hierarchy, or v2's where the cpu controller is available; else skips saying why."""
    for folder in quota.folders_of_process():
        if (folder / "cpu.cfs_quota_us").exists():
            return folder, "v1"
        controllers = folder / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            return folder, "v2"
    pytest.skip("no cgroup with the cpu controller is mounted where this process's cgroup is (/proc/self/cgroup, "
                "/proc/self/mountinfo): no real quota to run under; the tests above read real v1 and v2 files")


@pytest.fixture
def cpu_cgroup():
    """``run(cpus, argv, **kwargs)``: ``argv`` in a cgroup of its own under a quota of ``cpus``
    (None: none), made under this process's where this machine lets a test make one (root and a
    writable cgroupfs: a CI runner's user or a read-only /sys/fs/cgroup in a container skips
    here, saying which); removed after."""
    parent, version = _cpu_parent()
    folder = parent / f"tunebench-test-{os.getpid()}"
    try:
        folder.mkdir()
        if version == "v2" and "cpu" not in (parent / "cgroup.subtree_control").read_text().split():
            (parent / "cgroup.subtree_control").write_text("+cpu")
    except OSError as e:
        if folder.exists():
            folder.rmdir()
        pytest.skip(f"cannot make a cgroup with a CPU quota under {parent} ({e.strerror}: it takes root and a "
                    f"writable cgroup {version} hierarchy, or a delegated one); the tests above read real v1 and v2 "
                    f"files and judge the same conditions")

    def run(cpus: float | None, argv: list, **kwargs) -> subprocess.CompletedProcess:
        quota_us = -1 if cpus is None else int(cpus * 100000)
        if version == "v1":
            (folder / "cpu.cfs_quota_us").write_text(str(quota_us))
        else:
            (folder / "cpu.max").write_text(f"{'max' if cpus is None else quota_us} 100000")
        return subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', folder, *argv],
                              capture_output=True, text=True, **kwargs)

    yield run
    for _ in range(50):  # a tune's worker ends just after its parent: empty only then
        try:
            folder.rmdir()
            break
        except OSError:
            time.sleep(0.1)


#: Spins one thread for 0.5 s inside a span: a 0.3-CPU quota lets it run 30 ms of each 100 ms.
SPAN = textwrap.dedent("""\
    import json, time
    from tunebench.backends.cpuinfo import quota_note, thread_count
    from tunebench.interference import Throttling, machine_signals
    span = Throttling()
    with span.timing():
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            pass
    found = span.conditions()
    print(json.dumps({"conditions": found, "signals": machine_signals(found), "threads": thread_count(),
                      "note": quota_note()}))
""")


def test_under_a_real_quota_a_busy_span_is_throttled_and_judged_so(cpu_cgroup):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    found = json.loads(cpu_cgroup(0.3, [sys.executable, "-c", SPAN], env=env, check=True).stdout)
    assert found["conditions"]["cpu_quota"] == 0.3 and found["conditions"]["throttled"] >= 1
    (reason,) = found["signals"]
    assert reason.startswith("the cgroup's CPU quota (0.3 CPU per 100 ms) throttled the measurement ")
    assert found["threads"] == 1 and found["note"].endswith("raise the limit to at least 1 CPU")
    free = json.loads(cpu_cgroup(None, [sys.executable, "-c", SPAN], env=env, check=True).stdout)
    assert free["conditions"] == {} and free["signals"] == [] and free["note"] is None


#: A trial of one placement, under 0.3 CPU, whose untimed (verifying) calls or timed calls spin
#: 0.1 s of CPU time each, past what the quota gives a period: the throttling its samples met.
SPUN = textwrap.dedent("""\
    import json, sys, time
    import numpy as np
    from tunebench.backends.base import Runner
    from tunebench.measure import MeasureSettings, measure_placements

    def spin(cpu_s):
        end = time.thread_time() + cpu_s
        while time.thread_time() < end:
            pass

    class Spinning(Runner):
        def __init__(self, untimed_s, timed_s):
            self.untimed_s, self.timed_s, self.y = untimed_s, timed_s, np.empty(4)
        def reset(self, pattern=0):
            self.y[:] = np.nan
        def call(self):
            spin(self.untimed_s)
            time.sleep(0.2)  # into a period of a fresh quota: none of it is spent as the samples begin
            self.y[:] = np.arange(4.0)
        def timed_call(self):
            began = time.perf_counter()
            spin(self.timed_s)
            return (time.perf_counter() - began) * 1e3
        def outputs(self):
            return [self.y]
        def overrun(self):
            return None

    runner = Spinning(*map(float, sys.argv[1:]))
    m = measure_placements({"only": runner}, [np.arange(4.0)], ["y"], [(0.0, 0.0)],
                           MeasureSettings(warmup_s=0.0, repeats=5))
    print(json.dumps(m.throttling))
""")


def test_under_a_real_quota_throttling_outside_the_samples_disturbs_no_measurement(cpu_cgroup):
    """The verifying calls before and after the samples spin past the quota, and were throttled:
    the measurement was judged disturbed (and retried, and its task stopped) for stalls between
    its samples; samples that spin past it are throttled and judged so."""
    verifying = json.loads(cpu_cgroup(0.3, [sys.executable, "-c", SPUN, "0.1", "0"], check=True).stdout)
    assert verifying["cpu_quota"] == 0.3 and verifying["throttled"] == 0, verifying
    sampling = json.loads(cpu_cgroup(0.3, [sys.executable, "-c", SPUN, "0", "0.1"], check=True).stdout)
    assert sampling["throttled"] >= 1 and machine_signals({"cores": 2, **sampling})[0].startswith(
        "the cgroup's CPU quota (0.3 CPU per 100 ms) throttled the measurement "), sampling


def test_a_real_tune_under_a_quota_it_outruns_stops_naming_the_quota(cpu_cgroup, pytester):
    (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (pytester.path / "conftest.py").write_text("import tunebench.compare\n"
                                               "tunebench.compare.BACKOFF_S = 0.0  # the verdict is the point\n")
    (pytester.path / "spin.c").write_text(SPIN_C)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "test_spin.py").write_text(SPIN_SUITE.replace('"spin.c"',
                                                                               repr(str(pytester.path / "spin.c"))))
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = cpu_cgroup(0.5, [sys.executable, "-m", "pytest", "suites", *TUNE, "--tune-repeats", "5"],
                      cwd=pytester.path, env=env, timeout=300)
    out = done.stdout
    assert out.count("tunebench: the cgroup's CPU quota (0.5 CPU per 100 ms, set in ") == 1, out
    (stop,) = [line for line in out.splitlines() if line.startswith("stopped: ")]
    assert stop.startswith("stopped: the cgroup's CPU quota throttled the measurements (") and \
        "the cgroup's CPU quota (0.5 CPU per 100 ms) throttled the measurement " in stop, out
    (path,) = (pytester.path / "records").glob("*.json")
    trials = TinyDB(path).table("trials").all()
    assert trials and all(t["conditions"]["cpu_quota"] == 0.5 and t["fingerprint"]["threads"] == 1 for t in trials)
    assert all(t["verdict"] == "disturbed" and t["conditions"]["throttled"] >= 1 for t in trials)


def test_builds_beside_a_gpu_measurement_leave_it_a_cpu_of_a_quota_even_one_of_every_core(under_quota, monkeypatch):
    """A quota of all the cores was spent by the builds ahead alone (a compile per core), and its
    throttling disturbed the GPU's measurements beside them; the CPU target builds between its own."""
    from tunebench.builds import Ahead

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    under_quota(None)
    assert Ahead("cuda", {"compute_capability": "9.0"}).size == 2  # no quota: a compile per core, as before
    under_quota(2)
    assert Ahead("cuda", {"compute_capability": "9.0"}).size == 1
    assert Ahead("cpu", {}).size == 2
