"""A task's progress line (Task.progress_line) as tuning goes, on the replay target: its trials
cost the time a cache records, so the time budget is spent at the same trial on every run."""

import json

from tunebench.records import RecordStore
from tunebench.replay import Replay
from tunebench.session import Budget, Tuner


def test_a_task_stopped_by_its_time_budget_says_its_final_round_comes_not_a_time_left_of_zero_or_less(tmp_path):
    """The trial that spent a --tune-time budget printed "about -3 s left" (or "about 0 s left"),
    a line a terminal kept through the whole final round that followed."""
    ms = {(b, t): 1.0 + b / 100 + t / 10 for b in (32, 64, 128) for t in (1, 2, 4)}
    cache = {f"{b},{t}": {"block": b, "tile": t, "time": m, "times": [m] * 3,
                          "compile_time": 2000.0, "benchmark_time": 1000.0}  # 3 s a trial
             for (b, t), m in ms.items()}
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"device_name": "Test GPU", "kernel_name": "vector_add", "problem_size": [1024],
                                "tune_params_keys": ["block", "tile"],
                                "tune_params": {"block": [32, 64, 128], "tile": [1, 2, 4]},
                                "objective": "time", "cache": cache}))
    replay = Replay(path, seed=0)
    kernel = replay.kernel()
    variant = kernel.variant("replay")
    store = RecordStore.for_device(tmp_path / "records", replay.fingerprint)
    tuner = Tuner("replay", replay.fingerprint, store, replay, budget=Budget(seconds=10.0), root=tmp_path)
    (bucket,) = kernel.buckets
    task = tuner.task(kernel, variant, "float32", bucket)
    task.candidates = variant.space.enumerate()[0]
    lines = []
    tuner.progress = lambda task, done: lines.append(task.progress_line())
    task.run()
    assert task.stop_reason == "budget of 10 s spent" and task.elapsed() > 10.0 + 1.0
    times = [line.rsplit(", ", 1)[1] for line in lines]
    assert all(not t.startswith("about ") or int(t.split()[1]) > 0 for t in times), times
    assert times[-2:] == ["the final round", "done"], times
