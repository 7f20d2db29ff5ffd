import hashlib
import json
import re
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
import time

import numpy as np
import pytest
from tinydb import TinyDB

from tests.test_plugin import TUNE
from tunebench import records_merge
from tunebench.buckets import Bucket
from tunebench.records import (FORMAT, AtomicJSONStorage, RecordsError, RecordStore, device_id, measured_time,
                               measured_times, orphaned, stores, unmerged)
from tunebench.stamps import racy

FINGERPRINT = {"target": "cpu", "name": "Test CPU 9000", "machine": "x86_64", "threads": 2}


def trial(config, shape=(4, 8), status="ok", **extra):
    return {"kernel": "k", "source_hash": "abc", "shape": list(shape), "dtype": "float32",
            "config": config, "status": status, "device": device_id(FINGERPRINT), "stats": {"median": 1.0}, **extra}


def test_device_id_is_readable_and_follows_the_fingerprint():
    assert device_id(FINGERPRINT).startswith("cpu-test-cpu-9000-2t-")
    assert device_id(FINGERPRINT) == device_id(dict(reversed(list(FINGERPRINT.items()))))
    assert device_id({**FINGERPRINT, "threads": 1}) != device_id(FINGERPRINT)


H200 = {"target": "cuda", "name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "memory_gib": 139.8,
        "memory_bus_bits": 6016, "sm_clock_mhz": 1980, "memory_clock_mhz": 3201, "driver": 13000, "cuda": "13.0.0"}


def test_a_gpus_id_is_the_card_whatever_its_driver_and_cuda_versions():
    """A driver update, or a CI image whose PyCUDA was built with another toolkit, gave the same
    card another id: its gate skipped every task tuned on the box beside it."""
    assert device_id({**H200, "driver": 12080, "cuda": "12.8.0"}) == device_id(H200)
    for other in ({"sm_count": 114}, {"sm_clock_mhz": 1755}, {"memory_gib": 79.1}):
        assert device_id({**H200, **other}) != device_id(H200)


def test_a_gpus_records_file_named_by_an_earlier_tunebench_is_refused_with_the_command_that_renames_it(tmp_path):
    old = f"{device_id(H200).rpartition('-')[0]}-{hashlib.sha256(json.dumps(H200, sort_keys=True).encode()).hexdigest()[:6]}"
    path = tmp_path / f"{old}.json"
    text = json.dumps({"device": {"1": H200}, "trials": {"1": {**trial({"vec": 1}), "device": old}}})
    path.write_text(text)
    archived = {**trial({"vec": 2}), "device": old}  # the oldest trials, beyond the file's 20,000
    (tmp_path / f"{old}.archive.jsonl").write_text(json.dumps(archived) + "\n")
    with pytest.raises(RecordsError) as refused:
        RecordStore(path)
    assert path.read_text() == text
    command = str(refused.value).partition("in its folder: ")[2].partition(" (the file")[0]
    assert subprocess.run(command, shell=True, cwd=tmp_path).returncode == 0
    assert not list(tmp_path.glob(f"{old}*"))
    again = RecordStore.for_device(tmp_path, {**H200, "driver": 12080})
    assert again.path.name == f"{device_id(H200)}.json"
    for vec in (1, 2):  # the archive's too
        assert again.lookup("k", "abc", (4, 8), "float32", {"vec": vec})["device"] == device_id(H200)


def test_one_gpus_records_of_two_drivers_merge_as_one_devices(tmp_path):
    """Once a driver was no part of the id, two branches' files of one GPU that hold two driver
    versions were refused by the merge driver as "records of different devices", both the same id."""
    paths = []
    for n, driver in enumerate((13000, 12080)):
        fingerprint = {**H200, "driver": driver}
        doc = {**trial({"vec": n}), "device": device_id(fingerprint), "timestamp": f"2026-11-2{n}T00:00:00+00:00"}
        paths.append(tmp_path / f"{n}.json")
        paths[-1].write_text(json.dumps({"device": {"1": fingerprint}, "trials": {"1": doc}}))
    base = tmp_path / "base.json"
    base.write_text("{}")
    merged, _ = records_merge.merge(base, *paths)
    assert [d["config"] for d in merged["trials"].values()] == [{"vec": 0}, {"vec": 1}]
    assert list(merged["device"].values()) == [H200]  # ours'


def test_trials_persist_and_are_found_again_by_source_shape_dtype_and_config(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 4, "unroll": 2}))
    store.add(trial({"vec": 8, "unroll": 2}, status="wrong_result"))
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert again.lookup("k", "abc", (4, 8), "float32", {"unroll": 2, "vec": 4})["status"] == "ok"
    assert again.lookup("k", "abc", (4, 8), "float32", {"unroll": 2, "vec": 8})["status"] == "wrong_result"
    assert again.lookup("k", "other-source", (4, 8), "float32", {"unroll": 2, "vec": 4}) is None
    assert again.lookup("k", "abc", (4, 16), "float32", {"unroll": 2, "vec": 4}) is None
    assert again.fingerprint == FINGERPRINT
    assert len(again.trials(kernel="k")) == 2


def test_the_file_is_plain_tinydb_json(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 4}))
    store.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "dims": ["N"]})
    store.compact()
    db = TinyDB(store.path)
    assert db.table("trials").all()[0]["config"] == {"vec": 4}
    assert db.table("device").all() == [FINGERPRINT]
    assert db.table("format").all() == [{"version": FORMAT}]
    assert db.table("tasks").all()[0]["bucket"] == "b"


def test_a_file_from_before_formats_is_read_and_stamped_on_its_next_write(tmp_path):
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    path.write_text(json.dumps({"device": {"1": FINGERPRINT}, "trials": {"1": trial({"vec": 1})}}))
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert store.lookup("k", "abc", (4, 8), "float32", {"vec": 1})["status"] == "ok"
    store.add(trial({"vec": 2}))
    store.compact()
    db = TinyDB(path)
    assert db.table("format").all() == [{"version": FORMAT}]
    assert db.table("device").all() == [FINGERPRINT]
    assert [d["config"] for d in db.table("trials").all()] == [{"vec": 1}, {"vec": 2}]


@pytest.mark.parametrize("version, message", [
    (FORMAT + 1, re.escape(f"records format {FORMAT + 1}, written by a newer tunebench (this one reads formats up to "
                           f"{FORMAT})")),
    ("2", "table 'format' holds \\['2'\\], not one version number"),
])
def test_a_file_of_a_newer_or_unreadable_format_is_refused_by_readers_and_writers_and_left_untouched(
        tmp_path, version, message):
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    text = json.dumps({"format": {"1": {"version": version}}, "device": {"1": FINGERPRINT}, "trials": {}})
    path.write_text(text)
    for opening in (lambda: RecordStore(path), lambda: RecordStore.for_device(tmp_path, FINGERPRINT)):
        with pytest.raises(RecordsError, match=f"{path}: {message}"):
            opening()
    with pytest.raises(RecordsError, match=message):
        records_merge.merge(path, path, path)
    assert path.read_text() == text


def test_put_task_replaces_the_description_of_the_same_task(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    for dims in (["N"], ["M"]):
        store.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "dims": dims})
    assert [t["dims"] for t in store.tasks()] == [["M"]]


def test_a_corrupted_file_is_named_and_left_untouched(tmp_path):
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    path.write_text('{"trials": {"1": {"kernel": "k"')
    with pytest.raises(RecordsError, match=str(path)):
        RecordStore.for_device(tmp_path, FINGERPRINT)
    assert path.read_text() == '{"trials": {"1": {"kernel": "k"'


def test_a_file_of_the_wrong_form_is_refused(tmp_path):
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    path.write_text(json.dumps({"trials": {"1": {"kernel": "k"}}}))
    with pytest.raises(RecordsError, match="trial 1 lacks source_hash, .*; the file is left untouched: restore it"):
        RecordStore.for_device(tmp_path, FINGERPRINT)


