"""``tunebench compile-check``: every kernel template compiles, without the device to run it.

For each kernel with a variant for the target, the heuristic config of every representative
shape and a seeded sample of constraint-valid candidates are expanded exactly as for tuning and
compiled: with nvcc to cubin for each CUDA architecture (the command PyCUDA's SourceModule runs;
no driver needed), or with gcc for the CPU. For CUDA, each of those configs' launch on the
representative shapes it would run on is also checked, with what the cubin says of the entry
point (:func:`~tunebench.backends.launch.cubin_kernels`): the form the variant's ``launch``
answers in, the entry point among the cubin's kernels, the args builder's arguments against its
parameters (their bytes and offsets from the cubin, their C types from one ``-G`` build per
dtype), a launch with no dynamic shared bytes for a kernel whose PTX reaches an ``extern
__shared__`` array, and the grid, block and static and dynamic shared memory against each
architecture's limits, which a tune would otherwise find only on a GPU. A candidate beyond
them, or whose static shared or local memory ptxas refuses, is noted, as a tune prunes it; the
heuristic's config, which is always measured, fails the check. For the CPU, the entry
point among the library's exported functions and the arguments against its parameters' C types
(:func:`~tunebench.backends.params.library_functions`). On both, the reference's answer for
the smallest representative shape against the outputs the args builder declares. Runs wherever
the compiler exists, CI included.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tunebench.backends import cpu, cuda, launch, params
from tunebench.backends.base import BuildEnvironmentError, explain
from tunebench.backends.cache import CompilerKilled, excerpt, run_compiler
from tunebench.buckets import BucketError
from tunebench.kernel import Kernel, KernelError, Variant
from tunebench.owned import folder
from tunebench.space import SpaceError
from tunebench.user_code import raised
from tunebench.records import config_key, config_text

ARCHS = ("sm_80", "sm_90")


@dataclass
class KernelCheck:
    kernel: str
    dtypes: tuple[str, ...]
    configs: int  # distinct configs compiled per dtype and architecture
    builds: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (where: dtype, arch and config, what)
    launches: int = 0  # (config, dtype, shape, architecture) launches checked, CUDA only
    launch_failures: list[tuple[str, str]] = field(default_factory=list)  # and the entry point's, on either target
    failed_launches: int = 0
    reference_failures: list[tuple[str, str]] = field(default_factory=list)
    pruned: list[tuple[str, str]] = field(default_factory=list)  # candidates a tune prunes there: not failures
    strays: list[str] = field(default_factory=list)  # where the heuristic's config breaks the space: not failures
    unbuilt: list[str] = field(default_factory=list)  # architectures an arch_specific variant has no target on
    untyped: list[str] = field(default_factory=list)  # dtypes whose arguments' C types could not be read: not failures
    built_for: tuple[str, ...] = ()  # what nvcc built for (sm_90a for sm_90, arch_specific)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and not self.launch_failures and not self.reference_failures


def heuristic_configs(kernel: Kernel, variant: Variant, target: str) -> dict[tuple, dict]:
    """The heuristic's config of every representative shape and dtype, each once, by its order-free key."""
    return {config_key(c): c for b in kernel.buckets_for(target) for s in b.shapes for d in variant.dtypes
            for c in [variant.baseline(s, d)]}


def configs_to_check(kernel: Kernel, variant: Variant, target: str, sample: int, seed: int) -> list[dict]:
    """The heuristic configs, then ``sample`` valid candidates besides them (a sample that drew
    a heuristic config would check fewer than asked)."""
    heuristics = heuristic_configs(kernel, variant, target)
    valid, _ = variant.space.enumerate()
    others = [k for k in valid if config_key(variant.space.config(k)) not in heuristics]
    picked = random.Random(f"{seed}:{kernel.name}").sample(others, min(sample, len(others)))
    return [*heuristics.values(), *(variant.space.config(k) for k in picked)]


def _compile(command: Sequence[str], source: str, suffix: str, name: str,
             inspect: Callable[[Path], dict] | None, inputs: Mapping[str, str] | None = None) -> tuple[str | None, dict]:
    """(None, what ``inspect`` reads of the artefact) when ``command`` (with ``{src}`` and
    ``{out}``) compiles ``source`` (and ``inputs``, see :func:`run_compiler`), else (the
    message, {}), naming the source by ``name``."""
    tmp = folder("tunebench-check-")  # one a killed check left, nvcc's files in it, goes first
    try:
        src, out = tmp / f"kernel{suffix}", tmp / "kernel.out"
        src.write_text(source, encoding="utf-8")
        try:
            error = run_compiler(command, src, out, inputs)
        except (CompilerKilled, BuildEnvironmentError) as e:  # the machine's, not the kernel's: said, not raised
            return str(e), {}
        if error is None:
            return None, inspect(out) if inspect else {}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return excerpt(error.replace(str(src), f"<{name} with its #defines>").replace(str(src.with_suffix(".ptx")),
                                                                                "<its ptx>")), {}


