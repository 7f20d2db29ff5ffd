"""Statistics of timing samples (milliseconds): robust ones, the median and min, and their
distribution-free confidence intervals and tests, because timings are skewed and noisy."""

from __future__ import annotations

import math
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
    ``confidence``, from the binomial(n, 1/2) distribution; None when n is too small."""
    alpha = 1 - confidence
    tail, lo = 0.0, -1
    for k in range(n // 2 + 1):  # the largest k with P(B <= k) <= alpha / 2
        tail += math.comb(n, k) / 2**n
        if tail > alpha / 2:
            break
        lo = k
    if lo < 0:
        return None
    return lo, n - 1 - lo


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


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie correction):
    how likely samples this different are if ``a`` and ``b`` come from one distribution."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    r1 = sum(r for r, (_, g) in zip(ranks, pooled) if g == 0)
    u = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return math.erfc(max(z, 0.0) / math.sqrt(2))
