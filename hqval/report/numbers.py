"""Numbers as the report prints them: as many digits as a reader needs to judge them
(ratios to the 0.01% a gate decision turns on, p-values to whether they are small)."""

from __future__ import annotations

import math
import re


def fmt_value(v: float | None) -> str:
    """A measured value or bound: three significant digits (a count stays whole)."""
    if v is None:
        return ""
    if not math.isfinite(v):
        return str(v)
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


def fmt_ratio(v: float | None) -> str:
    """A v2/v1 ratio or its CI bound: four decimals (the gates are 1.01 and 1.05 and a
    clean re-run moves the ratio by about 0.1%)."""
    return "" if v is None or not math.isfinite(v) else f"{v:.4f}"


P_FLOOR = 1e-6


def fmt_p(p: float | None) -> str:
    """A p-value as a reader needs it: two digits, and below 1e-6 only that it is
    (``p=1e-99`` says nothing ``p<1e-6`` does not)."""
    if p is None or not math.isfinite(p):
        return ""
    if p < P_FLOOR:
        return f"<{P_FLOOR:.0e}".replace("e-0", "e-")
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}".replace("e-0", "e-")


def fmt_gbps(v: float | None) -> str:
    return "" if v is None or not math.isfinite(v) else f"{v:.0f}"


def pct(v: float | None) -> str:
    """A relative change (1.0123 -> +1.23%)."""
    return "" if v is None or not math.isfinite(v) else f"{v - 1:+.2%}"


_P_IN_TEXT = re.compile(r"\bp=(\d+(?:\.\d+)?(?:e[-+]?\d+)?)")


def readable(message: str) -> str:
    """A stored message with its p-values rounded as ``fmt_p`` prints them (runs written
    before the report rounded them say ``p=1e-99``)."""
    def one(m: re.Match[str]) -> str:
        p = fmt_p(float(m.group(1)))
        return "p" + (p if p.startswith("<") else "=" + p)
    return _P_IN_TEXT.sub(one, message)
