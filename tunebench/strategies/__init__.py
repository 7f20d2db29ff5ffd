"""Search strategies, one module each; ``get(name)`` returns the class for ``--tune-strategy``."""

from __future__ import annotations

import importlib

from tunebench.strategies.base import Strategy

#: the strategy used where none is named (see its module for why)
DEFAULT = "hybrid"
#: strategy name -> module holding it
MODULES = {
    "brute_force": "tunebench.strategies.brute_force",
    "random": "tunebench.strategies.random_sampling",
    "annealing": "tunebench.strategies.annealing",
    "genetic": "tunebench.strategies.genetic",
    "bayes": "tunebench.strategies.bayes",
    "hybrid": "tunebench.strategies.hybrid",
}


def get(name: str) -> type[Strategy]:
    if name not in MODULES:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(MODULES)}")
    module = importlib.import_module(MODULES[name])
    return next(obj for obj in vars(module).values()
                if isinstance(obj, type) and issubclass(obj, Strategy) and getattr(obj, "name", None) == name)
