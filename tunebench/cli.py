"""The ``tunebench`` command: a thin layer over the library, one subcommand per job."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import stat
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunebench import __version__, compile_check, export, records_merge
from tunebench.backends import cuda, launch
from tunebench.buckets import BucketError, ShapeOutsideBuckets
from tunebench.kernel import rootdir
from tunebench.lookup import (LegacyRecordsWarning, UnknownDeviceWarning, UntunedWarning, load_suites, lookup,
                              project)
from tunebench.records import RecordsError, config_text, records_files
from tunebench.strategies import DEFAULT as DEFAULT_STRATEGY
from tunebench.strategies import get as get_strategy
from tunebench.strategies import options as strategy_options


def positive(kind, zero: bool = False):
    """An argparse type: a positive ``kind`` (int or float), or 0 too where ``zero``, for the
    command line and the plugin."""
    what = f"{'non-negative' if zero else 'positive'} {kind.__name__}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if not 0 <= value < math.inf or (value == 0 and not zero):  # nan, inf: a timeout that never fires
            raise argparse.ArgumentTypeError(f"expected a {what}, got {text!r}")
        return value
    parse.__name__ = what
    return parse


def readable_file(text: str) -> str:
    """An argparse type: a file this process can read, named where it is a folder, not there,
    no plain file (a FIFO's open waits for a writer) or unreadable (a records file's folder
    given to merge-records printed a traceback)."""
    try:
        mode = os.stat(text).st_mode
        if stat.S_ISDIR(mode):
            raise argparse.ArgumentTypeError(f"{text}: a folder, not a file")
        if not stat.S_ISREG(mode):
            raise argparse.ArgumentTypeError(f"{text}: not a plain file")
        Path(text).open("rb").close()
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text}: no such file") from None
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{text}: cannot be read ({e.strerror})") from None
    return text


def out_folder(text: str) -> str:
    """An argparse type: a folder to write into, made where it is not there, refused where it or
    the nearest of its parents that is there is a file, or a link to nothing (a traceback, from
    the writing)."""
    try:
        there = next((p for p in (Path(text), *Path(text).parents) if _lexists(p)), None)
        if there is not None and not there.is_dir():
            what = "a link to nothing" if there.is_symlink() and not there.exists() else "a file"
            raise argparse.ArgumentTypeError(f"{text}: {there} is {what}, not a folder" if there != Path(text) else
                                             f"{text} is {what}, not a folder")
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{text}: {e.strerror}") from None
    return text


def _lexists(path: Path) -> bool:
    """Whether a path is there, a link to nothing too; an error but its absence raised (a name
    too long: os.path.lexists reads that as absent, and the writing failed with a traceback)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # ours.json/report: its parent is the file said
        return False
    return True


def _shape(text: str) -> tuple[int, ...]:
    """A shape's dims from ``2,4096`` (or ``2x4096``); an error names the dim at fault, where it
    said only that the whole text was no shape."""
    dims = text.replace("x", ",").split(",")
    for dim in dims:
        try:
            value = int(dim)
        except ValueError:
            raise argparse.ArgumentTypeError(f"dim {dim!r} of {text!r} is not an integer: a shape's dims are "
                                             f"integers of 0 or more, such as 2,4096") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"dim {value} of {text!r} is below 0: a shape's dims are integers of 0 "
                                             f"or more, such as 2,4096")
    return tuple(map(int, dims))


