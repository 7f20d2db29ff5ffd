"""Records are never lost or corrupted: many writers at once, and a tuning run killed with -9."""

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tinydb import TinyDB

import tunebench

from tests.test_plugin import TUNE
from tests.test_records import FINGERPRINT, trial
from tunebench.records import RecordsError, RecordStore, trial_identity

#: Every measurement of these tests' runs is judged clean (quiet_verdicts, through a conftest.py where
#: pytest runs in a process of its own): beside other load a tune stopped at its heuristic, as
#: documented, before it could be killed, interrupted or resumed at the point each test sets out to
#: check (9 of them failed beside two busy processes). A busy machine's own outcome is
#: test_interference.py's.
pytestmark = pytest.mark.usefixtures("quiet_verdicts")

WRITERS, EACH = 4, 25


def _write(directory, writer):
    store = RecordStore.for_device(directory, FINGERPRINT)
    for i in range(EACH):
        store.add(trial({"writer": writer, "i": i}))


def test_several_processes_writing_at_once_lose_no_record(tmp_path):
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_write, args=(tmp_path, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    configs = {(t["config"]["writer"], t["config"]["i"]) for t in store.trials()}
    assert len(store.trials()) == WRITERS * EACH and len(configs) == WRITERS * EACH


@pytest.mark.parametrize("tune", [True, False])
def test_pytest_xdist_workers_are_refused_naming_why(project, pytester, tune):
    """Several workers would measure at once, each disturbing the others' timings (on 2 cores the
    tune stopped as busy, and the gate skipped as noisy, exit 0)."""
    root = project()
    result = pytester.runpytest("suites", *(TUNE if tune else ("-p", "no:cacheprovider", "--tune-target", "cpu")),
                                "-n", "2")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*pytest-xdist (-n) runs suites in several processes at once*without -n (-n 0 "
                                 "where addopts sets it, or -p no:xdist where it does not*"])
    assert not list((root / "records").glob("*.json")) or not TinyDB(
        next((root / "records").glob("*.json"))).table("trials").all()


SLOW_C = """\
#include <time.h>
typedef TB_DTYPE real;
void slow(const real *x, real *y, int n)
{
    struct timespec nap = {0, 2000000 * pause};  /* pause x 2 ms, so a tuning run lasts seconds */
    nanosleep(&nap, 0);
    for (int i = 0; i < n; ++i) y[i] = x[i] + 0 * tag;
}
"""

SLOW_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

