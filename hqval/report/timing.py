"""The timing rows as the report's views read them: each v2/v1 (or A/A) cell with its
shape, rows per block, cache mode, format, the gate that decided it, its verdict (pass,
fail, noisy, error) and the raw per-run samples; grouped by mode, R and shape.

The gate drawn is the gate applied: a row judged against a policy gate carries it in
``details["gate"]`` (``ratio_max``); otherwise the row's own ``tolerance`` decided its
status when it was measured (an A/A control's is a band 1 +- tolerance).  Nothing here
falls back to the shipped policy's default.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hqval.formats import HFQ4G256_QT as V1_QT
from hqval.result import Row, Status
from hqval.results.store import Run
from hqval.timing.stats import run_ratio

MODES = ("hot", "cold")
__all__ = ["V1_QT", "TimingCell", "grouped", "history", "is_ratio_row", "latest",
           "noisy_groups", "swept", "timing_cell", "timing_cells", "verdict_counts"]


def _num(d: Mapping[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def _runs(v: Any) -> tuple[tuple[float, ...], ...]:
    """Per-run sample lists (a flat list is one run); non-numbers are dropped."""
    if not isinstance(v, list) or not v:
        return ()
    runs = v if isinstance(v[0], list) else [v]
    return tuple(tuple(float(x) for x in r if isinstance(x, (int, float)) and math.isfinite(x))
                 for r in runs if isinstance(r, list))


def _median(runs: Sequence[Sequence[float]]) -> float | None:
    flat = sorted(x for r in runs for x in r)
    if not flat:
        return None
    n = len(flat)
    return flat[n // 2] if n % 2 else (flat[n // 2 - 1] + flat[n // 2]) / 2


@functools.lru_cache(maxsize=1)
def _manifest_qts() -> dict[str, int]:
    from hqval.manifest import ManifestError, load_manifest

    try:
        return {k.name: k.qt for k in load_manifest(None).kernels}
    except (ManifestError, OSError):  # a report renders without the suite's manifest too
        return {}


def format_name(qt: int | None) -> str:
    if qt is None:
        return "unknown format"
    from hqval import formats

    try:
        return f"qt={qt} {formats.by_qt(qt).name}"
    except (KeyError, ValueError):
        return f"qt={qt}"


def _shape_key(shape: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", shape)) or (0,)


@dataclass(frozen=True)
class TimingCell:
    row: Row
    run_label: str  # which run (several nights or machines): its date, else its path
    device: str
    kernel: str  # the kernel timed as B (A/A: the v1 baseline against itself)
    shape: str
    mode: str
    rows_per_block: int | None
    qt: int | None
    aa: bool
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None
    predicted: float | None
    gbps: float | None
    cache_resident: bool | None
    gate: float | None  # ratio_max applied (A/A: the band's half width)
    gate_source: str
    verdict: str  # pass | fail | noisy | error | skipped | unsupported
    median_a: float | None  # us, arm A (the v1 baseline)
    median_b: float | None  # us, arm B (the candidate; A/A: the baseline again)
    samples_a: tuple[tuple[float, ...], ...]
    samples_b: tuple[tuple[float, ...], ...]
    run_ratios: tuple[float, ...]
    tries: tuple[float, ...]
    baseline: str

    @property
    def noisy(self) -> bool:
        return self.verdict == "noisy"

    @property
    def slow(self) -> bool:
        return self.verdict == "fail"

    @property
    def group(self) -> tuple[str, int, tuple[int, ...], str]:
        """Sort and group key: mode, R, shape, then the A/A control before the candidates."""
        return (self.mode, self.rows_per_block or 0, _shape_key(self.shape), self.shape)

    @property
    def group_label(self) -> str:
        r = f"R={self.rows_per_block}" if self.rows_per_block else "R=?"
        return f"{self.mode} · {r} · {self.shape}"

    @property
    def label(self) -> str:
        """Short row label inside its group; the full identity goes in the hover title."""
        if self.aa:
            return f"A/A {self.kernel}"
        return f"{format_name(self.qt)} {self.kernel}"

    @property
    def gate_text(self) -> str:
        if self.gate is None:
            return "no gate recorded"
        if self.aa:
            return f"A/A within 1 ± {self.gate:g}"
        conf = self.row.details.get("gate", {}).get("confidence") if isinstance(
            self.row.details.get("gate"), dict) else None
        return f"ratio ≤ {self.gate:g}" + (f" ({conf:.0%} CI)" if isinstance(
            conf, (int, float)) else "")

    def why_noisy(self) -> str:
        """The reason, as a sentence, from the row's own evidence."""
        msg = self.row.message
        bits = []
        if self.aa and self.ratio is not None and self.gate is not None:
            tries = (f" after {len(self.tries)} tries ("
                     + ", ".join(f"{t:.4f}" for t in self.tries) + ")"
                     if len(self.tries) > 1 else "")
            bits.append(f"the A/A control (qt={V1_QT} against itself) measured "
                        f"{self.ratio:.4f}, "
                        f"outside 1 ± {self.gate:g}{tries}")
        elif "noisy" in msg or "noisy" in str(self.row.details.get("untrusted", "")):
            bits.append("its group's A/A control was noisy, so the ratio is not trusted")
        elif self.row.details.get("untrusted"):
            bits.append(f"the run was not trusted: {self.row.details['untrusted']}")
        elif self.verdict == "noisy" and self.gate is not None and self.ci_low is not None:
            bits.append(f"its confidence interval [{self.ci_low:.4f}, {self.ci_high:.4f}] "
                        f"still straddles the gate {self.gate:g} after every run the budget "
                        "allows")
        if "queue" in msg:
            bits.append("the host outran the queue filler (the GPU went idle between samples)")
        if len(self.run_ratios) > 1:
            lo, hi = min(self.run_ratios), max(self.run_ratios)
            bits.append(f"the {len(self.run_ratios)} runs' own ratios spread from {lo:.4f} to "
                        f"{hi:.4f} ({(hi - lo) * 100:.1f}% apart)")
        return "; ".join(bits) or msg


