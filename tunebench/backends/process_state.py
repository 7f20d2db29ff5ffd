"""The process-wide state one candidate may change and every later one in its worker would
inherit: the floating-point environment and the OpenMP runtime's settings.

A library built with ``-ffast-math`` sets flush-to-zero and denormals-are-zero as it loads,
and every kernel loaded after it computed denormals as zero (recorded as wrong results of
those kernels); a candidate calling ``omp_set_num_threads(1)`` made every later kernel of the
worker run, and be recorded, on one thread. Each runner therefore runs in the state its own
library's loading left, starting from the worker's: the floating-point environment after its
first load (a library's initialisers run once per process), and each OpenMP runtime's thread
count and dynamic adjustment as the runtime set them when it was first seen, before any call.
Applying it costs a few microseconds, outside every timed call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

#: The OpenMP runtimes a build may bring into the process: GCC's, LLVM's, Intel's.
OPENMP_RUNTIMES = ("libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so")
#: Room for a ``fenv_t`` (32 bytes on x86-64, 8 on AArch64).
FENV_BYTES = 64

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _fenv() -> ctypes.Array:
    env = ctypes.create_string_buffer(FENV_BYTES)
    _libm.fegetenv(env)
    return env


class _OpenMP:
    """One OpenMP runtime in the process, with the settings it had when first seen."""

    def __init__(self, lib: ctypes.CDLL):
        self._set_threads, self._set_dynamic = lib.omp_set_num_threads, lib.omp_set_dynamic
        self.threads, self.dynamic = lib.omp_get_max_threads(), lib.omp_get_dynamic()

    def apply(self) -> None:
        self._set_threads(self.threads)
        self._set_dynamic(self.dynamic)


class ProcessState:
    """The worker's own state, and each build's (see the module docstring)."""

    def __init__(self):
        self._start = _fenv()
        self._builds: dict[str, ctypes.Array] = {}  # build -> the floating-point environment its load left
        self._openmp: dict[int, _OpenMP] = {}  # dlopen handle -> runtime

    def load(self, build: str, load: Callable):
        """``load()``'s runner, made in the worker's own state; the state that runner runs in
        (for :meth:`enter`)."""
        _libm.fesetenv(self._start)
        self._enter_openmp()
        runner = load()
        for name in OPENMP_RUNTIMES:
            try:
                lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD)
            except OSError:  # not in the process
                continue
            if lib._handle not in self._openmp:  # libomp.so is often libomp.so.5
                self._openmp[lib._handle] = _OpenMP(lib)
        return runner, self._builds.setdefault(build, _fenv())

    def enter(self, env: ctypes.Array) -> None:
        """Make the process's state a build's (``env``, from :meth:`load`) before its call."""
        _libm.fesetenv(env)
        self._enter_openmp()

    def _enter_openmp(self) -> None:
        for runtime in self._openmp.values():
            runtime.apply()