slow = Kernel(
    "slow", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: x, outputs=["y"],
    cpu=Variant(source="slow.c", entry="slow", heuristic=lambda shape: {"pause": 1, "tag": 0},
                space=Space({"pause": [1, 2], "tag": range(10)})),
)
"""


def _trials(path):
    try:
        return len(RecordStore(path).trials())
    except (RecordsError, FileNotFoundError):
        return 0


def killed_with_9(command: list[str], cwd: Path, trials: int = 3) -> None:
    """Run a tune and kill it and its worker with -9 once ``trials`` are in its records."""
    proc = subprocess.Popen(command, cwd=cwd, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = cwd / "records"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        files = list(path.glob("*.json")) if path.exists() else []
        if files and _trials(files[0]) >= trials:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the tuning run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its worker
    proc.wait()


def interrupted_once(command: list[str], cwd: Path, told: Path, env: dict | None = None) -> tuple[int, str]:
    """A tune sent SIGINT, as Ctrl-C, once it wrote ``told`` (a file its code writes where the
    test interrupts it): its exit code and output."""
    proc = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not told.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert told.exists(), f"the run never wrote {told.name}"
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_kill_9_loses_at_most_the_trial_in_flight_and_a_rerun_resumes(pytester):
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    killed_with_9(command, pytester.path)
    (file,) = (pytester.path / "records").glob("*.json")
    kept = _trials(file)  # the file still opens: no partial write
    assert kept >= 3

    rerun = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stdout[-2000:]
    total = _trials(file)
    assert total == 20  # every candidate, each recorded once
    new = int(next(ln for ln in rerun.stdout.splitlines() if ln.startswith("slow ")).split()[4])
    assert new == total - kept  # the rerun measured only what the killed run had not recorded


def test_committing_the_records_folder_whole_stages_the_records_alone(pytester):
    """The README says to commit the folder whole (`git add records/`): in a project whose own
    .gitignore did not name them, that staged the run's locks with the records. The folder says itself what is no record; a user's own .gitignore there is kept."""
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE))
    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    assert pytester.runpytest("test_slow.py", *TUNE, "--tune-trials", "2").ret == 0
    records = pytester.path / "records"
    assert list((records / ".locks").iterdir())
    subprocess.run(["git", "add", "records/"], cwd=pytester.path, check=True)
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=pytester.path, check=True,
                            capture_output=True, text=True).stdout.split()
    assert sorted(staged) == ["records/.gitignore", *(f"records/{p.name}" for p in records.glob("*.json"))], staged
    (records / ".gitignore").write_text("# the user's own\n")
    assert pytester.runpytest("test_slow.py", *TUNE, "--tune-trials", "2").ret == 0
    assert (records / ".gitignore").read_text() == "# the user's own\n"


def test_an_interrupted_tunes_fastest_trial_is_neither_served_nor_gated_until_a_final_round_confirms_it(pytester):
    """Ctrl-C in the search: its trials are kept, but only a final round may make a pick."""
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    suite = SLOW_SUITE.replace('{"pause": 1, "tag": 0}', '{"pause": 2, "tag": 0}')  # half as fast as pause 1
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(suite))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    proc = subprocess.Popen(command, cwd=pytester.path, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    path = pytester.path / "records"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        files = list(path.glob("*.json")) if path.exists() else []
        if files and _trials(files[0]) >= 3:  # the heuristic and two configs of pause 1
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the tuning run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C does
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "slow[all-float32]: interrupted in its search, after " in out and "best() serves the heuristic" in out
    # the run's own command resumes it, its strategy and options kept
    assert f"their trials are kept and `{sys.executable} -m pytest test_slow.py --tune --tune-target cpu" in out
    assert "--tune-strategy brute_force -q` resumes from them" in out
    best = [sys.executable, "-m", "tunebench.cli", "best", "slow", "--shape", "1000", "--json",
            "--records", str(path), "--suites", str(pytester.path)]
    answer = json.loads(subprocess.run(best, capture_output=True, text=True, check=True).stdout)
    assert (answer["source"], answer["config"]) == ("heuristic", {"pause": 2, "tag": 0})
    assert "no final round confirmed a pick" in answer["reason"] and "[pause:1 tag:" in answer["reason"]

    gate = subprocess.run([sys.executable, "-m", "pytest", "test_slow.py", "-p", "no:cacheprovider", "-rs"],
                          cwd=pytester.path, capture_output=True, text=True)
    assert gate.returncode == 0 and "1 skipped" in gate.stdout, gate.stdout[-2000:]
    assert "its tune ended before its final round" in gate.stdout

    rerun = subprocess.run([*command, "--tune-trials", "3"], cwd=pytester.path, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stdout[-2000:]
    answer = json.loads(subprocess.run(best, capture_output=True, text=True, check=True).stdout)
    assert answer["source"] == "tuned" and answer["config"]["pause"] == 1 and answer["reason"] is None


def as_ordinary_user(command: list[str]) -> list[str]:
    """Root ignores file permissions; without CAP_DAC_OVERRIDE it obeys them as anyone does."""
    if os.geteuid() != 0:
        return command
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *command]


def test_a_read_only_records_folder_stops_the_run_in_one_line(pytester):
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE))
    records = pytester.path / "records"
    records.mkdir()
    records.chmod(0o555)
    try:
        run = subprocess.run(as_ordinary_user([sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "-q"]),
                             cwd=pytester.path, capture_output=True, text=True, timeout=120)
    finally:
        records.chmod(0o755)
    assert run.returncode == 4, run.stdout + run.stderr  # a usage error, before anything ran
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"ERROR: {records}/cpu-") and "read-only" in line and "--tune-records DIR" in line
    assert list(records.iterdir()) == []


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return found


def test_a_worker_dies_with_its_killed_pytest_and_the_next_run_does_not_wait(pytester):
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    proc = subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = pytester.path / "records"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        files = list(path.glob("*.json")) if path.exists() else []
        if files and _trials(files[0]) >= 2 and _children(proc.pid):
            break
        time.sleep(0.05)
    workers = _children(proc.pid)
    assert proc.poll() is None and workers, "the tuning run ended before it could be killed"
    proc.kill()  # pytest only: its worker is not signalled by anyone but the kernel
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.05)
    assert not any(Path(f"/proc/{w}/stat").exists() and " Z " not in Path(f"/proc/{w}/stat").read_text()
                   for w in workers), "the worker outlived its pytest"
    rerun = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-2000:]


def test_trials_a_killed_run_left_in_the_journal_are_folded_by_the_next_and_said(twice_project, pytester):
    """They were never in the records file, so a commit made in between did not hold them."""
    root = twice_project
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (path,) = (root / "records").glob("*.json")
    left = {**RecordStore(path).trials()[0], "git_commit": "deadbeef" * 5, "config": {"reps": 4, "pad": 9}}
    journal = root / "records" / ".journal" / f"{path.name}l"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(json.dumps(left) + "\n")
    gate = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small")
    gate.stdout.fnmatch_lines([f"records: 1 trials of an earlier run that did not fold them (killed, or unable to "
                               f"write the records) were in {journal} and are now folded into {path}; measured at "
                               f"commit deadbeefdead*"])
    assert not journal.exists() and left["config"] in [t["config"] for t in RecordStore(path).trials()]
    journal.write_text(json.dumps({**left, "git_commit": None, "config": {"reps": 4, "pad": 8}}) + "\n")
    gate = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small")
    gate.stdout.fnmatch_lines([f"records: 1 trials of an earlier run that did not fold them (killed, or unable to "
                               f"write the records) were in {journal} and are now folded into {path}; measured "
                               f"outside a git checkout"])


def test_an_archive_left_after_its_records_file_is_deleted_is_read_by_nothing_and_named(twice_project, pytester):
    """The records file deleted to start over, its archive kept: best() said nothing was recorded,
    the gate read the archive's trials and said the tune had stopped before the heuristic, and the
    next tune reused them."""
    root = twice_project
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (path,) = (root / "records").glob("*.json")
    archive = path.with_name(f"{path.stem}.archive.jsonl")
    archive.write_text("".join(json.dumps(t) + "\n" for t in RecordStore(path).trials()))
    path.unlink()
    left = (f"{archive} is left from {path.name}, which is not there: its trials are not read. If {path.name} was "
            f"deleted to tune anew, delete the archive too (`git rm {archive}`, or `rm` outside git); else restore "
            f"{path.name} (`git checkout HEAD -- {path}`, where the last commit holds it)")
    served = tunebench.lookup("twice", (4096,), records=root / "records", suites=root / "suites")
    assert served.source == "heuristic" and left in served.note, served.note
    gate = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small", "-rs")
    gate.assert_outcomes(skipped=1)
    assert "its trials are recorded" not in gate.stdout.str()
    gate.stdout.fnmatch_lines([f"*nothing to gate for twice small float32 on this device, {path.stem}: no records "
                               f"file; {left}*", f"records: {left}*"])
    tune = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert tune.ret == pytest.ExitCode.USAGE_ERROR and not path.exists()
    tune.stderr.fnmatch_lines([f"*{left}; a tune starts no records file beside it"])


def test_a_run_waiting_for_another_runs_task_says_so_then_resumes(twice_project, pytester, tmp_path):
    root = twice_project
    pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-trials", "1")
    (path,) = (root / "records").glob("*.json")
    out = tmp_path / "out.txt"
    command = [sys.executable, "-m", "pytest", "suites", *TUNE, "-k", "small"]
    with RecordStore(path).task_lock("twice[small-float32]"):  # as a run tuning it would
        with open(out, "w") as f:
            proc = subprocess.Popen(command, cwd=root, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while "waiting for it" not in out.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, out.read_text()  # still waiting for the lock
    assert proc.wait(120) == 0, out.read_text()
    assert ("tunebench twice[small-float32]: another run is tuning this task: waiting for it, to resume from what "
            "it records") in out.read_text()


def test_the_journal_of_a_run_still_going_is_not_called_a_killed_runs(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))  # in the journal, not yet folded
    with store.task_lock("k[all-float32]"):  # the run is tuning
        assert RecordStore.for_device(tmp_path, FINGERPRINT).leftover == []
    assert len(RecordStore.for_device(tmp_path, FINGERPRINT).leftover) == 1  # it ended without folding


def _tuned_slow(pytester) -> None:
    """The slow suite over two configs, tuned: records a gate can gate."""
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE).replace('"tag": range(10)',
                                                                                         '"tag": [0, 1]'))
    pytester.runpytest("test_slow.py", *TUNE)


def test_a_tune_given_a_file_for_its_records_folder_says_so_in_one_line(pytester):
    """It said the file was read-only, and to fix its permissions."""
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE))
    pytester.path.joinpath("afile").write_text("")
    result = pytester.runpytest("test_slow.py", *TUNE, "--tune-records", str(pytester.path / "afile"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*records cannot be written there ({pytester.path / 'afile'} is a file, not a "
                                 f"folder): pass --tune-records a folder*"])


def test_the_gate_on_a_read_only_checkout_gates_and_says_its_run_is_not_recorded(pytester):
    _tuned_slow(pytester)
    records = pytester.path / "records"
    (path,) = records.glob("*.json")
    before = path.read_bytes()
    for p in (path, records):
        p.chmod(0o555)
    try:
        run = subprocess.run(as_ordinary_user([sys.executable, "-m", "pytest", "test_slow.py", "-p", "no:cacheprovider",
                                               "--tune-target", "cpu"]),
                             cwd=pytester.path, capture_output=True, text=True, timeout=300)
    finally:
        records.chmod(0o755)
        path.chmod(0o644)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert f"records: {records} cannot be written: this gate run is not kept" in run.stdout
    assert "PASS  slow::all-float32[gate]" in run.stdout and path.read_bytes() == before


def _file_size_limit(limit: int):
    """A preexec_fn: files this process writes stop at ``limit`` bytes (EFBIG), as on a full disk."""
    import resource
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_full_disk_is_one_error_naming_the_file_and_loses_nothing(tmp_path):
    """A full disk had raised OSError tracebacks, left a partial copy of the file beside it for
    good (taking the space a retry needed), and ended the run before its summary."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    store.compact()
    script = textwrap.dedent(f"""
        from tests.test_records import FINGERPRINT, trial
        from tunebench.records import NotWritable, RecordStore
        store = RecordStore.for_device({str(tmp_path)!r}, FINGERPRINT)
        for write in (lambda: store.add(trial({{"vec": 2}}, pad="x" * 4096)),
                      lambda: store.add_check({{"kind": "gate", "pad": "x" * 4096}})):
            try:
                write()
                print("written")
            except NotWritable as e:
                print(e)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parent.parent, preexec_fn=_file_size_limit(store.path.stat().st_size + 64))
    assert run.returncode == 0, run.stderr
    journal, file = run.stdout.splitlines()
    assert journal.startswith(f"{store.journal}: records cannot be written (File too large); every record written "
                              f"before is kept: free space there (or pass --tune-records DIR)"), journal
    assert file.startswith(f"{store.path}: records cannot be written (File too large)"), file
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gitignore", ".journal", ".locks", store.path.name]  # no partial copy
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert [t["config"] for t in again.trials()] == [{"vec": 1}]


def test_a_full_disk_at_the_mark_of_a_trial_in_flight_is_one_error_naming_it_and_leaves_no_empty_mark(tmp_path):
    """The mark a tune writes as a trial's candidate is loaded (see RecordStore.loading) had failed
    with an OSError traceback on every item, and left an empty mark that no run reads or removes."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    script = textwrap.dedent(f"""
        from tests.test_records import FINGERPRINT, trial
        from tunebench.records import NotWritable, RecordStore
        try:
            store = RecordStore.for_device({str(tmp_path)!r}, FINGERPRINT)
            store.measuring(trial({{"vec": 1}}))
            store.loading()
        except NotWritable as e:
            print(e)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parent.parent, preexec_fn=_file_size_limit(16))
    assert run.returncode == 0, run.stderr
    assert f"{store.journal.parent}/{store.path.name}.inflight-" in run.stdout, run.stdout
    assert "records cannot be written (File too large); every record written before is kept" in run.stdout
    assert not list(store.journal.parent.glob("*.inflight-*"))


