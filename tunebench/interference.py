"""Interference: was a measurement disturbed by something else running on the machine?

On a shared 2-core VM, other processes take cores from a kernel's OpenMP threads: a thread
preempted inside a parallel region stalls the whole call for a scheduler slice (a few ms), so
samples come out clustered at multiples of a tick, in two modes, or with the median far above
what the undisturbed calls show. Such a median is not the kernel's time. Two kinds of evidence
decide, each a reason in words:

- the samples: tick-quantised outliers, two modes, a low quantile far below the median
  (:func:`sample_signals`);
- the machine while it was measured: CPU time that other processes took, niced ones included
  (a niced job on a 2-core VM was seen to hold a kernel at 8 ms where it takes 0.04), the
  hypervisor's steal time (``/proc/stat``), the load average against the core count
  (:class:`Monitor`, :func:`machine_signals`), and the periods in which the cgroup's CPU quota
  stopped the process (:class:`Throttling`): a container's limit stalls every thread of it for
  the rest of a period, tens of ms, on a machine that is otherwise quiet.

A measurement with any reason is ``disturbed``, else ``clean`` (:func:`verdict`).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tunebench.backends import quota

#: Scheduler ticks (ms) that preemption delays come in multiples of (HZ 1000, 250, 100).
TICKS_MS = (1.0, 4.0, 10.0)
#: A sample this much above the fast ones (relative, and at least OUTLIER_MS) is an outlier.
OUTLIER_REL = 0.5
OUTLIER_MS = 0.8
#: Outliers this common (a fraction of the samples, and at least two) disturb the median.
OUTLIER_SHARE = 0.2
#: A jump this large between neighbouring sorted samples, with this share on each side: two modes.
MODE_GAP = 0.3
MODE_SHARE = 0.25
#: The fast tenth of the samples this far below the median: most calls were slowed. (On this
#: project's quiet VM a few configs show a slow pair of samples, or a fast tenth at 70 % of the
#: median, now and then; other processes show in /proc/stat long before.)
LOW_QUANTILE = 0.6
#: Cores' worth of CPU time that other processes may take beyond the cores the kernel leaves
#: free before a measurement is disturbed, and the steal beyond the host's usual that disturbs it.
CONTENTION_CORES = 0.25
STEAL = 0.05
#: Seconds a run has watched the machine before its own steal counts as the host's usual: less
#: than its first three trials' retries take to stop a task on a busy machine (about 15 s).
STEADY_S = 10.0
#: The span a reading of the machine covers at least (/proc/stat counts in 10 ms ticks).
HORIZON_S = 0.5
#: Seconds between the readings taken while a trial runs or a retry waits (:meth:`Monitor.mark`;
#: one takes about 0.4 ms).
MARK_S = 0.1
#: A thread besides the calling one (the kernel's first) that ran this share of a measurement's
#: span is one of the kernel's ...
BUSY_SHARE = 0.25
#: ... and at least this long, or half the span where that is shorter: over a span of a few ms an
#: idle helper thread's brief wake-up read as a quarter of it (a serial 0.5 µs kernel recorded
#: as 2 threads), where an OpenMP thread of the kernel runs nearly all of it.
BUSY_MIN_NS = 4_000_000


def sample_signals(samples: Sequence[float]) -> list[str]:
    """Reasons the samples (ms) show interference; empty when they look undisturbed."""
    n = len(samples)
    if n < 5:
        return []
    ordered = sorted(samples)
    fast = ordered[max(0, n // 10 - 1)] if n >= 10 else ordered[0]
    median = statistics.median(ordered)
    edge = math.ceil(MODE_SHARE * n)  # samples on each side of the gap, at least
    gaps = [(ordered[i] / ordered[i - 1] - 1, i) for i in range(edge, n - edge + 1) if ordered[i - 1] > 0]
    gap, split = max(gaps) if gaps else (0.0, 0)
    if gap > MODE_GAP and _rhythm([x >= ordered[split] for x in samples]):
        return []  # the kernel's own two speeds, call by call: no load keeps such a beat
    found = []
    excess = [x - fast for x in ordered if x - fast > max(OUTLIER_MS, OUTLIER_REL * fast)]
    if len(excess) >= max(2, OUTLIER_SHARE * n):
        tick = next((t for t in sorted(TICKS_MS, reverse=True) if all(_near_multiple(e, t) for e in excess)), None)
        found.append(f"{len(excess)} of {n} samples {min(excess):.2g}-{max(excess):.2g} ms above the fast ones"
                     + (f", in multiples of a {tick:g} ms scheduler tick" if tick else ""))
    if gap > MODE_GAP:
        found.append(f"two modes: {split} samples up to {ordered[split - 1]:.4g} ms, {n - split} from "
                     f"{ordered[split]:.4g} ms")
    if n >= 10 and fast < LOW_QUANTILE * median:
        found.append(f"the fastest tenth at {fast / median:.0%} of the median: most calls were slowed")
    return found


def _rhythm(slow: Sequence[bool]) -> bool:
    """Whether the slow calls come in a fixed rhythm of 2 to 4 calls (every other call sweeps a
    buffer): a kernel of two speeds, which was stopped as "the machine is busy" on a quiet one."""
    n, changes = len(slow), sum(a != b for a, b in zip(slow, slow[1:]))  # a beat changes speed twice a period
    return any(n >= 4 * p and changes >= 0.9 * 2 * (n - 1) / p
               and sum(slow[i] == slow[i - p] for i in range(p, n)) >= 0.95 * (n - p) for p in (2, 3, 4))


def _near_multiple(value: float, tick: float) -> bool:
    k = round(value / tick)
    return k >= 1 and abs(value - k * tick) <= 0.25 * tick


@dataclass(frozen=True)
class _Stat:
    wall: float  # monotonic seconds
    cpu: tuple[int, ...]  # /proc/stat's cores allowed: user nice system idle iowait irq softirq steal ...
    own: int  # ticks of user and system time the tuning run's own processes took (OwnTime)


#: Where the kernel counts each core's time (``cpuN`` lines, in ticks).
PROC_STAT = Path("/proc/stat")


def cpu_ticks(text: str, cores: Collection[int]) -> tuple[int, ...]:
    """The ticks of ``cores`` in a /proc/stat, summed field by field: what runs on a core this
    process may not run on takes none of its kernel's time, and what runs on one it may does.
    A /proc/stat without a line for each (a container's, lxcfs numbering its cores from 0) is
    read whole, its "cpu" line."""
    lines = {fields[0]: [int(v) for v in fields[1:]] for fields in map(str.split, text.splitlines())
             if fields and fields[0][:3] == "cpu"}
    named = [f"cpu{core}" for core in cores]
    rows = [lines[name] for name in named] if all(name in lines for name in named) else [lines.get("cpu", [])]
    return tuple(map(sum, zip(*rows)))


def _process(pid: int) -> tuple[int, int] | None:
    """Process ``pid``'s parent and its ticks of user and system time, its waited children's with
    them (fields 4 and 14-17 of proc(5)); None once it has gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), sum(map(int, fields[11:15]))


