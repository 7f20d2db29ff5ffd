"""The process-wide state one candidate may change and every later one in its worker would
inherit: the floating-point environment and the OpenMP runtime's settings, switched per build;
and what lasts past a job's calls, which no switch undoes (:class:`ProcessState.left`).

A library built with ``-ffast-math`` sets flush-to-zero and denormals-are-zero as it loads,
and every kernel loaded after it computed denormals as zero (recorded as wrong results of
those kernels); a candidate calling ``omp_set_num_threads(1)`` made every later kernel of the
worker run, and be recorded, on one thread. Each runner therefore runs in the state its own
library's loading left, starting from the worker's: the floating-point environment after its
first load (a library's initialisers run once per process), on the calling thread and on the
OpenMP runtime's pool threads (each keeps the state of the thread that created it), and each
runtime's thread count and dynamic adjustment as the worker's environment asks. Between calls
(a reference, a comparison of outputs) the worker's own environment holds. Switching costs
about a microsecond a call, outside every timed call; the pool is switched only where the
environment differs from the one it last got, and never where it has no threads (a region of the
call makes them, from its thread): a region run to switch a pool made it for a serial kernel's
call, and its thread's spinning was counted as the kernel's own. A worker is forked once the parent's pools let
their threads go (:func:`release_pools`): a pool without its threads waits for them for ever.

Threads a candidate started and left running (spinners slowed every later candidate of the
worker 3-6x, unseen: the interference check counts the worker's threads as the kernel's own),
processes it forked, timers it armed (an ``alarm(1)`` killed the next candidate with SIGALRM,
recorded as its crash) and signals whose handling it changed are not switched: the job's result
names them, and the worker is replaced before the next. The OpenMP runtimes' pools let their threads go after every job first (made
again at the next parallel region, in a few tenths of a ms): they are no candidate's leftovers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import time
from collections.abc import Callable

from tunebench.backends.cpuinfo import thread_count

#: The OpenMP runtimes a build may bring into the process: GCC's, LLVM's, Intel's.
OPENMP_RUNTIMES = ("libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so")
#: Room for a ``fenv_t`` (32 bytes on x86-64, 8 on AArch64).
FENV_BYTES = 64

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
#: ``fesetenv`` as the function a parallel region runs on every thread of its team, with the
#: environment as its data (``void fn(void *)``: its int result is ignored).
_FESETENV = ctypes.cast(_libm.fesetenv, ctypes.c_void_p).value


def _runtimes() -> list[ctypes.CDLL]:
    """The OpenMP runtimes in the process now."""
    found = {}
    for name in OPENMP_RUNTIMES:
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD)
        except OSError:  # not in the process
            continue
        found.setdefault(lib._handle, lib)  # one library by several names (LLVM's libomp.so.5 is libiomp5.so)
    return list(found.values())


#: ``omp_pause_hard`` of OpenMP 5's ``omp_pause_resource_t``: the runtime lets go of its threads.
OMP_PAUSE_HARD = 2
#: How long a pool's threads, let go, may take to end (on a busy machine they wait for a core).
SETTLE_S = 0.5


def release_pools() -> None:
    """Each OpenMP runtime of this process lets its pool's threads go, before a worker is forked:
    the worker would hold the pool without its threads, and its candidates' first parallel region
    waited for them for ever (every OpenMP kernel timed out once a test, or a framework, had run one
    in the process that forks). A runtime makes a new pool at its next region."""
    for lib in _runtimes():
        pause = getattr(lib, "omp_pause_resource_all", None)  # OpenMP 5 (GCC 9, LLVM 8 and later)
        if pause is not None:
            pause(OMP_PAUSE_HARD)


def descendants(root: int) -> list[int]:
    """The processes running whose parents lead to ``root`` (read from ``/proc``), children first;
    zombies, which have ended, left out."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                state, parent = f.read().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):  # not a process, or one that has gone
            continue
        if state != "Z":
            children.setdefault(int(parent), []).append(int(entry))
    found = children.get(root, [])[:]
    for pid in found:  # grows as it goes: each one's children after it
        found.extend(children.get(pid, ()))
    return found


#: The signals the C library keeps for itself (glibc's SIGCANCEL and SIGSETXID, musl's three, from
#: 32 up to the first real-time signal it lends): no program's sigaction can change them, and glibc
#: installs its handler of SIGSETXID at a process's first thread, which with OMP_NUM_THREADS=1 a
#: worker's first trial starts.
LIBC_SIGNALS = range(32, signal.SIGRTMIN)
#: The interval timers a process may arm, and the signal each sends.
TIMERS = ((signal.ITIMER_REAL, "SIGALRM"), (signal.ITIMER_VIRTUAL, "SIGVTALRM"), (signal.ITIMER_PROF, "SIGPROF"))


def _threads() -> frozenset[str]:
    try:
        return frozenset(os.listdir("/proc/self/task"))
    except OSError:
        return frozenset()


def _signals() -> dict[str, int]:
    """The masks of the signals the process ignores and handles, and those its main thread blocks."""
    try:
        with open("/proc/self/status") as f:
            return {k: int(v, 16) for k, _, v in (ln.partition(":") for ln in f) if k in ("SigIgn", "SigCgt", "SigBlk")}
    except (OSError, ValueError):
        return {}