@pytest.mark.parametrize("table, edit, said", [
    ("trials", lambda d: d["config"].update(vec=[2]), "trial 1: its config's 'vec' is [2], not one value"),
    ("trials", lambda d: d["stats"].update(median=-1.0), "trial 1: its stats are {'median': -1.0}, without a median"),
    ("tasks", lambda d: d.pop("bucket"), "task 1: its 'bucket' is 'missing', not a string"),
    ("sources", lambda d: d.pop("source_hash"), "source 1: its 'source_hash' is 'missing', not a string"),
    # the gate would build the recorded template with another file than the one its hash names
    ("sources", lambda d: d.update(files=["helper.c"]), "source 1: its files are ['helper.c'], not an object of "
                                                         "texts by their hash"),
    ("sources", lambda d: d.update(files={"8c2a1a6a1e5ce2b1": "int x;\n"}), "source 1: its file '8c2a1a6a1e5ce2b1' "
                                                                            "is not a text of that hash"),
    ("checks", lambda d: d.pop("kind"), "check 1: its 'kind' is None, not a string"),
    ("checks", lambda d: d["shapes"][0].pop("best"), "check 1: its best on [4, 8] is 'missing', not a config"),
    # each of these crashed best, the report and the gate with a TypeError naming no file
    ("trials", lambda d: d.update(status="okay"), "trial 1: its status is 'okay', none of ok, early_stopped, "),
    ("tasks", lambda d: d.update(baseline=None), "task 1: its baseline is None, not a list of shapes and the "),
    ("tasks", lambda d: d.update(range="few"), "task 1: its range is 'few', not a bucket's description"),
    ("tasks", lambda d: d["range"].update(shapes=[["a"]]), "task 1: its range is {"),
    ("checks", lambda d: d["shapes"][0].update(confirmed_ms=["a", "b"]),
     "check 1: its confirmed_ms on [4, 8] is ['a', 'b'], not a list of numbers"),
    ("checks", lambda d: d["shapes"][0].update(ratios="x"), "check 1: its ratios on [4, 8] is 'x', not a list of"),
    ("checks", lambda d: d["shapes"][0].update(baseline_ms="1"), "check 1: its baseline_ms on [4, 8] is '1', not a "
                                                                  "number"),
])
def test_a_hand_edited_document_is_an_error_naming_the_file_and_document(tmp_path, table, edit, said):
    """Each was read unchecked: an unhashable config, a KeyError naming nothing, or a math
    domain error, in best, report, the gate and the tune alike."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}, stats={"median": 1.0}))
    store.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b",
                    "range": Bucket("b", M=(1, None), N=(1, None), shapes=[(4, 8)]).describe(),
                    "baseline": [{"shape": [4, 8], "config": {"vec": 1}}]})
    store.put_source("k", "abc", "text", {})
    store.add_check({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "kind": "tune",
                     "shapes": [{"shape": [4, 8], "best": {"vec": 1}, "baseline": {"vec": 1}}]})
    store.compact()
    data = json.loads(store.path.read_text())
    edit(data[table]["1"])
    store.path.write_text(json.dumps(data))
    with pytest.raises(RecordsError, match=re.escape(f"{store.path}: {said}")):
        RecordStore(store.path)


@pytest.mark.parametrize("table, doc_id", [("trials", "a1"), ("tasks", "01"), ("checks", "1.0")])
def test_a_hand_edited_document_id_that_is_no_number_is_an_error_naming_the_file_table_and_id(tmp_path, table,
                                                                                              doc_id):
    """TinyDB reads every id as a number: "a1" passed the checks, then every reader crashed with
    "invalid literal for int()" naming no file; "01" beside "1" read as one document, one lost."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    store.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b"})
    store.add_check({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "kind": "tune"})
    store.compact()
    data = json.loads(store.path.read_text())
    data[table][doc_id] = data[table].pop("1")
    store.path.write_text(json.dumps(data))
    with pytest.raises(RecordsError, match=re.escape(f"{store.path}: table {table!r} holds document id {doc_id!r}, "
                                                     f"not a number as TinyDB writes one")):
        RecordStore(store.path).trials()


