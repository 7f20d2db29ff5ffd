"""Lookups inside a framework's process: threads asking at once, records that change under it,
deployment mistakes. Answers come from the committed records of the shipped suites (copied, so
that nothing here changes them), on their recorded device: nothing is tuned or timed."""

import gc
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import types
import warnings
import weakref
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import tunebench
from tunebench import export
from tunebench.buckets import BucketError
from tunebench.cli import main
from tunebench.device import device_id
from tunebench.kernel import REGISTRY
from tunebench.records import RecordStore, config_key, config_text

ROOT = Path(__file__).resolve().parent.parent
DEVICE = "cpu-amd-epyc-f26m2-2t-506d4e"
lookup_module = importlib.import_module("tunebench.lookup")


@pytest.fixture
def deployed(tmp_path, monkeypatch):
    """The shipped suites, templates and this device's records, as a framework ships them, in a
    process that has declared no kernel yet and served no shape outside every bucket (as a
    framework's own)."""
    monkeypatch.setattr(lookup_module, "_FIRST_OUTSIDE", {})
    declared = dict(REGISTRY)
    REGISTRY.clear()
    yield ship(tmp_path)
    REGISTRY.clear()
    REGISTRY.update(declared)


def ship(tmp_path: Path) -> Path:
    for folder in ("suites", "kernels"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "records").mkdir()
    shutil.copy(ROOT / "records" / f"{DEVICE}.json", tmp_path / "records")
    return tmp_path


CASES = [("layernorm", (300, 8192)), ("row_reduce", (4, 262144)), ("row_reduce", (16384, 256)),
         ("softmax", (64, 4096))]

ASK = """\
import json, sys, threading, tunebench
records, device, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
cases = json.loads(sys.argv[4])
barrier = threading.Barrier(threads)
found, errors = [], []
def ask():
    barrier.wait()
    for _ in range(10):
        for kernel, shape in cases:
            try:
                found.append([kernel, shape, list(tunebench.best(kernel, shape, device, records=records).items())])
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")
workers = [threading.Thread(target=ask) for _ in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
print(json.dumps({"found": found, "errors": errors}))
"""


def ask(root: Path, threads: int) -> dict:
    done = subprocess.run([sys.executable, "-c", ASK, str(root / "records"), DEVICE, str(threads), json.dumps(CASES)],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_threads_asking_first_at_once_wait_for_the_declarations_and_agree_with_one_thread(deployed):
    """The first lookup imports the suites; threads asking meanwhile once went on without the
    declarations: errors (the heuristic could not be applied) and answers kept that way."""
    for suite in (deployed / "suites").glob("test_*.py"):  # a slow import: the window is wide open
        suite.write_text("import time\ntime.sleep(0.3)\n" + suite.read_text())
    alone = ask(deployed, 1)
    assert alone["errors"] == []
    expected = {(k, tuple(s)): config for k, s, config in alone["found"]}
    together = ask(deployed, 8)
    assert together["errors"] == []
    assert len(together["found"]) == 8 * 10 * len(CASES)
    assert all(config == expected[(k, tuple(s))] for k, s, config in together["found"])  # in declared order too


def test_an_answer_made_while_the_records_change_is_not_kept(deployed, monkeypatch):
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    records = deployed / "records"
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).source == "tuned"
    choose, started, release = lookup_module._choose, threading.Event(), threading.Event()

    def slow_choose(*args):
        choice = choose(*args)
        if args[3] == (301, 8192):  # this thread is descheduled right after choosing
            started.set()
            release.wait(10)
        return choice

    monkeypatch.setattr(lookup_module, "_choose", slow_choose)
    late = []
    thread = threading.Thread(target=lambda: late.append(tunebench.lookup("layernorm", (301, 8192), DEVICE,
                                                                           records=records)))
    thread.start()
    assert started.wait(10)
    path = records / f"{DEVICE}.json"
    data = json.loads(path.read_text())  # the records without layernorm's tune: its heuristic serves
    for table in ("trials", "checks"):
        data[table] = {i: d for i, d in data[table].items() if d["kernel"] != "layernorm"}
    path.write_text(json.dumps(data))
    assert tunebench.lookup("layernorm", (302, 8192), DEVICE, records=records).source == "heuristic"
    release.set()
    thread.join(10)
    assert late[0].source == "tuned"  # made from the records as they were when it was asked
    assert tunebench.lookup("layernorm", (301, 8192), DEVICE, records=records).source == "heuristic"


def test_records_copied_over_in_place_within_the_tick_of_the_write_read_are_read_again(deployed, one_tick,
                                                                                       monkeypatch):
    """A copy over the records (the merge driver's or a deploy's ``cp``) of as many bytes within
    the tick of the write the lookups had read left the file's stat as it was: they answered from
    the records as they were, and so did every later process, from the index kept under that stat."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    records = deployed / "records"
    path = records / f"{DEVICE}.json"
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).source == "tuned"
    path.write_text(path.read_text().replace('"layernorm"', '"layernorX"'))  # its records are another kernel's
    assert tunebench.lookup("layernorm", (299, 8192), DEVICE, records=records).source == "heuristic"
    monkeypatch.setattr(lookup_module, "_DIRECTORIES", {})  # a process started since
    assert tunebench.lookup("layernorm", (298, 8192), DEVICE, records=records).source == "heuristic"


def test_a_file_rewritten_in_place_with_its_size_and_time_kept_is_seen_as_changed(tmp_path, settled):
    path = tmp_path / f"{DEVICE}.json"
    path.write_text('{"trials": {}}')
    folder = lookup_module._Directory(tmp_path)
    before, st = folder._stamps(), path.stat()
    with open(path, "r+") as f:  # as cp -p or rsync -t leave a file of the same size
        f.write('{"tasks": {}}')
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert folder._stamps() != before


def test_a_half_written_records_file_is_answered_from_its_last_whole_read_and_read_again_once_changed(
        deployed, settled, monkeypatch):
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    records = deployed / "records"
    path = records / f"{DEVICE}.json"
    whole = path.read_bytes()
    tuned = tunebench.best("layernorm", (300, 8192), DEVICE, records=records)
    reads = []
    monkeypatch.setattr(lookup_module.RecordStore, "__init__", lambda self, *a, init=lookup_module.RecordStore.__init__,
                        **k: reads.append(1) or init(self, *a, **k))
    path.write_bytes(whole[:100_000])  # a checkout caught half way
    with pytest.warns(lookup_module.StaleRecordsWarning, match=f"{path}: corrupted records file .* last read whole"):
        assert tunebench.best("layernorm", (300, 8192), DEVICE, records=records) == tuned
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for shape in ((300, 8192), (299, 8192), (298, 8192)):  # neither parsed nor said again per call
            assert tunebench.best("layernorm", shape, DEVICE, records=records) == tuned
    assert len(reads) == 1
    path.write_bytes(whole)
    assert tunebench.best("layernorm", (297, 8192), DEVICE, records=records) == tuned


def test_a_records_file_absent_at_one_check_is_answered_from_as_before_until_absent_at_the_next(deployed, monkeypatch):
    """git checkout unlinks a file, then writes it whole: a check between the two served the
    heuristic for every launch until the next check, a second later."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 1e-9)  # read again in a thread of its own, at every call
    records = deployed / "records"
    path = records / f"{DEVICE}.json"
    tuned = tunebench.best("layernorm", (300, 8192), DEVICE, records=records)
    aside = path.rename(deployed / "aside.json")
    assert [tunebench.best("layernorm", (300, 8192), DEVICE, records=records) for _ in range(2)] == [tuned] * 2
    later = [tunebench.best("layernorm", (300, 8192), DEVICE, records=records) for _ in range(3)]
    assert later[-1] != tuned, later  # absent at the next check too: the records are gone
    aside.rename(path)
    assert [tunebench.best("layernorm", (300, 8192), DEVICE, records=records) for _ in range(3)][-1] == tuned


