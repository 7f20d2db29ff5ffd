"""Exports of the best configs for code that cannot import tunebench: a JSON file and a C/C++
header, for one device.

Per kernel and dtype, every bucket (its ranges over the dims) with its best config, as
:func:`tunebench.lookup.lookup` answers for the bucket's shapes: ``"source": "tuned"`` where a
tuned config won the bucket, ``"heuristic"`` where the heuristic stayed or nothing is recorded.
The heuristic is the framework's own rule and cannot be exported as code: there the header says
``tuned = 0`` and carries the heuristic's config at the bucket's first representative shape as
a hint, for the caller to apply its rule instead.

The header has one ``static inline`` dispatch function per kernel and dtype,
``tb_<kernel>_<dtype>(dims...)``: the bucket holding the shape, else the nearest one (the
distance ``best()`` uses: octaves outside the ranges, summed over dims), and its config, a
struct with a field per param named as the param (a macro of a param's or a dim's name, as a
file that builds the kernel with ``-DBLOCK=256`` has, is set aside while the header is read and
restored after it; such a file reads a field with its getter, ``tb_<kernel>_<dtype>_get_<param>``,
as ``config.BLOCK`` would read its macro). Where
constraints read the shape, a bucket carries its configs in the order ``best()`` serves them
(:attr:`~tunebench.lookup.Choice.ranked`) and ``tb_<kernel>_<dtype>_fits`` checks them in C
(:mod:`tunebench.c_constraint`): the first that holds is the answer, else the heuristic, as
``best()`` answers. A constraint with no C form exports no tuned config for its kernel.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from pathlib import Path

from tunebench import __version__
from tunebench.backends import TARGETS
from tunebench.c_constraint import C_HELPERS, OK, NoCForm, c_form
from tunebench.device import describe
from tunebench.lookup import check_suites, load_suites, lookup, project, recorded_target, this_device
from tunebench.records import RecordStore, records_files
from tunebench.space import SpaceError


class ExportError(ValueError):
    """What cannot be exported; the message names the kernel and param."""


class ExportNote(UserWarning):
    """What a lookup notes of a bucket's exported answer (configs tuned with an earlier template,
    a dtype not declared): the export's files hold the answer, this says what it rests on."""


def collect(device: str | None = None, records: str | Path | None = None, suites: str | Path | None = None) -> dict:
    """The JSON export's content (see the module docstring)."""
    check_suites(suites)
    records_dir, suites_dir = project(records, suites)
    asked, device = device, device or this_device()  # a device not named is no typo to correct
    path = records_dir / f"{device}.json"
    store = RecordStore(path) if path.exists() else None
    fingerprint = (store.fingerprint if store else None) or {}
    target = recorded_target(fingerprint, store.tasks if store else list, device)
    targets = [t for t in (*TARGETS, "replay") if t != "auto"]
    if target not in targets:  # a typo, read as a target: "no kernel has a nosuch variant"
        recorded = [p.stem for p in records_files(records_dir)]
        raise ExportError(f"device {device!r}: not a device id, which names its target first "
                          f"({', '.join(f'{t}-...' for t in targets)}), and {records_dir} holds no records of it; "
                          f"it holds {', '.join(recorded) or 'none'}")
    kernels = {}
    for kernel in sorted(load_suites(suites_dir), key=lambda k: k.name):
        variant = kernel.variant(target)
        if variant is None:
            continue
        buckets = kernel.buckets_for(target)
        try:  # a space collection refuses exports nothing: its constraints cannot be applied either
            variant.space.check_dims(buckets.dims)
            variant.space.validate(buckets, buckets.dims)
        except SpaceError as e:
            raise ExportError(f"kernel {kernel.name!r} ({kernel.declared_in}): {e}") from None
        for dtype in variant.dtypes:
            entries = []
            fits, unchecked = _fits(variant.space, buckets.dims)
            notes: dict[str, list[str]] = {}  # what best() notes of a bucket's answer (an earlier template's, an
            # unconfirmed pick's: a stopped tune's trials found a faster config, and the heuristic is carried)
            for bucket in buckets:
                shape = bucket.shapes[0]
                choice = lookup(kernel, shape, asked, dtype=dtype, records=records_dir, suites=suites_dir)
                for note in filter(None, (choice.note, choice.unconfirmed)):
                    notes.setdefault(note, []).append(bucket.name)
                ranked = [] if unchecked else choice.ranked if variant.space.shaped else choice.ranked[:1]
                entries.append({"name": bucket.name, "ranges": {d: list(r) for d, r in bucket.ranges.items()},
                                "weight": bucket.weight, "source": choice.source,
                                "config": choice.config if choice.source == "tuned" else variant.baseline(shape, dtype),
                                "ranked": ranked, "heuristic": variant.baseline(shape, dtype),
                                "objective_ms": choice.objective_ms, "baseline_ms": choice.baseline_ms})
            for note, named in notes.items():  # said, not exported: the files stay the same bytes wherever made
                warnings.warn(f"{kernel.name} {dtype} ({', '.join(named)}): {note}", ExportNote, stacklevel=2)
            kernels.setdefault(kernel.name, {})[dtype] = {
                "target": target, "dims": list(buckets.dims), "params": list(variant.space.names),
                "shaped_constraints": variant.space.shaped, "fits": fits, "unchecked": unchecked,
                "buckets": entries}
    if not kernels:
        raise ExportError(f"no kernel under {suites_dir} has a {target} variant: nothing to export (pass suites=, "
                          f"--suites)")
    # what the export was made from, named so that the same records export byte for byte the same
    digest = None
    if store:  # the file, its archive and its journal: every trial the export was made from
        parts = [p for p in (path, store.archive, store.journal) if p.exists()]
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()[:12]
    return {"generated_by": f"tunebench {__version__} export", "device": device,
            "description": describe(fingerprint) if fingerprint else "nothing recorded for this device",
            "records": f"{records_dir.name}/{path.name}", "records_sha256": digest, "kernels": kernels}


