"""What a report shows, gathered once from one or more runs (possibly from several machines)
so the HTML and markdown printers render the same facts."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hqval.admission import Admission, AdmissionStatus, Cell
from hqval.result import Row
from hqval.results.store import Run

STATUS_ORDER = [s.value for s in AdmissionStatus]


def anchor(identity: str) -> str:
    """A stable HTML id for a row or cell identity."""
    return "r-" + re.sub(r"[^A-Za-z0-9_-]+", "-", identity).strip("-")


@dataclass(frozen=True)
class TimingCell:
    row: Row
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None
    predicted: float | None
    gbps: float | None
    cache_resident: bool | None
    noisy: bool


def _num(d: Mapping[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def is_ratio_row(row: Row) -> bool:
    d = row.details
    return isinstance(d.get("stats"), dict) or "ci_low" in d or "ratio" in d


def timing_cell(row: Row) -> TimingCell:
    d = row.details
    stats = d.get("stats") if isinstance(d.get("stats"), dict) else {}
    assert isinstance(stats, dict)
    merged = {**stats, **d}
    if "gbps_b" in merged and "gbps" not in merged:
        merged["gbps"] = merged["gbps_b"]  # the candidate arm's effective bandwidth
    ratio = row.measured if row.measured is not None and math.isfinite(row.measured) else None
    return TimingCell(
        row=row,
        ratio=ratio if ratio is not None else _num(merged, "ratio"),
        ci_low=_num(merged, "ci_low"),
        ci_high=_num(merged, "ci_high"),
        p=_num(merged, "mwu_p", "p"),
        predicted=_num(merged, "predicted_ratio", "predicted"),
        gbps=_num(merged, "gbps", "effective_gbps"),
        cache_resident=merged.get("cache_resident") if isinstance(
            merged.get("cache_resident"), bool) else None,
        noisy=bool(merged.get("noisy", False)),
    )


@dataclass(frozen=True)
class ReportData:
    runs: tuple[Run, ...]
    rows: tuple[Row, ...]
    admission: Admission
    comparison_markdown: str = ""

    @property
    def arches(self) -> list[str]:
        return sorted({c.arch for c in self.admission.cells})

    @property
    def columns(self) -> list[tuple[int, str, str]]:
        """(qt, format, path) in policy order."""
        seen: dict[tuple[int, str, str], None] = {}
        for c in self.admission.cells:
            seen.setdefault((c.qt, c.format, c.path), None)
        return list(seen)

    def cell(self, arch: str, qt: int, path: str) -> Cell | None:
        for c in self.admission.cells:
            if (c.arch, c.qt, c.path) == (arch, qt, path):
                return c
        return None

    def of_kind(self, kind: str) -> list[Row]:
        return [r for r in self.rows if r.kind == kind]

    def checks_by_name(self) -> dict[str, list[Row]]:
        """Check rows of the real kernels by check (mutants' cells are in the kill matrix)."""
        mutants = self.mutant_kernels()
        out: dict[str, list[Row]] = {}
        for r in self.of_kind("check"):
            if r.kernel in mutants:
                continue
            out.setdefault(r.check, []).append(r)
        return dict(sorted(out.items()))

    def timing(self) -> list[TimingCell]:
        """The v2/v1 (and A/A) ratio cells: timing rows with ratio statistics."""
        return [timing_cell(r) for r in self.of_kind("timing") if is_ratio_row(r)]

    def timing_baselines(self) -> list[Row]:
        """Other timing rows: device copy bandwidth, vendor library baselines (their
        ``measured`` is GB/s or microseconds, not a ratio)."""
        return [r for r in self.of_kind("timing") if not is_ratio_row(r)]

    def mutant_matrix(self) -> tuple[list[str], list[tuple[Row, dict[str, str]]]]:
        """The kill matrix: columns are the checks and audit rules, one row per mutant
        verdict (``kind="mutant"``) with each cell's status (``fail`` = killed there)."""
        verdicts = self.of_kind("mutant")
        columns: set[str] = set()
        table: list[tuple[Row, dict[str, str]]] = []
        for v in sorted(verdicts, key=lambda r: (r.kernel, r.arch)):
            cells = v.details.get("cells")
            cells = {str(k): str(x) for k, x in cells.items()} if isinstance(cells, dict) \
                else {}
            for k in v.details.get("killed_by") or []:
                cells.setdefault(str(k), "fail")  # an audit rule that failed it
            columns.update(cells)
            table.append((v, cells))
        return sorted(columns), table

    def status_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUS_ORDER, 0)
        for c in self.admission.cells:
            counts[str(c.status)] += 1
        return {k: v for k, v in counts.items() if v}

    def mutant_kernels(self) -> set[str]:
        names = {r.kernel for r in self.of_kind("mutant")}
        for run in self.runs:
            names |= {k for k, v in (run.envelope.get("kernels") or {}).items()
                      if isinstance(v, dict) and v.get("mutant_of")}
        return names

    def row_counts(self) -> dict[str, int]:
        """Row statuses of the real kernels (a mutant's failing cells are kills, counted
        by ``mutant_counts``) and of the pipeline steps."""
        mutants = self.mutant_kernels()
        out: dict[str, int] = {}
        for r in self.rows:
            if r.kernel in mutants or r.kind == "admit":
                continue
            out[str(r.status)] = out.get(str(r.status), 0) + 1
        return out

    def mutant_counts(self) -> dict[str, int]:
        label = {"pass": "killed", "fail": "survived"}  # unsupported stays unsupported
        out: dict[str, int] = {}
        for r in self.of_kind("mutant"):
            key = label.get(str(r.status), str(r.status))
            out[key] = out.get(key, 0) + 1
        return out

    def seeds(self) -> list[int]:
        return sorted({r.seed for r in self.rows if r.seed is not None})


