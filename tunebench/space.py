"""The space of a kernel: named params with their values, and constraints between them.

A config is one point of the space, a ``dict`` from param name to value. Inside tunebench a
config also travels as a *key*: the tuple of its values in param order, which is hashable and
cheap, so that spaces of tens of thousands of configs enumerate in well under a second.

Constraints are Python callables, never strings to eval. A constraint names the params it reads
by its argument names (``lambda warp_num, tree_reduce_num: warp_num * 32 <= tree_reduce_num``),
or takes a single argument that is not a param name and receives the whole config
(``lambda c: c["tile_m"] % c["mr"] == 0``). A single argument spelled almost like a param
(``warp_nm``) is taken for a typo and refused.

A constraint may also depend on the shape: it names ``shape`` (the whole shape tuple) or the
kernel's dims beside its params (``lambda N, tile: N % tile == 0``). Such a *shaped* constraint
is left out of the space's own enumeration; a candidate is tried in a bucket only where it holds
for every representative shape (:meth:`Space.holds_for`), and ``best()`` never hands out a
config for a shape it does not hold for.
"""

from __future__ import annotations

import ast
import builtins
import collections
import difflib
import inspect
import itertools
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tunebench.ported import refuse_ported

#: The largest cartesian product tunebench enumerates; beyond it collection would take minutes.
MAX_PRODUCT = 2_000_000


class SpaceError(ValueError):
    """An invalid space definition; the message names the param or constraint at fault."""


def pow2(lo: int, hi: int) -> list[int]:
    """Every power of two in ``[lo, hi]``: ``pow2(32, 1024)`` is ``[32, 64, ..., 1024]``. A list:
    a tuple of two ints is the inclusive range form, so ``pow2(32, 64)`` must not be one."""
    if lo < 1 or hi < lo:
        raise SpaceError(f"pow2({lo}, {hi}): need 1 <= lo <= hi")
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    if not out:
        raise SpaceError(f"pow2({lo}, {hi}) holds no power of two")
    return out


def _values(name: str, spec: Any) -> tuple:
    """Normalise one param's spec: a value list, a ``range``, or an inclusive ``(lo, hi)`` pair of
    ints (not bools: ``(False, True)`` is two values). numpy scalars become Python ones, which
    the records store as JSON."""
    if isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in spec):
        lo, hi = spec
        if hi < lo:
            raise SpaceError(f"param {name!r}: range ({lo}, {hi}) is empty (hi < lo)")
        return tuple(range(lo, hi + 1))
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Iterable):
        raise SpaceError(
            f"param {name!r}: expected a list of values, a range or an inclusive (lo, hi) pair, "
            f"got {spec!r}")
    values = tuple(v.item() if isinstance(v, np.generic) else v for v in spec)
    if not values:
        raise SpaceError(f"param {name!r} has an empty value list")
    compound = [v for v in values if not isinstance(v, (str, bool, int, float, type(None)))]
    if compound:  # a config is #defines, and a record in JSON, where a tuple comes back a list
        raise SpaceError(f"param {name!r}: value {compound[0]!r} is a {type(compound[0]).__name__}: a param's values "
                         f"are numbers, strings, bools or None (split it into one param per part)")
    seen: dict = {}
    for v in values:
        if v in seen:  # True == 1 and 2.0 == 2 in Python: name both
            raise SpaceError(f"param {name!r} lists a value twice: {seen[v]!r} and {v!r} in {values!r}")
        seen[v] = v
    kinds = {"a string" if isinstance(v, str) else "a bool" if isinstance(v, bool) else "None" if v is None
             else "a number"
             for v in values}
    if len(kinds) > 1:  # `#define name` would read one kind as another's text
        raise SpaceError(f"param {name!r} mixes {' and '.join(sorted(kinds))} in {values!r}: give one kind of value")
    broken = [v for v in values if isinstance(v, str) and (not v.strip() or "\n" in v)]
    if broken:  # a str value is pasted after `#define name`, which ends at the line's end
        raise SpaceError(f"param {name!r}: value {broken[0]!r} cannot follow `#define {name}` (a C token or "
                         f"expression on one line)")
    return values


