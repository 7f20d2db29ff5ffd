"""tunebench report on records made by a real tune and gate: the three outputs and --compare."""

import base64
import dataclasses
import html
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import tunebench.kernel
from tests.conftest import ascii_locale
from tests.test_gate import GATE, tune_chain
from tests.test_plugin import TUNE
from tests.test_records_safety import SLOW_C, SLOW_SUITE, killed_with_9
from tunebench.buckets import Bucket
from tunebench.cli import main
from tunebench.lookup import confirmed_ms, lookup
from tinydb import TinyDB

from tunebench.records import RecordsError, RecordStore, config_key, config_text, verdict_text
from tunebench.report import (NOISY, NOISY_WHY, _before, _changes, _check_ms, _rows, _spread, history, records_at,
                              revision, task_views, through_the_noise)

#: Every measurement of these tests' runs is judged clean (quiet_verdicts): beside other load a tune
#: stops and a gate skips, as documented, and the report has none of the rows these tests read. A
#: busy machine's records are planted where a test is about them.
pytestmark = pytest.mark.usefixtures("quiet_verdicts")


@pytest.fixture
def chain_tuned(pytester):
    """The chain kernel of the gate's tests, tuned."""
    return tune_chain(pytester)


def git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_report_writes_markdown_html_with_embedded_images_and_the_plots(project, pytester, capsys, monkeypatch):
    root = project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    pytester.runpytest("suites", *GATE).assert_outcomes(passed=2)
    capsys.readouterr()
    out = root / "report"
    assert main(["report", "--records", str(root / "records"), "--out", str(out)]) == 0
    written = capsys.readouterr().out.split()
    pngs = sorted(p.rsplit("-", 1)[-1] for p in written if p.endswith(".png"))
    assert pngs == ["convergence.png", "distribution.png", "history.png", "speedup.png"]
    md = (out / "report.md").read_text()
    # a range beside a tuned pick's speedup only: a kept heuristic's round measured the winner it turned down
    assert re.search(r"\| axpb \| small \| float32 \| 5 \| [\d.]+ \| [\d.]+ \| ([\d.]+x\*?( \([\d.]+-[\d.]+\))? \| "
                     r"vec:\S+ unroll:\S+ mode:0|1\.00x\*? \| the heuristic( \(its final round turned down a winner "
                     r"measured at [\d.]+-[\d.]+x\))?) \| - \| \d \| pass( \(nothing to measure\))? at (\S+|no commit) \|", md), md
    assert all(f"]({p.rsplit('/', 1)[-1]})" in md for p in written if p.endswith(".png"))
    page = (out / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 4 and all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "<td>axpb</td>" in page and "src=\"http" not in page  # one self-contained file
    # from a subfolder, without --records: the project's records, as best and export find them
    monkeypatch.chdir(root / "suites")
    assert main(["report", "--out", str(root / "again")]) == 0
    assert (root / "again" / "report.md").read_text() == md


def test_report_of_text_beyond_ascii_is_written_in_utf8_whatever_the_locale(twice_beyond_ascii, pytester):
    """Under an ASCII locale (LC_ALL=C, PYTHONUTF8=0) the report of a bucket named ``klein_µ``
    failed ("'ascii' codec can't encode character '\\xb5'") and left report.md empty; under a
    Latin-1 one, report.html said charset utf-8 of its Latin-1 bytes."""
    root = twice_beyond_ascii
    pytester.runpytest("suites", *TUNE, "-k", "klein")  # its bucket named, measured or stopped by a busy machine
    ran = subprocess.run([sys.executable, "-m", "tunebench.cli", "report", "--records", str(root / "records"),
                          "--out", str(root / "report")], env=ascii_locale(), capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "klein_µ" in (root / "report" / "report.md").read_text(encoding="utf-8")
    assert "klein_µ" in (root / "report" / "report.html").read_text(encoding="utf-8")


def test_report_names_the_heuristic_where_the_trials_rank_it_first(project, pytester, capsys):
    """No final round runs where the heuristic's config is the only one: the row still says so."""
    root = project()
    suite = root / "suites" / "test_axpb.py"
    suite.write_text(suite.read_text().replace('{"vec": [1, 2, 4], "unroll": (1, 2)', '{"vec": [2], "unroll": (1,)'))
    assert pytester.runpytest("suites", *TUNE).ret == 0
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    md = (root / "r" / "report.md").read_text()
    assert re.search(r"\| axpb \| small \| float32 \| 1 \| [\d.]+\* \| [\d.]+\* \| 1\.00x\* \| the heuristic \|", md), md


def test_report_compare_shows_what_changed_since_a_revision(project, pytester, capsys):
    root = project()
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1").assert_outcomes(passed=4, skipped=8, deselected=2)
    git(root, "init", "-q")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "records")
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r"), "--compare", "HEAD"]) == 0
    md = (root / "r" / "report.md").read_text()
    assert "### Changes since HEAD" in md
    changes = md.split("### Changes since HEAD")[1]
    changed = re.findall(r"\| axpb \| (\w+) \| float32 \| [\d.]+\*? \| ([\d.]+)\*? \([+-]\d+%\) \| ", changes)
    same = re.search(r"(\d) tasks? unchanged since HEAD\.", changes)
    assert same and len(changed) + int(same.group(1)) == 2, md  # a served config and time alike: unchanged
    assert ("| best ms now (time: + slower) |" in changes) == bool(changed)
    for bucket, now in changed:  # the main table's figure
        assert re.search(rf"\| axpb \| {bucket} \| float32 \| \d+ \| {now} \|", md), md
    # against the records as they are: no row, the count of tasks unchanged
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "tuned")
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r"), "--compare", "HEAD"]) == 0
    md = (root / "r" / "report.md").read_text()
    assert md.split("### Changes since HEAD\n\n")[1].startswith("2 tasks unchanged since HEAD.\n"), md
    # a best that takes twice its time is flagged, as the gate would fail it; its change reads +100%
    store = RecordStore(next((root / "records").glob("*.json")))
    slower = [dataclasses.replace(v, served=dataclasses.replace(v.served, objective_ms=2 * v.times[0]))
              for v in task_views(store)]
    rows, same = _changes(_before(store, task_views(store)), slower)
    assert same == 0 and {(r[1], r[4].endswith("(+100%)"), r[7]) for r in rows} == {
        ("small", True, "**lead shrank**"), ("large", True, "**lead shrank**")}
    # 10 % slower than the record, but in a run where the heuristic took twice its time: times drift
    # between runs, and its lead grew; flagged slower, it was a false regression for a reviewer
    drifted = [dataclasses.replace(v, served=dataclasses.replace(
        v.served, objective_ms=1.1 * v.times[0], baseline_ms=2 * v.times[1])) for v in task_views(store)]
    rows, _ = _changes(_before(store, task_views(store)), drifted)
    assert {(r[1], r[4].endswith("(+10%)"), r[7]) for r in rows} == {("small", True, "lead grew"), ("large", True, "lead grew")}
    assert all(re.fullmatch(r"[\d.]+x -> [\d.]+x", r[5]) for r in rows), rows
    # another config, 0.3 % faster: its change reads +0%, as an unchanged time does, not -0%
    moved = [dataclasses.replace(v, served=dataclasses.replace(v.served, config={**v.served.config, "vec": 99},
                                                               objective_ms=0.997 * v.times[0]))
             for v in task_views(store)]
    rows, _ = _changes(_before(store, task_views(store)), moved)
    assert rows and all(r[4].endswith("(+0%)") for r in rows), rows
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r"), "--compare", "nosuch"]) == 2
    assert "--compare nosuch: not a git revision" in capsys.readouterr().err


def test_a_revisions_records_are_read_with_their_archive_and_leave_no_copy_behind(tmp_path, monkeypatch):
    """--compare reads a revision's records from git: its oldest trials are in the archive, and
    the copies are gone once the comparison is made (a CI runner reports on every push)."""
    from tests.test_records import FINGERPRINT, trial
    monkeypatch.setattr("tunebench.records.ARCHIVE_ABOVE", 5)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    root = tmp_path / "project"
    store = RecordStore.for_device(root / "records", FINGERPRINT)
    for i in range(12):
        store.add(trial({"vec": i}))
    store.compact()
    assert store.archive.exists()
    git(root, "init", "-q")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", "records")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "records")
    with records_at("HEAD", store.path.parent, root) as old:
        assert [t["config"]["vec"] for t in RecordStore(old / store.path.name).trials()] == list(range(12))
    with records_at("HEAD", root / "elsewhere" / "records", root) as none:
        assert none is None
    assert list((tmp_path / "tmp").iterdir()) == []


def test_report_without_records_is_a_clear_error(tmp_path, capsys):
    assert main(["report", "--records", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "no records file under" in capsys.readouterr().err


def test_a_legacy_devices_last_gate_is_said_to_be_history(tmp_path, capsys):
    """The committed records of a device fingerprinted before its microarchitecture was: its
    'last gate: fail' stood in the table with no word that no gate runs on it again."""
    root = Path(__file__).resolve().parent.parent
    assert main(["report", "--records", str(root / "records"), "--out", str(tmp_path)]) == 0
    sections = (tmp_path / "report.md").read_text().split("\n## ")
    legacy = [s for s in sections if s.startswith("cpu-amd-epyc-2t-b42c66")]
    assert len(legacy) == 1 and "microarchitecture unknown" in legacy[0]
    assert [s.count("their last gate is history") for s in sections[1:]] == [
        1 if s is legacy[0] else 0 for s in sections[1:]]
    # its gate runs measured (their verdicts are kept) before runs recorded per-process objectives
    assert "fail (nothing to measure)" not in legacy[0] and legacy[0].count("(nothing to measure)") <= 1


def test_a_records_file_that_cannot_be_read_is_named_and_the_others_are_reported(tmp_path, capsys):
    """One corrupt file stopped the whole report, where best() answered for the other device."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "records").mkdir()
    for path in (root / "records").glob("*.json"):
        (tmp_path / "records" / path.name).write_bytes(path.read_bytes())
    broken = tmp_path / "records" / "cpu-amd-epyc-2t-b42c66.json"
    broken.write_bytes(broken.read_bytes()[:5000])
    assert main(["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "r")]) == 1
    assert f"tunebench report: not reported: {broken}: corrupted records file" in capsys.readouterr().err
    md = (tmp_path / "r" / "report.md").read_text()
    assert f"**Not reported**, as their records file cannot be read:\n\n- {broken}: corrupted records file" in md
    assert "\n## cpu-amd-epyc-f26m2-2t-506d4e\n" in md and "\n## cpu-amd-epyc-2t-b42c66\n" not in md


@pytest.mark.parametrize("damage", ["trial config null", "check best a string", "trial median a string"])
def test_a_records_file_with_a_value_of_the_wrong_type_is_named_and_the_others_are_reported(tmp_path, capsys,
                                                                                             damage):
    """Valid JSON that no tunebench writes (a hand edit, a bad merge): best() and report died of
    an AttributeError naming no file, and the report left every other device out."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "records").mkdir()
    for path in (root / "records").glob("*.json"):
        (tmp_path / "records" / path.name).write_bytes(path.read_bytes())
    broken = tmp_path / "records" / "cpu-amd-epyc-2t-b42c66.json"
    data = json.loads(broken.read_text())
    trial = next(t for t in data["trials"].values() if t["status"] == "ok")
    check = next(c for c in data["checks"].values() if c["kind"] == "tune")
    if damage == "trial config null":
        trial["config"] = None
    elif damage == "check best a string":
        check["shapes"][0]["best"] = "vec16"
    else:
        trial["stats"]["median"] = "0.5"
    broken.write_text(json.dumps(data))
    before = broken.read_bytes()
    with pytest.raises(RecordsError, match=rf"{re.escape(str(broken))}: (trial|check) \d+: .*; the file is left "
                                           rf"untouched: restore it \(git checkout\) or remove the"):
        RecordStore(broken)
    assert main(["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "r")]) == 1
    assert f"tunebench report: not reported: {broken}: " in capsys.readouterr().err
    assert "\n## cpu-amd-epyc-f26m2-2t-506d4e\n" in (tmp_path / "r" / "report.md").read_text()
    assert broken.read_bytes() == before


def test_a_gate_run_before_the_latest_tune_is_not_the_last_gate_of_what_is_served(project, pytester, capsys):
    """A gate's FAIL stood in the table, and in the regressions, after a re-tune replaced the pick it
    judged; and a pass of an earlier template's pick stood for a new one never gated."""
    root = project()
    pytester.runpytest("suites", *TUNE, "-k", "small")
    pytester.runpytest("suites", *GATE, "-k", "small").assert_outcomes(passed=1, deselected=1)
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    assert re.search(r"\| axpb \| small \| float32 \|.*\| pass( \(nothing to measure\))? at (\S+|no commit) \|$",
                     (root / "r" / "report.md").read_text(), re.MULTILINE)
    pytester.runpytest("suites", *TUNE, "-k", "small", "--tune-fresh")  # a new final round, not gated since
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    assert re.search(r"\| axpb \| small \| float32 \|.* \| - \|$", (root / "r" / "report.md").read_text(), re.MULTILINE)


def test_the_history_shows_a_failed_gate_run_that_measured_no_time():
    """A gate whose best ended wrong_result has no time: the plot dropped it, while the table said fail."""
    from tunebench.buckets import Bucket
    from tunebench.report import TaskView, history

    bucket = Bucket("all", N=(1, None), shapes=[(8,)])
    tune = {"kind": "tune", "winner": None, "shapes": [{"shape": [8], "best": {}, "baseline_ms": 2.0}]}
    failed = {"kind": "gate", "outcome": "fail", "shapes": [{"shape": [8], "configs": {}, "objectives": []}]}
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, failed])
    assert history(view) == [(tune, 2.0, ""), (failed, 2.0, "")]
    # a gate skipped as too noisy and a disturbed final round are no points: an 80x cliff was the load's
    noisy = {"kind": "gate", "outcome": "skip", "shapes": [{"shape": [8], "configs": {}, "objectives": []}]}
    busy = {**tune, "disturbed": True, "shapes": [{"shape": [8], "best": {}, "baseline_ms": 160.0}]}
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, busy, noisy, failed])
    assert history(view) == [(tune, 2.0, ""), (failed, 2.0, "")]
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, failed])
    assert _rows([view])[0][-1] == "fail at no commit"  # it read "fail (nothing to measure)": the best crashed


