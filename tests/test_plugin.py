"""End to end: pytest --tune on a small suite with a real gcc-compiled kernel and real records."""

import json
import os
import re
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from tinydb import TinyDB

import tunebench
from tests.conftest import AXPB_C, AXPB_SUITE, said
from tunebench.backends import cuda_status
from tunebench.final_round import MIN_GAIN
from tunebench.lookup import lookup, this_device

TUNE = ("--tune", "--tune-target", "cpu", "-p", "no:cacheprovider",
        "-W", "ignore::pytest.PytestAssertRewriteWarning")

#: Every measurement of these tests' runs is judged clean (quiet_verdicts): beside other load a tune
#: stops, or its final round confirms nothing, as documented, and their points (what a run reuses,
#: records, skips and says) go unchecked. A busy machine's tunes have tests of their own
#: (test_interference.py).
pytestmark = pytest.mark.usefixtures("quiet_verdicts")


def records(path):
    (file,) = (path / "records").glob("*.json")
    return TinyDB(file)


def recorded_trials(path) -> list[dict]:
    """Every recorded trial: none where no records file was written."""
    found = list((path / "records").glob("*.json"))
    return records(path).table("trials").all() if found else []


def test_a_tune_measures_every_valid_candidate_and_records_every_trial(project, pytester):
    root = project()
    result = pytester.runpytest("suites", *TUNE, "-v")
    # 2 buckets x (5 valid candidates + the baseline); 1 invalid config per bucket deselected
    result.assert_outcomes(passed=12, deselected=2)
    result.stdout.fnmatch_lines([
        "*suites/test_axpb.py::axpb::small-float32?baseline? PASSED*",
        "*suites/test_axpb.py::axpb::large-float32?vec:4-unroll:1-mode:0? PASSED*",
        "*tunebench: cpu*",
        "*kernel*bucket*dtype*configs*new*desel*failed*best ms*rate*baseline ms*speedup*",
        "*axpb*small*float32*5*5*1*0*GB/s*x*",
        "*axpb*large*float32*5*10*1*0*GB/s*x*",
        "*builds: 5 compiled (*), 0 from the compile cache*",  # both buckets and the final round load them again
        "best ms, baseline ms: the weighted geometric mean of the median times on the bucket's shapes, *",
        "configs: the candidates this run weighed *",  # a line per column: all of them in one was 560 characters
        "failed, early: how many candidates failed, *",
        "new: trials measured now, one per config and shape; desel: candidates deselected *",
    ])
    db = records(root)
    trials = db.table("trials").all()
    assert len(trials) == 5 * 1 + 5 * 2  # the baseline config is a candidate too: its trials are shared
    doc = trials[0]
    for field in ("kernel", "source_hash", "bucket", "shape", "dtype", "config", "status", "stats",
                  "samples", "compile_time_s", "fingerprint", "device", "git_commit", "git_dirty",
                  "tunebench_version", "strategy", "timestamp"):
        assert field in doc, field
    assert set(doc["stats"]) == {"min", "median", "mean", "stdev", "n", "ci95"}
    assert doc["stats"]["n"] == len(doc["samples"]) >= 5
    assert doc["fingerprint"]["threads"] >= 1 and doc["tunebench_version"] == tunebench.__version__
    assert {t["bucket"] for t in db.table("tasks").all()} == {"small", "large"}


def test_a_second_run_measures_nothing_new_and_compiles_nothing(project, pytester):
    root = project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    before = (root / "records").joinpath(next((root / "records").glob("*.json")).name).read_text()
    again = pytester.runpytest("suites", *TUNE)
    again.assert_outcomes(passed=12, deselected=2)
    again.stdout.fnmatch_lines(["*axpb*small*float32*5*0*1*0*", "*builds: 0 compiled (*), 0 from the compile cache*"])
    assert next((root / "records").glob("*.json")).read_text() == before


def test_a_finished_tune_resumed_with_an_empty_compile_cache_compiles_nothing(project, pytester, tmp_path,
                                                                               monkeypatch):
    """A machine lent afresh (a GPU session's) has an empty compile cache: every task the records
    hold finished compiled each candidate its search asked again, ahead, though every trial was
    reused and nothing was measured (306 builds and 50 s for 8 finished tasks of the shipped suites)."""
    project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    empty = tmp_path / "fresh-cache"
    monkeypatch.setenv("TUNEBENCH_CACHE", str(empty))
    again = pytester.runpytest("suites", *TUNE)
    again.assert_outcomes(passed=12, deselected=2)
    again.stdout.fnmatch_lines(["*axpb*small*float32*5*0*1*0*", "*axpb*large*float32*5*0*1*0*",
                                "*builds: 0 compiled (0 ahead*), 0 from the compile cache*"])
    assert not empty.exists() or not any(empty.iterdir())


def _rounds_dropped_and_cache_emptied(pytester, empty: Path, monkeypatch) -> None:
    """The records as a tune stopped before its final rounds leaves them, on a machine lent afresh."""
    records = next((pytester.path / "records").glob("*.json"))
    doc = json.loads(records.read_text())
    doc["checks"] = {k: v for k, v in doc["checks"].items() if v.get("kind") != "tune"}
    records.write_text(json.dumps(doc))
    monkeypatch.setenv("TUNEBENCH_CACHE", str(empty))


def _builds(result) -> tuple[int, int]:
    """The run's builds: compiled, and compiled ahead, as its summary says."""
    line = next(x for x in result.outlines if "builds: " in x)
    return tuple(map(int, re.search(r"builds: (\d+) compiled \((\d+) ahead", line).groups()))


def test_a_final_round_measured_again_builds_its_finalists_ahead(project, pytester, tmp_path, monkeypatch):
    """A tune stopped before its final rounds (a GPU session's time limit) resumed on a machine
    lent afresh: the trials are reused, so none of the finalists was built ahead, and each of the
    round's workers compiled them in turn (on a GPU, an nvcc build each). The configs the rounds of
    the two buckets measure (their finalists and heuristics, which the trials' times decide: 4 or
    5 of the space's 5) are each built once, ahead, and nothing else is."""
    project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    _rounds_dropped_and_cache_emptied(pytester, tmp_path / "fresh-cache", monkeypatch)
    again = pytester.runpytest("suites", *TUNE)
    again.assert_outcomes(passed=12, deselected=2)
    rounds = [c for c in json.loads(next((pytester.path / "records").glob("*.json")).read_text())["checks"].values()
              if c.get("kind") == "tune"]
    measured = {json.dumps(c, sort_keys=True) for r in rounds for e in r["shapes"]
                for c in [*e["finalists"], e["baseline"]]}
    assert len(rounds) == 2 and len(measured) >= 4 and _builds(again) == (len(measured), len(measured))


ONLY_THE_HEURISTIC_RIGHT = AXPB_SUITE.replace(
    'space=Space({"vec": [1, 2, 4], "unroll": (1, 2), "mode": MODES},\n'
    '                    constraints=[lambda vec, unroll: vec * unroll <= 4]),',
    'space=Space({"vec": [1, 2, 4], "unroll": (1,), "mode": [0, 1]},\n'
    '                    constraints=[lambda vec, mode: mode == 1 or vec == 2]),')
ONE_RIGHT_BESIDE_A_WRONG_HEURISTIC = AXPB_SUITE.replace(
    'heuristic=lambda shape: {"vec": 2, "unroll": 1, "mode": 0}',
    'heuristic=lambda shape: {"vec": 2, "unroll": 1, "mode": 1}').replace(
    'space=Space({"vec": [1, 2, 4], "unroll": (1, 2), "mode": MODES},\n'
    '                    constraints=[lambda vec, unroll: vec * unroll <= 4]),',
    'space=Space({"vec": [1, 2], "unroll": (1,), "mode": [0, 1]},\n'
    '                    constraints=[lambda vec, mode: mode == 1 or vec == 1]),')


@pytest.mark.parametrize("suite", [ONLY_THE_HEURISTIC_RIGHT, ONE_RIGHT_BESIDE_A_WRONG_HEURISTIC],
                         ids=["only-the-heuristic-right", "one-right-beside-a-wrong-heuristic"])
def test_a_final_round_that_measures_nothing_builds_nothing_ahead(project, pytester, tmp_path, monkeypatch,
                                                                   suite):
    """A round left with one config to measure (every other candidate wrong, or the heuristic
    wrong and one finalist right) measures nothing: resumed with an empty compile cache, it
    builds nothing either (an nvcc build never loaded, on a GPU)."""
    assert suite != AXPB_SUITE
    project(suite=suite)
    pytester.runpytest("suites", *TUNE)
    _rounds_dropped_and_cache_emptied(pytester, tmp_path / "fresh-cache", monkeypatch)
    assert _builds(pytester.runpytest("suites", *TUNE)) == (0, 0)


def test_a_fresh_tune_finds_each_build_of_the_last_run_in_the_compile_cache_once(project, pytester):
    project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    again = pytester.runpytest("suites", *TUNE, "--tune-fresh")
    again.stdout.fnmatch_lines(["*axpb*small*float32*5*5*1*0*", "*builds: 0 compiled (*), 5 from the compile cache*"])


def test_faulty_candidates_are_recorded_and_the_run_goes_on(project, pytester):
    root = project(modes=(0, 1, 2))
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    # small: 15 valid candidates (5 per mode) + the baseline; modes 1 and 2 fail
    result.assert_outcomes(passed=6, failed=10, deselected=3 + 3 + 16)
    result.stdout.fnmatch_lines([
        "*wrong_result on (1000,): output 'y': 1 of 1000 values off, largest error 1*",
        "*compile_error on (1000,): *mode 2 does not compile*",
    ])
    statuses = {}
    for t in records(root).table("trials").all():
        statuses.setdefault(t["config"]["mode"], set()).add(t["status"])
    assert statuses[0] <= {"ok", "early_stopped"} and "ok" in statuses[0]
    assert statuses[1] == {"wrong_result"} and statuses[2] == {"compile_error"}
    wrong = next(t for t in records(root).table("trials").all() if t["status"] == "wrong_result")
    assert wrong["max_error"] == pytest.approx(1.0) and wrong["samples"] == []


def planted(project, pytester, statuses: dict[tuple, tuple]):
    """The large bucket tuned, then (vec, unroll)'s trials on (20000,) and (50000,) given these
    (status, error) pairs, every other trial run to the end: the run after resumes from them."""
    root = project()
    pytester.runpytest("suites", *TUNE, "-k", "large")
    (path,) = (root / "records").glob("*.json")
    data = json.loads(path.read_text())
    for doc in data["trials"].values():
        on = statuses.get((doc["config"]["vec"], doc["config"]["unroll"]))
        doc["status"], doc["error"] = on[[[20000], [50000]].index(doc["shape"])] if on else ("ok", None)
    path.write_text(json.dumps(data))
    chosen = " or ".join(f"vec:{v}-unroll:{u}-mode:0" for v, u in statuses)
    return pytester.runpytest("suites", *TUNE, "-rs", "-k", f"large and ({chosen})")  # resumed from the records


def test_a_candidate_stopped_early_on_one_shape_and_wrong_on_another_fails(project, pytester):
    """A stencil's configs stopped early on (512, 512), slower, and wrong on (256, 1024) passed, and
    the summary counted them early, none failed: the outcome's status was its first shape's. Either
    shape may be the one it is wrong on."""
    wrong = "output 'y': 3 of {} values off"
    again = planted(project, pytester, {(1, 1): [("early_stopped", None), ("wrong_result", wrong.format(50000))],
                                        (1, 2): [("wrong_result", wrong.format(20000)), ("early_stopped", None)]})
    again.assert_outcomes(failed=2, deselected=12)
    again.stdout.fnmatch_lines_random([f"wrong_result on (50000,): {wrong.format(50000)}",  # the shape named
                                       f"wrong_result on (20000,): {wrong.format(20000)}"])
    (row,) = [line.split() for line in again.stdout.lines if line.startswith("axpb ")]
    assert row[6:8] == ["2", "0"], row  # failed, early


def test_a_candidate_out_of_resources_on_one_shape_is_pruned_and_a_failure_on_another_is_said(project, pytester):
    """Out of resources on one shape and wrong on another, a config's item said the pruned reason
    for the wrong result; stopped early on one shape and out of resources on the other, it passed
    as early where the shapes came in that order, though it cannot run on one of them."""
    wrong = "output 'y': 3 of 50000 values off"
    again = planted(project, pytester, {(1, 1): [("pruned_resources", "needs 200 KiB of shared memory"),
                                                 ("wrong_result", wrong)],
                                        (1, 2): [("early_stopped", None), ("pruned_resources", "too many registers")]})
    again.assert_outcomes(failed=1, skipped=1, deselected=12)
    again.stdout.fnmatch_lines_random([f"wrong_result on (50000,): {wrong}",
                                       "SKIPPED *: pruned_resources on (50000,): too many registers"])
    assert not any("200 KiB" in line for line in again.stdout.lines)
    (row,) = [line.split() for line in again.stdout.lines if line.startswith("axpb ")]
    assert row[6:8] == ["1", "0"], row  # failed, early
    again.stdout.fnmatch_lines(["pruned: *axpb?large-float32? 1"])


