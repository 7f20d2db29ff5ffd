"""Applying results: the best recorded config for a shape, else today's heuristic.

``best(kernel, shape)`` finds the bucket holding the shape (the nearest, with a warning, when it
lies outside all of them), ranks every config recorded on that bucket for this device and the
kernel's current source by the bucket objective, and returns the winner; where a tune ended with
a final round (its fastest configs measured again, interleaved), that round's winner. Where the
template changed since the bucket was tuned, the configs tuned with the latest recorded source
that are still in the space are ranked instead, as the gate does, and :attr:`Choice.note` says
so: a comment or a fix must not send a framework back to the heuristic while CI stays green. The
baseline (the heuristic on each representative shape) competes too: where it wins, or nothing is
recorded, the answer is the heuristic's config for the requested shape (records shipped without
the suites know it only where it was recorded: at the nearest representative shape, as an export
carries it, with a note). A config whose shaped constraints fail for the asked shape is passed
over for the best recorded one that holds (of the bucket's :data:`RANKED` fastest), else the
heuristic, and :attr:`Choice.note` says so.

Records and suites are found from the project's root, not the working directory (see
:func:`project`). Answers come from an in-memory index of the records folder, kept until a
records file changes, so that a framework may ask per launch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import importlib.util
import itertools
import math
import operator
import os
import reprlib
import sys
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _pytest.outcomes import Skipped

from tunebench.backends import fingerprint, resolve
from tunebench.backends.cpuinfo import cores_allowed
from tunebench.buckets import Bucket, BucketError, Buckets, ShapeOutsideBuckets, outside
from tunebench.device import describe, device_id, microarchitecture_known, threads_apart
from tunebench.dtypes import numpy_dtype
from tunebench.kernel import (INI_FILES, REGISTRY, Kernel, KernelError, Variant, declared_twice,
                              kernels_in, project_root, reached, tune_options)
from tunebench.records import (FAILED, NewerFormat, RecordsError, RecordStore, bulk, companions, config_key,
                               config_text, orphaned, records_files, stores, write_atomic)
from tunebench.space import SpaceError, closest
from tunebench.stamps import racy
from tunebench.summary import all_wrong, brief


@dataclass
class Choice:
    config: dict
    source: str  # "tuned" or "heuristic"
    kernel: str
    shape: tuple
    dtype: str
    bucket: str
    inside: bool  # whether the shape lies inside the bucket
    device: str
    objective_ms: float | None = None  # the chosen config's objective on the bucket
    baseline_ms: float | None = None  # the baseline's objective on the same bucket
    note: str | None = None  # why the answer is not simply the bucket's best
    reason: str | None = None  # why the heuristic is the answer, where it is
    unconfirmed: str | None = None  # why the trials' faster config is not served (said by an export too)
    unconfirmed_ms: float | None = None  # the trials' objective of the config it names (a report draws it)
    #: The bucket's configs in the order they are served: the first whose shaped constraints
    #: hold for a shape is its answer, the heuristic where none does (what an export carries).
    ranked: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # a shape outside every bucket

    @property
    def speedup(self) -> float | None:
        if self.objective_ms and self.baseline_ms:
            return self.baseline_ms / self.objective_ms
        return None


def load_suites(directory: str | Path, failed: list[str] | None = None) -> list[Kernel]:
    """Import every ``test_*.py`` under ``directory`` (or that file) as pytest would (its folder
    first on the import path, for the helpers beside it) and return the kernels they declare at
    module level. A suite that fails to import raises :class:`ImportError` naming it, or, where
    ``failed`` is given, is left out and its error appended there. One that skips itself
    (``pytest.importorskip("pycuda.driver")``) declares nothing here, as under pytest."""
    paths = [Path(directory)] if Path(directory).is_file() else sorted(Path(directory).glob("**/test_*.py"))
    aside: dict = {}  # other projects' helper modules, back in sys.modules once these suites are imported
    try:
        return _load(paths, failed, aside)
    finally:
        sys.modules.update(aside)


def _load(paths: list[Path], failed: list[str] | None, aside: dict) -> list[Kernel]:
    """:func:`load_suites`' imports, each suite's helpers its own (:func:`_set_aside`)."""
    kernels: list[Kernel] = []
    for path in paths:
        package = package_root(path)
        name = _suite_name(path, package)
        if name in sys.modules and any(k.relinked for n, v in vars(sys.modules[name]).items()
                                       for k in kernels_in(n, v)):
            del sys.modules[name]  # imported through a link switched since: the file it leads to now is the suite
        imported = name not in sys.modules
        if imported:
            first = str((package or path).parent)  # as pytest's "prepend" puts it: absolute imports from there work
            sys.path.insert(0, first)
            _IMPORTING[name] = first
            try:
                _set_aside(Path(first), aside)
                if package:  # its relative imports (from .helpers import ...) need its packages
                    if name.startswith(_module_name(package)):
                        _import_package(package)
                    importlib.import_module(name)
                else:
                    spec = importlib.util.spec_from_file_location(name, path)
                    module = importlib.util.module_from_spec(spec)
                    sys.modules[name] = module
                    spec.loader.exec_module(module)
            except BaseException as e:  # noqa: BLE001 - any error in a suite is reported with its file
                sys.modules.pop(name, None)  # half run: the next import must not take it for the suite
                if isinstance(e, Skipped):  # a BaseException, past a framework's `except Exception`
                    continue
                if not isinstance(e, Exception):
                    raise
                if failed is None:
                    raise ImportError(f"{path}: {type(e).__name__}: {e}") from e
                failed.append(f"{path}: {type(e).__name__}: {e}")
                continue
            finally:
                if _IMPORTING.pop(name, None) is not None:  # a child forked meanwhile took its entry out
                    with contextlib.suppress(ValueError):  # as a suite may have itself
                        sys.path.remove(first)
        taken = {k.name: k for k in kernels}
        for k in dict.fromkeys(k for n, v in vars(sys.modules[name]).items() for k in kernels_in(n, v)):
            first = taken.setdefault(k.name, k)
            if first is not k:  # as pytest refuses it, this one alone (a generated table's entry, another
                REGISTRY[k.name] = first  # suite's kernel): which would the records and the framework follow?
                error = f"{path}: KernelError: {declared_twice(k.name, first.collected_from or first.declared_in)}"
                if failed is None:
                    raise ImportError(error)
                failed.append(error)
                continue
            # the suite that tunes it (not a generator's module), as a run reaches it (its tune command named
            # a linked file's target, and a linked suites folder's link, whose project's records/ a run never writes)
            k.collected_from = k.collected_from or reached(path)
            k.reached_from(path)
            if imported:  # as its link leads now, though the import handed back a helper module's declaration
                k.followed()
            if k not in kernels:
                kernels.append(k)
    return kernels


#: The folders suites were imported from (put first on the import path) by this process.
_SUITE_FOLDERS: set[Path] = set()


def _set_aside(folder: Path, aside: dict) -> None:
    """Let a suite's helper modules beside it (``from reduction_family import cpu_space``) be
    imported from its own folder, as pytest would, not taken from another project's module of
    that name this process holds (the report compared a revision's suites with today's helpers):
    each such module, one from another folder of suites, moves from ``sys.modules`` to
    ``aside``, to be put back once the folder's suites are imported, for the code that uses it."""
    here = folder.resolve()
    _SUITE_FOLDERS.add(here)
    names = {p.stem for p in here.glob("*.py")} | {p.parent.name for p in here.glob("*/__init__.py")}
    theirs = set()
    for name in names & set(sys.modules):
        top = Path(getattr(sys.modules[name], "__file__", None) or "/")
        home = (top.parent.parent if top.name == "__init__.py" else top.parent).resolve()
        if home != here and (home in _SUITE_FOLDERS or any(home.glob("test_*.py"))):
            theirs.add(name)
    for name in [n for n in sys.modules if n.split(".")[0] in theirs]:
        aside.setdefault(name, sys.modules.pop(name))


def package_root(path: Path) -> Path | None:
    """The outermost package folder (``__init__.py`` in it and each folder down) holding a suite
    file, as pytest finds it (of the :func:`~tunebench.kernel.reached` path: a file linked in from
    another project's package is in the package of the project linking it); None outside packages."""
    found = None
    for folder in reached(path).parents:
        if not (folder / "__init__.py").is_file():
            break
        found = folder
    return found


def _module_name(path: Path) -> str:
    """A module name of this process for a suite file or package folder: its own, whichever
    other project holds one of the same name (two projects' ``suites/test_softmax.py``), or links
    the file in (the :func:`~tunebench.kernel.reached` path: a name of the link's target made one
    kernel of both, its suite and template those of the project asked first); of the path's bytes,
    which a folder's name beyond ASCII has in any locale."""
    return f"tunebench_suite_{hashlib.sha256(os.fsencode(reached(path))).hexdigest()[:16]}"


def _suite_name(path: Path, package: Path | None) -> str:
    """The name a suite is imported under: in a package, its dotted name from the folder above the
    package, as pytest imports it (each ``__init__`` runs once, those the framework imported are
    reused), unless this process holds a module of one of those names from elsewhere (another
    project's package of the same name): then, as outside packages, one of its own."""
    if package is None:
        return _module_name(path)
    parts = reached(path).relative_to(package.parent.resolve()).with_suffix("").parts
    for i in range(1, len(parts) + 1):
        module, where = sys.modules.get(".".join(parts[:i])), package.parent.resolve().joinpath(*parts[:i])
        if module is not None and reached(getattr(module, "__file__", None) or "/") not in (
                where / "__init__.py", where.with_suffix(".py")):
            return ".".join((_module_name(package), *parts[1:]))
    return ".".join(parts)


def _import_package(folder: Path) -> None:
    """Import a suite's outermost package (``__init__.py``) under :func:`_module_name`, where its
    own name is another's; its subpackages import on demand, as the suite's imports ask."""
    name = _module_name(folder)
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


#: The per-module import locks of Python's import system (``importlib._bootstrap``), by module
#: name: a lock held by a thread that a fork left behind is never released in the child.
_IMPORT_LOCKS = getattr(importlib._bootstrap, "_module_locks", {})


def _imports_of_other_threads() -> list[str]:
    """The modules whose import another thread holds the lock of: in a child forked meanwhile,
    imports that no thread there will finish (a suite's helper, the framework's own library);
    the calling thread's own, which go on in the child, are not among them."""
    me = threading.get_ident()
    return [name for name, ref in list(_IMPORT_LOCKS.items())
            if getattr(ref(), "owner", None) not in (None, me)]


#: Suite modules being executed now -> the folder put first on the import path for each. A
#: child forked meanwhile drops them: it would take the half-run module in ``sys.modules`` for
#: the suite, and answer without its declaration for good.
_IMPORTING: dict[str, str] = {}


class SuiteImportWarning(UserWarning):
    """A kernel answered without its declaration where that matters: a suite failed to import
    while a lookup looked for it, or its constraints read the shape and cannot be checked."""


def this_device(target: str | None = None) -> str:
    """The device id of this machine for a target (default: ``$TUNEBENCH_DEVICE`` where set, else
    what ``--tune-target auto`` picks). A process that cannot fingerprint its GPU (no PyCUDA, as
    a PyTorch framework's) names the device whose records it serves with ``$TUNEBENCH_DEVICE``."""
    if target is None and _named_device():
        return _named_device()
    return _device_id(target, *_threads())


@functools.lru_cache(maxsize=64)
def device_named(name: str | os.PathLike) -> str:
    """The device id that ``device=`` or ``$TUNEBENCH_DEVICE`` names, by itself or by its records
    file's path (``records/<id>.json``, as a shell completes it), without the spaces a shell or a
    YAML file may leave, in lower case as every id is (``CPU-AMD-...`` was "no CPU variant" of a
    kernel that has a cpu one). Kept per name: ``$TUNEBENCH_DEVICE`` is read at every launch, and a
    path made per call was a third of a lookup's time."""
    return Path(os.fspath(name).strip()).stem.lower()


def _named_device() -> str | None:
    """The device id ``$TUNEBENCH_DEVICE`` names (:func:`device_named`); None where unset or blank."""
    named = os.environ.get("TUNEBENCH_DEVICE", "").strip()
    return device_named(named) if named else None


def _threads() -> tuple[str | None, int]:
    """What decides the thread count a device id holds: ``OMP_NUM_THREADS`` and the cores this
    process may run on (a framework may pin itself after its first lookup)."""
    return os.environ.get("OMP_NUM_THREADS"), cores_allowed()


@functools.lru_cache(maxsize=None)
def _device_id(target: str | None, threads: str | None, cores: int) -> str:
    return device_id(_fingerprint(target, threads, cores))


