import numpy as np
import pytest

from tunebench.backends.base import Runner, poison
from tunebench.measure import CHUNK, compare, verify


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


def test_every_output_off_is_named_not_the_first_alone():
    """A row statistics kernel that skipped its last row: its normalised rows were named, its
    rstd left unwritten there was not, and fixing the one output found the other at the next tune."""
    ref_x, ref_rstd, ref_total = np.zeros((4, 3)), np.ones(4), np.array(2.0)
    x, rstd = ref_x.copy(), ref_rstd.copy()
    x[3] = 1.0
    rstd[3] = np.nan
    _, reason = compare([x, rstd, ref_total], [ref_x, ref_rstd, ref_total], ["x", "rstd", "total"],
                        [(1e-4, 1e-4)] * 3)
    assert reason.startswith("output 'x': 3 of 12 values off") and reason.endswith(
        "; also off: output 'rstd', 1 of 4 values")


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


@pytest.mark.parametrize("got, want", [
    (0.0, np.nan),  # a kernel that zeroes the NaNs of a 0/0
    (12345.0, np.nan),  # garbage across a softmax row of -inf, whose reference is NaN
    (0.0, np.inf), (np.inf, -np.inf), (np.nan, np.inf), (np.inf, 1.0),
])
def test_a_number_where_the_reference_has_nan_or_an_infinity_or_the_other_infinity_is_off(got, want):
    """NaN in the reference made the limit NaN and an infinity made it infinite: any value passed."""
    ref = np.array([1.0, want], np.float32)
    worst, reason = compare([np.array([1.0, got], np.float32)], [ref], ["y"], [(1e-2, 1e-3)])
    assert worst == np.inf and "1 of 2 values off" in reason and "at (1,)" in reason, reason
    assert compare([np.array([1.0, got], np.float32)], [ref], ["y"], [(0.0, 1e-6)])[1] is not None


def test_integers_are_compared_exactly_beyond_what_a_float64_holds():
    want = np.array([3 * 2**60, 5], np.int64)
    _, reason = compare([want + np.array([1, 0])], [want], ["big"], [(0.0, 0.0)])
    assert f"(got {3 * 2**60 + 1}, expected {3 * 2**60}; rtol 0, atol 0)" in reason
    top = np.array([2**64 - 1], np.uint64)
    assert compare([top - np.uint64(1)], [top], ["u"], [(0.0, 0.0)])[1] is not None
    assert compare([np.array([2**63 - 1], np.int64)], [np.array([2**63 - 1], np.uint64)], ["u"], [(0.0, 0.0)])[1] is None


def test_an_unwritten_bool_output_is_off_though_numpy_reads_its_poison_as_true():
    got = np.zeros(3, np.bool_)
    got.view(np.uint8)[:] = [0xA5, 1, 0]  # the poison left where the kernel wrote no true
    _, reason = compare([got], [np.array([True, True, False])], ["mask"], [(0.0, 0.0)])
    assert "output 'mask': 1 of 3 values off" in reason and "(got 165, expected 1;" in reason


def test_a_complex_output_is_compared_in_both_parts():
    want = np.array([1 + 2j, 3 - 4j], np.complex64)
    got = want.copy()
    got[1] = 3 - 2j  # the imaginary part halved
    _, reason = compare([got], [want], ["z"], [(1e-5, 1e-6)])
    assert "1 of 2 values off, largest error 2 at (1,) (got (3-2j), expected (3-4j);" in reason



class Unwriting(Runner):
    """A kernel that writes the reference into its output, but for the element at ``skip``."""

    def __init__(self, want: np.ndarray, skip: int | None):
        self.want, self.skip, self.out, self.calls = want, skip, np.empty_like(want), 0

    def reset(self, pattern: int = 0) -> None:
        poison(self.out, pattern)

    def call(self) -> None:
        self.calls += 1
        written = np.ones(self.out.shape, bool)
        if self.skip is not None:
            written[self.skip] = False
        self.out[written] = self.want[written]

    def timed_call(self) -> float:
        self.call()
        return 1.0

    def outputs(self):
        return [self.out]

    def overrun(self):
        return None


@pytest.mark.parametrize("want", [np.array([0.0, np.nan, 1.0]), np.array([7, 165, 3], np.uint8),
                                  np.array([1, -91, 3], np.int8), np.array([1j, 0, 2], np.complex64)],
                         ids=["nan-in-the-reference", "uint8-poison-byte", "int8-poison-byte", "complex-zero"])
