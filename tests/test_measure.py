import numpy as np
import pytest

from tunebench.measure import CHUNK, compare


def test_outputs_within_tolerance_pass_and_report_the_largest_error():
    ref = np.array([1.0, 2.0, 3.0])
    worst, reason = compare([ref + 1e-6], [ref], ["y"], [(1e-5, 0.0)])
    assert reason is None
    assert worst == pytest.approx(1e-6)


def test_a_wrong_value_is_located_and_measured():
    ref = np.zeros((2, 3))
    got = ref.copy()
    got[1, 2] = 0.5
    worst, reason = compare([got], [ref], ["y"], [(1e-4, 1e-5)])
    assert worst == 0.5
    assert "1 of 6 values off" in reason and "(1, 2)" in reason and "largest error 0.5" in reason


def test_a_poisoned_nan_output_never_passes():
    ref = np.ones(4, dtype=np.float32)
    got = ref.copy()
    got[3] = np.nan
    worst, reason = compare([got], [ref], ["y"], [(1.0, 1.0)])
    assert worst == np.inf and reason is not None


def test_a_wrong_shape_is_a_wrong_result():
    _, reason = compare([np.zeros(3)], [np.zeros(4)], ["y"], [(1e-4, 1e-4)])
    assert "shape" in reason


def test_a_large_output_compared_in_chunks_counts_every_value_off_and_names_the_worst():
    """A GPU's outputs hold 10**8 values: they are compared a chunk at a time, on several cores."""
    ref = np.zeros((3, CHUNK + 7), dtype=np.float64)
    got = ref.astype(np.float32)
    got[0, 5], got[1, CHUNK + 3], got[2, 9] = 0.25, 0.75, 0.5  # in three different chunks
    worst, reason = compare([got], [ref], ["y"], [(1e-4, 1e-5)])
    assert worst == 0.75
    assert f"3 of {ref.size} values off" in reason and f"(1, {CHUNK + 3})" in reason
    got[:] = 0
    got[2, CHUNK + 6] = np.nan  # the poison left in the last value of the last chunk
    assert compare([got], [ref], ["y"], [(1.0, 1.0)])[0] == np.inf


def test_matching_nans_and_infinities_are_exact_and_do_not_hide_the_largest_error():
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    got = np.array([np.nan, np.inf, -np.inf, 1.0 + 1e-7])
    worst, reason = compare([got], [ref], ["y"], [(1e-6, 0.0)])
    assert reason is None and worst == pytest.approx(1e-7)


def test_a_value_off_is_printed_with_the_digits_that_tell_it_from_the_expected():
    """160464.0054 and 160464 were both printed as 160464."""
    _, reason = compare([np.array([160464.0054], np.float64)], [np.array([160464.0])], ["y"], [(0.0, 0.0)])
    assert "(got 160464.005, expected 160464; rtol 0, atol 0)" in reason