@functools.lru_cache(maxsize=None)
def _fingerprint(target: str | None, threads: str | None, cores: int) -> dict:
    """Fingerprinting reads /proc: once per target, OpenMP thread count and cores allowed."""
    return fingerprint(target or resolve("auto")[0])


def tune_command(decl: Kernel | None, records_dir: Path) -> str:
    """The command that tunes a kernel again, for a message: its own suite's where its declaration
    is known, else the project's suites folder's; where the project has none (its suites elsewhere,
    and no suites= given), one that says so rather than a ``pytest suites`` that runs nothing."""
    if decl is not None:
        return decl.tune_command(records_dir)
    command = "pytest suites --tune" if (Path(records_dir).parent / "suites").is_dir() else \
        "pytest <the suite declaring it> --tune"
    # a plain tune writes records/ beside its suites: any other folder is named, or it is not the one tuned into
    return command + tune_options(records_dir, Path(records_dir).parent / "records")


def _nothing_recorded(decl: Kernel | None, store: Summary | None, kernel: str, target: str, dtype: str,
                      bucket: Bucket, records_dir: Path, suites_dir: Path, source_hash: str | None = None,
                      timed: bool = False) -> str:
    """Why a bucket has nothing to serve: no trial, only trials other load disturbed, trials of
    representative shapes it no longer has (a shape added since: no config has a time on it), or
    trials under the kernel's name before a rename."""
    judged = store.reshaped(kernel, target, dtype, bucket) if store else None
    if judged:
        return (f"the bucket's representative shapes changed since its final round, which judged "
                f"{', '.join(map(str, judged))}, and no config recorded has a time on each of today's; "
                f"`{tune_command(decl, records_dir)}` tunes it again")
    disturbed = store.disturbed(kernel, dtype, bucket) if store else 0
    # every config failed: none ran on any of the bucket's shapes (``timed``: some did, on some)
    failures = store.failures(kernel, dtype, bucket, source_hash) if store and not timed else {}
    failed = ", ".join(f"{n} {s}" for s, n in failures.items())
    if failures and disturbed:  # a re-tune whose every trial failed, after one other load disturbed: both said
        return (f"every trial recorded on this bucket failed ({failed}) or was disturbed by other load ({disturbed}), "
                f"so none is served; each failure's error is in the records (`tunebench report` lists them), and "
                f"`{tune_command(decl, records_dir)}` on a quiet machine measures the disturbed again")
    if failures:
        return (f"every config recorded on this bucket failed ({failed}), "
                f"so none is served; each trial's error is in the records (`tunebench report` lists them)")
    untuned = store is not None and decl is not None and not any(
        (t["target"], t["dtype"]) == (target, dtype) for t in store.tasks(kernel))
    renamed = kernel_renamed(store.tasks(), decl, target, dtype, records_dir, suites_dir) if untuned else None
    if renamed:
        return f"nothing is recorded for {kernel} in {dtype}: {renamed}"
    if not disturbed:  # the dtype named: a dtype never tuned read as a bucket never reached
        others = sorted({t["dtype"] for t in (store.tasks(kernel) if store else [])
                         if t["target"] == target and t["bucket"] == bucket.name and t["dtype"] != dtype})
        # a dtype dropped from the declaration since its tune is no dtype "it is tuned in": best() never serves it
        variant = decl.variant(target) if decl is not None else None
        dropped = [d for d in others if variant is not None and d not in variant.dtypes]
        tuned = [d for d in others if d not in dropped]
        held = ([f"it is tuned in {', '.join(tuned)}"] if tuned else []) + (
            [f"{'also recorded' if tuned else 'it is recorded only'} in {', '.join(dropped)}, which {kernel} no "
             f"longer declares for the {target} target"] if dropped else [])
        return (f"nothing is recorded for this bucket in {dtype}" + (f" ({'; '.join(held)})" if held else "")
                + f"; `{tune_command(decl, records_dir)}` tunes it")
    some = f"{disturbed} trials recorded on this bucket's shapes were all" if disturbed > 1 else \
        "1 trial recorded on this bucket's shapes was"
    return (f"the {some} disturbed by other load, so none is served; "
            f"`{tune_command(decl, records_dir)}` on a quiet machine measures "
            f"again")


def _no_round(store: Summary, task: dict | None, kernel: str, target: str, dtype: str, bucket: Bucket) -> str:
    """Why no final round of today's declaration judged the bucket: the words best() puts in brackets."""
    judged = store.reshaped(kernel, target, dtype, bucket)
    busy = store.unjudged(kernel, target, dtype, bucket)
    return (f"the bucket's representative shapes changed since its final round, which judged "
            f"{', '.join(map(str, judged))}" if judged else
            f"its final round confirmed nothing: {brief(busy)}" if busy else
            "its tune ended before one: interrupted, or the machine too busy" if task else
            "no tune of this bucket ran: its shapes' trials were measured for another bucket")


def _other_threads(folder: _Directory, device: str, store: Summary | None, kernel: str, dtype: str | None,
                   bucket: str | None) -> str:
    """Where this CPU is recorded with another thread count (``OMP_NUM_THREADS``, ``taskset`` or
    a cgroup set at tune time and not now, or the reverse: another device id) for the kernel
    (and bucket, where given), the words that say so; else nothing."""
    own = store.fingerprint if store else None
    if own is None and not _named_device() and device == _device_id(None, *_threads()):
        own = _fingerprint(None, *_threads())  # this machine, never tuned with today's thread count
    if not own or "threads" not in own:  # no CPU's: no other device id of it to read
        return ""
    found = []
    for path in records_files(folder.path):
        try:
            other = folder.summary(path.stem) if path.stem != device else None
        except RecordsError:
            continue
        theirs = other.fingerprint if other else None
        if theirs and threads_apart(own, theirs) and any(
                (dtype is None or t["dtype"] == dtype) and bucket in (None, t["bucket"]) for t in other.tasks(kernel)):
            n = theirs["threads"]  # the affinity is the calling thread's: a pinned thread counts its own cores
            found.append(f"{path.stem} (this machine running {n} thread{'s' if n != 1 else ''}: served to a caller "
                         f"with OMP_NUM_THREADS={n} and at least {n} core{'s' if n != 1 else ''} allowed to it)")
    return f"; recorded for {', '.join(found)}" if found else ""


def project(records: str | Path | None = None, suites: str | Path | None = None,
            kernel: Kernel | None = None) -> tuple[Path, Path]:
    """(records folder, suites folder) of the project, found from its root rather than the
    working directory: ``records``/``suites`` where given, else under ``$TUNEBENCH_ROOT``, else
    under the root of the project of ``suites``, else of the one that declares ``kernel`` (where a
    tune writes records: see :func:`~tunebench.kernel.project_root`), else the same from the working directory;
    given ``records`` alone, the suites are its sibling ``suites``.
    :class:`LookupError` names every place it looked."""
    if records is not None:  # the project is the records folder's
        if not Path(records).is_dir():  # a typo must not quietly serve the heuristic
            hint = ": pass its folder (and device= for another device's file)" if Path(records).is_file() else ""
            raise LookupError(f"records={records}: not a folder{hint}")
        return Path(records), Path(suites) if suites is not None else Path(records).parent / "suites"
    looked = []
    root = Path(os.environ["TUNEBENCH_ROOT"]) if os.environ.get("TUNEBENCH_ROOT") else None
    if root is not None and not root.is_dir():
        raise LookupError(f"TUNEBENCH_ROOT={root}: no such folder")
    if root is None:
        looked.append("$TUNEBENCH_ROOT (unset)")
        origin = kernel.origin if kernel else None
        given = suites if suites is not None else origin  # suites= names the project, whoever declared the name last
        declared = [Path(given).resolve()] if given is not None else []
        for start in [*declared, Path.cwd()]:
            root = project_root(start)
            if root is not None:
                break
            looked.append(f"{start} and its parents")
    if root is None:
        raise LookupError(f"no project root found: looked in {', '.join(looked)} for a folder with records/, suites/ or "
                          f"{', '.join(INI_FILES)}; pass records= (--records) or set TUNEBENCH_ROOT")
    return root / "records", Path(suites) if suites is not None else root / "suites"


