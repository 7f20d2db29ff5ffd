import itertools
import json

import numpy as np

import pytest

from tunebench.buckets import Bucket
from tunebench.space import Space, SpaceError, pow2


def test_value_specs_lists_ranges_and_powers_of_two():
    space = Space({"warp_num": pow2(1, 32), "tree_reduce_num": pow2(32, 1024), "unroll": (1, 4),
                   "vec": [1, 2, 4], "tile": range(16, 65, 16)})
    assert space.values["warp_num"] == (1, 2, 4, 8, 16, 32)
    assert space.values["tree_reduce_num"] == (32, 64, 128, 256, 512, 1024)
    assert space.values["unroll"] == (1, 2, 3, 4)
    assert space.values["tile"] == (16, 32, 48, 64)
    assert space.size == 6 * 6 * 4 * 3 * 4


def test_pow2_rejects_a_range_without_powers_of_two():
    with pytest.raises(SpaceError, match="no power of two"):
        pow2(5, 7)


def test_two_powers_of_two_two_bools_and_numpy_values_are_values_not_ranges():
    space = Space({"block": pow2(32, 64), "flag": (False, True), "back": (True, False),
                   "vec": np.array([1, 2, 4]), "scale": [np.float32(0.5)]})
    assert space.values == {"block": (32, 64), "flag": (False, True), "back": (True, False), "vec": (1, 2, 4),
                            "scale": (0.5,)}
    assert json.dumps(space.config(next(iter(space.enumerate()[0])))) == \
        '{"block": 32, "flag": false, "back": true, "vec": 1, "scale": 0.5}'


def test_a_whole_config_constraint_asking_get_or_in_for_an_unknown_name_is_refused():
    for constraint in (lambda c: c.get("tile_mm", 0) % c["mr"] == 0, lambda c: "tile_mm" not in c):
        space = Space({"tile_m": [16, 32], "mr": [4, 8]}, [constraint])
        with pytest.raises(SpaceError, match=r"names unknown param 'tile_mm' \(did you mean 'tile_m'\?\)"):
            space.validate()


def test_broken_tells_two_lambdas_of_one_line_apart_by_the_values_they_read():
    """constraints=[lambda K, kblock: ..., lambda kblock, acc: ...] on one line: "breaks constraint
    <lambda> at test_qgemv.py:35" did not say which one a heuristic broke, nor why."""
    space = Space({"kblock": [8, 64], "acc": [1, 4]},
                  constraints=[lambda K, kblock: K % kblock == 0, lambda kblock, acc: kblock % acc == 0])
    (why,) = space.broken({"kblock": 64, "acc": 4}, (4096, 100), ("M", "K"))
    assert why.startswith("breaks constraint <lambda> at test_space.py:") and why.endswith(" with K=100, kblock=64")
    (why,) = Space({"tile": [8, 16]}, [lambda c: c["tile"] < 16]).broken({"tile": 16}, (4,), ("N",))
    assert why.endswith(" with tile=16")  # a whole-config constraint: every param


def test_broken_names_what_a_config_from_outside_the_space_breaks_on_a_shape():
    space = Space({"tile": [8, 16], "vec": [1, 2]},
                  constraints=[lambda tile, vec: tile * vec <= 16, lambda N, tile: N % tile == 0])
    assert space.broken({"tile": 16, "vec": 1}, (64,), ("N",)) == []
    assert [b.split(" at ")[0] for b in space.broken({"tile": 16, "vec": 2}, (24,), ("N",))] == \
        ["breaks constraint <lambda>"] * 2
    assert space.broken({"tile": 32, "vec": 1}, (64,), ("N",)) == ["tile=32 is not among its values"]
    assert space.broken({"tile": 8}, (64,), ("N",)) == ["params ['tile'] are not the space's ['tile', 'vec']"]


def test_keyword_and_whole_config_constraints_split_the_product():
    space = Space({"warp_num": pow2(1, 32), "tree_reduce_num": pow2(32, 1024), "vec": [1, 2, 4]},
                  constraints=[lambda warp_num, tree_reduce_num: warp_num * 32 <= tree_reduce_num,
                               lambda c: c["vec"] <= c["warp_num"]])
    valid, invalid = space.enumerate()
    expected = [k for k in itertools.product(*space.values.values())
                if k[0] * 32 <= k[1] and k[2] <= k[0]]
    assert valid == expected
    assert len(valid) + len(invalid) == space.size
    assert all(space.is_valid(k) for k in valid) and not any(space.is_valid(k) for k in invalid)


