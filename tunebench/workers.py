"""Worker processes: every trial is built and measured in a child, so a crash or a hang costs
that one trial, never the tuning run.

One worker at a time (timings are never taken in parallel). It is forked after collection, so
it knows every declared kernel, and it owns the only CUDA context of the run. A trial has two
phases: preparing (compile, arguments, reference) and running (load, verify, measure), in which
each load and each call is killed after ``timeout`` seconds, however many calls a trial makes; each
phase as a whole has :data:`PREPARE_TIMEOUT_S`. A worker that dies (a signal, an exit, a CUDA
error that spoils its context) or is killed is replaced before the next trial, and so is one whose
candidates left threads, processes or timers running, or signals handled otherwise, after their
calls (``left_behind`` in the result, see
:meth:`ProcessState.left <tunebench.backends.process_state.ProcessState.left>`). A worker dies with
the process that started it (a killed pytest leaves no worker behind) and holds none of its locks
(see :mod:`tunebench.records`).

Every result carries the machine's conditions while it was measured and the interference
verdict on them and on the samples (:mod:`tunebench.interference`), read by this process across
its workers.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import faulthandler
import fcntl
import multiprocessing
import os
import pickle
import select
import shutil
import signal
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tunebench import interference
from tunebench.backends import compiler, create
from tunebench.backends.base import Build, BuildEnvironmentError, CompileError, ResourceError, Runner
from tunebench.backends.machine_code import same_code
from tunebench.backends.process_state import ProcessState, descendants, release_pools
from tunebench.dtypes import is_float, numpy_dtype
from tunebench.kernel import REGISTRY, KernelError, Variant, kept_variant
from tunebench.measure import (UNPRIMED_MS, MeasureSettings, interleave, measure_placements, verify, verify_after,
                               warm_up)
from tunebench.owned import folder
from tunebench.prepared import PREFIX, SLOW_S, keep, kept
from tunebench.records import alive, config_key, config_text
from tunebench.user_code import raised

#: The longest a worker may take to prepare a trial (compile, build arguments, the reference).
PREPARE_TIMEOUT_S = 900.0
#: The shapes whose arguments and reference a worker keeps, the least recently used dropped
#: first. A bucket's shapes are measured in turn, config after config, and a GPU shape's
#: arguments and float64 reference take seconds to build; at most this share of memory is kept.
PREPARED_SHAPES = 4
PREPARED_MEMORY_SHARE = 0.25
#: The configs whose reference outputs a worker keeps with a shape's arguments, where only the
#: reference takes the config, the least recently used dropped first: enough for a trial or a
#: comparison's arms measured again in the same worker, never every config a tune measures.
PREPARED_CONFIGS = 4


@dataclass(frozen=True)
class TrialJob:
    kernel: str
    config: dict
    shape: tuple
    dtype: str
    settings: MeasureSettings
    incumbent: float | None = None  # upper confidence bound of the best trial on this shape
    #: Only the verifying call, with every input writable: after a trial died of a memory fault,
    #: whether it wrote into an input (read-only on the CPU, so the write faults and names none).
    probe: bool = False


@dataclass(frozen=True)
class CompareJob:
    """Configs (arms) measured interleaved on one shape: a timed call of each in turn, round
    after round, under every placement. An arm is (label, config, the variant's fields built
    otherwise for it, as ``{"text": the recorded template, "flags": the tune's}``, with ``files``,
    the records' texts of the files it reads edited since, by path from the template's folder
    (written where the job is built: see :func:`_arm_variant`), or None).
    The rounds are sized to ``budget_s`` of calls (after the warm-up tells how long a call
    takes), between :data:`MIN_ROUNDS` and ``rounds``: slow kernels get fewer. ``drop_same``:
    two arms, (arm, other), of which ``arm`` is not measured where its build holds the machine
    code of ``other``'s (:func:`~tunebench.backends.machine_code.same_code`): the result then
    names them as ``same_code``, and has no samples of ``arm``."""

    kernel: str
    shape: tuple
    dtype: str
    arms: tuple[tuple[str, dict, dict | None], ...]
    rounds: int
    settings: MeasureSettings
    budget_s: float = 1.0
    drop_same: tuple[str, str] | None = None


#: The fewest rounds of a comparison, however slow the kernel.
MIN_ROUNDS = 5


#: The longest message a worker sends (a result and its samples are far shorter): text that a
#: candidate writes into the worker's pipe reads as a length of at least 0x20202020 bytes (four
#: printable characters), which the parent would otherwise wait for past every timeout.
MAX_MESSAGE_BYTES = 256 << 20
#: The longest a message may take to arrive whole once its first bytes have: a length the
#: candidate wrote (binary, under the limit) has no message after it.
RECEIVE_S = 30.0
GARBLED = ("the candidate wrote into its pipe to tunebench (a file descriptor it does not own): the "
           "worker's answer is lost")


class WorkerError(RuntimeError):
    """The worker could not start, or the suite's own code failed in it (not the candidate), or it
    was killed again and again (:class:`WorkerKilled`)."""


class WorkerKilled(WorkerError):
    """The job's worker was killed by ``signal`` (one of :data:`OUTSIDE`) each time it ran the job:
    by something outside, or by the job's candidate itself, which cannot be told apart."""

    def __init__(self, message: str, signal: str = ""):  # unpickled (a cluster device's), it is given the message
        super().__init__(message)
        self.signal = signal


_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> None:
    """``prctl(option, value)`` where the kernel has it (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux), so that a killed pytest
    leaves no worker running on a task's buffers."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(0)


def _sentinel(worker: int) -> int:
    """Fork, from this process, a sentinel that kills the worker's group once the worker has
    ended, however it ended (the kernel kills the worker with pytest, not a child a candidate
    forked, which outlived the run and held a CI job's log pipe open); its pid. It is this
    process's child, reaped on close: not the worker's, whose candidates' ``while (wait(NULL) >
    0);`` waited for it, and not an orphan, which a container's init may never reap."""
    guard = os.fork()
    if guard:
        return guard
    try:
        for ignored in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # pytest's to take: it outlives them
            signal.signal(ignored, signal.SIG_IGN)
        try:
            select.select([os.pidfd_open(worker)], [], [])  # readable once the worker has ended
        except (OSError, AttributeError):  # no pidfd here (Linux before 5.3): ask every half second
            while alive(worker):
                time.sleep(0.5)
        os.killpg(worker, signal.SIGKILL)
    except BaseException:  # noqa: BLE001 - the group is gone already, or never formed
        pass
    finally:
        os._exit(0)


class _Watched(Runner):
    """A runner whose every call is announced in memory shared with the parent: when the call
    began (0 when none is in flight), which arm of a comparison made it and under which buffer
    placement. The parent kills a worker whose call outlasts the timeout, so the timeout applies
    to one launch, however many a job makes, and a hang or a crash is pinned on the arm and the
    placement that made it."""

    def __init__(self, runner: Runner, clock, state: ProcessState, env, arm: int = 0, placement: int = -1):
        self._runner, self._clock, self._arm, self._placement = runner, clock, arm, placement
        self._state, self._env = state, env  # the process state its build runs in (see ProcessState)
        self._pid = os.getpid()
        self.typed = runner.typed

    def _watch(self, fn):
        self._state.enter(self._env)
        self._clock[1], self._clock[2] = self._arm, self._placement
        self._clock[0] = time.monotonic()
        try:
            return fn()
        finally:
            if os.getpid() != self._pid:  # a child the candidate forked returned here: two would answer
                os._exit(0)
            self._clock[0] = 0.0
            self._state.leave()

    def reset(self, pattern: int = 0) -> None:
        self._runner.reset(pattern)

    def call(self) -> None:
        self._watch(self._runner.call)

    def timed_call(self) -> float:
        return self._watch(self._runner.timed_call)

    def outputs(self):
        return self._runner.outputs()

    def overrun(self) -> str | None:
        return self._runner.overrun()

    def close(self) -> None:
        self._runner.close()


class _Watch:
    """Loads the watched runners of one job: a load is timed as a call is (a library's static
    initialiser runs when it loads, and may hang), and a failure while loading is pinned on the
    arm loaded. Each runner runs in the process state of its own build (see
    :mod:`tunebench.backends.process_state`), never in what another candidate left."""

    def __init__(self, clock, state: ProcessState):
        self._clock, self._state = clock, state

    def __call__(self, build: Build, load, arm: int = 0, placement: int = -1) -> _Watched:
        """The runner ``load()`` makes of ``build``, watched; ``placement``: its index in the backend's."""
        self._clock[1], self._clock[2] = arm, placement
        self._clock[0] = time.monotonic()
        try:
            runner, env = self._state.load(str(build.handle), load)
        finally:
            self._clock[0] = 0.0
        return _Watched(runner, self._clock, self._state, env, arm, placement)


def _serve(conn, target: str, parent: int, clock, log: int, parents_end: int, inputs: Path) -> None:
    """The worker's loop: answer every job with ("built", ...), then, told to load, ("result", ...)."""
    _die_with_parent(parent)
    os.close(parents_end)  # a candidate writing into it would send this worker jobs
    os.setpgid(0, 0)  # a group of its own, which the parent kills whole: with any child a candidate forked
    # and the orphans of its descendants adopted, not init's: a helper that left the group (setsid) is
    # still found, and killed with the worker (see _kill)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    for fd in (1, 2):  # what a candidate prints (an assert's message, say) goes to the parent's log
        os.dup2(log, fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # killed from outside, the worker dies by the signal (see OUTSIDE): a handler inherited from pytest (a
    # conftest's, a plugin's, ray.init's) raised in it, and the kill read as its candidate's crash
    for outside in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(outside, signal.SIG_DFL)
    faulthandler.disable()  # a candidate's crash is reported as its status, not as a traceback
    try:
        backend = create(target)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which stops the run
        conn.send(("failed", f"cannot start the {target} target: {type(e).__name__}: {e}"))
        return
    conn.send(("ready", list(backend.placements)))
    state = ProcessState()
    prepared: OrderedDict[tuple, Any] = OrderedDict()  # the latest shapes' arguments and references
    while True:
        try:
            job: TrialJob | CompareJob = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        run = _compare if isinstance(job, CompareJob) else _trial
        try:
            result = run(backend, job, (prepared, inputs), conn, _Watch(clock, state))
            left = state.left()
            if left:  # the parent replaces this worker
                result["left_behind"] = left
            threads = result.pop("threads", None)  # those that ran, over the count asked for
            throttling = result.pop("throttling", {})
            if "samples" in result:
                result["conditions"] = {**backend.conditions(), **({"threads": threads} if threads else {}),
                                        **throttling}
            conn.send(("result", result))
        except (KernelError, WorkerError, BuildEnvironmentError) as e:
            conn.send(("error", str(e)))
        except Exception as e:  # noqa: BLE001 - a failure inside the candidate's run, e.g. a CUDA error
            conn.send(("crashed", f"{type(e).__name__}: {e}"))
            os._exit(70)  # its context may be spoilt: the parent starts a fresh worker


def _prepare(backend, kernel_name: str, shape: tuple, dtype: str, shapes: tuple[OrderedDict, Path], config: dict):
    """The kernel, its variant, the shape's arguments and the config's reference outputs.
    Arguments are built once per shape (per config and shape, where the args builder takes the
    config) while it is among the latest (random inputs of a large shape take seconds), and once
    per run where they took long (see :mod:`tunebench.prepared`); a reference that takes the
    config is run on them for each config, the latest :data:`PREPARED_CONFIGS` configs' outputs
    held with the shape's (one config's are never another's). Each runner gets its own copy of
    the inputs and fresh outputs."""
    cache, inputs = shapes
    kernel = REGISTRY.get(kernel_name)
    if kernel is None:
        raise WorkerError(f"kernel {kernel_name!r} is not declared in the worker")
    variant = kernel.variant(backend.name)
    # the args builder and the reference are today's: given today's names alone (a recorded template's own,
    # renamed since, are its build's: see gate._recorded_config; a reference spreading **config failed on them)
    config = {name: value for name, value in config.items() if name in variant.space.names}
    key = (kernel_name, shape, dtype, config_key(config) if kernel.args_per_config else None)
    own = config_key(config) if kernel.reference_per_config else None
    if key in cache:
        cache.move_to_end(key)
    else:
        while len(cache) >= PREPARED_SHAPES:
            cache.popitem(last=False)
        cache[key] = _alone(lambda: _declared(kernel, shape, dtype, inputs, config), cache)
    held = cache[key]
    if own in held.references:
        held.references.move_to_end(own)
    else:  # only the reference takes the config: its outputs on the shape's arguments
        while len(held.references) >= PREPARED_CONFIGS:
            held.references.popitem(last=False)
        held.references[own] = _alone(lambda: _referenced(kernel, shape, dtype, inputs, config, held), cache, key)
    limit = PREPARED_MEMORY_SHARE * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    while sum(_nbytes(v) for v in cache.values()) > limit and (len(cache) > 1 or len(held.references) > 1):
        if len(cache) > 1:
            cache.popitem(last=False)
        else:
            held.references.popitem(last=False)
    return kernel, variant, held.args, held.references[own]


@dataclass
class _Held:
    """A shape's arguments as a worker holds them, and their reference outputs by config (none
    yet where only the reference takes the config)."""

    args: dict[str, Any]
    references: OrderedDict
    #: The seconds building the arguments took (where read back, in the worker that built them):
    #: a config's reference outputs are kept with them where the two together took long, unless
    #: the arguments alone did (then kept on their own, and the reference weighed alone).
    built_s: float
    #: Their id in the run's kept files (see :func:`~tunebench.prepared.keep`), None where not
    #: kept: a config's reference outputs kept apart are served on the arguments of their id alone.
    kept_as: str | None


def _alone(build: Callable[[], Any], cache: OrderedDict, key: tuple | None = None) -> Any:
    """What ``build`` gives; where it ran out of memory beside what the worker holds, built once
    more without it (all but ``key``'s arguments, which it is built on). Built again after the
    except block: its traceback holds the failed attempt's frames (its arguments, the
    reference's copies of its inputs) alive until the block ends."""
    try:
        return build()
    except (ResourceError, KernelError) as e:
        others = [k for k in cache if k != key]
        configs = cache[key].references if key else {}  # the other configs' reference outputs on them
        if not isinstance(e.__cause__, MemoryError) or not others and not configs:
            raise
        for k in others:
            del cache[k]
        configs.clear()
    return build()


def _declared(kernel, shape: tuple, dtype: str, inputs: Path, config: dict) -> _Held:
    """A shape's arguments and reference outputs (none, where only the reference takes the
    config: see :func:`_referenced`), read back where the run's workers kept them, else built
    and kept where they took long."""
    own = config_key(config) if kernel.reference_per_config else None
    found = kept(inputs, kernel.name, shape, dtype, config_key(config) if kernel.args_per_config else None)
    if found:
        args, reference, kept_as, built_s = found
        return _Held(args, OrderedDict([(own, reference)] if reference else []), built_s, kept_as)
    began = time.perf_counter()
    args = _suite_code(kernel, "args builder", shape, dtype, config, lambda: kernel.build_args(shape, dtype, config))
    if kernel.reference_per_config and not kernel.args_per_config:  # kept alone, or with a config's outputs
        took = time.perf_counter() - began
        kept_as = _keep_args(kernel, shape, dtype, inputs, config, args, [], took) if took >= SLOW_S else None
        return _Held(args, OrderedDict(), took, kept_as)
    reference = _suite_code(kernel, "reference", shape, dtype, config, lambda: kernel.expected(args, config))
    took = time.perf_counter() - began
    kept_as = _keep_args(kernel, shape, dtype, inputs, config, args, reference, took) if took >= SLOW_S else None
    return _Held(args, OrderedDict([(own, reference)]), took, kept_as)


def _referenced(kernel, shape: tuple, dtype: str, inputs: Path, config: dict, held: _Held) -> list:
    """The config's reference outputs on its shape's arguments, where only the reference takes
    the config: read back where they were kept on these very arguments, else computed, and kept
    apart from the arguments (and the arguments, where they were not) where the two together
    took long, or the reference alone once the arguments are kept: a fresh worker that reads
    them back then builds neither."""
    found = kept(inputs, kernel.name, shape, dtype, config_key(config), on=held.kept_as) if held.kept_as else None
    if found:
        return found[1]
    began = time.perf_counter()
    reference = _suite_code(kernel, "reference", shape, dtype, config, lambda: kernel.expected(held.args, config))
    # the arguments' build counts where it alone did not keep them: a slow args builder's shape kept every
    # config's outputs with its own, 2 ms references' too
    counted = held.built_s if held.built_s < SLOW_S else 0.0
    if counted + time.perf_counter() - began >= SLOW_S:
        held.kept_as = held.kept_as or _keep_args(kernel, shape, dtype, inputs, config, held.args, [], held.built_s)
        if held.kept_as:
            keep(inputs, kernel.name, shape, dtype, {}, reference, config=config_key(config), on=held.kept_as)
    return reference


def _keep_args(kernel, shape: tuple, dtype: str, inputs: Path, config: dict, args: dict, reference: list,
               built_s: float) -> str | None:
    """Keep a shape's arguments (and their reference outputs, where not a config's alone) for the
    run's next workers: their id, None where not kept (see :func:`~tunebench.prepared.keep`)."""
    return keep(inputs, kernel.name, shape, dtype, args, reference,
                blank=tuple(n for n in kernel.outputs if n not in kernel.inout),
                config=config_key(config) if kernel.args_per_config else None, built_s=built_s)


def _suite_code(kernel, what: str, shape: tuple, dtype: str, config: dict, step: Callable[[], Any]) -> Any:
    """What ``step`` gives, a call of the suite's own code (the args builder or the reference):
    its failure is the declaration's fault, not a candidate's: one error for the task, never a
    record; a step whose outputs are the config's running out of memory is that config's limit."""
    try:
        return step()
    except KernelError:
        raise
    except Exception as e:  # noqa: BLE001 - any error of the user's code, reported with its cause
        # the step's outputs are the config's: the args builder's where it takes it, the reference's on them too
        mine = kernel.args_per_config or what == "reference" and kernel.reference_per_config
        where = f"(shape {shape}, {dtype}" + (f", [{config_text(config)}])" if mine else ")")
        if mine and isinstance(e, MemoryError):  # this config's workspace: its candidate's limit
            raise ResourceError(f"the {what} ran out of memory {where}: {e}") from e
        raise KernelError(f"kernel {kernel.name!r}: the {what} raised {raised(e, where)}") from e


def _nbytes(held: _Held) -> int:
    return sum(a.nbytes for a in (*held.args.values(), *(r for outputs in held.references.values() for r in outputs))
               if isinstance(a, np.ndarray))


def _built(conn, artefacts: list[tuple[str, bool]]) -> None:
    """Say what was built, then load nothing before the parent answers: it marks the trial as the
    candidate's first (see RecordStore.loading). A constructor runs as its build loads: one that
    killed the run had done so before the mark was written, about half the time, and a resumed
    tune measured it again, killed at the same place."""
    conn.send(("built", artefacts))
    conn.recv()


def _trial(backend, job: TrialJob, prepared: tuple, conn, watched) -> dict:
    """A trial of one config on one shape. Besides its outcome, where the worker's time went
    (``prepare_s``, ``load_s``, ``verify_s`` beside ``measure_s``): on an H200 a trial of a
    134M-element shape cost 1.2 s, of which its timed calls took 3 ms."""
    began = time.perf_counter()
    try:
        kernel, variant, args, reference = _prepare(backend, job.kernel, job.shape, job.dtype, prepared, job.config)
    except ResourceError as e:  # a workspace sized by the config beyond the host's memory
        return {"status": "pruned_resources", "error": str(e)}
    prepare_s = time.perf_counter() - began
    try:
        build = backend.build(kernel, variant, job.config, job.dtype)
    except CompileError as e:
        return {"status": "compile_error", "error": str(e)}
    except ResourceError as e:  # beyond what the architecture gives a block: refused by the compiler
        return {"status": "pruned_resources", "error": str(e)}
    _built(conn, [(build.handle.name, build.cached)])
    done = {"compile_time_s": build.compile_time_s}
    if job.probe:
        runner = watched(build, lambda: backend.load(build, kernel, variant, job.config, job.shape, args,
                                              backend.placements[0], writable_inputs=True))
        try:
            m = verify(runner, reference, kernel.outputs, kernel.tolerances(job.dtype, args))
        finally:
            runner.close()
        return {**done, "status": m.status, "error": m.error}
    runners = {}
    try:
        began = time.perf_counter()
        for index, placement in enumerate(backend.placements):
            try:
                runners[placement] = watched(build, lambda: backend.load(build, kernel, variant, job.config, job.shape,
                                                                   args, placement), placement=index)
            except ResourceError as e:
                return {**done, "status": "pruned_resources", "error": str(e)}
        tolerances = kernel.tolerances(job.dtype, args)
        load_s, began = time.perf_counter() - began, time.perf_counter()
        m = measure_placements(runners, reference, kernel.outputs, tolerances, job.settings,
                               job.incumbent)
        verify_s = max(0.0, time.perf_counter() - began - m.seconds)  # the verifying calls, copies, comparisons
    finally:
        for runner in runners.values():
            runner.close()
    typed = all(r.typed for r in runners.values())  # then an argument of another dtype was an error already
    error = m.error + _dtype_hint(args, job.dtype) if m.status == "wrong_result" and not typed else m.error
    found = {**done, "status": m.status, "error": error, "max_error": m.max_error, "warmup_calls": m.warmup_calls,
             "measure_s": m.seconds, "prepare_s": prepare_s, "load_s": load_s, "verify_s": verify_s,
             "threads": m.threads, "throttling": m.throttling,
             # each output's dtype and what it was verified within: a trial is reused only while they hold
             "tolerances": {n: [numpy_dtype(args[n].dtype).name, *t] for n, t in zip(kernel.outputs, tolerances)}}
    if m.placements:
        found.update(samples=m.samples, placements=m.placements)
    return found


def _dtype_hint(args: dict, dtype: str) -> str:
    """Where a wrong result may be the args builder's: floating arrays of another dtype than the
    task's float, which a template reading them as TB_DTYPE misreads (a forgotten ``.astype(dtype)``)."""
    task = numpy_dtype(dtype)
    other = [f"{name!r} as {a.dtype}" for name, a in args.items()  # an integer task's floats are its own
             if isinstance(a, np.ndarray) and is_float(a.dtype) and is_float(task) and a.dtype != task]
    return (f" (the args builder gives {', '.join(other)} in a {dtype} task: a template that reads it as "
            f"TB_DTYPE needs .astype(dtype))") if other else ""


def _arm_variant(variant: Variant, changes: dict | None) -> Variant:
    """The variant an arm builds: ``changes`` its fields, and its ``files`` (the records' texts
    of files edited since the tune) written where this process builds (see
    :func:`~tunebench.kernel.kept_variant`), as a cluster's device builds on its own host."""
    if not changes:
        return variant
    built = dataclasses.replace(variant, **{field: v for field, v in changes.items() if field != "files"})
    return kept_variant(built, changes["files"]) if "files" in changes else built


def _compare(backend, job: CompareJob, prepared: tuple, conn, watched) -> dict:
    """Every arm built, then under each placement loaded, verified and sampled interleaved;
    the first arm that fails is the result (its status, error and label). ``samples`` is
    placement -> arm label -> ms. Arms share the shape's arguments, unless the args builder takes
    the config: then each arm has its config's. An arm whose build holds the code of another
    (see :attr:`CompareJob.drop_same`) is built alone."""
    given = {}
    for label, config, _ in job.arms:
        try:
            given[label] = _prepare(backend, job.kernel, job.shape, job.dtype, prepared, config)
        except ResourceError as e:
            return {"status": "pruned_resources", "arm": label, "error": str(e)}
    kernel, variant = next(iter(given.values()))[:2]
    builds = {}
    for label, config, changes in job.arms:
        arm_variant = _arm_variant(variant, changes)
        try:
            builds[label] = (arm_variant, config, backend.build(kernel, arm_variant, config, job.dtype))
        except CompileError as e:  # whether an earlier run's verdict served it: on a cluster no build ahead says so
            return {"status": "compile_error", "arm": label, "error": str(e), "cached": e.earlier}
        except ResourceError as e:
            return {"status": "pruned_resources", "arm": label, "error": str(e)}
    _built(conn, [(b.handle.name, b.cached) for _, _, b in builds.values()])
    same = job.drop_same is not None and same_code(*(builds[label][2].handle for label in job.drop_same))
    if same:  # measured against each other, the same code gives a ratio of noise alone
        del builds[job.drop_same[0]]
    samples, threads, throttling = {}, [], interference.Throttling()
    for index, placement in enumerate(backend.placements):
        runners = {}
        try:
            fastest = []
            for arm, (label, (arm_variant, config, build)) in enumerate(builds.items()):
                args, reference = given[label][2:]
                try:
                    runners[label] = watched(build, lambda: backend.load(build, kernel, arm_variant, config, job.shape,
                                                                  args, placement), arm, index)
                except ResourceError as e:
                    return {"status": "pruned_resources", "arm": label, "error": str(e)}
                failed = verify(runners[label], reference, kernel.outputs, kernel.tolerances(job.dtype, args))
                if failed.status != "ok":
                    return {"status": failed.status, "arm": label, "error": failed.error}
                fastest.append(warm_up(runners[label], job.settings)[1])
            # each round is a timed call of every arm, under every placement, after an untimed one where calls are short
            primed = min(fastest) < UNPRIMED_MS
            call_ms = sum(fastest) * (2 if primed else 1)
            fit = int(job.budget_s * 1e3 / (call_ms * len(backend.placements))) if call_ms > 0 else job.rounds
            busy = interference.BusyThreads()
            with throttling.timing():
                samples[placement] = interleave(runners, max(MIN_ROUNDS, min(job.rounds, fit)), primed)
            threads.append(busy.count())
            for label, runner in runners.items():
                args, reference = given[label][2:]
                failed = verify_after(runner, reference, kernel.outputs, kernel.tolerances(job.dtype, args))
                if failed.status != "ok":
                    return {"status": failed.status, "arm": label, "error": failed.error}
        finally:
            for runner in runners.values():
                runner.close()
            # the arms' device inputs, kept idle, held GPU memory until a later load (a gate's worker sat idle
            # with them): no later job uses them, as every comparison runs in a worker of its own (compare.compare)
            backend.drop_inputs()
    return {"status": "ok", "samples": samples, "threads": max(filter(None, threads), default=None),
            "throttling": throttling.conditions(), **({"same_code": list(job.drop_same)} if same else {})}


#: The signals of a memory fault, and what may have caused one (see :mod:`tunebench.backends.memory`).
FAULTS = ("SIGSEGV", "SIGBUS")
FAULT_HINT = "an invalid memory access (a write into an input or far past an output hits a trap page)"
#: What the other signals a candidate dies of most often mean.
SIGNAL_HINTS = {
    "SIGILL": "an illegal instruction: a trap the code sets (__builtin_trap, a check compiled to ud2), or one "
              "this CPU does not have (-m flags or an intrinsic asking for another CPU's; `gcc -march=native -Q "
              "--help=target` lists this one's)",
    "SIGFPE": "an integer division by zero (or INT_MIN / -1)",
    **dict.fromkeys(("SIGALRM", "SIGVTALRM", "SIGPROF"), "a timer this trial's candidate armed (alarm, setitimer) "
                    "fired: one an earlier candidate left armed retired its worker"),
}

#: The signals that kill a worker from outside (a scheduler's or a user's kill of it): no fault of
#: the candidate, whose job is run again in a fresh worker; killed so this many times in a row, its
#: task stops with nothing recorded of it. Recorded as the config's crash, a single kill had marked
#: it broken for good. A candidate that raises one itself cannot be told apart (see WorkerKilled).
#: Not SIGINT, which the worker ignores: killed by it, its candidate had stopped ignoring it. Ctrl-C
#: and a closed terminal signal pytest's process group, not the worker's own (see _serve).
OUTSIDE = ("SIGTERM", "SIGHUP")
OUTSIDE_KILLS = 2


def _kill(group: int) -> None:
    """A worker's group: with any process a candidate forked and left running, first every one the
    worker leads to (it adopts orphans: see _serve), in its group or not. A helper that called
    setsid() had outlived the run, holding pytest's stdout open (`pytest | cat` never ended)."""
    deadline = time.monotonic() + 1.0  # a fork bomb is not waited out: what is left stays in the group
    while (found := descendants(group)) and time.monotonic() < deadline:
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)  # killed, each becomes a zombie
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def _index(value: float, count: int) -> int:
    """An arm's or a placement's index as the worker's clock holds it; -1 where none, or where
    a candidate's stray writes reached the clock's shared memory."""
    return int(value) if 0 <= value < count else -1  # nan compares false


def _reaped(pid: int | None) -> None:
    """The sentinel reaped: it ends as soon as the worker has (2 s at most, then it is left)."""
    deadline = time.monotonic() + 2.0
    while pid and time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return
        time.sleep(0.01)


def _outside(error: str) -> str | None:
    """The signal from outside (:data:`OUTSIDE`) that killed the worker, where ``error`` (a
    crash's, or a start's) says one did (see :func:`_death`)."""
    return next((name for name in OUTSIDE if error.startswith(f"the worker was killed by {name}")), None)


def _death(process) -> str:
    process.join(5)
    code = process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = FAULT_HINT if name in FAULTS else SIGNAL_HINTS.get(name)
        return f"the worker was killed by {name}{': ' + hint if hint else ''}"
    return f"the worker exited with status {code}"


class Workers:
    """Runs trials in a worker process for one target; see the module docstring."""

    def __init__(self, target: str, timeout: float = 10.0, loading: Callable[[], None] = lambda: None):
        self.target = target
        self.timeout = timeout
        self.loading = loading  # told as a job's builds are about to be loaded: its candidates' code runs next
        self.builds: dict[str, bool] = {}  # artefact loaded this run -> whether a worker compiled it
        self._placements: list[str] = []  # the backend's, as the worker said when it started
        self._guard: int | None = None  # the worker's sentinel (see _sentinel)
        self._process = None
        self._conn = None
        self._clock = None  # shared with the worker: when its call in flight began, and its arm
        self._monitor = interference.Monitor()
        # the worker's stdout and stderr, a file without a name (nothing is left behind), appended
        # to whatever the parent reads: the last lines a candidate printed before it died
        self._log = tempfile.TemporaryFile(prefix="tunebench-worker-")
        self.inputs = folder(PREFIX)  # slow shapes' arguments and references, for the next worker
        fcntl.fcntl(self._log.fileno(), fcntl.F_SETFL, os.O_APPEND)

    def compiler(self, kernel: str, variant) -> str | None:
        """What builds a kernel's candidates here (see :func:`tunebench.backends.compiler`)."""
        return compiler(self.target, variant)

    def _start(self) -> None:
        _reaped(self._guard)  # a worker that died between jobs left its sentinel to reap
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._clock = context.RawArray("d", 3)
        release_pools()  # the worker's candidates make pools of their own
        self._process = context.Process(target=_serve, args=(child, self.target, os.getpid(), self._clock,
                                                             self._log.fileno(), self._conn.fileno(), self.inputs),
                                        daemon=True, name=f"tunebench-{self.target}-worker")
        self._process.start()
        child.close()
        kind, message = self._receive(PREPARE_TIMEOUT_S, candidates_ran=False)
        if kind != "ready":
            self._stop()
            raise WorkerError(message or f"the {self.target} worker did not start")
        self._placements = message
        self._guard = _sentinel(self._process.pid)  # its group exists: the worker is ready

    def _receive(self, timeout: float, candidates_ran: bool = True) -> tuple[str, Any]:
        """The worker's next message. A length a candidate wrote into the pipe, which no message
        follows, is cut short by a watchdog thread; before any candidate ran (the worker's
        "ready") there is none, and no thread: the sentinel forked right after would come from a
        process whose watchdog had not quite ended (Python 3.12 warns of such forks)."""
        if not self._poll(timeout):
            return "timeout", None
        garbled = threading.Event()  # a length the candidate wrote, which no message follows

        def stuck(group: int) -> None:
            garbled.set()
            _kill(group)  # every holder of the pipe's other end: the read ends

        watchdog = threading.Timer(RECEIVE_S, stuck, args=(self._process.pid,)) if candidates_ran else None
        if watchdog:
            watchdog.start()
        try:
            data = self._conn.recv_bytes(MAX_MESSAGE_BYTES)
        except (EOFError, ConnectionError):
            data = None
        except Exception:  # noqa: BLE001 - a length over the limit (OSError), or no length at all
            return "crashed", GARBLED
        finally:
            if watchdog:
                watchdog.cancel()
                watchdog.join()  # it fired or it never will: no kill after this returns
        if garbled.is_set():  # even where the message came whole as it fired: the worker is gone
            return "crashed", GARBLED
        if data is None:
            return "died", _death(self._process)
        try:  # a worker's message is a pickle (protocol 2 and up: its first byte is PROTO)
            message = pickle.loads(data) if data[:1] == b"\x80" else None
        except Exception:  # noqa: BLE001 - bytes that do not unpickle, whatever pickle raises of them
            message = None
        return message if isinstance(message, tuple) and len(message) == 2 else ("crashed", GARBLED)


    def trial(self, job: TrialJob | CompareJob) -> dict:
        """The job's result fields (status, samples, ...), whatever happened to the worker; run
        again in a fresh worker where one was killed from outside (see :data:`OUTSIDE`), in the
        job or as it started, and :class:`WorkerKilled` where :data:`OUTSIDE_KILLS` in a row were:
        nothing to record."""
        spent = 0.0
        for _ in range(OUTSIDE_KILLS):
            try:
                result = self._attempt(job)
            except WorkerError as e:  # it did not start
                outside = _outside(str(e))
                if outside is None:
                    raise
                continue  # killed while starting (a CUDA context takes seconds to create): as in the job
            spent += result["cost_s"]
            outside = _outside(result["error"]) if result["status"] == "crashed" else None
            if outside is None:
                result["cost_s"] = spent  # the attempts killed too
                return result
        what, stops = ((f"[{config_text(job.config)}]", "the task stops; the same command resumes it")
                       if isinstance(job, TrialJob) else
                       (f"the comparison of {', '.join(label for label, _, _ in job.arms)}",
                        "the comparison stops; the same command measures it again"))
        raise WorkerKilled(f"kernel {job.kernel!r}: the worker measuring {what} on {tuple(job.shape)} was killed by "
                           f"{outside} {OUTSIDE_KILLS} times in a row, by something outside (a scheduler's, a user's "
                           f"kill) or by the candidate itself (as raise({outside}) does), which cannot be told apart: "
                           f"nothing is recorded of it, and {stops}", outside)

    def _attempt(self, job: TrialJob | CompareJob) -> dict:
        """One run of the job in the worker, started afresh where it is not running."""
        if self._process is None or not self._process.is_alive():
            self._start()
        began = time.monotonic()
        self._clock[1] = self._clock[2] = -1  # no call made yet
        os.ftruncate(self._log.fileno(), 0)  # this job's words alone
        try:
            try:
                self._conn.send(job)
            except (BrokenPipeError, ConnectionError):  # it died since the last job (the OOM killer, say)
                self._stop()
                self._start()
                self._clock[1] = self._clock[2] = -1
                self._conn.send(job)
            kind, message = self._receive(PREPARE_TIMEOUT_S)
            if kind == "timeout":  # not a call: the worker's words say which, or its last lines do
                message = (f"preparing the trial (compiling the candidate, building the shape's inputs and "
                           f"reference) ran longer than {PREPARE_TIMEOUT_S:g} s")
            if kind == "built":
                for artefact, cached in message:
                    self.builds[artefact] = self.builds.get(artefact, False) or not cached
                self.loading()
                self._monitor.pin()  # the measurement begins: its reading spans from here at least
                with contextlib.suppress(BrokenPipeError, ConnectionError):  # it died waiting: _watch says how
                    self._conn.send("load")
                kind, message = self._watch()
        except BaseException:  # interrupted (pytest-timeout, Ctrl-C): the job's answer, still to come,
            self._stop()  # was read as the next job's, and recorded under its config
            raise
        placement = _index(self._clock[2], len(self._placements))
        result = self._outcome(kind, message)
        died = result["status"] in ("crashed", "timeout") and "samples" not in result
        said = self._last_words() if died else ""  # before a probe's job writes its own
        if isinstance(job, TrialJob) and not job.probe and result["status"] == "crashed" and any(
                f"killed by {name}" in result["error"] for name in FAULTS):
            result.update(self._probed(job, result["error"]))
        if died and placement >= 0 and len(self._placements) > 1:
            result["error"] += f" (buffers placed {self._placements[placement]})"  # as a wrong result says
        if died:
            result["error"] += said
        arm = _index(self._clock[1], len(job.arms)) if isinstance(job, CompareJob) else -1
        if "samples" not in result and "arm" not in result and arm >= 0:
            result["arm"] = job.arms[arm][0]  # the arm whose call hung or crashed
        if "samples" in result:
            result.update(interference.verdict(result.get("placements", result["samples"]),
                                               {**result.get("conditions", {}), **self._monitor.conditions()}))
        if result.get("left_behind"):  # threads, processes: in a fresh worker, no later candidate shares them
            self._stop()
        result["cost_s"] = time.monotonic() - began
        return result

    def _probed(self, job: TrialJob, error: str) -> dict:
        """What a trial that died of a memory fault did, by its verifying call again in a fresh
        worker with the inputs writable: a write into an input (``out_of_bounds``, naming it) or
        into an output's guard zone; else, where it died again, a crash that is no such write."""
        probe = self.trial(dataclasses.replace(job, probe=True))
        if probe["status"] == "out_of_bounds":
            return {"status": "out_of_bounds",
                    "error": f"{probe['error']} (with the inputs read-only, the write killed the worker)"}
        if probe["status"] == "crashed":
            return {"error": error.replace(FAULT_HINT, "an invalid memory access, and not into an input (with "
                                                       "the inputs writable it died too): far past an output, "
                                                       "or outside every buffer")}
        return {"error": error.replace(FAULT_HINT, f"an invalid memory access, which its verifying call with the "
                                                   f"inputs writable (buffers placed {self._placements[0]}) did "
                                                   f"not repeat")}

    def _poll(self, timeout: float) -> bool:
        """Whether the worker's next message came within ``timeout`` s, the machine read meanwhile
        (see :meth:`~tunebench.interference.Monitor.mark`)."""
        end = time.monotonic() + timeout
        while not self._conn.poll(max(0.0, min(interference.MARK_S, end - time.monotonic()))):
            self.mark()
            if time.monotonic() >= end:
                return False
        return True

    def mark(self) -> None:
        """A reading of the machine now, for a later trial's to span from (see
        :meth:`~tunebench.interference.Monitor.mark`): called while the run waits for builds."""
        self._monitor.mark()

    def pause(self, seconds: float) -> None:
        """Wait before a retry, the machine read meanwhile: the retry's reading spans the end of
        the pause at most, where the load that disturbed the last attempt may have gone."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(interference.MARK_S, left))
            self.mark()

    def _watch(self) -> tuple[str, Any]:
        """The job's answer, or "timeout" as soon as one call has run longer than the timeout."""
        began = time.monotonic()
        while not self._poll(interference.MARK_S):
            now, launched = time.monotonic(), self._clock[0]
            if launched and now - launched > self.timeout:
                return "timeout", None
            if now - began > PREPARE_TIMEOUT_S:
                return "timeout", (f"loading, verifying and timing the candidate ran longer than {PREPARE_TIMEOUT_S:g} "
                                   f"s, no call of it longer than the {self.timeout:g} s timeout")
            if not self._process.is_alive() and not self._conn.poll(0):
                return "died", _death(self._process)
        return self._receive(0)

    def _outcome(self, kind: str, message) -> dict:
        if kind == "result":
            return message
        if kind == "error":
            raise KernelError(message)
        self._stop()
        if kind == "timeout":  # a phase's limit names itself; a call's is --tune-timeout's
            return {"status": "timeout", "error": message or (
                f"a call, or loading the build, ran longer than the {self.timeout:g} s timeout")}
        return {"status": "crashed", "error": message}  # "died" or "crashed"

    def _last_words(self, lines: int = 3, tail: int = 4096) -> str:
        """The last lines the worker printed in this job (an assert's message before its abort),
        as words to add to its failure; nothing where it printed none."""
        fd = self._log.fileno()
        size = os.fstat(fd).st_size
        text = os.pread(fd, min(size, tail), max(0, size - tail)).decode(errors="replace")
        found = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
        return f"; it printed last: {' | '.join(found)}" if found else ""

    def restart(self) -> None:
        """The next job runs in a fresh worker: fresh buffers, fresh placement in physical
        memory, so that results of several jobs show how much separate processes differ."""
        self._stop()

    def close(self) -> None:
        """The worker stopped and its log closed: the run is over."""
        self._stop()
        self._log.close()
        shutil.rmtree(self.inputs, ignore_errors=True)

    def _stop(self) -> None:
        if self._process is not None:
            _kill(self._process.pid)
            if self._process.is_alive():
                self._process.kill()
            self._process.join(5)
            _reaped(self._guard)
            self._guard = None
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None
