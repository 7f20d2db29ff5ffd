"""Folders a process owns in the temp folder: a run's inputs kept for its next workers
(:mod:`tunebench.prepared`), a cluster device's copy of the project (:mod:`tunebench.cluster`),
compile-check's builds and nvcc's files (:func:`tunebench.backends.cache.scratch`). Each is named
by its process and host, and a process that ended without removing its own (killed, as a CI job's
timeout kills) leaves it to the next one made with that prefix, which removes it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path

from tunebench.records import alive


def folder(prefix: str, parent: Path | None = None) -> Path:
    """A fresh folder of this process's, ``prefix<pid>-<host>-...`` in ``parent`` (the temp
    folder); those of this host's processes that ended without removing theirs (killed) are
    removed first (the compile cache, on a disk hosts share, holds other hosts' folders: their
    pids say nothing here; one named before hosts were, ``prefix<pid>-...``, is taken for this
    host's)."""
    parent, host = Path(parent or tempfile.gettempdir()), socket.gethostname()
    for old in parent.glob(f"{prefix}*"):
        pid, _, rest = old.name[len(prefix):].partition("-")
        with contextlib.suppress(OSError, ValueError):
            if rest.rpartition("-")[0] in (host, "") and old.stat().st_uid == os.getuid() and not alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-{host}-", dir=parent))