def test_an_outcome_says_the_status_and_error_of_its_worst_shape_in_either_order():
    """Statuses rank failure, out of resources, stopped early, ok; the error is that status's."""
    from tunebench.session import Outcome
    pruned, wrong = {"status": "pruned_resources", "error": "too many registers"}, {"status": "wrong_result",
                                                                                    "error": "3 values off"}
    early, ok = {"status": "early_stopped", "error": None}, {"status": "ok", "error": None}
    for first, second, status, failure, error in [
            (pruned, wrong, "wrong_result", "wrong_result on (2,): 3 values off", "3 values off"),
            (wrong, pruned, "wrong_result", "wrong_result on (1,): 3 values off", "3 values off"),
            (early, pruned, "pruned_resources", "pruned_resources on (2,): too many registers", "too many registers"),
            (pruned, early, "pruned_resources", "pruned_resources on (1,): too many registers", "too many registers"),
            (ok, early, "early_stopped", None, None), (ok, ok, "ok", None, None)]:
        outcome = Outcome({(1,): {}, (2,): {}}, {(1,): first, (2,): second})
        assert (outcome.status, outcome.failure, outcome.error) == (status, failure, error), (first, second)


@pytest.mark.parametrize("reference, message", [
    ("lambda x, n, a, b: (a * x.astype(np.float64) + b)[:-1]",
     "the reference returned shape (999,) for output 'y', which the args builder declares (1000,)"),
    ("lambda x, n, a, b: (a * x + b).astype(np.float16)",
     "the reference returned float16 for output 'y' of float32"),
    ("lambda x, a, c: a * x + c",  # names one no args builder gives: pytest would blame every candidate
     "the reference takes 'c', which is no argument the args builder gives (x, y, n, a, b)"),
    ("lambda x, n, a, b: a * x.reshape(n // 3, -1) + b",  # fails inside: the line is the suite's, not numpy's
     "the reference raised ValueError: cannot reshape array of size 1000 into shape (333,newaxis) "
     "(shape (1000,), float32), in <lambda> at suites/test_axpb.py:15"),
])
def test_a_reference_that_does_not_match_its_outputs_is_a_declaration_error_never_recorded(
        project, pytester, reference, message):
    root = project(suite=AXPB_SUITE.replace("reference=lambda x, n, a, b: a * x.astype(np.float64) + b",
                                            f"reference={reference}"))
    result = pytester.runpytest("suites", *TUNE, "-k", "small", "-rs")
    result.assert_outcomes(failed=1, skipped=5, deselected=8)  # the task's first item says why, once
    result.stdout.fnmatch_lines([f"*kernel 'axpb': {message}*"])
    assert said(result, message) == 1
    result.stdout.fnmatch_lines(["*not run: axpb?small-float32? failed, see its first item's error*"])
    assert recorded_trials(root) == []  # nothing to reuse once the reference is fixed
    project()
    pytester.runpytest("suites", *TUNE, "-k", "small").assert_outcomes(passed=6, deselected=8)



def test_a_declaration_error_leaves_the_task_described_as_its_last_tune_left_it(project, pytester):
    """Put right again, the declaration is not said to have changed since the last tune."""
    root = project()
    pytester.runpytest("suites", *TUNE, "-k", "small").assert_outcomes(passed=6, deselected=8)
    described = records(root).table("tasks").all()
    project(suite=AXPB_SUITE.replace("reference=lambda x, n, a, b: a * x.astype(np.float64) + b",
                                     "reference=lambda x, n, a, b: (a * x.astype(np.float64) + b)[:-1]"))
    pytester.runpytest("suites", *TUNE, "-k", "small").assert_outcomes(failed=1, skipped=5, deselected=8)
    assert records(root).table("tasks").all() == described
    project()
    again = pytester.runpytest("suites", *TUNE, "-k", "small")
    again.assert_outcomes(passed=6, deselected=8)
    assert "changed since the last tune" not in again.stdout.str()

def test_an_array_of_another_dtype_than_its_parameter_is_one_declaration_error_never_recorded(project, pytester):
    """Without the check, every config read float64 bytes as floats and failed as a wrong result."""
    root = project(suite=AXPB_SUITE.replace("rng.random(n, dtype=np.float32).astype(dtype)", "rng.random(n)"))
    result = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-trials", "2")
    result.assert_outcomes(failed=1, skipped=5, deselected=8)
    result.stdout.fnmatch_lines(["kernel 'axpb': argument 'x' (float64 array) where the kernel's 1st "
                                 "parameter (float *x) points to 4-byte float: give an array of np.float32"])
    assert not recorded_trials(root)


def test_the_trial_budget_skips_unsampled_candidates_with_the_reason(project, pytester):
    project()
    result = pytester.runpytest("suites", *TUNE, "--tune-trials", "2", "-k", "small", "-rs")
    result.assert_outcomes(passed=3, skipped=3, deselected=1 + 7)
    # pytest's word, folded, at the suite (not the line of tunebench that skipped them)
    line = AXPB_SUITE.splitlines().index("axpb = Kernel(") + 1  # where the kernel is declared
    result.stdout.fnmatch_lines([f"SKIPPED ?3? suites/test_axpb.py:{line}: not sampled: budget of 2 trials spent*"])


def test_unsampled_candidates_print_nothing_and_each_task_one_progress_line(project, pytester):
    project()
    result = pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-p", "no:randomly")
    result.assert_outcomes(passed=4, skipped=8, deselected=2)
    letters = "".join(m.group(1) for line in result.stdout.lines
                      if (m := re.match(r"^(?:suites/test_axpb.py )?([.sFE]+)\s*(?:\[\s*\d+%\])?$", line)))
    assert letters == "...."  # the sampled ones only: no "s" for the eight the budget left
    progress = [line for line in result.stdout.lines if line.startswith("tunebench axpb[")]
    assert [line.split(":")[0] for line in progress if line.endswith("done")] == [
        "tunebench axpb[small-float32]", "tunebench axpb[large-float32]"]
    assert all(" 1/1 trials, best " in line for line in progress if line.endswith("done"))
    listed = pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-vv")
    assert listed.stdout.str().count(" UNSAMPLED") == 8


def test_a_run_that_measured_nothing_prints_one_line_per_task_saying_its_trials_came_from_the_records(
        project, pytester):
    """Run again, a finished tune printed the first reused trial's line, "1/6 trials, best ...
    unconfirmed, about 22 s left" (a time from the trials' recorded cost), in a run of 0.2 s."""
    project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    again = pytester.runpytest("suites", *TUNE)
    again.assert_outcomes(passed=12, deselected=2)
    progress = [line for line in again.stdout.lines if line.startswith("tunebench axpb[")]
    assert [line.split(":")[0] for line in progress] == ["tunebench axpb[small-float32]",
                                                         "tunebench axpb[large-float32]"], progress
    assert all(re.search(r": 5/5 trials, all from the records, .* ms\b.*, done$", line) and " s left" not in line
               for line in progress), progress


def test_a_resumed_run_that_measured_nothing_says_so_when_a_final_round_begins(project, pytester):
    """A tune stopped before its final rounds and resumed (on a GPU machine lent afresh: rounds of
    88-116 s a task) printed no line until each task's end: a log cut short by a timeout in a round
    named no task in progress."""
    root = project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    db = records(root)
    db.drop_table("checks")  # every trial recorded, no final round yet
    db.close()
    again = pytester.runpytest("suites", *TUNE)
    again.assert_outcomes(passed=12, deselected=2)
    progress = [line for line in again.stdout.lines if line.startswith("tunebench axpb[")]
    assert [re.sub(r", best .* ms .*,", ", best ...,", line) for line in progress] == [
        f"tunebench axpb[{bucket}-float32]: 5/5 trials, all from the records, best ..., {when}"
        for bucket in ("small", "large") for when in ("the final round", "done")], progress


def test_a_run_that_measured_nothing_says_so_when_it_measures_the_records_pick_again_for_its_round(
        twice_project, pytester):
    """The pick of the latest final round, which this run's search did not ask and whose trials
    cannot stand for it any more, is measured again before the round: in a run that had measured
    nothing, that and the round went without a line too."""
    pytester.runpytest("suites", *TUNE, "-k", "small and (baseline or reps:1)").assert_outcomes(passed=3,
                                                                                                deselected=7)
    (path,) = (twice_project / "records").glob("*.json")
    data = json.loads(path.read_text())
    (check,) = [c for c in data["checks"].values() if c["kind"] == "tune"]
    pick = check["shapes"][0]["best"]
    data["trials"] = {i: t for i, t in data["trials"].items() if t["config"] != pick}  # its trials gone
    path.write_text(json.dumps(data))
    again = pytester.runpytest("suites", *TUNE, "-k", f"small and (baseline or reps:1-pad:{1 - pick['pad']})")
    again.assert_outcomes(passed=2, deselected=8)
    progress = [line for line in again.stdout.lines if line.startswith("tunebench twice[")]
    assert [re.sub(r", best .* ms .*,", ", best ...,", line) for line in progress] == [
        "tunebench twice[small-float32]: 1/1 trials, all from the records, best ..., the final round",
        "tunebench twice[small-float32]: 1/1 trials, best ..., done"], progress


def test_a_tune_without_pytests_capture_plugin_shows_its_progress(project, pytester):
    """-p no:capture leaves no capture manager: the first progress line raised AttributeError,
    which failed the task."""
    project()
    result = pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small", "-p", "no:capture")
    result.assert_outcomes(passed=2, skipped=4, deselected=1 + 7)
    result.stdout.fnmatch_lines(["tunebench axpb[[]small-float32[]]: 1/1 trials, best *done"])


def test_the_same_seed_samples_the_same_candidates(project, pytester):
    root = project()

    def sampled(seed):
        shutil.rmtree(root / "records", ignore_errors=True)
        pytester.runpytest("suites", *TUNE, "--tune-trials", "3", "--tune-seed", str(seed), "-k", "small")
        return sorted(json.dumps(t["config"]) for t in records(root).table("trials").all())

    assert sampled(1) == sampled(1)
    assert len(sampled(1)) in (3, 4)  # three candidates, and the baseline unless it was among them


@pytest.mark.skipif(cuda_status()[0], reason="a usable GPU is present: auto picks cuda here")
def test_auto_tunes_on_the_cpu_with_one_skip_line_for_cuda(project, pytester):
    project(cuda=True)
    result = pytester.runpytest("suites", "--tune", "-rs", "-p", "no:cacheprovider", "-k", "small or cuda")
    result.assert_outcomes(passed=6, skipped=1, deselected=8)
    result.stdout.fnmatch_lines(["SKIPPED ?1? *cuda target not used: *"])
    assert sum("SKIPPED" in line for line in result.stdout.lines) == 1