def test_an_element_left_unwritten_is_wrong_where_the_reference_equals_the_poison(want):
    """Poisoned with NaN, an unwritten element matched a NaN the reference holds (log of a
    negative), as the 0xA5 byte matched a uint8 165; complex outputs were poisoned with 0xA5,
    -2.9e-16, within any tolerance of a zero."""
    unwritten = verify(Unwriting(want, skip=1), [want], ["y"], [(1e-5, 1e-5)])
    assert unwritten.status == "wrong_result" and "output 'y': 1 of 3 values off" in unwritten.error
    assert verify(Unwriting(want, skip=None), [want], ["y"], [(1e-5, 1e-5)]).status == "ok"


def test_a_second_verifying_call_is_made_only_where_an_unwritten_element_could_pass_the_first():
    plain, nan = Unwriting(np.array([1.0, 2.0, 3.0]), None), Unwriting(np.array([1.0, np.nan, 3.0]), None)
    assert verify(plain, [plain.want], ["y"], [(0.0, 0.0)]).status == "ok" and plain.calls == 1
    assert verify(nan, [nan.want], ["y"], [(0.0, 0.0)]).status == "ok" and nan.calls == 2


class Accumulating(Unwriting):
    """A kernel that adds the reference into its output (``out[i] += ...``, a split-K GEMM's
    partial sums), or writes it one too high; ``zeroed``: its output starts at zero, as an
    inout one restored from the args builder's zeros does, instead of poisoned."""

    def __init__(self, want: np.ndarray, adds: bool, zeroed: bool = False):
        super().__init__(want, None)
        self.adds, self.zeroed = adds, zeroed

    def reset(self, pattern: int = 0) -> None:
        if self.zeroed:
            self.out[:] = 0
        else:
            poison(self.out, pattern)

    def call(self) -> None:
        self.calls += 1
        if self.adds:
            self.out += self.want
        else:
            self.out[:] = self.want + 1


def test_a_kernel_that_reads_its_poisoned_output_is_told_to_declare_it_inout():
    """A Triton user's split-K kernel accumulates into its output (reset_to_zero there) and
    gave the args builder zeros: every config failed with NaN, and the summary blamed the
    reference. What the output held before the call changes what it holds after it: it is read."""
    want = np.array([1.0, 2.0, 3.0])
    read = verify(Accumulating(want, adds=True), [want], ["out"], [(1e-5, 1e-5)])
    assert read.status == "wrong_result" and "got nan" in read.error
    assert "inout=['out']" in read.error and "before the call" in read.error
    wrong = verify(Accumulating(want, adds=False), [want], ["out"], [(1e-5, 1e-5)])
    assert wrong.status == "wrong_result" and "inout" not in wrong.error
    declared = verify(Accumulating(want, adds=True, zeroed=True), [want + 1], ["out"], [(1e-5, 1e-5)])
    assert declared.status == "wrong_result" and "inout" not in declared.error



class FailingOnTheOtherPoison(Accumulating):
    """An accumulating kernel whose call raises once its output starts under the other poison (a
    CUDA launch failing on what it read)."""

    def reset(self, pattern: int = 0) -> None:
        super().reset(pattern)
        self.pattern = pattern

    def call(self) -> None:
        if self.pattern == 1:
            raise RuntimeError("launch failed")
        super().call()


def test_the_probe_of_a_read_output_leaves_the_wrong_result_as_found_and_judges_only_a_wrong_output():
    """The probe's extra calls ran unguarded (a failure there replaced the wrong result with its
    exception), and it named any output whose result moved, not the one found wrong."""
    want = np.array([1.0, 2.0, 3.0])
    failing = verify(FailingOnTheOtherPoison(want, adds=True), [want], ["out"], [(1e-5, 1e-5)])
    assert failing.status == "wrong_result" and "got nan" in failing.error and "inout" not in failing.error
    from tunebench.measure import _reads_output
    runner = Accumulating(want, adds=True)
    runner.reset(0)
    runner.call()
    assert _reads_output(runner, ["out"], 0, "output 'other': 3 of 3 values off") == ""
    assert "output 'out' depends on what it held" in _reads_output(runner, ["out"], 0, "output 'out': 3 of 3 values off")
