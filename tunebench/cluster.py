"""Many devices and hosts through Ray: one worker per device, the driver owning the records.

``--tune-cluster ray://HOST:PORT`` connects through Ray Client, ``--tune-cluster auto`` to the
cluster this machine belongs to (``ray start``). Each device is a Ray actor that holds one GPU
(Ray sets ``CUDA_VISIBLE_DEVICES``) or, on the CPU target, ``--tune-cluster-cpus`` cores, and runs
a :class:`~tunebench.workers.Workers` of its own: it builds and measures on its host, in a worker
process, and sends back the result; only the driver (the pytest process) reads and writes the
records, so no filesystem is shared. The actors receive the suites' and templates' text from the
driver and import it from a temporary folder, removed with its workers' folder of inputs (see
:mod:`tunebench.prepared`) when the actor ends, however it ends (by the next device started on
that host, where what removes them was killed too): a host needs tunebench and Ray
(``pip install 'ray>=2.11'``) and its compilers, not the project. All devices must share one
fingerprint, since records are kept per device: a cluster of mixed devices is refused, naming
what it found.

A task's search stays the strategy's: the candidate it asks for is measured on one device while
the others measure the candidates it will ask next (:meth:`Strategy.upcoming
<tunebench.strategies.base.Strategy.upcoming>`); each result is told when the strategy asks for
that candidate, so the records and the choices are a one-device run's, sooner. Final rounds and
gate comparisons run on the first device; a gate's recorded build of a helper edited since
carries the records' text of it, which the device writes where it builds (see
:func:`~tunebench.kernel.kept_variant`): the driver's compile cache is on another host.

A device whose actor is lost gets no more jobs, and its job moves to another device. Where Ray
says the actor's own process died while its host lives on, as it ran the job (see
:meth:`ClusterWorkers._charged`), the job's candidate may have killed it (its worker's parent, as
``kill(getppid(), ...)`` does): a job in which :data:`~tunebench.records.DEATHS` devices died so
is that candidate's crash, as a local run records one that killed runs, rather than every device
lost to it. Where Ray's driver calls the actor only "unavailable" (it did not get the death's cause
in time, as from a busy head), the device is asked again until Ray says how it died, for
:data:`DEATH_CAUSE_S` at most, which a host lost costs its job before it moves on; one that answers
(only briefly unreachable, as it ran the job or as the job was sent it: asked on a thread of its
own, beside the job it still runs, see :data:`ASKED`) is kept, :data:`KEPT` times at most since it
last answered a job, and its job measured again; it gets no candidate ahead until it is done with
the run whose answer was lost. A host lost, or ``ray.kill``, is no job's doing: the job moves
on. A comparison's devices are never charged (see :meth:`ClusterWorkers.trial`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tunebench.compare import undisturbed
from tunebench.kernel import BINARY_SUFFIXES, REGISTRY, KernelError
from tunebench.owned import folder as owned_folder
from tunebench.records import DEATHS
from tunebench.workers import CompareJob, TrialJob, WorkerError

#: Files larger than this are not shipped to the devices (suites and templates are small).
MAX_FILE_BYTES = 1 << 20
#: The most bytes shipped in all: beyond it a folder holds more than a project's code.
MAX_SHIPPED_BYTES = 64 << 20
#: A device's copy of the project is ``tunebench-device-<pid>-...`` in its host's temp folder.
COPY_PREFIX = "tunebench-device-"
#: What Ray says of an actor whose own process died unexpectedly while its host lives on (the death
#: cause WORKER_DIED, its exit a SYSTEM_ERROR: a signal, a crash). Ray's error keeps it as its message
#: alone, not the cause's fields. A host lost says otherwise: the actor "is unavailable" (its raylet
#: gone with it, seen as its whole host was killed, its actors' processes first or not) or "its node
#: has died"; so do ``ray.kill`` ("killed by `ray.kill`") and an intended exit. Ray's memory monitor
#: raises its own error to the job, as before.
PROCESS_DIED = "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR"
#: How long the driver's Ray waits for a lost actor's death cause before it calls the actor only
#: "unavailable" (Ray's default: 1 s, which a busy head can miss): a device is charged only with
#: that cause (see :meth:`ClusterWorkers._charged`). Where the driver's Ray starts, and its
#: environment does not set it.
DEATH_INFO_MS = 10_000
#: The longest a device that Ray called "unavailable" is asked again how it died (a ready sent to
#: a dead actor fails with its death cause, once the driver's Ray has it): beyond DEATH_INFO_MS (a
#: busy head, or a user's setting of it, missed), and beyond the time the head takes to declare a
#: lost host dead (12-14 s seen with a raylet killed), which a job waits before it moves on from a
#: host lost. A device alive after all (only briefly unreachable) answers at once (see ASKED).
DEATH_CAUSE_S = 30.0
#: The devices' concurrency group of those asks: a thread of its own, beside the one that runs the
#: jobs in the order sent, so that a device alive after all answers while it still runs the job
#: whose answer Ray lost, not once that job is done (up to DEATH_CAUSE_S, its caller waiting).
ASKED = "asked"
#: How many times a device is kept (see ASKED) since it last answered a job: each time, its job is
#: sent again, so one whose connection keeps dropping would have it sent for good; past this it is
#: lost for the run, as any device Ray raised an error of.
KEPT = 3
#: The longest a device's ready may take to be answered once Ray said its process died: its answer,
#: or the death's, is there by then.
READY_S = 60.0


def _flag_files(variant) -> tuple[Path, ...]:
    """The binary files a variant's flags name (none where its declaration does not resolve)."""
    try:
        return tuple(f for f in variant.flag_files if f.suffix in BINARY_SUFFIXES)
    except KernelError:
        return ()


