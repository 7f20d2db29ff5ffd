"""The replay target: trials answered from a recorded tuning space instead of the device.

A recorded space is a Kernel Tuner cache file (a space brute-forced with Kernel Tuner; format in
``../shared/replay/README.md``), plain or gzip-compressed as the benchmark hub ships them, or a
tunebench records file. A file that cannot be replayed is a :class:`ReplayError` whose one-line
message names the file and what is wrong with it. Replaying one costs no device
time, so strategies can be compared on real spaces over many seeds (:func:`simulate`,
``tunebench replay``), and a tuning run can be tested end to end without the device
(``--tune-target replay:PATH``, which runs :class:`Replay` in place of the worker processes).

A replayed trial draws its samples with replacement from the recorded runs, as many as were
recorded, seeded from the config, the shape and the replay's seed: the noise of the device is
replayed too, and one seed replays one run. A search compared by :func:`simulate` sees each
config's recorded objective instead, as Kernel Tuner's simulation mode does (noise on request). A Kernel Tuner config's recorded objective is its
``time``, what Kernel Tuner and the hub rank configs by: its runs (``times``) are scaled so that
their median is ``time``. The format makes ``time`` their mean, but the hub's RTX 2080 Ti caches
record a ``time`` 0.3 to 980 times that mean (point-in-polygon runs of 0.015 ms for 20 million
points, where its ``time`` and the RTX 3090's runs take 8 ms): there the runs give only the spread.
A trial's cost is the recorded compile and benchmark time, so a ``--tune-time`` budget spends
what the device spent.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import math
import random
import re
import statistics
import warnings
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from tunebench.buckets import Bucket, Buckets
from tunebench.kernel import Kernel, KernelError, Variant
from tunebench.records import RecordsError, RecordStore, bulk, config_key, measured_time, measured_times
from tunebench.space import Space, SpaceError
from tunebench.stamps import racy
from tunebench.strategies import get as get_strategy
from tunebench.strategies.base import search
from tunebench.workers import CompareJob, TrialJob

#: Kernel Tuner's failure markers (the string in place of a time), the status each becomes and
#: what Kernel Tuner means by it: it marks only failures it skips as the resources' (too much
#: shared or local memory for ptxas; "too many resources requested for launch"), and raises any
#: other, so each is what a tune prunes, not a failed item.
KERNEL_TUNER_FAILURES = {
    "InvalidConfig": ("pruned_resources", "its restrictions"),
    "CompilationFailedConfig": ("pruned_resources", "too much shared or local memory for the compiler"),
    "RuntimeFailedConfig": ("pruned_resources", "too many resources requested for launch"),
    "ErrorConfig": ("crashed", "a failure of another kind"),
}
#: The time Kernel Tuner 0.3.0 to 0.4.1 wrote for a config it skipped, where later versions write
#: a failure marker: too many resources requested for launch, too much shared memory, too many
#: threads per block. Read as a time, it passed as a config that ran, slowest by 1e20 ms.
KERNEL_TUNER_SKIPPED = 1e20
#: The error of a config whose recorded ``time`` is 0 or less: no measurement (a timer that
#: read nothing), so that config failed, not the whole file.
UNMEASURED = "a recorded time of 0 or less, not a measurement"
#: Kernel Tuner caches do not record the element type; both shipped ones time float32 kernels.
KERNEL_TUNER_DTYPE = "float32"
#: The one bucket of a Kernel Tuner cache, over its ``problem_size``.
KERNEL_TUNER_BUCKET = "recorded"


class ReplayError(ValueError):
    """A recorded space that cannot be replayed; the message names the file."""


class ReplayWarning(UserWarning):
    """A recorded space replayed otherwise than it was tuned; the message names the file."""


@dataclass(frozen=True, slots=True)  # a million of them in a large cache: no dict each
class Run:
    """One recorded trial, a config on one shape, as the device answered it."""

    status: str
    samples: tuple[float, ...]  # ms per run, as recorded; empty where nothing ran to the end
    compile_time_s: float
    measure_s: float
    error: str | None = None
    max_error: float | None = None


@dataclass(frozen=True)
class Recording:
    """One replayable task: a kernel's recorded configs on the shapes of one bucket.

    ``space`` holds the recorded values of each param and a constraint that only recorded
    configs are valid; ``runs`` maps each key (see :mod:`tunebench.space`) to its run per shape.
    """

    kernel: str
    dtype: str
    bucket: Bucket
    space: Space = field(repr=False)
    runs: dict[tuple, dict[tuple, Run]] = field(repr=False)

    @cached_property
    def candidates(self) -> list[tuple]:
        """Every config recorded on every shape of the bucket, in the space's order."""
        return self.space.enumerate()[0]

    @cached_property
    def objectives(self) -> dict[tuple, float | None]:
        """Each candidate's bucket objective from its recorded medians; None unless it ran."""
        return {k: None if any(r.status != "ok" or not r.samples for r in self.runs[k].values()) else
                self.bucket.objective({s: statistics.median(r.samples) for s, r in self.runs[k].items()})
                for k in self.candidates}

    @cached_property
    def optimum(self) -> float | None:
        """The best recorded objective; None when no config ran."""
        return min((t for t in self.objectives.values() if t is not None), default=None)

    def scores(self) -> list[tuple[tuple, float]]:
        """(key, objective / the best objective) of every config that ran: warm-start data."""
        return [(k, t / self.optimum) for k, t in self.objectives.items() if t is not None]

    def label(self) -> str:
        return f"kernel={self.kernel} dtype={self.dtype} bucket={self.bucket.name}"


