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
again after a pause that doubles each time, for longer where only its samples show it (the host
changed speed); what stays disturbed is marked so, never used as if it were clean.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tunebench.interference import machine_signals
from tunebench.measure import MeasureSettings, objective_ms
from tunebench.workers import MIN_ROUNDS, CompareJob, TrialJob

#: Measurements of a disturbed machine are repeated this many times, after pauses of
#: BACKOFF_S, twice that, four times that ...
RETRIES = 3
BACKOFF_S = 0.5
#: A measurement disturbed in its samples alone, the machine's readings clean, met a change in
#: the host's own speed: another VM's load, invisible from inside this one. On this project's
#: quiet VM a memory-bound loop timed for 4 minutes ran 10-30 % slow in episodes of 2-20 s, where
#: a process that takes the cores here runs as long as its job. So such a measurement goes on
#: being repeated after the retries, the pauses still doubling, until they add up to this many
#: seconds. (With the retries alone, a final-round process stayed disturbed in 3 of 7 quiet tunes
#: of every suite, and its bucket confirmed nothing; 0 of 3 after.)
PATIENCE_S = 32.0
#: Seconds of calls a verification (see :func:`verified`) times at most: its times are not read.
VERIFY_BUDGET_S = 0.05


def undisturbed(workers, job: TrialJob | CompareJob, fresh: bool = False,
                sleep: Callable[[float], None] | None = None, retries: int = RETRIES, known_busy: bool = False) -> dict:
    """The job's result, measured again while the worker judges it disturbed (``retries`` more
    times, and on up to PATIENCE_S of pauses where only the samples show it); ``fresh``: every
    attempt in a fresh worker process; ``known_busy``: the machine is known to be busy, so an
    attempt that shows other load (:func:`machine_signals`) is the last, where one disturbed by its
    samples alone (which passes in seconds) is retried. The last attempt's result, with
    ``retries`` (how many were made) and ``cost_s`` (all of them)."""
    cost, paused, attempt = 0.0, 0.0, 0
    while True:
        if fresh:
            workers.restart()
        result = workers.trial(job)
        cost += result.get("cost_s", 0.0)
        pause = BACKOFF_S * 2**attempt
        if result.get("verdict") != "disturbed" or (known_busy and machine_signals(result.get("conditions", {}))) \
                or not (attempt < retries or _host_only(result, retries, paused + pause)):
            break
        (sleep or workers.pause)(pause)  # looked up now: a test may stub it
        paused, attempt = paused + pause, attempt + 1
    result["retries"], result["cost_s"] = attempt, cost
    return result


def _host_only(result: dict, retries: int, paused: float) -> bool:
    """Whether a disturbed result is worth waiting on beyond the retries: the disturbance showed
    in the samples alone, retries are asked for (none where the machine is known to be busy), and
    the pauses stay within PATIENCE_S."""
    return retries > 0 and paused <= PATIENCE_S and not machine_signals(result.get("conditions", {}))


@dataclass
class Comparison:
    """Arms measured interleaved on one shape, once per fresh process."""

    labels: tuple[str, ...]
    objectives: list[dict[str, float]] = field(default_factory=list)  # per process: arm -> ms
    samples: list[dict] = field(default_factory=list)  # per process: placement -> arm -> ms samples
    disturbed: list[str] = field(default_factory=list)  # why processes stayed disturbed
    failure: dict | None = None  # the first failed arm: status, arm (label), error, cached (a compile error's)
    #: (arm, other): ``arm`` was built into ``other``'s machine code, so it was not measured and
    #: left :attr:`labels` (see :class:`~tunebench.workers.CompareJob`)
    same_code: tuple[str, str] | None = None

    def ratios(self, label: str, to: str) -> list[float]:
        """Per process: ``label``'s time over ``to``'s."""
        return [o[label] / o[to] for o in self.objectives]

    def median(self, label: str) -> float:
        """``label``'s time, the median over processes."""
        return statistics.median(o[label] for o in self.objectives)


def compare(workers, kernel: str, shape: tuple, dtype: str, arms: Sequence[tuple[str, dict, dict | None]],
            processes: int, budget_s: float = 1.0, rounds: int = 30,
            into: Comparison | None = None, retries: int = RETRIES,
            drop_same: tuple[str, str] | None = None) -> Comparison:
    """Measure ``arms`` (label, config, the variant's fields built otherwise for it or None: see
    :class:`~tunebench.workers.CompareJob`) interleaved on ``shape`` in
    ``processes`` fresh workers, each time for ``rounds`` rounds, fewer where they would take
    more than ``budget_s`` seconds of calls (a slow kernel: see the worker's job); ``into``
    adds the processes to an earlier comparison of the same arms; ``retries`` of a disturbed
    process (none where the machine is known to be busy, nor once a process stayed disturbed:
    the comparison cannot be clean then, and its figures need not wait). ``drop_same``: (arm,
    other), ``arm`` measured only where its build holds other code than ``other``'s; where it
    holds the same, the comparison goes on without it (:attr:`Comparison.same_code`), a single
    arm left too, in every process: the gate keeps its time (the records' ``best_ms``, the
    report's history) as it did when the two were measured."""
    found = into or Comparison(tuple(label for label, _, _ in arms))
    arms = tuple(arm for arm in arms if arm[0] in found.labels)  # not one dropped before
    job = CompareJob(kernel, tuple(shape), dtype, arms, rounds, MeasureSettings(), budget_s,
                     drop_same if drop_same and set(drop_same) <= set(found.labels) else None)
    for _ in range(processes):
        result = undisturbed(workers, job, fresh=True, retries=0 if found.disturbed else retries)
        if result["status"] != "ok":
            found.failure = {k: result.get(k) for k in ("status", "arm", "error", "cached")}
            return found
        if "same_code" in result:
            found.same_code = tuple(result["same_code"])
            found.labels = tuple(label for label in found.labels if label != found.same_code[0])
            job = replace(job, arms=tuple(a for a in job.arms if a[0] in found.labels), drop_same=None)
        by_arm = {label: {p: arms_samples[label] for p, arms_samples in result["samples"].items()}
                  for label in found.labels}
        found.objectives.append({label: objective_ms(s) for label, s in by_arm.items()})
        found.samples.append(result["samples"])
        if result.get("verdict") == "disturbed":
            found.disturbed.append("; ".join(result.get("interference", [])))
    return found


def verified(workers, kernel: str, shape: tuple, dtype: str, config: dict) -> dict | None:
    """How ``config`` failed on ``shape`` (its ``status`` and ``error``: a wrong result, a crash),
    None where it ran right: run as a comparison's one arm, so under every buffer placement, its
    result verified against the reference and its few timed rounds not read. What a bucket's
    verify shapes ask of a pick (see :class:`~tunebench.buckets.Bucket`): nothing timed, so other
    load is no reason to run it again."""
    result = workers.trial(CompareJob(kernel, tuple(shape), dtype, (("0", config, None),), MIN_ROUNDS,
                                      MeasureSettings(), VERIFY_BUDGET_S))
    return None if result["status"] == "ok" else {k: result.get(k) for k in ("status", "error")}
