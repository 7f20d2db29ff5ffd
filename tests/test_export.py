"""tunebench export: the JSON a framework reads without tunebench, and a C header that gcc
compiles and that answers as best() does, inside, on the edges of and outside the buckets."""

import hashlib
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from tinydb import TinyDB

import tunebench
from tests.conftest import GEMM_C, GEMM_SUITE, ascii_locale
from tests.test_plugin import TUNE
from tunebench import Bucket, Buckets, Space, export
from tunebench.c_constraint import C_HELPERS, NoCForm, c_form
from tunebench.cli import main

SHAPES = [(1,), (1000,), (4096,), (4097,), (20000,), (10**9,), (0,)]

#: Every measurement of these tests' runs is judged clean (quiet_verdicts): beside other load a tune
#: stops at its heuristic, or its final round confirms nothing, as documented, and what an export
#: writes of a tuned config goes unchecked (5 of them failed beside two busy processes). A busy
#: machine's tunes have tests of their own (test_interference.py).
pytestmark = pytest.mark.usefixtures("quiet_verdicts")

@pytest.fixture
def exported(pytester, twice_project, tmp_path):
    root = twice_project
    pytester.runpytest("suites", *TUNE, "-k", "small")  # "large" keeps nothing recorded
    out = tmp_path / "export"
    assert main(["export", "--out", str(out), "--records", str(root / "records"),
                 "--suites", str(root / "suites")]) == 0
    return root, out


def test_the_json_export_holds_every_bucket_with_its_ranges_and_config(exported):
    root, out = exported
    data = json.loads((out / "tunebench_configs.json").read_text())
    (entry,) = data["kernels"]["twice"].values()
    assert entry["dims"] == ["N"] and entry["params"] == ["reps", "pad"]
    small, large = entry["buckets"]
    assert small["ranges"] == {"N": [1, 4096]} and large["ranges"] == {"N": [4097, None]}
    assert large["source"] == "heuristic" and large["config"] == {"reps": 4, "pad": 0}
    assert small["source"] == "tuned" and small["config"]["reps"] == 1 and small["baseline_ms"] > 0


def test_the_header_compiles_and_agrees_with_best(exported, tmp_path):
    root, out = exported
    calls = "\n".join(f'    {{ tb_twice_float32_config c = tb_twice_float32({n}); '
                      f'printf("%d %d %d\\n", c.tuned, c.reps, c.pad); }}' for (n,) in SHAPES)
    text = f'#include <stdio.h>\n#include "tunebench_configs.h"\nint main(void)\n{{\n{calls}\n    return 0;\n}}\n'
    for compiler, source in (("gcc", tmp_path / "main.c"), ("g++", tmp_path / "main.cpp")):
        source.write_text(text)
        binary = tmp_path / f"main-{compiler}"
        strict = ["-Wextra", "-Wold-style-cast"] if compiler == "g++" else ["-Wextra"]  # as frameworks build
        subprocess.run([compiler, "-std=c++11" if compiler == "g++" else "-std=c99", "-Wall", "-Werror", *strict,
                        f"-I{out}", str(source), "-o", str(binary), "-lm"], check=True)
        answers = [list(map(int, line.split())) for line in subprocess.run(
            [binary], check=True, capture_output=True, text=True).stdout.splitlines()]
        data = json.loads((out / "tunebench_configs.json").read_text())
        buckets = {b["name"]: b for b in data["kernels"]["twice"]["float32"]["buckets"]}
        sources = set()
        for shape, (tuned, reps, pad) in zip(SHAPES, answers):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", tunebench.buckets.ShapeOutsideBuckets)  # (0,): the nearest
                choice = tunebench.lookup("twice", shape, records=root / "records", suites=root / "suites")
            assert tuned == (choice.source == "tuned"), shape
            expected = choice.config if tuned else buckets[choice.bucket]["config"]
            assert {"reps": reps, "pad": pad} == expected, shape
            sources.add(choice.source)
        assert sources == {"tuned", "heuristic"}  # both answers were exercised


def test_the_header_compiles_in_a_file_that_builds_the_kernel_with_its_params_and_dims_as_macros(exported, tmp_path):
    root, out = exported
    (tmp_path / "kernel.c").write_text('#include <stdio.h>\n#include "tunebench_configs.h"\n'
                                       "int built_with(void) { return reps + pad + N; }\n"
                                       "int main(void)\n{\n    tb_twice_float32_config c = tb_twice_float32(1000);\n"
                                       '    printf("%d %d %d %d\\n", c.tuned, tb_twice_float32_get_reps(c), '
                                       "tb_twice_float32_get_pad(c), built_with());\n    return 0;\n}\n")
    small = json.loads((out / "tunebench_configs.json").read_text())["kernels"]["twice"]["float32"]["buckets"][0]
    for compiler, std in (("gcc", "-std=c99"), ("g++", "-std=c++11")):
        binary = tmp_path / f"kernel-{compiler}"
        done = subprocess.run([compiler, "-x", "c" if compiler == "gcc" else "c++", std, "-Wall", "-Werror",
                               "-Dreps=4", "-Dpad=0", "-DN=100", f"-I{out}", str(tmp_path / "kernel.c"),
                               "-o", str(binary), "-lm"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        # the getters read the config the bucket holds, not the file's own reps=4 and pad=0
        printed = subprocess.run([binary], check=True, capture_output=True, text=True).stdout.split()
        assert printed == ["1", str(small["config"]["reps"]), str(small["config"]["pad"]), "104"]


def exported_layouts(*layouts) -> dict:
    """An export's content with one bucket per value of the param ``layout``."""
    return {"generated_by": "t", "device": "d", "description": "x", "records": "r", "records_sha256": "abc",
            "kernels": {"k": {"float32": {"dims": ["i"], "params": ["layout", "tile"], "fits": "1", "unchecked": None,
                                          "buckets": [  # a dim named as a C loop index would be
                {"name": f"b{i}", "ranges": {"i": [10 * i + 1, 10 * i + 10]}, "source": "tuned",
                 "ranked": [{"layout": layout, "tile": 4}], "heuristic": {"layout": layouts[0], "tile": 1}}
                for i, layout in enumerate(layouts)]}}}}


def test_a_string_param_is_carried_as_its_text_and_a_mixed_one_is_an_error_naming_it(tmp_path):
    (tmp_path / "tunebench_configs.h").write_text(export.header(exported_layouts("row", "col_major")))
    (tmp_path / "main.c").write_text('#include <stdio.h>\n#include "tunebench_configs.h"\nint main(void)\n{\n'
                                     '    printf("%s %s %d\\n", tb_k_float32(5).layout, tb_k_float32(15).layout, '
                                     'tb_k_float32(15).tile);\n    return 0;\n}\n')
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(tmp_path / "main.c"),
                    "-o", str(tmp_path / "main"), "-lm"], check=True)
    assert subprocess.run([tmp_path / "main"], check=True, capture_output=True, text=True).stdout == "row col_major 4\n"
    # a param no C type carries leaves its kernel out, not every kernel of the export
    mixed = exported_layouts("row", 2)
    mixed["kernels"]["other"] = exported_layouts("row")["kernels"]["k"]
    with pytest.warns(export.ExportNote, match="k float32: left out of the header: kernel 'k': param 'layout' has values"):
        text = export.header(mixed)
    assert "/* tb_k_float32: left out: kernel 'k': param 'layout' has values" in text and "tb_other_float32(" in text