def _verdict(row: Row) -> str:
    """pass | fail | noisy | error | ...: the gate's verdict where the row records one
    (``details.verdict``, a string or hqval.timing.gate's ``{"verdict": ...}``); a run
    that was not trusted (noisy A/A control, drained queue) is noisy whatever its ratio."""
    d = row.details
    if d.get("untrusted") or d.get("noisy") is True or (
            row.status is Status.ERROR and "noisy" in row.message):
        return "noisy"
    v = d.get("verdict")
    if isinstance(v, dict):
        v = v.get("verdict")
    if isinstance(v, str) and v:
        return v
    return str(row.status)


def is_ratio_row(row: Row) -> bool:
    d = row.details
    return isinstance(d.get("stats"), dict) or "ci_low" in d or "ratio" in d


def timing_cell(row: Row, run_label: str = "", device: str = "",
                kernel_qt: Mapping[str, int] | None = None) -> TimingCell:
    d = row.details
    stats = d.get("stats") if isinstance(d.get("stats"), dict) else {}
    assert isinstance(stats, dict)
    merged = {**stats, **d}
    if "gbps_b" in merged and "gbps" not in merged:
        merged["gbps"] = merged["gbps_b"]  # the candidate arm's effective bandwidth
    kernel, _, shape = row.kernel.partition("@")
    shape = str(d.get("shape") or shape or "?")
    aa = row.check.startswith("timing_aa")
    mode = str(d.get("mode") or next((m for m in MODES if row.check.endswith(m)), "?"))
    r = d.get("rows_per_block")
    m = re.search(r"_r(\d+)$", kernel)
    rows_per_block = int(r) if isinstance(r, int) else (int(m.group(1)) if m else None)
    qts = kernel_qt or {}
    qt = qts.get(kernel, _manifest_qts().get(kernel))
    gate_d = d.get("gate") if isinstance(d.get("gate"), dict) else None
    if gate_d is not None and _num(gate_d, "ratio_max") is not None:
        gate, source = _num(gate_d, "ratio_max"), str(gate_d.get("source") or "policy")
    else:
        gate = row.tolerance if row.tolerance is not None and math.isfinite(row.tolerance) \
            else None
        source = "the row's tolerance when measured"
    ratio = row.measured if row.measured is not None and math.isfinite(row.measured) else None
    rr, tr = stats.get("run_ratios"), d.get("tries")
    run_ratios: list[Any] = rr if isinstance(rr, list) else []
    tries: list[Any] = tr if isinstance(tr, list) else []
    samples_a, samples_b = _runs(d.get("samples_a")), _runs(d.get("samples_b"))
    if samples_a and len(samples_a) == len(samples_b):
        # each run's ratio as the cell ratio is made of now (the stored one may be of an
        # older statistic), from the samples the verdict is recomputed from
        with contextlib.suppress(ValueError):  # a non-positive time: keep what was stored
            run_ratios = [run_ratio(a, b) for a, b in zip(samples_a, samples_b, strict=True)]
    return TimingCell(
        row=row, run_label=run_label, device=device or f"{row.arch} ({row.backend})",
        kernel=kernel, shape=shape, mode=mode, rows_per_block=rows_per_block, qt=qt, aa=aa,
        ratio=ratio if ratio is not None else _num(merged, "ratio"),
        ci_low=_num(merged, "ci_low"), ci_high=_num(merged, "ci_high"),
        p=_num(merged, "mwu_p", "p"), predicted=_num(merged, "predicted_ratio", "predicted"),
        gbps=_num(merged, "gbps", "effective_gbps"),
        cache_resident=merged.get("cache_resident") if isinstance(
            merged.get("cache_resident"), bool) else None,
        gate=gate, gate_source=source, verdict=_verdict(row),
        median_a=_num(d, "median_us_a") or _median(_runs(d.get("samples_a"))),
        median_b=_num(d, "median_us_b") or _median(_runs(d.get("samples_b"))),
        samples_a=samples_a, samples_b=samples_b,
        run_ratios=tuple(float(x) for x in run_ratios if isinstance(x, (int, float))),
        tries=tuple(float(x) for x in tries if isinstance(x, (int, float))),
        baseline=str(d.get("baseline") or ("" if aa else f"qt={V1_QT}")),
    )


