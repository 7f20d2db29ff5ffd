"""Applying results: the best recorded config for a shape, else today's heuristic.

``best(kernel, shape)`` finds the bucket holding the shape (the nearest, with a warning, when it
lies outside all of them), ranks every config recorded on that bucket for this device and the
kernel's current source by the bucket objective, and returns the winner; where a tune ended with
a final round (its fastest configs measured again, interleaved), that round's winner. The baseline
(the heuristic on each representative shape) competes too: where it wins, or nothing is recorded,
the answer is the heuristic's config for the requested shape.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tunebench.backends import fingerprint, resolve
from tunebench.buckets import Bucket, Buckets
from tunebench.kernel import REGISTRY, Kernel
from tunebench.device import device_id
from tunebench.records import RecordStore, config_key, stores


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

    @property
    def speedup(self) -> float | None:
        if self.objective_ms and self.baseline_ms:
            return self.baseline_ms / self.objective_ms
        return None


def load_suites(directory: str | Path) -> list[Kernel]:
    """Import every ``test_*.py`` under ``directory`` as pytest would (its folder first on the
    import path, for the helpers beside it) and return the kernels they declare at module level."""
    kernels = []
    for path in sorted(Path(directory).glob("**/test_*.py")):
        name = f"tunebench_suite_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            sys.path.insert(0, str(path.parent))
            try:
                spec.loader.exec_module(module)
            except Exception as e:  # noqa: BLE001 - any error in a suite is reported with its file
                del sys.modules[name]
                raise ImportError(f"{path}: {type(e).__name__}: {e}") from e
            finally:
                sys.path.remove(str(path.parent))
        kernels += [v for v in vars(sys.modules[name]).values() if isinstance(v, Kernel)]
    return list(dict.fromkeys(kernels))


def _kernel(name: str, suites: str | Path | None) -> Kernel | None:
    if name not in REGISTRY and suites is not None and Path(suites).is_dir():
        load_suites(suites)
    return REGISTRY.get(name)


def this_device(target: str | None = None) -> str:
    """The device id of this machine for a target (default: what ``--tune-target auto`` picks)."""
    return device_id(fingerprint(target or resolve("auto")[0]))


def lookup(kernel: str | Kernel, shape: Sequence[int], device: str | None = None, *,
           dtype: str = "float32", records: str | Path = "records",
           suites: str | Path | None = "suites") -> Choice:
    """The best config for ``shape`` and how it was chosen; see the module docstring."""
    decl = kernel if isinstance(kernel, Kernel) else _kernel(kernel, suites)
    name = decl.name if decl else kernel
    device = device or this_device()
    path = Path(records) / f"{Path(device).stem}.json"
    store = RecordStore(path) if path.exists() else None
    tasks = store.tasks(kernel=name, dtype=dtype) if store else []
    target = store.fingerprint["target"] if store and store.fingerprint else device.split("-", 1)[0]
    variant = decl.variant(target) if decl else None
    if decl is None and not tasks:
        raise LookupError(f"kernel {name!r}: no records in {path} and no declaration found"
                          f"{f' under {suites}' if suites else ''}")
    buckets = decl.buckets_for(target) if decl else Buckets(
        tasks[0]["dims"], [Bucket.from_description(t["range"]) for t in tasks])
    bucket, inside = buckets.find(shape)
    shape = tuple(int(v) for v in shape)
    choice = Choice(config={}, source="heuristic", kernel=name, shape=shape, dtype=dtype,
                    bucket=bucket.name, inside=inside, device=Path(device).stem)

    task = next((t for t in tasks if t["bucket"] == bucket.name), None)
    source_hash = variant.source_hash if variant else (task or {}).get("source_hash")
    times = shape_times(store, name, dtype, bucket, source_hash) if store else {}
    ranked = {key: bucket.objective(t) for key, t in times.items() if len(t) == len(bucket.shapes)}
    baseline = ([variant.baseline(s) for s in bucket.shapes] if variant else
                [b["config"] for b in task["baseline"]] if task else [])
    got = {s: times.get(config_key(c), {}).get(s) for s, c in zip(bucket.shapes, baseline)}
    if baseline and all(v is not None for v in got.values()):
        choice.baseline_ms = bucket.objective(got)
    final = final_choice(store, name, target, dtype, bucket.name, source_hash) if store else None
    if final is not None:  # the final round's winner, else the heuristic
        key = config_key(next(iter(final.values())))
        ranked = {} if list(final.values()) == baseline or key not in ranked else {key: ranked[key]}
    winner = min(ranked.items(), key=lambda kv: kv[1], default=None)
    if winner and (final is not None or choice.baseline_ms is None or winner[1] < choice.baseline_ms):
        config = dict(winner[0])
        if variant is not None and set(config) == set(variant.space.names):
            config = {n: config[n] for n in variant.space.names}
        choice.config, choice.source, choice.objective_ms = config, "tuned", winner[1]
    elif variant is not None:
        choice.config, choice.objective_ms = variant.baseline(shape), choice.baseline_ms
    else:
        raise LookupError(f"kernel {name!r}: the heuristic wins on bucket {bucket.name!r}, but the "
                          f"kernel's declaration is needed to apply it to {shape}: pass suites=")
    return choice


def best(kernel: str | Kernel, shape: Sequence[int], device: str | None = None, *,
         dtype: str = "float32", records: str | Path = "records",
         suites: str | Path | None = "suites") -> dict:
    """The best recorded config for the bucket holding ``shape`` on ``device`` (default: this
    machine's), else the kernel's heuristic for ``shape``."""
    return lookup(kernel, shape, device, dtype=dtype, records=records, suites=suites).config


def latest_confirmation(store: RecordStore, kernel: str, target: str, dtype: str, bucket: str) -> dict | None:
    """The final round of the latest tune of a task (see :mod:`tunebench.final_round`)."""
    found = store.checks(kernel=kernel, target=target, dtype=dtype, bucket=bucket, kind="tune")
    return found[-1] if found else None


def final_choice(store: RecordStore, kernel: str, target: str, dtype: str, bucket: str,
                 source_hash: str | None) -> dict[tuple, dict] | None:
    """shape -> config the final round of the latest tune chose for this source, if any: it
    outranks the trials' own order, which drift between trials may have decided."""
    check = latest_confirmation(store, kernel, target, dtype, bucket)
    if check is None or check["source_hash"] != source_hash:
        return None
    return {tuple(e["shape"]): e["best"] for e in check["shapes"]}


def shape_times(store: RecordStore, kernel: str, dtype: str, bucket: Bucket, source_hash: str | None,
                first: int | None = None):
    """config key -> {shape: median ms} over the bucket's shapes, successful trials only (of the
    ``first`` trials recorded, where given)."""
    times: dict[tuple, dict[tuple, float]] = defaultdict(dict)
    shapes = set(bucket.shapes)
    for doc in store.trials()[:first]:
        shape = tuple(doc["shape"])
        if (doc["kernel"], doc["dtype"], doc["status"]) == (kernel, dtype, "ok") and shape in shapes and (
                source_hash is None or doc["source_hash"] == source_hash):
            times[config_key(doc["config"])][shape] = doc["stats"]["median"]
    return times


def related_results(directory: str | Path, kernel: str, target: str, dtype: str, source_hash: str,
                    skip: tuple[str, str], first: int | None = None) -> list[tuple[dict, float]]:
    """Warm-start data: every config recorded for the same kernel, target, dtype and source on
    other buckets or devices under ``directory``, as (config, objective / that task's best).
    ``skip`` is the (device, bucket) being tuned; of its device's file only the ``first``
    trials count (those recorded before the task began, so that a re-run starts alike)."""
    found = []
    for store in stores(directory):
        for task in store.tasks(kernel=kernel, target=target, dtype=dtype):
            if (store.device, task["bucket"]) == skip:
                continue
            bucket = Bucket.from_description(task["range"])
            times = shape_times(store, kernel, dtype, bucket, source_hash,
                                first if store.device == skip[0] else None)
            ranked = {k: bucket.objective(t) for k, t in times.items() if len(t) == len(bucket.shapes)}
            if ranked:
                best = min(ranked.values())
                found += [(dict(k), v / best) for k, v in ranked.items()]
    return found