def project_files(root: Path) -> dict[str, str | bytes]:
    """The text of every file under the folders that hold the declared kernels' suites,
    templates and ``-I`` folders, their subfolders too (a helper package beside the suites, a
    header in a subfolder), by path relative to ``root``: what a device needs to import the
    suites and build as this host does. Hidden folders, caches and virtual environments stay."""
    from tunebench.lookup import package_root
    folders = set()
    for kernel in REGISTRY.values():
        module = kernel.collected_from or kernel.declared_in
        package = package_root(Path(module)) if module is not None else None
        if package is not None:  # its suite imports from the outermost package (from ..common import ...)
            folders.add(package)
        for variant in kernel.variants.values():
            if variant.origin is not None:
                folders.add(variant.origin)
            with contextlib.suppress(KernelError):  # a template not found: its own tasks say so, not every one
                if variant.text is None:
                    folders.add(variant.path.parent)
                folders.update(variant.include_dirs)
                folders.update(variant.computed_include_dirs)
                folders.update(f.parent for f in variant.flag_files)
    binary = {f.resolve() for kernel in REGISTRY.values() for variant in kernel.variants.values()
              for f in _flag_files(variant)}  # an object or library the flags link: sent as its bytes
    found, shipped = {}, 0
    for folder in folders:
        try:
            relative = folder.resolve().relative_to(root.resolve())
        except ValueError:
            continue  # outside the project: a device cannot place it
        if not folder.is_dir():  # an -I folder that is not there: the build says what it misses
            continue
        for path in _code(folder):
            name = str(relative / path.relative_to(folder))
            if name in found:  # a folder inside another one sent
                continue
            try:
                text = path.read_bytes() if path.resolve() in binary else path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            shipped += len(text if isinstance(text, bytes) else text.encode())
            if shipped > MAX_SHIPPED_BYTES:
                raise WorkerError(f"--tune-cluster: the suites' and templates' folders under {root} hold more than "
                                  f"{MAX_SHIPPED_BYTES >> 20} MiB of text to send the devices (at {path}): keep "
                                  f"data out of them")
            found[name] = text
    return found


def suite_files(root: Path) -> list[str]:
    """The declared kernels' suites, by path relative to ``root``: what a device imports (not
    every test module of the folders it gets); the module pytest collected each from, where it
    did (a helper module beside it may declare it), as the path reaches it."""
    found = set()
    for kernel in REGISTRY.values():
        module = kernel.collected_from or kernel.declared_in
        if module is not None and Path(os.path.abspath(module)).is_relative_to(os.path.abspath(root)):
            found.add(os.path.relpath(os.path.abspath(module), os.path.abspath(root)))
    return sorted(found)


