"""Search strategies, one module each; ``get(name)`` returns the class for ``--tune-strategy``,
``options(name, given)`` its settings from ``--tune-strategy-option NAME=VALUE``."""

from __future__ import annotations

import importlib
import inspect
import math
import random
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
    constructor, documented in its module) made of its default's type; a ValueError names what
    is wrong and what the strategy takes, by the ``flag`` that gave it (the replay command's is
    ``--strategy-option``)."""
    takes = {p.name: p.default for p in inspect.signature(get(name).__init__).parameters.values()
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
    if found:
        _tried(name, found, flag)
    return found


def _tried(name: str, options: dict[str, Any], flag: str) -> None:
    """Short searches of a small space with the options, with and without warm data (results of
    other buckets): a value the strategy cannot search with (population=0 ended a tune in an
    IndexError, -3 in random's ValueError, bayes' warm_noise=-1 in a LinAlgError once warm data
    came) is said now, once."""
    from tunebench.space import Space
    from tunebench.strategies.base import search

    space = Space({"a": [1, 2, 4, 8], "b": [0, 1, 2], "c": ["x", "y"]})
    candidates, _ = space.enumerate()
    warm = [(key, 1.0 + i / 10) for i, key in enumerate(candidates[::3])]
    try:
        for given in ((), warm):
            search(get(name)(space, candidates, random.Random(0), warm=given, **options),
                   lambda key: 1.0 + sum(hash(v) % 7 for v in key) / 10, trials=12)
    except Exception as e:  # noqa: BLE001 - whatever the strategy raises of a value it cannot use
        settings = " ".join(f"{k}={v}" for k, v in options.items())
        raise ValueError(f"{flag} {settings}: strategy {name} cannot search with it "
                         f"({type(e).__name__}: {e})") from None
