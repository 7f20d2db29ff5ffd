"""Every strategy: budgets, seeds, termination, constraints and warm start, on replayed GPU spaces
(../shared/replay), on small spaces, and end to end on the CPU target."""

import inspect
import math
import random
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from tests.test_plugin import TUNE
from tunebench.replay import Replay, simulate
from tunebench.space import Space
from tunebench.strategies import MODULES, bayes, get, hybrid
from tunebench.strategies import options as strategy_options
from tunebench.strategies.base import positions, search
from tunebench.strategies.bayes import GaussianProcess, _matern
from tunebench.strategies.hybrid import farthest_first, product_columns, views

REPLAY = Path(__file__).resolve().parents[2] / "shared" / "replay"
FILES = [REPLAY / "pnpoly_RTX_3090.json", REPLAY / "convolution_RTX_3090.json"]
STRATEGIES = list(MODULES)
SEEDED = [s for s in STRATEGIES if s != "brute_force"]  # brute force has one order, whatever the seed

#: Every measurement of these tests' runs is judged clean (quiet_verdicts): beside other load a tune
#: stops at its heuristic, as documented, before a strategy has asked what its seed repeats (every
#: strategy's end-to-end tune failed beside two busy processes). A busy machine's tunes have tests
#: of their own (test_interference.py).
pytestmark = pytest.mark.usefixtures("quiet_verdicts")


def asked(strategy, recording, seed, trials, warm=()):
    """The candidates a strategy asks for on a recording, in order, told the recorded objectives."""
    keys = []

    def evaluate(key):
        keys.append(key)
        return recording.objectives[key]

    chosen = get(strategy)(recording.space, recording.candidates, random.Random(seed), warm=warm)
    search(chosen, evaluate, trials=trials)
    return keys


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("_")[0])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_strategy_on_a_replayed_space_keeps_its_budget_and_its_seed(strategy, path):
    recording = Replay(path).recording()
    first = asked(strategy, recording, 0, 40)
    assert len(first) == len(set(first)) == 40
    assert set(first) <= set(recording.candidates)
    assert asked(strategy, recording, 0, 40) == first
    if strategy in SEEDED:
        assert asked(strategy, recording, 1, 40) != first
    trace = simulate(path, strategy, 40, seed=0)
    assert len(trace) == 40 and trace == simulate(path, strategy, 40, seed=0)
    assert all(0 <= f <= 1 for f in trace)


#: A constrained space in which crossing two valid configs often gives an invalid one.
SMALL = Space({"a": [1, 2, 4, 8], "b": [1, 2, 4, 8], "c": ["x", "y"]},
              constraints=[lambda a, b: a * b in (4, 8), lambda c, a: c == "x" or a > 1])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_ends_once_the_whole_space_is_measured(strategy):
    valid, _ = SMALL.enumerate()
    keys = []

    def evaluate(key):
        keys.append(key)
        return None if key[0] == 8 else float(key[0] + key[1])  # failures inform, never stop

    reason = search(get(strategy)(SMALL, valid, random.Random(0)), evaluate)
    assert sorted(keys) == sorted(valid) and len(keys) == len(set(keys))
    assert reason == f"strategy {strategy} has no candidate left"


def test_genetic_breeds_only_valid_configs():
    recording = Replay(FILES[1]).recording()  # 6768 of the 16896 configs of the product were recorded
    keys = asked("genetic", recording, 0, 300)
    assert all(recording.space.is_valid(k) for k in keys)
    strategy = get("genetic")(SMALL, SMALL.enumerate()[0], random.Random(0))
    for _ in range(200):
        a, b = strategy.rng.randrange(len(strategy.candidates)), strategy.rng.randrange(len(strategy.candidates))
        for child in (strategy._cross(a, b), strategy._mutate(a, force=True)):
            assert SMALL.is_valid(strategy.candidates[child])


