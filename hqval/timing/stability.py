"""Error rates of the timing verdicts, from the stored samples of a stability study.

A study directory (scripts/timing_stability.py measure) holds ``calibration.json`` and
``runs/NN``: clean re-runs of one build, each with its A/A controls, its qt=44 and qt=45
cells against qt=6, and timing mutants of qt=44 (against qt=6, and against their unslowed
twin).  Everything here is recomputed from the raw samples under the policy's gate:

- **within-run verdict stability**: each clean cell's gate verdict in every re-run;
- **compare false regressions**: ``hqval compare`` over every pair of clean re-runs (base
  the earlier); a pair with any regression is a false alarm, since the build is the same;
- **detection**: a mutant re-run is re-run *j* with its qt=44 cell's row replaced by the
  mutant's (same identity, the mutant's samples against qt=6); compare against every
  other clean re-run must call it worse -- as on one GPU (absolute time judged too) and
  by the ratio alone (as between two GPUs, or runs that record none); and within the
  run the gate's ``change_max`` on mutant against twin must flag it;
- **history**: the per-cell ratio over the re-runs, with a mutant step injected half way
  (hqval.timing.history), must find the step at its first night and none in the clean
  series;
- CI half-widths and the A/A controls; and, on the same samples, the rules this replaced
  (bench: ratio > 1.01, CI above 1, Mann-Whitney p < 0.05; compare: pooled-sample
  Mann-Whitney p < 0.002 and |change| >= 1%), for comparison.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hqval.result import Row
from hqval.results.compare import (
    CellCache,
    Section,
    band_key,
    baseline_spreads,
    compare_rows,
    compare_timing,
    control_key,
    controls_of,
    is_timing_mutant,
    same_device,
)
from hqval.timing import stats
from hqval.timing.gate import is_gated, stored_samples


@dataclass
class Study:
    directory: Path
    policy_source: str
    reruns: int
    device: str
    calibration: dict[str, Any]
    stability: list[dict[str, Any]] = field(default_factory=list)
    false_regressions: dict[str, Any] = field(default_factory=dict)
    detection: list[dict[str, Any]] = field(default_factory=list)
    half_widths: list[dict[str, Any]] = field(default_factory=list)
    aa: list[dict[str, Any]] = field(default_factory=list)
    old_rules: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    uniform: list[dict[str, Any]] = field(default_factory=list)
    one_device: str = ""  # how the re-runs are known to share one GPU (absolute time judged)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["directory"] = str(self.directory)
        return d

    def _coverage_line(self) -> str:
        fr = self.false_regressions
        misses: dict[str, int] = fr.get("ci_misses_one", {})
        pairs: dict[str, int] = fr.get("ci_pairs", {})
        worst = max((misses[k] / n for k, n in pairs.items() if n), default=0.0)
        return (f"change CI missed a clean pair's 1.00: {sum(misses.values())} of "
                f"{sum(pairs.values())} (worst cell {worst:.1%})")

    def summary(self) -> str:
        fr = self.false_regressions
        lines = [f"{self.reruns} clean re-runs on {self.device}; policy {self.policy_source}",
                 f"compare false regressions: {fr.get('pairs_with_regression')} of "
                 f"{fr.get('pairs')} pairs (with 3 history runs: "
                 f"{fr.get('pairs_with_regression_history3')}; whole runs, mutant cells "
                 f"included: {fr.get('pairs_with_regression_whole_runs')})",
                 self._coverage_line()]
        for s in self.stability:
            lines.append(f"verdict {s['cell']}: {s['identical']} of {s['runs']} identical "
                         f"({s['verdicts']})")
        for d in self.detection:
            lines.append(f"mutant {d['target']} {d['mode']}/{d['shape']} k={d['k']} "
                         f"(true {d['true_slowdown_median']:+.2%}): compare "
                         f"{d['compare_detected']}/{d['compare_pairs']} (trusted "
                         f"{d.get('compare_detected_trusted')}/"
                         f"{d.get('compare_pairs_trusted')}; ratio alone "
                         f"{d.get('compare_detected_trusted_ratio_only')}), gate "
                         f"{d['gate_flagged']}/{d['runs']}")
        for u in self.uniform:
            lines.append(f"uniform x{u['factor']:.2f} (every sample of the new run) "
                         f"{u['cell']}: compare flagged {u['flagged']}/{u['pairs']} "
                         f"(trusted {u['flagged_trusted']}/{u['pairs_trusted']}; "
                         f"with 3 history runs {u.get('flagged_trusted_history3')})")
        return "\n".join(lines)


def _shape_mode(r: Row) -> str:
    return f"{r.details.get('mode')}/{r.details.get('shape')}"


def load_study(directory: Path) -> tuple[dict[str, Any], list[Any]]:
    from hqval import safeio
    from hqval.results.store import load

    cal = safeio.load_json(directory / "calibration.json", what="calibration")
    runs = [load(p) for p in sorted((directory / "runs").glob("[0-9][0-9]"))
            if (p / "envelope.json").is_file()]
    runs = [r for r in runs if r.envelope.get("complete")]
    if len(runs) < 2:
        raise ValueError(f"{directory}: {len(runs)} complete re-run(s); a study needs >= 2")
    return cal, runs


def analyze_study(directory: Path, *, policy: str | None = None) -> Study:
    from hqval.admission import judge_run, load_policy

    cal, runs = load_study(directory)
    pol = load_policy(policy)
    judged = [list(judge_run(r, pol).rows) for r in runs]
    clean = [[r for r in rows if not is_timing_mutant(r)] for rows in judged]
    study = Study(directory, pol.source, len(runs), str(runs[0].envelope.get("device")), cal)
    # A study is one device call (scripts/h200_timing_study.sh): every re-run on one GPU,
    # so absolute time is judged between them.  Runs that record the GPU's UUID must agree.
    one = same_device(*(r.envelope for r in runs))
    if one is False:
        raise ValueError(f"{directory}: the re-runs record different devices (GPU UUIDs); a "
                         "stability study is one GPU's re-runs")
    study.one_device = ("recorded (one device)" if one else
                        "assumed: one device call; the envelopes record no GPU UUID")
    cache: CellCache = {}
    controls = [controls_of(rs) for rs in clean]
    spreads = [baseline_spreads(rs) for rs in clean]

    # ---- within-run verdict stability of every clean gated cell
    gated_ids = sorted({r.identity for r in clean[0] if is_gated(r)})
    for ident in gated_ids:
        found = [next((r for r in rs if r.identity == ident), None) for rs in clean]
        rows = [r for r in found if r is not None]
        verdicts = [(r.details.get("verdict") or {}).get("verdict", "absent") if r.status.ok
                    or r.status.value == "fail" else str(r.status) for r in rows]
        verdicts += ["absent"] * (len(found) - len(rows))
        top = max(set(verdicts), key=verdicts.count)
        ratios = [r.details["verdict"]["ratio"] for r in rows]
        study.stability.append({
            "cell": ident, "runs": len(found), "identical": verdicts.count(top),
            "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
            "ratio_min": min(ratios), "ratio_max": max(ratios),
            "ratio_median": float(np.median(ratios))})
        hw = [(r.details["verdict"]["ci_high"] - r.details["verdict"]["ci_low"]) / 2
              for r in rows]
        study.half_widths.append({"cell": ident, "median": float(np.median(hw)),
                                  "max": float(max(hw))})

    # ---- A/A controls
    aa_ids = sorted({r.identity for r in clean[0] if r.check.startswith("timing_aa_")})
    for ident in aa_ids:
        rows = [r for rs in clean for r in rs if r.identity == ident]
        ratios = [float(r.measured) for r in rows if r.measured is not None]
        hw = [(r.details["stats"]["ci_high"] - r.details["stats"]["ci_low"]) / 2 for r in rows]
        study.aa.append({"cell": ident, "runs": len(rows),
                         "passed": sum(r.status.ok for r in rows),
                         "ratio_min": min(ratios), "ratio_median": float(np.median(ratios)),
                         "ratio_max": max(ratios), "half_width_median": float(np.median(hw)),
                         "tries_max": max(len(r.details.get("tries", [1])) for r in rows)})

    # ---- compare over every pair of clean re-runs
    pairs = list(itertools.combinations(range(len(runs)), 2))
    flagged: list[dict[str, Any]] = []
    sections: dict[str, int] = {}
    coverage: dict[str, list[int]] = {}
    for i, j in pairs:
        cmp = compare_rows(clean[i], clean[j], f"run {i:02d}", f"run {j:02d}",
                           gate_for=None, same_device=True, cache=cache)
        for c in cmp.changes:
            if c.kind == "timing" and c.change is not None:
                sections[str(c.section)] = sections.get(str(c.section), 0) + 1
                if "run not trusted" not in c.note:  # the CI's coverage of a clean 1.00
                    cov = coverage.setdefault(c.identity, [0, 0])
                    cov[0] += not (c.change.low <= 1.0 <= c.change.high)
                    cov[1] += 1
        if cmp.regressions:
            flagged.append({"base": i, "new": j,
                            "cells": [f"{c.identity} {c.section} {c.note}"
                                      for c in cmp.regressions]})
    # the same pairs as `hqval compare` sees the run directories: mutant cells included
    # (a timing mutant's own cell is listed, never a regression)
    flagged_raw = sum(bool(compare_rows(judged[i], judged[j], gate_for=None, same_device=True,
                                        cache=cache).regressions) for i, j in pairs)
    # the same pairs with --history: the 3 clean re-runs after j (cyclic, not i or j)
    flagged_h = 0
    for i, j in pairs:
        cmp = compare_rows(clean[i], clean[j], gate_for=None, same_device=True, cache=cache,
                           history=[clean[h] for h in _history_runs(len(runs), i, j)])
        flagged_h += bool(cmp.regressions)
    study.false_regressions = {"pairs": len(pairs), "pairs_with_regression": len(flagged),
                               "flagged": flagged, "timing_cell_sections": sections,
                               "pairs_with_regression_history3": flagged_h,
                               "pairs_with_regression_whole_runs": flagged_raw,
                               # how often the change's confidence CI missed the clean
                               # pair's true 1.00 (nominal: 1 - confidence), per cell
                               "ci_misses_one": {k: v[0] for k, v in sorted(coverage.items())},
                               "ci_pairs": {k: v[1] for k, v in sorted(coverage.items())}}

    # ---- detection of timing mutants
    for key, cell in sorted(cal["cells"].items()):
        mode, shape = key.split("/")
        for target, choice in cell["chosen"].items():
            k = str(choice["k"])
            if k.isdigit():  # studies before the extraM kind named slowK by K alone
                k = f"slow{k}"
            name = f"+{k}@{shape}"
            twin_rows = [[r for r in rs if r.check == f"timing_{mode}" and is_timing_mutant(r)
                          and r.kernel.endswith(name)] for rs in judged]
            kill_rows = [[r for r in rs if r.check == f"timing_mutant_{mode}"
                          and r.kernel.endswith(name)] for rs in judged]
            if not all(twin_rows) or not all(kill_rows):
                continue
            true = [float(k_[0].measured) - 1.0 for k_ in kill_rows
                    if k_[0].measured is not None]
            detected, worse, total, detected_t, total_t, ratio_t = 0, 0, 0, 0, 0, 0
            for j, (mrow,) in enumerate(twin_rows):
                # the mutant's cell under its twin's identity: run j as if qt=44 had slowed
                as_twin = dataclasses.replace(mrow, kernel=mrow.kernel.replace(f"+{k}@", "@"))
                twin_ident = as_twin.identity
                # run j's baseline spread with the mutant's cell in place of its twin's
                spread_j = baseline_spreads([as_twin if r.identity == twin_ident else r
                                             for r in clean[j]])
                bk = band_key(as_twin)
                for i in range(len(runs)):
                    if i == j:
                        continue
                    base = next(r for r in clean[i] if r.identity == twin_ident)
                    c = compare_timing(base, as_twin, None,
                                       control_base=controls[i].get(control_key(base)),
                                       control_new=controls[j].get(control_key(mrow)),
                                       spread_base=spreads[i].get(bk) if bk else None,
                                       spread_new=spread_j.get(bk) if bk else None,
                                       same_device=True, cache=cache)
                    total += 1
                    detected += c.regression
                    worse += c.section is Section.WORSE
                    if not (base.details.get("untrusted") or as_twin.details.get("untrusted")):
                        total_t += 1
                        detected_t += c.regression
                        # as between two GPUs, or runs that record none: the ratio alone
                        ratio_t += compare_timing(
                            base, as_twin, None,
                            control_base=controls[i].get(control_key(base)),
                            control_new=controls[j].get(control_key(mrow)),
                            same_device=None, cache=cache).regression
            study.detection.append({
                "target": target, "mode": mode, "shape": shape, "k": k,
                "true_slowdown_median": float(np.median(true)),
                "true_slowdown_min": float(min(true)), "true_slowdown_max": float(max(true)),
                "compare_detected": detected, "compare_worse": worse, "compare_pairs": total,
                "compare_detected_trusted": detected_t, "compare_pairs_trusted": total_t,
                "compare_detected_trusted_ratio_only": ratio_t,
                "gate_flagged": sum(k_[0].status.value == "pass" for k_ in kill_rows),
                "gate_noisy": sum(k_[0].status.value in ("error", "skipped")
                                  for k_ in kill_rows),
                "runs": len(kill_rows)})

    study.old_rules = _old_rules(clean, pairs)
    study.history = _history(clean, judged, cal)
    study.uniform = _uniform(clean, cache)
    return study


def _history_runs(n: int, i: int, j: int, count: int = 3) -> list[int]:
    """``count`` other re-runs as ``--history`` for the pair (i, j): those after j,
    cyclic, neither i nor j (fewer when the study has too few)."""
    return [h for h in ((j + d) % n for d in range(1, n)) if h not in (i, j)][:count]


def scaled(row: Row, factor: float) -> Row:
    """The row with every stored sample (both arms) multiplied by ``factor``."""
    d = dict(row.details)
    for arm in ("samples_a", "samples_b"):
        if isinstance(d.get(arm), list):
            d[arm] = [[float(v) * factor for v in run] for run in d[arm]]
    return dataclasses.replace(row, details=d)


def _uniform(clean: Sequence[Sequence[Row]], cache: CellCache,
             factors: Sequence[float] = (1.03, 1.05)) -> list[dict[str, Any]]:
    """A uniform slowdown of every kernel, the baseline and the A/A control included
    (every sample of re-run j times ``factor``): no ratio moves, so only the absolute
    time can see it.  Per gated cell, how many of the ordered pairs (i, j), i != j,
    compare calls a regression."""
    out = []
    n = len(clean)
    for f in factors:
        slowed = [[scaled(r, f) for r in rs] for rs in clean]
        counts: dict[str, list[int]] = {}
        for i, j in itertools.permutations(range(n), 2):
            cmp = compare_rows(clean[i], slowed[j], gate_for=None, same_device=True,
                               cache=cache)
            hist = compare_rows(clean[i], slowed[j], gate_for=None, same_device=True,
                                cache=cache,
                                history=[clean[h] for h in _history_runs(n, i, j)]
                                ) if n >= 5 else None
            by_hist = {c.identity: c for c in hist.changes} if hist is not None else {}
            for c in cmp.changes:
                if c.kind != "timing" or c.change is None:
                    continue
                trusted = "run not trusted" not in c.note
                k = counts.setdefault(c.identity, [0, 0, 0, 0, 0])
                k[0] += c.regression
                k[1] += 1
                k[2] += c.regression and trusted
                k[3] += trusted
                ch = by_hist.get(c.identity)
                k[4] += bool(ch is not None and ch.regression and trusted)
        for ident, (hit, tot, hit_t, tot_t, hit_h) in sorted(counts.items()):
            out.append({"factor": f, "cell": ident, "flagged": hit, "pairs": tot,
                        "flagged_trusted": hit_t, "pairs_trusted": tot_t,
                        "flagged_trusted_history3": hit_h if n >= 5 else None})
    return out


def _old_rules(clean: Sequence[Sequence[Row]], pairs: Sequence[tuple[int, int]]
               ) -> dict[str, Any]:
    """The replaced rules on the same samples: bench's 1% / CI above 1 / p < 0.05 and
    compare's pooled Mann-Whitney p < 0.002 with |change| >= 1% on the candidate's times."""
    bench_fail: dict[str, int] = {}
    for rows in clean:
        for r in rows:
            if not is_gated(r):
                continue
            p = stored_samples(r)
            assert p is not None
            st = stats.summarize(*p, resamples=1000)
            failed = st.ratio > 1.01 and st.ci_low > 1.0 and st.p < 0.05
            bench_fail[r.identity] = bench_fail.get(r.identity, 0) + int(failed)
    pair_flags = 0
    for i, j in pairs:
        by_j = {r.identity: r for r in clean[j]}
        hit = False
        for r in clean[i]:
            n = by_j.get(r.identity)
            if not is_gated(r) or n is None:
                continue
            pa, pb = stored_samples(r), stored_samples(n)
            assert pa is not None and pb is not None
            a = np.concatenate(pa[1])
            b = np.concatenate(pb[1])
            change = float(np.median(b) / np.median(a)) - 1.0
            _, pv = stats.mann_whitney_u(a, b)
            hit |= abs(change) >= 0.01 and pv < 0.002 and change > 0
        pair_flags += hit
    return {"bench_rule_failures": bench_fail, "compare_rule_pairs_flagged": pair_flags,
            "pairs": len(pairs)}


def _history(clean: Sequence[Sequence[Row]], judged: Sequence[Sequence[Row]],
             cal: dict[str, Any]) -> list[dict[str, Any]]:
    """Step detection on the per-cell ratio over the re-runs taken as nights: the clean
    series, and the series whose second half is the +3% mutant (the step at night n/2)."""
    from hqval.timing.history import Night, detect

    out = []
    n = len(clean)
    for key, cell in sorted(cal["cells"].items()):
        mode, shape = key.split("/")
        ident = next((r.identity for r in clean[0] if r.check == f"timing_{mode}"
                      and r.kernel == f"gemv_mq4g256v2_r8@{shape}"), None)
        if ident is None:
            continue
        choice = cell["chosen"].get("3%")
        if choice is None:
            continue
        k = str(choice["k"])
        if k.isdigit():
            k = f"slow{k}"

        def night(rows: Sequence[Row], want: str, i: int) -> Night:
            r = next(r for r in rows if r.identity == want)
            v = r.details["verdict"]
            return Night(f"{i:02d}", v["ratio"], v["ci_low"], v["ci_high"])

        clean_series = [night(rs, ident, i) for i, rs in enumerate(clean)]
        mut_ident = ident.replace("@", f"+{k}@")
        step_series = clean_series[: n // 2] + [night(rs, mut_ident, i)
                                                for i, rs in enumerate(judged)][n // 2:]
        for label, series in (("clean", clean_series), (f"+3% mutant from night {n // 2:02d}",
                                                         step_series)):
            res = detect(series, tolerance=1.01)
            out.append({"cell": ident, "series": label,
                        "steps": [{"night": s.night, "before": s.before, "after": s.after,
                                   "regression": s.regression, "recurring": s.recurring}
                                  for s in res.steps]})
    return out


def cross_device(directories: Sequence[Path], *, policy: str | None = None
                 ) -> list[dict[str, Any]]:
    """Clean re-runs of two studies made on two device calls (two GPUs of one kind, same
    build and timing design) compared in both orders: every pair of studies, every run of
    one against every run of the other.  ``flagged``: ordered pairs with a regression as
    ``hqval compare`` judges them (two runs never judge absolute time, so the ratio
    alone); ``max_change_low``: the largest lower CI bound of a ratio change (a regression
    needs it above ``change_max``).  Only the cells both studies timed are compared."""
    from hqval.admission import judge_run, load_policy

    pol = load_policy(policy)
    studies = []
    for d in directories:
        _, runs = load_study(d)
        studies.append((d, [(r.envelope, [x for x in judge_run(r, pol).rows
                                          if not is_timing_mutant(x)]) for r in runs]))
    cache: CellCache = {}
    out = []
    for (da, ra0), (db, rb0) in itertools.combinations(studies, 2):
        # the cells both studies timed (one may have timed a mode the other did not)
        common = {r.identity for r in ra0[0][1]} & {r.identity for r in rb0[0][1]}
        ra = [(e, [r for r in rows if r.identity in common]) for e, rows in ra0]
        rb = [(e, [r for r in rows if r.identity in common]) for e, rows in rb0]
        flagged = pairs = 0
        low, cells = 0.0, ""
        for (ea, rows_a), (eb, rows_b) in itertools.product(ra, rb):
            for (e1, base), (e2, new) in (((ea, rows_a), (eb, rows_b)),
                                          ((eb, rows_b), (ea, rows_a))):
                pairs += 1
                one = same_device(e1, e2)
                cmp = compare_rows(base, new, gate_for=None, same_device=one, cache=cache)
                flagged += bool(cmp.regressions)
                for c in cmp.changes:
                    if c.kind == "timing" and c.change is not None and c.change.low > low:
                        low, cells = c.change.low, c.identity
        out.append({"a": str(da), "b": str(db), "pairs": pairs, "flagged": flagged,
                    "max_change_low": low,
                    "max_change_low_cell": cells})
    return out


def write_checkpoint(study: Study, out: Path) -> None:
    """The study's figures as JSON (every number the README quotes comes from here)."""
    out.mkdir(parents=True, exist_ok=True)
    from hqval.safeio import write_atomic

    write_atomic(out / "stability.json", json.dumps(study.to_json(), indent=2) + "\n",
                 what="stability study")
    write_atomic(out / "summary.txt", study.summary() + "\n", what="stability summary")