class Summary:
    """What lookups need of one device's records, small enough to load in milliseconds: the
    fingerprint, the task descriptions, the final rounds' choices and, per successful undisturbed
    trial, (kernel, dtype, source hash, shape, config, median, setup hash, entry), and the same per
    trial stopped early undisturbed (the tune ranks the trials' fastest by their samples too). Kept beside the records in
    ``.index/<device>.v<INDEX_FORMAT>.json``, valid while the records file, its archive and its
    journal keep their size, times and inode."""

    def __init__(self, data: dict):
        self.fingerprint = data["fingerprint"]
        self._tasks = data["tasks"]
        self._finals = {tuple(k): v for k, v in data["finals"]}
        self._rows = data["rows"]
        self._early = data["early"]
        self._disturbed = data["disturbed"]
        self._failed = data["failed"]
        self._unjudged = data["unjudged"]
        self._ranked: dict[tuple, tuple] = {}

    @classmethod
    def of(cls, store: RecordStore) -> Summary:
        finals, unjudged = defaultdict(list), {}
        for check in store.checks(kind="tune"):  # each task's rounds that judged its finalists, in order
            task = [check["kernel"], check["target"], check["dtype"], check["bucket"]]
            if check.get("disturbed"):  # what kept the latest round from judging, where it is the latest
                unjudged[json.dumps(task)] = check.get("problem") or "the machine stayed disturbed"
                continue
            unjudged.pop(json.dumps(task), None)
            measured = final_ms(check) or [(None, None)] * len(check["shapes"])
            shapes = _shapes_key(e["shape"] for e in check["shapes"])  # a bucket's shapes may change, and back
            finals[(check["kernel"], check["target"], check["dtype"], check["bucket"], shapes)].append({
                "source_hash": check["source_hash"], "setup_hash": check.get("setup_hash"), "entry": check.get("entry"),
                "entries": [[e["shape"], e["best"], *ms, e["baseline"]] for e, ms in zip(check["shapes"], measured)],
                "reason": check.get("reason") or "", "unverified": [u["config"] for u in check.get("unverified", [])],
                "heuristic_unverified": check.get("heuristic_unverified", [])})
        trials = store.triage()
        def row(d):
            return [d["kernel"], d["dtype"], d["source_hash"], d["shape"], d["config"], d["stats"]["median"],
                    d.get("setup_hash"), d.get("entry")]
        rows = [row(d) for d in trials.undisturbed]
        early = [row(d) for d in trials.latest if d["status"] == "early_stopped" and d.get("verdict") != "disturbed"
                 and d.get("stats")]  # stats are optional but for ok (trial_problem): none, no time to rank
        disturbed = [[d["kernel"], d["dtype"], d["shape"]] for d in trials.unsettled]
        failed = [[d["kernel"], d["dtype"], d["source_hash"], d["shape"], d["config"], d["status"], d.get("setup_hash"),
                   d.get("error")] for d in trials.latest if d["status"] not in ("ok", "early_stopped")]
        return cls({"fingerprint": store.fingerprint, "tasks": store.tasks(), "rows": rows, "early": early,
                    "disturbed": disturbed,
                    "failed": failed, "unjudged": unjudged, "finals": [[list(k), v] for k, v in finals.items()]})

    def data(self) -> dict:
        return {"fingerprint": self.fingerprint, "tasks": self._tasks, "rows": self._rows, "early": self._early,
                "disturbed": self._disturbed, "failed": self._failed, "unjudged": self._unjudged, "finals": [[list(k), v] for k, v in self._finals.items()]}

    def tasks(self, kernel: str | None = None) -> list[dict]:
        """The kernel's tasks (every kernel's, without one)."""
        return [t for t in self._tasks if kernel is None or t["kernel"] == kernel]

    def kernels(self) -> set[str]:
        return {t["kernel"] for t in self._tasks}

    def _final(self, kernel: str, target: str, dtype: str, bucket: Bucket,
               today: tuple = (None, None, None)) -> dict | None:
        """{source_hash, setup_hash, entry, entries, reason} of the task's latest final round, where it
        judged the bucket's representative shapes (one of other shapes judged another bucket); of
        ``today``'s (source hash, setup hash, entry point) where recorded (see :func:`preferred`)."""
        return preferred(self._finals.get((kernel, target, dtype, bucket.name, _shapes_key(bucket.shapes)), []),
                         *today)

    def reshaped(self, kernel: str, target: str, dtype: str, bucket: Bucket) -> list[tuple] | None:
        """The shapes the task's latest final round judged, where they are not the bucket's now."""
        if self._final(kernel, target, dtype, bucket):
            return None
        other = [v[-1] for k, v in self._finals.items() if k[:4] == (kernel, target, dtype, bucket.name)]
        return [tuple(e[0]) for e in other[-1]["entries"]] if other else None

    def final(self, kernel: str, target: str, dtype: str, bucket: Bucket, today: tuple) -> dict | None:
        """shape -> config the latest final round of the task chose for ``today``'s (source hash,
        setup hash, entry point), if any of this source."""
        found = self._final(kernel, target, dtype, bucket, today)
        if found is None or found["source_hash"] != today[0]:
            return None
        return {tuple(shape): config for shape, config, *_ in found["entries"]}

    def final_declaration(self, kernel: str, target: str, dtype: str, bucket: Bucket, today: tuple) -> str | None:
        """The setup hash of the declaration the task's latest final round judged under (None: a
        round from before declarations were kept)."""
        return (self._final(kernel, target, dtype, bucket, today) or {}).get("setup_hash")

    def final_baseline(self, kernel: str, target: str, dtype: str, bucket: Bucket, today: tuple) -> dict | None:
        """shape -> the heuristic's config as the task's latest final round measured it."""
        found = self._final(kernel, target, dtype, bucket, today)
        return {tuple(e[0]): e[4] for e in found["entries"]} if found else None

    def unverified(self, kernel: str, target: str, dtype: str, bucket: Bucket, today: tuple) -> tuple[set, list]:
        """(the config keys the task's latest final round found failing on a verify shape, where the
        heuristic's own config failed there): best() serves none of those configs, on no shape of
        the bucket (one its pick's constraints exclude took the best recorded that fit)."""
        found = self._final(kernel, target, dtype, bucket, today) or {}
        return {config_key(c) for c in found.get("unverified", [])}, found.get("heuristic_unverified", [])

    def final_reason(self, kernel: str, target: str, dtype: str, bucket: Bucket, today: tuple) -> str:
        """Why the latest final round of the task kept the heuristic, or took no lead over it."""
        return (self._final(kernel, target, dtype, bucket, today) or {"reason": ""})["reason"]

    def confirmed(self, kernel: str, target: str, dtype: str, bucket: Bucket,
                  today: tuple) -> tuple[float, float] | None:
        """(chosen, heuristic) bucket objectives in ms as the latest final round measured them (the
        summary's figures), or None where it measured none."""
        entries = (self._final(kernel, target, dtype, bucket, today) or {"entries": []})["entries"]
        if not entries or any(e[2] is None for e in entries):
            return None
        return (bucket.objective({tuple(e[0]): e[2] for e in entries}),
                bucket.objective({tuple(e[0]): e[3] for e in entries}))

    def latest_source(self, kernel: str, target: str, dtype: str, bucket: Bucket) -> str | None:
        """The template source the task was last tuned with: its final round's, else its trials'."""
        found = self._final(kernel, target, dtype, bucket)
        if found is not None:
            return found["source_hash"]
        return next((t["source_hash"] for t in self._tasks if (t["kernel"], t["target"], t["dtype"], t["bucket"])
                     == (kernel, target, dtype, bucket.name)), None)

    def failure(self, kernel: str, dtype: str, bucket: Bucket, source_hash: str | None,
                declarations: Sequence[str | None], config: dict) -> tuple[tuple, str] | None:
        """(shape, status) of a failed trial of ``config`` on the bucket's shapes under the first of
        ``declarations`` (setup hashes: today's, then the task's as last tuned) with anything
        recorded on them: one that failed under a reference or tolerance since corrected, or
        restored since, is no failure of today's. Where none has (records from before declarations
        were kept), the latest failure recorded stands."""
        shapes, key = set(bucket.shapes), config_key(config)
        failed = [f for f in self._failed if (f[0], f[1]) == (kernel, dtype) and f[2] in (source_hash, None)
                  and tuple(f[3]) in shapes]
        held = next((setup for setup in declarations if setup is not None and (
            any(f[6] == setup for f in failed) or any((r[0], r[1]) == (kernel, dtype) and r[6] == setup
                                                      and tuple(r[3]) in shapes for r in self._rows))), None)
        return next(((tuple(shape), status) for _, _, _, shape, c, status, setup, _ in failed
                     if config_key(c) == key and (held is None or setup in (held, None))), None)

    def verdicts(self, kernel: str, dtype: str, bucket: Bucket, source_hash: str | None,
                 setup_hash: str | None) -> dict[tuple, tuple[str, str | None, tuple | None]]:
        """config key -> (status, error, shape) of its trials on the bucket's shapes under the
        declaration ``setup_hash``: its failure where one failed, else ok or early_stopped. A round
        of an earlier declaration (a tolerance tightened since) may have picked a config these say
        fails today."""
        if setup_hash is None:
            return {}
        shapes, found = set(bucket.shapes), {}
        for rows, status in ((self._early, "early_stopped"), (self._rows, "ok")):
            for r in rows:
                if (r[0], r[1]) == (kernel, dtype) and r[2] in (source_hash, None) and tuple(r[3]) in shapes \
                        and r[6] == setup_hash:
                    found[config_key(r[4])] = (status, None, None)
        for k, d, h, shape, config, status, setup, error in self._failed:
            if (k, d) == (kernel, dtype) and h in (source_hash, None) and tuple(shape) in shapes and setup == setup_hash:
                found[config_key(config)] = (status, error, tuple(shape))
        return found

    def failures(self, kernel: str, dtype: str, bucket: Bucket, source_hash: str | None) -> dict[str, int]:
        """status -> configs of this source whose latest trial on one of the bucket's shapes failed so."""
        shapes, found = set(bucket.shapes), defaultdict(set)
        for k, d, h, shape, config, status, *_ in self._failed:
            if (k, d) == (kernel, dtype) and h in (source_hash, None) and tuple(shape) in shapes:
                found[status].add(config_key(config))
        return {status: len(configs) for status, configs in sorted(found.items())}

    def unjudged(self, kernel: str, target: str, dtype: str, bucket: Bucket) -> str | None:
        """What kept the task's latest final round from judging (other load), where one ran and
        no later one judged."""
        return self._unjudged.get(json.dumps([kernel, target, dtype, bucket.name]))

    def disturbed(self, kernel: str, dtype: str, bucket: Bucket) -> int:
        """Trials on the bucket's shapes measured only while other load disturbed them: none to serve."""
        shapes = set(bucket.shapes)
        return sum(k == kernel and d == dtype and tuple(shape) in shapes for k, d, shape in self._disturbed)

    def ranked(self, kernel: str, dtype: str, bucket: Bucket, source_hash: str | None,
               setup_hash: str | None = None, entry: str | None = None, early: bool = False) -> tuple[dict, dict]:
        """(config key -> bucket objective, config key -> {shape: median}) over the bucket's shapes,
        of the trials of ``setup_hash`` (the task's declaration) where some are recorded, and of
        none that says it called another ``entry`` than today's (another function of the same source);
        with ``early``, of the trials stopped early too, as the tune ranks the trials' fastest. Whether
        ``setup_hash``'s trials alone are ranked is decided by those run to the end, with or without
        ``early``: decided on both, one early stop of today's declaration left an earlier one's
        complete trials out of the ranking with early stops alone."""
        key = (kernel, dtype, bucket.name, tuple(bucket.shapes), source_hash, setup_hash, entry, early)
        if key not in self._ranked:
            times: dict[tuple, dict[tuple, float]] = defaultdict(dict)
            shapes = set(bucket.shapes)
            rows, stopped = ([r for r in found if r[:2] == [kernel, dtype] and source_hash in (None, r[2])
                              and tuple(r[3]) in shapes] for found in (self._rows, self._early if early else []))
            if setup_hash is not None and any(r[6] == setup_hash for r in rows):
                rows, stopped = ([r for r in found if r[6] == setup_hash] for found in (rows, stopped))
            rows += stopped
            if entry is not None:
                rows = [r for r in rows if r[7] in (None, entry)]
            for _, _, _, shape, config, median, _, _ in rows:
                times[config_key(config)][tuple(shape)] = median
            self._ranked[key] = ({c: bucket.objective(t) for c, t in times.items() if len(t) == len(bucket.shapes)},
                                 times)
        return self._ranked[key]


#: A device whose summary is not in memory.
_UNREAD = object()


