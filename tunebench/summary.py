"""The terminal summary of a tuning run: per (kernel, bucket, dtype), tuned against the baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

COLUMNS = ("kernel", "bucket", "dtype", "configs", "new", "desel", "failed", "early", "best ms", "rate",
           "baseline ms", "speedup", "best config", "baseline config")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _rate(rate: tuple[float, str] | None) -> str:
    return "-" if rate is None else f"{rate[0]:.4g} {rate[1]}"


def table(rows: Sequence[Mapping]) -> list[str]:
    """Aligned lines for rows with the keys the columns name (see :data:`COLUMNS`).

    A row has: kernel, bucket, dtype, configs (the candidates weighed), new (trials measured now,
    one per config and shape), deselected, failed, early, best_ms, best_rate
    ((value, unit) or None), baseline_ms, speedup (the times and the speedup marked * where
    ``confirmed`` is false: no final round measured them, and they are the trials'), best_config
    and baseline_config (text).
    """
    def mark(r: Mapping, text: str) -> str:
        return text if text == "-" or r.get("confirmed", True) else f"{text}*"
    cells = [COLUMNS] + [(
        r["kernel"], r["bucket"], r["dtype"], str(r["configs"]), str(r["new"]), str(r["deselected"]),
        str(r["failed"]), str(r["early"]), mark(r, _ms(r["best_ms"])), _rate(r["best_rate"]),
        mark(r, _ms(r["baseline_ms"])), mark(r, "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"),
        r["best_config"], r["baseline_config"],
    ) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    numeric = set(range(3, 12))
    return ["  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                      for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in cells]


#: What each of a trial's phases is called in the summary (see :data:`tunebench.session.PHASES`).
PHASE_WORDS = {"measure_s": "timing the calls", "verify_s": "verifying (before and after the timed calls)",
               "load_s": "loading", "prepare_s": "building inputs and references", "compile_time_s": "compiling"}


def spent(total_s: float, phases: Mapping[str, float]) -> str | None:
    """Where the new trials' ``total_s`` seconds went, largest phase first (None where they took
    none): a tune that takes long says whether the kernels, the verifying or the inputs did. On a
    cluster the phases are each device's, at once: they may add up to more than the total."""
    if total_s <= 0:
        return None
    parts = [f"{_s(s)} s {PHASE_WORDS[p]}" for p, s in sorted(phases.items(), key=lambda kv: -kv[1]) if s >= 0.005]
    rest = total_s - sum(phases.values())
    if rest > 0:
        parts.append(f"{_s(rest)} s the rest (waiting for compiles ahead, retries, the search, the records)")
    return f"the new trials took {_s(total_s)} s: {', '.join(parts)}"


def _s(seconds: float) -> str:
    """Seconds as a person reads them: 0.43, 3.2, 1234 (not 1.2e+03)."""
    return f"{seconds:.2g}" if seconds < 10 else f"{seconds:.0f}"


#: Tasks a summary line names before it counts the rest: a generated table's 27 filled a line.
NAMED = 6


#: Signs of other load a line names of a final round that stayed disturbed, before it counts the rest.
SIGNS = 2
#: How a final round's problem begins where other load kept it from judging (see final_round._unusable).
DISTURBED = "the machine stayed disturbed on "


def brief(problem: str) -> str:
    """A final round's problem as a line says it: where the machine stayed disturbed, its first
    :data:`SIGNS` signs and how many more (best()'s answer gave every process's, staggered and
    malloc placements each, 1.8 KB of it); the records keep them all."""
    where, colon, signs = problem.partition(": ")
    listed = signs.split("; ")
    if not problem.startswith(DISTURBED) or not colon or len(listed) <= SIGNS:
        return problem
    rest = len(listed) - SIGNS
    return f"{where}: {'; '.join(listed[:SIGNS])}; and {rest} more sign{'s' if rest > 1 else ''} (in the records' final round)"


#: What a wrong result's error says where the output it names is read by the kernel (see
#: :func:`tunebench.measure._reads_output`): then the declaration, not the reference, is at fault.
READS_OUTPUT = "depends on what it held before the call"


def all_wrong(heuristic: tuple[str, str | None], others: Sequence[str]) -> str | None:
    """Where every config that ran to a result, the heuristic's included, gave a wrong one: the
    reference or its tolerance is more likely at fault than every config, unless the heuristic's
    result says the kernel reads an output not declared inout. ``heuristic`` is its (status,
    error), ``others`` the other configs' statuses. Configs that failed otherwise (a crash, a
    build refused) say nothing of the reference: a space with some hid the hint. The tune's
    summary, best() and the gate say it alike: a re-tune under the same declaration changes nothing."""
    status, error = heuristic
    wrong = sum(s == "wrong_result" for s in others)
    if not wrong or status != "wrong_result" or any(s in ("ok", "early_stopped") for s in others):
        return None
    blamed = ("likely not the reference: the heuristic's config reads that output or leaves part of it unwritten"
              if READS_OUTPUT in (error or "") else "the reference is more likely at fault than every config, or, where all "
              "miss by little, its tolerance (Kernel(tolerance={dtype: (rtol, atol)}))")
    kinds = sorted(set(others) - {"wrong_result"})
    counted = (f"every config measured ({wrong} and the heuristic's)" if not kinds else
               f"every config that ran to a result ({wrong} and the heuristic's; "
               f"{len(others) - wrong} others did not: {', '.join(kinds)})")
    return f"{counted} gave a wrong result, the heuristic's: {error}; {blamed}"


def some(names: Sequence[str]) -> str:
    """The first :data:`NAMED` names and how many more: the table above shows every row."""
    rest = len(names) - NAMED
    return ", ".join(names[:NAMED]) + (f" and {rest} more" if rest > 0 else "")
