"""Tuning on a local Ray cluster of CPU devices: the same records as a one-device run, with the
driver owning the records and the devices importing the suites they were sent."""

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import AXPB_SUITE, QUIET_CONFTEST, ascii_locale, said
from tests.test_gate import GATE, SLOWER, split_project
from tests.test_plugin import TUNE
from tests.test_records_safety import KILLER_C, SLOW_SUITE
from tunebench.kernel import KernelError
from tunebench.lookup import load_suites

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")


RAY = str(Path(sys.executable).with_name("ray"))

#: Every measurement of these tests' runs is judged clean, the cluster's devices' too (each of its
#: Python processes imports the patch first, as sitecustomize): none of them is about other load,
#: and under it (the CI machine's hypervisor stealing 8 % in a burst) a tune confirms nothing, as documented.
pytestmark = pytest.mark.usefixtures("quiet_verdicts")


@pytest.fixture
def host_temp(tmp_path_factory):
    """The temp folder of the cluster's hosts (their TMPDIR), apart from the driver's: what the
    devices leave there is seen."""
    return tmp_path_factory.mktemp("host-temp")


#: A test cluster's address -> the raylet's pid of its second host, where it has one.
HOSTS: dict[str, int] = {}


@pytest.fixture
def cluster(request, host_temp):
    """A local Ray head with two CPUs (two devices of one core each; another count, or
    ``{"cpus": N, "cc": script}`` for hosts that build with that compiler, or ``{"cpus": N,
    "host": True}`` for a second host of one CPU beside it, its raylet's pid in :data:`HOSTS`, by indirect parametrization), its temp folder ``host_temp``; its address."""
    param = getattr(request, "param", 2)
    cpus, cc = (param["cpus"], param.get("cc")) if isinstance(param, dict) else (param, None)
    host = isinstance(param, dict) and param.get("host")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="tbray", dir="/tmp")  # Ray's socket paths must stay short
    quiet = Path(temp, "site")
    quiet.mkdir()
    (quiet / "sitecustomize.py").write_text(QUIET_CONFTEST)
    env = {"TMPDIR": str(host_temp),
           "PYTHONPATH": os.pathsep.join(filter(None, (str(quiet), os.environ.get("PYTHONPATH"))))}
    if cc is not None:
        env["TUNEBENCH_CC"] = os.path.join(temp, "cc")
        Path(env["TUNEBENCH_CC"]).write_text(cc)
        os.chmod(env["TUNEBENCH_CC"], 0o755)
    # The head blocks in its own session, and stops with it: `ray stop` would stop every Ray
    # cluster of the user on this machine, a cluster of their own included.
    started = []

    def start(log: Path, *args: str) -> subprocess.Popen:
        with open(log, "w") as out:
            started.append(subprocess.Popen([RAY, "start", "--block", *args], stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True,
                                            env={**os.environ, "RAY_AUTH_MODE": "disabled", **env}))  # a local test cluster
        deadline = time.monotonic() + 120
        while "will now block" not in log.read_text() and started[-1].poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started[-1].poll() is None and "will now block" in log.read_text(), log.read_text()
        return started[-1]

    try:
        start(Path(temp, "start.log"), "--head", f"--port={port}", f"--num-cpus={cpus}", "--include-dashboard=false",
              f"--temp-dir={temp}", "--disable-usage-stats")
        address = f"127.0.0.1:{port}"
        if host:
            node = start(Path(temp, "host.log"), f"--address={address}", "--num-cpus=1")
            HOSTS[address] = next(pid for pid in _group(node.pid) if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet")
        yield address
    finally:
        HOSTS.pop(f"127.0.0.1:{port}", None)
        for process in reversed(started):
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):  # a raylet's workers the head's exit left behind
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    shutil.rmtree(temp, ignore_errors=True)


def _stat(pid: int) -> list[str]:
    """/proc's stat of ``pid`` after its name: state, parent, process group, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _group(pgid: int) -> list[int]:
    """The processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and int(_stat(int(entry.name))[2]) == pgid:
                found.append(int(entry.name))
    return found


def _ancestors(pid: int) -> set[int]:
    """The processes ``pid`` descends from."""
    found = set()
    while pid > 1:
        pid = int(_stat(pid)[1])
        found.add(pid)
    return found


def trials(root):
    (path,) = (root / "records").glob("*.json")
    data = json.loads(path.read_text())
    return data["device"]["1"], sorted(
        (t["bucket"], tuple(t["shape"]), json.dumps(t["config"], sort_keys=True),
         t["status"] if t["status"] not in ("ok", "early_stopped") else "measured")
        for t in data["trials"].values())


def test_a_ray_cluster_tunes_a_suite_with_the_records_of_a_local_run(project, pytester, cluster, monkeypatch,
                                                                    compile_cache):
    root = project(modes=(0, 1, 2))
    args = ("suites", *TUNE, "--tune-strategy", "brute_force", "--tune-trials", "6")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one core per device, as each cluster device has
    local = pytester.runpytest_subprocess(*args)
    local_device, local_trials = trials(root)
    shutil.rmtree(root / "records")
    shutil.rmtree(compile_cache)  # emptied: the devices share it, as on one host
    remote = pytester.runpytest_subprocess(*args, "--tune-cluster", cluster)
    remote_device, remote_trials = trials(root)
    assert remote.ret == local.ret
    assert remote_trials == local_trials and remote_device == local_device
    assert "(0 ahead" in remote.stdout.str()  # the devices built; the driver compiled nothing
    assert "made ahead on other devices" not in remote.stdout.str()  # none past the budget: the search never asks
    # from an empty cache: what one device compiled and another then found there is this run's build
    assert int(re.search(r"builds: (\d+) compiled \(0 ahead, on 0 cores\), 0 from the compile cache",
                         remote.stdout.str()).group(1)) > 0


INC_C = """\
#include "common.h"
void inc(const float *x, float *y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = x[i] + ONE * step;
}
"""

INC_SUITE = """\
import numpy as np
from lib.shapes import SHAPES
from tunebench import Bucket, Buckets, Kernel, Space, Variant

inc = Kernel(
    "inc_cluster", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=SHAPES)]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: x + 1.0, outputs=["y"],
    cpu=Variant(source="../kernels/inc.c", entry="inc", flags=("-I../include",),
                space=Space({"step": [1]}), heuristic=lambda shape: {"step": 1}),
)
"""