#: A device's sentinel: run with the actor's pid and folders, it removes them once the actor's
#: process has ended, however it ended (ray.kill, a signal, its driver gone: close never ran).
#: It forks and the fork waits, since Ray kills an actor's children with it, whatever their
#: session, but not by default their children: where the raylet is their subreaper
#: (RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper) it kills them too, and the OOM
#: killer may end a sentinel; then the next device started on the host removes the folders of
#: ended devices, named by their pid (see :func:`tunebench.owned.folder`). Orphaned, the fork
#: is init's child: under a PID 1 that reaps none (a container's entrypoint, no init) it stays a
#: zombie once done, a pid and no memory or folder, per device started. Without a pidfd it asks
#: the actor's pid (kill 0) every half second: a process there that it may not signal is another
#: user's, which took the pid once its own user's actor had ended (records.alive, which asks
#: whether any process holds a pid, says yes). A fresh interpreter, not a fork of the actor: it
#: holds none of the actor's sockets and bears no "ray::" title, which ``ray stop`` kills; the
#: standard library alone, since importing tunebench to wait would cost half a second and 30 MB
#: more per device.
SENTINEL = """\
import contextlib, os, select, shutil, sys, time
owner = int(sys.argv[1])
try:
    ended = os.pidfd_open(owner)  # the actor's: it waits for this process meanwhile
except (OSError, AttributeError):  # no pidfd here (Linux before 5.3, another system): asked every half second
    ended = None
if os.fork():
    os._exit(0)
if ended is not None:
    select.select([ended], [], [])  # readable once the actor has ended
else:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the actor has ended (see above)
        while True:
            os.kill(owner, 0)
            time.sleep(0.5)
for folder in sys.argv[2:]:
    shutil.rmtree(folder, ignore_errors=True)
"""