def test_genetic_draws_half_its_first_generation_whatever_the_warm_data():
    """Warm data from another device may point away from this one's optimum: seeded with it
    alone, the first generation bred only there (MI250X warmed with A4000 results reached 0.75
    of its optimum in 100 trials, 0.94 cold)."""
    space = Space({"a": [1, 2, 3, 4], "b": [1, 2, 3, 4], "c": ["x", "y"]})
    valid, _ = space.enumerate()
    warm = [(key, 1.0 + i / 100) for i, key in enumerate(k for k in valid if k[2] == "x")]  # 16, all c == "x"
    drawn = set()
    for seed in range(5):
        strategy = get("genetic")(space, valid, random.Random(seed), warm=warm, population=10)
        first = []
        search(strategy, lambda key: first.append(key) or 1.0, trials=10)
        assert first[:5] == [key for key, _ in warm[:5]]  # the best warm configs, best first
        assert first[5:] != [key for key, _ in warm[5:10]]
        drawn |= set(first[5:])
    assert any(key[2] == "y" for key in drawn)  # the rest drawn from the whole space


def test_annealing_steps_toward_where_the_warm_data_was_fast_but_not_only_there():
    """Started from the warm best alone, annealing gained little from another device's results
    (A6000 warmed with W6600's: a median 0.778 of its optimum after 100 trials, 0.923 cold)."""
    space = Space({"a": list(range(21)), "b": [0, 1]})
    keys, _ = space.enumerate()
    warm = [(key, 1.0 if key[0] < 10 else 2.0) for key in keys if key[0] != 3]  # (3, b): no warm score
    picks = []
    for given in ((), warm):
        strategy = get("annealing")(space, keys, random.Random(0), warm=given)
        steps = [strategy.candidates[strategy._neighbour(strategy.index[(10, 0)])] for _ in range(400)]
        picks.append(sum(a < 10 for a, _ in steps) / len(steps))
    assert 0.4 < picks[0] < 0.6 and 0.65 < picks[1] < 0.85  # the better of two draws: 3/4


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_time_budget_ends_the_search_once_spent(strategy):
    valid, _ = SMALL.enumerate()
    clock = []  # one second per trial

    def evaluate(key):
        clock.append(key)
        return float(key[0] + key[1])

    reason = search(get(strategy)(SMALL, valid, random.Random(0)), evaluate, seconds=3, spent=lambda: len(clock))
    assert reason == "budget of 3 s spent" and len(clock) == 3


def test_candidates_measured_before_count_toward_the_trial_budget_on_another_path():
    """Asked one more past the budget, the search evaluates those measured before that it did not
    ask (served from records, no cost), up to the budget, and stops; measured ones it asks cost
    nothing of it."""
    valid, _ = SMALL.enumerate()
    before = [valid[-1], valid[-2], valid[-3]]
    order = [before[0], valid[0], valid[1]]  # another path than the run that measured them

    class Fixed(get("random")):
        def ask(self):
            return order.pop(0) if order else None

    evaluated = []

    def evaluate(key):
        evaluated.append(key)
        return 1.0

    reason = search(Fixed(SMALL, valid, random.Random(0)), evaluate, trials=3, measured=before)
    assert reason == "budget of 3 trials spent, with those an earlier run measured"
    assert evaluated == [before[0], before[1], before[2]]  # the rest first measured first
    evaluated.clear()
    order[:] = [before[0], valid[0], valid[1]]
    assert search(Fixed(SMALL, valid, random.Random(0)), evaluate, trials=3, measured=before[:1]) \
        == "budget of 3 trials spent" and evaluated == [before[0], valid[0], valid[1]]  # a budget left: resumed
    evaluated.clear()
    order[:] = [valid[0]]  # a budget lowered below what the records hold: it evaluated all 3 of them
    search(Fixed(SMALL, valid, random.Random(0)), evaluate, trials=2, measured=before)
    assert evaluated == before[:2]
    # those measured before that other load disturbed are measured again at their cost, within the time budget
    evaluated.clear()
    clock = [0.0]
    order[:] = [valid[0], valid[1]]

    def measured_again(key):
        clock[0] += 10.0
        return evaluate(key)
    reason = search(Fixed(SMALL, valid, random.Random(0)), measured_again, trials=3, seconds=15.0,
                    spent=lambda: clock[0], measured=before)
    assert reason == "budget of 15 s spent" and evaluated == before[:2], (reason, evaluated)


