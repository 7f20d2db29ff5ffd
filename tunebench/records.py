"""The record store: one TinyDB JSON file per device fingerprint under ``records/``.

Tables: ``format`` (the layout's version, :data:`FORMAT`), ``device`` (the fingerprint),
``tasks`` (one document per kernel, target, dtype and bucket, describing the bucket and its
baseline), ``trials`` (one document per measured config on one shape, whatever its status),
``sources`` (every template version tuned, by source hash, so that a later source can be
measured against it, with the texts of the files it keeps as their hash alone: see
:meth:`RecordStore.put_source`) and ``checks`` (interleaved comparisons of a task's best
config: the confirmation at the end of tuning, and every gate run).

A trial is first appended to a journal beside the file (``.journal/<file>l``, one JSON line,
fsynced), which costs the same however many trials the file holds; the journal is folded into
the TinyDB file every ``COMPACT_EVERY_S`` seconds and when a run ends. Readers see both. Writes
of the file are atomic (temp file, fsync, rename) and every write is made under an exclusive
lock on a sidecar lock file, so concurrent writers lose nothing, a killed run loses at most the
trial in flight (a torn last journal line is dropped) and the next writer folds its journal in.
A file that does not parse is an error naming it, and is never overwritten.

A fold rewrites the whole TinyDB file, so the file holds at most :data:`ARCHIVE_ABOVE` trials:
beyond them the oldest move to an archive beside it (``<device>.archive.jsonl``, one trial per
line, only ever appended to), which readers see as part of the trials. A fold then costs the same
at a million trials as at twenty thousand, and the committed archive diffs as added lines. An
archive whose records file is gone (deleted to start over) is an orphan: nothing reads it, a tune
will not start a file beside it, and each says so, naming it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import hashlib
import json
import math
import os
import re
import stat
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tinydb import TinyDB
from tinydb.storages import Storage

from tunebench.buckets import Bucket
from tunebench.device import device_id, earlier_id
from tunebench.stamps import racy

TABLES = ("format", "device", "tasks", "trials", "sources", "checks")
#: The layout of records files that this tunebench writes and reads. A file says which layout it
#: was written in (its ``format`` table, stamped on the first write; a file from before it has none
#: and is format 1). A newer layout is refused, never misread or rewritten without its new fields.
FORMAT = 1
#: The most bytes of file texts one template version adds to the ``sources`` (see
#: :meth:`RecordStore.put_source`): a project's helpers and headers; beyond them (a vendored
#: library's thousands of headers) the files are kept as their hashes alone.
FILE_TEXT_BYTES = 256 << 10
#: Seconds between foldings of the journal into the file while trials are being added.
COMPACT_EVERY_S = 30.0
#: Trials the TinyDB file holds at most; a fold moves the oldest beyond it to the archive.
ARCHIVE_ABOVE = 20_000
TRIAL_KEYS = ("kernel", "source_hash", "shape", "dtype", "config", "status", "device")
#: Statuses of a trial that failed. ``pruned_resources`` is not a failure of the kernel (the
#: candidate cannot launch on this device) and ``early_stopped`` is a slower candidate.
FAILED = ("compile_error", "wrong_result", "out_of_bounds", "crashed", "timeout")
#: Runs that died while a config's candidate ran (see RecordStore.loading), or whose task stopped as
#: its worker was killed again and again (see WorkerKilled), or a cluster's devices whose own process
#: died as they ran its job (see tunebench.cluster), after which it is recorded crashed, not measured
#: again: one death may be the user's kill or a CI timeout, a second at the same config is the config.
DEATHS = 2
#: Every status a trial is recorded with: measured, stopped once clearly slower, set aside as
#: beyond the device's resources, or failed.
STATUSES = ("ok", "early_stopped", "pruned_resources", *FAILED)


#: A records file named as a device id is (its fingerprint's hash last): its device table must say so.
DEVICE_NAME = re.compile(r".+-[0-9a-f]{6}")
#: A document's id as TinyDB writes it: "01" beside "1" would be read as the same document, one lost.
DOC_ID = re.compile(r"0|[1-9][0-9]*")
#: How ``tunebench export``'s JSON file begins: its ``generated_by`` ("tunebench 0.1.0 export"),
#: after the other strings of its top level where a formatter sorted its keys (``description``,
#: ``device``); a records file's top level holds tables, no string.
EXPORTED = re.compile(rb'\s*\{\s*(?:"(?:[^"\\]|\\.)*"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*)*'
                      rb'"generated_by"\s*:\s*"tunebench [^"]* export"')
#: How much of a JSON file :func:`exported` reads: its top level's strings, a device's description among them.
EXPORTED_HEAD = 65536


class RecordsError(RuntimeError):
    """A records file that cannot be read or written; the message names the file, says what is
    wrong with it, then, after the first "; ", what to do (which a merge of git's copies leaves out)."""


#: ``setup_hash`` of :meth:`RecordStore.lookup` for a trial of any declaration.
ANY = "*"


def config_key(config: Mapping) -> tuple:
    """A hashable, order-free form of a config."""
    return tuple(sorted(config.items()))


def config_text(config: Mapping) -> str:
    """A config as people read it, in every message and table: ``vec:8 unroll:4``."""
    return " ".join(f"{k}:{v}" for k, v in config.items())


def revision(check: Mapping) -> str:
    """The commit a check ran at, "+dirty" where the tree held uncommitted changes then: what it
    measured is in no commit, and a regression it found was credited to one that never held it.
    "no commit" outside git or before a repository's first commit (a report read "fail at ?")."""
    if not check.get("git_commit"):
        return "no commit"
    return f"{check['git_commit'][:7]}{'+dirty' if check.get('git_dirty') else ''}"


#: Why a gate's check of today's build against the build as tuned passed unmeasured: the two hold
#: the same machine code (a comment or whitespace edited), and their ratio would be noise alone.
SAME_MACHINE_CODE = "today's build is the recorded one's machine code"


def verdict_text(verdict: Mapping) -> str:
    """A gate verdict as the records keep it, in the gate's words without its outcome: ``best/baseline
    on (2048,): 1.202x (7 processes: 1.042-1.286; limit 1.100x)``. The gate's lines and the report's
    read alike. One not measured (its builds the same machine code) says why in their place."""
    if verdict.get("unmeasured"):
        return f"{verdict['what']} on {tuple(verdict['shape'])}: not measured, {verdict['unmeasured']}"
    ratios = verdict["ratios"]
    spread = f": {min(ratios):.3f}-{max(ratios):.3f}" if len(ratios) > 1 else ""
    return (f"{verdict['what']} on {tuple(verdict['shape'])}: {statistics.median(ratios):.3f}x "
            f"({len(ratios)} processes{spread}; limit {verdict['limit']:.3f}x)")


def holds_back(what: str, outcome: str) -> bool:
    """Whether a gate check measured today's build slower than its build as tuned without a
    failure: kept as noisy (every process slower, too noisy to fail), or unsure (its median beyond
    the limit, not every process slower). A tune would record that build as the reference, so the
    gate and the report's note both ask for a quiet gate first."""
    return what.startswith("best against the ") and outcome in ("noisy", "unsure")


def trial_key(kernel: str, source_hash: str, shape, dtype: str, config: Mapping) -> tuple:
    return kernel, source_hash, tuple(shape), dtype, config_key(config)


def trial_identity(doc: Mapping) -> tuple:
    """A trial's identity: its config on its shape, for its template and the rest of its task's
    declaration (``setup_hash``; absent from records made before it was kept)."""
    return (*trial_key(doc["kernel"], doc["source_hash"], doc["shape"], doc["dtype"], doc["config"]),
            doc.get("setup_hash"))


def _candidate(key) -> list | None:
    """Of a trial's identity as a mark keeps it (JSON), its config on its shape for its kernel and
    dtype, whatever template and declaration built it; None where the key names no trial."""
    try:
        kernel, _, shape, dtype, config, *_ = json.loads(key)
    except (TypeError, ValueError):
        return None
    return [kernel, shape, dtype, config]


def _dump(data: Mapping) -> str:
    """TinyDB's JSON, one document per line so that committed records diff well."""
    parts = []
    for table, docs in data.items():
        rows = ",\n".join(f"  {json.dumps(doc_id)}: {json.dumps(doc)}"
                          for doc_id, doc in docs.items())
        parts.append(f"{json.dumps(table)}: {{\n{rows}\n }}" if rows else f"{json.dumps(table)}: {{}}")
    return "{" + ",\n".join(parts) + "}\n"


class _Bulk:
    """The loads in progress, over every thread: the collector is off while any runs, and on
    again, if it was on before the first, once the last ends. A process forked meanwhile (a
    framework's data-loader workers) has none of the threads that would end them: it starts
    with the collector as it was (off for good, a worker never collected a cycle) and a lock
    nobody holds."""

    def __init__(self):
        self.lock = threading.Lock()
        self.loads = 0
        self.enabled = False  # the collector's state before the first load

    def __enter__(self) -> None:
        with self.lock:
            if self.loads == 0:
                self.enabled = gc.isenabled()
            self.loads += 1
            gc.disable()

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.loads = max(0, self.loads - 1)  # 0 already in a child forked by this load's own thread
            if self.loads == 0 and self.enabled:
                gc.enable()

    def forked(self) -> None:
        self.lock = threading.Lock()
        if self.loads:
            self.loads = 0
            if self.enabled:
                gc.enable()


_BULK = _Bulk()
os.register_at_fork(after_in_child=_BULK.forked)


def bulk() -> _Bulk:
    """Python's cyclic collector runs each time enough objects were allocated and scans every
    live one, so loading N documents costs far more than N times one (5.4 s against 2.9 s for
    100k trials); documents hold no cycles, so collection waits until they are loaded."""
    return _BULK


class NewerFormat(RecordsError):
    """A records file of a newer layout than this tunebench reads (see :data:`FORMAT`)."""


class NotWritable(RecordsError):
    """Records that cannot be written where they are (a read-only folder or file)."""


def _writable(path: Path) -> None:
    """Fail early, in one line, where the records could not be written (a read-only folder or
    file); creates nothing."""
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not folder.is_dir():  # a --tune-records that names a file
        raise NotWritable(f"{path}: records cannot be written there ({folder} is a file, not a folder): pass "
                          f"--tune-records a folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        unreadable = path.exists() and not os.access(path, os.R_OK)  # another user's 0600 file
        raise NotWritable(f"{path}: records cannot be written there ({folder if not path.exists() else path} "
                          f"{'cannot be read or written by this user' if unreadable else 'is read-only'}): fix the "
                          f"permissions or pass --tune-records DIR")


def _unwritten(path: Path, error: OSError) -> NotWritable:
    """A write that failed (a full disk, a file-size or quota limit) as one error naming the
    file: what was written before it stays, and the next run resumes from it."""
    fix = "free space there" if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else "make it writable"
    return NotWritable(f"{path}: records cannot be written ({error.strerror or error}); every record written "
                       f"before is kept: {fix} (or pass --tune-records DIR) and run again")


#: What a run keeps beside the records that is no record: its locks, its journal of trials not
#: yet folded in, the lookup's index, a file midway through its replacement.
TRANSIENTS = (".locks/", ".journal/", ".index/", ".*.tmp")


def ignore_transients(folder: Path) -> None:
    """A ``.gitignore`` in the records folder naming :data:`TRANSIENTS`, where it has none: the
    README says to commit the folder whole (``git add records/``), which staged a user's lock
    files with the records. Left as it is where there is one (the user's own); nothing where the
    folder cannot be written (a read-only checkout is still read), nor a torn one where the disk is
    full (kept as a user's own, it was never repaired)."""
    ignore = folder / ".gitignore"
    if ignore.exists():
        return
    try:
        write_atomic(ignore, "# kept by tunebench beside the records, never committed\n" + "\n".join(TRANSIENTS) + "\n",
                     f"{os.getpid()}.tmp")
    except OSError:
        pass


def companions(path: Path) -> tuple[Path, Path]:
    """A records file's archive and journal: beside the file itself, where ``path`` is a link
    into a shared store, whichever path a run or a lookup reaches it by."""
    real = Path(os.path.realpath(path))
    return real.with_name(f"{real.stem}.archive.jsonl"), real.parent / ".journal" / f"{real.name}l"


def orphaned(path: Path) -> str | None:
    """Why the archive beside a records file that is gone is not read (its JSON deleted to start
    over, the archive left behind), else None: read with a file tuned anew, or by the gate, it
    would bring back the trials the deletion dropped, which best() no longer serves."""
    archive = companions(path)[0]
    if os.path.exists(path) or not archive.exists():
        return None
    renamed = next((p for p in records_files(Path(path).parent) if _device_of(p) == Path(path).stem), None)
    if renamed is not None:  # `git mv` of the file alone: restoring the old name from git failed
        return (f"{archive} is left from {Path(path).name}, which is not there: its trials are not read. "
                f"{renamed.name} holds this device's records under another name: name it {Path(path).name} "
                f"again (`git mv {renamed} {path}`, or `mv` outside git)")
    return (f"{archive} is left from {Path(path).name}, which is not there: its trials are not read. If "
            f"{Path(path).name} was deleted to tune anew, delete the archive too (`git rm {archive}`, or `rm` outside "
            f"git); else restore {Path(path).name} (`git checkout HEAD -- {path}`, where the last commit holds it)")


def _device_of(path: Path) -> str | None:
    """The device id a records file's device table names, None where it cannot be read."""
    try:
        recorded = next(iter(json.loads(path.read_bytes()).get("device", {}).values()), None)
        return device_id(recorded) if isinstance(recorded, dict) else None
    except Exception:  # noqa: BLE001 - any file it cannot read names no device: only a hint is looked for
        return None


#: Lock files held by this process: a forked worker closes its copies (see :func:`_held`).
_HELD: set[int] = set()


def _close_held() -> None:
    for fd in _HELD:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


os.register_at_fork(after_in_child=_close_held)


@contextlib.contextmanager
def _held(path: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive flock on ``path``; ``waiting()`` is called first where another process holds
    it. A flock belongs to the open file, which a forked child shares: a worker outliving its
    killed parent would hold the lock forever, so children close their copies at once."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    _HELD.add(fd)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        _HELD.discard(fd)
        os.close(fd)  # releases the lock


def file_format(path: Path, data: Mapping) -> int:
    """The layout a file's tables were written in (1 for a file from before it was stamped)."""
    versions = [d.get("version") for d in data.get("format", {}).values()]
    if not versions:
        return 1
    if len(versions) > 1 or not isinstance(versions[0], int) or isinstance(versions[0], bool):
        raise RecordsError(f"{path}: table 'format' holds {versions!r}, not one version number; restore the file "
                           f"(git checkout)")
    return versions[0]


def _validate(path: Path, data) -> None:
    if not isinstance(data, dict):
        raise RecordsError(f"{path}: not a tunebench records file (top level is not an object)")
    if isinstance(data.get("generated_by"), str):  # asked for by name: its text was "table ... is not a map"
        raise RecordsError(f"{path}: the configs of `{data['generated_by']}`, not records of a device")
    for table, docs in data.items():
        if not isinstance(docs, dict) or not all(isinstance(d, dict) for d in docs.values()):
            raise RecordsError(f"{path}: table {table!r} is not a map of documents")
        wrong = next((doc_id for doc_id in docs if not DOC_ID.fullmatch(doc_id)), None)
        if wrong is not None:  # TinyDB reads each id as a number: a ValueError naming no file, at every reader
            raise RecordsError(f"{path}: table {table!r} holds document id {wrong!r}, not a number as TinyDB "
                               f"writes one (1, 2, ...); the file is left untouched: restore it (git checkout) or "
                               f"give the document the next free number")
    version = file_format(path, data)
    if version > FORMAT:
        raise NewerFormat(f"{path}: records format {version}, written by a newer tunebench (this one reads "
                           f"formats up to {FORMAT}); use the tunebench that wrote it, or a newer one (the file is "
                           f"left untouched)")
    for doc_id, doc in data.get("trials", {}).items():
        missing = [k for k in TRIAL_KEYS if k not in doc]
        wrong = f"lacks {', '.join(missing)}" if missing else trial_problem(doc)
        if wrong:
            raise RecordsError(f"{path}: trial {doc_id}{' ' if missing else ': '}{wrong}; the file is left "
                               f"untouched: restore it (git checkout) or remove the trial")
    _devices_named(path, data)
    for table, what, problem in (("checks", "check", _check_problem), ("tasks", "task", _described_problem),
                                 ("sources", "source", _described_problem)):
        for doc_id, doc in data.get(table, {}).items():
            wrong = problem(doc) if table == "checks" else problem(table, doc)
            if wrong:
                raise RecordsError(f"{path}: {what} {doc_id}: {wrong}; the file is left untouched: restore it (git "
                                   f"checkout) or remove the {what}")


#: What the error of a records file named by a GPU's id from before driver versions were left out says.
EARLIER_NAME = "by an earlier tunebench"


def _devices_named(path: Path, data: Mapping) -> None:
    """A file named as a device id holds that device's measurements alone: its device table
    and every trial say so (one renamed, or with another's records copied in by hand, served
    them as this device's)."""
    device = path.stem
    if not DEVICE_NAME.fullmatch(device):
        return
    recorded = next(iter(data.get("device", {}).values()), None)
    if recorded and device == earlier_id(recorded):
        today = device_id(recorded)
        files = " ".join([path.name, *(os.path.relpath(f, path.parent) for f in companions(path))])
        raise RecordsError(f"{path}: named {device} {EARLIER_NAME}, whose ids of GPUs changed with the driver "
                           f"and CUDA versions; this device's id is {today}. Rename it, its archive and journal, and "
                           f"their trials' device, in its folder: for f in {files}; do if [ -e \"$f\" ]; then sed -i "
                           f"'s/{device}/{today}/g' \"$f\" && mv \"$f\" \"$(echo \"$f\" | sed 's/{device}/{today}/')\"; "
                           f"fi; done (the file is left untouched)")
    if recorded and device_id(recorded) != device:  # renamed
        raise RecordsError(f"{path}: holds the records of {device_id(recorded)} (its device table), not of "
                           f"{device}, as its name says: measurements of one device are never another's; rename "
                           f"it back (the file is left untouched)")
    foreign = [(doc_id, doc["device"]) for doc_id, doc in data.get("trials", {}).items() if doc["device"] != device]
    if foreign:
        doc_id, other = foreign[0]
        raise RecordsError(f"{path}: {len(foreign)} of its trials (the first: trial {doc_id}) are measurements of "
                           f"{other} (their 'device'), not of {device}, as the file's name says: measurements of "
                           f"one device are never another's (another device's records copied in by hand?); the "
                           f"file is left untouched: restore it (git checkout), or remove that device's trials, "
                           f"tasks, sources and checks from it")


def _doc_order(doc_id: str) -> tuple:
    """A TinyDB document id's place: ids are the numbers of the order documents were inserted."""
    return (0, int(doc_id), "") if doc_id.isdigit() else (1, 0, doc_id)


def _shape(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


def trial_problem(doc: Mapping) -> str | None:
    """What in a trial has a type no tunebench writes (a hand edit, a bad merge), else None."""
    for key in ("kernel", "source_hash", "dtype", "status", "device"):
        if not isinstance(doc[key], str):
            return f"its {key!r} is {doc[key]!r}, not a string"
    if doc["status"] not in STATUSES:
        return f"its status is {doc['status']!r}, none of {', '.join(STATUSES)}"
    if not _shape(doc["shape"]):
        return f"its shape is {doc['shape']!r}, not a list of dims"
    if not isinstance(doc["config"], dict):
        return f"its config is {doc['config']!r}, not an object"
    for name, value in doc["config"].items():
        if not isinstance(value, (str, int, float, bool, type(None))):
            return f"its config's {name!r} is {value!r}, not one value"
    samples = doc.get("samples", [])
    if not isinstance(samples, list) or not measured_times(samples) or (
            doc["status"] == "ok" and "samples" in doc and not samples):
        return f"its samples are {samples!r}, not a list of positive times (ms), in {_which(doc)}"
    stats = doc.get("stats")
    if (stats is not None or doc["status"] == "ok") and not (
            isinstance(stats, dict) and measured_time(stats.get("median"))):
        return f"its stats are {stats!r}, without a median time, in {_which(doc)}"
    return None


def _which(doc: Mapping) -> str:
    """A trial in words, for a message: made only where one is said (every trial is checked on every read)."""
    return f"the trial of {doc['kernel']} [{config_text(doc['config'])}] on shape {doc['shape']}"


def measured_time(value) -> bool:
    """A measured time: a finite positive number (ranked, divided by, and its log taken)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def measured_times(values: list) -> bool:
    """Whether every value is a measured time, a list of plain numbers judged at C speed: one
    call per value took a third of the load of a million-config Kernel Tuner cache."""
    if not set(map(type, values)) <= {int, float}:
        return all(map(measured_time, values))
    return not values or (min(values) > 0 and max(values) < math.inf and not any(map(math.isnan, values)))


def _time(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


#: A final round's or gate run's figures per shape, as readers compute with them: a time or a
#: ratio, or a list of them (None where a finalist failed).
_CHECK_NUMBERS = ("baseline_ms", "best_ms", "baseline_trial_ms", "ratio", "trial_ratio")
_CHECK_LISTS = ("ratios", "finalist_ms", "finalist_trial_ms", "confirmed_ms")


def _check_problem(doc: Mapping) -> str | None:
    """What in a check (a final round or a gate run) has a type no tunebench writes, else None."""
    for key in ("kernel", "dtype", "bucket", "kind"):
        if not isinstance(doc.get(key), str):
            return f"its {key!r} is {doc.get(key)!r}, not a string"
    shapes = doc.get("shapes", [])
    if not isinstance(shapes, list) or not all(isinstance(e, dict) for e in shapes):
        return f"its shapes are {shapes!r}, not a list of objects"
    for entry in shapes:
        if not _shape(entry.get("shape")):
            return f"a shape is {entry.get('shape')!r}, not a list of dims"
        for key in ("best", "baseline"):
            if (key in entry or doc["kind"] == "tune") and not isinstance(entry.get(key, ""), (dict, type(None))):
                return f"its {key} on {entry['shape']} is {entry.get(key, 'missing')!r}, not a config"
        wrong = next((k for k in _CHECK_NUMBERS if k in entry and not (entry[k] is None or _time(entry[k]))), None) \
            or next((k for k in _CHECK_LISTS if k in entry and not (isinstance(entry[k], list) and all(
                v is None or _time(v) for v in entry[k]))), None)
        if wrong:
            return f"its {wrong} on {entry['shape']} is {entry[wrong]!r}, not {'a number' if wrong in _CHECK_NUMBERS else 'a list of numbers'}"
    return None


def _described_problem(table: str, doc: Mapping) -> str | None:
    """What a task's description or a kept source lacks that every reader looks it up by, or
    holds in a form no tunebench writes (its bucket's range, its heuristic's configs)."""
    keys = ("kernel", "target", "dtype", "bucket") if table == "tasks" else ("kernel", "source_hash", "text")
    wrong = next((k for k in keys if not isinstance(doc.get(k), str)), None)
    if wrong:
        return f"its {wrong!r} is {doc.get(wrong, 'missing')!r}, not a string"
    if table != "tasks":
        return _files_problem(doc.get("files", {}))
    if "range" in doc:
        try:
            Bucket.from_description(doc["range"])
        except Exception:  # noqa: BLE001 - whatever the description lacks: a bucket no reader can make
            return f"its range is {doc['range']!r}, not a bucket's description"
    baseline = doc.get("baseline", [])
    if not isinstance(baseline, list) or not all(
            isinstance(b, dict) and _shape(b.get("shape")) and isinstance(b.get("config"), dict) for b in baseline):
        return f"its baseline is {baseline!r}, not a list of shapes and the heuristic's configs"
    return None


def _files_problem(files) -> str | None:
    """What in a kept source's file texts (see :meth:`RecordStore.put_source`) no tunebench
    writes: each a text under the hash of its content, as the template names it, or the gate
    would build another file than the one tuned."""
    if not isinstance(files, dict):
        return f"its files are {files!r}, not an object of texts by their hash"
    wrong = next((h for h, t in files.items()
                  if not isinstance(t, str) or hashlib.sha256(t.encode()).hexdigest()[:16] != h), None)
    return f"its file {wrong!r} is not a text of that hash (sha256, 16 digits)" if wrong is not None else None


def _merge_command(name: str) -> str:
    """Shell commands, run in a records file's folder, that merge its three versions with
    tunebench's merge driver, from where git keeps them: its index stages while the file is
    unmerged, HEAD and MERGE_HEAD once it is added, else, once committed (the fix the driver asks
    of a branch whose file cannot be read, and a commit empties the stages), the newest merge whose
    branch merged in had changed the file since their base (``--full-history``: git's log leaves
    out a merge whose file is one parent's, the one a driver git could not start committed; a later
    merge of a branch that never touched the file is no such merge): its parents where it is the
    last commit to change the file, else HEAD's file and its branch's, so that what was committed
    since stays. Where ours or theirs is not found, they say so and stop before overwriting the file."""
    return (f"if [ -n \"$(git ls-files -u -- {name})\" ]; then set -- :1: :2: :3:; elif git rev-parse -q --verify "
            f"MERGE_HEAD >/dev/null; then set -- \"$(git merge-base HEAD MERGE_HEAD):\" HEAD: MERGE_HEAD:; else "
            f"c=; for m in $(git log --full-history --merges --format=%H -- {name}); do b=$(git merge-base $m^1 $m^2); "
            f"if [ \"$(git rev-parse -q --verify $m^2:./{name})\" != \"$(git rev-parse -q --verify $b:./{name})\" ]; then "
            f"c=$m; break; fi; done; o=HEAD; if [ -n \"$c\" ] && [ $c = \"$(git log -1 --full-history --format=%H -- "
            f"{name})\" ]; then o=$c^1; fi; set -- \"$(git merge-base $c^1 $c^2 2>/dev/null):\" $o: $c^2:; "
            f"fi; d=$(mktemp -d); i=0; for s in \"$@\"; do i=$((i+1)); git show $s./{name} > $d/$i.json 2>/dev/null "
            f"|| : > $d/$i.json; done; if [ -s $d/2.json ] && [ -s $d/3.json ]; then tunebench merge-records "
            f"$d/1.json $d/2.json $d/3.json && cp $d/2.json {name}; else echo \"{name}: no merge of it found, neither "
            f"under way nor committed by a merge whose branch had changed it: merge its two sides' versions with tunebench "
            f"merge-records BASE OURS THEIRS\" >&2; false; fi")


def unmerged(directory: str | Path) -> dict[Path, str]:
    """Each records file under ``directory`` that git holds unmerged, with what to do: where the
    merge driver could not start (a virtual environment moved) git leaves ours in place with no
    conflict marker, so it reads as records; added and committed so, theirs' measurements were lost
    without a word. Asked of git once per tune, gate or report, never by a lookup. Empty outside git."""
    directory = Path(directory)
    if not directory.is_dir():
        return {}
    try:
        listed = subprocess.run(["git", "ls-files", "-u", "-z", "--full-name", "--", "."], cwd=directory,
                                capture_output=True, check=True).stdout
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=directory, capture_output=True,
                             check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {}
    paths = {(Path(os.fsdecode(top)) / os.fsdecode(entry.split(b"\t", 1)[1])).resolve()
             for entry in listed.split(b"\0") if entry}
    return {path: f"{path}: git holds it unmerged, one side's records alone whatever it shows (a merge under way "
                  f"whose merge driver could not start, or refused: git's output says which); committed so, "
                  f"the other side's measurements are lost. With the driver set up (see the README's Records), "
                  f"merge it again in its folder: `git checkout -m -- {path.name}`, or: {_merge_command(path.name)}"
            for path in sorted(paths) if path.parent.resolve() == directory.resolve() and path.suffix == ".json"}


class _Repeats(dict):
    """A JSON object that names a key more than once: a JSON reader keeps only the last."""

    repeats: list[str]


def _keep_repeats(pairs: list[tuple]) -> dict:
    """A JSON object as a dict, a :class:`_Repeats` where it names a key more than once."""
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    found = _Repeats(found)
    keys = [k for k, _ in pairs]
    found.repeats = sorted({k for k in keys if keys.count(k) > 1}, key=_doc_order)
    return found


def _repeated(data) -> str | None:
    """What a file's tables or documents name twice (a hand-merged conflict), else None."""
    if isinstance(data, _Repeats):
        return f"it holds table {', '.join(map(repr, data.repeats))} twice"
    for table, docs in data.items() if isinstance(data, dict) else ():
        if isinstance(docs, _Repeats):
            ids = ", ".join(docs.repeats)
            return f"table {table!r} holds document id{'s' if len(docs.repeats) > 1 else ''} {ids} twice"
        for doc_id, doc in docs.items() if isinstance(docs, dict) else ():
            if isinstance(doc, _Repeats):
                return f"document {doc_id} of table {table!r} holds {', '.join(map(repr, doc.repeats))} twice"
    return None


class AtomicJSONStorage(Storage):
    """TinyDB storage that validates on read and replaces the file atomically on write. TinyDB
    reads the whole file for every table access; the parsed tables are kept while the file's
    inode, size, modification and change times stay the same (a write by anyone replaces the inode;
    a copy in place changes the ctime, whatever mtime it sets). Where
    the file changed within :data:`~tunebench.stamps.RACY_S` of a read, a write may follow unseen
    by them (see :mod:`tunebench.stamps`): its bytes are kept with the tables and read again at
    each read, which parses them only where they differ: a tune reads the file again right after
    each of its writes, and a parse of the shipped 1.7 MB file takes 0.1 s, a read of it 1 ms."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        #: (the file's stamp, its tables, its bytes where the stamp was racy, else None)
        self._cache: tuple[tuple, dict, bytes | None] | None = None

    def _stamp(self) -> tuple[tuple | None, bool]:
        """The file's (inode, size, mtime, ctime), None where there is none, and whether it is
        racy: a rewrite in place that a tool gave the old mtime again (``cp -p``, ``rsync -t``)
        keeps the first three, not the ctime the kernel sets."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None, True
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns), racy(st)

    def read(self):
        """The file's tables, or None when there is no file. Whatever else is wrong with it is
        one :class:`RecordsError` naming the file and what to do; the file is left as it is."""
        stamp, unsure = self._stamp()
        cached = self._cache
        if cached is not None and cached[0] == stamp and cached[2] is None:
            return cached[1]
        raw = self._bytes()
        if raw is None:
            self._cache = None
            return None
        if cached is not None and cached[2] == raw:
            data = cached[1]
        else:
            with bulk():
                data = self._parse(raw)
        self._cache = (stamp, data, raw if unsure else None)
        return data

    def _bytes(self) -> bytes | None:
        """The file's bytes, None where there is no file."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise RecordsError(f"{self.path}: cannot be read ({e.strerror}): fix its permissions") from None

    def _parse(self, raw: bytes) -> dict:
        untouched = "it is left untouched: restore it (git checkout) or move it away"
        if not raw.strip():
            raise RecordsError(f"{self.path}: empty records file; {untouched} (a new device's file is "
                               f"created by pytest --tune)")
        if raw.startswith(b"version https://git-lfs.github.com/spec/"):
            raise RecordsError(f"{self.path}: a Git LFS pointer, not the records: fetch them (`git lfs pull`, "
                               f"in GitHub Actions, actions/checkout with `lfs: true`)")
        if re.search(rb"^<<<<<<< ", raw, re.MULTILINE):
            raise RecordsError(
                f"{self.path}: holds git conflict markers (merged without tunebench's merge driver, see the "
                f"README's Records); to merge both sides' trials, in its folder: "
                f"{_merge_command(self.path.name)}") from None
        try:
            data = json.loads(raw.decode("utf-8"), object_pairs_hook=_keep_repeats)
        except UnicodeDecodeError as e:
            raise RecordsError(f"{self.path}: not a records file (binary data at byte {e.start}); "
                               f"{untouched}") from None
        except json.JSONDecodeError as e:
            raise RecordsError(f"{self.path}: corrupted records file ({e}); {untouched}") from None
        repeated = _repeated(data)
        if repeated:
            raise RecordsError(
                f"{self.path}: {repeated}: a conflict resolved by hand, both sides' documents under the same ids, "
                f"of which a reader keeps only the last; {untouched}. To merge both sides with tunebench's merge "
                f"driver (see the README's Records), in its folder: {_merge_command(self.path.name)}")
        _validate(self.path, data)
        # in the order they were recorded, whatever a tool did to the keys' order ("10" before "2"
        # sorted as text): the latest of a trial's measurements and of a task's final rounds is read
        return {table: dict(sorted(docs.items(), key=lambda item: _doc_order(item[0])))
                for table, docs in data.items()}

    def write(self, data) -> None:
        """Replace the file whole. Where it is a symlink (into a shared store), its target is
        replaced, not the link; the file keeps its mode, whatever this process's umask (077 made
        it the writer's alone, and another user's gate could no longer read it), and its line
        endings (see :func:`_ending`)."""
        self._cache = None  # TinyDB changed the tables it read: they are the file's only once written
        target = Path(os.path.realpath(self.path))
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = None
        ending = b"\n"  # a new file's
        with contextlib.suppress(OSError), open(target, "rb") as f:
            ending = _ending(f)
        raw = _dump(data).encode().replace(b"\n", ending)
        try:
            with open(tmp, "wb") as f:
                if mode is not None:
                    os.fchmod(f.fileno(), mode)
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except OSError as e:  # the file as it was, and no partial copy beside it taking the space
            tmp.unlink(missing_ok=True)
            raise _unwritten(target, e) from None
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._cache = (self._stamp()[0], data, raw)  # racy: just written

    def close(self) -> None:
        pass


def _append(path: Path, docs) -> None:
    """Documents as JSON lines at the end of ``path``, flushed to the disk before returning. A
    torn last line (a killed append: the document in flight, which :func:`_lines` drops) is cut
    off first: the next line joined to it was a corrupted line, and lost."""
    try:
        with open(path, "ab+") as f:
            f.truncate(_whole_lines(f))
            ending = _ending(f)
            f.write(b"".join(json.dumps(dict(doc)).encode() + ending for doc in docs))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:  # a torn last line is dropped when read, and cut off by the next append
        raise _unwritten(path, e) from None


def _ending(f) -> bytes:
    """The line ending of a file's last line, which its next write keeps: a records file checked
    out with CRLF (committed so) was rewritten with LF, and its diff showed every line changed."""
    end = f.seek(0, os.SEEK_END)
    f.seek(max(0, end - 2))
    return b"\r\n" if f.read(2) == b"\r\n" else b"\n"


def _whole_lines(f, block: int = 1 << 16) -> int:
    """The length of a file's whole lines: up to and with its last newline."""
    end = f.seek(0, os.SEEK_END)
    at = end
    while at > 0:
        start = max(0, at - block)
        f.seek(start)
        chunk = f.read(at - start)
        if at == end and chunk.endswith(b"\n"):
            return end
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        at = start
    return 0


def write_atomic(path: Path, text: str, stamp: str, errors: str = "strict") -> None:
    """``path`` holds ``text`` whole, or as it was: a reader never sees it torn or empty (a killed
    write, a full disk); ``stamp`` names the copy written beside it first. ``errors`` as
    :meth:`str.encode`'s: "surrogateescape" writes back the bytes a text read so holds."""
    tmp = path.with_name(f"{path.name}.{stamp}")
    try:
        tmp.write_text(text, encoding="utf-8", errors=errors)
        os.replace(tmp, path)
    except OSError:  # a full disk: no empty file left behind
        tmp.unlink(missing_ok=True)
        raise


def alive(pid) -> bool:
    """Whether process ``pid`` is running."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, TypeError, ValueError):
        return isinstance(pid, int)
    return True


def _lines(path: Path, damaged: list[str] | None = None) -> list[dict]:
    """The documents of a JSON-lines file; a torn last line (a killed append) is dropped. Where
    ``damaged`` is given (a reader that writes nothing), a damaged line is said there, once, and
    left out, rather than refusing every other line with it."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    except OSError as e:  # a folder in its place, or no permission: named, not a traceback naming no file
        raise RecordsError(f"{path}: cannot be read ({e.strerror}); it is left untouched: fix or remove it") from None
    found = []
    for number, line in enumerate(lines, 1):
        try:
            doc = _line(path, number, line, last=number == len(lines))
        except RecordsError as e:
            if damaged is None:
                raise
            if str(e) not in damaged:  # read again by each reader of the store's trials
                damaged.append(str(e))
            continue
        if doc is not None:
            found.append(doc)
    return found


def _line(path: Path, number: int, line: bytes, last: bool) -> dict | None:
    """One line's trial; None for a torn last line. :class:`RecordsError` names a damaged one."""
    try:
        text = line.decode()
    except UnicodeDecodeError as e:  # json.dumps writes ASCII: no killed append tears a character
        raise RecordsError(f"{path}: line {number} is not text (binary data at byte {e.start}); it is left "
                           f"untouched: remove the line or the file") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        if not last:
            raise RecordsError(f"{path}: line {number} is corrupted; it is left untouched: remove the line "
                               f"or the file") from None
        return None
    missing = [k for k in TRIAL_KEYS if k not in doc] if isinstance(doc, dict) else None
    wrong = ("not a trial" if missing is None else f"lacks {', '.join(missing)}" if missing
             else trial_problem(doc))
    if wrong:
        raise RecordsError(f"{path}: line {number}: {wrong}; it is left untouched: remove the line or the file")
    return doc


@dataclass(frozen=True)
class Triage:
    """A store's trials by what they stand for."""

    latest: list[dict]  # each trial's latest measurement, in the order trials were first recorded
    #: each trial's latest measurement that ran to the end undisturbed: the latest, or where that
    #: was disturbed (a re-measurement beside a busy process), the one it replaced, in the archive
    undisturbed: list[dict]
    #: the trials that ran only while other load disturbed them: none can be served or gated,
    #: and a tune on a quiet machine measures them again
    unsettled: list[dict]


class RecordStore:
    """The records of one device; opening validates the file and indexes its trials (the
    archive's when a lookup first misses: opening costs the same at a million trials)."""

    def __init__(self, path: str | Path, fingerprint: Mapping | None = None, read_only: bool = False,
                 skip_damaged: bool = False):
        self.path = Path(path)
        self.device = self.path.stem
        #: The file itself where ``path`` is a symlink into a shared store: its journal, archive
        #: and locks are beside it, whichever path a run reaches it by.
        self.real = Path(os.path.realpath(self.path))
        #: Opened only to read: without a fingerprint, or asked to (a gate on a read-only checkout).
        self.read_only = read_only or fingerprint is None
        #: Why a write of this run failed (a full disk): a gate's later runs are not kept either.
        self.unwritten: str | None = None
        #: The trial in flight's mark and its text (see :meth:`measuring`).
        self._mark: tuple[Path, str] | None = None
        #: What names this run's marks beside its pid: a run of the same pid (a container's pytest gets
        #: one every time, a second pytest.main one process's) is another, and ended.
        self._run = os.urandom(8).hex()
        #: The marks of earlier runs at it, which its own carries on once written (see :meth:`loading`).
        self._earlier: list[Path] = []
        #: Opened read-only with ``skip_damaged`` (the report): the damaged lines of the journal and
        #: the archive, each left out and said here rather than refusing every other record with it.
        #: Else none is: a writer would fold the journal without them, a lookup serve without them.
        self.damaged: list[str] | None = [] if skip_damaged and self.read_only else None
        if fingerprint is None and not self.path.exists():
            raise RecordsError(f"{self.path}: no such records file")
        if not self.read_only:
            _writable(self.real)
        self.archive, self.journal = companions(self.path)
        #: Beside the journal: why the run that left it could not fold it (see :meth:`compact`).
        self._unfolded_note = self.journal.with_name(f"{self.journal.name}.unfolded")
        #: Why the archive is not read: the records file it belongs to is gone (see :func:`orphaned`).
        self.orphan = orphaned(self.path)
        self._archived_cache: tuple[tuple | None, list[dict]] = (None, [])
        self._db = TinyDB(self.path, storage=AtomicJSONStorage)
        data = self._reload()
        #: Opened to write: the trials a run left in the journal without folding them (it was
        #: killed, or could not write the file; not one still running); they are folded with this
        #: run's, and the run says so.
        self.leftover = self.pending() if not self.read_only and not self.running() else []
        #: Why the run that left them could not fold them (a full disk), where it noted so; else it was
        #: killed, or could not write the note either.
        self.unfolded = self._unfolded() if self.leftover else None
        recorded = next(iter(data.get("device", {}).values()), None)
        self.fingerprint = recorded or (dict(fingerprint) if fingerprint is not None else None)
        self._stamped = recorded is not None and bool(data.get("format"))
        self._compacted = time.monotonic()

    def _reload(self) -> dict:
        """Read the file and the journal again and index the trials; returns the file's tables."""
        data = self._db.storage.read() or {}
        self._index = {}
        self._archive_indexed = False  # the archive is indexed when a lookup first misses
        with bulk():
            for doc in [*data.get("trials", {}).values(), *self.pending()]:
                self._remember(doc)
        return data

    def _unfolded(self) -> str | None:
        """Why the run that left the journal could not fold it, as it noted (see :meth:`compact`),
        where the journal is as it left it: a run killed after appending to it noted nothing."""
        try:
            note = json.loads(self._unfolded_note.read_text())
            return note["why"] if note["bytes"] == self.journal.stat().st_size else None
        except (OSError, ValueError, KeyError, TypeError):  # none, or one the full disk cut short
            return None

    def pending(self) -> list[dict]:
        """The journal's trials, not yet in the file: every reader counts them, and the report says
        that a commit of the file leaves them out until a run folds them."""
        return _lines(self.journal, self.damaged)

    def _archived(self) -> list[dict]:
        """The archive's trials (the oldest, moved out of the file), read again only when it grew,
        or where it was racy when last read (see :mod:`tunebench.stamps`): the cut of a torn last
        line and an append of as many bytes, or a copy over it, may follow unseen."""
        if self.orphan:
            return []
        try:
            st = os.stat(self.archive)
        except FileNotFoundError:
            return []
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # see AtomicJSONStorage._stamp
        if self._archived_cache[0] != stamp:
            with bulk():
                self._archived_cache = (None if racy(st) else stamp, _lines(self.archive, self.damaged))
        return self._archived_cache[1]

    def running(self) -> bool:
        """Whether another process holds one of this file's locks: a run still going (its journal
        is its own to fold, and the report says so)."""
        for path in (self.real.parent / ".locks").glob(f"{self.real.stem}.*.lock"):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            finally:
                os.close(fd)
        return False

    def _lock_file(self, name: str) -> Path:
        locks = self.real.parent / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        ignore_transients(self.real.parent)
        return locks / f"{self.real.stem}.{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.lock"

    @contextlib.contextmanager
    def task_lock(self, task: str, waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Held while one task is tuned: another process tuning the same task (a second run)
        waits, calling ``waiting()`` first, then resumes from what this one recorded."""
        with _held(self._lock_file(task), waiting):
            self._reload()
            yield

    @classmethod
    def for_device(cls, directory: str | Path, fingerprint: Mapping, read_only: bool = False) -> RecordStore:
        """The store of this device under ``directory``, created when it does not exist."""
        return cls(Path(directory) / f"{device_id(fingerprint)}.json", fingerprint, read_only)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _held(self._lock_file("file")):
            for table in TABLES:  # another writer may have inserted since: recount ids
                self._db.table(table)._next_id = None
            if not self._stamped:  # the first write: the file says whose it is and in which layout
                if self.fingerprint is None:
                    raise RecordsError(f"{self.path}: opened read-only (no fingerprint given)")
                if not self._db.table("device").all():
                    self._db.table("device").insert(self.fingerprint)
                if not self._db.table("format").all():
                    self._db.table("format").insert({"version": FORMAT})
                self._stamped = True
            yield

    # -- trials -------------------------------------------------------------------------------
    def _remember(self, doc: Mapping) -> None:
        key = trial_identity(doc)
        self._index[key] = self._index[(*key[:-1], ANY)] = doc

    def lookup(self, kernel: str, source_hash: str, shape, dtype: str, config: Mapping,
               setup_hash: str | None = ANY) -> dict | None:
        """The recorded trial of this config on this shape, for this source and declaration
        (:data:`ANY`: whichever was recorded last), if any."""
        key = (*trial_key(kernel, source_hash, shape, dtype, config), setup_hash)
        if key not in self._index and not self._archive_indexed:
            self._archive_indexed = True
            with bulk():
                for doc in reversed(self._archived()):  # older than every trial indexed, newest first
                    own = trial_identity(doc)
                    self._index.setdefault(own, doc)
                    self._index.setdefault((*own[:-1], ANY), doc)
        return self._index.get(key)

    def recorded_configs(self, kernel: str, source_hash: str, dtype: str, shapes) -> list[tuple]:
        """The config keys (:func:`config_key`) of the trials held for this kernel, template and
        dtype on any of ``shapes``, first recorded first: a task's candidates measured before,
        read from the index, not copied trial by trial as :meth:`trials` does; the archive's (the
        oldest, past the file's cap) apart, as lookups leave them until one misses."""
        shapes = {tuple(s) for s in shapes}
        return list(dict.fromkeys(k[4] for k in self._index if k[:2] == (kernel, source_hash) and k[3] == dtype
                                  and k[2] in shapes))

    def add(self, doc: Mapping) -> None:
        missing = [k for k in TRIAL_KEYS if k not in doc]
        if missing:
            raise RecordsError(f"{self.path}: refusing a trial without {', '.join(missing)}")
        with self._locked():
            self.journal.parent.mkdir(exist_ok=True)
            _append(self.journal, [doc])
            if time.monotonic() - self._compacted > COMPACT_EVERY_S:
                self._fold()
        self._remember(dict(doc))
        self._forget_earlier()  # a crash counted from them is kept now (see counted)

    def measuring(self, doc: Mapping) -> list[str | None]:
        """The trial of ``doc`` (its document before it is measured) is measured by this process
        until :meth:`measured`, and marked so once its candidate runs (:meth:`loading`); returns
        what ended the runs in a row that measured it before while its candidate ran, by the marks
        they left, oldest first: None where the run died (a candidate that killed the run itself,
        ``kill(getppid(), ...)``, killed every later run at the same place, and nothing named it),
        a signal's name where its task stopped as the worker was killed by it (see :meth:`killed`).
        A mark counts for the build it names: the trial's template and declaration (its key), and the
        compiler and entry point that built and called the candidate (``doc``'s; a mark written before
        they were kept is taken as today's): a gcc build's deaths are none of clang's. An ended run's
        mark of the same config on the same shape for another template or declaration goes: the
        kernel was edited since, and nothing would ever count or remove it."""
        self._mark, self._earlier = None, []
        if self.read_only:
            return []
        key, chains = json.dumps(trial_identity(doc)), []
        built = {"compiler": doc.get("compiler"), "entry": doc.get("entry")}
        self.journal.parent.mkdir(exist_ok=True)
        for path in self.journal.parent.glob(f"{self.real.name}.inflight-*"):
            try:  # a mark's copy (".tmp") is no mark: its run died before it replaced the mark with it
                mark, written = json.loads(path.read_text()), path.stat().st_mtime
                if path.suffix == ".tmp":
                    raise ValueError
            except OSError:
                continue
            except ValueError:  # that, or torn (by an earlier tunebench's killed write): it names no trial
                pid = re.match(r"\d+", path.name.rpartition(".inflight-")[2])
                if pid and not alive(int(pid[0])):  # ... and no run will write it whole
                    path.unlink(missing_ok=True)
                continue
            if mark.get("key") == key:
                # this run's own, left as it was interrupted (a pytest-timeout): the run resumes its search and
                # measures the config again, under the same mark, which loading() rewrites
                mine = mark.get("pid") == os.getpid() and mark.get("run") == self._run
                if all(mark.get(k, v) == v for k, v in built.items()) and (
                        self._ended(mark) or (mine and mark.get("survived"))):
                    # an earlier version's mark counts "died"; a run that did not die at it, none of its own
                    own = [] if mark.get("survived") else [mark.get("killed")]
                    chains.append((written, [*mark.get("deaths", [None] * mark.get("died", 0)), *own]))
                    if not mine:
                        self._earlier.append(path)
            elif _candidate(mark.get("key")) == _candidate(key) and self._ended(mark):
                path.unlink(missing_ok=True)
        # each mark's runs are its own (one that read another's carried them on and removed it): two
        # runs that each died at the config, neither seeing the other's mark, are two deaths
        deaths = [death for _, chain in sorted(chains, key=lambda c: c[0]) for death in chain]
        # one mark per trial: one that killed() keeps outlives this run's later trials
        trial = hashlib.sha256(key.encode()).hexdigest()[:16]
        self._mark = (self.journal.parent / f"{self.real.name}.inflight-{os.getpid()}-{self._run}-{trial}",
                      json.dumps({"key": key, **built, "pid": os.getpid(), "run": self._run, "deaths": deaths}))
        return deaths

    def _ended(self, mark: dict) -> bool:
        """Whether the run that left ``mark`` has ended: its process is gone, or it is this process
        and another run (a container's pytest of the same pid every time saw each earlier run's
        mark as its own, and none of them counted)."""
        return not alive(mark.get("pid")) or (mark.get("pid") == os.getpid() and mark.get("run") != self._run)

    def loading(self) -> None:
        """The worker loads the build of the trial :meth:`measuring` named: from here its candidate's
        own code runs, and a death of this run may be its doing. Not before: two runs killed (a CI
        job cancelled twice) while the heuristic's first trial built its reference had recorded the
        heuristic as crashed, served a candidate in its place and failed its item. The earlier
        runs' marks go only now, their deaths carried on in this run's: a run interrupted before
        (Ctrl-C) had wiped out their deaths (interrupted after, see :meth:`measured`)."""
        if self._mark is None:
            return
        path, text = self._mark
        try:  # whole or as it was: a torn mark names no trial, and killed() rewrites a death's
            write_atomic(path, text, "tmp")
        except OSError as e:
            raise _unwritten(path, e) from None
        self._forget_earlier()

    def counted(self) -> None:
        """The deaths :meth:`measuring` returned are the config's crash, recorded in place of the
        trial, which ends unmeasured: the marks that told them go once it is recorded (:meth:`add`;
        removed before, a full disk lost both the crash and the deaths)."""
        self.measured()

    def _forget_earlier(self) -> None:
        for earlier in self._earlier:
            earlier.unlink(missing_ok=True)
        self._earlier = []

    def killed(self, signal: str) -> bool:
        """The trial :meth:`measuring` named stopped this run's task: its worker was killed by
        ``signal`` each time it ran it, by the candidate itself or by something outside, which
        cannot be told apart. Where its candidate ran, its mark stays, as the run's death at it
        would: a candidate that raises the signal itself is recorded crashed after a few runs,
        rather than stopping its task in every run. Whether the mark stays."""
        if self._mark is None or not self._mark[0].exists():  # a read-only store's, or not loaded
            return False
        path, text = self._mark
        self._mark = None  # measured() leaves it, written or not (a full disk: as loading() wrote it)
        try:
            write_atomic(path, json.dumps({**json.loads(text), "killed": signal}), "tmp")
        except OSError as e:
            raise _unwritten(path, e) from None
        return True

    def measured(self) -> None:
        """The trial :meth:`measuring` named ended with this process alive, measured or interrupted
        (Ctrl-C): no death of this run at it. Its mark goes, but one that carries the earlier runs'
        deaths (see :meth:`loading`) keeps them alone till the trial is recorded (:meth:`add`): an
        interrupted run records none, and had wiped out their count."""
        if self._mark is None:
            return
        (path, text), self._mark = self._mark, None
        mark = json.loads(text)
        if mark["deaths"] and path.exists():
            try:
                write_atomic(path, json.dumps({**mark, "survived": True}), "tmp")
            except OSError:  # a full disk: their count is lost, rather than this run's counted a death
                pass
            else:
                self._earlier.append(path)
                return
        path.unlink(missing_ok=True)

    def compact(self) -> None:
        """Fold the journal into the file (a run's last write). Where the file cannot be written (a
        full disk), the journal keeps the trials, and a note beside it says why where it fits: the
        next run, which folds them, says so rather than take this run for a killed one."""
        if not self.journal.exists() or self.read_only:
            return
        try:
            with self._locked():
                self._fold()
        except NotWritable as e:
            with contextlib.suppress(OSError):  # no room for the note either: the next run names both causes
                self._unfolded_note.write_text(json.dumps({"bytes": self.journal.stat().st_size,
                                                           "why": str(e).split("; ")[0]}))
            raise

    def _fold(self) -> None:
        """Under the lock: the journal's trials into the file, once per key (a trial measured
        again, because it was disturbed or had failed, or ``--tune-fresh`` asked, replaces the one
        before it, which moves to the archive: every measurement is kept, and the newest is
        read), then the oldest beyond :data:`ARCHIVE_ABOVE` appended to the archive and dropped
        from the file, so that a fold rewrites a bounded file however many trials there are."""
        pending = self.pending()
        table = self._db.table("trials")
        with bulk():
            if pending:
                latest = {trial_identity(d): d for d in pending}
                stale = [doc for doc in table.all() if trial_identity(doc) in latest]
                stale += [d for d in pending if latest[trial_identity(d)] is not d]
                if stale:
                    _append(self.archive, stale)  # first: a kill between the two leaves a copy, not a loss
                    table.remove(doc_ids=[d.doc_id for d in stale if hasattr(d, "doc_id")])
                table.insert_multiple(latest.values())
            docs = table.all()
            if len(docs) > ARCHIVE_ABOVE:
                oldest = sorted(docs, key=lambda d: d.doc_id)[:len(docs) - ARCHIVE_ABOVE]
                _append(self.archive, oldest)  # first: a kill between the two leaves a copy, not a loss
                table.remove(doc_ids=[d.doc_id for d in oldest])
        self._unfolded_note.unlink(missing_ok=True)  # first: a note outliving its journal would explain the next
        self.journal.unlink(missing_ok=True)
        self._compacted = time.monotonic()

    def trials(self, **match) -> list[dict]:
        """Every trial whose fields equal ``match`` (all trials without arguments), in the order
        they were first recorded (a strategy's convergence counts a config from its first
        trial); of a trial measured again, the latest measurement, in its first place."""
        with bulk():
            latest = {trial_identity(d): d for d in self._measurements()}
            return [dict(d) for d in latest.values() if all(d.get(k) == v for k, v in match.items())]

    def _measurements(self) -> list[dict]:
        """Every measurement kept, oldest first: the archive's, the file's, the journal's."""
        return [*self._archived(), *self._db.table("trials").all(), *self.pending()]

    def triage(self) -> Triage:
        """Every trial sorted by what its measurements can stand for, in one pass over them all
        (the lookup index reads the three at a million trials)."""
        latest, clean = {}, {}
        with bulk():
            for d in self._measurements():
                key = trial_identity(d)
                latest[key] = d
                if d["status"] == "ok" and d.get("verdict") != "disturbed":
                    clean[key] = d
        return Triage(
            latest=[dict(d) for d in latest.values()],
            undisturbed=[dict(clean[k]) for k, d in latest.items() if k in clean and (
                d is clean[k] or (d["status"] == "ok" and d.get("verdict") == "disturbed"))],
            unsettled=[dict(d) for k, d in latest.items() if k not in clean and d.get("verdict") == "disturbed"
                       and d["status"] in ("ok", "early_stopped")])

    # -- sources and checks -------------------------------------------------------------------
    def put_source(self, kernel: str, source_hash: str, text: str, files: Mapping[str, str]) -> None:
        """Keep a template version once, so the gate can build it again after it changed, with
        ``files``, the texts of the files it keeps as their hash alone, by hash (see
        :attr:`~tunebench.kernel.Variant.file_texts`): those no version keeps yet, as many as
        :data:`FILE_TEXT_BYTES` holds, so that a helper edited since is built as it was. A version
        kept without them (records from before texts were kept) gets them when tuned again, its
        other fields as they were: until then its helpers' edits leave the recorded build out."""
        found = next((d for d in self._db.table("sources").all() if d["source_hash"] == source_hash), None)
        has = found.get("files", {}) if found is not None else {}
        kept, new, size = self.file_texts(), {}, sum(len(t.encode()) for t in has.values())
        for digest, content in files.items():
            if digest not in kept and size + len(content.encode()) <= FILE_TEXT_BYTES:
                new[digest], size = content, size + len(content.encode())
        if found is not None and not new:
            return
        with self._locked():
            if found is None:
                self._db.table("sources").insert({"kernel": kernel, "source_hash": source_hash, "text": text,
                                                  **({"files": new} if new else {})})
            else:
                self._db.table("sources").update({"files": {**has, **new}}, doc_ids=[found.doc_id])

    def source(self, source_hash: str) -> str | None:
        found = [d["text"] for d in self._db.table("sources").all() if d["source_hash"] == source_hash]
        return found[0] if found else None

    def sources(self, kernel: str) -> dict[str, str]:
        """The kernel's kept template versions' texts, by source hash, oldest first."""
        return {d["source_hash"]: d["text"] for d in self._db.table("sources").all() if d["kernel"] == kernel}

    def file_texts(self) -> dict[str, str]:
        """Every file text the kept sources hold, by its hash (see :meth:`put_source`)."""
        return {digest: content for doc in self._db.table("sources").all()
                for digest, content in doc.get("files", {}).items()}

    def add_check(self, doc: Mapping) -> None:
        with self._locked():
            self._db.table("checks").insert(dict(doc))

    def checks(self, **match) -> list[dict]:
        """Every check whose fields equal ``match``, oldest first."""
        return [dict(d) for d in self._db.table("checks").all()
                if all(d.get(k) == v for k, v in match.items())]

    # -- tasks --------------------------------------------------------------------------------
    def put_task(self, doc: Mapping) -> None:
        """Insert or replace the description of one (kernel, target, dtype, bucket); an
        unchanged description writes nothing."""
        ident = {k: doc[k] for k in ("kernel", "target", "dtype", "bucket")}
        if self.tasks(**ident) == [dict(doc)]:
            return
        with self._locked():
            table = self._db.table("tasks")
            table.remove(lambda d: all(d.get(k) == v for k, v in ident.items()))
            table.insert(dict(doc))

    def tasks(self, **match) -> list[dict]:
        return [dict(d) for d in self._db.table("tasks").all()
                if all(d.get(k) == v for k, v in match.items())]


def exported(path: Path) -> bool:
    """Whether a JSON file is ``tunebench export``'s: one written into the records folder
    (``--out records``) holds configs, not trials, and is no device's records."""
    try:
        with open(path, "rb") as f:
            return EXPORTED.match(f.read(EXPORTED_HEAD)) is not None
    except OSError:  # unreadable: left to the reader, which says why
        return False


def records_files(directory: str | Path) -> list[Path]:
    """The records files under ``directory``, one per device, by name: its JSON files but an export."""
    return [p for p in sorted(Path(directory).glob("*.json")) if not exported(p)]


def stores(directory: str | Path, unread: list[str], skip_damaged: bool = False) -> list[RecordStore]:
    """Every records file under ``directory`` that can be read, opened read-only (``skip_damaged``:
    see :attr:`RecordStore.damaged`); each other's error is appended to ``unread``. Another
    device's file (conflicted, of a newer format, or a stray JSON beside them) must not stop what
    reads it only for a hint."""
    found = []
    for path in records_files(directory):
        try:
            found.append(RecordStore(path, skip_damaged=skip_damaged))
        except RecordsError as e:
            unread.append(str(e))
    return found
