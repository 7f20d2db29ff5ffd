"""``hybrid`` (the default): Bayesian optimisation interleaved with line searches around the
best configs measured, over coordinates that the data picks.

Why: on real GPU spaces (the brute-forced ones in ``../shared/replay``) the fast configs sit in
a few narrow basins, and one basin is often found only along one param from a config that is
nearly as fast: a block of 128 threads wins where 112 and 144 are 100 times slower, a tile of
20 wins where the model expects a power of two. A Gaussian process alone converges into the
first basin it finds; local search alone needs far more trials than there are. So, per trial:

- first the best ``warm_trials`` warm configs, then a spread start until ``initial`` are
  measured: a random candidate, then each time the candidate farthest (in params' positions)
  from those the start picked, so that the first model sees every param's range instead of
  wherever five random draws land;
- then every ``local``-th trial is a *line search*: among the candidates that differ from one
  of the ``elite`` best configs measured in exactly one param, whatever its value, the one the
  model expects fastest (its posterior mean: the line search exploits, the global step explores).
  The elites are taken fastest first, skipping a config within one param of an elite already
  taken, so that their lines cross different regions;
- every other trial is *global*: the largest expected improvement over every candidate.

The model is :class:`~tunebench.strategies.bayes.GaussianProcess` over the log of the
objective, clipped from above at its ``clip`` quantile among the configs measured (failed ones
count as the slowest): a config 100 times slower than the best says no more than one 3 times
slower, and clipping spends the model's resolution on the fast configs. Coordinates, each in
[0, 1]: the position of a param's value in its list (so powers of two are evenly spaced, and so
are steps of 32); and, for an integer param whose values are divisible by different powers of
two (not in the order of the list), that power: its *alignment*. A param whose values name
choices (three or more of them, not all numbers, or the integers 0, 1, 2, ...: a method's
number) may have no order at all: its view is one column per value (one-hot), where every two
choices lie equally apart. Params named ``STEM_x``, ``STEM_y`` (``STEM_z``), numbers, have one
more column: the log of their product. For a thread's tile that is its *work*, which sets its
registers and reuse whatever the tile's shape (a 1 x 8 tile and an 8 x 1 lie apart in positions
and together here); for the thread block it is its threads, which set occupancy (the A4000
dedispersion's best blocks, 8 x 96, 16 x 48 and 4 x 192, all hold 768). Whether alignment
matters, whether a param's order does and whether products do differs between kernels, so
there is a model per view: positions, with and without the alignment columns, each again with
the categorical params one-hot (where there are any), and all of those again with the product
columns (where there are any); the one whose marginal likelihood is larger ranks the
candidates, chosen again at every refit.

Measured over seeds 0..99 of the eight spaces at 100 trials, each config at its recorded
objective (``tunebench.replay.simulate``), counting the searches at or above the bar of
docs/strategies.md (at least 0.97 and at least Kernel Tuner's best strategy after 200 trials,
its median over 20 seeds): 666 of 800. Before the thread block had a product column and the
line search took the largest expected improvement on the lines: 649, of which the A4000
dedispersion 17 of 100 (its median short of the bar), now 64; the four convolution spaces lose
3 to 8 searches each and the RTX 3090 pnpoly 6, every space's median at the bar. The block's
column with the old line search: 658 (the W6600 convolution 49 of 100, its median short); the
new line search without it, over seeds 0..39: the A4000 still short (6 of 40).

Warm data seeds every model as in ``bayes``. A candidate asked and not yet told is pending: it
is never asked again, so that several asks before the tells give distinct candidates (a batch),
each chosen with what has been told so far; :meth:`Hybrid.upcoming` names the start's next
draws exactly and, after it, the runners-up of the last global choice (for builds ahead and the
other devices of a cluster).

Options (keyword arguments):

- ``initial=5``: trials (warm or random) before the model chooses.
- ``local=4``: every ``local``-th model-chosen trial is a line search (0: none).
- ``elite=1``: configs whose lines are searched.
- ``clip=0.3``: the quantile of the measured log objectives above which they are clipped.
- ``warm_trials=3``, ``warm_points=40``, ``warm_noise=0.3``, ``refit=0.15``: as in ``bayes``.

The defaults of ``local``, ``elite`` and ``clip`` are checked with leave-one-space-out
cross-validation over the eight spaces (``bench/strategies.py``, docs/strategies.md). Its grid
of 20 seeds ties them with ``local=2`` and with ``local=4, elite=3`` (every median 1.000) and
names the first row of a tie, ``local=2``; over seeds 0..39 that reaches the bar in 259 of 320
searches against the defaults' 267 (the A4000 22 against 28), so the defaults stay.
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.strategies.base import Strategy, numeric, positions
from tunebench.strategies.bayes import (WARM_RANGES, GaussianProcess, log_expected_improvement, positive, refit_due,
                                        warm_points)


#: Runners-up of a global choice kept for :meth:`Hybrid.upcoming`.
RANKED = 64


def views(space, keys) -> list[np.ndarray]:
    """The coordinates of the keys that the models see, each a matrix with a row per key and
    values in [0, 1] (single-valued params dropped): the positions; the positions with the
    alignment columns, where some param has them; each of those again with every categorical
    param one-hot instead of positioned, where some param is categorical; and all of those
    again with the product columns, where there are any (see the module docstring)."""
    P = positions(space, keys)
    position, category, alignment = [], [], []
    named = False  # some param is categorical
    for j, name in enumerate(space.names):
        values = space.values[name]
        if len(values) < 2:
            continue
        position.append(P[:, j:j + 1] / (len(values) - 1))
        if _categorical(values):
            named = True
            category.append((P[:, j:j + 1] == np.arange(len(values))).astype(float))
        else:
            category.append(position[-1])
        twos = _twos(values)
        if twos is not None:
            alignment.append(((twos - twos.min()) / (twos.max() - twos.min()))[P[:, j:j + 1]])
    if not position:
        return [np.zeros((len(keys), 0))]
    bases = [position, category] if named else [position]
    extras = [[], alignment] if alignment else [[]]
    plain = [np.concatenate(base + extra, axis=1) for base in bases for extra in extras]
    products = product_columns(space, P)
    return plain + [np.concatenate([view] + products, axis=1) for view in plain] if products else plain


def product_columns(space, P: np.ndarray) -> list[np.ndarray]:
    """For each group of two or more params named ``STEM_x``, ``STEM_y``, ``STEM_z`` (positive
    numbers), the log of their product per position row ``P``, in [0, 1]: the work of one
    thread (its tile's area), or the threads of a block."""
    groups: dict[str, list[int]] = {}
    for j, name in enumerate(space.names):
        values = space.values[name]
        stem, _, axis = name.rpartition("_")
        if axis in ("x", "y", "z") and len(values) > 1 and positive(values):
            groups.setdefault(stem, []).append(j)
    columns = []
    for members in groups.values():
        if len(members) > 1:
            product = sum(np.log(np.array(space.values[space.names[j]], dtype=float))[P[:, j]] for j in members)
            if product.max() > product.min():
                columns.append(((product - product.min()) / (product.max() - product.min()))[:, None])
    return columns


def farthest_first(X: np.ndarray, count: int) -> list[int]:
    """Up to ``count`` rows of ``X``: the first row, then each time the row farthest from those
    taken (greedy maximin; a tie goes to the earlier row). A start that spans every param's
    range."""
    if not len(X):
        return []
    taken = [0]
    gap = ((X - X[0]) ** 2).sum(1)
    while len(taken) < count and gap.max() > 0:
        taken.append(int(np.argmax(gap)))
        gap = np.minimum(gap, ((X - X[taken[-1]]) ** 2).sum(1))
    return taken


def _categorical(values) -> bool:
    """Whether a param's values name choices rather than amounts: three or more of them, and
    either not all numbers, or the integers 0, 1, 2, ... in any order (a method's number)."""
    if len(values) < 3:
        return False
    if not numeric(values):
        return True
    return sorted(values) == list(range(len(values)))


def _twos(values) -> np.ndarray | None:
    """How many times 2 divides each value (0 counted above all others), where the values are
    integers and that count is not monotonic along the list; else None."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    twos = [(v & -v).bit_length() - 1 if v else None for v in values]
    top = max((t for t in twos if t is not None), default=0) + 1
    twos = np.array([top if t is None else t for t in twos], dtype=float)
    steps = np.diff(twos)
    return None if (steps > 0).all() or (steps < 0).all() or not steps.any() else twos


class Hybrid(Strategy):
    name = "hybrid"
    ranges = {"initial": (0, None), "local": (0, None), "elite": (1, None), "clip": (0, 1), **WARM_RANGES}

    def __init__(self, *args, initial: int = 5, local: int = 4, elite: int = 1, clip: float = 0.3,
                 warm_trials: int = 3, warm_points: int = 40, warm_noise: float = 0.3, refit: float = 0.15,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.initial, self.local, self.elite, self.clip, self.refit = initial, local, elite, clip, refit
        self.P = positions(self.space, self.candidates)
        self.index = {k: i for i, k in enumerate(self.candidates)}
        self.free = np.ones(len(self.candidates), dtype=bool)  # neither measured nor pending
        self.told = np.zeros(len(self.candidates), dtype=bool)
        self.measured: list[int] = []
        self.logs: list[float | None] = []  # log objective of each measured candidate (None: failed)
        self.models = [GaussianProcess(X) for X in views(self.space, self.candidates)]
        self.model = self.models[0]
        self.warm_logs = self._seed(warm_points, warm_noise)
        self.fitted_at = 0  # points at the last fit
        self.chosen = 0  # trials the model chose so far
        self.queue = [self.index[k] for k in self.warm_first()[:warm_trials]]
        shuffled = list(range(len(self.candidates)))
        self.rng.shuffle(shuffled)
        design = [shuffled[n] for n in farthest_first(self.models[0].X[shuffled], initial)]
        taken = set(design)
        self.order = design + [i for i in shuffled if i not in taken]  # the start's draws, in advance
        self.ranked: list[int] = []  # the last global choice's runners-up, best first

    def _seed(self, count: int, noise: float) -> list[float]:
        """Put up to ``count`` warm configs into every model (see ``bayes``); returns their
        standardised log scores."""
        seeded = warm_points(self.warm, self.index, count, self.rng)
        for model in self.models:
            for i in seeded:
                model.add(i, noise)
        return list(seeded.values())

    def ask(self) -> tuple | None:
        self.queue = [i for i in self.queue if self.free[i]]
        if self.queue:
            return self._pending(self.queue[0])
        if not self.free.any():
            return None
        if self._starting():
            self.order = [i for i in self.order if self.free[i]]
            return self._pending(self.order[0])
        self.chosen += 1
        return self._pending(self._propose())

    def upcoming(self, n: int) -> list[tuple]:
        """The queued warm configs, the start's next draws, then the runners-up of the
        last global choice: a guess once the model chooses, as every result told moves it."""
        nexts = [i for i in self.queue if self.free[i]]
        if self._starting():
            nexts += [i for i in self.order[:len(nexts) + n + 1] if self.free[i]]
        nexts += [i for i in self.ranked if self.free[i]]
        return [self.candidates[i] for i in dict.fromkeys(nexts)][:n]

    def _starting(self) -> bool:
        """Still in the start: too few results for a model, or nothing to model."""
        return len(self.measured) < self.initial or sum(v is not None for v in self.logs) < 2 \
            or self.model.X.shape[1] == 0

    def tell(self, key: tuple, objective: float | None) -> None:
        i = self.index.get(key)
        if i is None or self.told[i]:
            return
        self.free[i], self.told[i] = False, True
        self.measured.append(i)
        self.logs.append(math.log(objective) if objective is not None else None)
        for model in self.models:
            model.add(i)

    def _pending(self, i: int) -> tuple:
        self.free[i] = False
        return self.candidates[i]

    def _propose(self) -> int:
        """The free candidate of the largest expected improvement, or every ``local``-th time the
        one on the lines of the elites that the model expects fastest (see the module docstring)."""
        worst = max(v for v in self.logs if v is not None)
        logs = np.array([worst if v is None else v for v in self.logs])
        logs = np.minimum(logs, np.quantile(logs, self.clip))
        mean, sd = logs.mean(), max(logs.std(), 1e-9)
        y = np.concatenate([self.warm_logs, (logs - mean) / sd])
        if refit_due(self.fitted_at, len(y), self.refit):
            for model in self.models:
                model.fit(y)
            self.model = max(self.models, key=lambda m: m.evidence(y))
            self.fitted_at = len(y)
        mu, sd_post = self.model.predict(y)
        free = np.flatnonzero(self.free)
        score = log_expected_improvement(mu[free], sd_post[free], (logs.min() - mean) / sd)
        top = np.argpartition(-score, min(RANKED, len(free)) - 1)[:RANKED]  # no sort of every candidate
        self.ranked = free[top[np.lexsort((top, -score[top]))]].tolist()
        if self.local and self.chosen % self.local == 0:
            on = self._lines(logs)[free]
            if on.any():
                return int(free[on][np.argmin(mu[free][on])])
        return self.ranked[0]

    def _lines(self, logs: np.ndarray) -> np.ndarray:
        """The candidates one param away from an elite (see the module docstring)."""
        elites: list[int] = []
        for n in np.argsort(logs, kind="stable"):
            i = self.measured[n]
            if self.logs[n] is not None and all((self.P[i] != self.P[e]).sum() > 1 for e in elites):
                elites.append(i)
            if len(elites) == self.elite:
                break
        lines = np.zeros(len(self.candidates), dtype=bool)
        for e in elites:
            lines |= (self.P != self.P[e]).sum(1) == 1
        return lines