def test_config_and_key_round_trip():
    space = Space({"a": [1, 2], "b": ["x", "y"]})
    assert space.config((2, "y")) == {"a": 2, "b": "y"}
    assert space.key({"b": "x", "a": 1}) == (1, "x")
    assert space.contains({"a": 1, "b": "x"}) and not space.contains({"a": 3, "b": "x"})


@pytest.mark.parametrize("params, constraints, message", [
    ({"warp_num": []}, [], "param 'warp_num' has an empty value list"),
    ({"warp_num": (8, 4)}, [], r"param 'warp_num': range \(8, 4\) is empty"),
    ({"warp_num": "1,2"}, [], "param 'warp_num': expected a list"),
    ({"block": [(16, 16), (32, 8)]}, [], r"param 'block': value \(16, 16\) is a tuple: a param's values are numbers"),
    ({"block": [[16, 16], [32, 8]]}, [], r"param 'block': value \[16, 16\] is a list: a param's values are numbers"),
    ({"warp_num": [1, 2]}, [lambda warp_nm: warp_nm > 1], "names unknown param 'warp_nm'"),
    ({"warp_num": [1, 2]}, [lambda c: c["tree"] > 1], "names unknown param 'tree'"),
    ({"VEC": [1, 2]}, [lambda N, VECS: N % VECS == 0],
     r"names unknown param 'VECS' \(did you mean 'VEC'\?\); params are \['VEC'\]"),  # N is a dim: not blamed
    ({"VEC": [1, 2]}, [lambda M, K: M > K], r"reads no param of the space \(M, K\); params are \['VEC'\]"),
    ({"warp_num": [0, 2]}, [lambda warp_num: 64 // warp_num > 1],
     r"raised ZeroDivisionError.*\{'warp_num': 0\}"),
    ({"warp_num": [1, 2]}, [lambda warp_num: warp_num > 8], "no config satisfies the constraints"),
    ({"warp_num": [1, 2]}, ["warp_num > 1"], "not callable"),
    ({"warp num": [1, 2]}, [], "not a C identifier"),
    ({"__CUDA_ARCH__": [800]}, [], r"param '__CUDA_ARCH__': names beginning __ or _ and a capital are the compiler's"),
    ({"_Tile": [8]}, [], r"param '_Tile': names beginning __ or _ and a capital"),
    ({"method": ["naive", "two\nlines"]}, [], r"param 'method': value 'two\\nlines' cannot follow `#define method`"),
    ({"method": ["naive", " "]}, [], "param 'method': value ' ' cannot follow"),
    ({"tile": [1, 2.0, True]}, [], r"param 'tile' lists a value twice: 1 and True in \(1, 2.0, True\)"),
    ({"tile": [1, 2, "4"]}, [], r"param 'tile' mixes a number and a string in \(1, 2, '4'\): give one kind"),
    ({"opt": [None, 1, 2]}, [], r"param 'opt' mixes None and a number in \(None, 1, 2\)"),  # null was a number
])
def test_invalid_definitions_name_the_param_or_constraint(params, constraints, message):
    with pytest.raises(SpaceError, match=message):
        Space(params, constraints).validate()


def test_a_space_whose_constraints_exclude_every_config_names_them():
    """It said "no config satisfies the constraints", leaving the user to find which."""
    loose, tight = (lambda a, b: a * b <= 8), (lambda a: a > 4)
    with pytest.raises(SpaceError, match=r": constraint <lambda> at test_space.py:\d+ \(on a\) excludes every one$"):
        Space({"a": [1, 2, 4], "b": [1, 2]}, [loose, tight]).validate()
    with pytest.raises(SpaceError, match=r"\(on a, b\) excludes 1, constraint <lambda> at test_space.py:\d+ \(on a\) 2 "
                                         r"\(each config by the first it fails\)$"):
        Space({"a": [1, 2, 4], "b": [4]}, [loose, lambda a: a > 2, lambda a: a < 100]).validate()
    # a guard first: the constraint it guards is never run where it fails (b % 0 raised, hiding the rest)
    with pytest.raises(SpaceError, match=r": constraint <lambda> at test_space.py:\d+ \(on b\) excludes every one$"):
        Space({"a": [1, 2], "b": [0]}, [lambda b: b != 0, lambda a, b: a % b == 0]).validate()
    with pytest.raises(SpaceError, match=r"on every shape of bucket 'small' \(\(8,\)\): constraint <lambda> at "
                                         r"test_space.py:\d+ \(on N, t\) excludes 1, constraint <lambda> at "
                                         r"test_space.py:\d+ \(on N, t\) 1 \(each config by the first it fails\)$"):
        Space({"t": [0, 16]}, [lambda N, t: t > N and t != 0, lambda N, t: N % t == 0]).validate(
            [Bucket("small", N=(1, 100), shapes=[(8,)])], ["N"])


def test_a_constraint_error_names_its_source_line():
    space = Space({"a": [1]}, [lambda a: a / 0])
    with pytest.raises(SpaceError, match=r"constraint <lambda> at test_space.py:\d+"):
        space.validate()


def test_a_constraint_on_dims_is_checked_against_them_naming_the_fault():
    with pytest.raises(SpaceError, match="reads only the dim 'N', no param: it cannot tell configs apart"):
        Space({"vec": [1, 2]}, constraints=[lambda N: N % 4 == 0]).check_dims(["N"])
    with pytest.raises(SpaceError, match=r"names unknown param 'n' \(did you mean 'N'\?\)"):
        Space({"vec": [1, 2]}, constraints=[lambda n, vec: n % vec == 0]).check_dims(["N"])
    Space({"vec": [1, 2]}, constraints=[lambda N, vec: N % vec == 0]).check_dims(["N"])


def test_a_param_named_shape_is_refused_only_where_a_constraint_names_it():
    """Only a constraint reads the shape by its name: a space without one (a replayed cache's)
    was refused all the same."""
    Space({"shape": [1, 2], "vec": [1, 2]}, constraints=[lambda c: c["shape"] <= c["vec"]]).check_dims(["N"])
    with pytest.raises(SpaceError, match=r"param 'shape' has the name of the shape: constraint <lambda> at "
                                         r"test_space.py:\d+, naming it, could not tell which it reads"):
        Space({"shape": [1, 2], "vec": [1, 2]}, constraints=[lambda shape, vec: shape <= vec]).check_dims(["N"])
    with pytest.raises(SpaceError, match=r"param 'shape' has the name of the shape: constraint <lambda> at "):
        Space({"shape": [1, 2], "vec": [1, 2]}, constraints=[lambda shape: shape <= 1]).check_dims(["N"])


def test_holds_answers_alike_when_asked_again_and_refuses_a_value_no_space_holds():
    space = Space({"a": [1, 2], "b": ["x", "y"]}, [lambda a, b: a == 1 or b == "x"])
    asked = [{"a": 1, "b": "y"}, {"a": 2, "b": "y"}, {"a": 3, "b": "x"}, {"a": 2, "b": "x"}]
    first = [space.holds(c) for c in asked]
    assert first == [True, False, False, True] and [space.holds(c) for c in asked] == first
    assert space.holds({"a": [1], "b": "x"}) is False  # a hand-edited record's list


@pytest.mark.parametrize("given", ["vec * unroll <= 4", lambda vec, unroll: vec * unroll <= 4])
def test_constraints_given_bare_not_in_a_list_are_refused_naming_the_form(given):
    """A string was taken letter by letter ("constraint 'v' is not callable"), at collection."""
    with pytest.raises(SpaceError, match=r"constraints=.*: give a list of functions of the params"):
        Space({"vec": [1, 2], "unroll": [1, 2]}, constraints=given)


def test_a_string_constraint_as_kernel_tuner_writes_its_restrictions_is_refused_with_the_lambda_it_means():
    """A port of a Kernel Tuner script copies its restrictions, strings of the params: the refusal
    said only that strings are not evaluated, and the user had to find the form that is."""
    with pytest.raises(SpaceError) as refused:
        Space({"TILE_DIM": [16, 32], "BLOCK_ROWS": [4, 8]},
              constraints=["BLOCK_ROWS <= TILE_DIM and TILE_DIM * BLOCK_ROWS <= max(1024, 32)"]).validate()
    assert str(refused.value) == (
        "constraint 'BLOCK_ROWS <= TILE_DIM and TILE_DIM * BLOCK_ROWS <= max(1024, 32)' is not callable (strings are "
        "not evaluated): write it as lambda BLOCK_ROWS, TILE_DIM: BLOCK_ROWS <= TILE_DIM and TILE_DIM * BLOCK_ROWS "
        "<= max(1024, 32)")
    with pytest.raises(SpaceError) as refused:  # no Python expression: no lambda to offer
        Space({"tile": [1, 2]}, constraints=["tile %% 2 =="]).validate()
    assert str(refused.value) == "constraint 'tile %% 2 ==' is not callable (strings are not evaluated)"


def test_several_string_constraints_are_each_named_in_the_refusal():
    """Kernel Tuner's restrictions are often several strings: the refusal named the first alone, and
    the next was found only once it was rewritten."""
    with pytest.raises(SpaceError) as refused:
        Space({"a": [1, 2], "b": [1, 2]}, constraints=["a <= b", lambda a: a > 0, "a * b <= 2"]).validate()
    assert str(refused.value) == ("constraint 'a <= b' is not callable (strings are not evaluated): write it as "
                                  "lambda a, b: a <= b; constraint 'a * b <= 2' is not callable (strings are not "
                                  "evaluated): write it as lambda a, b: a * b <= 2")


def test_a_string_constraints_lambda_reads_a_param_named_as_a_builtin_and_not_a_name_it_binds():
    """A param named max or len was left out of the offered lambda, which then read the builtin,
    and a comprehension's variable was offered as a param."""
    with pytest.raises(SpaceError) as refused:
        Space({"max": [1, 2], "X": [1, 2], "Y": [1, 2]}, constraints=["all(b <= max for b in (X, Y))"]).validate()
    assert str(refused.value).endswith(": write it as lambda max, X, Y: all(b <= max for b in (X, Y))")


@pytest.mark.parametrize("given, meant", [("a <= b", "lambda a, b: a <= b"),
                                          ("a <=", "lambda vec, unroll: vec * unroll <= 4")])
def test_a_string_given_as_the_constraints_is_refused_with_the_lambda_it_means(given, meant):
    """A bare string, as Kernel Tuner takes one restriction, got only the generic example where a
    string in the list got the lambda it means; one that is no expression still gets the example."""
    with pytest.raises(SpaceError) as refused:
        Space({"a": [1, 2], "b": [1, 2]}, constraints=given)
    assert str(refused.value) == f"constraints={given!r}: give a list of functions of the params, as constraints=[{meant}]"


def test_a_list_of_configs_is_a_space_of_those_configs_alone():
    """Triton's configs=[...]: a list of configs was read as a mapping, and refused as "param
    'a': expected a list of values ... got 'b'"; the product of their values held configs never listed."""
    listed = [{"block": 64, "warps": 2}, {"block": 128, "warps": 4}, {"block": 256, "warps": np.int64(4)}]
    space = Space(listed, constraints=[lambda block, warps: block // warps >= 32])
    assert space.values == {"block": (64, 128, 256), "warps": (2, 4)}
    assert space.enumerate() == ([(64, 2), (128, 4), (256, 4)], [])
    assert space.holds({"block": 128, "warps": 4}) and not space.holds({"block": 64, "warps": 4})
    narrowed = Space(listed, constraints=[lambda block: block >= 128])
    assert narrowed.enumerate() == ([(128, 4), (256, 4)], [(64, 2)])


@pytest.mark.parametrize("listed, message", [
    ([{"block": 64}, {"block": 128, "warps": 4}], "config 2 of the list has params ['block', 'warps'], config 1 ['block']"),
    ([{"block": 64}, {"block": 64}], "config 2 of the list is config 1 again"),
    ([], "the space has no param"),
    ([{"block": 64}, 128], "config 2 of the list is 128, not a dict"),
    # a raw TypeError: unhashable type: 'list'
    ([{"block": 64}, {"block": [128, 256]}], "config 2 of the list gives param 'block' [128, 256]: a value is one"),
])
def test_a_list_of_configs_that_is_no_space_says_which_config(listed, message):
    with pytest.raises(SpaceError) as e:
        Space(listed).enumerate()
    assert message in str(e.value)


def test_a_list_of_configs_with_configs_given_too_is_refused():
    """configs= beside a list was dropped without a word."""
    with pytest.raises(SpaceError, match="a list of configs is its configs: give no configs= beside it"):
        Space([{"block": 64}], configs=[(128,)])


def test_a_constraint_reading_the_shape_alone_is_refused_naming_what_to_write():
    """``lambda shape: ...`` was called with no argument at the first config judged, a TypeError
    under SpaceError naming a config, though no config was at fault."""
    with pytest.raises(SpaceError, match=r"constraint <lambda> at test_space.py:\d+ reads the shape alone, no param: "
                                         r"it holds for every config or for none; name the params it bounds \(lambda "
                                         r"shape, vec: ...\); params are \['vec', 'unroll'\]"):
        Space({"vec": [1, 2], "unroll": [1]}, constraints=[lambda shape: shape[0] > 4]).validate()
