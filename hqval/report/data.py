"""What a report shows, gathered once from one or more runs (possibly from several machines)
so the HTML and markdown printers render the same facts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hqval.admission import Admission, AdmissionStatus, Cell, Policy
from hqval.report.timing import TimingCell, is_ratio_row, timing_cells, verdict_counts
from hqval.result import Row, Status
from hqval.results.compare import ORDER, Change, Comparison, Section, to_markdown
from hqval.results.store import Run

STATUS_ORDER = [s.value for s in AdmissionStatus]


def anchor(identity: str) -> str:
    """A stable HTML id for a row or cell identity."""
    return "r-" + re.sub(r"[^A-Za-z0-9_-]+", "-", identity).strip("-")


def row_order(r: Row) -> tuple[str, str, str, str, str]:
    """The order a table lists rows in: by check, kernel, arch and backend, never the
    order the rows were written (xdist workers finish in any order)."""
    return (r.check, r.kernel, r.arch, r.backend, r.identity)


@dataclass(frozen=True)
class ComparisonSection:
    """One section of "since the baseline" (worse, better, noisy, missing, status flips,
    new): its changes, each note without the parts every timing change shares."""

    section: Section
    changes: tuple[tuple[Change, str], ...]  # (change, its own note)

    @property
    def slug(self) -> str:
        return "baseline-" + re.sub(r"[^a-z]+", "-", str(self.section)).strip("-")


@dataclass(frozen=True)
class ComparisonView:
    comparison: Comparison
    sections: tuple[ComparisonSection, ...]
    shared_notes: tuple[str, ...]  # said of every timing change: printed once
    unchanged: int

    def count(self, section: Section) -> int:
        return len(self.comparison.section(section))


def comparison_view(cmp: Comparison) -> ComparisonView:
    """The comparison as the page's sections, in compare's own order; a note part that
    every timing change carries ("absolute time not judged: ...") is said once above the
    sections instead of in every row."""
    timed = [c for c in cmp.changes if c.kind == "timing" and c.change is not None]
    parts = [set(c.note.split("; ")) for c in timed if c.note]
    shared = set.intersection(*parts) if parts and len(parts) == len(timed) else set()
    shared.discard("")
    order = [p for p in (timed[0].note.split("; ") if timed else []) if p in shared]

    def own(c: Change) -> str:
        bits = [b for b in c.note.split("; ") if b and b not in shared] if c.note else []
        return "; ".join(bits)

    sections = tuple(ComparisonSection(s, tuple((c, own(c)) for c in cmp.section(s)))
                     for s in ORDER if s is not Section.UNCHANGED and cmp.section(s))
    return ComparisonView(cmp, sections, tuple(order), len(cmp.section(Section.UNCHANGED)))


@dataclass(frozen=True)
class ReportData:
    runs: tuple[Run, ...]
    rows: tuple[Row, ...]
    admission: Admission
    comparison: Comparison | None = None  # against --baseline: "since the baseline"
    policy: Policy | None = None  # the admission policy in use (its gates are drawn)

    @property
    def comparison_markdown(self) -> str:
        """The comparison for checkpoint.md (compare's own markdown printer)."""
        return to_markdown(self.comparison) if self.comparison is not None else ""

    def comparison_view(self) -> ComparisonView | None:
        return comparison_view(self.comparison) if self.comparison is not None else None

    def anchored(self) -> set[str]:
        """The identities the page gives an id to (a link to any other would dangle)."""
        mutants = self.mutant_kernels()
        out = {c.key for c in self.admission.cells}
        for r in self.rows:
            if r.kind == "check" and r.kernel in mutants:
                continue  # a mutant's cells are in the kill matrix, under its verdict
            if r.kind == "admit":
                continue
            out.add(r.identity)
        return out

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
        for r in sorted(self.of_kind("check"), key=row_order):
            if r.kernel in mutants:
                continue
            out.setdefault(r.check, []).append(r)
        return dict(sorted(out.items()))

    def failing_checks(self) -> list[Row]:
        """The real kernels' check cells that failed or errored, in page order."""
        return [r for rows in self.checks_by_name().values() for r in rows
                if r.status in (Status.FAIL, Status.ERROR)]

    def not_applicable_checks(self) -> int:
        """Check rows of cells the check does not apply to (stored as unsupported by
        runs that made such cells): n/a, never counted as unsupported evidence."""
        return sum(r.status is Status.UNSUPPORTED for rows in self.checks_by_name().values()
                   for r in rows)

    def cells_in_order(self) -> list[Cell]:
        """Admission cells by arch, then the policy's format and path order."""
        cols = {k: i for i, k in enumerate(self.columns)}
        return sorted(self.admission.cells,
                      key=lambda c: (c.arch, cols.get((c.qt, c.format, c.path), 0)))

    def sorted_of_kind(self, kind: str) -> list[Row]:
        """The rows of ``kind`` in the page's stable order (``row_order``)."""
        return sorted(self.of_kind(kind), key=row_order)

    def timing(self) -> list[TimingCell]:
        """The v2/v1 (and A/A) ratio cells of every run, grouped by mode, R and shape."""
        return timing_cells(self.runs)

    def admission_gate(self) -> float | None:
        """The policy's v2/v1 ratio gate, drawn only when it was applied: some timing row
        is hardware evidence of an admission cell's arch."""
        if self.policy is None:
            return None
        admitted = {c.arch for c in self.admission.cells}
        if not any(r.arch in admitted and r.backend != "emu" for r in self.of_kind("timing")):
            return None
        ratios = [p.max_ratio for p in self.policy.paths if p.max_ratio is not None]
        return min(ratios) if ratios else None

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

    def mutant_grid(self) -> list[tuple[str, str, list[tuple[str, list[Row]]]]]:
        """The kill matrix collapsed to fit a screen: per mutant (with what it breaks),
        its arches grouped by identical outcome ("killed by reference_parity",
        "SURVIVED", "unsupported"), each group with its verdict rows."""
        _, table = self.mutant_matrix()
        by: dict[str, tuple[str, dict[str, list[Row]]]] = {}
        for v, _cells in table:
            mutation = v.details.get("mutation")
            if v.status is Status.PASS:
                killers = ", ".join(str(k) for k in v.details.get("killed_by") or [])
                outcome = f"killed by {killers}" if killers else "killed"
            elif v.status is Status.FAIL:
                outcome = "SURVIVED"
            else:
                outcome = str(v.status)
            entry = by.setdefault(v.kernel, (str(mutation) if mutation else "", {}))
            entry[1].setdefault(outcome, []).append(v)
        return [(k, info, sorted(groups.items(), key=lambda kv: (
                    not kv[0].startswith("SURVIVED"), not kv[0].startswith("killed"))))
                for k, (info, groups) in sorted(by.items())]

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


def _arches(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{len(names)} arches"


def _timing_finding(data: ReportData) -> str:
    cells = [c for c in data.timing() if not c.aa]
    if not cells:
        return ""
    counts = verdict_counts(cells)
    words = {"pass": "within their gate", "fail": "slower than their gate",
             "noisy": "noisy (not trusted)", "error": "errored"}
    parts = [f"{n} {words.get(v, v)}" for v, n in sorted(
        counts.items(), key=lambda kv: ["fail", "noisy", "error", "pass"].index(kv[0])
        if kv[0] in ("fail", "noisy", "error", "pass") else 9)]
    devices = sorted({c.device for c in cells})
    return f"v2/v1 timing on {', '.join(devices)}: " + ", ".join(parts)


def finding(data: ReportData) -> str:
    """The checkpoint's title: what the evidence says, in one line: per format and path,
    where it stands on how many arches (rejected first), or, for runs outside admission,
    what the timing and checks found."""
    cells = data.admission.cells
    if not cells:
        arches = ", ".join(sorted({r.arch for r in data.rows if r.arch != "-"})) or "no arch"
        timing = _timing_finding(data)
        checks = [r for r in data.of_kind("check") if r.kernel not in data.mutant_kernels()]
        bad = [r for r in checks if not r.status.ok]
        check_part = (f"{len(bad)} of {len(checks)} check cells failed" if bad else
                      f"all {len(checks)} check cells pass or do not apply") if checks else ""
        head = "; ".join(p for p in (timing, check_part) if p)
        if not head:
            n = len(data.admission.outside)
            head = f"{n} failing cell(s)" if n else "no failing cell"
        return f"{head} ({arches}, outside admission: reported, not admitted)"
    by: dict[tuple[int, str], dict[str, list[str]]] = {}
    for c in cells:
        by.setdefault((c.qt, c.path), {}).setdefault(str(c.status), []).append(c.arch)

    def rank(kv: tuple[str, list[str]]) -> tuple[int, int]:
        status, arches = kv
        return (status != "rejected", -len(arches))

    parts = []
    for (qt, path), statuses in sorted(by.items(), key=lambda kv: (
            "rejected" not in kv[1], kv[0])):
        bits = sorted(statuses.items(), key=rank)
        first, rest = bits[0], bits[1:]
        text = f"qt={qt} {path} {first[0]} on {_arches(sorted(first[1]))}"
        text += "".join(f", {s} on {_arches(sorted(a)) if len(a) == 1 else len(a)}"
                        for s, a in rest)
        parts.append(text)
    return "; ".join(parts)


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
    out += [f"Gate not applied: {g}; no status here rests on it."
            for g in data.admission.skipped_gates]
    for status, text in ((AdmissionStatus.INCOMPLETE,
                          "incomplete (expected evidence has no row; not admitted)"),
                         (AdmissionStatus.UNSUPPORTED, "unsupported (not validated)"),
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