@pytest.mark.skipif(cuda_status()[0], reason="a usable GPU is present here")
def test_asking_to_tune_cuda_without_a_gpu_fails_with_the_reason(project, pytester):
    """Nothing could be tuned: a GPU machine whose PyCUDA is broken must not pass the tune."""
    project(cuda=True)
    result = pytester.runpytest("suites", "--tune", "--tune-target", "cuda", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not tuned: cuda target unavailable: *"])
    assert not (pytester.path / "records").exists()
    gate = pytester.runpytest("suites", "--tune-target", "cuda", "-rs", "-p", "no:cacheprovider")
    gate.assert_outcomes(skipped=1)  # the gate skips it, unless --gate-strict
    gate.stdout.fnmatch_lines(["SKIPPED ?1? *cuda target unavailable: *"])


def test_a_task_tuned_here_whose_every_config_failed_is_not_called_unrecorded_by_the_gate(project, pytester):
    project(modes=(1,), suite=AXPB_SUITE.replace('"mode": 0}', '"mode": 1}'))  # every config a wrong result
    pytester.runpytest("suites", *TUNE, "-k", "small")
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs", "-k", "small")
    result.assert_outcomes(skipped=1, deselected=1)
    result.stdout.fnmatch_lines(["*nothing to gate for axpb small float32 on this device, cpu-*: it was tuned here, "
                                 "but no config completed every shape (the tune's failures say why)*"])


def test_without_tune_only_gate_items_run_and_they_skip_without_records(project, pytester):
    project()
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs")
    result.assert_outcomes(skipped=2)  # one gate item per bucket, no tuning item
    result.stdout.fnmatch_lines(["*nothing recorded for axpb small float32 on this device, cpu-*: it was never "
                                 "tuned here; run `pytest suites/test_axpb.py --tune` here to record it*"])
    assert "devices" not in result.stdout.str()  # no other device's records to speak of
    result.stdout.fnmatch_lines(["*tunebench gate: cpu-*, no records file for this device in *records yet*"])
    assert not (pytester.path / "records").exists()


def test_the_tune_command_a_gate_suggests_keeps_the_rootdir_and_ini_file_it_ran_with(project, pytester):
    """A gate run with ``-c ci/pytest.ini`` or ``--rootdir`` suggested a plain ``pytest suite --tune``:
    it read the project's own ini file (another budget, other gate settings) or rootdir."""
    root = project()
    (root / "ci").mkdir()
    (root / "ci" / "pytest.ini").write_text("[pytest]\ntune_trials = 2\n")
    (root / "elsewhere").mkdir()
    (root / "perf").mkdir()
    for options, kept in ((("-c", "ci/pytest.ini"), "-c ci/pytest.ini"),
                          (("--rootdir", "elsewhere"), "--rootdir elsewhere"),
                          (("--rootdir", "elsewhere", "--tune-records", "perf"), "--rootdir elsewhere --tune-records perf")):
        result = pytester.runpytest("suites", *options, "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs")
        result.assert_outcomes(skipped=2)
        result.stdout.fnmatch_lines([f"*nothing recorded for axpb small float32 on this device, cpu-*: it was never "
                                     f"tuned here; run `pytest suites/test_axpb.py --tune {kept}` here to record it*"])
    # the run over, a lookup's command is a plain one again
    assert tunebench.kernel.REGISTRY["axpb"].tune_command() == "pytest suites/test_axpb.py --tune"


@pytest.mark.parametrize("first", [False, True])
def test_a_tune_and_a_gate_run_from_suites_without_an_ini_file_use_the_projects_records(project, pytester,
                                                                                      monkeypatch, first):
    """With no ini file, pytest's rootdir is where it runs: run from suites/, the tune wrote, and the
    gate read, suites/records, where best() and the report read the project's records/. The root is
    the folder with records/, else, for a first tune, the one holding suites/ (not the git
    checkout's top, which a monorepo's projects share)."""
    from tunebench.lookup import project as project_of

    root = project()
    (root / "pyproject.toml").unlink()
    if not first:
        (root / "records").mkdir()
    monkeypatch.chdir(root / "suites")
    pytester.runpytest(*TUNE, "-k", "small").assert_outcomes(passed=6, deselected=8)
    assert not (root / "suites" / "records").exists()
    (path,) = (root / "records").glob("*.json")
    result = pytester.runpytest("-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small", "-rA")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines([f"*tunebench gate: *, records in {path}*"])
    assert project_of(suites=root / "suites")[0] == root / "records"  # where best() and the report read
    (root / "P").mkdir()
    for folder in ("suites", "kernels", "records"):  # the project moved into P/, run from beside it
        shutil.move(root / folder, root / "P" / folder)
    monkeypatch.chdir(root)
    result = pytester.runpytest("P/suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small", "-rA")
    result.stdout.fnmatch_lines([f"*tunebench gate: *, records in {root / 'P' / 'records' / path.name}*"])
    assert not (root / "records").exists()


def test_a_run_given_two_projects_suites_without_an_ini_file_measures_nothing_naming_both(project, pytester):
    """``pytest A/suites B/suites --tune`` from their parent, neither with an ini file, wrote one
    records/ in the parent, which best(), the gate and the report of neither project read. A run
    keeps one records folder: given the paths of several projects, or the top of both, each suite
    is a collection error naming its project, before anything is measured; each project's own run
    records where best() reads, and gates a kernel another project's module declares."""
    from tunebench.lookup import project as project_of

    root = project()
    (root / "pyproject.toml").unlink()
    for name in ("A", "B"):
        (root / name).mkdir()
        shutil.copytree(root / "kernels", root / name / "kernels")
        (root / name / "suites").mkdir()  # a module name of its own: pytest imports both in one run
        (root / name / "suites" / f"test_axpb_{name}.py").write_text(
            (root / "suites" / "test_axpb.py").read_text().replace('(\n    "axpb",', f'(\n    "axpb_{name}",'))
    for folder in ("suites", "kernels"):
        shutil.rmtree(root / folder)
    for options, tune in ((TUNE, " --tune"), (("-p", "no:cacheprovider", "--tune-target", "cpu"), "")):  # and the gate
        result = pytester.runpytest("A/suites", "B/suites", *options, "-k", "small")
        result.assert_outcomes(errors=2)
        for name in ("A", "B"):
            result.stdout.fnmatch_lines([f"suite {name}/suites/test_axpb_{name}.py::axpb_{name}: kernel 'axpb_{name}' "
                                         f"is of the project in {name}, whose records/ best() and the report read, "
                                         f"while a run keeps one records folder and this one's is {root / 'records'}, "
                                         f"given the paths of 2 projects (A, B): run each project's suites on their "
                                         f"own (`pytest {name}/suites/test_axpb_{name}.py{tune}`), or name the folder "
                                         f"with --tune-records"])
        assert recorded_trials(root) == [] and not (root / "A" / "records").exists()
    result = pytester.runpytest(".", *TUNE, "-k", "small")  # at the top of the two
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*kernel 'axpb_A' is of the project in A, whose records/ best() and the report read, "
                                 f"while a run keeps one records folder and this one's is {root / 'records'}: *"])
    assert recorded_trials(root) == []
    pytester.runpytest("A/suites", *TUNE, "-k", "small").assert_outcomes(passed=6, deselected=8)
    assert not (root / "records").exists() and project_of(suites=root / "A" / "suites")[0] == root / "A" / "records"
    assert len(recorded_trials(root / "A")) == 5
    # one project's suites gating a kernel another project's module declares: as before, no error
    (root / "A" / "suites" / "test_axpb_A.py").write_text(
        f"import sys\nsys.path.insert(0, {str(root / 'B' / 'suites')!r})\nfrom test_axpb_B import axpb  # noqa: F401\n")
    result = pytester.runpytest("A/suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small")
    assert result.ret == 0 and "error" not in result.stdout.str().lower()


def test_a_suite_of_no_project_run_from_inside_another_is_not_refused_as_of_that_project(project, pytester,
                                                                                          tmp_path_factory, monkeypatch):
    """A suite in a folder of no project (no records/, suites/ or ini file above it), run from
    inside another project, was refused as of that project (best() looks from the working
    directory last): its first tune makes the records/ best() then reads (in pytest's rootdir, the
    common folder of the two, here a folder of this test's own)."""
    root = project()
    base = tmp_path_factory.mktemp("apart")
    (base / "P" / "suites").mkdir(parents=True)  # the project the run is started in
    shutil.copytree(root / "kernels", base / "x" / "kernels")
    shutil.copy(root / "suites" / "test_axpb.py", base / "x" / "test_axpb_loose.py")
    monkeypatch.chdir(base / "P")
    pytester.runpytest(str(base / "x" / "test_axpb_loose.py"), *TUNE, "-k", "small").assert_outcomes(
        passed=6, deselected=8)
    assert recorded_trials(base / "P") == [] and len(recorded_trials(base)) == 5
    assert tunebench.lookup("axpb", (1000,), records=base / "records").config == tunebench.lookup(
        "axpb", (1000,), suites=base / "x").config


@pytest.fixture
def linked_in(project) -> Path:
    """Projects A and B side by side in the folder returned, B's suites/test_link.py a symlink to
    A's suite file."""
    root = project()
    (root / "pyproject.toml").unlink()
    for name in ("A", "B"):
        shutil.copytree(root / "kernels", root / name / "kernels")
        (root / name / "suites").mkdir()
    shutil.move(root / "suites" / "test_axpb.py", root / "A" / "suites" / "test_axpb.py")
    (root / "B" / "suites" / "test_link.py").symlink_to(root / "A" / "suites" / "test_axpb.py")
    for folder in ("suites", "kernels"):
        shutil.rmtree(root / folder)
    return root