def run_label(run: Run) -> str:
    date = run.envelope.get("date")
    return str(date) if date else str(run.path)


def timing_cells(runs: Sequence[Run], kernel_qt: Mapping[str, int] | None = None
                 ) -> list[TimingCell]:
    """Every ratio cell of every run, grouped (mode, R, shape; A/A first), then by run."""
    out: list[TimingCell] = []
    for run in runs:
        device = str(run.envelope.get("device") or "")
        label = run_label(run)
        out += [timing_cell(r, label, device, kernel_qt) for r in run.rows
                if r.kind == "timing" and is_ratio_row(r)]
    return sorted(out, key=lambda c: (c.group, not c.aa, c.qt or 0, c.kernel, c.run_label))


def latest(cells: Iterable[TimingCell]) -> list[TimingCell]:
    """One cell per identity: the one of the latest run (the heatmap's and sweep's input)."""
    best: dict[str, TimingCell] = {}
    for c in cells:
        old = best.get(c.row.identity)
        if old is None or c.run_label >= old.run_label:
            best[c.row.identity] = c
    return list(best.values())


def history(cells: Iterable[TimingCell]) -> dict[str, list[TimingCell]]:
    """identity -> its cells across runs, oldest first, for identities seen in 2+ runs."""
    by: dict[str, list[TimingCell]] = {}
    for c in cells:
        by.setdefault(c.row.identity, []).append(c)
    return {k: sorted(v, key=lambda c: c.run_label) for k, v in sorted(by.items())
            if len({c.run_label for c in v}) > 1}


def swept(cells: Iterable[TimingCell]) -> bool:
    """True when one run timed the same shape and mode at more than one R."""
    seen: dict[tuple[str, str, str], set[int]] = {}
    for c in cells:
        if c.rows_per_block is not None:
            seen.setdefault((c.run_label, c.shape, c.mode), set()).add(c.rows_per_block)
    return any(len(rs) > 1 for rs in seen.values())


def grouped(cells: Sequence[TimingCell]) -> list[tuple[str, list[TimingCell]]]:
    out: list[tuple[str, list[TimingCell]]] = []
    for c in cells:
        if not out or out[-1][0] != c.group_label:
            out.append((c.group_label, []))
        out[-1][1].append(c)
    return out


def noisy_groups(cells: Sequence[TimingCell]
                 ) -> list[tuple[str, TimingCell | None, list[TimingCell]]]:
    """The noisy cells by (run, mode, R, shape): each with the group's A/A control (the
    usual cause) and every noisy cell of the group, control included."""
    out: dict[tuple[str, str], tuple[str, TimingCell | None, list[TimingCell]]] = {}
    for c in cells:
        key = (c.run_label, c.group_label)
        if key not in out:
            out[key] = (f"{c.group_label} ({c.run_label})", None, [])
        label, _, members = out[key]
        if c.aa:
            out[key] = (label, c, members)
        if c.noisy:
            members.append(c)
    return [v for v in out.values() if v[2]]


def verdict_counts(cells: Iterable[TimingCell]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in cells:
        if not c.aa:
            out[c.verdict] = out.get(c.verdict, 0) + 1
    return out
