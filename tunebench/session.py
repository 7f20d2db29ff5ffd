"""The tuning session: strategy -> build -> measure -> record, for each (kernel, dtype, bucket).

A :class:`Task` tunes one kernel on one bucket for one dtype: it measures the baseline (the
heuristic config of every representative shape) first, then asks its strategy for candidates
until the budget (trials, seconds) or the strategy ends. Every trial becomes a record at once;
a trial already recorded for the same source, shape, dtype and config is reused, not measured.
"""

from __future__ import annotations

import datetime
import random
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tunebench import __version__
from tunebench.backends.base import Backend, Build, CompileError, ResourceError
from tunebench.buckets import Bucket
from tunebench.kernel import Kernel, Variant
from tunebench.measure import MeasureSettings, measure
from tunebench.records import RecordStore, config_key
from tunebench.stats import summarize
from tunebench.strategies import get as get_strategy
from tunebench.summary import config_text

#: Statuses of a trial that did not give a time. ``pruned_resources`` is not a failure of the
#: kernel: the candidate cannot launch on this device.
FAILED = ("compile_error", "wrong_result", "runtime_error", "crashed", "timeout")


@dataclass(frozen=True)
class Budget:
    """Per (kernel, dtype, bucket): at most ``trials`` candidates and ``seconds`` of wall time."""

    trials: int | None = None
    seconds: float | None = None


@dataclass
class Outcome:
    """A config (or the per-shape baseline) evaluated on every representative shape of a bucket."""

    configs: dict[tuple, dict]  # shape -> config
    trials: dict[tuple, dict]  # shape -> record
    new: int  # trials measured in this run (the rest came from the records)

    @property
    def status(self) -> str:
        """``ok`` when every shape gave a time, else the first failing status."""
        return next((t["status"] for t in self.trials.values() if t["status"] != "ok"), "ok")

    @property
    def error(self) -> str | None:
        return next((t["error"] for t in self.trials.values() if t.get("error")), None)

    @property
    def times(self) -> dict[tuple, float]:
        return {s: t["stats"]["median"] for s, t in self.trials.items() if t["status"] == "ok"}