@pytest.fixture
def incremented(tmp_path):
    """A project whose suite imports a helper package beside it and whose template includes a
    header of an -I folder, with a suite that does not import; the kernels declared here are
    forgotten after."""
    from tunebench.kernel import REGISTRY

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "common.h").write_text("#define ONE 1.0f\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "inc.c").write_text(INC_C)
    (tmp_path / "suites" / "lib").mkdir(parents=True)
    (tmp_path / "suites" / "lib" / "__init__.py").write_text("")
    (tmp_path / "suites" / "lib" / "shapes.py").write_text("SHAPES = [(1000,)]\n")
    (tmp_path / "suites" / "test_inc.py").write_text(INC_SUITE)
    (tmp_path / "suites" / "test_broken.py").write_text("import nosuchmodule\n")
    (tmp_path / "suites" / "env").mkdir()
    (tmp_path / "suites" / "env" / "pyvenv.cfg").write_text("home = /usr\n")  # a virtual environment: not sent
    declared = dict(REGISTRY)
    failed = []
    load_suites(tmp_path / "suites", failed)
    assert [f.split(":")[0] for f in failed] == [str(tmp_path / "suites" / "test_broken.py")]
    yield tmp_path
    REGISTRY.clear()
    REGISTRY.update(declared)


def test_a_device_gets_the_helper_packages_and_include_folders_a_local_build_reads(incremented):
    """Neither was sent: a header of an -I folder made every config a compile error recorded from
    the cluster alone (and reused by local runs after), a helper package failed every suite."""
    from tunebench.cluster import Device, project_files, suite_files
    from tunebench.kernel import REGISTRY

    (incremented / "kernels" / "up").symlink_to(incremented)  # a link back up: not followed
    (incremented / "shared").mkdir()
    (incremented / "shared" / "util.h").write_text("#define TWO 2\n")
    (incremented / "kernels" / "common").symlink_to(incremented / "shared")  # a link aside: followed
    (incremented / "suites" / "lib" / "defs.py").write_text(INC_SUITE.replace('"inc_cluster"', '"from_helper"').replace(
        "inc = ", "helper = ").replace('"../', '"../../').replace('"-I../', '"-I../../').replace(
        "from lib.shapes", "from .shapes"))  # a helper module declares it, the test module pytest collects imports it
    (incremented / "suites" / "test_helper.py").write_text("from lib.defs import helper\n")
    load_suites(incremented / "suites", [])
    REGISTRY["from_helper"].collected_from = incremented / "suites" / "test_helper.py"  # as collection sets it
    files = project_files(incremented)
    assert {"include/common.h", "kernels/inc.c", "kernels/common/util.h", "suites/lib/shapes.py",
            "suites/test_inc.py"} <= set(files)
    assert not any(f.startswith(("suites/env/", "kernels/up/")) for f in files)
    # the modules pytest collects the kernels from, not the test module beside them that declares none
    assert suite_files(incremented) == ["suites/test_helper.py", "suites/test_inc.py"]
    local = REGISTRY["inc_cluster"].variant("cpu").template
    assert '#line 1 "../include/common.h"' in local  # the -I folder's header, hashed
    device = Device("cpu", 10.0, None)
    failed = device.load(files, suite_files(incremented))  # as a device does, in a folder of its own
    assert failed == {}
    device_copy = REGISTRY["inc_cluster"]
    assert not str(device_copy.declared_in).startswith(str(incremented))
    assert device_copy.variant("cpu").template == local  # the header found and hashed there too
    assert Path(device_copy.declared_in).is_file()
    device.close()  # the tune is over: a host serving many keeps no copy of each project
    assert not Path(device_copy.declared_in).parent.exists()


#: Sends a project's files (argv[1]) to a device, as the driver does, and prints what the device
#: failed to import and whether its copy of the suite is the suite's bytes.
SEND_IN_LOCALE = """\
import sys
from pathlib import Path
from tunebench.cluster import Device, project_files, suite_files
from tunebench.lookup import load_suites
root = Path(sys.argv[1])
load_suites(root / "suites", [])
device = Device("cpu", 10.0, None)
print(device.load(project_files(root), suite_files(root)))
print((device.root / "suites" / "test_twice.py").read_bytes() == (root / "suites" / "test_twice.py").read_bytes())
device.close()
"""


def test_a_suite_of_text_beyond_ascii_is_sent_as_utf8_whatever_the_locale(twice_beyond_ascii):
    """Read in the locale's encoding, a suite with a bucket named klein_µ was not sent under an
    ASCII locale (LC_ALL=C, PYTHONUTF8=0): the device said "not among the files sent (its folder
    is no suite's, template's or -I folder)"; a host of another locale than the driver's wrote
    its text in its own encoding."""
    ran = subprocess.run([sys.executable, "-c", SEND_IN_LOCALE, str(twice_beyond_ascii)], env=ascii_locale(),
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split("\n")[:2] == ["{}", "True"]


@pytest.mark.parametrize("cluster", [3], indirect=True)
def test_jobs_of_a_device_whose_host_is_lost_are_measured_on_the_others(incremented, cluster, monkeypatch):
    """A node killed mid-tune: its actor's error reached the task in flight, and every later task,
    each with a traceback, as it kept being sent jobs (a restart or a retry's pause too)."""
    from tunebench.cluster import ClusterWorkers
    from tunebench.measure import MeasureSettings
    from tunebench.workers import TrialJob, WorkerError

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    (incremented / "tools").mkdir()  # importable here, and on no device: not under a suite's folder
    (incremented / "tools" / "driver_only.py").write_text("")
    monkeypatch.syspath_prepend(str(incremented / "tools"))
    (incremented / "suites" / "test_here_only.py").write_text(
        "import driver_only\n" + INC_SUITE.replace('"inc_cluster"', '"here_only"').replace("inc = ", "here = "))
    load_suites(incremented / "suites", [])
    workers = ClusterWorkers(cluster, "cpu", incremented)
    try:
        job = TrialJob("inc_cluster", {"step": 1}, (1000,), "float32", MeasureSettings(repeats=5))
        assert workers.trial(job)["status"] == "ok" and workers.idle() == 2  # every device holds the suites
        ray.kill(workers.devices[1])
        assert workers.submit(job).result(timeout=120)["status"] == "ok"  # sent to the lost one, measured on the first
        assert workers.idle() == 1
        ray.kill(workers.devices[0])  # the first, which runs the final rounds: the next takes its place
        workers.restart()  # a final round's fresh process, asked of the lost host, is the next one's
        workers.pause(0.01)
        assert workers.trial(job)["status"] == "ok"
        assert workers.idle() == 0
        with pytest.raises(KernelError, match=r"^kernel 'here_only': its suite does not import on the cluster's "
                                              r"devices, .*suites/test_here_only.py: ModuleNotFoundError: "
                                              r"No module named 'driver_only'"):
            workers.trial(dataclasses.replace(job, kernel="here_only"))
        ray.kill(workers.devices[2])
        with pytest.raises(WorkerError, match="every device of the cluster was lost"):
            workers.trial(job)
    finally:
        workers.close()
        ray.shutdown()


#: A template whose candidate ends its worker with SIGTERM, as a kill from outside would.
TERMINATING_C = """\
#include <signal.h>
void term(const float *x, float *y, int n) { raise(SIGTERM); }
"""


def test_a_devices_worker_error_reaches_the_task_as_the_one_line_a_local_worker_says(incremented, cluster,
                                                                                     monkeypatch):
    """A device's worker killed by SIGTERM in each attempt (WorkerKilled) reached the task as Ray's
    error: a traceback of the device's frames, not the one line that says what to do."""
    from tunebench.cluster import ClusterWorkers
    from tunebench.measure import MeasureSettings
    from tunebench.workers import TrialJob, WorkerKilled

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    (incremented / "kernels" / "term.c").write_text(TERMINATING_C)
    (incremented / "suites" / "test_term.py").write_text(
        INC_SUITE.replace('"inc_cluster"', '"term_cluster"').replace("inc = ", "term = ")
        .replace("inc.c", "term.c").replace('entry="inc"', 'entry="term"'))
    load_suites(incremented / "suites", [])
    workers = ClusterWorkers(cluster, "cpu", incremented)
    said = r"^kernel 'term_cluster': the worker measuring \[step:1\] on \(1000,\) was killed by SIGTERM 2 times"
    try:
        job = TrialJob("term_cluster", {"step": 1}, (1000,), "float32", MeasureSettings(repeats=5))
        with pytest.raises(WorkerKilled, match=said) as first:  # on the first device (final rounds, gate)
            workers.trial(job)
        with pytest.raises(WorkerKilled, match=said) as other:  # on another, at once
            workers.submit(job).result(timeout=120)
        assert "\n" not in str(first.value) + str(other.value)
    finally:
        workers.close()
        ray.shutdown()


@pytest.mark.parametrize("cluster", [3], indirect=True)
def test_a_candidate_that_kills_its_device_is_recorded_crashed_once_two_devices_died_in_it_and_the_tune_goes_on(
        pytester, cluster, monkeypatch):
    """A candidate that kills its worker's parent (kill(getppid(), 9)), there the device's Ray actor,
    was sent to the next device, which it killed too, until "every device of the cluster was lost"
    stopped the run with nothing recorded of it, and every run after did the same."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one core per device, as each cluster device has
    (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (pytester.path / "slow.c").write_text(KILLER_C)  # tag 3 kills the process measuring it
    (pytester.path / "test_slow.py").write_text(textwrap.dedent(SLOW_SUITE).replace("range(10)", "range(5)")
                                                .replace('"pause": [1, 2]', '"pause": [1]'))
    result = pytester.runpytest_subprocess("test_slow.py", *TUNE, "--tune-strategy", "brute_force",
                                           "--tune-cluster", cluster)
    out = result.stdout.str()
    assert "every device of the cluster was lost" not in out, out[-3000:]
    result.assert_outcomes(passed=5, failed=1)  # the crashed config's item fails, as in a local run
    (path,) = (pytester.path / "records").glob("*.json")
    recorded = {t["config"]["tag"]: t for t in json.loads(path.read_text())["trials"].values()}
    assert {tag: t["status"] if t["status"] == "crashed" else "measured" for tag, t in recorded.items()} == \
        {0: "measured", 1: "measured", 2: "measured", 3: "crashed", 4: "measured"}
    assert "died 2 times while measuring this config, each its actor's own process" in recorded[3]["error"], \
        recorded[3]["error"]
    # kept as a local run keeps its crash: with its build's key and compiler, which a later run's reuse asks
    assert recorded[3]["build_key"] and recorded[3]["compiler"] == recorded[0]["compiler"]


#: A template whose candidate, where its config says held:1, waits while the file HELD is there,
#: having made the file running-<its worker's parent>-<id> in FOLDER (its device's actor: a job that
#: runs until its test lets it go); where it says killer:1, it kills its worker's parent.
HOLDING_C = """\
#include <stdio.h>
#include <time.h>
int access(const char *, int);
int kill(int, int);
int getppid(void);
void hold(const float *x, float *y, int n)
{
    struct timespec nap = {0, 10000000};
    if (held && access(HELD, 0) == 0) {
        char running[4096];
        snprintf(running, sizeof running, "%s/running-%d-%d", FOLDER, getppid(), id);
        fclose(fopen(running, "w"));
        while (access(HELD, 0) == 0)
            nanosleep(&nap, 0);
    }
    if (killer)
        kill(getppid(), 9);
    for (int i = 0; i < n; ++i) y[i] = x[i] + 0 * id;
}
"""

HOLDING_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant
hold = Kernel("hold_cluster", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: x, outputs=["y"],
    cpu=Variant(source="../kernels/hold.c", entry="hold",
                space=Space({"held": [0, 1], "killer": [0, 1], "id": range(3)}),
                heuristic=lambda shape: {"held": 0, "killer": 0, "id": 0}))
"""


@pytest.fixture
def holding(incremented, cluster, monkeypatch):
    """ClusterWorkers on ``cluster`` for a project of the holding kernel (HOLDING_C), whose file
    HELD is there; the workers, that file, the devices' pids, and a job of a config's changes."""
    from tunebench.cluster import ClusterWorkers
    from tunebench.measure import MeasureSettings
    from tunebench.workers import TrialJob

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    held = incremented / "held"
    held.touch()
    (incremented / "kernels" / "hold.c").write_text(f'#define HELD "{held}"\n#define FOLDER "{incremented}"\n'
                                                    f'{HOLDING_C}')
    (incremented / "suites" / "test_hold.py").write_text(HOLDING_SUITE)
    load_suites(incremented / "suites", [])
    workers = ClusterWorkers(cluster, "cpu", incremented, timeout=600)  # a held call is no timeout

    def job(**config):
        return TrialJob("hold_cluster", {"held": 0, "killer": 0, "id": 0, **config}, (1000,), "float32",
                        MeasureSettings(repeats=5))

    try:
        assert workers.trial(job())["status"] == "ok"  # every device holds the suites
        pids = ray.get([device.__ray_call__.remote(lambda device: os.getpid()) for device in workers.devices])
        yield workers, held, pids, job
    finally:
        workers.close()
        ray.shutdown()


def running(folder: Path, pid: int, job_id: int) -> None:
    """Wait until the device of ``pid`` runs the held job of id ``job_id`` (see HOLDING_C)."""
    deadline = time.monotonic() + 120
    while not (folder / f"running-{pid}-{job_id}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (folder / f"running-{pid}-{job_id}").exists(), f"the device of pid {pid} never ran held job {job_id}"


@pytest.mark.parametrize("cluster", [5], indirect=True)
def test_a_job_whose_devices_are_ray_killed_as_it_runs_moves_on_and_is_never_recorded_crashed(holding):
    """A device lost to ray.kill (or with its host) is no doing of the job it ran: a job that two
    devices were lost running, another device and then the first, is measured where it moves,
    not recorded crashed, as is one that two first devices were lost running (a final round's,
    a gate's comparisons run there)."""
    workers, held, pids, job = holding
    sent = workers.submit(job(held=1, id=1))  # on an idle device other than the first
    (other,) = [i for i in range(1, len(pids)) if workers._busy[i] is sent]
    left = [i for i in range(1, len(pids)) if i != other]  # the first devices in turn, once 0 is lost
    for index in (other, 0):  # moved to the first device once the other is lost
        running(held.parent, pids[index], 1)
        ray.kill(workers.devices[index])
    running(held.parent, pids[left[0]], 1)  # and to the next first device
    held.unlink()
    assert sent.result(timeout=300)["status"] == "ok"
    held.touch()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        on_first = pool.submit(workers.trial, job(held=1, id=2))
        for index in left[:2]:
            running(held.parent, pids[index], 2)
            ray.kill(workers.devices[index])
        running(held.parent, pids[left[2]], 2)
        held.unlink()
        assert on_first.result(timeout=300)["status"] == "ok"
    assert workers._lost == {other, 0, *left[:2]}


@pytest.mark.parametrize("cluster", [4], indirect=True)
def test_a_candidate_that_kills_the_first_device_and_the_next_is_their_crash_and_the_last_device_goes_on(holding):
    """On the first device (a final round's, a gate's comparisons), a candidate that kills its
    worker's parent was sent to every device in turn until none was left. A comparison is not
    charged: its crash names no arm, and a final round would serve the heuristic for it."""
    from tunebench.measure import MeasureSettings
    from tunebench.workers import CompareJob, WorkerError

    workers, held, pids, job = holding
    crashed = workers.trial(job(killer=1))
    assert crashed["status"] == "crashed"
    assert crashed["error"].startswith("the cluster's devices died 2 times while measuring this config, each its "
                                       "actor's own process"), crashed["error"]
    assert workers._lost == {0, 1}
    assert workers.trial(job(id=1))["status"] == "ok"  # on a device left
    killer = job(killer=1, id=2).config
    comparison = CompareJob("hold_cluster", (1000,), "float32", (("best", killer, None),), 5, MeasureSettings(repeats=5))
    with pytest.raises(WorkerError, match="every device of the cluster was lost"):
        workers.trial(comparison)


@pytest.fixture
def death_info_missed(monkeypatch):
    """The driver's Ray, started after this, waits for no lost actor's death cause: it calls every
    device lost "unavailable", as where a busy head tells it the cause too late (or a user's
    RAY_timeout_ms_task_wait_for_death_info is short). Ask for it before ``holding``."""
    monkeypatch.setenv("RAY_timeout_ms_task_wait_for_death_info", "0")


@pytest.fixture
def losses(monkeypatch):
    """Each device lost, as Ray's error to its job named it, and whether it was charged to the job."""
    from tunebench.cluster import ClusterWorkers

    found, judged = [], ClusterWorkers._charged

    def told(self, index, ready, error):
        found.append((type(error).__name__, judged(self, index, ready, error)))
        return found[-1][1]

    monkeypatch.setattr(ClusterWorkers, "_charged", told)
    return found


@pytest.mark.parametrize("sent", ["first", "other"])
def test_a_candidate_that_kills_both_devices_is_their_crash_where_ray_calls_them_only_unavailable(
        death_info_missed, losses, holding, sent):
    """Where Ray's error did not say that the device's process died, only that the actor was
    "unavailable" (as of a host lost), no death was charged: a candidate that kills its worker's
    parent took every device of the cluster, on the first device (a tune's own trials) as on
    another (the ones it measures ahead), instead of being recorded crashed."""
    workers, held, pids, job = holding
    result = workers.trial(job(killer=1)) if sent == "first" else workers.submit(job(killer=1)).result(timeout=300)
    assert result["status"] == "crashed", result.get("error")
    assert result["error"].startswith("the cluster's devices died 2 times"), result["error"]
    assert workers._lost == {0, 1}
    assert ("ActorUnavailableError", True) in losses  # a death told only so, charged


@pytest.mark.parametrize("cluster", [{"cpus": 1, "host": True}], indirect=True)
def test_a_job_whose_host_is_lost_is_not_charged_where_ray_calls_its_device_only_unavailable(
        death_info_missed, losses, cluster, holding):
    """A host lost (its raylet killed as its device runs a job), which Ray calls "unavailable" as
    it would a device whose death it missed, is no doing of the job: asked again, Ray says the
    host died, and the job moves to the other host's device and is measured there."""
    workers, held, pids, job = holding
    raylet = HOSTS[cluster]
    (lost,) = [i for i, pid in enumerate(pids) if raylet in _ancestors(pid)]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the first device's job is the tune's own call
        sent = workers.submit(job(held=1, id=1)) if lost else pool.submit(workers.trial, job(held=1, id=1))
        running(held.parent, pids[lost], 1)
        os.kill(raylet, signal.SIGKILL)
        running(held.parent, pids[1 - lost], 1)  # moved on
        held.unlink()
        assert sent.result(timeout=300)["status"] == "ok"
    assert uncharged(losses), losses
    assert workers._lost == {lost}


@pytest.fixture
def keepalive(monkeypatch):
    """The cluster's Ray and the driver's, started after this, ping every connection each second and
    drop one unanswered for 3 s (Ray's default: minutes): a device stopped that long is
    "unavailable" to the driver, as one behind a network's brief outage is. Ask for it before
    ``holding``."""
    monkeypatch.setenv("RAY_grpc_client_keepalive_time_ms", "1000")  # a server takes pings as often as its client sends
    monkeypatch.setenv("RAY_grpc_client_keepalive_timeout_ms", "3000")


def uncharged(losses: list[tuple[str, bool]]) -> bool:
    """Whether every loss Ray reported was an outage, charged to no job. How many there were is
    Ray's to say: an actor back from an outage "may raise ActorUnavailableError if it's still
    unreachable" at its next call, which may be the job sent it again at once once it was kept."""
    return bool(losses) and set(losses) == {("ActorUnavailableError", False)}


def _until(condition, what: str) -> None:
    """Wait until ``condition()`` holds (two minutes at most, a bound: no timing), else fail saying ``what``."""
    deadline = time.monotonic() + 120
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition(), what


def _unreachable(workers, pid: int, index: int) -> None:
    """Device ``index`` (of ``pid``) stopped until Ray calls it unavailable (a network's brief
    outage, a stalled host; see ``keepalive``), then let go on."""
    os.kill(pid, signal.SIGSTOP)
    try:
        _until(lambda: index in workers._lost, "the stopped device's job got no error from Ray")
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.parametrize("sent", ["first", "other"])
def test_a_device_briefly_unreachable_as_it_runs_a_job_is_kept_and_charged_nothing(
        death_info_missed, keepalive, losses, holding, sent):
    """A device stopped for seconds as it ran a job (SIGSTOP, then SIGCONT: a stalled host, a
    network's brief outage), which Ray calls "unavailable", was asked how it died behind the job it
    still ran: no answer came in DEATH_CAUSE_S, 30 s that the tune's own call waited where it was
    the first device, and the device, alive, was lost for the run."""
    workers, held, pids, job = holding
    index = 0 if sent == "first" else 1
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the first device's job is the tune's own call
        result = pool.submit(workers.trial, job(held=1, id=1)) if index == 0 else workers.submit(job(held=1, id=1))
        try:
            running(held.parent, pids[index], 1)
            _unreachable(workers, pids[index], index)
            _until(lambda: index not in workers._lost, "the device, asked again as its job still runs, was not kept")
        finally:
            held.unlink()  # the job let go, however this ends: the pool waits for the call
        assert result.result(timeout=300)["status"] == "ok"
    assert uncharged(losses), losses
    # the kept device is done with the run whose answer was lost before the held file holds jobs again: its
    # next repeat would be held anew, and the next job sent elsewhere (the CI run of 608ebd1)
    _until(lambda: workers.idle() == 1, "the kept device never finished the job that moved on")
    held.touch()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        again = pool.submit(workers.trial, job(held=1, id=2)) if index == 0 else workers.submit(job(held=1, id=2))
        try:
            _until(lambda: any((held.parent / f"running-{pid}-2").exists() for pid in pids), "the next job ran nowhere")
        finally:
            held.unlink()
        assert again.result(timeout=300)["status"] == "ok"
    on = [i for i, pid in enumerate(pids) if (held.parent / f"running-{pid}-2").exists()]
    # on the device kept; or, as Ray says an actor back from an outage may be at its next call, unavailable
    # again (seen once on a loaded 2-core CI runner): the job moved on, the device kept again, charged nothing
    assert on == [index] or (len(losses) > 1 and uncharged(losses)), (on, losses)
    assert workers._lost == set()


def test_a_kept_device_gets_no_job_ahead_until_it_is_done_with_the_one_that_moved_on(
        death_info_missed, keepalive, losses, holding):
    """A device kept after an outage still runs the job that moved to the first device, its answer
    lost: counted idle as soon as the moved job was measured, it was sent the next candidate
    ahead, which waited behind the old one (its worker behind on it, as a stalled host's is)."""
    from tests.test_records_safety import _children

    workers, held, pids, job = holding
    sent = workers.submit(job(held=1, id=1))
    running(held.parent, pids[1], 1)
    _unreachable(workers, pids[1], 1)
    _until(lambda: 1 not in workers._lost, "the device, asked again as its job still runs, was not kept")
    behind = _children(pids[1])  # its worker, held in the job
    assert behind, f"the device of pid {pids[1]} has no worker process"
    for pid in behind:
        os.kill(pid, signal.SIGSTOP)
    try:
        held.unlink()
        assert sent.result(timeout=300)["status"] == "ok"  # measured on the first device
        assert workers.idle() == 0
    finally:
        for pid in behind:
            os.kill(pid, signal.SIGCONT)
    _until(lambda: workers.idle() == 1, "the kept device, done with the job that moved on, was not idle again")
    assert uncharged(losses), losses


def test_a_device_unreachable_twice_as_it_runs_a_job_is_kept_both_times(
        death_info_missed, keepalive, losses, holding):
    """The job sent the first device again, once it was kept, waits behind the one it still runs:
    unreachable again, its ready failed too ("unavailable"), and the device, alive, was lost for
    the run without being asked."""
    workers, held, pids, job = holding
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the first device's job is the tune's own call
        result = pool.submit(workers.trial, job(held=1, id=1))
        try:
            running(held.parent, pids[0], 1)
            for outage in ("first", "second"):
                _unreachable(workers, pids[0], 0)
                _until(lambda: 0 not in workers._lost, f"the device was not kept after its {outage} outage")
        finally:
            held.unlink()
        assert result.result(timeout=300)["status"] == "ok"
    assert len(losses) >= 2 and uncharged(losses), losses
    assert workers._lost == set()


def test_a_device_unreachable_as_a_job_is_sent_it_is_kept_and_charged_nothing(
        death_info_missed, keepalive, losses, holding):
    """A device stopped as a job was sent it failed the ready sent before the job too, and was
    lost for the run without being asked: the job moves to the first device, the device is kept."""
    workers, held, pids, job = holding
    os.kill(pids[1], signal.SIGSTOP)
    try:
        sent = workers.submit(job(held=1, id=1))
        assert workers._busy[1] is sent
        _until(lambda: 1 in workers._lost, "the stopped device's job got no error from Ray")
    finally:
        os.kill(pids[1], signal.SIGCONT)
    try:
        _until(lambda: 1 not in workers._lost, "the device, unreachable as its job was sent, was not kept")
    finally:
        held.unlink()
    assert sent.result(timeout=300)["status"] == "ok"
    assert uncharged(losses), losses
    assert workers._lost == set()


def test_a_device_unreachable_more_than_kept_times_as_it_runs_a_job_is_lost_and_its_job_moves_on(
        death_info_missed, keepalive, losses, holding, monkeypatch):
    """A device whose connection keeps dropping, kept each time, had its job sent it again and
    again for good: past KEPT times since it last answered a job, it is lost for the run."""
    from tunebench import cluster

    monkeypatch.setattr(cluster, "KEPT", 1)
    workers, held, pids, job = holding
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        result = pool.submit(workers.trial, job(held=1, id=1))
        try:
            running(held.parent, pids[0], 1)
            _unreachable(workers, pids[0], 0)
            # kept; unless the job, sent it again at once, found it unavailable once more (see uncharged)
            _until(lambda: 0 not in workers._lost or len(losses) > 1, "the device was not kept after its first outage")
            if len(losses) == 1:
                _unreachable(workers, pids[0], 0)
            running(held.parent, pids[1], 1)  # moved on
        finally:
            held.unlink()
        assert result.result(timeout=300)["status"] == "ok"
    assert len(losses) >= 2 and uncharged(losses), losses
    assert workers._lost == {0}


def test_a_ray_without_a_word_for_a_missed_death_is_refused_naming_the_version_it_needs(monkeypatch):
    """Before 2.11, Ray's error to a job whose device's death cause it missed said no cause at all,
    and the candidate that killed its device took every device of the cluster."""
    from tunebench.cluster import ClusterWorkers
    from tunebench.workers import WorkerError

    monkeypatch.delattr(ray.exceptions, "ActorUnavailableError")
    with pytest.raises(WorkerError, match=r"needs Ray 2\.11 or later \(this is .*\).*pip install 'ray>=2\.11'"):
        ClusterWorkers("127.0.0.1:1", "cpu", Path.cwd())


@pytest.mark.parametrize("cluster", [3], indirect=True)
def test_a_job_sent_to_devices_that_died_idle_is_not_charged_their_deaths(holding):
    """Two devices whose processes died before a job reached them (Ray says SYSTEM_ERROR of each):
    the job moved to them is not what killed them, and is measured on the device left."""
    workers, held, pids, job = holding
    for pid in pids[:2]:
        os.kill(pid, signal.SIGKILL)
    for pid in pids[:2]:
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.05)
    result = workers.submit(job(id=1)).result(timeout=300)
    assert result["status"] == "ok", result.get("error")
    assert workers._lost == {0, 1}


#: A driver's conftest: the second and the third device are each killed as their second job is
#: sent, the one by ray.kill, the other by a SIGKILL to its process; killed.txt names them, each
#: with how many copies of the project and folders of inputs of its own the hosts' temp folder
#: (HOST_TEMP) held just before.
KILLED_MID_JOB = """\
import os
import signal
from pathlib import Path

import ray
from tunebench import cluster

start, submit = cluster.ClusterWorkers.__init__, cluster.ClusterWorkers.submit
sent = {}


def init(self, *args, **kwargs):
    start(self, *args, **kwargs)
    self.pids = ray.get([d.__ray_call__.remote(lambda device: os.getpid()) for d in self.devices])


def kill_at_second_job(self, job):
    result = submit(self, job)
    index = self._busy.index(result)
    sent[index] = sent.get(index, 0) + 1
    if index and sent[index] == 2:
        host, pid = Path(os.environ["HOST_TEMP"]), self.pids[index]
        held = [len(list(host.glob(f"tunebench-{kind}-{pid}-*"))) for kind in ("device", "inputs")]
        if index == 1:
            ray.kill(self.devices[index])
        else:
            os.kill(pid, signal.SIGKILL)
        with open("killed.txt", "a") as f:
            f.write(f"{index} {held[0]} {held[1]}\\n")
    return result


cluster.ClusterWorkers.__init__ = init
cluster.ClusterWorkers.submit = kill_at_second_job
"""


@pytest.mark.parametrize("cluster", [3], indirect=True)
def test_a_device_killed_mid_run_leaves_no_folder_behind(project, pytester, cluster, host_temp, monkeypatch):
    """A device killed (ray.kill, a SIGKILL; its driver gone) never ran its close: its copy of
    the project and its workers' folder of inputs stayed in its host's temp folder, one each per
    killed device and run."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one core per device, as each cluster device has
    monkeypatch.setenv("HOST_TEMP", str(host_temp))
    root = project()
    pytester.makeconftest(KILLED_MID_JOB)
    result = pytester.runpytest_subprocess("suites", *TUNE, "--tune-strategy", "brute_force", "--tune-trials", "6",
                                           "--tune-cluster", cluster)
    # each had its folders where the test looks, or it would find none left whatever the devices did
    assert (root / "killed.txt").read_text().splitlines() == ["1 1 1", "2 1 1"]
    assert result.ret == 0, result.stdout.str()[-3000:]
    configs = [json.dumps({"vec": v, "unroll": u, "mode": 0}, sort_keys=True)
               for v in (1, 2, 4) for u in (1, 2) if v * u <= 4]
    # every config on every shape: what the killed devices measured first, and their jobs in flight
    # measured again on the first device
    assert trials(root)[1] == sorted((bucket, shape, config, "measured") for config in configs
                                     for bucket, shape in (("small", (1000,)), ("large", (20000,)), ("large", (50000,))))
    assert not list(host_temp.glob("tunebench-*"))  # no device's copy of the project, nor its workers' inputs


def sentinel_folders(tmp_path) -> list[Path]:
    """A copy of the project and a folder of inputs, as a device gives its sentinel."""
    folders = [tmp_path / "copy", tmp_path / "inputs"]
    for folder in folders:
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "file").write_text("x")
    return folders


def removed(folders) -> bool:
    """Whether ``folders`` are gone within 30 s: the sentinel's fork is no child to wait for."""
    deadline = time.monotonic() + 30
    while any(folder.exists() for folder in folders) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(folder.exists() for folder in folders)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "asked"])
