"""A task's progress line (Task.progress_line) as tuning goes, on the replay target: its trials
cost the time a cache records, so the time budget is spent at the same trial on every run."""

import json
from types import SimpleNamespace

import tunebench.progress
import tunebench.session
from tunebench.progress import Progress
from tunebench.records import RecordStore
from tunebench.replay import Replay
from tunebench.session import Budget, Tuner


def replay_task(tmp_path, budget, costs=True):
    """A task over a replay cache's nine configs under ``budget``, each trial costing 3 s, or
    nothing where not ``costs`` (a cache recording no compile_time or benchmark_time)."""
    ms = {(b, t): 1.0 + b / 100 + t / 10 for b in (32, 64, 128) for t in (1, 2, 4)}
    cost = {"compile_time": 2000.0, "benchmark_time": 1000.0} if costs else {}
    cache = {f"{b},{t}": {"block": b, "tile": t, "time": m, "times": [m] * 3, **cost} for (b, t), m in ms.items()}
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"device_name": "Test GPU", "kernel_name": "vector_add", "problem_size": [1024],
                                "tune_params_keys": ["block", "tile"],
                                "tune_params": {"block": [32, 64, 128], "tile": [1, 2, 4]},
                                "objective": "time", "cache": cache}))
    replay = Replay(path, seed=0)
    kernel = replay.kernel()
    variant = kernel.variant("replay")
    store = RecordStore.for_device(tmp_path / "records", replay.fingerprint)
    tuner = Tuner("replay", replay.fingerprint, store, replay, budget=budget, root=tmp_path)
    (bucket,) = kernel.buckets
    task = tuner.task(kernel, variant, "float32", bucket)
    task.candidates = variant.space.enumerate()[0]
    return task


class Terminal:
    """pytest's terminal reporter on a terminal: ``line`` is what its live line shows."""

    isatty = True

    def __init__(self):
        self.line = ""

    def rewrite(self, line, erase=False):
        self.line = line

    def ensure_newline(self):
        pass

    def write(self, text):
        pass


def test_a_task_stopped_by_its_time_budget_says_its_final_round_comes_not_a_time_left_of_zero_or_less(tmp_path):
    """The trial that spent a --tune-time budget printed "about -3 s left" (or "about 0 s left"),
    a line a terminal kept through the whole final round that followed."""
    task = replay_task(tmp_path, Budget(seconds=10.0))
    lines = []
    task.tuner.progress = lambda task, done: lines.append(task.progress_line())
    task.run()
    assert task.stop_reason == "budget of 10 s spent" and task.elapsed() > 10.0 + 1.0
    times = [line.rsplit(", ", 1)[1] for line in lines]
    assert all(not t.startswith("about ") or int(t.split()[1]) > 0 for t in times), times
    assert times[-2:] == ["the final round", "done"], times


def test_a_task_whose_trials_cost_no_time_counts_its_trials_left_not_its_final_round(tmp_path):
    """Trials that cost no time (a replay cache without their cost) left no positive time
    estimate, and every line of the search, 1/6 trials on, said "the final round"."""
    task = replay_task(tmp_path, Budget(trials=6), costs=False)
    lines = []
    task.tuner.progress = lambda task, done: lines.append(task.progress_line())
    task.run()
    assert task.stop_reason == "budget of 6 trials spent" and task.elapsed() == 0.0
    times = [line.rsplit(", ", 1)[1] for line in lines]
    assert times == ["5 trials left", "4 trials left", "3 trials left", "2 trials left", "1 trial left",
                     "the final round", "the final round", "done"], times


def test_a_terminal_shows_the_final_round_while_it_runs_not_the_last_drawn_trials_time_left(tmp_path, monkeypatch):
    """A terminal's line is redrawn at most every 0.2 s (here: never, but for the first, the
    round's and the last): the line of the trial that spent the budget was held back, and one
    before it, "about 4 s left", stood through the whole final round."""
    monkeypatch.setattr(tunebench.progress, "REDRAW_EVERY_S", float("inf"))
    task = replay_task(tmp_path, Budget(seconds=10.0))
    terminal = Terminal()
    pytest_config = SimpleNamespace(get_verbosity=lambda: 0, pluginmanager=SimpleNamespace(
        get_plugin=lambda name: terminal if name == "terminalreporter" else None))
    task.tuner.progress = Progress(pytest_config)
    shown, final_round = [], tunebench.session.final_round

    def shown_in_the_round(*args, **kwargs):
        shown.append(terminal.line)
        return final_round(*args, **kwargs)
    monkeypatch.setattr(tunebench.session, "final_round", shown_in_the_round)
    task.run()
    assert task.stop_reason == "budget of 10 s spent"
    assert [line.rsplit(", ", 1)[1] for line in shown] == ["the final round"], shown
    assert terminal.line.endswith(", done"), terminal.line


class Log:
    """pytest's terminal reporter writing to a CI log (not a terminal): ``lines`` as written."""

    isatty = False

    def __init__(self):
        self.lines = []

    def write_line(self, line):
        self.lines.append(line)


def test_a_log_gets_no_line_the_same_as_the_tasks_last_one(tmp_path, monkeypatch):
    """A final round longer than the plain line's 10 s wrote "..., the final round" twice, word
    for word, in a CI log."""
    monkeypatch.setattr(tunebench.progress, "PLAIN_EVERY_S", 0.0)  # each call may write: a line per trial and more
    task = replay_task(tmp_path, Budget(seconds=10.0))
    log = Log()
    pytest_config = SimpleNamespace(get_verbosity=lambda: 0, pluginmanager=SimpleNamespace(
        get_plugin=lambda name: log if name == "terminalreporter" else None))
    progress = task.tuner.progress = Progress(pytest_config)
    task.run()
    progress(task, False)  # its "..., done" line asked again, with nothing new to say
    assert log.lines and all(a != b for a, b in zip(log.lines, log.lines[1:])), log.lines
    assert log.lines[-1].endswith(", done"), log.lines
