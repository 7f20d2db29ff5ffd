"""Merging two branches' records files: a git merge driver, so that pull requests that each tuned
and committed records merge without a conflict and without losing a measurement.

Every tune appends trials at the end of the same tables, under TinyDB's sequential document ids,
so two branches' records always conflict in a line merge, and taking either side loses the
other's trials. Records are a set of facts, not text: the merge is the union of trials, sources
and checks (each a document that either side wrote, kept once; a source with the file texts
either side keeps of it), in the order they were made
(each side's own order, the two interleaved by their timestamps, so that the latest final round
of a task stays the one lookups read), and per task the description of the side that changed it
(ours where both did). Where both sides tuned a task and only one of them changed its template or
declaration, git keeps that side's template: its final round and description are the ones read,
and the other side's round stays as history. A trial both sides
measured since the base is kept twice, as the two measurements it is; the store reads the later
(as it reads a trial measured again on one branch), and the next measurement of it replaces both. A file of another
device on one side is a conflict: the merge leaves ours and fails, as it does where ours or theirs
cannot be read (that branch's file is to fix). A merge base that cannot be read (committed with
conflict markers) cannot be fixed on either branch: what both sides hold alike stands in for it, so
the merge keeps every document of both, and says so.

Install it once per clone (``git config``) and once per repository (``.gitattributes``)::

    git config merge.tunebench.name "tunebench records"
    git config merge.tunebench.driver "'$PWD/.venv/bin/tunebench' merge-records %O %A %B %P"
    echo 'records/*.json merge=tunebench' >> .gitattributes
    echo 'records/*.archive.jsonl merge=union' >> .gitattributes

The archive (the oldest trials, one per line, only appended to) merges as git's own ``union``.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

from tunebench.device import device_id
from tunebench.records import FORMAT, TABLES, AtomicJSONStorage, NewerFormat, RecordsError

#: What identifies a task's description.
TASK_KEY = ("kernel", "target", "dtype", "bucket")


def _task(doc: dict) -> tuple:
    """The task a description or a final round is of."""
    return tuple(doc[k] for k in TASK_KEY)


#: The three files git gives the driver, as a person names them.
SIDES = ("the merge base", "ours (the branch checked out)", "theirs (the branch merged in)")


def _tables(path: Path, side: str, name: str | None) -> dict:
    """A records file's tables; an empty file (git's stand-in for no common ancestor) is none.
    One that cannot be read raises :class:`RecordsError` naming its side and the file merged
    (``name``, git's ``%P``), not git's temporary copy, with what is wrong with it alone: the
    fix a reader of the file gives (restore it, the commands that merge it again) is for a
    checkout's file, and ran this very merge, which fails on the same side."""
    if not path.exists() or not path.read_bytes().strip():
        return {}
    try:
        return AtomicJSONStorage(path).read()
    except RecordsError as e:  # the message: the file, what is wrong, then after "; " what to do
        problem = str(e).removeprefix(f"{path}: ").split("; ")[0]
        raise type(e)(f"{name or 'the records file'}, {side}: {problem}") from None


def _unreadable(side: str, error: RecordsError) -> RecordsError:
    """The driver's error where ours or theirs cannot be read, with what fixes it on that side:
    it leaves ours in the file, so adding it as it is drops theirs' trials."""
    branch = "this branch" if side == SIDES[1] else "the branch merged in"
    fix = ("`git merge --abort`, then merge again with a tunebench that reads it (a newer one)"
           if isinstance(error, NewerFormat) else
           f"`git merge --abort`, make the file readable on {branch} and commit it (read there, tunebench says "
           f"what is wrong with it), then merge again")
    return RecordsError(f"{error}. The merge stopped and left ours alone in the file, without theirs' trials: do "
                        f"not add it as it is; {fix}")


def _devices(name: str, ours: str, theirs: str) -> RecordsError:
    """The driver's error where the two sides hold records of different devices (git names a
    temporary file: the ids say which): no merge of them is readable, as measurements of one
    device are never another's, so the side whose file is named for another device moves them
    to their own."""
    wrong = [(branch, device) for branch, device in (("this branch", ours), ("the branch merged in", theirs))
             if device != Path(name).stem]
    fix = (f"rename the file of {wrong[0][0]} to {Path(name).with_stem(wrong[0][1])} (`git mv`, as its device "
           f"table says) and commit it (where the merge then finds this file deleted there, keep ours: `git add` it)" if len(wrong) == 1 else
           "on each branch, move each device's records to its own file, records/<its device id>.json, and commit it")
    return RecordsError(f"{name}: ours holds records of {ours}, theirs of {theirs}: measurements of one device are "
                        f"never another's. The merge stopped and left ours alone in the file, without theirs' trials: "
                        f"do not add it as it is; `git merge --abort`, {fix}, then merge again")


def _base(path: Path, ours: dict, theirs: dict, name: str | None) -> tuple[dict, list[str]]:
    """The merge base's tables, and a note where it cannot be read (a file committed with conflict
    markers on both branches' history): no branch can fix a commit both descend from, so what
    both sides hold alike stands in for it. The merge is then the union of the two sides (a
    document of the base that one side moved to the archive comes back into the file beside its
    archived copy, which the store reads as one), and every document either side holds is kept,
    but for a task's description where the two differ: ours, as no base tells who changed it."""
    try:
        return _tables(path, SIDES[0], name), []
    except RecordsError as e:
        common = {}
        for table, docs in ours.items():
            held = {_content(d) for d in theirs.get(table, {}).values()}
            common[table] = {key: doc for key, doc in docs.items() if _content(doc) in held}
        return common, [f"{e}; merged as if it held what both sides hold alike: every trial, source and check of "
                        f"either side is kept, and where the two describe a task differently, ours is kept (with no "
                        f"base, which side changed it cannot be told; a tune of the task describes it anew)"]


def _union(base: dict, ours: dict, theirs: dict) -> list[dict]:
    """Every document either side added or kept, once, in the order made: each side's own, the
    two interleaved by timestamps (ISO-8601 in UTC), so that a round an earlier merge placed last
    stays last; one of the base that a side removed (moved to the archive) stays removed."""
    def keyed(docs: dict) -> dict:
        return {_content(d): d for d in docs.values()}
    b, o, t = keyed(base), keyed(ours), keyed(theirs)
    kept: dict[str, dict] = {}
    for key, doc in heapq.merge(o.items(), t.items(), key=lambda item: item[1].get("timestamp") or ""):
        if key not in b or (key in o and key in t):
            kept.setdefault(key, doc)
    return list(kept.values())


def _declared(doc: dict | None) -> tuple | None:
    """The template and declaration that a task's description or final round is of."""
    return (doc.get("source_hash"), doc.get("setup_hash")) if doc else None


def _sources(ours: dict, theirs: dict) -> list[dict]:
    """Each template version once, ours where both keep it, with the file texts either side
    keeps of it: a re-tune adds them to a version kept without them (see
    :meth:`~tunebench.records.RecordStore.put_source`), on one side alone."""
    merged: dict[str, dict] = {}
    for doc in (*ours.values(), *theirs.values()):  # ours first: in ours' order, theirs' new ones after
        kept = merged.get(doc["source_hash"], {})
        files = {**doc.get("files", {}), **kept.get("files", {})}
        merged[doc["source_hash"]] = {**doc, **kept, **({"files": files} if files else {})}
    return list(merged.values())


def _tasks(base: dict, ours: dict, theirs: dict) -> list[dict]:
    """Per task, ours, else theirs where only theirs changed it since the base, or where both
    did and only theirs changed its template or declaration (the side whose template git keeps)."""
    def by_key(docs: dict) -> dict:
        return {_task(d): d for d in docs.values()}
    b, o, t = by_key(base), by_key(ours), by_key(theirs)
    merged = dict(o)
    for key, doc in t.items():
        was = _declared(b.get(key))
        if key not in o or (o[key] == b.get(key) and doc != b.get(key)) or _declared(doc) != was == _declared(o[key]):
            merged[key] = doc
    return list(merged.values())


def merge(base_path: Path, ours_path: Path, theirs_path: Path, name: str | None = None) -> tuple[dict, list[str]]:
    """The merged tables of two sides of one device's records file (see the module docstring),
    and what a person should know of the merge (:func:`_retuned`); ``name``: the file merged."""
    sides = []
    for path, side in zip((ours_path, theirs_path), SIDES[1:]):
        try:
            sides.append(_tables(path, side, name))
        except RecordsError as e:
            raise _unreadable(side, e) from None
    ours, theirs = sides
    base, unread = _base(base_path, ours, theirs, name)
    devices = [next(iter(side.get("device", {}).values()), None) for side in (ours, theirs)]
    ids = [device_id(d) for d in devices if d is not None]  # one GPU with two drivers is one device
    if len(ids) == 2 and ids[0] != ids[1]:
        raise _devices(name or str(ours_path), *ids)
    get = lambda side, table: side.get(table, {})  # noqa: E731 - a table, or none
    tables = {
        "format": [{"version": FORMAT}],  # both sides read (a newer layout is refused), written in ours
        "device": [devices[0] or devices[1]] if any(devices) else [],
        "tasks": _tasks(get(base, "tasks"), get(ours, "tasks"), get(theirs, "tasks")),
        # a trial both sides measured is two measurements, both kept: the store reads the later
        "trials": _union(get(base, "trials"), get(ours, "trials"), get(theirs, "trials")),
        "sources": _sources(get(ours, "sources"), get(theirs, "sources")),
        "checks": _union(get(base, "checks"), get(ours, "checks"), get(theirs, "checks")),
    }
    notes = unread + _retuned(base, ours, theirs, tables["checks"])
    for table in sorted((set(ours) | set(theirs)) - set(TABLES)):  # a newer tunebench's: kept, not dropped
        tables[table] = _union(get(base, table), get(ours, table), get(theirs, table))
    keys = {"tasks": _task, "sources": lambda d: d["source_hash"]}
    merged = {table: _numbered(tables[table], get(ours, table), keys.get(table, _content))
              for table in dict.fromkeys([*ours, *tables]) if table in tables}  # in ours' order
    return merged, notes


def _content(doc: dict) -> str:
    """A document as the one fact it is, whatever its keys' order."""
    return json.dumps(doc, sort_keys=True)


def _numbered(docs: list[dict], ours: dict, key) -> dict:
    """The merged documents under ids in their order (readers go by it: the later of two
    measurements is read), each of ours under its own id where the order allows (``key``: what
    makes a document of the table ours'), so that the merge commit's diff shows what theirs
    added, not every line renumbered after a document one side moved to the archive (ids need
    not follow on: TinyDB's next is the highest plus one)."""
    held = {key(doc): int(doc_id) for doc_id, doc in ours.items()}
    numbered, last = {}, 0
    for doc in docs:
        last = max(last + 1, held.get(key(doc), 0))
        numbered[str(last)] = doc
    return numbered


def _retuned(base: dict, ours: dict, theirs: dict, checks: list[dict]) -> list[str]:
    """The tasks both sides tuned since the base: of their two final rounds, lookups and the gate
    read the later, whichever found the faster config, except where only one is of a template or
    declaration changed since the base. git keeps that side's template, so that round is read:
    the task's rounds after it in ``checks`` move before it, kept as history."""
    def tuned(side: dict, since: dict | None = None) -> dict:  # the latest round of each task
        old = {_content(d) for d in (since or {}).values()}
        return {_task(d): d for d in side.get("checks", {}).values()  # a disturbed
                if d.get("kind") == "tune" and not d.get("disturbed")  # round judged nothing: none reads it
                and _content(d) not in old}
    o, t = tuned(ours, base.get("checks")), tuned(theirs, base.get("checks"))
    # the base's template and declaration: its description's (its latest tune's), else its last round's; the last
    # round in the file may be of a template reverted since, whose re-tune reused every trial and judged nothing new
    was = {**tuned(base), **{_task(d): d for d in base.get("tasks", {}).values()}}
    notes = []
    for key in sorted(o.keys() & t.keys()):
        kernel, target, dtype, bucket = key
        task = f"{kernel}[{bucket}-{dtype}] on {target}: both sides tuned it"
        changed = [_declared(r) != _declared(was.get(key)) for r in (o[key], t[key])]
        if changed[0] == changed[1]:
            later = max(filter(None, (o[key].get("timestamp"), t[key].get("timestamp"))), default="?")
            apart = "" if _declared(o[key]) == _declared(t[key]) else (
                "; the two are of different templates or declarations: where the merged tree holds the other's, "
                "tune it again (the gate judges it against the later's)")
            notes.append(f"{task}; the later final round ({later}) is the one used{apart}")
            continue
        read, other, side = (o[key], t[key], "our") if changed[0] else (t[key], o[key], "their")
        at = checks.index(read)
        after = {i for i in range(at + 1, len(checks)) if checks[i].get("kind") == "tune" and _task(checks[i]) == key}
        checks[at:] = [checks[i] for i in sorted(after)] + [c for i, c in enumerate(checks[at:], at) if i not in after]
        notes.append(f"{task}; {side} side's final round ({read.get('timestamp')}), the only one of a template or "
                     f"declaration changed since the base, is the one used, as git keeps that side's template; the "
                     f"other side's ({other.get('timestamp')}) is kept as history")
    return notes


def merge_into(base_path: Path, ours_path: Path, theirs_path: Path, name: str | None = None) -> list[str]:
    """git's merge driver contract: the merge written over ``ours_path`` (atomically); returns
    what a person should know of it."""
    merged, notes = merge(base_path, ours_path, theirs_path, name)
    AtomicJSONStorage(ours_path).write(merged)
    return notes