@contextlib.contextmanager
def _warnings_said() -> Iterator[list]:
    """The library's warnings as the command's own lines (``warning: ...``, each once), also where
    the command then fails: a misspelt device's warning says what the error cannot."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)  # each of tunebench's, however often the same line asks
        for said_by_the_command in (UntunedWarning, LegacyRecordsWarning):  # a framework's word for its notes
            warnings.simplefilter("ignore", said_by_the_command)
        warnings.simplefilter("ignore", ShapeOutsideBuckets)  # best says it of the shape asked, in its own words
        try:
            yield caught
        finally:
            for message in dict.fromkeys(str(w.message) for w in caught):
                print(f"warning: {message}", file=sys.stderr)


def cmd_best(args: argparse.Namespace) -> int:
    with _warnings_said():
        choice = lookup(args.kernel, args.shape, args.device, dtype=args.dtype,
                        records=args.records, suites=args.suites)
    for said in choice.warnings:
        print(f"warning: kernel {choice.kernel!r}: {said}", file=sys.stderr)
    if args.json:
        print(json.dumps({"kernel": choice.kernel, "shape": list(choice.shape), "dtype": choice.dtype,
                          "config": choice.config, "source": choice.source, "bucket": choice.bucket,
                          "inside": choice.inside, "device": choice.device, "note": choice.note,
                          "reason": choice.reason, "objective_ms": choice.objective_ms, "baseline_ms": choice.baseline_ms}))
        return 0
    where = "inside" if choice.inside else "outside every bucket; nearest"
    print(f"{choice.kernel} {choice.dtype} shape {','.join(map(str, choice.shape))}: "
          f"bucket {choice.bucket} ({where}), device {choice.device}")
    print(f"  {config_text(choice.config)}")
    if choice.note:
        print(f"  note: {choice.note}")
    if choice.source == "tuned":
        speed = f", {choice.speedup:.2f}x the heuristic's" if choice.speedup else ""
        print(f"  tuned: {choice.objective_ms:.4g} ms on the bucket{speed}")
    else:
        print(f"  the heuristic: {choice.reason}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with _warnings_said() as caught:
        paths = export.write(Path(args.out), args.device, args.records, args.suites, args.prefix)
    for path in paths:
        print(path)
    data = json.loads(paths[0].read_text(encoding="utf-8"))
    if data["records_sha256"] is None and not any(w.category is UnknownDeviceWarning for w in caught):
        others = [p.stem for p in records_files(project(args.records, args.suites)[0]) if p.stem != data["device"]]
        print(f"warning: nothing is recorded for device {data['device']} ({data['records']}"
              f"{', this machine' if args.device is None else ''}): every bucket exports the heuristic"
              + (f"; --device exports another's: {', '.join(others)}" if others else ""), file=sys.stderr)
    missing = export.left_out(data, args.records, args.suites)
    if missing:
        print(f"warning: {missing}", file=sys.stderr)
    for kernel, by_dtype in data["kernels"].items():
        for dtype, entry in by_dtype.items():
            if entry["unchecked"]:
                print(f"warning: {kernel} {dtype}: no tuned config in the header: {entry['unchecked']}",
                      file=sys.stderr)
    return 0


def grouped(failures: list[tuple[str, str]]) -> list[str]:
    """One line per distinct failure, with where it happened first and how often: a template
    error fails every config and architecture alike."""
    by_what: dict[str, list[str]] = {}
    for where, what in failures:
        by_what.setdefault(what, []).append(where)
    return [f"{wheres[0]}{f' and {len(wheres) - 1} more' if len(wheres) > 1 else ''}: {what}"
            for what, wheres in by_what.items()]


def cmd_compile_check(args: argparse.Namespace) -> int:
    """The target asked for (cuda where architectures are), else every target a suite declares a
    variant for, in turn; the worst exit status. A suite that fails to import fails the check
    alone, as a kernel at fault does: the others are checked."""
    if args.suites is not None and not Path(args.suites).exists():
        print(f"tunebench compile-check: --suites {args.suites}: no such folder or file", file=sys.stderr)
        return 2
    if args.suites is not None and Path(args.suites).is_file() and Path(args.suites).suffix != ".py":
        print(f"tunebench compile-check: --suites {args.suites}: not a suite (a test_*.py file) nor a folder of "
              f"them", file=sys.stderr)  # imported, it failed with "'NoneType' object has no attribute 'loader'"
        return 2
    try:  # the project's, from a subfolder too, as best finds it; it needs no records folder
        args.suites = project(None, args.suites)[1]
    except LookupError:
        args.suites = args.suites or Path("suites")
    broken: list[str] = []
    kernels = load_suites(args.suites, broken)
    for failure in broken:
        print(f"FAILED to import: {failure}")
    if broken and not kernels:
        return 1
    targets = [args.target or "cuda"] if args.target or args.arch else [
        t for t in ("cpu", "cuda") if any(k.variant(t) for k in kernels)]
    if not targets:
        print(f"tunebench compile-check: no kernel under {args.suites} has a cpu or cuda variant", file=sys.stderr)
        return 2
    status = max(_compile_check(args, kernels, target) for target in targets)
    if broken:
        print(f"compile-check: {len(broken)} suite{'s' if len(broken) > 1 else ''} failed to import (above)")
    return max(status, 1 if broken else 0)


def _compile_check(args: argparse.Namespace, kernels: list, target: str) -> int:
    checked = [k for k in kernels if k.variant(target)]
    try:
        archs = list(dict.fromkeys(args.arch or compile_check.ARCHS))  # each once, as asked
        unsupported = [p for p in map(cuda.arch_problem, archs) if p] if target == "cuda" else []
        if unsupported:
            print(f"tunebench compile-check: {unsupported[0]}", file=sys.stderr)
            return 2
        if target == "cpu" and args.arch:
            print("tunebench compile-check: --arch is a CUDA architecture; the cpu target builds for this host",
                  file=sys.stderr)
            return 2
        if not checked:
            print(f"tunebench compile-check: no kernel under {args.suites} has a {target} variant",
                  file=sys.stderr)
            return 2
        for arch in archs if target == "cuda" else ():
            if launch.shared_kib(arch) is None:
                print(f"note: the shared memory a block of {arch} may have is not known to this tunebench: "
                      f"launches are checked for it without that limit")
        where = " ".join(archs) if target == "cuda" else "host"
        width = max(len(k.name) for k in checked)
        failed = []
        for r in compile_check.check(checked, target, archs=archs, sample=args.sample, seed=args.seed):
            _print_check(r, target, where, width)
            failed += [] if r.ok else [r.kernel]
    except FileNotFoundError as e:
        print(f"tunebench compile-check: {e}", file=sys.stderr)
        return 2
    print(f"compile-check {target}: {len(checked) - len(failed)} of {len(checked)} kernels ok"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _print_check(r: compile_check.KernelCheck, target: str, where: str, width: int) -> None:
    """One kernel's check, as soon as it is made: into a pipe (a CI log) too, where a run killed
    later would otherwise take it with it."""
    failed = ([f"{len(r.failures)} of {r.builds} builds"] if r.builds  # else its declaration, or its compiler
              else list(dict.fromkeys(f"its {part}" for part, _ in r.failures))) if r.failures else []
    failed += [f"{r.failed_launches} of {r.launches} launches" if r.launches
               else "its launch" if target == "cuda" else "its entry point"] if r.launch_failures else []
    failed += sorted({f"its {what.split()[-1]}" for what, _ in r.reference_failures})  # arguments, reference
    launches = f", {r.launches} launches" if r.launches else ""
    print(f"{r.kernel:<{width}}  {target}  {','.join(r.dtypes)}  {' '.join(r.built_for) or where}  "
          f"{r.configs} configs, {r.builds} builds{launches}  {'FAILED ' + ', '.join(failed) if failed else 'ok'}  "
          f"({r.seconds:.1f} s)")
    for failure in (*grouped(r.failures), *grouped(r.launch_failures), *grouped(r.reference_failures)):
        print("    " + failure.replace("\n", "\n    "))
    for note in grouped(r.pruned):
        print(f"    pruned where tuned: {note}")
    for note in r.strays:
        print(f"    the heuristic's config is outside the space: {note}")
    for note in r.unbuilt:
        print(f"    not built for {note}")
    for note in r.untyped:
        print(f"    C types unchecked: {note}")
    sys.stdout.flush()


def gate_threshold(records: Path) -> float:
    """The gate threshold of the records' project, read as the gate reads it (its ini file, pytest's
    defaults): --compare flagged a lead that moved beyond 10% where the project's gate fails at 50%."""
    from _pytest.config import get_config

    from tunebench.items import gate_ini  # the gate's own reading of its ini options

    root = str(rootdir(records.resolve()) or records.resolve().parent)
    config = get_config()  # no conftest, no assertion rewriting: only the ini file is wanted
    config.parse(["--noconftest", "--assert=plain", "-p", "no:cacheprovider", "--rootdir", root, root], addopts=False)
    return gate_ini(config)["threshold"]


