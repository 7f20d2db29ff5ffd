"""The replay target on real recorded spaces (../shared/replay) and on records a test writes."""

import gc
import gzip
import json
import math
import os
import random
import re
import statistics
import warnings
from pathlib import Path

import pytest

from tunebench.buckets import Bucket
from tunebench.cli import main
from tunebench.measure import MeasureSettings
from tunebench.records import RecordStore
from tunebench import replay as replay_module
from tunebench.replay import Replay, ReplayError, convergence, simulate
from tunebench.session import Budget, Tuner
from tunebench.workers import CompareJob, TrialJob

REPLAY = Path(__file__).resolve().parents[2] / "shared" / "replay"
PNPOLY = REPLAY / "pnpoly_RTX_3090.json"
PNPOLY_GZ = REPLAY / "pnpoly_RTX_2080_Ti.json.gz"  # as the benchmark hub ships it
CONVOLUTION = REPLAY / "convolution_RTX_3090.json"
FINGERPRINT = {"target": "cpu", "name": "Test CPU 9000", "machine": "x86_64", "threads": 2}


def job(config, shape, kernel="convolution_kernel", dtype="float32"):
    return TrialJob(kernel, config, tuple(shape), dtype, MeasureSettings())


def cache_entry(params, time, **extra):
    return {**params, "time": time, "compile_time": 120.0, "verification_time": 0, "benchmark_time": 30.0, **extra}


def recorded_runs(entry):
    """A cache entry's runs as the replay holds them: ``times`` scaled so that their median is
    ``time``, the cache's objective."""
    scale = entry["time"] / statistics.median(entry["times"])
    return [t * scale for t in entry["times"]]


def kernel_tuner_cache(path, entries, closed=True):
    """A small Kernel Tuner cache, written the way Kernel Tuner writes one."""
    header = {"device_name": "Test GPU", "kernel_name": "vector-add", "problem_size": [1024],
              "tune_params_keys": ["block", "tile"], "tune_params": {"block": [32, 64, 128, 256], "tile": [1, 2]},
              "objective": "time", "cache": {}}
    text = json.dumps(header)[:-2]  # open: Kernel Tuner appends every entry, then closes the file
    for params, time in entries:
        text += "\n" + json.dumps({f"{params['block']},{params['tile']}": cache_entry(params, time)})[1:-1] + ","
    path.write_text(text[:-1] + "}\n}" if closed else text)
    return path


def test_a_kernel_tuner_space_is_its_tune_params_less_the_configs_it_lacks():
    for path, params, product, candidates in ((PNPOLY, 4, 4092, 4092), (CONVOLUTION, 8, 16896, 6768)):
        replay = Replay(path)
        recording = replay.recording()
        assert len(recording.space.names) == params and recording.space.size == product
        assert len(recording.candidates) == candidates
        assert replay.fingerprint == {"target": "replay", "name": "NVIDIA GeForce RTX 3090", "file": path.name}
        data = json.loads(path.read_text())
        assert recording.optimum == pytest.approx(min(e["time"] for e in data["cache"].values()
                                                      if not isinstance(e["time"], str)))


def test_a_kernel_tuner_param_of_lists_replays_as_its_text_and_its_tune_resumes(pytester):
    """A param whose values are lists (a block's shape) became tuples, which a space refuses, as
    the records would give them back as lists."""
    path = pytester.path / "cache.json"
    header = {"device_name": "Test GPU", "kernel_name": "k", "problem_size": [1024], "objective": "time",
              "tune_params_keys": ["block", "u"], "tune_params": {"block": [[16, 16], [32, 8]], "u": [1, 2]},
              "cache": {f"{b},{u}": cache_entry({"block": b, "u": u}, 1.0 + u + b[0] / 100)
                        for b in ([16, 16], [32, 8]) for u in (1, 2)}}
    path.write_text(json.dumps(header))
    recording = Replay(path).recording()
    assert recording.space.values["block"] == ("[16, 16]", "[32, 8]") and recording.optimum == pytest.approx(2.16)
    args = ("--tune", "--tune-target", f"replay:{path}", "--tune-records", str(pytester.path / "records"),
            "-p", "no:cacheprovider")
    pytester.runpytest(*args).assert_outcomes(passed=5)
    again = pytester.runpytest(*args)  # its records read back: every trial reused
    again.assert_outcomes(passed=5)
    again.stdout.fnmatch_lines(["*k *recorded *float32 *4 *0 *"])


def test_a_kernel_tuner_cache_over_a_product_beyond_the_bound_replays_its_recorded_configs(tmp_path):
    """hotspot's params span 4.4 million configs of which a cache records thousands: the bound on a
    suite's product refused it ("narrow the ranges", naming no file). A param of numbers and a
    string ("auto") was refused as a space mixing kinds."""
    names = [f"p{i}" for i in range(6)] + ["mode"]
    params = {**{n: list(range(12)) for n in names[:6]}, "mode": [32, 64, "auto"]}  # 12**6 * 3 = 8.9 million
    entries, draw = {}, random.Random(0)
    while len(entries) < 200:
        config = {n: draw.choice(v) for n, v in params.items()}
        entries[",".join(str(config[n]) for n in names)] = cache_entry(config, 1.0 + draw.random())
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"device_name": "Test GPU", "kernel_name": "big", "problem_size": [1024],
                                "objective": "time", "tune_params_keys": names, "tune_params": params,
                                "cache": entries}))
    recording = Replay(path).recording()
    assert len(recording.candidates) == 200 and recording.space.values["mode"] == ("32", "64", "auto")
    assert main(["replay", str(path), "--budget", "20", "--seeds", "2"]) == 0


def test_a_time_that_ran_is_no_failure_for_a_marker_in_another_field(tmp_path):
    """Kernel Tuner judges a config by its objective: a note or a metric of the user's holding
    a marker's text failed a config that ran, and the optimum became a slower one."""
    data = well_formed()
    data["cache"]["64,1"] = cache_entry({"block": 64, "tile": 1}, 1.0, note="InvalidConfig")
    data["cache"]["64,2"] = cache_entry({"block": 64, "tile": 2}, 0.5, __error__="RuntimeFailedConfig")
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    replay = Replay(path)
    assert replay.recording().optimum == 1.0
    assert replay.trial(job({"block": 64, "tile": 1}, (1024,), kernel="vector_add"))["status"] == "ok"
    assert replay.trial(job({"block": 64, "tile": 2}, (1024,), kernel="vector_add"))["status"] == "pruned_resources"


def test_a_cache_entry_written_twice_alike_replays(tmp_path):
    """Only a key repeated with another value is refused: one repeated alike raised a TypeError
    out of the JSON reader."""
    text = json.dumps(well_formed())
    entry = text.split('"cache": {', 1)[1].split("}, ", 1)[0] + "}"
    path = tmp_path / "cache.json"
    path.write_text(text.replace('"cache": {', '"cache": {' + entry + ", ", 1))
    assert text.count(entry) == 1 and path.read_text().count(entry) == 2
    assert Replay(path).recording().optimum == 1.5