def test_a_suite_file_linked_in_from_another_project_is_tuned_and_gated_as_of_the_project_it_is_reached_in(
        linked_in, pytester):
    """``pytest B/suites/test_link.py --tune``, the file a symlink to project A's suite, was
    refused as of B while the run's records/ was A's (the link followed), and the command it
    suggested was the same one; ``pytest B/suites --tune`` recorded into B. The suite is B's, as
    its templates are (looked up beside the link) and the records best() reads for it."""
    from tunebench.lookup import project as project_of

    root = linked_in
    pytester.runpytest("B/suites/test_link.py", *TUNE, "-k", "small").assert_outcomes(passed=6, deselected=8)
    assert len(recorded_trials(root / "B")) == 5 and not (root / "A" / "records").exists()
    assert project_of(suites=root / "B" / "suites")[0] == root / "B" / "records"
    result = pytester.runpytest("B/suites/test_link.py", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines([f"*tunebench gate: *, records in {root / 'B' / 'records'}*"])


def test_best_of_a_suite_file_linked_in_from_another_project_says_to_tune_it_where_it_is_reached(
        linked_in, pytester, monkeypatch):
    """best() in B, whose suites/test_link.py links A's suite, said "`pytest /.../A/suites/test_axpb.py
    --tune --tune-records records` tunes it": the other project's file, where ``pytest suites --tune``
    in B tunes B's link into B's records/, which best() reads. Its lookups import the file as
    reached, as pytest collects it."""
    # the records read again at once, as a new process does: a tune done within a second of the first
    # lookup (REFRESH_S) went unseen, and the lookup after it said nothing is recorded
    monkeypatch.setattr(sys.modules["tunebench.lookup"], "REFRESH_S", 0.0)
    monkeypatch.chdir(linked_in / "B")
    untuned = lookup("axpb", (1000,), suites="suites")
    assert untuned.source == "heuristic" and untuned.reason.endswith("; `pytest suites/test_link.py --tune` tunes it")
    command = untuned.reason.rsplit("`", 2)[1].split()[1:]  # as told, from B
    pytester.runpytest(*command, *TUNE[1:], "-k", "small").assert_outcomes(passed=6, deselected=8)
    assert len(recorded_trials(linked_in / "B")) == 5 and not (linked_in / "A" / "records").exists()
    tuned = lookup("axpb", (1000,), suites="suites")  # its final round's answer, whether it kept the heuristic or not
    assert "nothing is recorded" not in (tuned.reason or "") and tuned == lookup(
        "axpb", (1000,), records=linked_in / "B" / "records")


@pytest.fixture
def suite_packages_forgotten():
    """The suite packages named as pytest names them (``suites``) out of ``sys.modules`` before a
    test and after it: each test's ``suites`` is its own project's, not one an earlier test (of
    any file) imported."""
    def forget():
        for name in [n for n in sys.modules if n.split(".")[0] == "suites"]:
            del sys.modules[name]

    forget()
    yield
    forget()


@pytest.mark.parametrize("packages", [False, True], ids=["modules", "packages"])
@pytest.mark.parametrize("first", ["A", "B"])
def test_lookups_in_a_project_and_in_one_linking_its_suite_file_each_follow_their_own_in_either_order(
        linked_in, monkeypatch, declared_apart, suite_packages_forgotten, first, packages):
    """One process asking best() in A and in B, whose suites/test_link.py links A's suite: the file
    was imported once, under a name of the link's target, and the project asked first named the
    suite for both. Asked in B first, best() in A said to tune B's link into A's records
    (``--tune-records records``), and both followed B's template. Each project's lookups import
    the file as reached there, and follow their own declaration, template and suite; so too where
    suites/ are packages (the link's package and dotted name were those of its target, A's)."""
    for name in ("A", "B") if packages else ():
        (linked_in / name / "suites" / "__init__.py").write_text("")
    template = linked_in / "B" / "kernels" / "axpb.c"
    template.write_text("/* B's own build of axpb */\n" + template.read_text())
    suites = {"A": "test_axpb.py", "B": "test_link.py"}
    for name in (first, *(set(suites) - {first})):
        monkeypatch.chdir(linked_in / name)
        untuned = lookup("axpb", (1000,), suites="suites")
        assert untuned.reason.endswith(f"; `pytest suites/{suites[name]} --tune` tunes it"), name
        source = tunebench.Tuned("axpb", suites="suites").source((1000,))
        assert ("B's own build" in source) == (name == "B"), name


def test_a_lookup_in_a_project_linking_a_suite_file_into_its_package_follows_the_module_its_framework_imported(
        linked_in, monkeypatch, declared_apart, suite_packages_forgotten):
    """B's framework imports suites.test_link, a link to A's suite, from its package suites/: a
    lookup in B took the module for another file's (the link's target), imported the package and
    the suite again under names of their own (each ``__init__`` run twice) and followed that
    second declaration. It reuses the module the framework imported, as for a suite not linked."""
    from tunebench.lookup import declaration

    for name in ("A", "B"):
        (linked_in / name / "suites" / "__init__.py").write_text("")
    monkeypatch.chdir(linked_in / "B")
    monkeypatch.syspath_prepend(linked_in / "B")
    imported = __import__("suites.test_link").test_link.axpb
    assert declaration("axpb", None, "suites") is imported


@pytest.fixture
def linked_folder(project) -> Path:
    """Projects A and B side by side in the folder returned, B's suites/ a symlink to A's, B with
    kernels/ and records/ of its own."""
    root = project()
    (root / "pyproject.toml").unlink()
    shutil.copytree(root / "kernels", root / "B" / "kernels")
    (root / "A").mkdir()
    for folder in ("suites", "kernels"):
        shutil.move(root / folder, root / "A" / folder)
    (root / "B" / "records").mkdir()
    (root / "B" / "suites").symlink_to(root / "A" / "suites")
    return root


def test_best_of_a_linked_suites_folder_with_records_of_its_own_says_to_tune_into_those(
        linked_folder, pytester, monkeypatch):
    """B/suites a symlink to A/suites, B with records/ of its own, best(records="records",
    suites="suites") in B: it said `pytest suites/test_axpb.py --tune`, which tunes into A's
    records/ (a run resolves the suites folder to A's project), never into B's, which best()
    reads: told again the same, after every tune. The command names the suite's project's
    records as a run finds them, and B's by --tune-records."""
    # the records read again at once, as a new process does: a tune done within a second of the first
    # lookup (REFRESH_S) went unseen, and the lookup after it said nothing is recorded
    monkeypatch.setattr(sys.modules["tunebench.lookup"], "REFRESH_S", 0.0)
    root = linked_folder
    monkeypatch.chdir(root / "B")
    untuned = lookup("axpb", (1000,), records="records", suites="suites")
    assert untuned.source == "heuristic"
    command = untuned.reason.rsplit("`", 2)[1].split()[1:]  # as told, from B
    pytester.runpytest(*command, *TUNE[1:], "-k", "small").assert_outcomes(passed=6, deselected=8)
    assert len(recorded_trials(root / "B")) == 5 and not (root / "A" / "records").exists()
    tuned = lookup("axpb", (1000,), records="records", suites="suites")
    assert "nothing is recorded" not in (tuned.reason or "")


def test_a_lookup_after_a_run_of_a_linked_suites_folder_follows_the_kernel_the_run_collected(linked_folder, pytester):
    """pytest names a suite reached through a linked folder by the link (B/suites/test_axpb.py),
    where a lookup of the project (records=A/records) resolves its suites folder: taken for
    another project's suite, the file was imported again, a second declaration of the kernel
    whose templates are looked up beside A/suites, not beside the link as the run's are."""
    from tunebench.kernel import REGISTRY
    from tunebench.lookup import declaration

    (linked_folder / "A" / "records").mkdir()
    pytester.runpytest("B/suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-k", "small")
    collected = REGISTRY["axpb"]
    assert collected.collected_from == linked_folder / "B" / "suites" / "test_axpb.py"
    assert declaration("axpb", linked_folder / "A" / "records", None) is collected


@pytest.mark.parametrize("run", [True, False], ids=["after-a-run", "lookups-alone"])
@pytest.mark.parametrize("linked", ["folder", "file"])
def test_a_lookup_through_a_linked_suite_follows_the_link_switched_since(
        project, pytester, monkeypatch, declared_apart, linked, run):
    """suites/ a symlink to a release's folder (or suites/test_axpb.py to its file), pytest run
    through it, the link then switched to another release's: best() in the same process, by name
    or naming the project, served the first release's declaration (its heuristic), that of the
    file the link led to when the run collected it; so did a lookup of a linked file its own
    lookups had imported (its module kept by the link's path). A lookup follows the file it
    leads to now."""
    from tunebench import kernel

    monkeypatch.setattr(sys.modules["tunebench.lookup"], "REFRESH_S", 3600.0)  # the folders as first found
    monkeypatch.setattr(kernel, "REREAD_S", 0.0)  # the suite's link checked at every lookup
    kernel.REGISTRY.pop("axpb", None)  # as in a fresh process: an earlier test's is the one a name alone answers
    root = project()
    (root / "records").mkdir()
    suite = (root / "suites" / "test_axpb.py").read_text()
    for release, vec in (("r1", 2), ("r2", 4)):
        (root / release).mkdir()
        (root / release / "test_axpb.py").write_text(suite.replace('{"vec": 2,', f'{{"vec": {vec},'))
    link = root / "suites" if linked == "folder" else root / "suites" / "test_axpb.py"
    if linked == "folder":
        shutil.rmtree(link)
    else:
        link.unlink()

    def deploy(release):
        swap = root / "swap"
        swap.symlink_to(root / release if linked == "folder" else root / release / "test_axpb.py")
        os.replace(swap, link)  # an atomic deploy

    deploy("r1")
    monkeypatch.chdir(root)
    if run:
        pytester.runpytest("suites", "--collect-only", "-q", "-p", "no:cacheprovider").assert_outcomes()
    asked = ({}, {"records": root / "records"}, {"suites": root / "suites"})
    assert [lookup("axpb", (1000,), **where).config["vec"] for where in asked] == [2, 2, 2]
    deploy("r2")
    assert [lookup("axpb", (1000,), **where).config["vec"] for where in asked] == [4, 4, 4]
    deploy("r1")  # and rolled back
    assert [lookup("axpb", (1000,), **where).config["vec"] for where in asked] == [2, 2, 2]


def released(root: Path, suites: dict[str, str]) -> Callable[[str], None]:
    """Each release's suite written to ``root/<release>/test_axpb.py``, the project's
    suites/test_axpb.py a link to the first's; returns what deploys a release by its name."""
    for name, text in suites.items():
        (root / name).mkdir()
        (root / name / "test_axpb.py").write_text(text)
    link = root / "suites" / "test_axpb.py"
    link.unlink()
    link.symlink_to(root / next(iter(suites)) / "test_axpb.py")

    def deploy(release: str) -> None:
        swap = root / "swap"
        swap.symlink_to(root / release / "test_axpb.py")
        os.replace(swap, link)  # an atomic deploy

    return deploy


#: Put ahead of a suite: ``said(what)`` writes a line of what it runs (an import of the file, a
#: call of its heuristic, which a lookup answering afresh makes and a kept answer does not).
SAID = """\
import os

def said(what):
    with open(os.environ["TB_SAID"], "a") as f:
        f.write(what + "\\n")

"""


@pytest.mark.parametrize("release", ["declared", "helper", "gone", "broken"])
def test_lookups_after_a_suites_link_is_switched_import_the_release_once_and_answer_from_memory(
        project, monkeypatch, tmp_path, request, declared_apart, release):
    """After suites/test_axpb.py's link was switched to another release, a lookup imported it again
    at every call, for good, where a helper module beside the link declares the kernel (the import
    handed back the same declaration, still taken for the first release's). Where the new release
    declares it no more or fails to import (the first release's declaration served, as it should
    be), and for a Kernel given (itself served), each call answered afresh, calling its heuristic.
    The release is imported once, and every later call is answered from memory."""
    from tunebench import kernel

    monkeypatch.setattr(sys.modules["tunebench.lookup"], "REFRESH_S", 0.0)  # the folders found again at every call
    monkeypatch.setattr(kernel, "REREAD_S", 0.0)  # the suite's link checked at every lookup
    kernel.REGISTRY.pop("axpb", None)  # as in a fresh process
    said = tmp_path / "said"
    monkeypatch.setenv("TB_SAID", str(said))
    root = project()
    (root / "records").mkdir()
    declared = SAID + (root / "suites" / "test_axpb.py").read_text().replace(
        "heuristic=lambda shape: {", 'heuristic=lambda shape: said("heuristic") or {')
    suites = {"r1": declared, "r2": declared.replace('{"vec": 2,', '{"vec": 4,')}
    if release == "helper":
        (root / "suites" / "axpb_decl.py").write_text(declared)
        request.addfinalizer(lambda: sys.modules.pop("axpb_decl", None))
        suites = dict.fromkeys(suites, "from axpb_decl import axpb  # noqa: F401\n")
    elif release == "gone":
        suites["r2"] = declared.replace('"axpb",', '"axpb_renamed",', 1)
    elif release == "broken":
        suites["r2"] = "raise RuntimeError('release r2 is broken')\n"
    deploy = released(root, {name: f"{SAID}said('import {name}')\n{text}" for name, text in suites.items()})
    monkeypatch.chdir(root)
    assert tunebench.best("axpb", (1000,))["vec"] == 2
    given = kernel.REGISTRY["axpb"]
    handle = tunebench.tuned("axpb")

    def answers():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tunebench.SuiteImportWarning)  # the broken release's
            return (tunebench.best("axpb", (1000,))["vec"], tunebench.best("axpb", (1000,), records="records")["vec"],
                    tunebench.best(given, (1000,))["vec"], handle.defines((1000,)))

    deploy("r2")
    after = answers()
    vec = 4 if release == "declared" else 2  # the first release's where the new one declares none
    assert after[:3] == (vec, vec, 2)  # a Kernel given is served itself
    assert said.read_text().splitlines().count("import r2") == 1
    said.write_text("")
    assert [answers() for _ in range(20)] == [after] * 20
    assert said.read_text() == ""  # neither imported again nor answered afresh


def test_a_lookup_follows_a_suites_link_switched_past_a_release_that_failed_to_import(
        project, monkeypatch, declared_apart):
    """suites/test_axpb.py's link switched to a release whose suite fails to import, then to one
    that imports: the failed import had left the folder no kernel to say its link was switched,
    so it was never imported again, and the first release's declaration answered for good."""
    from tunebench import kernel

    monkeypatch.setattr(kernel, "REREAD_S", 0.0)  # the suite's link checked at every lookup
    kernel.REGISTRY.pop("axpb", None)  # as in a fresh process
    root = project()
    (root / "records").mkdir()
    declared = (root / "suites" / "test_axpb.py").read_text()
    deploy = released(root, {"r1": declared, "r2": "raise RuntimeError('release r2 is broken')\n",
                             "r3": declared.replace('{"vec": 2,', '{"vec": 4,')})
    monkeypatch.chdir(root)
    assert tunebench.best("axpb", (1000,))["vec"] == 2
    deploy("r2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tunebench.SuiteImportWarning)
        assert tunebench.best("axpb", (1001,))["vec"] == 2  # the first release's, as followed before
    deploy("r3")
    assert tunebench.best("axpb", (1002,))["vec"] == 4


@pytest.mark.parametrize("r3", ["broken", "gone"])
def test_a_release_failing_after_a_second_one_keeps_the_second_ones_declaration(project, monkeypatch, declared_apart,
                                                                                 r3):
    """r1, r2, then an r3 that fails to import or declares the kernel no more: the registry's
    declaration, the first release's, answered (vec 2), two releases back, where the one followed
    last is r2's (a review's case)."""
    from tunebench import kernel

    monkeypatch.setattr(kernel, "REREAD_S", 0.0)  # the suite's link checked at every lookup
    kernel.REGISTRY.pop("axpb", None)  # as in a fresh process
    root = project()
    (root / "records").mkdir()
    declared = (root / "suites" / "test_axpb.py").read_text()
    r2 = declared.replace('{"vec": 2,', '{"vec": 4,')
    deploy = released(root, {"r1": declared, "r2": r2, "r3": "raise RuntimeError('release r3 is broken')\n"
                             if r3 == "broken" else r2.replace('"axpb",', '"axpb_renamed",', 1)})
    monkeypatch.chdir(root)
    assert tunebench.best("axpb", (1000,))["vec"] == 2
    deploy("r2")
    assert tunebench.best("axpb", (1001,))["vec"] == 4
    deploy("r3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tunebench.SuiteImportWarning)
        assert [tunebench.best("axpb", (1002 + i,))["vec"] for i in range(3)] == [4, 4, 4]


def test_a_lookup_in_another_project_after_a_suites_link_is_switched_leaves_lookups_by_name_on_the_new_release(
        project, monkeypatch, tmp_path, declared_apart):
    """A lookup naming another project's suites, which declare no such kernel, answers with the
    declaration registered by its name; after a switch of its suite's link, that is the first
    release's, taken as followed there would have made every lookup by name serve it again."""
    from tunebench import kernel

    monkeypatch.setattr(kernel, "REREAD_S", 0.0)  # the suite's link checked at every lookup
    kernel.REGISTRY.pop("axpb", None)  # as in a fresh process
    root = project()
    (root / "records").mkdir()
    declared = (root / "suites" / "test_axpb.py").read_text()
    deploy = released(root, {"r1": declared, "r2": declared.replace('{"vec": 2,', '{"vec": 4,')})
    (tmp_path / "other" / "suites").mkdir(parents=True)
    (tmp_path / "other" / "suites" / "test_other.py").write_text("")
    monkeypatch.chdir(root)
    assert tunebench.best("axpb", (1000,))["vec"] == 2
    deploy("r2")
    assert tunebench.best("axpb", (1001,))["vec"] == 4
    tunebench.best("axpb", (1002,), suites=tmp_path / "other" / "suites")
    assert [tunebench.best("axpb", (n,))["vec"] for n in (1003, 1004)] == [4, 4]


def test_a_frameworks_own_run_with_an_ini_file_of_its_own_suggests_no_option_of_it_for_other_records(tmp_path):
    """Every pytest run's -c was carried into the commands best() suggested in it: a framework's
    tests, run with -c ci/pytest.ini, told a kernel of another project's to tune with that file."""
    from tunebench.kernel import run_options, tune_options

    ours, theirs = tmp_path / "fw" / "ci" / "records", tmp_path / "q" / "records"
    run = (("-c", "ci/pytest.ini"), ours, ours)
    run_options(run, True)
    try:
        assert tune_options(theirs, theirs) == "" and tune_options(ours, tmp_path / "fw" / "records") == \
            " -c ci/pytest.ini"
    finally:
        run_options(run, False)
    assert tune_options(ours, ours) == ""


def test_a_monorepos_projects_without_ini_files_keep_records_of_their_own(tmp_path):
    """The git checkout's top was a project's root where it had no records/ yet: a first tune of
    each of a monorepo's projects wrote into one records/ at the top, shared."""
    from tunebench.kernel import project_root

    (tmp_path / ".git").mkdir()
    for folder in ("A/records", "A/suites", "B/suites", "C/suites/sub"):
        (tmp_path / folder).mkdir(parents=True)
    assert [project_root(tmp_path / p) for p in ("A/suites", "B/suites", "C/suites/sub", "B")] == [
        tmp_path / "A", tmp_path / "B", tmp_path / "C", tmp_path / "B"]
    assert project_root(tmp_path) is None
    (tmp_path / "records").mkdir()  # one at the top, as an earlier tunebench wrote: B's suites/ is nearer
    assert project_root(tmp_path / "B" / "suites") == tmp_path / "B" and project_root(tmp_path) == tmp_path


def test_the_gate_on_records_of_this_machine_with_another_thread_count_skips_naming_both_counts(project, pytester,
                                                                                                monkeypatch):
    """The only difference between the devices, the thread count, was said as "timings do not
    carry across devices"."""
    project()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the thread count is part of the fingerprint
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small").assert_outcomes(
        passed=2, skipped=4, deselected=2 + 6)  # the large bucket, a new one, is tuned on no device
    (tuned,) = (pytester.path / "records").glob("*.json")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs")
    assert result.ret == 0
    result.assert_outcomes(skipped=2)
    here = this_device("cpu")
    assert here != tuned.stem
    result.stdout.fnmatch_lines([f"*tunebench gate: {here}, no records file for this device in *records yet*",
                                 f"this machine: {here}: *family*model*2 threads*",
                                 f"recorded: {tuned.stem}: *family*model*1 thread)*",
                                 f"*nothing recorded for axpb small float32 on this device, {here}: it is recorded "
                                 f"with 1 thread ({tuned.stem}); this run has 2 (OMP_NUM_THREADS=2), and timings do "
                                 f"not carry across thread counts: gate with OMP_NUM_THREADS=1 as it was tuned, or "
                                 f"run `pytest suites/test_axpb.py --tune` here to record it with 2*"])
    assert said(result, f"nothing recorded for axpb large float32 on this device, {here}: it was never tuned here; ")
    store = tunebench.records.RecordStore(tuned)  # another machine's records: they do not carry at all
    other = tunebench.records.RecordStore.for_device(tuned.parent, {**store.fingerprint, "name": "Other CPU"})
    (task,) = store.tasks()
    other.put_task(task)
    gpu = tunebench.records.RecordStore.for_device(tuned.parent, {"target": "cuda", "name": "NVIDIA H200",
                                                                  "compute_capability": "9.0", "sm_count": 132})
    gpu.put_task({**task, "target": "cuda"})  # the CUDA variant's task of the same name: not named to a CPU gate
    tuned.unlink()
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs")
    result.stdout.fnmatch_lines([f"*nothing recorded for axpb small float32 on this device, {here}; *records holds it "
                                 f"for {other.device}: timings do not carry across devices; run `pytest "
                                 f"suites/test_axpb.py --tune` here to record it*"])
    assert not [line for line in result.stdout.lines if "holds it for" in line and gpu.device in line]


def test_gate_items_that_ran_and_ended_without_a_verdict_are_reached_and_a_skip_mark_is_reported(project, pytester):
    """A gate item whose marker was wrong was counted as 'not reached: the run stopped first',
    with no -x; and a skip mark on a tunebench item crashed pytest (INTERNALERROR: no line)."""
    project(cuda=True)
    (pytester.path / "conftest.py").write_text(
        "import pytest\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        if 'large' in item.name:\n"
        "            item.add_marker(pytest.mark.tunebench_gate(threshold=-5))\n")
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["gated 0 of 2 tasks: 2 were not measured (--gate-strict, *"])
    assert "not reached" not in result.stdout.str()
    (pytester.path / "conftest.py").write_text(
        "import pytest\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item.add_marker(pytest.mark.skip(reason='not today'))\n")
    skipped = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs")
    skipped.assert_outcomes(skipped=2)
    skipped.stdout.fnmatch_lines(["SKIPPED ?2? suites/test_axpb.py*: not today"])