def test_an_int_param_beyond_32_bits_is_a_long_long_in_c_and_cpp(tmp_path):
    """A workspace of 2**32 bytes was an int field: gcc warned and served 0, g++ -std=c++11 refused it."""
    data = exported_layouts("row")
    data["kernels"]["k"]["float32"]["buckets"][0]["ranked"] = [{"layout": "row", "tile": 3 << 33}]
    (tmp_path / "tunebench_configs.h").write_text(export.header(data))
    (tmp_path / "main.cpp").write_text('#include <stdio.h>\n#include "tunebench_configs.h"\nint main()\n{\n'
                                       '    printf("%lld\\n", tb_k_float32(5).tile);\n    return 0;\n}\n')
    subprocess.run(["g++", "-std=c++11", "-Wall", "-Werror", f"-I{tmp_path}", str(tmp_path / "main.cpp"),
                    "-o", str(tmp_path / "main")], check=True)
    assert subprocess.run([tmp_path / "main"], check=True, capture_output=True, text=True).stdout == f"{3 << 33}\n"
    # beyond 64 bits, or a text that would end the header's comment: that kernel is left out, and the header builds
    data["kernels"]["k"]["float32"]["buckets"][0]["ranked"] = [{"layout": "row", "tile": 2**64}]
    data["kernels"]["other"] = exported_layouts("*/ row", 7)["kernels"]["k"]
    with pytest.warns(export.ExportNote) as noted:
        (tmp_path / "tunebench_configs.h").write_text(export.header(data))
    assert [str(n.message).split(":")[0] for n in noted] == ["k float32", "other float32"]
    assert "beyond 64 bits (18446744073709551616)" in str(noted[0].message)
    (tmp_path / "empty.c").write_text('#include "tunebench_configs.h"\nint main(void) { return 0; }\n')
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(tmp_path / "empty.c"),
                    "-o", str(tmp_path / "empty")], check=True)