class _ConfigView(Mapping):
    """A read-only config handed to whole-config constraints; an unknown name is an error, with
    ``[]``, ``get`` and ``in`` alike."""

    __slots__ = ("_index", "_key")

    def __init__(self, index: Mapping[str, int], key: tuple):
        self._index, self._key = index, key

    def __getitem__(self, name: str):
        try:
            return self._key[self._index[name]]
        except KeyError:
            raise _UnknownParam(name) from None

    def get(self, name: str, default=None):  # every param has a value: a default only hides a typo
        return self[name]

    def __contains__(self, name) -> bool:  # every param is in: asking for another name is a typo
        self[name]
        return True

    def __iter__(self):
        return iter(self._index)

    def __len__(self):
        return len(self._index)


def closest(name: str, known: Sequence[str], cutoff: float = 0.6) -> str | None:
    """The known name an unknown one most likely meant (the same but for case, else a spelling
    as close as ``cutoff``), for an error message."""
    same = [k for k in known if k.lower() == name.lower()]
    return (same or difflib.get_close_matches(name, known, n=1, cutoff=cutoff) or [None])[0]


class _UnknownParam(KeyError):
    pass


def _as_lambda(text: Any, names: Collection[str]) -> str | None:
    """The lambda a string constraint means, to offer in its refusal (``lambda a, b: a <= b``): a
    port of a Kernel Tuner script copies its restrictions, Python expressions of the params. Its
    arguments are the names the expression reads: each of ``names`` (the params, a param named
    ``max`` too), and any other but a builtin or a name the expression binds itself (a
    comprehension's). None where the string is no expression, or reads no name."""
    try:
        tree = ast.parse(text.strip(), mode="eval") if isinstance(text, str) else None
    except (SyntaxError, ValueError):  # ValueError: a null byte
        tree = None
    if tree is None:
        return None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    bound = {n.id for n in found if isinstance(n.ctx, ast.Store)}
    read = sorted((n for n in found if n.id in names or (n.id not in bound and not hasattr(builtins, n.id))),
                  key=lambda n: (n.lineno, n.col_offset))
    return f"lambda {', '.join(dict.fromkeys(n.id for n in read))}: {text.strip()}" if read else None


def _uncallable(given: Any, names: Collection[str]) -> str:
    """Why a constraint that is no function is refused, with the lambda a string of the params
    means (see :func:`_as_lambda`)."""
    meant = _as_lambda(given, names)
    return f"constraint {given!r} is not callable (strings are not evaluated)" + (
        f": write it as {meant}" if meant else "")