def test_a_devices_sentinel_removes_its_folders_once_the_actor_has_ended_not_before(tmp_path, pidfd):
    """Without a pidfd (Linux before 5.3) the sentinel asks the process every half second."""
    from tunebench.cluster import SENTINEL

    actor = subprocess.Popen(["sleep", "600"])
    folders = sentinel_folders(tmp_path)
    script = SENTINEL if pidfd else "import os\ndel os.pidfd_open\n" + SENTINEL
    try:
        subprocess.run([sys.executable, "-c", script, str(actor.pid), *map(str, folders)], check=True)
        time.sleep(1.5)  # a sentinel that did not wait would have removed them by now
        assert all(folder.is_dir() for folder in folders)
    finally:
        actor.kill()
        actor.wait()
    assert removed(folders)


#: Prepended to the sentinel: no pidfd, and kill 0 answers as for a process of another user.
ANOTHER_USERS_PID = """\
import os
del os.pidfd_open
def kill(pid, signal):
    raise PermissionError(1, "Operation not permitted")
os.kill = kill
"""


def test_a_devices_sentinel_without_a_pidfd_takes_another_users_process_at_its_pid_for_its_actor_ended(tmp_path):
    """The actor's pid, once the actor has ended, may be another user's process: kill 0 raised
    PermissionError, which ended the sentinel, and the folders stayed. The actor was of the
    sentinel's user, so a process at its pid that the sentinel may not signal is another one."""
    from tunebench.cluster import SENTINEL

    running = subprocess.Popen(["sleep", "600"])  # a process at that pid: its kill 0 never says it ended
    folders = sentinel_folders(tmp_path)
    try:
        subprocess.run([sys.executable, "-c", ANOTHER_USERS_PID + SENTINEL, str(running.pid), *map(str, folders)],
                       check=True)
        assert removed(folders)
    finally:
        running.kill()
        running.wait()


