"""What identifies a CPU for timing purposes: vendor, family, model, stepping, the vector ISA
extensions a ``-march=native`` build uses, cache sizes and the thread count.

A hypervisor often reports a bare model name ("AMD EPYC") for CPUs of different generations,
whose timings differ by 1.5-2x; family, model and ISA come from the kernel's view of cpuid
(/proc/cpuinfo) and cache sizes from sysfs, so two such machines get different fingerprints.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from tunebench.backends import quota

#: ISA extensions that change what gcc -march=native emits for these kernels (x86 flags as
#: /proc/cpuinfo spells them; aarch64 "Features").
ISA_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vbmi2", "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16",
    "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "asimd", "asimdhp", "sve", "sve2", "sme",
)


def _asked() -> int | None:
    """The threads OMP_NUM_THREADS asks for (its first level), None where unset."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    return int(env) if env.isdigit() and int(env) > 0 else None


def thread_count() -> int:
    """OMP_NUM_THREADS if set, else the cores this process can keep busy (:func:`cores_usable`)."""
    return _asked() or cores_usable()


def _binds() -> bool:
    """Whether OpenMP binds each thread of a team to a place of its own (libgomp's and the
    LLVM/Intel runtime's variables); ``OMP_PROC_BIND=false`` turns it off whatever else is set."""
    bind = os.environ.get("OMP_PROC_BIND", "").strip().lower()
    kmp = os.environ.get("KMP_AFFINITY", "").strip().lower()
    return bind != "false" and bool(bind or os.environ.get("OMP_PLACES", "").strip()
                                    or os.environ.get("GOMP_CPU_AFFINITY", "").strip()
                                    or (kmp and not {"none", "disabled"} & set(kmp.split(","))))


def _threads_cores() -> int:
    """The cores of every thread of this process together (a thread's /proc entry each)."""
    cores: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            cores |= os.sched_getaffinity(int(task))
        except OSError:  # a thread that ended meanwhile
            continue
    return len(cores) or len(os.sched_getaffinity(0))


#: Where OpenMP binds its threads, the cores of the team's places, taken as tunebench is imported
#: (an OpenMP runtime reads its environment once, as it starts), before a parallel region pins
#: the calling thread to one place, and kept by a forked worker, whose one thread is pinned.
_TEAM = _threads_cores() if _binds() else None


def cores_allowed() -> int:
    """The cores this process may run on: the calling thread's, or where OpenMP binds its
    threads, the team's (see :data:`_TEAM`)."""
    return _TEAM if _TEAM is not None else len(os.sched_getaffinity(0))


def cores_usable() -> int:
    """The cores allowed, fewer where the cgroup's CPU quota gives less (rounded down, at least
    one): a thread per core under 1.5 CPU on 2 cores is stopped for a quarter of every period, and
    its times stall by tens of ms. (Go 1.25 and the JVM read the quota too and round up, for
    throughput; Uber's automaxprocs rounds down, as here.)"""
    found = quota.limit()
    return min(cores_allowed(), found.threads) if found else cores_allowed()


def quota_note() -> str | None:
    """Where the cgroup's CPU quota gives less than the cores allowed or the threads asked for:
    what the CPU target runs, what the quota does to its measurements, and what to do; else None."""
    found, allowed, asked = quota.limit(), cores_allowed(), _asked()
    if found is None or (asked or allowed) <= found.cpus:
        return None
    threads, period_ms = thread_count(), found.period_us / 1000
    them = f"{threads} thread{'' if threads == 1 else 's'}"
    said = f"the cgroup's CPU quota ({found}, set in {found.cgroup})"
    if asked is None:
        said += (f" gives less than the {allowed} cores allowed: the CPU target runs {them} (a thread per core "
                 f"would stall in every period), on the {threads}-thread device; run the tuned kernels with "
                 f"OMP_NUM_THREADS={threads} too, or raise the limit to {allowed} CPUs to tune {allowed} threads")
    if threads > found.cpus:
        said += (f"{'; even' if asked is None else ': OMP_NUM_THREADS asks for'} {them}, which the quota stops "
                 f"after {found.cpus * period_ms / threads:.3g} ms of every {period_ms:g} ms period: measurements "
                 f"it throttles are judged disturbed; "
                 + (f"{'set OMP_NUM_THREADS=1 and ' if threads > 1 else ''}raise the limit to at least 1 CPU"
                    if found.cpus < 1 else
                    f"set OMP_NUM_THREADS={found.threads} or raise the limit to {threads} CPUs"))
    return said


def _cpuinfo(text: str) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name.strip().lower(), value.strip())
    return fields


def _int(value: str | None) -> int | str | None:
    if value is None:
        return None
    try:
        return int(value, 0)
    except ValueError:
        return value


def caches(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict[str, int]:
    """KiB of the data/unified caches one core sees, per level: ``{"l1d_kib": 48, "l2_kib": ...}``."""
    found = {}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction" or not size[:-1].isdigit():
            continue
        kib = int(size[:-1]) * {"K": 1, "M": 1024, "G": 1024 * 1024}.get(size[-1], 1)
        found[f"l{level}{'d' if kind == 'Data' else ''}_kib"] = kib
    return found


def identify(cpuinfo: str | None = None, cache_root: Path | None = None) -> dict:
    """The CPU's fingerprint fields (see the module docstring); every key is always present,
    None where this machine does not say, but ``cores``: the cores allowed, where the threads
    outnumber them (OMP_NUM_THREADS=2 under ``taskset -c 0``), whose threads share cores and time
    as no run of that thread count on its own cores does."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields = _cpuinfo(cpuinfo)
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    name = fields.get("model name") or fields.get("cpu model") or platform.processor() or platform.machine()
    return {
        "target": "cpu",
        "name": name,
        "vendor": fields.get("vendor_id") or fields.get("cpu implementer"),
        "family": _int(fields.get("cpu family") or fields.get("cpu architecture")),
        "model": _int(fields.get("model") or fields.get("cpu part")),
        "stepping": _int(fields.get("stepping") or fields.get("cpu variant")),
        "machine": platform.machine(),
        "isa": [f for f in ISA_FLAGS if f in flags],
        **{"l1d_kib": None, "l2_kib": None, "l3_kib": None,
           **caches(*(() if cache_root is None else (cache_root,)))},
        "threads": thread_count(),
        **({"cores": cores_allowed()} if thread_count() > cores_allowed() else {}),
    }