def _space(path: Path, names: list[str], values: Mapping[str, list], recorded: set[tuple]) -> Space:
    """The space of the recorded values; a config absent from the recording is not in it (a
    constraint saying so read a param named ``config`` as the config, and took ``configs`` for
    its typo)."""
    space = Space({n: values[n] for n in names}, configs=recorded)
    try:
        inside = any(space.contains(space.config(key)) for key in recorded)
    except SpaceError as e:
        raise ReplayError(f"{path}: {e}") from None
    except TypeError:  # an unhashable value
        raise ReplayError(f"{path}: a param's value list holds a JSON object") from None
    if not inside:
        raise ReplayError(f"{path}: no recorded config has every param at one of its listed values")
    return space


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _time(doc: Mapping):
    """An entry's ``time``, a string that spells a finite number read as that number: a cache
    written by another tool took "1.5" for a crashed config (Kernel Tuner's own reader keeps it
    a string, which its search then cannot compare)."""
    time = doc.get("time")
    if isinstance(time, str) and time not in KERNEL_TUNER_FAILURES:
        try:
            number = float(time)
        except ValueError:
            return time
        return number if math.isfinite(number) else time
    return time


def _kernel_tuner_run(path: Path, key: str, doc: Mapping) -> Run:
    """A cache entry as a run: a number in ``time`` ran, but for one of 0 or less (no measurement:
    a failed config, :data:`UNMEASURED`); a string is a failure marker."""
    # Kernel Tuner 1.5 marks a failure in "__error__", without a time; before, "time" held the marker.
    # Where there is no number in "time", a marker in any field fails it, as Kernel Tuner's reader turns
    # each into an error (its texts looked up at C speed first: most hold none); where there is one, a
    # marker elsewhere (a note, a metric of the user's) does not: Kernel Tuner judges a config by its objective
    marker = error if isinstance(error := doc.get("__error__"), str) and error in KERNEL_TUNER_FAILURES else None
    given = _time(doc)
    if marker is None and not _number(given) and \
            not KERNEL_TUNER_FAILURES.keys().isdisjoint(filter(str.__instancecheck__, doc.values())):
        marker = next(v for v in doc.values() if isinstance(v, str) and v in KERNEL_TUNER_FAILURES)
    if marker is None and "time" not in doc:
        raise ReplayError(f"{path}: cache entry {key!r} has no 'time' and no failure marker "
                          f"({', '.join(KERNEL_TUNER_FAILURES)})")
    time = marker or given
    costs = [doc.get("compile_time") or 0, doc.get("benchmark_time") or 0]
    if not all(map(_number, costs)):
        raise ReplayError(f"{path}: cache entry {key!r} has a non-numeric 'compile_time' or 'benchmark_time'")
    compile_s, measure_s = costs[0] / 1e3, costs[1] / 1e3
    if isinstance(time, str):
        status, why = KERNEL_TUNER_FAILURES.get(time, ("crashed", None))
        return Run(status, (), compile_s, measure_s, error=f"Kernel Tuner: {time} ({why})" if why else time)
    if time == KERNEL_TUNER_SKIPPED:
        return Run("pruned_resources", (), compile_s, measure_s,
                   error="Kernel Tuner before 0.4.2: time 1e20 (skipped as beyond the device's resources)")
    if _number(time) and time <= 0:
        return Run("crashed", (), compile_s, measure_s, error=UNMEASURED)
    if not measured_time(time):
        raise ReplayError(f"{path}: cache entry {key!r} has a 'time' that is neither a number nor a "
                          f"failure marker: {time!r}")
    runs = doc.get("times") or [time]
    if not isinstance(runs, list) or not measured_times(runs):
        raise ReplayError(f"{path}: cache entry {key!r} has a 'times' that is not a list of positive numbers")
    scale = time / statistics.median(runs)  # the objective is 'time' (see the module docstring)
    return Run("ok", tuple(map(scale.__mul__, runs)), compile_s, measure_s)