def pooled_median_ratio(runs_a: Sequence[Sequence[float]],
                        runs_b: Sequence[Sequence[float]]) -> float:
    """The cell ratio before 2026-12-01 (median of all B samples over median of all A
    samples), kept only to measure what ``stats.cell_ratio`` replaced."""
    a = np.concatenate([np.asarray(r, dtype=np.float64) for r in runs_a])
    b = np.concatenate([np.asarray(r, dtype=np.float64) for r in runs_b])
    return float(np.median(b) / np.median(a))


def estimator_spread(directory: Path) -> list[dict[str, Any]]:
    """Per (mode, shape): the re-run-to-re-run standard deviation of a clean cell's ratio
    (A/A controls and kernel cells, timing mutants left out), as the root mean of the
    cells' variances of log ratio, under ``stats.cell_ratio`` and under the pooled
    median it replaced.  The smaller, the less a verdict moves between clean re-runs."""
    _, runs = load_study(directory)
    per: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
    for run in runs:
        for r in run.rows:
            d = r.details
            p = stored_samples(r)
            if p is None or r.kind != "timing" or is_timing_mutant(r) or "mode" not in d:
                continue
            cells = per.setdefault((str(d["mode"]), str(d.get("shape"))), {})
            cells.setdefault(r.identity, []).append(
                (stats.cell_ratio(*p), pooled_median_ratio(*p)))
    out = []
    for (mode, shape), cells in sorted(per.items()):
        var_new, var_old = [], []
        for vals in cells.values():
            if len(vals) >= 3:
                var_new.append(float(np.var(np.log([v[0] for v in vals]), ddof=1)))
                var_old.append(float(np.var(np.log([v[1] for v in vals]), ddof=1)))
        if var_new:
            out.append({"mode": mode, "shape": shape, "cells": len(var_new),
                        "reruns": max(len(v) for v in cells.values()),
                        "sd_cell_ratio": math.sqrt(float(np.mean(var_new))),
                        "sd_pooled_median": math.sqrt(float(np.mean(var_old)))})
    return out
