"""``genetic``: a constraint-aware genetic algorithm: every child it breeds is a valid config.

As in Heron's constraint-based genetic algorithm, crossover and mutation solve the constraints
instead of discarding what violates them, by choosing among the valid candidates only:

- crossover takes a random subset of params from one parent; of the valid configs that agree
  with it there, the child is one that agrees with the other parent on the most of the rest;
- mutation moves one param to another value such that the config stays valid (a config that
  agrees on every other param), each param with probability ``mutation``.

The first generation is the best warm configs, half of it at most (one at least), then random candidates:
warm data comes from other buckets or devices and may mislead, and a generation made of it alone
breeds only from where the other task was fast (MI250X warmed with A4000 results reached a median
0.75 of its optimum in 100 trials, 0.94 cold); the random half keeps the first parents diverse,
as ``bayes`` and ``hybrid`` follow their few warm trials with a random or spread start. Each
generation breeds ``population`` children from parents drawn by tournaments of two; a child
already measured is mutated again, and after a few tries replaced by a random candidate, so no
config is measured twice. The next population is the best ``population`` of parents and children
together (failed configs rank last).

Options (keyword arguments):

- ``population=10``: configs per generation.
- ``mutation=0.1``: the probability that mutation changes each param of a child.
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.strategies.base import Strategy, positions

#: Mutations of a child already measured before it is replaced by a random candidate.
RETRIES = 10


class Genetic(Strategy):
    name = "genetic"
    ranges = {"population": (1, None), "mutation": (0, 1)}

    def __init__(self, *args, population: int = 10, mutation: float = 0.1, **kwargs):
        super().__init__(*args, **kwargs)
        self.size, self.mutation = population, mutation
        self.P = positions(self.space, self.candidates)
        self.index = {k: i for i, k in enumerate(self.candidates)}
        self.unmeasured = np.ones(len(self.candidates), dtype=bool)
        self.fitness: dict[int, float] = {}  # measured candidate -> log objective (inf: failed)
        self.population: list[int] = []
        warm = [self.index[k] for k in self.warm_first()[:max(1, population // 2)]]  # a population of 1: the warm best
        self.generation = warm + self._random(population - len(warm), exclude=set(warm))

    def ask(self) -> tuple | None:
        if not self.unmeasured.any():
            return None
        pending = [i for i in self.generation if self.unmeasured[i]]
        if not pending:  # the generation is measured: select, then breed the next
            ranked = sorted(set(self.population) | set(self.generation),
                            key=lambda i: self.fitness.get(i, math.inf))
            self.population = ranked[: self.size]
            self.generation = pending = self._breed()
        return self.candidates[pending[0]]

    def upcoming(self, n: int) -> list[tuple]:
        """The rest of the generation being measured."""
        return [self.candidates[i] for i in self.generation if self.unmeasured[i]][1:n + 1]

    def tell(self, key: tuple, objective: float | None) -> None:
        i = self.index.get(key)
        if i is not None and self.unmeasured[i]:
            self.unmeasured[i] = False
            self.fitness[i] = math.log(objective) if objective is not None else math.inf

    def _breed(self) -> list[int]:
        """A generation of unmeasured children, each distinct."""
        children: list[int] = []
        for _ in range(self.size):
            a, b = self._tournament(), self._tournament()
            child = self._mutate(self._cross(a, b))
            tries = 0
            while (not self.unmeasured[child] or child in children) and tries < RETRIES:
                child, tries = self._mutate(child, force=True), tries + 1
            if not self.unmeasured[child] or child in children:
                spare = self._random(1, exclude=set(children))
                if not spare:
                    break
                child = spare[0]
            children.append(child)
        return children

    def _tournament(self) -> int:
        a, b = self.rng.choice(self.population), self.rng.choice(self.population)
        return a if self.fitness.get(a, math.inf) <= self.fitness.get(b, math.inf) else b

    def _cross(self, a: int, b: int) -> int:
        """A valid child with a random subset of ``a``'s params and as many of ``b``'s as fit."""
        keep = np.array([self.rng.random() < 0.5 for _ in range(self.P.shape[1])], dtype=bool)
        fits = (self.P[:, keep] == self.P[a, keep]).all(1)
        agree = (self.P[:, ~keep] == self.P[b, ~keep]).sum(1)
        agree[~fits] = -1
        best = np.flatnonzero(agree == agree.max())
        return int(best[self.rng.randrange(len(best))])

    def _mutate(self, child: int, force: bool = False) -> int:
        """Move params of ``child`` to other values that keep it valid (one at least if ``force``)."""
        params = [j for j in range(self.P.shape[1]) if self.rng.random() < self.mutation]
        if force and not params:
            params = [self.rng.randrange(self.P.shape[1])]
        for j in params:
            others = np.arange(self.P.shape[1]) != j
            moves = np.flatnonzero((self.P[:, others] == self.P[child, others]).all(1)
                                   & (self.P[:, j] != self.P[child, j]))
            if len(moves):
                child = int(moves[self.rng.randrange(len(moves))])
        return child

    def _random(self, n: int, exclude: set[int]) -> list[int]:
        free = [int(i) for i in np.flatnonzero(self.unmeasured) if int(i) not in exclude]
        return self.rng.sample(free, min(n, len(free)))