class Constraint:
    """One constraint: the callable, the params it reads (``None``: the whole config, under the
    name of its one ``argument``), the other names it reads (``shape`` or dims: a shaped
    constraint) and a label."""

    def __init__(self, fn: Callable[..., Any], names: Sequence[str]):
        self.fn = fn
        code = getattr(fn, "__code__", None)
        where = f" at {code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}" if code else ""
        self.label = f"constraint {getattr(fn, '__name__', type(fn).__name__)}{where}"
        try:
            args = [p for p in inspect.signature(fn).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        except (TypeError, ValueError):
            args = []
        arg_names = [p.name for p in args]
        typo = difflib.get_close_matches(arg_names[0], names, n=1, cutoff=0.8) if arg_names else []
        self.shaped: tuple[str, ...] = ()  # the names read beside params: "shape" or dims
        self.argument = arg_names[0] if arg_names else None
        if arg_names == ["shape"] and "shape" not in names:  # called with nothing, it raised at the first config it judged
            raise SpaceError(f"{self.label} reads the shape alone, no param: it holds for every config or for none; "
                             f"name the params it bounds (lambda shape, {names[0] if names else 'p'}: ...); params "
                             f"are {list(names)}")
        if len(arg_names) == 1 and arg_names[0] not in names and not typo:
            self.params = None  # whole-config constraint
        else:
            if not arg_names:
                raise SpaceError(f"{self.label} takes no argument")
            if all(a not in names for a in arg_names):
                close = {a: m for a in arg_names if (m := closest(a, names))}
                blamed = next(iter(close), None)
                raise SpaceError((f"{self.label} names unknown param {blamed!r} (did you mean {close[blamed]!r}?)"
                                  if blamed else f"{self.label} reads no param of the space ({', '.join(arg_names)})")
                                 + f"; params are {list(names)}")
            self.params = tuple(arg_names)
            self.shaped = tuple(a for a in arg_names if a not in names)


def _blamed(constraints: Sequence[Constraint], firsts: Iterable[int]) -> str:
    """Which of ``constraints`` exclude the configs, for the error to name what to loosen: each
    config by the first it fails (``firsts``: its index), in the order they are checked, so a
    guard's ``b != 0`` is named, and ``a % b == 0`` never run on b = 0 (it raised, hiding the rest),
    nor a constraint named that excludes none."""
    def named(c: Constraint) -> str:  # the params it reads tell two lambdas of one line apart
        return f"{c.label} (on {', '.join(c.params)})" if c.params else c.label

    counts = dict(sorted(collections.Counter(firsts).items()))
    if not counts:
        return "the space lists none"
    if len(counts) == 1:
        return f"{named(constraints[next(iter(counts))])} excludes every one"
    return ", ".join(f"{named(constraints[i])} {'excludes ' if k == 0 else ''}{n:,}"
                     for k, (i, n) in enumerate(counts.items())) + " (each config by the first it fails)"


def _listed(configs: Sequence[Any]) -> tuple[dict[str, list], list[tuple]]:
    """A space given as its configs, as Triton's ``configs=[...]``: each param with its values in
    the order they are first listed, and the configs' keys, the only valid ones."""
    names = list(configs[0]) if configs and isinstance(configs[0], Mapping) else []
    spec: dict[str, list] = {n: [] for n in names}
    keys: dict[tuple, int] = {}
    for i, config in enumerate(configs, 1):
        if not isinstance(config, Mapping):
            raise SpaceError(f"config {i} of the list is {config!r}, not a dict of param -> value")
        if sorted(config) != sorted(names):
            raise SpaceError(f"config {i} of the list has params {sorted(config)}, config 1 {sorted(names)}: "
                             f"give every config a value of each param")
        key = tuple(config[n].item() if isinstance(config[n], np.generic) else config[n] for n in names)
        unhashable = next((n for n, v in zip(names, key) if not isinstance(v, Hashable)), None)
        if unhashable is not None:
            raise SpaceError(f"config {i} of the list gives param {unhashable!r} {config[unhashable]!r}: a value is one "
                             f"number, string or bool, not a list or a dict")
        if key in keys:
            raise SpaceError(f"config {i} of the list is config {keys[key]} again: {dict(config)!r}")
        keys[key] = i
        for name, value in zip(names, key):
            if not any(type(v) is type(value) and v == value for v in spec[name]):
                spec[name].append(value)
    return spec, list(keys)


class Space:
    """Named params with explicit values, and constraints between them.

    ``Space({"warp_num": pow2(1, 32), "vec": [1, 2, 4], "unroll": (1, 4)}, constraints=[...])``:
    a list or ``range`` gives the values as they are, ``(lo, hi)`` every integer from lo to hi,
    ``pow2(lo, hi)`` the powers of two within. ``Space([{"vec": 8, "unroll": 2}, {"vec": 16,
    "unroll": 1}])`` is those configs alone (Triton's ``configs=[...]``), each kept where the
    constraints hold. Definitions are checked by :meth:`validate`, which the pytest plugin calls
    at collection so the error names the suite.
    """

    def __new__(cls, *args, **kwargs):
        refuse_ported("a Space", kwargs, SpaceError)  # restrictions=: else Python's bare TypeError
        return super().__new__(cls)

    def __init__(self, params: Mapping[str, Any] | Sequence[Mapping[str, Any]],
                 constraints: Iterable[Callable[..., Any]] = (), configs: Iterable[tuple] | None = None):
        """``configs``: the keys of the known configs (a recording's, or a list's): no other key
        is valid, and the product is neither enumerated nor bounded by :data:`MAX_PRODUCT` (a
        Kernel Tuner cache records 20,000 of 4.4 million)."""
        if isinstance(params, Sequence) and not isinstance(params, (str, bytes)):
            if configs is not None:
                raise SpaceError("a list of configs is its configs: give no configs= beside it")
            params, configs = _listed(params)
        self._spec = dict(params)
        if isinstance(constraints, str) or callable(constraints):  # one given bare: a string ran letter by letter
            meant = _as_lambda(constraints, self._spec) or "lambda vec, unroll: vec * unroll <= 4"
            raise SpaceError(f"constraints={constraints!r}: give a list of functions of the params, as "
                             f"constraints=[{meant}]")
        self._constraint_fns = list(constraints)
        self._configs = None if configs is None else set(configs)
        self._checked: tuple | None = None
        self._enumerated: tuple[list[tuple], list[tuple]] | None = None  # once: collection checks every variant
        self._held: dict[tuple, bool] = {}  # config's items -> holds()

    # -- definition ---------------------------------------------------------------------------
    def _check(self) -> tuple[tuple[str, ...], dict[str, tuple], list[Constraint]]:
        if self._checked is None:
            if not self._spec:
                raise SpaceError("the space has no param")
            for name in self._spec:
                if not isinstance(name, str) or not name.isidentifier():
                    raise SpaceError(f"param {name!r} is not a C identifier (it becomes a #define)")
                if name.startswith("TB_"):
                    raise SpaceError(f"param {name!r}: names beginning TB_ are tunebench's own (TB_DTYPE)")
                if name.startswith("__") or (name[0] == "_" and name[1:2].isupper()):  # __CUDA_ARCH__, _WIN32
                    raise SpaceError(f"param {name!r}: names beginning __ or _ and a capital are the compiler's "
                                     f"and the system's (redefining one changes what a header or #if reads)")
            values = {name: _values(name, spec) for name, spec in self._spec.items()}
            names = tuple(values)
            uncallable = [_uncallable(fn, names) for fn in self._constraint_fns if not callable(fn)]
            if uncallable:  # each one: a port of Kernel Tuner's restrictions was told of the first alone
                raise SpaceError("; ".join(uncallable))
            constraints = [Constraint(fn, names) for fn in self._constraint_fns]
            self._checked = (names, values, constraints)
        return self._checked

    def validate(self, buckets: Iterable | None = None, dims: Sequence[str] = ()) -> None:
        """Raise :class:`SpaceError` for an empty value list, an unknown param in a constraint,
        a constraint that raises, or a space with no valid config, on any of ``buckets`` (over
        ``dims``) where its constraints read the shape."""
        valid, _ = self.enumerate()
        for bucket in buckets or ():
            self.fitting(valid, bucket, dims)

    def fitting(self, keys: Sequence[tuple], bucket, dims: Sequence[str]) -> list[tuple]:
        """The keys whose shaped constraints hold on every representative shape of ``bucket``
        (a candidate is tried only there) and on every verify shape (its pick is verified there,
        and best() would serve another config, unverified, where it did not hold); a
        :class:`SpaceError` where none does."""
        if not self.shaped:
            return list(keys)
        shapes = [*bucket.shapes, *bucket.verify]
        fits = [k for k in keys if all(self.holds_for(k, s, dims) for s in shapes)]
        if not fits:
            index = {n: i for i, n in enumerate(self.names)}
            at = [{"shape": tuple(s), **dict(zip(dims, s))} for s in shapes]
            listed = ", ".join([*map(str, bucket.shapes), *(f"verify shape {s}" for s in bucket.verify)])
            raise SpaceError(f"no config satisfies the constraints on every shape of bucket {bucket.name!r} "
                             f"({listed}): " + _blamed(
                                 self.shaped_constraints, (next(i for a in at for i, c in enumerate(
                                     self.shaped_constraints) if not self._holds(c, index, k, a)) for k in keys)))
        return fits

    @property
    def names(self) -> tuple[str, ...]:
        return self._check()[0]

    @property
    def values(self) -> dict[str, tuple]:
        return self._check()[1]

    @property
    def size(self) -> int:
        """The size of the cartesian product, constraints not applied."""
        n = 1
        for v in self.values.values():
            n *= len(v)
        return n

    # -- configs and keys ---------------------------------------------------------------------
    def config(self, key: Sequence) -> dict:
        return dict(zip(self.names, key))

    def key(self, config: Mapping) -> tuple:
        missing = [n for n in self.names if n not in config]
        if missing:
            raise SpaceError(f"config {dict(config)!r} lacks param {missing[0]!r}")
        return tuple(config[n] for n in self.names)

    def contains(self, config: Mapping) -> bool:
        """Whether the config has exactly the space's params, each at one of its values."""
        return set(config) == set(self.names) and all(
            config[n] in self.values[n] for n in self.names)

    def holds(self, config: Mapping) -> bool:
        """Whether the space holds the config today: its params at their values, the unshaped
        constraints met (a config recorded before the space changed may not be). Kept per
        config: a lookup asks it of every ranked config at each new shape."""
        asked = tuple(config.items())
        try:
            found = self._held.get(asked)
        except TypeError:  # a value no space holds (a list, as a hand-edited record may have)
            return False
        if found is None:
            found = self._held[asked] = self.contains(config) and self.is_valid(self.key(config))
        return found

    def is_valid(self, key: tuple) -> bool:
        """Whether every constraint but the shaped ones holds for this key (the values must be
        in the space), and it is one of the ``configs`` where they are known."""
        if self._configs is not None and key not in self._configs:
            return False
        names, _, constraints = self._check()
        index = {n: i for i, n in enumerate(names)}
        return all(self._holds(c, index, key) for c in constraints if not c.shaped)

    @property
    def shaped_constraints(self) -> list[Constraint]:
        """The constraints that read the shape."""
        return [c for c in self._check()[2] if c.shaped]

    @property
    def shaped(self) -> bool:
        """Whether a constraint depends on the shape."""
        return bool(self.shaped_constraints)

    def check_dims(self, dims: Sequence[str]) -> None:
        """Refuse a shaped constraint that names neither a param, ``shape`` nor one of ``dims``,
        and one that reads a dim alone (it would be taken for a whole-config constraint); a
        param named as a dim: a constraint naming it would read one of the two unsaid; and a param
        named ``shape`` that a constraint names, for the same reason. Only a constraint reads the
        shape by that name, so a space without one (a replayed Kernel Tuner cache's) keeps it."""
        names, _, constraints = self._check()
        clash = [n for n in names if n in dims]
        if clash:
            raise SpaceError(f"param {clash[0]!r} has the name of the dim {clash[0]!r} (dims are {list(dims)}): a "
                             f"constraint naming it could not tell which it reads; rename the param")
        reader = next((c for c in constraints if "shape" in (c.params or ())), None)
        if "shape" in names and reader is not None:
            raise SpaceError(f"param 'shape' has the name of the shape: {reader.label}, naming it, could not tell "
                             f"which it reads; rename the param")
        for c in constraints:
            if c.params is None and c.argument in dims:
                raise SpaceError(f"{c.label} reads only the dim {c.argument!r}, no param: it cannot tell configs "
                                 f"apart; bound the buckets instead, or name the params it holds for beside it")
            unknown = [n for n in c.shaped if n != "shape" and n not in dims]
            if unknown:
                close = closest(unknown[0], [*names, *dims])
                hint = f" (did you mean {close!r}?)" if close else ""
                raise SpaceError(f"{c.label} names unknown param {unknown[0]!r}{hint}; params are {list(names)}, "
                                 f"dims are {list(dims)}, or name the whole shape 'shape'")

    def holds_for(self, key: tuple, shape: Sequence[int], dims: Sequence[str]) -> bool:
        """Whether every shaped constraint holds for this key on ``shape`` (over ``dims``)."""
        names, _, constraints = self._check()
        index = {n: i for i, n in enumerate(names)}
        at = {"shape": tuple(shape), **dict(zip(dims, shape))}
        return all(self._holds(c, index, key, at) for c in constraints if c.shaped)

    def broken(self, config: Mapping, shape: Sequence[int], dims: Sequence[str]) -> list[str]:
        """What ``config`` breaks on ``shape``: a value outside the space, or a constraint's label
        with the values it read, which tell two lambdas of one line apart (empty where it is a
        config of the space for that shape). A heuristic's config is not bound by the space, so
        this says where today's rule strays outside it."""
        if set(config) != set(self.names):
            return [f"params {sorted(config)} are not the space's {list(self.names)}"]
        outside = [f"{n}={config[n]!r} is not among its values" for n in self.names if config[n] not in self.values[n]]
        if outside:
            return outside
        names, _, constraints = self._check()
        index, key = {n: i for i, n in enumerate(names)}, self.key(config)
        if self._configs is not None and key not in self._configs:
            return ["is not one of the space's known configs"]
        at = {"shape": tuple(shape), **dict(zip(dims, shape))}
        return [f"breaks {c.label} with " + ", ".join(f"{n}={key[index[n]] if n in index else at[n]!r}"
                                                        for n in (names if c.params is None else c.params))
                for c in constraints if not self._holds(c, index, key, at if c.shaped else None)]

    @staticmethod
    def _holds(c: Constraint, index: Mapping[str, int], key: tuple, at: Mapping[str, Any] | None = None) -> bool:
        try:
            if c.params is None:
                return bool(c.fn(_ConfigView(index, key)))
            return bool(c.fn(*(key[index[p]] if p in index else at[p] for p in c.params)))
        except _UnknownParam as e:
            close = closest(e.args[0], list(index))
            raise SpaceError(f"{c.label} names unknown param {e.args[0]!r}"
                             f"{f' (did you mean {close!r}?)' if close else ''}; params are {list(index)}") from None
        except Exception as e:  # noqa: BLE001 - any error in user code is a definition error
            raise SpaceError(
                f"{c.label} raised {type(e).__name__}: {e} on config "
                f"{dict(zip(index, key))!r}" + (f" for shape {at['shape']}" if at else "")) from e

    def enumerate(self) -> tuple[list[tuple], list[tuple]]:
        """All keys of the product in declaration order, split into (valid, invalid) by every
        constraint but the shaped ones."""
        if self._enumerated is not None:
            return self._enumerated
        names, values, constraints = self._check()
        if self._configs is not None:  # known: in the product's order
            place = [{v: i for i, v in enumerate(vs)} for vs in values.values()]
            # each key's places found at C speed: a recording may hold a million configs
            keys = sorted(self._configs, key=lambda k: tuple(map(dict.__getitem__, place, k)))
        elif self.size > MAX_PRODUCT:
            raise SpaceError(
                f"the product of the param values holds {self.size:,} configs, more than "
                f"{MAX_PRODUCT:,}; narrow the ranges ({', '.join(f'{n}: {len(v)}' for n, v in values.items())})")
        else:
            keys = itertools.product(*values.values())
        index = {n: i for i, n in enumerate(names)}
        valid, invalid = [], []
        plain = [c for c in constraints if not c.shaped]
        for key in keys:
            (valid if all(self._holds(c, index, key) for c in plain) else invalid).append(key)
        if not valid:
            raise SpaceError(
                f"no config satisfies the constraints ({len(invalid):,} configs over params "
                f"{', '.join(names)}): " + _blamed(plain, (next(i for i, c in enumerate(plain)
                                                                 if not self._holds(c, index, k)) for k in invalid)))
        self._enumerated = valid, invalid
        return valid, invalid