def test_a_gate_runs_shapes_with_no_verdict_to_scale_take_the_days_drift_on_the_others():
    """The drift a gate run's shapes scaled by their verdicts measured (scaled over raw time, a
    geometric mean) scales its shapes that have none: a point on the tune's scale, partly
    estimated; where no shape has a verdict to scale, its raw time."""
    from tunebench.report import ESTIMATED, RAW, TaskView, history

    bucket = Bucket("all", N=(1, None), shapes=[(8,), (16,), (32,)])
    tune = {"kind": "tune", "winner": None,
            "shapes": [{"shape": [n], "best": {}, "baseline_ms": ms} for n, ms in ((8, 2.0), (16, 4.0), (32, 8.0))]}
    raw = {8: 1.0, 16: 2.5, 32: 4.0}  # a quicker day's
    shapes = [{"shape": [n], "configs": {"best": {}}, "best_ms": ms} for n, ms in raw.items()]
    against = "best against the recorded source"
    scaled = {8: 1.1, 16: 1.0}  # the ratios of the checks that decided shapes 8 and 16: 32 has none
    gate = {"kind": "gate", "outcome": "pass", "shapes": shapes, "verdicts": [
        {"shape": [n], "what": against, "outcome": "pass", "ratios": [ratio]} for n, ratio in scaled.items()]}
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, gate])
    drift = math.sqrt(2.0 * 1.1 / raw[8] * 4.0 * 1.0 / raw[16])
    ms = bucket.objective({(8,): 2.0 * 1.1, (16,): 4.0 * 1.0, (32,): raw[32] * drift})
    assert [(c, pytest.approx(drawn), what) for c, drawn, what in history(view)] == [
        (tune, 4.0, ""), (gate, ms, ESTIMATED)]
    unjudged = {**gate, "verdicts": []}
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, unjudged])
    assert [(c, pytest.approx(drawn), what) for c, drawn, what in history(view)] == [
        (tune, 4.0, ""), (unjudged, bucket.objective({(n,): ms for n, ms in raw.items()}), RAW)]


def test_an_old_gate_run_with_no_shape_both_scaled_and_timed_is_drawn_hollow_not_dropped():
    """An old gate run (kept before every compared shape had a time) scaled on one shape, which has
    no raw time, and timed on the other, which its verdict cannot scale (against a heuristic changed
    since the tune): no shape measures the day's drift, and the passing run left the history. Its
    scaled and raw times are drawn, hollow."""
    from tunebench.report import RAW, TaskView, history

    bucket = Bucket("all", N=(1, None), shapes=[(8,), (16,)])
    tune = {"kind": "tune", "winner": None, "shapes": [
        {"shape": [n], "best": {"b": 1}, "baseline": {"b": 1}, "baseline_ms": ms} for n, ms in ((8, 2.0), (16, 4.0))]}
    gate = {"kind": "gate", "outcome": "pass", "shapes": [
        {"shape": [8], "configs": {"best": {"b": 1}}},  # no best_ms, no samples: an old record
        {"shape": [16], "configs": {"best": {"b": 1}, "baseline": {"b": 3}}, "best_ms": 3.0}],  # another heuristic
        "verdicts": [{"shape": [8], "what": "best against the recorded source", "outcome": "pass", "ratios": [1.1]},
                     {"shape": [16], "what": "best/baseline", "outcome": "pass", "ratios": [0.8]}]}
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, gate])
    assert [(c, pytest.approx(drawn), what) for c, drawn, what in history(view)] == [
        (tune, bucket.objective({(8,): 2.0, (16,): 4.0}), ""),
        (gate, bucket.objective({(8,): 2.0 * 1.1, (16,): 3.0}), RAW)]


def test_a_served_heuristic_without_a_time_shows_none_not_a_candidates_under_its_name():
    """Its final round disturbed and its own trial too: the row showed the trials' best, 0.7567 ms,
    as the heuristic's."""
    from tunebench.buckets import Bucket
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("narrow", N=(1, None), shapes=[(8,)])
    served = Choice({"vec": 8}, "heuristic", "k", (8,), "float32", "narrow", True, "d")
    view = TaskView("k", "cpu", "float32", bucket, "h", {(("vec", 16),): 0.7567}, None, {"ok": 1}, [0.7567],
                    {(("vec", 16),): {"vec": 16}}, served=served)
    assert view.times == (None, None) and _rows([view])[0][4:8] == ["-", "-", "-", "the heuristic"]


def test_a_task_stopped_before_its_heuristic_ran_is_named_though_it_has_no_row(project, pytester, capsys):
    """A tune stopped on a busy machine at the heuristic's first shape records trials, not the task:
    the report had no row and no word of it."""
    import tunebench.backends

    root = project()
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small").assert_outcomes(
        passed=2, skipped=4, deselected=8)
    store = RecordStore.for_device(root / "records", tunebench.backends.fingerprint("cpu"))
    store.add({"kernel": "axpb", "source_hash": "x", "shape": [100000], "dtype": "float32", "bucket": "large",
               "config": {"vec": 2, "unroll": 1, "mode": 0}, "status": "ok", "device": store.device,
               "stats": {"median": 1.0}, "verdict": "disturbed"})
    store.compact()
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    md = (root / "r" / "report.md").read_text()
    stopped = md.split("### Stopped before the heuristic was timed (no row)")[1].split("###")[0]
    assert stopped.strip().splitlines() == [
        "- axpb large float32: 1 trial recorded (1 disturbed by other load), but its tune stopped before the "
        "heuristic ran on every shape, so best() serves the heuristic; a tune resumes it"]
    assert "Stopped before the heuristic was timed" in (root / "r" / "report.html").read_text()
    # the one trial the heuristic's, measured but disturbed: the tune did not stop before it ran
    store.add({"kernel": "axpb", "source_hash": "x", "shape": [8, 3], "dtype": "float32", "bucket": "skinny",
               "config": {"vec": 4, "unroll": 1, "mode": 0}, "baseline": True, "status": "ok",
               "device": store.device, "stats": {"median": 1.0}, "verdict": "disturbed"})
    store.compact()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    md = (root / "r" / "report.md").read_text()
    assert ("- axpb skinny float32: 1 trial recorded (1 disturbed by other load), but the heuristic's measurement "
            "on (8, 3) was disturbed by other load, so best() serves the heuristic; a tune resumes it\n") in md, md


def test_tasks_no_suite_declares_any_more_are_named_apart_not_as_rows_of_what_best_serves(project, pytester):
    """A removed bucket and a renamed kernel were rows under "the best config is what best()
    serves", which serves neither, while an export left them out."""
    import sys

    root = project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    suite = root / "suites" / "test_axpb.py"

    def report() -> tuple[list[str], str]:
        subprocess.run([sys.executable, "-m", "tunebench.cli", "report", "--out", str(root / "r")], cwd=root,
                       check=True, capture_output=True)
        md = (root / "r" / "report.md").read_text()
        head = "### Recorded, but no suite declares them (no row)"
        assert head[4:] in (root / "r" / "report.html").read_text()
        table = [line for line in md.split(head)[0].splitlines() if line.startswith("| axpb")]
        return table, md.split(head)[1].split("\n\n")[1]

    suite.write_text(suite.read_text().replace('Bucket("large", N=(4097, None), shapes=[(20000,), (50000,)]),', ""))
    table, apart = report()
    assert [row.split(" | ")[1] for row in table] == ["small"]
    assert re.fullmatch(rf"- axpb large float32: \d+ configs recorded, but no suite under {re.escape(str(root))}/suites "
                        rf"declares the bucket: best\(\) serves none of them, and an export leaves them out", apart), apart
    suite.write_text(suite.read_text().replace('"axpb",\n    buckets', '"axpy",\n    buckets'))
    table, apart = report()
    assert table == [] and [line.split(":")[0] for line in apart.splitlines()] == ["- axpb large float32",
                                                                                  "- axpb small float32"]
    assert apart.splitlines()[1].endswith("declares the kernel: best() still answers for it by name from the "
                                          "records alone, and an export leaves them out")


def test_report_reads_the_suites_where_they_are_not_the_projects_suites_folder(project, pytester, capsys,
                                                                               monkeypatch):
    """It said "no declaration of axpb under <root>/suites" and told to tune a folder that holds none."""
    from tunebench.kernel import REGISTRY

    root = project()
    suite = root / "suites" / "test_axpb.py"  # the heuristic served: what best() says needs the declaration
    suite.write_text(suite.read_text().replace('{"vec": [1, 2, 4], "unroll": (1, 2)', '{"vec": [2], "unroll": (1,)'))
    (root / "suites").rename(root / "ops")
    assert pytester.runpytest("ops", *TUNE, "-k", "small").ret == 0
    monkeypatch.delitem(REGISTRY, "axpb")  # a reviewer's process, which never imported the suite
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    assert f"no declaration of axpb under {root / 'suites'}" in (root / "r" / "report.md").read_text()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r"),
                 "--suites", str(root / "ops")]) == 0
    assert "no declaration of axpb" not in (root / "r" / "report.md").read_text()
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r"), "--suites", "opz"]) == 2
    assert capsys.readouterr().err == "tunebench report: --suites opz: no such folder or file\n"


def test_a_tunes_point_in_the_history_is_the_figure_its_final_round_published():
    """The plot took the round of every finalist (0.447 ms) where the table and best() publish
    the pick met alone with the heuristic (0.481 ms): the first point stood below every gate's."""
    bucket = Bucket("big", N=(1, None), shapes=[(1000,), (2000,)])
    check = {"kind": "tune", "winner": 0, "shapes": [
        {"shape": [1000], "finalist_ms": [0.337], "baseline_ms": 0.7, "confirmed_ms": [0.342, 0.71]},
        {"shape": [2000], "finalist_ms": [0.593], "baseline_ms": 1.4, "confirmed_ms": [0.675, 1.38]}]}
    assert _check_ms(check, bucket) == pytest.approx(confirmed_ms(check, bucket)[0])
    assert _check_ms(check, bucket) == pytest.approx(bucket.objective({(1000,): 0.342, (2000,): 0.675}))


def _drawn(monkeypatch, plot, views):
    """The axes a plot drew, kept open (its file is not written)."""
    kept = []
    monkeypatch.setattr("tunebench.report._save", lambda fig, path: kept.append(fig) or path)
    plot(views, Path("unused.png"), "d")
    return kept[0].axes


def test_the_distributions_best_line_is_the_trials_fastest_where_no_final_round_confirmed_one(monkeypatch):
    """Its final round disturbed, best() serves the heuristic: the green "best (trials)" line sat on
    the heuristic's at 1.2 ms, while most configs were well left of it."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView, plot_distribution

    bucket = Bucket("narrow", N=(1, None), shapes=[(8,)])
    served = Choice({"vec": 8}, "heuristic", "k", (8,), "float32", "narrow", True, "d", baseline_ms=1.2)
    objectives = {(("vec", 16),): 0.75, (("vec", 4),): 0.8, (("vec", 8),): 1.2}
    view = TaskView("k", "cpu", "float32", bucket, "h", objectives, 1.2, {"ok": 3}, [1.2, 0.8, 0.75],
                    {k: dict(k) for k in objectives}, heuristic=frozenset({(("vec", 8),)}), served=served)
    ax = _drawn(monkeypatch, plot_distribution, [view])[0]
    drawn = {line.get_label(): line.get_xdata()[0] for line in ax.lines}
    assert drawn == {"best by its trials (unconfirmed)": 0.75, "heuristic (trials)": 1.2}


def test_the_distributions_unconfirmed_best_line_is_the_config_best_names_stopped_early_or_not(monkeypatch):
    """best()'s note names the trials' fastest counting a config stopped early on one of a bucket's
    shapes, and its speedup: the line was drawn at the fastest run to the end, another config."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView, plot_distribution

    bucket = Bucket("narrow", N=(1, None), shapes=[(8,), (64,)])
    served = Choice({"vec": 8}, "heuristic", "k", (8,), "float32", "narrow", True, "d", baseline_ms=1.2,
                    unconfirmed="no final round confirmed a pick on this bucket (...), so the trials' fastest "
                                "[vec:2], 2.00x by its trials alone, is not served", unconfirmed_ms=0.6)
    objectives = {(("vec", 16),): 0.75, (("vec", 8),): 1.2}  # vec:2 stopped early on (64,): none of them
    view = TaskView("k", "cpu", "float32", bucket, "h", objectives, 1.2, {"ok": 5, "early_stopped": 1},
                    [1.2, 0.75], {k: dict(k) for k in objectives}, heuristic=frozenset({(("vec", 8),)}), served=served)
    ax = _drawn(monkeypatch, plot_distribution, [view])[0]
    drawn = {line.get_label(): line.get_xdata()[0] for line in ax.lines}
    assert drawn == {"best by its trials (unconfirmed)": 0.6, "heuristic (trials)": 1.2}


def test_the_history_marks_runs_made_with_uncommitted_changes_and_names_its_red_cross(monkeypatch):
    """A regression measured on a dirty tree was credited to its commit, which never held it; and the
    red cross had no legend."""
    from tunebench.report import TaskView, plot_history

    bucket = Bucket("all", N=(1, None), shapes=[(8,)])
    tune = {"kind": "tune", "winner": None, "git_commit": "118cbb7aa", "git_dirty": False,
            "shapes": [{"shape": [8], "best": {}, "baseline_ms": 2.0}]}
    failed = {"kind": "gate", "outcome": "fail", "git_commit": "118cbb7aa", "git_dirty": True,
              "shapes": [{"shape": [8], "configs": {}, "objectives": [], "best_ms": 9.0}]}
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, failed])
    ax = _drawn(monkeypatch, plot_history, [view])[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["118cbb7\ntune", "118cbb7+dirty\ngate"]
    # no verdict recorded to scale its time by: its own, hollow
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["gate run failed", "raw time on shapes without a scaled one"]
    from tunebench.report import revision
    assert revision({"git_commit": None}) == "no commit"  # no git: no commit to name


def _tuned_store(*checks):
    """A stand-in for the records at a revision, with their final rounds (the views are stubbed)."""
    from types import SimpleNamespace
    return SimpleNamespace(checks=lambda kind: [c for c in checks if c["kind"] == kind])


TUNED = _tuned_store({"kind": "tune"})


def test_a_task_timed_neither_then_nor_now_is_no_change(monkeypatch):
    """Its trials all disturbed at the revision and now: it was listed as "nothing timed then"."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("wide", N=(1, None), shapes=[(8,)])
    served = Choice({"vec": 8}, "heuristic", "k", (8,), "float32", "wide", True, "d")
    view = TaskView("layernorm", "cpu", "float32", bucket, "h", {}, None, {"ok": 3}, [], {}, served=served)
    assert _changes(_before(TUNED, [view]), [view]) == ([], 1)
    timed = dataclasses.replace(view, served=dataclasses.replace(served, baseline_ms=1.0))
    assert _changes(_before(TUNED, [view]), [timed])[0][0][-2] == "nothing timed then"  # timed now: a change


def test_a_tuned_pick_timed_then_and_not_now_is_a_row_flagged_dropped():
    """A bucket's shapes changed since the revision, and best() serves the heuristic, untimed, in
    place of the 1.50x pick: the task was neither a row nor counted unchanged."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("small", N=(1, 4095), shapes=[(2048,)])
    then = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, confirmed=(1.0, 1.5),
                    served=Choice({"tile": 1024}, "tuned", "k", (2048,), "float32", "small", True, "d", 1.0, 1.5))
    now = dataclasses.replace(then, confirmed=None, served=Choice({"tile": 256}, "heuristic", "k", (2048,),
                                                                  "float32", "small", True, "d"))
    rows, same = _changes(_before(TUNED, [then]), [now])
    assert same == 0 and rows == [["k", "small", "float32", "1", "-", "1.50x -> -",
                                   "tile:1024 -> the heuristic, nothing timed now", "**dropped**"]]
    kept = dataclasses.replace(now, served=dataclasses.replace(then.served, objective_ms=None, baseline_ms=None))
    assert _changes(_before(TUNED, [then]), [kept])[0][0][-2:] == ["same config, nothing timed now", ""]