def _timers() -> list[str]:
    """The timers armed in the process, as the signal each sends and when."""
    armed = [f"{name} in {signal.getitimer(which)[0]:.3g} s" for which, name in TIMERS if signal.getitimer(which)[0]]
    try:
        with open("/proc/self/timers") as f:  # timer_create's (the worker makes none)
            posix = sum(ln.startswith("ID:") for ln in f)
    except OSError:
        posix = 0
    return armed + ([f"{posix} POSIX timer(s)"] if posix else [])


def _name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _fenv() -> ctypes.Array:
    env = ctypes.create_string_buffer(FENV_BYTES)
    _libm.fegetenv(env)
    return env


class _OpenMP:
    """One OpenMP runtime in the process, and the settings the worker's environment asks of
    it (OMP_NUM_THREADS, OMP_DYNAMIC): not those it has when first seen, which a library's
    initialiser may have changed already."""

    def __init__(self, lib: ctypes.CDLL):
        self._set_threads, self._set_dynamic = lib.omp_set_num_threads, lib.omp_set_dynamic
        self.threads = thread_count()
        self.dynamic = int(os.environ.get("OMP_DYNAMIC", "").strip().lower() == "true")
        try:  # LLVM's and Intel's runtimes offer GCC's entry point too
            self._parallel = lib.GOMP_parallel
            self._parallel.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
        except AttributeError:
            self._parallel = None

    def apply(self) -> None:
        self._set_threads(self.threads)
        self._set_dynamic(self.dynamic)

    def on_every_thread(self, env: ctypes.Array) -> None:
        """``env`` on each thread of a team of the default size, the pool's threads among them."""
        if self._parallel is not None:
            self._parallel(_FESETENV, ctypes.addressof(env), 0, 0)


class ProcessState:
    """The worker's own state, and each build's (see the module docstring)."""

    def __init__(self):
        self._start = _fenv()
        self._builds: dict[str, ctypes.Array] = {}  # build -> the floating-point environment its load left
        self._openmp: dict[int, _OpenMP] = {}  # dlopen handle -> runtime
        # the environment the runtimes' pool threads have (their creator's); None where there are none yet
        self._pool: bytes | None = self._start.raw
        self._before: tuple | None = None  # the threads and signal masks before the job's first load

    def load(self, build: str, load: Callable):
        """``load()``'s runner, made in the worker's own state; the state that runner runs in
        (for :meth:`enter`)."""
        if self._before is None:  # after the job's arguments and reference: numpy's threads are not its
            self._before = _threads(), _signals()
            if len(self._before[0]) == 1:  # this one alone: no pool has threads (see enter)
                self._pool = None
        _libm.fesetenv(self._start)
        self._apply_openmp()
        runner = load()
        if self._pool is None and len(_threads()) > 1:  # an initialiser's region made them, in its state
            self._pool = b""
        for lib in _runtimes():
            if lib._handle not in self._openmp:  # libomp.so is often libomp.so.5
                self._openmp[lib._handle] = _OpenMP(lib)
        env = self._builds.setdefault(build, _fenv())
        self.leave()
        return runner, env

    def enter(self, env: ctypes.Array) -> None:
        """Make the process's state a build's (``env``, from :meth:`load`) before its call."""
        _libm.fesetenv(env)
        self._apply_openmp()
        if self._pool is None:  # no pool has threads: a region of the call makes them from this thread, in env
            self._pool = env.raw  # (a region to set it made them for a serial kernel, spinning into its timing)
        elif self._pool != env.raw:  # a parallel region wakes the pool: only where the state differs
            for runtime in self._openmp.values():
                runtime.on_every_thread(env)
            self._pool = env.raw

    def leave(self) -> None:
        """The worker's own floating-point environment again on its thread, after a call: its
        reference and comparisons compute in it."""
        _libm.fesetenv(self._start)

    def left(self) -> list[str]:
        """What the job's candidates left running after their calls, in words (none where it loaded
        nothing): the worker is to be replaced. Called at each job's end."""
        before, self._before = self._before, None
        if before is None:
            return []
        release_pools()
        self._pool = b""  # unknown: see load()
        (threads, masks), found = before, []
        deadline = time.monotonic() + SETTLE_S
        while (started := _threads() - threads) and time.monotonic() < deadline:
            time.sleep(0.001)
        if started:
            found.append(f"{len(started)} thread(s) it started still running after its calls, which would have "
                         f"taken cores from every later candidate of its worker (replaced)")
        forked = descendants(os.getpid())
        if forked:
            found.append(f"{len(forked)} process(es) it forked still running after its calls (killed with its "
                         f"worker, replaced)")
        armed = _timers()
        if armed:
            found.append(f"a timer it armed, to send {', '.join(armed)}, which would have killed a later candidate "
                         f"of its worker (replaced)")
        now = _signals()
        changed = sorted({n + 1 for k, mask in masks.items() for n in range(64)
                          if (mask ^ now.get(k, mask)) >> n & 1 and n + 1 not in LIBC_SIGNALS})
        if changed:
            found.append(f"the handling of {', '.join(map(_name, changed))} changed (ignored, caught or blocked) for "
                         f"every later candidate of its worker (replaced)")
        return found

    def _apply_openmp(self) -> None:
        for runtime in self._openmp.values():
            runtime.apply()