@pytest.mark.parametrize("strategy", ["annealing", "genetic", "bayes", "hybrid"])
def test_warm_start_measures_the_best_warm_config_first(strategy):
    recording = Replay(FILES[0]).recording()
    ranked = sorted((k for k, t in recording.objectives.items() if t), key=recording.objectives.get)
    warm = [(ranked[500], 1.3), (ranked[10], 1.01), (("no", "such", "config", 0), 0.5), (ranked[2000], 2.0)]
    keys = asked(strategy, recording, 0, 5, warm=warm)
    assert keys[0] == ranked[10]
    cold = [simulate(FILES[0], strategy, 10, seed) for seed in range(3)]
    warm_traces = [simulate(FILES[0], strategy, 10, seed, warm=warm) for seed in range(3)]
    assert all(w[0] >= 0.95 for w in warm_traces) and min(c[0] for c in cold) < 0.95


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_strategy_tunes_real_cpu_kernels_and_repeats_its_choices_for_a_seed(strategy, project, pytester):
    """The second run reads the first one's measurements from the records: with the same seed
    and the same results, every strategy asks for the same candidates, so it measures none."""
    project()
    chosen = []
    for _run in ("first", "second"):
        result = pytester.runpytest("suites", *TUNE, "--tune-strategy", strategy, "--tune-trials", "4",
                                    "--tune-seed", "7", "-k", "small", "-v")
        result.assert_outcomes(passed=4 + 1, skipped=1, deselected=1 + 7)
        chosen.append(sorted(re.findall(r"small-float32\[(\S+)\] PASSED", result.stdout.str())))
    assert len(chosen[0]) == 4 + 1 and "baseline" in chosen[0]
    assert chosen[0] == chosen[1]
    assert re.search(r"axpb\s+small\s+float32\s+4\s+0\s", result.stdout.str()), "the second run measured anew"


def test_hybrid_asks_a_batch_of_distinct_candidates_before_any_is_told():
    recording = Replay(FILES[0]).recording()
    strategy = get("hybrid")(recording.space, recording.candidates, random.Random(0))
    told = set()
    for size in (5, 4, 3):  # the start, then the model's choices with results pending
        batch = [strategy.ask() for _ in range(size)]
        assert len(set(batch)) == size and not set(batch) & told
        for key in batch:
            strategy.tell(key, recording.objectives[key])
        told |= set(batch)
    assert strategy.chosen == 7


@pytest.mark.parametrize("strategy", ["bayes", "hybrid"])
def test_a_model_measures_every_config_of_a_space_once_fitting_its_hyperparameters_to_a_bounded_number_of_points(
        strategy, monkeypatch):
    """A fit's gradient steps cost O(points^3): refitted up to the last candidate, ``hybrid``
    spent 15 s of CPU measuring every config of a 1,023-config space, 13 of them in refits."""
    space = Space({"a": list(range(20)), "b": list(range(20))})
    keys, _ = space.enumerate()
    fitted = []
    fit = GaussianProcess.fit
    monkeypatch.setattr(GaussianProcess, "fit", lambda gp, y: fitted.append(len(y)) or fit(gp, y))
    measured = []
    reason = search(get(strategy)(space, keys, random.Random(0)),
                    lambda key: measured.append(key) or 1 + abs(key[0] - 13) + abs(key[1] - 4) / 3)
    assert sorted(measured) == keys and reason == f"strategy {strategy} has no candidate left"
    assert max(fitted) <= bayes.FIT_POINTS < len(keys) and len(fitted) > 1


def test_hybrid_starts_from_both_ends_of_every_params_range_and_a_random_config():
    space = Space({"block": list(range(32, 1025, 32)), "tile": [1, 2, 4, 8, 16], "unroll": [0, 1],
                   "method": [0, 1, 2]})
    keys, _ = space.enumerate()
    starts = []
    for seed in range(10):
        strategy = get("hybrid")(space, keys, random.Random(seed))
        start = [strategy.ask() for _ in range(5)]
        for j, name in enumerate(space.names):
            assert {min(space.values[name]), max(space.values[name])} <= {key[j] for key in start}, (seed, name)
        starts.append(start[0])
    assert len(set(starts)) == 10  # the first is drawn from the seed
    assert farthest_first(np.zeros((4, 0)), 3) == [0]  # nothing to spread over: no repeats