def test_the_gate_on_a_full_disk_gates_and_says_its_run_is_not_recorded(pytester):
    """Every gate item failed with the OSError of keeping its run, its verdict lost."""
    _tuned_slow(pytester)
    (path,) = (pytester.path / "records").glob("*.json")
    before = path.read_bytes()
    run = subprocess.run([sys.executable, "-m", "pytest", "test_slow.py", "-p", "no:cacheprovider", "--tune-target",
                          "cpu"], cwd=pytester.path, capture_output=True, text=True, timeout=300,
                         preexec_fn=_file_size_limit(len(before) + 64))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert "PASS  slow::all-float32[gate]" in run.stdout and path.read_bytes() == before
    assert f"records: {path}: records cannot be written (File too large); every record written before is kept" in (
        run.stdout), run.stdout[-3000:]
    assert "this gate run is not kept in the records' history" in run.stdout


def test_a_tune_that_could_not_write_its_records_is_not_taken_for_a_killed_one_and_loses_no_trial(pytester):
    """A tune whose records file could not be written (a full disk) ended with its trials in the
    journal, and the next run, folding them, called it "an earlier run that did not end (killed?)"."""
    _tuned_slow(pytester)  # every config built: the run on the full disk compiles nothing
    (path,) = (pytester.path / "records").glob("*.json")
    full = subprocess.run([sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-fresh", "--tune-trials", "1"],
                          cwd=pytester.path, capture_output=True, text=True, timeout=300,
                          preexec_fn=_file_size_limit(path.stat().st_size // 2))  # room for the journal's trials
    unwritten = f"{path}: records cannot be written (File too large)"
    assert f"tunebench: {unwritten}; every record written before is kept" in full.stderr, full.stdout[-3000:]
    journal = RecordStore(path).journal
    kept = RecordStore(path).trials()  # the file's and the journal's
    gate = subprocess.run([sys.executable, "-m", "pytest", "test_slow.py", "-p", "no:cacheprovider", "--tune-target",
                           "cpu"], cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert f"trials of an earlier run that could not fold them ({unwritten}) were in {journal} and are now folded " \
           f"into {path}" in gate.stdout, gate.stdout[-3000:]
    assert RecordStore(path).trials() == kept and not journal.exists() and not list(journal.parent.glob("*.unfolded"))


def test_why_a_run_could_not_fold_its_journal_is_not_said_of_trials_a_killed_run_appended_since(tmp_path):
    """The note stands for the journal as that run left it: a later run killed after adding to it
    (a full disk freed, then kill -9) left trials the note does not explain."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}, pad="x" * 4096))
    script = textwrap.dedent(f"""
        from tests.test_records import FINGERPRINT, trial
        from tunebench.records import NotWritable, RecordStore
        store = RecordStore.for_device({str(tmp_path)!r}, FINGERPRINT)
        try:
            store.compact()
        except NotWritable as e:
            print(e)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parent.parent, preexec_fn=_file_size_limit(1024))
    assert run.stdout.startswith(f"{store.path}: records cannot be written (File too large)"), run.stdout + run.stderr
    assert RecordStore.for_device(tmp_path, FINGERPRINT).unfolded == f"{store.path}: records cannot be written " \
                                                                      f"(File too large)"
    RecordStore.for_device(tmp_path, FINGERPRINT).add(trial({"vec": 2}))  # then killed
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert len(again.leftover) == 2 and again.unfolded is None


def test_the_gate_replaying_read_only_records_gates_them(pytester):
    """It stopped with the tune's "records cannot be written there"."""
    _tuned_slow(pytester)
    (measured,) = (pytester.path / "records").glob("*.json")
    replay = ("--tune-target", f"replay:{measured}", "--tune-records", str(pytester.path / "replayed"))
    pytester.runpytest("test_slow.py", "--tune", "-p", "no:cacheprovider", *replay).assert_outcomes(passed=5)
    records = pytester.path / "replayed"
    (path,) = records.glob("*.json")
    for p in (path, records):
        p.chmod(0o555)
    try:
        run = subprocess.run(as_ordinary_user([sys.executable, "-m", "pytest", "test_slow.py", "-p", "no:cacheprovider",
                                               *replay]), cwd=pytester.path, capture_output=True, text=True, timeout=300)
    finally:
        records.chmod(0o755)
        path.chmod(0o644)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert f"records: {records} cannot be written: this gate run is not kept" in run.stdout
    assert "PASS  slow::all-float32[gate]" in run.stdout, run.stdout[-3000:]


def test_a_records_file_linked_into_a_shared_store_is_written_through_the_link_and_keeps_its_mode(tmp_path,
                                                                                                    settled):
    """The link was replaced by a regular file (the shared store never got the trials), runs by
    either path locked apart, and under umask 077 the file became its writer's alone."""
    shared, records = tmp_path / "shared", tmp_path / "records"
    store = RecordStore.for_device(shared, FINGERPRINT)
    store.add(trial({"vec": 1}))
    store.compact()
    store.path.chmod(0o644)
    records.mkdir()
    (records / store.path.name).symlink_to(store.path)
    umask = os.umask(0o077)
    try:
        linked = RecordStore.for_device(records, FINGERPRINT)
        linked.add(trial({"vec": 2}))
        linked.compact()
    finally:
        os.umask(umask)
    assert (records / store.path.name).is_symlink()
    assert len(RecordStore(store.path).trials()) == 2
    assert store.path.stat().st_mode & 0o777 == 0o644
    assert not (records / ".locks").exists() and not (records / ".journal").exists()
    from tunebench.lookup import _Directory

    stamps = _Directory(records)._stamps()
    linked.add(trial({"vec": 4}))  # in the journal: a run reaching the file by the link is still going
    assert _Directory(records)._stamps() != stamps  # lookups through the link see it, as they see the file
    with linked.task_lock("k[all-float32]"):
        assert RecordStore.for_device(shared, FINGERPRINT).leftover == []  # not a killed run's, by either path
    assert len(RecordStore.for_device(shared, FINGERPRINT).leftover) == 1  # it ended without folding
    linked.compact()
    assert _Directory(records).summary(store.path.stem) is not None
    # the lookup's index beside the file, as its journal and the .gitignore naming them are: none in the link's folder
    assert (shared / ".index").is_dir() and not (records / ".index").exists()


#: A candidate (tag 3) that kills the tuning run itself, as a kernel sending its parent a signal does.
KILLER_C = SLOW_C.replace("    nanosleep(&nap, 0);", "    nanosleep(&nap, 0);\n    if (tag == 3) kill(getppid(), 9);") \
    .replace("#include <time.h>", "#include <time.h>\nint kill(int, int);\nint getppid(void);  /* unistd.h: its pause() */")


def test_a_candidate_that_kills_the_run_is_recorded_crashed_after_two_deaths_and_the_tune_goes_past_it(pytester):
    """Every run died at the same candidate (the fixed order of brute force measures it first each
    time) and nothing named it: the tune could never get past it."""
    pytester.path.joinpath("slow.c").write_text(KILLER_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE).replace("range(10)", "range(5)")
                                                      .replace('"pause": [1, 2]', '"pause": [1]'))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    runs = [subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300) for _ in range(3)]
    assert [r.returncode for r in runs[:2]] == [-9, -9], [r.stdout[-500:] for r in runs]
    assert runs[2].returncode in (0, 1) and "died 2 times while measuring this config" in runs[2].stdout, \
        runs[2].stdout[-3000:]
    (path,) = (pytester.path / "records").glob("*.json")
    trials = RecordStore(path).trials()
    killer = [t for t in trials if t["config"]["tag"] == 3]
    assert [t["status"] for t in killer] == ["crashed"] and {t["config"]["tag"] for t in trials} >= {0, 1, 2, 4}
    assert not list((pytester.path / "records" / ".journal").glob("*.inflight-*"))


#: KILLER_C, whose candidate (tag 3) first waits a minute where the file HANG is, saying so in TOLD.
HANGING_KILLER_C = KILLER_C.replace("    if (tag == 3) kill", """\
    FILE *hang = tag == 3 ? fopen(HANG, "r") : 0;
    if (hang) { fclose(fopen(TOLD, "w")); struct timespec minute = {60, 0}; nanosleep(&minute, 0); }
    if (tag == 3) kill""").replace("#include <time.h>", "#include <time.h>\n#include <stdio.h>")


def test_a_run_interrupted_while_a_candidate_that_killed_a_run_runs_keeps_that_death(pytester):
    """Ctrl-C while the candidate that killed the run before ran wiped out that run's death: the
    tune after it was killed twice more before it recorded the candidate crashed."""
    hang, told = pytester.path / "hang", pytester.path / "told"
    pytester.path.joinpath("slow.c").write_text(f'#define HANG "{hang}"\n#define TOLD "{told}"\n{HANGING_KILLER_C}')
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE).replace("range(10)", "range(5)")
                                                      .replace('"pause": [1, 2]', '"pause": [1]'))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    killed = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stdout[-3000:]
    hang.touch()
    code, out = interrupted_once(command, pytester.path, told)  # as its candidate runs
    assert code == 2, out[-3000:]  # interrupted
    hang.unlink()
    runs = [subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300) for _ in range(2)]
    assert runs[0].returncode == -9 and runs[1].returncode in (0, 1), [r.stdout[-500:] for r in runs]
    assert "died 2 times while measuring this config" in runs[1].stdout, runs[1].stdout[-3000:]