def commands(target: str, archs: Sequence[str], variant: Variant, dtype: str) -> dict[str, list[str]]:
    """Where -> the build command of the target's backend in ``dtype``; FileNotFoundError names a missing
    compiler."""
    if target == "cuda":  # the PTX kept beside the cubin (see launch.compiled_kernels)
        return {arch: [*cuda.nvcc_command(cuda.variant_arch(arch, variant), cuda.copy_flags(variant)),
                       "--keep", "--keep-dir", "{out.parent}"] for arch in archs}
    lang = cpu.language(variant)
    if shutil.which(cpu.compiler(lang)) is None:
        raise FileNotFoundError(f"{cpu.compiler(lang)} is not on PATH: the cpu compile check of "
                                f"{variant.path.name} needs it")
    return {"host": cpu.gcc_command(cpu.build_flags(variant, dtype), lang)}


def check(kernels: Iterable[Kernel], target: str = "cuda", *, archs: Sequence[str] = ARCHS,
          sample: int = 6, seed: int = 0, jobs: int | None = None) -> Iterator[KernelCheck]:
    """Each kernel's check, as it is made (a run of minutes is said as it goes, and one killed
    midway keeps what it checked); a kernel whose declaration is at fault (a dtype without a C
    type, a heuristic outside the space, a missing template), or whose compiler is missing, fails
    alone, the others are checked."""
    with ThreadPoolExecutor(jobs or os.cpu_count()) as pool:
        for kernel in kernels:
            variant = kernel.variant(target)
            if variant is None:
                continue
            start = time.perf_counter()
            try:
                kernel.check(variant, target)
                variant.check_folders()
                configs = configs_to_check(kernel, variant, target, sample, seed)
                strays = kernel.heuristic_strays(variant, target)
            except (KernelError, SpaceError, BucketError) as e:
                yield KernelCheck(kernel.name, variant.dtypes, 0, failures=[("declaration", str(e))])
                continue
            result = KernelCheck(kernel.name, variant.dtypes, len(configs), strays=strays)
            kernel_archs = list(archs)
            if target == "cuda" and variant.arch_specific:
                unbuilt = {a: cuda.arch_problem(cuda.variant_arch(a, variant)) for a in archs}
                kernel_archs = [a for a in archs if not unbuilt[a]]
                result.unbuilt = [f"{a} (arch_specific): {why}" for a, why in unbuilt.items() if why]
                if not kernel_archs:
                    result.failures.append(("declaration", "arch_specific, and no --arch given has an "
                                                           "architecture-specific target"))
                    yield result
                    continue
            if target == "cuda":
                result.built_for = tuple(cuda.variant_arch(a, variant) for a in kernel_archs)
            try:
                built_with = {dtype: commands(target, kernel_archs, variant, dtype) for dtype in variant.dtypes}
            except FileNotFoundError as e:  # this kernel's compiler (g++ for a C++ one): the others are checked
                result.failures.append(("compiler", str(e)))
                result.seconds = time.perf_counter() - start
                yield result
                continue
            suffix = ".cu" if target == "cuda" else cpu.source_suffix(cpu.language(variant))
            inspect = launch.compiled_kernels if target == "cuda" else params.library_functions
            jobs_ = [(dtype, where, config, pool.submit(
                _compile, command, cuda.source(variant, config, dtype) if target == "cuda"
                else cpu.source(variant, config, dtype), suffix, variant.path.name, inspect,
                None if target == "cuda" else cpu.source_inputs(variant, config, dtype)))
                for dtype in variant.dtypes for where, command in built_with[dtype].items()
                for config in configs]
            # one -G build per dtype, for the C types of the entry point's parameters
            debug = {dtype: pool.submit(_compile, cuda.nvcc_command(cuda.variant_arch(kernel_archs[0], variant),
                                                                     cuda.debug_flags(cuda.copy_flags(variant))),
                                        cuda.source(variant, configs[0], dtype), suffix, variant.path.name,
                                        params.debug_functions)
                     for dtype in variant.dtypes if target == "cuda" and configs}
            built = {}
            heuristics = heuristic_configs(kernel, variant, target)
            for dtype, where, config, future in jobs_:
                result.builds += 1
                error, found = future.result()
                refused = target == "cuda" and error and cuda.resource_refusal(error)
                named = f"{dtype} {where} [{config_text(config)}]"
                if refused and config_key(config) in heuristics:  # always measured
                    result.failures.append((named, f"the heuristic's config: {refused}"))
                elif refused:  # pruned where tuned, as a launch beyond the architecture's limits is
                    result.pruned.append((named, refused))
                elif error:
                    explained = (cuda.explain_build if target == "cuda" else explain)(variant, config, error)
                    result.failures.append((named, explained))
                else:
                    built[(dtype, where, config_text(config))] = found
            if target == "cuda":  # where no build of the dtype compiled, the builds' failures say it
                result.untyped = [f"{dtype}: the -G build that gives the entry point's C types failed, so the "
                                  f"arguments' are not checked against them: {error.splitlines()[0]}"
                                  for dtype, future in debug.items() if (error := future.result()[0])
                                  and any(where[0] == dtype for where in built)]
                check_launches(result, kernel, variant, configs, kernel_archs, built,
                               {dtype: future.result()[1] for dtype, future in debug.items()})
            else:
                check_entry(result, kernel, variant, configs, built)
            result.reference_failures = list(reference_problems(kernel, variant, target).items())
            result.seconds = time.perf_counter() - start
            yield result