def merge_rows(runs: Sequence[Run]) -> list[Row]:
    """All rows of all runs; a cell present in several runs keeps every row (two machines
    of the same arch are two pieces of evidence, and a failure in either must show)."""
    out: list[Row] = []
    for run in runs:
        out.extend(run.rows)
    return out


def finding(data: ReportData) -> str:
    """The checkpoint's title: what the evidence says, in one line."""
    cells = data.admission.cells
    if not cells:
        arches = ", ".join(sorted({r.arch for r in data.rows if r.arch != "-"})) or "no arch"
        n = len(data.admission.outside)
        if n:
            return f"{n} failing cell(s) on {arches}, outside admission (reported, not admitted)"
        return f"No failing cell on {arches}, outside admission (reported, not admitted)"
    counts = data.status_counts()
    rejected = sorted({c.arch for c in cells if c.status is AdmissionStatus.REJECTED})
    head = (f"{counts['rejected']} of {len(cells)} cells rejected ({', '.join(rejected)})"
            if rejected else f"No admitted cell failed across {len(data.arches)} arch(es)")
    rest = ", ".join(f"{n} {s}" for s, n in counts.items() if s != "rejected")
    return f"{head}: {rest}" if rest else head


def summary(data: ReportData) -> str:
    """Per format and path, which arches reached which status: the design note's status
    paragraph, written from the evidence."""
    by: dict[tuple[int, str], dict[str, list[str]]] = {}
    for c in data.admission.cells:
        by.setdefault((c.qt, c.path), {}).setdefault(str(c.status), []).append(c.arch)
    parts = []
    for (qt, path), statuses in by.items():
        bits = [f"{s} on {', '.join(sorted(a))}" for s, a in
                sorted(statuses.items(), key=lambda kv: STATUS_ORDER.index(kv[0]))]
        parts.append(f"qt={qt} {path}: " + "; ".join(bits) + ".")
    return " ".join(parts)


def not_claimed(data: ReportData, all_arches: Sequence[str] | None = None) -> list[str]:
    """What these runs did not measure, so a reader does not infer it.  ``all_arches``
    (default: every arch in matrices/arches.yaml) names the targets the suite claims."""
    out: list[str] = []
    if all_arches is None:
        from hqval.matrix import load_arches

        all_arches = list(load_arches())
    missing = [a for a in all_arches if a not in data.arches]
    if missing:
        out.append("Not run at all (no evidence in these runs): " + ", ".join(missing) + ".")
    cells = data.admission.cells
    hw_timing = [r for r in data.of_kind("timing") if r.backend != "emu"]
    if not hw_timing:
        out.append("No hardware timing ran: no throughput or v2/v1 ratio is claimed.")
    emulated = sorted({c.arch for c in cells if c.status is AdmissionStatus.EMULATED})
    if emulated:
        out.append("Emulated is not measured: " + ", ".join(emulated)
                   + " passed on the RDNA interpreter running their code objects, not on "
                   "their silicon.")
    for status, text in ((AdmissionStatus.UNSUPPORTED, "unsupported (not validated)"),
                         (AdmissionStatus.UNTESTED, "untested (no evidence in these runs)"),
                         (AdmissionStatus.COMPILED, "compiled only (no check ran)")):
        hit = sorted(f"qt={c.qt} {c.path} on {c.arch}" for c in cells if c.status is status)
        if hit:
            out.append(f"{text.capitalize()}: " + ", ".join(hit) + ".")
    fb = sorted(f"qt={c.qt} {c.path} on {c.arch}" for c in cells
                if c.status is AdmissionStatus.FALLBACK)
    if fb:
        out.append("Fallback cells claim per-token decode correctness only, no batched "
                   "prefill: " + ", ".join(fb) + ".")
    wave64 = any(r.details.get("wave_size") == 64 or r.details.get("wavefront_size") == 64
                 for r in data.rows)
    if not wave64:
        out.append("wave64: no kernel ran in wave64 mode, so the lanes 0-31 / 32-63 half "
                   "split (design note section 9) is not verified; wave64 stays unsupported.")
    out.append("Codec MSE is not a model-quality (KLD) claim; no model-level quality was "
               "measured by this run.")
    return out