def test_a_trial_without_its_keys_is_refused(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    with pytest.raises(RecordsError, match="without status"):
        store.add({k: v for k, v in trial({"vec": 1}).items() if k != "status"})


def test_opening_a_missing_file_read_only_is_an_error(tmp_path):
    with pytest.raises(RecordsError, match="no such records file"):
        RecordStore(tmp_path / "nothing.json")


def test_trials_go_through_the_journal_and_are_folded_into_the_file(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    store.add(trial({"vec": 2}))
    assert store.journal.exists() and len(RecordStore(store.path).trials()) == 2  # readers see both
    store.compact()
    assert not store.journal.exists()
    assert [t["config"] for t in TinyDB(store.path).table("trials").all()] == [{"vec": 1}, {"vec": 2}]


def test_a_torn_last_journal_line_is_dropped_and_a_corrupt_earlier_one_is_an_error(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    with open(store.journal, "a") as f:
        f.write('{"kernel": "k", "sour')  # a write killed half way
    assert [t["config"] for t in RecordStore(store.path).trials()] == [{"vec": 1}]
    store.journal.write_text('{"broken\n' + json.dumps(trial({"vec": 3})) + "\n")
    with pytest.raises(RecordsError, match="line 1 is corrupted"):
        RecordStore(store.path)


def test_bytes_that_are_no_text_in_a_journal_are_named_by_their_line_and_nothing_is_dropped(tmp_path):
    """The whole journal was said to be binary, "remove the file", where one line of many was."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    with open(store.journal, "ab") as f:
        f.write(b"\x00\x9f\xff\n" + json.dumps(trial({"vec": 2})).encode() + b"\n")
    before = store.journal.read_bytes()
    with pytest.raises(RecordsError, match=r"line 2 is not text \(binary data at byte 1\); it is left untouched: "
                                           r"remove the line or the file"):
        RecordStore(store.path)
    assert store.journal.read_bytes() == before


def test_a_trial_appended_after_a_torn_line_is_kept_and_the_journal_stays_readable(tmp_path):
    """The next run's first trial was written onto the torn line: one corrupted line, that trial
    lost, and every later read of the records an error."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    with open(store.journal, "a") as f:
        f.write('{"kernel": "k", "sour')  # a run killed half way through an append
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    again.add(trial({"vec": 2}))
    again.add(trial({"vec": 4}))
    assert [t["config"] for t in RecordStore(store.path).trials()] == [{"vec": 1}, {"vec": 2}, {"vec": 4}]
    again.compact()
    assert [t["config"] for t in TinyDB(store.path).table("trials").all()] == [{"vec": 1}, {"vec": 2}, {"vec": 4}]


@pytest.mark.parametrize("line, said", [('{"kernel": "k"}', "lacks source_hash, shape, dtype, config, status, device"),
                                         ("[1, 2]", "not a trial"), (None, "its stats are None, without a median time, in the trial of k [vec:2] on "
                                                                  "shape [4, 8]")])
@pytest.mark.parametrize("where", ["journal", "archive"])
def test_a_journal_or_archive_line_that_is_no_trial_is_an_error_naming_the_file_and_line(tmp_path, line, said,
                                                                                        where):
    """They were read unchecked: a KeyError naming no file, or a TypeError's traceback."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    store.compact()
    bad = line if line is not None else json.dumps({k: v for k, v in trial({"vec": 2}).items() if k != "stats"})
    path = store.journal if where == "journal" else store.archive
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(trial({"vec": 3})) + "\n" + bad + "\n")
    with pytest.raises(RecordsError, match=rf"{re.escape(str(path))}: line 2: {re.escape(said)}; it is left "
                                           rf"untouched"):
        RecordStore(store.path).trials()


def test_folding_twice_keeps_each_trial_once(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    saved = store.journal.read_text()
    store.compact()
    store.journal.write_text(saved)  # as if a run was killed after writing the file, before the unlink
    store.compact()
    assert len(TinyDB(store.path).table("trials").all()) == 1


@pytest.mark.parametrize("content, message", [
    (bytes(range(256)) * 8, "not a records file (binary data at byte 128)"),
    (b"", "empty records file"),
    (b"  \n", "empty records file"),
])
def test_a_records_file_that_is_not_one_is_an_error_in_one_line_and_left_as_it_was(tmp_path, content, message):
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    path.write_bytes(content)
    with pytest.raises(RecordsError) as error:
        RecordStore.for_device(tmp_path, FINGERPRINT)
    assert str(error.value).startswith(f"{path}: {message}") and "\n" not in str(error.value)
    assert "restore it (git checkout) or move it away" in str(error.value)
    assert path.read_bytes() == content


def test_a_git_lfs_pointer_in_place_of_the_records_says_to_fetch_them(tmp_path):
    """A CI checkout without LFS: it said "corrupted records file (Expecting value ...): restore it
    (git checkout)", which checks out the same pointer again."""
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"4d" * 32 + b"\nsize 1596188\n"
    path.write_bytes(pointer)
    with pytest.raises(RecordsError, match=f"^{path}: a Git LFS pointer, not the records: .*git lfs pull"):
        RecordStore.for_device(tmp_path, FINGERPRINT)
    assert path.read_bytes() == pointer


def test_a_records_path_that_cannot_be_read_is_an_error_naming_it(tmp_path):
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    path.mkdir()
    with pytest.raises(RecordsError, match=f"^{path}: cannot be read"):
        RecordStore.for_device(tmp_path, FINGERPRINT)


def test_a_records_file_rewritten_in_place_within_the_tick_of_its_last_write_is_read_again(tmp_path, one_tick):
    """A copy over the file (the merge driver's ``cp``) of as many bytes in the tick of the write a
    reader had read left its inode, size and mtime as they were: the reader served its old tables."""
    writer = RecordStore.for_device(tmp_path, FINGERPRINT)
    writer.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "dims": ["M"]})
    reader = RecordStore(writer.path)
    assert [t["dims"] for t in reader.tasks()] == [["M"]]
    writer.path.write_text(writer.path.read_text().replace('"M"', '"N"'))
    assert [t["dims"] for t in reader.tasks()] == [t["dims"] for t in writer.tasks()] == [["N"]]


def test_an_archive_rewritten_in_place_within_the_tick_of_its_last_write_is_read_again(tmp_path, one_tick,
                                                                                       monkeypatch):
    """The archive is appended to; but a torn last line cut, then an append of as many bytes, or a
    copy over it, within the tick of the write a reader had read left its stat as it was."""
    monkeypatch.setattr("tunebench.records.ARCHIVE_ABOVE", 1)
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    for vec in (1, 2):  # the file holds one trial: the first moves to the archive
        store.add(trial({"vec": vec}, stats={"median": 1.0}))
        store.compact()
    reader = RecordStore(store.path)
    assert [(t["config"]["vec"], t["stats"]["median"]) for t in reader.trials()] == [(1, 1.0), (2, 1.0)]
    store.archive.write_text(store.archive.read_text().replace('"median": 1.0', '"median": 3.0'))
    assert [(t["config"]["vec"], t["stats"]["median"]) for t in reader.trials()] == [(1, 3.0), (2, 1.0)]


def test_a_file_changed_just_now_is_racy_whatever_mtime_a_tool_set_on_it(tmp_path, monkeypatch):
    """``cp -p``, ``rsync -t`` and ``touch -d`` give a file another's mtime, long past or to come:
    its ctime, which the kernel sets, says that it changed just now."""
    monkeypatch.setattr("tunebench.stamps.RACY_S", 3600.0)  # just now, however slow the machine
    path = tmp_path / "copied.json"
    path.write_text("{}")
    os.utime(path, ns=(0, 0))
    assert racy(os.stat(path))


def test_a_settled_file_rewritten_in_place_with_its_old_mtime_is_read_again(tmp_path, settled):
    """A copy over the records in place (``cp -p``, ``rsync -t --inplace``) of as many bytes keeps
    the inode, the size and, set back by the tool, the mtime: a reader in the same process served
    the tables it had parsed before; the ctime the kernel set tells it."""
    writer = RecordStore.for_device(tmp_path, FINGERPRINT)
    writer.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "dims": ["M"]})
    reader = RecordStore(writer.path)
    assert [t["dims"] for t in reader.tasks()] == [["M"]]
    before = os.stat(writer.path)
    time.sleep(0.01)  # a ctime past the first
    writer.path.write_text(writer.path.read_text().replace('"M"', '"N"'))
    os.utime(writer.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(writer.path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert [t["dims"] for t in reader.tasks()] == [["N"]]


def test_the_file_is_parsed_once_per_content_and_read_once_it_has_settled(tmp_path, monkeypatch):
    """A tune reads the file right after each of its writes (a parse of the shipped 1.7 MB file
    takes 0.1 s): a racy file's bytes are read again, and parsed only where they differ; once it
    has settled, its stat is trusted and nothing is read."""
    parsed, read = [], []
    parse, read_bytes = AtomicJSONStorage._parse, AtomicJSONStorage._bytes
    monkeypatch.setattr(AtomicJSONStorage, "_parse", lambda self, raw: parsed.append(self.path) or parse(self, raw))
    monkeypatch.setattr(AtomicJSONStorage, "_bytes", lambda self: read.append(self.path) or read_bytes(self))
    monkeypatch.setattr("tunebench.stamps.RACY_S", 3600.0)  # each write here is recent, however slow the machine
    writer = RecordStore.for_device(tmp_path, FINGERPRINT)
    writer.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "dims": ["M"]})
    reader = RecordStore(writer.path)
    for _ in range(3):
        assert [t["dims"] for t in writer.tasks()] == [t["dims"] for t in reader.tasks()] == [["M"]]
    assert len(parsed) == 1  # the reader's first read; the writer knows what it wrote
    monkeypatch.setattr("tunebench.stamps.RACY_S", 0.0)  # the file has settled
    read.clear()
    for _ in range(3):
        assert [t["dims"] for t in reader.tasks()] == [["M"]]
    assert len(read) == 1 and len(parsed) == 1


def test_a_trial_measured_again_replaces_the_one_before_which_is_kept_in_the_archive(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 4}, verdict="clean", samples=[1.0]))
    store.compact()
    store.add(trial({"vec": 4}, verdict="disturbed", samples=[2.0]))  # --tune-fresh on a busier day
    assert [t["verdict"] for t in store.trials()] == ["disturbed"]
    store.compact()
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert [t["verdict"] for t in again.trials()] == ["disturbed"]
    assert again.lookup("k", "abc", (4, 8), "float32", {"vec": 4})["samples"] == [2.0]
    assert [t["verdict"] for t in TinyDB(store.path).table("trials").all()] == ["disturbed"]
    assert [json.loads(line)["samples"] for line in store.archive.read_text().splitlines()] == [[1.0]]


def test_a_forked_child_does_not_hold_the_task_lock(tmp_path):
    """A worker is forked while its parent holds the task lock; were the lock inherited, a
    worker outliving a killed parent would keep every later run waiting."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    read, write = os.pipe()
    with store.task_lock("k[b-float32]"):
        child = os.fork()
        if child == 0:  # the child sleeps on, as an orphaned worker would
            os.close(read)
            os.write(write, b"x")
            time.sleep(30)
            os._exit(0)
        os.read(read, 1)
    try:
        taker = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, sys
            with open({str(store._lock_file("k[b-float32]"))!r}, "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            """)], capture_output=True, text=True, timeout=30)
        assert taker.returncode == 0, taker.stderr
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def test_beyond_its_limit_the_file_moves_its_oldest_trials_to_the_archive(tmp_path, monkeypatch):
    monkeypatch.setattr("tunebench.records.ARCHIVE_ABOVE", 5)
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    for i in range(12):
        store.add(trial({"vec": i}))
    store.compact()
    assert len(TinyDB(store.path).table("trials").all()) == 5
    assert len(store.archive.read_text().splitlines()) == 7
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert [t["config"]["vec"] for t in again.trials()] == list(range(12))
    assert again.lookup("k", "abc", (4, 8), "float32", {"vec": 0})["status"] == "ok"  # an archived one
    again.add(trial({"vec": 0}, status="wrong_result"))  # measured again: the newer one counts
    again.compact()
    final = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert [t["status"] for t in final.trials() if t["config"]["vec"] == 0] == ["wrong_result"]
    assert len(final.trials()) == 12
    assert final.lookup("k", "abc", (4, 8), "float32", {"vec": 0})["status"] == "wrong_result"
    for i in range(100, 106):  # the remeasured trial moves into the archive beside its first version
        final.add(trial({"vec": i}))
        final.compact()
    last = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert [json.loads(line)["config"]["vec"] for line in last.archive.read_text().splitlines()].count(0) == 2
    assert last.lookup("k", "abc", (4, 8), "float32", {"vec": 0})["status"] == "wrong_result"