class _Directory:
    """A records folder held in memory: one :class:`Summary` per device, built again when a
    records file, its archive or its journal changes (checked at most every :data:`REFRESH_S`
    seconds); ``generation`` counts the changes, and an answer made at an older one is not served."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()  # held to build a summary and to drop them: never both at once
        self.generation = 0
        self._stamp: tuple | None = None  # None: the files are read again at the next check
        self._checked = -math.inf
        self._summaries: dict[str, Summary | str | None] = {}  # str: why the file cannot be read
        self._last_read: dict[str, Summary] = {}  # each device's summary as last read whole
        self._vanished: set[str] = set()  # devices whose file the last rebuild found absent (see _rebuild)
        self.rebuild: threading.Thread | None = None  # building the summaries read again, where one is
        self._rankings: tuple[int, dict] = (0, {})

    def rankings(self) -> dict[tuple, _Ranking]:
        """(the device's summary, declaration, kernel, device, dtype, target, bucket, records, suites)
        -> the bucket's part of its answers (:class:`_Ranking`), made from this generation's summaries:
        an older one's go with it, and the summaries they hold."""
        if self._rankings[0] != self.generation:
            self._rankings = (self.generation, {})
        return self._rankings[1]

    def refresh(self) -> None:
        """Notice a change of the folder's files. The summaries read are built again by a thread of
        their own, and answers made from the old ones are served meanwhile, for at most
        :data:`REFRESH_S` more; the next check waits for the rebuild. While another process tuned
        into the folder, each append dropped them, and a launch a second waited on the lock for
        the whole summary to be read again (up to 1.3 s)."""
        now = time.monotonic()
        if now - self._checked < REFRESH_S:
            return
        self._checked = now
        rebuild = self.rebuild
        if rebuild is not None:  # its time to serve the old answers is over
            rebuild.join()
            return
        stamp = self._stamps()
        if stamp is not None and stamp == self._stamp:
            return
        with self.lock:
            if self.rebuild is not None or (stamp is not None and stamp == self._stamp):  # another thread saw it first
                return
            read = [device for device, found in self._summaries.items() if isinstance(found, Summary)]
            if REFRESH_S <= 0 or not read:  # none to serve meanwhile: read again when asked
                self._stamp, self._summaries = stamp, {}
                self.generation += 1
                return
            self.rebuild = threading.Thread(target=self._rebuild, args=(stamp, read), daemon=True,
                                            name=f"tunebench records {self.path}")
            self.rebuild.start()

    def _rebuild(self, stamp: tuple, devices: list[str]) -> None:
        """Build the summaries of ``devices`` again, then serve them; one that fails (a file half
        written, a newer format) is left out, for the next lookup to read and say why. A file
        absent is answered from as before until it is absent at the next check too: git checkout
        unlinks a file, then writes it whole, and a check between the two served the heuristic
        for every launch until the next."""
        fresh, vanished = {}, set()
        try:
            for device in devices:
                with contextlib.suppress(RecordsError):
                    fresh[device] = self._read(device)
                    if fresh[device] is None and device not in self._vanished:
                        fresh[device] = self._summaries.get(device)
                        vanished.add(device)
        finally:
            with self.lock:
                self._stamp = None if vanished else stamp  # checked again, as a change is
                self._summaries, self._vanished = fresh, vanished
                self.generation += 1
                self.rebuild = None

    def _stamps(self, device: str = "*") -> tuple | None:
        """The stats of a device's records file, archive and journal (every device's: ``*``); None
        where one of them is racy (see :mod:`tunebench.stamps`): what is read of it may change
        unseen by its stat, and is read again at the next check, nor kept in an index."""
        found = []
        files = self.path.glob(f"{device}.json")
        left = self.path.glob(f"{device}.archive.jsonl")  # an archive whose file is gone: the notes name it
        for p in sorted({p for f in files for p in (f, *companions(f))} | set(left)):
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            if racy(st):
                return None
            # a file replaced whole (git checkout, cp -p, rsync -t) gets another inode or ctime
            found.append((p.name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns))
        return tuple(sorted(found))

    def summary(self, device: str) -> Summary | None:
        """The device's summary: from memory, else the index file if it is current, else built
        from the records (and the index file written, where the folder is writable). One thread
        builds it while the others wait. A file that cannot be read (caught half written by a
        checkout or a copy) is answered from as it was last read whole, with a warning, and is
        read again only once it changes; without such a read, its error is raised, also without
        reading it again per call."""
        found, stale = self._summaries.get(device, _UNREAD), False
        if found is _UNREAD:
            with self.lock:
                found = self._summaries.get(device, _UNREAD)
                if found is _UNREAD:
                    try:
                        found = self._read(device)
                    except NewerFormat:
                        raise  # not half written: this tunebench cannot read it, then or now
                    except RecordsError as e:
                        found, stale = str(e), device in self._last_read
                    self._summaries[device] = found
        if stale:  # said once the answer is kept (under -W error too), out of the lock
            warnings.warn(StaleRecordsWarning(f"{found}; answering from the file as it was last read whole until "
                                              f"it changes"), stacklevel=_caller())
        if isinstance(found, str):
            if device in self._last_read:
                return self._last_read[device]
            raise RecordsError(found)
        return found

    def _read(self, device: str) -> Summary | None:
        path = self.path / f"{device}.json"
        if not path.exists():
            return None
        # beside the file itself, as its journal and the .gitignore naming .index/ are: a link's folder had it
        # unignored; an older tunebench keeps its own
        index = Path(os.path.realpath(path)).parent / ".index" / f"{device}.v{INDEX_FORMAT}.json"
        stamps = self._stamps(device)
        stamp = None if stamps is None else [list(s) for s in stamps]
        try:
            cached = json.loads(index.read_text())
            indexed = Summary(cached["summary"]) if cached.get("format") == INDEX_FORMAT else None
        except (OSError, ValueError, KeyError):
            cached, indexed = {}, None
        found = indexed if indexed is not None and cached["stamp"] == stamp else None
        if found is None:
            try:
                with bulk():
                    found = Summary.of(RecordStore(path))
            except NewerFormat:
                raise
            except RecordsError:
                if indexed is not None:  # an earlier whole read, by another process: a fresh one is answered too
                    self._last_read.setdefault(device, indexed)
                raise
            try:
                if stamp is not None:
                    index.parent.mkdir(exist_ok=True)
                    tmp = index.with_name(f".{index.name}.{os.getpid()}")
                    tmp.write_text(json.dumps({"stamp": stamp, "format": INDEX_FORMAT, "summary": found.data()}))
                    os.replace(tmp, index)
            except OSError:
                pass  # a read-only checkout: answer from memory only
        ignore = index.parent / ".gitignore"  # itself and all it holds: records vendored without the one a run
        if index.parent.is_dir() and not ignore.exists():  # writes showed it in git status
            with contextlib.suppress(OSError):  # a read-only checkout
                write_atomic(ignore, "*\n", f"{os.getpid()}.tmp")
        self._last_read[device] = found
        return found


class UnknownDeviceWarning(UserWarning):
    """A device named by ``device=`` or ``$TUNEBENCH_DEVICE`` has no records where others do:
    most likely a typo, which would otherwise quietly serve the heuristic at every launch."""


class UntunedWarning(UserWarning):
    """The heuristic is served, untuned, where only a lookup's note said so: this machine's own
    id (another CPU, another thread count) has no records though others' are there, or the dtype
    asked is not declared. Said once per kernel and cause, not per launch."""


#: (kernel, warning category, device or dtype) said already: a fallback is said once per process, not per launch.
_SAID: dict[tuple, object] = {}


def _say_once(kernel: str, category: type[Warning], about: str, message: str) -> None:
    """Warn of a fallback to the heuristic once per (kernel, category, device or dtype): an
    answer is made once per shape, and a framework's shapes are many."""
    token = object()
    if _SAID.setdefault((kernel, category, about), token) is token:  # one thread of those asking at once
        warnings.warn(category(f"kernel {kernel!r}: {message}"), stacklevel=_caller())


class LegacyRecordsWarning(UserWarning):
    """Tuned configs are served from a CPU's records of before tunebench fingerprinted family,
    model and ISA (a device named by ``device=`` or ``$TUNEBENCH_DEVICE``): which machine they
    were measured on is not known, nor whether they suit this one. Said once per kernel and device."""


class StaleRecordsWarning(UserWarning):
    """A records file could not be read (half written?): answers come from its last whole read."""


#: Where tunebench's own files are: a warning names the first caller outside them.
_PACKAGE = str(Path(__file__).parent) + os.sep


def _caller() -> int:
    """The ``stacklevel`` of the first frame outside tunebench, for a warning to name the user's line."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


#: The most configs served on a bucket: its best, then the next fastest for the shapes whose
#: constraints the best fails (:attr:`Choice.ranked`, what an export carries).
RANKED = 8
#: Octaves (doublings) in one dim between a shape asked and its bucket's nearest representative
#: shape beyond which the answer's note says the pick was measured far from there (a pick served
#: 16x beyond its shapes took 1.6-1.9x the heuristic's time).
FAR_OCTAVES = 3
#: The layout of the index files, part of their name: tunebench versions sharing a records folder
#: never read each other's.
INDEX_FORMAT = 18
#: Seconds between checks that the records files are unchanged.
REFRESH_S = 1.0
#: Answers kept in all (shapes differ from call to call in a framework).
MAX_ANSWERS = 65536
_DIRECTORIES: dict[Path, _Directory] = {}
#: Suites folders whose suites this process has imported -> the errors of those that failed (not
#: tried again; said whenever a kernel is answered without its declaration), and the kernels
#: they declare by name (another project's of the same name may be the one registered last).
_SUITES_LOADED: dict[Path, tuple[list[str], dict[str, Kernel]]] = {}
#: (kernel, its registered declaration, records, suites, $TUNEBENCH_ROOT, working directory) -> (the declaration
#: of the project asked, the folders as they resolved, when) (see :func:`declaration`).
_DECLARED: dict[tuple, tuple[Kernel | None, tuple, float]] = {}
#: Held while a folder's suites are imported: a thread asking meanwhile waits for the declarations.
_SUITES_LOCK = threading.RLock()  # a suite may itself look a kernel up while it is imported
#: (kernel, shape, device, dtype, records, suites, root, threads, working directory) -> (folder,
#: its generation when the answer was made, answer, the variant answered for and its source hash then,
#: the declaration a name was answered for: one whose suite's link was switched since answers again;
#: a Kernel given is answered as it is, whatever its link leads to)
_FAST: dict[tuple, tuple[_Directory, int, Choice, Variant | None, str | None, Kernel | None]] = {}
_FAST_LOCK = threading.Lock()  # held to add an answer and to drop the oldest
#: (records, suites, declaration, what :func:`_context` gives) -> (the project's folders, when found)
_PROJECTS: dict[tuple, tuple[tuple[Path, Path], float]] = {}


def _fresh_locks() -> None:
    """In a child forked while one of the parent's threads held a lock (a first lookup, a
    DataLoader forking meanwhile): fresh locks, as that thread is not in the child to release
    them, and every lookup there waited forever."""
    global _SUITES_LOCK, _FAST_LOCK
    _SUITES_LOCK, _FAST_LOCK = threading.RLock(), threading.Lock()
    for name in _imports_of_other_threads():  # their threads are not in the child: imported again there
        if getattr(getattr(sys.modules.get(name), "__spec__", None), "_initializing", False):
            del sys.modules[name]  # half run; a module imported whole stays, as the framework's own
        _IMPORT_LOCKS.pop(name, None)  # held by a thread not in the child: a fresh one is made
    for name, first in _IMPORTING.items():  # a suite outside packages holds no import lock to say it
        sys.modules.pop(name, None)
        with contextlib.suppress(ValueError):  # a suite that took its folder off the path itself
            sys.path.remove(first)
    _IMPORTING.clear()
    for folder in _DIRECTORIES.values():
        folder.lock = threading.Lock()
        if folder.rebuild is not None:  # its thread is not in the child: the files are checked again
            folder.rebuild, folder._stamp, folder._checked = None, None, -math.inf


os.register_at_fork(after_in_child=_fresh_locks)


def _directory(path: Path) -> _Directory:
    """The folder as named, not resolved: records deployed by swapping a symlink are read through
    it, so the swap is seen as a change (a resolved folder kept the old release's answers)."""
    key = Path(os.path.abspath(path))
    found = _DIRECTORIES.get(key) or _DIRECTORIES.setdefault(key, _Directory(key))
    found.refresh()
    return found


def _answer(kernel: str | Kernel, shape: Sequence[int], device: str | None, dtype: str | None,
            records: str | Path | None, suites: str | Path | None) -> Choice:
    """The cached answer to a lookup: a dictionary hit and a clock check per call once seen."""
    if not isinstance(kernel, (str, Kernel)):
        raise TypeError(f"kernel {kernel!r}: give a kernel's name or its tunebench.Kernel")
    shape = _shape(shape, getattr(kernel, "name", kernel))
    if type(dtype).__hash__ is None:  # an array, a list: the answers' cache failed naming nothing
        raise TypeError(f"kernel {getattr(kernel, 'name', kernel)!r}: dtype is a {type(dtype).__name__}: {_A_DTYPE}")
    if device is not None and not isinstance(device, (str, os.PathLike)):  # best(k, x.shape, x.dtype)
        raise TypeError(f"kernel {getattr(kernel, 'name', kernel)!r}: device is {device!r}, not a device id: a dtype "
                        f"is given as dtype=, after the device (best(kernel, shape, dtype=...))")
    # the declaration itself, not its id (a later one may reuse it): by name, the one declared now
    memo = (kernel, REGISTRY.get(kernel) if isinstance(kernel, str) else None, shape, device, dtype,
            str(records) if records is not None else None, str(suites) if suites is not None else None,
            *_context(records, suites, device))
    hit = _FAST.get(memo)
    if hit is not None:
        folder, generation, choice, variant, source, answered = hit
        folder.refresh()
        if folder.generation == generation and (source is None or variant.source_hash == source) and not (
                answered is not None and answered.relinked):
            return choice
    decl = kernel if isinstance(kernel, Kernel) else REGISTRY.get(kernel)
    dtype = dtype_name(dtype, getattr(kernel, "name", kernel))
    records_dir, suites_dir = _project_now(records, suites, decl, memo[-3:])
    if isinstance(kernel, str):
        decl = declaration(kernel, records, suites, suites_dir)
    if decl is None and suites_dir.is_dir():
        failed = _load_once(suites_dir)[0]
        decl = REGISTRY.get(kernel)
        said = declared_twice(kernel, "").split(",")[0] + ","  # the words naming this kernel
        twice = next((f for f in failed if said in f), None)
        if twice:  # pytest collects neither, so nothing says which the framework should follow
            raise KernelError(f"{twice}: rename one")
        if decl is None and failed:
            warnings.warn(f"kernel {kernel!r} is answered from the records alone: no suite under {suites_dir} "
                          f"declares it, and these failed to import: {'; '.join(failed)}", SuiteImportWarning,
                          stacklevel=_caller())
    name = decl.name if decl else kernel
    named = "device" if device else "$TUNEBENCH_DEVICE" if _named_device() else None
    device = device_named(device) if device else this_device()
    if named and not (records_dir / f"{device}.json").exists():
        _warn_unknown(named, device, records_dir)
    folder = _directory(records_dir)
    generation = folder.generation  # before choosing: an answer from records that change meanwhile is not kept
    try:
        choice, variant = _choose(folder, decl, name, _dims(shape, name), device, dtype, records_dir, suites_dir)
    except (SpaceError, KernelError) as e:  # the declaration's code (a heuristic, a constraint) at fault
        where = f" ({decl.declared_in})" if decl and decl.declared_in else ""
        at = "" if str(tuple(shape)) in str(e) else f", shape {tuple(shape)}"
        raise type(e)(f"kernel {name!r}{where}{at}: {e}") from None
    source = _source_now(variant)  # its template edited since: answered again, for the text, config and note to agree
    with _FAST_LOCK:
        if len(_FAST) >= MAX_ANSWERS:  # the older half goes (first asked, first dropped), not every answer
            for old in list(itertools.islice(_FAST, MAX_ANSWERS // 2)):
                del _FAST[old]
        _FAST[memo] = (folder, generation, choice, variant, source, decl if isinstance(kernel, str) else None)
    return choice


def check_suites(suites: str | Path | None) -> None:
    """Refuse ``suites=`` that is no folder: a typo was answered from the records alone, and
    ``flags()`` then asked for the suites= it was given."""
    if suites is not None and not os.path.isdir(suites):
        hint = ": pass the folder of the suites" if os.path.isfile(suites) else ""
        raise LookupError(f"suites={suites}: not a folder{hint}")


def _project_now(records: str | Path | None, suites: str | Path | None, decl: Kernel | None,
                 context: tuple) -> tuple[Path, Path]:
    """:func:`project`, its folders found again at most once a second (its paths' resolving was a
    third of a lookup's time for a shape not asked before); ``context``: :func:`_context`'s."""
    key = (str(records) if records is not None else None, str(suites) if suites is not None else None, decl, context)
    found, read = _PROJECTS.get(key, (None, -REFRESH_S))
    now = time.monotonic()
    if found is None or now - read >= REFRESH_S:
        check_suites(suites)
        found = project(records, suites, decl)
        if len(_PROJECTS) >= MAX_ANSWERS:
            _PROJECTS.clear()
        _PROJECTS[key] = found, now
    return found


def _shapes_key(shapes) -> str:
    """A set of representative shapes as a key that survives the index's JSON."""
    return json.dumps(sorted(list(s) for s in shapes))


def _warn_unknown(named: str, device: str, records_dir: Path) -> None:
    """Where a named device has no records file but others are recorded, say which are, and the
    one it most likely meant."""
    others = [p.stem for p in records_files(records_dir)]
    if others:
        meant = closest(device, others)
        warnings.warn(UnknownDeviceWarning(
            f"{named}={device}: {records_dir} holds no records for it, so nothing tuned is served; it holds "
            f"{', '.join(others)}" + (f" (did you mean {meant}?)" if meant else "")), stacklevel=_caller())


#: The largest dim a lookup takes: a 64-bit index's, as the exported header's (a dim of 400
#: digits overflowed a float, an error naming neither the kernel nor the shape).
MAX_DIM = 2**63 - 1


def _shape(shape, kernel: str) -> tuple:
    """A shape as a tuple of ints; an int is a 1-D shape, as numpy takes one. Checked on every
    call, cached answer or not: (64.0, 1024) equals (64, 1024), and would find its answer. Text
    is no shape: b"1" was served as (49,), "1024" refused as four dims. Nor is an array or a
    tensor, of any dims: ``x`` for ``x.shape`` (every row of it was in the message), and a 1-D
    int one was served as the dims it holds, which may as well be data (an index tensor) given
    by mistake."""
    if isinstance(shape, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"kernel {kernel!r}: shape {shape!r} is a {type(shape).__name__}: give a sequence of ints "
                        f"(x.shape), or an int for one dim")
    if getattr(shape, "shape", None) is not None and hasattr(shape, "dtype") and not isinstance(shape, np.generic):  # a numpy int is an int: a 1-D shape
        held = "int(x) for the dim it holds" if shape.shape == () else "tuple(x.tolist()) for the dims it holds"
        raise TypeError(f"kernel {kernel!r}: shape is a {type(shape).__name__} of dtype {shape.dtype} and shape "
                        f"{tuple(shape.shape)}, not a shape: give x.shape for its shape, or {held}")
    try:
        found = tuple(shape)
    except TypeError:
        try:
            if isinstance(shape, bool):
                raise TypeError
            return (operator.index(shape),)
        except TypeError:
            raise TypeError(f"kernel {kernel!r}: shape {shape!r}: give a sequence of ints (x.shape), or an int for "
                            f"one dim") from None
    return found if all(type(v) is int for v in found) else _dims(found, kernel)


def _dims(shape: tuple, kernel: str) -> tuple[int, ...]:
    """A shape's dims as ints: a float, a string or a bool is no dim (300.5 was served as 300),
    nor an array of one float (whose ``__index__`` refuses it), a negative one or one beyond
    :data:`MAX_DIM`."""
    found: list[int] = []
    for v in shape:
        try:
            if isinstance(v, bool):
                raise TypeError
            found.append(operator.index(v))
        except TypeError:
            raise TypeError(f"kernel {kernel!r}: shape {reprlib.repr(shape)}: {reprlib.repr(v)} is no dim: give a "
                            f"sequence of ints (x.shape)") from None  # a vector of floats: 6 of its 1024 said
    dims = tuple(found)
    if any(d < 0 for d in dims):
        raise ValueError(f"kernel {kernel!r}: shape {shape!r}: a dim below 0")
    if any(d > MAX_DIM for d in dims):
        raise ValueError(f"kernel {kernel!r}: shape {shape!r}: a dim beyond 2**63 - 1, the most a 64-bit index holds")
    return dims


def _context(records: str | Path | None, suites: str | Path | None, device: str | None) -> tuple:
    """What else an answer depends on: the root, what names this device where no device is given
    ($TUNEBENCH_DEVICE, the thread count) and, where nothing else says where the project is or a
    relative path says it from there, the working directory."""
    root = os.environ.get("TUNEBENCH_ROOT")
    named = (_named_device(), *_threads()) if device is None else None
    given = [p for p in (records, suites, root) if p]
    if (records is not None or root) and all(os.path.isabs(p) for p in given):  # no Path per launch: 2 µs each
        return root, named, None
    try:
        return root, named, os.getcwd()
    except FileNotFoundError:
        raise LookupError("the working directory no longer exists: pass records= or set TUNEBENCH_ROOT") from None


def _load_once(suites_dir: Path, again: bool = False) -> tuple[list[str], dict[str, Kernel]]:
    """Import a suites folder's suites once per process (another suite's error must not stop a
    framework's launch): the errors of those that failed, and the kernels they declare. Imported
    again where a suite's link was switched since: one of its kernels says so, and ``again`` where
    the kernel asked for does (a suite that failed to import declared none, to say it for it)."""
    key = suites_dir.resolve()
    with _SUITES_LOCK:
        if again or key not in _SUITES_LOADED or any(k.relinked for k in _SUITES_LOADED[key][1].values()):
            failed: list[str] = []
            registered = dict(REGISTRY)
            _SUITES_LOADED[key] = failed, {k.name: k for k in load_suites(suites_dir, failed)}
            REGISTRY.update(registered)  # another project's kernel of a name stays the one a name alone answers
    return _SUITES_LOADED[key]


def declaration(kernel: str, records: str | Path | None, suites: str | Path | None,
                suites_dir: Path | None = None) -> Kernel | None:
    """The declaration a lookup of ``kernel`` in a project follows: the one registered by that
    name, unless the lookup names its project (``records=``, ``suites=``, ``$TUNEBENCH_ROOT``) and
    that project's suites declare another (a framework serving two projects: the name alone
    answered the one declared last, with the other's configs), or its suite was reached through a
    link switched since (:attr:`~tunebench.kernel.Kernel.relinked`): the file it leads to now
    declares it; None where neither is known."""
    decl = REGISTRY.get(kernel)
    root = os.environ.get("TUNEBENCH_ROOT") or None  # as project() reads it
    named = (records, suites, root)
    if decl is None or decl.declared_in is None or (all(p is None for p in named) and not decl.relinked):
        return decl
    relative = not all(os.path.isabs(p) for p in named if p is not None)
    key = (kernel, decl, *map(str, named), os.getcwd() if relative else None)
    found, folders, read = _DECLARED.get(key, (None, None, -REFRESH_S))
    followed = found  # the declaration this lookup followed last
    now = time.monotonic()
    relinked = found is not None and found.relinked  # its suite's link switched since: followed at once
    if now - read < REFRESH_S and not relinked:  # a framework asks per launch (Tuned.defines): the folders are read
        return found  # once a second
    # the folders as they resolve now: a records symlink swapped to another release, and back, is followed
    resolved = tuple(os.path.realpath(p) if p is not None else None for p in named)
    if resolved != folders or relinked:
        given = suites_dir or project(records, suites, decl)[1]  # its links kept, for its suites to keep them
        suites_dir = given.resolve()
        # the suite as reached: a linked file's declared_in is its target, of another project (pytest's
        # collected_from keeps a linked folder, resolved in suites_dir)
        suite = reached(decl.collected_from or decl.declared_in)
        own = decl.relinked and decl.reached_under(given)  # its own suite's link, switched since
        found = decl if (not suites_dir.is_dir() or suites_dir in suite.parents) and not decl.relinked else \
            _load_once(given, own)[1].get(kernel)
        if found is None:  # its link leads to a release without it, or failing to import: the one followed
            found = followed or decl  # last is served (not the first: r1, r2, then a broken r3 served r1's)
            if own:
                found.followed()  # as followed, till the link is switched again
    _DECLARED[key] = found, resolved, now
    return found


def check_known(kernel: str, records: str | Path | None = None, suites: str | Path | None = None) -> None:
    """Raise :class:`LookupError` where no suite declares ``kernel`` and no device's records hold
    it: a misspelt name, said where a framework binds it rather than at its first launch."""
    check_suites(suites)
    if kernel in REGISTRY:
        return
    records_dir, suites_dir = project(records, suites)
    failed = _load_once(suites_dir)[0] if suites_dir.is_dir() else []
    if kernel in REGISTRY:
        return
    folder, recorded, unread = _directory(records_dir), set(), []
    for path in records_files(records_dir):
        try:
            found = folder.summary(path.stem)
        except RecordsError:
            unread.append(path.name)
            continue
        recorded |= found.kernels() if found else set()
    if kernel not in recorded:
        meant = closest(kernel, sorted(set(REGISTRY) | recorded))
        if (unread and not meant) or any(_names(records_dir / name, kernel) for name in unread):
            return  # a file that cannot be read may hold it: the lookup says what is wrong with it
        raise LookupError(f"kernel {kernel!r}: no suite under {suites_dir} declares it and no records under "
                          f"{records_dir} hold it" + (f" (did you mean {meant!r}?)" if meant else "")
                          + (f"; these suites failed to import: {'; '.join(failed)}" if failed else "")
                          + (f"; these files are no records to read: {', '.join(sorted(unread))}" if unread else ""))


def _names(path: Path, kernel: str) -> bool:
    """Whether a file that is no records to read (a torn copy, a hand edit) holds the kernel's
    name as a JSON string, where its records may be."""
    try:
        return f'"{kernel}"'.encode() in path.read_bytes()
    except OSError:
        return True


#: What a lookup's ``dtype`` may be, said where it is none.
_A_DTYPE = "give a dtype's name, a numpy dtype or an array's .dtype"


def dtype_name(dtype, kernel: str) -> str | None:
    """The numpy name of a dtype given as a name, a numpy type or an array's dtype (``float32``),
    errors naming ``kernel``. An array or a tensor itself (``x`` for ``x.dtype``) is a TypeError:
    a tensor's was "dtype tensor([[...]]) is not a numpy dtype", every row of it in the message.
    A byte-swapped dtype is a ValueError: its name is the native one's, whose kernel would read its
    bytes swapped (a big-endian file's ``>f4`` was served float32, ``-DTB_DTYPE=float``)."""
    if dtype is None:
        return None
    if not isinstance(dtype, type) and hasattr(dtype, "dtype"):  # np.float32, a type, has one too
        raise TypeError(f"kernel {kernel!r}: dtype is a {type(dtype).__name__}: {_A_DTYPE}")
    try:
        found = numpy_dtype(dtype)
    except ValueError as e:
        raise ValueError(f"kernel {kernel!r}: {e}") from None
    if not found.isnative:
        raise ValueError(f"kernel {kernel!r}: dtype {found.name} of byte order {found.byteorder!r} is not this "
                         f"machine's, which every build of the kernel reads: give its buffer in the native order, "
                         f"x.astype(x.dtype.newbyteorder('='))")
    return found.name


def lookup(kernel: str | Kernel, shape: Sequence[int], device: str | None = None, *,
           dtype: str | None = None, records: str | Path | None = None,
           suites: str | Path | None = None) -> Choice:
    """The best config for ``shape`` and how it was chosen; see the module docstring. ``dtype``
    defaults to the one the kernel is tuned in on the device (float32 where several are)."""
    choice = shared_answer(kernel, shape, device, dtype=dtype, records=records, suites=suites)
    return dataclasses.replace(choice, config=dict(choice.config), ranked=[dict(c) for c in choice.ranked],
                               warnings=list(choice.warnings))


def shared_answer(kernel: str | Kernel, shape: Sequence[int], device: str | None = None, *,
                  dtype: str | None = None, records: str | Path | None = None,
                  suites: str | Path | None = None) -> Choice:
    """:func:`lookup`'s answer itself, not a copy, the same object while it holds: for code that
    only reads it, and keeps what it makes of it by it (:meth:`tunebench.apply.Tuned.defines`)."""
    choice = _answer(kernel, shape, device, dtype, records, suites)
    _warn_outside(choice)
    return choice


def recorded_target(fingerprint: dict | None, tasks: Callable[[], list[dict]], device: str) -> str:
    """The target a device's records were tuned on: its fingerprint's, but a replayed records
    file's tasks keep the target they were tuned on (their variant, their final rounds); ``tasks``
    is read only then (a lookup of each new shape asks this)."""
    target = fingerprint["target"] if fingerprint else device.split("-", 1)[0]
    return next((t["target"] for t in tasks()), target) if target == "replay" else target


def _choose(folder: _Directory, decl: Kernel | None, name: str, shape: tuple, device: str, dtype: str | None,
            records_dir: Path, suites_dir: Path) -> tuple[Choice, Variant | None]:
    """The answer, and the declaration's variant it was made for (None without one)."""
    store = folder.summary(device)
    tasks = store.tasks(name) if store else []
    target = recorded_target(store.fingerprint if store else None, store.tasks if store else list, device)
    variant = decl.variant(target) if decl else None
    if dtype is None:  # float32 where it is tuned, else another tuned one, else the first declared
        kinds = variant.dtypes if variant else next(iter(decl.variants.values())).dtypes if decl else ()
        tuned = sorted({t["dtype"] for t in tasks} & set(kinds) if kinds else {t["dtype"] for t in tasks})
        dtype = "float32" if "float32" in tuned else tuned[0] if tuned else (
            "float32" if "float32" in kinds or not kinds else kinds[0])
    recorded_in = sorted({t["dtype"] for t in tasks})
    every_dtype, tasks = tasks, [t for t in tasks if t["dtype"] == dtype]
    if decl is None and not tasks:
        path = records_dir / f"{device}.json"
        if recorded_in:  # the kernel is there, not this dtype: its name is right
            raise LookupError(f"kernel {name!r}: {path} records it only in {', '.join(recorded_in)}: {dtype} has no "
                              f"record there, and no declaration of it was found under {suites_dir} to serve its "
                              f"heuristic" + _other_threads(folder, device, store, name, dtype, None))
        meant = closest(name, sorted(set(REGISTRY) | (store.kernels() if store else set())))
        raise LookupError(f"kernel {name!r}: no records for it in {path} and no declaration found under {suites_dir}"
                          + (f" (did you mean {meant!r}?)" if meant else "")
                          + _other_threads(folder, device, store, name, dtype, None))
    # the records' buckets of every dtype: one tuned on fewer buckets put their shapes outside them all
    buckets = decl.buckets_for(target) if decl else _recorded_buckets(every_dtype, records_dir / f"{device}.json")
    if variant is not None:  # a constraint naming no param or dim: the error collection gives, not its KeyError
        variant.space.check_dims(buckets.dims)
    try:  # warned by the caller, per call: catching warnings here is not thread-safe
        bucket, inside = buckets.find(shape, warn=False)
    except BucketError as e:
        raise BucketError(f"kernel {name!r}: {e}") from None
    kept, key = folder.rankings(), (store, decl, name, device, dtype, target, bucket.name, records_dir, suites_dir)
    ranking = kept.get(key)
    if ranking is None or ranking.source != _source_now(ranking.variant):
        ranking = _ranking(folder, store, decl, variant, name, device, dtype, target, tasks, every_dtype, bucket,
                           records_dir, suites_dir)
        with _FAST_LOCK:
            if len(kept) >= MAX_ANSWERS:
                kept.clear()
            kept[key] = ranking
    return _for_shape(ranking, shape, inside, buckets.dims), variant


def _source_now(variant: Variant | None) -> str | None:
    """The variant's template's hash as it reads now (None without one, or shipped without it)."""
    try:
        return variant.source_hash if variant is not None else None
    except KernelError:
        return None


@dataclass
class _Ranking:
    """What an answer on a bucket takes from the records and the declaration, whatever the shape:
    each new shape of a framework's computed it afresh (560-730 µs a shape asked)."""
    choice: Choice  # the answer before the shape: its source, figures, notes and ranked configs
    variant: Variant | None
    source: str | None  # the template's hash it was made for (see :func:`_source_now`)
    decl: Kernel | None
    store: Summary | None
    usable: Summary | None  # the store, unless the records measured another entry point
    task: dict | None
    bucket: Bucket
    adopt: list  # the configs to serve first, before a shape's constraints
    served: list
    picked: list | None  # the final round's pick, where one ran
    ranked: dict  # recorded config key -> objective (ms)
    confirmed: tuple | None  # the final round's figures, where one ran
    retold: bool  # the heuristic changed since the final round
    judged: dict | None
    source_hash: str | None
    setup: str | None
    tuned_as: str | None
    target: str
    records_dir: Path
    suites_dir: Path
    all_wrong: str | None  # every config that ran under today's declaration gave a wrong result (see summary.all_wrong)


def _ranking(folder: _Directory, store: Summary | None, decl: Kernel | None, variant: Variant | None, name: str,
             device: str, dtype: str, target: str, tasks: list[dict], every_dtype: list[dict], bucket: Bucket,
             records_dir: Path, suites_dir: Path) -> _Ranking:
    """The bucket's part of an answer (see :class:`_Ranking`)."""
    if decl is None and all(t["bucket"] != bucket.name for t in tasks):
        held = sorted({t["dtype"] for t in every_dtype if t["bucket"] == bucket.name})
        raise LookupError(f"kernel {name!r}: {records_dir / f'{device}.json'} records bucket {bucket.name!r} only in "
                          f"{', '.join(held)}: {dtype} has no record there, and no declaration of it was found under "
                          f"{suites_dir} to serve its heuristic")
    choice = Choice(config={}, source="heuristic", kernel=name, shape=(), dtype=dtype, bucket=bucket.name,
                    inside=True, device=device)
    declared = variant is None or dtype in variant.dtypes
    if not declared:
        choice.note = (f"{dtype} is not among the dtypes {name} declares for the {target} target "
                       f"({', '.join(variant.dtypes)}): its heuristic")
        _say_once(name, UntunedWarning, dtype, f"{choice.note} is served, untuned")
    elif store is None:
        others = [p.stem for p in records_files(records_dir) if p.stem != device]  # back since the read: not "other"
        orphan = orphaned(records_dir / f"{device}.json")
        # the folder moved (`git mv records perf/records`) or not checked out: every kernel served untuned
        gone = None if records_dir.is_dir() else (f"{records_dir} is not there: pass records= (--records) or set "
                                                  f"TUNEBENCH_ROOT where the records are elsewhere; a tune creates it")
        choice.note = (f"nothing is recorded for this device ({device})" + (f"; {orphan}" if orphan else "")
                       + (f"; {gone}" if gone else "")
                       + (f"; {records_dir} holds only other devices' records: {', '.join(others)}" if others else "")
                       + _other_threads(folder, device, store, name, dtype, bucket.name))
        if others or orphan:  # tuned elsewhere, or deleted here: a framework must hear it unasked (a folder not
            # there is said in the note alone: every project not tuned yet has none, and warned it for every kernel)
            _say_once(name, UntunedWarning, device, f"the heuristic is served: {choice.note}")
    task = next((t for t in tasks if t["bucket"] == bucket.name), None)
    source_hash, setup = (task or {}).get("source_hash"), None
    if variant is not None:
        try:
            source_hash = variant.source_hash
            setup = decl.setup_hash(variant, dtype, (task or {}).get("declaration")) if declared else None
        except KernelError as e:  # a deployment that shipped the suites without the templates
            choice.note = f"{e}: answered for the template the records were tuned with"
    # tuned with another entry point: its records measured another function, and none of them serves this one
    retargeted = decl.retargeted(variant, task) if variant is not None and task else None
    usable = store if not retargeted else None
    tuned_as = (task or {}).get("setup_hash")  # the task's latest declaration: its trials alone are ranked
    entry = variant.entry if variant is not None else None
    ranked, times = usable.ranked(name, dtype, bucket, source_hash, tuned_as, entry) if usable and declared else ({}, {})
    recorded, ranked = len(ranked), _in_space(variant, ranked)
    earlier = usable.latest_source(name, target, dtype, bucket) if usable and variant and declared else None
    if earlier not in (None, source_hash) and store.final(name, target, dtype, bucket, (source_hash, setup, entry)) is None:
        # the template changed since the last complete tune: as the gate, serve what it chose, where it fits
        old_ranked, old_times = store.ranked(name, dtype, bucket, earlier, tuned_as, entry)
        recorded = recorded or len(old_ranked)  # where none is in the space any more, that is the reason
        old_ranked = _in_space(variant, old_ranked)
        if old_ranked:
            ranked, times, source_hash = old_ranked, old_times, earlier
            choice.note = (f"tuned with an earlier {variant.path.name}, or a header it includes ({earlier}; now "
                           f"{variant.source_hash}): "
                           f"`{decl.tune_command(records_dir)}` tunes this one, and the gate checks the config on it")
    baseline = ([variant.baseline(s, dtype) for s in bucket.shapes] if variant else
                [b["config"] for b in task["baseline"]] if task else [])
    got = {s: times.get(config_key(c), {}).get(s) for s, c in zip(bucket.shapes, baseline)}
    if baseline and all(v is not None for v in got.values()):
        choice.baseline_ms = bucket.objective(got)
    today = (source_hash, setup, entry)  # the round read: of today's template, declaration and entry where recorded
    final = usable.final(name, target, dtype, bucket, today) if usable and declared else None  # as ranked
    unverified, wrong_rule = usable.unverified(name, target, dtype, bucket, today) if usable and declared else (set(), [])
    failed_today, everything_wrong = failed_under(usable, name, dtype, bucket, source_hash, setup or tuned_as,
                                                  baseline) if usable and declared else ({}, None)
    # a config the round found wrong on a verify shape is served nowhere: a shape the pick's constraints exclude
    # took the best recorded config that fit, which was one
    order = [k for k in sorted(ranked, key=ranked.get) if k not in unverified and k not in failed_today]
    # the trials' fastest as the tune's summary names it: a config stopped early on one of several
    # shapes counts by its samples there, and may lead the bucket; never one slower than order[0],
    # served where no final round ran if it is not refused here
    by_trials = {**(_in_space(variant, usable.ranked(name, dtype, bucket, source_hash, tuned_as, entry, early=True)[0])
                    if usable and declared else {}), **ranked}
    by_trials = {k: v for k, v in by_trials.items() if k not in failed_today}
    fastest = min(by_trials, key=by_trials.get, default=None)
    picked = None  # the final round's pick, where one was made: None for the heuristic
    key = config_key(next(iter(final.values()))) if final else None
    unconfirmed = ""  # why the trials' fastest is not served: no final round judged it
    judged = store.final_baseline(name, target, dtype, bucket, today) if final else None  # the heuristic it measured
    kept = final is not None and final == judged  # the round kept the heuristic of its day
    retold = final is not None and variant is not None and judged != dict(zip(bucket.shapes, baseline))
    # a round of an earlier declaration picked a config that fails under today's (a tolerance tightened since);
    # one of today's judged it as the gate does (a later trial's timeout on a busy machine is no verdict)
    earlier_round = final and usable.final_declaration(name, target, dtype, bucket, today) not in (None, setup)
    if final and not kept and key in failed_today and earlier_round:
        status, _, shape = failed_today[key]
        unconfirmed = (f"the final round's pick [{config_text(_declared(variant, key))}] ended {status} on {shape} "
                       f"under today's declaration, and no final round of today's judged another config, so no "
                       f"other is served" + ("" if everything_wrong else
                                             f"; `{tune_command(decl, records_dir)}` tunes it again"))
        final, order = None, []
    elif final and not kept and variant is not None and not variant.space.holds(dict(key)):  # taken out since
        unconfirmed = (f"the final round's pick [{config_text(_declared(variant, key))}] is no longer in the space, and no final "
                       f"round judged another config, so no other is served; "
                       f"`{tune_command(decl, records_dir)}` tunes it again")
        final, order = None, []
    elif final is None and fastest is not None and (
            by_trials[fastest] < choice.baseline_ms if choice.baseline_ms is not None
            else [dict(fastest)] * len(baseline) != baseline):
        # the heuristic's time unknown too (its trials disturbed): the trials' fastest is no more confirmed
        by = f", {choice.baseline_ms / by_trials[fastest]:.2f}x by its trials alone," if choice.baseline_ms else ""
        judged = store.reshaped(name, target, dtype, bucket)
        busy = store.unjudged(name, target, dtype, bucket) if store else None
        why = _no_round(store, task, name, target, dtype, bucket)
        then = ("tunes it again" if judged else "on a quieter machine measures the round again" if busy else
                "resumes the tune" if task else "tunes it")
        unconfirmed = (f"no final round confirmed a pick on this bucket ({why}), so the trials' fastest "
                       f"[{config_text(_declared(variant, fastest))}]{by} is not served; "
                       f"`{tune_command(decl, records_dir)}` {then}")
        choice.unconfirmed_ms = by_trials[fastest]
        order = []
    choice.unconfirmed = unconfirmed or None
    # no round judged, and other configs' trials disturbed: the heuristic beat the undisturbed ones alone
    disturbed = (store.disturbed(name, dtype, bucket) if store and final is None and not unconfirmed
                 and choice.baseline_ms is not None else 0)
    some = f"{disturbed} trials recorded on its shapes were" if disturbed > 1 else "1 trial recorded on its shapes was"
    untimed = (f"no final round confirmed a pick on this bucket "
               f"({_no_round(store, task, name, target, dtype, bucket)}), and {some} disturbed by other load, "
               f"never timed against the heuristic's, which is served; "
               f"`{tune_command(decl, records_dir)}` on a quiet machine measures them again") if disturbed else ""
    if final is not None:  # the final round's winner, else the heuristic (today's: see below)
        adopt = [] if kept or list(final.values()) == baseline else [key]
        picked = adopt[:1] or [None]
        order = adopt + [k for k in order if k != key]
    else:
        adopt = [k for k in order[:1] if choice.baseline_ms is None or ranked[k] < choice.baseline_ms]
    why_kept = store.final_reason(name, target, dtype, bucket, today) if final is not None and not adopt else ""
    if why_kept and retold:
        why_kept = (f"the final round kept the heuristic of its day ({_configs_text(judged)}: {why_kept}); the "
                    f"heuristic has changed since, and no final round measured today's: "
                    f"`{decl.tune_command(records_dir)}` does")
    choice.reason = (f"{dtype} is not among the dtypes {name} declares for the {target} target: no config "
                     f"recorded for it is served" if not declared else
                     f"{retargeted}: its records measured another function, so none is served; "
                     f"`{decl.tune_command(records_dir)}` tunes this one" if retargeted else
                     "today's heuristic is the config the final round adopted" if final is not None and not kept
                     and not adopt and not unconfirmed else
                     why_kept if retold and why_kept else f"the final round kept it: {why_kept}" if why_kept else
                     unconfirmed or untimed if unconfirmed or untimed else
                     "it beat every recorded config on this bucket" if choice.baseline_ms is not None
                     else f"none of the {recorded} configs recorded on this bucket's shapes is in today's space (a "
                          f"param renamed, added or removed since, or a value taken out): "
                          f"`{tune_command(decl, records_dir)}` measures today's"
                     if recorded and not ranked else _nothing_recorded(decl, store, name, target, dtype, bucket, records_dir,
                                                         suites_dir, source_hash, bool(times))
                     + (_other_threads(folder, device, store, name, dtype, bucket.name) if store else ""))
    if wrong_rule and not adopt:  # served though the round found it failing on a verify shape: said
        u = wrong_rule[0]
        choice.note = "; ".join(filter(None, (choice.note, (
            f"the heuristic's config [{config_text(_declared(variant, config_key(u['config'])))}] ended {u['status']} "
            f"on verify shape {tuple(u['shape'])} in the final round: it is served, as no finalist was adopted in its "
            f"place; fix the heuristic or the template"))))
    faster = [k for k in order if k not in adopt and (choice.baseline_ms is None or ranked[k] < choice.baseline_ms)]
    served = (adopt[:1] + faster)[:RANKED] if adopt else []
    choice.ranked = _ranked_configs(tuple(tuple((n, type(v), v) for n, v in k) for k in served))
    return _Ranking(choice, variant, _source_now(variant), decl, store, usable, task, bucket, adopt, served,
                    picked, ranked, store.confirmed(name, target, dtype, bucket, today) if final is not None else None,
                    retold, judged, source_hash, setup, tuned_as, target, records_dir, suites_dir, everything_wrong)


def failed_under(store: Summary, kernel: str, dtype: str, bucket: Bucket, source_hash: str | None,
                 setup_hash: str | None, baseline: Sequence[dict]) -> tuple[dict, str | None]:
    """(config key -> (status, error, shape) of each config whose trial on the bucket's shapes
    failed under the declaration ``setup_hash``, what it says where every config that ran so
    failed, the heuristic's ``baseline`` included): best() serves none of them, though a round of
    an earlier declaration (a tolerance tightened since) picked one, and the gate gates what it
    serves; where all gave a wrong result, a tune again under the same declaration changes nothing."""
    verdicts = store.verdicts(kernel, dtype, bucket, source_hash, setup_hash)
    rules = list(dict.fromkeys(config_key(c) for c in baseline))  # the shapes' order: the same in every process
    said = [verdicts[k] for k in rules if k in verdicts]
    # a heuristic of several configs blames the reference only where each of them that ran was wrong
    rule = said[0] if said and all(v[0] == "wrong_result" for v in said) else None
    everything = all_wrong(rule[:2], [v[0] for k, v in verdicts.items() if k not in rules]) if rule else None
    return {k: v for k, v in verdicts.items() if v[0] in FAILED}, everything


def _for_shape(ranking: _Ranking, shape: tuple, inside: bool, dims: Sequence[str]) -> Choice:
    """The answer for ``shape`` from its bucket's part: where the bucket's best does not satisfy
    the constraints for it, the next that does; the heuristic's config for it; the notes on it."""
    r = ranking
    choice = dataclasses.replace(r.choice, shape=shape, inside=inside,
                                 warnings=[] if inside else [outside(shape, r.bucket)])
    variant, decl, store, usable, task, bucket, adopt = r.variant, r.decl, r.store, r.usable, r.task, r.bucket, r.adopt
    name, device, dtype, records_dir, suites_dir = choice.kernel, choice.device, choice.dtype, r.records_dir, r.suites_dir
    if adopt and not fits(variant, dict(adopt[0]), shape, dims):
        fitting = [k for k in r.served if fits(variant, dict(k), shape, dims)]
        choice.note = "; ".join(filter(None, (choice.note, (
            f"the bucket's best [{config_text(_declared(variant, adopt[0]))}] does not satisfy the constraints for {shape}: "
            + ("the best recorded config that does" if fitting else "the heuristic instead")))))
        choice.reason = (f"no recorded config {'faster than it' if choice.baseline_ms else 'that ran to the end'} "
                         f"satisfies the constraints for {shape}")
        adopt = fitting[:1]
    confirmed = r.confirmed if r.picked == (adopt[:1] or [None]) else None
    if confirmed:  # the final round's pick is served: the figures it measured, as the summary shows
        choice.baseline_ms = confirmed[1]
    if adopt and decl is None and task and task.get("shaped") and shape not in bucket.shapes:
        choice.note = "; ".join(filter(None, (choice.note, _unchecked(name, suites_dir, f"for {shape}"))))
        # a shape in its words made one warning per shape asked: the note names it
        warnings.warn(_unchecked(name, suites_dir, f"on bucket {bucket.name!r} for shapes other than its "
                                                   f"representative ones (lookup().note names each)"),
                      SuiteImportWarning, stacklevel=_caller())
    if adopt:
        config = _declared(variant, adopt[0], list(task["baseline"][0]["config"]) if task else [])
        choice.config, choice.source, choice.reason = config, "tuned", None
        choice.objective_ms = confirmed[0] if confirmed else r.ranked.get(adopt[0])
        if r.retold and confirmed:
            choice.note = "; ".join(filter(None, (choice.note, (
                f"its lead is over the heuristic as tuned ({_configs_text(r.judged)}); the heuristic has changed "
                f"since, and `{decl.tune_command(records_dir)}` measures the pick against today's"))))
        tuned_flags = (task or {}).get("declaration", {}).get("flags")
        if variant is not None and tuned_flags is not None and tuned_flags != (
                flags := variant.declared_flags):  # flags() gives today's: say so
            choice.note = "; ".join(filter(None, (choice.note, (
                f"tuned with the flags [{tuned_flags}], and the variant builds with [{flags}] now: "
                f"`{decl.tune_command(records_dir)}` tunes with these, and the gate checks the config with them"))))
        if store.fingerprint and not microarchitecture_known(store.fingerprint):
            legacy = f"{device} is a legacy records file: {describe(store.fingerprint)}"
            choice.note = "; ".join(filter(None, (choice.note, legacy)))
            _say_once(name, LegacyRecordsWarning, device, f"{legacy}; its configs are served, and may not suit this "
                                                          f"one: `pytest suites --tune` on that machine records it anew")
        far = min(max(abs(math.log2(max(v, 1) / max(w, 1))) for v, w in zip(shape, s)) for s in bucket.shapes)
        # a bucket's pick holds where it was measured: say how far from there this is (a zero dim: an empty
        # launch, which computes nothing, so it lay "12 octaves" from (4096,) to no purpose)
        if far > FAR_OCTAVES and 0 not in shape:
            choice.note = "; ".join(filter(None, (choice.note, (
                f"tuned on {', '.join(map(str, bucket.shapes))}: {shape} lies {far:.0f} octaves from the nearest "
                f"in a dim, where the pick may not hold; a representative shape near it measures it there"))))
    elif variant is not None:
        measured = r.confirmed if r.picked is not None and not confirmed and not r.retold else None
        if measured:  # served though the round picked another config: its time as the round measured it
            choice.baseline_ms = measured[1]
        choice.config, choice.objective_ms = variant.baseline(shape, dtype), choice.baseline_ms
        broken = variant.space.broken(choice.config, shape, dims)
        if broken:  # today's rule strays where no candidate may: say so, it may be why it is slow or wrong
            choice.note = "; ".join(filter(None, (choice.note, f"the heuristic's config is outside the space "
                                                               f"for {shape}: {'; '.join(broken)}")))
        failed = usable.failure(name, dtype, bucket, r.source_hash, (r.setup, r.tuned_as), choice.config) if usable else None
        if failed:  # served as today's rule, but known not to work: a framework must not launch it blind
            choice.note = "; ".join(filter(None, (choice.note, r.all_wrong or (
                f"the heuristic's config ended {failed[1]} when tuned on {failed[0]}, and no config that verified "
                f"is served for {shape}: apply your own rule there, or `{decl.tune_command(records_dir)}` tunes the bucket"))))
    elif decl is not None:
        raise LookupError(f"kernel {name!r} has no {r.target} variant, so no heuristic for {shape} on {device}: pass "
                          f"the device of a target it has (device=, --device)")
    elif task and task.get("baseline"):
        at = _nearest_recorded(task["baseline"], shape)
        choice.config, choice.objective_ms = dict(at["config"]), choice.baseline_ms
        choice.note = "; ".join(filter(None, (choice.note, (
            f"no declaration of {name} under {suites_dir}: the heuristic's config as recorded "
            + (f"for {shape}" if tuple(at["shape"]) == shape else
               f"for the nearest representative shape {tuple(at['shape'])}, as an export carries it: "
               f"apply your own rule for {shape}, or pass suites= (--suites)")))))
    else:
        raise LookupError(f"kernel {name!r}: the heuristic wins on bucket {bucket.name!r}, but the "
                          f"kernel's declaration is needed to apply it to {shape}: pass suites= (--suites)")
    return choice


def _configs_text(by_shape: dict) -> str:
    """Configs per shape as people read them: one where all shapes have the same."""
    texts = list(dict.fromkeys(f"[{config_text(c)}]" for c in by_shape.values()))
    return texts[0] if len(texts) == 1 else ", ".join(f"{t} on {s}" for s, t in
                                                      zip(by_shape, (f"[{config_text(c)}]" for c in by_shape.values())))


def _recorded_buckets(tasks: list[dict], path: Path) -> Buckets:
    """A kernel's buckets as its records (``path``) describe them, without the declaration: where
    a bucket was renamed or moved since a tune, the records hold both, and they overlap; a task
    described later (a tune rewrites its description) outranks the one it overlaps, which is left
    out, and so is one described with other dims than the latest kept (an older declaration's).
    Dims that name one dim twice, tuned before Buckets refused them, are said as such (every task
    of them was left out, and the lookup said "no bucket given")."""
    kept: list[Bucket] = []
    dims = None
    for task in reversed(tasks):  # the latest described first
        if dims is not None and task["dims"] != dims:
            continue
        bucket = Bucket.from_description(task["range"])
        try:
            Buckets(task["dims"], [*kept, bucket])
        except BucketError:
            continue
        kept.append(bucket)
        dims = task["dims"]
    if dims is None:
        twice = next(((t, d) for t in reversed(tasks) for d in t["dims"] if t["dims"].count(d) > 1), None)
        if twice:
            raise BucketError(f"{path}: kernel {twice[0]['kernel']!r} was tuned with the dims {twice[0]['dims']}, which "
                              f"name {twice[1]!r} twice (refused since: one range was kept for both), so its records "
                              f"cannot be read without its declaration: give each dim a name of its own in its "
                              f"Buckets and tune it again (pytest --tune), which describes its buckets anew")
        dims = tasks[-1]["dims"]
    return Buckets(dims, kept[::-1])


def _unchecked(name: str, suites_dir: Path, where: str) -> str:
    return (f"no declaration of {name} under {suites_dir}, and its constraints read the shape: the bucket's best is "
            f"served unchecked {where}, which it may not fit; pass suites= (--suites)")


def _nearest_recorded(baseline: list[dict], shape: tuple) -> dict:
    """The recorded heuristic entry ({shape, config}) whose representative shape lies nearest
    ``shape``, in octaves summed over dims: without the declaration, the heuristic is known only
    where it was recorded."""
    return min(baseline, key=lambda b: sum(abs(math.log2(max(v, 1) / max(r, 1))) for v, r in zip(shape, b["shape"])))


@functools.lru_cache(maxsize=4096)
def _ranked_configs(keys: tuple) -> list[dict]:
    """The configs of a ranking, each as (name, type, value) triples (True, 1 and 1.0 are one key
    otherwise), one list for every answer that serves it: a framework's answers for thousands of
    shapes of a bucket share one (each caller gets a copy), where each answer kept its own, 3.3 KB
    of the cache per shape asked."""
    return [{n: v for n, _, v in k} for k in keys]


def _declared(variant: Variant | None, key: tuple, names: Sequence[str] = ()) -> dict:
    """A recorded config's key (its params sorted) as a config in the space's order (``names``
    without a declaration), as the gate and the summary print it; params it no longer has last."""
    config = dict(key)
    names = variant.space.names if variant is not None else names
    return {**{n: config[n] for n in names if n in config}, **config}


def _in_space(variant: Variant | None, ranked: dict) -> dict:
    """The ranked configs the declared space still holds (all of them without a declaration): a
    value or param taken out of the space since the tune is never handed out."""
    if variant is None:
        return ranked
    return {k: v for k, v in ranked.items() if variant.space.holds(dict(k))}


def fits(variant: Variant | None, config: dict, shape: tuple, dims: Sequence[str]) -> bool:
    """Whether a config's shaped constraints hold for ``shape`` (unknown without a declaration)."""
    if variant is None or not variant.space.shaped or not variant.space.contains(config):
        return True
    return variant.space.holds_for(variant.space.key(config), shape, dims)


def best(kernel: str | Kernel, shape: Sequence[int], device: str | None = None, *,
         dtype: str | None = None, records: str | Path | None = None,
         suites: str | Path | None = None) -> dict:
    """The best recorded config for the bucket holding ``shape`` on ``device`` (default: this
    machine's), else the kernel's heuristic for ``shape`` (a copy: the caller may change it)."""
    return dict(shared_answer(kernel, shape, device, dtype=dtype, records=records, suites=suites).config)


#: The first shape of this process served outside every bucket, as :attr:`Choice.warnings` says
#: it, per device, kernel, dtype and the nearest bucket serving it with its ranges (see
#: :func:`_warn_outside`).
_FIRST_OUTSIDE: dict[tuple[str, str, str, str], str] = {}


def _warn_outside(choice: Choice) -> None:
    """Warn of a shape outside every bucket naming the kernel, the dtype, the device, the bucket
    serving it and the first shape it so served in this process (:attr:`Choice.warnings` names
    each): one text per device and bucket, which Python's filters say once per caller's line, where
    each shape's own text was said for each (3000 shapes, 3001 entries in the caller's
    ``__warningregistry__``). A framework launching through apply() holds no answer to read the
    shape from. The bucket is kept with its ranges, which are the target's (or the records', read
    again with others): kept by its name, a GPU's launch was told a CPU's shape and ranges."""
    if choice.warnings:
        nearest = choice.warnings[0].removeprefix(f"shape {choice.shape} ")  # the bucket and its ranges, not the shape
        first = _FIRST_OUTSIDE.setdefault((choice.device, choice.kernel, choice.dtype, nearest), choice.warnings[0])
        warnings.warn(ShapeOutsideBuckets(f"kernel {choice.kernel!r} {choice.dtype} on {choice.device}: {first} (the "
                                          f"first shape so served in this process: this warning names no other, "
                                          f"lookup().warnings names each)"), stacklevel=_caller())


def judged_by(task: Mapping, decl: Kernel | None) -> tuple[Bucket, str, str | None]:
    """The bucket, the template (source hash) and the declaration (setup hash) by which best()
    reads a recorded task's final round: the suite's bucket of its name and today's template and
    declaration where a suite declares them (its representative shapes changed since the tune and
    changed back, best() reads the round of today's shapes, not the round of the shapes the
    records last described; a template edited back to one tuned before, that one's round, not the
    round of the edit the records last described), else the records'."""
    recorded = Bucket.from_description(task["range"]), task["source_hash"], task.get("setup_hash")
    variant = decl.variant(task["target"]) if decl is not None else None
    bucket = next((b for b in decl.buckets_for(task["target"]) if b.name == task["bucket"]), None) if variant else None
    if bucket is None or task["dtype"] not in variant.dtypes:
        return recorded
    try:
        return bucket, variant.source_hash, decl.setup_hash(variant, task["dtype"], task.get("declaration"))
    except KernelError:  # shipped without its template: best() reads the round of the recorded template
        return bucket, task["source_hash"], None


def latest_confirmation(store: RecordStore, kernel: str, target: str, dtype: str, bucket: Bucket,
                        source_hash: str | None = None, setup_hash: str | None = None,
                        entry: str | None = None) -> dict | None:
    """The final round of the latest tune of a task (see :mod:`tunebench.final_round`) that
    judged its finalists on the bucket's representative shapes: one that stayed disturbed by
    other load judged nothing, and one of other shapes judged another bucket (its shapes changed
    since: best(), the gate and a re-tune read none). Of today's declaration and template where
    given and recorded (see :func:`preferred`)."""
    found = [c for c in store.checks(kernel=kernel, target=target, dtype=dtype, bucket=bucket.name, kind="tune")
             if not c.get("disturbed") and {tuple(e["shape"]) for e in c["shapes"]} == set(bucket.shapes)]
    return preferred(found, source_hash, setup_hash, entry)


def preferred(rounds: list[dict], source_hash: str | None, setup_hash: str | None,
              entry: str | None = None) -> dict | None:
    """The latest of a task's final rounds (in file order) for today's declaration (``setup_hash``),
    else for today's template (``source_hash``), else the latest: records merged from two branches
    hold rounds of both, and the last in the file may be the other branch's, of an older template.
    None of another ``entry`` point, which judged another function of the same declaration (a tune
    of today's stopped before its round: the other's pick was served and gated)."""
    rounds = [r for r in rounds if entry is None or r.get("entry") in (None, entry)]
    for wanted, key in ((setup_hash, "setup_hash"), (source_hash, "source_hash")):
        found = [r for r in rounds if wanted is not None and r.get(key) == wanted]
        if found:
            return found[-1]
    return rounds[-1] if rounds else None


def final_ms(check: dict) -> list[tuple[float, float]] | None:
    """Per shape of a final round, the (chosen, heuristic) ms it measured (the heuristic's for
    both where it stayed), or None where it measured nothing to compare: the pick's and the
    heuristic's met alone in fresh processes, where they were (the ratios the gate holds them to),
    else those of the round of every finalist (records of earlier versions)."""
    entries = check.get("shapes", [])
    if not entries or "winner" not in check or check.get("problem") or any("baseline_ms" not in e for e in entries):
        return None  # a round that could not judge measured no figures to publish
    won = check["winner"]
    return [(e["baseline_ms"], e["baseline_ms"]) if won is None else tuple(e["confirmed_ms"]) if "confirmed_ms" in e
            else (e["finalist_ms"][won], e["baseline_ms"]) for e in entries]


def confirmed_ms(check: dict | None, bucket: Bucket) -> tuple[float, float] | None:
    """(chosen, heuristic) bucket objectives in ms that a final round measured, or None."""
    measured = final_ms(check) if check else None
    if measured is None:
        return None
    shapes = [tuple(e["shape"]) for e in check["shapes"]]
    return tuple(bucket.objective(dict(zip(shapes, column))) for column in zip(*measured))


def shape_times(store: RecordStore, kernel: str, dtype: str, bucket: Bucket, source_hash: str | None,
                first: int | None = None):
    """config key -> {shape: median ms} over the bucket's shapes, successful trials only (of the
    ``first`` trials recorded, where given)."""
    return _times(_measured(store.trials()[:first], kernel, dtype, source_hash), bucket)


def heuristic_failed(trials: list[dict]) -> str | None:
    """How the heuristic's config failed, where its latest trial on a shape of a task's ``trials``
    did (a compile error, a crash): what stopped the task's tune, which no quieter machine resumes."""
    latest = {tuple(t["shape"]): t for t in trials if t.get("baseline")}
    return next((f"the heuristic's config [{config_text(t['config'])}] ended {t['status']} on {shape}"
                 for shape, t in latest.items() if t["status"] in FAILED), None)


def kernel_renamed(tasks: list[dict], decl: Kernel, target: str, dtype: str, records_dir: Path,
                   suites_dir: Path) -> str | None:
    """Where ``tasks`` hold today's template for this target and dtype under a kernel no suite
    declares, that it looks renamed and what to do: records are kept by kernel name, so a renamed
    kernel read as never tuned, and its users retuned from scratch without knowing why."""
    variant = decl.variant(target)
    if variant is None:
        return None
    alike = {t["kernel"] for t in tasks if t["kernel"] != decl.name and t["kernel"] not in REGISTRY
             and (t["target"], t["dtype"], t["source_hash"]) == (target, dtype, variant.source_hash)}
    if not alike or not suites_dir.is_dir():  # no suites read: "no suite declares" would be a guess
        return None
    # the suites imported only where a name is to be ruled out: a lookup imports none for a kernel it knows
    failed, declared = _load_once(suites_dir)
    former = min(alike - declared.keys(), default=None)
    if former is None or failed:  # a suite that failed to import may declare it
        return None
    return (f"it is recorded as kernel {former!r}, of the same template ({variant.path.name}), target and dtype, "
            f"which no suite declares: renamed? best() serves the heuristic for {decl.name} until you name it "
            f"{former!r} again, or `{decl.tune_command(records_dir)}` tunes it under its new name (no trial of "
            f"{former!r} is reused)")


def _measured(trials: list[dict], kernel: str, dtype: str, source_hash: str | None) -> list[tuple]:
    """(shape, config key, median ms) of the kernel's undisturbed successful trials in a dtype
    (of one source, where given), in their order."""
    return [(tuple(d["shape"]), config_key(d["config"]), d["stats"]["median"]) for d in trials
            if (d["kernel"], d["dtype"], d["status"]) == (kernel, dtype, "ok") and d.get("verdict") != "disturbed"
            and (source_hash is None or d["source_hash"] == source_hash)]


def _times(measured: list[tuple], bucket: Bucket) -> dict[tuple, dict[tuple, float]]:
    """config key -> {shape: median ms} over the bucket's shapes (the latest trial of each)."""
    times: dict[tuple, dict[tuple, float]] = defaultdict(dict)
    shapes = set(bucket.shapes)
    for shape, key, median in measured:
        if shape in shapes:
            times[key][shape] = median
    return times


def related_results(directory: str | Path, kernel: str, target: str, dtype: str, source_hash: str,
                    skip: tuple[str, str], first: int | None = None) -> list[tuple[dict, float]]:
    """Warm-start data: every config recorded for the same kernel, target, dtype and source on
    other buckets or devices under ``directory``, as (config, objective / that task's best).
    ``skip`` is the (device, bucket) being tuned; of its device's file only the ``first``
    trials count (those recorded before the task began, so that a re-run starts alike). A file
    that cannot be read (another device's, conflicted or of a newer format) is left out, with a
    warning naming it: the data is a hint where to start, and the tune goes on without it."""
    found, unread = [], []
    readable = stores(directory, unread)
    for error in unread:
        warnings.warn(f"{kernel}: a records file is left out of the warm start, where to start searching from: "
                      f"{error}", stacklevel=2)
    for store in readable:
        tasks = [t for t in store.tasks(kernel=kernel, target=target, dtype=dtype) if (store.device, t["bucket"]) != skip]
        if not tasks:
            continue
        try:  # the store's trials read once for all its tasks: per task, a kernel's every bucket cost T x N
            trials = store.trials()
        except RecordsError as e:  # its archive, read only now, damaged
            warnings.warn(f"{kernel}: a records file is left out of the warm start, where to start searching from: "
                          f"{e}", stacklevel=2)
            continue
        measured = _measured(trials[:first if store.device == skip[0] else None], kernel, dtype, source_hash)
        for task in tasks:
            bucket = Bucket.from_description(task["range"])
            times = _times(measured, bucket)
            ranked = {k: bucket.objective(t) for k, t in times.items() if len(t) == len(bucket.shapes)}
            if ranked:
                best = min(ranked.values())
                found += [(dict(k), v / best) for k, v in ranked.items()]
    return found