def test_a_task_tuned_again_on_a_slower_template_is_flagged_where_its_lead_held():
    """A template made 1.5x slower and tuned again slows its heuristic alike: its lead held, and
    the row read as a re-tune of unchanged code whose time drifted between the runs."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(1, None), shapes=[(8,)])
    then = TaskView("k", "cpu", "float32", bucket, "h1", {}, None, {}, [], {}, confirmed=(1.0, 1.32),
                    served=Choice({"vec": 8}, "tuned", "k", (8,), "float32", "all", True, "d", 1.0, 1.32))
    slower = dataclasses.replace(then.served, objective_ms=1.35, baseline_ms=1.9)  # 1.32x -> 1.41x
    retuned = dataclasses.replace(then, served=slower)
    edited = dataclasses.replace(retuned, source_hash="h2")
    assert [r[-2:] for r in _changes(_before(TUNED, [then]), [retuned])[0]] == [["same config", ""]]
    assert [r[-2:] for r in _changes(_before(TUNED, [then]), [edited])[0]] == [
        ["same config, template changed", "**slower, template changed**"]]
    quicker = dataclasses.replace(edited, served=dataclasses.replace(then.served, objective_ms=0.9, baseline_ms=1.2))
    assert [r[-2:] for r in _changes(_before(TUNED, [then]), [quicker])[0]] == [["same config, template changed", ""]]


def test_compare_flags_by_the_projects_gate_threshold(tmp_path, monkeypatch, capsys):
    """The column said "lead moved beyond 10%" in a project whose gate fails at 50%."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(1, None), shapes=[(8,)])
    then = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, confirmed=(1.0, 2.0),
                    served=Choice({"vec": 8}, "tuned", "k", (8,), "float32", "all", True, "d", 1.0, 2.0))
    now = dataclasses.replace(then, served=dataclasses.replace(then.served, objective_ms=1.3))  # 2.0x -> 1.54x
    assert [r[-1] for r in _changes(_before(TUNED, [then]), [now])[0]] == ["**lead shrank**"]
    assert [r[-1] for r in _changes(_before(TUNED, [then]), [now], threshold=0.5)[0]] == [""]
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "records").mkdir()
    name = "cpu-amd-epyc-f26m2-2t-506d4e.json"
    (tmp_path / "records" / name).write_bytes((root / "records" / name).read_bytes())
    (tmp_path / "pytest.ini").write_text("[pytest]\ngate_threshold = 0.5\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "records")
    report = ["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "r"), "--compare", "HEAD"]
    seen = []
    monkeypatch.setattr("tunebench.report._changes", lambda before, views, threshold=None:
                        seen.append(threshold) or ([], 0))
    assert main(report) == 0 and seen == [0.5]
    (tmp_path / "pytest.ini").write_text("[pytest]\ngate_threshold = half\n")  # as the gate would say it
    assert main(report) == 2
    assert "ini option gate_threshold = half: " in capsys.readouterr().err


def test_panels_without_data_say_so_and_draw_no_time_axis(monkeypatch):
    """An empty history panel drew -0.04 to 0.04 ms, an empty convergence panel bare axes, an empty
    distribution a 0-1 axis; and the histogram's counts had no label."""
    from tunebench.report import TaskView, plot_convergence, plot_distribution, plot_history

    bucket = Bucket("wide", N=(1, None), shapes=[(8,)])
    empty = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {"ok": 3}, [math.inf] * 3, {})
    for plot in (plot_history, plot_convergence, plot_distribution):
        ax = _drawn(monkeypatch, plot, [empty])[0]
        assert [t.get_text() for t in ax.texts if t.get_text().startswith("no data: ")], plot.__name__
        assert list(ax.get_yticks()) == [] and list(ax.get_xticks()) == [], plot.__name__
    some = dataclasses.replace(empty, objectives={(("vec", 4),): 0.8, (("vec", 8),): 1.2}, baseline_ms=1.2)
    assert _drawn(monkeypatch, plot_distribution, [some])[0].get_ylabel() == "configs"


def test_compare_on_records_outside_git_says_so(tmp_path, capsys):
    """It said "not a git revision of <folder>", blaming the revision."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "records").mkdir()
    name = "cpu-amd-epyc-f26m2-2t-506d4e.json"
    (tmp_path / "records" / name).write_bytes((root / "records" / name).read_bytes())
    assert main(["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "r"),
                 "--compare", "HEAD"]) == 2
    assert f"--compare HEAD: {tmp_path / 'records'} is not in a git repository" in capsys.readouterr().err
    assert not (tmp_path / "r" / "report.md").exists()


def test_compare_with_records_from_before_final_rounds_reads_their_trials_best(monkeypatch):
    """No final round in the old records: best() reads them today as serving the heuristic, and
    9 of 12 tasks were flagged "faster" against "the heuristic 1.00x*"."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(1, None), shapes=[(8,)])
    fast, heuristic = (("vec", 4),), (("vec", 8),)
    then = TaskView("k", "cpu", "float32", bucket, "h", {fast: 1.0, heuristic: 2.0}, 2.0, {"ok": 2}, [2.0, 1.0],
                    {fast: {"vec": 4}, heuristic: {"vec": 8}}, heuristic=frozenset({heuristic}),
                    served=Choice({"vec": 8}, "heuristic", "k", (8,), "float32", "all", True, "d", baseline_ms=2.0))
    now = dataclasses.replace(then, confirmed=(1.0, 2.0), checks=[{"kind": "tune"}],
                              served=Choice({"vec": 4}, "tuned", "k", (8,), "float32", "all", True, "d", 1.0, 2.0))
    legacy = _before(_tuned_store({"kind": "gate"}), [then])
    assert _changes(legacy, [now]) == ([], 1)
    quicker = dataclasses.replace(now, served=dataclasses.replace(now.served, objective_ms=0.8), confirmed=(0.8, 2.0))
    assert [r[3:7] for r in _changes(legacy, [quicker])[0]] == [["1*", "0.8 (-20%)", "2.00x* -> 2.50x", "same config"]]
    # records with final rounds, this task's never ran (interrupted): best() served the heuristic then
    assert [r[6] for r in _changes(_before(TUNED, [then]), [now])[0]] == ["the heuristic -> vec:4"]


def test_a_speedup_is_shown_with_its_range_over_the_final_rounds_processes():
    """One figure hid that layernorm's 1.22x was 1.16x in one fresh process and 1.52x in another."""
    bucket = Bucket("b", N=(1, None), shapes=[(8,), (64,)])
    check = {"shapes": [{"shape": [8], "ratios": [0.5, 0.8], "confirmed_ms": [1.0, 2.0]},
                        {"shape": [64], "ratios": [0.5, 0.2], "confirmed_ms": [1.0, 4.0]}]}
    low, high = _spread(check, bucket)  # each shape's highest ratio over the bucket, and its lowest, inverted
    assert math.isclose(low, 1 / math.sqrt(0.8 * 0.5)) and math.isclose(high, 1 / math.sqrt(0.5 * 0.2))
    del check["shapes"][1]["confirmed_ms"]  # published from another round than the ratios: no range beside it
    assert _spread(check, bucket) is None


def test_the_range_of_a_speedup_over_several_shapes_holds_the_speedup_published():
    """Each shape's processes are its own, and the i-th of each were read as one process: a
    stencil's final round published 5.96x over two shapes with a range of 5.97-6.19x."""
    bucket = Bucket("small", N=(3, 767), M=(3, None), shapes=[(512, 512), (256, 1024)])
    check = {"shapes": [  # as its records hold them
        {"shape": [512, 512], "ratios": [0.15873, 0.16947, 0.15746, 0.17110, 0.16999],
         "confirmed_ms": [0.06686, 0.3912555]},
        {"shape": [256, 1024], "ratios": [0.16463, 0.16475, 0.16682, 0.16426, 0.16456],
         "confirmed_ms": [0.0643905, 0.3905395]}]}
    shapes = [(512, 512), (256, 1024)]
    published = (bucket.objective({s: e["confirmed_ms"][1] for s, e in zip(shapes, check["shapes"])})
                 / bucket.objective({s: e["confirmed_ms"][0] for s, e in zip(shapes, check["shapes"])}))
    low, high = _spread(check, bucket)
    assert f"{published:.2f}" == "5.96" and low <= published <= high, (low, published, high)


def test_the_range_of_a_speedup_over_several_shapes_counts_a_shape_whose_pick_is_its_heuristic_at_1():
    """The final round measures no ratios on a shape where the pick is that shape's heuristic (it
    judges the lead there at 1.0): a bucket with such a shape showed no range at all."""
    bucket = Bucket("b", N=(1, None), shapes=[(8,), (64,)])
    check = {"shapes": [{"shape": [8], "best": {"vec": 4}, "baseline": {"vec": 2}, "ratios": [0.5, 0.8],
                         "confirmed_ms": [1.0, 2.0]},
                        {"shape": [64], "best": {"vec": 4}, "baseline": {"vec": 4}}]}
    low, high = _spread(check, bucket)
    assert math.isclose(low, 1 / math.sqrt(0.8)) and math.isclose(high, 1 / math.sqrt(0.5))
    check["shapes"][1]["baseline"] = {"vec": 2}  # another config there, and no ratios: records of before them
    assert _spread(check, bucket) is None
    kept = {"shapes": [{"shape": [n], "best": {"vec": 2}, "baseline": {"vec": 2}} for n in (8, 64)]}
    assert _spread(kept, bucket) is None  # the heuristic stayed on every shape: no lead measured, no range


def commit(root, message):
    if not (root / ".git").exists():
        git(root, "init", "-q")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", message)


def test_compare_judges_a_revisions_records_by_its_own_suites_and_names_what_is_gone(twice_project, pytester):
    """A suite edit that took the tuned pick out of the space read "1 task unchanged" (the old
    records were judged by today's suites, which serve the heuristic on them too), a bucket
    renamed since left the tuned one out of the comparison, and the row kept the old pick's range."""
    root = twice_project
    suite = root / "suites" / "test_twice.py"  # its space from a helper module beside it, as the shipped suites'
    suite.write_text("from passes import REPS\n" + suite.read_text().replace('Space({"reps": [1, 4]', 'Space({"reps": REPS'))
    (root / "suites" / "passes.py").write_text("REPS = [1, 4]\n")
    tuned = pytester.runpytest("suites", *TUNE, "--tune-trials", "4")
    tuned.assert_outcomes(passed=10)
    picks = [line for line in tuned.stdout.lines if re.match(r"twice +(small|large) .* reps:1 pad:\d +reps:4 pad:0$", line)]
    assert len(picks) == 2, tuned.stdout.str()  # both buckets tuned to one pass over the data
    commit(root, "tuned")
    (root / "suites" / "passes.py").write_text("REPS = [4]\n")
    suite.write_text(suite.read_text().replace('Bucket("large"', 'Bucket("huge"'))
    report = subprocess.run([sys.executable, "-m", "tunebench.cli", "report", "--records", str(root / "records"),
                             "--out", str(root / "r"), "--compare", "HEAD"], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr  # its own process: this one holds the suites as the tune read them
    md = (root / "r" / "report.md").read_text()
    main_table, changes = md.split("### Changes since HEAD")
    assert re.search(r"\| twice \| small \| float32 \| \d+ \| [\d.]+ \| [\d.]+ \| 1\.00x \| the heuristic \|", main_table), md
    assert re.search(r"\| twice \| small \| float32 \| [\d.]+ \| [\d.]+ \([+-]\d+%\) \| [\d.]+x -> 1\.00x \| "
                     r"reps:1 pad:\d -> the heuristic \| \*\*lead shrank\*\* \|", changes), changes
    assert re.search(r"\| twice \| large \| float32 \| [\d.]+ \| - \| [\d.]+x -> - \| gone: reps:1 pad:\d then, no row "
                     r"now \| \*\*dropped\*\* \|", changes), changes
    assert "0 tasks unchanged since HEAD." in changes, changes


def test_compare_with_a_revisions_records_that_cannot_be_read_still_reports_and_names_them(twice_project, pytester,
                                                                                             capsys):
    """A broken records file at the base revision ended the report (exit 2, nothing written), and
    its message named a temporary copy."""
    root = twice_project
    pytester.runpytest("suites", *TUNE, "--tune-trials", "2", "-k", "small")
    (path,) = (root / "records").glob("*.json")
    good = path.read_text()
    data = json.loads(good)
    del next(iter(data["trials"].values()))["status"]
    path.write_text(json.dumps(data))
    commit(root, "broken")
    path.write_text(good)
    capsys.readouterr()
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r"), "--compare", "HEAD"]) == 0
    md = (root / "r" / "report.md").read_text()
    assert re.search(rf"The records of \S+ at HEAD cannot be read \(HEAD:records/{re.escape(path.name)}: trial \d+ "
                     rf"lacks status.*\): nothing is compared\.", md), md
    assert "tunebench-report-" not in md


def test_compare_in_a_records_only_repository_and_beside_a_link_out_of_the_project(tmp_path, capsys):
    """The records folder as the repository's top ended the report (not in the subpath), and a
    link to an absolute path anywhere in the project did too (tarfile's AbsoluteLinkError)."""
    shipped = Path(__file__).resolve().parent.parent / "records" / "cpu-amd-epyc-f26m2-2t-506d4e.json"
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / shipped.name).write_bytes(shipped.read_bytes())
    (tmp_path / "records" / "stdio.h").symlink_to("/usr/include/stdio.h")
    commit(tmp_path / "records", "records alone")
    assert main(["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "r"),
                 "--compare", "HEAD"]) == 0, capsys.readouterr().err
    assert re.search(r"\d+ tasks unchanged since HEAD\.", (tmp_path / "r" / "report.md").read_text())
    (tmp_path / "project" / "records").mkdir(parents=True)  # and in a project of a repository, beside the link
    (tmp_path / "project" / "records" / shipped.name).write_bytes(shipped.read_bytes())
    (tmp_path / "project" / "kernels").mkdir()
    (tmp_path / "project" / "kernels" / "stdio.h").symlink_to("/usr/include/stdio.h")
    commit(tmp_path / "project", "a project")
    assert main(["report", "--records", str(tmp_path / "project" / "records"), "--out", str(tmp_path / "r"),
                 "--compare", "HEAD"]) == 0, capsys.readouterr().err
    assert re.search(r"\d+ tasks unchanged since HEAD\.", (tmp_path / "r" / "report.md").read_text())


def test_a_check_of_the_buckets_former_shapes_is_no_point_of_its_history():
    """A bucket whose representative shape changed, (16, 16384) -> (64, 16384), and was tuned
    again: the report ended with "tunebench report: (64, 16384)", a KeyError of the earlier
    round's time read as today's objective. Its time is another shape's: no point."""
    from tunebench.report import TaskView, history

    bucket = Bucket("long_rows", S=(8, None), R=(4097, None), shapes=[(64, 16384)])
    old = {"kind": "tune", "winner": None, "shapes": [{"shape": [16, 16384], "best": {}, "baseline_ms": 0.03}]}
    new = {"kind": "tune", "winner": None, "shapes": [{"shape": [64, 16384], "best": {}, "baseline_ms": 0.08}]}
    assert _check_ms(old, bucket) is None
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[old, new])
    assert [(c, pytest.approx(ms)) for c, ms, _ in history(view)] == [(new, 0.08)]