#: A candidate (tag 3) that ends itself with SIGTERM, as a signal from outside would end its worker.
TERMINATING_C = SLOW_C.replace("    nanosleep(&nap, 0);", "    nanosleep(&nap, 0);\n    if (tag == 3) raise(SIGTERM);") \
    .replace("#include <time.h>", "#include <time.h>\n#include <signal.h>")


def test_a_candidate_that_raises_sigterm_itself_is_recorded_crashed_after_two_runs_and_the_tune_goes_past_it(
        pytester):
    """A worker killed by SIGTERM in each of its attempts stops its task with nothing recorded, as
    a kill from outside cannot be told apart from the candidate's own: a candidate that raised it
    stopped its task in every run, for good, and the inflight mark that counts such deaths was
    cleared as each run went on."""
    pytester.path.joinpath("slow.c").write_text(TERMINATING_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE).replace("range(10)", "range(5)")
                                                      .replace('"pause": [1, 2]', '"pause": [1]'))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    runs = [subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300) for _ in range(3)]
    for number, run in enumerate(runs[:2], 1):
        assert run.returncode == 1 and "[pause:1 tag:3] on (1000,) was killed by SIGTERM 2 times in a row, by " \
            "something outside" in run.stdout and f"(this was run {number})" in run.stdout, run.stdout[-3000:]
    assert runs[2].returncode in (0, 1) and "its worker was killed by SIGTERM in 2 runs in a row while measuring " \
        "this config" in runs[2].stdout, runs[2].stdout[-3000:]
    (path,) = (pytester.path / "records").glob("*.json")
    trials = RecordStore(path).trials()
    assert [t["status"] for t in trials if t["config"]["tag"] == 3] == ["crashed"]
    assert {t["config"]["tag"] for t in trials} >= {0, 1, 2, 4}
    assert not list((pytester.path / "records" / ".journal").glob("*.inflight-*"))