def test_two_branches_that_each_tuned_merge_their_records_through_the_merge_driver(twice_project, pytester,
                                                                                   quiet_verdicts):
    """Every tune appends to the same tables under sequential ids: a line merge always conflicts,
    and either side alone loses the other's trials. The driver merges the measurements."""
    # its point is the merge: beside other load a tune stopped at its heuristic, as documented, before
    # its final round, so a branch's records held no check of it to merge
    root = twice_project

    def git(*args):
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root,
                              capture_output=True, text=True)

    def trials():
        (path,) = (root / "records").glob("*.json")
        return {json.dumps(d, sort_keys=True) for d in json.loads(path.read_text())["trials"].values()}

    (root / ".gitignore").write_text("records/.*/\n__pycache__/\n")
    (root / ".gitattributes").write_text("records/*.json merge=tunebench\nrecords/*.archive.jsonl merge=union\n")
    git("init", "-q", "-b", "main")
    git("config", "merge.tunebench.driver", f"{sys.executable} -m tunebench.cli merge-records %O %A %B %P")
    pytester.runpytest("suites", *TUNE, "-k", "small")
    git("add", "-A")
    git("commit", "-qm", "small tuned")
    git("checkout", "-qb", "large")
    pytester.runpytest("suites", *TUNE, "-k", "large")
    git("commit", "-qam", "large tuned")
    large = trials()
    git("checkout", "-q", "main")
    pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-fresh")  # the same trials measured again
    git("commit", "-qam", "small tuned again")
    again = trials()
    merged = git("merge", "-q", "large", "-m", "merge")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    (path,) = (root / "records").glob("*.json")
    store = RecordStore(path)
    assert {t["bucket"] for t in store.trials()} == {"small", "large"}
    assert {json.dumps(t, sort_keys=True) for t in store.trials(bucket="large")} == {
        t for t in large if json.loads(t)["bucket"] == "large"}
    assert {json.dumps(t, sort_keys=True) for t in store.trials(bucket="small")} == {
        t for t in again if json.loads(t)["bucket"] == "small"}  # the latest measurement of each
    assert {c["bucket"] for c in store.checks(kind="tune")} == {"small", "large"}
    gate = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu")
    gate.assert_outcomes(passed=2), gate.stdout.str()[-3000:]  # the merged records gate both buckets


def test_a_tune_and_a_gate_refuse_this_devices_records_file_git_holds_unmerged_not_anothers(twice_project, pytester,
                                                                                          quiet_verdicts):
    """A merge driver git could not start left ours alone in the file with no marker: the gate
    gated it and a tune appended to it as this device's records, which a commit then kept so."""
    root = twice_project

    def git(*args):
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root,
                              capture_output=True, text=True)

    def both_sides_change(change):
        git("checkout", "-qb", "theirs")
        change(2)
        git("commit", "-qam", "theirs")
        git("checkout", "-q", "main")
        change(3)
        git("commit", "-qam", "ours")
        assert git("merge", "theirs", "-m", "merge").returncode != 0

    (root / ".gitignore").write_text("records/.*/\n__pycache__/\n")
    (root / ".gitattributes").write_text("records/*.json merge=tunebench\n")
    git("init", "-q", "-b", "main")
    git("config", "merge.tunebench.driver", f"'{root}/moved/.venv/bin/tunebench' merge-records %O %A %B %P")
    pytester.runpytest("suites", *TUNE, "-k", "small")
    other = RecordStore.for_device(root / "records", FINGERPRINT)  # another device's file beside it
    other.add(trial({"vec": 1}))
    other.compact()
    git("add", "-A")
    git("commit", "-qm", "base")
    both_sides_change(lambda vec: (other.add(trial({"vec": vec})), other.compact()))
    assert list(unmerged(root / "records")) == [other.path.resolve()]
    gate = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small")
    gate.assert_outcomes(passed=1)  # another device's file is not this run's
    git("merge", "--abort")
    git("branch", "-D", "theirs")
    both_sides_change(lambda trials: pytester.runpytest("suites", *TUNE, "-k", "large", "--tune-trials", str(trials)))
    (path,) = (p for p in unmerged(root / "records") if p != other.path.resolve())
    gate = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small")
    assert gate.ret == pytest.ExitCode.INTERRUPTED
    gate.stdout.fnmatch_lines([f"*{path}: git holds it unmerged, one side's records alone*"])
    tune = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert tune.ret == pytest.ExitCode.USAGE_ERROR
    tune.stderr.fnmatch_lines([f"*{path}: git holds it unmerged, one side's records alone*"])


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_the_texts_of_the_files_a_template_keeps_as_their_hash_are_kept_once_each_within_a_size(tmp_path,
                                                                                               monkeypatch):
    """The gate builds a recorded template with them once one is edited: a helper unchanged across
    template versions is kept once, a vendored library's headers beyond FILE_TEXT_BYTES not at all."""
    monkeypatch.setattr("tunebench.records.FILE_TEXT_BYTES", 100)
    helper, header, large = "void pass(void);\n", "#define EXTRA 0\n", "/* a library */\n" * 10
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.put_source("k", "s1", "t1", {digest(helper): helper, digest(large): large, digest(header): header})
    store.put_source("k", "s2", "t2", {digest(helper): helper, digest("#define EXTRA 30\n"): "#define EXTRA 30\n"})
    store.put_source("k", "s3", "t3", {})
    store.compact()
    again = RecordStore(store.path)  # read and checked
    assert [d.get("files") for d in TinyDB(store.path).table("sources").all()] == [
        {digest(helper): helper, digest(header): header}, {digest("#define EXTRA 30\n"): "#define EXTRA 30\n"}, None]
    assert again.file_texts() == {digest(helper): helper, digest(header): header,
                                  digest("#define EXTRA 30\n"): "#define EXTRA 30\n"}
    assert again.source("s2") == "t2"


def test_a_version_kept_without_file_texts_gets_them_when_tuned_again_and_nothing_else_of_it_changes(
        tmp_path, monkeypatch):
    """Records from before texts were kept: a re-tune of the template found its version kept and
    added nothing, so the gate never built its helpers as tuned. It adds those no version keeps,
    within FILE_TEXT_BYTES with what the version keeps already."""
    monkeypatch.setattr("tunebench.records.FILE_TEXT_BYTES", 40)
    helper, header, large, more = "void pass(void);\n", "#define EXTRA 0\n", "/* a library */\n" * 2, "int more;\n"
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.put_source("k", "s1", "t1", {})
    store.put_source("k", "s1", "t1", {digest(helper): helper})
    store.put_source("k", "s1", "t1", {digest(helper): helper, digest(large): large, digest(header): header})
    store.put_source("k", "s1", "t1", {digest(more): more})  # 33 bytes kept: beyond 40 with it
    store.compact()
    RecordStore(store.path)  # read and checked
    assert TinyDB(store.path).table("sources").all() == [
        {"kernel": "k", "source_hash": "s1", "text": "t1", "files": {digest(helper): helper, digest(header): header}}]


def test_a_merge_keeps_the_file_texts_of_either_sides_sources(tmp_path):
    """Theirs re-tuned a version both keep, and kept its texts (records from before had none):
    ours' document of it, without them, was kept whole."""
    def side(name, sources):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": {"1": FINGERPRINT}, "sources": {
            str(i): {"kernel": "k", "source_hash": h, "text": h, **({"files": {digest(t): t}} if t else {})}
            for i, (h, t) in enumerate(sources, 1)}}))
        return path

    base = side("base", [("s1", None)])
    merged, _ = records_merge.merge(base, side("ours", [("s1", None), ("s2", "b\n")]),
                                    side("theirs", [("s1", "a\n"), ("s3", "c\n")]))
    path = tmp_path / "records" / f"{device_id(FINGERPRINT)}.json"
    path.parent.mkdir()
    AtomicJSONStorage(path).write(merged)
    assert RecordStore(path).file_texts() == {digest(t): t for t in ("a\n", "b\n", "c\n")}


