"""A shape's arguments and reference outputs, kept on disk for the fresh workers of one run.

The final round and the gate measure in fresh processes, and each built a shape's random
inputs and float64 reference again, in each of a round's 6 to 16 processes: for softmax's
4096 x 32768, 10 s on a 2-core VM (on an H200's host, the first trial of such a shape, which
builds them, cost 3 to 9 s against 1 s for the next). A worker that took :data:`SLOW_S` or more
to build a shape leaves them here, and the next one reads them back: the same values, since the
args builder is seeded by kernel and shape (a fresh process of a 2048 x 32768 softmax
comparison on the VM took 5.7 s instead of 8.7). A config's reference outputs kept apart from
its shape's arguments (where only the reference takes the config) are served only on the very
arguments they were computed on (see :func:`keep`). Only the run's own workers read the folder,
and the run removes it: a declaration changed between runs is never served from an older one.
What would not come back as the builder gave it is not kept (see :func:`keep`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from tunebench.dtypes import as_bits, numpy_dtype

#: A shape whose arguments and reference took this long to build is kept for the next worker.
SLOW_S = 1.0
#: The share of the temp folder's free space the kept shapes may take, the least recently used
#: removed first (a GPU shape's file is up to 2 GB).
DISK_SHARE = 0.25
PREFIX = "tunebench-inputs-"


def _path(folder: Path, kernel: str, shape: tuple, dtype: str, config: tuple | None) -> Path:
    key = hashlib.sha256(repr((kernel, tuple(shape), dtype, *([config] if config is not None else []))).encode()
                         ).hexdigest()[:20]
    return folder / f"{key}.npz"


def keep(folder: Path, kernel: str, shape: tuple, dtype: str, args: dict[str, Any], reference: list,
         blank: tuple[str, ...] = (), config: tuple | None = None, on: str | None = None,
         built_s: float = 0.0) -> str | None:
    """Keep them, unless they would not come back as given: two arguments sharing an array, an
    array not in C order or read-only, a dtype its name does not give back (a structured one,
    another byte order, objects). ``blank``: the outputs whose values no call reads (not inout),
    kept as their shape. Written whole or not at all; a full disk only costs the next worker the
    build. ml_dtypes' floats are kept as their bits (numpy cannot read float8_e5m2 back).
    ``config``: the config's key, where the args builder takes it, or where ``args`` is empty:
    a config's reference outputs alone, where only the reference takes the config (its shape's
    arguments are kept once, under no config), computed ``on`` the kept arguments of that id.
    Returns the file's id, None where nothing was kept: a new one for arguments, ``on`` for
    outputs alone, served only on the arguments of their id (an args builder that tunebench
    does not seed, or arguments that :func:`_room` removed, give others when built again).
    ``built_s``: the seconds the arguments took to build, given back with them: a worker reading
    them back weighs a config's reference with them as the one that built them did."""
    arrays = [v for v in args.values() if isinstance(v, np.ndarray)]
    if any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:]) or not all(
            a.flags.c_contiguous and a.flags.writeable for a in arrays):
        return None
    values = [np.asarray(v) for v in (*args.values(), *reference)]
    if not all(_named(v.dtype) for v in values):
        return None
    on = on if not args else uuid.uuid4().hex
    shapes = {f"s{i}": np.array(v.shape, np.int64) for i, (n, v) in enumerate(args.items()) if n in blank}
    items = {f"a{i}": as_bits(np.empty(0, v.dtype) if f"s{i}" in shapes else v) for i, v in enumerate(values[:len(args)])}
    items.update({f"r{i}": as_bits(v) for i, v in enumerate(values[len(args):])})
    path = _path(folder, kernel, shape, dtype, config)
    partial = path.with_suffix(f".{os.getpid()}.part")
    try:
        if not _room(folder, sum(v.nbytes for v in items.values())):
            return None
        with open(partial, "wb") as f:
            np.savez(f, names=np.array(list(args)), dtypes=np.array([v.dtype.name for v in values]),
                     scalars=np.array([isinstance(v, np.generic) for v in args.values()]), on=np.array(on or ""),
                     built_s=np.array(float(built_s)),
                     **items, **shapes)
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
        return None
    if not args:  # a config's outputs alone: its arguments' file, which no worker reads again, ages with it
        _used(_path(folder, kernel, shape, dtype, None))
    return on


def _used(path: Path) -> None:
    """Mark a kept file used now: the last that :func:`_room` removes."""
    try:
        os.utime(path)
    except FileNotFoundError:
        pass


def _room(folder: Path, size: int) -> bool:
    """Whether a file of ``size`` bytes fits this run's share of the temp folder's disk, the least
    recently used kept files removed to make it fit. The run's share: its folders together (one a
    device on a cluster's host), so that the compilers, which write there too, never run out."""
    run = folder.name.rpartition("-")[0]
    folders = folder.parent.glob(f"{run}-*") if run else [folder]
    files = sorted((f for d in folders for f in d.glob("*.npz")), key=lambda f: f.stat().st_mtime)
    sizes = [f.stat().st_size for f in files]
    room = DISK_SHARE * (shutil.disk_usage(folder).free + sum(sizes))
    if size > room:
        return False
    while files and sum(sizes) + size > room:
        files.pop(0).unlink(missing_ok=True)
        sizes.pop(0)
    return True


def _named(dtype: np.dtype) -> bool:
    try:
        return not dtype.hasobject and numpy_dtype(dtype.name) == dtype
    except (TypeError, ValueError):
        return False


def kept(folder: Path, kernel: str, shape: tuple, dtype: str, config: tuple | None = None,
         on: str | None = None) -> tuple[dict[str, Any], list, str, float] | None:
    """What :func:`keep` kept for this shape, as the args builder and reference gave them, its id
    and the seconds the arguments took to build (see :func:`keep`); None where nothing was, or where it cannot be read (then it is
    built again). ``on``: for a config's outputs alone, the id of the arguments they are to be
    served on: kept on others, they are neither read nor marked used (the clean-up removes them
    first); served, their arguments' file is marked used with them."""
    path = _path(folder, kernel, shape, dtype, config)
    try:
        with np.load(path) as found:
            if on is not None and str(found["on"]) != on:
                return None
            dtypes = [numpy_dtype(d) for d in found["dtypes"]]
            count = len(found["names"])
            values = [found[f"a{i}"] if f"s{i}" not in found else np.empty(tuple(found[f"s{i}"]), dtypes[i])
                      for i in range(count)]
            values += [found[f"r{i}"] for i in range(len(dtypes) - count)]
            values = [v.view(d) if v.dtype != d else v for v, d in zip(values, dtypes)]
            args = {str(n): v[()] if scalar else v for n, v, scalar in zip(found["names"], values, found["scalars"])}
            kept_as, built_s = str(found["on"]), float(found["built_s"])
        _used(path)
        if on is not None:  # a config's outputs alone: their arguments' file too
            _used(_path(folder, kernel, shape, dtype, None))
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a file that cannot be read back is no input: the shape is built again
        path.unlink(missing_ok=True)
        return None
    return args, values[count:], kept_as, built_s

