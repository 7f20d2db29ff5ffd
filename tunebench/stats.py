"""Statistics of timing samples (milliseconds): robust ones, the median and min, and their
distribution-free confidence intervals, because timings are skewed and noisy."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from functools import cache


def summarize(samples: Sequence[float]) -> dict:
    """min, median, mean, stdev and n of a non-empty list of samples."""
    return {
        "min": min(samples),
        "median": statistics.median(samples),
        "mean": statistics.fmean(samples),
        "stdev": statistics.stdev(samples) if len(samples) > 1 else 0.0,
        "n": len(samples),
    }


@cache
def _median_ranks(n: int, confidence: float) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the order statistics bounding the median with at least
    ``confidence``: lo is the largest k with P(B <= k) <= (1 - confidence) / 2 for B ~
    binomial(n, 1/2); None when n is too small. The tail is summed exactly here: scipy's
    ``bdtr`` gives the same ranks (every n below 6000), but the plugin loads with every pytest
    run, and importing scipy cost each one 0.15 s."""
    alpha, scale = 1 - confidence, 2**n
    tail, term, lo = 0, 1, -1  # term: C(n, k), updated as k grows (each comb anew took a minute at n=30000)
    for k in range(n // 2 + 1):
        tail += term
        if tail / scale > alpha / 2:  # exact integers, divided once: no float overflows at any n
            break
        lo = k
        term = term * (n - k) // (k + 1)
    return None if lo < 0 else (lo, n - 1 - lo)


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median; (min, max) below 6 samples."""
    ordered = sorted(samples)
    ranks = _median_ranks(len(ordered), confidence)
    if ranks is None:
        return ordered[0], ordered[-1]
    return ordered[ranks[0]], ordered[ranks[1]]


def spread(samples: Sequence[float]) -> float:
    """Relative spread: (90th - 10th percentile) / median."""
    if len(samples) < 3:
        return 0.0
    q = statistics.quantiles(samples, n=10, method="inclusive")
    return (q[-1] - q[0]) / statistics.median(samples)