def _same_key(cache_key: str, values: list) -> bool:
    """Whether a cache key names these values as Kernel Tuner writes a key: a float32 param's
    ``str(np.float32(0.1))`` is "0.1", while its JSON holds 0.10000000149011612."""
    parts = cache_key.split(",")
    if len(parts) != len(values):
        return False
    for part, value in zip(parts, values):
        if isinstance(value, float) and not isinstance(value, bool):
            try:
                if float(np.float32(part)) != float(np.float32(value)) and float(part) != value:
                    return False
            except ValueError:
                return False
        elif part != str(value):
            return False
    return True


def _kernel_tuner(path: Path, data: dict) -> list[Recording]:
    """A Kernel Tuner cache: one recording over ``tune_params`` and one shape, its
    ``problem_size`` (``()`` where that is not a list of integers, e.g. "callable"). Empties
    ``data``'s cache as it reads it."""
    params, cache = data["tune_params"], data["cache"]
    if data.get("objective") not in (None, "time", ["time"]):  # Kernel Tuner records a time for every config all the same
        warnings.warn(f"{path}: the cache was tuned for {data['objective']!r}; it is replayed by each config's "
                      f"'time'", ReplayWarning, stacklevel=2)
    names = data.get("tune_params_keys") or (list(params) if isinstance(params, Mapping) else None)
    if not isinstance(params, Mapping) or not all(isinstance(v, list) for v in params.values()):
        raise ReplayError(f"{path}: 'tune_params' is not a map from each param to its list of values")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or sorted(names) != sorted(params):
        raise ReplayError(f"{path}: 'tune_params_keys' does not list the params of 'tune_params', each once")
    if not isinstance(cache, Mapping):
        raise ReplayError(f"{path}: 'cache' is not a map from config keys to entries")
    size = data.get("problem_size")
    size = list(size) if isinstance(size, (list, tuple)) else [size]
    shape = tuple(size) if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in size) else ()
    # a param whose values mix numbers and strings ([32, 64, "auto"]) is categorical: its values'
    # text, as the cache's keys write them (a space gives a param one kind of value)
    mixed = {n for n in names if len({isinstance(v, str) for v in params[n]}) > 1}

    def value(name, given):
        return str(given) if name in mixed else _hashable(given)

    values = {n: [value(n, v) for v in params[n]] for n in names}
    # each entry's values looked up in a set, not in a list made again per entry: a param of 10,000
    # values took 11 s to load, of 50,000 minutes (an object, which no entry's value equals, is the
    # space's to refuse)
    listed = {n: {v for v in vs if not isinstance(v, dict)} for n, vs in values.items()}
    runs: dict[tuple, dict[tuple, Run]] = {}
    listed_in_order = [listed[n] for n in names]
    unmeasured = 0
    for cache_key in list(cache):  # each entry's document freed once its run is made, not held beside them all
        doc = cache.pop(cache_key)
        # an entry whose values are listed as they are and spell its key passes at C speed; any
        # other is checked one step at a time, which names what is wrong with it
        try:
            key = tuple(map(doc.__getitem__, names))
            plain = (names and not mixed and all(map(set.__contains__, listed_in_order, key))
                     and ",".join(map(str, key)) == cache_key)
        except (AttributeError, KeyError, TypeError):  # not an object, a param missing, a list or object as a value
            plain = False
        if not plain:
            key = _entry_key(path, names, value, listed, cache_key, doc)
        run = _kernel_tuner_run(path, cache_key, doc)
        unmeasured += run.error is UNMEASURED
        runs[key] = {shape: run}
    if not runs:
        raise ReplayError(f"{path}: the Kernel Tuner cache holds no entry")
    if unmeasured:
        warnings.warn(f"{path}: {unmeasured} cache {'entry gives' if unmeasured == 1 else 'entries give'} a 'time' "
                      f"of 0 or less, not a measurement: replayed as failed (crashed)", ReplayWarning, stacklevel=2)
    # dims N0..Nk-1, else of a prefix no param's name takes (a param N0 was an INTERNALERROR: rename the param;
    # params taking all four prefixes, a StopIteration)
    prefixes = itertools.chain(("N", "dim", "size", "problem_size_dim"), (f"N{'_' * k}" for k in itertools.count(1)))
    prefix = next(p for p in prefixes if not any(f"{p}{i}" in names for i in range(len(shape))))
    bucket = Bucket(KERNEL_TUNER_BUCKET, shapes=[shape], **{f"{prefix}{i}": (v, v) for i, v in enumerate(shape)})
    name = re.sub(r"\W+", "_", str(data.get("kernel_name") or path.stem)).strip("_")
    name = name if name.isidentifier() else f"kernel_{name}"
    return [Recording(name, KERNEL_TUNER_DTYPE, bucket, _space(path, names, values, set(runs)), runs)]