def test_kernel_tuner_failure_markers_become_statuses(tmp_path):
    path = kernel_tuner_cache(tmp_path / "cache.json", [
        ({"block": 32, "tile": 1}, 1.5), ({"block": 32, "tile": 2}, "InvalidConfig"),
        ({"block": 64, "tile": 1}, "CompilationFailedConfig"), ({"block": 64, "tile": 2}, "RuntimeFailedConfig"),
        ({"block": 128, "tile": 1}, "SomethingElse"), ({"block": 256, "tile": 1}, 1e20)])
    replay = Replay(path)
    answers = {(b, t): replay.trial(job({"block": b, "tile": t}, (1024,), kernel="vector_add"))
               for b, t in ((32, 1), (32, 2), (64, 1), (64, 2), (128, 1), (128, 2), (256, 1))}
    assert {k: a["status"] for k, a in answers.items()} == {  # Kernel Tuner marks only the resources' failures
        (32, 1): "ok", (32, 2): "pruned_resources", (64, 1): "pruned_resources", (64, 2): "pruned_resources",
        (128, 1): "crashed", (128, 2): "pruned_resources", (256, 1): "pruned_resources"}  # 1e20: before 0.4.2
    assert answers[(64, 2)]["error"] == "Kernel Tuner: RuntimeFailedConfig (too many resources requested for launch)"
    assert answers[(128, 1)]["error"] == "SomethingElse"
    assert "not in the recorded space" in answers[(128, 2)]["error"]
    assert answers[(32, 1)]["samples"] == [1.5]  # an entry without 'times' replays its time
    assert replay.recording().candidates == [(32, 1), (32, 2), (64, 1), (64, 2), (128, 1), (256, 1)]
    assert replay.recording().optimum == 1.5


def test_a_time_written_as_a_number_s_text_is_that_number(tmp_path):
    """A cache another tool wrote with "1.5" for 1.5 replayed that config as crashed."""
    data = well_formed()
    data["cache"]["32,1"].update(time="1.5")
    data["cache"]["64,1"] = cache_entry({"block": 64, "tile": 1}, " 2e0 ", note="InvalidConfig")
    data["cache"]["64,2"].update(time="nan")
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    replay = Replay(path)
    assert replay.recording().objectives == pytest.approx({(32, 1): 1.5, (64, 1): 2.0, (64, 2): None})
    assert replay.trial(job({"block": 64, "tile": 2}, (1024,), kernel="vector_add"))["status"] == "crashed"


@pytest.mark.parametrize("time", [0, 0.0, -1.5, "0"], ids=["0", "0.0", "-1.5", "text 0"])
def test_a_time_of_zero_or_less_fails_that_config_and_the_rest_replays(time, tmp_path, capsys):
    """One such entry refused the whole file: no recorded time is 0, so it is no measurement."""
    data = well_formed()
    data["cache"]["64,1"] = cache_entry({"block": 64, "tile": 1}, time)
    data["cache"]["32,2"] = cache_entry({"block": 32, "tile": 2}, time)
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    with pytest.warns(replay_module.ReplayWarning) as said:
        replay = Replay(path)
    assert [str(w.message) for w in said] == [
        f"{path}: 2 cache entries give a 'time' of 0 or less, not a measurement: replayed as failed (crashed)"]
    assert replay.recording().optimum == 1.5 and len(replay.recording().candidates) == 4
    answer = replay.trial(job({"block": 64, "tile": 1}, (1024,), kernel="vector_add"))
    assert (answer["status"], answer["error"], answer["samples"]) == ("crashed", replay_module.UNMEASURED, [])
    path.write_text(json.dumps({**data, "kernel_name": "again"}))  # another file: not the cached load
    assert main(["replay", str(path), "--budget", "4", "--seeds", "1"]) == 0
    assert capsys.readouterr().err.count(f"warning: {path}: 2 cache entries give a 'time' of 0 or less") == 1


def test_the_objective_is_the_caches_time_even_where_its_runs_disagree(tmp_path):
    """The hub's RTX 2080 Ti caches record a ``time`` up to 1000 times their runs' mean: the
    runs give the spread, ``time`` the objective that Kernel Tuner and the hub rank by."""
    data = well_formed()
    data["cache"]["32,1"].update(time=1.0, times=[5.0, 6.0, 5.0, 7.0, 4.0])
    data["cache"]["64,2"] = cache_entry({"block": 64, "tile": 2}, 2.0, times=[1.0, 1.1, 0.9])
    path = tmp_path / "disagree.json"
    path.write_text(json.dumps(data))
    recording = Replay(path).recording()
    assert recording.objectives == pytest.approx({(32, 1): 1.0, (64, 2): 2.0}) and recording.optimum == pytest.approx(1.0)
    samples = Replay(path, seed=1).trial(job({"block": 32, "tile": 1}, (1024,), kernel="vector_add"))["samples"]
    assert {round(t, 9) for t in samples} <= {0.8, 1.0, 1.2, 1.4} and len(samples) == 5
    hub = Replay(PNPOLY_GZ).recording()
    best = min(hub.objectives, key=lambda k: hub.objectives[k] or math.inf)
    with gzip.open(PNPOLY_GZ) as f:
        entry = json.load(f)["cache"][",".join(map(str, best))]
    assert hub.optimum == pytest.approx(entry["time"]) and statistics.median(entry["times"]) < entry["time"] / 100


def test_a_cache_left_open_by_kernel_tuner_is_read_as_kernel_tuner_reads_it(tmp_path):
    path = kernel_tuner_cache(tmp_path / "open.json", [({"block": 32, "tile": 1}, 1.5)], closed=False)
    assert Replay(path).recording().candidates == [(32, 1)]


def test_a_replayed_trial_draws_from_the_recorded_runs_and_costs_the_recorded_time():
    data = json.loads(CONVOLUTION.read_text())
    entry = next(e for e in data["cache"].values() if not isinstance(e["time"], str))
    config = {n: entry[n] for n in data["tune_params_keys"]}
    replay = Replay(CONVOLUTION, seed=3)
    answer = replay.trial(job(config, (4096, 4096)))
    assert set(answer) == {"status", "error", "max_error", "samples", "compile_time_s", "warmup_calls",
                           "measure_s", "conditions", "cost_s"}
    assert answer["status"] == "ok" and len(answer["samples"]) == len(entry["times"])
    assert set(answer["samples"]) <= set(recorded_runs(entry))
    assert answer["cost_s"] == pytest.approx((entry["compile_time"] + entry["benchmark_time"]) / 1e3)
    assert answer["compile_time_s"] == pytest.approx(entry["compile_time"] / 1e3)
    assert replay.trial(job(config, (4096, 4096)))["samples"] == answer["samples"]  # one seed, one run
    draws = {tuple(Replay(CONVOLUTION, seed=s).trial(job(config, (4096, 4096)))["samples"]) for s in range(5)}
    assert len(draws) > 1