def committed_records(root, driver):
    """(git in ``root``, a records file of one trial committed there with ``driver`` as its merge driver)."""
    def git(*args):
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root,
                              capture_output=True, text=True)

    store = RecordStore.for_device(root / "records", FINGERPRINT)
    store.add(trial({"vec": 1}, timestamp="2026-11-01T00:00:00+00:00"))
    store.compact()
    (root / ".gitattributes").write_text("records/*.json merge=tunebench\n")
    git("init", "-q", "-b", "main")
    git("config", "merge.tunebench.driver", driver)
    git("add", "-A")
    git("commit", "-qm", "base")
    return git, store


def test_a_merge_whose_side_cannot_be_read_names_the_side_and_file_not_gits_temporary_copy(tmp_path):
    """It said ".merge_file_4skosm: trial 2 lacks status" and left ours alone in the file, where a
    `git add` drops theirs' trials without a word."""
    git, store = committed_records(tmp_path, f"{sys.executable} -m tunebench.cli merge-records %O %A %B %P")
    git("checkout", "-qb", "broken")
    data = json.loads(store.path.read_text())
    data["trials"]["2"] = {k: v for k, v in trial({"vec": 2}).items() if k != "status"}
    store.path.write_text(json.dumps(data))
    git("commit", "-qam", "a trial without its status")
    git("checkout", "-q", "main")
    store.add(trial({"vec": 3}, timestamp="2026-11-03T00:00:00+00:00"))
    store.compact()
    git("commit", "-qam", "ours")
    merged = git("merge", "broken", "-m", "merge")
    assert merged.returncode != 0
    said = merged.stdout + merged.stderr
    assert f"records/{store.path.name}, theirs (the branch merged in): trial 2 lacks status" in said, said
    assert "do not add it as it is" in said and ".merge_file" not in said, said


def test_a_records_file_a_merge_driver_could_not_start_on_is_refused_and_merged_again(tmp_path):
    """A driver git could not start (the README's path to a virtual environment moved) left ours
    in the file without a conflict marker: it read as records, and added and committed so, theirs'
    trials were lost without a word."""
    git, store = committed_records(tmp_path, f"'{tmp_path}/gone/.venv/bin/tunebench' merge-records %O %A %B %P")
    for branch, vec in (("theirs", 2), ("main", 3)):
        git("checkout", "-q", "-B", branch)
        store.add(trial({"vec": vec}, timestamp=f"2026-11-0{vec}T00:00:00+00:00"))
        store.compact()
        git("commit", "-qam", branch)
        git("checkout", "-q", "main")
    assert git("merge", "theirs", "-m", "merge").returncode != 0
    assert "<<<<<<<" not in store.path.read_text()  # ours alone, read as records
    assert sorted(t["config"]["vec"] for t in RecordStore(store.path).trials()) == [1, 3]
    why = unmerged(tmp_path / "records")
    assert list(why) == [store.path.resolve()]
    assert "git holds it unmerged, one side's records alone" in why[store.path.resolve()]
    from tunebench import report  # matplotlib's import: in this test alone
    with pytest.raises(RecordsError, match="git holds it unmerged"):  # its only records file: no report of ours alone
        report.write(tmp_path / "records", tmp_path / "report")
    # the driver set up again, merged again as the refusal says
    git("config", "merge.tunebench.driver", f"{sys.executable} -m tunebench.cli merge-records %O %A %B %P")
    again, merge_command = why[store.path.resolve()].split("in its folder: `", 1)[1].split("`, or: ", 1)
    done = subprocess.run(["bash", "-c", again.rstrip("`")], cwd=tmp_path / "records", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sorted(t["config"]["vec"] for t in RecordStore(store.path).trials()) == [1, 2, 3]
    git("add", "records")
    assert unmerged(tmp_path / "records") == {}
    # committed as git left it, ours alone; then a branch forked before it that never touched the
    # records merged (its file differs from the merge's: git's full history names that merge last),
    # and a trial added: the commands merge theirs of the merge that lost it into the file as it is
    git("checkout", "-q", "HEAD", "--", f"records/{store.path.name}")
    git("commit", "-qam", "merge")
    git("checkout", "-q", "-b", "docs", "HEAD~2")
    (tmp_path / "README").write_text("docs\n")
    git("add", "README")
    git("commit", "-qm", "docs")
    git("checkout", "-q", "main")
    assert git("merge", "docs", "-m", "merge docs").returncode == 0
    store.add(trial({"vec": 4}, timestamp="2026-11-04T00:00:00+00:00"))
    store.compact()
    git("commit", "-qam", "later")
    assert sorted(t["config"]["vec"] for t in RecordStore(store.path).trials()) == [1, 3, 4]
    done = subprocess.run(["bash", "-c", merge_command], cwd=tmp_path / "records", capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert sorted(t["config"]["vec"] for t in RecordStore(store.path).trials()) == [1, 2, 3, 4]


def test_an_archive_whose_records_file_was_renamed_names_the_file_that_holds_them(tmp_path):
    """`git mv` of a records file alone, committed: the gate said to restore the old name with
    `git checkout HEAD -- ...`, which no commit held any more, and named no other file."""
    store = RecordStore.for_device(tmp_path / "records", FINGERPRINT)
    store.add(trial({"vec": 1}))
    store.compact()
    archive = store.path.with_name(f"{store.path.stem}.archive.jsonl")
    archive.write_text(json.dumps(trial({"vec": 2})) + "\n")
    assert orphaned(store.path) is None
    moved = store.path.with_name("cpu-test-cpu-9000-2t-000000.json")
    store.path.rename(moved)
    assert orphaned(store.path) == (
        f"{archive.resolve()} is left from {store.path.name}, which is not there: its trials are not read. "
        f"{moved.name} holds this device's records under another name: name it {store.path.name} again "
        f"(`git mv {moved} {store.path}`, or `mv` outside git)")


CONFLICTED = '{"trials": {\n<<<<<<< HEAD\n  "1": {}\n=======\n  "1": {}\n>>>>>>> other\n}}\n'


def test_a_merge_whose_side_cannot_be_read_says_in_words_what_fixes_that_side(tmp_path):
    """The side's name replaced git's temporary path inside the shell command the reader gives
    (`git show $s./records/x.json, ours (the branch checked out) > ...`), and that command ran
    the same merge, which failed on the same side again."""
    readable = tmp_path / "readable.json"
    readable.write_text(json.dumps({"device": {"1": FINGERPRINT}, "trials": {"1": trial({"t": 1})}}))
    conflicted, newer = tmp_path / ".merge_file_a1", tmp_path / ".merge_file_b2"
    conflicted.write_text(CONFLICTED)
    newer.write_text(json.dumps({"format": {"1": {"version": FORMAT + 1}}}))
    for ours, theirs, said in (
            (conflicted, readable, "records/x.json, ours (the branch checked out): holds git conflict markers (merged "
                                   "without tunebench's merge driver, see the README's Records). The merge stopped "
                                   "and left ours alone in the file, without theirs' trials: do not add it as it is; "
                                   "`git merge --abort`, make the file readable on this branch and commit it"),
            (readable, conflicted, "records/x.json, theirs (the branch merged in): holds git conflict markers (merged "
                                   "without tunebench's merge driver, see the README's Records). The merge stopped "
                                   "and left ours alone in the file, without theirs' trials: do not add it as it is; "
                                   "`git merge --abort`, make the file readable on the branch merged in and commit it"),
            (readable, newer, f"records/x.json, theirs (the branch merged in): records format {FORMAT + 1}, written by "
                              f"a newer tunebench (this one reads formats up to {FORMAT}). The merge stopped and left ours alone in the file, without theirs' "
                              f"trials: do not add it as it is; `git merge --abort`, then merge again with a tunebench "
                              f"that reads it")):
        with pytest.raises(RecordsError) as caught:
            records_merge.merge(readable, ours, theirs, "records/x.json")
        assert str(caught.value).startswith(said), str(caught.value)
        assert ".merge_file" not in str(caught.value) and "git show" not in str(caught.value)


def test_a_merge_whose_base_cannot_be_read_keeps_every_document_of_both_sides_and_says_so(tmp_path):
    """A base committed with conflict markers: "fix that side's file on its branch" cannot be
    done for a commit both branches descend from, and the merge could not be made."""
    def side(name, rounds, trials):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": {"1": FINGERPRINT}, "checks": {
            str(i): {"kind": "tune", "kernel": "k", "target": "cpu", "dtype": "float32", "bucket": b,
                     "timestamp": f"2026-11-0{i}T00:00:00+00:00"} for i, b in enumerate(rounds, 1)},
            "trials": {str(i): trial({"t": t}, timestamp=f"2026-11-0{t}T00:00:00+00:00")
                       for i, t in enumerate(trials, 1)}}))
        return path

    base = tmp_path / "base.json"
    base.write_text(CONFLICTED)
    ours, theirs = side("ours", ["all", "small"], [1, 2]), side("theirs", ["all"], [1, 3])
    merged, notes = records_merge.merge(base, ours, theirs, "records/x.json")
    assert [d["config"]["t"] for d in merged["trials"].values()] == [1, 2, 3]
    assert [c["bucket"] for c in merged["checks"].values()] == ["all", "small"]
    # the round both hold was the base's: not one both sides tuned since
    assert notes == ["records/x.json, the merge base: holds git conflict markers (merged without tunebench's merge "
                     "driver, see the README's Records); merged as if it held what both sides hold alike: every "
                     "trial, source and check of either side is kept, and where the two describe a task "
                     "differently, ours is kept (with no base, which side changed it cannot be told; a tune of the "
                     "task describes it anew)"]