def test_a_task_stopped_by_its_workers_kills_is_a_death_of_its_config_only_where_its_candidate_ran(tmp_path):
    """As a run killed before a candidate ran is no death of its config (below), nor is a task
    stopped so: its worker killed while the trial built or prepared its inputs ran none of its code."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.measuring(trial({"vec": 1}))
    assert not store.killed("SIGTERM")
    store.measured()
    assert not list(store.journal.parent.glob("*.inflight-*"))
    store.measuring(trial({"vec": 1}))
    store.loading()
    assert store.killed("SIGTERM")
    store.measured()  # the task stopped, the run goes on: the mark stays
    assert len(list(store.journal.parent.glob("*.inflight-*"))) == 1
    _ended(store)  # the run has ended since
    assert RecordStore.for_device(tmp_path, FINGERPRINT).measuring(trial({"vec": 1})) == ["SIGTERM"]


def _ended(store: RecordStore) -> None:
    """The marks in ``store``'s folder are of a run that has ended (a process no longer running)."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    for mark in store.journal.parent.glob("*.inflight-*"):
        mark.write_text(json.dumps({**json.loads(mark.read_text()), "pid": ended.pid}))
        mark.rename(mark.with_name(mark.name.replace(f".inflight-{os.getpid()}", f".inflight-{ended.pid}")))