def left_out(data: dict, records: str | Path | None = None, suites: str | Path | None = None) -> str | None:
    """Which kernels the device's records hold that the export left out, as no suite under the
    suites folder declares them (a kernel beside the shipped ones, exported without --suites)."""
    records_dir, suites_dir = project(records, suites)
    path = records_dir / f"{data['device']}.json"
    recorded = {t["kernel"] for t in RecordStore(path).tasks()} if path.exists() else set()
    missing = sorted(recorded - set(data["kernels"]))
    return (f"{path} holds {', '.join(missing)}, which no suite under {suites_dir} declares for its target: left "
            f"out (where a suite elsewhere declares it, pass --suites; one renamed or removed since it was tuned "
            f"has only its old records)") if missing else None


def _fits(space, dims) -> tuple[str, str | None]:
    """The C test of a config's shaped constraints (over ``tb_c->param`` and the dims), and why
    there is none: a constraint without a C form, whose bucket configs are then not exported."""
    floats = [n for n, values in space.values.items() if not all(isinstance(v, (bool, int)) for v in values)]
    try:
        return " && ".join(c_form(c, dims, "tb_c", floats) for c in space.shaped_constraints) or "1", None
    except NoCForm as e:
        return "0", str(e)


#: Names a field or an argument of the header cannot have: C's and C++'s keywords, the
#: alternative operator spellings, and the struct's own ``tuned``.
NOT_NAMES = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
    _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
    alignas alignof and and_eq asm bitand bitor bool catch char8_t char16_t char32_t class compl concept consteval
    constexpr constinit const_cast co_await co_return co_yield decltype delete dynamic_cast explicit export false
    friend mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    reinterpret_cast requires static_assert static_cast template this thread_local throw true try typeid typename
    using virtual wchar_t xor xor_eq tuned""".split())


def _names(kernel: str, entry: dict) -> None:
    """Refuse a param or dim the header would have to name as a keyword: it would not compile."""
    for kind, names in (("param", entry["params"]), ("dim", entry["dims"])):
        bad = next((n for n in names if n in NOT_NAMES), None)
        if bad:
            what = "the name of the header's own field" if bad == "tuned" else "a C or C++ keyword"
            raise ExportError(f"kernel {kernel!r}: {kind} {bad!r} is {what}, which the header cannot name a "
                              f"{'field' if kind == 'param' else 'function argument'}: rename the {kind}")


def _c_type(kernel: str, param: str, values) -> str:
    if all(isinstance(v, (bool, int)) for v in values) and all(-2**63 <= v < 2**63 for v in values):
        return "int" if all(-2**31 <= v < 2**31 for v in values) else "long long"  # 2**32 bytes held 0 in an int
    if all(isinstance(v, (bool, int)) for v in values):
        raise ExportError(f"kernel {kernel!r}: param {param!r} has values beyond 64 bits ({max(values, key=abs)}), "
                          f"which no C integer carries")
    if all(isinstance(v, (bool, int, float)) for v in values):
        rounded = next((v for v in values if isinstance(v, int) and _rounded(v)), None)
        if rounded is not None:  # the records, the constraints and best() hold it exactly
            raise ExportError(f"kernel {kernel!r}: param {param!r} has the int {rounded} among floats, which a C "
                              f"double would round: a header carries such a param's values as 64-bit ints alone")
        return "double"
    if all(isinstance(v, str) for v in values):
        return "const char *"  # the token a template is built with, as a string
    raise ExportError(f"kernel {kernel!r}: param {param!r} has values {sorted(map(repr, values))}, which a C "
                      f"header cannot carry (all ints of 64 bits and floats, or all strings)")


def _rounded(value: int) -> bool:
    """Whether a C double would not hold an int exactly (beyond 2**53, most)."""
    try:
        return float(value) != value
    except OverflowError:
        return True


def _bound(value: int | None, lower: bool = False) -> str:
    """A bucket's bound as a 64-bit literal: an upper one beyond 64 bits is none (-1) for a 64-bit
    dim, a lower one the largest (no such dim lies above it)."""
    if value is not None and value >= 2**63:
        return "9223372036854775807LL" if lower else "-1"
    return "-1" if value is None else f"{value}LL"


def _c_value(value, c_type: str) -> str:
    if c_type in ("int", "long long"):
        return f"{int(value)}{'LL' if c_type == 'long long' else ''}"
    if c_type == "double":
        value = float(value)
        if math.isfinite(value):
            return repr(value)
        return "NAN" if math.isnan(value) else "INFINITY" if value > 0 else "-INFINITY"  # math.h's: repr()'s inf is none
    # the text's UTF-8 bytes, each but printable ASCII in octal: JSON's \u0001 and surrogate pairs are
    # no C escapes, and C99 reads ??= as a trigraph
    return '"' + "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\?' else f"\\{b:03o}"
                         for b in value.encode()) + '"'


def header(data: dict, prefix: str = "tb") -> str:
    """The C/C++ header of an export's content; its functions and types are named
    ``<prefix>_<kernel>_<dtype>``, so that the headers of several devices (another ``prefix``
    each) go into one program, which picks by the GPU it runs on."""
    # the prefix's guard says its names are taken; the device's keeps one header included once
    guard = "TUNEBENCH_CONFIGS_H" if prefix == "tb" else f"TUNEBENCH_{prefix}_CONFIGS_H"
    own = f"{guard}_{re.sub(r'[^A-Za-z0-9]', '_', data['device'])}"
    made_from = f"sha256 {data['records_sha256']}" if data["records_sha256"] else "not there: nothing recorded"
    out = [f"/* {data['generated_by']} for device {data['device']}: {data['description']}.",
           f" * From {data['records']} ({made_from}). Do not edit: run `tunebench export` again.",
           f" * {prefix}_<kernel>_<dtype>(dims...) returns the config of the bucket holding the shape (else the",
           " * nearest): its best tuned config whose shaped constraints hold for the shape, as best() answers;",
           " * tuned == 0 where none does or the heuristic stayed: apply your own rule (the fields hold",
           " * the heuristic's config at the bucket's representative shape). */",
           f"#ifndef {own}", f"#define {own}", f"#ifdef {guard}",
           f'#error "the header of device {data["device"]}, and the header of another device is included already '
           f'under the prefix {prefix}: export each device with its own --prefix"', "#else", f"#define {guard}", "",
           "#include <math.h>", "",
           C_HELPERS]
    # the file that builds a kernel with its params as macros (-DBLOCK=256) may include this too
    names = sorted({n for by_dtype in data["kernels"].values() for entry in by_dtype.values()
                    for n in (*entry["params"], *entry["dims"])})
    out += [f'#pragma push_macro("{n}")\n#undef {n}' for n in names] + [""]
    for kernel, by_dtype in data["kernels"].items():
        for dtype, entry in by_dtype.items():
            name = re.sub(r"\W", "_", f"{prefix}_{kernel}_{dtype}")
            params, dims, buckets = entry["params"], entry["dims"], entry["buckets"]
            _names(kernel, entry)
            try:
                types = {p: _c_type(kernel, p, [c[p] for b in buckets for c in (*b["ranked"], b["heuristic"])])
                         for p in params}
            except ExportError as e:  # this kernel's configs alone: every other kernel's header stands
                warnings.warn(f"{kernel} {dtype}: left out of the header: {e}", ExportNote, stacklevel=2)
                out += [f"/* {name}: left out: {str(e).replace('*/', '* /')} */", ""]
                continue
            fields = " ".join(f"{types[p]}{'' if types[p].endswith('*') else ' '}{p};" for p in params)
            size = max(len(b["ranked"]) for b in buckets) + 1
            dim_args = ", ".join(f"long long {d}" for d in dims)
            if entry["unchecked"]:
                out.append(f"/* {name}: no tuned config exported, as none could be checked for a shape: "
                           f"{entry['unchecked']} */")
            out += [f"typedef struct {{ int tuned; {fields} }} {name}_config;", "",
                    f"static inline int {name}_fits(const {name}_config *tb_c, {dim_args})", "{",
                    "    (void)tb_c;" + "".join(f" (void){d};" for d in dims),
                    f"    int {OK} = 1, tb_holds = {entry['fits']};  /* {OK} 0: a division by zero */",
                    f"    return {OK} && tb_holds;", "}", ""]
            # a caller that has the param as a macro (-Dvec=8) cannot write config.vec: it calls the getter
            out += [f"static inline {types[p]} {name}_get_{p}({name}_config tb_c) {{ return tb_c.{p}; }}"
                    for p in params] + [""]
            out += [f"static inline {name}_config {name}({dim_args})", "{",
                    f"    static const struct {{ long long lo[{len(dims)}], hi[{len(dims)}]; int n; "
                    f"{name}_config configs[{size}]; }} tb_buckets[{len(buckets)}] = {{"]
            for b in buckets:
                lo = ", ".join(_bound(b["ranges"][d][0], lower=True) for d in dims)
                hi = ", ".join(_bound(b["ranges"][d][1]) for d in dims)
                configs = ", ".join("{" + ", ".join([str(tuned)] + [_c_value(c[p], types[p]) for p in params]) + "}"
                                    for tuned, c in [(1, c) for c in b["ranked"]] + [(0, b["heuristic"])])
                out.append(f"        {{{{{lo}}}, {{{hi}}}, {len(b['ranked'])}, {{{configs}}}}},  /* {b['name']} */")
            out += ["    };",  # every local is tb_-prefixed: a dim may be called i, b or shape
                    f"    const long long tb_shape[{len(dims)}] = {{{', '.join(dims)}}};",
                    "    int tb_best = -1;", "    double tb_nearest = INFINITY;",
                    # the first bucket holding the shape, in integers (doubles round above 2**53), as find()
                    f"    for (int tb_b = 0; tb_b < {len(buckets)} && tb_best < 0; ++tb_b) {{",
                    "        int tb_in = 1;",
                    f"        for (int tb_i = 0; tb_i < {len(dims)}; ++tb_i)",
                    "            if (tb_shape[tb_i] < tb_buckets[tb_b].lo[tb_i]",
                    "                || (tb_buckets[tb_b].hi[tb_i] >= 0 && tb_shape[tb_i] > tb_buckets[tb_b].hi[tb_i]))",
                    "                tb_in = 0;",
                    "        if (tb_in) tb_best = tb_b;", "    }",
                    # else the nearest, in octaves summed over dims, as Bucket.distance
                    "    if (tb_best < 0)",
                    f"    for (int tb_b = 0; tb_b < {len(buckets)}; ++tb_b) {{",
                    "        double tb_d = 0;",
                    f"        for (int tb_i = 0; tb_i < {len(dims)}; ++tb_i) {{",
                    "            double tb_v = tb_shape[tb_i] < 1 ? 1.0 : tb_real(tb_shape[tb_i]);",
                    "            double tb_lo = tb_real(tb_buckets[tb_b].lo[tb_i]), tb_hi = tb_real(tb_buckets[tb_b].hi[tb_i]);",
                    "            if (tb_v < tb_lo) tb_d += log2(tb_lo / tb_v);",
                    "            else if (tb_hi >= 0 && tb_v > tb_hi) tb_d += log2(tb_v / (tb_hi < 1 ? 1.0 : tb_hi));",
                    "        }", "        if (tb_d < tb_nearest) { tb_nearest = tb_d; tb_best = tb_b; }", "    }",
                    "    for (int tb_i = 0; tb_i < tb_buckets[tb_best].n; ++tb_i)",
                    f"        if ({name}_fits(&tb_buckets[tb_best].configs[tb_i], {', '.join(dims)}))",
                    "            return tb_buckets[tb_best].configs[tb_i];",
                    "    return tb_buckets[tb_best].configs[tb_buckets[tb_best].n];", "}", ""]
    out += [f'#pragma pop_macro("{n}")' for n in reversed(names)]
    out += [f"#endif /* {guard} */", f"#endif /* {own} */", ""]
    return "\n".join(out)


def write(out: Path, device: str | None = None, records: str | Path | None = None,
          suites: str | Path | None = None, prefix: str = "tb") -> list[Path]:
    """``tunebench_configs.json`` and ``tunebench_configs.h`` under ``out`` (``_<prefix>`` in
    their names where the prefix is not ``tb``: several devices' exports share a folder)."""
    if not re.fullmatch(r"[A-Za-z_]\w*", prefix):
        raise ExportError(f"prefix {prefix!r} is not a C identifier")
    data = collect(device, records, suites)
    out.mkdir(parents=True, exist_ok=True)
    stem = "tunebench_configs" if prefix == "tb" else f"tunebench_configs_{prefix}"
    paths = [out / f"{stem}.json", out / f"{stem}.h"]
    texts = [json.dumps(data, indent=1) + "\n", header(data, prefix)]  # both made before either is written
    for path, text in zip(paths, texts):
        path.write_text(text, encoding="utf-8")  # whatever the locale: a bucket's name is any text
    return paths