def test_a_merge_keeps_what_either_side_added_and_drops_what_one_side_moved_away(tmp_path):
    def side(name, trials, fingerprint=FINGERPRINT):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": {"1": fingerprint}, "trials": {
            str(i): trial({"t": t}, timestamp=f"2026-11-0{t}T00:00:00+00:00") for i, t in enumerate(trials, 1)}}))
        return path

    base, ours, theirs = side("base", [1, 2]), side("ours", [1, 3]), side("theirs", [1, 2, 4])
    merged, _ = records_merge.merge(base, ours, theirs)  # ours moved trial 2 to the archive
    assert [d["config"]["t"] for d in merged["trials"].values()] == [1, 3, 4]
    other_fingerprint = {**FINGERPRINT, "name": "Other CPU"}
    other = side("other", [1], other_fingerprint)
    # "merge by hand" asked for what every reader refuses: one device's measurements in another's file
    name = f"records/{device_id(FINGERPRINT)}.json"
    with pytest.raises(RecordsError, match=re.escape(
            f"{name}: ours holds records of {device_id(FINGERPRINT)}, theirs of {device_id(other_fingerprint)}: "
            f"measurements of one device are never another's. The merge stopped and left ours alone in the file, "
            f"without theirs' trials: do not add it as it is; `git merge --abort`, rename the file of the branch "
            f"merged in to records/{device_id(other_fingerprint)}.json (`git mv`, as its device table says) and "
            f"commit it (where the merge then finds this file deleted there, keep ours: `git add` it), then merge "
            f"again")):
        records_merge.merge(base, ours, other, name)


def test_a_trial_both_sides_measured_keeps_both_measurements_and_the_store_reads_the_later(tmp_path):
    """The merge kept one document per trial: the earlier side's samples were lost."""
    def side(name, trials):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": {"1": FINGERPRINT}, "trials": dict(enumerate(trials, 1))}))
        return path

    early = trial({"vec": 4}, stats={"median": 1.0}, timestamp="2026-11-02T00:00:00+00:00")
    late = trial({"vec": 4}, stats={"median": 1.1}, timestamp="2026-11-03T00:00:00+00:00")
    other = trial({"vec": 8}, timestamp="2026-11-01T00:00:00+00:00")
    merged, _ = records_merge.merge(side("base", [other]), side("ours", [other, late]), side("theirs", [other, early]))
    assert list(merged["trials"].values()) == [other, early, late]
    path = tmp_path / "records" / f"{device_id(FINGERPRINT)}.json"
    path.parent.mkdir()
    AtomicJSONStorage(path).write(merged)
    store = RecordStore(path)
    assert store.trials() == [other, late]
    assert store.lookup("k", "abc", (4, 8), "float32", {"vec": 4})["stats"]["median"] == 1.1


@pytest.mark.parametrize("committed", [False, True])
def test_a_records_file_with_conflict_markers_says_how_to_merge_both_sides(tmp_path, committed):
    """Committed as it was (the fix the driver asks of a branch whose file has the markers), the
    commands read git's index stages, which a commit empties: they stopped without a word."""
    path = tmp_path / "records" / "cpu-x.json"
    path.parent.mkdir()
    path.write_text('{"trials": {\n<<<<<<< HEAD\n  "1": {}\n=======\n  "1": {}\n>>>>>>> other\n}}\n')
    with pytest.raises(RecordsError, match=r"cpu-x.json: holds git conflict markers .*") as caught:
        RecordStore(path)
    # the commands, run as given in a conflicted checkout where both sides added the file (no stage 1)
    repo = tmp_path / "repo"
    (repo / "records").mkdir(parents=True)

    def git(*args):
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo,
                              capture_output=True, text=True)
    git("init", "-q", "-b", "main")
    git("commit", "-q", "--allow-empty", "-m", "root")
    for branch, t in (("a", 1), ("b", 2)):
        git("checkout", "-q", "-b", branch, "main")
        (repo / "records").mkdir(exist_ok=True)  # git removed it with the other branch's file
        AtomicJSONStorage(repo / "records" / "cpu-x.json").write(
            {"device": {"1": FINGERPRINT}, "trials": {"1": trial({"t": t}, timestamp=f"2026-11-0{t}")}})
        git("add", "-A")
        git("commit", "-qm", branch)
    assert git("merge", "-q", "a").returncode != 0  # add/add: conflict markers
    if committed:
        git("commit", "-qam", "merged with the markers")
        assert "<<<<<<<" in git("show", "HEAD:records/cpu-x.json").stdout
    command = str(caught.value).split("in its folder: ", 1)[1]
    done = subprocess.run(["bash", "-c", command], cwd=repo / "records", capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert [t["config"]["t"] for t in RecordStore(repo / "records" / "cpu-x.json").trials()] == [1, 2]


def test_a_merge_says_which_final_round_counts_where_both_sides_tuned_a_task_and_keeps_unknown_tables(tmp_path):
    def side(name, checks, extra=None):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": {"1": FINGERPRINT}, "checks": {
            str(i): {"kind": "tune", "kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "all",
                     "timestamp": when} for i, when in enumerate(checks, 1)}, **(extra or {})}))
        return path

    base = side("base", ["2026-11-01T00:00:00+00:00"])
    ours = side("ours", ["2026-11-01T00:00:00+00:00", "2026-11-03T00:00:00+00:00"])
    theirs = side("theirs", ["2026-11-01T00:00:00+00:00", "2026-11-02T00:00:00+00:00"],
                  {"future": {"1": {"what": "a newer tunebench's table"}}})
    merged, notes = records_merge.merge(base, ours, theirs)
    assert notes == [
        "k[all-float32] on cpu: both sides tuned it; the later final round (2026-11-03T00:00:00+00:00) is the one used"]
    assert [c["timestamp"][:10] for c in merged["checks"].values()] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert list(merged["future"].values()) == [{"what": "a newer tunebench's table"}]
    assert list(merged["format"].values()) == [{"version": FORMAT}]  # sides from before formats: stamped


