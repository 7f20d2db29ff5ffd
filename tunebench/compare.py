"""Measurements that hold beyond one process: trials re-measured while the machine is
disturbed, and interleaved comparisons repeated in fresh worker processes.

Within one process, configs measured round by round (:func:`tunebench.measure.interleave`)
share the machine's drift, so their ratio is precise; but what differs between processes (where
the buffers landed in physical memory, which core ran what) moves that ratio by more than the
few per cent a gate must resolve: 0.62x in one process and 0.88x in the next was seen, each with
a tight interval. So a comparison is repeated in ``processes`` fresh workers, and every verdict
on it (the final round's, the gate's) is made on the per-process figures, whose spread is the
noise that matters.

A measurement the worker judged ``disturbed`` (:mod:`tunebench.interference`) is measured
again after a pause that doubles each time; what stays disturbed is marked so, never used as if
it were clean.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tunebench.measure import MeasureSettings, objective_ms
from tunebench.workers import CompareJob, TrialJob

#: Measurements of a disturbed machine are repeated this many times, after pauses of
#: BACKOFF_S, twice that, four times that ...
RETRIES = 3
BACKOFF_S = 0.5


def undisturbed(workers, job: TrialJob | CompareJob, fresh: bool = False,
                sleep: Callable[[float], None] = time.sleep, retries: int = RETRIES) -> dict:
    """The job's result, measured again while the worker judges it disturbed (at most
    ``retries`` more times); ``fresh``: every attempt in a fresh worker process. The last
    attempt's result, with ``retries`` (how many were made) and ``cost_s`` (all of them)."""
    cost = 0.0
    for attempt in range(retries + 1):
        if fresh:
            workers.restart()
        result = workers.trial(job)
        cost += result.get("cost_s", 0.0)
        if result.get("verdict") != "disturbed" or attempt == retries:
            break
        sleep(BACKOFF_S * 2**attempt)
    result["retries"], result["cost_s"] = attempt, cost
    return result


@dataclass
class Comparison:
    """Arms measured interleaved on one shape, once per fresh process."""

    labels: tuple[str, ...]
    objectives: list[dict[str, float]] = field(default_factory=list)  # per process: arm -> ms
    samples: list[dict] = field(default_factory=list)  # per process: placement -> arm -> ms samples
    disturbed: list[str] = field(default_factory=list)  # why processes stayed disturbed
    failure: dict | None = None  # the first failed arm: status, arm (label), error
    cost_s: float = 0.0

    def ratios(self, label: str, to: str) -> list[float]:
        """Per process: ``label``'s time over ``to``'s."""
        return [o[label] / o[to] for o in self.objectives]

    def median(self, label: str) -> float:
        """``label``'s time, the median over processes."""
        return statistics.median(o[label] for o in self.objectives)


def compare(workers, kernel: str, shape: tuple, dtype: str, arms: Sequence[tuple[str, dict, str | None]],
            processes: int, budget_s: float = 1.0, rounds: int = 30,
            into: Comparison | None = None, retries: int = RETRIES) -> Comparison:
    """Measure ``arms`` (label, config, template text or None) interleaved on ``shape`` in
    ``processes`` fresh workers, each time for about ``budget_s`` seconds of calls; ``into``
    adds the processes to an earlier comparison of the same arms; ``retries`` of a disturbed
    process (none where the machine is known to be busy)."""
    found = into or Comparison(tuple(label for label, _, _ in arms))
    job = CompareJob(kernel, tuple(shape), dtype, tuple(arms), rounds, MeasureSettings(), budget_s)
    for _ in range(processes):
        result = undisturbed(workers, job, fresh=True, retries=retries)
        found.cost_s += result["cost_s"]
        if result["status"] != "ok":
            found.failure = {k: result.get(k) for k in ("status", "arm", "error")}
            return found
        by_arm = {label: {p: arms_samples[label] for p, arms_samples in result["samples"].items()}
                  for label in found.labels}
        found.objectives.append({label: objective_ms(s) for label, s in by_arm.items()})
        found.samples.append(result["samples"])
        if result.get("verdict") == "disturbed":
            found.disturbed.append("; ".join(result.get("interference", [])))
    return found