def test_a_gate_run_of_the_buckets_former_shapes_is_not_its_last_gate():
    """A bucket given (2048,) beside (65536,) since its tune and last gate: the row said "pass at"
    that gate's commit, which judged (65536,) alone, while today's gate skips the bucket until it
    is tuned on its shapes."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("large", N=(1024, None), shapes=[(2048,), (65536,)])
    tune = {"kind": "tune", "winner": None, "shapes": [{"shape": [65536], "best": {"tile": 256}}]}
    gate = {"kind": "gate", "outcome": "pass", "shapes": [{"shape": [65536], "configs": {"best": {"tile": 256}}}]}
    served = Choice({"tile": 256}, "heuristic", "k", (2048,), "float32", "large", True, "d")
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[tune, gate], served=served)
    assert view.last_gate is None and _rows([view])[0][-1] == "-"
    today = {**gate, "shapes": [{"shape": [2048], "configs": {}}, {"shape": [65536], "configs": {}}]}
    assert dataclasses.replace(view, checks=[tune, gate, today]).last_gate is today


def test_a_best_made_faster_whose_heuristic_got_faster_still_is_not_flagged_slower():
    """A pull request that undid a slowdown of the template: the best 0.0587 -> 0.0341 ms (-42%),
    the heuristic faster still, 107.96x -> 47.73x; its row was flagged **slower** beside the -42%.
    The flag says what moved: the lead."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("rows", N=(1, None), shapes=[(8,)])
    then = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, confirmed=(0.05868, 6.335),
                    served=Choice({"vec": 8}, "tuned", "k", (8,), "float32", "rows", True, "d", 0.05868, 6.335))
    now = dataclasses.replace(then, served=dataclasses.replace(then.served, objective_ms=0.03411, baseline_ms=1.628))
    (row,) = _changes(_before(TUNED, [then]), [now])[0]
    assert row[4].endswith("(-42%)") and row[-1] == "**lead shrank**"
    grew = dataclasses.replace(then, served=dataclasses.replace(then.served, objective_ms=0.06, baseline_ms=12.0))
    assert _changes(_before(TUNED, [then]), [grew])[0][0][-1] == "lead grew"


def test_a_distribution_of_one_time_draws_no_negative_time(monkeypatch):
    """A bucket where only the heuristic ran to the end (0.0915 ms): numpy's bins spanned it by
    0.5 either side, and the time axis ran from -0.3 ms to 0.6 ms."""
    from tunebench.report import TaskView, plot_distribution

    bucket = Bucket("short_rows", N=(1, None), shapes=[(8,)])
    objectives = {(("vec", 8),): 0.0915}
    view = TaskView("k", "cpu", "float32", bucket, "h", objectives, 0.0915, {"ok": 1}, [0.0915],
                    {k: dict(k) for k in objectives}, heuristic=frozenset(objectives))
    (ax,) = _drawn(monkeypatch, plot_distribution, [view])
    left, right = ax.get_xlim()
    assert 0 <= left < 0.0915 < right < 0.2
    assert ax.get_title() == "k[short_rows-float32]: 1 config"  # it said "1 configs"


def test_a_declared_task_never_tuned_here_is_named_though_it_has_no_row(project, pytester):
    """A pull request that adds a bucket: the gate skips it ("never tuned here") and passes, while
    the report said nothing of it ("4 tasks unchanged"), as if every declared bucket were tuned."""
    root = project()
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small").assert_outcomes(
        passed=2, skipped=4, deselected=8)
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    md = (root / "r" / "report.md").read_text()
    head = "### Declared, but never tuned on this device (no row)"
    assert head[4:] in (root / "r" / "report.html").read_text()
    untuned = md.split(head)[1].split("\n\n")[1].splitlines()
    assert "- axpb large float32: best() serves the heuristic; `pytest suites/test_axpb.py --tune` tunes it" in untuned
    assert not any(line.startswith("- axpb small ") for line in untuned), untuned


def test_a_row_counts_the_trials_of_the_tasks_declaration_not_of_one_since_replaced(project, pytester):
    """A reference fixed since (an accumulating output declared inout): its wrong results stayed in
    the row's failed trials and its configs, where the tune said nothing failed and best() ranks
    today's declaration's trials alone."""
    import tunebench.backends

    root = project()
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small").assert_outcomes(
        passed=2, skipped=4, deselected=8)
    store = RecordStore.for_device(root / "records", tunebench.backends.fingerprint("cpu"))
    (task,) = store.tasks(kernel="axpb", bucket="small")
    (today,) = task_views(store, root / "suites")
    earlier = {**store.trials(kernel="axpb", bucket="small")[0], "setup_hash": "an earlier declaration",
               "config": {"vec": 4, "unroll": 1, "mode": 0}, "status": "wrong_result", "baseline": False}
    store.add(earlier)
    store.compact()
    (view,) = task_views(store, root / "suites")
    assert task["setup_hash"] != earlier["setup_hash"]
    assert (view.statuses, view.configs) == (today.statuses, today.configs)
    # a declaration none of whose trials ran to the end yet (one disturbed): best() ranks the earlier one's, as the row
    store.put_task({**task, "setup_hash": "today's"})
    store.add({**store.trials(kernel="axpb", bucket="small")[0], "setup_hash": "today's", "verdict": "disturbed"})
    store.compact()
    (view,) = task_views(store, root / "suites")
    assert view.objectives == today.objectives and view.objectives


def test_trials_a_tune_killed_with_9_left_in_the_journal_are_named_and_left_there(pytester, capsys):
    """Every reader counts the journal's trials, but the records file a reviewer commits holds them
    only once a later run folds them: the report of a tune killed with -9 said nothing of them."""
    (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (pytester.path / "slow.c").write_text(SLOW_C)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "test_slow.py").write_text(textwrap.dedent(SLOW_SUITE))
    command = [sys.executable, "-m", "pytest", "suites", *TUNE, "--tune-strategy", "brute_force", "-q"]
    killed_with_9(command, pytester.path)
    records = pytester.path / "records"
    (path,) = records.glob("*.json")
    store = RecordStore(path)
    left, before = len(store.pending()), (path.read_bytes(), store.journal.read_bytes())
    assert left >= 3
    capsys.readouterr()
    assert main(["report", "--records", str(records), "--out", str(pytester.path / "r")]) == 0
    note = (f"{path.name} lacks {left} measurements counted here, still in its journal {store.journal} (left by a run "
            f"killed, or unable to write the file): the next pytest run on this device folds the journal in "
            f"(`pytest suites --tune` resumes the tune); run it before committing {path.name}")
    assert f"tunebench report: {note}\n" in capsys.readouterr().err
    assert f"**Unfolded journal**: {note}\n" in (pytester.path / "r" / "report.md").read_text()
    assert f"<b>Unfolded journal</b>: {html.escape(note)}</p>" in (pytester.path / "r" / "report.html").read_text()
    assert (path.read_bytes(), store.journal.read_bytes()) == before  # read only: the report folds nothing
    resumed = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert not store.journal.exists()  # the command named folded them
    assert main(["report", "--records", str(records), "--out", str(pytester.path / "r")]) == 0
    assert "Unfolded journal" not in (pytester.path / "r" / "report.md").read_text()
    assert "journal" not in capsys.readouterr().err


@pytest.mark.parametrize("damage, said", [("corrupted line", ["line 1 is corrupted", "line 2: lacks kernel"]),
                                          ("binary", ["line 1 is not text (binary data at byte 0)"]),
                                          ("a folder", ["cannot be read (Is a directory)"])])
def test_a_damaged_journal_is_named_and_the_other_devices_are_reported(tmp_path, capsys, damage, said):
    """A journal of bytes that are no text, or a folder in its place, ended the report in a
    traceback (or an error naming no file) where a corrupted line was named; then the bytes were
    said of the whole file, whose other lines hold trials, as if none did. (Its last line: not
    dropped as an append torn by a kill, which writes ASCII.) A damaged line leaves the device's
    other records reported; a journal that cannot be read at all leaves the device out."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "records").mkdir()
    for path in (root / "records").glob("*.json"):
        (tmp_path / "records" / path.name).write_bytes(path.read_bytes())
    journal = RecordStore(tmp_path / "records" / "cpu-amd-epyc-2t-b42c66.json").journal
    journal.parent.mkdir()
    if damage == "a folder":
        journal.mkdir()
    else:
        journal.write_bytes(b"\xff\xfe\n" if damage == "binary" else b'{"broken\n{}\n')
    assert main(["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    md = (tmp_path / "r" / "report.md").read_text()
    assert "\n## cpu-amd-epyc-f26m2-2t-506d4e\n" in md
    for line in said:
        why = f"{journal}: {line}"
        if damage == "a folder":
            assert f"tunebench report: not reported: {why}; it is left untouched" in err and f"- {why}" in md
        else:
            assert f"tunebench report: {why}" in err and "cpu-amd-epyc-2t-b42c66 is reported without it" in err
            assert f"- {why}" in md
    assert ("\n## cpu-amd-epyc-2t-b42c66\n" in md) is (damage != "a folder")
    assert journal.exists()


def test_a_damaged_journal_line_leaves_the_devices_other_records_reported(pytester, capsys):
    """One damaged line of a tune's journal (a non-text line where a disk wrote garbage) left its
    device out of the report altogether (the report of a project of one device was no report at
    all); now its rows are reported, the damaged line is named, and nothing is rewritten."""
    (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (pytester.path / "slow.c").write_text(SLOW_C)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "test_slow.py").write_text(textwrap.dedent(SLOW_SUITE))
    killed_with_9([sys.executable, "-m", "pytest", "suites", *TUNE, "--tune-strategy", "brute_force", "-q"],
                  pytester.path, trials=4)
    records = pytester.path / "records"
    (path,) = records.glob("*.json")
    journal = RecordStore(path).journal
    lines = journal.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 3
    journal.write_bytes(b"".join([lines[0], b"\x00\x9f\xff\n", *lines[2:]]))
    before = path.read_bytes(), journal.read_bytes()
    capsys.readouterr()
    assert main(["report", "--records", str(records), "--out", str(pytester.path / "r")]) == 1
    said = f"{journal}: line 2 is not text (binary data at byte 1); it is left untouched: remove the line or the file"
    assert f"tunebench report: {said}; {path.stem} is reported without it: remove the line before the next tune " \
           f"(`pytest suites --tune`) or gate on this device\n" in capsys.readouterr().err
    md = (pytester.path / "r" / "report.md").read_text()
    assert f"**Damaged records**:\n\n- {said};" in md and "| slow | all | float32 |" in md
    assert html.escape(said) in (pytester.path / "r" / "report.html").read_text()
    assert f"lacks {len(lines) - 1} measurements counted here" in md  # the readable lines of the journal
    assert f"before committing {path.name}, once its damaged lines are removed" in md  # the fold stops on them
    assert (path.read_bytes(), journal.read_bytes()) == before  # read only: nothing dropped or folded
    with pytest.raises(RecordsError, match="line 2 is not text"):  # as best() and a tune still say
        RecordStore(path)


def test_a_journal_a_run_still_going_holds_is_its_own_and_another_records_folder_is_named(tmp_path):
    """Made beside a tune, the report said its journal was left by a run killed; and for records
    kept in another folder it named `pytest suites --tune`, which tunes into records/, leaving
    that folder's journal as it was."""
    from tests.test_records import FINGERPRINT, trial
    from tunebench.report import unfolded

    (tmp_path / "suites").mkdir()
    records = tmp_path / "shared_records"
    records.mkdir()
    store = RecordStore.for_device(records, FINGERPRINT)
    store.add(trial({"a": 1}))
    note = unfolded(RecordStore(store.path))
    assert "(left by a run killed, or unable to write the file)" in note, note
    assert f"(`pytest suites --tune --tune-records {records}` resumes the tune)" in note, note
    with store.task_lock("a task"):
        note = unfolded(RecordStore(store.path))
    assert note == (f"{store.path.name} lacks 1 measurement counted here, still in its journal {store.journal}: a "
                    f"run still going on this device folds them in as it ends")


def test_compare_follows_a_records_folder_moved_since_the_revision(tmp_path, capsys):
    """`git mv records perf/records`: the report said "No records ... all 12 tasks are new since"
    of a revision that held them, at their former path, hiding every change since from the reviewer."""
    shipped = Path(__file__).resolve().parent.parent / "records" / "cpu-amd-epyc-f26m2-2t-506d4e.json"
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / shipped.name).write_bytes(shipped.read_bytes())
    commit(tmp_path, "records")
    (tmp_path / "perf").mkdir()
    git(tmp_path, "mv", "records", "perf/records")
    commit(tmp_path, "moved")
    assert main(["report", "--records", str(tmp_path / "perf" / "records"), "--out", str(tmp_path / "r"),
                 "--compare", "HEAD~1"]) == 0, capsys.readouterr().err
    assert re.search(r"\d+ tasks unchanged since HEAD~1\.", (tmp_path / "r" / "report.md").read_text())


def test_compare_with_a_revisions_suite_that_no_longer_imports_reads_its_tasks_from_the_records(tmp_path, capsys):
    """A suite of the revision that today's tunebench cannot import (a name it no longer has) left its
    kernel undeclared then: every task of it read "new task", however long it had been tuned."""
    shipped = Path(__file__).resolve().parent.parent
    for folder in ("suites", "kernels"):
        shutil.copytree(shipped / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "records").mkdir()
    name = "cpu-amd-epyc-f26m2-2t-506d4e.json"
    (tmp_path / "records" / name).write_bytes((shipped / "records" / name).read_bytes())
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    suite = tmp_path / "suites" / "test_softmax.py"
    text = suite.read_text()
    suite.write_text("from tunebench import NoSuchName  # noqa: F401\n" + text)
    (tmp_path / "suites" / "test_layernorm.py").unlink()  # a kernel undeclared then and now: not dropped since
    commit(tmp_path, "a suite importing what tunebench has no more")
    suite.write_text(text)
    assert main(["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "r"),
                 "--compare", "HEAD"]) == 0, capsys.readouterr().err
    changes = (tmp_path / "r" / "report.md").read_text().split("### Changes since HEAD")[1]
    assert "new task" not in changes and re.search(r"\n\d+ tasks unchanged since HEAD\.", changes), changes
    assert "layernorm" not in changes and "dropped" not in changes, changes


#: A kernel whose fastest ``tag`` depends on the shape: 0 below n = 1500, 2 from it.
BY_SHAPE_C = """\
typedef TB_DTYPE real;
void by_shape(const real *x, real *y, int n)
{
    volatile int spin = 0;
    int cost = n < 1500 ? tag : 2 - tag;
    for (int r = 0; r < cost * 20000; ++r) spin += r;
    for (int i = 0; i < n; ++i) y[i] = x[i] + 1;
}
"""

BY_SHAPE_SUITE = """\
import numpy as np
from tunebench import Bucket, Buckets, Kernel, Space, Variant

by_shape = Kernel(
    "by_shape", buckets=Buckets(["N"], [Bucket("small", N=(1, 4095), shapes=[SHAPE])]),
    args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                    "n": np.int32(shape[0])},
    reference=lambda x, n: x + 1, outputs=["y"],
    cpu=Variant(source="by_shape.c", entry="by_shape", heuristic=lambda shape: {"tag": 1},
                space=Space({"tag": [0, 1, 2]})),
)
"""


