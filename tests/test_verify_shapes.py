"""A bucket's verify shapes: a pick is served on every shape of its bucket, and measured only on
its representative ones; a config wrong where a dim is no multiple of its step was served so."""

import importlib
import json

import pytest

import tunebench
from tests.conftest import twice_root
from tests.test_plugin import TUNE
from tunebench.buckets import Bucket, BucketError, Buckets

pytestmark = pytest.mark.usefixtures("quiet_verdicts")

#: ``tail`` 0 leaves the elements past the last multiple of 8 unwritten: right on every
#: representative shape, wrong on 4095, and faster (``tail`` 1 makes half as many passes more).
TAIL_C = """\
typedef TB_DTYPE real;
void twice(const real *x, real *y, int n)
{
    int end = tail ? n : n & ~7;
    for (int r = 0; r < (8 + 4 * tail) * reps; ++r) {
        for (int i = 0; i < end; ++i) y[i] = 2 * x[i] + r * 0;
        __asm__ volatile("" ::: "memory");
    }
}
"""

TAIL_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

twice = Kernel(
    "twice", buckets=Buckets(["N"], [Bucket("small", N=(1, 4096), shapes=[(4096,)]VERIFY),
                                     Bucket("large", N=(4097, None), shapes=[(20000,)])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: 2.0 * x, outputs=["y"],
    cpu=Variant(source="twice.c", entry="twice", heuristic=lambda shape: HEURISTIC,
                space=Space({"reps": REPS, "tail": [0, 1]}, constraints=[CONSTRAINT])),
)
"""


@pytest.fixture
def tail_project(pytester):
    """The twice kernel with a tail param; ``write(verify, constraint, reps, heuristic)`` writes its suite."""
    root = twice_root(pytester, TAIL_C)

    def write(verify: bool, constraint: str = "lambda reps, tail: True", reps=(1, 4), heuristic=None):
        (root / "suites" / "test_twice.py").write_text(
            TAIL_SUITE.replace("VERIFY", ", verify=[(4095,)]" if verify else "").replace("CONSTRAINT", constraint)
            .replace("REPS", repr(list(reps))).replace("HEURISTIC", repr(heuristic or {"reps": 4, "tail": 1}))
            .replace('source="twice.c"', f'source="{root / "twice.c"}"'))
        return root
    return write


def small_round(root) -> dict:
    (path,) = (root / "records").glob("*.json")
    rounds = [c for c in json.loads(path.read_text())["checks"].values()
              if c.get("kind") == "tune" and c["bucket"] == "small"]
    return rounds[-1]


def test_a_finalist_wrong_on_a_verify_shape_is_not_adopted(tail_project, pytester):
    root = tail_project(verify=True)
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    result.stdout.fnmatch_lines(["*verify shapes: * failed on a bucket's verify shape, and are not adopted: "
                                 "twice?small-float32? [[]reps:1 tail:0[]] on (4095,): wrong_result*"])
    check = small_round(root)
    assert check["verify"] == [[4095]]
    assert {json.dumps(u["config"], sort_keys=True) for u in check["unverified"]} >= {'{"reps": 1, "tail": 0}'}
    assert all(u["status"] == "wrong_result" and u["shape"] == [4095] for u in check["unverified"])
    asked = {"records": root / "records", "suites": root / "suites"}
    served = tunebench.lookup("twice", (4095,), **asked)
    assert served.source == "tuned" and served.config == {"reps": 1, "tail": 1}
    again = pytester.runpytest("suites", *TUNE, "-k", "small")  # no round ran: nothing to say of one
    assert "verify shapes:" not in again.stdout.str() and small_round(root) == check


def test_a_config_whose_constraints_do_not_hold_on_a_verify_shape_is_no_candidate(tail_project, pytester):
    """best() serves another config where the pick's constraints do not hold: the best recorded
    that does, which no round verified (a review's: reps:2 tail:0, wrong there, was served on it)."""
    root = tail_project(verify=True, reps=(1, 2, 4),
                        constraint="lambda reps, tail, N: (reps == 2) == (tail == 0) and (reps != 1 or N % 8 == 0)")
    result = pytester.runpytest("suites", *TUNE, "-k", "small", "-v")
    assert "reps:1" not in result.stdout.str()  # deselected: it holds on 4096 alone
    assert [u["config"] for u in small_round(root)["unverified"]] == [{"reps": 2, "tail": 0}]
    served = tunebench.lookup("twice", (4095,), records=root / "records", suites=root / "suites")
    assert served.config == {"reps": 4, "tail": 1}


def test_every_finalist_but_the_heuristic_wrong_on_a_verify_shape_is_the_rounds_reason(tail_project, pytester):
    root = tail_project(verify=True, reps=(1, 2, 4), constraint="lambda reps, tail: tail == 0")
    pytester.runpytest("suites", *TUNE, "-k", "small")
    check = small_round(root)
    assert check["winner"] is None and check["problem"] is None and check["reason"].startswith(
        "every finalist but the heuristic's own config failed on a verify shape: [reps:")
    served = tunebench.lookup("twice", (4095,), records=root / "records", suites=root / "suites")
    assert served.source == "heuristic" and "failed on a verify shape" in served.reason
    pytester.runpytest("suites", *TUNE, "-k", "small")  # a verdict, not a problem: its round is not measured again
    assert small_round(root) == check


def test_the_gate_fails_a_pick_wrong_on_a_verify_shape_added_since_and_a_tune_then_drops_it(tail_project, pytester,
                                                                                               monkeypatch):
    """Tuned before the bucket had a verify shape, the pick drops the tail: the gate runs it there,
    and a tune measures the final round again, as its round verified nothing."""
    monkeypatch.setattr(importlib.import_module("tunebench.lookup"), "REFRESH_S", 0.0)  # as a new process reads them
    only_fast_is_wrong = "lambda reps, tail: reps == 4 or tail == 0"
    root = tail_project(verify=False, constraint=only_fast_is_wrong)
    pytester.runpytest("suites", *TUNE, "-k", "small")
    asked = {"records": root / "records", "suites": root / "suites"}
    assert tunebench.lookup("twice", (4095,), **asked).config == {"reps": 1, "tail": 0}
    tail_project(verify=True, constraint=only_fast_is_wrong)
    gated = pytester.runpytest("suites", "-p", "no:cacheprovider", "-k", "small")
    gated.assert_outcomes(failed=1)
    gated.stdout.fnmatch_lines(["FAIL  twice::small-float32?gate?  the best [[]reps:1 tail:0[]] on verify shape (4095,) "
                                "ended wrong_result: output 'y': 7 of 4095 values off*; best() still serves it until "
                                "the task is tuned again: `pytest suites/test_twice.py --tune` verifies its finalists "
                                "there and adopts none that fails, and commit the records"])
    pytester.runpytest("suites", *TUNE, "-k", "small")
    assert small_round(root)["unverified"][0]["config"] == {"reps": 1, "tail": 0}
    assert tunebench.lookup("twice", (4095,), **asked).config == {"reps": 4, "tail": 1}
    pytester.runpytest("suites", "-p", "no:cacheprovider", "-k", "small").assert_outcomes(passed=1)


def test_verify_shapes_lie_in_their_bucket_apart_from_its_representative_ones():
    with pytest.raises(BucketError, match=r"^bucket 'small': verify shape \(5000,\) lies outside it$"):
        Buckets(["N"], [Bucket("small", N=(1, 4096), shapes=[(4096,)], verify=[(5000,)])])
    with pytest.raises(BucketError, match=r"^bucket 'small': verify shape \(4096,\) is a representative shape"):
        Bucket("small", N=(1, 4096), shapes=[(4096,)], verify=[4096])
    with pytest.raises(BucketError, match=r"^bucket 'small': verify shape 'a' is no tuple of ints$"):
        Bucket("small", N=(1, 4096), shapes=[(4096,)], verify=["a"])


def test_a_bucket_without_verify_shapes_is_described_as_before():
    """Records keep a bucket's description: one without verify shapes reads as records made
    before them did, and one with them reads back whole."""
    plain = Bucket("small", N=(1, 4096), shapes=[(4096,)])
    assert "verify" not in plain.describe()
    checked = Bucket("small", N=(1, 4096), shapes=[(4096,)], verify=[4095, (17,)])
    assert Bucket.from_description(checked.describe()).verify == [(4095,), (17,)]


def test_a_config_found_wrong_on_a_verify_shape_is_served_on_no_shape_of_the_bucket(tail_project, pytester):
    """On 4094 the pick's constraints do not hold, and best() serves the best recorded config that
    fits there: it took reps:2 tail:0, which the round had found wrong on 4095 (a user's test).
    Which right one it serves there (reps:2 tail:1, or the heuristic where its trial read no
    faster) the calls' noise decides: a few microseconds each."""
    root = tail_project(verify=True, reps=(1, 2, 4), constraint="lambda reps, tail, N: reps != 1 or N % 3 != 2")
    pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-repeats", "10")  # every config ranked: none stopped early
    assert {"reps": 2, "tail": 0} in [u["config"] for u in small_round(root)["unverified"]]
    asked = {"records": root / "records", "suites": root / "suites"}
    assert tunebench.lookup("twice", (4096,), **asked).config == {"reps": 1, "tail": 1}
    assert tunebench.lookup("twice", (4094,), **asked).config["tail"] == 1


def test_a_heuristic_wrong_on_a_verify_shape_is_said_where_it_is_served(tail_project, pytester):
    """No finalist led it, and the heuristic, the suite's own rule, stays: the round had run it on
    the verify shape, seen it fail, and said nothing."""
    root = tail_project(verify=True, reps=(4,), heuristic={"reps": 4, "tail": 0})
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    result.stdout.fnmatch_lines(["*verify shapes: the heuristic's config failed on a bucket's verify shape, and is "
                                 "served where no config is adopted: twice?small-float32? [[]reps:4 tail:0[]] on "
                                 "(4095,): wrong_result*"])
    served = tunebench.lookup("twice", (4095,), records=root / "records", suites=root / "suites")
    assert served.source == "heuristic" and "the heuristic's config [reps:4 tail:0] ended wrong_result on verify " \
        "shape (4095,) in the final round" in served.note


def test_a_records_file_replayed_verifies_nothing(tail_project, pytester):
    """A replay answers the shapes it recorded alone: every finalist "failed" on a verify shape as
    not in the recorded space, and the correct pick was dropped (a user's test)."""
    root = tail_project(verify=True)
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (recorded,) = (root / "records").glob("*.json")
    again = pytester.runpytest("suites", "--tune", "--tune-target", f"replay:{recorded}", "--tune-records",
                               str(root / "replayed"), "-p", "no:cacheprovider", "-k", "small")
    assert "verify shapes:" not in again.stdout.str() and "pruned_resources" not in again.stdout.str()
    (replayed,) = (root / "replayed").glob("replay-*.json")
    rounds = [c for c in json.loads(replayed.read_text())["checks"].values() if c.get("kind") == "tune"]
    assert rounds and all("unverified" not in c and c["winner"] is not None for c in rounds)
