"""Shape buckets: the ranges of dynamic shapes a kernel serves, each tuned for separately.

A bucket is a box over named dims (``S=(1, 64), R=(1025, 8192)``, bounds inclusive, ``None`` for
unbounded above), with a weight (its share of the traffic, used when buckets are summed up) and
one or more representative shapes that are measured.

The objective of a config over a bucket is the **weighted geometric mean of its median times on
the bucket's representative shapes** (shape weights default to equal). A geometric mean counts a
10 % gain on a small shape the same as on a large one, and the ratio of two objectives is the
weighted geometric mean of the per-shape speedups.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence


class BucketError(ValueError):
    """An invalid bucket definition; the message names the bucket and dim at fault."""


class ShapeOutsideBuckets(UserWarning):
    """A shape outside every bucket was served by the nearest bucket."""


Shape = tuple[int, ...]


class Bucket:
    """``Bucket("long_rows", S=(1, 64), R=(1025, None), shapes=[(8, 16384)], weight=2.0)``.

    ``verify``: shapes of the bucket a pick's result is verified on (against the reference) and
    never timed. A pick is served on every shape of its bucket, but measured, so verified, only
    on the representative ones: a tile that drops the last column where a dim is no multiple of
    it was right on 256 and served, wrong, on 300. A finalist that fails on one is not adopted,
    and the gate fails a recorded pick that does."""

    def __init__(self, name: str, *, shapes: Sequence[Sequence[int]], weight: float = 1.0,
                 shape_weights: Sequence[float] | None = None, verify: Sequence[Sequence[int]] = (),
                 **ranges: tuple[int, int | None]):
        if not name or not all(ch.isalnum() or ch in "_." for ch in name):
            raise BucketError(f"bucket name {name!r}: use letters, digits, '_' and '.' only")
        self.name = name
        self.ranges = {dim: _range(name, dim, r) for dim, r in ranges.items()}
        # an int for a shape of one dim, as best() takes one: shapes=[4096] is [(4096,)]
        self.shapes: list[Shape] = [_shape(name, s) for s in shapes]
        if not self.shapes:
            raise BucketError(f"bucket {name!r} has no representative shape")
        self.verify: list[Shape] = list(dict.fromkeys(_shape(name, s, "verify") for s in verify))
        timed = next((s for s in self.verify if s in self.shapes), None)
        if timed is not None:
            raise BucketError(f"bucket {name!r}: verify shape {timed} is a representative shape, verified already "
                              f"where it is timed")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not weight > 0:
            raise BucketError(f"bucket {name!r}: weight must be a number > 0, got {weight!r}")
        self.weight = float(weight)
        sw = [1.0] * len(self.shapes) if shape_weights is None else [float(w) for w in shape_weights]
        if len(sw) != len(self.shapes) or not all(w > 0 for w in sw):
            raise BucketError(
                f"bucket {name!r}: shape_weights must give one weight > 0 per shape")
        total = sum(sw)
        self.shape_weights = [w / total for w in sw]

    def contains(self, shape: Shape) -> bool:
        return all(lo <= v and (hi is None or v <= hi)
                   for v, (lo, hi) in zip(shape, self.ranges.values()))

    def distance(self, shape: Shape) -> float:
        """How far a shape lies outside the box, in octaves (log2 ratios) summed over dims."""
        d = 0.0
        for v, (lo, hi) in zip(shape, self.ranges.values()):
            v = max(v, 1)
            if v < lo:
                d += math.log2(lo / v)
            elif hi is not None and v > hi:
                d += math.log2(v / max(hi, 1))  # a dim that may be empty: (0, 0)
        return d

    def objective(self, times: Mapping[Shape, float]) -> float:
        """Weighted geometric mean of the times on the representative shapes (all needed)."""
        return math.exp(sum(w * math.log(times[s]) for s, w in zip(self.shapes, self.shape_weights)))

    def describe(self) -> dict:
        """The bucket as plain data, as records keep it."""
        return {"name": self.name, "ranges": {d: list(r) for d, r in self.ranges.items()},
                "weight": self.weight, "shapes": [list(s) for s in self.shapes],
                "shape_weights": self.shape_weights, **({"verify": [list(s) for s in self.verify]} if self.verify else {})}

    @classmethod
    def from_description(cls, doc: Mapping) -> Bucket:
        return cls(doc["name"], shapes=doc["shapes"], weight=doc["weight"],
                   shape_weights=doc["shape_weights"], verify=doc.get("verify", ()),
                   **{d: tuple(r) for d, r in doc["ranges"].items()})

    def __repr__(self):
        box = ", ".join(f"{d}={lo}..{'' if hi is None else hi}" for d, (lo, hi) in self.ranges.items())
        return f"Bucket({self.name!r}, {box})"


def _range(bucket: str, dim: str, r) -> tuple[int, int | None]:
    try:
        lo, hi = r
    except (TypeError, ValueError):
        raise BucketError(f"bucket {bucket!r}: dim {dim!r} needs a (lo, hi) pair, got {r!r}") from None
    if not _whole(lo) or not (hi is None or _whole(hi)):  # np.int64(1) is a bound; 10.0 and True are not
        raise BucketError(f"bucket {bucket!r}: dim {dim!r} range {r!r} needs int bounds (None for no upper bound)")
    if lo < 0 or (hi is not None and hi < lo):
        raise BucketError(f"bucket {bucket!r}: dim {dim!r} range {r!r} is not 0 <= lo <= hi")
    return int(lo), None if hi is None else int(hi)


def _whole(value) -> bool:
    """Whether a bound or dim is an int, numpy's too (a bool is none)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _shape(bucket: str, given, kind: str = "representative") -> Shape:
    """A representative (or verify) shape as a tuple of ints; a bare int is a shape of one dim. A
    fractional dim is refused: int() made (1024, 682.7) the shape (1024, 682) without a word (a
    whole float, ``1e4``, is the int it equals)."""
    try:
        dims = (given,) if _whole(given) else tuple(given)
    except TypeError:
        dims = None
    if dims is None or not all(_whole(v) or isinstance(v, float) and v.is_integer() for v in dims):
        raise BucketError(f"bucket {bucket!r}: {kind} shape {given!r} is no tuple of ints")
    return tuple(map(int, dims))