def test_a_row_reads_the_final_round_best_reads_after_the_shapes_changed_and_back(pytester):
    """Tuned on (1000,), then on (2000,), then the suite's shapes changed back to (1000,): best()
    served the first round's pick of (1000,), while the row took its final round, its spread and
    its trials from (2000,), the shapes the records last described: no spread beside best()'s
    speedup, and another bucket's trials counted."""
    root = pytester.path
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / "by_shape.c").write_text(BY_SHAPE_C)
    (root / "suites").mkdir()
    suite = root / "suites" / "test_by_shape.py"
    command = [sys.executable, "-m", "pytest", "suites", *TUNE, "--tune-strategy", "brute_force", "-q"]
    for shape in ("(1000,)", "(2000,)"):
        suite.write_text(BY_SHAPE_SUITE.replace("SHAPE", shape))
        tuned = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)
        assert tuned.returncode == 0, tuned.stdout[-2000:]
    suite.write_text(BY_SHAPE_SUITE.replace("SHAPE", "(1000,)"))  # changed back, not tuned again
    (path,) = (root / "records").glob("*.json")
    store = RecordStore(path)
    first, second = store.checks(kind="tune")
    assert [e["shape"] for e in first["shapes"]] == [[1000]] and [e["shape"] for e in second["shapes"]] == [[2000]]
    served = lookup("by_shape", (1000,), records=root / "records", suites=root / "suites")
    assert served.config == first["shapes"][0]["best"] == {"tag": 0}
    (view,) = task_views(store, root / "suites")
    assert view.bucket.shapes == [(1000,)]
    assert view.final == config_key(served.config) and view.serves_final
    assert view.confirmed == pytest.approx((served.objective_ms, served.baseline_ms))
    assert view.spread is not None  # the first round's, beside its speedup
    ones = [t for t in store.trials() if t["shape"] == [1000]]
    assert sum(view.statuses.values()) == len(ones)  # (1000,)'s trials, not (2000,)'s

    # a declaration changed and back (a tolerance): the round of today's declaration, as best() reads
    suite.write_text(BY_SHAPE_SUITE.replace("SHAPE", "(1000,)").replace(
        'outputs=["y"],', 'outputs=["y"], tolerance={"float32": (1e-5, 1e-5)},'))
    tuned = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)
    assert tuned.returncode == 0, tuned.stdout[-2000:]
    suite.write_text(BY_SHAPE_SUITE.replace("SHAPE", "(1000,)"))
    store = RecordStore(path)
    assert len(store.checks(kind="tune")) == 3
    (view,) = task_views(store, root / "suites")
    assert view.confirmed == pytest.approx(confirmed_ms(first, view.bucket))


def test_a_bucket_given_a_shape_since_its_tune_is_reported_not_a_key_error(pytester, capsys):
    """Tuned on (1000,), then the bucket given (2000,) beside it: the heuristic's recorded times
    cover the tune's shapes alone, and the report stopped at a bare KeyError, "tunebench report:
    (2000,)", writing nothing."""
    root = pytester.path
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / "by_shape.c").write_text(BY_SHAPE_C)
    (root / "suites").mkdir()
    suite = root / "suites" / "test_by_shape.py"
    suite.write_text(BY_SHAPE_SUITE.replace("SHAPE", "(1000,)"))
    command = [sys.executable, "-m", "pytest", "suites", *TUNE, "--tune-strategy", "brute_force", "-q"]
    tuned = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)
    assert tuned.returncode == 0, tuned.stdout[-2000:]
    suite.write_text(BY_SHAPE_SUITE.replace("SHAPE", "(1000,), (2000,)"))
    assert main(["report", "--records", str(root / "records"), "--suites", str(root / "suites"),
                 "--out", str(root / "r")]) == 0, capsys.readouterr().err
    text = (root / "r" / "report.md").read_text()
    assert "| by_shape | small | float32 |" in text, text
    assert "representative shapes changed since its final round" in text, text


def test_a_row_reads_the_final_round_best_reads_after_the_template_changed_and_back(pytester, monkeypatch):
    """Tuned, then the template edited and tuned again, then the edit undone: best() served the
    first template's pick, confirmed by its final round, while the row took its trials from the
    edit the records last described and its final round from none (a * beside best()'s figures)."""
    root = pytester.path
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / "suites").mkdir()
    (root / "suites" / "test_by_shape.py").write_text(BY_SHAPE_SUITE.replace("SHAPE", "(1000,)"))
    command = [sys.executable, "-m", "pytest", "suites", *TUNE, "--tune-strategy", "brute_force", "-q"]
    for template in (BY_SHAPE_C, BY_SHAPE_C.replace("n < 1500", "n >= 1500")):  # the edit favours tag 2
        (root / "by_shape.c").write_text(template)
        tuned = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)
        assert tuned.returncode == 0, tuned.stdout[-2000:]
    (root / "by_shape.c").write_text(BY_SHAPE_C)  # the edit undone, not tuned again
    (path,) = (root / "records").glob("*.json")
    store = RecordStore(path)
    first, second = store.checks(kind="tune")
    assert first["source_hash"] != second["source_hash"] == store.tasks()[0]["source_hash"]
    served = lookup("by_shape", (1000,), records=root / "records", suites=root / "suites")
    assert served.config == first["shapes"][0]["best"] == {"tag": 0} and served.note is None
    (view,) = task_views(store, root / "suites")
    assert view.source_hash == first["source_hash"]
    assert view.final == config_key(served.config) and view.serves_final
    assert view.confirmed == pytest.approx(confirmed_ms(first, view.bucket))
    assert view.spread is not None  # the first round's, beside its speedup
    assert sum(view.statuses.values()) == sum(t["source_hash"] == first["source_hash"] for t in store.trials())
    assert view.changed is None  # the template alone changed: best() says so where it serves another's pick

    # edited again, not tuned since: the row is the latest tune's pick, which best() serves, and says so
    monkeypatch.setattr(tunebench.kernel, "REREAD_S", 0.0)  # this process reads the edit at once
    (root / "by_shape.c").write_text(BY_SHAPE_C.replace("x[i] + 1", "1 + x[i]"))
    served = lookup("by_shape", (1000,), records=root / "records", suites=root / "suites")
    assert served.config == second["shapes"][0]["best"]
    (view,) = task_views(store, root / "suites")
    assert (view.source_hash, view.final) == (second["source_hash"], config_key(served.config))
    assert view.confirmed == pytest.approx(confirmed_ms(second, view.bucket))
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    md = (root / "r" / "report.md").read_text()
    assert re.search(rf"\| by_shape \| small \| float32 \| 3 \| [^|*]+ \| [^|*]+ \| [^|*]+ \| "
                     rf"{re.escape(config_text(served.config))} \|", md), md
    assert (f"- **by_shape[small-float32]**: tuned with an earlier by_shape.c, or a header it includes "
            f"({second['source_hash']}; now ") in md
    assert "`pytest suites/test_by_shape.py --tune` tunes this one" in md


def test_a_row_whose_declaration_changed_since_its_tune_says_so_and_how_to_tune_it_again(project, pytester):
    """A tolerance tightened, not tuned since: best() serves the pick chosen under the earlier one
    without a word, the gate says it measures with today's, and the report said nothing of it."""
    import tunebench.backends

    root = project()
    pytester.runpytest("suites", *TUNE, "--tune-trials", "1", "-k", "small").assert_outcomes(
        passed=2, skipped=4, deselected=8)
    store = RecordStore.for_device(root / "records", tunebench.backends.fingerprint("cpu"))
    suite = root / "suites" / "test_axpb.py"
    suite.write_text(suite.read_text().replace('outputs=["y"],', 'outputs=["y"], tolerance={"float32": (1e-5, 1e-5)},'))
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0
    assert "\n- **axpb[small-float32]**: the tolerance changed since the tune" in (root / "r" / "report.md").read_text()
    (view,) = task_views(store, root / "suites")
    assert view.changed == ("the tolerance changed since the tune: best() serves the config the tune chose under the "
                            "earlier declaration, and the gate measures it with today's; `pytest "
                            "suites/test_axpb.py --tune` tunes the task again")


def _disturbed(monkeypatch, module, shapes=None):
    """Every process of ``module``'s comparisons (on ``shapes``, where given) judged disturbed by
    other load, as the monitor reads a busy machine (the measurements are real)."""
    real = module.compare

    def disturbed(workers, kernel, shape, *args, **kwargs):
        found = real(workers, kernel, shape, *args, **kwargs)
        if shapes is None or shape in shapes:
            found.disturbed[:] = ["other processes took 90% of the CPU time"] * len(found.objectives)
        return found

    monkeypatch.setattr(module, "compare", disturbed)


def _quicker(monkeypatch):
    """A day this machine runs every call of the gate's comparisons faster (0.6x) than when it tuned."""
    import tunebench.gate

    real = tunebench.gate.compare

    def quicker(*args, **kwargs):
        found = real(*args, **kwargs)
        found.objectives[:] = [{arm: ms * 0.6 for arm, ms in o.items()} for o in found.objectives]
        return found

    monkeypatch.setattr(tunebench.gate, "compare", quicker)


def test_a_slowdown_the_gate_measured_through_the_noise_is_shown_not_a_bare_skip(chain_tuned, monkeypatch):
    """A gate skipped as too noisy that measured 1.20x in every process: the README says it is kept so
    that a slowdown the noise hid is seen, and the report said "skip at b215933", listed it nowhere,
    and never said "noisy"."""
    import tunebench.gate

    pytester, path = chain_tuned
    _disturbed(monkeypatch, tunebench.gate)
    source = pytester.path / "chain.c"
    source.write_text(source.read_text().replace("#define EXTRA 0", "#define EXTRA 100"))  # 300/200
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(skipped=1)
    gate = [c for c in TinyDB(path).table("checks").all() if c["kind"] == "gate"][-1]
    (noisy,) = [v for v in gate["verdicts"] if v["outcome"] == "noisy"]
    assert gate["outcome"] == "skip" and noisy["what"] == "best against the recorded source"
    ratio, n, low, high = (statistics.median(noisy["ratios"]), len(noisy["ratios"]), min(noisy["ratios"]),
                           max(noisy["ratios"]))
    assert main(["report", "--records", str(pytester.path / "records"), "--out", str(pytester.path / "r")]) == 0
    md = (pytester.path / "r" / "report.md").read_text()
    (row,) = [line for line in md.splitlines() if line.startswith("| chain |")]
    assert row.endswith(f" | noisy: {ratio:.2f}x slower at no commit |"), row
    listed = (f"- **chain[all-float32]** (at no commit): best against the recorded source on (2048,): {ratio:.3f}x "
              f"({n} processes: {low:.3f}-{high:.3f}; limit 1.100x)")
    assert ("### Slowdowns measured through the noise (latest gate run: kept as noisy, neither a failure nor a "
            "pass)\n\nThe machine was too busy for the gate to judge these checks, though every process measured "
            "the best slower and their median is beyond the limit: gate again on a quiet machine before trusting "
            f"its speed.\n\n{listed}\n") in md, md
    assert "### Regressions" not in md  # a skip is no failure
    page = (pytester.path / "r" / "report.html").read_text()
    assert f"<td>noisy: {ratio:.2f}x slower at no commit</td>" in page
    assert f"<li><b>chain[all-float32]</b> (at no commit): {html.escape(listed.split(': ', 1)[1])}</li>" in page


def _tune_two_shapes(pytester):
    """The chain kernel of the gate's tests over two shapes, tuned: (pytester, its records file)."""
    from tests.test_gate import CHAIN_C, CHAIN_SUITE

    pytester.path.joinpath("chain.c").write_text(CHAIN_C)
    pytester.path.joinpath("test_chain.py").write_text(
        textwrap.dedent(CHAIN_SUITE).replace("shapes=[(2048,)]", "shapes=[(2048,), (4096,)]"))
    pytester.runpytest("test_chain.py", *TUNE).assert_outcomes(passed=3)
    (path,) = (pytester.path / "records").glob("*.json")
    return pytester, path


def test_a_failed_gates_check_kept_as_noisy_is_listed_once_with_its_failure(pytester, monkeypatch):
    """A gate that failed on one shape and measured the slowdown through the noise on the other
    was listed under Regressions and again under "Slowdowns measured through the noise (...
    neither a failure nor a pass)": of a failure. Its noisy check is listed with the failure."""
    import tunebench.gate

    pytester, path = _tune_two_shapes(pytester)
    _disturbed(monkeypatch, tunebench.gate, shapes=[(4096,)])
    source = pytester.path / "chain.c"
    source.write_text(source.read_text().replace("#define EXTRA 0", "#define EXTRA 100"))  # 300/200
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(failed=1)
    gate = [c for c in TinyDB(path).table("checks").all() if c["kind"] == "gate"][-1]
    (noisy,) = [v for v in gate["verdicts"] if v["outcome"] == "noisy"]
    assert gate["outcome"] == "fail" and noisy["shape"] == [4096]
    assert main(["report", "--records", str(pytester.path / "records"), "--out", str(pytester.path / "r")]) == 0
    md = (pytester.path / "r" / "report.md").read_text()
    assert "### Slowdowns measured through the noise" not in md, md
    listed = (f"- **chain[all-float32]** (at no commit): {gate['reason']}; also slower through the noise (the machine too "
              f"busy to judge it): {verdict_text(noisy)}\n")
    assert f"### Regressions (latest gate run)\n\n{listed}" in md, md
    page = (pytester.path / "r" / "report.html").read_text()
    assert "Slowdowns measured through the noise" not in page
    assert f"<li><b>chain[all-float32]</b> (at no commit): {html.escape(listed.split(': ', 1)[1].strip())}</li>" in page


def test_a_failures_slowdown_through_the_noise_its_advice_names_is_not_appended_again():
    """A pick that lost its lead failed, and the gate's advice named its build measured 1.50x its
    build as tuned through the noise (hold back the tune): the Regressions line named that check
    again after it, "also slower through the noise: best against the recorded source ...". A
    slowdown through the noise the reason does not name is still appended."""
    from tunebench.gate import Verdict, _held_back_text
    from tunebench.report import failure_text

    lost = Verdict("best/baseline", (2048,), [1.3, 1.3, 1.3], 1.1, "fail")
    held = Verdict("best against the recorded source", (2048,), [1.4, 1.5, 1.6], 1.1, "noisy")
    configs = {(2048,): {"best": {"reps": 1}}}
    reason = (f"{' '.join(lost.line().split())}; the recorded best [reps:1] takes 1.30x the heuristic's time on "
              f"(2048,), so it no longer leads; but {_held_back_text(held, configs)}")
    gate = {"kind": "gate", "outcome": "fail", "reason": reason, "verdicts": [lost.doc(), held.doc()]}
    assert failure_text(gate) == reason
    other = Verdict("best/baseline", (4096,), [1.2, 1.3, 1.4], 1.1, "noisy")
    assert failure_text({**gate, "verdicts": [*gate["verdicts"], other.doc()]}) == (
        f"{reason}; also slower through the noise (the machine too busy to judge it): {verdict_text(other.doc())}")
    # a later skip's own measurement, 1.502x, which reads "1.50x" as the advice did of the failure's: named
    skipped = Verdict("best against the recorded source", (2048,), [1.501, 1.502, 1.531], 1.1, "noisy")
    assert failure_text(gate, [{**gate, "outcome": "skip", "verdicts": [skipped.doc()]}]) == (
        f"{reason}; a later run at it, too busy to judge, measured it slower through the noise: "
        f"{verdict_text(skipped.doc())}")


