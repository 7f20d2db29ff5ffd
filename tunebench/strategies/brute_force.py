"""``brute_force``: every candidate in the space's order, until the budget ends. No options."""

from __future__ import annotations

from tunebench.strategies.base import Strategy


class BruteForce(Strategy):
    name = "brute_force"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._next = iter(self.candidates)

    def ask(self) -> tuple | None:
        return next(self._next, None)