def test_a_run_interrupted_before_its_candidate_loaded_keeps_the_earlier_runs_deaths(tmp_path):
    """A run that measured a config where an earlier run had died, and was interrupted (Ctrl-C)
    before its candidate loaded, deleted the earlier run's mark and left none of its own: the
    config's count of deaths started again from none."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.measuring(trial({"vec": 1}))
    store.loading()
    store.killed("SIGTERM")
    store.measured()
    _ended(store)
    interrupted = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert interrupted.measuring(trial({"vec": 1})) == ["SIGTERM"]
    interrupted.measured()  # as the session's finally does on Ctrl-C
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert again.measuring(trial({"vec": 1})) == ["SIGTERM"]
    again.loading()  # its own mark carries the earlier run's death on: that one's goes
    (mark,) = again.journal.parent.glob("*.inflight-*")
    assert json.loads(mark.read_text())["deaths"] == ["SIGTERM"]


def ended_mark(store: RecordStore, suffix: str = "", **fields) -> Path:
    """A mark that a run which has ended (a process no longer running) left at the trial of
    ``{"vec": 1}`` in ``store``'s folder, of ``fields`` beside its key, pid and no deaths."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    store.journal.parent.mkdir(exist_ok=True)
    mark = store.journal.parent / f"{store.path.name}.inflight-{ended.pid}-0123456789abcdef{suffix}"
    mark.write_text(json.dumps({"key": json.dumps(trial_identity(trial({"vec": 1}))), "pid": ended.pid, "deaths": [],
                                **fields}))
    return mark


def test_two_runs_that_each_died_at_a_config_without_seeing_the_others_mark_are_two_deaths(tmp_path):
    """Of the marks two runs left at the same config (both measuring it at once, each killed), only
    the longest count of deaths was taken: two deaths counted as one."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    for _ in range(2):
        ended_mark(store, killed="SIGTERM")
    assert store.measuring(trial({"vec": 1})) == ["SIGTERM", "SIGTERM"]


def test_a_crash_counted_from_earlier_deaths_keeps_their_marks_till_it_is_recorded(tmp_path):
    """counted() removed the marks before the crash was recorded: a full disk then lost both, and
    the next run measured the config again (a candidate that kills the run killed two more)."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    for _ in range(2):
        ended_mark(store)
    assert store.measuring(trial({"vec": 1})) == [None, None]
    store.counted()
    assert RecordStore.for_device(tmp_path, FINGERPRINT).measuring(trial({"vec": 1})) == [None, None]
    store.add({**trial({"vec": 1}), "status": "crashed", "error": "the tuning run died 2 times"})
    assert not list(store.journal.parent.glob("*.inflight-*"))


def test_a_marks_copy_left_by_a_run_that_died_writing_it_is_no_death(tmp_path):
    """A run killed between writing a mark's copy and putting it in place left the copy, which
    the next run read as a mark: a death where the candidate never ran, or one counted twice."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    copy = ended_mark(store, ".tmp")
    assert store.measuring(trial({"vec": 1})) == []
    assert not copy.exists()


def test_a_mark_counts_only_for_the_compiler_and_entry_point_it_was_left_with(tmp_path):
    """A run that died at a config's gcc build counted against its clang build (TUNEBENCH_CC=clang):
    that one died once and was recorded crashed, "died 2 times"."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.measuring(trial({"vec": 1}, compiler="gcc 12.2.0", entry="k"))
    store.loading()  # the run dies at it
    _ended(store)
    for built in ({"compiler": "clang 19.1.7", "entry": "k"}, {"compiler": "gcc 12.2.0", "entry": "k_v2"}):
        assert RecordStore.for_device(tmp_path, FINGERPRINT).measuring(trial({"vec": 1}, **built)) == []
    assert RecordStore.for_device(tmp_path, FINGERPRINT).measuring(  # kept for gcc's next run
        trial({"vec": 1}, compiler="gcc 12.2.0", entry="k")) == [None]


