"""``annealing``: simulated annealing from config to neighbouring config, each measured once.

The walk starts at the best warm config (else a random candidate) and steps to a random
unmeasured neighbour: a config whose every param is at most one value away (diagonal steps
included, so that e.g. halving one block dimension while doubling another is one step), or, with
probability ``jump``, a config with one param changed to any value (to leave a basin along a
param whose values are not ordered). With warm data, a step draws two such neighbours and takes
the one of the better warm score (a config without one counts as the warm median): a bias toward
where the other task was fast that can still step anywhere, as warm data from another device may
mislead. Started from the warm best alone, the walk gained little from warm data (see
docs/strategies.md). A faster neighbour is always taken; a slower one with probability
``exp(-ln(slower / current) / T)``, so that early on the walk crosses ridges and later it only
descends. ``T`` starts at ``temperature`` and is multiplied by ``cooling`` after every trial.
After ``patience`` trials without a new best, or where no unmeasured neighbour is left, the walk
restarts at a random candidate. A config that failed is never stepped to. Neighbours are found
on the positions of values in each param's value list, whatever the values.

Options (keyword arguments):

- ``temperature=0.1``: the starting ``T``: a neighbour 10 % slower is taken with probability 1/e.
- ``cooling=0.97``: ``T`` is multiplied by this after every trial.
- ``jump=0.5``: the probability that a step changes one param to any value.
- ``patience=20``: trials without a new best before the walk restarts.
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.strategies.base import Strategy, positions


class Annealing(Strategy):
    name = "annealing"
    ranges = {"temperature": (0, None), "cooling": (0, 1), "jump": (0, 1), "patience": (1, None)}

    def __init__(self, *args, temperature: float = 0.1, cooling: float = 0.97, jump: float = 0.5,
                 patience: int = 20, **kwargs):
        super().__init__(*args, **kwargs)
        self.temperature, self.cooling, self.jump, self.patience = temperature, cooling, jump, patience
        self.P = positions(self.space, self.candidates)
        self.index = {k: i for i, k in enumerate(self.candidates)}
        self.unmeasured = np.ones(len(self.candidates), dtype=bool)
        self.logs: dict[int, float] = {}  # measured candidate -> log objective (inf: failed)
        warm = self.warm_first()
        scores = self.warm_scores()
        self.warm_score: np.ndarray | None = None  # per candidate, where there is warm data
        if scores:
            self.warm_score = np.full(len(self.candidates), np.median(list(scores.values())))
            self.warm_score[[self.index[k] for k in scores]] = list(scores.values())
        self.current: int | None = self.index[warm[0]] if warm else None  # where the walk is
        self.proposed: int | None = None
        self.best, self.since = math.inf, 0  # the best log objective, trials since it was found

    def ask(self) -> tuple | None:
        if not self.unmeasured.any():
            return None
        if self.current is not None and self.current not in self.logs:  # the warm start
            self.proposed = self.current
        else:
            step = self._neighbour(self.current) if self.current is not None else None
            if step is None:  # a restart: the step's result becomes the walk's position
                self.current = None
                free = np.flatnonzero(self.unmeasured)
                step = int(free[self.rng.randrange(len(free))])
            self.proposed = step
        return self.candidates[self.proposed]

    def tell(self, key: tuple, objective: float | None) -> None:
        i = self.index.get(key)
        if i is None or not self.unmeasured[i]:
            return
        self.unmeasured[i] = False
        there = self.logs[i] = math.log(objective) if objective is not None else math.inf
        if i == self.proposed:
            here = self.logs[self.current] if self.current is not None else math.inf
            if there < here or there < math.inf and self.rng.random() < math.exp(
                    -(there - here) / max(self.temperature, 1e-12)):
                self.current = i
        self.temperature *= self.cooling
        self.best, self.since = (there, 0) if there < self.best else (self.best, self.since + 1)
        if self.since >= self.patience:
            self.current, self.since = None, 0

    def _neighbour(self, i: int) -> int | None:
        """A random unmeasured neighbour of candidate ``i`` (see the module docstring)."""
        one = (self.P != self.P[i]).sum(1) == 1
        near = np.abs(self.P - self.P[i]).max(1) == 1
        rings = (one, near) if self.rng.random() < self.jump else (near, one)
        for ring in rings:
            found = np.flatnonzero(ring & self.unmeasured)
            if len(found):
                step = int(found[self.rng.randrange(len(found))])
                if self.warm_score is not None:  # the better of two by warm score (see the module docstring)
                    other = int(found[self.rng.randrange(len(found))])
                    step = other if self.warm_score[other] < self.warm_score[step] else step
                return step
        return None