def cmd_report(args: argparse.Namespace) -> int:
    try:
        records, suites = project(args.records, args.suites)  # the project's, from a subfolder too, as best finds it
        if args.suites is not None and not Path(args.suites).exists():  # a typo only adds notes: said instead
            raise FileNotFoundError(f"--suites {args.suites}: no such folder or file")
        from tunebench import report  # matplotlib's import: only where a report is made
        threshold = gate_threshold(records) if args.compare else report.FLAGGED
        written, unreadable, unfolded, damaged = report.write(records, Path(args.out), compare=args.compare,
                                                              suites=suites, threshold=threshold)
    except (FileNotFoundError, pytest.UsageError) as e:
        print(f"tunebench report: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    for note in unfolded:  # a reviewer reading the terminal alone learns it too
        print(f"tunebench report: {note}", file=sys.stderr)
    for why in damaged:  # reported without the line, which still stops best(): the run fails too
        print(f"tunebench report: {why}", file=sys.stderr)
    for why in unreadable:  # the others are reported; the run fails, as a file that cannot be read is lost work
        print(f"tunebench report: not reported: {why}", file=sys.stderr)
    return 1 if unreadable or damaged else 0


def cmd_replay(args: argparse.Namespace) -> int:
    from tunebench.replay import Replay, convergence, simulate  # the measuring machinery: only to replay
    get_strategy(args.strategy)  # an unknown name fails before the file is read
    options = strategy_options(args.strategy, args.strategy_option, "--strategy-option")  # and a bad setting
    select = {k: getattr(args, k) for k in ("kernel", "dtype", "bucket") if getattr(args, k) is not None}
    with _warnings_said():  # each seed's too: a file written just now is read again by each (see tunebench.stamps)
        replay = Replay(args.file)
        recording = replay.recording(**select)
        if args.noise and all(len(r.samples) <= 1 for shapes in recording.runs.values() for r in shapes.values()):
            print(f"tunebench replay: {args.file} records one run per config (no 'times'): --noise has no "
                  f"runs to draw from, and measures each config at its recorded time", file=sys.stderr)
        traces = [simulate(args.file, args.strategy, args.budget, seed, options=options, noise=args.noise, **select)
                  for seed in range(args.seeds)]
    summary = convergence(traces, args.budget)
    if args.json:
        print(json.dumps({
            "file": str(args.file), "device": replay.fingerprint["name"], "kernel": recording.kernel,
            "dtype": recording.dtype, "bucket": recording.bucket.name, "candidates": len(recording.candidates),
            "optimum_ms": recording.optimum, "strategy": args.strategy, "strategy_options": options,
            "budget": args.budget,
            "seeds": args.seeds, "noise": args.noise, "runs": [{"seed": seed, "fractions": [round(f, 6) for f in trace]}
                                          for seed, trace in enumerate(traces)],
            "summary": summary}))
        return 0
    print(f"{args.file}: {recording.label()} on {replay.fingerprint['name']}, "
          f"{len(recording.candidates)} candidates, optimum {recording.optimum:.4g} ms")
    evaluated = "on samples drawn from the recorded runs" if args.noise else "at their recorded objective"
    settings = "".join(f" {n}={v}" for n, v in options.items())
    print(f"strategy {args.strategy}{settings}, budget {args.budget} trials, seeds 0..{args.seeds - 1}, "
          f"configs {evaluated}")
    for seed, trace in enumerate(traces):
        print(f"seed {seed}: {trace[-1] if trace else 0.0:.3f} of the optimum after {len(trace)} trials")
    at = ", ".join(f"{f:.3f} after {b} trials" for b, f in summary["fraction_at"].items())
    print(f"median fraction of the optimum: {at}")
    for target, t in summary["trials_to"].items():
        median = "not reached by the median seed" if t["median"] is None else f"median {t['median']:g} trials"
        print(f"to {target} of the optimum: {median} ({t['reached']} of {args.seeds} seeds reached it)")
    return 0


def cmd_merge_records(args: argparse.Namespace) -> int:
    for note in records_merge.merge_into(Path(args.base), Path(args.ours), Path(args.theirs), args.path):
        print(f"tunebench merge-records: {note}", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunebench", description=__doc__)
    p.add_argument("--version", action="version", version=f"tunebench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("best", help="print the best config for a shape (else the heuristic)")
    b.add_argument("kernel")
    b.add_argument("--shape", type=_shape, required=True, help="the shape's dims, e.g. 2,4096")
    b.add_argument("--dtype", default=None,
                   help="default: the dtype the kernel is tuned in on the device (float32 where several are)")
    b.add_argument("--records", default=None,
                   help="record store directory (default: records/ under the project root: $TUNEBENCH_ROOT, "
                        "else the nearest folder upwards with an ini file and records/)")
    b.add_argument("--suites", default=None,
                   help="where the kernel is declared, for its buckets and heuristic (default: suites/ under "
                        "the project root; beside the folder --records gives, where it is given)")
    b.add_argument("--device", default=None,
                   help="device id (a records file name); default: this machine's")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(run=cmd_best)

    e = sub.add_parser("export", help="write the best configs for a device as JSON and as a C/C++ header")
    e.add_argument("--out", type=out_folder, default="export", help="where to write (default: export)")
    e.add_argument("--device", default=None, help="device id (a records file name); default: this machine's")
    e.add_argument("--records", default=None, help="record store directory (default: records/ under the project root)")
    e.add_argument("--suites", default=None, help="where the suites are (default: suites/ under the project root; "
                                                  "beside the folder --records gives, where it is given)")
    e.add_argument("--prefix", default="tb", help="names the header's functions <prefix>_<kernel>_<dtype>: another "
                                                  "per device, for one program that includes several (default: tb)")
    e.set_defaults(run=cmd_export)

    c = sub.add_parser("compile-check", help="compile every kernel's heuristic and a sample of "
                                             "candidates for a target (no device needed)")
    c.add_argument("--target", choices=("cuda", "cpu"), default=None,
                   help="the one target to check (default: cuda where --arch is given, else every target a "
                        "suite declares a variant for)")
    c.add_argument("--suites", default=None, help="where the suites are (default: suites/ under the project root)")
    c.add_argument("--arch", action="append", metavar="SM",
                   help=f"CUDA architecture, repeatable (default: {' '.join(compile_check.ARCHS)})")
    c.add_argument("--sample", type=positive(int, zero=True), default=6, metavar="N",
                   help="constraint-valid candidates per kernel besides the heuristic (default: 6)")
    c.add_argument("--seed", type=int, default=0, help="seed of the candidates sampled (default: 0)")
    c.set_defaults(run=cmd_compile_check)

    r = sub.add_parser("report", help="write report.md, report.html and PNG plots from the records")
    r.add_argument("--records", help="record store directory (default: the project's records/)")
    r.add_argument("--suites", default=None, help="where the suites are, for what best() serves and says (default: "
                                                  "suites/ under the project root; beside the folder --records "
                                                  "gives, where it is given)")
    r.add_argument("--out", type=out_folder, default="report", help="where to write (default: report)")
    r.add_argument("--compare", metavar="REV", help="also show what changed since this git revision")
    r.set_defaults(run=cmd_report)

    m = sub.add_parser("merge-records", help="git's merge driver for records files: the union of both sides' "
                                             "trials (see tunebench/records_merge.py to install it)")
    m.add_argument("base", type=readable_file, help="the common ancestor's file (%%O)")
    m.add_argument("ours", type=readable_file, help="our file, replaced by the merge (%%A)")
    m.add_argument("theirs", type=readable_file, help="their file (%%B)")
    m.add_argument("path", nargs="?", help="the file merged, as the repository names it (%%P), for messages")
    m.set_defaults(run=cmd_merge_records)

    rp = sub.add_parser("replay", help="run a strategy on a recorded tuning space (a Kernel Tuner cache "
                                       "or a tunebench records file) over several seeds")
    rp.add_argument("file", help="a Kernel Tuner cache file or a tunebench records file")
    rp.add_argument("--strategy", default=DEFAULT_STRATEGY, help=f"search strategy (default: {DEFAULT_STRATEGY})")
    rp.add_argument("--budget", type=positive(int), default=200, metavar="N", help="trials per seed (default: 200)")
    rp.add_argument("--seeds", type=positive(int), default=25, metavar="K", help="seeds 0..K-1 (default: 25)")
    rp.add_argument("--strategy-option", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting of the strategy, as --tune-strategy-option takes it; repeat for several")
    rp.add_argument("--kernel", help="a records file's task: its kernel")
    rp.add_argument("--dtype", help="a records file's task: its dtype")
    rp.add_argument("--bucket", help="a records file's task: its bucket")
    rp.add_argument("--noise", action="store_true",
                    help="evaluate each config on samples drawn from its recorded runs, as a tune on the replay "
                         "target does, instead of at its recorded objective (Kernel Tuner's simulation mode)")
    rp.add_argument("--json", action="store_true", help="print one JSON object, every seed's trace included")
    rp.set_defaults(run=cmd_replay)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):  # a name the locale's codec cannot hold (klein_µ under LC_ALL=C), escaped
        sys.stdout.reconfigure(errors="backslashreplace")  # as Python's stderr writes it, not the command's error
    try:
        return args.run(args)
    except (LookupError, RecordsError, BucketError, ValueError, ImportError) as e:  # ExportError is a ValueError
        print(f"tunebench {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tunebench best ... | head` closed its end: no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor at exit, flushing
        return 141


if __name__ == "__main__":
    sys.exit(main())
