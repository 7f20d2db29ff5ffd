"""Search strategies, one module each; ``get(name)`` returns the class for ``--tune-strategy``,
``options(name, given)`` its settings from ``--tune-strategy-option NAME=VALUE``."""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Sequence
from typing import Any

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


def options(name: str, given: Sequence[str], flag: str = "--tune-strategy-option") -> dict[str, Any]:
    """``NAME=VALUE`` settings of a strategy, each one its class takes (a keyword of its
    constructor, documented in its module) made of its default's type, within its class's
    ``ranges`` (outside them, population=0 ended a tune in an IndexError, bayes' warm_noise=-1 in
    a LinAlgError once warm data came, a negative temperature searched as nonsense); a ValueError
    names what is wrong and what the strategy takes, by the ``flag`` that gave it (the replay
    command's is ``--strategy-option``)."""
    strategy = get(name)
    takes = {p.name: p.default for p in inspect.signature(strategy.__init__).parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY}
    listed = ", ".join(f"{n} (default {d!r})" for n, d in takes.items()) or "none"
    found: dict[str, Any] = {}
    for setting in given:
        option, sep, value = setting.partition("=")
        if not sep or option.strip() not in takes:
            raise ValueError(f"{flag} {setting}: strategy {name} takes NAME=VALUE of its options: "
                             f"{listed}")
        option, value = option.strip(), value.strip()
        kind = type(takes[option])
        try:
            if kind is bool:
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(value)
                found[option] = value.lower() in ("true", "1")
            else:
                found[option] = kind(value)
        except ValueError:
            article = "an" if kind.__name__[0] in "aeiou" else "a"
            raise ValueError(f"{flag} {setting}: {name}'s {option} is {article} {kind.__name__} "
                             f"(default {takes[option]!r}), not {value!r}") from None
        if isinstance(found[option], float) and not math.isfinite(found[option]):
            raise ValueError(f"{flag} {setting}: {name}'s {option} is a finite number")
        low, high = strategy.ranges.get(option, (None, None))
        if (low is not None and found[option] < low) or (high is not None and found[option] > high):
            between = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise ValueError(f"{flag} {setting}: {name}'s {option} is {between} (default {takes[option]!r})")
    return found
