"""The final round's last check: a winner's lead must hold when measured again alone."""

import importlib
import json
import re
import subprocess
import sys
import types

import pytest

from tests.conftest import AXPB_SUITE, TWICE_C, said
from tests.test_plugin import TUNE
from tunebench.buckets import Bucket
from tunebench.compare import Comparison
from tunebench.final_round import MIN_GAIN, _lead_kept, _no_lead, _unusable
from tunebench.lookup import latest_confirmation, lookup
from tunebench.records import RecordStore, config_text
from tunebench.summary import brief


def two_shapes():
    return Bucket("narrow", S=(8, None), shapes=[(4096, 512), (2048, 1024)])


def test_a_lead_that_shrinks_below_the_minimum_gain_in_fresh_processes_is_not_adopted():
    # the row_reduce case: 5.5 % ahead in the round, 4 % when the pair met again
    bucket = Bucket("few_rows", S=(1, 7), shapes=[(4, 262144)])
    why = _lead_kept(bucket, [{"shape": [4, 262144], "ratio": 0.96}])
    assert why and "0.960x" in why and f"{MIN_GAIN:.0%}" in why
    assert _lead_kept(bucket, [{"shape": [4, 262144], "ratio": 0.90}]) is None


def test_the_lead_is_judged_over_the_bucket_with_the_heuristic_kept_on_a_shape():
    # a shape where the winner is the heuristic's own config counts as no lead (ratio 1)
    entries = [{"shape": [4096, 512], "ratio": 0.85}, {"shape": [2048, 1024]}]
    assert _lead_kept(two_shapes(), entries) is None  # sqrt(0.85) = 0.92
    entries[0]["ratio"] = 0.92
    assert "0.959x" in _lead_kept(two_shapes(), entries)


def test_a_finalist_faster_over_the_bucket_that_loses_on_a_shape_is_named_with_the_way_out():
    entries = [{"shape": [4096, 512], "finalists": [{"tile": 8}], "baseline_ms": 3.44, "finalist_ms": [0.43],
                "leads": [True]},
               {"shape": [2048, 1024], "finalists": [{"tile": 8}], "baseline_ms": 0.283, "finalist_ms": [0.301],
                "leads": [False]}]
    why = _no_lead(two_shapes(), entries)
    assert why.endswith("[tile:8] takes 0.36x the heuristic's time over the bucket, but is not faster in every "
                        "process on (2048, 1024); split the bucket between its shapes for each part to get its "
                        "own config")
    entries[0]["finalist_ms"] = [3.3]  # no faster over the bucket either: nothing to point at
    assert _no_lead(two_shapes(), entries) == f"no finalist leads the heuristic by {MIN_GAIN:.0%} on every shape, " \
                                              f"in every process"


def test_a_finalist_that_loses_on_every_shape_is_not_told_to_split_the_bucket():
    """A bucket of one shape cannot be split: its finalist, faster by the median, lost in a process
    there (seen on transpose's 512x512)."""
    bucket = Bucket("small", R=(1, 1023), shapes=[(512, 512)])
    entries = [{"shape": [512, 512], "finalists": [{"tile": 8}], "baseline_ms": 1.0, "finalist_ms": [0.68],
                "leads": [False]}]
    why = _no_lead(bucket, entries)
    assert why.endswith("[tile:8] takes 0.68x the heuristic's time over the bucket, but is not faster in every "
                        "process on (512, 512); the heuristic is served, and `--tune-fresh` on a quiet machine "
                        "measures the round again")
    assert "split" not in why


def test_a_round_whose_only_finalist_is_the_heuristic_says_so_not_that_none_led_it():
    """Every other config failed or was slower in the trials: "no finalist leads the heuristic"
    read as a contest the heuristic won."""
    entries = [{"shape": [4096, 512], "finalists": [{"tile": 1}], "baseline": {"tile": 1}},
               {"shape": [2048, 1024], "finalists": [{"tile": 1}], "baseline": {"tile": 1}}]
    assert _no_lead(two_shapes(), entries) == ("the heuristic's own config is the only finalist: the search's other "
                                               "configs were slower, failed, or stayed disturbed by other load")