def test_a_noisy_skip_after_a_failure_at_its_commit_has_its_slowdown_on_the_regressions_line():
    """A failure, then a noisy skip at its commit: the row read "fail at ...; a later run at it could not
    judge (noisy: 1.70x slower)", and the skip's slowdown was named nowhere below the table, though the
    legend says Regressions lists it. It follows the failure's reason there, once."""
    from tunebench.report import TaskView, failure_text

    bucket = Bucket("all", N=(1, None), shapes=[(8,)])

    def run(outcome, verdict, ratios):
        return {"kind": "gate", "outcome": outcome, "git_commit": "a" * 40, "git_dirty": False, "source_hash": "h",
                "reason": "regression: best/baseline", "shapes": [{"shape": [8], "configs": {}}],
                "verdicts": [{"what": "best/baseline", "shape": [8], "ratios": ratios, "limit": 1.1,
                              "outcome": verdict}]}

    failed, skip = run("fail", "fail", [1.3, 1.4, 1.5]), run("skip", "noisy", [1.6, 1.7, 1.8])
    view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=[failed, skip])
    assert view.last_gate is failed and view.unjudged == [skip]
    text = failure_text(view.last_gate, view.unjudged)
    assert text == (f"regression: best/baseline; a later run at it, too busy to judge, measured it slower through "
                    f"the noise: {verdict_text(skip['verdicts'][0])}")
    assert text.count("1.700x") == 1
    # one the failure's own text names already is not named again
    again = {**failed, "verdicts": [*failed["verdicts"], skip["verdicts"][0]]}
    assert failure_text(again, [skip]).count("1.700x") == 1
    assert failure_text(failed) == "regression: best/baseline"


def test_a_kept_heuristics_speedup_has_no_range_of_the_winner_its_final_round_turned_down(pytester, monkeypatch):
    """A round whose winner's lead shrank below 5 % in its fresh processes kept the heuristic, and the
    row read "1.00x (1.01-1.07) | the heuristic": the range of the winner it turned down, beside the
    heuristic's 1.00x."""
    import tunebench.final_round
    from tests.test_gate import CHAIN_C, CHAIN_SUITE

    real = tunebench.final_round.compare
    shrank = [0.96, 0.97, 0.98, 0.95, 0.99]  # the winner against the heuristic, met alone: 3 % ahead

    def reference(workers, kernel, shape, dtype, arms, *args, **kwargs):
        found = real(workers, kernel, shape, dtype, arms, *args, **kwargs)
        if [label for label, _, _ in arms] == ["best", "baseline"]:
            for objective, ratio in zip(found.objectives, shrank):
                objective["best"] = objective["baseline"] * ratio
        return found

    monkeypatch.setattr(tunebench.final_round, "compare", reference)
    pytester.path.joinpath("chain.c").write_text(CHAIN_C)
    pytester.path.joinpath("test_chain.py").write_text(textwrap.dedent(CHAIN_SUITE))
    pytester.runpytest("test_chain.py", *TUNE).assert_outcomes(passed=3)
    (path,) = (pytester.path / "records").glob("*.json")
    (check,) = TinyDB(path).table("checks").all()
    assert check["winner"] is None and check["shapes"][0]["ratios"] == pytest.approx(shrank)  # the winner's range
    assert main(["report", "--records", str(pytester.path / "records"), "--suites", str(pytester.path),
                 "--out", str(pytester.path / "r")]) == 0
    md = (pytester.path / "r" / "report.md").read_text()
    (row,) = [line for line in md.splitlines() if line.startswith("| chain |")]
    best_ms, heuristic_ms, speedup, config = row.split(" | ")[4:8]
    assert best_ms == heuristic_ms and speedup == "1.00x", row
    assert config == "the heuristic (its final round turned down a winner measured at 1.01-1.05x)", row
    assert ("- **chain[all-float32]**: the final round kept it: the winner's lead shrank below 5% when measured "
            "again in fresh processes (best/baseline 0.970x over the bucket)\n") in md


def test_a_gate_runs_point_in_the_history_is_the_time_its_verdict_judged(chain_tuned, monkeypatch):
    """A gate that failed at 1.14x, its ratio measured interleaved, was drawn at its raw time, 6.5 ms,
    below its tune's 7.15 ms: a red cross on a line going down. And a slowdown a skipped gate measured
    through the noise had no point at all."""
    import tunebench.gate
    from tunebench.report import plot_history

    _quicker(monkeypatch)
    pytester, path = chain_tuned
    source = pytester.path / "chain.c"
    source.write_text(source.read_text().replace("#define EXTRA 0", "#define EXTRA 100"))  # 300/200
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(failed=1)
    _disturbed(monkeypatch, tunebench.gate)
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(skipped=1)
    tune, failed, noisy = TinyDB(path).table("checks").all()
    assert (failed["outcome"], noisy["outcome"]) == ("fail", "skip")
    tuned = tune["shapes"][0]["confirmed_ms"][0]
    judged = [tuned * statistics.median(next(v["ratios"] for v in gate["verdicts"] if v["outcome"] == outcome))
              for gate, outcome in ((failed, "fail"), (noisy, "noisy"))]
    (view,) = task_views(RecordStore(path))
    ax = _drawn(monkeypatch, plot_history, [view])[0]
    drawn = list(ax.lines[0].get_ydata())
    assert drawn[:2] == pytest.approx([tuned, judged[0]]) and judged[0] > 1.1 * tuned  # failed: above, as its verdict
    assert drawn == pytest.approx([tuned, *judged])  # the noisy run too
    line, cross, diamond = ax.lines
    assert list(cross.get_ydata()) == pytest.approx(judged[:1])
    assert list(diamond.get_ydata()) == pytest.approx(judged[1:])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["gate run failed",
                                                                   "gate run too noisy, slower through it"]
    assert " ".join(ax.figure.get_suptitle().split()) == (
        "time of the best config across commits, d final rounds: the time each published; gate runs: their tune's "
        "time x the median of the ratios of the check that decided them, interleaved in each process (the failing "
        "one, else against the build as tuned, else against the heuristic), not their raw time, which drifts with "
        "the machine, and on a shape they left unmeasured (the pick today's heuristic, the template and declaration the "
        "tune's) the tune's time; hollow: a gate run's raw time, where that check has no time of its tune to scale on any shape "
        "(another pick or heuristic than the tune's, a check against the tuning-time ratio, a tune without a time) "
        "or on none that has a raw time too (shapes left unmeasured, or untimed in an old record, beside the others "
        "raw); a hollow square, partly estimated: on the shapes with none, its raw time times the day's drift on the "
        "others (their scaled over their raw time, a geometric mean)")