def test_a_document_id_edited_by_hand_into_no_number_is_named_by_the_lookups_at_each_launch(deployed, monkeypatch):
    """TinyDB's "invalid literal for int()" named no file, in the thread that reads the records
    again (it suppresses only records errors) and then at the next lookup."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 1e-9)  # read again in a thread of its own
    records = deployed / "records"
    path = records / f"{DEVICE}.json"
    tuned = tunebench.best("layernorm", (300, 8192), DEVICE, records=records)
    data = json.loads(path.read_text())
    data["trials"]["a1"] = data["trials"].pop("1")
    path.write_text(json.dumps(data))
    with pytest.warns(lookup_module.StaleRecordsWarning, match=re.escape(f"{path}: table 'trials' holds document "
                                                                         f"id 'a1', not a number")):
        for shape in ((299, 8192), (298, 8192), (297, 8192)):
            assert tunebench.best("layernorm", shape, DEVICE, records=records) == tuned


def test_a_process_started_while_the_file_is_half_written_answers_from_the_index_of_its_last_whole_read(deployed):
    """A framework that starts during a checkout raised, where an earlier process had read the
    file whole and kept its summary in records/.index."""
    records = deployed / "records"
    path = records / f"{DEVICE}.json"
    asked = ("import sys, warnings, tunebench, tunebench.stamps\n"
             "tunebench.stamps.RACY_S = 0.0  # the records copied just now taken as settled, to be indexed\n"
             "with warnings.catch_warnings(record=True) as seen:\n"
             "    warnings.simplefilter('always')\n"
             "    print(tunebench.best('layernorm', (300, 8192), sys.argv[2], records=sys.argv[1]))\n"
             "print([str(w.message) for w in seen])\n")
    run = [sys.executable, "-c", asked, str(records), DEVICE]
    first = subprocess.run(run, capture_output=True, text=True, check=True).stdout.splitlines()
    assert first[1] == "[]" and list((records / ".index").glob(f"{DEVICE}.v*.json"))
    path.write_bytes(path.read_bytes()[:100_000])  # a checkout caught half way
    again = subprocess.run(run, capture_output=True, text=True, check=True).stdout.splitlines()
    assert again[0] == first[0] and f"{path}: corrupted records file" in again[1] and "last read whole" in again[1]


def test_the_index_a_lookup_writes_is_ignored_by_git_where_the_records_came_without_a_gitignore(deployed):
    """A framework that vendors the records file alone: its first lookup's records/.index showed
    as untracked in git (only a tune or gate wrote the .gitignore naming it)."""
    records = deployed / "records"
    git = ("git", "-c", "user.name=t", "-c", "user.email=t@t")
    subprocess.run([*git, "init", "-q", str(deployed)], check=True)
    subprocess.run([*git, "add", "."], cwd=deployed, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "vendored"], cwd=deployed, check=True)
    asked = ("import sys, tunebench, tunebench.stamps\n"
             "tunebench.stamps.RACY_S = 0.0  # the records copied just now taken as settled, to be indexed\n"
             "tunebench.best('layernorm', (300, 8192), sys.argv[2], records=sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", asked, str(records), DEVICE], check=True)
    assert list((records / ".index").glob(f"{DEVICE}.v*.json"))
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "records"], cwd=deployed,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""


def test_a_records_file_unreadable_from_the_start_raises_naming_it_without_parsing_it_per_call(deployed, monkeypatch):
    path = deployed / "records" / f"{DEVICE}.json"
    path.write_text('{"trials": {"1": ')
    reads = []
    monkeypatch.setattr(lookup_module.RecordStore, "__init__", lambda self, *a, init=lookup_module.RecordStore.__init__,
                        **k: reads.append(1) or init(self, *a, **k))
    for shape in ((300, 8192), (299, 8192)):
        with pytest.raises(lookup_module.RecordsError, match=f"{path}: corrupted records file"):
            tunebench.best("layernorm", shape, DEVICE, records=deployed / "records")
    assert len(reads) == 1


def test_a_records_folder_or_root_that_does_not_exist_is_an_error_not_the_heuristic(deployed, monkeypatch):
    with pytest.raises(LookupError, match=f"records={deployed / 'record'}: not a folder$"):
        tunebench.best("layernorm", (300, 8192), records=deployed / "record")
    with pytest.raises(LookupError, match=r"not a folder: pass its folder \(and device= for another device's file\)"):
        tunebench.best("layernorm", (300, 8192), records=deployed / "records" / f"{DEVICE}.json")
    monkeypatch.setenv("TUNEBENCH_ROOT", str(deployed / "nowhere"))
    with pytest.raises(LookupError, match="TUNEBENCH_ROOT=.*nowhere: no such folder"):
        tunebench.best("layernorm", (300, 8192))


def test_a_suites_folder_that_does_not_exist_is_an_error_not_an_answer_from_the_records_alone(deployed):
    """A typo in suites= (or one suite's file) answered from the records alone, and flags() then
    asked for the suites= it was given."""
    records = deployed / "records"
    for suites, said in ((deployed / "suite", "not a folder$"),
                         (deployed / "suites" / "test_layernorm.py", "not a folder: pass the folder of the suites$")):
        with pytest.raises(LookupError, match=f"suites={re.escape(str(suites))}: {said}"):
            tunebench.best("layernorm", (300, 8192), DEVICE, records=records, suites=suites)
        with pytest.raises(LookupError, match=f"suites={re.escape(str(suites))}: not a folder"):
            tunebench.tuned("layernorm", device=DEVICE, records=records, suites=suites)
        with pytest.raises(LookupError, match=f"suites={re.escape(str(suites))}: not a folder"):
            export.collect(DEVICE, records, suites)
    assert tunebench.best("layernorm", (300, 8192), DEVICE, records=records, suites=deployed / "suites")


def test_the_thread_count_names_the_device_for_every_shape_asked_after_it_changed(deployed, monkeypatch):
    records = deployed / "records"
    first = tunebench.lookup("layernorm", (300, 8192), records=records)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    for shape in ((300, 8192), (301, 8192)):  # the one asked before, and a new one
        choice = tunebench.lookup("layernorm", shape, records=records)
        assert choice.device != first.device and "-7t-" in choice.device


def test_lookups_work_after_the_working_directory_is_removed_where_the_root_is_set(deployed, tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    monkeypatch.setenv("TUNEBENCH_ROOT", str(deployed))
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE).source == "tuned"
    monkeypatch.delenv("TUNEBENCH_ROOT")
    with pytest.raises(LookupError, match="the working directory no longer exists: pass records= or set TUNEBENCH_ROOT"):
        tunebench.lookup("layernorm", (300, 8192), DEVICE)


FORKED = """\
import os, signal, sys, threading, tunebench
lookup = sys.modules["tunebench.lookup"]  # the module: tunebench.lookup is also its function
records, device = sys.argv[1], sys.argv[2]
tunebench.best("row_reduce", (300, 8192), device, records=records)  # the folder known, its lock made
held, done = threading.Event(), threading.Event()
def hold():  # a thread midway through a first lookup: every lock it takes, held
    locks = [lookup._SUITES_LOCK, lookup._FAST_LOCK, *[d.lock for d in lookup._DIRECTORIES.values()]]
    for lock in locks:
        lock.acquire()
    held.set()
    done.wait()
    for lock in locks:
        lock.release()
threading.Thread(target=hold).start()
held.wait()
child = os.fork()
if child == 0:
    signal.alarm(20)
    tunebench.best("row_reduce", (4, 262144), device, records=records)
    os._exit(0)
done.set()
print(os.waitpid(child, 0)[1])
"""


PINNED = """\
import os, sys, tunebench
first = tunebench.lookup("row_reduce", (4, 262144), records=sys.argv[1])
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # a framework pinning itself after its first lookup
pinned = tunebench.lookup("row_reduce", (4, 262144), records=sys.argv[1])
print(first.device, pinned.device)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning to one core needs two to change anything")
def test_a_process_that_pins_itself_after_its_first_lookup_is_answered_for_its_cores_now(deployed, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    done = subprocess.run([sys.executable, "-c", PINNED, str(deployed / "records")], capture_output=True, text=True,
                          timeout=60, check=True, env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"})
    first, pinned = done.stdout.split()
    assert "-1t-" in pinned and first != pinned, done.stdout


def test_a_child_forked_while_a_thread_holds_the_lookups_locks_still_answers(deployed):
    """A framework forking workers (a DataLoader) while a thread made a first lookup: the child
    waited forever on locks that thread held."""
    done = subprocess.run([sys.executable, "-c", FORKED, str(deployed / "records"), DEVICE], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == "0", done.stdout + done.stderr  # not killed by its alarm


FORKED_READING = """\
import os, signal, sys, threading, tunebench
kernel = sys.modules["tunebench.kernel"]
records, device = sys.argv[1], sys.argv[2]
tunebench.tuned("layernorm", records=records)  # bound before any thread starts, as the README asks
reading, done = threading.Event(), threading.Event()
flag_paths = kernel.flag_paths
def slow(*args, **kwargs):  # the thread midway through a first read of softmax's template
    if threading.current_thread() is asking:
        reading.set()
        done.wait()
    return flag_paths(*args, **kwargs)
kernel.flag_paths = slow
asking = threading.Thread(target=tunebench.best, args=("softmax", (64, 4096), device), kwargs={"records": records})
asking.start()
reading.wait()
child = os.fork()
if child == 0:
    signal.alarm(20)
    tunebench.best("layernorm", (300, 8192), device, records=records)
    os._exit(0)
done.set()
asking.join()
print(os.waitpid(child, 0)[1])
"""


def test_a_child_forked_while_a_thread_reads_another_kernels_template_answers(deployed):
    """Kernels bound before the threads, a launch reading a kernel's template while a DataLoader
    forks: on Python 3.11 the child waited forever on the lock functools.cached_property shares
    between every variant, held by a thread it does not have."""
    done = subprocess.run([sys.executable, "-c", FORKED_READING, str(deployed / "records"), DEVICE],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "0", done.stdout + done.stderr  # not killed by its alarm


def test_a_relative_records_path_answers_from_the_working_directory_of_each_call(deployed, tmp_path, monkeypatch):
    """A cached answer was served for the project the path named at the first call."""
    other = ship(tmp_path / "other")
    (other / "records" / f"{DEVICE}.json").unlink()  # nothing tuned there
    for root, source in ((deployed, "tuned"), (other, "heuristic"), (deployed, "tuned")):
        monkeypatch.chdir(root)
        assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records="records").source == source, root
        monkeypatch.setenv("TUNEBENCH_ROOT", ".")
        assert tunebench.lookup("layernorm", (300, 8192), DEVICE).source == source, root
        monkeypatch.delenv("TUNEBENCH_ROOT")


def test_a_kernel_whose_suite_fails_to_import_is_said_whenever_it_is_answered_from_the_records_alone(deployed):
    suite = deployed / "suites" / "test_row_reduce.py"
    suite.write_text("import not_installed_dependency\n" + suite.read_text())
    records = deployed / "records"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).source == "tuned"
    with pytest.warns(lookup_module.SuiteImportWarning, match=r"kernel 'row_reduce' is answered from the records "
                                                              r"alone: .*test_row_reduce.py: ModuleNotFoundError"):
        choice = tunebench.lookup("row_reduce", (16384, 256), DEVICE, records=records)
    assert list(choice.config) == ["vec", "unroll", "chunk", "r_split"]  # as declared, from the records


def test_a_kernel_name_two_suites_declare_is_refused_by_lookups_and_exports_as_by_pytest(deployed, capsys):
    """pytest refuses it; best() served the last suite imported, export wrote it, without a word."""
    shutil.copy(deployed / "suites" / "test_softmax.py", deployed / "suites" / "test_softmax_copy.py")
    records = deployed / "records"
    with pytest.raises(tunebench.KernelError, match=r"test_softmax_copy.py: KernelError: kernel name 'softmax' is "
                                                    r"declared twice, here and in .*test_softmax.py: records keep one "
                                                    r"task per name: rename one"):
        tunebench.best("softmax", (64, 4096), DEVICE, records=records)
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).source == "tuned"  # the others stand
    assert main(["export", "--out", str(deployed / "out"), "--records", str(records), "--device", DEVICE]) != 0
    assert "kernel name 'softmax' is declared twice" in capsys.readouterr().err


def test_a_suite_file_linked_to_another_of_its_folder_is_refused_naming_both_files(deployed):
    """suites/test_alias.py, a link to test_softmax.py beside it: the kernel is declared twice, as
    pytest says, but the message named test_softmax.py twice (the first suite's link target)."""
    (deployed / "suites" / "test_alias.py").symlink_to("test_softmax.py")
    with pytest.raises(tunebench.KernelError, match=r"test_softmax.py: KernelError: kernel name 'softmax' is "
                                                    r"declared twice, here and in \S*/suites/test_alias.py: "):
        tunebench.best("softmax", (64, 4096), DEVICE, records=deployed / "records")


def test_suites_shipped_without_their_templates_are_answered_for_the_recorded_template(deployed):
    shutil.rmtree(deployed / "kernels")
    records = deployed / "records"
    choice = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records)
    assert choice.source == "tuned" and "source 'kernels/layernorm.c' not found" in choice.note
    assert choice.config == tunebench.best("layernorm", (300, 8192), DEVICE, records=ROOT / "records")


def test_suites_shipped_without_their_templates_give_the_config_as_flags_and_say_which_kernel_lacks_one(deployed):
    """``defines()`` of the config a lookup answered raised "source 'kernels/layernorm.c' not found",
    naming no kernel, at every launch; records shipped alone give it. ``flags()`` and ``source()``
    need the template, and said so naming no kernel either."""
    shutil.rmtree(deployed / "kernels")
    layernorm = tunebench.tuned("layernorm", device=DEVICE, records=deployed / "records")
    config = layernorm.config((300, 8192))
    assert layernorm.defines((300, 8192))[:4] == [f"-D{name}={value}" for name, value in config.items()]
    for call in (layernorm.flags, lambda: layernorm.source((300, 8192))):
        with pytest.raises(tunebench.KernelError, match=r"^kernel 'layernorm': .*'kernels/layernorm.c' not found"):
            call()


def test_a_shape_of_the_wrong_rank_and_a_warning_name_the_kernel_and_the_callers_line(deployed):
    records = deployed / "records"
    with pytest.raises(ValueError, match=r"kernel 'layernorm': shape \(300,\)"):
        tunebench.best("layernorm", (300,), DEVICE, records=records)
    handle = tunebench.tuned("layernorm", device=DEVICE, records=records)
    with pytest.warns(tunebench.ShapeOutsideBuckets) as caught:
        handle.config((0, 8192))
    assert caught[0].filename == __file__


def test_a_misspelt_kernel_fails_where_the_framework_binds_it(deployed):
    """tuned("layernorn") bound fine and failed only at the framework's first launch."""
    records = deployed / "records"
    with pytest.raises(LookupError, match=r"kernel 'layernorn': no suite under .* declares it and no records "
                                          r"under .* hold it \(did you mean 'layernorm'\?\)"):
        tunebench.tuned("layernorn", records=records)
    shutil.rmtree(deployed / "suites")  # records alone: the kernels they hold are known
    REGISTRY.clear()
    assert tunebench.tuned("row_reduce", device=DEVICE, records=records).config((4, 262144))
    (records / "manifest.json").write_text('{"hello": 1}')  # a file beside them that is no records
    with pytest.raises(LookupError, match=r"kernel 'row_reduse': .* \(did you mean 'row_reduce'\?\); these files "
                                          r"are no records to read: manifest.json"):
        tunebench.tuned("row_reduse", records=records)
    tunebench.tuned("unheard_of", records=records)  # no near name: it may be in the file that cannot be read
    (records / "cpu-torn-0a1b2c.json").write_text('{"trials": {"1": {"kernel": "row_reduse", ')  # a torn copy
    tunebench.tuned("row_reduse", records=records)  # a near name, but the torn file names it: it may hold it


def test_answers_beyond_the_most_kept_drop_the_oldest_half_not_all(deployed, monkeypatch):
    monkeypatch.setattr(lookup_module, "MAX_ANSWERS", 8)
    monkeypatch.setattr(lookup_module, "_FAST", {})
    records = deployed / "records"
    for rows in range(1, 9):
        tunebench.best("layernorm", (rows, 8192), DEVICE, records=records)
    kept = len(lookup_module._FAST)
    tunebench.best("layernorm", (9, 8192), DEVICE, records=records)
    assert 0 < len(lookup_module._FAST) < kept
    assert any(key[2] == (8, 8192) for key in lookup_module._FAST)  # the newest stay


def test_a_process_that_cannot_fingerprint_its_gpu_names_the_device_it_serves(deployed, monkeypatch):
    """A PyTorch framework's process has no PyCUDA: its default device would be the CPU's."""
    records = deployed / "records"
    data = json.loads((records / f"{DEVICE}.json").read_text())  # another device's records: another fingerprint
    data["device"]["1"]["name"] = "Another EPYC"
    gpu = device_id(data["device"]["1"])
    for doc in data["trials"].values():  # each trial names the device that measured it
        doc["device"] = gpu
    (records / f"{gpu}.json").write_text(json.dumps(data))
    (records / f"{DEVICE}.json").unlink()
    assert tunebench.lookup("layernorm", (300, 8192), records=records).source == "heuristic"
    monkeypatch.setenv("TUNEBENCH_DEVICE", gpu)
    choice = tunebench.lookup("layernorm", (300, 8192), records=records)
    assert choice.device == gpu and choice.source == "tuned"


def test_a_misspelt_device_warns_naming_the_recorded_devices_and_the_one_it_meant(deployed, monkeypatch):
    """A typo in $TUNEBENCH_DEVICE served the heuristic at every launch with a note no framework reads."""
    records = deployed / "records"
    typo = DEVICE[:-1] + ("0" if DEVICE[-1] != "0" else "1")
    monkeypatch.setenv("TUNEBENCH_DEVICE", typo)
    with pytest.warns(tunebench.UnknownDeviceWarning, match=rf"^\$TUNEBENCH_DEVICE={typo}: .* holds no records for it.*"
                                                            rf"did you mean {DEVICE}\?"):
        assert tunebench.lookup("layernorm", (300, 8192), records=records).source == "heuristic"
    monkeypatch.delenv("TUNEBENCH_DEVICE")
    with pytest.warns(tunebench.UnknownDeviceWarning, match=rf"^device={typo}: "):
        tunebench.best("layernorm", (300, 8192), typo, records=records)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the device that is recorded: no word
        assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).source == "tuned"
        monkeypatch.setenv("TUNEBENCH_DEVICE", f" {DEVICE}\n")  # as a shell's $(cat file) or a YAML block leaves it
        assert tunebench.lookup("layernorm", (300, 8192), records=records).source == "tuned"
    with warnings.catch_warnings():  # this machine: untuned, and said so, where it is not the recorded device
        warnings.simplefilter("error", tunebench.UnknownDeviceWarning)
        monkeypatch.setenv("TUNEBENCH_DEVICE", " ")  # blank: unset, not a device named " " to warn of
        assert tunebench.lookup("layernorm", (300, 8192), records=records).device == lookup_module.this_device("cpu")


