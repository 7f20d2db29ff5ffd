"""``random``: candidates in a uniformly random order drawn from the seed. No options."""

from __future__ import annotations

from tunebench.strategies.base import Strategy


class RandomSampling(Strategy):
    name = "random"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        order = list(self.candidates)
        self.rng.shuffle(order)
        self._next = iter(order)

    def ask(self) -> tuple | None:
        return next(self._next, None)
