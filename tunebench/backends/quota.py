"""The CPU quota of this process's cgroup (a Kubernetes CPU limit, ``docker --cpus``): the CPU
time it gives per period, and how often it throttled the process.

Under a quota a process still sees every core of its affinity mask, and OpenMP starts a thread
per core; once the cgroup has spent its quota for the period (usually 100 ms), the scheduler stops
all its threads until the next one: calls stall for tens of ms, and a 2-thread kernel under 1.5
CPU stalls in every period. The quota is cgroup v2's ``cpu.max`` or v1's ``cpu.cfs_quota_us`` over
``cpu.cfs_period_us``, at the process's cgroup or any above it up to the mount (a Kubernetes pod's
limit sits a level above its container's): the tightest holds. The times it throttled are the
``cpu.stat`` counters of those levels, summed. Neither psutil nor ``os.process_cpu_count`` reads
a quota, so the files are read here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Quota:
    quota_us: int  # CPU time per period
    period_us: int
    cgroup: Path  # the folder that sets it

    @property
    def cpus(self) -> float:
        """Cores' worth of CPU time: 0.5, 1.5."""
        return self.quota_us / self.period_us

    @property
    def threads(self) -> int:
        """Busy threads it keeps running through every period; at least 1, which under 1 CPU stalls too."""
        return max(1, self.quota_us // self.period_us)

    def __str__(self) -> str:
        return f"{self.cpus:g} CPU per {self.period_us / 1000:g} ms"


def cpu_max(text: str) -> tuple[int | None, int]:
    """(quota µs or None where unlimited, period µs) of a v2 ``cpu.max``: "max 100000", "50000 100000"."""
    quota, period = text.split()
    return (None if quota == "max" else int(quota)), int(period)


def cfs(quota_text: str, period_text: str) -> tuple[int | None, int]:
    """The same of v1's ``cpu.cfs_quota_us`` ("-1": unlimited) and ``cpu.cfs_period_us``."""
    quota = int(quota_text)
    return (None if quota < 0 else quota), int(period_text)


def throttling(text: str) -> tuple[int, int]:
    """(periods throttled, ns throttled) of a ``cpu.stat``: v1 counts ``throttled_time`` in ns, v2
    ``throttled_usec``; (0, 0) where it counts neither (v2's root, a cgroup without the cpu controller)."""
    fields = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
    ns = int(fields["throttled_time"]) if "throttled_time" in fields else int(fields.get("throttled_usec", 0)) * 1000
    return int(fields.get("nr_throttled", 0)), ns


def _unescaped(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), path)  # mountinfo writes a space as \040


def _holds(root: str, path: str) -> bool:
    """Whether a mount of a hierarchy's folder ``root`` shows the cgroup ``path`` (both as the
    hierarchy names them): the root is the path or above it."""
    return root == "/" or path == root or path.startswith(root + "/")


def folders(proc_cgroup: str, mountinfo: str) -> list[Path]:
    """The cpu controller's folders of the process's cgroup and of each above it up to its mount,
    the process's own first, from ``/proc/self/cgroup`` and ``/proc/self/mountinfo``: v2's and v1's.
    Of several mounts of a hierarchy (another container's cgroup bind-mounted, the host's
    hierarchy beside the container's own), one that shows the process's cgroup is read, the one
    that shows the most levels above it (a pod's limit); where none does, the first mount's own."""
    paths = {}  # "" for v2, "cpu" for the v1 hierarchy holding the cpu controller -> the cgroup's path
    for line in proc_cgroup.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if path and (controllers == "" or "cpu" in controllers.split(",")):
            paths.setdefault("cpu" if controllers else "", path)
    mounts: dict[str, list[tuple[str, Path]]] = {}  # key -> (root, mount point) of each mount, in mountinfo's order
    for line in mountinfo.splitlines():
        mount, _, fs = line.partition(" - ")
        fields, (kind, _, options) = mount.split(), (fs.split() + ["", "", ""])[:3]
        key = "" if kind == "cgroup2" else "cpu" if kind == "cgroup" and "cpu" in options.split(",") else None
        if key in paths:
            mounts.setdefault(key, []).append((_unescaped(fields[3]), Path(_unescaped(fields[4]))))
    found = []
    for key, each in mounts.items():
        path = paths[key]
        holding = [m for m in each if _holds(m[0], path)]
        root, point = min(holding, key=lambda m: len(m[0].rstrip("/"))) if holding else each[0]
        leaf = point / path[len(root) if root != "/" else 0:].lstrip("/") if holding else point
        found += [p for p in (leaf, *leaf.parents) if p == point or point in p.parents]
    return found


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def folders_of_process() -> list[Path]:
    """This process's :func:`folders`."""
    return folders(_read(Path("/proc/self/cgroup")) or "", _read(Path("/proc/self/mountinfo")) or "")


def limit(levels: list[Path] | None = None) -> Quota | None:
    """The tightest quota over ``levels`` (default: this process's); None where none is set."""
    quotas = []
    for folder in folders_of_process() if levels is None else levels:
        v2, v1 = _read(folder / "cpu.max"), _read(folder / "cpu.cfs_quota_us")
        period = _read(folder / "cpu.cfs_period_us")
        try:
            quota, period_us = cpu_max(v2) if v2 else cfs(v1, period) if v1 and period else (None, 0)
        except ValueError:
            continue
        if quota is not None and period_us > 0:
            quotas.append(Quota(quota, period_us, folder))
    return min(quotas, key=lambda q: q.cpus, default=None)


def throttled(levels: list[Path] | None = None) -> tuple[int, int]:
    """(periods throttled, ns throttled) so far, summed over ``levels`` (default: this process's)."""
    times = ns = 0
    for folder in folders_of_process() if levels is None else levels:
        text = _read(folder / "cpu.stat")
        if text:
            n, t = throttling(text)
            times, ns = times + n, ns + t
    return times, ns