def _entry_key(path: Path, names: list[str], value, listed: Mapping[str, set], cache_key: str, doc) -> tuple:
    """A cache entry's config key, its values as ``value`` reads them; a :class:`ReplayError` names
    the entry and what is wrong with it."""
    if not isinstance(doc, Mapping):
        raise ReplayError(f"{path}: cache entry {cache_key!r} is not an object")
    missing = next((n for n in names if n not in doc), None)
    if missing is not None:
        raise ReplayError(f"{path}: cache entry {cache_key!r} lacks the tunable param {missing!r}")
    key = tuple(value(n, doc[n]) for n in names)
    if any(isinstance(v, dict) for v in key):
        raise ReplayError(f"{path}: cache entry {cache_key!r} has a param whose value is a JSON object")
    outside = next((n for n, v in zip(names, key) if v not in listed[n]), None)
    if outside is not None:
        raise ReplayError(f"{path}: cache entry {cache_key!r} gives {outside}={doc[outside]!r}, which is not "
                          f"among its 'tune_params' values")
    if ",".join(str(doc[n]) for n in names) != cache_key and not _same_key(cache_key, [doc[n] for n in names]):
        raise ReplayError(f"{path}: cache entry {cache_key!r} holds the params "
                          f"{','.join(str(doc[n]) for n in names)!r}, which its key does not spell: "
                          f"which config it measured is unknown")
    return key


def _hashable(value):
    """A JSON value as a param's value: a list becomes its text as Kernel Tuner writes it in a
    cache key (a categorical value, as a space's values are numbers or strings; an object stays
    unhashable: a param's value is never an object)."""
    return str(value) if isinstance(value, list) else value


def _records(path: Path) -> list[Recording]:
    """A tunebench records file: one recording per (kernel, dtype, bucket) it holds trials of.

    A bucket's shapes come from its ``tasks`` description (else from the trials that name it);
    of a config and shape recorded under several source hashes, the most recent trial counts.
    """
    try:
        store = RecordStore(path)
    except RecordsError as e:
        raise ReplayError(str(e)) from None
    try:
        return _tasks(path, store)
    except ReplayError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ReplayError(f"{path}: a trial or task document is malformed ({type(e).__name__}: {e})") from None