def test_a_device_removes_the_copies_of_devices_that_ended_on_its_host_and_their_sentinels_did_not(
        tmp_path, monkeypatch):
    """A sentinel killed with its actor (the raylet as subreaper kills an actor's orphans too,
    RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper) or by the OOM killer left the
    copy of the project for good: the next device on the host removes those of ended devices."""
    from tunebench.cluster import Device

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    ended = subprocess.Popen(["true"])
    ended.wait()
    host = socket.gethostname()
    dead = [tmp_path / f"tunebench-device-{ended.pid}-{host}-x", tmp_path / f"tunebench-inputs-{ended.pid}-{host}-x",
            tmp_path / f"tunebench-inputs-{ended.pid}-w"]  # named before hosts were
    live = tmp_path / f"tunebench-device-{os.getpid()}-{host}-y"
    elsewhere = tmp_path / f"tunebench-device-{ended.pid}-another-{host}-z"  # a pid of another host's says nothing here
    for folder in (*dead, live, elsewhere):
        (folder / "suites").mkdir(parents=True)
        (folder / "suites" / "test_k.py").write_text("")
    device = Device("cpu", 10.0, None)
    try:
        assert not any(folder.exists() for folder in dead) and live.exists() and elsewhere.exists()
        assert device.root.parent == tmp_path and device.root.name.startswith(f"tunebench-device-{os.getpid()}-{host}-")
    finally:
        device.close()


