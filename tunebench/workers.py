"""Worker processes: every trial is built and measured in a child, so a crash or a hang costs
that one trial, never the tuning run.

One worker at a time (timings are never taken in parallel). It is forked after collection, so
it knows every declared kernel, and it owns the only CUDA context of the run. A trial has two
phases: preparing (compile, arguments, reference: no time limit but a generous one) and running
(load, verify, measure), which is killed after ``timeout`` seconds. A worker that dies (a signal,
an exit, a CUDA error that spoils its context) or is killed is replaced before the next trial.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from tunebench.backends import create
from tunebench.backends.base import CompileError, ResourceError
from tunebench.kernel import REGISTRY, KernelError
from tunebench.measure import MeasureSettings, interleave, measure, verify, warm_up

#: The longest a worker may take to prepare a trial (compile, build arguments, the reference).
PREPARE_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class TrialJob:
    kernel: str
    config: dict
    shape: tuple
    dtype: str
    settings: MeasureSettings
    incumbent: float | None = None  # upper confidence bound of the best trial on this shape


@dataclass(frozen=True)
class CompareJob:
    """Configs (arms) measured interleaved on one shape: a timed call of each in turn, round
    after round. An arm is (label, config, template text, or None for the template file)."""

    kernel: str
    shape: tuple
    dtype: str
    arms: tuple[tuple[str, dict, str | None], ...]
    rounds: int
    settings: MeasureSettings


class WorkerError(RuntimeError):
    """The worker could not start, or the suite's own code failed in it (not the candidate)."""


