"""The on-disk compile cache, shared by the backends that run a compiler.

An artefact is named by a hash of everything that shapes it (expanded source with its #defines,
flags, compiler identity, target), so a second run compiles nothing and each variant gets its
own file name: a shared library loaded twice from one path would not be loaded again. Compiler
errors are cached too, next to where the artefact would be.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tunebench.backends.base import BuildEnvironmentError, CompileError
from tunebench.owned import folder
from tunebench.records import write_atomic


def default_root() -> Path:
    """``$TUNEBENCH_CACHE``, else ``$XDG_CACHE_HOME/tunebench``, else ``~/.cache/tunebench``; a
    user without a home (a container's arbitrary uid: HOME unset, or one it cannot write, ``/``
    under ``docker run -u 1000``, nobody's ``/nonexistent``) gets one in the temp folder."""
    if os.environ.get("TUNEBENCH_CACHE"):
        return Path(os.environ["TUNEBENCH_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "tunebench"
    try:
        home = Path.home() / ".cache" / "tunebench"
        home.mkdir(parents=True, exist_ok=True)
        return home
    except (RuntimeError, OSError):  # no HOME and no passwd entry, or a home this user cannot write
        return _own_folder(Path(tempfile.gettempdir()) / f"tunebench-cache-{os.getuid()}")


def _own_folder(path: Path) -> Path:
    """``path``, a folder of this user's alone: in a shared temp folder another user could make it
    first and plant libraries under the names the cache loads. One this user made before (an
    earlier tunebench, with the umask's mode) is closed to the others."""
    refused = BuildEnvironmentError(f"{path} is not a folder of this user's alone, so no compile cache goes there: "
                                    f"set TUNEBENCH_CACHE (or HOME) to one")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        found = os.lstat(path)
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
            raise refused
        if found.st_mode & 0o077:
            path.chmod(0o700)
    except OSError as e:
        raise BuildEnvironmentError(f"{path}: a compile cache cannot be made there ({e.strerror or e}): set "
                                    f"TUNEBENCH_CACHE (or HOME) to a folder of this user's") from None
    return path


#: Compilers run with a temporary folder of their own (see :func:`_compiled`).
LITTERING = ("nvcc",)


@contextlib.contextmanager
def scratch(parent: Path, prefix: str) -> Iterator[str]:
    """A temporary folder in ``parent`` for nvcc's files, removed after: named by this process
    and host (:func:`~tunebench.owned.folder`), so that those of processes killed mid-compile
    (a CI job's timeout), which nothing else removes, go with the next (a compile-check killed so
    left nvcc's megabytes in /tmp at every run)."""
    path = folder(prefix, parent)
    try:
        yield str(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def compiler_temp(command: Sequence[str], parent: Path, prefix: str) -> contextlib.AbstractContextManager[str | None]:
    """The TMPDIR a compiler's ``command`` runs with: nvcc's a :func:`scratch` folder, a C
    compiler's the user's (None): one behind a wrapper such as sccache starts a server that
    outlives the folder."""
    return scratch(parent, prefix) if Path(command[0]).name in LITTERING else contextlib.nullcontext()


#: nvcc's intermediate files, named afresh by every run (ptxas names its PTX input).
NVCC_TEMP = re.compile(r"\S*/tmpxft_[\w-]+\.(\w+)")


def excerpt(message: str, lines: int = 12) -> str:
    """The first lines of a compiler message that say what is wrong (the linker's ``undefined
    reference`` included), nvcc's temporary files named alike every run (``<its ptx>``), so that
    the same error reads the same in every config."""
    message = NVCC_TEMP.sub(r"<its \1>", message)
    wanted, owned = [], False  # a macro's notes go with their own line: a warning's, left out, take theirs along
    for ln in message.splitlines():
        if "in expansion of macro" in ln:
            if owned:
                wanted.append(ln)
        elif "error" in ln.lower() or "undefined reference" in ln:
            wanted.append(ln)
            owned = True
        elif not ln[:1].isspace():  # another line of gcc's own (a warning, its note), not a quote of the source
            owned = False
    return "\n".join((wanted or message.splitlines())[:lines]).strip()


class CompilerKilled(BuildEnvironmentError):
    """The compiler was killed by a signal from outside (Ctrl-C, the out-of-memory killer, a limit:
    SIGXFSZ under ``ulimit -f``) or ran out of memory (``ulimit -v``): the machine's doing, no verdict
    on the candidate, so nothing is cached or recorded, and a later run compiles it again."""


#: What an earlier tunebench cached for a compiler killed by a signal, as if it were its error,
#: and a driver's words where a signal sent from outside killed its compiler proper, assembler or
#: linker (gcc then exits 1 or 4: "<the signal's name> signal terminated program cc1|as|ld"). Not
#: a segmentation fault or an abort: an internal compiler error on one candidate's code (a vector
#: size gcc mishandles) is that candidate's compile error, and stopped the whole task otherwise.
_KILLED = re.compile(r"exited -\d+\s*\Z|(?:Killed|File size limit exceeded|CPU time limit exceeded|Terminated|"
                     r"Interrupt|Hangup) signal terminated program|terminated program \S+ signal")
#: A compiler's words where it ran out of memory (``ulimit -v``, a full machine): cc1's, ld's, the loader's.
_EXHAUSTED = re.compile(r"out of memory|memory exhausted|Cannot allocate memory|failed to map segment")
#: A compiler's words where the machine kept it from reading or writing its files: no verdict on
#: the source (and none that an earlier tunebench cached as its compile error holds).
_ENVIRONMENT = re.compile(r"No space left on device|Disk quota exceeded|Read-only file system|Permission denied|"
                          r"Too many open files|cannot create temporary file|File too large")
#: A line that quotes the template's own ``#error`` or ``#warning``: its words are the author's.
_QUOTED = re.compile(r"#\s*(?:error|warning)\b")


def _machine(pattern: re.Pattern, said: str) -> re.Match | None:
    """``pattern`` in what a compiler said, outside the lines quoting the template's own
    ``#error`` (gcc places its own failures at the source's line too: ``k.c:3000:1: fatal error:
    error writing to /tmp/ccX.s: No space left on device``)."""
    return next(filter(None, (pattern.search(line) for line in said.splitlines() if not _QUOTED.search(line))),
                None)


def run_compiler(command: Sequence[str], src: Path, out: Path, inputs: Mapping[str, str] | None = None) -> str | None:
    """Run a compiler ``command`` with ``{src}`` and ``{out}`` filled in: None where it succeeds,
    else what it said; :class:`CompilerKilled` where a signal ended it. ``inputs``: the text to
    build in place of each source file the command names (a rendered copy, written beside ``out``
    for the command alone)."""
    copies = {given: out.with_name(f"{out.stem}-input{i}{Path(given).suffix}") for i, given in enumerate(inputs or {})}
    try:
        for given, copy in copies.items():
            try:
                copy.write_text(inputs[given], encoding="utf-8")
            except OSError as e:  # the machine's (a full disk), as the compiler's own writes are
                raise BuildEnvironmentError(f"the rendered copy of {given} could not be written to {copy.parent} "
                                            f"({e.strerror or e}): no candidate can be built, and nothing is cached "
                                            f"or recorded; free space or fix the permissions there and tune again"
                                            ) from None
        return _compiled([str(copies.get(c, c)) for c in command], src, out)
    finally:
        for copy in copies.values():
            copy.unlink(missing_ok=True)


def _compiled(command: Sequence[str], src: Path, out: Path) -> str | None:
    """:func:`run_compiler`'s run of the command, its inputs in place; nvcc's with a temporary
    folder (TMPDIR) of its own beside ``out`` (see :func:`compiler_temp`), removed after it: it left
    an empty ``*.lgenfe.bc`` in /tmp at every CUB candidate that failed to compile."""
    own = Path(command[0]).name in LITTERING
    with contextlib.ExitStack() as temp:
        try:
            tmp = temp.enter_context(compiler_temp(command, Path(os.path.abspath(out.parent)), ".tmp-"))
        except OSError as e:
            raise BuildEnvironmentError(f"{out.parent}: the compiler's temporary folder cannot be made there "
                                        f"({e.strerror or e}): no candidate can be built, and nothing is cached or "
                                        f"recorded; free space or fix the permissions there and tune again") from None
        tmp = tmp or tempfile.gettempdir()
        try:
            proc = subprocess.run([c.format(src=src, out=out) for c in command], capture_output=True, text=True,
                                  env={**os.environ, "TMPDIR": tmp} if own else None)
        except OSError as e:  # no such compiler: each candidate was recorded crashed with a FileNotFoundError
            raise BuildEnvironmentError(f"{command[0]} cannot be run ({e.strerror or e}): no candidate can be built, "
                                        f"and nothing is cached or recorded; install it, put it on PATH or name "
                                        f"another (TUNEBENCH_CC for C, CUDA_HOME for nvcc)") from None
    said = proc.stderr or proc.stdout
    killed = _machine(_KILLED, said) if proc.returncode > 0 else None
    exhausted = _machine(_EXHAUSTED, said) if proc.returncode > 0 else None
    if proc.returncode < 0 or killed or exhausted:
        how = (f"was killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0 else
               f"was killed ({killed.string.strip()})" if killed else f"ran out of memory ({exhausted.string.strip()})")
        raise CompilerKilled(f"{command[0]} {how} while compiling: the machine or its limits stopped it (Ctrl-C, "
                             f"the out-of-memory killer, ulimit -f, -v or -t), not the candidate: nothing is cached "
                             f"or recorded; lift the limit or free memory and tune again")
    found = _machine(_ENVIRONMENT, said) if proc.returncode else None
    if found:
        raise BuildEnvironmentError(
            f"{command[0]} could not read or write its files ({found.group(0)}: {found.string.strip()}): no "
            f"candidate can be built, and nothing is cached or recorded; free space or fix the permissions where it "
            f"works ({'' if own else f'TMPDIR, now {tmp}, and '}the build folder, {src.parent}) and tune again")
    return None if proc.returncode == 0 else said or f"{command[0]} exited {proc.returncode}"


def cache_key(tag: str, source: str) -> str:
    """What names the artefact of ``source`` compiled as ``tag`` says (see :meth:`BuildCache.get`),
    and the trials of its refusal: the same key is the same build."""
    return hashlib.sha256(f"{tag}\0{source}".encode()).hexdigest()[:24]


#: Where set (seconds since the epoch), a compile error cached before it is compiled again, not
#: served (see :func:`retry_refusals`).
REFUSALS_SINCE: float | None = None
#: Where set (seconds since the epoch, this host's clock), when this process's pytest run (a tune
#: or a gate) or a cluster device began: a compile error cached since is this run's own, not "as an
#: earlier tune recorded it" (see :attr:`~tunebench.backends.base.CompileError.earlier`).
RUN_SINCE: float | None = None


def retry_refusals(retry: bool) -> None:
    """Whether compile errors cached before now are compiled again (``--tune-retry-failed``), set
    at each pytest run's start (none: a tune before it in the process asked its own), by each tune
    in the tuning process before it forks its workers, and by each cluster device in its own
    process, on its own host's clock. A refusal is cached under the whole command, and what
    fixed it may lie outside it (a library installed, a header of a system folder): served again,
    the retry built nothing. Now is also when the run began (:data:`RUN_SINCE`)."""
    global REFUSALS_SINCE, RUN_SINCE
    RUN_SINCE = time.time()
    REFUSALS_SINCE = RUN_SINCE if retry else None


class BuildCache:
    """Artefacts under ``root``: ``<name>-<hash><suffix>``, beside them the source and any error."""

    def __init__(self, root: Path | None = None):
        self.root = root or default_root()
        self.compiled = 0  # compiler runs by this process, failed ones included
        self.reused = 0  # artefacts (or cached errors) found on disk

    def get(self, name: str, source: str, tag: str, suffixes: tuple[str, str],
            compile_fn: Callable[[Path, Path], str | None]) -> tuple[Path, float, bool]:
        """The artefact of ``source`` compiled as ``tag`` says (flags, compiler, target):
        ``(path, compile seconds, cached)``. ``suffixes`` are the source's and the artefact's;
        ``compile_fn(source_path, out_path)`` returns None, or the compiler's error text."""
        key = cache_key(tag, source)
        with self._writing():
            self.root.mkdir(parents=True, exist_ok=True)
        src_suffix, out_suffix = suffixes
        out = self.root / f"{name}-{key}{out_suffix}"
        err = self.root / f"{name}-{key}.err"
        if out.exists():
            self.reused += 1
            return out, 0.0, True
        with self._writing():
            written = err.stat().st_mtime if err.exists() else None
            cached = err.read_text(encoding="utf-8") if written is not None and (
                REFUSALS_SINCE is None or written >= REFUSALS_SINCE) else None
        if cached is not None and not any(_machine(p, cached) for p in (_KILLED, _EXHAUSTED, _ENVIRONMENT)):
            self.reused += 1  # an earlier run's verdict, or this run's own (another task's, another device's)
            raise CompileError(cached, cached=True, earlier=RUN_SINCE is None or written < RUN_SINCE)
        stamp = f"{os.getpid()}-{time.monotonic_ns()}"
        src = self.root / f"{name}-{key}{src_suffix}"
        with self._writing():
            write_atomic(src, source, stamp)
        tmp = out.with_name(f"{out.stem}.{stamp}{out_suffix}")
        start = time.perf_counter()
        self.compiled += 1
        try:
            failure = compile_fn(src, tmp)
        except (CompilerKilled, BuildEnvironmentError):
            tmp.unlink(missing_ok=True)
            raise
        seconds = time.perf_counter() - start
        if failure is not None:
            tmp.unlink(missing_ok=True)
            with self._writing():
                write_atomic(err, excerpt(failure), stamp)
            raise CompileError(excerpt(failure))
        with self._writing():
            os.replace(tmp, out)
        return out, seconds, False

    def verdict(self, name: str, key: str, judge: Callable[[], tuple[Any, bool]],
                still: Callable[[Any], bool] = lambda kept: True) -> Any:
        """A check's verdict (JSON) on what ``key`` spells out whole (the text judged, the tool's
        identity), judged once and kept as ``<name>-<hash>.verdict``: the preprocessor's check of
        constant params ran nvcc -E dozens of times at every collection. ``judge`` gives the verdict
        and whether it holds (a tool that failed may have been the machine's doing); a kept one is
        judged again, and replaced, where ``still`` says it no longer holds (a file it read, which
        the key cannot name before judging, edited since); a cache that cannot be read or written
        keeps nothing, and it judges again."""
        path = self.root / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.verdict"
        with contextlib.suppress(OSError, ValueError):  # none kept (or not JSON): judged again
            kept = json.loads(path.read_text())
            if still(kept):
                return kept
        why, holds = judge()
        if holds:
            with contextlib.suppress(OSError):
                self.root.mkdir(parents=True, exist_ok=True)
                write_atomic(path, json.dumps(why), f"{os.getpid()}-{time.monotonic_ns()}")
        return why

    def copies(self, texts: Mapping[Path, str], name: str, folders: Iterable[Path] = ()) -> Path:
        """A folder of the cache, ``kept/<name>``, holding each text at its file's absolute path
        below it: a build reads files as they were (the records' texts of a helper or a header
        edited since), their relative paths as they are; a text holding a file's bytes as
        "surrogateescape" reads them (one not UTF-8) is written as those bytes. Each is written
        once, whole, so gates running at once read the same files, and their builds are cached
        under one name. Each of
        ``folders`` is there too, empty where no text lies in it: a name the compiler looks for
        from it, "../common/x.h", leads through it to a copy only where it is."""
        folder = self.root / "kept" / name
        with self._writing():
            for path in folders:
                (folder / path.relative_to(path.anchor)).mkdir(parents=True, exist_ok=True)
            for path, text in texts.items():
                copy = folder / path.relative_to(path.anchor)
                if not copy.exists():
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    write_atomic(copy, text, f"{os.getpid()}-{time.monotonic_ns()}", "surrogateescape")
        return folder

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """The cache's own files: an error writing them is the machine's, no verdict on the candidate
        (a compiler that is not there still says so itself)."""
        try:
            yield
        except OSError as e:
            raise BuildEnvironmentError(
                f"the compile cache {self.root} cannot be written ({type(e).__name__}: {e.strerror or e}): no "
                f"candidate can be built, and nothing is recorded; set TUNEBENCH_CACHE to a writable folder "
                f"with free space") from None