def test_a_device_whose_sentinel_cannot_start_starts_all_the_same(tmp_path, monkeypatch):
    """The sentinel's OSError (no interpreter to run it, no process left to fork) failed the
    actor's start, and with it the device, for folders that a later device sweeps anyway."""
    from tunebench.cluster import Device

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    device = Device("cpu", 10.0, None)
    assert device.root.is_dir() and device.workers.inputs.is_dir()
    device.close()
    assert not device.root.exists() and not device.workers.inputs.exists()


TWO_C = "void %s(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = x[i] + 1.0f * step; }\n"
TWO_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant
k = Kernel("%s", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: x + 1.0, outputs=["y"],
    cpu=Variant(source="../kernels/%s.c", entry="%s", space=Space({"step": [1]}), heuristic=lambda shape: {"step": 1}))
"""


def test_a_ray_cluster_tunes_every_suite_of_a_project_of_several(pytester, cluster, monkeypatch):
    """Asking the devices for their compiler while pytest still collected sent them the first
    suite alone: the second's collection failed with a KeyError from a device."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = pytester.path
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / "kernels").mkdir()
    (root / "suites").mkdir()
    for name in ("alpha", "beta"):
        (root / "kernels" / f"{name}.c").write_text(TWO_C % name)
        (root / "suites" / f"test_{name}.py").write_text(TWO_SUITE % (name, name, name))
    result = pytester.runpytest_subprocess("suites", *TUNE, "--tune-trials", "1", "--tune-cluster", cluster)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert {t["kernel"] for t in json.loads(next((root / "records").glob("*.json")).read_text())["trials"].values()} \
        == {"alpha", "beta"}