@pytest.mark.parametrize("edited", ["source_hash", "setup_hash"])
def test_a_mark_left_before_the_kernel_was_edited_goes_as_its_config_is_measured_again(tmp_path, edited):
    """No run measures that template or declaration again, so nothing counted the mark or removed
    it: it stayed in records/.journal for good. Another config's stays."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    mark = ended_mark(store)
    assert store.measuring(trial({"vec": 2}, **{edited: "edited"})) == []
    assert mark.exists()
    assert store.measuring(trial({"vec": 1}, **{edited: "edited"})) == []
    assert not mark.exists()


def test_a_run_interrupted_after_its_candidate_loaded_keeps_the_earlier_runs_deaths_and_adds_none(tmp_path):
    """A run that measured a config where an earlier run had died, interrupted (Ctrl-C) while its
    candidate ran, removed its own mark, which carried that death: the count started again from none."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    ended_mark(store)
    interrupted = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert interrupted.measuring(trial({"vec": 1})) == [None]
    interrupted.loading()
    interrupted.measured()  # as the session's finally does on Ctrl-C
    _ended(interrupted)
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert again.measuring(trial({"vec": 1})) == [None]
    again.loading()
    again.measured()  # measured this time: its trial recorded, the deaths in a row end
    again.add(trial({"vec": 1}))
    assert not list(again.journal.parent.glob("*.inflight-*"))


def test_a_run_that_resumes_a_config_it_was_interrupted_at_keeps_the_earlier_runs_deaths(tmp_path):
    """pytest-timeout failed the item while the config's candidate ran; the task's next item resumed
    the search in the same run, which measured the config again: it took its own mark, carrying an
    earlier run's death, for a live run's, counted none, and a killer candidate took a run more."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    ended_mark(store)
    run = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert run.measuring(trial({"vec": 1})) == [None]
    run.loading()
    run.measured()  # interrupted
    assert run.measuring(trial({"vec": 1})) == [None]  # resumed, in the same run
    run.loading()  # ... and its candidate kills the run
    _ended(run)
    assert RecordStore.for_device(tmp_path, FINGERPRINT).measuring(trial({"vec": 1})) == [None, None]


def test_a_mark_of_an_earlier_run_of_the_same_pid_counts(tmp_path):
    """pytest in a container gets the same pid every run: an earlier run's mark, of a live pid,
    was taken for this run's own, and its death counted in no later run (nor one of a second
    pytest.main in one process)."""
    earlier = RecordStore.for_device(tmp_path, FINGERPRINT)
    earlier.measuring(trial({"vec": 1}))
    earlier.loading()
    assert earlier.killed("SIGTERM")
    later = RecordStore.for_device(tmp_path, FINGERPRINT)  # the next run, of the same pid
    assert later.measuring(trial({"vec": 1})) == ["SIGTERM"]
    later.loading()
    assert [m.name for m in later.journal.parent.glob("*.inflight-*")] == [later._mark[0].name]


def test_a_torn_mark_of_a_run_that_ended_is_removed_and_one_of_a_run_going_on_is_left(tmp_path):
    """An empty or torn mark (a write killed halfway, as an earlier tunebench's could be) names no
    trial: no run read it, and none removed it, for good."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.journal.parent.mkdir()
    ended = subprocess.Popen(["true"])
    ended.wait()
    torn = store.journal.parent / f"{store.path.name}.inflight-{ended.pid}-0123456789abcdef"
    torn.write_text('{"key": "[')
    going_on = store.journal.parent / f"{store.path.name}.inflight-{os.getpid()}-0123456789abcdef"
    going_on.write_text("")
    assert store.measuring(trial({"vec": 1})) == []
    assert not torn.exists() and going_on.exists()


def test_a_full_disk_as_a_stopped_task_keeps_its_mark_keeps_the_runs_death_there(tmp_path):
    """killed() rewrote the mark in place: on a full disk the mark was left empty, then removed,
    and the run's death at the config with it; written whole or not, the session's measured()
    after it removed the mark it had failed to rewrite."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    script = textwrap.dedent(f"""
        import resource
        from tests.test_records import FINGERPRINT, trial
        from tunebench.records import NotWritable, RecordStore
        store = RecordStore.for_device({str(tmp_path)!r}, FINGERPRINT)
        store.measuring(trial({{"vec": 1}}))
        store.loading()
        (mark,) = store.journal.parent.glob("*.inflight-*")
        limit = mark.stat().st_size + 4  # the mark as it is fits, not with the signal that killed the worker
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        try:
            store.killed("SIGTERM")
        except NotWritable as e:
            print(e)
        finally:
            store.measured()  # as the session's trial ends, interrupted or not
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parent.parent)
    assert run.returncode == 0 and "records cannot be written (File too large)" in run.stdout, run.stdout + run.stderr
    (mark,) = store.journal.parent.glob("*.inflight-*")
    assert json.loads(mark.read_text())["deaths"] == []  # the run died at it, as far as the next can tell


#: A reference that, told to by $IN_REFERENCE, says so in that file and takes a minute (a large shape's).
SLOW_REFERENCE = """
def reference(x, n):
    import os, pathlib, time
    if os.environ.get("IN_REFERENCE"):
        pathlib.Path(os.environ["IN_REFERENCE"]).touch()
        time.sleep(60)
    return x
"""


