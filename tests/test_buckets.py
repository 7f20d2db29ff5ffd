import math
import re

import numpy as np
import pytest

from tunebench.buckets import Bucket, BucketError, Buckets, ShapeOutsideBuckets


def sr_buckets():
    return Buckets("SR", [
        Bucket("few_rows", S=(1, 7), R=(1, None), shapes=[(2, 4096)]),
        Bucket("long_rows", S=(8, None), R=(4097, None), shapes=[(64, 16384)]),
        Bucket("short_rows", S=(8, None), R=(1, 4096), shapes=[(4096, 256), (1024, 1024)],
               shape_weights=[3, 1], weight=2),
    ])


def test_find_returns_the_bucket_holding_the_shape():
    buckets = sr_buckets()
    assert buckets.find((2, 4096)) == (buckets.get("few_rows"), True)
    assert buckets.find((8, 4097))[0].name == "long_rows"
    assert buckets.find((100000, 4096))[0].name == "short_rows"


def test_a_shape_outside_every_bucket_gets_the_nearest_with_a_warning():
    buckets = Buckets("SR", [
        Bucket("a", S=(1, 8), R=(1, 1024), shapes=[(4, 512)]),
        Bucket("b", S=(64, 128), R=(1, 1024), shapes=[(64, 512)]),
    ])
    with pytest.warns(ShapeOutsideBuckets, match=r"\(12, 100\).*'a'"):
        bucket, inside = buckets.find((12, 100))  # 12/8 is 0.58 octaves from a, 64/12 is 2.4 from b
    assert bucket.name == "a" and not inside
    with pytest.warns(ShapeOutsideBuckets):
        assert buckets.find((40, 100))[0].name == "b"


def test_a_bucket_of_an_empty_dim_is_measured_from_one():
    buckets = Buckets("SR", [Bucket("empty", S=(1, 64), R=(0, 0), shapes=[(8, 0)]),
                             Bucket("rows", S=(1, 64), R=(1, 1024), shapes=[(8, 512)])])
    with pytest.warns(ShapeOutsideBuckets):
        assert buckets.find((100, 2048))[0].name == "rows"
    assert buckets.get("empty").distance((8, 4)) == 2.0


def test_objective_is_the_weighted_geometric_mean_of_the_shape_times():
    bucket = sr_buckets().get("short_rows")
    times = {(4096, 256): 2.0, (1024, 1024): 8.0}
    assert bucket.objective(times) == pytest.approx(math.exp(0.75 * math.log(2) + 0.25 * math.log(8)))
    faster = {s: t / 1.5 for s, t in times.items()}
    assert bucket.objective(times) / bucket.objective(faster) == pytest.approx(1.5)


def test_description_round_trips():
    bucket = sr_buckets().get("short_rows")
    again = Bucket.from_description(bucket.describe())
    assert again.describe() == bucket.describe()


@pytest.mark.parametrize("make, message", [
    (lambda: Buckets("SR", [Bucket("a", S=(1, 8), R=(1, 8), shapes=[(2, 2)]),
                            Bucket("b", S=(8, 9), R=(8, 9), shapes=[(8, 8)])]), "'a' and 'b' overlap"),
    (lambda: Buckets("SR", [Bucket("a", S=(1, 8), R=(1, 8), shapes=[(9, 2)])]), r"shape \(9, 2\) lies outside"),
    (lambda: Buckets("SR", [Bucket("a", S=(1, 8), shapes=[(2,)])]), "gives ranges for"),
    (lambda: Bucket("a", S=(8, 1), shapes=[(2,)]), "dim 'S' range"),
    (lambda: Bucket("a", S=(1, 8), shapes=[]), "no representative shape"),
    (lambda: Bucket("a", S=(1, 8), shapes=[(2,)], weight=0), "weight must be a number > 0"),
    (lambda: Bucket("a b", S=(1, 8), shapes=[(2,)]), "bucket name"),
    (lambda: Buckets("SR", [Bucket("a", S=(1, 8), R=(1, 8), shapes=[(2, 2)]),
                            Bucket("a", S=(9, 10), R=(1, 8), shapes=[(9, 2)])]), "used twice"),
])
def test_invalid_buckets_are_refused_with_the_bucket_named(make, message):
    with pytest.raises(BucketError, match=message):
        make()


def test_a_shape_of_one_dim_may_be_an_int_and_a_weight_must_be_a_number():
    """shapes=[4096] and weight="2" raised bare TypeErrors from inside the bucket."""
    assert Bucket("small", N=(1, 65535), shapes=[4096]).shapes == [(4096,)]
    for bad, said in ((dict(shapes=[(1,)], weight="2"), "weight must be a number > 0, got '2'"),
                      (dict(shapes=[None]), "representative shape None is no tuple of ints"),
                      (dict(shapes=[("a",)]), r"representative shape \('a',\) is no tuple of ints")):
        with pytest.raises(BucketError, match=rf"^bucket 'small': {said}$"):
            Bucket("small", N=(1, 65535), **bad)


def test_numpy_ints_are_bounds_and_dims_and_a_fractional_dim_is_refused():
    """A code generator's np.int64 bounds were refused as "not 0 <= lo <= hi", and a float dim of a
    representative shape was cut to an int without a word: (64, 682.7) measured (64, 682)."""
    bucket = Bucket("small", N=(np.int64(1), np.int32(4096)), shapes=[np.int64(682), (np.int32(64),)])
    assert bucket.ranges == {"N": (1, 4096)} and bucket.shapes == [(682,), (64,)]
    assert all(type(v) is int for v in (*bucket.ranges["N"], *bucket.shapes[0]))  # as records keep them, in JSON
    with pytest.raises(BucketError, match=r"^bucket 'small': representative shape \(682.7,\) is no tuple of ints$"):
        Bucket("small", N=(1, 4096), shapes=[(682.7,)])
    assert Bucket("small", N=(1, 1 << 20), shapes=[(1e4,)]).shapes == [(10000,)]  # a whole float is its int
    for bad in ((1, 4096.0), (True, 4096)):
        with pytest.raises(BucketError, match=rf"^bucket 'small': dim 'N' range {re.escape(repr(bad))} needs int bounds"):
            Bucket("small", N=bad, shapes=[(8,)])


def test_dims_that_name_one_dim_twice_are_refused():
    """Buckets("MNN", ...) for "MNK" kept one range for both N: the shape's last dim was never
    checked against a bucket, and a C header's function took two parameters named N."""
    with pytest.raises(BucketError, match=r"^the dims \['M', 'N', 'N'\] name 'N' twice: give each dim a name of its "
                                          r"own$"):
        Buckets("MNN", [Bucket("small", M=(1, 8), N=(1, 64), shapes=[(2, 8, 8)])])
    with pytest.raises(BucketError, match=r"name 'e' twice: give each dim a name of its own \(a string of dims is "
                                          r"one dim per letter: give \['seqlen'\] for a dim named 'seqlen'\)$"):
        Buckets("seqlen", [Bucket("small", seqlen=(1, 65535), shapes=[(4096,)])])


def test_a_dim_named_by_a_word_given_as_a_string_is_told_how_to_name_it():
    """Buckets("len", ...) took the dims l, e and n, and said only that they differ."""
    with pytest.raises(BucketError, match=r"the dims are \['l', 'e', 'n'\] \(a string of dims is one dim per "
                                          r"letter: give \['len'\] for a dim named 'len'\)$"):
        Buckets("len", [Bucket("small", len=(1, 65535), shapes=[(4096,)])])