def test_a_device_named_by_its_records_files_path_is_that_device_in_device_and_tunebench_device_alike(
        deployed, monkeypatch):
    """device= took records/<id>.json for its id; $TUNEBENCH_DEVICE, the same path, warned that
    no records were there and failed: "no records/cpu variant"."""
    monkeypatch.chdir(deployed)
    path = f"records/{DEVICE}.json"
    given = tunebench.lookup("matmul_add", (8, 1024, 1024), path, records="records")
    assert given.device == DEVICE and given.source == "tuned"
    monkeypatch.setenv("TUNEBENCH_DEVICE", path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UnknownDeviceWarning: the device is recorded
        assert tunebench.lookup("matmul_add", (8, 1024, 1024), records="records") == given
        assert tunebench.tuned("matmul_add", records="records").flags() == \
            tunebench.tuned("matmul_add", device=path, records="records").flags()


def test_a_device_named_in_upper_case_is_the_device_of_that_id(deployed, monkeypatch):
    """``TUNEBENCH_DEVICE=CPU-AMD-...`` (a deployment's values written in capitals) raised "kernel
    'layernorm' has no CPU variant", a kernel with a cpu one: ids are lower case."""
    records = deployed / "records"
    given = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records)
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE.upper(), records=records) == given
    monkeypatch.setenv("TUNEBENCH_DEVICE", DEVICE.upper())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UnknownDeviceWarning: the device is recorded
        assert tunebench.lookup("layernorm", (300, 8192), records=records) == given


def test_a_kernel_given_as_neither_a_name_nor_a_kernel_is_a_type_error_naming_it(deployed):
    with pytest.raises(TypeError, match=r"^kernel None: give a kernel's name or its tunebench.Kernel$"):
        tunebench.lookup(None, (300, 8192), DEVICE, records=deployed / "records")


def test_a_lookup_outside_every_bucket_warns_without_touching_the_processs_warning_state(deployed, monkeypatch):
    """warnings.catch_warnings swaps process-wide state: two threads inside it at once left every
    later warning of the process recorded and never shown."""
    monkeypatch.setattr(lookup_module, "warnings", types.SimpleNamespace(warn=warnings.warn))  # warn, nothing else
    with pytest.warns(tunebench.ShapeOutsideBuckets,
                      match=rf"kernel 'layernorm' float32 on {DEVICE}: shape \(0, 8192\) lies outside every bucket"):
        tunebench.best("layernorm", (0, 8192), DEVICE, records=deployed / "records")


BARE = """\
import json, sys, tunebench
answers = [tunebench.lookup(k, s, sys.argv[2], records=sys.argv[1]) for k, s in json.loads(sys.argv[3])]
print(json.dumps([[a.config, a.source, a.bucket, a.note] for a in answers]))
"""


def asked_alone(deployed: Path, cases: list) -> list:
    """Answers in a process that has only the records (no suites beside them, none imported)."""
    alone = deployed / "alone" / "records"
    shutil.copytree(deployed / "records", alone)
    done = subprocess.run([sys.executable, "-c", BARE, str(alone), DEVICE, json.dumps(cases)], cwd=alone,
                          capture_output=True, text=True, timeout=120, check=True)
    return [(a[0], a[1], a[2], a[3] or "") for a in json.loads(done.stdout)]


def test_records_shipped_without_the_suites_answer_as_with_them_on_every_representative_shape(deployed):
    """A deployment that ships only records used to raise wherever the heuristic won a bucket."""
    kernels = lookup_module.load_suites(deployed / "suites")
    cases = [(k.name, list(s)) for k in kernels for b in k.buckets_for("cpu") for s in b.shapes]
    full = [tunebench.lookup(name, shape, DEVICE, records=deployed / "records") for name, shape in cases]
    bare = asked_alone(deployed, cases)
    assert [b[:3] for b in bare] == [(f.config, f.source, f.bucket) for f in full]
    for (name, shape), f, b in zip(cases, full, bare):
        if f.source == "heuristic":
            assert f"the heuristic's config as recorded for {tuple(shape)}" in b[3], (name, shape)
    # the committed records keep the heuristic on row_reduce few_rows; retuned otherwise, pick another
    assert {f.source for f in full} == {"tuned", "heuristic"}


def test_records_alone_answer_a_shape_between_representatives_with_the_nearest_ones_heuristic(deployed):
    full = tunebench.lookup("row_reduce", (4, 262144), DEVICE, records=deployed / "records")
    assert full.source == "heuristic", "the committed records keep the heuristic on few_rows: pick another bucket"
    assert full.reason.startswith("the final round kept it: no finalist leads the heuristic by 5%")  # its record's
    [(config, source, bucket, note)] = asked_alone(deployed, [("row_reduce", [2, 1 << 20])])
    assert (config, source, bucket) == (full.config, "heuristic", "few_rows")
    assert "nearest representative shape (4, 262144)" in note and "apply your own rule for (2, 1048576)" in note


def test_records_alone_asked_for_a_dtype_not_recorded_name_the_dtypes_recorded_not_the_kernel_itself(deployed):
    """It said "no records for it ... (did you mean 'row_reduce'?)", of the very name asked."""
    records, bare = deployed / "records", deployed / "bare"
    bare.mkdir()
    with pytest.raises(LookupError) as caught:
        tunebench.lookup("row_reduce", (4, 262144), DEVICE, records=records, suites=bare, dtype="float16")
    assert str(caught.value) == (f"kernel 'row_reduce': {records / DEVICE}.json records it only in float32: float16 "
                                 f"has no record there, and no declaration of it was found under {bare} to serve its "
                                 f"heuristic")


def test_records_alone_find_a_bucket_by_every_dtypes_tasks_and_say_which_dtypes_hold_it(deployed):
    """softmax float16 tuned on the H200 in two of its buckets, not narrow: a narrow shape, one of
    narrow's representative shapes, was "outside every bucket" and served wide's recorded heuristic.
    The committed records, less softmax narrow float16 and bfloat16 (later GPU sessions tuned them)."""
    device, records, bare = "cuda-nvidia-h200-sm90-132sm-00b1c7", deployed / "h200", deployed / "bare"
    bare.mkdir()  # no suites: the records alone (and no kernel declared in this process, as a framework's own)
    records.mkdir()
    tables = json.loads((ROOT / "records" / f"{device}.json").read_text())
    for name in ("tasks", "trials", "checks"):
        tables[name] = {k: d for k, d in tables[name].items()
                        if (d["kernel"], d["bucket"]) != ("softmax", "narrow") or d["dtype"] == "float32"}
    (records / f"{device}.json").write_text(json.dumps(tables))
    asked = {"records": records, "suites": bare, "dtype": "float16"}
    with pytest.raises(LookupError) as caught:
        tunebench.lookup("softmax", (262144, 512), device, **asked)
    assert str(caught.value) == (f"kernel 'softmax': {records / device}.json records bucket 'narrow' only in float32: "
                                 f"float16 has no record there, and no declaration of it was found under {bare} "
                                 f"to serve its heuristic")
    tuned = tunebench.lookup("softmax", (8, 262144), device, **asked)
    assert (tuned.bucket, tuned.inside) == ("few_rows", True)


def test_a_records_file_read_as_absent_is_not_named_among_other_devices(deployed, monkeypatch):
    """Read in the gap of a checkout that deleted and wrote it again, the device's file, there by
    the time the note was made, was listed as "only other devices' records" of itself."""
    monkeypatch.setattr(lookup_module._Directory, "summary", lambda self, device: None)
    choice = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=deployed / "records")
    assert choice.note.startswith(f"nothing is recorded for this device ({DEVICE})"), choice.note
    assert DEVICE not in choice.note.partition(")")[2], choice.note


def in_memory(name: str, vec: int) -> tunebench.Kernel:
    """A kernel a compiler declares in memory, today's rule its only answer (nothing recorded)."""
    return tunebench.Kernel(
        name, buckets=tunebench.Buckets("N", [tunebench.Bucket("all", N=(1, None), shapes=[(1024,)])]),
        args=lambda shape, dtype, rng: {"x": np.zeros(shape, dtype)}, reference=lambda x: x, outputs=["x"],
        cpu=tunebench.Variant(source=str(ROOT / "kernels" / "row_reduce.c"), entry="row_reduce",
                              heuristic=lambda shape: {"vec": vec}, space=tunebench.Space({"vec": [1, 2, 4, 8]})))