def _serve(conn, target: str) -> None:
    """The worker's loop: answer every job with ("built", ...) and then ("result", ...)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.disable()  # a candidate's crash is reported as its status, not as a traceback
    try:
        backend = create(target)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which stops the run
        conn.send(("failed", f"cannot start the {target} target: {type(e).__name__}: {e}"))
        return
    conn.send(("ready", None))
    prepared: dict[tuple, Any] = {}  # the latest shape's arguments and reference
    while True:
        try:
            job: TrialJob | CompareJob = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        run = _compare if isinstance(job, CompareJob) else _trial
        try:
            conn.send(("result", run(backend, job, prepared, conn)))
        except (KernelError, WorkerError) as e:
            conn.send(("error", str(e)))
        except Exception as e:  # noqa: BLE001 - a failure inside the candidate's run, e.g. a CUDA error
            conn.send(("crashed", f"{type(e).__name__}: {e}"))
            os._exit(70)  # its context may be spoilt: the parent starts a fresh worker


def _prepare(backend, kernel_name: str, shape: tuple, dtype: str, cache: dict):
    """The kernel, its variant, the shape's arguments and reference outputs. Arguments are built
    once per shape (random inputs of a large shape take seconds); each runner gets its own copy
    of the inputs and fresh outputs."""
    kernel = REGISTRY.get(kernel_name)
    if kernel is None:
        raise WorkerError(f"kernel {kernel_name!r} is not declared in the worker")
    key = (kernel_name, shape, dtype)
    if key not in cache:
        cache.clear()  # one shape at a time: they can be large
        args = kernel.build_args(shape, dtype)
        cache[key] = (args, kernel.expected(args))
    args, reference = cache[key]
    return kernel, kernel.variant(backend.name), args, reference


def _trial(backend, job: TrialJob, prepared: dict, conn) -> dict:
    kernel, variant, args, reference = _prepare(backend, job.kernel, job.shape, job.dtype, prepared)
    try:
        build = backend.build(kernel, variant, job.config, job.dtype)
    except CompileError as e:
        return {"status": "compile_error", "error": str(e)}
    conn.send(("built", [build.cached]))
    done = {"compile_time_s": build.compile_time_s}
    try:
        runner = backend.load(build, kernel, variant, job.config, job.shape, args)
    except ResourceError as e:
        return {**done, "status": "pruned_resources", "error": str(e)}
    try:
        m = measure(runner, reference, kernel.outputs, kernel.tolerance[job.dtype], job.settings, job.incumbent)
    finally:
        runner.close()
    return {**done, "status": m.status, "error": m.error, "max_error": m.max_error, "samples": m.samples,
            "warmup_calls": m.warmup_calls, "measure_s": m.seconds, "conditions": backend.conditions()}


def _compare(backend, job: CompareJob, prepared: dict, conn) -> dict:
    """Every arm built, loaded and verified, then sampled interleaved; the first arm that fails
    is the result (its status, error and label)."""
    kernel, variant, args, reference = _prepare(backend, job.kernel, job.shape, job.dtype, prepared)
    builds = {}
    for label, config, text in job.arms:
        arm_variant = dataclasses.replace(variant, text=text) if text is not None else variant
        try:
            builds[label] = (arm_variant, config, backend.build(kernel, arm_variant, config, job.dtype))
        except CompileError as e:
            return {"status": "compile_error", "arm": label, "error": str(e)}
    conn.send(("built", [b.cached for _, _, b in builds.values()]))
    runners = {}
    try:
        for label, (arm_variant, config, build) in builds.items():
            try:
                runners[label] = backend.load(build, kernel, arm_variant, config, job.shape, args)
            except ResourceError as e:
                return {"status": "pruned_resources", "arm": label, "error": str(e)}
            failed = verify(runners[label], reference, kernel.outputs, kernel.tolerance[job.dtype])
            if failed.status != "ok":
                return {"status": failed.status, "arm": label, "error": failed.error}
            warm_up(runners[label], job.settings)
        return {"status": "ok", "samples": interleave(runners, job.rounds), "conditions": backend.conditions()}
    finally:
        for runner in runners.values():
            runner.close()


def _death(process) -> str:
    process.join(5)
    code = process.exitcode
    if code is not None and code < 0:
        return f"the worker was killed by {signal.Signals(-code).name}"
    return f"the worker exited with status {code}"


class Workers:
    """Runs trials in a worker process for one target; see the module docstring."""

    def __init__(self, target: str, timeout: float = 10.0):
        self.target = target
        self.timeout = timeout
        self.compiled = 0  # builds compiled by the workers of this run
        self.reused = 0  # builds the workers found in the compile cache
        self.restarts = 0
        self._process = None
        self._conn = None

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, self.target), daemon=True,
                                        name=f"tunebench-{self.target}-worker")
        self._process.start()
        child.close()
        kind, message = self._receive(PREPARE_TIMEOUT_S)
        if kind != "ready":
            self.close()
            raise WorkerError(message or f"the {self.target} worker did not start")

    def _receive(self, timeout: float) -> tuple[str, Any]:
        if not self._conn.poll(timeout):
            return "timeout", None
        try:
            return self._conn.recv()
        except (EOFError, ConnectionError):
            return "died", _death(self._process)

    def trial(self, job: TrialJob | CompareJob) -> dict:
        """The job's result fields (status, samples, ...), whatever happened to the worker."""
        if self._process is None or not self._process.is_alive():
            if self._process is not None:
                self.restarts += 1
            self._start()
        began = time.monotonic()
        self._conn.send(job)
        kind, message = self._receive(PREPARE_TIMEOUT_S)
        if kind == "built":
            self.compiled += message.count(False)
            self.reused += message.count(True)
            kind, message = self._receive(self.timeout)
        result = self._outcome(kind, message)
        result["cost_s"] = time.monotonic() - began
        return result

    def _outcome(self, kind: str, message) -> dict:
        if kind == "result":
            return message
        if kind == "error":
            raise KernelError(message)
        self.close()
        if kind == "timeout":
            return {"status": "timeout", "error": f"killed after the {self.timeout:g} s timeout"}
        return {"status": "crashed", "error": message}  # "died" or "crashed"

    def close(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None