def _tasks(path: Path, store: RecordStore) -> list[Recording]:
    """The recordings of a records file's trials and tasks (see :func:`_records`)."""
    latest: dict[tuple, dict] = {}
    for doc in store.trials():
        ident = (doc["kernel"], doc["dtype"], tuple(doc["shape"]), config_key(doc["config"]))
        if ident not in latest or (doc.get("timestamp") or "") >= (latest[ident].get("timestamp") or ""):
            latest[ident] = doc
    tasks: dict[tuple, Bucket] = {}
    for doc in store.tasks():
        tasks[(doc["kernel"], doc["dtype"], doc["range"]["name"])] = Bucket.from_description(doc["range"])
    for doc in latest.values():
        ident = (doc["kernel"], doc["dtype"], doc.get("bucket"))
        if ident not in tasks and doc.get("bucket"):
            shapes = sorted({tuple(d["shape"]) for d in latest.values()
                             if (d["kernel"], d["dtype"], d.get("bucket")) == ident})
            tasks[ident] = Bucket(doc["bucket"], shapes=shapes)
    recordings = []
    for (kernel, dtype, _), bucket in sorted(tasks.items()):
        docs = [d for d in latest.values() if d["kernel"] == kernel and d["dtype"] == dtype
                and tuple(d["shape"]) in bucket.shapes]
        if not docs:
            continue
        newest = max(docs, key=lambda d: d.get("timestamp") or "")
        names = list(newest["config"])
        runs: dict[tuple, dict[tuple, Run]] = {}
        for d in docs:
            if set(d["config"]) == set(names):  # configs of an older space are left out
                key = tuple(d["config"][n] for n in names)  # one value each, as the records hold them
                runs.setdefault(key, {})[tuple(d["shape"])] = Run(
                    d["status"], tuple(d.get("samples") or ()), d.get("compile_time_s") or 0.0,
                    d.get("measure_s") or 0.0, d.get("error"), d.get("max_error"))
        complete = {k for k, r in runs.items() if len(r) == len(bucket.shapes)}
        values = {n: _ordered({k[i] for k in runs}) for i, n in enumerate(names)}
        recordings.append(Recording(kernel, dtype, bucket, _space(path, names, values, complete), runs))
    if not recordings:
        raise ReplayError(f"{path}: the records file holds no trial")
    return recordings


def _ordered(values: set) -> list:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


class _Twice(Exception):
    """A key given twice in one JSON object with different values (see :func:`_unique`)."""


