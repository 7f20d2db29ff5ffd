import numpy as np
import pytest

from tunebench.measure import compare


def test_outputs_within_tolerance_pass_and_report_the_largest_error():
    ref = np.array([1.0, 2.0, 3.0])
    worst, reason = compare([ref + 1e-6], [ref], ["y"], 1e-5, 0.0)
    assert reason is None
    assert worst == pytest.approx(1e-6)


def test_a_wrong_value_is_located_and_measured():
    ref = np.zeros((2, 3))
    got = ref.copy()
    got[1, 2] = 0.5
    worst, reason = compare([got], [ref], ["y"], 1e-4, 1e-5)
    assert worst == 0.5
    assert "1 of 6 values off" in reason and "(1, 2)" in reason and "largest error 0.5" in reason


def test_a_poisoned_nan_output_never_passes():
    ref = np.ones(4, dtype=np.float32)
    got = ref.copy()
    got[3] = np.nan
    worst, reason = compare([got], [ref], ["y"], 1.0, 1.0)
    assert worst == np.inf and reason is not None


def test_a_wrong_shape_is_a_wrong_result():
    _, reason = compare([np.zeros(3)], [np.zeros(4)], ["y"], 1e-4, 1e-4)
    assert "shape" in reason