def test_a_kernel_declared_again_in_memory_is_answered_by_its_own_declaration(deployed, monkeypatch):
    """Answers were kept under id(kernel): a new declaration at a freed one's address, or under a
    name declared again, got the old declaration's answer."""
    monkeypatch.chdir(deployed)
    for i in range(60):  # each freed before the next is made: CPython reuses the address
        kernel = in_memory(f"generated{i % 3}", vec=[1, 2, 4, 8][i % 4])
        assert tunebench.best(kernel, (1024,), records="records") == {"vec": [1, 2, 4, 8][i % 4]}, i
        del kernel
        gc.collect()
    in_memory("regenerated", vec=1)
    assert tunebench.best("regenerated", (1024,), records="records") == {"vec": 1}
    in_memory("regenerated", vec=8)
    assert tunebench.best("regenerated", (1024,), records="records") == {"vec": 8}


def test_records_whose_keys_a_tool_sorted_as_text_answer_as_before(deployed):
    """`python -m json.tool --sort-keys` puts document "10" before "2": an older final round
    was read as the latest, and another config served and exported, without a word."""
    records = deployed / "records"
    before = {(k, s): tunebench.best(k, s, DEVICE, records=records) for k, s in CASES}
    path = records / f"{DEVICE}.json"
    path.write_text(json.dumps(json.loads(path.read_text()), sort_keys=True, indent=2))
    assert {(k, s): tunebench.best(k, s, DEVICE, records=records) for k, s in CASES} == before
    assert RecordStore(path).checks() == RecordStore(ROOT / "records" / f"{DEVICE}.json").checks()  # oldest first


def test_another_devices_records_copied_under_this_devices_name_are_refused_naming_both(deployed, monkeypatch):
    """Served as this machine's tuned configs, and reused by its tune, with no note."""
    records = deployed / "records"
    here = device_id({**json.loads((records / f"{DEVICE}.json").read_text())["device"]["1"], "name": "This EPYC"})
    shutil.copy(records / f"{DEVICE}.json", records / f"{here}.json")
    with pytest.raises(tunebench.RecordsError, match=rf"{here}.json: holds the records of {DEVICE} \(its device "
                                                     rf"table\), not of {here}, as its name says"):
        tunebench.best("layernorm", (300, 8192), here, records=records)


def test_records_deployed_by_swapping_a_symlink_are_answered_from_the_new_release(deployed, monkeypatch):
    """Shapes asked before the swap kept the old release's config for the life of the process."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    old, new = deployed / "v1", deployed / "v2"
    shutil.move(deployed / "records", old)
    shutil.copytree(old, new)
    path = new / f"{DEVICE}.json"
    data = json.loads(path.read_text())  # the new release without layernorm's tune: its heuristic serves
    data["checks"] = {i: d for i, d in data["checks"].items() if d["kernel"] != "layernorm"}
    path.write_text(json.dumps(data))
    current = deployed / "current"
    current.symlink_to(old)
    for _ in range(2):  # the second asks once the suites are imported: the answer kept from then on
        assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=current).source == "tuned"
    swap = deployed / "swap"
    swap.symlink_to(new)
    os.replace(swap, current)  # an atomic deploy
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=current).source == "heuristic"
    assert tunebench.lookup("layernorm", (301, 8192), DEVICE, records=current).source == "heuristic"


FORKED_MIDWAY = """\
import json, os, signal, sys, threading, time, tunebench
records, device = sys.argv[1], sys.argv[2]
def ask():
    choice = tunebench.lookup("row_reduce", (4, 100), device, records=records)
    return [choice.source, choice.config, choice.note]
found = []
asking = threading.Thread(target=lambda: found.append(ask()))
asking.start()
time.sleep(0.5)  # the thread is midway through importing the slow suite
read, write = os.pipe()
child = os.fork()
if child == 0:
    signal.alarm(20)  # a child that waits forever on a lock no thread of it holds: killed, and said
    answer = ask()
    os.write(write, json.dumps([*answer[:2], answer[2], sum(p.endswith("/suites") for p in sys.path)]).encode())
    os._exit(0)
os.close(write)
os.waitpid(child, 0)
asking.join()
print(json.dumps([found[0], json.loads(os.read(read, 1 << 16))]))
"""


@pytest.mark.parametrize("own_path, slow", [(False, "test_row_reduce.py"), (True, "test_row_reduce.py"),
                                            (False, "reduction_family.py")])
def test_a_child_forked_while_a_thread_imports_the_suites_answers_with_their_declarations(deployed, own_path, slow):
    """The child took the half-run suite module for the suite: another heuristic's config, a note
    saying nothing declares the kernel, for the child's whole life. A suite that takes its own
    folder off the import path stops neither. Forked midway through a helper the suites import,
    the child waited forever on the helper's import lock, held by a thread it does not have."""
    suite = deployed / "suites" / slow
    takes = "import os, sys\nsys.path.remove(os.path.dirname(os.path.abspath(__file__)))\n" if own_path else ""
    suite.write_text("import time\ntime.sleep(2)\n" + takes + suite.read_text())  # a suite importing a framework
    done = subprocess.run([sys.executable, "-c", FORKED_MIDWAY, str(deployed / "records"), DEVICE],
                          capture_output=True, text=True, timeout=60)
    parent, child = json.loads(done.stdout)
    assert child[:3] == parent, done.stderr  # no note: the declaration's heuristic for (4, 100)
    assert child[3] == 0  # nor the parent's import path entry for the suite, which no thread there takes out


def test_a_child_forked_while_a_suite_imports_a_helper_from_outside_its_folder_answers(deployed):
    """A suite importing the framework's own library (on its import path, not beside the suite):
    forked midway through that import, the child waited forever on the library's import lock,
    held by a thread it does not have."""
    (deployed / "lib").mkdir()
    (deployed / "lib" / "slowlib.py").write_text("import time\ntime.sleep(2)\n")
    suite = deployed / "suites" / "test_row_reduce.py"
    suite.write_text("import slowlib\n" + suite.read_text())
    path = os.pathsep.join(filter(None, (str(deployed / "lib"), os.environ.get("PYTHONPATH"))))
    done = subprocess.run([sys.executable, "-c", FORKED_MIDWAY, str(deployed / "records"), DEVICE],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr  # the child killed by its alarm: nothing to read from it
    parent, child = json.loads(done.stdout)
    assert child[:3] == parent


def test_a_suite_that_skips_itself_declares_nothing_to_lookups_and_exports(deployed, capsys):
    """A GPU-only suite's ``pytest.importorskip`` raised pytest's Skipped, a BaseException, out of
    the first lookup (past a framework's ``except Exception``); the next answered quietly from
    its half-run module; export failed."""
    (deployed / "suites" / "test_gpu_only.py").write_text(
        "import pytest\ncuda = pytest.importorskip('no_such_gpu_module')\nfrom tunebench import Kernel\n")
    records = deployed / "records"
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                choice = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records)
            except BaseException as e:  # noqa: BLE001 - a Skipped would skip this test
                pytest.fail(f"the lookup raised {type(e).__name__}: {e}")
            assert choice.source == "tuned"
    assert main(["export", "--out", str(deployed / "out"), "--records", str(records), "--device", DEVICE]) == 0
    assert "layernorm" in (deployed / "out" / "tunebench_configs.h").read_text()


BOUND = """\
import ctypes, os, sys
from tunebench.lookup import this_device
if sys.argv[2] == "before":
    this_device("cpu")
ctypes.CDLL(sys.argv[1]).team()  # libgomp pins this thread to its place now
pinned = len(os.sched_getaffinity(0))
read, write = os.pipe()
if os.fork() == 0:  # a worker forked now: its one thread is the pinned one
    os.write(write, this_device("cpu").encode())
    os._exit(0)
os.wait()
print(pinned, this_device("cpu"), os.read(read, 256).decode())
"""
NO_OPENMP_ENV = ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: binding cannot narrow a thread's cores")
@pytest.mark.parametrize("first", ["before", "after"])
@pytest.mark.parametrize("binding", [{"OMP_PROC_BIND": "true"}, {"GOMP_CPU_AFFINITY": "{first}-{last}"}])
def test_this_device_stays_the_same_after_openmp_binds_the_calling_thread(tmp_path, binding, first):
    """With OpenMP's binding set, the first parallel region pins the calling thread to one core:
    the device id read it as a one-thread machine, and every later lookup served the heuristic,
    in the process and in a worker forked from it, whether it first looked up before or after."""
    (tmp_path / "team.c").write_text("void team(void) {\n#pragma omp parallel\n    { __asm__ volatile(\"\"); }\n}\n")
    subprocess.run(["gcc", "-fopenmp", "-shared", "-fPIC", "-o", str(tmp_path / "team.so"), str(tmp_path / "team.c")],
                   check=True)
    free = {k: v for k, v in os.environ.items() if k not in NO_OPENMP_ENV}
    unbound = subprocess.run([sys.executable, "-c", "from tunebench.lookup import this_device; print(this_device('cpu'))"],
                             env=free, capture_output=True, text=True, check=True).stdout.strip()
    cpus = os.sched_getaffinity(0)
    binding = {k: v.format(first=min(cpus), last=max(cpus)) for k, v in binding.items()}  # this machine's cores
    out = subprocess.run([sys.executable, "-c", BOUND, str(tmp_path / "team.so"), first], env={**free, **binding},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", unbound, unbound], out  # pinned, as the premise says, and the same device all the same


@pytest.mark.parametrize("env, binds", [({"OMP_PROC_BIND": "close"}, True), ({"OMP_PLACES": "cores"}, True),
                                        ({"OMP_PLACES": "cores", "OMP_PROC_BIND": "false"}, False),
                                        ({"KMP_AFFINITY": "verbose,none"}, False), ({}, False)])
def test_openmp_binds_as_its_runtime_reads_the_environment(monkeypatch, env, binds):
    from tunebench.backends.cpuinfo import _binds

    for name in NO_OPENMP_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _binds() is binds


def test_a_wrong_dtype_names_the_kernel_and_ml_dtypes_names_need_no_earlier_import(deployed):
    """An array given as the dtype failed as an unhashable type, naming nothing; ml_dtypes' other
    names (float8_e4m3fnuz) were unknown until something had imported ml_dtypes."""
    records = deployed / "records"
    with pytest.raises(TypeError, match=r"kernel 'layernorm': dtype is a ndarray: give a dtype's name"):
        tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records, dtype=np.zeros(2))
    with pytest.raises(ValueError, match=r"kernel 'layernorm': dtype 'fp32' is not a numpy dtype"):
        tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records, dtype="fp32")
    # best(k, x.shape, x.dtype): the dtype in the device's place raised a bare AttributeError ('strip')
    with pytest.raises(TypeError, match=r"kernel 'layernorm': device is dtype\('float32'\), not a device id: a dtype "
                                        r"is given as dtype="):
        tunebench.best("layernorm", (300, 8192), np.dtype("float32"), records=records)
    assert tunebench.lookup("layernorm", (300, 8192), records / f"{DEVICE}.json", records=records).device == DEVICE
    code = ("import sys, tunebench\nc = tunebench.lookup('layernorm', (300, 8192), sys.argv[2], records=sys.argv[1], "
            "dtype='float8_e4m3fnuz')\nprint(c.dtype, c.source)")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(records), DEVICE], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["float8_e4m3fnuz", "heuristic"], done.stderr


def test_a_byte_swapped_dtype_is_refused_naming_the_kernel_not_answered_as_the_native_one(deployed):
    """A framework's buffer read from a big-endian file (np.dtype('>f4')) was answered as float32,
    tuned, and defines() gave -DTB_DTYPE=float: the kernel read its bytes swapped, computing wrong
    values without a word."""
    records = deployed / "records"
    swapped = np.dtype("float32").newbyteorder("S")
    for ask in (lambda: tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records, dtype=swapped),
                lambda: tunebench.tuned("layernorm", device=DEVICE, records=records).defines((300, 8192), swapped)):
        with pytest.raises(ValueError, match=r"kernel 'layernorm': dtype float32 of byte order '[<>]' is not this "
                                             r"machine's.*x\.astype\(x\.dtype\.newbyteorder\('='\)\)"):
            ask()
    native = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records, dtype=np.dtype("=f4"))
    assert native.dtype == "float32" and native.source == "tuned"


