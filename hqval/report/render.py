"""HTML and markdown checkpoint printers over the same ``ReportData``.

The HTML page is self-contained (inline CSS, inline SVG, one inline script, no external
URL), so it can be attached to a review or opened from a CI artifact offline.  The markdown
checkpoint follows the design note's docs/perf-checkpoints: a finding as the title, a
header block, tables, and a "Not claimed here" section.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

import hqval
from hqval import markdown as md
from hqval.admission import Admission, AdmissionStatus
from hqval.report.data import (
    ReportData,
    anchor,
    finding,
    merge_rows,
    not_claimed,
    summary,
)
from hqval.report.svg import margin_plot, timing_plot
from hqval.result import Status
from hqval.results.store import Run

ENVELOPE_KEYS = ("date", "host", "platform", "device", "arch", "backend", "runtime",
                 "compiler", "compiler_version", "suite_commit", "kernel_tree",
                 "kernel_tree_commit", "hqval_version", "schema_version", "python",
                 "command_line")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hqval.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,  # a block tag's own newline is not output (markdown spacing)
    )
    env.globals.update(anchor=anchor, fmt=_fmt, show=_show)
    # the markdown template escapes every value from the runs (title, envelope fields,
    # identities, notes) through the one markdown printer
    env.filters.update(md=md.text, mdcode=md.code)
    return env


def _fmt(v: float | None) -> str:
    if v is None:
        return ""
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    return f"{v:.4g}" if 1e-3 <= abs(v) < 1e5 else f"{v:.3e}"


def _show(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return "" if v is None else str(v)


def build(runs: Sequence[Run], admission: Admission, comparison_markdown: str = "") -> ReportData:
    return ReportData(tuple(runs), tuple(merge_rows(runs)), admission, comparison_markdown)


def _max_ratio() -> float | None:
    from hqval.admission import load_policy

    ratios = [p.max_ratio for p in load_policy().paths if p.max_ratio is not None]
    return min(ratios) if ratios else None


def render_html(data: ReportData, title: str | None = None) -> str:
    checks = [r for rows in data.checks_by_name().values() for r in rows]
    return _env().get_template("report.html.j2").render(
        title=title or finding(data),
        version=hqval.__version__,
        generated=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        data=data,
        statuses=[s.value for s in AdmissionStatus],
        timing_svg=timing_plot(data.timing(), _max_ratio()),
        margin_svg=margin_plot(checks),
        envelope_keys=ENVELOPE_KEYS,
        not_claimed=not_claimed(data),
    )


def _check_rows(data: ReportData) -> list[list[str]]:
    out = []
    for name, rows in data.checks_by_name().items():
        worst = None
        for r in rows:
            if r.measured is not None and r.tolerance and math.isfinite(r.measured):
                q = r.measured / r.tolerance
                worst = q if worst is None else max(worst, q)
        out.append([name, str(len(rows)), str(sum(r.status is Status.PASS for r in rows)),
                    str(sum(r.status in (Status.FAIL, Status.ERROR) for r in rows)),
                    "" if worst is None else f"{worst:.3g}"])
    return out


def render_checkpoint(data: ReportData, title: str | None = None,
                      lifecycle: str = "automated checkpoint (hqval run); not reviewed") -> str:
    envs = [r.envelope for r in data.runs]
    seeds = data.seeds()
    fixture = ("hqval.fixtures seeds " + ", ".join(map(str, seeds))) if seeds else \
        "no seeded fixture rows in these runs"

    def joined(key: str) -> str:
        vals = sorted({_show(e.get(key)) for e in envs if e.get(key)})
        return ", ".join(vals) if vals else "unknown"

    devices = sorted({f"{e.get('backend')} / {e.get('device') or 'unknown device'}"
                      for e in envs})
    dates = sorted(str(e.get("date")) for e in envs if e.get("date"))
    cols = data.columns
    admission_table = md.table(
        ["arch", *(f"qt={qt} {path}" for qt, _, path in cols)],
        [[a, *(str(c.status) if (c := data.cell(a, qt, path)) else "" for qt, _, path in cols)]
         for a in data.arches])
    rejected = [c for c in data.admission.cells if c.status is AdmissionStatus.REJECTED]
    rejected_table = md.table(
        ["cell", "failing", "reasons"],
        [[f"{c.arch} qt={c.qt} {c.path}", md.join(md.code(f) for f in c.failing),
          md.join(c.reasons, "; ")] for c in rejected]) if rejected else ""
    checks = _check_rows(data)
    timing = data.timing()
    return _env().get_template("checkpoint.md.j2").render(
        title=title or finding(data),
        date=(dates[0] if len(set(dates)) <= 1 else f"{dates[0]} .. {dates[-1]}")
        if dates else "unknown",
        lifecycle=lifecycle,
        fixture=fixture,
        hosts=joined("host"),
        commits=joined("suite_commit"),
        devices=", ".join(devices) or "unknown",
        data=data,
        summary=summary(data),
        admission_table=admission_table,
        rejected_table=rejected_table,
        infrastructure=list(data.admission.infrastructure),
        rows_table=md.table(["row status (real kernels and steps)", "rows"],
                            list(data.row_counts().items()))
        + ("\n\n" + md.table(["mutant verdict", "mutants"], list(data.mutant_counts().items()))
           if data.mutant_counts() else ""),
        checks_table=md.table(["check", "cells", "pass", "fail/error",
                               "worst measured / tolerance"], checks) if checks else "",
        timing_table=md.table(
            ["cell", "ratio v2/v1", "CI", "p (MWU)", "predicted", "GB/s"],
            [[md.code(t.row.identity), _fmt(t.ratio),
              f"[{_fmt(t.ci_low)}, {_fmt(t.ci_high)}]" if t.ci_low is not None else "",
              _fmt(t.p), _fmt(t.predicted), _fmt(t.gbps)] for t in timing])
        if timing else "",
        not_claimed=not_claimed(data),
    )


def write_report(data: ReportData, out_dir: str | Path) -> dict[str, Path]:
    """Write report.html, checkpoint.md and admission.json into ``out_dir``."""
    from hqval.admission import dumps

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"html": out / "report.html", "markdown": out / "checkpoint.md",
             "admission": out / "admission.json"}
    paths["html"].write_text(render_html(data))
    paths["markdown"].write_text(render_checkpoint(data))
    paths["admission"].write_text(dumps(data.admission))
    return paths
