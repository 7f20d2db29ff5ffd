"""Merging two branches' records files: a git merge driver, so that pull requests that each tuned
and committed records merge without a conflict and without losing a measurement.

Every tune appends trials at the end of the same tables, under TinyDB's sequential document ids,
so two branches' records always conflict in a line merge, and taking either side loses the
other's trials. Records are a set of facts, not text: the merge is the union of trials, sources
and checks (each a document that either side wrote, kept once), in the order they were made
(their timestamps, so that the latest final round of a task stays the one lookups read), and
per task the description of the side that changed it (ours where both did). A trial both sides
measured since the base is kept twice, as the two measurements it is; the store reads the later
(as it reads a trial measured again on one branch), and the next measurement of it replaces both. A file of another
device on one side is a conflict: the merge leaves ours and fails.

Install it once per clone (``git config``) and once per repository (``.gitattributes``)::

    git config merge.tunebench.name "tunebench records"
    git config merge.tunebench.driver "$PWD/.venv/bin/tunebench merge-records %O %A %B"
    echo 'records/*.json merge=tunebench' >> .gitattributes
    echo 'records/*.archive.jsonl merge=union' >> .gitattributes

The archive (the oldest trials, one per line, only appended to) merges as git's own ``union``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tunebench.device import device_id
from tunebench.records import FORMAT, TABLES, AtomicJSONStorage, RecordsError

#: What identifies a task's description.
TASK_KEY = ("kernel", "target", "dtype", "bucket")


def _tables(path: Path) -> dict:
    """A records file's tables; an empty file (git's stand-in for no common ancestor) is none."""
    if not path.exists() or not path.read_bytes().strip():
        return {}
    return AtomicJSONStorage(path).read()


def _union(base: dict, ours: dict, theirs: dict) -> list[dict]:
    """Every document either side added or kept, once, in the order made (timestamps are
    ISO-8601 in UTC); one of the base that a side removed (moved to the archive) stays removed."""
    def keyed(docs: dict) -> dict:
        return {json.dumps(d, sort_keys=True): d for d in docs.values()}
    b, o, t = keyed(base), keyed(ours), keyed(theirs)
    kept = {k: d for k, d in {**o, **t}.items() if k not in b or (k in o and k in t)}
    return sorted(kept.values(), key=lambda d: d.get("timestamp") or "")


def _tasks(base: dict, ours: dict, theirs: dict) -> list[dict]:
    """Per task, ours, else theirs where only theirs changed it since the base."""
    def by_key(docs: dict) -> dict:
        return {tuple(d[k] for k in TASK_KEY): d for d in docs.values()}
    b, o, t = by_key(base), by_key(ours), by_key(theirs)
    merged = dict(o)
    for key, doc in t.items():
        if key not in o or (o[key] == b.get(key) and doc != b.get(key)):
            merged[key] = doc
    return list(merged.values())


def merge(base_path: Path, ours_path: Path, theirs_path: Path) -> tuple[dict, list[str]]:
    """The merged tables of two sides of one device's records file (see the module docstring),
    and what a person should know of the merge (:func:`_retuned`)."""
    base, ours, theirs = (_tables(p) for p in (base_path, ours_path, theirs_path))
    devices = [next(iter(side.get("device", {}).values()), None) for side in (ours, theirs)]
    if None not in devices and devices[0] != devices[1]:
        ids = " and ".join(device_id(d) for d in devices)  # git names a temporary file: the ids say which
        raise RecordsError(f"{ours_path}: the two sides hold records of different devices, {ids}; merge by hand")
    get = lambda side, table: side.get(table, {})  # noqa: E731 - a table, or none
    tables = {
        "format": [{"version": FORMAT}],  # both sides read (a newer layout is refused), written in ours
        "device": [devices[0] or devices[1]] if any(devices) else [],
        "tasks": _tasks(get(base, "tasks"), get(ours, "tasks"), get(theirs, "tasks")),
        # a trial both sides measured is two measurements, both kept: the store reads the later
        "trials": _union(get(base, "trials"), get(ours, "trials"), get(theirs, "trials")),
        "sources": list({d["source_hash"]: d for side in (theirs, ours) for d in get(side, "sources").values()}.values()),
        "checks": _union(get(base, "checks"), get(ours, "checks"), get(theirs, "checks")),
    }
    for table in sorted((set(ours) | set(theirs)) - set(TABLES)):  # a newer tunebench's: kept, not dropped
        tables[table] = _union(get(base, table), get(ours, table), get(theirs, table))
    merged = {table: {str(i): doc for i, doc in enumerate(docs, 1)} for table, docs in tables.items()}
    return merged, _retuned(get(base, "checks"), get(ours, "checks"), get(theirs, "checks"))


def _retuned(base: dict, ours: dict, theirs: dict) -> list[str]:
    """The tasks both sides tuned since the base (their checks tables): of their two final
    rounds, the later one is what lookups and the gate read after the merge, whichever found the
    faster config."""
    old = {json.dumps(d, sort_keys=True) for d in base.values()}

    def tuned(checks: dict) -> dict:
        return {tuple(d[k] for k in TASK_KEY): d.get("timestamp") for d in checks.values()  # a disturbed
                if d.get("kind") == "tune" and not d.get("disturbed")  # round judged nothing: none reads it
                and json.dumps(d, sort_keys=True) not in old}
    o, t = tuned(ours), tuned(theirs)
    notes = []
    for key in sorted(o.keys() & t.keys()):
        kernel, target, dtype, bucket = key
        later = max(filter(None, (o[key], t[key])), default="?")
        notes.append(f"{kernel}[{bucket}-{dtype}] on {target}: both sides tuned it; the later final round "
                     f"({later}) is the one used")
    return notes


def merge_into(base_path: Path, ours_path: Path, theirs_path: Path) -> list[str]:
    """git's merge driver contract: the merge written over ``ours_path`` (atomically); returns
    what a person should know of it."""
    merged, notes = merge(base_path, ours_path, theirs_path)
    AtomicJSONStorage(ours_path).write(merged)
    return notes