def test_hybrid_gives_alignment_coordinates_only_where_they_say_more_than_the_position():
    space = Space({"block": list(range(16, 257, 16)), "tile": [1, 2, 4, 8], "flag": [0, 1], "size": [64, 128]})
    keys, _ = space.enumerate()
    position, aligned = views(space, keys)
    assert position.shape == (len(keys), 4) and position.min() == 0 and position.max() == 1
    assert aligned.shape == (len(keys), 5)  # block only: tile's powers of two follow its order
    alignment = dict(zip((k[0] for k in keys), aligned[:, 4]))
    assert alignment[128] > alignment[64] > alignment[32] > alignment[48] == alignment[112] == alignment[144]


def test_hybrid_sees_a_categorical_param_both_in_its_order_and_one_hot():
    """Names, or a method's number 0, 1, 2, ...: a view with one column per choice beside the
    positional one; two choices, or numbers that are amounts, stay positioned."""
    space = Space({"tile": [1, 2, 4, 8], "mode": ["a", "b", "c"], "method": [0, 1, 2, 3], "flag": [0, 1],
                   "unroll": [1, 2, 3]})
    keys, _ = space.enumerate()
    position, aligned, one_hot, one_hot_aligned = views(space, keys)
    assert position.shape[1] == 5 and one_hot.shape[1] == 3 + 3 + 4
    assert aligned.shape[1] == one_hot_aligned.shape[1] - 5 == 7  # method and unroll: 2 divides them unevenly
    rows = {k: one_hot[i] for i, k in enumerate(keys)}
    assert list(rows[(4, "b", 3, 1, 2)][1:4]) == [0, 1, 0] and list(rows[(4, "b", 3, 1, 2)][4:8]) == [0, 0, 0, 1]
    assert views(Space({"tile": [1, 2, 4], "flag": [0, 1]}), [(1, 0), (4, 1)])[0].shape == (2, 2)
    assert len(views(Space({"tile": [1, 2, 4], "flag": [0, 1]}), [(1, 0), (4, 1)])) == 1


def test_hybrid_learns_that_a_param_names_choices_and_finds_the_optimum():
    """A method whose speed does not follow its order (as on the replayed pnpoly spaces): the
    one-hot view explains that better than the positional one."""
    space = Space({"method": list("abcdef"), "scale": [0.25 * n for n in range(1, 33)]})
    keys, _ = space.enumerate()
    speed = dict(zip("abcdef", [1.0, 6.0, 7.0, 1.3, 8.0, 1.5]))

    def objective(key):
        method, scale = key
        return speed[method] * (1 + abs(scale - 3.5))

    for seed in range(5):  # at 40 trials the choice still turns with what was measured, in some seeds
        strategy = get("hybrid")(space, keys, random.Random(seed))
        seen = []
        search(strategy, lambda key: seen.append(key) or objective(key), trials=60)
        assert len(strategy.models) == 2 and strategy.model is strategy.models[1]
        assert ("a", 3.5) in seen[:40]


def test_hybrid_learns_that_alignment_matters_and_finds_the_aligned_optimum():
    """Threads in multiples of 16, the powers of two 20 times faster than their neighbours
    (as on the replayed convolution spaces): the model with alignment explains that better."""
    space = Space({"threads": list(range(16, 513, 16)), "tile": list(range(1, 9))})
    keys, _ = space.enumerate()

    def objective(key):
        threads, tile = key
        pow2 = threads & (threads - 1) == 0
        return (1 if pow2 else 20) * (1 + abs(threads - 128) / 512) * (1 + abs(tile - 5) / 8)

    for seed in range(5):  # at 40 trials the choice still turns with what was measured, in some seeds
        strategy = get("hybrid")(space, keys, random.Random(seed))
        seen = []
        search(strategy, lambda key: seen.append(key) or objective(key), trials=60)
        assert strategy.model is strategy.models[1]
        assert (128, 5) in seen[:40]


