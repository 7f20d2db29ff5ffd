"""The contract every strategy meets: ``ask`` for the next candidate, ``tell`` it the result.

The tuning session owns the budget (trials and seconds), so every strategy honours it alike;
a strategy only orders the search. It is built with the space, the candidates it may pick
(valid configs as keys, see :mod:`tunebench.space`) and a seeded ``random.Random``, so the same
seed gives the same trials. ``tell`` receives the objective in ms, or None for a candidate that
failed (compile error, wrong result, ...): failures inform the search, they do not stop it.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from tunebench.space import Space


class Strategy(ABC):
    name: ClassVar[str]

    def __init__(self, space: Space, candidates: Sequence[tuple], rng: random.Random):
        self.space = space
        self.candidates = list(candidates)
        self.rng = rng

    @abstractmethod
    def ask(self) -> tuple | None:
        """The next candidate to measure, or None when the strategy has nothing more to try."""

    def tell(self, key: tuple, objective: float | None) -> None:  # noqa: B027 - optional hook
        """The result of a candidate that :meth:`ask` returned."""