def test_gate_runs_at_one_commit_are_told_apart_in_the_history(chain_tuned, monkeypatch):
    """Two gate runs at one commit (a user's failure and the pass after its fix) were both labelled
    "0b02385+dirty gate"."""
    from tunebench.report import plot_history

    pytester, path = chain_tuned
    for _ in range(2):
        pytester.runpytest("test_chain.py", *GATE)
    (view,) = task_views(RecordStore(path))
    ax = _drawn(monkeypatch, plot_history, [view])[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["no commit\ntune", "no commit\ngate #1", "no commit\ngate #2"]


def _scaled(verdict: dict, tuned_ms: float) -> float:
    """A gate run's point as its verdict ``verdict`` judged it: ``tuned_ms`` times its median ratio."""
    return tuned_ms * statistics.median(verdict["ratios"])


#: An edit of the chain's template that builds other code, not slower: the best is measured against its
#: build as tuned (a comment builds the same code, which the gate does not measure)
EDITED = "int chain_edited(void) { return 1; }\n"


def test_a_gate_run_is_drawn_at_the_check_that_decided_it(chain_tuned, monkeypatch):
    """A gate whose pick lost its lead to the heuristic fails on best/baseline while the best against
    its build as tuned passes: it is drawn from the failing check, at the heuristic's tuned time; a
    run where both pass, from the check against the build as tuned, at the pick's."""
    import tunebench.gate
    from tunebench.report import plot_history

    pytester, path = chain_tuned
    source = pytester.path / "chain.c"
    source.write_text(source.read_text() + EDITED)
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    real = tunebench.gate.compare

    def quicker_heuristic(*args, **kwargs):  # today's heuristic 3x faster than it tuned: the lead is lost
        found = real(*args, **kwargs)
        found.objectives[:] = [{arm: ms * (0.3 if arm == "baseline" else 1) for arm, ms in o.items()}
                               for o in found.objectives]
        return found

    monkeypatch.setattr(tunebench.gate, "compare", quicker_heuristic)
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(failed=1)
    tune, passed, failed = TinyDB(path).table("checks").all()
    verdicts = {(gate["outcome"], v["what"]): v for gate in (passed, failed) for v in gate["verdicts"]}
    against = "best against the recorded source"
    assert (verdicts["fail", "best/baseline"]["outcome"], verdicts["fail", against]["outcome"]) == ("fail", "pass")
    assert (verdicts["pass", "best/baseline"]["outcome"], verdicts["pass", against]["outcome"]) == ("pass", "pass")
    best_ms, heuristic_ms = tune["shapes"][0]["confirmed_ms"]
    (view,) = task_views(RecordStore(path))
    drawn = list(_drawn(monkeypatch, plot_history, [view])[0].lines[0].get_ydata())
    assert drawn == pytest.approx([best_ms, _scaled(verdicts["pass", against], best_ms),
                                   _scaled(verdicts["fail", "best/baseline"], heuristic_ms)], rel=1e-9)


def test_a_gate_run_whose_check_against_the_build_as_tuned_passed_unmeasured_is_drawn_from_the_measured_one(
        chain_tuned, monkeypatch):
    """A comment added to the template: today's build of the best is its build as tuned, a check
    passed unmeasured, with no ratio (the report's history stopped on its median of none). The
    run is drawn from best/baseline, at the heuristic's tuned time, and the report is written."""
    from tunebench.report import plot_history

    pytester, path = chain_tuned
    source = pytester.path / "chain.c"
    source.write_text(source.read_text() + "/* a comment: the same machine code */\n")
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    tune, gate = TinyDB(path).table("checks").all()
    verdicts = {v["what"]: v for v in gate["verdicts"]}
    assert verdicts["best against the recorded source"]["ratios"] == []
    (view,) = task_views(RecordStore(path))
    drawn = list(_drawn(monkeypatch, plot_history, [view])[0].lines[0].get_ydata())
    assert drawn == pytest.approx([tune["shapes"][0]["confirmed_ms"][0],
                                   _scaled(verdicts["best/baseline"], tune["shapes"][0]["confirmed_ms"][1])], rel=1e-9)


def test_a_gate_run_with_no_verdict_to_scale_is_drawn_at_its_raw_time(chain_tuned, monkeypatch):
    """A gate run after the heuristic changed since the tune judged best/baseline against another
    heuristic than the tune timed: it was no point, the history empty of it. And a gate run of
    another pick than the preceding tune's (a merged branch's tune between) was drawn at that
    tune's time (1.0 ms read as 3.0). Both are drawn at their raw time, hollow."""
    from tunebench.report import plot_history

    pytester, path = chain_tuned
    suite = pytester.path / "test_chain.py"
    suite.write_text(suite.read_text().replace('{"reps": 2}', '{"reps": 3}').replace("[1, 2]", "[1, 2, 3]"))
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    source = pytester.path / "chain.c"
    source.write_text(source.read_text() + EDITED)
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    tune, gate, against = TinyDB(path).table("checks").all()
    assert gate["shapes"][0]["configs"]["baseline"] != tune["shapes"][0]["baseline"]
    (judged,) = [v for v in against["verdicts"] if v["what"] == "best against the recorded source"]
    (view,) = task_views(RecordStore(path), pytester.path)
    ax = _drawn(monkeypatch, plot_history, [view])[0]
    line, hollow = ax.lines
    best_ms = tune["shapes"][0]["confirmed_ms"][0]
    assert list(line.get_ydata()) == pytest.approx([best_ms, gate["shapes"][0]["best_ms"], _scaled(judged, best_ms)])
    assert list(hollow.get_ydata()) == pytest.approx([gate["shapes"][0]["best_ms"]])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["raw time on shapes without a scaled one"]
    merged = {**tune, "shapes": [{**tune["shapes"][0], "best": {"reps": 2}, "confirmed_ms": [
        3 * ms for ms in tune["shapes"][0]["confirmed_ms"]]}]}  # another branch's pick, tuned between
    ax = _drawn(monkeypatch, plot_history, [dataclasses.replace(view, checks=[tune, merged, against])])[0]
    line, hollow = ax.lines
    assert list(line.get_ydata()) == pytest.approx([best_ms, 3 * best_ms, against["shapes"][0]["best_ms"]])
    assert list(hollow.get_ydata()) == pytest.approx([against["shapes"][0]["best_ms"]])


def test_a_gate_run_is_scaled_on_each_shape_it_can_be_and_estimated_on_the_others_by_the_days_drift(
        pytester, monkeypatch):
    """A heuristic changed since the tune on one shape of two: the gate's best/baseline there
    measured another heuristic than the tune timed, and the whole run was drawn at its raw time,
    the verdict of its other shape unused. Then at its raw time on that shape alone, the other
    scaled: on neither scale (the true point times the day's drift to that shape's weight), its
    legend "raw time". That shape is its raw time times the drift the other's verdict measured
    (scaled over raw time), and the point a hollow square, "partly estimated"."""
    from tunebench.report import ESTIMATED, plot_history

    _quicker(monkeypatch)
    pytester, path = _tune_two_shapes(pytester)
    suite = pytester.path / "test_chain.py"
    suite.write_text(suite.read_text().replace('{"reps": 2}', '{"reps": 3 if shape[0] > 3000 else 2}')
                     .replace("[1, 2]", "[1, 2, 3]"))
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    tune, gate = TinyDB(path).table("checks").all()
    tuned, measured = ({tuple(e["shape"]): e for e in check["shapes"]} for check in (tune, gate))
    assert measured[2048,]["configs"]["baseline"] == tuned[2048,]["baseline"] == {"reps": 2}
    assert measured[4096,]["configs"]["baseline"] != tuned[4096,]["baseline"]
    (judged,) = [v for v in gate["verdicts"] if v["what"] == "best/baseline" and v["shape"] == [2048]]
    (view,) = task_views(RecordStore(path), pytester.path)
    scaled = _scaled(judged, tuned[2048,]["confirmed_ms"][1])
    drift = scaled / measured[2048,]["best_ms"]
    ms = view.bucket.objective({(2048,): scaled, (4096,): measured[4096,]["best_ms"] * drift})
    ax = _drawn(monkeypatch, plot_history, [view])[0]
    line, hollow = ax.lines
    assert list(line.get_ydata()) == pytest.approx([_check_ms(tune, view.bucket), ms])
    assert list(hollow.get_ydata()) == pytest.approx([ms])
    assert (hollow.get_marker(), hollow.get_markerfacecolor()) == ("s", "white")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [ESTIMATED]
    raw = view.bucket.objective({shape: entry["best_ms"] for shape, entry in measured.items()})
    assert raw < 0.9 * ms  # the run's raw time on both shapes, the machine quicker that day


def test_a_gate_run_that_left_a_shape_unmeasured_as_tuned_is_drawn_there_at_the_tunes_time(pytester, monkeypatch):
    """A heuristic changed since the tune to the adopted pick on one shape: the gate measures the best
    alone there against nothing (no time, no verdict), and the passing run left the history; so did
    a run that measured no shape (the pick the heuristic on each, the template unchanged), as every
    passing gate run of a task whose round kept the heuristic does. Such a shape's build is the
    tune's: it is drawn at the tune's time, the others as their verdicts scaled them."""
    from tunebench.report import history

    pytester, path = _tune_two_shapes(pytester)
    suite = pytester.path / "test_chain.py"
    tuned_suite = suite.read_text()
    suite.write_text(tuned_suite.replace('{"reps": 2}', '{"reps": 1 if shape[0] > 3000 else 2}'))
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    suite.write_text(tuned_suite.replace('{"reps": 2}', '{"reps": 1}'))
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    tune, one, none = TinyDB(path).table("checks").all()
    tuned = {tuple(e["shape"]): e for e in tune["shapes"]}
    assert tune["winner"] is not None and tuned[4096,]["best"] == {"reps": 1}
    assert [(e["configs"], e["objectives"], "best_ms" in e) for e in one["shapes"][1:] + none["shapes"]] == [
        ({"best": {"reps": 1}}, [], False)] * 3  # unmeasured on 4096, then on both
    assert {tuple(v["shape"]) for v in one["verdicts"]} == {(2048,)} and none["verdicts"] == []
    (judged,) = [v for v in one["verdicts"] if v["what"] == "best/baseline"]
    (view,) = task_views(RecordStore(path), pytester.path)
    tuned_ms = _check_ms(tune, view.bucket)
    ms = view.bucket.objective({(2048,): _scaled(judged, tuned[2048,]["confirmed_ms"][1]),
                                (4096,): tuned[4096,]["confirmed_ms"][0]})
    assert [(c, pytest.approx(drawn), what) for c, drawn, what in history(view)] == [
        (tune, tuned_ms, ""), (one, ms, ""), (none, tuned_ms, "")]


def test_a_gate_run_left_unmeasured_as_tuned_on_one_shape_and_unscaled_on_the_other_is_drawn_hollow(
        pytester, monkeypatch):
    """The heuristic changed since the tune to the pick on 4096 (left unmeasured, at the tune's
    time) and to another config on 2048 (no verdict to scale, its raw time): no shape has both,
    and today's gate records that mix, which the caption and legend put down to an old record."""
    from tunebench.report import RAW, plot_history

    pytester, path = _tune_two_shapes(pytester)
    suite = pytester.path / "test_chain.py"
    suite.write_text(suite.read_text().replace('{"reps": 2}', '{"reps": 1 if shape[0] > 3000 else 3}'))
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    tune, gate = TinyDB(path).table("checks").all()
    raw, as_tuned = gate["shapes"]
    assert "best_ms" in raw and "best_ms" not in as_tuned
    (view,) = task_views(RecordStore(path), pytester.path)
    ms = view.bucket.objective({(2048,): raw["best_ms"], (4096,): tune["shapes"][1]["confirmed_ms"][0]})
    assert [(c, pytest.approx(drawn), what) for c, drawn, what in history(view)][1:] == [(gate, ms, RAW)]
    ax = _drawn(monkeypatch, plot_history, [view])[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["raw time on shapes without a scaled one"]
    assert "old record:" not in ax.figure.get_suptitle()


def test_a_gate_run_that_verified_the_best_alone_under_a_changed_declaration_is_not_drawn_at_the_tunes_time(
        pytester):
    """The pick today's heuristic on every shape and the args builder changed since the tune (4x
    the elements): the gate verified the best alone in one process and kept no time, and the
    history drew the run at the tune's time, solid, where the best now takes about 4x that. A
    shape left unmeasured is the tune's build only under the tune's declaration too. A run
    recorded before gate records kept that hash is taken as the tune's, as the gate takes it:
    dropped, every committed record's passing runs left the history."""
    pytester, path = _tune_two_shapes(pytester)
    suite = pytester.path / "test_chain.py"
    tuned_suite = suite.read_text()
    args = 'rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])'
    assert args in " ".join(tuned_suite.split())
    suite.write_text(tuned_suite.replace('{"reps": 2}', '{"reps": 1}').replace("shape[0]", "4 * shape[0]"))
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    tune, changed = TinyDB(path).table("checks").all()
    assert changed["source_hash"] == tune["source_hash"] and changed["setup_hash"] != tune["setup_hash"]
    assert [(e["configs"], e["objectives"], "best_ms" in e) for e in changed["shapes"]] == [
        ({"best": {"reps": 1}}, [], False)] * 2  # verified alone on both shapes, no time kept
    (view,) = task_views(RecordStore(path), pytester.path)
    assert [c for c, _, _ in history(view)] == [tune]
    unhashed = {k: v for k, v in changed.items() if k != "setup_hash"}
    unchanged = {**changed, "setup_hash": tune["setup_hash"]}
    view = dataclasses.replace(view, checks=[tune, unhashed, unchanged])
    assert [(c, pytest.approx(ms)) for c, ms, _ in history(view)] == [
        (tune, _check_ms(tune, view.bucket)), (unhashed, _check_ms(tune, view.bucket)),
        (unchanged, _check_ms(tune, view.bucket))]


def test_a_template_the_gate_measured_slower_through_the_noise_is_not_said_to_want_a_tune_alone():
    """layernorm made to read each row three times more, gated beside two spinning processes: its
    latest gate, a skip, measured today's build 1.51x its build as tuned in every process, and the
    report's note said only that `pytest suites/test_layernorm.py --tune` tunes the new template,
    which makes the slower code the reference the gate then passes."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("few_rows", N=(1, None), shapes=[(8,)])
    served = Choice({"vec": 8}, "tuned", "layernorm", (8,), "float32", "few_rows", True, "d",
                    note="tuned with an earlier layernorm.c: `pytest suites/test_layernorm.py --tune` tunes this one")
    tune = {"kind": "tune", "shapes": [{"shape": [8], "best": {"vec": 8}}]}

    def gate(what):
        return {"kind": "gate", "outcome": "skip", "shapes": [{"shape": [8], "configs": {"best": {"vec": 8}}}],
                "verdicts": [{"what": what, "shape": [8], "ratios": [1.39, 1.51, 1.53], "limit": 1.1,
                              "outcome": "noisy"}]}

    view = TaskView("layernorm", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, served=served,
                    checks=[tune, gate("best against the recorded source")])
    assert view.notes[1:] == ["but its latest gate, too busy to judge it, measured today's build slower than its build "
                              "as tuned in every process: gate again on a quiet machine before a tune; a tune now "
                              "would make the slower code the reference, and the gate would pass it"]
    # a pick measured behind the heuristic through the noise is the tune's to settle
    view = dataclasses.replace(view, checks=[tune, gate("best/baseline")])
    assert view.notes == [served.note]


def test_a_failed_gate_that_measured_the_template_slower_through_the_noise_is_not_noted_as_too_busy_to_judge():
    """A pick that lost its lead in every process, failed, beside today's build measured 1.5x its build
    as tuned through the noise: the note said "its latest gate, too busy to judge it", of a gate
    that judged and failed, beside a Regressions line that reads the failure."""
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(8, None), shapes=[(2048,)])
    gate = {"kind": "gate", "outcome": "fail", "shapes": [{"shape": [2048], "configs": {"best": {"reps": 1}}}],
            "verdicts": [{"what": "best/baseline", "shape": [2048], "ratios": [1.3, 1.3, 1.3], "limit": 1.1,
                          "outcome": "fail"},
                         {"what": "best against the recorded source", "shape": [2048], "ratios": [1.2, 1.5, 2.5],
                          "limit": 1.1, "outcome": "noisy"}]}
    view = TaskView("chain", "cpu", "float32", bucket, "h", {}, None, {}, [], {},
                    checks=[{"kind": "tune", "shapes": [{"shape": [2048], "best": {"reps": 1}}]}, gate])
    assert view.notes == ["its latest gate failed, and measured today's build slower than its build as tuned "
                          "through the noise: gate again on a quiet machine before a tune; a tune now would make the "
                          "slower code the reference, and the gate would pass it"]


def test_a_gate_unsure_of_the_template_against_its_build_as_tuned_holds_back_a_tune_as_the_gate_does():
    """Today's build 1.4x its build as tuned by its median, one process of three not slower
    (unsure), beside a lost lead that failed: the gate said to gate again on a quiet machine
    before a tune, and the report's note said only what best() says, which reads "tunes this
    one". Passed, unsure, it held back nothing either."""
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(8, None), shapes=[(2048,)])
    unsure = {"what": "best against the recorded source", "shape": [2048], "ratios": [1.0, 1.4, 1.5], "limit": 1.1,
              "outcome": "unsure"}
    lost = {"what": "best/baseline", "shape": [2048], "ratios": [1.3, 1.3, 1.3], "limit": 1.1, "outcome": "fail"}
    gate = {"kind": "gate", "outcome": "fail", "shapes": [{"shape": [2048], "configs": {"best": {"reps": 1}}}],
            "verdicts": [lost, unsure]}
    view = TaskView("chain", "cpu", "float32", bucket, "h", {}, None, {}, [], {},
                    checks=[{"kind": "tune", "shapes": [{"shape": [2048], "best": {"reps": 1}}]}, gate])
    assert view.notes == ["its latest gate failed, and measured today's build slower than its build as tuned by "
                          "its median, though not every process saw it slower: gate again on a quiet machine before "
                          "a tune; a tune now would make the slower code the reference, and the gate would pass it"]
    view = dataclasses.replace(view, checks=[view.checks[0], {**gate, "outcome": "pass", "verdicts": [unsure]}])
    assert view.notes == ["its latest gate was unsure: it measured today's build slower than its build as tuned "
                          "by its median, though not every process saw it slower: gate again on a quiet machine "
                          "before a tune; a tune now would make the slower code the reference, and the gate would "
                          "pass it"]


def test_a_failed_gate_of_a_template_edited_again_since_is_noted_of_the_source_it_measured():
    """A gate failed a template's edit against its build as tuned, and the template was edited again
    since: the note said the gate "found today's build slower", of code it never measured."""
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(8, None), shapes=[(2048,)])
    gate = {"kind": "gate", "outcome": "fail", "source_hash": "gated", "git_commit": "0b02385aa", "git_dirty": False,
            "shapes": [{"shape": [2048], "configs": {"best": {"reps": 1}}}],
            "verdicts": [{"what": "best against the recorded source", "shape": [2048], "ratios": [1.4, 1.5, 1.6],
                          "limit": 1.1, "outcome": "fail"}]}
    view = TaskView("chain", "cpu", "float32", bucket, "tuned", {}, None, {}, [], {}, today_source="gated",
                    checks=[{"kind": "tune", "shapes": [{"shape": [2048], "best": {"reps": 1}}]}, gate])
    assert view.notes == ["its latest gate found today's build slower than its build as tuned: fix that first; a "
                          "tune now would make the slower code the reference, and the gate would pass it"]
    # "but" answers a note before it, and no note opens on it (nothing before it said anything)
    changed = "the reference changed since the tune"
    assert dataclasses.replace(view, changed=changed).notes == [
        changed, "but its latest gate found today's build slower than its build as tuned: fix that first; a tune now "
        "would make the slower code the reference, and the gate would pass it"]
    view = dataclasses.replace(view, today_source="edited since")
    assert view.notes == ["its latest gate found an earlier source's build (at 0b02385) slower than its build as "
                          "tuned: gate today's build before a tune, which would make it the reference"]


def test_a_failed_gate_of_a_template_reverted_since_to_its_source_as_tuned_is_noted_as_not_in_todays_build():
    """A gate run outside git failed a template's edit against its build as tuned, and the edit was
    reverted since: the note asked to "gate today's build before a tune", of the build as tuned,
    and said the gate ran "(at ?)"."""
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(8, None), shapes=[(2048,)])
    gate = {"kind": "gate", "outcome": "fail", "source_hash": "gated", "git_commit": None, "git_dirty": None,
            "shapes": [{"shape": [2048], "configs": {"best": {"reps": 1}}}],
            "verdicts": [{"what": "best against the recorded source", "shape": [2048], "ratios": [1.4, 1.5, 1.6],
                          "limit": 1.1, "outcome": "fail"}]}
    view = TaskView("chain", "cpu", "float32", bucket, "tuned", {}, None, {}, [], {}, today_source="tuned",
                    checks=[{"kind": "tune", "shapes": [{"shape": [2048], "best": {"reps": 1}}]}, gate])
    assert view.notes == ["its latest gate found an earlier source's build (outside git) slower than its build as "
                          "tuned, but the template is back to its source as tuned: that slowdown is not in today's "
                          "build"]
    view = dataclasses.replace(view, today_source="edited since")
    assert view.notes == ["its latest gate found an earlier source's build (outside git) slower than its build as "
                          "tuned: gate today's build before a tune, which would make it the reference"]


def _slowed_and_committed(root) -> None:
    """The chain project's template made 1.5x slower (300/200), committed in a repository of its own:
    its gate runs are at one clean commit."""
    source = root / "chain.c"
    source.write_text(source.read_text().replace("#define EXTRA 0", "#define EXTRA 100"))  # 300/200
    git(root, "init", "-q")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "slower")


def test_a_noisy_skip_after_a_failed_gate_at_the_same_commit_leaves_the_failure_the_row_and_the_regression(
        chain_tuned, monkeypatch):
    """A CI's gate failed quietly at a commit, and its rerun minutes later, beside other load, was
    skipped as too noisy: the row read "noisy: 1.47x slower" and no Regressions section listed the
    failure, which a run that could not judge had hidden. The judged run decides; the skip is named."""
    import tunebench.gate

    pytester, path = chain_tuned
    _slowed_and_committed(pytester.path)
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(failed=1)
    with monkeypatch.context() as m:
        _disturbed(m, tunebench.gate)
        pytester.runpytest("test_chain.py", *GATE).assert_outcomes(skipped=1)
    failed, skipped = [c for c in TinyDB(path).table("checks").all() if c["kind"] == "gate"]
    assert (failed["outcome"], skipped["outcome"]) == ("fail", "skip")
    assert failed["git_commit"] == skipped["git_commit"] and not skipped["git_dirty"]
    at = revision(failed)
    (noisy,) = through_the_noise(skipped)
    later = f"; a later run at it could not judge (noisy: {statistics.median(noisy['ratios']):.2f}x slower)"
    assert main(["report", "--records", str(pytester.path / "records"), "--out", str(pytester.path / "r")]) == 0
    md = (pytester.path / "r" / "report.md").read_text()
    (row,) = [line for line in md.splitlines() if line.startswith("| chain |")]
    assert row.endswith(f" | fail at {at}{later} |"), row
    # the skip's slowdown, named in the row, follows the failure there (the legend sends a reader to it)
    listed = (f"{failed['reason']}; a later run at it, too busy to judge, measured it slower through the noise: "
              f"{verdict_text(noisy)}")
    assert f"### Regressions (latest gate run)\n\n- **chain[all-float32]** (at {at}): {listed}\n" in md, md
    assert "### Slowdowns measured through the noise" not in md
    page = (pytester.path / "r" / "report.html").read_text()
    assert f"<td>{html.escape(f'fail at {at}{later}')}</td>" in page
    assert f"<li><b>chain[all-float32]</b> (at {at}): {html.escape(listed)}</li>" in page
    # the history plots both runs, as before: the failure, and the slowdown measured through the noise
    (view,) = task_views(RecordStore(path))
    assert [c["outcome"] for c, _, _ in history(view) if c["kind"] == "gate"] == ["fail", "skip"]