def test_hybrid_gives_a_product_column_per_group_of_x_y_z_params():
    space = Space({"block_size_x": [16, 32], "block_size_y": [1, 2], "tile_size_x": [1, 2, 4], "tile_size_y": [1, 8],
                   "tile_stride_x": [0, 1], "tile_stride_y": [0, 1], "unroll_x": [1, 2], "grid_z": [1, 2],
                   "grid_y": [3]})
    keys, _ = space.enumerate()
    P = positions(space, keys)
    threads, work = product_columns(space, P)  # strides: not all positive; unroll: alone; grid: one value of y
    block = {k[0] * k[1]: t for k, t in zip(keys, threads[:, 0])}
    area = {k[2] * k[3]: w for k, w in zip(keys, work[:, 0])}
    assert block[16] == 0 and block[64] == 1 and block[16] < block[32] < block[64]
    assert area[1] == 0 and area[32] == 1 and area[1] < area[2] < area[4] < area[8] < area[16] < area[32]
    viewed = views(space, keys)
    assert len(viewed) == 2 and viewed[1].shape[1] == viewed[0].shape[1] + 2


def test_hybrid_learns_that_a_tiles_area_matters_and_finds_the_optimum(monkeypatch):
    """The best tiles lie on a hyperbola of equal area (as on the replayed RTX 3090 convolution,
    whose two best basins hold tiles of 1 x 8 and 8 x 1): the product view explains that, and finds
    the best tile's shape where positions alone keep to one basin."""
    tiles = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    space = Space({"tile_size_x": tiles, "tile_size_y": tiles, "block": list(range(32, 513, 32))})
    keys, _ = space.enumerate()

    def objective(key):
        x, y, block = key
        return (1 + abs(math.log2(x * y / 16))) ** 2 * (1 + abs(block - 256) / 512) * (1 + 0.01 * abs(x - 2))

    def searches():
        found = chosen = 0
        for seed in range(10):
            strategy = get("hybrid")(space, keys, random.Random(seed))
            seen = []
            search(strategy, lambda key: seen.append(key) or objective(key), trials=60)
            found += (2, 8, 256) in seen
            chosen += strategy.models.index(strategy.model) >= 2  # views 2 and 3 have the product column
        return found, chosen

    found, chosen = searches()
    assert found >= 5 and chosen >= 6
    monkeypatch.setattr(hybrid, "product_columns", lambda space, P: [])
    assert searches()[0] < found - 4


def test_hybrid_learns_that_a_blocks_threads_matter_and_finds_the_optimum(monkeypatch):
    """The fastest blocks hold 768 threads whatever their shape (as on the replayed A4000
    dedispersion, whose best configs are blocks of 8 x 96, 16 x 48 and 4 x 192): the product view
    explains that; positions alone see a curved ridge and settle on one part of it."""
    space = Space({"block_size_x": [1, 2, 4, 8, 16, 32], "block_size_y": list(range(32, 257, 8)),
                   "tile": list(range(1, 9))})
    keys, _ = space.enumerate()

    def objective(key):
        x, y, tile = key
        return (1 + abs(math.log2(x * y / 768))) ** 2 * (1 + abs(tile - 6) / 16) * (1 + 0.002 * abs(x - 8))

    def searches():
        found = 0
        for seed in range(10):
            strategy = get("hybrid")(space, keys, random.Random(seed))
            seen = []
            search(strategy, lambda key: seen.append(key) or objective(key), trials=60)
            found += (8, 96, 6) in seen
        return found

    found = searches()
    assert found >= 6
    monkeypatch.setattr(hybrid, "product_columns", lambda space, P: [])
    assert searches() <= found - 4


def test_hybrid_line_search_measures_the_config_the_model_expects_fastest():
    """A line search exploits: of the configs one param away from the best, the one of the
    smallest posterior mean, whatever its expected improvement."""
    space = Space({"a": list(range(12)), "b": list(range(12))})
    keys, _ = space.enumerate()
    strategy = get("hybrid")(space, keys, random.Random(0), local=1)
    for key in ((0, 0), (11, 11), (0, 11), (11, 0), (5, 5), (6, 5), (5, 7)):
        strategy.free[strategy.index[key]] = False
        strategy.tell(key, 1 + abs(key[0] - 7) + abs(key[1] - 5))
    strategy.chosen = 1
    pick = strategy._propose()
    logs = np.log([1 + abs(a - 7) + abs(b - 5) for a, b in (strategy.candidates[i] for i in strategy.measured)])
    mean, _ = strategy.model.predict((logs - logs.mean()) / logs.std())
    on = np.flatnonzero(strategy._lines(logs) & strategy.free)
    assert pick == on[np.argmin(mean[on])] and strategy.candidates[pick][1] == 5