def test_a_conflict_resolved_by_hand_with_both_sides_document_ids_is_refused_and_merged_by_the_driver(tmp_path):
    """Both branches numbered their new documents alike; "accept both" left each id twice, the
    JSON reader kept the last, and the gate rewrote the file without the other branch's."""
    repo = tmp_path / "repo"
    (repo / "records").mkdir(parents=True)
    name = f"{device_id(FINGERPRINT)}.json"
    path = repo / "records" / name

    def git(*args):
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo,
                              capture_output=True, text=True)
    git("init", "-q", "-b", "main")
    store = RecordStore.for_device(repo / "records", FINGERPRINT)
    store.add(trial({"t": 0}, timestamp="2026-11-01"))
    store.compact()
    git("add", "-A")
    git("commit", "-qm", "base")
    for branch, t in (("a", 1), ("b", 2)):
        git("checkout", "-q", "-b", branch, "main")
        store = RecordStore.for_device(repo / "records", FINGERPRINT)
        store.add(trial({"t": t}, timestamp=f"2026-11-0{t + 1}"))
        store.compact()
        git("commit", "-qam", branch)
    assert git("merge", "-q", "a").returncode != 0  # a line conflict: both added trial "2"
    lines = path.read_text().splitlines()  # "accept both", and the comma between them
    lines = [f"{line}," if line.startswith('  "2"') and lines[i + 1] == "=======" else line
             for i, line in enumerate(lines) if not line.startswith(("<<<<<<<", "=======", ">>>>>>>"))]
    path.write_text("\n".join(lines) + "\n")
    assert sorted(json.loads(path.read_text())["trials"]) == ["1", "2"]  # what a JSON reader sees
    git("commit", "-qam", "resolved by hand")
    text = path.read_text()
    for opening in (lambda: RecordStore(path), lambda: RecordStore.for_device(repo / "records", FINGERPRINT)):
        with pytest.raises(RecordsError, match=re.escape(f"{path}: table 'trials' holds document id 2 twice")) as caught:
            opening()
    assert path.read_text() == text
    # the commands given, run where the hand merge was committed: both sides' trials, once each
    command = str(caught.value).split("in its folder: ", 1)[1]
    done = subprocess.run(["bash", "-c", command], cwd=repo / "records", capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert [t["config"]["t"] for t in RecordStore(path).trials()] == [0, 1, 2]


def test_another_devices_trials_copied_into_this_devices_file_are_refused_naming_it(tmp_path):
    """A hand merge copied the Zen 5 records' documents into this device's file: best() served
    them and the gate judged against them."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    store.compact()
    other = device_id({**FINGERPRINT, "name": "AMD EPYC", "family": 26, "model": 2})
    data = json.loads(store.path.read_text())
    data["trials"].update({"7": trial({"vec": 2}, device=other), "8": trial({"vec": 4}, device=other)})
    text = json.dumps(data)
    store.path.write_text(text)
    for opening in (lambda: RecordStore(store.path), lambda: RecordStore.for_device(tmp_path, FINGERPRINT)):
        with pytest.raises(RecordsError, match=re.escape(
                f"{store.path}: 2 of its trials (the first: trial 7) are measurements of {other} (their 'device'), "
                f"not of {store.device}, as the file's name says")):
            opening()
    assert store.path.read_text() == text


@pytest.mark.parametrize("template_changed_on", ["ours", "theirs"])
def test_where_both_sides_tuned_a_task_the_round_of_the_template_one_side_changed_is_read_after_any_merge(
        tmp_path, template_changed_on):
    """Branch C edited the template and tuned; branch D tuned the old one again later. The merge
    read D's round, of a template the merged tree no longer holds: the gate failed unchanged code
    and best() served D's pick, while the records held a round for the merged template."""
    def round_(source, when, winner):
        return {"kind": "tune", "kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "all",
                "source_hash": source, "setup_hash": "s", "shapes": [], "winner": winner, "timestamp": when}

    def task(source, warm_from=None):
        return {"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "all", "source_hash": source,
                "setup_hash": "s", "warm_from": warm_from}

    def side(name, tasks, checks, trials=()):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": {"1": FINGERPRINT}, "tasks": dict(enumerate(tasks, 1)),
                                    "checks": dict(enumerate(checks, 1)), "trials": dict(enumerate(trials, 1))}))
        return path

    tuned = round_("old", "2026-11-01T00:00:00+00:00", 0)
    edited = round_("new", "2026-11-02T00:00:00+00:00", 1)  # C: the template edited, tuned
    again = round_("old", "2026-11-03T00:00:00+00:00", 2)  # D: the old template, tuned again later
    base = side("base", [task("old")], [tuned])
    c = side("c", [task("new")], [tuned, edited])
    d = side("d", [task("old", warm_from="x")], [tuned, again])
    ours, theirs = (c, d) if template_changed_on == "ours" else (d, c)
    merged, notes = records_merge.merge(base, ours, theirs)
    rounds = [r for r in merged["checks"].values() if r["kind"] == "tune"]
    assert [r["winner"] for r in rounds] == [0, 2, 1]  # every round kept; C's read last
    assert [t["source_hash"] for t in merged["tasks"].values()] == ["new"]
    assert notes == [f"k[all-float32] on cpu: both sides tuned it; {template_changed_on[:-1]} side's final round "
                     f"(2026-11-02T00:00:00+00:00), the only one of a template or declaration changed since the "
                     f"base, is the one used, as git keeps that side's template; the other side's "
                     f"(2026-11-03T00:00:00+00:00) is kept as history"]
    # a later merge with a branch that tuned nothing of it keeps that order, whichever side it is
    merged_path = tmp_path / "merged.json"
    AtomicJSONStorage(merged_path).write(merged)
    other = side("e", [task("old")], [tuned], [trial({"vec": 1}, timestamp="2026-11-04T00:00:00+00:00")])
    for sides in ((merged_path, other), (other, merged_path)):
        later, _ = records_merge.merge(base, *sides)
        assert [r["winner"] for r in later["checks"].values() if r["kind"] == "tune"] == [0, 2, 1]


def test_a_merge_judges_what_changed_by_the_bases_template_not_its_last_round_of_one_reverted_since(tmp_path):
    """The base edited the template, tuned, and reverted it (the re-tune reused every trial: no new
    round). Its last round, of the reverted template, was taken for the base's, so a branch that
    tuned the unchanged template counted as a change too, and its later round was the one used."""
    def round_(source, when, winner):
        return {"kind": "tune", "kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "all",
                "source_hash": source, "setup_hash": "s", "shapes": [], "winner": winner, "timestamp": when}

    def side(name, source, checks):
        path = tmp_path / f"{name}.json"
        task = {"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "all", "source_hash": source,
                "setup_hash": "s"}
        path.write_text(json.dumps({"device": {"1": FINGERPRINT}, "tasks": {"1": task},
                                    "checks": dict(enumerate(checks, 1))}))
        return path

    history = [round_("old", "2026-11-01T00:00:00+00:00", 0), round_("v2", "2026-11-02T00:00:00+00:00", 1)]
    base = side("base", "old", history)  # reverted to "old": its description says so, its last round does not
    edited = side("b", "new", [*history, round_("new", "2026-11-03T00:00:00+00:00", 2)])
    again = side("a", "old", [*history, round_("old", "2026-11-04T00:00:00+00:00", 3)])
    merged, notes = records_merge.merge(base, edited, again)
    assert [r["winner"] for r in merged["checks"].values()][-1] == 2  # the edited template's round, read last
    assert notes == ["k[all-float32] on cpu: both sides tuned it; our side's final round (2026-11-03T00:00:00+00:00), "
                     "the only one of a template or declaration changed since the base, is the one used, as git keeps "
                     "that side's template; the other side's (2026-11-04T00:00:00+00:00) is kept as history"]


def test_a_process_forked_while_another_thread_loads_records_collects_its_garbage():
    """The collector is off while documents load; a data-loader worker forked in that window
    kept it off for good (19 of 33 workers), as no thread of its own would end the load."""
    import gc
    import threading

    from tunebench.records import bulk

    loading, done = threading.Event(), threading.Event()

    def load():
        with bulk():
            loading.set()
            done.wait(10)

    thread = threading.Thread(target=load)
    thread.start()
    loading.wait(10)
    assert not gc.isenabled()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        with bulk():  # a load of its own starts and ends as in any process
            pass
        os.write(write, b"1" if gc.isenabled() else b"0")
        os._exit(0)
    os.close(write)
    child = os.read(read, 1)
    os.waitpid(pid, 0)
    done.set()
    thread.join()
    assert child == b"1" and gc.isenabled()