def test_a_rerun_whose_finalists_the_latest_round_judged_does_not_measure_the_round_again(twice_project, pytester,
                                                                                          quiet_verdicts):
    """The config the latest round adopted is recalled beside the trials' fastest; where it was not
    among them, the finalists differed from the round's, and every re-run that measured nothing
    new measured the round again, and could flip its pick."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (path,) = (twice_project / "records").glob("*.json")
    data = json.loads(path.read_text())
    (key, check), = [(k, c) for k, c in data["checks"].items() if c["kind"] == "tune"]
    for entry in check["shapes"]:  # the round judged one more config than this run's finalists
        entry["finalists"].append({"reps": 4, "pad": 1, "judged": "too"})
    path.write_text(json.dumps(data))
    again = pytester.runpytest("suites", *TUNE, "-k", "small")
    again.assert_outcomes(passed=5, deselected=5)
    checks = [c for c in json.loads(path.read_text())["checks"].values() if c["kind"] == "tune"]
    assert len(checks) == 1 and checks[0]["shapes"] == check["shapes"]


def test_a_heuristic_that_gives_a_wrong_result_is_no_competitor_and_the_gate_says_it_is_not_measured(project, pytester,
                                                                                                     quiet_verdicts):
    """It used to stay the pick (the round ended on its wrong result), and best() served it, saying
    nothing was recorded; the gate failed it on every run after."""
    project(modes=(0, 1), suite=AXPB_SUITE.replace('"mode": 0}', '"mode": 1}'))
    tuned = pytester.runpytest("suites", *TUNE, "-k", "small")
    tuned.assert_outcomes(passed=5, failed=6, deselected=15)  # the baseline and the five mode-1 configs fail
    assert said(tuned, "the heuristic's config fails (wrong_result on (1000,)") == 1
    (path,) = (pytester.path / "records").glob("*.json")
    (check,) = [c for c in json.loads(path.read_text())["checks"].values() if c["kind"] == "tune"]
    assert check["winner"] is not None and check["baseline_failure"].startswith("wrong_result on (1000,)")
    picked = check["shapes"][0]["best"]
    assert picked["mode"] == 0
    choice = lookup("axpb", (1000,), RecordStore(path).device, records=pytester.path / "records")
    assert choice.source == "tuned" and choice.config == picked
    gated = pytester.runpytest("suites", "--tune-target", "cpu", "-k", "small", "-p", "no:cacheprovider", "-rA")
    gated.assert_outcomes(passed=1, deselected=1)
    assert said(gated, "the heuristic [vec:2 unroll:1 mode:1] is not measured on (1000,): it failed when tuned") == 1
    assert said(gated, "nothing was measured: the heuristic failed when tuned and the template is unchanged") == 1
    gated.stdout.fnmatch_lines(["PASS  axpb::small-float32?gate?  nothing to measure (see -rA)"])  # not a measured pass


def test_a_recalled_pick_that_fails_now_fails_its_item_and_counts_in_the_summary(twice_project, pytester,
                                                                                quiet_verdicts):
    """The records' pick is measured again where this run's search did not reach it; it used to
    end as a wrong result in the records while its item said unsampled and the summary 0 failed.
    Judged clean: a first final round other load disturbed recorded no pick to recall (seen in CI)."""
    pytester.runpytest("suites", *TUNE, "-k", "small and (baseline or reps:1-pad:1)").assert_outcomes(passed=2,
                                                                                                      deselected=8)
    (twice_project / "twice.c").write_text(TWICE_C.replace("    }\n}", "    }\n#if reps == 1 && pad == 1\n"
                                                                      "    y[0] += 1;\n#endif\n}"))
    again = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-trials", "1", "--tune-strategy", "brute_force")
    again.assert_outcomes(passed=2, failed=1, skipped=2, deselected=5)  # the search sampled reps:1 pad:0 alone
    again.stdout.fnmatch_lines(["wrong_result on (4096,): output 'y': 1 of 4096 values off*",
                                "FAILED suites/test_twice.py::twice::small-float32?reps:1-pad:1? - wrong_resul*"])
    (row,) = [line.split() for line in again.stdout.lines if line.startswith("twice ")]
    assert row[:7] == ["twice", "small", "float32", "2", "3", "0", "1"]  # two configs, one of them failed


def busy_rounds(monkeypatch) -> None:
    """Every final round's processes stay disturbed, as beside a busy process."""
    import tunebench.final_round

    real = tunebench.final_round.compare

    def busy(*args, **kwargs):
        found = real(*args, **kwargs)
        found.disturbed.append("other processes took 90% of the CPU time")
        return found

    monkeypatch.setattr(tunebench.final_round, "compare", busy)


