"""``random``: candidates in a uniformly random order drawn from the seed. No options."""

from __future__ import annotations

from tunebench.strategies.brute_force import BruteForce


class RandomSampling(BruteForce):
    name = "random"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rng.shuffle(self._order)