def git_state(root: Path, records: Path) -> tuple[str | None, bool | None]:
    """The commit checked out at ``root`` and whether anything but the records differs from it."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                 f":(exclude){records}"], cwd=root, capture_output=True, text=True,
                                check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit, bool(status.strip())


class Tuner:
    """What every task of one tuning run shares: backend, records, settings, provenance."""

    def __init__(self, backend: Backend, store: RecordStore, *, strategy: str = "random",
                 budget: Budget = Budget(), seed: int = 0, settings: MeasureSettings = MeasureSettings(),
                 root: Path | None = None):
        self.backend = backend
        self.store = store
        self.strategy = strategy
        get_strategy(strategy)  # fail now on an unknown name
        self.budget = budget
        self.seed = seed
        self.settings = settings
        self.fingerprint = backend.fingerprint()
        root = root or Path.cwd()
        try:
            records_rel = store.path.parent.resolve().relative_to(root.resolve())
        except ValueError:
            records_rel = store.path.parent
        self.commit, self.dirty = git_state(root, records_rel)
        self.tasks: list[Task] = []

    def task(self, kernel: Kernel, variant: Variant, dtype: str, bucket: Bucket) -> Task:
        task = Task(self, kernel, variant, dtype, bucket)
        self.tasks.append(task)
        return task


class Task:
    """One (kernel, dtype, bucket) on the tuner's target."""

    def __init__(self, tuner: Tuner, kernel: Kernel, variant: Variant, dtype: str, bucket: Bucket):
        self.tuner, self.kernel, self.variant, self.dtype, self.bucket = tuner, kernel, variant, dtype, bucket
        self.candidates: list[tuple] = []  # valid keys selected for this run, set after collection
        self.deselected = 0  # constraint-violating configs
        self.outcomes: dict[tuple, Outcome] = {}  # key -> outcome, in the order measured
        self.baseline: Outcome | None = None
        self.stop_reason: str | None = None  # why the search ended; None until it has run
        self.failure: Exception | None = None  # what broke the task (a declaration error)
        self.elapsed_s = 0.0
        self._builds: dict[tuple, Build | CompileError] = {}
        self._expected: dict[tuple, list] = {}

    @property
    def label(self) -> str:
        return f"{self.kernel.name}[{self.bucket.name}-{self.dtype}]"

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    # -- the search ---------------------------------------------------------------------------
    def run(self) -> None:
        """Measure the baseline, then candidates in the strategy's order until the budget ends."""
        if self.failure is not None:
            raise self.failure
        if self.done:
            return
        try:
            self._search()
        except Exception as e:
            self.failure = e
            self.stop_reason = f"the task failed: {e}"
            raise

    def _search(self) -> None:
        start = time.monotonic()
        self.tuner.store.put_task(self._description())
        self.baseline = self._evaluate({s: self.variant.baseline(s) for s in self.bucket.shapes})
        space = self.variant.space
        rng = random.Random(f"{self.tuner.seed}:{self.kernel.name}:{self.dtype}:{self.bucket.name}")
        strategy = get_strategy(self.tuner.strategy)(space, self.candidates, rng)
        budget = self.tuner.budget
        repeats = 0
        while True:
            if budget.trials is not None and len(self.outcomes) >= budget.trials:
                self.stop_reason = f"budget of {budget.trials} trials spent"
                break
            if budget.seconds is not None and time.monotonic() - start >= budget.seconds:
                self.stop_reason = f"budget of {budget.seconds:g} s spent"
                break
            key = strategy.ask()
            if key is None:
                self.stop_reason = f"strategy {self.tuner.strategy} has no candidate left"
                break
            if key in self.outcomes:  # a revisit costs nothing, but must not go on for ever
                repeats += 1
                if repeats > 10 * len(self.candidates) + 100:
                    self.stop_reason = f"strategy {self.tuner.strategy} only revisits measured candidates"
                    break
            else:
                config = space.config(key)
                self.outcomes[key] = self._evaluate({s: config for s in self.bucket.shapes})
            strategy.tell(key, self.objective(self.outcomes[key]))
        self.elapsed_s = time.monotonic() - start

    def objective(self, outcome: Outcome) -> float | None:
        """The bucket objective of an outcome, None unless every shape gave a time."""
        return self.bucket.objective(outcome.times) if outcome.status == "ok" else None

    def best(self) -> tuple[tuple | None, Outcome] | None:
        """(key, outcome) of the fastest outcome, the baseline (key None) included."""
        ranked = [(self.objective(o), k, o) for k, o in self.outcomes.items()]
        if self.baseline is not None:
            ranked.append((self.objective(self.baseline), None, self.baseline))
        ranked = [r for r in ranked if r[0] is not None]
        if not ranked:
            return None
        _, key, outcome = min(ranked, key=lambda r: r[0])
        return key, outcome

    # -- one config on every shape ------------------------------------------------------------
    def _evaluate(self, configs: Mapping[tuple, dict]) -> Outcome:
        trials, new = {}, 0
        for shape, config in configs.items():
            doc = self.tuner.store.lookup(self.kernel.name, self.variant.source_hash, shape, self.dtype, config)
            if doc is None:
                doc = self._measure(config, shape)
                self.tuner.store.add(doc)
                new += 1
            trials[shape] = doc
        return Outcome(dict(configs), trials, new)

    def _build(self, config: dict) -> Build:
        key = config_key(config)
        if key not in self._builds:
            try:
                self._builds[key] = self.tuner.backend.build(self.kernel, self.variant, config, self.dtype)
            except CompileError as e:
                self._builds[key] = e
        build = self._builds[key]
        if isinstance(build, CompileError):
            raise build
        return build

    def _measure(self, config: dict, shape: tuple) -> dict:
        doc = self._document(config, shape)
        try:
            build = self._build(config)
        except CompileError as e:
            return {**doc, "status": "compile_error", "error": str(e)}
        doc["compile_time_s"] = build.compile_time_s
        args = self.kernel.build_args(shape, self.dtype)
        if shape not in self._expected:
            self._expected[shape] = self.kernel.expected(args)
        try:
            runner = self.tuner.backend.load(build, self.kernel, self.variant, config, shape, args)
        except ResourceError as e:
            return {**doc, "status": "pruned_resources", "error": str(e)}
        try:
            result = measure(runner, self._expected[shape], self.kernel.outputs,
                             self.kernel.tolerance[self.dtype], self.tuner.settings)
        finally:
            runner.close()
        doc.update(status=result.status, error=result.error, max_error=result.max_error,
                   samples=result.samples, stats=summarize(result.samples) if result.samples else None)
        return doc

    def _document(self, config: dict, shape: tuple) -> dict:
        t = self.tuner
        return {
            "kernel": self.kernel.name, "target": t.backend.name, "device": t.store.device,
            "fingerprint": t.fingerprint, "source_hash": self.variant.source_hash,
            "bucket": self.bucket.name, "shape": list(shape), "dtype": self.dtype, "config": config,
            "baseline": config == self.variant.baseline(shape),
            "status": None, "error": None, "max_error": None, "stats": None, "samples": [],
            "compile_time_s": None, "work": self._work(shape),
            "git_commit": t.commit, "git_dirty": t.dirty, "tunebench_version": __version__,
            "strategy": t.strategy,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }

    def _work(self, shape: tuple) -> dict:
        k = self.kernel
        return {"flops": k.flops(shape) if k.flops else None,
                "bytes": k.bytes(shape, self.dtype) if k.bytes else None}

    def _description(self) -> dict:
        return {"kernel": self.kernel.name, "target": self.tuner.backend.name, "dtype": self.dtype,
                "bucket": self.bucket.name, "dims": list(self.kernel.buckets.dims),
                "range": self.bucket.describe(), "source_hash": self.variant.source_hash,
                "baseline": [{"shape": list(s), "config": self.variant.baseline(s)} for s in self.bucket.shapes]}

    def rate(self, outcome: Outcome) -> tuple[float, str] | None:
        """GFLOP/s or GB/s of an outcome over the bucket (weighted geometric mean over shapes)."""
        if outcome.status != "ok":
            return None
        rates = {s: self.kernel.throughput(s, self.dtype, ms) for s, ms in outcome.times.items()}
        if any(r is None for r in rates.values()):
            return None
        unit = next(iter(rates.values()))[1]
        return self.bucket.objective({s: r[0] for s, r in rates.items()}), unit

    def summary_row(self) -> dict:
        """The task's line of the terminal summary (see :func:`tunebench.summary.table`)."""
        outcomes = list(self.outcomes.values())
        best = self.best()
        best_key, best_outcome = best if best else (None, None)
        base_ms = self.objective(self.baseline) if self.baseline else None
        best_ms = self.objective(best_outcome) if best_outcome else None
        base_configs = list(self.baseline.configs.values()) if self.baseline else []
        return {
            "kernel": self.kernel.name, "bucket": self.bucket.name, "dtype": self.dtype,
            "trials": len(outcomes),
            "new": sum(o.new for o in outcomes) + (self.baseline.new if self.baseline else 0),
            "failed": sum(o.status in FAILED for o in outcomes),
            "deselected": self.deselected,
            "best_ms": best_ms, "best_rate": self.rate(best_outcome) if best_outcome else None,
            "baseline_ms": base_ms,
            "speedup": base_ms / best_ms if base_ms and best_ms else None,
            "best_config": "-" if best is None else "the baseline" if best_key is None
            else config_text(self.variant.space.config(best_key)),
            "baseline_config": " | ".join(dict.fromkeys(config_text(c) for c in base_configs)) or "-",
        }