def test_hybrid_searches_the_lines_of_elites_that_lie_apart():
    """The line search's candidates differ from one of the three best configs in one param; an
    elite one param away from a better one adds no line of its own."""
    space = Space({"a": list(range(20)), "b": list(range(20))})
    keys, _ = space.enumerate()
    strategy = get("hybrid")(space, keys, random.Random(0), elite=3)
    for key, ms in (((3, 3), 1.0), ((3, 4), 1.1), ((12, 15), 1.2), ((17, 1), 1.3), ((9, 9), 5.0)):
        strategy.free[strategy.index[key]] = False
        strategy.tell(key, ms)
    lines = strategy._lines(np.log([1.0, 1.1, 1.2, 1.3, 5.0]))
    on = {keys[i] for i in np.flatnonzero(lines)}
    elites = ((3, 3), (12, 15), (17, 1))
    assert on == {k for k in keys if any(sum(x != y for x, y in zip(k, e)) == 1 for e in elites)}


def exact_posterior(gp, y):
    """The posterior mean, sd and log evidence (up to its constant) of a Gaussian process's
    points, solved directly from its kernel."""
    ls, s2, sn2, sl2 = gp._hyper(gp.theta)
    Z, Xc = gp.X / ls, gp.Xc
    K = s2 * _matern(((Z[:, None, :] - Z[None, :, :]) ** 2).sum(2)) + sl2 * Xc @ Xc.T
    p = gp.points
    Kpp = K[np.ix_(p, p)] + np.diag(sn2 + np.array(gp.extra))
    Ks = K[:, p]
    mean = Ks @ np.linalg.solve(Kpp, y)
    var = np.diag(K) - np.einsum("ij,ji->i", Ks, np.linalg.solve(Kpp, Ks.T))
    evidence = -0.5 * y @ np.linalg.solve(Kpp, y) - 0.5 * np.linalg.slogdet(Kpp)[1]
    return mean, np.sqrt(np.maximum(var, 1e-12)), evidence


def test_the_gaussian_process_posterior_is_exact_whether_it_predicted_before_the_last_points_or_not():
    """A model that predicts after its fit extends its candidates' factor point by point; one
    that only weighed its evidence forms it at its first prediction: both give the exact
    posterior and evidence of all their points."""
    rng = np.random.default_rng(0)
    X = rng.random((300, 3))
    y = rng.normal(size=14)
    eager, lazy = GaussianProcess(X), GaussianProcess(X)
    for gp in (eager, lazy):
        for i in range(10):
            gp.add(i * 7, extra=0.3 if i < 2 else 0.0)
        gp.fit(y[:10])
    eager.predict(y[:10])
    for gp in (eager, lazy):
        for i in range(10, 14):
            gp.add(i * 7)
    lazy.evidence(y)
    for gp in (eager, lazy):
        mean, sd = gp.predict(y)
        want_mean, want_sd, want_evidence = exact_posterior(gp, y)
        assert np.allclose(mean, want_mean, atol=1e-8) and np.allclose(sd, want_sd, atol=1e-6)
        assert gp.evidence(y) == pytest.approx(want_evidence, abs=1e-8)


def test_the_gaussian_process_forms_its_posterior_of_many_candidates_in_blocks_of_rows(monkeypatch):
    """The kernel of every candidate against the points, formed at once, took 3.5 times the
    posterior's own matrix beside it: 11 GB at a million candidates and 200 points."""
    rng = np.random.default_rng(0)
    X, y = rng.random((20_000, 3)), rng.normal(size=60)
    posteriors = []
    for rows in (len(X), 1_000):
        monkeypatch.setattr(bayes, "ROWS", rows, raising=False)
        gp = GaussianProcess(X)
        for i in range(len(y)):
            gp.add(i * 300)
        gp.fit(y)
        tracemalloc.start()
        try:
            posteriors.append(gp.predict(y))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 1.5 * gp.V.nbytes
    assert np.allclose(posteriors[0][0], posteriors[1][0]) and np.allclose(posteriors[0][1], posteriors[1][1])


