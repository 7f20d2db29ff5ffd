"""Racy stamps: when a file's stat may stand for what it holds.

A cache of what a file holds is kept while the file's stat (inode, size, modification time) is
the same. But the kernel sets file times from a clock that moves in ticks (1-4 ms; 1 s on HFS+
and ext3, 2 s on FAT, the server's on a network filesystem), so a second write of the same size
within the tick of the first, in place (``cp`` over the file, an editor's save), leaves the stat
as it was, and the cache serves what the file held before: git's "racy" index entries. As git
does, a stat is trusted only where the file had been left unchanged for :data:`RACY_S` when its
reading began; any later write then gets a later time. A racy one is checked again next time.
"""

from __future__ import annotations

import os
import time

#: Seconds a file must have been left unchanged, when its reading began, for its stat to stand
#: for what was read: the coarsest file times in use (FAT's 2 s).
RACY_S = 2.0


def racy(st: os.stat_result, since: int | None = None) -> bool:
    """Whether a file stat'ed as ``st`` changed less than :data:`RACY_S` before its content was
    read, or after: a write of the same size may have followed within the same tick, unseen.
    ``since``: the :func:`time.time_ns` taken as its reading began, where that was before this
    stat; else now (the stat taken first). Its ctime is read, not its mtime: the kernel sets it at
    every change, and no tool sets it back (``cp -p``, ``rsync -t`` and ``touch -d`` set the mtime,
    a future one too)."""
    return (time.time_ns() if since is None else since) - st.st_ctime_ns < RACY_S * 1e9
