"""The contract every strategy meets: ``ask`` for the next candidate, ``tell`` it the result,
and :func:`search`, the one loop that drives a strategy under a budget.

The budget (trials and seconds) is enforced by :func:`search`, so every strategy honours it
alike; a strategy only orders the search. It is built with the space, the candidates it may pick
(valid configs as keys, see :mod:`tunebench.space`), a seeded ``random.Random`` (the same seed
gives the same trials) and ``warm``: results of the same kernel on other buckets or devices,
``(key, score)`` pairs where score is the objective over that task's best (1.0 is its best),
to seed the first trials or a model with. ``tell`` receives the objective in ms, or None for a
candidate that failed (compile error, wrong result, ...): failures inform the search, they do
not stop it.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from typing import ClassVar

import numpy as np

from tunebench.space import Space


class Strategy(ABC):
    name: ClassVar[str]
    #: option -> (lowest, highest) value it may take, None where unbounded: a value outside searched
    #: on, nonsense (a negative temperature takes every slower step), where it did not fail
    ranges: ClassVar[dict[str, tuple[float | None, float | None]]] = {}

    def __init__(self, space: Space, candidates: Sequence[tuple], rng: random.Random,
                 warm: Sequence[tuple[tuple, float]] = ()):
        self.space = space
        self.candidates = list(candidates)
        self.rng = rng
        self.warm = list(warm)

    def warm_scores(self) -> dict[tuple, float]:
        """The best warm score of each warm config that is a candidate here."""
        best: dict[tuple, float] = {}
        valid = set(self.candidates)
        for key, score in self.warm:
            key = tuple(key)
            if key in valid and score < best.get(key, float("inf")):
                best[key] = score
        return best

    def warm_first(self) -> list[tuple]:
        """The warm configs that are candidates here, each once, best score first: where a
        strategy may begin."""
        best = self.warm_scores()
        return sorted(best, key=best.get)

    @abstractmethod
    def ask(self) -> tuple | None:
        """The next candidate to measure, or None when the strategy has nothing more to try."""

    def tell(self, key: tuple, objective: float | None) -> None:  # noqa: B027 - optional hook
        """The result of a candidate that :meth:`ask` returned."""

    def upcoming(self, n: int) -> list[tuple]:
        """Up to ``n`` candidates :meth:`ask` is likely to return next, without committing to
        them: their builds (and other devices) may start on them early. Empty where the next
        choice depends on results not yet told."""
        return []


def numeric(values) -> bool:
    """Whether a param's values are all numbers (a bool is a choice, not an amount)."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def positions(space: Space, keys: Sequence[tuple]) -> np.ndarray:
    """Keys as the positions of their values in each param's value list (an int matrix, one
    row per key): the coordinates of neighbourhoods, crossover and models, whatever the values.
    Numbers are placed by their order, not the list's: a space declared ``[128, 32, 256, 64]``
    is searched as ``[32, 64, 128, 256]`` (in the list's order, neighbours were strangers, and
    the default strategy fell behind random search on a space whose lists were shuffled)."""
    index = [{v: i for i, v in enumerate(sorted(space.values[n]) if numeric(space.values[n]) else space.values[n])}
             for n in space.names]
    return np.array([[ix[v] for ix, v in zip(index, key)] for key in keys], dtype=np.int64).reshape(
        len(keys), len(index))


def search(strategy: Strategy, evaluate: Callable[[tuple], float | None], *, trials: int | None = None,
           seconds: float | None = None, spent: Callable[[], float] = lambda: 0.0,
           measured: Collection[tuple] = ()) -> str:
    """Ask, evaluate and tell until the budget or the strategy ends; returns why it ended.

    ``evaluate(key)`` measures a candidate once (a revisit is told the remembered result and
    costs nothing); ``spent()`` is the time the search has cost so far, in seconds.
    ``measured``: the candidates an earlier run measured, in the order it did, which ``evaluate``
    serves from its records at no cost (or measures again, where other load disturbed them: the
    time budget holds for those). They count toward ``trials`` whether asked or not: a
    search run again takes another path where a value differs (a trial the records hold
    disturbed, measured anew), and it must not measure a whole budget of other candidates. Where
    it asks one more past the budget, earlier ones it did not ask are evaluated instead, first
    measured first, up to ``trials`` (a budget lowered since holds fewer), so that the results
    hold the candidates the budget paid for.
    """
    seen: dict[tuple, float | None] = {}
    known = set(measured)
    counted = len(known)  # of known and seen together, kept as they grow (a replay's budget runs to thousands)
    revisits = 0
    while True:
        if trials is not None and len(seen) >= trials:
            return f"budget of {trials} trials spent"
        if seconds is not None and spent() >= seconds:
            return f"budget of {seconds:g} s spent"
        key = strategy.ask()
        if key is None:
            return f"strategy {strategy.name} has no candidate left"
        if key in seen:
            revisits += 1
            if revisits > 10 * len(strategy.candidates) + 100:
                return f"strategy {strategy.name} only revisits measured candidates"
        elif trials is not None and key not in known and counted >= trials:
            for earlier in [k for k in dict.fromkeys(measured) if k not in seen][:trials - len(seen)]:
                if seconds is not None and spent() >= seconds:  # one disturbed before is measured again, at its cost
                    return f"budget of {seconds:g} s spent"
                seen[earlier] = evaluate(earlier)
            return f"budget of {trials} trials spent, with those an earlier run measured"
        else:
            counted += key not in known
            seen[key] = evaluate(key)
        strategy.tell(key, seen[key])