def test_answers_for_many_shapes_of_a_bucket_share_its_ranking_and_each_caller_gets_its_own(deployed):
    """A framework with dynamic shapes caches an answer per shape: each kept its own copy of the
    bucket's ranked configs, 3.3 KB per shape (224 MB at the cache's bound)."""
    records = deployed / "records"
    first, second = (tunebench.lookup("layernorm", (300 + i, 8192), DEVICE, records=records) for i in range(2))
    assert first.ranked and first.ranked == second.ranked
    cached = [c.ranked for memo, (_, _, c, *_) in lookup_module._FAST.items()
              if str(records) in memo and c.kernel == "layernorm" and c.bucket == first.bucket]  # this test's alone
    assert len(cached) >= 2 and all(r is cached[0] for r in cached)
    first.ranked[0].clear()  # the caller's own: the next answer is whole
    assert tunebench.lookup("layernorm", (302, 8192), DEVICE, records=records).ranked == second.ranked


def test_new_shapes_of_a_bucket_share_its_part_of_the_answer_until_the_records_change(deployed, settled, monkeypatch):
    """Each shape not asked before ranked its bucket's records afresh (560-730 µs a shape on a
    2-core VM): a bucket's part is made once per records read, and goes with the summary it was
    made from, which a long-lived process no longer keeps once the records changed."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    records, made = deployed / "records", []
    ranking = lookup_module._ranking
    monkeypatch.setattr(lookup_module, "_ranking", lambda *args: made.append(args[10].name) or ranking(*args))
    first = [tunebench.lookup("layernorm", (300 + i, 8192), DEVICE, records=records) for i in range(20)]
    assert made == [first[0].bucket] and {c.source for c in first} == {"tuned"}
    assert [c.shape for c in first] == [(300 + i, 8192) for i in range(20)] and first[0].config == first[-1].config
    old = weakref.ref(lookup_module._directory(records).summary(DEVICE))
    path = records / f"{DEVICE}.json"
    path.write_text(path.read_text() + "\n")
    assert tunebench.lookup("layernorm", (400, 8192), DEVICE, records=records).config == first[0].config
    assert len(made) == 2
    gc.collect()
    assert old() is None


def test_an_archive_left_where_a_devices_records_file_is_gone_is_named_for_every_shape_asked_after(
        deployed, monkeypatch):
    """An archive is no records file, so its coming did not change the folder's records: the
    bucket's part of answers kept from before it left the note without it for new shapes."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    records, device = deployed / "records", "cpu-other-1t-000000"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "is left from" not in tunebench.lookup("layernorm", (300, 8192), device, records=records).note
        (records / f"{device}.archive.jsonl").write_text("")
        assert "is left from" in tunebench.lookup("layernorm", (301, 8192), device, records=records).note


def test_a_callers_changes_to_an_answers_warnings_are_its_own(deployed):
    """``lookup().warnings`` was the cached answer's list: a framework clearing it once logged
    silenced the shape's ShapeOutsideBuckets for the process, and one adding to it had a shape
    inside its bucket warned of as outside every one at each launch."""
    records = deployed / "records"
    for _ in range(2):  # the second from the answers kept
        with pytest.warns(tunebench.ShapeOutsideBuckets):
            inside, outside = [tunebench.lookup("layernorm", shape, DEVICE, records=records) for shape in
                               ((300, 8192), (0, 8192))]
    assert not inside.warnings and outside.warnings
    inside.warnings.append("the framework's own")
    outside.warnings.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).warnings
    with pytest.warns(tunebench.ShapeOutsideBuckets):
        assert tunebench.lookup("layernorm", (0, 8192), DEVICE, records=records).warnings


def test_a_shared_ranking_keeps_each_params_type():
    """True, 1 and 1.0 are one key to a cache: a kernel's bool param was served another's int."""
    as_bool = lookup_module._ranked_configs(((("use_simd", bool, True), ("vec", int, 4)),))
    as_int = lookup_module._ranked_configs(((("use_simd", int, 1), ("vec", int, 4)),))
    assert [type(c["use_simd"]) for c in (*as_bool, *as_int)] == [bool, int]



def test_two_projects_declaring_one_name_are_each_answered_by_their_own_declaration(deployed):
    """A framework serving two projects: the one asked second was answered with the declaration
    (template, heuristic) of the one declared last, whichever records= and suites= named."""
    other = ship(deployed / "other")
    template = other / "kernels" / "softmax.c"
    template.write_text(template.read_text() + "/* the other project's */\n")
    ours, theirs = (tunebench.Tuned("softmax", records=p / "records") for p in (deployed, other))
    for _ in range(2):  # each declared last in turn
        assert "the other project's" in theirs.source((64, 4096))
        assert "the other project's" not in ours.source((64, 4096))
        assert "the other project's" in tunebench.Tuned("softmax", suites=other / "suites").source((64, 4096))
        # a name alone answers the declaration registered first: asking another project changed it
        assert "the other project's" not in tunebench.Tuned("softmax").source((64, 4096))


def test_the_project_named_by_tunebench_root_is_answered_by_its_own_declaration(deployed, monkeypatch):
    """A framework that imported one project's suites, with $TUNEBENCH_ROOT naming another: the
    name alone was answered from the other's records with the first's template and heuristic."""
    other = ship(deployed / "other")
    template = other / "kernels" / "softmax.c"
    template.write_text(template.read_text() + "/* the other project's */\n")
    lookup_module.load_suites(deployed / "suites")  # the framework imported this project's suites first
    monkeypatch.setenv("TUNEBENCH_ROOT", str(other))
    named = tunebench.lookup("softmax", (64, 4096), DEVICE, suites=other / "suites")
    assert "an earlier softmax.c" in named.note  # the records were tuned before the other's template changed
    assert tunebench.lookup("softmax", (64, 4096), DEVICE).note == named.note
    assert "the other project's" in tunebench.Tuned("softmax", device=DEVICE).source((64, 4096))


PACKAGED_SUITE = """\
import numpy as np
import tunebench
from .helpers import VEC

{name} = tunebench.Kernel(
    "{name}", buckets=tunebench.Buckets("N", [tunebench.Bucket("all", N=(1, None), shapes=[(1024,)])]),
    args=lambda shape, dtype, rng: {{"x": np.zeros(shape, dtype)}}, reference=lambda x: x, outputs=["x"],
    cpu=tunebench.Variant(source="{template}", entry="row_reduce", heuristic=lambda shape: {{"vec": VEC}},
                          space=tunebench.Space({{"vec": [1, 2, 4, 8]}})))
"""


def test_suites_in_packages_import_their_own_helpers_by_relative_import_as_under_pytest(deployed):
    """``from .helpers import ...`` in suites/<package>/: pytest tuned them, and every lookup,
    export and compile-check failed to import them (no parent package)."""
    tmp_path = deployed / "packaged"
    suites = tmp_path / "suites"
    for package, vec in (("norm", 2), ("act", 4)):  # helpers of one name, each its own
        (suites / package).mkdir(parents=True)
        (suites / package / "__init__.py").write_text("")
        (suites / package / "helpers.py").write_text(f"VEC = {vec}\n")
        (suites / package / f"test_{package}.py").write_text(PACKAGED_SUITE.format(
            name=f"packaged_{package}", template=ROOT / "kernels" / "row_reduce.c"))
    (suites / "__init__.py").write_text("")
    (tmp_path / "records").mkdir()
    failed = []
    kernels = lookup_module.load_suites(suites, failed)
    assert failed == [] and sorted(k.name for k in kernels) == ["packaged_act", "packaged_norm"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tunebench.best("packaged_act", (1024,), records=tmp_path / "records") == {"vec": 4}
        assert tunebench.best("packaged_norm", (1024,), records=tmp_path / "records") == {"vec": 2}


OPS_REGISTRY = """\
OPS = set()
def register(name):  # as torch.library does: an op registered twice is an error
    if name in OPS:
        raise ValueError(f"op {name!r} already registered")
    OPS.add(name)
"""


def packaged_project(root: Path, vec: int) -> Path:
    """A framework's package ``fwpkg`` whose ``__init__`` registers an op and whose suite
    ``fwpkg/suites/test_pk.py`` declares nothing itself: it imports the framework's declaration."""
    package = root / "fwpkg"
    (package / "suites").mkdir(parents=True)
    (root / "records").mkdir()
    (root / "fwops.py").write_text(OPS_REGISTRY)
    (package / "__init__.py").write_text(f"import fwops\nfwops.register('fwpkg::norm{vec}')\n")
    (package / "decl.py").write_text(PACKAGED_SUITE.replace("from .helpers import VEC", f"VEC = {vec}").format(
        name="pk", template=ROOT / "kernels" / "row_reduce.c"))
    (package / "suites" / "__init__.py").write_text("")
    (package / "suites" / "test_pk.py").write_text("from ..decl import pk\n")
    return package


@pytest.fixture
def forgotten():
    """The framework's modules a test imports, out of ``sys.modules`` again after it."""
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in ("fwpkg", "fwops") or n.startswith("tunebench_suite_")]:
        del sys.modules[name]


def test_a_suite_inside_the_frameworks_package_is_imported_by_its_dotted_name_running_each_init_once(
        deployed, monkeypatch, forgotten):
    """pytest imports fwpkg/suites/test_pk.py as fwpkg.suites.test_pk; lookups ran the package's
    ``__init__`` again under another name, where it registered its op twice, and the kernel was
    answered without its declaration."""
    package = packaged_project(deployed / "framework", vec=2)
    monkeypatch.syspath_prepend(str(package.parent))
    framework = importlib.import_module("fwpkg.decl")  # the framework imported its package first
    failed = []
    assert lookup_module.load_suites(package / "suites", failed) == [framework.pk] and failed == []
    assert sys.modules["fwpkg.suites.test_pk"].pk is framework.pk
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tunebench.best("pk", (1024,), records=package.parent / "records", suites=package / "suites") == {
            "vec": 2}


def test_two_projects_with_a_package_of_one_name_each_import_their_own_suite(deployed, forgotten):
    """The second project's ``fwpkg.suites.test_pk`` is not the first's, already imported."""
    first, second = (packaged_project(deployed / release, vec) for release, vec in (("r1", 2), ("r2", 8)))
    kernels = [lookup_module.load_suites(p / "suites")[0] for p in (first, second)]
    assert [k.variant("cpu").baseline((1024,), "float32") for k in kernels] == [{"vec": 2}, {"vec": 8}]
    assert [Path(k.declared_in).parent for k in kernels] == [first.resolve(), second.resolve()]


def test_a_projects_declaration_is_read_once_per_refresh_not_per_launch(deployed, monkeypatch):
    """``Tuned.defines()`` and ``source()`` ask for the project's declaration per launch: its
    folders are resolved again (a stat per path component) only once :data:`REFRESH_S` passed."""
    clock = [100.0]
    monkeypatch.setattr(lookup_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    records = deployed / "records"
    tunebench.lookup("softmax", (64, 4096), DEVICE, records=records)  # the suites imported
    decl = lookup_module.declaration("softmax", records, None)  # the project's declaration read
    resolved, realpath = [], os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda path, **kw: resolved.append(path) or realpath(path, **kw))
    for _ in range(100):
        assert lookup_module.declaration("softmax", records, None) is decl
    assert resolved == []
    clock[0] += lookup_module.REFRESH_S
    assert lookup_module.declaration("softmax", records, None) is decl
    assert resolved == [records]  # read again, once


def test_a_release_swapped_in_and_rolled_back_by_a_symlink_is_answered_by_its_own_declaration(deployed, monkeypatch):
    """The project's declaration was kept by the text of records=: after a rollback, the other
    release's template and heuristic were served."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    for release in ("r1", "r2"):
        ship(deployed / release)
    template = deployed / "r2" / "kernels" / "softmax.c"
    template.write_text(template.read_text() + "/* release 2 */\n")
    current = deployed / "current"
    current.symlink_to(deployed / "r1")
    tuned = tunebench.Tuned("softmax", records=current / "records")
    for release in ("r1", "r2", "r1"):
        swap = deployed / "swap"
        swap.symlink_to(deployed / release)
        os.replace(swap, current)  # an atomic deploy
        assert ("release 2" in tuned.source((64, 4096))) == (release == "r2"), release


FORKED_BESIDE = """\
import os, sys, threading, time, warnings
warnings.simplefilter("ignore")
root = sys.argv[1]
sys.path.insert(0, root)
import mypkg, tunebench
asking = threading.Thread(target=lambda: tunebench.lookup("packaged_norm", (1024,), records=root + "/records",
                                                          suites=root + "/mypkg/suites"))
