"""Measuring one trial: verify the candidate's output, warm up, then sample adaptively.

The runner is reset (outputs poisoned, guard zones armed, in-place inputs restored) and called
once; its outputs must match the reference within its tolerance, and nothing may have
been written past them, before a single timed call is made, and again after the last.

Warm-up runs until a few calls in a row are within 10 % of the fastest seen, or for at most
``warmup_s``. Sampling takes at least ``min_samples``, then stops as soon as the confidence
interval of the median is narrower than ``rel_ci`` of it, or the time cap is reached, or the
candidate is clearly worse than the incumbent (the best trial so far on the same shape): its
lower bound above the incumbent's upper bound by ``early_stop_margin``. Such a trial is
``early_stopped`` and keeps its samples. With ``repeats`` set, exactly that many samples are
taken instead (the fixed protocol).

A trial is measured under every buffer placement of the backend (:func:`measure_placements`),
one after the other, and its time is the slowest placement's median: a caller may pass any of
them, so a config is only as fast as its worst.
"""

from __future__ import annotations

import math
import os
import statistics
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tunebench.backends.base import Runner, poison_value, same_bytes
from tunebench.interference import BusyThreads, Throttling
from tunebench.stats import median_ci
from tunebench.summary import READS_OUTPUT


@dataclass(frozen=True)
class MeasureSettings:
    warmup_s: float = 0.05  # the longest warm-up; the first calls on a CPU are several times slower
    warmup_stable: int = 3  # warm-up ends once this many calls in a row are near the fastest
    min_samples: int = 5
    max_samples: int = 300
    max_time_s: float = 1.0  # sampling time cap per trial
    rel_ci: float = 0.02  # stop once the median's confidence interval is this narrow, relative
    confidence: float = 0.95
    early_stop_margin: float = 0.05
    repeats: int | None = None  # a fixed number of samples: no adaptive stop, no early stop


@dataclass
class Measurement:
    status: str  # "ok", "early_stopped", "wrong_result" or "out_of_bounds"
    samples: list[float] = field(default_factory=list)  # ms, every one (of the slowest placement)
    placements: dict[str, list[float]] = field(default_factory=dict)  # placement -> its samples
    error: str | None = None
    max_error: float | None = None
    warmup_calls: int = 0
    seconds: float = 0.0  # wall time of warm-up and sampling, the part the protocol decides
    threads: int | None = None  # the process's threads that ran while it was sampled (unknown: None)
    throttling: dict = field(default_factory=dict)  # the cgroup's CPU quota and its throttling meanwhile


#: Elements of an output compared at a time: the float64 temporaries (2 MiB each) stay in cache,
#: and the chunks of a large output (a GPU's 134M-element softmax) are compared on several cores.
#: On the 2-core VM 134M values took 0.34-0.47 s so (medians), 0.59-1.11 s by chunks of 1 << 20 and
#: 0.68-0.84 s by chunks of 1 << 16 (bench/verify.py, docs/verify.json).
CHUNK = 1 << 18