def check_launches(result: KernelCheck, kernel: Kernel, variant: Variant, configs: list[dict],
                   archs: Sequence[str], built: dict, typed: dict) -> None:
    """Each config's launch in each dtype on each representative shape it would run on (a
    heuristic config on its own shape; a candidate on the shapes of the buckets whose shaped
    constraints it meets), for each architecture: its form (a launch that raises or answers in
    another form is said once per config) and its entry point among the cubin's kernels fail
    the check; what it asks beyond an architecture's limits fails it for a heuristic config,
    which is always measured, and is noted for a candidate, which a tune prunes there."""
    buckets = kernel.buckets_for("cuda")
    heuristic = {(config_text(variant.baseline(s, d)), s) for b in buckets for s in b.shapes for d in variant.dtypes}
    space, failing = variant.space, set()
    entries, missing = {}, {}  # (dtype, arch, config) -> the entry point's symbol, or why there is none
    for where, kernels in built.items():
        try:
            entries[where] = launch.entry_symbol(variant.entry, kernels, variant.path.name)
        except KernelError as e:
            missing[where] = str(e)
    first = (archs[0], config_text(configs[0])) if configs else ("", "")
    mismatch = args_mismatch(kernel, "cuda", cuda_parameters(built, entries, typed, first))
    for dtype, problem in mismatch.items():
        result.launch_failures.append((f"{dtype} arguments", problem))
    for config in configs:
        named = config_text(config)
        key = space.key(config) if space.contains(config) else None
        shapes = [s for b in buckets for s in b.shapes
                  if (named, s) in heuristic  # the heuristic's own shape: measured there, constraints or not
                  or (key is not None and (not space.shaped
                                           or all(space.holds_for(key, t, buckets.dims) for t in b.shapes)))]
        planned = [f"{dtype} {arch} [{named}] shape {shape}" for dtype in variant.dtypes for shape in shapes
                   for arch in archs]
        result.launches += len(planned)
        try:
            for dtype in variant.dtypes:
                for shape in shapes:
                    made = launch.launch_of(kernel, variant, config, shape, dtype)
                    for arch in archs:
                        kernels = built.get((dtype, arch, named))
                        if kernels is None:
                            continue  # it did not compile: said with the builds
                        where = f"{dtype} {arch} [{named}] shape {shape}"
                        if (dtype, arch, named) in missing:
                            failing.add(where)
                            result.launch_failures.append((f"{dtype} {arch} [{named}]", missing[dtype, arch, named]))
                            continue
                        if dtype in mismatch:
                            failing.add(where)  # every launch of the dtype misreads its arguments
                            continue
                        function = kernels[entries[dtype, arch, named]]
                        refusal = launch.entry_refusal(function)
                        if refusal:
                            failing.add(where)
                            result.launch_failures.append((f"{dtype} {arch} [{named}]", refusal))
                            continue
                        try:
                            problem = launch.launch_problem(launch.arch_limits(arch), made, function, arch)
                        except KernelError as e:  # the launch's fault, not the architecture's: a candidate fails too
                            failing.add(where)
                            result.launch_failures.append((where, str(e)))
                            continue
                        if problem and (named, shape) in heuristic:
                            failing.add(where)
                            result.launch_failures.append((where, f"the heuristic's config: {problem}"))
                        elif problem:
                            result.pruned.append((where, problem))
        except KernelError as e:  # the launch itself, said once for the config: each of its launches fails
            failing.update(planned)
            result.launch_failures.append((f"[{named}]", str(e)))
    result.failed_launches = len(failing)