def test_a_kernel_tuner_cache_is_a_suite_of_its_own():
    kernel = Replay(CONVOLUTION).kernel()
    assert kernel.name == "convolution_kernel" and list(kernel.variants) == ["replay"]
    (bucket,) = kernel.buckets
    assert bucket.name == "recorded" and bucket.shapes == [(4096, 4096)] and list(bucket.ranges) == ["N0", "N1"]
    variant = kernel.variant("replay")
    valid, invalid = variant.space.enumerate()
    assert (len(valid), len(invalid)) == (6768, 0)  # the product's unrecorded configs are no candidates at all
    first = json.loads(CONVOLUTION.read_text())["cache"]["2,32,15,15,0,1,1,0"]  # the first entry that ran
    assert variant.baseline((4096, 4096), "float32") == {n: first[n] for n in variant.space.names}
    with pytest.raises(Exception, match="never run"):
        kernel.build_args((4096, 4096), "float32")


def records_file(tmp_path):
    """Two buckets of a kernel tuned on this 'device', one config recorded under two sources."""
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    buckets = [Bucket("small", N=(1, 99), shapes=[(10,), (50,)]), Bucket("large", N=(100, None), shapes=[(1000,)])]
    for bucket in buckets:
        store.put_task({"kernel": "k", "target": "cpu", "dtype": "float32", "bucket": bucket.name, "dims": ["N"],
                        "range": bucket.describe(), "source_hash": "new", "baseline": []})
    for vec in (1, 2, 4, 8):
        for unroll in (1, 2):
            for bucket in buckets:
                for shape in bucket.shapes:
                    ms = shape[0] / (vec * unroll) * (1.5 if bucket.name == "large" and vec == 8 else 1)
                    failed = vec == 8 and unroll == 2
                    store.add({"kernel": "k", "source_hash": "new", "bucket": bucket.name, "shape": list(shape),
                               "dtype": "float32", "config": {"vec": vec, "unroll": unroll},
                               "status": "compile_error" if failed else "ok", "error": None, "max_error": None,
                               "samples": [] if failed else [ms, ms * 1.1, ms * 0.95],
                               **({} if failed else {"stats": {"median": ms}}), "compile_time_s": 0.2,
                               "measure_s": 0.01, "device": store.device, "timestamp": "2026-01-02T00:00:00+00:00"})
    store.add({"kernel": "k", "source_hash": "old", "bucket": "large", "shape": [1000], "dtype": "float32",
               "config": {"vec": 1, "unroll": 1}, "status": "ok", "samples": [0.001], "stats": {"median": 0.001},
               "compile_time_s": 0.2,
               "measure_s": 0.01, "device": store.device, "timestamp": "2025-01-01T00:00:00+00:00"})
    return store.path


def test_a_records_file_replays_one_task_per_kernel_dtype_and_bucket(tmp_path):
    path = records_file(tmp_path)
    replay = Replay(path)
    assert replay.fingerprint["name"] == "Test CPU 9000"
    with pytest.raises(ReplayError, match="2 recorded tasks match.*bucket=large.*bucket=small"):
        replay.recording(kernel="k")
    small = replay.recording(bucket="small")
    assert small.space.names == ("vec", "unroll") and len(small.candidates) == 8
    assert small.objectives[(8, 1)] == pytest.approx((10 / 8 * 50 / 8) ** 0.5)  # geometric mean of the shapes
    assert small.objectives[(8, 2)] is None
    large = replay.recording(bucket="large")
    assert large.objectives[(1, 1)] == pytest.approx(1000)  # the newer trial, not the old source's
    assert large.optimum == pytest.approx(1000 / 4 / 2)
    trace = simulate(path, "bayes", 8, seed=1, bucket="small")
    assert len(trace) == 8 and trace[-1] == pytest.approx(1.0)
    answer = replay.trial(job({"vec": 2, "unroll": 2}, (50,), kernel="k"))
    assert answer["status"] == "ok" and set(answer["samples"]) <= {12.5, 12.5 * 1.1, 12.5 * 0.95}
    with pytest.raises(ReplayError, match="records file replays the suites"):
        replay.kernel()


def test_a_records_file_compares_a_config_stopped_early_by_its_recorded_samples(tmp_path):
    # a finalist may have been stopped early on one shape: its samples are drawn, as an ok run's
    store = RecordStore(records_file(tmp_path), FINGERPRINT)
    stopped = {**store.lookup("k", "new", (10,), "float32", {"vec": 1, "unroll": 1}), "status": "early_stopped"}
    store.add(stopped)
    store.compact()
    arms = (("best", {"vec": 4, "unroll": 2}, None), ("baseline", {"vec": 1, "unroll": 1}, None))
    answer = Replay(store.path).trial(CompareJob("k", (10,), "float32", arms, 5, MeasureSettings()))
    assert answer["status"] == "ok" and set(answer["samples"]["recorded"]["baseline"]) <= {10, 11, 9.5}


def test_simulate_reports_the_fraction_of_the_optimum_after_each_trial():
    trace = simulate(PNPOLY, "brute_force", 30, seed=0)
    assert len(trace) == 30 and all(0 < f <= 1 for f in trace)
    assert trace == simulate(PNPOLY, "brute_force", 30, seed=0)


def test_simulate_evaluates_the_recorded_objective_unless_noise_is_asked_for():
    """Measuring every config finds the optimum at its recorded objective; with the replayed
    noise a near rival draws faster with this seed, and the search keeps that rival."""
    everything = len(Replay(PNPOLY).recording().candidates)
    exact, noisy = (simulate(PNPOLY, "brute_force", everything, seed=0, noise=noise) for noise in (False, True))
    assert exact[-1] == 1.0
    assert noisy[-1] < 1.0
    assert exact == simulate(PNPOLY, "brute_force", everything, seed=1)  # the seed draws nothing here
    assert noisy != simulate(PNPOLY, "brute_force", everything, seed=1, noise=True)


def test_convergence_summarises_seeds_with_medians():
    traces = [[0.5, 0.96, 0.99] + [1.0] * 17, [0.2] * 10 + [0.97] * 10, [0.1] * 20]
    summary = convergence(traces, 20)
    assert summary["fraction_at"] == {"20": pytest.approx(0.97)}
    assert convergence(traces, 2)["fraction_at"] == {"2": pytest.approx(0.2)}  # at the budget asked, too
    assert list(convergence(traces, 40)["fraction_at"]) == ["20", "40"]
    assert summary["trials_to"]["0.95"] == {"median": 11, "reached": 2}
    assert summary["trials_to"]["0.99"] == {"median": None, "reached": 1}


def test_a_seed_under_noise_reaches_a_target_where_its_incumbent_stays_at_it():
    """Under --noise an incumbent measured faster by chance can be slower than the one before:
    a seed that touched 0.99 once and ended at 0.98 was counted as having reached it."""
    traces = [[0.5, 0.995, 0.98, 0.98], [0.5, 0.995, 0.98, 0.995], [0.96, 0.99, 0.99, 0.99]]
    summary = convergence(traces, 4)
    assert summary["trials_to"]["0.99"] == {"median": 4, "reached": 2}
    assert summary["trials_to"]["0.95"] == {"median": 2, "reached": 3}