@pytest.mark.parametrize("field, value, shown", [
    ("samples", ["0.5", "0.6"], "its samples are ['0.5', '0.6']"),
    ("samples", [0.0, 0.5], "its samples are [0.0, 0.5]"),
    ("samples", [-1.0], "its samples are [-1.0]"),
    ("samples", [float("nan")], "its samples are [nan]"),
    ("samples", None, "its samples are None"),
    ("samples", "0.5", "its samples are '0.5'"),
    ("samples", [], "its samples are []"),
    ("stats", {"median": float("nan")}, "its stats are {'median': nan}, without a median time"),
    ("stats", {"median": float("inf")}, "its stats are {'median': inf}, without a median time"),
    ("stats", {"median": 0}, "its stats are {'median': 0}, without a median time"),
    ("stats", {"median": None}, "its stats are {'median': None}, without a median time"),
])
def test_a_trial_whose_times_are_not_positive_times_is_refused_naming_file_kernel_config_and_shape(
        tmp_path, field, value, shown):
    """They were read unchecked: a median of 0 or infinity ranked silently first or last, text
    samples a TypeError and empty ones an IndexError when a resumed tune took the trial as its
    incumbent; every reader gets this one line instead, the merge driver too, and the file is
    left as it was."""
    path = tmp_path / f"{device_id(FINGERPRINT)}.json"
    good = trial({"vec": 1}, samples=[0.5, 0.6], stats={"median": 0.55})
    with TinyDB(path) as db:
        db.table("trials").insert_multiple([good, {**trial({"vec": 2}, samples=[0.5]), field: value}])
    before = path.read_bytes()
    said = re.escape(f"{path}: trial 2: {shown}") + r".*" + re.escape(
        ", in the trial of k [vec:2] on shape [4, 8]; the file is left untouched")
    with pytest.raises(RecordsError, match=said):
        RecordStore(path)
    with pytest.raises(RecordsError, match=re.escape(f"{shown}") + r".*" + re.escape("k [vec:2] on shape [4, 8]")):
        records_merge.merge(path, path, path)
    unread = []
    assert stores(tmp_path, unread) == [] and re.match(said, unread[0])
    assert path.read_bytes() == before
    good_path = tmp_path / "other.json"
    with TinyDB(good_path) as db:
        db.table("trials").insert(good)
    assert RecordStore(good_path).trials() == [good]  # a good file beside it still reads


@pytest.mark.parametrize("values", [[], [1.5, 2, 3e-3], [1.5, 0.0], [1.5, -2], [float("nan"), 1.0], [1.0, float("nan")],
                                    [1.0, float("inf")], [1.0, True], [1.0, "2"], [1.0, None], [np.float64(2.0), 1.0],
                                    [np.float64(-2.0)]])
def test_a_list_of_times_is_judged_at_once_as_each_time_is_judged(values):
    """A million-config cache's runs were judged one call per run, a third of its load."""
    assert measured_times(values) == all(measured_time(v) for v in values)


def test_a_merge_keeps_ours_document_ids_and_table_order_so_its_diff_shows_only_what_theirs_added(tmp_path):
    """The merge numbered every document anew from 1 and wrote its tables in an order of its own
    (theirs' sources first): after one side moved a trial to the archive, every line of the file
    changed in the merge commit, which a reviewer must read to find the few that theirs added."""
    def side(name, trials, sources):
        path = tmp_path / f"{name}.json"
        AtomicJSONStorage(path).write({
            "device": {"1": FINGERPRINT}, "format": {"1": {"version": FORMAT}}, "tasks": {}, "checks": {},
            "sources": {str(i): {"kernel": "k", "source_hash": h, "text": h} for i, h in sources.items()},
            "trials": {str(i): trial({"t": t}, timestamp=f"2026-11-0{t}T00:00:00+00:00") for i, t in trials.items()}})
        return path

    base = side("base", {1: 1, 2: 2}, {1: "s1"})
    ours = side("ours", {1: 1, 2: 2, 3: 3}, {1: "s1", 2: "s2"})
    theirs = side("theirs", {2: 2, 3: 4}, {1: "s1", 2: "s3"})  # moved trial 1 to the archive, measured 4
    merged, _ = records_merge.merge(base, ours, theirs)
    assert list(merged) == ["device", "format", "tasks", "checks", "sources", "trials"]
    assert {i: d["config"]["t"] for i, d in merged["trials"].items()} == {"2": 2, "3": 3, "4": 4}
    assert {i: d["source_hash"] for i, d in merged["sources"].items()} == {"1": "s1", "2": "s2", "3": "s3"}
    path = tmp_path / "records" / f"{device_id(FINGERPRINT)}.json"
    path.parent.mkdir()
    AtomicJSONStorage(path).write(merged)
    lines = {line.rstrip(",") for line in path.read_text().splitlines()}
    gone = [line.rstrip(",") for line in ours.read_text().splitlines() if line.rstrip(",") not in lines]
    assert gone == [f'  "1": {json.dumps(RecordStore(ours).trials()[0])}']  # the trial theirs moved away
    assert [t["config"]["t"] for t in RecordStore(path).trials()] == [2, 3, 4]


def crlf(path: Path) -> None:
    """``path`` as a checkout with CRLF line endings gives it (``sed -i 's/$/\\r/'``)."""
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))


def endings(path: Path) -> set[bytes]:
    """The line endings of a file's lines."""
    return {b"\r\n" if line.endswith(b"\r\n") else b"\n" for line in path.read_bytes().splitlines(keepends=True)}


def test_a_records_file_and_archive_with_crlf_line_endings_are_read_and_keep_them_when_written(tmp_path):
    """A records file checked out with CRLF (committed so) was rewritten with LF by the next tune:
    its diff showed every line changed. Each file keeps the endings it has; a new one gets LF."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 4}, samples=[1.0]))
    store.compact()
    store.add(trial({"vec": 4}, samples=[2.0]))  # measured again: the first moves to the archive
    store.compact()
    for path in (store.path, store.archive):
        crlf(path)
    again = RecordStore.for_device(tmp_path, FINGERPRINT)
    assert [t["samples"] for t in again.trials()] == [[2.0]] and len(again.triage().latest) == 1
    assert [s.path for s in stores(tmp_path, [])] == [store.path]
    again.add(trial({"vec": 8}))
    again.add(trial({"vec": 4}, samples=[3.0]))
    assert endings(again.journal) == {b"\n"}  # the journal is new, and never committed
    again.compact()
    assert endings(store.path) == endings(store.archive) == {b"\r\n"}
    assert [t["samples"] for t in RecordStore(store.path).trials(config={"vec": 4})] == [[3.0]]
    assert len(store.archive.read_bytes().splitlines()) == 2
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    ours.write_bytes(store.path.read_bytes())
    theirs.write_text(json.dumps({"device": {"1": FINGERPRINT}, "trials": {"1": trial({"vec": 16})}}))
    records_merge.merge_into(tmp_path / "base.json", ours, theirs, "records/x.json")  # git's merge driver
    assert endings(ours) == {b"\r\n"} and {t["config"]["vec"] for t in RecordStore(ours).trials()} == {4, 8, 16}
    fresh = RecordStore.for_device(tmp_path / "new", FINGERPRINT)
    fresh.add(trial({"vec": 4}))
    fresh.compact()
    assert endings(fresh.path) == {b"\n"}


def test_a_tune_keeps_the_crlf_endings_of_records_that_best_the_gate_and_the_report_read(twice_project, pytester,
                                                                                          quiet_verdicts):
    from tunebench.cli import main
    from tunebench.lookup import lookup

    root = twice_project
    assert "failed" not in pytester.runpytest("suites", *TUNE, "-k", "small").parseoutcomes()
    (path,) = (root / "records").glob("*.json")
    crlf(path)
    assert lookup("twice", (4096,), records=root / "records", suites=root / "suites").source == "tuned"
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "report")]) == 0
    pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small").assert_outcomes(
        passed=1, deselected=1)
    assert "failed" not in pytester.runpytest("suites", *TUNE, "-k", "large").parseoutcomes()
    assert endings(path) == {b"\r\n"} and {t["bucket"] for t in RecordStore(path).tasks()} == {"small", "large"}