def test_a_final_round_that_stays_disturbed_keeps_the_earlier_pick_and_its_figures(twice_project, pytester, monkeypatch,
                                                                                   quiet_verdicts):
    """A busy re-run dropped a confirmed 3x pick for the heuristic and published the disturbed
    round's times as the bucket's."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    asked = {"records": twice_project / "records", "suites": twice_project / "suites"}
    before = lookup("twice", (4096,), **asked)
    assert before.source == "tuned"
    busy_rounds(monkeypatch)
    again = pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-fresh")
    assert "failed" not in again.parseoutcomes()  # the summary says it, below the table
    again.stdout.fnmatch_lines(["*the final round confirmed nothing (the machine stayed disturbed on *): the pick of "
                                "the round of * is still served; tune again on a quieter machine*"])
    # the row is the served pick's, as the earlier round confirmed it (it showed the trials' fastest)
    (row,) = [line for line in again.stdout.lines if line.startswith("twice ")]
    assert f" {before.baseline_ms / before.objective_ms:.2f}x " in row and f" {config_text(before.config)} " in row, row
    after = lookup("twice", (4096,), **asked)
    assert (after.source, after.config, after.objective_ms, after.baseline_ms) == (
        "tuned", before.config, before.objective_ms, before.baseline_ms)
    (path,) = (twice_project / "records").glob("*.json")
    assert [c.get("disturbed", False) for c in RecordStore(path).checks(kind="tune")] == [False, True]


@pytest.mark.parametrize("edited, old, new, mark", [
    ("twice.c", "r * 0;", "r * 0 + 0;", "earlier template"),
    ("suites/test_twice.py", "reference=lambda x, n: 2.0 * x,", "reference=lambda x, n: 2.0 * x + 0.0,",
     "earlier declaration")])
def test_a_disturbed_round_after_an_edit_marks_the_served_pick_as_the_earlier_versions(
        twice_project, pytester, monkeypatch, quiet_verdicts, edited, old, new, mark):
    """The row and its line showed the pick and figures of a round of the template (or declaration)
    before an edit, unmarked, as if today's had been measured so."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    before = lookup("twice", (4096,), records=twice_project / "records", suites=twice_project / "suites")
    path = twice_project / edited
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    busy_rounds(monkeypatch)
    again = pytester.runpytest("suites", *TUNE, "-k", "small")
    (row,) = [line for line in again.stdout.lines if line.startswith("twice ")]
    assert f" {config_text(before.config)} ({mark}) " in row, row
    again.stdout.fnmatch_lines([f"tunebench twice[[]small-float32[]]: */* trials, {config_text(before.config)} "
                                f"({mark}) still served (* ms, *x the heuristic): no final round confirmed the "
                                f"trials' fastest (* ms), done"])


def test_a_disturbed_round_after_a_param_is_renamed_shows_the_heuristic_served_not_the_old_pick(
        twice_project, pytester, monkeypatch, quiet_verdicts):
    """The row and its line showed the earlier round's pick, of a param the space no longer has, as
    still served, while best() and the gate served the heuristic."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    suite = twice_project / "suites" / "test_twice.py"
    suite.write_text(suite.read_text().replace('"pad"', '"gap"'))  # in the space and the heuristic
    busy_rounds(monkeypatch)
    again = pytester.runpytest("suites", *TUNE, "-k", "small")
    again.stdout.fnmatch_lines(["*the final round confirmed nothing (the machine stayed disturbed on *): the "
                                "heuristic is served, the pick of the round of * being no longer in the space; tune "
                                "again on a quieter machine*"])
    (row,) = [line for line in again.stdout.lines if line.startswith("twice ")]
    assert " the baseline " in row and "pad" not in row, row
    served = lookup("twice", (4096,), records=twice_project / "records", suites=twice_project / "suites")
    assert (served.source, served.config) == ("heuristic", {"reps": 4, "gap": 0})


def failing_finalists(monkeypatch, failure: dict, calls: int | None = None) -> list[list[dict]]:
    """The final round's comparisons report ``failure`` (of arm "1", its first finalist) in
    their first ``calls`` (all where None); returns each comparison's configs as it is asked."""
    import tunebench.final_round

    real, asked = tunebench.final_round.compare, []

    def failing(workers, kernel, shape, dtype, arms, *args, **kwargs):
        asked.append([config for _, config, _ in arms])
        found = real(workers, kernel, shape, dtype, arms, *args, **kwargs)
        if calls is None or len(asked) <= calls:
            found.failure = {"arm": "1", **failure}
        return found

    monkeypatch.setattr(tunebench.final_round, "compare", failing)
    return asked


