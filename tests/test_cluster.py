"""Tuning on a local Ray cluster of CPU devices: the same records as a one-device run, with the
driver owning the records and the devices importing the suites they were sent."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.test_plugin import TUNE

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")


RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture
def cluster():
    """A local Ray head with two CPUs (two devices of one core each); its address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="tbray", dir="/tmp")  # Ray's socket paths must stay short
    start = subprocess.run([RAY, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                            f"--temp-dir={temp}", "--disable-usage-stats"], capture_output=True, text=True,
                           env={**os.environ, "RAY_AUTH_MODE": "disabled"})  # a local test cluster
    assert start.returncode == 0, start.stdout + start.stderr
    yield f"127.0.0.1:{port}"
    subprocess.run([RAY, "stop", "--force"], capture_output=True)
    shutil.rmtree(temp, ignore_errors=True)


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
    # from an empty cache: what one device compiled and another then found there is this run's build
    assert int(re.search(r"builds: (\d+) compiled \(0 ahead, on 0 cores\), 0 from the compile cache",
                         remote.stdout.str()).group(1)) > 0