def test_a_noisy_skip_after_a_pass_at_the_same_commit_has_its_slowdown_listed_below_the_table(
        chain_tuned, monkeypatch):
    """A gate passed at a commit, and its rerun there beside other load measured 1.5x through the
    noise: the row named "noisy: 1.50x slower" after the pass, and the list below the table, which
    the legend points to for it, left it out. The pass stays the row; the slowdown is listed."""
    import tunebench.gate

    pytester, path = chain_tuned
    _slowed_and_committed(pytester.path)
    _disturbed(monkeypatch, tunebench.gate)
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(skipped=1)
    checks = TinyDB(path).table("checks")
    *earlier, skipped = checks.all()
    (noisy,) = through_the_noise(skipped)
    # the quiet run before it at that commit, which passed: its verdicts within the limit
    passed = {**skipped, "outcome": "pass", "reason": "", "verdicts": [{**noisy, "outcome": "pass",
                                                                        "ratios": [1.0, 1.0, 1.0]}]}
    checks.truncate()
    checks.insert_multiple([*earlier, passed, skipped])
    assert main(["report", "--records", str(pytester.path / "records"), "--out", str(pytester.path / "r")]) == 0
    md = (pytester.path / "r" / "report.md").read_text()
    at, ratio = revision(skipped), statistics.median(noisy["ratios"])
    (row,) = [line for line in md.splitlines() if line.startswith("| chain |")]
    assert row.endswith(f" | pass at {at}; a later run at it could not judge (noisy: {ratio:.2f}x slower) |"), row
    listed = f"- **chain[all-float32]** (at {at}): {verdict_text(noisy)}\n"
    assert f"### {NOISY}\n\n{NOISY_WHY}\n\n{listed}" in md, md
    page = (pytester.path / "r" / "report.html").read_text()
    assert f"<li><b>chain[all-float32]</b> (at {at}): {html.escape(verdict_text(noisy))}</li>" in page


def test_only_a_run_that_could_not_judge_at_the_same_clean_commit_leaves_the_judged_one_the_row():
    """A pass stays the row beside a later unsure pass or noisy skip at its commit; a skip at another
    commit, or of a dirty tree (which may hold other code from run to run), is the latest gate still."""
    from tunebench.report import TaskView

    bucket = Bucket("all", N=(1, None), shapes=[(8,)])

    def run(outcome, commit="a" * 40, dirty=False, verdict="pass", src="h", setup=None):
        return {"kind": "gate", "outcome": outcome, "git_commit": commit, "git_dirty": dirty, "source_hash": src,
                "setup_hash": setup, "reason": "regression", "shapes": [{"shape": [8], "configs": {}}],
                "verdicts": [{"what": "best/baseline", "shape": [8], "ratios": [1.3, 1.4, 1.5], "limit": 1.1,
                              "outcome": verdict}]}

    def row(*checks):
        view = TaskView("k", "cpu", "float32", bucket, "h", {}, None, {}, [], {}, checks=list(checks))
        return view.last_gate, _rows([view])[0][-1]

    passed, noisy, unsure = run("pass"), run("skip", verdict="noisy"), run("pass", verdict="unsure")
    assert row(passed, noisy) == (passed, "pass at aaaaaaa; a later run at it could not judge (noisy: 1.40x slower)")
    assert row(passed, unsure, noisy) == (passed, "pass at aaaaaaa; 2 later runs at it could not judge (noisy: "
                                                  "1.40x slower)")
    failed = run("fail", verdict="fail")
    assert row(failed, unsure) == (failed, "fail at aaaaaaa; a later run at it could not judge (unsure)")
    elsewhere = run("skip", commit="b" * 40, verdict="noisy")
    assert row(failed, elsewhere) == (elsewhere, "noisy: 1.40x slower at bbbbbbb")
    # other code gated between them (a skip at another commit) leaves the failure at this one the row
    assert row(failed, elsewhere, noisy) == (failed, "fail at aaaaaaa; a later run at it could not judge (noisy: "
                                                     "1.40x slower)")
    # ... but a quiet pass of the same template at another commit since is the latest judgement: the failure
    # before it stays behind it
    assert row(failed, run("pass", commit="d" * 40), noisy) == (noisy, "noisy: 1.40x slower at aaaaaaa")
    # a pass of another template between them is other code: passed over
    assert row(failed, run("pass", commit="d" * 40, src="other"), noisy)[0] is failed
    # nor does a skip at that commit with another declaration (setup_hash) leave the failure the row
    other_setup = run("skip", verdict="noisy", setup="s2")
    assert row(run("fail", verdict="fail", setup="s1"), other_setup) == (other_setup, "noisy: 1.40x slower at "
                                                                                      "aaaaaaa")
    dirty = run("skip", dirty=True, verdict="noisy")
    assert row(run("fail", dirty=True, verdict="fail"), dirty) == (dirty, "noisy: 1.40x slower at aaaaaaa+dirty")
    outside = run("skip", commit=None, verdict="noisy")  # outside a git checkout: nothing says the code is the same
    assert row(run("fail", commit=None, verdict="fail"), outside) == (outside, "noisy: 1.40x slower at no commit")


def test_a_hand_edit_of_the_heuristics_time_or_the_trials_is_a_change_though_the_best_is_the_same():
    """A hand edit doubled the heuristic's recorded time (a faked 2.48x from 1.24x) and another
    removed the served config's trial: with the best's config and time the same, both read
    "unchanged"."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("wide", N=(1, None), shapes=[(8,)])
    configs = {config_key({"vec": 8}): {"vec": 8}, config_key({"vec": 2}): {"vec": 2}}
    then = TaskView("softmax", "cpu", "float32", bucket, "h", {}, None, {"ok": 7}, [], configs, confirmed=(1.054, 1.306),
                    served=Choice({"vec": 8}, "tuned", "softmax", (8,), "float32", "wide", True, "d", 1.054, 1.306),
                    recorded=7)
    faked = dataclasses.replace(then, served=dataclasses.replace(then.served, baseline_ms=2.612))
    rows, same = _changes(_before(TUNED, [then]), [faked])
    assert same == 0 and [r[5:7] for r in rows] == [["1.24x -> 2.48x", "same config, heuristic 1.306 -> 2.612 ms"]]
    removed = dataclasses.replace(then, statuses={"ok": 5}, configs={config_key({"vec": 2}): {"vec": 2}}, recorded=5)
    assert [r[6] for r in _changes(_before(TUNED, [then]), [removed])[0]] == [
        "same config, 2 trials removed, the served config's trials removed"]
    assert _changes(_before(TUNED, [then]), [then]) == ([], 1)


def test_a_compiler_changed_since_the_revision_is_named_first_beside_the_time_it_moved():
    """Retuned with clang-19, every time read -64% beside the tune's own changes, the compiler
    named nowhere in the report (user test hFL). Records from before it was kept name none."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("wide", N=(1, None), shapes=[(8,)])
    then = TaskView("softmax", "cpu", "float32", bucket, "h", {}, None, {"ok": 7}, [], {}, confirmed=(1.0, 1.2),
                    served=Choice({"vec": 8}, "tuned", "softmax", (8,), "float32", "wide", True, "d", 1.0, 1.2),
                    recorded=7, compiler="gcc 12.2.0")
    clang = dataclasses.replace(then, served=dataclasses.replace(then.served, objective_ms=0.36, baseline_ms=0.43),
                                compiler="clang 19.1.7")
    (row,), _ = _changes(_before(TUNED, [then]), [clang])
    assert row[4:7] == ["0.36 (-64%)", "1.20x -> 1.19x", "same config, compiler gcc 12.2.0 -> clang 19.1.7"]
    unkept = dataclasses.replace(then, compiler=None)
    assert _changes(_before(TUNED, [unkept]), [then]) == ([], 1)


def test_a_speedup_its_final_rounds_range_does_not_hold_shows_no_range_and_says_why():
    """A hand edit of the heuristic's recorded time showed 2.48x (1.24-1.40): the speedup is of the
    round's times, the range of its processes' ratios, which the edit left as they were."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    bucket = Bucket("wide", N=(1, None), shapes=[(8,)])
    view = TaskView("softmax", "cpu", "float32", bucket, "h", {}, None, {"ok": 7}, [], {}, confirmed=(1.054, 1.306),
                    spread=(1.24, 1.40),
                    served=Choice({"vec": 8}, "tuned", "softmax", (8,), "float32", "wide", True, "d", 1.054, 1.306))
    assert _rows([view])[0][6] == "1.24x (1.24-1.40)" and view.notes == []
    faked = dataclasses.replace(view, served=dataclasses.replace(view.served, baseline_ms=2.612))
    assert _rows([faked])[0][6] == "2.48x"
    assert faked.notes == ["its speedup, 2.48x, lies outside the range its final round's processes measured "
                           "(1.24-1.40): the speedup is of the times the round recorded, the range of its processes' "
                           "ratios, and a round records the two alike, so one of them was edited since (by hand, or "
                           "in a merge conflict resolved by hand): the table shows no range"]


def test_a_task_added_by_hand_with_another_buckets_range_is_named_as_undeclared_not_a_second_row(project, pytester):
    """A task copied by hand from bucket large's, renamed huge, its range left as large's: it was a
    second row of large, and "new task" under --compare, where no suite declares a bucket huge."""
    from tunebench.report import undeclared

    root = project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    (path,) = (root / "records").glob("*.json")
    doc = json.loads(path.read_text())
    large = next(t for t in doc["tasks"].values() if t["bucket"] == "large")
    doc["tasks"]["99"] = {**large, "bucket": "huge"}
    doc["tasks"]["98"] = {**large, "bucket": "large-copy"}  # no name a bucket may take: the report stopped on it
    path.write_text(json.dumps(doc))
    views, gone = undeclared(task_views(RecordStore(path)), root / "records", None)
    assert sorted(v.bucket.name for v in views) == ["large", "small"]
    assert sorted(line.split(":")[0] for line in gone) == ["axpb huge float32", "axpb large-copy float32"]
    assert gone[0].endswith("declares the bucket: best() serves none of them, and an export leaves them out")
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r")]) == 0


def test_a_shape_dropped_from_a_bucket_and_tuned_again_removed_no_trial(project, pytester):
    """The row counts the trials on today's shapes: a shape dropped since, and the task tuned again
    without it, read as trials removed by hand."""
    root = project()
    commit(root, "no records")
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    commit(root, "tuned")
    suite = root / "suites" / "test_axpb.py"
    suite.write_text(suite.read_text().replace("shapes=[(20000,), (50000,)]", "shapes=[(20000,)]"))
    pytester.runpytest("suites", *TUNE)
    assert main(["report", "--records", str(root / "records"), "--out", str(root / "r"), "--compare", "HEAD"]) == 0
    changes = (root / "r" / "report.md").read_text().split("### Changes since HEAD")[1]
    assert "shapes (20000,), (50000,) -> (20000,)" in changes and "removed" not in changes, changes


def test_a_buckets_range_or_shapes_changed_since_the_revision_is_a_change_of_its_task():
    """A pull request capped bucket wide at R<=16384: best() serves another bucket on the shapes
    that left it, and the task, its best the same, read unchanged."""
    from tunebench.lookup import Choice
    from tunebench.report import TaskView

    wide = Bucket("wide", S=(16, None), R=(4097, None), shapes=[(256, 8192)])
    then = TaskView("softmax", "cpu", "float32", wide, "h", {}, None, {"ok": 7}, [], {}, confirmed=(1.0, 1.3),
                    served=Choice({"vec": 8}, "tuned", "softmax", (256, 8192), "float32", "wide", True, "d", 1.0, 1.3))
    capped = dataclasses.replace(then, bucket=Bucket("wide", S=(16, None), R=(4097, 16384), shapes=[(256, 8192)]))
    rows, same = _changes(_before(TUNED, [then]), [capped])
    assert same == 0 and [r[6] for r in rows] == ["same config, range R 4097.. -> 4097..16384"]
    moved = dataclasses.replace(then, bucket=Bucket("wide", S=(16, None), R=(4097, None), shapes=[(256, 16384)]))
    assert [r[6] for r in _changes(_before(TUNED, [then]), [moved])[0]] == [
        "same config, shapes (256, 8192) -> (256, 16384)"]


def test_the_device_this_machine_is_is_reported_first(tmp_path, monkeypatch):
    """A reviewer of several devices' records read another device's first, its own last."""
    root = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("TUNEBENCH_DEVICE", "cuda-nvidia-h200-sm90-132sm-00b1c7")
    assert main(["report", "--records", str(root / "records"), "--out", str(tmp_path)]) == 0
    sections = (tmp_path / "report.md").read_text().split("\n## ")
    assert sections[1].startswith("cuda-nvidia-h200-sm90-132sm-00b1c7\n")


def test_a_template_edited_in_a_comment_alone_is_said_so_where_its_gate_found_the_same_machine_code(
        chain_tuned, monkeypatch, tmp_path):
    """A slowed kernel and a comment's edit were each told best()'s "`--tune` tunes this one": a
    reviewer could not tell the two apart, though the gate had found the comment's build the
    machine code of the build as tuned."""
    pytester, _ = chain_tuned
    monkeypatch.chdir(pytester.path)
    monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / "fresh"))  # a CI's, without the tune's builds
    chain = pytester.path / "chain.c"
    chain.write_text("/* a comment */\n" + chain.read_text())
    pytester.runpytest("test_chain.py", *GATE).assert_outcomes(passed=1)
    assert main(["report", "--records", str(pytester.path / "records"), "--out", str(tmp_path / "r"),
                 "--suites", str(pytester.path)]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "what changed since is comments or whitespace, and the pick holds" in md, md
    assert "tunes this one" not in md, md
    chain.write_text(chain.read_text().replace("/* a comment */\n", "").replace("#define EXTRA 0", "#define EXTRA 1"))
    pytester.runpytest("test_chain.py", *GATE)
    assert main(["report", "--records", str(pytester.path / "records"), "--out", str(tmp_path / "s"),
                 "--suites", str(pytester.path)]) == 0
    md = (tmp_path / "s" / "report.md").read_text()
    assert "comments or whitespace" not in md and "tunes this one" in md, md


def test_a_latest_final_round_that_confirmed_nothing_is_said_beside_an_earlier_rounds_figures(chain_tuned, tmp_path):
    """A re-tune whose round stayed disturbed left the row with the round before's figures,
    unmarked and unsaid, as if the re-tune had confirmed them."""
    pytester, path = chain_tuned
    checks = TinyDB(path).table("checks")
    (round_,) = checks.all()
    signs = "; ".join(f"staggered {i}: two modes" for i in range(6))
    checks.insert({**round_, "disturbed": True, "winner": None, "git_commit": None,
                   "problem": f"the machine stayed disturbed on (2048,): {signs}"})
    assert main(["report", "--records", str(pytester.path / "records"), "--out", str(tmp_path / "r"),
                 "--suites", str(pytester.path)]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert ("its latest final round (at no commit) confirmed nothing (the machine stayed disturbed on (2048,): "
            "staggered 0: two modes; staggered 1: two modes; and 4 more signs (in the records' final round)): the "
            "figures are an earlier round's") in md, md