def test_a_string_params_text_is_carried_byte_for_byte_whatever_its_characters(tmp_path):
    """Written as JSON, a text beyond the BMP ("\\ud83d\\ude00") or of a control character
    ("\\u0001") did not compile, and "??=" was read as the trigraph "#" under -std=c99."""
    texts = ["row", 'a"b\\c', "a??=b", "klein_µ", "\U0001f642", "\x01\t"]
    (tmp_path / "tunebench_configs.h").write_text(export.header(exported_layouts(*texts)), encoding="utf-8")
    (tmp_path / "main.c").write_text('#include <stdio.h>\n#include "tunebench_configs.h"\nint main(void)\n{\n' + "".join(
        f'    printf("%s\\n", tb_k_float32({10 * i + 5}).layout);\n' for i in range(len(texts))) + "    return 0;\n}\n")
    for compiler, language in (("gcc", ["-x", "c", "-std=c99"]), ("g++", ["-x", "c++", "-std=c++11"])):
        done = subprocess.run([compiler, *language, "-Wall", "-Wextra", "-Werror", f"-I{tmp_path}",
                               str(tmp_path / "main.c"), "-o", str(tmp_path / "main"), "-lm"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert subprocess.run([tmp_path / "main"], check=True, capture_output=True).stdout.decode().split("\n")[:-1] == texts


def test_a_float_params_infinite_and_nan_values_are_carried_in_c_and_cpp(tmp_path):
    """The header wrote ``inf`` and ``nan`` for them, and did not compile ("'inf' undeclared")."""
    data = exported_layouts("row", "col", "row")
    for bucket, value in zip(data["kernels"]["k"]["float32"]["buckets"], (math.inf, -math.inf, math.nan)):
        bucket["ranked"], bucket["heuristic"] = [{"layout": "row", "tile": value}], {"layout": "row", "tile": 0.5}
    (tmp_path / "tunebench_configs.h").write_text(export.header(data))
    (tmp_path / "main.c").write_text('#include <stdio.h>\n#include "tunebench_configs.h"\nint main(void)\n{\n'
                                     '    printf("%g %g %d\\n", tb_k_float32(5).tile, tb_k_float32(15).tile, '
                                     'isnan(tb_k_float32(25).tile) != 0);\n    return 0;\n}\n')
    strict = ["-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wfloat-equal"]
    for compiler, language in (("gcc", ["-x", "c", "-std=c99"]), ("g++", ["-x", "c++", "-std=c++11", "-Wold-style-cast"])):
        done = subprocess.run([compiler, *language, *strict, f"-I{tmp_path}", str(tmp_path / "main.c"), "-o",
                               str(tmp_path / "main"), "-lm"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert subprocess.run([tmp_path / "main"], check=True, capture_output=True, text=True).stdout == "inf -inf 1\n"


def test_a_param_or_dim_the_header_cannot_name_is_an_error_naming_it_not_a_header_that_does_not_compile():
    data = exported_layouts("row", "col")
    for kind, field, bad, what in (("param", "params", "new", "a C or C++ keyword"),
                                   ("param", "params", "tuned", "the name of the header's own field"),
                                   ("dim", "dims", "int", "a C or C++ keyword")):
        entry = {**data["kernels"]["k"]["float32"], field: [bad] + data["kernels"]["k"]["float32"][field][1:]}
        with pytest.raises(export.ExportError, match=re.escape(f"kernel 'k': {kind} '{bad}' is {what}, which the "
                                                               f"header cannot name a ") + f".*: rename the {kind}"):
            export.header({**data, "kernels": {"k": {"float32": entry}}})


def test_the_header_picks_the_bucket_find_does_at_its_edges(tmp_path):
    """An empty bucket (0, 0), bounds beside 2**53 (doubles round them) and a bound of 2**64: the
    header picked another bucket than best(), or did not compile."""
    ranges = [("empty", 0, 0), ("small", 1, 2**53), ("large", 2**53 + 1, 2**64), ("huge", 2**64 + 1, None)]
    buckets = Buckets("N", [Bucket(name, N=(lo, hi), shapes=[(lo,)]) for name, lo, hi in ranges])
    data = {"generated_by": "t", "device": "d", "description": "x", "records": "r", "records_sha256": "abc",
            "kernels": {"k": {"float32": {"dims": ["N"], "params": ["tile"], "fits": "1", "unchecked": None, "buckets": [
                {"name": name, "ranges": {"N": [lo, hi]}, "source": "tuned", "ranked": [{"tile": i + 1}],
                 "heuristic": {"tile": 0}} for i, (name, lo, hi) in enumerate(ranges)]}}}}
    (tmp_path / "tunebench_configs.h").write_text(export.header(data))
    sizes = [0, 1, 2, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 2, 2**62, 2**63 - 1]
    calls = "\n".join(f'    printf("%d\\n", tb_k_float32({n}LL).tile);' for n in sizes)
    (tmp_path / "main.cpp").write_text(f'#include <stdio.h>\n#include "tunebench_configs.h"\nint main()\n{{\n{calls}\n'
                                       f'    return 0;\n}}\n')
    subprocess.run(["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-Wold-style-cast", f"-I{tmp_path}",
                    str(tmp_path / "main.cpp"), "-o", str(tmp_path / "main")], check=True)
    got = subprocess.run([tmp_path / "main"], check=True, capture_output=True, text=True).stdout.split()
    names = [name for name, *_ in ranges]
    assert [names[int(t) - 1] for t in got] == [buckets.find((n,), warn=False)[0].name for n in sizes]


#: Shaped constraints of the kinds suites write, and one the header cannot check.
SHAPED = [lambda N, tile: N % tile == 0 and 1 <= tile <= N,
          lambda shape, vec, tile: min(shape[1], 64) % vec == 0 or not tile // vec > 2,
          lambda M, vec: (M if M < 100 else M >> 1) * vec / 3 >= 2 * vec,
          lambda N, tile: (N - tile) // tile >= -1 and (N - 7 * tile) % 5 != 3,  # floored, as Python
          lambda M, vec, tile: tile * (vec - 1 or 3) <= M + 4]  # `or` is the operand, not 1


def test_shaped_constraints_are_checked_in_c_as_in_python(tmp_path):
    space = Space({"tile": [1, 3, 4, 8], "vec": [1, 2, 4]}, constraints=SHAPED)
    shapes = [(m, n) for m in (1, 5, 99, 100, 257) for n in (1, 2, 6, 48, 65, 128)]
    configs = [dict(zip(("tile", "vec"), k)) for k in itertools.product((1, 3, 4, 8), (1, 2, 4))]
    test = " && ".join(c_form(c, ("M", "N")) for c in space.shaped_constraints)
    lines = [f"    {{ cfg v = {{{c['tile']}, {c['vec']}}}, *c = &v; long M = {m}, N = {n}; int tb_ok = 1, r = {test}; "
             f"printf(\"%d\", tb_ok && r); }}"
             for m, n in shapes for c in configs]
    (tmp_path / "fits.c").write_text("#include <stdio.h>\n" + C_HELPERS + "typedef struct { int tile; int vec; } cfg;\n"
                                     "int main(void)\n{\n" + "\n".join(lines) + "\n    return 0;\n}\n")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", str(tmp_path / "fits.c"), "-o", str(tmp_path / "fits")],
                   check=True)
    got = subprocess.run([tmp_path / "fits"], check=True, capture_output=True, text=True).stdout
    expected = "".join(str(int(space.holds_for(space.key(c), s, ("M", "N")))) for s in shapes for c in configs)
    assert got == expected and "0" in got and "1" in got
    beyond = Space({"tile": [1, 2]}, constraints=[lambda N, tile: math.gcd(N, tile) == tile])
    with pytest.raises(NoCForm, match=r"constraint <lambda> at test_export.py:\d+: `math.gcd\(N, tile\)` has no C form"):
        c_form(beyond.shaped_constraints[0], ("N",))
    floating = Space({"ratio": [0.5, 1]}, constraints=[lambda N, ratio: N % ratio == 0])
    with pytest.raises(NoCForm, match="`N % ratio` has no C form"):
        c_form(floating.shaped_constraints[0], ("N",), floats=["ratio"])


#: Shaped constraints where a float param meets an int, compares with ``==`` and ``!=``, and is
#: read for its truth, and one whose value is an int beyond 32 bits.
FLOATING = [lambda N, tile, ratio: N * ratio >= tile,
            lambda M, ratio, tile: ratio * tile == M or ratio != 1.5,
            lambda N, ratio: N / ratio != 4 and (N - 1) / 2 == ratio * 2 or N > 6,
            lambda M, N, ratio, tile: (ratio if M > N else tile) <= min(N, ratio * 8),
            lambda N, ratio, tile: (ratio - 1 and tile * 2) or not ratio - 0.5 or N == 6,
            lambda M, ratio: M * ratio - 2,  # true but where it is 0.0
            lambda N, tile: N * tile * 2**32]  # its low 32 bits are 0: an int held 0, false


def test_constraints_mixing_floats_with_ints_are_checked_in_c_as_in_python_under_strict_warnings(tmp_path):
    """An int meeting a float was converted implicitly (-Wconversion), a float compared with ==
    or read for its truth (-Wfloat-equal): a framework's -Werror build failed at the header."""
    values = {"tile": [1, 3, 4, 8], "ratio": [0.5, 1.0, 1.5, 2.0]}
    alone = [Space(values, constraints=[fn]) for fn in FLOATING]  # each constraint's answer on its own
    shapes = [(m, n) for m in (1, 2, 4, 6, 12) for n in (0, 1, 2, 3, 4, 6, 9, 100)]
    configs = [dict(zip(("tile", "ratio"), k)) for k in itertools.product((1, 3, 4, 8), (0.5, 1.0, 1.5, 2.0))]
    forms = [c_form(a.shaped_constraints[0], ("M", "N"), floats=["ratio"]) for a in alone]
    lines = [f"    {{ cfg v = {{{c['tile']}, {c['ratio']!r}}}; const cfg *c = &v; long long M = {m}, N = {n}; "
             f"int tb_ok = 1, r[] = {{{', '.join(forms)}}}; for (int i = 0; i < {len(forms)}; ++i) "
             f"printf(\"%d\", tb_ok && r[i]); }}"
             for m, n in shapes for c in configs]
    (tmp_path / "fits.c").write_text("#include <stdio.h>\n" + C_HELPERS + "typedef struct { int tile; double ratio; } "
                                     "cfg;\nint main(void)\n{\n" + "\n".join(lines) + "\n    return 0;\n}\n")
    strict = ["-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wfloat-equal"]
    expected = "".join(str(int(a.holds_for(a.key(c), s, ("M", "N")))) for s in shapes for c in configs for a in alone)
    for compiler, language in (("gcc", ["-x", "c", "-std=c99"]),
                               ("g++", ["-x", "c++", "-std=c++11", "-Wold-style-cast", "-Wuseless-cast"])):
        done = subprocess.run([compiler, *language, *strict, str(tmp_path / "fits.c"), "-o", str(tmp_path / "fits")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        got = subprocess.run([tmp_path / "fits"], check=True, capture_output=True, text=True).stdout
        assert got == expected
    for i in range(len(FLOATING)):  # each constraint holds for some and fails for others
        assert {expected[j] for j in range(i, len(expected), len(FLOATING))} == {"0", "1"}, i
    shifted = Space(values, constraints=[lambda N, ratio: N >> ratio])  # Python raises: C did not compile
    with pytest.raises(NoCForm, match="`N >> ratio` has no C form"):
        c_form(shifted.shaped_constraints[0], ("N",), floats=["ratio"])


#: Shaped constraints where an integer beyond 2**53 (a dim, a param, a number) meets a float.
BEYOND_DOUBLES = [lambda N, tile: N <= 9007199254740992.0,
                  lambda N, ratio: N == ratio or ratio != N and N >= ratio,
                  lambda N, tile, ratio: ratio < tile < N * 1.0,
                  lambda N, ratio: 9007199254740993 > ratio * 1 >= N - 1]


def test_an_int_beyond_2_53_meets_a_float_in_c_as_in_python_exactly(tmp_path):
    """An int meeting a float was cast to a double in C, rounding 2**53 + 1 to 2**53, where Python
    compares them exactly: ``N <= 9007199254740992.0`` held for N = 2**53 + 1 in the header, and
    a config's ``tile`` of 2**53 + 1 failed ``ratio < tile`` for a ratio of 2.0**53."""
    values = {"tile": [1, 2**53 + 1, 2**62 + 1], "ratio": [0.5, 2.0**53, 2.0**63, -2.0**63]}
    alone = [Space(values, constraints=[fn]) for fn in BEYOND_DOUBLES]
    shapes = [(n,) for n in (1, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 2, 2**62 + 1, 2**63 - 1, -2**63 + 1)]
    configs = [dict(zip(values, k)) for k in itertools.product(*values.values())]
    forms = [c_form(a.shaped_constraints[0], ("N",), floats=["ratio"]) for a in alone]
    lines = [f"    {{ cfg v = {{{c['tile']}LL, {c['ratio']!r}}}; const cfg *c = &v; long long N = {n}LL; "
             f"int tb_ok = 1, r[] = {{{', '.join(forms)}}}; for (int i = 0; i < {len(forms)}; ++i) "
             f"printf(\"%d\", tb_ok && r[i]); }}" for (n,) in shapes for c in configs]
    (tmp_path / "fits.c").write_text("#include <stdio.h>\n" + C_HELPERS + "typedef struct { long long tile; double "
                                     "ratio; } cfg;\nint main(void)\n{\n" + "\n".join(lines) + "\n    return 0;\n}\n")
    expected = "".join(str(int(a.holds_for(a.key(c), s, ("N",)))) for s in shapes for c in configs for a in alone)
    strict = ["-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wfloat-equal", "-Wshadow"]
    for compiler, language in (("gcc", ["-x", "c", "-std=c99"]),
                               ("g++", ["-x", "c++", "-std=c++11", "-Wold-style-cast", "-Wuseless-cast"])):
        done = subprocess.run([compiler, *language, *strict, str(tmp_path / "fits.c"), "-o", str(tmp_path / "fits")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert subprocess.run([tmp_path / "fits"], check=True, capture_output=True, text=True).stdout == expected
    for i in range(len(BEYOND_DOUBLES)):  # each constraint holds for some and fails for others
        assert {expected[j] for j in range(i, len(expected), len(BEYOND_DOUBLES))} == {"0", "1"}, i
    # a param whose ints beyond 2**53 sit among floats has no C type that holds both: its kernel is left out
    data = exported_layouts("row")
    data["kernels"]["k"]["float32"]["buckets"][0]["ranked"] = [{"layout": "row", "tile": 2**53 + 1}]
    data["kernels"]["k"]["float32"]["buckets"][0]["heuristic"] = {"layout": "row", "tile": 0.5}
    with pytest.warns(export.ExportNote, match=r"k float32: left out of the header: kernel 'k': param 'tile' has "
                                               r"the int 9007199254740993 among floats, which a C double would round"):
        assert "tb_k_float32(" not in export.header(data)


#: A module's number a constraint reads: in Python the global, never the dim of the same name.
B = 4


def test_a_c_form_reads_a_modules_number_not_a_dim_of_its_name_negative_indices_and_no_int_overflow(tmp_path):
    """The header read ``B`` as the batch dim, ``shape[-1]`` had no C form, and ``tile * 2**30``
    overflowed C's int: each answered otherwise than best()."""
    constraints = [lambda N, tile: N % (tile * B) == 0,
                   lambda shape, tile: shape[-1] % tile == 0 and shape[-2] >= 1,
                   lambda N, tile: tile * 1024 * 1024 * 1024 <= N]
    space = Space({"tile": [1, 2, 8, 16]}, constraints=constraints)
    shapes = [(b, n) for b in (1, 3, 8) for n in (4, 8, 96, 2048, 16 * 2**30, 2**40)]
    test = " && ".join(c_form(c, ("B", "N")) for c in space.shaped_constraints)
    lines = [f"    {{ cfg v = {{{tile}}}, *c = &v; long long B = {b}, N = {n}LL; int tb_ok = 1, r = {test}; "
             f"printf(\"%d\", tb_ok && r); }}" for b, n in shapes for tile in (1, 2, 8, 16)]
    (tmp_path / "fits.c").write_text("#include <stdio.h>\n" + C_HELPERS + "typedef struct { int tile; } cfg;\n"
                                     "int main(void)\n{\n" + "\n".join(lines) + "\n    return 0;\n}\n")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", str(tmp_path / "fits.c"), "-o", str(tmp_path / "fits")],
                   check=True)
    got = subprocess.run([tmp_path / "fits"], check=True, capture_output=True, text=True).stdout
    expected = "".join(str(int(space.holds_for((space.key({"tile": tile})), s, ("B", "N"))))
                       for s in shapes for tile in (1, 2, 8, 16))
    assert got == expected and "1" in got and "0" in got


#: numpy's scalars, as a suite computes its numbers: the header wrote ``np.float64(0.75)``.
SCALE, WIDTH, LIMIT = np.float64(0.75), np.int64(64), float("inf")


def test_numpy_numbers_powers_and_two_lambdas_on_a_line_have_the_c_form_python_computes(tmp_path):
    """The header held ``np.float64(0.75)`` and gcc refused it while the export succeeded;
    ``2**40`` had no C form; two constraints of the same arguments on one line left the
    kernel's every tuned config out of the header."""
    constraints = [lambda N, tile: N * SCALE >= tile * 2 ** -1, lambda N, tile: N * tile < 2**40 - WIDTH,
                   lambda N, tile: N % tile != 5, lambda N, tile: tile <= N + -3 ** 2]  # noqa: E731
    space = Space({"tile": [1, 2, 8, 16]}, constraints=constraints)
    forms = [c_form(c, ("N",)) for c in space.shaped_constraints]
    assert "np." not in " ".join(forms) and "0.75" in forms[0] and str(2**40) in forms[1] and "-9LL" in forms[3]
    assert forms[2] != forms[3]  # each lambda of the line its own
    shapes = [(n,) for n in (1, 2, 7, 13, 21, 2**28, 2**36)]
    lines = [f'    {{ cfg v = {{{tile}}}, *c = &v; long long N = {n}LL; int tb_ok = 1, r = {" && ".join(forms)}; '
             f'printf("%d", tb_ok && r); }}' for (n,) in shapes for tile in (1, 2, 8, 16)]
    (tmp_path / "fits.c").write_text("#include <stdio.h>\n" + C_HELPERS + "typedef struct { int tile; } cfg;\n"
                                     "int main(void)\n{\n" + "\n".join(lines) + "\n    return 0;\n}\n")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", str(tmp_path / "fits.c"), "-o", str(tmp_path / "fits")],
                   check=True)
    got = subprocess.run([tmp_path / "fits"], check=True, capture_output=True, text=True).stdout
    expected = "".join(str(int(space.holds_for(space.key({"tile": tile}), s, ("N",))))
                       for s in shapes for tile in (1, 2, 8, 16))
    assert got == expected and "1" in got and "0" in got
    beyond = Space({"tile": [1, 2]}, constraints=[lambda N, tile: N < LIMIT, lambda N, tile: N < 10 ** 100,
                                                 lambda N, tile: tile ** 2 <= N,
                                                 lambda N, tile: N < ((9 ** 64) ** 64) ** 64 ** 64])  # not computed
    for constraint, what in zip(beyond.shaped_constraints, ("LIMIT", "10 ** 100", "tile ** 2",
                                                            "((9 ** 64) ** 64) ** 64 ** 64")):
        with pytest.raises(NoCForm, match=f"`{re.escape(what)}` has no C form"):
            c_form(constraint, ("N",))


def divides(tile, N):
    """A documented constraint: its docstring is no statement of its C form."""
    return N % tile == 0


def two_steps(tile, N):
    rest = N % tile
    return rest == 0


def test_a_documented_function_has_a_c_form_and_one_of_two_statements_says_so():
    space = Space({"tile": [1, 2]}, constraints=[divides, two_steps])
    assert c_form(space.shaped_constraints[0], ("N",)) == "((tb_floormod((0LL + N), (0LL + c->tile), &tb_ok) == 0LL))"
    with pytest.raises(NoCForm, match="constraint two_steps at test_export.py:\\d+: a function of more than one"):
        c_form(space.shaped_constraints[1], ("N",))


def test_a_c_form_that_divides_by_zero_does_not_hold_where_python_raises_and_never_dies(tmp_path):
    """A framework's launch path died of SIGFPE on a shape best() answered with an error."""
    constraints = [lambda tile, N: tile <= 4096 // (N - 8),
                   lambda tile, N: N == 8 or 4096 % (N - 8) >= tile,
                   lambda tile, N: tile / (N - 8) < 1]
    space = Space({"tile": [1, 4]}, constraints=constraints)
    forms = [c_form(c, ("N",)) for c in space.shaped_constraints]
    cases = [(tile, n) for tile in (1, 4) for n in (8, 9, 16, 4200)]
    body = "\n".join(f'    {{ const struct {{ long tile; }} cfg = {{ {tile} }}, *c = &cfg; long N = {n}; '
                     f'int tb_ok = 1, r = {form}; printf("%d\\n", tb_ok && r); }}'
                     for tile, n in cases for form in forms)
    (tmp_path / "fits.c").write_text(f"#include <stdio.h>\n{C_HELPERS}int main(void)\n{{\n{body}\n    return 0;\n}}\n")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", str(tmp_path / "fits.c"), "-o", str(tmp_path / "fits")],
                   check=True)
    got = subprocess.run([tmp_path / "fits"], check=True, capture_output=True, text=True).stdout.split()

    def python(fn, tile, n):
        try:
            return str(int(bool(fn(tile=tile, N=n))))
        except ZeroDivisionError:
            return "0"
    assert got == [python(fn, tile, n) for tile, n in cases for fn in constraints]
    assert got.count("0") >= 3  # N == 8 divides by zero in two of them; the `or` never divides there


def test_the_header_serves_the_best_config_whose_shaped_constraint_holds_as_best_does(gemm, tmp_path):
    # the heuristic's tile 4 spins first: a tuned config wins whatever the noise, and is exported
    spinning = GEMM_C.replace("{\n    for (int i = 0;", "{\n#if tile == 4\n    for (volatile int spin = 0; "
                              "spin < 400000; ++spin) {}\n#endif\n    for (int i = 0;", 1)
    assert spinning != GEMM_C
    gemm.path.joinpath("gemm.c").write_text(spinning)
    # a float param its constraints mix with ints and compare with == and !=, as the header must build
    floating = GEMM_SUITE.replace('"skip_c": [0, 1]}', '"skip_c": [0, 1], "ratio": [0.5, 1.0]}').replace(
        '{"tile": 4, "skip_c": 0}', '{"tile": 4, "skip_c": 0, "ratio": 1.0}').replace(
        "constraints=[lambda N, tile: N % tile == 0]",
        "constraints=[lambda N, tile: N % tile == 0, lambda N, tile, ratio: N * ratio >= tile,\n"
        "                                         lambda N, tile, ratio: ratio * tile != N / 2 or N == 16]")
    assert floating.count("ratio") == 6
    gemm.path.joinpath("test_gemm.py").write_text(floating)
    gemm.runpytest("test_gemm.py", *TUNE, "--tune-strategy", "brute_force")
    out = tmp_path / "export"
    assert main(["export", "--out", str(out), "--records", str(gemm.path / "records"), "--suites", str(gemm.path)]) == 0
    sizes = range(0, 200)  # 0 lies outside both buckets, 64 and 65 at their edges
    calls = "\n".join(f'    {{ tb_gemm_float32_config c = tb_gemm_float32({n}); printf("%d %d %.17g\\n", c.tuned, '
                      f'c.tile, c.ratio); }}' for n in sizes)
    (tmp_path / "main.c").write_text(f'#include <stdio.h>\n#include "tunebench_configs.h"\nint main(void)\n{{\n'
                                     f'{calls}\n    return 0;\n}}\n')
    strict = ["-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wfloat-equal"]
    for compiler, language in (("gcc", ["-x", "c", "-std=c99"]),
                               ("g++", ["-x", "c++", "-std=c++11", "-Wold-style-cast", "-Wuseless-cast"])):
        done = subprocess.run([compiler, *language, *strict, f"-I{out}", str(tmp_path / "main.c"),
                               "-o", str(tmp_path / "main"), "-lm"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        answers = subprocess.run([tmp_path / "main"], check=True, capture_output=True, text=True).stdout.splitlines()
        tuned = set()
        for n, line in zip(sizes, answers):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", tunebench.buckets.ShapeOutsideBuckets)
                choice = tunebench.lookup("gemm", (n,), records=gemm.path / "records", suites=gemm.path)
            got_tuned, tile, ratio = int(line.split()[0]), int(line.split()[1]), float(line.split()[2])
            assert (got_tuned, tile, ratio) == (choice.source == "tuned", choice.config["tile"],
                                                choice.config["ratio"]), n
            assert not got_tuned or n % tile == 0 and n * ratio >= tile and (ratio * tile != n / 2 or n == 16)
            tuned |= {(tile, ratio)} if got_tuned else set()
        assert tuned  # some shapes got a tuned config
    # records shipped without the suite: a tuned config is served unchecked, and it says so
    alone = tmp_path / "alone" / "records"
    shutil.copytree(gemm.path / "records", alone)
    asked = ("import sys, warnings, tunebench\nwarnings.simplefilter('error', tunebench.SuiteImportWarning)\n"
             "for n in (48, 50):\n    try:\n"
             "        print(n, tunebench.lookup('gemm', (n,), records=sys.argv[1]).source)\n"
             "    except tunebench.SuiteImportWarning as e:\n        print(n, e)\n")
    lines = subprocess.run([sys.executable, "-c", asked, str(alone)], cwd=alone, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert lines[0] == "48 tuned"  # a representative shape: its config was measured there
    assert lines[1] == (f"50 no declaration of gemm under {alone.parent / 'suites'}, and its constraints read the "
                        f"shape: the bucket's best is served unchecked on bucket 'small' for shapes other than its "
                        f"representative ones (lookup().note names each), which it may not fit; pass suites= "
                        f"(--suites)")


def test_an_export_of_the_same_records_is_the_same_bytes_wherever_and_whenever_it_is_made(tmp_path, capsys):
    root = Path(__file__).resolve().parent.parent
    device = "cpu-amd-epyc-f26m2-2t-506d4e"  # the committed records: nothing is tuned here
    for out in ("a", "b/c"):
        assert main(["export", "--out", str(tmp_path / out), "--device", device, "--records", str(root / "records"),
                     "--suites", str(root / "suites")]) == 0
    for name in ("tunebench_configs.json", "tunebench_configs.h"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / "c" / name).read_bytes()
    head = (tmp_path / "a" / "tunebench_configs.h").read_text().splitlines()[1]
    digest = hashlib.sha256((root / "records" / f"{device}.json").read_bytes()).hexdigest()[:12]
    assert head == f" * From records/{device}.json (sha256 {digest}). Do not edit: run `tunebench export` again."
    assert "warning" not in capsys.readouterr().err


def test_an_export_with_no_kernel_or_no_records_for_the_device_says_so(tmp_path, capsys):
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "records").mkdir()
    assert main(["export", "--out", str(tmp_path / "x"), "--records", str(tmp_path / "records")]) == 2
    assert f"no kernel under {tmp_path / 'suites'} has a" in capsys.readouterr().err
    assert main(["export", "--out", str(tmp_path / "x"), "--device", "cpu-other-2t-000000", "--records",
                 str(tmp_path / "records"), "--suites", str(root / "suites")]) == 0
    assert ("warning: nothing is recorded for device cpu-other-2t-000000 (records/cpu-other-2t-000000.json): every "
            "bucket exports the heuristic") in capsys.readouterr().err


def test_an_export_that_leaves_out_recorded_kernels_no_suite_declares_names_them(tmp_path, capsys):
    """A user's own kernel beside the shipped ones, exported without --suites, was left out
    without a word while best() answered it from the same records."""
    root = Path(__file__).resolve().parent.parent
    device = "cpu-amd-epyc-f26m2-2t-506d4e"  # the committed records
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_matmul_add.py").write_text((root / "suites" / "test_matmul_add.py").read_text()
                                                            .replace('"kernels/', f'"{root}/kernels/'))
    assert main(["export", "--out", str(tmp_path / "x"), "--device", device, "--records", str(root / "records"),
                 "--suites", str(tmp_path / "suites")]) == 0
    assert list(json.loads((tmp_path / "x" / "tunebench_configs.json").read_text())["kernels"]) == ["matmul_add"]
    assert (f"warning: {root / 'records' / device}.json holds layernorm, row_reduce, softmax, which no suite under "
            f"{tmp_path / 'suites'} declares for its target: left out (where a suite elsewhere declares it, pass "
            f"--suites; one renamed or removed since it was tuned has only its old records)") in capsys.readouterr().err


def test_the_headers_of_two_devices_go_into_one_program_under_their_prefixes(tmp_path):
    root = Path(__file__).resolve().parent.parent
    for device, prefix in (("cpu-amd-epyc-f26m2-2t-506d4e", "zen5"), ("cpu-amd-epyc-2t-b42c66", "epyc")):
        assert main(["export", "--out", str(tmp_path), "--device", device, "--prefix", prefix, "--records",
                     str(root / "records"), "--suites", str(root / "suites")]) == 0
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "tunebench_configs_zen5.h"\n#include "tunebench_configs_epyc.h"\n'
        "int main(void)\n{\n    zen5_layernorm_float32_config a = zen5_layernorm_float32(300, 8192);\n"
        "    epyc_layernorm_float32_config b = epyc_layernorm_float32(300, 8192);\n"
        '    printf("%d %d %d\\n", a.tuned, a.vec, b.vec);\n    return 0;\n}\n')
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-o", str(tmp_path / "main"), str(tmp_path / "main.c"),
                    "-lm"], check=True)
    tuned, vec, _ = map(int, subprocess.run([str(tmp_path / "main")], capture_output=True, text=True,
                                            check=True).stdout.split())
    expected = tunebench.lookup("layernorm", (300, 8192), "cpu-amd-epyc-f26m2-2t-506d4e", records=root / "records")
    assert (tuned, vec) == (expected.source == "tuned", expected.config["vec"])
    assert main(["export", "--out", str(tmp_path), "--prefix", "h100-sxm"]) == 2



def test_two_devices_headers_under_one_prefix_in_one_program_are_an_error_not_the_first_devices_configs(tmp_path):
    """Both exported without --prefix, the second device's header was skipped whole by the first's
    include guard: a program compiled and served the first device's configs for both."""
    root = Path(__file__).resolve().parent.parent
    for device in ("cpu-amd-epyc-f26m2-2t-506d4e", "cpu-amd-epyc-2t-b42c66"):
        assert main(["export", "--out", str(tmp_path / device), "--device", device, "--records",
                     str(root / "records"), "--suites", str(root / "suites")]) == 0
    (tmp_path / "main.c").write_text(
        '#include "cpu-amd-epyc-f26m2-2t-506d4e/tunebench_configs.h"\n'
        '#include "cpu-amd-epyc-f26m2-2t-506d4e/tunebench_configs.h"\n'  # the same device's again: one
        '#include "cpu-amd-epyc-2t-b42c66/tunebench_configs.h"\nint main(void) { return 0; }\n')
    for compiler in ("gcc", "g++"):
        done = subprocess.run([compiler, "-fsyntax-only", f"-I{tmp_path}", "-x", "c" if compiler == "gcc" else "c++",
                               str(tmp_path / "main.c")], capture_output=True, text=True)
        assert done.returncode != 0
        errors = [line for line in done.stderr.splitlines() if ": error:" in line]
        assert len(errors) == 1 and ("the header of device cpu-amd-epyc-2t-b42c66, and the header of another "
                                     "device is included already under the prefix tb: export each device with its "
                                     "own --prefix") in errors[0], done.stderr


def test_the_header_builds_under_a_frameworks_strictest_warnings(tmp_path):
    """-Wconversion (each dim read as a double) and -Wfloat-equal (a division's zero test) failed
    a framework's -Werror build at the header, with no constraint of its own in it; -Wshadow
    failed it after a global named as a helper's argument (``a``, ``b``, ``v``)."""
    root = Path(__file__).resolve().parent.parent
    for device, prefix in (("cpu-amd-epyc-f26m2-2t-506d4e", "zen5"), ("cuda-nvidia-h200-sm90-132sm-00b1c7", "h200")):
        assert main(["export", "--out", str(tmp_path), "--device", device, "--prefix", prefix, "--records",
                     str(root / "records"), "--suites", str(root / "suites")]) == 0
    (tmp_path / "main.c").write_text("double a, b, q, r, t, v; int ok;\n"  # the program's globals, ahead of the header
                                     '#include "tunebench_configs_zen5.h"\n#include "tunebench_configs_h200.h"\n'
                                     "int main(void) { return zen5_layernorm_float32(300, 8192).vec "
                                     "+ h200_softmax_float16(3, 4).vec; }\n")
    strict = ["-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wfloat-equal", "-Wshadow", "-Wundef", "-Wcast-qual"]
    for compiler, language in (("gcc", ["-x", "c", "-std=c99", "-Wstrict-prototypes"]),
                               ("g++", ["-x", "c++", "-std=c++11", "-Wold-style-cast", "-Wuseless-cast"])):
        done = subprocess.run([compiler, *language, *strict, "-fsyntax-only", str(tmp_path / "main.c")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

def test_a_kernel_whose_space_collection_refuses_is_an_export_error_naming_it(tmp_path, capsys):
    """Its constraint raised and pytest refused the suite, while the export wrote its heuristic unsaid."""
    (tmp_path / "records").mkdir()
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_bad.py").write_text(
        "import numpy as np\n"
        "from tunebench import Bucket, Buckets, Kernel, Space, Variant\n"
        "bad = Kernel('bad_space', buckets=Buckets('N', [Bucket('all', N=(1, None), shapes=[(8,)])]),\n"
        "             args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=['y'],\n"
        "             cpu=Variant(source='none.c', entry='k', heuristic=lambda shape: {'tile': 1},\n"
        "                         space=Space({'tile': [0, 1]}, constraints=[lambda tile: 4 % tile == 0])))\n")
    assert main(["export", "--out", str(tmp_path / "x"), "--records", str(tmp_path / "records"),
                 "--device", "cpu-test"]) == 2
    err = capsys.readouterr().err
    assert "kernel 'bad_space' (" in err and "test_bad.py): " in err and "ZeroDivisionError" in err
    assert not (tmp_path / "x").exists()


def test_an_export_for_a_device_that_is_no_device_id_says_so_and_names_the_recorded_ones(tmp_path, capsys):
    """It said "no kernel under suites has a nosuch variant", reading the typo as a target."""
    root = Path(__file__).resolve().parent.parent
    assert main(["export", "--device", "nosuch", "--out", str(tmp_path), "--records", str(root / "records"),
                 "--suites", str(root / "suites")]) == 2
    assert ("device 'nosuch': not a device id, which names its target first (cpu-..., cuda-..., replay-...)"
            in capsys.readouterr().err)


def test_an_export_for_this_machine_with_no_records_of_its_own_names_the_others_as_no_typo(tmp_path, capsys,
                                                                                             monkeypatch):
    """No --device: this machine's id, which is no typo of another CPU's records to correct."""
    from tunebench.lookup import this_device

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "records").mkdir()
    monkeypatch.delenv("TUNEBENCH_DEVICE", raising=False)
    here = this_device()
    other = here[:-1] + ("0" if here[-1] != "0" else "1")  # the closest another's id can be
    shutil.copy(root / "records" / "cpu-amd-epyc-f26m2-2t-506d4e.json", tmp_path / "records" / f"{other}.json")
    assert main(["export", "--out", str(tmp_path / "x"), "--records", str(tmp_path / "records"), "--suites",
                 str(root / "suites")]) == 0
    err = capsys.readouterr().err
    assert "did you mean" not in err
    assert (f"warning: nothing is recorded for device {here} (records/{here}.json, this machine): every bucket "
            f"exports the heuristic; --device exports another's: {other}") in err
    assert "the heuristic is served" not in err  # a framework's warning, once per kernel: said here once in all


def test_an_export_of_configs_tuned_with_an_earlier_template_says_so_as_best_does(exported):
    """best() noted it; the export said nothing, its JSON "tuned" and its header without a word."""
    root, out = exported
    (root / "twice.c").write_text((root / "twice.c").read_text() + "/* edited since */\n")
    done = subprocess.run([sys.executable, "-m", "tunebench.cli", "export", "--out", str(out), "--records",
                           str(root / "records"), "--suites", str(root / "suites")], capture_output=True, text=True)
    err = done.stderr  # a fresh process, which reads the template anew
    assert done.returncode == 0 and re.search(r"warning: twice float32 \(small\): tuned with an earlier twice.c, or a header it includes", err), err


def test_an_export_of_a_bucket_no_final_round_confirmed_says_why_it_carries_the_heuristic(exported):
    """A tune stopped before its final round (interrupted, a busy machine): best() said why the
    trials' fastest is not served; the export carried the heuristic without a word."""
    root, out = exported
    (file,) = (root / "records").glob("*.json")
    with TinyDB(file) as db:
        db.drop_table("checks")  # the final round's: as if the tune had stopped before it
    done = subprocess.run([sys.executable, "-m", "tunebench.cli", "export", "--out", str(out), "--records",
                           str(root / "records"), "--suites", str(root / "suites")], capture_output=True, text=True)
    assert done.returncode == 0 and re.search(  # a fresh process: the records as they are now
        r"warning: twice float32 \(small\): no final round confirmed a pick on this bucket \(its tune ended before "
        r"one.*\), so the trials' fastest \[reps:1 pad:[01]\].* is not served", done.stderr), done.stderr  # pad: unread
    (entry,) = json.loads((out / "tunebench_configs.json").read_text())["kernels"]["twice"].values()
    assert [b["source"] for b in entry["buckets"]] == ["heuristic", "heuristic"]


def test_an_export_written_into_the_records_folder_is_no_device_there(tmp_path):
    """`tunebench export --out records` left tunebench_configs.json beside the records: lookups
    named it among the devices recorded, and the warm start and the report could not read it; once
    a formatter had sorted its keys (``python -m json.tool --sort-keys``), it was listed unreadable."""
    from tunebench.lookup import check_known
    from tunebench.records import stores

    root = Path(__file__).resolve().parent.parent
    records = tmp_path / "records"
    shutil.copytree(root / "records", records, ignore=shutil.ignore_patterns(".*"))
    device = "cpu-amd-epyc-f26m2-2t-506d4e"
    before = tunebench.lookup("layernorm", (300, 8192), device, records=records, suites=root / "suites")
    assert main(["export", "--out", str(records), "--device", device, "--records", str(records),
                 "--suites", str(root / "suites")]) == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        choice = tunebench.lookup("layernorm", (300, 8192), "cpu-exported-2t-000000", records=records,
                                  suites=root / "suites")
    said = [choice.note, *(str(w.message) for w in caught)]
    assert len(said) == 3 and all("cpu-amd-epyc-2t-b42c66" in s and "tunebench_configs" not in s for s in said), said
    unread = []
    assert sorted(s.device for s in stores(records, unread)) == sorted(p.stem for p in (root / "records").glob("*.json"))
    assert unread == []
    sorted_export = tmp_path / "sorted.json"
    subprocess.run([sys.executable, "-m", "json.tool", "--sort-keys", str(records / "tunebench_configs.json"),
                    str(sorted_export)], check=True)
    assert not sorted_export.read_text().lstrip("{ \n").startswith('"generated_by"')
    shutil.move(sorted_export, records / "tunebench_configs.json")
    assert sorted(s.device for s in stores(records, unread)) == sorted(p.stem for p in (root / "records").glob("*.json"))
    assert unread == []
    with pytest.raises(LookupError) as raised:
        check_known("layer_norm", records=records, suites=root / "suites")
    assert "no records to read" not in str(raised.value)
    with pytest.raises(tunebench.records.RecordsError, match=r"tunebench_configs.json: the configs of `tunebench "
                       r"\S+ export`, not records of a device$"):
        tunebench.lookup("layernorm", (300, 8192), str(records / "tunebench_configs.json"), records=records)
    # what is recorded is served as before
    after = tunebench.lookup("layernorm", (300, 8192), device, records=records, suites=root / "suites")
    assert (after.source, after.config) == (before.source, before.config)


def test_an_export_of_text_beyond_ascii_is_the_same_utf8_whatever_the_locale(twice_beyond_ascii, tmp_path):
    """Under an ASCII locale (LC_ALL=C, PYTHONUTF8=0) the export failed reading the suite for its
    constraint's C form ("'ascii' codec can't decode byte 0xc2"), then writing a bucket's name
    into the header; under a Latin-1 one it wrote that name in Latin-1 into a UTF-8 header."""
    root = twice_beyond_ascii
    (root / "records").mkdir()
    made = {}
    for name, env in (("utf-8", {**ascii_locale(), "PYTHONUTF8": "1"}), ("ascii", ascii_locale())):
        ran = subprocess.run([sys.executable, "-m", "tunebench.cli", "export", "--out", str(tmp_path / name),
                              "--records", str(root / "records"), "--suites", str(root / "suites")],
                             env=env, capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        made[name] = {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()}
    assert made["ascii"] == made["utf-8"]
    header = made["ascii"]["tunebench_configs.h"].decode("utf-8")
    assert "/* klein_µ */" in header and "(0LL + N) >= (0LL + tb_c->reps)" in header
