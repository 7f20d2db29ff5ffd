import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tunebench
from tests.conftest import ascii_locale
from tests.test_plugin import TUNE
from tunebench.cli import main, positive

ROOT = Path(__file__).parent.parent  # this repository: its suites and committed records

#: Every measurement of these tests' runs is judged clean (quiet_verdicts): beside other load a tune
#: stops at its heuristic, as documented, and what `tunebench best` answers of a tuned bucket goes
#: unchecked. A busy machine's tunes have tests of their own (test_interference.py).
pytestmark = pytest.mark.usefixtures("quiet_verdicts")


def test_best_answers_inside_and_outside_the_buckets(project, pytester, capsys, monkeypatch):
    root = project()
    pytester.runpytest("suites", *TUNE).assert_outcomes(passed=12, deselected=2)
    monkeypatch.chdir(root)
    capsys.readouterr()

    assert main(["best", "axpb", "--shape", "30000", "--json"]) == 0
    inside = json.loads(capsys.readouterr().out)
    assert inside["bucket"] == "large" and inside["inside"] and inside["source"] in ("tuned", "heuristic")
    assert set(inside["config"]) == {"vec", "unroll", "mode"}

    assert main(["best", "axpb", "--shape", "0"]) == 0
    out, err = capsys.readouterr()
    # the shape and the bucket's range, once: not the library's "lookup().warnings names the shape"
    assert err == "warning: kernel 'axpb': shape (0,) lies outside every bucket; using the nearest, " \
                  "Bucket('small', N=1..4096)\n", err
    assert out.startswith("axpb float32 shape 0: bucket small (outside every bucket; nearest)")


def test_best_says_a_bucket_name_beyond_ascii_whatever_the_locale(twice_beyond_ascii):
    """Under an ASCII locale (LC_ALL=C, PYTHONUTF8=0) best failed printing the bucket klein_µ:
    "tunebench best: 'ascii' codec can't encode character '\\xb5'"."""
    root = twice_beyond_ascii
    (root / "records").mkdir()
    ran = subprocess.run([sys.executable, "-m", "tunebench.cli", "best", "twice", "--shape", "100", "--records",
                          str(root / "records"), "--suites", str(root / "suites")],
                         env=ascii_locale(), capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "bucket klein_\\xb5 (inside)" in ran.stdout


def test_the_commands_read_a_project_in_a_folder_named_beyond_ascii_whatever_the_locale(tmp_path):
    """Under an ASCII locale (LC_ALL=C, PYTHONUTF8=0), where a tune and the gate ran, best and
    export of a project in a folder named prøj failed hashing a suite's path for its module's name
    ("'utf-8' codec can't encode characters: surrogates not allowed"), and the report failed
    reading the repository's folder from git ("'ascii' codec can't decode byte 0xc3")."""
    shipped = Path(__file__).resolve().parent.parent
    root = tmp_path / "prøj"
    for part in ("suites", "kernels", "records"):
        shutil.copytree(shipped / part, root / part, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    shutil.copy(shipped / "pyproject.toml", root)
    for git in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "p"]):
        subprocess.run(["git", *git], cwd=root, check=True)
    device = "cpu-amd-epyc-f26m2-2t-506d4e"
    for command in (["best", "layernorm", "--shape", "300,8192", "--device", device],
                    ["export", "--device", device], ["report"]):
        ran = subprocess.run([sys.executable, "-m", "tunebench.cli", *command], cwd=root, env=ascii_locale(),
                             capture_output=True, text=True)
        assert ran.returncode == 0, (command, ran.stderr)
    assert (root / "export" / "tunebench_configs.h").is_file() and (root / "report" / "report.md").is_file()


def test_best_reports_bad_input_with_a_clear_error(project, pytester, capsys, monkeypatch):
    monkeypatch.chdir(project())
    assert main(["best", "nosuchkernel", "--shape", "4"]) == 2
    assert "kernel 'nosuchkernel': no records" in capsys.readouterr().err
    assert main(["best", "axbp", "--shape", "4"]) == 2
    assert "(did you mean 'axpb'?)" in capsys.readouterr().err
    assert main(["best", "axpb", "--shape", "4,5"]) == 2
    assert "does not have dims N" in capsys.readouterr().err


@pytest.mark.parametrize("given, said", [
    ("-1,5", "argument --shape: dim -1 of '-1,5' is below 0: a shape's dims are integers of 0 or more, such as 2,4096"),
    ("4,a", "argument --shape: dim 'a' of '4,a' is not an integer: a shape's dims are integers of 0 or more"),
])
def test_best_names_the_dim_of_a_shape_it_cannot_take(given, said, capsys):
    """It said "expected a shape such as 2,4096", naming no dim at fault."""
    with pytest.raises(SystemExit) as exited:
        main(["best", "axpb", f"--shape={given}"])
    assert exited.value.code == 2 and said in capsys.readouterr().err