asking.start()
time.sleep(0.5)  # the thread is midway through importing the slow suite
import mypkg.layers  # the framework's own module, imported whole meanwhile
layer = mypkg.layers.Layer()
read, write = os.pipe()
child = os.fork()
if child == 0:
    import mypkg.layers as again
    os.write(write, str(isinstance(layer, again.Layer)).encode())
    os._exit(0)
os.close(write)
os.waitpid(child, 0)
asking.join()
print(os.read(read, 64).decode())
"""


def test_a_child_forked_while_a_suite_imports_keeps_the_framework_modules_imported_whole_meanwhile(tmp_path):
    """Every module first imported under the suites' package while a suite imported was dropped in
    the child: the framework's own module ran again there, and its classes were other classes."""
    package = tmp_path / "mypkg"
    (package / "suites").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text("class Layer:\n    pass\n")
    (package / "suites" / "__init__.py").write_text("")
    (package / "suites" / "test_k.py").write_text("import time\ntime.sleep(2)\n" + PACKAGED_SUITE.replace(
        "from .helpers import VEC", "VEC = 2").format(name="packaged_norm", template=ROOT / "kernels" / "row_reduce.c"))
    (tmp_path / "records").mkdir()
    done = subprocess.run([sys.executable, "-c", FORKED_BESIDE, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "True", done.stderr


NO_IMPORT_AFTER_BIND = """\
import json, sys, warnings, tunebench
records, device = sys.argv[1], sys.argv[2]
warnings.simplefilter("ignore")
handles = [tunebench.tuned(k, records=records, device=device) for k in ("layernorm", "row_reduce", "softmax")]
before = set(sys.modules)
notes = [tunebench.lookup(h.kernel, shape, device, records=records).note
         for h in handles for shape in [(300, 8192), (4, 262144), (16384, 256), (64, 4096), (3, 5)]]
print(json.dumps([sorted(set(sys.modules) - before), notes]))
"""


def test_no_lookup_after_a_kernel_is_bound_imports_a_module_even_to_name_the_tune_command(deployed):
    """A lookup's note names the tune command, which reads the project's pyproject.toml with
    pytest's reader: imported there at the first such note, in a worker forked while a thread of
    the parent ran that import, the worker waited forever on the import's lock."""
    (deployed / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    with open(deployed / "kernels" / "layernorm.c", "a") as f:
        f.write("/* a comment added after the tune */\n")  # the note says which command tunes it again
    done = subprocess.run([sys.executable, "-c", NO_IMPORT_AFTER_BIND, str(deployed / "records"), DEVICE],
                          capture_output=True, text=True, timeout=120, check=True)
    imported, notes = json.loads(done.stdout)
    assert any("--tune" in (n or "") for n in notes)  # the message path was taken
    assert imported == []


def test_a_template_edited_while_a_process_runs_is_read_again_with_the_records(deployed, monkeypatch):
    """A long-lived process kept the text it first read: after the template was edited (and
    tuned again elsewhere), it paired that text with the new records, and its note called the
    records' template an earlier one. The template is read again, as the records are, once its
    file changed; the answers made for the old text are not served for the new."""
    monkeypatch.setattr(importlib.import_module("tunebench.kernel"), "REREAD_S", 0.0, raising=False)
    template = deployed / "kernels" / "layernorm.c"
    shipped = template.read_text()
    ln = tunebench.tuned("layernorm", records=deployed / "records", device=DEVICE)
    assert ln.source((300, 8192)).endswith(shipped.splitlines()[-1] + "\n")
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=deployed / "records").note is None
    template.write_text(shipped + "/* edited */\n")
    assert "/* edited */" in ln.source((300, 8192))
    edited = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=deployed / "records")
    assert "tuned with an earlier layernorm.c" in edited.note
    template.write_text(shipped)  # and back: the records' template again
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=deployed / "records").note is None
    assert "/* edited */" not in ln.source((300, 8192))


def test_records_merged_with_a_later_round_of_an_older_template_serve_and_gate_todays_round(deployed, monkeypatch):
    """Records merged from two branches hold a round of today's template and, later in the file,
    one of the older template the other branch tuned: the last round was read, of another
    source, so best() served the heuristic and the gate held no pick of today's template."""
    from tunebench.gate import recorded_best
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    records = deployed / "records"
    shape = (300, 8192)
    today = tunebench.lookup("layernorm", shape, DEVICE, records=records)
    assert today.source == "tuned"
    store = RecordStore(records / f"{DEVICE}.json")
    ours = [c for c in store.checks(kernel="layernorm", kind="tune", bucket=today.bucket)][-1]
    theirs = {**ours, "source_hash": "0123456789abcdef", "setup_hash": "fedcba9876543210",
              "timestamp": "2026-11-24T00:00:00+00:00",
              "shapes": [{**e, "best": {**e["best"], "vec": 1}} for e in ours["shapes"]]}
    store.add_check(theirs)
    merged = tunebench.lookup("layernorm", (301, 8192), DEVICE, records=records)  # a shape not answered yet
    assert (merged.source, merged.config) == ("tuned", today.config)
    kernel = REGISTRY["layernorm"]
    bucket = next(b for b in kernel.buckets_for("cpu") if b.name == today.bucket)
    picks, source = recorded_best(RecordStore(records / f"{DEVICE}.json"), kernel, "cpu", "float32", bucket)
    assert source == ours["source_hash"] and picks == {tuple(e["shape"]): e["best"] for e in ours["shapes"]}


