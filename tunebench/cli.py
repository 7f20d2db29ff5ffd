"""The ``tunebench`` command: a thin layer over the library, one subcommand per job."""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from tunebench.buckets import BucketError, ShapeOutsideBuckets
from tunebench.lookup import lookup
from tunebench.records import RecordsError
from tunebench.summary import config_text


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a shape such as 2,4096, got {text!r}") from None
    if not shape or any(v < 0 for v in shape):
        raise argparse.ArgumentTypeError(f"expected a shape such as 2,4096, got {text!r}")
    return shape


def cmd_best(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShapeOutsideBuckets)
        choice = lookup(args.kernel, args.shape, args.device, dtype=args.dtype,
                        records=args.records, suites=args.suites)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    if args.json:
        print(json.dumps({"kernel": choice.kernel, "shape": list(choice.shape), "dtype": choice.dtype,
                          "config": choice.config, "source": choice.source, "bucket": choice.bucket,
                          "inside": choice.inside, "device": choice.device,
                          "objective_ms": choice.objective_ms, "baseline_ms": choice.baseline_ms}))
        return 0
    where = "inside" if choice.inside else "outside every bucket; nearest"
    print(f"{choice.kernel} {choice.dtype} shape {','.join(map(str, choice.shape))}: "
          f"bucket {choice.bucket} ({where}), device {choice.device}")
    print(f"  {config_text(choice.config)}")
    if choice.source == "tuned":
        speed = f", {choice.speedup:.2f}x the heuristic's" if choice.speedup else ""
        print(f"  tuned: {choice.objective_ms:.4g} ms on the bucket{speed}")
    else:
        print("  the heuristic: " + ("it beat every recorded config on this bucket"
                                     if choice.baseline_ms else "nothing is recorded for this bucket"))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunebench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("best", help="print the best config for a shape (else the heuristic)")
    b.add_argument("kernel")
    b.add_argument("--shape", type=_shape, required=True, help="the shape's dims, e.g. 2,4096")
    b.add_argument("--dtype", default="float32")
    b.add_argument("--records", default="records", help="record store directory (default: records)")
    b.add_argument("--suites", default="suites",
                   help="where the kernel is declared, for its buckets and heuristic (default: suites)")
    b.add_argument("--device", default=None,
                   help="device id (a records file name); default: this machine's")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(run=cmd_best)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (LookupError, RecordsError, BucketError, ValueError) as e:
        print(f"tunebench {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