#: gcc under another name and version, as the hosts' compiler (clang, a newer gcc) would be.
OTHER_CC = '#!/bin/sh\ncase "$1" in -dumpfullversion|-dumpversion) echo 99.1; exit 0;; esac\nexec gcc "$@"\n'


@pytest.mark.parametrize("cluster", [{"cpus": 2, "cc": OTHER_CC}], indirect=True)
def test_trials_are_kept_with_the_compiler_of_the_devices_that_built_them(incremented, cluster, monkeypatch):
    """The driver's was kept: a local run with the hosts' compiler measured everything again,
    and one with the driver's reused the hosts' figures."""
    from tunebench.cluster import ClusterWorkers
    from tunebench.kernel import REGISTRY

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    workers = ClusterWorkers(cluster, "cpu", incremented)
    try:
        assert workers.compiler("inc_cluster", REGISTRY["inc_cluster"].variants["cpu"]) == "cc 99.1"
    finally:
        workers.close()
        ray.shutdown()


def test_a_moved_jobs_thread_that_outlives_the_run_sends_nothing_once_closed(incremented, cluster, monkeypatch):
    """A job moved off a lost device is sent again, and its kept device waited for, in a thread of
    its own, which may outlive the run: a call sent after Ray's shutdown started a new local Ray,
    and printed a thread's traceback."""
    from concurrent.futures import Future

    from tunebench.cluster import ClusterWorkers
    from tunebench.measure import MeasureSettings
    from tunebench.workers import TrialJob, WorkerError

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    workers = ClusterWorkers(cluster, "cpu", incremented)
    workers.close()
    ray.shutdown()
    assert workers._finished(0) is None
    with pytest.raises(WorkerError, match="the cluster's devices were closed"):  # asked whether it lives, once lost
        workers._death(0, workers._unavailable("unreachable", None))
    moved = Future()
    with pytest.raises(WorkerError, match="the cluster's devices were closed"):
        workers._send(0, TrialJob("inc_cluster", {"step": 1}, (1000,), "float32", MeasureSettings()), moved)
    assert not ray.is_initialized()


