"""Gate measurements as pytest-benchmark benchmarks, so ``--benchmark-json`` files, dashboards
and ``pytest-benchmark compare`` read them like any other benchmark (times in seconds)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest


class _Fixture:
    """What pytest-benchmark's ``Metadata`` reads from a benchmark fixture."""

    def __init__(self, name: str, fullname: str, group: str, extra_info: dict):
        self.name, self.fullname, self.group, self.extra_info = name, fullname, group, extra_info
        self.param = self.params = self.cprofile_stats = None
        self.has_error = False


def feed(config: pytest.Config, fullname: str, *, group: str, samples_ms: Sequence[float], extra_info: dict) -> None:
    """Add one benchmark with every sample as a round (one iteration each), where the run
    keeps benchmarks (--benchmark-json, -save, -autosave or -compare): otherwise their tables
    would only bury the gate's verdicts."""
    session = getattr(config, "_benchmarksession", None)
    if session is None or session.disabled or not samples_ms or not (
            session.json or session.save or session.autosave or session.compare):
        return
    from pytest_benchmark.stats import Metadata

    options = {"timer": "tunebench", "min_rounds": len(samples_ms), "max_time": 0, "min_time": 0,
               "warmup": True, "disable_gc": False}
    meta = Metadata(_Fixture(fullname.rsplit("::", 1)[-1], fullname, group, extra_info), 1, options)
    for ms in samples_ms:
        meta.update(ms / 1e3)
    session.benchmarks.append(meta)