def test_best_without_records_gives_the_heuristic(project, capsys, monkeypatch):
    """A kernel's name alone is answered by the declaration this process registered last (see
    :func:`tunebench.lookup.declaration`): after an earlier test's tune of its own axpb, in this
    process, this one read that tune's records, and failed where its final round had adopted a
    config (on a busy machine). No other project's axpb is registered here."""
    from tunebench.kernel import REGISTRY

    monkeypatch.delitem(REGISTRY, "axpb", raising=False)
    monkeypatch.chdir(project())
    assert main(["best", "axpb", "--shape", "100", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["source"] == "heuristic" and answer["config"] == {"vec": 2, "unroll": 1, "mode": 0}
    assert answer["reason"].startswith("nothing is recorded for this bucket"), answer["reason"]


def test_a_misspelt_device_is_said_by_the_commands_once_also_where_they_then_fail(project, pytester, capsys,
                                                                                 monkeypatch, tmp_path):
    """`best` lost the warning where its lookup then failed; `export` printed it as Python's own,
    with a line of tunebench's code, beside its own line saying less."""
    root = project()
    pytester.runpytest("suites", *TUNE, "-k", "small")
    (device,) = [p.stem for p in (root / "records").glob("*.json")]
    typo = device[:-1] + ("0" if device[-1] != "0" else "1")
    assert main(["best", "nokernel", "--shape", "4", "--device", typo, "--records", str(root / "records")]) == 2
    err = capsys.readouterr().err
    assert f"warning: device={typo}: " in err and f"(did you mean {device}?)" in err
    assert main(["export", "--out", str(tmp_path / "x"), "--device", typo, "--records", str(root / "records"),
                 "--suites", str(root / "suites")]) == 0
    err = capsys.readouterr().err
    assert err.count(f"warning: device={typo}: ") == 1 and "sys.exit" not in err
    assert "warning: nothing is recorded for device" not in err  # the warning above says it, and more


def test_the_command_line_loads_neither_the_tuning_machinery_nor_the_plots_to_answer_best():
    """A thin layer over the library: `tunebench best` in a framework's scripts pays for what it
    asks, not for the pytest plugin, its workers, scipy and matplotlib (the report imports them itself)."""
    loaded = subprocess.run([sys.executable, "-c", "import sys, tunebench.cli; print(sorted(sys.modules))"],
                            capture_output=True, text=True, check=True).stdout
    for heavy in ("tunebench.plugin", "tunebench.session", "tunebench.workers", "tunebench.report", "matplotlib", "scipy"):
        assert f"'{heavy}'" not in loaded, heavy


@pytest.mark.parametrize("text", ["nan", "inf", "-1", "0", "x"])
def test_a_budget_or_timeout_that_is_not_a_positive_number_is_refused(text):
    """nan compares as neither negative nor zero: --tune-timeout nan never killed a hang, nor would inf."""
    with pytest.raises(argparse.ArgumentTypeError, match=f"expected a positive float, got '{text}'"):
        positive(float)(text)
    assert positive(float)("0.5") == 0.5 and positive(int, zero=True)("0") == 0


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly_and_the_version_is_told(tmp_path):
    """``tunebench best ... | head`` ended in a BrokenPipeError traceback."""
    command = [sys.executable, "-m", "tunebench.cli", "best", "layernorm", "--shape", "300,8192", "--json",
               "--records", str(ROOT / "records"), "--suites", str(ROOT / "suites")]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run.stdout.close()
    assert run.wait() == 141 and b"Traceback" not in run.stderr.read()
    version = subprocess.run([sys.executable, "-m", "tunebench.cli", "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == f"tunebench {tunebench.__version__}"


def test_a_folder_a_missing_or_an_unreadable_path_given_as_a_file_or_a_file_as_a_folder_is_named(
        tmp_path, capsys, monkeypatch):
    """``tunebench merge-records records/ ...`` printed IsADirectoryError's traceback, and so did
    ``--out`` naming a file; ``compile-check --suites`` naming a file that is no suite said
    "'NoneType' object has no attribute 'loader'". Each names the path at fault; ours is untouched."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "records").mkdir()
    ours = tmp_path / "ours.json"
    ours.write_text("{}")
    (tmp_path / "loop").symlink_to("loop")  # open() fails with ELOOP, as root reads any file
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo")  # its open would wait for a writer for ever
    for argv, said in (
            (["merge-records", "records", "ours.json", "ours.json"], "argument base: records: a folder, not a file"),
            (["merge-records", "ours.json", "records", "ours.json"], "argument ours: records: a folder, not a file"),
            (["merge-records", "ours.json", "ours.json", "gone.json"], "argument theirs: gone.json: no such file"),
            (["merge-records", "ours.json", "ours.json", "loop"],
             "argument theirs: loop: cannot be read (Too many levels of symbolic links)"),
            (["merge-records", "ours.json", "ours.json", "fifo"], "argument theirs: fifo: not a plain file"),
            (["export", "--out", "ours.json"], "argument --out: ours.json is a file, not a folder"),
            (["export", "--out", "dangling"], "argument --out: dangling is a link to nothing, not a folder"),
            (["export", "--out", "x" * 300 + "/report"], "File name too long"),
            (["report", "--out", "ours.json/report"], "argument --out: ours.json/report: ours.json is a file, not a folder")):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and said in err and "Traceback" not in err, (argv, err)
    assert ours.read_text() == "{}"
    assert main(["compile-check", "--suites", "ours.json"]) == 2
    assert ("tunebench compile-check: --suites ours.json: not a suite (a test_*.py file) nor a folder of them"
            in capsys.readouterr().err)
