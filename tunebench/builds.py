"""Builds ahead: the candidates a strategy will ask next, compiled on the host's cores in the
tuning process, into the compile cache where the worker then finds them.

On a GPU most of a trial is the compile (nvcc, about 0.5 s), so the next candidates are compiled
while the device measures the current one. On the CPU target the compiler would compete with the
kernel's threads for the cores it is timed on, so the next candidates are compiled together, in
parallel, before the measurements and never beside them; the pool's threads end with each batch,
so that the workers forked after it come from a process of one thread (Python 3.12 warned of a
possible deadlock at every fork, and a user's tune printed it dozens of times). On a GPU they
compile while the worker is forked: that warning stays.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from tunebench.backends import CompileError, ResourceError, builder, quota
from tunebench.backends.cpuinfo import cores_usable
from tunebench.interference import MARK_S
from tunebench.kernel import Kernel, Variant
from tunebench.records import config_key


class Ahead:
    """A pool of compiles, sized to the machine's cores, for one target."""

    def __init__(self, target: str, fingerprint: dict, workers: int | None = None):
        self.backend = builder(target, fingerprint)
        # no more compiles than the cgroup's CPU quota keeps running (past it, the quota stalls them
        # all), less the CPU of a measurement beside them
        cores, usable = len(os.sched_getaffinity(0)), cores_usable()
        limited = usable < cores or quota.limit() is not None  # a quota of all the cores is spent by builds alone
        if limited and self.backend is not None and self.backend.builds_beside_measurement:
            usable = max(1, usable - 1)
        self.size = workers or min(cores, usable)
        self.compiled = 0  # builds this pool compiled (not the cache's), failed ones included
        self.artefacts: set[str] = set()  # the artefacts among them
        self._count = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._builds: dict[tuple, Future] = {}

    def build(self, kernel: Kernel, variant: Variant, dtype: str, configs: list[dict], now: dict,
              waiting: Callable[[], None] = lambda: None) -> BaseException | None:
        """Start compiling ``configs``; return once ``now`` (the config about to be measured) is
        built, and, where builds compete with measurements, once every one started is, calling
        ``waiting`` every :data:`~tunebench.interference.MARK_S` meanwhile (the workers read the
        machine: see :meth:`~tunebench.workers.Workers.mark`). Returns why ``now`` did not build
        (the compiler's refusal, a resource refusal, or what kept it from compiling), None where it
        built or the target builds nothing."""
        if self.backend is None:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="tunebench-build")
        for config in [now, *configs]:
            key = (kernel.name, variant.source_hash, dtype, config_key(config))
            if key not in self._builds:
                self._builds[key] = self._pool.submit(self._compile, kernel, variant, dtype, config)
        current = self._builds[(kernel.name, variant.source_hash, dtype, config_key(now))]
        beside = self.backend.builds_beside_measurement
        while wait([current] if beside else list(self._builds.values()), timeout=MARK_S).not_done:
            waiting()
        if not beside:
            self.close()  # its threads end: the worker is forked from one thread
        return current.exception() or current.result()

    def _compile(self, kernel: Kernel, variant: Variant, dtype: str, config: dict) -> Exception | None:
        """Build one config into the compile cache; the compiler's or the resources' refusal of it,
        None where it built."""
        try:
            build, refused = self.backend.build(kernel, variant, config, dtype), None
        except CompileError as e:
            if e.cached:  # the cache's verdict (an earlier run's, or another's since): nothing compiled now
                return e
            build, refused = None, e  # the error is cached too: the worker reports it
        except ResourceError as e:
            build, refused = None, e
        if build is None or not build.cached:
            with self._count:
                self.compiled += 1
                if build is not None:
                    self.artefacts.add(build.handle.name)
        return refused

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def counts(builds: dict[str, bool], ahead: Ahead | None) -> tuple[int, int]:
    """This run's builds, each once however often loaded: how many it compiled (ahead or in a
    worker), and how many it found in the compile cache, compiled by an earlier run. ``builds``:
    the workers' artefacts, each with whether a worker compiled it."""
    made_ahead = ahead.artefacts if ahead else set()
    compiled = sum(builds.values()) + (ahead.compiled if ahead else 0)
    return compiled, sum(not made and artefact not in made_ahead for artefact, made in builds.items())