def _sentinel(*folders: Path) -> None:
    """Have ``folders`` removed once this process has ended (see :data:`SENTINEL`); a sentinel
    that did not start (no interpreter, no process left to fork) costs a killed actor's folders
    until the next device on this host, not the device."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run([sys.executable, "-c", SENTINEL, str(os.getpid()), *map(str, folders)], start_new_session=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _crashed(deaths: int, began: float) -> dict:
    """The result of a trial in which ``deaths`` devices' processes died (see
    :meth:`ClusterWorkers._charged`): its candidate's crash, as a local run records one that
    killed runs."""
    return {"status": "crashed", "retries": 0, "cost_s": time.monotonic() - began,
            "error": f"the cluster's devices died {deaths} times while measuring this config, each its actor's "
                     f"own process (the candidate killed it, as kill(getppid(), ...) does, or the out-of-memory "
                     f"killer took it), and are lost for this run: recorded as crashed, not measured again "
                     f"(--tune-retry-failed measures it)"}


def _code(folder: Path, seen: frozenset = frozenset()):
    """The files under ``folder`` worth sending, its subfolders' too (a linked one as well, but
    not one leading back to a folder on the way: a loop)."""
    seen = seen | {folder.resolve()}
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            if not (path.resolve() in seen or any(s.is_relative_to(path.resolve()) for s in seen)
                    or path.name.startswith(".") or path.name == "__pycache__" or (path / "pyvenv.cfg").exists()):
                yield from _code(path, seen)
        elif path.is_file() and path.suffix != ".pyc" and path.stat().st_size <= MAX_FILE_BYTES:
            yield path


class Device:
    """One device of the cluster (the body of a Ray actor): a worker process on its host."""

    def __init__(self, target: str, timeout: float, threads: int | None, retry_failed: bool = False):
        """``retry_failed``: the driver's ``--tune-retry-failed``, applied here (this device's
        process, on its host's clock) to the compile errors its host's cache holds."""
        if threads:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        from tunebench.backends.cache import retry_refusals
        retry_refusals(retry_failed)  # before the worker is forked, which builds the candidates
        from tunebench.workers import Workers
        self.workers = Workers(target, timeout=timeout)
        self.target = target
        self.root = owned_folder(COPY_PREFIX)  # the project's copy, once loaded; ended devices' removed
        _sentinel(self.root, self.workers.inputs)

    def load(self, files: dict[str, str | bytes], suites: list[str]) -> dict[str, str]:
        """Write the project's files to this device's folder and import its ``suites``, so that the
        worker knows the kernels the jobs name; the suites that failed to import, by path
        relative to the project, with their errors (the others' jobs run)."""
        from tunebench.lookup import load_suites
        root = self.root
        for relative, text in files.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                (root / relative).write_bytes(text)
            else:  # UTF-8, as it was read, whatever either host's locale
                (root / relative).write_text(text, encoding="utf-8")
        failed: list[str] = []
        for suite in suites:
            if not (root / suite).is_file():  # outside the folders sent: said, not skipped
                failed.append(f"{root / suite}: FileNotFoundError: not among the files sent (its folder is no "
                              f"suite's, template's or -I folder)")
                continue
            load_suites(root / suite, failed)
        return {error.split(":", 1)[0][len(str(root)) + 1:]: error.replace(f"{root}/", "") for error in failed}

    def ready(self) -> None:
        """Nothing: asked just before each job, its answer says that the device was alive as the
        job began (see :meth:`ClusterWorkers._charged`)."""

    def alive(self) -> None:
        """Nothing: asked in ASKED, beside the job it runs, its answer says that a device Ray
        called "unavailable" lives on (see :meth:`ClusterWorkers._death`)."""

    # What @ray.method(concurrency_group=ASKED) sets, without Ray, which only --tune-cluster needs: on
    # the method, not a call's options, which Ray Client refuses ("Invalid option keyword"), and
    # here, where a Ray Client server imports the class, not only on the driver's.
    alive.__ray_concurrency_group__ = ASKED

    def fingerprint(self) -> dict:
        from tunebench.backends import fingerprint
        return fingerprint(self.target)

    def compiler(self, kernel: str) -> str | None:
        """The compiler this host builds a kernel's candidates with (see :func:`tunebench.backends.compiler`)."""
        from tunebench.backends import compiler
        return compiler(self.target, REGISTRY[kernel].variant(self.target))

    def trial(self, job: TrialJob | CompareJob) -> tuple[dict, dict[str, bool]]:
        """The job's result, and this device's builds."""
        return self.workers.trial(job), self.workers.builds

    def measure(self, job: TrialJob) -> tuple[dict, dict[str, bool]]:
        """The job's result, measured again while disturbed (as the driver's session does for
        the jobs it runs itself), and this device's builds."""
        return undisturbed(self.workers, job), self.workers.builds

    def restart(self) -> None:
        self.workers.restart()

    def pause(self, seconds: float) -> None:
        self.workers.pause(seconds)

    def close(self) -> None:
        """The worker stopped and the project's copy removed: a host serves many tunes."""
        self.workers.close()
        shutil.rmtree(self.root, ignore_errors=True)


class ClusterWorkers:
    """The devices of a Ray cluster behind the interface of :class:`~tunebench.workers.Workers`,
    plus :meth:`submit` for measuring on the other devices at once."""

    def __init__(self, address: str, target: str, root: Path, timeout: float = 10.0,
                 cpus_per_device: int = 1, retry_failed: bool = False):
        """``target``: cpu, cuda, or auto (cuda where the cluster has GPUs). ``retry_failed``:
        ``--tune-retry-failed``, which each device applies to its own host's compile cache."""
        try:
            import ray
        except ImportError:
            raise WorkerError("--tune-cluster needs Ray: pip install 'ray>=2.11'") from None
        if not hasattr(ray.exceptions, "ActorUnavailableError"):  # where a death's cause is missed: see _death
            raise WorkerError(f"--tune-cluster needs Ray 2.11 or later (this is {ray.__version__}): an earlier Ray "
                              f"says no cause of a device's death it missed, so a candidate that kills its device "
                              f"would take every device of the cluster: pip install 'ray>=2.11'")
        self._ray = ray
        if not ray.is_initialized():
            os.environ.setdefault("RAY_timeout_ms_task_wait_for_death_info", str(DEATH_INFO_MS))
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except Exception as e:  # noqa: BLE001 - Ray raises several kinds; one line says which
                raise WorkerError(f"--tune-cluster {address}: cannot connect to the Ray cluster "
                                  f"({type(e).__name__}: {str(e).splitlines()[0]})") from None
        resources = ray.cluster_resources()
        if target == "auto":
            target = "cuda" if resources.get("GPU") else "cpu"
        cpu = target == "cpu"
        count = int(resources.get("CPU", 0) // cpus_per_device) if cpu else int(resources.get("GPU", 0))
        if count < 1:
            raise WorkerError(f"the Ray cluster at {address} has no {'CPU' if cpu else 'GPU'} for a "
                              f"{target} device: {resources}")
        actor = ray.remote(num_cpus=cpus_per_device if cpu else 1, num_gpus=0 if cpu else 1,
                           concurrency_groups={ASKED: 1})(Device)
        self.devices = [actor.remote(target, timeout, cpus_per_device if cpu else None, retry_failed)
                        for _ in range(count)]
        self.root = root
        self._loaded = False
        prints = ray.get([d.fingerprint.remote() for d in self.devices])
        if any(p != prints[0] for p in prints):
            raise WorkerError("the cluster's devices differ, and records are kept per device: "
                              + "; ".join(sorted({str(p) for p in prints})))
        self.fingerprint = prints[0]
        self.target = target
        self.timeout = timeout
        self._builds: list[dict[str, bool]] = [{} for _ in self.devices]
        self._busy: list[Future | None] = [None] * len(self.devices)
        self._lost: set[int] = set()  # devices whose host (or actor) died: no job goes there again
        self._kept = [0] * len(self.devices)  # times each was kept since it last answered a job (see KEPT)
        # Ray's error to a job whose device it did not hear the death of in time (see _death)
        self._unavailable = ray.exceptions.ActorUnavailableError
        self._sending = threading.Lock()  # a call and the ready asked just before it, sent together (see _start)
        self._closed = False  # no call is sent once set (a moved job's thread may outlive the run)
        self._unimported: dict[str, str] = {}  # suite, relative to the root -> why the devices cannot import it
        self._compilers: dict[str, str | None] = {}  # kernel -> what the devices build it with

    @property
    def builds(self) -> dict[str, bool]:
        """As :attr:`Workers.builds`, over every device: an artefact one device compiled in this
        run is this run's, though another found it in a compile cache they share."""
        merged: dict[str, bool] = {}
        for builds in self._builds:
            for artefact, made in builds.items():
                merged[artefact] = merged.get(artefact, False) or made
        return merged

    def _collect(self, index: int, answer: tuple[dict, dict[str, bool]]) -> dict:
        result, self._builds[index] = answer
        self._kept[index] = 0
        return result

    def _load(self, kernel_name: str) -> None:
        """The suites to every device, once they are collected here (the first job's time); a
        job of a kernel whose suite the devices cannot import fails its task alone."""
        if not self._loaded:
            files, suites = project_files(self.root), suite_files(self.root)
            for index, loading in enumerate([d.load.remote(files, suites) for d in self.devices]):
                try:
                    self._unimported.update(self._ray.get(loading))
                except self._ray.exceptions.RayActorError:
                    self._lost.add(index)
            self._loaded = True
        kernel = REGISTRY.get(kernel_name)
        if kernel is not None and kernel.declared_in is not None and self._unimported:
            try:
                suite = str(kernel.declared_in.resolve().relative_to(self.root.resolve()))
            except ValueError:
                return
            if suite in self._unimported:
                raise KernelError(f"kernel {kernel_name!r}: its suite does not import on the cluster's devices, "
                                  f"which get the files under the suites', templates' and -I folders: "
                                  f"{self._unimported[suite]}")

    def compiler(self, kernel: str, variant) -> str | None:
        """What the devices build a kernel's candidates with, each on its own host, asked once:
        a trial is kept with the compiler that built it, not the driver's. Devices that build
        with different compilers are refused, as devices of different fingerprints are; None
        where the devices cannot import the kernel's suite (its jobs say why)."""
        if kernel not in self._compilers:
            try:
                self._load(kernel)
            except KernelError:
                return None
            found: dict[str | None, int] = {}
            for index in range(len(self.devices)):
                if index not in self._lost:
                    try:
                        found.setdefault(self._ray.get(self.devices[index].compiler.remote(kernel)), index)
                    except self._ray.exceptions.RayActorError:
                        self._lost.add(index)
            if len(found) > 1:
                raise WorkerError(f"kernel {kernel!r}: the cluster's devices build it with different compilers, and "
                                  f"a trial is reused only under its own: " + "; ".join(
                                      f"device {i}: {c or 'unknown'}" for c, i in sorted(found.items(), key=lambda x: x[1])))
            self._compilers[kernel] = next(iter(found), None)
        return self._compilers[kernel]

    def _first(self) -> int:
        """The device final rounds and gate comparisons run on: the first one not lost."""
        index = next((i for i in range(len(self.devices)) if i not in self._lost), None)
        if index is None:
            raise WorkerError("--tune-cluster: every device of the cluster was lost (its hosts died or left)")
        return index

    def trial(self, job: TrialJob | CompareJob) -> dict:
        """The job on the first device (final rounds and gate comparisons: one device throughout),
        on the next one where that device was lost; a trial's crash where DEATHS devices'
        processes died in it (see :meth:`_charged`). A comparison is never charged: its crash
        names no arm, so a final round would drop every finalist and serve the heuristic in place
        of an earlier confirmed pick, on two deaths a host's memory killer may have dealt."""
        self._load(job.kernel)
        charged = job if isinstance(job, TrialJob) else None
        index, answer = self._on_first(lambda device: device.trial.remote(job), charged)
        return answer if index is None else self._collect(index, answer)

    def restart(self) -> None:
        self._on_first(lambda device: device.restart.remote())

    def pause(self, seconds: float) -> None:
        """A retry's pause, on the device that measures it (see :meth:`Workers.pause`)."""
        self._on_first(lambda device: device.pause.remote(seconds))

    def _on_first(self, call: Callable, job: TrialJob | None = None) -> tuple[int | None, object]:
        """The first device's index and its answer to ``call`` (of its actor), the next device's
        where that one was lost: a restart or a pause sent to a lost host raised Ray's error, with
        its traceback, where the job after it would have moved on. None and the job's crash where
        ``job``, the call's, is the DEATHS-th device's death that it caused (see :meth:`_charged`)."""
        began, deaths = time.monotonic(), 0
        while True:
            index = self._first()
            ready, answer = self._start(index, call)
            try:
                return index, self._ray.get(answer)
            except self._ray.exceptions.RayActorError as error:
                self._lost.add(index)
                if job is not None and (deaths := deaths + self._charged(index, ready, error)) >= DEATHS:
                    return None, _crashed(deaths, began)
            except self._ray.exceptions.RayTaskError as error:
                raise self._unwrapped(error) from None

    def _start(self, index: int, call: Callable) -> tuple:
        """Device ``index``'s ready and its answer to ``call``, sent together: next to each other
        in the device's queue, which it runs in the order sent (a call that another thread sends it
        goes before both or after), so that the ready's answer says the device lived until the
        call began."""
        return self._call(index, lambda device: (device.ready.remote(), call(device)))

    def _call(self, index: int, send: Callable) -> Any:
        """``send(device)`` of device ``index``, unless the devices were closed: Ray may be shut down
        since, where a call starts a new local Ray (a moved job's thread may outlive the run)."""
        with self._sending:
            if self._closed:
                raise WorkerError("--tune-cluster: the cluster's devices were closed")
            return send(self.devices[index])

    def _charged(self, index: int, ready, error: BaseException) -> bool:
        """Whether the loss of device ``index``, Ray's ``error`` to the job it was sent, is the
        job's doing (see DEATHS): Ray says the actor's own process died while its host lives on
        (:data:`PROCESS_DIED`), in ``error`` or, where that called the actor only "unavailable",
        when asked again (see :meth:`_death`), and the device answered the ``ready`` sent just
        before the job, so that it died running it. Not a host lost or ``ray.kill``, which Ray
        tells apart, nor a death before the job reached the device: killed by the job ahead of
        it, or with the rest of its host, it answers neither (a job moved to a device its host's
        death took too counted that one death twice). A device unreachable as the job was sent
        (its ready "unavailable" too) is asked all the same whether it lives on (see
        :meth:`_death`), and never charged."""
        if PROCESS_DIED not in str(error) and not isinstance(error, self._unavailable) or self._closed:
            return False
        try:
            self._ray.get(ready, timeout=READY_S)
        except self._unavailable as unreachable:
            self._death(index, unreachable)
            return False
        except self._ray.exceptions.RayError:  # answered by the death too (or, past READY_S, by nothing)
            return False
        return PROCESS_DIED in self._death(index, error)

    def _death(self, index: int, error: BaseException) -> str:
        """Ray's word on how device ``index`` died: ``error``'s, or where that calls the actor only
        "unavailable" (the driver's Ray did not get its death's cause in time, see DEATH_INFO_MS),
        the error to an ``alive`` sent it since (in ASKED), asked again until one says, for
        DEATH_CAUSE_S at most (a host lost stays "unavailable" until the head declares it dead);
        nothing where none said in time, or the device answered: it was not dead after all, only
        briefly unreachable, and is no longer lost, unless kept KEPT times since it last answered
        a job."""
        deadline = time.monotonic() + DEATH_CAUSE_S
        while isinstance(error, self._unavailable):
            if time.monotonic() >= deadline:
                return ""
            time.sleep(0.1)  # not a loop of refused connections while the head has yet to say
            try:
                self._ray.get(self._call(index, lambda device: device.alive.remote()),
                              timeout=max(0.0, deadline - time.monotonic()))
                self._kept[index] += 1
                if self._kept[index] <= KEPT:
                    self._lost.discard(index)
                return ""
            except self._ray.exceptions.GetTimeoutError:
                return ""
            except self._ray.exceptions.RayActorError as again:
                error = again
        return str(error)

    def _others(self) -> list[int]:
        """The devices besides the first that have nothing in flight."""
        first = self._first()
        return [i for i in range(first + 1, len(self.devices))
                if i not in self._lost and (self._busy[i] is None or self._busy[i].done())]

    def idle(self) -> int:
        """How many devices besides the first have nothing in flight."""
        return len(self._others())

    def submit(self, job: TrialJob) -> Future:
        """Measure ``job`` on an idle device other than the first; its result when done (from
        the first device where that one's host is lost meanwhile)."""
        self._load(job.kernel)
        idle = self._others()  # empty where a device was lost since the caller counted them
        index = idle[0] if idle else self._first()
        result: Future = Future()
        self._send(index, job, result)
        self._busy[index] = result
        return result

    def _send(self, index: int, job: TrialJob, result: Future, deaths: int = 0, began: float | None = None) -> None:
        """Measure ``job`` on device ``index`` into ``result``; ``deaths``: the devices whose
        process died in it so far (see :meth:`_charged`), since ``began``."""
        began = time.monotonic() if began is None else began
        ready, answer = self._start(index, lambda device: device.measure.remote(job))

        def settle(done: Future) -> None:
            error = done.exception()
            if error is None:
                result.set_result(self._collect(index, done.result()))
            elif isinstance(error, self._ray.exceptions.RayActorError):
                self._lost.add(index)
                # off the thread of Ray's that runs this: it may answer the ready that _charged waits for
                threading.Thread(target=self._moved, args=(job, result, deaths, began, index, ready, error),
                                 daemon=True).start()
            else:
                result.set_exception(self._unwrapped(error))
        answer.future().add_done_callback(settle)

    def _moved(self, job: TrialJob, result: Future, deaths: int, began: float, index: int, ready,
               error: BaseException) -> None:
        """A job whose device ``index`` was lost: its crash where that device is the DEATHS-th that died in
        it, else measured again where the final rounds run. Whatever this raises is the job's
        result (every device lost, Ray's error, a bug): in this thread it would leave the future
        unresolved, and the tune waiting on it for good."""
        try:
            deaths += self._charged(index, ready, error)
            if deaths >= DEATHS:
                result.set_result(_crashed(deaths, began))
                return
            self._send(self._first(), job, result, deaths, began)
        except BaseException as failed:  # noqa: BLE001 - whatever it is, the job's result
            result.set_exception(self._unwrapped(failed))
            return
        if index not in self._lost:  # kept: busy with the run whose answer Ray lost (and the job, if sent it again)
            self._busy[index] = busy = Future()
            self._finished(index)
            busy.set_result(None)

    def _finished(self, index: int) -> None:
        """Wait until device ``index`` is done with every call sent it so far (the next one answers),
        or is lost; asked again where Ray calls it unavailable once more, as it may once an outage
        is over, for DEATH_CAUSE_S at most."""
        deadline = time.monotonic() + DEATH_CAUSE_S
        while True:
            try:
                return self._ray.get(self._start(index, lambda device: None)[0])
            except WorkerError:  # closed: its run is over
                return
            except self._unavailable:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.1)
            except self._ray.exceptions.RayError:
                return

    def _unwrapped(self, error: BaseException) -> BaseException:
        """A device's :class:`WorkerError` as its Workers raised it, the one line a local run says,
        not Ray's wrap of it (a traceback of the device's frames)."""
        if isinstance(error, self._ray.exceptions.RayTaskError) and isinstance(error.cause, WorkerError):
            return error.cause
        return error

    def close(self) -> None:
        with self._sending:
            self._closed = True
        try:  # each device cleans up (after a job still in flight: not for long, on Ctrl-C); a lost one has none
            self._ray.wait([d.close.remote() for d in self.devices], num_returns=len(self.devices), timeout=5)
        except Exception:  # noqa: BLE001 - Ray's errors of a lost actor: it is killed below all the same
            pass
        for device in self.devices:
            self._ray.kill(device)
        self.devices = []
