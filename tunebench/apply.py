"""Applying the best config where a framework calls its kernel, per launch.

``tuned("layernorm")`` is a handle bound to one kernel: ``.config(shape)`` is the best config
for a shape (from the in-memory index of :mod:`tunebench.lookup`: microseconds after the first
call), ``.defines(shape)`` the same as compiler flags (``-Dvec=8``, with ``TB_DTYPE`` and
``TB_UNROLL`` as tunebench defines them) for a framework that builds its own variants, with
``.flags()`` (the rest of the compiler's command line a tune built it with),
``.source(shape)`` the template with the config's ``#define`` lines where it places them (for a
template with a ``// tunebench: params`` line, which flags cannot reproduce), and
``.apply(shape=...)`` a decorator that calls the framework's launcher with the config's params
as keyword arguments::

    layernorm = tunebench.tuned("layernorm")

    @layernorm.apply(shape=lambda x, *rest: x.shape, dtype=lambda x, *rest: x.dtype)
    def launch(x, gamma, beta, y, *, vec, unroll, chunk, two_pass):
        build(vec=vec, unroll=unroll, chunk=chunk, two_pass=two_pass)(x, gamma, beta, y)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tunebench.backends import cpu, cuda
from tunebench.backends.base import BuildEnvironmentError, macros, params_line
from tunebench.backends.launch import keywords
from tunebench.kernel import Kernel, KernelError
from tunebench.lookup import (MAX_ANSWERS, best, check_known, declaration, device_named, dtype_name, lookup,
                              shared_answer, this_device)


class Tuned:
    """One kernel's best configs, as :func:`tuned` describes."""

    def __init__(self, kernel: str | Kernel, *, device: str | None = None, dtype: str | None = None,
                 records: str | Path | None = None, suites: str | Path | None = None):
        if isinstance(kernel, str):  # a misspelt name fails where the framework binds it, not at its first launch
            check_known(kernel, records, suites)
        self.kernel, self.device, self.dtype, self.records, self.suites = kernel, device, dtype, records, suites
        #: (shape, dtype, device) of an answer -> (the answer, the declaration, its flags): asked per launch,
        #: the flags of an answer already made are the same list, until the records, the template or the
        #: declaration change (another answer, which takes its place)
        self._defines: dict[tuple, tuple] = {}
        #: (device, dtypes) -> (the declaration, its template's hash, the flags): asked per launch (the
        #: README's loop does), they were made afresh each time, 30-50 us of paths and probes
        self._flags: dict[tuple, tuple] = {}

    def config(self, shape: Sequence[int], dtype=None) -> dict:
        """The best config for ``shape`` in ``dtype`` (default: the handle's), a copy: the caller
        may change it."""
        return best(self.kernel, shape, self.device, dtype=dtype if dtype is not None else self.dtype,
                    records=self.records, suites=self.suites)  # per launch: the cached answer's config only

    def defines(self, shape: Sequence[int], dtype=None) -> list[str]:
        """The config as compiler flags, as tunebench itself builds the template for the device's
        target: ``["-Dvec=8", ..., "-DTB_DTYPE=float", "-DTB_UNROLL(n)=..."]`` (a template reads
        them as it did when it was tuned; ``-include`` ahead, with the header that declares the
        type where it has one: a CUDA dtype's, a C++ template's complex). A list of arguments, one
        flag each, not a shell line."""
        choice = shared_answer(self.kernel, shape, self.device, dtype=dtype if dtype is not None else self.dtype,
                               records=self.records, suites=self.suites)
        decl = self._declaration(choice)
        key = (choice.shape, choice.dtype, choice.device)
        kept = self._defines.get(key)
        if kept is not None and kept[0] is choice and kept[1] is decl:
            return list(kept[2])
        found = self._defines_of(choice, decl)
        if len(self._defines) >= MAX_ANSWERS:
            self._defines.clear()
        self._defines[key] = choice, decl, found
        return list(found)

    def _defines_of(self, choice, decl: Kernel | None) -> list[str]:
        """:meth:`defines` of an answer, made afresh."""
        target, backend, variant = self._target(choice, decl)
        try:
            placed = variant is not None and params_line(variant.template, variant.path.name) is not None
        except KernelError:  # suites shipped without their template: answered as the config is, for the recorded one
            placed = False
        if placed:
            raise ValueError(f"kernel {choice.kernel!r}: {variant.path.name} places its params at its "
                             f"`// tunebench: params` line, after headers that flags would rewrite: build "
                             f"source(shape) instead, the template with the config's #defines there")
        if backend is cuda:
            ctype, header = cuda.CTYPES[choice.dtype], cuda.CTYPE_HEADERS.get(choice.dtype)
        elif variant is None and choice.dtype in cpu.CXX_CTYPES:
            raise LookupError(f"kernel {choice.kernel!r}: TB_DTYPE's type in {choice.dtype} is its template's "
                              f"language's ({cpu.CTYPES[choice.dtype]} in C, {cpu.CXX_CTYPES[choice.dtype]} in "
                              f"C++), known from its declaration, which no suite found declares: pass suites=")
        else:
            ctype, header = cpu.ctype(choice.dtype, cpu.language(variant) if variant is not None else "c")
        return (["-include", header] if header else []) + [f"-D{name}={value}" for name, value in macros(
            choice.config, ctype, target).items()]

    def flags(self, dtype=None) -> list[str]:
        """The compiler flags besides :meth:`defines` that tunebench built the template with on
        the device's target (``-O3 -march=native -fopenmp -std=gnu11`` and the variant's own on
        the CPU; ``-O3`` and the variant's own, the device's ``-arch`` apart, on CUDA): a build
        without them is not the code that was measured (without ``-fopenmp``, a serial one). On
        the CPU, in ``dtype`` (default: the handle's), also what the framework's library must link
        with for the dtype's conversions where the compiler's default runtime lacks them
        (``--rtlib=compiler-rt``: see :func:`tunebench.backends.cpu.code_flags`); with neither,
        what any dtype the variant declares links with, as :meth:`defines` serves the tuned dtype
        without being told it (a link flag, which changes no dtype's code); and the C++ standard
        library a ``.c`` template read as C++ (``-x c++``) links."""
        device = device_named(self.device) if self.device else this_device()
        target = device.split("-", 1)[0]
        decl = self.kernel if isinstance(self.kernel, Kernel) else declaration(self.kernel, self.records, self.suites)
        variant = decl.variant(target) if decl else None
        if variant is None:
            name = decl.name if decl else self.kernel
            raise LookupError(f"kernel {name!r}: " + (f"no {target} variant" if decl else "its flags are known from "
                                                      "its declaration, which no suite found declares: pass suites="))
        dtype = dtype if dtype is not None else self.dtype
        try:
            dtypes = tuple(variant.dtypes) if dtype is None else (dtype_name(dtype, decl.name),)
            source = variant.source_hash  # an edited template may compute in TB_DTYPE now: another link flag
            kept = self._flags.get((device, dtypes))
            if kept is not None and kept[0] is decl and kept[1] == source:
                return list(kept[2])
            found = cuda.code_flags(variant) if target == "cuda" else cpu.code_flags(variant, dtypes)
        except (BuildEnvironmentError, KernelError) as e:  # the link probe kept from running, a template not shipped
            raise type(e)(f"kernel {decl.name!r}: its flags are not known: {e}") from None
        if len(self._flags) >= MAX_ANSWERS:
            self._flags.clear()
        self._flags[(device, dtypes)] = decl, source, found
        return list(found)

    def source(self, shape: Sequence[int], dtype=None) -> str:
        """The template as tunebench compiles it for ``shape``'s config on the device's target:
        the config's ``#define`` lines where the template places them (its ``// tunebench:
        params`` line, else ahead of it), for a framework that builds its own variants."""
        choice, target, backend, variant = self._built_as(shape, dtype)
        if variant is None:
            raise LookupError(f"kernel {choice.kernel!r}: its template is known from its declaration, which no "
                              f"suite found declares: pass suites=")
        try:
            return backend.source(variant, choice.config, choice.dtype)
        except KernelError as e:  # suites shipped without their template: said for this kernel
            raise KernelError(f"kernel {choice.kernel!r}: {e}") from None

    def _built_as(self, shape: Sequence[int], dtype) -> tuple:
        """(the answer for ``shape``, its target, that target's backend module, the kernel's
        variant for it where the declaration is known)."""
        dtype = dtype if dtype is not None else self.dtype
        choice = lookup(self.kernel, shape, self.device, dtype=dtype, records=self.records, suites=self.suites)
        return choice, *self._target(choice, self._declaration(choice))

    def _declaration(self, choice) -> Kernel | None:
        return self.kernel if isinstance(self.kernel, Kernel) else declaration(choice.kernel, self.records, self.suites)

    @staticmethod
    def _target(choice, decl: Kernel | None) -> tuple:
        """(the answer's target, that target's backend module, the kernel's variant for it where
        the declaration is known). A dtype the variant does not declare is refused: its config is
        the heuristic's (as :meth:`config` serves it, warned), but the template built in that
        dtype (``-DTB_DTYPE=double`` of a float32 kernel) is one it may not support."""
        target = choice.device.split("-", 1)[0]
        backend = cuda if target == "cuda" else cpu
        if choice.dtype not in backend.CTYPES:
            raise ValueError(f"kernel {choice.kernel!r}: dtype {choice.dtype!r} has no C type on the {target} target")
        variant = decl.variant(target) if decl else None
        if variant is not None and choice.dtype not in variant.dtypes:
            raise ValueError(f"kernel {choice.kernel!r}: dtype {choice.dtype!r} is not among the dtypes it declares "
                             f"for the {target} target ({', '.join(variant.dtypes)}): its template is not built in "
                             f"it; declare it (dtypes=) to tune it, or ask in one of those")
        return target, backend, variant

    def apply(self, shape: Callable[..., Sequence[int]], dtype: Callable[..., Any] | None = None) -> Callable:
        """A decorator: the function is called with its own arguments and the config for the
        shape ``shape(*args, **kwargs)`` gives, in the dtype ``dtype(*args, **kwargs)`` gives
        (``dtype=lambda x, *rest: x.dtype``; default: the handle's), as keyword arguments. A
        param the call passes itself (``launch(x, y, vec=4)``, or in its place ``launch(x, y, 4)``)
        overrides the tuned one; ``shape`` and ``dtype`` are given only the arguments they take
        (``lambda x: x.shape``: the first; one without a signature, ``operator.attrgetter("shape")``,
        the first alone)."""
        shape_of, dtype_of = _taken(shape), _taken(dtype) if dtype is not None else None

        def decorate(fn: Callable) -> Callable:
            takes, places = keywords(fn), _named_in_place(fn)

            @functools.wraps(fn)
            def call(*args, **kwargs):
                kind = dtype_of(args, kwargs) if dtype_of is not None else None
                config = self.config(shape_of(args, kwargs), kind)
                for given in places[:len(args)]:  # passed in its place: the call's own, as by keyword
                    config.pop(given, None)
                if takes is not None and not takes.issuperset(config):  # said here, not as a bare TypeError
                    missing = ", ".join(sorted(set(config) - takes))
                    raise TypeError(f"{fn.__qualname__}() takes no {missing}, params of the config tunebench applies "
                                    f"({', '.join(config)}): give it a parameter for each, or **params")
                return fn(*args, **{**config, **kwargs})
            return call
        return decorate


