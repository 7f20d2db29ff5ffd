"""Summary statistics of timing samples (milliseconds): robust ones first, the median and min."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def summarize(samples: Sequence[float]) -> dict:
    """min, median, mean, stdev and n of a non-empty list of samples."""
    return {
        "min": min(samples),
        "median": statistics.median(samples),
        "mean": statistics.fmean(samples),
        "stdev": statistics.stdev(samples) if len(samples) > 1 else 0.0,
        "n": len(samples),
    }
