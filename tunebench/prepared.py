"""A shape's arguments and reference outputs, kept on disk for the fresh workers of one run.

The final round and the gate measure in fresh processes, and each built a shape's random
inputs and float64 reference again: for one GPU shape of 134 million elements about 2 s on an
H200's host and 10 s on a 2-core VM (softmax 4096 x 32768), in each of a round's 6 to 16
processes. A worker that took :data:`SLOW_S` or more to build a shape leaves them here, and the
next one reads them back: the same values, since the args builder is seeded by kernel and shape
(a fresh process of a 2048 x 32768 softmax comparison on the VM took 5.7 s instead of 8.7). Only the run's own workers read the folder, and the run removes it: a
declaration changed between runs is never served from an older one. Arguments given as one
array for two (an in-place call) are not kept: two files would be two arrays.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tunebench.dtypes import numpy_dtype

#: A shape whose arguments and reference took this long to build is kept for the next worker.
SLOW_S = 1.0
#: The files kept, the oldest removed first: a bucket's shapes, taken in turn.
KEPT = 4
PREFIX = "tunebench-inputs-"


def _path(folder: Path, kernel: str, shape: tuple, dtype: str) -> Path:
    key = hashlib.sha256(repr((kernel, tuple(shape), dtype)).encode()).hexdigest()[:20]
    return folder / f"{key}.npz"


def keep(folder: Path, kernel: str, shape: tuple, dtype: str, args: dict[str, Any], reference: list) -> None:
    """Keep them, unless two arguments share an array or an array's dtype is not one its name
    gives back (a structured one, another byte order, objects); written whole or not at all, and
    a full disk only costs the next worker the build. numpy saves ml_dtypes' floats (bfloat16) as
    raw bytes: the dtypes' names are kept beside them."""
    arrays = [v for v in args.values() if isinstance(v, np.ndarray)]
    if any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:]):
        return
    items = {**{f"a{i}": np.asarray(v) for i, v in enumerate(args.values())},
             **{f"r{i}": np.asarray(v) for i, v in enumerate(reference)}}
    if not all(_named(v.dtype) for v in items.values()):
        return
    path = _path(folder, kernel, shape, dtype)
    partial = path.with_suffix(f".{os.getpid()}.part")
    try:
        with open(partial, "wb") as f:
            np.savez(f, names=np.array(list(args)), dtypes=np.array([v.dtype.name for v in items.values()]),
                     scalars=np.array([isinstance(v, np.generic) for v in args.values()]), **items)
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
        return
    for old in sorted(folder.glob("*.npz"), key=lambda p: p.stat().st_mtime)[:-KEPT]:
        old.unlink(missing_ok=True)


def _named(dtype: np.dtype) -> bool:
    try:
        return not dtype.hasobject and numpy_dtype(dtype.name) == dtype
    except (TypeError, ValueError):
        return False


def kept(folder: Path, kernel: str, shape: tuple, dtype: str) -> tuple[dict[str, Any], list] | None:
    """What :func:`keep` kept for this shape, as the args builder and reference gave them; None
    where nothing was."""
    try:
        found = np.load(_path(folder, kernel, shape, dtype))
    except OSError:
        return None
    with found:
        dtypes = [numpy_dtype(d) for d in found["dtypes"]]
        values = [found[f"a{i}"] for i in range(len(found["names"]))]
        values = [v.view(d) if v.dtype != d else v for v, d in zip(values, dtypes)]
        args = {str(n): v[()] if scalar else v for n, v, scalar in zip(found["names"], values, found["scalars"])}
        reference = [found[f"r{i}"] for i in range(len(dtypes) - len(args))]
        reference = [v.view(d) if v.dtype != d else v for v, d in zip(reference, dtypes[len(args):])]
    return args, reference


def folder() -> Path:
    """A fresh folder of this run's, in the temp folder; those of runs that ended without removing
    theirs (killed) are removed first."""
    for old in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        pid = old.name[len(PREFIX):].split("-")[0]
        with contextlib.suppress(OSError, ValueError):
            if old.stat().st_uid == os.getuid() and not _running(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True