def tuned_round(root, pytester) -> dict:
    """The small bucket tuned: its one final round."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (path,) = (root / "records").glob("*.json")
    (round_,) = RecordStore(path).checks(kind="tune")
    return round_


def test_a_finalist_that_fails_in_the_round_is_dropped_and_the_others_still_judged(twice_project, pytester, monkeypatch,
                                                                                   quiet_verdicts):
    """One wrong finalist (right in its trials: racy, or wrong where it was not verified) ended
    the round, and the heuristic stayed though a right finalist led it 4x."""
    failure = {"status": "wrong_result", "error": "output 'y': 1 of 4096 values off"}
    calls = failing_finalists(monkeypatch, failure, calls=1)
    round_ = tuned_round(twice_project, pytester)
    (entry,) = round_["shapes"]
    wrong = calls[0][1]
    assert entry["dropped"] == [{"config": wrong, **failure}]
    assert wrong not in calls[1] and len(calls[1]) == len(calls[0]) - 1  # measured again without it
    assert round_["winner"] is not None and round_["problem"] is None
    served = lookup("twice", (4096,), records=twice_project / "records", suites=twice_project / "suites")
    assert served.source == "tuned" and served.config != wrong and served.config["reps"] == 1


def test_where_every_finalist_fails_in_the_round_the_heuristic_stays_saying_so(twice_project, pytester, monkeypatch):
    failing_finalists(monkeypatch, {"status": "crashed", "error": "the worker was killed by SIGSEGV"})
    round_ = tuned_round(twice_project, pytester)
    (entry,) = round_["shapes"]
    others = {json.dumps(f, sort_keys=True) for f in entry["finalists"] if f != entry["baseline"]}
    assert round_["winner"] is None and re.fullmatch(
        r"every finalist( but the heuristic's own config)? failed on \(4096,\): the worker was killed by SIGSEGV",
        round_["problem"])
    assert {json.dumps(d["config"], sort_keys=True) for d in entry["dropped"]} == others


def fail_then_busy(monkeypatch, fails) -> list[dict]:
    """The final round's first comparison fails the finalist ``fails(configs)`` picks, the
    ones after it stay disturbed by other load; returns the configs failed."""
    import tunebench.final_round

    real, failed = tunebench.final_round.compare, []

    def compare(workers, kernel, shape, dtype, arms, *args, **kwargs):
        found = real(workers, kernel, shape, dtype, arms, *args, **kwargs)
        if failed:
            found.disturbed.append("other processes took 90% of the CPU time")
            return found
        label, config = fails([(label, config) for label, config, _ in arms[1:]])  # arms[0]: the baseline
        failed.append(config)
        found.failure = {"arm": label, "status": "wrong_result", "error": "output 'y': 1 of 4096 values off"}
        return found

    monkeypatch.setattr(tunebench.final_round, "compare", compare)
    return failed


@pytest.mark.parametrize("the_pick", [False, True])
def test_a_round_disturbed_after_a_finalist_is_dropped_keeps_the_earlier_pick_unless_it_failed(
        twice_project, pytester, monkeypatch, quiet_verdicts, the_pick):
    """Any failure in the round made it a verdict: a finalist dropped (the others measured again),
    then other load on the rest, and the heuristic replaced the earlier round's confirmed pick."""
    monkeypatch.setattr(importlib.import_module("tunebench.lookup"), "REFRESH_S", 0.0)  # read again at once
    pytester.runpytest("suites", *TUNE, "-k", "small")
    asked = {"records": twice_project / "records", "suites": twice_project / "suites"}
    before = lookup("twice", (4096,), **asked)
    assert before.source == "tuned"
    failed = fail_then_busy(monkeypatch, lambda arms: next(
        (label, config) for label, config in arms if (config == before.config) == the_pick))
    pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-fresh")
    (path,) = (twice_project / "records").glob("*.json")
    latest = RecordStore(path).checks(kind="tune")[-1]
    assert latest["shapes"][0]["dropped"][0]["config"] == failed[0]
    after = lookup("twice", (4096,), **asked)
    if the_pick:  # the pick fails now: the round is the verdict, and the heuristic is served
        assert not latest.get("disturbed") and after.source == "heuristic", latest
    else:
        assert latest.get("disturbed") and (after.source, after.config) == ("tuned", before.config), latest