def test_a_suite_names_the_kernels_declaration_line_in_its_file_and_no_line_of_a_module_it_imports(project, pytester):
    """What a skip or a failure of a suite's items names (:meth:`Suite.where`): the suite file and
    the line of its ``Kernel(...)``; where a helper module beside it declares the kernel, the suite
    file alone (that line is the helper's)."""
    from tunebench.items import Suite

    suites = project() / "suites"
    declared = (suites / "test_axpb.py").read_text().splitlines().index("axpb = Kernel(") + 1
    items, _ = pytester.inline_genitems("suites", "-p", "no:cacheprovider", "--tune-target", "cpu")
    assert {item.getparent(Suite).where() for item in items} == {(str(suites / "test_axpb.py"), declared)}
    (suites / "test_axpb.py").rename(suites / "axpb_generator.py")
    (suites / "test_axpb.py").write_text("from axpb_generator import axpb  # noqa: F401\n")
    items, _ = pytester.inline_genitems("suites", "-p", "no:cacheprovider", "--tune-target", "cpu")
    assert {item.getparent(Suite).where() for item in items} == {(str(suites / "test_axpb.py"), None)}


@pytest.mark.parametrize("settings, said", [
    ("0.5, 5", "0.5, 5 given by position; name each setting (threshold=0.1, processes=3, max_processes=7, budget_s=1.0)"),
    ("processes=2.5", "processes 2.5: a count"),
    ("budget_s='1'", "budget_s '1': a number"),
])
def test_a_gate_marker_with_settings_it_cannot_use_fails_its_item_saying_why(project, pytester, settings, said):
    """``tunebench_gate(0.5, 5)`` was read as no setting at all: the item gated with the default
    threshold and processes, and passed, saying nothing; ``processes=2.5`` was a TypeError
    traceback from deep in the measuring."""
    project()
    (pytester.path / "conftest.py").write_text(
        "import pytest\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        if 'large' in item.name:\n"
        f"            item.add_marker(pytest.mark.tunebench_gate({settings}))\n")
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([f"tunebench_gate marker of suites/test_axpb.py::axpb: {said}"])


def test_a_strict_gate_fails_what_it_cannot_measure_and_says_how_much_it_gated(project, pytester):
    """A required CI check must not turn green on a runner that gated nothing."""
    project(cuda=True)
    gate = ("suites", "-p", "no:cacheprovider", "--tune-target", "cpu")
    lenient = pytester.runpytest(*gate)
    assert lenient.ret == 0
    lenient.stdout.fnmatch_lines(["gated 0 of 2 tasks: 2 were not measured (--gate-strict, *"])
    strict = pytester.runpytest(*gate, "--gate-strict")
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines(["*not gated (--gate-strict): nothing recorded for axpb small float32 on this device*"])
    strict.stdout.fnmatch_lines(["FAIL  axpb::small-float32?gate?  nothing recorded*",  # as pytest says, not SKIP
                                 "*gated 0 of 2 tasks: 2 were not measured, and --gate-strict fails them"])
    stopped = pytester.runpytest(*gate, "--gate-strict", "-x")  # "gated 0 of 1 tasks": the one reached alone
    stopped.assert_outcomes(failed=1)
    stopped.stdout.fnmatch_lines(["*gated 0 of 2 tasks: 1 was not measured, and --gate-strict fails it; 1 was not "
                                  "reached: the run stopped first (-x, --maxfail, an interrupt)"])
    (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\ngate_strict = true\n")
    pytester.runpytest(*gate).assert_outcomes(failed=2)
    if not tunebench.backends.cuda_status()[0]:  # auto passes over cuda without a failure; asked by name, one
        pytester.runpytest(*gate[:-1], "auto").assert_outcomes(failed=2, skipped=1)
        pytester.runpytest(*gate[:-1], "cuda").assert_outcomes(failed=1)


def test_a_task_whose_tune_stopped_before_its_heuristic_ran_is_not_called_never_tuned(project, pytester):
    """A tune stopped on a busy machine at the heuristic's first shape records its trials, not the task."""
    project()
    fp = tunebench.backends.fingerprint("cpu")
    store = tunebench.records.RecordStore.for_device(pytester.path / "records", fp)
    store.add({"kernel": "axpb", "source_hash": "x", "shape": [1000], "dtype": "float32", "bucket": "small",
               "config": {"vec": 2, "unroll": 1, "mode": 0}, "status": "ok", "device": store.device,
               "stats": {"median": 1.0}, "verdict": "disturbed"})
    store.compact()
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs", "-k", "small")
    result.stdout.fnmatch_lines(["*nothing to gate for axpb small float32 on this device, *: its 1 trial that ran "
                                 "was measured only while other load disturbed the machine, so best() serves*"])
    assert "never tuned" not in result.stdout.str()


def test_a_task_with_a_clean_trial_beside_disturbed_ones_is_not_said_to_have_run_only_disturbed(project, pytester):
    """A tune stopped on a busy machine after one clean trial and two disturbed: the skip said "its
    2 trials that ran were measured only while other load disturbed the machine" of three."""
    project()
    fp = tunebench.backends.fingerprint("cpu")
    store = tunebench.records.RecordStore.for_device(pytester.path / "records", fp)
    for vec, verdict in ((2, "clean"), (4, "disturbed"), (8, "disturbed")):
        store.add({"kernel": "axpb", "source_hash": "x", "shape": [1000], "dtype": "float32", "bucket": "small",
                   "config": {"vec": vec, "unroll": 1, "mode": 0}, "status": "ok", "device": store.device,
                   "stats": {"median": 1.0}, "verdict": verdict})
    store.compact()
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "-rs", "-k", "small")
    result.stdout.fnmatch_lines(["*nothing to gate for axpb small float32 on this device, *: 2 of its 3 trials that "
                                 "ran were measured only while other load disturbed the machine, and no final round "
                                 "confirmed a pick, so best() serves*"])


def test_records_of_an_unknown_microarchitecture_are_marked_so(project, pytester):
    project()
    legacy = {"target": "cpu", "name": "AMD EPYC", "machine": "x86_64", "threads": 2}  # before family/model
    records_dir = pytester.path / "records"
    store = tunebench.records.RecordStore(records_dir / "cpu-amd-epyc-2t-b42c66.json", legacy)
    store.put_task({"kernel": "axpb", "target": "cpu", "dtype": "float32", "bucket": "small"})
    result = pytester.runpytest("suites", "-p", "no:cacheprovider", "--tune-target", "cpu")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["recorded: cpu-amd-epyc-2t-b42c66: AMD EPYC, 2 threads, microarchitecture unknown*"])


@pytest.mark.parametrize("space, message", [
    ('{"vec": [], "unroll": (1, 2), "mode": [0]}', "param 'vec' has an empty value list"),
    ('{"vec": [1], "unroll": (1, 2), "mode": [0]}, constraints=[lambda vex, unroll: vex > 1]',
     "names unknown param 'vex'"),
    ('{"vec": [1], "unroll": (1, 2), "mode": [0]}, constraints=[lambda vec: vec / 0]',
     "raised ZeroDivisionError"),
    ('{"vec": [1], "unroll": (1, 2), "mode": [0]}, constraints=[lambda vec: vec > 1]',
     "no config satisfies the constraints"),
    ('{"vec": [1], "unroll": (1, 2), "mode": [0], "N": [2, 4]}, constraints=[lambda N, vec: N % vec == 0]',
     "param 'N' has the name of the dim 'N' (dims are ?'N'?): a constraint naming it could not tell which it reads"),
])
def test_an_invalid_space_fails_collection_naming_the_suite_and_param(project, pytester, space, message):
    from tests.conftest import AXPB_SUITE
    suite = AXPB_SUITE.replace(
        'Space({"vec": [1, 2, 4], "unroll": (1, 2), "mode": MODES},\n'
        '                    constraints=[lambda vec, unroll: vec * unroll <= 4])', f"Space({space})")
    project(suite=suite)
    result = pytester.runpytest("suites", *TUNE)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*suite suites/test_axpb.py::axpb: *{message}*"])



def test_a_constraint_naming_no_param_is_the_same_error_for_a_lookup_as_for_collection(project, pytester):
    """A tune never ran, but records of the kernel may exist (the typo came later): ``best`` and
    ``export`` name the constraint as collection does, not with the KeyError of evaluating it."""
    root = project()
    pytester.runpytest("suites", *TUNE, "-k", "small")
    suite = root / "suites" / "test_axpb.py"
    suite.write_text(AXPB_SUITE.replace("MODES", "[0]").replace("lambda vec, unroll: vec * unroll",
                                                                "lambda vec, unrol: vec * unroll"))
    message = r"constraint <lambda> at test_axpb.py:\d+ names unknown param 'unrol' \(did you mean 'unroll'\?\)"
    collected = pytester.runpytest("suites", *TUNE)
    assert collected.ret == pytest.ExitCode.INTERRUPTED and re.search(message, collected.stdout.str())
    with pytest.raises(tunebench.space.SpaceError, match=message):
        tunebench.lookup("axpb", (1000,), records=root / "records", suites=root / "suites")

