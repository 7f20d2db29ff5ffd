"""Adaptive measurement on a real gcc-compiled kernel: stopping rules, early stop, fixed protocol."""

import dataclasses
import math

import numpy as np
import pytest

from tests.conftest import AXPB_C
from tunebench.backends.cpu import CpuBackend
from tunebench.buckets import Bucket, Buckets
from tunebench.kernel import Kernel, Variant
from tunebench.measure import MeasureSettings, interleave, measure, warm_up
from tunebench.space import Space
from tunebench.stats import _median_ranks, median_ci, spread


@pytest.fixture
def runner(tmp_path):
    (tmp_path / "axpb.c").write_text(AXPB_C)
    variant = Variant(source=tmp_path / "axpb.c", entry="axpb", space=Space({"vec": [4], "unroll": [1], "mode": [0]}),
                      heuristic=lambda shape: {"vec": 4, "unroll": 1, "mode": 0})
    kernel = Kernel("axpb_adaptive_test", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(100,)])]),
                    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                    "y": np.empty(shape[0], np.float32), "n": np.int32(shape[0]),
                                                    "a": np.float32(2), "b": np.float32(1)},
                    reference=lambda x, n, a, b: 2.0 * x + 1.0, outputs=["y"], cpu=variant)
    backend = CpuBackend()
    config = {"vec": 4, "unroll": 1, "mode": 0}
    args = kernel.build_args((20000,), "float32")
    loaded = backend.load(backend.build(kernel, variant, config, "float32"), kernel, variant, config, (20000,), args)

    def run(settings, incumbent=None, times=None):
        """``times``: what its timed calls (warm-up's first) say they took, in place of the clock's."""
        timed = loaded if times is None else Scripted(times, loaded)
        return measure(timed, kernel.expected(args), kernel.outputs, [(1e-5, 1e-6)], settings, incumbent)
    return run


def test_the_fixed_protocol_takes_exactly_its_repeats(runner):
    result = runner(MeasureSettings(repeats=30))
    assert result.status == "ok" and len(result.samples) == 30


def test_sampling_stops_at_the_minimum_once_the_interval_is_narrow_enough(runner):
    result = runner(MeasureSettings(min_samples=5, rel_ci=100.0))
    assert result.status == "ok" and len(result.samples) == 5


def test_the_time_cap_bounds_sampling_but_never_the_minimum(runner):
    result = runner(MeasureSettings(min_samples=7, max_time_s=0.0, rel_ci=0.0))
    assert len(result.samples) == 7


def test_a_candidate_clearly_slower_than_the_incumbent_stops_early_with_its_samples(runner):
    result = runner(MeasureSettings(min_samples=5, rel_ci=0.0, max_time_s=5.0), incumbent=1e-9)
    assert result.status == "early_stopped" and len(result.samples) == 5
    unbeatable = runner(MeasureSettings(min_samples=5, rel_ci=100.0), incumbent=1e9)
    assert unbeatable.status == "ok"


def test_the_time_cap_ends_a_hopeless_candidate_before_its_minimum(runner):
    """A config 300 times slower than the incumbent took its five samples at any cost; one past the
    cap whose every call is more than twice the incumbent's bound stops there, one within it does not."""
    capped = MeasureSettings(warmup_s=5.0, warmup_stable=1, min_samples=7, max_time_s=0.0, rel_ci=0.0)  # one warm-up call
    hopeless = runner(capped, incumbent=1.0, times=[3.0] * 9)
    assert hopeless.status == "early_stopped" and hopeless.samples == [3.0]
    near = runner(capped, incumbent=1.0, times=[2.0] * 9)  # within 2 x 1.05
    assert near.status == "early_stopped" and near.samples == [2.0] * 7
    warmed_fast = runner(capped, incumbent=1.0, times=[1.5] + [3.0] * 9)  # warm-up's call was no hopeless one
    assert len(warmed_fast.samples) == 7
    assert len(runner(capped, times=[30.0] * 9).samples) == 7  # nothing to be hopeless against
    uncapped = runner(dataclasses.replace(capped, max_time_s=60.0), 1.0, [3.0] * 9)
    assert uncapped.status == "early_stopped" and len(uncapped.samples) == 7


def test_warm_up_calls_are_counted_in_the_result(runner):
    """When warm-up stops is the scripted test's below; a real kernel's calls are counted."""
    result = runner(MeasureSettings(warmup_s=5.0, warmup_stable=3, repeats=5))
    assert 3 <= result.warmup_calls


class Scripted:
    """The stopping rule alone: calls that take the times given, in order (``real``: the runner
    that verifies, whose outputs are checked)."""

    def __init__(self, times, real=None):
        self.times, self.real = iter(times), real

    def timed_call(self):
        self.real and self.real.call()
        return next(self.times)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_warm_up_goes_on_while_each_call_is_still_much_faster_than_the_ones_before():
    settings = MeasureSettings(warmup_s=5.0, warmup_stable=3)
    assert warm_up(Scripted([8.0, 4.0, 2.0, 2.05, 2.1, 9.0]), settings) == (5, 2.0)
    assert warm_up(Scripted([8.0, 2.0, 2.1, 3.0, 2.0, 2.0, 2.1]), settings) == (7, 2.0)


def test_median_interval_covers_the_median_and_narrows_with_more_samples():
    rng = np.random.default_rng(0)
    few, many = rng.normal(10, 1, 20), rng.normal(10, 1, 2000)
    lo, hi = median_ci(few)
    assert lo <= np.median(few) <= hi
    lo2, hi2 = median_ci(many)
    assert hi2 - lo2 < (hi - lo) / 3
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few for an interval: the range


def test_spread_is_the_10_to_90_percentile_range_over_the_median():
    assert spread([1.0] * 10) == 0.0
    assert spread(list(range(1, 12))) == pytest.approx((10 - 2) / 6)


def test_the_medians_ranks_at_tens_of_thousands_of_samples_are_the_binomials():
    """--tune-repeats 30000: the exact ranks, near n/2 -+ 1.96 sqrt(n)/2 as the normal tail puts them."""
    n = 30000
    lo, hi = _median_ranks(n, 0.95)
    assert hi == n - 1 - lo and abs(lo - (n / 2 - 1.959964 * math.sqrt(n) / 2)) <= 2


class Counted:
    """A runner that counts its calls."""

    def __init__(self):
        self.calls = 0

    def timed_call(self):
        self.calls += 1
        return 1.0


def test_long_calls_are_compared_without_untimed_calls_before_them():
    """A 2 s kernel's gate took 312 s a shape: half of it untimed calls that prime caches such a
    call does not notice."""
    runners = {"a": Counted(), "b": Counted()}
    samples = interleave(runners, rounds=6, primed=False)
    assert [r.calls for r in runners.values()] == [6, 6] and all(len(s) == 6 for s in samples.values())
    interleave(runners, rounds=6)  # short calls: each timed one after an untimed one
    assert [r.calls for r in runners.values()] == [18, 18]