class Buckets:
    """The buckets of one kernel over its named dims: ``Buckets("SR", [Bucket(...), ...])``.

    ``dims`` is a string of one-letter dim names (the layout, as in "SR") or a sequence of names.
    Buckets may not overlap, so that every shape has at most one bucket.
    """

    def __init__(self, dims: str | Sequence[str], buckets: Sequence[Bucket]):
        self.dims = tuple(dims)
        self.buckets = list(buckets)
        if not self.buckets:
            raise BucketError("no bucket given")
        names = [b.name for b in self.buckets]
        word = isinstance(dims, str) and len(dims) > 1 and any(dims in b.ranges for b in self.buckets)
        hint = f" (a string of dims is one dim per letter: give [{dims!r}] for a dim named {dims!r})" if word else ""
        twice = next((d for d in self.dims if self.dims.count(d) > 1), None)
        if twice:  # "MNN" for "MNK": one range read for both N, the shape's last dim never checked against it
            raise BucketError(f"the dims {list(self.dims)} name {twice!r} twice: give each dim a name of its own{hint}")
        for b in self.buckets:
            if names.count(b.name) > 1:
                raise BucketError(f"bucket name {b.name!r} is used twice")
            if set(b.ranges) != set(self.dims):
                raise BucketError(
                    f"bucket {b.name!r} gives ranges for {sorted(b.ranges)}, the dims are {list(self.dims)}{hint}")
            b.ranges = {d: b.ranges[d] for d in self.dims}
            for kind, shapes in (("representative", b.shapes), ("verify", b.verify)):
                for s in shapes:
                    if len(s) != len(self.dims):
                        raise BucketError(f"bucket {b.name!r}: shape {s} does not have dims {''.join(self.dims)}")
                    if not b.contains(s):
                        raise BucketError(f"bucket {b.name!r}: {kind} shape {s} lies outside it")
        for i, a in enumerate(self.buckets):
            for b in self.buckets[i + 1:]:
                if all(_overlap(a.ranges[d], b.ranges[d]) for d in self.dims):
                    common = ", ".join(f"{d}={max(a.ranges[d][0], b.ranges[d][0])}.."
                                       f"{_upper(a.ranges[d][1], b.ranges[d][1])}" for d in self.dims)
                    raise BucketError(f"buckets {a.name!r} and {b.name!r} overlap on {common}: a shape there "
                                      f"would belong to both; make the ranges disjoint")

    def __iter__(self):
        return iter(self.buckets)

    def __len__(self):
        return len(self.buckets)

    def get(self, name: str) -> Bucket:
        for b in self.buckets:
            if b.name == name:
                return b
        raise KeyError(f"no bucket {name!r}; buckets are {[b.name for b in self.buckets]}")

    def find(self, shape: Sequence[int], *, warn: bool = True) -> tuple[Bucket, bool]:
        """The bucket holding ``shape``, else the nearest one (with a warning): (bucket, inside)."""
        shape = tuple(int(v) for v in shape)
        if len(shape) != len(self.dims):
            raise BucketError(f"shape {shape} does not have dims {''.join(self.dims)}")
        for b in self.buckets:
            if b.contains(shape):
                return b, True
        nearest = min(self.buckets, key=lambda b: b.distance(shape))
        if warn:
            warnings.warn(ShapeOutsideBuckets(outside(shape, nearest)), stacklevel=2)
        return nearest, False


def outside(shape: tuple, nearest: Bucket) -> str:
    """What :class:`ShapeOutsideBuckets` says of a shape served by the nearest bucket."""
    return f"shape {shape} lies outside every bucket; using the nearest, {nearest!r}"


def _upper(a: int | None, b: int | None) -> str:
    """The smaller of two upper bounds (None: unbounded), as text."""
    bounds = [v for v in (a, b) if v is not None]
    return str(min(bounds)) if bounds else ""


def _overlap(a: tuple[int, int | None], b: tuple[int, int | None]) -> bool:
    return (a[1] is None or b[0] <= a[1]) and (b[1] is None or a[0] <= b[1])