def test_a_device_gets_an_object_file_the_flags_link_as_its_bytes(incremented):
    """Only text was sent: a device could not find the helper.o the flags name, and every config
    would fail to link there."""
    from tunebench import Bucket, Buckets, Kernel, Space, Variant
    from tunebench.cluster import Device, project_files

    lib = incremented / "lib"
    lib.mkdir()
    (lib / "helper.c").write_text("float helper(float v) { return v + 1.0f; }\n")
    subprocess.run(["gcc", "-c", "-fPIC", "-O2", str(lib / "helper.c"), "-o", str(lib / "helper.o")], check=True)
    (incremented / "kernels" / "linked.c").write_text(
        "float helper(float v);\nvoid linked(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = helper(x[i]); }\n")
    Kernel("linked_cluster", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(10,)])]),
           args=lambda shape, dtype, rng: {}, reference=lambda: 0, outputs=["y"],
           cpu=Variant(source="../kernels/linked.c", entry="linked", flags=("../lib/helper.o",), space=Space({"u": [1]}),
                       heuristic=lambda shape: {"u": 1}, origin=incremented / "suites"))
    files = project_files(incremented)
    assert files["lib/helper.o"] == (lib / "helper.o").read_bytes()
    device = Device("cpu", 10.0, None)
    try:
        device.load(files, [])
        assert (device.root / "lib" / "helper.o").read_bytes() == (lib / "helper.o").read_bytes()
    finally:
        device.close()


def test_a_device_gets_the_whole_package_a_suite_imports_from_relatively(incremented):
    """Only the suite's own folder was sent: ``from ..common import ...`` in suites/pkg/ failed on
    every device (beyond its top-level package), though pytest and local lookups import it."""
    from tunebench.cluster import Device, project_files
    from tunebench.kernel import REGISTRY

    suites = incremented / "suites"
    (suites / "__init__.py").write_text("")
    (suites / "common.py").write_text("NAME = 'in_package'\n")
    (suites / "pkg").mkdir()
    (suites / "pkg" / "__init__.py").write_text("")
    (suites / "pkg" / "test_packaged.py").write_text(
        "from ..common import NAME\n" + INC_SUITE.replace('"inc_cluster"', "NAME").replace("inc = ", "packaged = ")
        .replace('"../', '"../../').replace('"-I../', '"-I../../').replace("from lib.shapes", "from ..lib.shapes"))
    (suites / "lib" / "__init__.py").write_text("")
    failed = []
    load_suites(suites / "pkg" / "test_packaged.py", failed)
    assert failed == []
    del REGISTRY["inc_cluster"]  # declared in suites/ itself, whose whole folder it sends
    files = project_files(incremented)
    assert {"suites/__init__.py", "suites/common.py", "suites/pkg/test_packaged.py"} <= set(files)
    device = Device("cpu", 10.0, None)
    assert device.load(files, ["suites/pkg/test_packaged.py"]) == {}
    assert "in_package" in REGISTRY and not str(REGISTRY["in_package"].declared_in).startswith(str(incremented))
    device.close()


#: A driver's conftest: the devices are other hosts, so what it wrote into its compile cache is
#: gone once a job is sent (the devices' cache is the one the cluster started with).
ANOTHER_HOST = """\
import shutil
from tunebench import cluster
from tunebench.backends.cache import BuildCache

send = cluster.ClusterWorkers.trial


def trial(self, job):
    shutil.rmtree(BuildCache().root, ignore_errors=True)
    return send(self, job)


cluster.ClusterWorkers.trial = trial
"""