def _unique(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys differ, or that repeats one with the same value: a cache two runs
    appended the same config to, with two times, had its optimum taken from whichever came last."""
    found = dict(pairs)
    if len(found) != len(pairs):
        twice = next((k for k, v in pairs if found[k] is not v and found[k] != v), None)
        if twice is not None:
            raise _Twice(twice)
    return found


def _json(path: Path) -> object:
    """The file's JSON, gunzipped first where it starts with gzip's magic bytes; a Kernel Tuner
    cache left open by an interrupted run is closed first, as Kernel Tuner itself reads it (its
    entries are appended, each followed by a comma). A key given twice with different values in
    one object (a cache entry, a field) is an error naming it."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ReplayError(f"{path}: cannot read the recorded space ({e.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ReplayError(f"{path}: a damaged or truncated gzip file ({e})") from None
    try:
        text = raw.decode()
    except UnicodeDecodeError as e:
        raise ReplayError(f"{path}: not JSON (not UTF-8 text: {e.reason} at byte {e.start})") from None
    del raw  # freed before the parse, beside which it held as much again as the text
    try:
        try:
            return json.loads(text, object_pairs_hook=_unique)
        except json.JSONDecodeError as e:
            error = e
        text = text.strip().removesuffix(",")
        try:
            return json.loads(text + "}\n}", object_pairs_hook=_unique)
        except json.JSONDecodeError:
            raise ReplayError(f"{path}: not JSON ({error})") from None
    except _Twice as e:
        raise ReplayError(f"{path}: {e.args[0]!r} is given twice in one object, with different values (a cache entry "
                          f"two runs wrote, say): one would silently replace the other; keep the one you mean") from None


@lru_cache(maxsize=8)
def _load(path: Path, stamp: tuple[int, int]) -> tuple[str, tuple[Recording, ...]]:
    """(device name, recordings) of a file; cached by path, mtime and size for repeated seeds,
    where the file settled before it was read (see :func:`load`).
    Read and checked with the cyclic collector off (see :func:`~tunebench.records.bulk`): it
    scanned a million entries' documents and runs again and again as they were made."""
    with bulk():
        data = _json(path)
        if isinstance(data, dict) and "cache" in data and "tune_params" in data:
            return str(data.get("device_name") or "unknown"), tuple(_kernel_tuner(path, data))
        if isinstance(data, dict) and ("trials" in data or "device" in data):
            recordings = tuple(_records(path))
            devices = data.get("device")
            first = next(iter(devices.values()), None) if isinstance(devices, dict) else None
            return str(first.get("name") if isinstance(first, dict) and first.get("name") else path.stem), recordings
        raise ReplayError(f"{path}: neither a Kernel Tuner cache file ('cache' and 'tune_params') nor "
                          f"a tunebench records file ('trials' and 'device' tables)")


def load(path: str | Path) -> tuple[str, tuple[Recording, ...]]:
    """The recorded device's name and every replayable task of a Kernel Tuner cache or a
    tunebench records file (told apart by their keys)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        raise ReplayError(f"{path}: cannot read the recorded space ({e.strerror})") from None
    # changed within RACY_S (see tunebench.stamps): a rewrite of as many bytes may follow unseen by its
    # mtime and size, so it is read again next time, not kept
    read = _load.__wrapped__ if racy(st) else _load
    # a file renamed over it (rsync -t) or rewritten in place keeping size and mtime has another inode or ctime
    return read(path.resolve(), (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size))


class Replay:
    """Answers trials from a recorded space, as :class:`~tunebench.workers.Workers` answers them
    from the device; ``seed`` picks the replayed run."""

    builds: dict[str, bool] = {}  # as Workers keeps them: a replay builds nothing

    def __init__(self, path: str | Path, seed: int = 0):
        self.path = Path(path)
        self.seed = seed
        self._compare_rng = random.Random(f"{seed}:compare")
        device, self.recordings = load(self.path)
        self.fingerprint = {"target": "replay", "name": device, "file": self.path.name}

    @cached_property
    def _runs(self) -> dict[tuple, Run]:
        """Each recorded run by (kernel, dtype, shape, config key), as a trial names it: made at
        the first trial, not for a search that only reads a recording's objectives (every
        :func:`simulate` call made it: 9.5 s of a million-config cache)."""
        return {(r.kernel, r.dtype, shape, config_key(r.space.config(key))): run
                for r in self.recordings for key, shapes in r.runs.items() for shape, run in shapes.items()}

    def recording(self, kernel: str | None = None, dtype: str | None = None,
                  bucket: str | None = None) -> Recording:
        """The one recording that matches; an error names the choices when several do."""
        found = [r for r in self.recordings if kernel in (None, r.kernel) and dtype in (None, r.dtype)
                 and bucket in (None, r.bucket.name)]
        if len(found) == 1:
            return found[0]
        choices = "; ".join(r.label() for r in self.recordings)
        if not found:
            raise ReplayError(f"{self.path}: no recorded task matches; it holds: {choices}")
        raise ReplayError(f"{self.path}: {len(found)} recorded tasks match, pick one with kernel=, "
                          f"dtype= and bucket= (--kernel, --dtype and --bucket); it holds: {choices}")

    def recorded(self, kernel: str, dtype: str, bucket: str) -> set[tuple] | None:
        """The config keys (:func:`~tunebench.records.config_key`) recorded for a task of the
        suites a records file replays; None where the file holds no such task (nothing to tune)."""
        found = [r for r in self.recordings if (r.kernel, r.dtype, r.bucket.name) == (kernel, dtype, bucket)]
        return {config_key(r.space.config(k)) for r in found for k in r.runs} if found else None

    def draw(self, kernel: str, dtype: str, shape: tuple, config: Mapping, run: Run) -> list[float]:
        """Samples drawn with replacement from a run's recorded ones, as many as were recorded."""
        rng = random.Random(f"{self.seed}:{kernel}:{dtype}:{tuple(shape)}:{config_key(config)}")
        return rng.choices(run.samples, k=len(run.samples)) if run.samples else []

    def measure(self, recording: Recording, key: tuple) -> float | None:
        """A candidate's bucket objective on freshly drawn samples (their median per shape), as
        a tuning run would measure it; None where it did not run."""
        if recording.objectives[key] is None:
            return None
        config = recording.space.config(key)
        return recording.bucket.objective({
            shape: statistics.median(self.draw(recording.kernel, recording.dtype, shape, config, run))
            for shape, run in recording.runs[key].items()})

    @staticmethod
    def compiler(kernel: str, variant) -> None:
        """A replay builds nothing: no compiler to keep with its trials."""
        return None

    def trial(self, job: TrialJob | CompareJob) -> dict:
        """What :meth:`Workers.trial <tunebench.workers.Workers.trial>` returns for this job."""
        if isinstance(job, CompareJob):
            return self._compare(job)
        run = self._runs.get((job.kernel, job.dtype, tuple(job.shape), config_key(job.config)))
        if run is None:
            return {"status": "pruned_resources", "error": self._unrecorded(), "max_error": None, "samples": [],
                    "compile_time_s": None, "warmup_calls": 0, "measure_s": 0.0, "conditions": {}, "cost_s": 0.0}
        return {"status": run.status, "error": run.error, "max_error": run.max_error,
                "samples": self.draw(job.kernel, job.dtype, job.shape, job.config, run),
                "compile_time_s": run.compile_time_s, "warmup_calls": 0, "measure_s": run.measure_s,
                "conditions": {}, "cost_s": run.compile_time_s + run.measure_s}

    def _compare(self, job: CompareJob) -> dict:
        """Interleaved rounds of several configs: ``rounds`` samples of each, drawn from its
        recorded runs (a recorded template text of an arm is not replayed: the config is), under
        the one placement a recording has. A run stopped early drew samples too: a finalist may
        be one (see :mod:`tunebench.final_round`)."""
        samples, cost = {}, 0.0
        for label, config, _ in job.arms:
            run = self._runs.get((job.kernel, job.dtype, tuple(job.shape), config_key(config)))
            if run is None or run.status not in ("ok", "early_stopped") or not run.samples:
                return {"status": run.status if run else "pruned_resources", "arm": label,
                        "error": run.error if run else self._unrecorded(), "cost_s": cost}
            samples[label] = self._compare_rng.choices(run.samples, k=job.rounds)
            cost += run.compile_time_s + sum(samples[label]) / 1e3
        return {"status": "ok", "samples": {"recorded": samples}, "conditions": {}, "cost_s": cost}

    def _unrecorded(self) -> str:
        return f"not in the recorded space of {self.path.name}"

    @property
    def suite_of_its_own(self) -> bool:
        """Whether this is a Kernel Tuner cache (a suite of its own), not a tunebench records file."""
        return len(self.recordings) == 1 and self.recordings[0].bucket.name == KERNEL_TUNER_BUCKET

    def kernel(self) -> Kernel:
        """A Kernel Tuner cache as a suite: its kernel, one bucket ``recorded`` over dims
        N0..Nk-1 (another prefix where a param is so named) holding ``problem_size``, and a variant registered under the target ``replay``
        whose space is the recorded one and whose baseline is the first config that ran, in the
        space's order (in the cache's, shuffled entries changed the heuristic of one space). Its
        template is one line naming the file and its digest: what a record's source hash keys."""
        recording = self.recordings[0]
        if not self.suite_of_its_own:
            raise ReplayError(f"{self.path}: a records file replays the suites that recorded it; "
                              f"only a Kernel Tuner cache is a suite of its own")
        first = next((k for k in recording.candidates if recording.objectives[k] is not None), None)
        if first is None:
            raise ReplayError(f"{self.path}: no recorded config ran, so there is no baseline")
        baseline = recording.space.config(first)
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        variant = Variant(source=self.path.resolve(), entry=recording.kernel, space=recording.space,
                          heuristic=lambda shape: baseline, dtypes=(recording.dtype,),
                          text=f"// replayed from {self.path.name}, sha256 {digest}\n")  # the source's identity
        return Kernel(recording.kernel, buckets=Buckets(list(recording.bucket.ranges), [recording.bucket]),
                      args=_not_run, reference=_not_run, outputs=["out"], variants={"replay": variant})

    def restart(self) -> None:
        """A replayed comparison has no process to start afresh: the interface of
        :class:`~tunebench.workers.Workers`."""

    def close(self) -> None:
        """Nothing to release: the interface of :class:`~tunebench.workers.Workers`."""


def _not_run(*args, **kwargs):
    """The arguments and reference of a replayed kernel: a replayed trial never runs it."""
    raise KernelError("a replayed kernel is never run: its trials are answered from the recording")


def simulate(path: str | Path, strategy: str, budget: int, seed: int = 0,
             warm: Sequence[tuple[tuple, float]] = (), options: Mapping | None = None,
             noise: bool = False, **select) -> list[float]:
    """A strategy's search on a replayed space: after each trial, the fraction of the optimum
    reached, ``optimum / recorded objective of the incumbent`` (0.0 until a config has run).

    A candidate is evaluated as its recorded objective, as Kernel Tuner's simulation mode and
    the benchmark hub evaluate one: a search is judged by the configs it chose to measure, and
    the incumbent is the fastest of them. With ``noise=True`` it is evaluated on freshly drawn
    samples instead (their median, as a tuning run would see it), and the incumbent is the
    candidate measured fastest: where near rivals lie within the replayed noise, a slower one
    may draw faster, which no search can tell without measuring again (what a tune's final
    round does). ``warm`` and ``options`` (keyword arguments) are handed to the strategy;
    ``select`` (kernel=, dtype=, bucket=) picks a task of a records file.
    """
    replay = Replay(path, seed=seed)
    recording = replay.recording(**select)
    recorded, optimum = recording.objectives, recording.optimum
    if optimum is None:
        raise ReplayError(f"{replay.path}: no recorded config of {recording.label()} ran")
    chosen = get_strategy(strategy)(recording.space, recording.candidates, random.Random(seed), warm=warm,
                                    **(options or {}))
    trace: list[float] = []
    best = [math.inf, 0.0]  # the incumbent's objective as evaluated and its fraction of the optimum

    def evaluate(key: tuple) -> float | None:
        value = replay.measure(recording, key) if noise else recorded[key]
        if value is not None and value < best[0]:
            best[:] = [value, optimum / recorded[key]]
        trace.append(best[1])
        return value

    search(chosen, evaluate, trials=budget)
    return trace


#: Budgets at which ``tunebench replay`` reports the median fraction of the optimum reached.
BUDGETS = (20, 50, 100, 200)
#: Fractions of the optimum whose median number of trials to reach ``tunebench replay`` reports.
TARGETS = (0.95, 0.99)


def convergence(traces: list[list[float]], budget: int) -> dict:
    """The summary of several seeds' traces (see :func:`simulate`): the median fraction of the
    optimum after each budget in :data:`BUDGETS` below ``budget`` and after ``budget``, and for each target the
    median number of trials to reach it and stay there to the budget (a seed that never did counts
    as never; None when half of them never did) with how many seeds reached it: under noise an
    incumbent measured faster by chance can fall below a target the seed had reached, and a seed
    counted then would end below it. A trace shorter than the budget (the strategy ran out of
    candidates) keeps its last fraction."""
    at = {str(b): statistics.median(t[min(b, len(t)) - 1] if t else 0.0 for t in traces)
          for b in sorted({*(b for b in BUDGETS if b < budget), budget})}
    trials_to = {}
    for target in TARGETS:
        # the trial after the last one below the target, where the last one is not
        reached = [next((n + 1 for n in range(len(t), 0, -1) if t[n - 1] < target), 1) if t and t[-1] >= target
                   else math.inf for t in traces]
        median = statistics.median(reached)
        trials_to[str(target)] = {"median": None if median == math.inf else median,
                                  "reached": sum(n < math.inf for n in reached)}
    return {"fraction_at": at, "trials_to": trials_to}
