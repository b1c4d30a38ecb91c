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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

import hqval
from hqval import markdown as md
from hqval.admission import Admission, AdmissionStatus, Policy
from hqval.report import svg
from hqval.report import timing as tv
from hqval.report.data import (
    ReportData,
    anchor,
    finding,
    merge_rows,
    not_claimed,
    summary,
)
from hqval.report.numbers import fmt_gbps, fmt_p, fmt_ratio, fmt_value, pct, readable
from hqval.result import Row, Status
from hqval.results.compare import Comparison
from hqval.results.store import Run

ENVELOPE_KEYS = ("date", "host", "platform", "device", "arch", "backend", "requested_backend",
                 "backends", "runtime",
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
    env.globals.update(anchor=anchor, fmt=fmt_value, show=_show, fmt_ratio=fmt_ratio,
                       fmt_p=fmt_p, fmt_gbps=fmt_gbps, pct=pct)
    # the markdown template escapes every value from the runs (title, envelope fields,
    # identities, notes) through the one markdown printer
    env.filters.update(md=md.text, mdcode=md.code)
    return env


def _show(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return "" if v is None else str(v)


def build(runs: Sequence[Run], admission: Admission, comparison: Comparison | None = None,
          policy: Policy | None = None, judged: bool = False) -> ReportData:
    """``policy``: the admission policy the verdicts were reached with.  Its timing gates
    re-judge the timing rows exactly as admission did (hqval.timing.gate.rejudge_rows over
    the same kernel table), so the page shows and draws the verdict and gate that were
    applied; None shows the rows as stored.  ``judged``: the runs' rows are already
    ``hqval.admission.judge``'s under ``policy`` (not judged again)."""
    if policy is not None and not judged:
        from hqval.admission import judge_run

        runs = [Run(r.path, r.envelope, list(judge_run(r, policy).rows), r.written_schema)
                for r in runs]
    return ReportData(tuple(runs), tuple(merge_rows(runs)), admission, comparison, policy)


@dataclass(frozen=True)
class Plot:
    name: str  # file stem beside checkpoint.md: plots/<name>.svg
    section: str  # checks | heatmap | forest | sweep | history | noisy
    title: str
    svg: str
    identity: str = ""  # a distribution plot's cell


def samples_name(c: tv.TimingCell) -> str:
    """File stem of a cell's sample-distribution plot (identity and run: unique)."""
    return "samples-" + anchor(f"{c.row.identity}-{c.run_label}")[2:]


def plots(data: ReportData) -> list[Plot]:
    """Every plot of the report, once, for the HTML page (inline) and checkpoint.md (files)."""
    out: list[Plot] = []
    checks = [r for rows in data.checks_by_name().values() for r in rows]
    m = svg.margin_matrix(checks)
    if m:
        out.append(Plot("check-margins", "checks", "Measured error over tolerance, per check "
                        "and kernel (worst over arches)", m))
    cells = data.timing()
    newest = tv.latest(cells)
    by_qt: dict[int | None, list[tv.TimingCell]] = {}
    for c in newest:
        if not c.aa:
            by_qt.setdefault(c.qt, []).append(c)
    for qt, cs in sorted(by_qt.items(), key=lambda kv: kv[0] or 0):
        title = (f"{tv.format_name(qt)}: v2/v1 ratio against {tv.format_name(tv.V1_QT)} by "
                 "device, R, mode and shape")
        h = svg.heatmap(cs, title, f"hatch-{qt}")
        if h:
            out.append(Plot(f"heatmap-qt{qt}", "heatmap", title, h))
    forest = svg.timing_plot(cells, data.admission_gate())
    if forest:
        out.append(Plot("timing-ratios", "forest", "v2/v1 ratio per cell, grouped by mode, "
                        "R and shape", forest))
    if tv.swept(newest):
        sw = svg.sweep_plot(newest)
        if sw:
            out.append(Plot("rows-per-block-sweep", "sweep",
                            "Median time against rows per block R", sw))
    hist = tv.history(cells)
    if hist:
        fits = {}
        if data.policy is not None:  # hqval history's own step fit, over the same runs
            from hqval.timing.history import cell_histories

            ordered = sorted(data.runs, key=tv.run_label)
            # the report is no gate: a damaged run is plotted too (its admission.json says
            # exit 2)
            fits = {h.identity: h.fit
                    for h in cell_histories(ordered, data.policy, strict=False)}
        out.append(Plot("history", "history", f"Ratio across {len({c.run_label for c in cells})}"
                        " runs, per cell seen in more than one", svg.history_plot(hist, fits)))
    for c in cells:
        if c.verdict != "pass" and (c.samples_a or c.samples_b):
            d = svg.distribution_plot(c)
            if d:
                out.append(Plot(samples_name(c), "noisy" if c.noisy else "slow", c.row.identity, d,
                                c.row.identity))
    return out


EXIT_MEANING = {0: "complete evidence and no failure",
                1: "a row failed (a rejected cell, a kernel-level finding or a regression)",
                2: "incomplete evidence, a damaged run or an infrastructure problem: "
                   "admission fails closed"}

def _status_counts(rows: Sequence[Row]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[str(r.status)] = out.get(str(r.status), 0) + 1
    order = [str(s) for s in Status]
    return dict(sorted(out.items(), key=lambda kv: order.index(kv[0])
                       if kv[0] in order else len(order)))


def render_html(data: ReportData, title: str | None = None) -> str:
    all_plots = plots(data)
    cells = data.timing()
    attention = [(s.value, [c for c in data.cells_in_order() if c.status is s])
                 for s in (AdmissionStatus.REJECTED, AdmissionStatus.INCOMPLETE)]
    hist = tv.history(cells)
    lo, hi = svg.history_range(hist) if hist else (0.0, 0.0)
    return _env().get_template("report.html.j2").render(
        exit_meaning=EXIT_MEANING.get(data.admission.exit_code, "see the sections below"),
        attention=[(s, cs) for s, cs in attention if cs],
        cview=data.comparison_view(),
        linkable=data.anchored(),
        timing_counts=tv.verdict_counts(cells),
        status_counts=_status_counts,
        readable=readable,
        mutant_kernels=sorted(data.mutant_kernels()),
        history_scale=f"{lo:.3f} to {hi:.3f}",
        title=title or finding(data),
        version=hqval.__version__,
        generated=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        data=data,
        statuses=[s.value for s in AdmissionStatus],
        plots={p.section: [q for q in all_plots if q.section == p.section] for p in all_plots},
        timing_groups=tv.grouped(cells),
        noisy=[c for c in cells if c.noisy],
        noisy_groups=tv.noisy_groups(cells),
        distribution=svg.distribution_plot,
        derivations=_derivations(data),
        admission_gate=data.admission_gate(),
        v1=f"qt={tv.V1_QT}",
        envelope_keys=ENVELOPE_KEYS,
        not_claimed=not_claimed(data),
    )


def _derivations(data: ReportData) -> dict[str, list[tuple[str, list[str]]]]:
    """check -> [(derivation, the kernels it is stated for)]: each derivation once."""
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for name, rows in data.checks_by_name().items():
        by: dict[str, set[str]] = {}
        for r in rows:
            if r.derivation:
                by.setdefault(r.derivation, set()).add(r.kernel)
        out[name] = [(d, sorted(k)) for d, k in by.items()]
    return out


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
                      lifecycle: str = "automated checkpoint (hqval run); not reviewed",
                      plot_dir: str | None = "plots") -> str:
    """``plot_dir``: where write_report puts the SVG files, relative to checkpoint.md
    (None: no plot links)."""
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
    kernels_table = md.table(
        ["cell", "status", "kernels behind it (their own status)"],
        [[f"{c.arch} qt={c.qt} {c.path}", str(c.status),
          md.join([f"{k}: {st}" for k, st, _ in c.kernels], ", ") or "no kernel of this path"]
         for c in data.admission.cells])
    rejected = [c for c in data.admission.cells if c.status is AdmissionStatus.REJECTED]
    rejected_table = md.table(
        ["cell", "failing", "reasons"],
        [[f"{c.arch} qt={c.qt} {c.path}", md.join(md.code(f) for f in c.failing),
          md.join(c.reasons, "; ")] for c in rejected]) if rejected else ""
    checks = _check_rows(data)
    timing = data.timing()
    all_plots = plots(data) if plot_dir is not None else []
    figures = [(p.title, f"{plot_dir}/{p.name}.svg") for p in all_plots
               if p.section not in ("noisy", "slow")]
    drawn = {p.name for p in all_plots}

    def samples_link(c: tv.TimingCell) -> Any:
        name = samples_name(c)
        return md.Markdown(f"[samples]({plot_dir}/{name}.svg)") if name in drawn else ""

    noisy = [c for c in timing if c.noisy]
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
        kernels_table=kernels_table,
        rejected_table=rejected_table,
        infrastructure=list(data.admission.infrastructure),
        rows_table=md.table(["row status (real kernels and steps)", "rows"],
                            list(data.row_counts().items()))
        + ("\n\n" + md.table(["mutant verdict", "mutants"], list(data.mutant_counts().items()))
           if data.mutant_counts() else ""),
        checks_table=md.table(["check", "cells", "pass", "fail/error",
                               "worst measured / tolerance"], checks) if checks else "",
        timing_table=md.table(
            ["mode · R · shape", "cell", "verdict", "ratio", "CI", "p (MWU)", "gate applied",
             "predicted", "GB/s", "run"],
            [[t.group_label, md.code(t.row.identity), t.verdict, fmt_ratio(t.ratio),
              f"[{fmt_ratio(t.ci_low)}, {fmt_ratio(t.ci_high)}]" if t.ci_low is not None
              else "", fmt_p(t.p), t.gate_text, fmt_ratio(t.predicted), fmt_gbps(t.gbps),
              t.run_label]
             for t in timing])
        if timing else "",
        noisy=[(md.code(c.row.identity), md.text(c.why_noisy()), samples_link(c))
               for c in noisy],
        figures=[(md.text(t), path) for t, path in figures],
        provenance=_provenance(envs),
        waivers=_waivers(data),
        not_gating=[md.text(s) for s in data.admission.not_gating],
        not_claimed=not_claimed(data),
    )


def _provenance(envs: Sequence[dict[str, Any]]) -> list[tuple[Any, str]]:
    """Per run: the manifest, its kernel tree's commit and a table of every file the
    compiler read with its sha256 (``hqval.provenance``)."""
    out = []
    for env in envs:
        p = env.get("provenance")
        if not isinstance(p, dict):
            continue
        commit = p.get("kernel_tree_commit") or "not a git work tree"
        flag = p.get("kernel_tree_dirty")
        dirty = "" if flag is None else (" (dirty: the tree has uncommitted edits)" if flag
                                         else " (clean)")
        head = md.Markdown(
            f"manifest {md.code(p.get('manifest'))} (sha256 {md.code(p.get('manifest_sha256'))}"
            f"), kernel tree {md.code(p.get('kernel_tree'))} at {md.code(commit)}{md.text(dirty)}")
        files = p.get("files") if isinstance(p.get("files"), dict) else {}
        table = md.table(["file", "sha256"], [[md.code(f), md.code(d)]
                                              for f, d in sorted(files.items())]) \
            if files else "no compiled files recorded"
        out.append((head, table))
    return out


def _waivers(data: ReportData) -> str:
    """The manifest's audit_waive entries, each with what the waived rule found."""
    rows = [r for r in data.of_kind("audit") if r.details.get("waived")]
    if not rows:
        return ""
    return md.table(["kernel", "arch", "rule", "reason", "the rule said"],
                    [[md.code(r.kernel), r.arch, r.check.removeprefix("audit_"),
                      r.details["waived"], r.details.get("waived_status", "")]
                     for r in sorted(rows, key=lambda r: (r.kernel, r.arch, r.check))])


def write_report(data: ReportData, out_dir: str | Path) -> dict[str, Path]:
    """Write report.html, checkpoint.md, admission.json and the plots (plots/*.svg, linked
    from checkpoint.md) into ``out_dir``."""
    from hqval.admission import dumps
    from hqval.safeio import check_targets, make_dir, write_atomic

    # every file through the one safe writer: never through a link (the directory, plots/
    # or a file being one is refused), a temporary renamed into place, nothing half written;
    # every target is checked before the first is written, so a refused one leaves the
    # directory as it was
    out = Path(out_dir)
    paths = {"html": out / "report.html", "markdown": out / "checkpoint.md",
             "admission": out / "admission.json"}
    plot_dir = out / "plots"
    all_plots = plots(data)
    whats = {"html": "report", "markdown": "checkpoint", "admission": "admission"}
    # rendered before anything is written: a rendering error leaves nothing behind
    texts = {"html": render_html(data), "markdown": render_checkpoint(data),
             "admission": dumps(data.admission)}
    check_targets([(paths[k], whats[k]) for k in paths]
                  + [(plot_dir / f"{p.name}.svg", "report plot") for p in all_plots],
                  [(out, "report directory")]
                  + ([(plot_dir, "report plots directory")] if all_plots else []))
    out = make_dir(out, what="report directory")
    if all_plots:
        make_dir(plot_dir, what="report plots directory")
        for p in all_plots:
            write_atomic(plot_dir / f"{p.name}.svg",
                         '<?xml version="1.0" encoding="utf-8"?>\n' + p.svg + "\n",
                         what="report plot")
        paths["plots"] = plot_dir
    for key in ("html", "markdown", "admission"):
        write_atomic(paths[key], texts[key], what=whats[key])
    return paths