def test_runs_killed_before_a_candidate_ran_are_no_deaths_of_its_config(pytester):
    """Two runs killed (a CI job cancelled twice) while the heuristic's first trial built its
    reference had recorded the heuristic as crashed, served a candidate in its place and failed
    its item: no code of the heuristic's had run."""
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    suite = textwrap.dedent(SLOW_SUITE).replace("reference=lambda x, n: x,", "reference=reference,")
    pytester.path.joinpath("test_slow.py").write_text(suite.replace("\nslow = ", f"{SLOW_REFERENCE}\nslow = "))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    told = pytester.path / "in-reference"
    for _ in range(2):
        told.unlink(missing_ok=True)
        proc = subprocess.Popen(command, cwd=pytester.path, env={**os.environ, "IN_REFERENCE": str(told)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not told.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert told.exists(), "the run never built the reference"
        proc.terminate()  # as a CI job's cancel does
        assert proc.wait(60) == -signal.SIGTERM
    run = subprocess.run([*command, "--tune-trials", "1"], cwd=pytester.path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and "died 2 times" not in run.stdout, run.stdout[-3000:]
    (path,) = (pytester.path / "records").glob("*.json")
    assert [t["status"] for t in RecordStore(path).trials(baseline=True)] == ["ok"]


@pytest.mark.parametrize("at", [2000, 1000])
def test_a_tune_interrupted_in_its_heuristics_trials_says_what_it_kept_and_that_its_command_resumes(pytester, at):
    """Ctrl-C after the heuristic's first shape, before its second: the summary said nothing of the
    task (only a task whose heuristic had every shape was listed as interrupted), though its trial
    was kept and the run's command resumes from it. Before its first shape ended, it said "after 0
    of its 2 shapes; their trials are kept", of none."""
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    suite = (textwrap.dedent(SLOW_SUITE).replace("reference=lambda x, n: x,", "reference=reference,")
             .replace("shapes=[(1000,)]", "shapes=[(1000,), (2000,)]"))
    second = SLOW_REFERENCE.replace("if os.environ", f"if n == {at} and os.environ")  # that shape's alone
    pytester.path.joinpath("test_slow.py").write_text(suite.replace("\nslow = ", f"{second}\nslow = "))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    told = pytester.path / "in-reference"
    code, out = interrupted_once(command, pytester.path, told, {**os.environ, "IN_REFERENCE": str(told)})
    assert code != 0
    kept, said = ("1", "their trials are kept and") if at == 2000 else ("0", "none of its trials had ended, and")
    assert f"slow[all-float32]: interrupted in its heuristic's trials, after {kept} of its 2 shapes; {said} " \
           f"`{sys.executable} -m pytest test_slow.py --tune --tune-target cpu" in out, out[-3000:]
    assert f"--tune-strategy brute_force -q` {'resumes from them' if at == 2000 else 'tunes it'}" in out
    path = next((pytester.path / "records").glob("*.json"), None)
    assert [t["shape"] for t in RecordStore(path).trials(baseline=True)] == [[1000]] if at == 2000 else \
        path is None or not RecordStore(path).trials(baseline=True)


#: A candidate (tag 3) whose build kills the tuning run as it is loaded: a constructor runs in dlopen.
LOAD_KILLER_C = SLOW_C.replace("#include <time.h>", "#include <time.h>\nint kill(int, int);\nint getppid(void);\n"
                               "__attribute__((constructor)) static void on_load(void) { if (tag == 3) "
                               "kill(getppid(), 9); }")


def test_a_candidate_that_kills_the_run_as_it_is_loaded_is_recorded_crashed_after_two_deaths(pytester):
    """The mark was written as the parent read the worker's "built", while the worker went on to
    load the build: its constructor killed the run before the mark was there, and every resumed
    tune measured it again, killed at the same place."""
    pytester.path.joinpath("slow.c").write_text(LOAD_KILLER_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE).replace("range(10)", "range(5)")
                                                      .replace('"pause": [1, 2]', '"pause": [1]'))
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "--tune-strategy", "brute_force", "-q"]
    records = pytester.path / "records"
    for _ in range(4):  # a race the run lost about half the time: each killed run leaves its mark
        shutil.rmtree(records, ignore_errors=True)
        run = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300)
        assert run.returncode == -9, run.stdout[-3000:]
        assert len(list((records / ".journal").glob("*.inflight-*"))) == 1
    shutil.rmtree(records)
    runs = [subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300) for _ in range(3)]
    assert [r.returncode for r in runs[:2]] == [-9, -9], [r.stdout[-500:] for r in runs]
    assert runs[2].returncode in (0, 1) and "died 2 times while measuring this config" in runs[2].stdout, \
        runs[2].stdout[-3000:]
    (path,) = records.glob("*.json")
    assert [t["status"] for t in RecordStore(path).trials() if t["config"]["tag"] == 3] == ["crashed"]


def test_a_tune_interrupted_while_waiting_for_another_runs_lock_on_its_task_says_so_and_what_resumes(pytester):
    """Ctrl-C while another run held the task's lock: the summary said nothing at all (only a task
    whose search had begun was listed), though that run's trials are kept and the command resumes."""
    _tuned_slow(pytester)
    (path,) = (pytester.path / "records").glob("*.json")
    store = RecordStore(path)
    command = [sys.executable, "-m", "pytest", "test_slow.py", *TUNE, "-q"]
    with store.task_lock("slow[all-float32]"):  # as another run tuning the task holds it
        lock = str(store._lock_file("slow[all-float32]"))
        proc = subprocess.Popen(command, cwd=pytester.path, start_new_session=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not any(  # it opened the lock to wait on it
                os.path.realpath(fd) == lock for fd in Path(f"/proc/{proc.pid}/fd").iterdir()):
            time.sleep(0.05)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C does
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "slow[all-float32]: interrupted while waiting for another run tuning it (which holds its lock), before " \
           "this run measured any of its trials; what that run records is kept and " \
           f"`{sys.executable} -m pytest test_slow.py --tune --tune-target cpu" in out, out[-3000:]
    assert "-q` resumes from it" in out