def test_a_device_builds_the_recorded_template_with_the_records_text_of_a_helper_edited_since(
        pytester, cluster, monkeypatch, tmp_path):
    """The gate's recorded build named the helper's copy in the driver's compile cache, which a
    device on another host has not: "the file of flags ... not found", the recorded build was
    left out, and a helper made slower passed. The job carries the records' text, and the
    device writes the copy where it builds."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one core per device, as each cluster device has
    _, helper = split_project(pytester)
    helper.write_text(helper.read_text().replace("#define EXTRA 0", f"#define EXTRA {SLOWER}"))
    pytester.makeconftest(ANOTHER_HOST)
    monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / "driver"))
    result = pytester.runpytest_subprocess("test_chain.py", *GATE, "-rA", "--tune-cluster", cluster)
    out = result.stdout.str()  # Ray's own processes beside the device may leave it NOISY
    assert re.search(r"(FAIL|NOISY) +best against the recorded source \(src/helper.c as tuned\) on \(2048,\): "
                     r"1\.[1-9]", out), out


def test_a_job_whose_move_raises_resolves_its_future_with_that_error(holding, monkeypatch):
    """A job whose device died is moved on in a thread of its own: anything but WorkerError raised
    there (here the driver's Ray losing its head as it asks whether the device began the job) died
    with that thread, and the job's future was never resolved: the tune waited on it for good."""
    workers, held, pids, job = holding
    sent = workers.submit(job(held=1, killer=1, id=1))  # on the other device, which it kills once let go
    running(held.parent, pids[1], 1)

    def head_lost(index, ready, error):
        raise ConnectionError("the Ray head is gone")

    monkeypatch.setattr(workers, "_charged", head_lost)
    held.unlink()
    with pytest.raises(ConnectionError, match="the Ray head is gone"):
        sent.result(timeout=120)  # a bound, not a timing: without it a lost future hangs the test


@pytest.fixture
def libfoo(tmp_path_factory, monkeypatch):
    """A library the flags may link (``-lfoo``), on the paths of the cluster started after it."""
    lib = tmp_path_factory.mktemp("lib")
    (lib / "foo.c").write_text("int foo(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", lib / "libfoo.so", lib / "foo.c"], check=True)
    monkeypatch.setenv("LIBRARY_PATH", str(lib))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    return lib


def test_a_round_disturbed_on_a_cluster_stops_no_task_whose_driver_does_not_build_the_heuristic(
        libfoo, project, pytester, cluster, monkeypatch, tmp_path, compile_cache):
    """The hosts link the library the flags name; the driver, another host, has none. A final
    round that stayed disturbed (planted in the driver alone) judged nothing, and the driver's own
    build of the heuristic's config, refused, stopped the task ("does not compile") though every
    device built and measured it: only the round's own compile error stops it."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = project(suite=AXPB_SUITE.replace('entry="axpb",', 'entry="axpb", flags=("-lfoo",),'))
    args = ("suites", *TUNE, "-k", "small", "--tune-cluster", cluster)
    assert pytester.runpytest_subprocess(*args).ret == 0
    (path,) = (root / "records").glob("*.json")
    data = json.loads(path.read_text())
    data["checks"] = {}  # the tune stopped before its final round
    path.write_text(json.dumps(data))
    monkeypatch.delenv("LIBRARY_PATH")  # the driver's: it has no libfoo, nor the hosts' compile cache
    monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / "driver-cache"))
    (pytester.path / "conftest.py").write_text(QUIET_CONFTEST + textwrap.dedent('''
        import tunebench.final_round as fr
        judged = fr._unusable
        def _unusable(comp, shape, configs):
            problem, disturbed = judged(comp, shape, configs)
            return (problem, disturbed) if problem else (f"the machine stayed disturbed on {shape}: planted", True)
        fr._unusable = _unusable
    '''))
    result = pytester.runpytest_subprocess(*args)
    assert "does not compile" not in result.stdout.str()
    assert result.ret == 0, result.stdout.str()[-2000:]


def test_a_comment_edit_keeps_no_trial_on_a_cluster(project, pytester, cluster, monkeypatch, compile_cache):
    """The driver's build of today's source said whether a comment edit's trials were kept, though
    the devices build it, with their own compiler and libraries: a kept trial is recorded ok under
    today's source, so a cluster keeps none and measures them again."""
    root = project()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    args = ("suites", *TUNE, "-k", "small", "--tune-cluster", cluster)
    assert pytester.runpytest_subprocess(*args).ret == 0
    template = root / "kernels" / "axpb.c"
    template.write_text("// a comment\n" + template.read_text())
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 0
    assert "the template (axpb.c edited) changed since the last tune: measured again" in result.stdout.str()
    (path,) = (root / "records").glob("*.json")
    assert not any("kept_from" in t for t in json.loads(path.read_text())["trials"].values())


def test_a_final_round_on_a_cluster_stopped_on_a_cached_compile_error_says_how_to_build_it_again(
        libfoo, project, pytester, cluster, monkeypatch, compile_cache):
    """The library the flags link removed from the hosts, lent afresh (no compile cache), before a
    round of two tasks sharing the heuristic's config: both stop on the link error, neither as "an
    earlier tune recorded it" (the second task's device was served the error the first's built in
    this run). The library installed again, the next round's stop, served the cached error, says
    --tune-retry-failed builds it, and records no "cached"; --tune-retry-failed then builds it on
    the devices (the driver's flag carried to them), and the run passes."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = project(suite=AXPB_SUITE.replace('entry="axpb",', 'entry="axpb", flags=("-lfoo",),'))
    args = ("suites", *TUNE, "--tune-cluster", cluster)
    assert pytester.runpytest_subprocess(*args).ret == 0
    (path,) = (root / "records").glob("*.json")
    data = json.loads(path.read_text())
    data["checks"] = {}  # the tunes stopped before their final rounds
    path.write_text(json.dumps(data))
    library = libfoo / "libfoo.so"
    library.rename(libfoo / "libfoo.so.aside")
    shutil.rmtree(compile_cache)
    first = pytester.runpytest_subprocess(*args)
    # built now; counted before the short summary, which repeats each stop whole on CI
    assert said(first, "so the task stops") == 2 and not said(first, "earlier tune"), first.stdout.str()[-3000:]
    (libfoo / "libfoo.so.aside").rename(library)
    again = pytester.runpytest_subprocess(*args, "-k", "small").stdout.str()
    assert ("does not compile for the heuristic's config [vec:2 unroll:1 mode:0] (as an earlier tune recorded it, "
            "not built again: --tune-retry-failed builds it), so the task stops:") in again, again[-2000:]
    refusals = [e["baseline_failed"] for c in json.loads(path.read_text())["checks"].values() for e in c["shapes"]
                if "baseline_failed" in e]
    assert refusals and not any("cached" in r for r in refusals), refusals
    retried = pytester.runpytest_subprocess(*args, "-k", "small", "--tune-retry-failed")
    assert retried.ret == 0, retried.stdout.str()[-3000:]
