"""Host memory for CPU kernel arguments: where each buffer sits in its page, and the traps
around it.

Placement. A vectorised kernel's speed depends on where its streams sit (rows straddling cache
lines, loads and stores that alias modulo 4 KiB, cache sets), and where malloc puts an array
depends on the process's history. So buffers are placed explicitly, on small pages, by a named
:data:`PLACEMENTS` rule: ``staggered`` (each buffer at its own cache-line offset, no two streams
aliasing: the harness's repeatable best case) and ``malloc`` (every buffer 16 bytes past a page
boundary, as glibc hands out the large blocks numpy and most framework allocators get: every
stream aliases every other modulo 4 KiB). A pick that wins only in the first is no pick for a
caller, so trials are measured under both.

Traps. Every buffer is an anonymous mapping between two large inaccessible (PROT_NONE) ranges,
reserved address space that costs no memory: a write that runs megabytes past an output
faults at once instead of landing in the worker's own data (where it could even corrupt the
reference and pass). Inputs are made read-only once filled, so a kernel that writes into an
input it did not declare in-place faults too (the worker then verifies it again with the inputs
writable, which names the input: see :mod:`tunebench.workers`).
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np

PAGE = mmap.PAGESIZE
#: Inaccessible bytes reserved before and after every buffer (address space only).
TRAP_BYTES = 256 << 20
STAGGER = 5 * 64  # cache-line aligned, and a different offset in the page for each of 12 buffers
#: Placement name -> page offset of the buffer with that index (see the module docstring).
PLACEMENTS = {
    "staggered": lambda index: (index * STAGGER) % PAGE,
    "malloc": lambda index: 16,
}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_PROT_NONE = 0
_MAP_NORESERVE = 0x4000
_MADV_NOHUGEPAGE = 15
_FAILED = ctypes.c_void_p(-1).value


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what} failed")


class Region:
    """``nbytes`` of memory starting ``offset`` bytes past a page boundary, between traps."""

    def __init__(self, nbytes: int, offset: int):
        self._inner = -(-(offset + max(nbytes, 1)) // PAGE) * PAGE
        self._total = TRAP_BYTES + self._inner + TRAP_BYTES
        base = _libc.mmap(None, self._total, _PROT_NONE,
                          mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
        if base in (None, _FAILED):
            raise OSError(ctypes.get_errno(), f"reserving {self._total} bytes failed")
        self._base = base
        self._start = base + TRAP_BYTES
        self.protect(writable=True)
        _libc.madvise(self._start, self._inner, _MADV_NOHUGEPAGE)  # best effort: THP varies by run
        self._offset, self._nbytes = offset, nbytes

    @property
    def offset(self) -> int:
        return self._offset

    def array(self) -> np.ndarray:
        """The region's bytes; numpy keeps the view and the view the mapping, so the array is
        never left dangling."""
        return self._view(self._offset, self._nbytes)

    def pages(self) -> np.ndarray:
        """Every accessible byte of the region, its pages whole: the slack before and after its
        bytes is writable too, and only a guard there tells a write into it."""
        return self._view(0, self._inner)

    def _view(self, start: int, nbytes: int) -> np.ndarray:
        view = (ctypes.c_uint8 * nbytes).from_address(self._start + start)
        view.region = self
        return np.frombuffer(view, np.uint8)

    def protect(self, writable: bool) -> None:
        """Readable, and writable or not."""
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        _check(_libc.mprotect(self._start, self._inner, prot), "mprotect")

    def __del__(self):
        if getattr(self, "_base", None):
            _libc.munmap(self._base, self._total)
            self._base = None


def placed(nbytes: int, index: int, placement: str) -> tuple[Region, np.ndarray]:
    """A trapped region for buffer ``index`` under a placement rule, and its bytes as an array
    (which keeps the region alive)."""
    region = Region(nbytes, PLACEMENTS[placement](index))
    return region, region.array()
