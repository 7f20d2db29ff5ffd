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

#: ISA extensions that change what gcc -march=native emits for these kernels (x86 flags as
#: /proc/cpuinfo spells them; aarch64 "Features").
ISA_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vbmi2", "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16",
    "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "asimd", "asimdhp", "sve", "sve2", "sme",
)


def thread_count() -> int:
    """OMP_NUM_THREADS if set, else the cores this process may run on."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    return int(env) if env.isdigit() and int(env) > 0 else cores_allowed()


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
    None where this machine does not say."""
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
    }