def test_hybrid_names_its_next_start_draws_ahead_and_a_guess_once_the_model_chooses():
    recording = Replay(FILES[0]).recording()
    strategy = get("hybrid")(recording.space, recording.candidates, random.Random(0))
    ahead = strategy.upcoming(3)
    assert [strategy.ask() for _ in range(3)] == ahead  # the start: exactly what comes
    for _ in range(5):
        key = strategy.ask()
        strategy.tell(key, recording.objectives[key])
    strategy.ask()  # the model's first choice
    guess = strategy.upcoming(4)
    assert len(guess) == 4 and len(set(guess)) == 4 and not set(guess) & set(strategy.candidates[i] for i in strategy.measured)


def test_a_spaces_numbers_are_placed_by_their_order_not_the_order_they_are_listed_in():
    """Declared [128, 32, 256, 64], neighbours in the list were strangers in the kernel, and a
    method's numbers [1, 0, 2] were taken for amounts: on pnpoly with its lists shuffled, the
    default strategy reached 0.884 of the optimum in 100 trials, random search 0.956."""
    listed = Space({"block": [128, 32, 256, 64], "method": [1, 0, 2], "kind": ["b", "a"]})
    ordered = Space({"block": [32, 64, 128, 256], "method": [0, 1, 2], "kind": ["b", "a"]})
    configs = [{"block": b, "method": m, "kind": k} for b in (32, 256, 64) for m in (2, 0) for k in ("a", "b")]
    assert (positions(listed, [listed.key(c) for c in configs]) ==
            positions(ordered, [ordered.key(c) for c in configs])).all()
    assert positions(listed, [listed.key(configs[0])]).tolist() == [[0, 2, 1]]  # text keeps the list's order
    assert hybrid._categorical([1, 0, 2]) and hybrid._categorical([0, 1, 2]) and not hybrid._categorical([1, 2, 4])


@pytest.mark.parametrize("name, setting, said", [
    ("bayes", "warm_noise=-1", "bayes's warm_noise is at least 0 (default 0.3)"),  # a LinAlgError once warm data came
    ("hybrid", "warm_noise=-1", "hybrid's warm_noise is at least 0 (default 0.3)"),
    ("bayes", "warm_points=-2", "bayes's warm_points is at least 0 (default 40)"),
    ("annealing", "temperature=-1", "annealing's temperature is at least 0 (default 0.1)"),  # took every slower step
    ("genetic", "mutation=2", "genetic's mutation is from 0 to 1 (default 0.1)"),
    ("hybrid", "elite=0", "hybrid's elite is at least 1 (default 1)"),  # searched every elite's lines
    ("hybrid", "clip=1.5", "hybrid's clip is from 0 to 1 (default 0.3)")])
def test_an_option_outside_its_range_is_refused_before_the_tune_naming_the_range(name, setting, said):
    """A value a strategy cannot search with ended a tune in a numpy error, once warm data came
    on a second bucket; others were accepted and searched as nonsense."""
    with pytest.raises(ValueError) as refused:
        strategy_options(name, [setting])
    assert str(refused.value) == f"--tune-strategy-option {setting}: {said}"


@pytest.mark.parametrize("name", MODULES)
def test_every_option_of_a_strategy_has_its_range(name):
    """An option without one is taken unchecked: the ranges replaced a trial search that caught
    any value the strategy could not search with."""
    strategy = get(name)
    options = {p.name for p in inspect.signature(strategy.__init__).parameters.values()
               if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert options == set(strategy.ranges)


@pytest.mark.parametrize("name", ["annealing", "genetic", "bayes", "hybrid"])
def test_every_option_at_the_ends_of_its_range_searches_with_and_without_warm_data(name):
    """The ranges are the contract: a value in them is one the strategy searches with."""
    space = Space({"a": [1, 2, 4, 8], "b": [0, 1, 2], "c": ["x", "y"]})
    candidates, _ = space.enumerate()
    warm = [(key, 1.0 + i / 10) for i, key in enumerate(candidates[::3])]
    strategy = get(name)
    for option, (low, high) in strategy.ranges.items():
        for value in (low, high if high is not None else 1000 * max(low, 1)):
            settings = strategy_options(name, [f"{option}={value}"])
            for given in ((), warm):
                asked = []
                search(strategy(space, candidates, random.Random(0), warm=given, **settings),
                       lambda key: asked.append(key) or 1.0 + sum(hash(v) % 7 for v in key) / 10, trials=12)
                assert len(set(asked)) == 12, (option, value, given)