def _last_pid() -> int:
    """The pid the kernel gave last (/proc/loadavg's last field)."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[-1])


def _given(pids: list[int], after: int, last: int) -> list[int]:
    """Those of ``pids`` given after ``after`` up to ``last``, in the order they were given: pids
    are given in turn, and start again from the lowest past pid_max."""
    if after <= last:
        return sorted(p for p in pids if after < p <= last)
    return sorted((p for p in pids if p > after or p <= last), key=lambda p: (p <= after, p))


def _descendants(roots: Sequence[int], parents: Mapping[int, int]) -> list[int]:
    """``roots`` and every process under them, of those in ``parents`` (pid: its parent's), each
    after its parent."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, list(reversed(roots))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = None
            todo += children.get(pid, ())
    return list(found)


#: Readings of the run's processes a reading takes at most while one of them ends during it.
READ_PASSES = 4


class OwnTime:
    """The CPU time the tuning run's own processes took: this process and every live one under it
    (its workers, the compilers of builds ahead beside a GPU measurement, a worker's compilers,
    what candidates start), each with its waited children's. A compile the run started is its own
    while it runs, not another process's. Summed over the live ones, a tick counts once: a child's
    are its own while it runs and its parent's once waited for, so the sum grows by what ran
    between two readings alone (a compile begun before a measurement and waited for during it adds
    what it ran during it, not its whole time, which hid other processes' load).

    A reading reads the stat of the run's processes and of those started since the last reading
    (pids are given in turn), not of every process on the machine; each after its parent, and
    all again where one ended during it: a child waited for between its parent's reading and its
    own was in neither (a build pool's compile read as another process's time, the measurement
    beside it disturbed), and read before its parent, in both.

    A process the run's at a reading stays the run's while it lives: one whose parent ended is
    init's (a compiler driver's helper, what a candidate forked outside a worker), and its time
    was another process's from then on. Its ticks at its last reading are kept once it ends, as
    init waits for it, not the run. (One that a process of the run started and left between two
    readings is not seen as the run's. One that outlives its parent after a reading and ends
    before the next takes its ticks at that reading out of the run's: whether its parent waited
    for it, or init did, is not known then; a grandchild that burnt 1 s took 100.)"""

    def __init__(self):
        self._ours: list[int] = []  # each after its parent
        self._last: int | None = None  # the pid given last at the last reading
        self._orphans: dict[int, int] = {}  # the run's processes whose parent is not, at the last reading: ticks
        self._ended = 0  # ticks of the orphans that have ended

    def ticks(self) -> int:
        last = _last_pid()  # first: a process started after it is read at the next reading
        listed = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        if self._last is None:
            pids, known = listed, []
        else:
            new = _given(listed, self._last, last)
            live = set(listed).difference(new)
            known = [p for p in self._ours if p in live]
            pids = known + new
        for _ in range(READ_PASSES):
            found = {p: read for p in pids if (read := _process(p))}
            if len(found) == len(pids):
                break
            pids = list(found)
        self._ended += sum(t for p, t in self._orphans.items() if p not in found or p not in known)
        root = os.getpid()
        self._ours = _descendants([root, *known], {p: parent for p, (parent, _) in found.items()})
        ours = set(self._ours)
        self._orphans = {p: found[p][1] for p in self._ours if p != root and p in found and found[p][0] not in ours}
        self._last = last
        return self._ended + sum(found[p][1] for p in self._ours if p in found)


def _stat(own: OwnTime, cores: Collection[int]) -> _Stat | None:
    try:
        cpu = cpu_ticks(PROC_STAT.read_text(), cores)
        ticks = own.ticks()
    except (OSError, ValueError):
        return None
    return _Stat(time.monotonic(), cpu, ticks)


class Monitor:
    """The cores the tuning run may run on (its workers and their kernels are forked from it)
    over the last :data:`HORIZON_S` seconds or more, as seen from the run: the share of their
    CPU time that processes other than the run's own (:class:`OwnTime`) took, steal, and the load
    average. One measurement is often shorter than /proc/stat's 10 ms ticks can resolve, so each
    reading spans back to an earlier one at least the horizon old; readings are taken by the
    process that starts the workers, so the span runs across fresh workers, every
    :data:`MARK_S` while a trial runs or a retry waits (:meth:`mark`), so that the span is the
    measurement's, from its start (:meth:`pin`), or its last half second or so where shorter."""

    def __init__(self):
        self._cores = os.sched_getaffinity(0)
        self._own = OwnTime()
        first = _stat(self._own, self._cores)
        self._marks = [first] if first else []
        self._first = first  # the run's first reading: its usual steal (see _usual_steal)
        self._pinned: _Stat | None = None  # where the measurement began (see pin)

    def pin(self) -> None:
        """A reading the next span starts at or before: the measurement's start (its loading,
        verifying, warm-up and samples follow), so that a span of its last half second does not
        leave out load early in a long sampling."""
        self._pinned = _stat(self._own, self._cores)

    def mark(self) -> None:
        """A reading for a later span to start at. Without them the span reached back to the
        previous measurement: across a compile, a reference's build or a string of failed
        candidates, other load during the samples was diluted into seconds of quiet and the
        trial judged clean; across a retry's pause, load that ended in the pause disturbed a
        retry measured on a quiet machine."""
        found = _stat(self._own, self._cores)
        if found is None:
            return
        old = [i for i, m in enumerate(self._marks) if found.wall - m.wall >= HORIZON_S]
        self._marks = self._marks[old[-1] if old else 0:] + [found]  # none before the latest old enough

    def conditions(self) -> dict:
        """Now, over the span back to an earlier reading."""
        found = {"loadavg_1m": round(os.getloadavg()[0], 2), "cores": len(self._cores)}
        if len(self._cores) != os.cpu_count():  # the load average counts the machine's, not the cores allowed
            found["machine_cores"] = os.cpu_count()
        end = _stat(self._own, self._cores)
        if end is None or not self._marks:
            return found
        start = next((m for m in reversed(self._marks) if end.wall - m.wall >= HORIZON_S), self._marks[0])
        self._marks = [m for m in self._marks if m.wall >= start.wall] + [end]
        if self._pinned is not None and self._pinned.wall < start.wall:
            start = self._pinned
        self._pinned = None
        d = [b - a for a, b in zip(start.cpu, end.cpu)]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (d + [0] * 8)[:8]
        total = sum(d[:8])
        found["window_s"] = round(end.wall - start.wall, 3)
        if total <= 0 or end.wall - start.wall < HORIZON_S / 2:
            return found
        found["others_cpu"] = round(max(0, user + nice + system + irq + softirq - (end.own - start.own)) / total, 3)
        found["steal"] = round(steal / total, 3)
        found["steal_usual"] = self._usual_steal(end)
        return found

    def _usual_steal(self, end: _Stat) -> float:
        """The host's usual steal: its share of the cores' time since boot (/proc/stat counts
        since boot), or since this run began where that is higher and the run :data:`STEADY_S`
        old (a VM up for weeks whose new neighbour steals a steady 8 % read 0 since boot). A VM
        whose hypervisor steals a steady 8 % stole it in every measurement, so a tune there
        stopped on its first three trials and recorded nothing, where a steal the same in every
        measurement slows each alike (what it does to single samples, the samples show)."""
        usual, self._first = _steal_share(end.cpu), self._first or end
        if end.wall - self._first.wall >= STEADY_S:
            usual = max(usual, _steal_share([b - a for a, b in zip(self._first.cpu, end.cpu)]))
        return usual


def _steal_share(cpu: Sequence[int]) -> float:
    """Steal's share of the cores' time in /proc/stat's fields (0 where it has no steal field)."""
    total = sum(cpu[:8])
    return round(cpu[7] / total, 3) if len(cpu) >= 8 and total > 0 else 0.0


def _run_ns() -> dict[str, int]:
    """ns each thread of this process has run (``/proc/self/task/*/schedstat``), {} where unreadable."""
    found = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                found[task] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return found


class BusyThreads:
    """The threads of this process that ran for much of a span (started at creation): the
    kernel's own while it is sampled. The thread count asked for (``OMP_NUM_THREADS``) is not
    what a serial kernel runs, nor one whose own param sets ``num_threads``; an idle OpenMP
    pool's threads and numpy's do not run."""

    def __init__(self):
        self._began, self._ran = time.perf_counter(), _run_ns()
        self._caller = str(threading.get_native_id())  # runs the kernel: its run time reads late over a short span

    def count(self) -> int | None:
        ran, span_ns = _run_ns(), (time.perf_counter() - self._began) * 1e9
        if not ran or span_ns <= 0:
            return None
        least = max(BUSY_SHARE * span_ns, min(BUSY_MIN_NS, span_ns / 2))
        return 1 + sum(ns - self._ran.get(t, 0) >= least for t, ns in ran.items() if t != self._caller)


class Throttling:
    """The cgroup's CPU quota, and the periods in which it stopped this process while it timed
    (:meth:`timing`): the conditions ``cpu_quota`` (cores' worth), ``quota_period_ms``,
    ``throttled`` (periods) and ``throttled_ms``, none of them where no quota is set. The counters
    are the whole cgroup's: its throttling stalls every thread in it, the kernel's among them.
    A throttle while a candidate is verified or warmed up stalls no sample, and is not counted."""

    def __init__(self):
        self._levels = quota.folders_of_process()
        self._times = self._ns = 0

    @contextlib.contextmanager
    def timing(self):
        """Counts the throttling within the block, whose calls are the samples. (The kernel counts
        a throttle as it ends, before a stopped thread runs again: one that stalled a sample is
        counted by the time the sample returns.)"""
        times, ns = quota.throttled(self._levels)
        yield
        after = quota.throttled(self._levels)
        self._times, self._ns = self._times + after[0] - times, self._ns + after[1] - ns

    def conditions(self) -> dict:
        found = quota.limit(self._levels)
        if found is None:
            return {}
        return {"cpu_quota": round(found.cpus, 3), "quota_period_ms": found.period_us / 1000,
                "throttled": self._times, "throttled_ms": round(self._ns / 1e6, 3)}


#: How a reason naming the cgroup's CPU quota begins: no quieter moment lifts it.
QUOTA_REASON = "the cgroup's CPU quota"


def quota_remedy(target: str) -> str:
    """What to do about measurements the quota throttled on ``target``. On the CPU the kernel's
    threads outran it; a GPU's kernel is launched and timed by one host thread, which the quota
    stops with the rest of the container however few threads its kernels run."""
    if target == "cpu":
        return "run fewer threads than the quota's CPUs (OMP_NUM_THREADS), or raise the limit"
    return ("the host thread that launches and times the kernels is throttled with the rest of the container: "
            "raise the limit, or keep the container's other work off its CPUs while it tunes")


def remedy(reasons: str, otherwise: str, target: str) -> str:
    """What to do about a measurement on ``target`` disturbed for ``reasons``: :func:`quota_remedy`
    where they name the quota, else ``otherwise`` (a quieter machine)."""
    return quota_remedy(target) if QUOTA_REASON in reasons else otherwise


def machine_signals(conditions: Mapping) -> list[str]:
    """Reasons the machine's conditions during a measurement show interference. Other processes
    disturb once they want more than the cores the kernel's threads (``threads``, those that
    ran while it was sampled, :class:`BusyThreads`; default 1) leave free: a kernel with a
    thread on every core stalls at its barriers for a scheduler slice whenever anything else runs.
    A cgroup's CPU quota that throttled it (:class:`Throttling`) disturbs it however quiet the rest
    is. The hypervisor's steal disturbs where it is well above the host's usual (``steal_usual``):
    one steady through the run slows every measurement alike."""
    found = []
    if conditions.get("throttled"):  # first: the container's own limit, which no quieter moment lifts
        n = conditions["throttled"]
        found.append(f"{QUOTA_REASON} ({conditions['cpu_quota']:g} CPU per {conditions['quota_period_ms']:g} "
                     f"ms) throttled the measurement {n} time{'' if n == 1 else 's'} ({conditions['throttled_ms']:.3g} "
                     f"ms in all)")
    others, steal = conditions.get("others_cpu"), conditions.get("steal")
    cores = conditions.get("cores") or 1
    spare = max(0, cores - conditions.get("threads", 1))
    if others is not None and others * cores > spare + CONTENTION_CORES:
        found.append(f"other processes took {others:.0%} of the CPU time ({others * cores:.2g} of {cores} cores, "
                     f"{spare} {'core' if spare == 1 else 'cores'} left free by the kernel's threads)")
    usual = conditions.get("steal_usual") or 0.0
    if steal is not None and steal >= usual + STEAL:
        found.append(f"the hypervisor stole {steal:.0%} of the CPU time"
                     + (f", where it steals {usual:.0%} as a rule" if usual >= 0.005 else ""))
    load, machine = conditions.get("loadavg_1m"), conditions.get("machine_cores") or cores
    if others is None and load is not None and load > machine + 1:
        found.append(f"load average {load:.1f} on {machine} cores")
    return found


def verdict(samples, conditions: Mapping) -> dict:
    """The conditions and the verdict on them and on every list of samples (``samples`` nests
    lists in dicts, per placement and per arm): ``verdict`` "clean", or "disturbed" with the
    reasons in ``interference``."""
    reasons = machine_signals(conditions)
    for where, values in _lists(samples):
        reasons += [f"{where}: {r}" if where else r for r in sample_signals(values)]
    return {"conditions": dict(conditions), "verdict": "disturbed" if reasons else "clean", "interference": reasons}


def _lists(samples, where: str = ""):
    """(where, list) of every list in nested dicts; a dict of one entry adds no name."""
    if isinstance(samples, Mapping):
        for name, values in samples.items():
            yield from _lists(values, where if len(samples) == 1 else f"{where} {name}".strip())
    else:
        yield where, samples
