"""Measuring one trial: verify the candidate's output, warm up by time, then sample.

The runner is reset (outputs poisoned, in-place inputs restored) and called once; its outputs
must match the reference within the dtype's tolerance before a single timed call is made.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tunebench.backends.base import Runner


@dataclass(frozen=True)
class MeasureSettings:
    """How long to warm up and how many samples to take."""

    warmup_s: float = 0.03  # the first calls on a CPU are several times slower
    min_warmup_calls: int = 2
    sample_s: float = 0.15  # sample for this long ...
    min_samples: int = 10  # ... but take at least this many ...
    max_samples: int = 500  # ... and at most this many


@dataclass
class Measurement:
    status: str  # "ok" or "wrong_result"
    samples: list[float] = field(default_factory=list)  # ms, every one
    error: str | None = None
    max_error: float | None = None


def compare(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray], names: Sequence[str],
            rtol: float, atol: float) -> tuple[float, str | None]:
    """(largest absolute error, None) when every output is within tolerance, else a reason."""
    worst, reason = 0.0, None
    for out, ref, name in zip(outputs, expected, names):
        if out.shape != ref.shape:
            return float("inf"), f"output {name!r} has shape {out.shape}, the reference {ref.shape}"
        got = out.astype(np.float64)
        want = ref.astype(np.float64)
        err = np.abs(got - want)
        err[np.isnan(got) != np.isnan(want)] = np.inf
        err[np.isnan(got) & np.isnan(want)] = 0.0
        bad = err > atol + rtol * np.abs(want)
        if err.size:
            worst = max(worst, float(np.max(err)))
        if reason is None and bad.any():
            i = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), err.shape)
            reason = (f"output {name!r}: {int(bad.sum())} of {bad.size} values off, largest error "
                      f"{float(err[i]):.3g} at {tuple(int(v) for v in i)} (got {float(got[i]):.6g}, "
                      f"expected {float(want[i]):.6g}; rtol {rtol:g}, atol {atol:g})")
    return worst, reason


def measure(runner: Runner, expected: Sequence[np.ndarray], names: Sequence[str],
            tolerance: tuple[float, float], settings: MeasureSettings) -> Measurement:
    runner.reset()
    runner.call()
    max_error, wrong = compare(runner.outputs(), expected, names, *tolerance)
    if wrong:
        return Measurement("wrong_result", error=wrong, max_error=max_error)
    start, calls = time.perf_counter(), 0
    while calls < settings.min_warmup_calls or time.perf_counter() - start < settings.warmup_s:
        runner.call()
        calls += 1
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < settings.max_samples and (
            len(samples) < settings.min_samples or time.perf_counter() - start < settings.sample_s):
        samples.append(runner.timed_call())
    return Measurement("ok", samples=samples, max_error=max_error)