def test_the_heuristic_served_for_another_device_or_an_undeclared_dtype_is_said_once_per_kernel(deployed, monkeypatch):
    """best() and Tuned.config() served the heuristic without a word where this machine's id
    (here: another thread count) has no records but others are recorded, or where the dtype is
    not declared: only lookup().note said it. A warning per kernel and cause, not per launch."""
    monkeypatch.setattr(lookup_module, "_SAID", {}, raising=False)
    monkeypatch.delenv("TUNEBENCH_DEVICE", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    records = deployed / "records"
    ln = tunebench.tuned("layernorm", records=records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in (300, 301, 302, 300):
            assert ln.config((rows, 8192)) == tunebench.lookup("layernorm", (rows, 8192), records=records).config
        tunebench.best("softmax", (64, 4096), records=records)
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        for rows in (300, 303):
            tunebench.best("layernorm", (rows, 8192), DEVICE, records=records, dtype="float64")
    said = [(w.category.__name__, str(w.message).split(":")[0]) for w in caught]
    assert said == [("UntunedWarning", "kernel 'layernorm'"), ("UntunedWarning", "kernel 'softmax'"),
                    ("UntunedWarning", "kernel 'layernorm'")], [str(w.message) for w in caught]
    assert "-7t-" in str(caught[0].message) and "float64" in str(caught[2].message)
    assert all(w.filename == __file__ for w in caught)


def test_a_legacy_records_file_named_as_the_device_is_served_with_its_caveat_once_per_kernel(deployed, monkeypatch):
    """A CPU's records of before tunebench fingerprinted family, model and ISA, asked for by
    name: best() served their configs without a word that the machine they suit is not known."""
    monkeypatch.setattr(lookup_module, "_SAID", {}, raising=False)
    legacy = "cpu-amd-epyc-2t-b42c66"
    records = deployed / "records"
    shutil.copy(ROOT / "records" / f"{legacy}.json", records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        choices = [tunebench.lookup("layernorm", (rows, 8192), legacy, records=records) for rows in (300, 301)]
        assert tunebench.best("softmax", (4096, 512), legacy, records=records) == tunebench.lookup(
            "softmax", (4096, 512), legacy, records=records).config
        known = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records)
    assert all(c.source == "tuned" and f"{legacy} is a legacy records file: AMD EPYC, 2 threads, microarchitecture "
               f"unknown" in c.note for c in choices), [c.note for c in choices]
    said = [(w.category.__name__, str(w.message).split(":")[0]) for w in caught]
    assert said == [("LegacyRecordsWarning", "kernel 'layernorm'"), ("LegacyRecordsWarning", "kernel 'softmax'")]
    assert "may not suit this one" in str(caught[0].message) and all(w.filename == __file__ for w in caught)
    assert known.source == "tuned" and "legacy" not in (known.note or "")


def test_shapes_outside_every_bucket_launched_are_warned_once_per_bucket_naming_the_first(deployed):
    """A launch through apply() was warned "a shape outside every bucket is served by the nearest,
    'few_rows' (lookup().warnings names the shape)", naming no shape: a framework holds no lookup()
    answer. Each shape's own text would be said for each by Python's filters, which say a warning
    once per line and text (3001 entries in the caller's registry for 3000 shapes): the warning
    names the first shape of its bucket, and Choice.warnings each shape."""
    records = deployed / "records"
    layernorm = tunebench.tuned("layernorm", device=DEVICE, records=records)
    launch = layernorm.apply(shape=lambda x: x.shape, dtype=lambda x: x.dtype)(lambda x, **config: config)
    shapes = [shape for i in range(40) for shape in ((0, 8192 + i), (4096 + i, 0))]  # nearest few_rows, narrow
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for shape in shapes:
            launch(np.empty(shape, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answers = [tunebench.lookup("layernorm", s, DEVICE, dtype="float32", records=records) for s in shapes]
    assert all(a.warnings == [f"shape {a.shape} lies outside every bucket; using the nearest, Bucket({a.bucket!r}, "
                              f"{'S=1..15, R=1..' if a.bucket == 'few_rows' else 'S=16.., R=1..2048'})"]
               for a in answers), [a.warnings for a in answers[:2]]
    assert [str(w.message) for w in caught] == [
        f"kernel 'layernorm' float32 on {DEVICE}: {a.warnings[0]} (the first shape so served in this process: this "
        f"warning names no other, lookup().warnings names each)" for a in answers[:2]]
    assert all(w.filename == __file__ for w in caught)


def outside_warnings(caught: list) -> list[str]:
    """What the ShapeOutsideBuckets warnings caught say, in order."""
    return [str(w.message).split(" (the first shape")[0] for w in caught
            if issubclass(w.category, tunebench.ShapeOutsideBuckets)]


def test_a_shape_outside_every_bucket_on_two_devices_is_warned_with_each_ones_own_shape_and_bucket(deployed):
    """Buckets are the target's: the first shape was kept per kernel, dtype and bucket name, so a
    process serving a kernel on its CPU and its GPU warned a GPU launch of the CPU's first shape
    and the CPU's ranges, a shape the GPU never served."""
    suite = deployed / "suites" / "test_row_reduce.py"
    cpu, cuda = suite.read_text().split("cuda=cuda_variant(")
    cuda = cuda.replace("S=(1, 7)", "S=(1, 3)").replace("(4, 1048576)", "(2, 1048576)").replace("S=(8, None)", "S=(4, None)")
    suite.write_text(f"{cpu}cuda=cuda_variant({cuda}")  # the GPU's few_rows narrower than the CPU's
    gpu = "cuda-nvidia-h200-sm90-132sm-00b1c7"
    shutil.copy(ROOT / "records" / f"{gpu}.json", deployed / "records")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for device, shape in ((DEVICE, (5, 0)), (gpu, (2, 0))):
            tunebench.best("row_reduce", shape, device, records=deployed / "records", suites=deployed / "suites")
    assert outside_warnings(caught) == [
        f"kernel 'row_reduce' float32 on {DEVICE}: shape (5, 0) lies outside every bucket; using the nearest, "
        f"Bucket('few_rows', S=1..7, R=1..)",
        f"kernel 'row_reduce' float32 on {gpu}: shape (2, 0) lies outside every bucket; using the nearest, "
        f"Bucket('few_rows', S=1..3, R=1..)"]


def test_a_shape_outside_every_bucket_after_the_records_are_read_again_with_other_ranges_names_the_new_ones(
        deployed, monkeypatch):
    """Without a declaration the buckets are the records': read again with other ranges while a
    framework runs, its warning kept quoting the first shape and the ranges of the records before."""
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    records, suites = deployed / "records", deployed / "no suites"
    suites.mkdir()
    path = records / f"{DEVICE}.json"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tunebench.best("row_reduce", (5, 0), DEVICE, records=records, suites=suites)
        data = json.loads(path.read_text())  # row_reduce tuned since with few_rows S=1..3, the others from S=4
        for task in data["tasks"].values():
            if task["kernel"] == "row_reduce":
                few = task["bucket"] == "few_rows"
                task["range"]["ranges"]["S"] = [1, 3] if few else [4, None]
                task["range"]["shapes"] = [[2, 262144]] if few else task["range"]["shapes"]
        path.write_text(json.dumps(data))
        tunebench.best("row_reduce", (2, 0), DEVICE, records=records, suites=suites)
    assert outside_warnings(caught)[-1] == (f"kernel 'row_reduce' float32 on {DEVICE}: shape (2, 0) lies outside every "
                                            f"bucket; using the nearest, Bucket('few_rows', S=1..3, R=1..)")


def test_a_launch_while_the_records_are_read_again_is_answered_from_the_old_ones_without_waiting(deployed,
                                                                                                   monkeypatch):
    """Another process tuning into the folder changes it at each trial: the summary was dropped,
    and the next launch read the records again while every launch thread waited (up to 1.3 s, once
    a second). A thread of its own reads them now; launches are answered as before until it is
    done, for at most REFRESH_S more."""
    clock = [100.0]
    monkeypatch.setattr(lookup_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    records = deployed / "records"
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).source == "tuned"
    build, reading, release = lookup_module.Summary.of, threading.Event(), threading.Event()

    def slow_build(store):
        reading.set()
        release.wait(10)
        return build(store)

    monkeypatch.setattr(lookup_module.Summary, "of", slow_build)
    path = records / f"{DEVICE}.json"
    data = json.loads(path.read_text())  # the records without layernorm's tune: its heuristic serves
    for table in ("trials", "checks"):
        data[table] = {i: d for i, d in data[table].items() if d["kernel"] != "layernorm"}
    path.write_text(json.dumps(data))
    clock[0] += lookup_module.REFRESH_S
    meanwhile = []
    launch = threading.Thread(target=lambda: meanwhile.append(tunebench.lookup("layernorm", (300, 8192), DEVICE,
                                                                               records=records)))
    launch.start()
    assert reading.wait(10)
    launch.join(5)
    done = not launch.is_alive()
    release.set()
    launch.join(10)
    assert done and meanwhile[0].source == "tuned"  # the answer as it was, while the records are read
    clock[0] += lookup_module.REFRESH_S  # the next check waits for the read, and the new records answer
    assert tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records).source == "heuristic"


@pytest.mark.parametrize("shape, error, says", [
    (b"1", TypeError, "shape b'1' is a bytes"),  # served as the shape (49,)
    ("1024", TypeError, "shape '1024' is a str"),  # refused as the dims '1', '0', '2', '4'
    (bytearray(b"12"), TypeError, "shape bytearray(b'12') is a bytearray"),
    ((64, 10**400), ValueError, "a dim beyond 2**63 - 1"),  # a bare OverflowError of a float
    ((2**63, 4096), ValueError, "a dim beyond 2**63 - 1"),
    # an array of one float has __index__, and refused it in numpy's words, naming no kernel
    ((np.array(64.0), 4096), TypeError, "array(64.) is no dim: give a sequence of ints"),
    ((64, np.array([4096.5])), TypeError, "is no dim: give a sequence of ints"),
])
def test_text_and_dims_beyond_64_bits_are_no_shape_and_the_error_names_kernel_and_shape(deployed, shape, error,
                                                                                        says):
    with pytest.raises(error) as caught:
        tunebench.best("softmax", shape, DEVICE, records=deployed / "records")
    assert str(caught.value).startswith(f"kernel 'softmax': shape {shape!r}") and says in str(caught.value)
    assert tunebench.best("softmax", (2**63 - 1, 4096), DEVICE, records=deployed / "records")  # the most it takes


@pytest.mark.parametrize("given, says", [
    (np.zeros((64, 4096), np.float32), "shape is a ndarray of dtype float32 and shape (64, 4096), not a shape: give "
                                       "x.shape for its shape"),
    (np.zeros(4096, np.float32), "shape is a ndarray of dtype float32 and shape (4096,), not a shape"),
    # served as the dims it holds, (64, 4096): an index array given by mistake as well
    (np.array([64, 4096], np.int64), "shape is a ndarray of dtype int64 and shape (2,), not a shape: give x.shape "
                                     "for its shape, or tuple(x.tolist()) for the dims it holds"),
    (np.array(4096, np.int64), "shape is a ndarray of dtype int64 and shape (), not a shape: give x.shape for its "
                               "shape, or int(x) for the dim it holds"),
])
def test_a_tensor_given_for_its_shape_is_refused_in_a_line_not_with_every_value_of_it(deployed, given, says):
    """``best(k, x)`` for ``best(k, x.shape)``: the error held the repr of every row of x (2.6 KB
    for a 64 x 1024 tensor, 12 KB for a vector of 1024 floats)."""
    with pytest.raises(TypeError) as caught:
        tunebench.best("softmax", given, DEVICE, records=deployed / "records")
    assert str(caught.value).startswith(f"kernel 'softmax': {says}") and len(str(caught.value)) < 200


TENSOR_SHAPES = """\
import json, sys, numpy as np, torch, tunebench
records, device = sys.argv[1], sys.argv[2]
layernorm = tunebench.tuned("layernorm", device=device, records=records)
launch = layernorm.apply(shape=lambda x: x)(lambda x, **config: config)  # x returned for x.shape
entries = {"best": lambda s: tunebench.best("layernorm", s, device, records=records),
           "lookup": lambda s: tunebench.lookup("layernorm", s, device, records=records).config,
           "config": layernorm.config, "defines": layernorm.defines, "source": layernorm.source, "apply": launch}
said = {}
for given in (torch.tensor([300, 8192]), np.array([300, 8192])):
    for name, call in entries.items():
        try:
            call(given)
        except TypeError as e:
            said.setdefault(str(e), []).append(name)
shapes = (torch.Size([300, 8192]), (300, 8192), [300, 8192], (np.int64(300), np.int32(8192)))
served = [[call(s) for s in shapes] for name, call in entries.items() if name != "source"]
print(json.dumps({"said": said, "served": served}))
"""


def test_a_1d_int_tensor_is_no_shape_at_any_entry_point_and_a_torch_size_tuple_or_list_is(deployed):
    """``best(k, torch.tensor([4096, 1024]))`` was served as the dims (4096, 1024): a 1-D index
    tensor given by mistake was taken for a shape. In a process of its own: torch is imported
    once per process, and a pytester test before this one took it out of ``sys.modules``."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    done = subprocess.run([sys.executable, "-c", TENSOR_SHAPES, str(deployed / "records"), DEVICE],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    every = ["best", "lookup", "config", "defines", "source", "apply"]
    assert found["said"] == {
        "kernel 'layernorm': shape is a Tensor of dtype torch.int64 and shape (2,), not a shape: give x.shape for "
        "its shape, or tuple(x.tolist()) for the dims it holds": every,
        "kernel 'layernorm': shape is a ndarray of dtype int64 and shape (2,), not a shape: give x.shape for its "
        "shape, or tuple(x.tolist()) for the dims it holds": every}
    assert all(len(answers) == 4 and all(a == answers[0] for a in answers) for answers in found["served"])


@pytest.mark.parametrize("other", [{"setup_hash": "0123456789abcdef"}, {"entry": "layernorm_v0"}])
def test_the_configs_served_after_the_pick_are_of_the_tasks_declaration_alone(deployed, monkeypatch, other):
    """Trials of another declaration, or of an earlier entry point, of the same template share its
    source hash: the configs served where the pick does not fit a shape (Choice.ranked, what an
    export carries) took them for the task's own, though they measured another function."""
    records = deployed / "records"
    shape = (300, 8192)
    before = tunebench.lookup("layernorm", shape, DEVICE, records=records)
    store = RecordStore(records / f"{DEVICE}.json")
    task = next(t for t in store.tasks(kernel="layernorm") if t["bucket"] == before.bucket)
    bucket = next(b for b in REGISTRY["layernorm"].buckets_for("cpu") if b.name == before.bucket)
    ran = next(d for d in store.trials(kernel="layernorm", dtype="float32") if tuple(d["shape"]) in bucket.shapes)
    faster = next(c for c in ({**before.config, "vec": v, "unroll": u} for v in (1, 2, 4, 8, 16) for u in (1, 2, 4, 8))
                  if c not in before.ranked and REGISTRY["layernorm"].variant("cpu").space.holds(c))
    for s in bucket.shapes:  # the other function was very fast
        store.add({**ran, "shape": list(s), "config": faster, **other, "status": "ok",
                   "verdict": None, "stats": {**ran["stats"], "median": 1e-6}})
    assert task["setup_hash"] != "0123456789abcdef"
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    after = tunebench.lookup("layernorm", (301, 8192), DEVICE, records=records)
    assert faster not in after.ranked and after.ranked == before.ranked


def test_no_final_round_serves_no_earlier_declarations_fastest_beside_an_early_stop_of_todays(deployed, monkeypatch):
    """Which declaration's trials best() ranks was decided on the trials in the list: one early stop
    of today's declaration left the earlier one's complete trials out of the ranking whose fastest
    best() checks for a final round, not out of the one it serves, so with no final round it served
    their fastest as tuned, confirmed by nothing. Here today's early stop is of that config (slow
    today): the check read its time from it, and named the next."""
    records = deployed / "records"
    before = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records)
    bucket = next(b for b in REGISTRY["layernorm"].buckets_for("cpu") if b.name == before.bucket)
    path = records / f"{DEVICE}.json"
    data = json.loads(path.read_text())
    data["checks"] = {i: c for i, c in data["checks"].items()  # the tune ended before its final round
                      if (c["kernel"], c["bucket"]) != ("layernorm", bucket.name)}
    mine = [d for d in data["trials"].values() if d["kernel"] == "layernorm" and d["dtype"] == "float32"
            and tuple(d["shape"]) in bucket.shapes]
    times, runs = defaultdict(dict), {}
    for d in mine:
        if d["status"] == "ok" and d.get("verdict") != "disturbed":
            times[config_key(d["config"])][tuple(d["shape"])] = d["stats"]["median"]
            runs[config_key(d["config"])] = d
    fastest = runs[min((k for k, t in times.items() if len(t) == len(bucket.shapes)),
                       key=lambda k: bucket.objective(times[k]))]
    today = fastest["setup_hash"]
    for d in mine:  # an earlier declaration's trials, run to the end
        d["setup_hash"] = "0123456789abcdef"
    for i, shape in enumerate(bucket.shapes, start=len(data["trials"]) + 1):  # today's: one config stopped early
        data["trials"][str(i)] = {**fastest, "shape": list(shape), "setup_hash": today, "status": "early_stopped",
                                  "stats": {**fastest["stats"], "median": 1e3}}
    path.write_text(json.dumps(data))
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    after = tunebench.lookup("layernorm", (301, 8192), DEVICE, records=records)
    assert before.source == "tuned" and after.source == "heuristic", after
    assert re.match(rf"no final round confirmed a pick on this bucket \(its tune ended before one: interrupted, or "
                    rf"the machine too busy\), so the trials' fastest \[{re.escape(config_text(fastest['config']))}\], "
                    rf"{after.baseline_ms / bucket.objective(times[config_key(fastest['config'])]):.2f}x by its "
                    rf"trials alone, is not served", after.reason), after.reason
    assert after.unconfirmed_ms == pytest.approx(bucket.objective(times[config_key(fastest["config"])]))  # drawn


def test_the_trials_ranked_with_early_stops_are_of_the_declaration_ranked_without_them():
    """An early stop of today's declaration (Y) beside complete trials of an earlier one (X) only:
    with early stops, X's were left out; without, ranked alone, kept."""
    bucket = tunebench.Bucket("b", N=(1, None), shapes=[(8,)])
    row = lambda v, ms, setup: ["k", "float32", "src", [8], {"v": v}, ms, setup, None]  # noqa: E731
    summary = lookup_module.Summary({"fingerprint": None, "tasks": [], "finals": [], "disturbed": [], "failed": [],
                                     "unjudged": {}, "rows": [row(1, 1.0, "X"), row(2, 2.0, "X")],
                                     "early": [row(3, 3.0, "Y")]})
    ranked = summary.ranked("k", "float32", bucket, "src", "Y")[0]
    assert ranked == pytest.approx({(("v", 1),): 1.0, (("v", 2),): 2.0})
    assert summary.ranked("k", "float32", bucket, "src", "Y", early=True)[0] == pytest.approx(
        {**ranked, (("v", 3),): 3.0})
    of_x = lookup_module.Summary({**summary.data(), "early": [row(3, 3.0, "Y"), row(4, 0.5, "X")]})
    assert of_x.ranked("k", "float32", bucket, "src", "X", early=True)[0] == pytest.approx({**ranked, (("v", 4),): 0.5})


def test_a_trial_stopped_early_without_stats_is_left_out_of_the_ranking_not_a_keyerror(deployed, monkeypatch):
    """The records ask stats of an ok trial alone (trial_problem): an early stop kept without them
    made every lookup, export and report raise KeyError: 'stats' once the index ranked early stops."""
    records = deployed / "records"
    before = tunebench.lookup("layernorm", (300, 8192), DEVICE, records=records)
    store = RecordStore(records / f"{DEVICE}.json")
    shape = next(b for b in REGISTRY["layernorm"].buckets_for("cpu") if b.name == before.bucket).shapes[0]
    trials = [d for d in store.trials(kernel="layernorm", dtype="float32") if tuple(d["shape"]) == shape]
    ran, tried = trials[0], {config_key(d["config"]) for d in trials}
    untried = next(c for c in ({**before.config, "vec": v, "unroll": u} for v in (1, 2, 4, 8, 16) for u in (1, 2, 4, 8))
                   if config_key(c) not in tried and REGISTRY["layernorm"].variant("cpu").space.holds(c))
    stopped = {k: v for k, v in ran.items() if k not in ("stats", "samples")}
    store.add({**stopped, "config": untried, "status": "early_stopped", "verdict": None})
    monkeypatch.setattr(lookup_module, "REFRESH_S", 0.0)
    after = tunebench.lookup("layernorm", (301, 8192), DEVICE, records=records)
    assert (after.source, after.config, after.ranked) == (before.source, before.config, before.ranked)


HELPERS = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

VALUE = {value}
shared = Kernel("helpers_{project}", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(8,)])]),
                args=lambda shape, dtype, rng: {{}}, reference=lambda: None, outputs=["y"],
                cpu=Variant(source="k.c", entry="k", space=Space({{"t": [1, 2]}}), heuristic=lambda shape: {{"t": VALUE}}))