def check_entry(result: KernelCheck, kernel: Kernel, variant: Variant, configs: list[dict], built: dict) -> None:
    """On the CPU: the entry point among each library's exported functions, and the args
    builder's arguments against its parameters as the DWARF lists them."""
    config_of = {config_text(config): config for config in configs}
    for (dtype, _, named), functions in built.items():
        missing = cpu.missing_entry(variant, functions, config_of[named])
        if missing:
            result.launch_failures.append((f"{dtype} [{named}]", missing))
    found = {}
    for (dtype, _, _), functions in built.items():
        if functions.get(variant.entry) is not None:
            found.setdefault(dtype, [functions[variant.entry]])
    for dtype, problem in args_mismatch(kernel, "cpu", found).items():
        result.launch_failures.append((f"{dtype} arguments", problem))


def cuda_parameters(built: dict, entries: dict, typed: dict, first: tuple[str, str]) -> dict[str, list]:
    """dtype -> the entry point's parameters to check the arguments against: as the DWARF of the
    ``-G`` build of the ``first`` (architecture, config) gives them (``typed``: dtype -> its
    functions; C types: see :meth:`~tunebench.backends.cuda.CudaCompiler.parameter_types`), which
    name the numpy type to give, then as a cubin of the dtype lists them (bytes and offsets)."""
    found = {}
    for (dtype, arch, named), symbol in entries.items():
        found.setdefault(dtype, [built[dtype, arch, named][symbol].params])
    for dtype, functions in typed.items():
        symbol = entries.get((dtype, *first))
        if dtype in found and functions.get(symbol):
            found[dtype].insert(0, functions[symbol])
    return found


def smallest_shape(kernel: Kernel, target: str) -> tuple:
    """The representative shape with the fewest elements: the checks' arguments are built for it."""
    return min((s for b in kernel.buckets_for(target) for s in b.shapes), key=lambda s: math.prod(s))


def checked_config(kernel: Kernel, variant: Variant, shape: tuple, dtype: str) -> dict | None:
    """The config the checks give an args builder or reference that takes one: the heuristic's
    for the shape, which every tune measures."""
    return variant.baseline(shape, dtype) if kernel.per_config else None


def checked_args(kernel: Kernel, variant: Variant, shape: tuple, dtype: str) -> dict:
    """The arguments the checks judge (see :func:`checked_config`)."""
    return kernel.build_args(shape, dtype, checked_config(kernel, variant, shape, dtype))


def reference_problems(kernel: Kernel, variant: Variant, target: str) -> dict[str, str]:
    """"<dtype> arguments" or "<dtype> reference" -> why the args builder's arguments, or the
    reference, cannot judge a candidate (see :meth:`Kernel.build_args` and
    :meth:`Kernel.expected`: another shape, a less precise type, an output it lacks), on the
    smallest representative shape; a tune finds it only on the device, at the first trial."""
    shape, found = smallest_shape(kernel, target), {}
    for dtype in variant.dtypes:
        try:
            args = checked_args(kernel, variant, shape, dtype)
        except KernelError as e:
            found[f"{dtype} arguments"] = str(e)
            continue
        except Exception as e:  # noqa: BLE001 - the user's code, reported with its cause
            found[f"{dtype} arguments"] = f"the args builder raised {raised(e, f'for {shape}')}"
            continue
        refused = (cpu if target == "cpu" else cuda).args_refusal(args)
        if refused:  # every trial of the dtype would stop the task
            found[f"{dtype} arguments"] = f"kernel {kernel.name!r}: {refused}"
            continue
        try:
            kernel.expected(args, checked_config(kernel, variant, shape, dtype))
        except KernelError as e:
            found[f"{dtype} reference"] = str(e)
        except Exception as e:  # noqa: BLE001 - the user's code, reported with its cause
            found[f"{dtype} reference"] = f"the reference raised {raised(e, f'for {shape}')}"
    return found


def args_mismatch(kernel: Kernel, target: str, entries: dict) -> dict[str, str]:
    """dtype -> where the args builder's arguments (on the smallest representative shape) do not
    fit the entry point's parameters as the compiled artefacts list them (``entries``: dtype ->
    lists of its parameters, checked in turn): every config of the dtype would read a wrong
    value and fail as a wrong result, with no word on why."""
    shape, found = smallest_shape(kernel, target), {}
    for dtype, listed in entries.items():
        try:
            args = checked_args(kernel, kernel.variant(target), shape, dtype)
        except Exception:  # noqa: BLE001 - said once, by reference_problems
            continue
        problem = next((p for p in (params.args_problem(args, entry) for entry in listed) if p), None)
        if problem:
            found[dtype] = problem
    return found