def test_a_gate_after_a_first_final_round_that_stayed_disturbed_says_so(twice_project, pytester, monkeypatch,
                                                                       quiet_verdicts):
    """It said the tune ended before its final round, which had run. The summary's row showed the
    trials' fastest and its speedup (about 2x), the heuristic served."""
    busy_rounds(monkeypatch)
    tune = pytester.runpytest("suites", *TUNE, "-k", "small")
    (row,) = [line.split() for line in tune.stdout.lines if line.startswith("twice ")]
    assert row[-5:-2] == ["1.00x*", "the", "baseline"], row
    # its progress line gave the heuristic's time as "by trials", as if the trials' fastest took it
    tune.stdout.fnmatch_lines(["tunebench twice[[]small-float32[]]: */* trials, the baseline still served (* ms, "
                               "1.00x the heuristic): no final round confirmed the trials' fastest (* ms), done"])
    gate = pytester.runpytest("suites", "-p", "no:cacheprovider", "-k", "small", "-rs")
    gate.assert_outcomes(skipped=1)
    gate.stdout.fnmatch_lines(["*its final round confirmed nothing (the machine stayed disturbed on (4096,): other "
                               "processes took 90% of the CPU time), so best() serves the heuristic; `pytest "
                               "suites/test_twice.py --tune` on a quieter machine tunes it again*"])


