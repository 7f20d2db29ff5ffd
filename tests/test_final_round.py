"""The final round's last check: a winner's lead must hold when measured again alone."""

from tunebench.buckets import Bucket
from tunebench.final_round import MIN_GAIN, _lead_kept


def two_shapes():
    return Bucket("narrow", S=(8, None), shapes=[(4096, 512), (2048, 1024)])


def test_a_lead_that_shrinks_below_the_minimum_gain_in_fresh_processes_is_not_adopted():
    # the row_reduce case: 5.5 % ahead in the round, 4 % when the pair met again
    bucket = Bucket("few_rows", S=(1, 7), shapes=[(4, 262144)])
    why = _lead_kept(bucket, [{"shape": [4, 262144], "ratio": 0.96}])
    assert why and "0.960x" in why and f"{MIN_GAIN:.0%}" in why
    assert _lead_kept(bucket, [{"shape": [4, 262144], "ratio": 0.90}]) is None


def test_the_lead_is_judged_over_the_bucket_with_the_heuristic_kept_on_a_shape():
    # a shape where the winner is the heuristic's own config counts as no lead (ratio 1)
    entries = [{"shape": [4096, 512], "ratio": 0.85}, {"shape": [2048, 1024]}]
    assert _lead_kept(two_shapes(), entries) is None  # sqrt(0.85) = 0.92
    entries[0]["ratio"] = 0.92
    assert "0.959x" in _lead_kept(two_shapes(), entries)