def test_the_replay_command_prints_every_seed_and_the_summary(capsys):
    assert main(["replay", str(PNPOLY), "--strategy", "random", "--budget", "60", "--seeds", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["seed"] for r in out["runs"]] == [0, 1, 2] and all(len(r["fractions"]) == 60 for r in out["runs"])
    assert set(out["summary"]["fraction_at"]) == {"20", "50", "60"}
    assert set(out["summary"]["trials_to"]) == {"0.95", "0.99"}
    assert {"median", "reached"} == set(out["summary"]["trials_to"]["0.95"])
    assert out["candidates"] == 4092 and out["strategy"] == "random" and out["kernel"] == "cn_pnpoly"


def test_the_replay_command_measures_with_the_recorded_noise_only_when_asked(capsys):
    everything = str(len(Replay(PNPOLY).recording().candidates))
    runs = {}
    for noise in ([], ["--noise"]):
        assert main(["replay", str(PNPOLY), "--strategy", "brute_force", "--budget", everything, "--seeds", "1",
                     "--json", *noise]) == 0
        out = json.loads(capsys.readouterr().out)
        runs[out["noise"]] = out["runs"][0]["fractions"][-1]
    assert runs[False] == 1.0 and runs[True] < 1.0  # every config measured: a near rival draws faster
    assert main(["replay", str(PNPOLY), "--strategy", "random", "--budget", "20", "--seeds", "1", "--noise"]) == 0
    out = capsys.readouterr().out
    assert "configs on samples drawn from the recorded runs" in out and "seed 0: " in out
    assert re.search(r"median fraction of the optimum: \d\.\d{3} after 20 trials$", out, re.MULTILINE)


def test_noise_asked_of_a_cache_without_runs_says_it_has_none_to_draw(tmp_path, capsys):
    path = kernel_tuner_cache(tmp_path / "cache.json", [({"block": 32, "tile": 1}, 1.5), ({"block": 64, "tile": 2}, 2.5)])
    assert main(["replay", str(path), "--strategy", "random", "--budget", "2", "--seeds", "1", "--noise"]) == 0
    assert "records one run per config (no 'times'): --noise has no runs to draw from" in capsys.readouterr().err


def test_the_replay_command_names_the_file_or_the_strategy_it_cannot_use(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"rows": []}')
    for path, message in ((tmp_path / "missing.json", "cannot read"), (tmp_path / "bad.json", "not JSON"),
                          (tmp_path / "other.json", "neither a Kernel Tuner cache")):
        assert main(["replay", str(path)]) == 2
        err = capsys.readouterr().err
        assert str(path) in err and message in err
    assert main(["replay", str(PNPOLY), "--strategy", "hill_climbing"]) == 2
    assert "unknown strategy 'hill_climbing'" in capsys.readouterr().err


def test_interleaved_comparisons_draw_rounds_of_each_recorded_config():
    data = json.loads(CONVOLUTION.read_text())
    ran = [e for e in data["cache"].values() if not isinstance(e["time"], str)][:2]
    configs = [{n: e[n] for n in data["tune_params_keys"]} for e in ran]
    replay = Replay(CONVOLUTION)
    arms = (("best", configs[0], None), ("baseline", configs[1], None))
    answer = replay.trial(CompareJob("convolution_kernel", (4096, 4096), "float32", arms, 7, MeasureSettings()))
    (samples,) = answer["samples"].values()  # one placement: the recording's
    assert answer["status"] == "ok" and set(samples) == {"best", "baseline"}
    for entry, label in zip(ran, ("best", "baseline")):
        assert len(samples[label]) == 7 and set(samples[label]) <= set(recorded_runs(entry))
    missing = (("best", configs[0], None), ("baseline", {**configs[1], "block_size_x": 1}, None))
    answer = replay.trial(CompareJob("convolution_kernel", (4096, 4096), "float32", missing, 7, MeasureSettings()))
    assert answer["status"] == "pruned_resources" and answer["arm"] == "baseline"


def test_a_tuning_session_runs_on_a_replayed_space_in_place_of_the_device(tmp_path):
    replay = Replay(PNPOLY, seed=0)
    kernel = replay.kernel()
    variant = kernel.variant("replay")
    store = RecordStore.for_device(tmp_path, replay.fingerprint)
    tuner = Tuner("replay", replay.fingerprint, store, replay, strategy="bayes", budget=Budget(trials=25),
                  root=tmp_path)
    (bucket,) = kernel.buckets
    task = tuner.task(kernel, variant, "float32", bucket)
    task.candidates = variant.space.enumerate()[0]
    task.run()
    assert task.stop_reason == "budget of 25 trials spent" and len(task.outcomes) == 25
    row = task.summary_row()
    assert row["speedup"] > 1 and row["best_ms"] < 1.1 * Replay(PNPOLY).recording().optimum
    assert {t["status"] for t in store.trials()} <= {"ok", "pruned_resources"}  # Kernel Tuner's RuntimeFailedConfig
    assert len(store.source(variant.source_hash)) < 200  # the record keys the file, it does not hold it


def test_the_plugin_tunes_a_kernel_tuner_cache_as_a_suite_of_its_own(pytester):
    result = pytester.runpytest("--tune", "--tune-target", f"replay:{PNPOLY_GZ}",
                                "--tune-strategy", "bayes", "--tune-trials", "10", "-p", "no:cacheprovider", "-q")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes  # its failures are the resources', pruned as a tune on the GPU prunes them
    (records,) = Path(result.stdout.str().split("records in ")[1].split()[0]).parent.glob("*.json")
    assert len(RecordStore(records).trials()) == 11  # 10 candidates and the baseline
    result.stdout.fnmatch_lines(["*tunebench: replay NVIDIA GeForce RTX 2080 Ti, records in *tunebench-replay-*",
                                 "cn_pnpoly*recorded*float32*10*", "*builds: 0 compiled*"])
    assert not (pytester.path / "records").exists()  # a replay never writes into the project's records


def test_a_users_suite_beside_a_replayed_kernel_tuner_cache_is_skipped_saying_why(pytester, project):
    """"kernel axpb has no replay variant" named a term no page defines: the user's suites read as
    lacking something the cache needed, where the cache is a suite of its own."""
    project()
    path = pytester.path / "cache.json"
    path.write_text(json.dumps(well_formed()))
    result = pytester.runpytest("suites", "--tune", "--tune-target", f"replay:{path}", "-p", "no:cacheprovider", "-rs")
    result.stdout.fnmatch_lines(["SKIPPED * kernel axpb has no replay variant: a Kernel Tuner cache replays as a "
                                 "suite of its own (kernel vector_add), not through this kernel's suites"])


def test_the_summary_says_a_replays_records_are_in_a_temporary_folder_unless_tune_records(pytester):
    """Without --tune-records a replay's records go to a fresh temporary folder each run, which
    piled up in /tmp with no word of where, or why there."""
    path = pytester.path / "cache.json"
    path.write_text(json.dumps(well_formed()))
    result = pytester.runpytest("--tune", "--tune-target", f"replay:{path}", "-p", "no:cacheprovider")
    line = next(x for x in result.outlines if x.startswith("records: this replay's"))
    folder = Path(line.split(", ")[1])
    assert folder.name.startswith("tunebench-replay-") and list(folder.glob("*.json"))
    assert line == (f"records: this replay's are in a temporary folder of its own, {folder}, which nothing removes; "
                    f"--tune-records DIR keeps them there instead")
    kept = pytester.runpytest("--tune", "--tune-target", f"replay:{path}", "--tune-records",
                              str(pytester.path / "records"), "-p", "no:cacheprovider")
    assert kept.ret == 0 and not [x for x in kept.outlines if x.startswith("records: this replay's")]


def test_the_summary_counts_the_configs_pruned_as_beyond_the_devices_resources(pytester):
    """Among the configs weighed, in neither failed nor early: 95 % of a space pruned looked healthy."""
    path = pytester.path / "cache.json"
    path.write_text(json.dumps(well_formed()))
    result = pytester.runpytest("--tune", "--tune-target", f"replay:{path}", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["pruned: configs beyond the device's resources (shared memory, registers, threads "
                                 "per block), set aside without a failure: *[[]recorded-float32[]] 1"])


def test_the_plugin_replays_a_records_file_through_the_suites_that_recorded_it(project, pytester, quiet_verdicts):
    # its point is the replay: the real tune before it must record every trial, which other load may stop
    from tests.test_plugin import TUNE
    root = project()
    pytester.runpytest("suites", *TUNE, "--tune-strategy", "brute_force").assert_outcomes(passed=12, deselected=2)
    (recorded,) = (root / "records").glob("*.json")
    again = pytester.runpytest("suites", "--tune", "--tune-target", f"replay:{recorded}", "--tune-strategy",
                               "brute_force", "--tune-records", str(root / "replayed"), "-p", "no:cacheprovider")
    again.assert_outcomes(passed=12, deselected=2)
    again.stdout.fnmatch_lines(["*axpb*small*float32*5*5*1*0*", "*builds: 0 compiled*"])
    (replayed,) = (root / "replayed").glob("replay-*.json")
    assert len(RecordStore(replayed).trials()) == 15  # every trial answered from the records


def test_a_records_file_replays_only_the_configs_and_tasks_it_recorded(project, pytester, quiet_verdicts):
    """Unrecorded configs were asked, recorded as pruned_resources and spent the budget, and a
    kernel or bucket the file lacks was "tuned" on nothing."""
    from tests.test_plugin import TUNE
    root = project()
    pytester.runpytest("suites", *TUNE, "--tune-trials", "2", "-k", "small")
    (recorded,) = (root / "records").glob("*.json")
    held = {json.dumps(t["config"], sort_keys=True) for t in RecordStore(recorded).trials()}
    again = pytester.runpytest("suites", "--tune", "--tune-target", f"replay:{recorded}", "--tune-strategy",
                               "brute_force", "--tune-records", str(root / "replayed"), "-p", "no:cacheprovider", "-rs")
    outcomes = again.parseoutcomes()
    assert outcomes["skipped"] == 1 and "failed" not in outcomes
    again.stdout.fnmatch_lines(["SKIPPED ?1? *axpb?large-float32? is not in the recorded space of *"])
    (replayed,) = (root / "replayed").glob("replay-*.json")
    answered = RecordStore(replayed).trials()
    assert {json.dumps(t["config"], sort_keys=True) for t in answered} == held
    assert not {t["status"] for t in answered} - {"ok", "early_stopped"}  # none unrecorded, pruned


def test_a_gzipped_kernel_tuner_cache_is_read_as_the_hub_ships_it(tmp_path, capsys):
    plain = kernel_tuner_cache(tmp_path / "cache.json", [({"block": 32, "tile": 1}, 1.5), ({"block": 64, "tile": 2}, 2.5)])
    packed = tmp_path / "cache.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert Replay(packed).recording().objectives == Replay(plain).recording().objectives
    with gzip.open(PNPOLY_GZ, "rt") as f:
        entries = json.load(f)["cache"]
    replay = Replay(PNPOLY_GZ)
    assert replay.fingerprint["name"] == "NVIDIA GeForce RTX 2080 Ti"
    assert len(replay.recording().candidates) == len(entries) == 4092
    assert main(["replay", str(PNPOLY_GZ), "--strategy", "random", "--budget", "20", "--seeds", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["candidates"] == 4092


def well_formed():
    """A small Kernel Tuner cache as data, for a test to break."""
    return {"device_name": "Test GPU", "kernel_name": "vector_add", "problem_size": [1024],
            "tune_params_keys": ["block", "tile"], "tune_params": {"block": [32, 64], "tile": [1, 2]},
            "objective": "time", "cache": {"32,1": cache_entry({"block": 32, "tile": 1}, 1.5, times=[1.4, 1.5]),
                                           "64,2": cache_entry({"block": 64, "tile": 2}, "InvalidConfig")}}


def broken(change):
    data = well_formed()
    change(data)
    return json.dumps(data).encode()


#: Ways a Kernel Tuner cache file can be malformed: (its bytes, what the one-line message says).
MALFORMED = {
    "not JSON": (b"{not json", "not JSON"),
    "not text": (b"\xff\xfe\x00garbage", "not JSON"),
    "truncated gzip": (gzip.compress(json.dumps(well_formed()).encode())[:60], "damaged or truncated gzip"),
    "damaged gzip": (b"\x1f\x8b\x08\x00garbage", "damaged or truncated gzip"),
    "no header": (b"[1, 2, 3]", "neither a Kernel Tuner cache"),
    "cache not a map": (broken(lambda d: d.update(cache=[1, 2])), "'cache' is not a map"),
    "values not a list": (broken(lambda d: d["tune_params"].update(tile=2)), "'tune_params' is not a map"),
    "keys disagree": (broken(lambda d: d.update(tune_params_keys=["block"])), "'tune_params_keys' does not list"),
    "key not a name": (broken(lambda d: d.update(tune_params_keys=["block", ["tile"]])),
                       "'tune_params_keys' does not list"),  # a TypeError: unhashable type
    "key twice": (broken(lambda d: d.update(tune_params_keys=["block", "block", "tile"])),
                  "'tune_params_keys' does not list the params of 'tune_params', each once"),  # blamed an entry's key
    "empty cache": (broken(lambda d: d.update(cache={})), "holds no entry"),
    "entry not an object": (broken(lambda d: d["cache"].update({"32,1": 1.5})), "'32,1' is not an object"),
    "no param, entry not an object": (broken(lambda d: d.update(tune_params={}, tune_params_keys=[], cache={"": []})),
                                      "'' is not an object"),  # was an AttributeError of the fast path
    "param missing": (broken(lambda d: d["cache"]["32,1"].pop("tile")), "lacks the tunable param 'tile'"),
    "object as a value": (broken(lambda d: d["cache"]["32,1"].update(tile={"a": 1})), "JSON object"),
    "time missing": (broken(lambda d: d["cache"]["32,1"].pop("time")), "has no 'time'"),
    "time not a number": (broken(lambda d: d["cache"]["32,1"].update(time=[1.5])), "neither a number"),
    "times not numbers": (broken(lambda d: d["cache"]["32,1"].update(times=[1.4, "x"])), "'times' that is not"),
    "compile time text": (broken(lambda d: d["cache"]["32,1"].update(compile_time="1 s")), "non-numeric"),
    "no config listed": (broken(lambda d: d["tune_params"].update(block=[128])),
                         "cache entry '32,1' gives block=32, which is not among its 'tune_params' values"),
    "key of another": (broken(lambda d: d["cache"]["32,1"].update(block=64)),
                       "cache entry '32,1' holds the params '64,1', which its key does not spell"),
    # two runs appended one config with two times: the optimum was whichever came last
    "entry twice": (json.dumps(well_formed()).replace('"cache": {', '"cache": {"32,1": {"block": 32, "tile": 1, '
                                                        '"time": 0.001, "times": [0.001]}, ').encode(),
                    "'32,1' is given twice in one object, with different values"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_kernel_tuner_cache_is_one_line_naming_the_file(name, tmp_path, capsys):
    content, message = MALFORMED[name]
    path = tmp_path / "cache.json"
    path.write_bytes(content)
    with pytest.raises(ReplayError, match=message):
        Replay(path)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"tunebench replay: {path}: ") and message in err


def test_the_replay_target_refuses_a_malformed_cache_in_one_line(pytester):
    path = pytester.path / "cache.json.gz"
    path.write_bytes(MALFORMED["truncated gzip"][0])
    result = pytester.runpytest("--tune", "--tune-target", f"replay:{path}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --tune-target replay:{path}: {path}: a damaged or truncated gzip file*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_cache_tuned_for_another_objective_is_replayed_by_time_saying_so(tmp_path, capsys):
    """Said once, as the command's line: the file, written just now, is read again by each seed."""
    path = tmp_path / "gflops.json"
    path.write_text(json.dumps({**well_formed(), "objective": "GFLOP/s"}))
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        assert main(["replay", str(path), "--budget", "2", "--seeds", "2"]) == 0
    assert escaped == []
    assert capsys.readouterr().err.count(
        f"warning: {path}: the cache was tuned for 'GFLOP/s'; it is replayed by each config's 'time'") == 1


def test_the_replay_target_says_a_cache_where_no_config_ran_has_no_baseline(pytester):
    """It was read again as a records file, and that parser's complaint was shown."""
    data = json.loads(CONVOLUTION.read_text())
    data["cache"] = {k: {**e, "time": "CompilationFailedConfig"} for k, e in list(data["cache"].items())[:3]}
    path = pytester.path / "allfail.json"
    path.write_text(json.dumps(data))
    result = pytester.runpytest("--tune", "--tune-target", f"replay:{path}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --tune-target replay:{path}: {path}: no recorded config ran, so there is "
                                 f"no baseline"])


def test_a_config_stopped_early_on_one_shape_may_still_lead_the_bucket_and_reach_the_final_round(tmp_path):
    """Early stopping is per shape: a config 5 % behind one shape's best so far, and far ahead
    on the bucket's other shape, was never ranked, so it never met the heuristic."""
    from tunebench.session import Outcome

    replay = Replay(PNPOLY, seed=0)
    kernel = replay.kernel()
    variant = kernel.variant("replay")
    store = RecordStore.for_device(tmp_path, replay.fingerprint)
    tuner = Tuner("replay", replay.fingerprint, store, replay, budget=Budget(trials=1), root=tmp_path)
    bucket = Bucket("two", N0=(1, None), shapes=[(10,), (20,)])
    task = tuner.task(kernel, variant, "float32", bucket)

    def outcome(statuses_ms):
        trials = {s: {"status": st, "stats": {"median": ms}, "verdict": "clean"}
                  for s, (st, ms) in zip(bucket.shapes, statuses_ms)}
        return Outcome(configs={s: {} for s in bucket.shapes}, trials=trials)

    task.baseline = outcome([("ok", 1.0), ("ok", 1.0)])
    task.outcomes[("a",)] = outcome([("ok", 0.98), ("ok", 0.99)])
    task.outcomes[("b",)] = outcome([("early_stopped", 1.04), ("ok", 0.40)])  # slower on one, 2.5x on the other
    task.outcomes[("c",)] = outcome([("wrong_result", 1.0), ("ok", 0.1)])
    assert [k for _, k, _ in task.ranked()] == [("b",), ("a",), None]


def test_best_on_records_a_replayed_tune_made_serves_its_final_rounds_pick(pytester):
    """The replay device's target is "replay", its tasks' the one they were tuned on: best(),
    the export and the report found no final round, and served the heuristic as unconfirmed,
    where the tune's summary and the gate said the pick led by 1.38x."""
    import shutil
    from pathlib import Path

    import tunebench
    from tinydb import TinyDB

    root = Path(__file__).resolve().parent.parent
    for folder in ("suites", "kernels"):
        shutil.copytree(root / folder, pytester.path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (pytester.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    replayed = pytester.path / "replayed"
    assert pytester.runpytest("suites/test_row_reduce.py", "--tune", "-k", "few_rows", "-p", "no:cacheprovider",
                              "--tune-target", f"replay:{root / 'records' / 'cpu-amd-epyc-f26m2-2t-506d4e.json'}",
                              "--tune-records", str(replayed)).ret == 0
    (path,) = replayed.glob("*.json")
    check = [c for c in TinyDB(path).table("checks").all() if c["kind"] == "tune"][-1]
    kernel = tunebench.kernel.REGISTRY["row_reduce"]
    choice = tunebench.lookup(kernel, (4, 262144), path.stem, records=replayed)
    assert choice.config == check["shapes"][0]["best"] and "no final round" not in (choice.reason or "")
    from tunebench.export import collect

    exported = collect(path.stem, replayed, pytester.path / "suites")["kernels"]["row_reduce"]
    assert next(b for b in exported["float32"]["buckets"] if b["name"] == "few_rows")["config"] == choice.config


def test_a_time_budgeted_tune_run_again_spends_what_is_left_of_its_budget_not_a_whole_one_more(pytester):
    """The time budget restarted at every run: the same command run three times over a replay
    measured 4, then 5, then 7 more configs (a resumed tune searched twice its budget)."""
    args = ("--tune", "--tune-target", f"replay:{PNPOLY_GZ}", "--tune-strategy", "random", "--tune-time", "2",
            "--tune-trials", "500", "--tune-records", str(pytester.path / "records"), "-p", "no:cacheprovider")
    first = pytester.runpytest(*args)
    again = pytester.runpytest(*args)
    rows = [[line.split() for line in run.stdout.lines if line.startswith("cn_pnpoly ")][0] for run in (first, again)]
    assert int(rows[0][4]) > 3 and int(rows[1][4]) == 0, (rows, again.stdout.str()[-1500:])


def test_a_strategys_options_are_set_from_the_command_line_and_kept_with_its_trials(pytester):
    """Only its defaults could be searched with: a researcher's population or initial sample size
    needed a fork of the strategy's module."""
    def tune(*options):
        result = pytester.runpytest("--tune", "--tune-target", f"replay:{PNPOLY_GZ}", "--tune-strategy", "genetic",
                                    "--tune-trials", "15", "-p", "no:cacheprovider", "-q", "--tune-fresh", *options)
        (records,) = Path(result.stdout.str().split("records in ")[1].split()[0]).parent.glob("*.json")
        return result, [(t["config"], t.get("strategy_options")) for t in RecordStore(records).trials()]

    default, by_default = tune()
    small, by_small = tune("--tune-strategy-option", "population=3", "--tune-strategy-option", "mutation=0.5")
    small.stdout.fnmatch_lines(["strategy genetic population=3 mutation=0.5, seed 0;*"])
    assert {str(o) for _, o in by_small} == {str({"population": 3, "mutation": 0.5})}
    assert {o for _, o in by_default} == {None}
    assert [c for c, _ in by_small] != [c for c, _ in by_default]  # another search, not only another label
    for bad, said in (("size=3", "strategy genetic takes NAME=VALUE of its options: population (default 10), "
                                 "mutation (default 0.1)"),
                      ("population=many", "genetic's population is an int (default 10), not 'many'"),
                      ("population=0", "genetic's population is at least 1 (default 10)"),  # ended the tune in an IndexError
                      ("mutation=nan", "genetic's mutation is a finite number")):
        refused = pytester.runpytest("--tune", "--tune-target", f"replay:{PNPOLY_GZ}", "--tune-strategy", "genetic",
                                     "--tune-strategy-option", bad, "-p", "no:cacheprovider")
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        refused.stderr.fnmatch_lines([f"*--tune-strategy-option {bad}: {said}*"])


def test_a_kernel_tuner_1_5_cache_with_failed_configs_and_float32_keys_replays(tmp_path, recwarn):
    """Kernel Tuner 1.5 marks a failure in "__error__", with no time, writes its objective as a
    list, and keys a float32 param by str(np.float32(0.1)) while its JSON holds 0.10000000149011612:
    every such cache was refused ("has no 'time'", "holds the params of another key") or warned of."""
    entries = {}
    for block in (32, 64):
        for scale in (0.10000000149011612, 0.5):
            key = f"{block},{0.1 if scale < 0.2 else scale}"
            entries[key] = ({"block": block, "scale": scale, "__error__": "CompilationFailedConfig", "compile_time": 1.0}
                            if block == 64 and scale == 0.5 else
                            {"block": block, "scale": scale, "time": block * scale, "times": [block * scale] * 3,
                             "compile_time": 40.0, "benchmark_time": 5.0})
    path = tmp_path / "kt15.json"
    path.write_text(json.dumps({"device_name": "A4000", "kernel_name": "k", "problem_size": 1000,
                                "objective": ["time"], "tune_params_keys": ["block", "scale"],
                                "tune_params": {"block": [32, 64], "scale": [0.10000000149011612, 0.5]},
                                "cache": entries}))
    workers = Replay(path)
    statuses = {tuple(sorted(c.items())): workers.trial(job(c, (1000,), kernel="k"))["status"]
                for c in ({"block": b, "scale": s} for b in (32, 64) for s in (0.10000000149011612, 0.5))}
    assert statuses[(("block", 64), ("scale", 0.5))] == "pruned_resources"
    assert sorted(statuses.values()).count("ok") == 3
    assert not [w for w in recwarn if "tuned for" in str(w.message)]


def test_the_replay_command_takes_the_strategys_settings_and_refuses_a_bad_one(capsys):
    """Only a tune took --tune-strategy-option: the settings a Kernel Tuner user compares offline
    could not be replayed."""
    args = ["replay", str(PNPOLY), "--strategy", "genetic", "--budget", "12", "--seeds", "2", "--json"]
    assert main([*args, "--strategy-option", "population=4"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    default = json.loads(capsys.readouterr().out)
    assert tuned["strategy_options"] == {"population": 4} and default["strategy_options"] == {}
    assert tuned["runs"] != default["runs"]
    assert main([*args, "--strategy-option", "population=0"]) == 2
    said = capsys.readouterr().err  # by the command's own flag: it has no --tune-strategy-option
    assert "--strategy-option population=0" in said and "--tune-strategy-option" not in said, said
    assert main([*args, "--strategy-option", "bogus=1"]) == 2
    said = capsys.readouterr().err
    assert "--strategy-option bogus=1: strategy genetic takes" in said and "--tune-" not in said, said


def test_a_kernel_tuner_param_named_as_a_replayed_dim_tunes(pytester):
    """A param called N0 took the name of the dim a replayed cache's problem size is given: an
    INTERNALERROR saying to rename the param of a recorded file."""
    data = well_formed()
    data["tune_params_keys"] = ["N0", "tile"]
    data["tune_params"] = {"N0": [32, 64], "tile": [1, 2]}
    data["cache"] = {k: {("N0" if n == "block" else n): v for n, v in e.items()} for k, e in data["cache"].items()}
    path = pytester.path / "cache.json"
    path.write_text(json.dumps(data))
    result = pytester.runpytest("--tune", "--tune-target", f"replay:{path}", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-2000:]


def test_a_kernel_tuner_cache_whose_params_take_every_dim_prefix_replays(tmp_path):
    """Params N0, dim0, size0 and problem_size_dim0 took every prefix the replayed dims had: a
    StopIteration, from the CLI and the plugin alike."""
    data = well_formed()
    taken = ["N0", "dim0", "size0", "problem_size_dim0"]
    data["tune_params_keys"] = [*taken, "block", "tile"]
    data["tune_params"] = {**{n: [1] for n in taken}, **data["tune_params"]}
    data["cache"] = {f"1,1,1,1,{k}": {**{n: 1 for n in taken}, **e} for k, e in data["cache"].items()}
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    recording = Replay(path).recording()
    assert not set(recording.bucket.ranges) & set(recording.space.names)
    assert simulate(path, "hybrid", 2)[-1] == 1.0  # both recorded configs measured


@pytest.mark.parametrize("param", ["config", "configs"])
def test_a_kernel_tuner_param_named_config_replays_and_unrecorded_configs_stay_out(param, tmp_path):
    """The replay's constraint that a config be recorded took its one argument, ``config``, for a
    param so named (a TypeError once the plugin checked a config) or for a typo of ``configs``
    (the cache did not load)."""
    data = well_formed()
    data["tune_params_keys"] = [param, "tile"]
    data["tune_params"] = {param: [32, 64], "tile": [1, 2]}
    data["cache"] = {k: {(param if n == "block" else n): v for n, v in e.items()} for k, e in data["cache"].items()}
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    space = Replay(path).recording().space
    assert space.holds({param: 32, "tile": 1}) and space.holds({param: 64, "tile": 2})
    assert not space.holds({param: 32, "tile": 2})  # in the product, not recorded
    assert space.broken({param: 32, "tile": 2}, (1024,), ["N0"]) == ["is not one of the space's known configs"]


def test_a_kernel_tuner_param_named_shape_replays_on_the_target_as_on_the_command(pytester, capsys):
    """The target refused it as a name a constraint could not tell from the shape's, where
    ``tunebench replay`` took it: a recorded space has no constraint to read it."""
    data = well_formed()
    data["tune_params_keys"] = ["shape", "tile"]
    data["tune_params"] = {"shape": [32, 64], "tile": [1, 2]}
    data["cache"] = {k: {("shape" if n == "block" else n): v for n, v in e.items()} for k, e in data["cache"].items()}
    path = pytester.path / "cache.json"
    path.write_text(json.dumps(data))
    assert main(["replay", str(path), "--budget", "2", "--seeds", "1"]) == 0, capsys.readouterr().err
    result = pytester.runpytest("--tune", "--tune-target", f"replay:{path}", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    (records,) = Path(result.stdout.str().split("records in ")[1].split()[0]).parent.glob("*.json")
    assert {config["shape"] for config in (t["config"] for t in RecordStore(records).trials())} == {32, 64}


def test_a_kernel_tuner_param_of_many_values_loads_each_value_once_per_entry(tmp_path, monkeypatch):
    """Each entry's values were looked up in a list made again for that entry, of every value of
    the param: a param of 10,000 values took 11 s to load, of 50,000 minutes."""
    data = well_formed()
    data["tune_params_keys"], data["tune_params"] = ["block"], {"block": list(range(1, 1001))}
    data["cache"] = {str(b): cache_entry({"block": b}, 1.0 + b % 7, times=[1.0]) for b in range(1, 1001)}
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    calls = []
    made = replay_module._hashable
    monkeypatch.setattr(replay_module, "_hashable", lambda value: calls.append(value) or made(value))
    assert len(Replay(path).recording().candidates) == 1000
    assert len(calls) <= 2 * 1000


def test_a_recorded_space_rewritten_in_place_within_the_tick_of_its_last_load_is_loaded_again(tmp_path, one_tick):
    """Loads are kept for the seeds replayed next; a cache rewritten in place with as many bytes
    within the tick of the write the last load read left its stat as it was, and was replayed as it
    had been."""
    path = kernel_tuner_cache(tmp_path / "cache.json", [({"block": 32, "tile": 1}, 1.5), ({"block": 64, "tile": 2}, 2.5)])
    assert [r.optimum for r in replay_module.load(path)[1]] == [1.5]
    path.write_text(path.read_text().replace('"time": 1.5', '"time": 3.5'))
    assert [r.optimum for r in replay_module.load(path)[1]] == [2.5]


def test_a_settled_recorded_space_replaced_by_one_of_the_same_size_and_mtime_is_loaded_again(tmp_path, settled):
    """``rsync -t`` writes a new file with the source's mtime and renames it over the old: of as
    many bytes, its mtime and size were the key of the load kept, and the old space was replayed."""
    path = kernel_tuner_cache(tmp_path / "cache.json", [({"block": 32, "tile": 1}, 1.5), ({"block": 64, "tile": 2}, 2.5)])
    assert [r.optimum for r in replay_module.load(path)[1]] == [1.5]
    stamp = os.stat(path)
    new = tmp_path / "cache.json.new"
    new.write_text(path.read_text().replace('"time": 1.5', '"time": 3.5'))
    os.utime(new, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    os.replace(new, path)
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (stamp.st_size, stamp.st_mtime_ns)
    assert [r.optimum for r in replay_module.load(path)[1]] == [2.5]


def test_a_kernel_tuner_cache_loads_without_the_collector_scanning_its_entries_again_and_again(tmp_path):
    """The cyclic collector ran every few hundred documents or runs made and at times scanned
    every one made before: a large part of the load of a million-config cache. It waits until the
    load is done, and is on again after it."""
    data = well_formed()
    data["tune_params"] = {"block": list(range(1, 201)), "tile": list(range(1, 11))}
    data["cache"] = {f"{b},{t}": cache_entry({"block": b, "tile": t}, 1.0 + b / 100 + t, times=[1.0, 1.1])
                     for b in range(1, 201) for t in range(1, 11)}
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    started = []

    def collection(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.collect()  # none is due as the load begins
    gc.callbacks.append(collection)
    try:
        (recording,) = replay_module.load(path)[1]
    finally:
        gc.callbacks.remove(collection)
    assert len(started) <= 1 and gc.isenabled()  # one as the load ends, where so many were made
    assert len(recording.candidates) == 2000

def test_a_replayed_caches_heuristic_is_the_same_whatever_the_order_of_its_entries(tmp_path):
    """It was the first entry of the file that ran: one space, its entries written in another
    order (by a tune that did not brute-force it), had another heuristic."""
    data = well_formed()
    data["cache"] = {f"{b},{t}": cache_entry({"block": b, "tile": t}, 1.0 + b / 100 + t, times=[1.0])
                     for b in (32, 64) for t in (1, 2)}
    baselines = []
    for order in (list, reversed):
        data["cache"] = dict(order(list(data["cache"].items())))
        path = tmp_path / f"{order.__name__}.json"
        path.write_text(json.dumps(data))
        baselines.append(Replay(path).kernel().variant("replay").baseline((1024,), "float32"))
    assert baselines == [{"block": 32, "tile": 1}] * 2


@pytest.mark.parametrize("samples", [[0.0, 0.0], [-1.0], ["x"]])
def test_a_records_file_whose_samples_are_not_times_is_one_line_naming_the_file(samples, tmp_path):
    """A trial's samples of 0 or below were a math domain error naming nothing, and text a TypeError."""
    path = records_file(tmp_path)
    store = RecordStore.for_device(tmp_path, FINGERPRINT)
    store.add({  # a hand edit of a trial of the bucket
        "kernel": "k", "source_hash": "new", "bucket": "small", "shape": [10], "dtype": "float32",
        "config": {"vec": 2, "unroll": 1}, "status": "ok", "error": None, "max_error": None, "samples": samples,
        "stats": {"median": 1.0}, "compile_time_s": 0.2, "measure_s": 0.01, "device": store.device,
        "timestamp": "2026-01-03T00:00:00+00:00"})
    with pytest.raises(ReplayError, match=re.escape(f"{store.journal}: line 26: its samples are {samples!r}, not a list "
                                                    f"of positive times (ms), in the trial of k [vec:2 unroll:1] on "
                                                    f"shape [10]")):
        simulate(path, "random", 4, bucket="small")