def test_a_failed_task_fails_again_when_rerun(project, pytester):
    """pytest-rerunfailures reruns a failed item: its task had failed, so the rerun was skipped
    ("not run: ... failed") and the broken tune exited 0."""
    pytest.importorskip("pytest_rerunfailures")
    project(modes=(0, 2), suite=AXPB_SUITE.replace('{"vec": 2, "unroll": 1, "mode": 0}', '{"vec": 2, "unroll": 1, "mode": 2}'))
    result = pytester.runpytest("suites", *TUNE, "--reruns", "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 2 and outcomes["rerun"] == 2, outcomes  # each task's baseline, twice


def test_a_task_whose_final_round_was_cut_short_fails_again_when_rerun(project, pytester, monkeypatch):
    """pytest-timeout failed the item in its task's final round; the rerun found the search done
    and passed, so a tune that confirmed nothing exited 0."""
    pytest.importorskip("pytest_rerunfailures")
    project()

    def cut_short(*args, **kwargs):
        pytest.fail("Timeout (>1.5s) from pytest-timeout.")  # a BaseException, as pytest-timeout raises

    monkeypatch.setattr("tunebench.session.final_round", cut_short)  # the run is in this process
    result = pytester.runpytest("suites", *TUNE, "-k", "small", "--reruns", "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes["rerun"] == 1, outcomes


def test_a_tune_a_busy_machine_stopped_fails_one_item_where_its_baseline_is_deselected(project, pytester,
                                                                                      monkeypatch):
    """The busy stop's failure was the baseline's item alone: a tune selecting candidates
    (-k "not baseline", --lf, a node id) stopped on a busy machine, every item skipped or passed
    on the records, and the run exited 0."""
    import tunebench.session

    real = tunebench.session.search

    def then_busy(*args, **kwargs):
        real(*args, **kwargs)
        raise tunebench.session.MachineBusy("other processes took 90% of the CPU time")

    monkeypatch.setattr(tunebench.session, "search", then_busy)  # the run is in this process
    project()
    result = pytester.runpytest("suites", *TUNE, "-k", "small and not baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes()["failed"] == 1
    assert said(result, "other processes took 90% of the CPU time") == 1


def test_last_failed_finds_the_failed_items_again(project, pytester):
    """pytest 9 keeps a node id's [params] apart from its names: ours held theirs in the name, and a
    cached id parsed back apart matched no item (--lf ran everything, --sw found nothing)."""
    project(modes=(0, 1))
    tune = [a for a in TUNE if a not in ("-p", "no:cacheprovider")]
    first = pytester.runpytest("suites", *tune, "-k", "small")
    failed = first.parseoutcomes()["failed"]
    assert failed >= 1
    again = pytester.runpytest("suites", *tune, "-k", "small", "--lf")
    again.stdout.fnmatch_lines([f"run-last-failure: rerun previous {failed} failure*"])
    assert again.parseoutcomes()["failed"] == failed and "passed" not in again.parseoutcomes()


def test_a_rerun_of_the_last_failed_after_a_busy_stop_confirms_no_heuristic_it_met_with_nothing(twice_project,
                                                                                                   pytester,
                                                                                                   monkeypatch):
    """A busy stop fails the heuristic's item; --lf ran it alone, asked no candidate, and recorded a
    final round of the heuristic alone: best() then said "the final round kept it: ... the search's
    other configs were slower", though the 3x faster candidates measured before were never in it."""
    import tunebench.session

    real, stops = tunebench.session.search, [1]

    def busy_once(*args, **kwargs):
        ended = real(*args, **kwargs)
        if stops:
            raise tunebench.session.MachineBusy(f"other processes took {90 + stops.pop()}% of the CPU time")
        return ended

    monkeypatch.setattr(tunebench.session, "search", busy_once)  # the run is in this process
    tune = [a for a in TUNE if a not in ("-p", "no:cacheprovider")]
    assert pytester.runpytest("suites", *tune, "-k", "small", "-p", "no:randomly").parseoutcomes()["failed"] == 1
    again = pytester.runpytest("suites", *tune, "-k", "small", "--lf", "-p", "no:randomly")
    assert again.parseoutcomes() == {"passed": 1, "deselected": 9}
    again.stdout.fnmatch_lines(["twice[[]small-float32[]]: none of its 4 candidates was selected (-k, --lf or node ids), "
                                "so no final round ran: the heuristic is still served*"])
    assert records(twice_project).table("checks").all() == []
    assert lookup("twice", (4096,), records=twice_project / "records",
                  suites=twice_project / "suites").reason.startswith("no final round confirmed a pick on this bucket")


def test_tb_line_names_the_suite_of_a_failure(project, pytester):
    """--tb=line printed ":0: wrong_result: ...", naming no file."""
    root = project(modes=(0, 1))
    result = pytester.runpytest("suites", *TUNE, "-k", "small", "--tb=line")
    declared = next(i for i, line in enumerate((root / "suites" / "test_axpb.py").read_text().splitlines(), 1)
                    if line.startswith("axpb = Kernel("))
    result.stdout.re_match_lines([rf".*suites/test_axpb.py:{declared}: wrong_result on \(1000,\): output 'y'.*"])
    assert not any(line.startswith(":0:") for line in result.stdout.lines)


def test_a_corrupted_records_file_stops_the_run_and_is_kept(project, pytester):
    root = project()
    pytester.runpytest("suites", *TUNE, "-k", "small and baseline")
    path = next((root / "records").glob("*.json"))
    path.write_text(path.read_text()[:-20])
    broken = path.read_text()
    result = pytester.runpytest("suites", *TUNE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{path.name}: corrupted records file*"])
    assert path.read_text() == broken


def test_best_applies_the_recorded_winner_and_falls_back_on_the_heuristic(project, pytester, quiet_verdicts):
    root = project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    kernel = tunebench.kernel.REGISTRY["axpb"]
    choice = tunebench.lookup(kernel, (2000,), records=root / "records")
    assert choice.bucket == "small" and choice.inside
    trials = records(root).table("trials").all()
    medians = {json.dumps(t["config"]): t["stats"]["median"] for t in trials  # those that may be finalists
               if t["shape"] == [1000] and t["status"] in ("ok", "early_stopped") and t["verdict"] == "clean"}
    # the final round met the fastest four by their trials again, interleaved; its winner is the answer
    (final,) = [c for c in records(root).table("checks").all() if c["kind"] == "tune" and c["bucket"] == "small"]
    (entry,) = final["shapes"]
    finalists = [json.dumps(c) for c in entry["finalists"]]
    assert len(finalists) == min(4, len(medians))
    assert max(medians[c] for c in finalists) <= min((m for c, m in medians.items() if c not in finalists),
                                                    default=float("inf"))
    fastest = min(entry.get("finalist_ms", [float("inf")]))
    if "finalist_ms" not in entry:  # every other candidate was stopped early: nothing to meet
        assert entry["finalists"] == [entry["baseline"]] and choice.source == "heuristic"
    elif final["winner"] is not None:  # it led by enough in the round and again alone
        assert choice.source == "tuned"
        assert choice.config == entry["best"] == entry["finalists"][entry["finalist_ms"].index(fastest)]
        assert fastest <= (1 - MIN_GAIN) * entry["baseline_ms"] and entry["ratio"] <= 1 - MIN_GAIN
    else:  # no finalist led the heuristic by enough, in every process of the round and by its trials, or alone after it
        assert choice.source == "heuristic" and entry["best"] == entry["baseline"]
        trial_ms = entry.get("finalist_trial_ms") or [None] * len(entry["finalists"])
        led = [ms is not None and ms <= (1 - MIN_GAIN) * entry["baseline_ms"] and lead
               and (by_trials is None or by_trials < entry["baseline_trial_ms"])
               for ms, lead, by_trials in zip(entry["finalist_ms"], entry["leads"], trial_ms)]
        assert not any(led) or "fresh process" in final["reason"], (entry, final["reason"])
    assert tunebench.best(kernel, (2000,), records=root / "records") == choice.config
    with pytest.warns(tunebench.buckets.ShapeOutsideBuckets):
        assert tunebench.lookup(kernel, (0,), records=root / "records").bucket == "small"
    (root / "elsewhere").mkdir()  # a records folder with nothing for this device: the heuristic
    assert tunebench.best(kernel, (2000,), records=root / "elsewhere") == {"vec": 2, "unroll": 1, "mode": 0}


def test_a_bucket_tuned_after_another_starts_from_its_best_config(twice_project, pytester):
    root = twice_project  # its heuristic makes four passes, a tuned config one: one is measured, not stopped early
    pytester.runpytest("suites", *TUNE, "-k", "small").assert_outcomes(passed=5, deselected=5)
    small = [t for t in records(root).table("trials").all() if t["bucket"] == "small" and t["status"] == "ok"
             and t.get("verdict") != "disturbed"]  # as the warm start reads them: a trial other load disturbed is none
    # warm configs come best first; the baseline is measured anyway, so the first new trial is
    # the best of "small" that is not the heuristic's config
    best_small = min((t for t in small if not t["baseline"]), key=lambda t: t["stats"]["median"])["config"]
    pytester.runpytest("suites", *TUNE, "-k", "large", "--tune-strategy", "bayes", "--tune-trials", "2")
    large = [t for t in records(root).table("trials").all() if t["bucket"] == "large" and not t["baseline"]]
    assert large[0]["config"] == best_small


def test_a_rerun_with_a_warm_started_strategy_measures_nothing_new(project, pytester):
    root = project()
    for _ in range(2):
        result = pytester.runpytest("suites", *TUNE, "--tune-strategy", "bayes", "--tune-trials", "3")
    # the second run's "large" task starts from the same warm data as the first: all resumed
    result.stdout.fnmatch_lines(["*axpb*small*float32*3*0*", "*axpb*large*float32*3*0*",
                                 "*builds: 0 compiled (*), 0 from the compile cache*"])
    small = sum(t["bucket"] == "small" for t in records(root).table("trials").all())
    assert {t["bucket"]: t["warm_from"] for t in records(root).table("tasks").all()} == {"small": 0, "large": small}


def test_a_rerun_whose_search_does_not_ask_the_recorded_pick_still_meets_it(twice_project, pytester):
    root = twice_project
    pytester.runpytest("suites", *TUNE, "-k", "small")
    kernel = tunebench.kernel.REGISTRY["twice"]
    first = tunebench.lookup(kernel, (4096,), records=root / "records")
    assert first.source == "tuned" and first.config["reps"] == 1
    # this run may not measure the pick: its search asks only the heuristic's neighbours
    result = pytester.runpytest("suites", *TUNE, "-k", "small and not reps:1")
    assert result.ret == 0
    latest = [c for c in records(root).table("checks").all() if c["kind"] == "tune"][-1]
    assert first.config in latest["shapes"][0]["finalists"] and latest["winner"] is not None
    assert tunebench.lookup(kernel, (4096,), records=root / "records").config == first.config
    with open(root / "twice.c", "a") as f:  # an edit of code: the pick is measured again on the new template
        f.write("int edited;\n")
    assert pytester.runpytest("suites", *TUNE, "-k", "small and not reps:1").ret == 0
    edited = [c for c in records(root).table("checks").all() if c["kind"] == "tune"][-1]
    assert edited["source_hash"] != latest["source_hash"] and first.config in edited["shapes"][0]["finalists"]


def test_the_time_budget_counts_the_tasks_wall_time_builds_included(pytester):
    """--tune-time counted each trial's own time in its worker, not the compiles made ahead: a
    "2 s" budget measured a whole space of slow-to-build candidates in 39 s."""
    funcs = "\n".join(f"float f{i}(const float *x, int n) {{ float s = {i}; for (int j = 0; j < n; ++j) "
                      f"s += x[j] * {i % 7 + 1} + j % {i % 5 + 2}; return s; }}" for i in range(80))
    pytester.path.joinpath("slow.c").write_text(
        funcs + "\nvoid k(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = x[i] + vec; }\n")
    pytester.path.joinpath("test_slow.py").write_text(
        "import numpy as np\n"
        "from tunebench import Bucket, Buckets, Kernel, Space, Variant\n"
        "k = Kernel('k', buckets=Buckets('N', [Bucket('all', N=(1, None), shapes=[(1000,)])]),\n"
        "           args=lambda shape, dtype, rng: {'x': rng.random(shape[0], dtype=np.float32),\n"
        "                                           'y': np.empty(shape[0], np.float32), 'n': np.int32(shape[0])},\n"
        "           reference=lambda x, n: x.astype(np.float64), outputs=['y'], tolerance={'float32': (1, 10)},\n"
        "           cpu=Variant(source='slow.c', entry='k', heuristic=lambda shape: {'vec': 0},\n"
        "                       space=Space({'vec': list(range(12))})))\n")
    result = pytester.runpytest("test_slow.py", *TUNE, "--tune-time", "2", "--tune-strategy", "brute_force", "-vv")
    measured = result.stdout.str().count(" PASSED")
    assert " UNSAMPLED" in result.stdout.str() and measured < 8, result.stdout.str()[-3000:]


def test_a_compile_cache_that_cannot_be_written_stops_the_task_saying_so_and_records_nothing(project, pytester,
                                                                                            monkeypatch, tmp_path):
    """Every candidate was recorded "crashed: PermissionError", reused by later runs, and the gate
    failed the kernel for it."""
    project()
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / "not-a-folder"))
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*the compile cache {tmp_path / 'not-a-folder'} cannot be written (FileExistsError: "
                                 f"*set TUNEBENCH_CACHE to a writable folder with free space*"])
    assert "crashed" not in result.stdout.str()
    for path in (pytester.path / "records").glob("*.json"):
        assert json.loads(path.read_text()).get("trials", {}) == {}


SHUFFLED = """\
import random
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):  # as pytest-randomly does, with a seed of its own per run
    random.Random(SEED).shuffle(items)
"""


def test_the_same_seed_asks_the_same_candidates_whatever_order_a_plugin_runs_the_items_in(project, pytester):
    """pytest-randomly reseeds every run: --tune-seed asked other candidates, and picked others."""
    root = project(modes=(0, 1))
    asked = []
    for seed in (None, 1, 2):
        (root / "conftest.py").write_text(SHUFFLED.replace("SEED", str(seed)) if seed else "")
        out = root / f"records-{seed}"
        pytester.runpytest("suites", *TUNE, "--tune-strategy", "random", "--tune-seed", "7", "--tune-trials", "3",
                           "-k", "small", "--tune-records", str(out))
        (file,) = out.glob("*.json")
        asked.append(sorted(str(t["config"]) for t in TinyDB(file).table("trials").all() if not t["baseline"]))
    assert len(asked[0]) >= 3 and asked[1] == asked[0] and asked[2] == asked[0]


def test_warm_start_data_reads_a_stores_trials_once_for_all_its_tasks(project, pytester, monkeypatch):
    """Once per recorded task of the kernel: tuning every bucket of a kernel cost buckets squared
    times the trials (15 s a task at 53k trials and 7 buckets)."""
    from tunebench.lookup import related_results
    from tunebench.records import RecordStore

    root = project()
    assert pytester.runpytest("suites", *TUNE, "--tune-trials", "3").ret == 0
    (path,) = (root / "records").glob("*.json")
    source = records(root).table("tasks").all()[0]["source_hash"]
    shapes = {}
    for t in records(root).table("trials").all():
        if t["status"] == "ok" and t.get("verdict") != "disturbed":
            shapes.setdefault((t["bucket"], json.dumps(t["config"], sort_keys=True)), set()).add(tuple(t["shape"]))
    complete = sorted(c for (bucket, c), s in shapes.items() if len(s) == {"small": 1, "large": 2}[bucket])
    reads = []
    trials = RecordStore.trials
    monkeypatch.setattr(RecordStore, "trials", lambda self, **kw: reads.append(self.path) or trials(self, **kw))
    found = related_results(root / "records", "axpb", "cpu", "float32", source, skip=("another-device", "small"))
    assert reads == [path]  # one read, for both of its tasks
    assert sorted(json.dumps(c, sort_keys=True) for c, _ in found) == complete
    assert sorted(v for _, v in found)[:2] == [1.0, 1.0]  # each task's best, against itself


def test_warm_start_data_leaves_out_a_store_whose_archive_is_damaged_naming_it(project, pytester):
    """An archive is read only once a store's trials are: a damaged line in another device's failed
    the tune, where an unreadable file is left out of the warm start with a warning."""
    from tunebench.lookup import related_results
    from tunebench.records import companions

    root = project()
    assert pytester.runpytest("suites", *TUNE, "--tune-trials", "2", "-k", "small").ret == 0
    (path,) = (root / "records").glob("*.json")
    source = records(root).table("tasks").all()[0]["source_hash"]
    archive = companions(path)[0]
    archive.write_text('{"kernel": "axpb"}\n{torn\n')
    with pytest.warns(UserWarning, match=f"axpb: a records file is left out of the warm start.*{archive.name}"):
        found = related_results(root / "records", "axpb", "cpu", "float32", source, skip=("another-device", "large"))
    assert found == []


def test_a_tune_beside_other_files_that_cannot_be_read_goes_on_without_them_naming_each(project, pytester):
    """Other devices' records are only a warm start: one conflicted file of a GPU box, one of a
    newer tunebench or a stray JSON in the folder failed every tune of this device."""
    root = project()
    folder = root / "records"
    folder.mkdir()
    bad = {"cuda-nvidia-h200-sm90-132sm-00b1c7.json": '{"trials": {\n<<<<<<< HEAD\n=======\n>>>>>>> gpu\n}}\n',
           "cuda-nvidia-h100-sm90-132sm-123abc.json": json.dumps({"format": {"1": {"version": 2}}}),
           "tunebench_configs.json": json.dumps({"configs": [{"vec": 4}]})}
    for name, text in bad.items():
        (folder / name).write_text(text)
    result = pytester.runpytest("suites", *TUNE, "--tune-trials", "2", "-k", "small")
    result.assert_outcomes(passed=3, skipped=3, deselected=8)
    for name, why in zip(bad, ("holds git conflict markers", "records format 2", "table 'configs' is not a map")):
        result.stdout.fnmatch_lines([f"*axpb: a records file is left out of the warm start*{folder / name}: {why}*"])
    assert {p.name: p.read_text() for p in folder.glob("*.json") if p.name in bad} == bad  # left as they were


def test_a_task_whose_every_config_and_heuristic_give_a_wrong_result_points_at_the_reference(project, pytester):
    """A tolerance too tight for the data (a scan's float32 sums): every config failed, the
    heuristic's too, and nothing said that this points at the reference, not the kernels."""
    project(suite=AXPB_SUITE.replace("a * x.astype(np.float64) + b", "a * x.astype(np.float64) + b + 1e-3"))
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    result.stdout.fnmatch_lines(["axpb[[]small-float32]: every config measured (4 and the heuristic's) gave a wrong "
                                 "result, the heuristic's: *; the reference is more likely at fault than every "
                                 "config, or, where all miss by little, its tolerance (Kernel(tolerance=*"])


def test_configs_that_failed_otherwise_leave_the_hint_that_the_reference_is_at_fault(project, pytester):
    """A user's space with a config that crashes or does not build: every one that ran gave a
    wrong result, and the summary said nothing of the reference."""
    project(modes=(0, 2), suite=AXPB_SUITE.replace("a * x.astype(np.float64) + b", "a * x.astype(np.float64) + b + 1e-3"))
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    result.stdout.fnmatch_lines(["axpb[[]small-float32]: every config that ran to a result (4 and the heuristic's; "
                                 "5 others did not: compile_error) gave a wrong result, the heuristic's: *; the reference is "
                                 "more likely at fault than every config*"])


def test_a_task_whose_every_config_reads_its_poisoned_output_says_so_not_the_reference(project, pytester):
    """A kernel that adds into its output (a split-K GEMM's partial sums, Triton's reset_to_zero)
    declared as a plain output: every config got NaN from the poison, and the summary blamed the
    reference."""
    root = project()
    (root / "kernels" / "axpb.c").write_text(AXPB_C.replace("] = a * x", "] += a * x"))
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    result.stdout.fnmatch_lines(["*wrong_result on (1000,): output 'y': 1000 of 1000 values off*(got nan, *; output "
                                 "'y' depends on what it held before the call *declared inout=[[]'y']*"])
    result.stdout.fnmatch_lines(["axpb[[]small-float32]: every config measured (4 and the heuristic's) gave a wrong "
                                 "result, the heuristic's: *; likely not the reference: the heuristic's config reads "
                                 "that output or leaves part of it unwritten"])


def test_a_rerun_whose_search_asks_the_recorded_pick_again_still_meets_it_in_the_final_round(pytester):
    """Its trial reused and ranked fifth by the trials' times, the pick was no finalist, and the
    round adopted another without measuring it again."""
    root = Path(__file__).resolve().parent.parent
    for folder in ("suites", "kernels"):
        shutil.copytree(root / folder, pytester.path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    replayed = pytester.path / "replayed"
    replay = ("--tune-target", f"replay:{root / 'records' / 'cpu-amd-epyc-f26m2-2t-506d4e.json'}",
              "--tune-records", str(replayed), "-p", "no:cacheprovider")

    def latest_round():
        (path,) = replayed.glob("*.json")
        return [c for c in TinyDB(path).table("checks").all() if c["kind"] == "tune"][-1]["shapes"][0]

    pytester.runpytest("suites/test_row_reduce.py", "--tune", "-k", "few_rows", "--tune-trials", "3", *replay)
    picked = latest_round()["best"]
    pytester.runpytest("suites/test_row_reduce.py", "--tune", "-k", "few_rows", "--tune-trials", "40", *replay)
    assert picked in latest_round()["finalists"]


def test_a_rerun_after_the_heuristic_changed_measures_the_pick_against_todays(project, pytester):
    """The summary paired today's heuristic config with the old one's time and lead, and no
    final round ran again, however often best()'s advice to tune was followed."""
    root = project()
    assert pytester.runpytest("suites", *TUNE, "-k", "small").ret == 0
    before = [c for c in records(root).table("checks").all() if c["kind"] == "tune"]
    suite = root / "suites" / "test_axpb.py"
    suite.write_text(suite.read_text().replace('heuristic=lambda shape: {"vec": 2, "unroll": 1, "mode": 0}',
                                               'heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0}'))
    assert pytester.runpytest("suites", *TUNE, "-k", "small").ret == 0
    after = [c for c in records(root).table("checks").all() if c["kind"] == "tune"]
    assert len(after) == len(before) + 1
    assert after[-1]["shapes"][0]["baseline"] == {"vec": 1, "unroll": 1, "mode": 0}


def test_the_progress_line_shows_the_best_when_the_heuristic_fails(project, pytester):
    """A heuristic whose config is wrong leaves no speedup to show; the best found is still shown,
    with the heuristic's failure, not "none yet" over a task that found one."""
    root = project(modes=(0, 1), suite=AXPB_SUITE.replace('"mode": 0}', '"mode": 1}'))
    result = pytester.runpytest("suites", *TUNE, "--tune-trials", "3", "-k", "small", "-p", "no:randomly")
    done = [line for line in result.stdout.lines if line.startswith("tunebench axpb[") and line.endswith("done")]
    trials = records(root).table("trials").all()
    assert any(t["config"]["mode"] == 1 and t["status"] == "wrong_result" for t in trials)
    assert len(done) == 1 and re.search(r"best [\d.]+ ms \(the heuristic: wrong_result, ", done[0]), done


def test_a_gate_given_a_records_folder_that_does_not_exist_is_a_usage_error(project, pytester):
    """A typo in --tune-records skipped every item as never tuned here, and CI stayed green."""
    project()
    gate = ("suites", "-p", "no:cacheprovider", "--tune-target", "cpu", "--tune-records")
    result = pytester.runpytest(*gate, "recods")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--tune-records recods: not a folder; the gate reads the records of this device there (`--tune` " \
           "writes them)" in result.stderr.str()
    (pytester.path / "recods").write_text("")
    assert "--tune-records recods: not a folder: pass its folder" in pytester.runpytest(*gate, "recods").stderr.str()


@pytest.mark.parametrize("table", [
    '[tool.pytest.ini_options]\ntune_trials = "1"\ngate_threshold = "0.2"\n',
    pytest.param('[tool.pytest]\ntune_trials = 1\ngate_threshold = 0.2\n', marks=pytest.mark.skipif(
        pytest.version_tuple[:2] < (9, 2), reason="pytest before 9.2 reads no numbers in [tool.pytest]")),
])
def test_a_budget_given_on_the_command_line_replaces_the_ini_files_whole(project, pytester, table):
    """The project's ``tune_trials`` capped a ``--tune-time`` run: a user asking for ten minutes
    got the ini's trials, and nothing said why. pytest's own table takes numbers unquoted ("config
    option 'tune_trials' expects a string, got int: 1")."""
    root = project()
    (root / "pyproject.toml").write_text(table)
    ini = pytester.runpytest("suites", *TUNE, "-k", "small", "-rs")
    ini.stdout.fnmatch_lines(["*not sampled: budget of 1 trials spent*"])
    timed = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-time", "120", "-rs")
    assert "budget of 1 trials" not in timed.stdout.str()
    timed.assert_outcomes(passed=6, deselected=8)


def test_the_cuda_target_asked_for_on_suites_without_a_cuda_variant_says_so(project, pytester):
    """``--tune-target cuda`` on CPU-only suites collected nothing and exited 5 without a word."""
    project()
    for args in (("--tune",), ()):
        result = pytester.runpytest("suites", "--tune-target", "cuda", "-p", "no:cacheprovider", "-rs", *args)
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["SKIPPED * kernel axpb has no cuda variant"])


GENERATED_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant


def make(op):
    return Kernel(f"axpb_{op}", buckets=Buckets("N", [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                  args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                                  "n": np.int32(shape[0]), "a": np.float32(2), "b": np.float32(1)},
                  reference=lambda x, n, a, b: 2.0 * x + 1.0, outputs=["y"],
                  cpu=Variant(source="kernels/axpb.c", entry="axpb", space=Space({"vec": [1, 4], "unroll": [1], "mode": [0]}),
                              heuristic=lambda shape: {"vec": 1, "unroll": 1, "mode": 0}))


KERNELS = {**{op: make(op) for op in ("one", "two")}, "three": None}


class Odd(dict):
    def values(self):
        raise RuntimeError("not a table of kernels")


ODD = Odd(a=1)
"""


def test_a_table_of_kernels_a_generator_made_is_collected_and_looked_up(project, pytester):
    """``KERNELS = {op: Kernel(...)}`` collected nothing (no tests ran), while best() found them."""
    root = project(suite=GENERATED_SUITE)
    result = pytester.runpytest("suites", *TUNE, "--collect-only", "-q")
    assert result.ret == 0 and {"axpb_one", "axpb_two"} <= {
        line.split("::")[1] for line in result.stdout.lines if line.count("::") >= 2}, result.stdout.str()[-2000:]
    from tunebench.lookup import load_suites
    assert {"axpb_one", "axpb_two"} <= {k.name for k in load_suites(root / "suites")}


def test_a_table_of_a_dict_or_tuple_subclass_is_collected_too(project, pytester):
    """``KERNELS = OrderedDict(...)`` (or a namedtuple) collected nothing and said nothing, while
    best() found its kernels and named ``pytest suites/test_axpb.py --tune`` as what tunes them."""
    project(suite=GENERATED_SUITE.replace(
        'KERNELS = {**{op: make(op) for op in ("one", "two")}, "three": None}',
        'import collections\nKERNELS = collections.OrderedDict((op, make(op)) for op in ("one",))\n'
        'PAIR = collections.namedtuple("Pair", "two three")(make("two"), None)'))
    result = pytester.runpytest("suites", *TUNE, "--collect-only", "-q")
    assert result.ret == 0 and {"axpb_one", "axpb_two"} <= {
        line.split("::")[1] for line in result.stdout.lines if line.count("::") >= 2}, result.stdout.str()[-2000:]


def test_tables_in_a_table_are_collected_and_looked_up_by_their_entries(project, pytester):
    """``KERNELS = {dtype: {op: Kernel(...)}}`` collected nothing and said nothing; a table that
    holds itself is read once, and a unit test's parametrize data holding a kernel is no table."""
    root = project(suite=GENERATED_SUITE.replace(
        'KERNELS = {**{op: make(op) for op in ("one", "two")}, "three": None}',
        'KERNELS = {"f32": {"one": make("one")}, "more": [[make("two"), None]], "none": {"three": None}}\n'
        'KERNELS["self"] = KERNELS\n'
        'CASES = [(make("four"), (128,))]  # parametrize data, no table of kernels'))
    result = pytester.runpytest("suites", *TUNE, "--collect-only", "-q")
    collected = {line.split("::")[1] for line in result.stdout.lines if line.count("::") >= 2}
    assert result.ret == 0 and {"axpb_one", "axpb_two"} <= collected, result.stdout.str()[-2000:]
    assert "axpb_four" not in collected
    from tunebench.kernel import table_entries
    from tunebench.lookup import load_suites
    assert {"axpb_one", "axpb_two"} <= {k.name for k in load_suites(root / "suites")}
    suite = next(m for m in list(sys.modules.values())
                 if Path(getattr(m, "__file__", None) or "/").resolve() == (root / "suites" / "test_axpb.py").resolve())
    assert [entry for entry, _ in table_entries("KERNELS", suite.KERNELS)] == [
        "KERNELS['f32']['one']", "KERNELS['more'][0][0]"]


def test_a_table_in_a_table_holding_a_kernel_beside_other_values_is_warned_of_naming_the_value(project, pytester):
    """``KERNELS = {"gemm": {"f32": Kernel(...), "meta": 3}}`` was read as data: its kernel was
    collected nowhere and looked up by no one, unsaid. Warned, not failed: a unit test's cases
    (``{"small": {"kernel": k, "tol": 1e-3}}``) are such a table. A row of parametrize data stays
    data, unsaid."""
    root = project(suite=GENERATED_SUITE.replace(
        'KERNELS = {**{op: make(op) for op in ("one", "two")}, "three": None}',
        'KERNELS = {"gemm": {"f32": make("one"), "meta": 3}, "plain": make("three")}\n'
        'CASES = {"small": [(make("two"), (128,))]}  # parametrize data, no table of kernels'))
    result = pytester.runpytest("suites", *TUNE, "--collect-only", "-q")
    said = ("KERNELS['gemm']['meta'] (int) is no Kernel, in a table of kernels within another: such a table is read "
            "as data, so KERNELS['gemm']['f32'] is neither tuned nor looked up; move 'meta' out of KERNELS['gemm'] to "
            "tune it")
    out = " ".join(result.stdout.str().split())  # the warnings summary wraps no line, but indents
    collected = {line.split("::")[1] for line in result.stdout.lines if line.count("::") >= 2}
    assert result.ret == 0 and "axpb_three" in collected and "axpb_one" not in collected, result.stdout.str()[-2000:]
    assert "test_axpb.py:" in out and said in out and out.count("KernelTableWarning: ") == 1, out[-2000:]
    from tunebench.lookup import load_suites
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a framework's lookups per launch stay quiet
        assert "axpb_one" not in {k.name for k in load_suites(root / "suites")}


def test_a_name_two_entries_of_a_table_share_fails_that_entry_alone_naming_both(project, pytester):
    """Two generated kernels of one name failed the whole module ("declared twice, here and in
    suites/test_axpb.py", its own file), so the table's every other kernel went uncollected too."""
    root = project(suite=GENERATED_SUITE.replace('"three": None', '"three": make("one")'))
    result = pytester.runpytest("suites", *TUNE, "--collect-only", "-q", "--continue-on-collection-errors")
    assert ("suite suites/test_axpb.py::KERNELS['three']: kernel name 'axpb_one' is declared twice, here and in "
            "suites/test_axpb.py (KERNELS['one'])") in result.stdout.str()  # its own node id, not the kept one's
    collected = {line.split("::")[1] for line in result.stdout.lines if line.count("::") >= 2 and "[" in line}
    assert {"axpb_one", "axpb_two"} <= collected, result.stdout.str()[-2000:]
    # and lookups follow the entry pytest collects, saying why (they served the later one, unsaid)
    from tunebench.kernel import REGISTRY
    from tunebench.lookup import load_suites
    failed: list[str] = []
    found = [k for k in load_suites(root / "suites", failed) if k.name == "axpb_one"]
    suite = next(m for m in list(sys.modules.values())
                 if Path(getattr(m, "__file__", None) or "/").resolve() == (root / "suites" / "test_axpb.py").resolve())
    assert found == [suite.KERNELS["one"]] and REGISTRY["axpb_one"] is suite.KERNELS["one"]
    assert len(failed) == 1 and "kernel name 'axpb_one' is declared twice" in failed[0], failed


def test_a_compiler_that_is_not_there_stops_the_task_saying_so_and_records_nothing(project, pytester, monkeypatch):
    """TUNEBENCH_CC=gcc-99: every candidate was recorded "crashed: FileNotFoundError"."""
    from tunebench.backends import cpu
    project()
    monkeypatch.setattr(cpu, "CC", "gcc-99")
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*gcc-99 cannot be run (No such file or directory): no candidate can be built*"])
    assert "crashed" not in result.stdout.str()
    for path in (pytester.path / "records").glob("*.json"):
        assert json.loads(path.read_text()).get("trials", {}) == {}


def test_the_summary_names_trials_that_left_threads_running_in_their_worker(pytester):
    """A candidate's spinners were recorded in the trial's left_behind, and its worker replaced,
    while the tune's summary said nothing of it."""
    from tests.test_workers import THREADS_C
    pytester.path.joinpath("threads.c").write_text(THREADS_C)
    pytester.path.joinpath("test_threads.py").write_text(
        "import numpy as np\n"
        "from tunebench import Bucket, Buckets, Kernel, Space, Variant\n"
        "k = Kernel('threads', buckets=Buckets('N', [Bucket('all', N=(1, None), shapes=[(1000,)])]),\n"
        "           args=lambda shape, dtype, rng: {'x': rng.random(shape[0], dtype=np.float32),\n"
        "                                           'y': np.empty(shape[0], np.float32), 'n': np.int32(shape[0])},\n"
        "           reference=lambda x, n: 2.0 * x, outputs=['y'],\n"
        "           cpu=Variant(source='threads.c', entry='threads', heuristic=lambda shape: {'step': 1},\n"
        "                       space=Space({'step': [1]}), flags=('-pthread',)))\n")
    result = pytester.runpytest("test_threads.py", *TUNE)
    result.stdout.fnmatch_lines(["left behind: 1 trial left threads, processes or timers running in their worker, "
                                 "which was replaced before the next trial: threads?all-float32? ?step:1? on (1000,): "
                                 "2 thread(s) it started still running*"])


def test_a_tune_says_where_its_trials_time_went_and_each_trial_keeps_its_phases(project, pytester):
    root = project(suite=AXPB_SUITE.replace("    (n,) = shape\n", "    (n,) = shape\n    __import__('time').sleep(0.4)\n"))
    result = pytester.runpytest("suites", *TUNE)
    result.assert_outcomes(passed=12, deselected=2)
    result.stdout.fnmatch_lines(["the new trials took * s: *s building inputs and references*, *s verifying (before "
                                 "and after the timed calls)*the rest (waiting for compiles ahead, retries, the search, the records)"])
    trials = [t for t in recorded_trials(root) if t["status"] in ("ok", "early_stopped")]
    for shape in ([1000], [20000], [50000]):
        built = sorted(t["prepare_s"] for t in trials if t["shape"] == shape)
        # the worker builds a shape's inputs once, in the trial that first asks for them
        assert built[-1] >= 0.4 and built[0] < 0.1, (shape, built)
    assert all(t["verify_s"] > 0 and t["load_s"] >= 0 and t["cost_s"] >= t["verify_s"] + t["measure_s"] for t in trials)


def test_a_mock_or_a_proxy_that_passes_for_a_dict_at_a_modules_level_is_no_table_of_kernels(pytester):
    """Tables are read as the built-in type reads them; a Mock(spec=dict) passes isinstance for a
    dict and fails dict.items: every test module holding one failed to collect in any project, as
    one holding a Mock(spec=Kernel) did (it has no name)."""
    pytester.makepyfile(test_mocked="""
        from unittest import mock
        from tunebench import Kernel
        CONFIG = mock.Mock(spec=dict)
        ITEMS = mock.MagicMock(spec=list)
        FAKE = mock.Mock(spec=Kernel)
        NESTED = {"f32": {"one": mock.Mock(spec=Kernel)}}

        def test_it():
            assert CONFIG is not None
    """)
    pytester.runpytest("test_mocked.py").assert_outcomes(passed=1)


def test_a_task_run_again_on_another_search_path_measures_no_candidate_past_its_budget(project, pytester):
    """Run again, a search whose values differ (a trial the records held disturbed, measured anew)
    takes another path: it measured a whole budget of other candidates, and a task tuned with
    --tune-trials 8 held 12. Another seed's path stands for it here."""
    root = project()

    def candidates() -> list[int]:
        """Per bucket, the configs recorded besides the heuristic's (measured as the baseline)."""
        found: dict[str, set] = {}
        for t in recorded_trials(root):
            if t["config"] != {"vec": 2, "unroll": 1, "mode": 0}:
                found.setdefault(t["bucket"], set()).add(json.dumps(t["config"], sort_keys=True))
        return sorted(map(len, found.values()))

    for seed in ("0", "1", "2", "3"):
        again = pytester.runpytest("suites", *TUNE, "--tune-trials", "2", "--tune-strategy", "random",
                                   "--tune-seed", seed)
        assert max(candidates()) <= 2, f"seed {seed}: {again.stdout.str()}"


def test_a_candidate_other_load_disturbed_is_measured_again_by_a_run_on_another_search_path(project, pytester):
    """A run again whose search took another path (other buckets' warm data changed) spent its
    budget on the candidates the records held clean and the heuristic's config: the one that
    stayed disturbed was never measured again, though the README says a later run measures it."""
    root = project()
    pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-trials", "2", "--tune-strategy", "brute_force")
    (path,) = (root / "records").glob("*.json")
    data = json.loads(path.read_text())
    heuristic = {"vec": 2, "unroll": 1, "mode": 0}
    ids = [i for i, t in data["trials"].items() if t["bucket"] == "small" and t["config"] != heuristic]
    disturbed = data["trials"][ids[-1]]["config"]  # (vec 1, unroll 2): the second brute force measured
    for i in ids:
        if data["trials"][i]["config"] == disturbed:
            data["trials"][i]["verdict"] = "disturbed"
    for seed in ("0", "1", "2"):  # random's paths, each of another first candidate than brute force's
        path.write_text(json.dumps(data))
        again = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-trials", "2", "--tune-strategy", "random",
                                   "--tune-seed", seed)
        small = [t for t in recorded_trials(root) if t["bucket"] == "small" and t["config"] != heuristic]
        assert len({json.dumps(t["config"], sort_keys=True) for t in small}) == 2, again.stdout.str()
        assert [t["verdict"] for t in small if t["config"] == disturbed] == ["clean"], again.stdout.str()
    for i in ids:  # another compiler's build, which no budget counts, clean or not: not measured again unasked
        if data["trials"][i]["config"] == disturbed:
            data["trials"][i]["compiler"] = "another compiler 1.0"
    path.write_text(json.dumps(data))
    again = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-trials", "2", "--tune-strategy", "random",
                               "--tune-seed", "0")
    small = [t for t in recorded_trials(root) if t["bucket"] == "small" and t["config"] == disturbed]
    assert [t["compiler"] for t in small] == ["another compiler 1.0"], again.stdout.str()


def test_a_first_tune_counts_no_candidate_that_another_bucket_measured_toward_its_budget(project, pytester):
    """Another bucket's search asked this bucket's heuristic config: counted as measured before,
    it took one of the budget's candidates on the task's first run (review)."""
    root = project(suite=AXPB_SUITE.replace('heuristic=lambda shape: {"vec": 2, "unroll": 1, "mode": 0}',
                                            'heuristic=lambda shape: {"vec": 2 if shape[0] <= 4096 else 4, '
                                            '"unroll": 1, "mode": 0}'))
    pytester.runpytest("suites", *TUNE, "-k", "large", "--tune-strategy", "brute_force")
    small = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-trials", "2", "--tune-strategy", "brute_force")
    measured = {json.dumps(t["config"], sort_keys=True) for t in recorded_trials(root)
                if t["bucket"] == "small" and t["config"] != {"vec": 2, "unroll": 1, "mode": 0}}
    assert len(measured) == 2, small.stdout.str()