"""


def test_two_projects_suites_each_import_their_own_helper_modules(tmp_path, monkeypatch):
    """The second project's suites took the first's `helpers` (a revision's suites, compared by the
    report, read today's helpers); set aside, it was imported again for each suite file, and the
    kernel it declares was "declared twice"."""
    from tunebench.lookup import load_suites
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    for value, project in ((1, "a"), (2, "b")):
        flat = tmp_path / project / "suites"
        flat.mkdir(parents=True)
        (flat / "helpers.py").write_text(HELPERS.format(value=value, project="flat"))
        for test in ("test_one.py", "test_two.py"):
            (flat / test).write_text("from helpers import shared\n")
        package = tmp_path / project / "pkg" / "suites"  # a package of suites, its helper named absolutely
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "helpers.py").write_text(f"VALUE = {value}\n")
        (package / "test_abs.py").write_text("from suites.helpers import VALUE as SEEN\n")
    try:
        for project in ("a", "b", "a"):
            (kernel,) = load_suites(tmp_path / project / "suites")
            assert kernel.variants["cpu"].heuristic((8,)) == {"t": 1 if project == "a" else 2}
        for project in ("a", "b"):
            load_suites(tmp_path / project / "pkg" / "suites")
            seen = [m.SEEN for m in list(sys.modules.values()) if getattr(m, "__file__", None)
                    == str(tmp_path / project / "pkg" / "suites" / "test_abs.py")]
            assert seen == [1 if project == "a" else 2], seen
    finally:  # the projects' modules only: the suites' and their helpers
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
                del sys.modules[name]


def test_a_launcher_given_a_param_positionally_runs_with_it_and_shape_and_dtype_get_the_arguments_they_take(deployed):
    """A framework's own launcher takes its params positionally too: ``launch(x, g, b, y, 4)``
    was a TypeError (multiple values for 'vec'), and ``shape=lambda x: x.shape`` on a call of
    four arguments one from the lambda, naming neither the kernel nor the param."""
    layernorm = tunebench.tuned("layernorm", device=DEVICE, records=deployed / "records")
    tuned = layernorm.config((300, 8192))

    @layernorm.apply(shape=lambda x: x.shape, dtype=lambda x: x.dtype)
    def launch(x, gamma, beta, y, vec, unroll, chunk, two_pass):
        return {"vec": vec, "unroll": unroll, "chunk": chunk, "two_pass": two_pass}

    x = np.zeros((300, 8192), np.float32)
    assert launch(x, None, None, None) == tuned
    assert launch(x, None, None, None, 4) == {**tuned, "vec": 4}  # the call's own param wins, as by keyword
    assert launch(x, None, None, None, 4, 2) == {**tuned, "vec": 4, "unroll": 2}
    assert launch(x, None, None, None, 4, unroll=2) == {**tuned, "vec": 4, "unroll": 2}
    assert launch(x=x, gamma=None, beta=None, y=None) == tuned


def test_a_launcher_taking_args_gets_its_own_params_first_and_a_builtin_shape_the_first_argument(deployed):
    """``def launch(x, vec, *rest, unroll)`` called as ``launch(x, 4)`` raised "got multiple values
    for argument 'vec'", and ``shape=operator.attrgetter("shape")`` was given every argument."""
    import operator
    layernorm = tunebench.tuned("layernorm", device=DEVICE, records=deployed / "records")
    tuned = layernorm.config((300, 8192))

    @layernorm.apply(shape=operator.attrgetter("shape"), dtype=operator.attrgetter("dtype"))
    def launch(x, vec, *rest, **params):
        return {"vec": vec, **params}

    x = np.zeros((300, 8192), np.float32)
    assert launch(x, 4, None, None) == {**tuned, "vec": 4}
    assert launch(x) == tuned
    assert launch(x=x, vec=4) == {**tuned, "vec": 4}


def test_a_launch_of_no_arguments_with_a_builtin_shape_is_a_type_error_not_a_stop_iteration(deployed):
    """``launch()`` raised a bare StopIteration, which a ``map()`` or a generator over launches takes
    for its end: the launches after it silently not made."""
    import operator
    layernorm = tunebench.tuned("layernorm", device=DEVICE, records=deployed / "records")

    @layernorm.apply(shape=operator.attrgetter("shape"))
    def launch(x, **params):
        return params

    with pytest.raises(TypeError, match="attrgetter expected 1 argument, got 0"):
        launch()


def test_a_lookup_per_launch_makes_no_path_with_the_records_given_or_the_device_named(deployed, monkeypatch):
    """Each call made a Path of records=, suites= and $TUNEBENCH_DEVICE (to ask whether each is
    absolute, and the id named): 8 µs a call where 4 µs were the rest of the answer."""
    monkeypatch.setenv("TUNEBENCH_DEVICE", DEVICE)
    records, suites = str(deployed / "records"), str(deployed / "suites")
    calls = [lambda: tunebench.best("layernorm", (300, 8192), records=records, suites=suites),
             lambda: tunebench.best("layernorm", (300, 8192), DEVICE, records=records, suites=suites)]
    expected = [call() for call in calls]
    assert [call() for call in calls] == expected  # answered from memory from here on
    made = []

    class Counted(type(Path())):
        def __new__(cls, *args, **kwargs):
            made.append(args)
            return super().__new__(cls, *args, **kwargs)

    monkeypatch.setattr(lookup_module, "Path", Counted)
    assert [call() for call in calls for _ in range(10)] == [e for e in expected for _ in range(10)]
    assert made == []


def test_a_records_folder_that_is_not_there_is_named_where_the_heuristic_is_served(deployed, monkeypatch):
    """`git mv records perf/records`: best() served the heuristic for every kernel, saying only
    "nothing is recorded for this device", naming no folder. (No warning: every project not tuned
    yet has no records folder.)"""
    monkeypatch.setattr(lookup_module, "_SAID", {}, raising=False)
    monkeypatch.delenv("TUNEBENCH_ROOT", raising=False)
    (deployed / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (deployed / "perf").mkdir()
    (deployed / "records").rename(deployed / "perf" / "records")
    choice = tunebench.lookup("layernorm", (300, 8192), DEVICE, suites=deployed / "suites")
    assert choice.source == "heuristic" and f"{deployed / 'records'} is not there" in choice.note, choice.note


def test_records_of_dims_that_name_one_dim_twice_name_the_file_the_kernel_and_the_dim_read_alone(deployed):
    """Tuned before Buckets refused ``"SRR"``, a kernel's records read without its suite said only
    "no bucket given": every recorded bucket was left out as invalid. The file is left as it is."""
    records = deployed / "records"
    path = records / f"{DEVICE}.json"
    data = json.loads(path.read_text())
    for task in data["tasks"].values():
        if task["kernel"] == "row_reduce":  # as the tunebench of then wrote Buckets("SRR", ...)
            task["dims"] = ["S", "R", "R"]
    path.write_text(json.dumps(data))
    written = path.read_bytes()
    shutil.rmtree(deployed / "suites")  # records alone
    REGISTRY.clear()
    with pytest.raises(BucketError) as caught:
        tunebench.best("row_reduce", (4, 262144, 8), DEVICE, records=records)
    assert str(caught.value).startswith(
        f"{path}: kernel 'row_reduce' was tuned with the dims ['S', 'R', 'R'], which name 'R' twice"), caught.value
    assert "give each dim a name of its own in its Buckets and tune it again (pytest --tune)" in str(caught.value)
    assert tunebench.best("layernorm", (300, 8192), DEVICE, records=records)  # the file's other kernels are served
    assert path.read_bytes() == written


def test_records_whose_oldest_task_named_a_dim_twice_serve_the_buckets_described_since(deployed):
    """The dims were read from the oldest task: one tuned with ``"RR"`` before a re-tune described
    the buckets anew raised Buckets' own error, naming no file, and served none of them."""
    records = deployed / "records"
    path = records / f"{DEVICE}.json"
    data = json.loads(path.read_text())
    ours = [t for t in data["tasks"].values() if t["kernel"] == "row_reduce"]
    assert len(ours) > 1 and ours[0]["dims"] == ["S", "R"]
    shape = tuple(ours[-1]["range"]["shapes"][0])
    shutil.rmtree(deployed / "suites")  # records alone
    REGISTRY.clear()
    expected = tunebench.best("row_reduce", shape, DEVICE, records=records)
    ours[0]["dims"] = ["R", "R"]
    shutil.copytree(records, deployed / "older")
    (deployed / "older" / path.name).write_text(json.dumps(data))
    assert tunebench.best("row_reduce", shape, DEVICE, records=deployed / "older") == expected