def _parameters(fn: Callable, any_kind, kinds: tuple[str, ...]) -> tuple[str, ...] | None:
    """The names of ``fn``'s parameters of ``kinds``, in order; None where it takes any number of
    them (a parameter of ``any_kind``: ``*args``, ``**kwargs``; None for ``any_kind``: the named
    ones all the same) or has no signature (a builtin)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any_kind is not None and any(p.kind is any_kind for p in parameters):
        return None
    return tuple(p.name for p in parameters if p.kind.name in kinds)


def _named_in_place(fn: Callable) -> tuple[str, ...]:
    """The parameters of ``fn`` a call may pass in their place, by name, ahead of a ``*args``:
    ``launch(x, 4)`` of a ``def launch(x, vec, *rest, unroll)`` gives its own vec, which the
    tuned one must not repeat ("got multiple values for argument 'vec'")."""
    return _parameters(fn, None, ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")) or ()


def _positional(fn: Callable) -> tuple[str, ...] | None:
    """The names of the parameters ``fn`` takes in place, in order; None where it takes any
    number (``*args``) or has no signature."""
    return _parameters(fn, inspect.Parameter.VAR_POSITIONAL, ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"))


def _taken(fn: Callable) -> Callable[[tuple, dict], Any]:
    """``fn`` called with the positional and keyword arguments it takes: the call's own
    overrides of params are not for a ``lambda x, *rest: x.shape``, nor its buffers after the
    first for a ``lambda x: x.shape``."""
    try:
        inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin (operator.attrgetter("shape")): the first argument alone
        return lambda args, kwargs: fn(*(*args[:1], *kwargs.values())[:1])  # none: its TypeError, no StopIteration
    names, places = keywords(fn), _positional(fn)
    count = len(places) if places is not None else None
    if names is None:  # it takes any keyword: give it every one
        return lambda args, kwargs: fn(*args[:count], **kwargs)
    return lambda args, kwargs: fn(*args[:count], **{k: v for k, v in kwargs.items() if k in names})


def tuned(kernel: str | Kernel, *, device: str | None = None, dtype: str | None = None,
          records: str | Path | None = None, suites: str | Path | None = None) -> Tuned:
    """A handle on one kernel's best configs (see the module docstring); the arguments are
    :func:`tunebench.lookup.lookup`'s."""
    return Tuned(kernel, device=device, dtype=dtype, records=records, suites=suites)