def test_no_pick_is_served_unconfirmed_where_the_heuristics_own_trials_were_disturbed(twice_project, pytester,
                                                                                      quiet_verdicts):
    """Without the heuristic's time to compare with, the trials' fastest was served as tuned."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (path,) = (twice_project / "records").glob("*.json")
    data = json.loads(path.read_text())
    data["checks"] = {k: c for k, c in data["checks"].items() if c["kind"] != "tune"}  # stopped before its round
    for trial in data["trials"].values():
        if trial["baseline"]:
            trial["verdict"] = "disturbed"
    path.write_text(json.dumps(data))
    choice = lookup("twice", (4096,), records=twice_project / "records", suites=twice_project / "suites")
    assert choice.source == "heuristic" and choice.reason.startswith("no final round confirmed a pick on this bucket")


def test_a_bucket_whose_representative_shapes_changed_is_tuned_again_not_a_key_error(twice_project, pytester,
                                                                                    quiet_verdicts):
    """The gate, best() and every re-tune raised KeyError on the shape the last final round lacked."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    suite = twice_project / "suites" / "test_twice.py"
    suite.write_text(suite.read_text().replace('shapes=[(4096,)]', 'shapes=[(2048,)]'))
    def best():  # a fresh process: this one holds the suite as it was first imported
        done = subprocess.run([sys.executable, "-m", "tunebench.cli", "best", "twice", "--shape", "2048", "--json",
                               "--records", str(twice_project / "records"), "--suites", str(twice_project / "suites")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    before = best()
    assert before["source"] == "heuristic" and "KeyError" not in str(before)
    assert before["reason"].startswith("the bucket's representative shapes changed since its final round, which "
                                       "judged (4096,), and no config recorded has a time on each of today's")
    gate = pytester.runpytest("suites", "--tune-target", "cpu", "-p", "no:cacheprovider", "-rs", "-k", "small")
    gate.assert_outcomes(skipped=1, deselected=1)
    gate.stdout.fnmatch_lines(["*the bucket's representative shapes changed since its final round, which judged "
                               "(4096,); `pytest suites/test_twice.py --tune` tunes it again*"])
    again = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert again.ret == 0 and "KeyError" not in again.stdout.str()
    assert best()["reason"] != before["reason"]  # judged by a final round on (2048,) now
    suite.write_text(suite.read_text().replace('shapes=[(2048,)]', 'shapes=[(4096,)]'))  # and back
    (path,) = (twice_project / "records").glob("*.json")
    first = next(c for c in RecordStore(path).checks(kind="tune") if c["shapes"][0]["shape"] == [4096])
    back = subprocess.run([sys.executable, "-m", "tunebench.cli", "best", "twice", "--shape", "4096", "--json",
                           "--records", str(twice_project / "records"), "--suites", str(twice_project / "suites")],
                          capture_output=True, text=True, check=True)
    assert json.loads(back.stdout)["config"] == first["shapes"][0]["best"]  # that round's pick, as the gate reads it


def test_records_of_a_renamed_bucket_answer_from_its_latest_tune_without_the_suites(twice_project, pytester, tmp_path):
    """Both names stay in the records, and they overlap: every records-only lookup raised BucketError."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    suite = twice_project / "suites" / "test_twice.py"
    suite.write_text(suite.read_text().replace('Bucket("small"', 'Bucket("little"'))
    pytester.runpytest("suites", *TUNE, "-k", "little")
    (tmp_path / "none").mkdir()  # a suites folder declaring nothing: one that is not there is refused as a typo
    done = subprocess.run([sys.executable, "-m", "tunebench.cli", "best", "twice", "--shape", "4096", "--json",
                           "--records", str(twice_project / "records"), "--suites", str(tmp_path / "none")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bucket"] == "little"


def test_a_pick_served_far_from_the_shapes_it_was_measured_on_says_so(twice_project, pytester, quiet_verdicts):
    """A pick 16x beyond its bucket's shapes took 1.6-1.9x the heuristic's time, with no word. (An
    empty launch, a zero dim, was said to lie 12 octaves away.)"""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    asked = {"records": twice_project / "records", "suites": twice_project / "suites"}
    assert lookup("twice", (4096,), **asked).source == "tuned"
    assert lookup("twice", (1024,), **asked).note is None  # two octaves: near enough
    far = lookup("twice", (100,), **asked)
    assert far.source == "tuned" and far.note == ("tuned on (4096,): (100,) lies 5 octaves from the nearest in a dim, "
                                                  "where the pick may not hold; a representative shape near it "
                                                  "measures it there")
    assert lookup("twice", (0,), **asked).note is None


def test_a_config_that_fails_in_the_final_round_is_named_by_its_params_not_its_arms_label():
    """It read "on (8192,) arm best ended crashed", naming no config."""
    crashed = types.SimpleNamespace(failure={"arm": "best", "status": "crashed", "error": "killed by SIGSEGV"},
                                    disturbed=[])
    problem, only_load = _unusable(crashed, (8192,), {"best": {"mode": 4}, "baseline": {"mode": 0}})
    assert (problem, only_load) == ("on (8192,) the config [mode:4] ended crashed: killed by SIGSEGV", False)


def test_a_heuristics_trial_other_load_disturbed_is_no_reference_for_the_finalists_lead_by_their_trials():
    """Its time went into the round as the trials' baseline, the gate's trial ratio after it."""
    from tunebench.session import Outcome
    clean = {"status": "ok", "verdict": "clean", "stats": {"median": 1.0}}
    busy = {**clean, "verdict": "disturbed", "stats": {"median": 3.0}}
    assert Outcome({(8,): {}, (16,): {}}, {(8,): clean, (16,): clean}).clean_times == {(8,): 1.0, (16,): 1.0}
    assert Outcome({(8,): {}, (16,): {}}, {(8,): clean, (16,): busy}).clean_times is None


def test_an_unconfirmed_time_is_marked_in_the_summary_where_there_is_no_speedup_to_mark():
    """A disturbed round whose heuristic had no clean time: the trials' best, 0.7567 ms, read as final."""
    from tunebench.summary import table
    row = {"kernel": "softmax", "bucket": "narrow", "dtype": "float32", "configs": 30, "new": 62, "deselected": 0,
           "failed": 0, "early": 28, "best_ms": 0.7567, "best_rate": None, "baseline_ms": None, "speedup": None,
           "best_config": "vec:16", "baseline_config": "vec:8", "confirmed": False}
    line = table([row])[1].split()
    assert line[8:12] == ["0.7567*", "-", "-", "-"]
    assert table([{**row, "confirmed": True}])[1].split()[8] == "0.7567"


def test_the_published_lead_is_the_one_the_pick_and_the_heuristic_showed_met_alone(twice_project, pytester,
                                                                                   quiet_verdicts):
    """The round of every finalist read layernorm narrow 1.77x where the pair's five processes,
    which decide the adoption and which the gate holds it to, read 1.35x: the summary, best() and
    the report published the first."""
    result = pytester.runpytest("suites", *TUNE, "-k", "small")
    assert result.ret == 0
    (path,) = (twice_project / "records").glob("*.json")
    check = [c for c in RecordStore(path).checks(kind="tune")][-1]
    assert check["winner"] is not None
    (entry,) = check["shapes"]
    best_ms, baseline_ms = entry["confirmed_ms"]  # the pair's own read, beside the round of every finalist's
    # (the two reads of 0.7 µs calls, kept to 3 digits, were once the same: their difference is no requirement)
    from tunebench.kernel import REGISTRY

    choice = lookup(REGISTRY["twice"], (4096,), records=twice_project / "records")
    assert (choice.objective_ms, choice.baseline_ms) == pytest.approx((best_ms, baseline_ms))
    row = next(line for line in result.stdout.lines if line.startswith("twice ") and " small " in line).split()
    # printed to 4 digits from a weighted geometric mean of one shape: a last-ulp difference may round either way
    assert float(row[8]) == pytest.approx(best_ms, rel=1e-3) and float(row[10]) == pytest.approx(baseline_ms, rel=1e-3)
    assert float(row[11].rstrip("x")) == pytest.approx(baseline_ms / best_ms, abs=0.006)


def test_a_task_stopped_before_its_final_round_shows_what_is_served_not_the_trials_fastest(
        twice_project, pytester, monkeypatch, quiet_verdicts):
    """Stopped on a busy machine after its search, its row showed the trials' fastest at 1.38x*
    while the report and best() served the heuristic at 1.00x*."""
    import tunebench.session

    real = tunebench.session.search

    def then_busy(*args, **kwargs):
        real(*args, **kwargs)
        raise tunebench.session.MachineBusy("other processes took 90% of the CPU time")

    monkeypatch.setattr(tunebench.session, "search", then_busy)
    tune = pytester.runpytest("suites", *TUNE, "-k", "small")
    (row,) = [line.split() for line in tune.stdout.lines if line.startswith("twice ")]
    assert row[-5:-2] == ["1.00x*", "the", "baseline"], row
    assert lookup("twice", (4096,), records=twice_project / "records", suites=twice_project / "suites").source \
        == "heuristic"


def test_a_records_only_answer_names_no_suites_folder_the_project_does_not_have(twice_project, pytester,
                                                                                quiet_verdicts):
    """A project whose suites live elsewhere (tuning/) was told to run `pytest suites --tune`,
    which collects nothing there."""
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (path,) = (twice_project / "records").glob("*.json")
    data = json.loads(path.read_text())
    data["checks"] = {}  # as a tune stopped before its final round
    path.write_text(json.dumps(data))
    (twice_project / "suites").rename(twice_project / "tuning")

    def reason():
        done = subprocess.run([sys.executable, "-m", "tunebench.cli", "best", "twice", "--shape", "4096", "--json",
                               "--records", str(twice_project / "records")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["reason"]
    assert reason().endswith("is not served; `pytest <the suite declaring it> --tune` resumes the tune"), reason()
    (twice_project / "suites").mkdir()  # a suites folder, declaring it or not: the project's own command
    assert reason().endswith("is not served; `pytest suites --tune` resumes the tune"), reason()


def test_a_summary_line_of_tasks_names_the_first_few_and_counts_the_rest():
    """A generated table's 27 tasks, every one stopped disturbed, made one line of hundreds of
    characters under the table that already lists each."""
    from tunebench.summary import some
    labels = [f"ew_{i}[all-float32]" for i in range(27)]
    assert some(labels) == ", ".join(labels[:6]) + " and 21 more"
    assert some(labels[:6]) == ", ".join(labels[:6]) and some([]) == ""


H, A, B = {"t": 1}, {"t": 2}, {"t": 3}  # the heuristic's config and two finalists


def round_of(tmp_path, monkeypatch, shapes, finalists, round_ms, reference, earlier=True):
    """final_round() where each comparison reads ``round_ms`` (config's "t" -> ms in each process)
    and the pair met alone ``reference`` (shape -> best/baseline per process), after an earlier
    round that adopted A (``earlier``); returns the round's record and the config best() serves."""
    import tunebench.final_round

    def measured(workers, kernel, shape, dtype, arms, processes, budget_s):
        comp = Comparison(tuple(label for label, _, _ in arms))
        for p in range(processes):
            comp.objectives.append({"best": reference[shape][p], "baseline": 1.0} if comp.labels == ("best", "baseline")
                                   else {label: round_ms[config["t"]] for label, config, _ in arms})
        return comp

    monkeypatch.setattr(tunebench.final_round, "compare", measured)
    bucket = Bucket("b", N=(1, None), shapes=shapes)
    store = RecordStore(tmp_path / "cpu-x.json", fingerprint={"cpu": "x"})
    variant = types.SimpleNamespace(baseline=lambda shape, dtype: H, source_hash="h", entry="k")
    if earlier:
        store.add_check({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": "b", "kind": "tune",
                         "source_hash": "h", "setup_hash": None, "entry": "k", "winner": 0, "problem": None,
                         "shapes": [{"shape": list(s), "best": A, "baseline": H, "finalists": [A]} for s in shapes],
                         "timestamp": "earlier"})
    doc = tunebench.final_round.final_round(store, None, types.SimpleNamespace(name="k"), variant, "cpu", "float32",
                                            bucket, [{s: f for s in shapes} for f in finalists], None)
    served = latest_confirmation(store, "k", "cpu", "float32", bucket, "h", None, "k")
    return doc, served["shapes"][0]["best"] if served and served["winner"] is not None else H


@pytest.mark.parametrize("behind", [1.0, 1.02, 1.22, 2.0])
def test_a_re_tune_whose_fresh_processes_contradict_each_other_keeps_the_earlier_pick(tmp_path, monkeypatch, behind):
    """A busy re-run read the earlier pick against the heuristic 0.45x-1.22x in processes the
    monitor judged clean, and dropped a pick five processes had confirmed at 1.57x: processes that
    contradict each other judged nothing, however far behind the one reads it."""
    doc, served = round_of(tmp_path, monkeypatch, [(4096,)], [A, B], {1: 1.0, 2: 0.5, 3: 0.9},
                           {(4096,): [0.45, behind, 0.6, 0.5, 0.55]})
    assert doc["disturbed"] and served == A, doc
    assert doc["problem"].startswith(f"the fresh processes contradicted each other on (4096,): best/baseline "
                                     f"0.450x-{behind:.3f}x, the pick of the round before more than 5% ahead"), doc


@pytest.mark.parametrize("case", ["first tune", "a new winner", "another shape behind"])
def test_a_final_round_judges_a_winner_not_ahead_in_every_process_where_it_is_no_earlier_pick_read_so(
        tmp_path, monkeypatch, case):
    """A review's cases: a first tune (a config unsteady between processes would leave every strict
    gate unjudged), a new winner while the earlier pick read 1.5x the heuristic in the round (it was
    served again), the earlier pick read behind in every process on another shape: the heuristic."""
    shapes = [(4096,), (8192,)] if case == "another shape behind" else [(4096,)]
    winner, ms = (B, {1: 1.0, 2: 1.5, 3: 0.8}) if case == "a new winner" else (A, {1: 1.0, 2: 0.5, 3: 0.9})
    doc, served = round_of(tmp_path, monkeypatch, shapes, [winner, A if winner == B else B], ms,
                           {(4096,): [0.45, 1.22, 0.6, 0.5, 0.55], (8192,): [1.3] * 5}, earlier=case != "first tune")
    assert not doc.get("disturbed") and served == H and doc["winner"] is None, doc
    assert "did not lead the heuristic in every fresh process on" in doc["reason"], doc


def test_a_round_that_stayed_disturbed_is_said_with_its_first_signs_and_a_count_of_the_rest():
    """best()'s answer named every process's signs, each buffer placement's apart: 1.8 KB of them
    before the one line that says what to do."""
    signs = ["other processes took 68% of the CPU time"] + [f"staggered {i}: two modes" for i in range(24)]
    problem = f"the machine stayed disturbed on (256, 256): {'; '.join(signs)}"
    assert brief(problem) == ("the machine stayed disturbed on (256, 256): other processes took 68% of the CPU time; "
                              "staggered 0: two modes; and 23 more signs (in the records' final round)")
    assert brief("the machine stayed disturbed on (4096,): other processes took 90% of the CPU time") == \
        "the machine stayed disturbed on (4096,): other processes took 90% of the CPU time"
    assert brief("on (8,) the config [vec:2] ended crashed: a; b; c") == "on (8,) the config [vec:2] ended crashed: a; b; c"
