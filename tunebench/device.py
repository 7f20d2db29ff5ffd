"""Device fingerprints: the id records are kept under, a line for readers, and whether a
fingerprint says enough to gate on.

Timings hold only on the device that measured them, so records are kept per fingerprint and
the gate and ``best()`` use only this device's. The id is readable (target, name, the
microarchitecture or compute capability, threads) and ends in a digest of the whole fingerprint,
so machines that differ in anything fingerprinted (ISA, caches, clocks) never share a file.

A GPU's driver and the CUDA version PyCUDA was built with are fingerprinted (a reader sees them)
but left out of the id, as the CPU's compiler and kernel are: they change with every driver update
and CI image, not with the card, and a gate runner whose id differs from the tuning box's skips
every task. The gate does not need them alike: it judges ratios measured in one run on the
runner, and the check against tuning-time figures is made only where the heuristic's time today
is close to its recorded one (:mod:`tunebench.gate`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

#: Fingerprinted per target, described, and left out of the device id (see the module docstring).
UNIDENTIFYING = {"cuda": ("driver", "cuda")}

#: What a CPU fingerprint of this tunebench version holds beyond the model name; a records file
#: whose fingerprint lacks it was recorded before the microarchitecture was fingerprinted.
MICROARCHITECTURE = ("vendor", "family", "model", "isa")


def microarchitecture_known(fingerprint: Mapping) -> bool:
    """False for a CPU fingerprint from before family, model and ISA were recorded."""
    return fingerprint.get("target") != "cpu" or all(k in fingerprint for k in MICROARCHITECTURE)


def threads_apart(here: Mapping, there: Mapping) -> bool:
    """Whether two fingerprints are one CPU run with other thread counts (``OMP_NUM_THREADS``,
    ``taskset`` or a cgroup), or more threads than cores on one of them: a device id of its own,
    though the machine is the same."""
    def bare(fp: Mapping) -> dict:
        return {k: v for k, v in fp.items() if k not in ("threads", "cores")}

    def run(fp: Mapping) -> tuple:
        return fp.get("threads"), fp.get("cores")

    return "threads" in here and run(there) != run(here) and bare(there) == bare(here)


def device_id(fingerprint: Mapping) -> str:
    """A readable, stable file name: ``cpu-amd-epyc-f26m2-2t-1f3a9c``, ``cuda-nvidia-h100-sm90-132sm-0b1c2d``."""
    parts = [fingerprint.get("target"), fingerprint.get("name")]
    if fingerprint.get("target") == "cpu" and microarchitecture_known(fingerprint):
        parts.append(f"f{fingerprint['family']}m{fingerprint['model']}")
    if "compute_capability" in fingerprint:
        parts.append(f"sm{str(fingerprint['compute_capability']).replace('.', '')}")
    if "sm_count" in fingerprint:
        parts.append(f"{fingerprint['sm_count']}sm")
    if "threads" in fingerprint:
        parts.append(f"{fingerprint['threads']}t")
    if "cores" in fingerprint:
        parts.append(f"{fingerprint['cores']}c")
    slug = re.sub(r"[^a-z0-9]+", "-", "-".join(str(p) for p in parts if p is not None).lower()).strip("-")
    return f"{slug}-{_digest(fingerprint, UNIDENTIFYING.get(fingerprint.get('target'), ()))}"


def _digest(fingerprint: Mapping, left_out: tuple = ()) -> str:
    kept = {k: v for k, v in fingerprint.items() if k not in left_out}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:6]


def earlier_id(fingerprint: Mapping) -> str | None:
    """The id an earlier tunebench gave this fingerprint, where it differs from today's: the
    digest of every key (the CUDA driver and version included)."""
    old = f"{device_id(fingerprint).rpartition('-')[0]}-{_digest(fingerprint)}"
    return old if old != device_id(fingerprint) else None


def _threads(fp: Mapping) -> str:
    n = fp.get("threads")
    return f"{n} thread{'' if n == 1 else 's'}{threads_on(fp)}"


def threads_on(fp: Mapping) -> str:
    """`` on 1 core`` where a fingerprint's threads outnumber its cores, else nothing."""
    cores = fp.get("cores")
    return f" on {cores} core{'' if cores == 1 else 's'}" if cores else ""


def describe(fingerprint: Mapping) -> str:
    """One line for a reader: what the device is, and what is unknown about it."""
    fp = dict(fingerprint)
    if fp.get("target") == "cpu":
        if not microarchitecture_known(fp):
            return (f"{fp.get('name')}, {_threads(fp)}, microarchitecture unknown (recorded "
                    f"before tunebench fingerprinted CPU family, model and ISA)")
        isa = fp.get("isa") or []
        widest = next((f for f in ("amx_tile", "avx512f", "avx2", "avx", "sve", "asimd") if f in isa), "no SIMD")
        return (f"{fp['name']} ({fp['vendor']} family {fp['family']} model {fp['model']} stepping "
                f"{fp.get('stepping')}, {widest.removesuffix('_tile')}, L2 {fp.get('l2_kib')} KiB, "
                f"L3 {fp.get('l3_kib')} KiB, {_threads(fp)})")
    if fp.get("target") == "cuda":
        extra = [f"{k} {fp[k]}" for k in ("compute_capability", "sm_count", "memory_gib", "memory_bus_bits",
                                          "sm_clock_mhz", "driver", "cuda") if k in fp]
        return f"{fp.get('name')} ({', '.join(extra)})"
    return ", ".join(str(v) for k, v in fp.items() if k != "target")
