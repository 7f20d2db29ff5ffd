"""``brute_force``: every candidate in the space's order, until the budget ends. No options."""

from __future__ import annotations

from tunebench.strategies.base import Strategy


class BruteForce(Strategy):
    name = "brute_force"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._order = list(self.candidates)  # the order asked in (random sampling shuffles it)
        self._asked = 0

    def ask(self) -> tuple | None:
        self._asked += 1
        return self._order[self._asked - 1] if self._asked <= len(self._order) else None

    def upcoming(self, n: int) -> list[tuple]:
        return self._order[self._asked:self._asked + n]
