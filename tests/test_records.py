import json

import pytest
from tinydb import TinyDB

from tunebench.records import RecordsError, RecordStore, device_id

FINGERPRINT = {"target": "cpu", "name": "Test CPU 9000", "machine": "x86_64", "threads": 2}


def trial(config, shape=(4, 8), status="ok", **extra):
    return {"kernel": "k", "source_hash": "abc", "shape": list(shape), "dtype": "float32",
            "config": config, "status": status, "device": "d", "stats": {"median": 1.0}, **extra}


def test_device_id_is_readable_and_follows_the_fingerprint():
    assert device_id(FINGERPRINT).startswith("cpu-test-cpu-9000-2t-")
    assert device_id(FINGERPRINT) == device_id(dict(reversed(list(FINGERPRINT.items()))))
    assert device_id({**FINGERPRINT, "threads": 1}) != device_id(FINGERPRINT)


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
    assert db.table("tasks").all()[0]["bucket"] == "b"


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
    with pytest.raises(RecordsError, match="trial 1 lacks source_hash"):
        RecordStore.for_device(tmp_path, FINGERPRINT)


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


def test_folding_twice_keeps_each_trial_once(tmp_path):
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add(trial({"vec": 1}))
    saved = store.journal.read_text()
    store.compact()
    store.journal.write_text(saved)  # as if a run was killed after writing the file, before the unlink
    store.compact()
    assert len(TinyDB(store.path).table("trials").all()) == 1