def _compared(got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two arrays in the type they are compared in: integers (and bools, by their bytes: an
    unwritten one is poison, 0xA5, which numpy reads as True) exactly, as int64 or uint64 (a
    float64 holds an int64 only to 2**53); else complex128 where either is complex (both
    parts), else float64."""
    if got.dtype.kind in "iub" and want.dtype.kind in "iub":
        g = got.view(np.uint8) if got.dtype.kind == "b" else got
        unsigned = g.dtype.kind == "u" and want.dtype.kind in "ub"
        wide = np.uint64 if unsigned else np.int64
        if g.dtype == np.uint64 and not unsigned or want.dtype == np.uint64 and g.dtype.kind == "i":
            return g.astype(object), want.astype(object)  # the two 64-bit kinds: as Python's ints
        return g.astype(wide, copy=False), want.astype(wide, copy=False)
    common = np.complex128 if "c" in (got.dtype.kind, want.dtype.kind) else np.float64
    return got.astype(common, copy=False), want.astype(common, copy=False)


def _compare_chunk(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> tuple[int, float, float, int]:
    """(values off, largest error, largest error of a value off or -1, its index) of flat chunks.
    A NaN or an infinity where the reference has a number is off by infinity, and so is a number
    where it has NaN or an infinity: only NaN where it has NaN, and the same infinity, are exact."""
    g, w = _compared(got, want)
    if g.dtype.kind in "iuO":
        err = (np.maximum(g, w) - np.minimum(g, w)).astype(np.float64)  # exact, then its size
        bad = err > atol + rtol * np.abs(w.astype(np.float64))
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g - w)
            bad = err > atol + rtol * np.abs(w)
        special = ~np.isfinite(err)  # a NaN or an infinity on either side (finite ones leave it finite)
        if special.any():
            same = (g[special] == w[special]) | (np.isnan(g[special]) & np.isnan(w[special]))
            err[special], bad[special] = np.where(same, 0.0, np.inf), ~same
    count = int(np.count_nonzero(bad))
    if not count:
        return 0, float(np.max(err)) if err.size else 0.0, -1.0, -1
    i = int(np.argmax(np.where(bad, err, -1)))
    return count, float(np.max(err)), float(err[i]), i


def compare(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray], names: Sequence[str],
            tolerances: Sequence[tuple[float, float]]) -> tuple[float, str | None]:
    """(largest absolute error, None) when every output is within its (rtol, atol), else a reason:
    the first output off, located, and how many values of each other output are off (a kernel that
    skipped a row left several outputs wrong, and naming the first alone hid the others)."""
    worst, reason, others = 0.0, None, []
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        for out, ref, name, (rtol, atol) in zip(outputs, expected, names, tolerances):
            if out.shape != ref.shape:
                return float("inf"), f"output {name!r} has shape {out.shape}, the reference {ref.shape}"
            got, want = out.reshape(-1), ref.reshape(-1)
            starts = range(0, got.size, CHUNK)
            chunks = pool.map(lambda s: _compare_chunk(got[s:s + CHUNK], want[s:s + CHUNK], rtol, atol), starts)
            count, off, where = 0, -1.0, -1
            for start, (bad, largest, largest_off, i) in zip(starts, chunks):
                worst = max(worst, largest)
                count += bad
                if largest_off > off:
                    off, where = largest_off, start + i
            if reason is None and count:
                i = np.unravel_index(where, out.shape)
                shown = _apart(*(v.item() for v in _compared(got[where:where + 1], want[where:where + 1])))
                reason = (f"output {name!r}: {count} of {got.size} values off, largest error "
                          f"{off:.3g} at {tuple(int(v) for v in i)} (got {shown[0]}, "
                          f"expected {shown[1]}; rtol {rtol:g}, atol {atol:g})")
            elif count:
                others.append(f"output {name!r}, {count} of {got.size} values")
    return worst, reason and reason + (f"; also off: {'; '.join(others)}" if others else "")


def _apart(got, want) -> tuple[str, str]:
    """Two values printed with the digits that tell them apart (160464 and 160464 did not);
    integers whole, complex numbers as Python writes them."""
    if not isinstance(got, float) or not isinstance(want, float):
        return str(got), str(want)
    for digits in (6, 9, 17):
        shown = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if shown[0] != shown[1]:
            break
    return shown


def verify(runner: Runner, expected: Sequence[np.ndarray], names: Sequence[str],
           tolerances: Sequence[tuple[float, float]]) -> Measurement:
    """One call on fresh, poisoned outputs: an ``ok`` measurement (no samples), else the failed
    one. Where an unwritten element would pass that poison (the reference is NaN there, or the
    poison's own value), a second call on outputs poisoned otherwise tells."""
    for pattern in (0, 1) if _poison_passes(runner.outputs(), expected) else (0,):
        runner.reset(pattern)
        runner.call()
        overrun = runner.overrun()
        if overrun:
            return Measurement("out_of_bounds", error=overrun)
        max_error, wrong = compare(runner.outputs(), expected, names, tolerances)
        if wrong:
            return Measurement("wrong_result", error=wrong + _reads_output(runner, names, pattern, wrong),
                               max_error=max_error)
    return Measurement("ok", max_error=max_error)


def _reads_output(runner: Runner, names: Sequence[str], pattern: int, wrong: str) -> str:
    """Why a wrong result may be the declaration's: an output that comes out otherwise when it
    starts under the other poison, where two calls under the same poison agree, is read by the
    kernel or left partly unwritten. A split-K kernel accumulating into its output (Triton's
    reset_to_zero) got NaN everywhere, and the summary blamed the reference. Only an output the
    wrong result names (``wrong``) is judged, and a call that fails here says nothing more: the
    wrong result stands as found."""
    first = [out.copy() for out in runner.outputs()]
    try:
        runner.reset(1 - pattern)
        runner.call()
        other = [out.copy() for out in runner.outputs()]
        runner.reset(pattern)
        runner.call()
        again = runner.outputs()
    except Exception:  # noqa: BLE001 - a candidate's own failure on the other poison: no hint, its verdict stands
        return ""
    read = [n for n, a, b, c in zip(names, first, other, again)
            if f"output {n!r}" in wrong and same_bytes(a, c) and not same_bytes(a, b)]
    if not read:
        return ""
    return (f"; output {read[0]!r} {READS_OUTPUT} (it starts every call poisoned, and "
            f"came out otherwise under another poison): the kernel leaves part of it unwritten, or reads it, as an "
            f"accumulation (out[i] += ...) does; an output the kernel reads is declared inout=[{read[0]!r}], which "
            f"starts every call from the args builder's values (Triton's reset_to_zero and restore_value)")


def verify_after(runner: Runner, expected: Sequence[np.ndarray], names: Sequence[str],
                 tolerances: Sequence[tuple[float, float]]) -> Measurement:
    """:func:`verify` once more after the timed calls: a candidate that skips its work on a call
    like the last (a result cached for the same buffers, state kept between calls) is right on
    its first call, and then timed doing nothing (recorded 800x faster than its heuristic)."""
    result = verify(runner, expected, names, tolerances)
    if result.status != "ok":
        result.error = (f"right on its first call, then after its timed calls: {result.error} (a call "
                        f"that skips its work when called again, as with a result kept for the same "
                        f"buffers, was timed doing nothing)")
    return result


#: id of a reference array -> {output dtype: whether pattern 0's poison may pass there}, while the
#: array lives: a shape's reference is the same array for every trial, and a GPU's holds 10**8 values.
_PASSES: dict[int, dict[str, bool]] = {}


def _poison_passes(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> bool:
    """Whether an element left unwritten under poison pattern 0 may equal its reference value."""
    for out, ref in zip(outputs, expected):
        if id(ref) not in _PASSES:
            try:
                weakref.finalize(ref, _PASSES.pop, id(ref), None)
                _PASSES[id(ref)] = {}
            except TypeError:  # no weak reference to it (a numpy scalar): asked afresh each time
                pass
        known = _PASSES.get(id(ref), {})
        if out.dtype.str not in known:
            value = poison_value(out.dtype)
            known[out.dtype.str] = bool(  # NaN is exact where the reference is NaN
                ref.dtype.kind in "fc" and np.isnan(ref).any() if value != value else
                out.dtype.kind in "iu" and np.any(ref == value))
        if known[out.dtype.str]:
            return True
    return False


def warm_up(runner: Runner, settings: MeasureSettings) -> tuple[int, float]:
    """Timed calls until a few in a row are within 10 % of the fastest, or ``warmup_s`` passed:
    (calls, the fastest in ms)."""
    start, times = time.perf_counter(), []
    while time.perf_counter() - start < settings.warmup_s:
        times.append(runner.timed_call())
        last = times[-settings.warmup_stable:]  # a new fastest counts against the calls before it
        if len(last) == settings.warmup_stable and max(last) <= 1.1 * min(times):
            break
    return len(times), min(times, default=float("inf"))


#: How many times the incumbent's bound (with the margin) a candidate's fastest call, warm-up's
#: included, takes for the time cap to end its sampling before ``min_samples``: a config 300 times
#: slower than the best took its five samples whatever they cost (2.8 s at 300 ms a call; 80 s a
#: shape at 9 s), and a call twice as slow is no disturbance the interference checks let pass.
HOPELESS = 2.0


def measure(runner: Runner, expected: Sequence[np.ndarray], names: Sequence[str],
            tolerances: Sequence[tuple[float, float]], settings: MeasureSettings,
            incumbent: float | None = None, throttling: Throttling | None = None) -> Measurement:
    """One trial; ``incumbent`` is the upper confidence bound of the best trial on this shape;
    ``throttling`` counts the quota's throttling of its samples (a trial's placements share one)."""
    throttling = throttling or Throttling()
    result = verify(runner, expected, names, tolerances)
    if result.status != "ok":
        return result
    began, busy = time.perf_counter(), BusyThreads()
    result.warmup_calls, fastest = warm_up(runner, settings)
    hopeless = math.inf if incumbent is None else HOPELESS * incumbent * (1 + settings.early_stop_margin)
    samples = result.samples
    start = time.perf_counter()
    with throttling.timing():
        if settings.repeats is not None:
            samples.extend(runner.timed_call() for _ in range(settings.repeats))
        else:
            while len(samples) < settings.min_samples or (
                    len(samples) < settings.max_samples and time.perf_counter() - start < settings.max_time_s):
                samples.append(runner.timed_call())
                n = len(samples)
                if n < settings.min_samples and min(fastest, *samples) > hopeless and \
                        time.perf_counter() - start >= settings.max_time_s:
                    result.status = "early_stopped"
                    break
                if n < settings.min_samples or (n - settings.min_samples) % 5:
                    continue
                lo, hi = median_ci(samples, settings.confidence)
                if incumbent is not None and lo > incumbent * (1 + settings.early_stop_margin):
                    result.status = "early_stopped"
                    break
                if hi - lo <= settings.rel_ci * sorted(samples)[n // 2]:
                    break
    result.seconds = time.perf_counter() - began
    result.throttling = throttling.conditions()
    result.threads = busy.count()
    after = verify_after(runner, expected, names, tolerances)
    if after.status != "ok":
        after.seconds = result.seconds  # timed before it failed: not verifying time
    return result if after.status == "ok" else after


def measure_placements(runners: Mapping[str, Runner], expected: Sequence[np.ndarray], names: Sequence[str],
                       tolerances: Sequence[tuple[float, float]], settings: MeasureSettings,
                       incumbent: float | None = None) -> Measurement:
    """One trial under every placement (``runners``: placement -> runner), verified under
    each; its samples are the slowest placement's. A placement that fails ends the trial, and
    one stopped early ends its timing: the placements after it are only verified (a config
    wrong where malloc puts buffers was recorded as stopped early, and reached a final round).
    Its throttling is their samples'."""
    combined, throttling = Measurement("ok"), Throttling()
    for placement, runner in runners.items():
        timed = combined.status != "early_stopped"
        m = measure(runner, expected, names, tolerances, settings, incumbent, throttling) if timed else \
            verify(runner, expected, names, tolerances)
        if m.status not in ("ok", "early_stopped"):
            if len(runners) > 1:
                m.error = f"{m.error} (buffers placed {placement})"
            m.seconds += combined.seconds  # the placements timed before it
            return m
        if not timed:
            continue  # verified only: its timing stopped under a placement before
        combined.placements[placement] = m.samples
        combined.warmup_calls += m.warmup_calls
        combined.seconds += m.seconds
        combined.max_error = max(combined.max_error or 0.0, m.max_error or 0.0)
        combined.threads = max(filter(None, (combined.threads, m.threads)), default=None)
        combined.throttling = m.throttling  # the shared count: every placement's samples so far
        if m.status == "early_stopped":
            combined.status = "early_stopped"
    combined.samples = combined.placements[slowest(combined.placements)]
    return combined


def slowest(samples: Mapping[str, Sequence[float]]) -> str:
    """The placement whose samples have the highest median: the one that decides a time."""
    return max(samples, key=lambda p: statistics.median(samples[p]))


def objective_ms(samples: Mapping[str, Sequence[float]]) -> float:
    """A config's time from its samples per placement: the slowest placement's median."""
    return statistics.median(samples[slowest(samples)])


#: Calls at least this long (ms) are timed without an untimed call before them: what the previous
#: arm left in the caches is little beside them (an L3 refills in a few ms), and a 2 s kernel's
#: gate took 312 s a shape.
UNPRIMED_MS = 100.0


def interleave(runners: Mapping[str, Runner], rounds: int, primed: bool = True) -> dict[str, list[float]]:
    """``rounds`` timed calls of every runner, in turn and in a rotating order, so that drift
    in the machine's speed falls on all of them alike: round r's samples are a matched set.
    Each timed call follows an untimed one of the same runner, so that it finds the caches as a
    trial's consecutive calls do, not as the previous arm left them; none where not ``primed``
    (calls of :data:`UNPRIMED_MS` and longer)."""
    labels = list(runners)
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            if primed:
                runners[label].timed_call()
            samples[label].append(runners[label].timed_call())
    return samples
