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
