"""Admission status per (qt, arch, path), decided from judged rows and the policy.

The status is the strongest level the rows support, and any failing or erroring row of a
cell rejects it (fails closed), naming the failing cells.  Nothing here knows which arch
"should" come out as what.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hqval import markdown as md
from hqval.admission.evidence import (
    Evidence,
    KernelInfo,
    _classify,
    _classify_any,
    _failed,
    _gaps,
    _listed,
    emulator_gap,
    expected_evidence,
    gate_skips,
    is_infrastructure,
)
from hqval.admission.policy import HARDWARE_EMULATOR, AdmissionStatus, Need, PathPolicy, Policy
from hqval.matrix import Arch
from hqval.result import Row, Status


@dataclass(frozen=True)
class Cell:
    qt: int
    format: str
    arch: str
    path: str
    status: AdmissionStatus
    reasons: tuple[str, ...]
    evidence: tuple[str, ...]  # identities of the rows the status rests on
    failing: tuple[str, ...] = ()
    # the kernels behind the cell, each with its own status and why
    # (passed | failed | untested | no evidence), for the report to list
    kernels: tuple[tuple[str, str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"admit[qt{self.qt}:{self.path}|{self.arch}]"

    def to_row(self) -> Row:
        status = (Status.FAIL if self.status is AdmissionStatus.REJECTED
                  else Status.UNSUPPORTED if self.status is AdmissionStatus.UNSUPPORTED
                  else Status.SKIPPED if self.status is AdmissionStatus.UNTESTED
                  else Status.PASS)
        return Row(kind="admit", check=f"admit_{self.path}", kernel=f"qt{self.qt}",
                   arch=self.arch, backend="policy", status=status,
                   message="; ".join(self.reasons),
                   details={"qt": self.qt, "format": self.format, "path": self.path,
                            "admission": str(self.status), "evidence": list(self.evidence),
                            "failing": list(self.failing),
                            "kernels": [{"kernel": k, "status": st, "why": why}
                                        for k, st, why in self.kernels]})


def kernel_statuses(kernels: Sequence[str], checks: Sequence[str],
                    rows: Sequence[Row]) -> tuple[tuple[str, str, str], ...]:
    """Each kernel's own status behind a cell: failed (a failing gate row of its own),
    untested (an instruction the emulator lacks, named), passed (every required check has
    a passing row), or no evidence (what is missing)."""
    out = []
    for k in kernels:
        mine = [r for r in rows if r.kernel == k and r.kind in ("compile", "audit", "check",
                                                                 "timing")]
        bad = sorted(r.check + (f" (its baseline {r.details.get('baseline')} failed)"
                                if _baseline_failed(r) else "")
                     for r in mine if _failed(r))
        gaps = sorted({f"{emulator_gap(r)} ({r.check})" for r in mine if emulator_gap(r)})
        lacking = [c for c in checks if not any(r.check == c and r.kind == "check"
                                                and r.status is Status.PASS for r in mine)]
        if bad:
            out.append((k, "failed", "failing: " + ", ".join(bad)))
        elif gaps:
            out.append((k, "untested", "the emulator lacks " + ", ".join(gaps)))
        elif lacking:
            out.append((k, "no evidence", "no passing " + ", ".join(lacking)))
        else:
            out.append((k, "passed", "every required check passed"))
    return tuple(out)


def _baseline_failed(row: Row) -> bool:
    """An error row of a comparison whose baseline failed its own launch or its own parity
    check (bit identity against a v1 kernel that trapped, or missed the oracle): no
    verdict about the row's kernel."""
    return row.status is Status.ERROR and isinstance(row.details.get("baseline_fails"), dict)


def _baseline_failure(row: Row) -> str:
    """How the baseline of a no-verdict row failed: 'on its own launch' (the row's own
    check name is recorded) or 'its own prefill_parity'."""
    check = row.details["baseline_fails"].get("check")
    return "on its own launch" if check in (None, row.check) else f"its own {check}"


def _unmet(need: Need, arch: Arch) -> str:
    """Why a need is not met, as a sentence: 'wmma is none here, not gfx11 or gfx12: ...'."""
    return (f"{arch.name} has {need.cap} {arch.cap(need.cap)}, not "
            f"{_listed(need.allowed, 'or')}: {need.why}")


def _per_kernel(pp_checks: Sequence[str], kernels: Sequence[str], rows: Sequence[Row],
                on_hw: bool) -> tuple[list[Row], list[str]]:
    """The passing rows of every (kernel, required check), and which pairs lack one."""
    picked: list[Row] = []
    lacking: list[str] = []
    for k in kernels:
        for c in pp_checks:
            ok = [r for r in rows if r.kernel == k and r.check == c and r.kind == "check"
                  and r.status is Status.PASS and (r.backend != HARDWARE_EMULATOR) == on_hw]
            picked += ok
            if not ok:
                lacking.append(f"{c} of {k}")
    return picked, lacking


def _incomplete(missing: Sequence[str]) -> str:
    shown = ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else "")
    return (f"incomplete: {len(missing)} expected cell(s) have no row ({shown}); rerun with "
            "--resume")


def _infrastructure_reason(rows: Sequence[Row]) -> str:
    """The reason of a cell whose evidence holds infrastructure errors ('' when none)."""
    infra = sorted({r.identity for r in rows if is_infrastructure(r)})
    if not infra:
        return ""
    shown = ", ".join(infra[:6]) + (" ..." if len(infra) > 6 else "")
    return (f"incomplete: {len(infra)} cell(s) met an infrastructure error ({shown}): "
            "hqval's machinery, not the kernel; fix it, then rerun with --resume")


def admit_cell(
    pp: PathPolicy, arch: Arch, rows: Sequence[Row], qt_rows: Sequence[Row],
    notes: Sequence[str] = (), regressed: Sequence[str] = (),
    evidence: Evidence | None = None,
) -> Cell:
    """Status of one cell.  ``rows`` are the rows of this (qt, path, arch); ``qt_rows`` all
    rows of the qt on the arch (fallback checks live on the decode kernels); ``evidence``
    the path's expected cells (``expected_evidence``; without it, those of the rows)."""
    reasons: list[str] = list(notes)
    if evidence is None:
        evidence = Evidence(tuple(sorted({r.kernel for r in rows if r.kind == "check"})))

    fallback = any(arch.cap(n.cap) not in n.allowed for n in pp.needs)
    per_kernel = kernel_statuses(
        evidence.kernels, pp.fallback_checks if fallback else pp.checks,
        list(qt_rows) if fallback else list(rows))

    def cell(status: AdmissionStatus, evidence: Iterable[Row] = (),
             failing: Iterable[str] = ()) -> Cell:
        return Cell(pp.qt, pp.format, arch.name, pp.path, status, tuple(reasons),
                    tuple(sorted({r.identity for r in evidence})), tuple(sorted(set(failing))),
                    per_kernel)

    for need in pp.needs:
        if need.otherwise is AdmissionStatus.UNSUPPORTED and arch.cap(need.cap) not in need.allowed:
            reasons.insert(0, _unmet(need, arch))
            return cell(AdmissionStatus.UNSUPPORTED)

    unmet = [n for n in pp.needs if arch.cap(n.cap) not in n.allowed]
    if unmet:  # only fallback needs remain unmet
        reasons.insert(0, _unmet(unmet[0], arch))
        # this path's own fallback rows (every fallback check keys its cell on the prefill
        # kernel it stands in for): a grouped MoE GEMM's fallback is the MoE prefill path's
        # evidence, never the dense or fused prefill's, and a path with no kernel of its own
        # has no fallback evidence at all
        mine = set(evidence.kernels) | {r.kernel for r in rows}
        if not mine:
            reasons.append("no kernel of this path in the runs, so no fallback evidence of its "
                           "own (the fallback rows of other paths are theirs)")
            return cell(AdmissionStatus.UNTESTED)
        fb_rows = [r for r in qt_rows if r.check in pp.fallback_checks and r.kernel in mine]
        failing = [r.identity for r in fb_rows if _failed(r)]
        # the fallback runs decode kernels, so their own failures count too: the kernels
        # its rows name (details.decode_kernel), where every row names one; else every
        # decode kernel of the qt (a run that did not record them).  An unrelated kernel's
        # finding (a MoE GEMV of a path the arch does not even have) is not the fallback's.
        own = {r.identity for r in rows}
        named = {str(r.details["decode_kernel"]) for r in fb_rows
                 if r.details.get("decode_kernel")}
        if any(not r.details.get("decode_kernel") for r in fb_rows):
            named = set()
        decode_fail = [r.identity for r in qt_rows
                       if _failed(r) and r.identity not in own and r.check not in
                       pp.fallback_checks and r.kind in ("compile", "audit", "check")
                       and (not named or r.kernel in named)]
        if failing or decode_fail:
            reasons.append("fallback evidence failed: " + ", ".join(failing + decode_fail))
            return cell(AdmissionStatus.REJECTED, fb_rows, failing + decode_fail)
        infra = _infrastructure_reason([*fb_rows, *(
            r for r in qt_rows if r.identity not in own and r.kind in ("compile", "audit",
                                                                       "check")
            and (not named or r.kernel in named))])
        if infra:
            reasons.append(infra)
            return cell(AdmissionStatus.INCOMPLETE)
        if evidence.missing:
            reasons.append(_incomplete(evidence.missing))
            return cell(AdmissionStatus.INCOMPLETE)
        gaps = _gaps(fb_rows)
        if gaps:
            reasons.append("untested: " + "; ".join(gaps))
            return cell(AdmissionStatus.UNTESTED)
        passed = [r for r in fb_rows if r.status is Status.PASS]
        missing = [c for c in pp.fallback_checks if not any(r.check == c for r in passed)]
        if evidence.kernels:
            passed, missing = _per_kernel(pp.fallback_checks, evidence.kernels, fb_rows,
                                          True)
            emu_passed, emu_missing = _per_kernel(pp.fallback_checks, evidence.kernels,
                                                  fb_rows, False)
            passed += emu_passed
            missing = [m for m in missing if m in emu_missing]
        if missing:
            reasons.append(f"no passing fallback evidence ({', '.join(missing)})")
            return cell(AdmissionStatus.UNTESTED)
        where = sorted({r.backend for r in passed})
        reasons.append(f"per-token decode fallback verified on {', '.join(where)}")
        return cell(AdmissionStatus.FALLBACK, passed)

    gates = [r for r in rows if r.kind in ("compile", "audit", "check", "timing")
             or (pp.mutants and r.kind == "mutant")]
    if not pp.audit:
        gates = [r for r in gates if r.kind != "audit"]
    failing = [r.identity for r in gates if _failed(r)]
    if failing:
        reasons.append(f"{len(failing)} failing cell(s): " + ", ".join(sorted(failing)[:8])
                       + (" ..." if len(failing) > 8 else ""))
        reasons += sorted({f"{r.identity} reached no verdict: its baseline "
                           f"{r.details.get('baseline')} failed "
                           + _baseline_failure(r)
                           for r in gates if _failed(r) and _baseline_failed(r)})
        return cell(AdmissionStatus.REJECTED, [r for r in gates if _failed(r)], failing)
    infra = _infrastructure_reason(gates)
    if infra:
        reasons.append(infra)
        return cell(AdmissionStatus.INCOMPLETE)
    if not evidence.kernels and evidence.elsewhere:
        reasons.insert(0, f"no kernel of this path is built for {arch.name} (the tree limits "
                          f"{_listed(list(evidence.elsewhere))} to other arches)")
        return cell(AdmissionStatus.UNSUPPORTED)
    if regressed:
        reasons.append("regressed against the baseline: " + ", ".join(regressed))
        return cell(AdmissionStatus.REJECTED, [], regressed)
    if evidence.missing:
        reasons.append(_incomplete(evidence.missing))
        return cell(AdmissionStatus.INCOMPLETE)
    reasons += list(evidence.skipped)
    gaps = _gaps(gates)
    if gaps:
        # An instruction the emulator lacks decides nothing about the kernel: untested on
        # this arch (a hardware run, or the instruction added to hqval.emu, can decide).
        reasons.append("untested: " + "; ".join(gaps))
        return cell(AdmissionStatus.UNTESTED)

    hw_timing = [r for r in rows if r.kind == "timing" and r.backend != HARDWARE_EMULATOR
                 and r.status is Status.PASS]
    if pp.timing is not None:
        # Rows with stored samples were re-judged under this gate (admit_runs); a row
        # without samples can only be judged on its stored ratio.
        def over(r: Row) -> bool:
            g = pp.gate(str(r.details.get("mode", "cold")))
            return ("verdict" not in r.details and g is not None and r.measured is not None
                    and r.measured > g.ratio_max)
        slow = [r for r in hw_timing if over(r)]
        if slow:
            reasons.append(
                "timing gate: v2/v1 ratio above ratio_max: "
                + ", ".join(f"{r.identity}={r.measured:.3f}" for r in slow))
            return cell(AdmissionStatus.REJECTED, slow, [r.identity for r in slow])
    noisy = [r for r in rows if r.kind == "timing" and r.status is Status.SKIPPED
             and (r.details.get("verdict") or {}).get("verdict") == "noisy"]
    if noisy:
        reasons.append("noisy timing (the policy lets it pass, not measured): "
                       + ", ".join(r.identity for r in noisy))

    def covered(on_hw: bool) -> tuple[list[Row], list[str]]:
        """Every required check passed on every kernel of the path (not on any one)."""
        return _per_kernel(pp.checks, evidence.kernels, rows, on_hw)

    hw, hw_missing = covered(True)
    hw_ok = bool(hw) and not hw_missing
    if hw_ok and (hw_timing or not pp.timing_required):
        timed = " and timing" if hw_timing else ""
        reasons.append(f"required checks {_listed(pp.checks)}{timed} passed on "
                       f"{', '.join(sorted({r.backend for r in hw}))} hardware")
        return cell(AdmissionStatus.MEASURED, hw + hw_timing)
    if hw_ok:
        reasons.append("required checks passed on hardware, but no hardware timing ran: "
                       "not measured")
    emu, emu_missing = covered(False)
    if emu and not emu_missing:
        reasons.append(f"required checks {_listed(pp.checks)} passed on the emulator")
        return cell(AdmissionStatus.EMULATED, emu)
    if hw_ok:
        return cell(AdmissionStatus.UNTESTED, hw)

    compiled = [r for r in rows if r.kind == "compile" and r.status is Status.PASS]
    audits = [r for r in rows if r.kind == "audit" and r.status is Status.PASS]
    if compiled and (audits or not pp.audit):
        missing = sorted(set(emu_missing) & set(hw_missing)) or list(pp.checks)
        reasons.append(f"compiles and passes the ISA audit; no passing {', '.join(missing)}")
        return cell(AdmissionStatus.COMPILED, compiled + audits)
    if compiled:
        reasons.append("compiles, but no audit rows: not admitted as compiled")
    else:
        reasons.append("no evidence for this cell in the runs")
    return cell(AdmissionStatus.UNTESTED, compiled)


@dataclass(frozen=True)
class Admission:
    cells: tuple[Cell, ...]
    infrastructure: tuple[str, ...]  # identities + messages of infrastructure errors
    unclassified: int  # rows that could not be mapped to a format and path
    # cells that regressed against a baseline (whether or not a policy cell holds them)
    regressions: tuple[str, ...] = ()
    # failing cells on arches no policy cell covers (the cuda backend's sm_XX): a real
    # kernel's failing check, a failed timing gate, a surviving mutant
    outside: tuple[str, ...] = ()
    # failing rows on a covered arch that no policy cell holds (a qt the policy does not
    # name, a kernel missing from the envelope's kernel table, a qt=6 baseline): named as
    # kernel-level findings, never dropped
    findings: tuple[str, ...] = ()
    # expected cells of the runs (their envelopes' ``expected_cells``) without a row
    missing: tuple[str, ...] = ()
    # the suite's own mutants run on an external tree: a suite self-test, listed apart
    self_test: tuple[str, ...] = ()
    # gates a run was told to skip ("mutants gate skipped (--no-mutants) on gfx1100")
    skipped_gates: tuple[str, ...] = ()
    # the runs hold no evidence at all (no rows, or nothing to admit)
    empty: bool = False
    # rows of ``production: false`` kernels ("identity: status"): reported, not gating
    not_gating: tuple[str, ...] = ()
    # rows the run's envelope does not vouch for (another run, arch, backend or code
    # object) or whose own fields contradict their status: the run is damaged, exit 2
    damage: tuple[str, ...] = ()
    # runs whose kernel table nothing confirms (their manifest gone or changed): one line
    # each, saying so (``hqval.admission.table``)
    unconfirmed: tuple[str, ...] = ()
    # runs and baselines that do not pair by (arch, backend) (``judge.pair_baselines``):
    # what of tonight no baseline ran, what of the baseline no run ran, two baselines of
    # one arch and backend; the comparison is incomplete, exit 2
    unpaired: tuple[str, ...] = ()
    # runs admitted together that validated different things (``judge.disagreement``:
    # another suite commit, hqval version, manifest, mutants or policy), exit 2
    disagree: tuple[str, ...] = ()

    @property
    def incomplete(self) -> bool:
        return bool(self.missing) or self.empty or any(
            c.status is AdmissionStatus.INCOMPLETE for c in self.cells)

    @property
    def unproven(self) -> tuple[Cell, ...]:
        """Cells whose kernels' evidence stopped short of what the run can prove
        (``untested``: no verdict, ``compiled``: no passing check): never admitted, exit 2.
        A path the tree has no kernel for at all is untested but owes nothing."""
        return tuple(c for c in self.cells if c.kernels
                     and c.status in (AdmissionStatus.UNTESTED, AdmissionStatus.COMPILED))

    @property
    def exit_code(self) -> int:
        """2: damaged evidence, an infrastructure problem or incomplete evidence (or none,
        or a baseline that does not pair with the runs by arch and backend, or runs that
        validated different things);
        1: a row failed (a rejected cell, a kernel-level finding, a failure outside the
        policy) or regressed; 2: a cell untested or only compiled; 0: every cell at what
        the run can prove (emulated, measured, fallback or unsupported as the policy
        says) and no failure."""
        if self.damage or self.infrastructure or self.incomplete or self.unpaired \
                or self.disagree:
            return 2
        rejected = any(c.status is AdmissionStatus.REJECTED for c in self.cells)
        if rejected or self.regressions or self.outside or self.findings:
            return 1
        return 2 if self.unproven else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [{"key": c.key, "qt": c.qt, "format": c.format, "arch": c.arch,
                       "path": c.path, "status": str(c.status), "reasons": list(c.reasons),
                       "evidence": list(c.evidence), "failing": list(c.failing),
                       "kernels": [{"kernel": k, "status": st, "why": why}
                                   for k, st, why in c.kernels]}
                      for c in self.cells],
            "self_test": list(self.self_test),
            "infrastructure": list(self.infrastructure),
            "unclassified_rows": self.unclassified,
            "regressions": list(self.regressions),
            "failing_outside_admission": list(self.outside),
            "findings": list(self.findings),
            "missing": list(self.missing),
            "skipped_gates": list(self.skipped_gates),
            "empty": self.empty,
            "not_gating": list(self.not_gating),
            "damage": list(self.damage),
            "unconfirmed": list(self.unconfirmed),
            "unpaired": list(self.unpaired),
            "disagree": list(self.disagree),
            "incomplete": self.incomplete,
            "exit_code": self.exit_code,
        }


def admit(
    rows: Sequence[Row],
    policy: Policy,
    arches: Mapping[str, Arch],
    *,
    kernels: Mapping[str, KernelInfo] | None = None,
    regressed: Iterable[str] = (),
    only_arches: Iterable[str] | None = None,
    missing: Iterable[str] = (),
) -> Admission:
    """Every (format, path) of the policy on every arch that has rows (or ``only_arches``).
    ``missing`` lists expected cells of the runs that have no row (``admit_runs`` reads
    them from the envelopes)."""
    kernels = kernels or {}
    regressed = set(regressed)
    # production: false kernels are run and reported but take no part in any verdict: their
    # rows, their expected cells and their place in a path's expected evidence are set aside
    side = {n for n, k in kernels.items() if not k.production}
    not_gating = tuple(f"{r.identity}: {r.status}" for r in rows
                       if r.kernel.split("@", 1)[0] in side)
    if side:
        rows = [r for r in rows if r.kernel.split("@", 1)[0] not in side]
        kernels = {n: k for n, k in kernels.items() if n not in side}
        missing = [m for m in missing if _cell_kernel(m) not in side]
    infra = tuple(f"{r.identity}: {r.message}" for r in rows if is_infrastructure(r))
    by_cell: dict[tuple[int, str, str], list[Row]] = {}
    by_qt: dict[tuple[int, str], list[Row]] = {}
    unclassified = 0
    self_test = tuple(f"{r.identity}: {r.status}: {(r.message.splitlines() or [''])[0]}"
                      for r in rows if r.kind == "mutant" and _is_self_test(r, kernels))
    rows = [r for r in rows if not _is_self_test(r, kernels)]
    for r in rows:
        if r.kind == "admit":
            continue
        info = _classify(r, kernels)
        if info is None:
            unclassified += 1
            continue
        by_cell.setdefault((info.qt, info.path, r.arch), []).append(r)
        by_qt.setdefault((info.qt, r.arch), []).append(r)
    if only_arches is not None:
        arch_names = list(dict.fromkeys(only_arches))
    else:
        arch_names = sorted({r.arch for r in rows if r.arch in arches})
    unknown = [a for a in arch_names if a not in arches]
    if unknown:
        infra += tuple(f"arch {a}: not in matrices/arches.yaml; add it or drop --arch {a}"
                       for a in unknown)
    skips = gate_skips(rows)
    cells = []
    for a in arch_names:
        if a not in arches:
            continue
        note = [policy.notes[a]] if a in policy.notes else []
        for pp in policy.paths:
            cell_rows = by_cell.get((pp.qt, pp.path, a), [])
            reg = sorted(i for i in regressed if any(r.identity == i for r in cell_rows))
            qt_rows = by_qt.get((pp.qt, a), [])
            ev = expected_evidence(pp, arches[a], kernels, cell_rows, qt_rows,
                                   skips.get(a, []))
            cells.append(admit_cell(pp, arches[a], cell_rows, qt_rows, note, reg, ev))
    covered = set(arch_names) & set(arches)
    held = {(p.qt, p.path) for p in policy.paths}
    findings = tuple(
        f"{r.identity}: {r.status}: {(r.message.splitlines() or [''])[0]}"
        for r in rows
        if r.arch in covered and r.status in (Status.FAIL, Status.ERROR)
        and r.kind not in ("admit", "step") and not is_infrastructure(r)
        and not ((info := _classify_any(r, kernels)) is not None and info.mutant_of is not None
                 and r.kind != "mutant")
        and ((c := _classify(r, kernels)) is None or (c.qt, c.path) not in held))
    evidence_rows = [r for r in rows if r.kind not in ("admit",)]
    outside = tuple(
        r.identity for r in rows
        if r.arch not in covered and r.status in (Status.FAIL, Status.ERROR)
        and r.kind != "admit" and not is_infrastructure(r)
        # a mutant's own failing check cells are kills, not failures
        and not (r.kind != "mutant" and (info := _classify_any(r, kernels)) is not None
                 and info.mutant_of is not None))
    return Admission(tuple(cells), infra, unclassified, outside=outside, findings=findings,
                     missing=tuple(missing), self_test=self_test,
                     skipped_gates=tuple(f"{s} on {a}" for a, ss in skips.items() for s in ss),
                     empty=not evidence_rows or not (any(c.kernels for c in cells) or outside
                                                           or findings),
                     not_gating=not_gating)


def _cell_kernel(identity: str) -> str:
    """The kernel of a cell identity ``check[kernel|arch|backend]`` (``kernel@MxK`` too)."""
    inner = identity.partition("[")[2]
    return inner.split("|", 1)[0].split("@", 1)[0]


def _is_self_test(row: Row, kernels: Mapping[str, KernelInfo]) -> bool:
    if row.details.get("self_test"):
        return True
    info = kernels.get(row.kernel.split("@", 1)[0])
    return info is not None and info.self_test


def to_markdown(adm: Admission) -> str:
    """One row per cell: its status, reasons and the kernels behind it with their own
    status (the whys are in ``to_json``)."""
    return md.table(["arch", "format", "path", "status", "reasons", "kernels"],
                    [[c.arch, f"qt={c.qt} {c.format}", c.path, md.bold(c.status),
                      md.join(c.reasons, "; "),
                      md.join([f"{k}: {st}" for k, st, _ in c.kernels], ", ")]
                     for c in adm.cells]) + "\n"


def problem_lines(adm: Admission) -> list[str]:
    """One line per thing that keeps the gate from passing, or that a reader must know:
    infrastructure errors, missing evidence, kernel-level findings, failures outside the
    policy, skipped gates (``hqval admit`` and ``hqval run`` print them)."""
    lines = [f"damaged: {d}" for d in adm.damage]
    lines += [f"baseline: {u}" for u in adm.unpaired]
    lines += [f"mixed: {d}" for d in adm.disagree]
    lines += [f"infrastructure: {m}" for m in adm.infrastructure]
    if adm.empty:
        lines.append("empty: the runs hold no evidence (no rows, or no kernel of any admission "
                     "path: nothing to admit)")
    if adm.missing:
        lines.append(f"incomplete: {len(adm.missing)} expected cell(s) have no row, first: "
                     + ", ".join(adm.missing[:5]) + "; rerun with --resume")
    lines += [f"not admitted: {c.key} is {c.status}: {'; '.join(c.reasons)}"
              for c in adm.unproven]
    lines += [f"kernel-level finding: {f}" for f in adm.findings]
    lines += [f"failing outside the policy: {i}" for i in adm.outside]
    lines += [f"skipped: {s}" for s in adm.skipped_gates]
    if adm.self_test:
        lines.append(f"suite self-test: {len(adm.self_test)} verdict(s) of the suite's own "
                     "mutants (they break the suite's kernels, not this tree's: not evidence "
                     "about its cells)")
    lines += [f"unconfirmed: {u}" for u in adm.unconfirmed]
    lines += [f"not gating (production: false): {s}" for s in adm.not_gating
              if not s.endswith((": pass", ": unsupported", ": skipped"))]
    return lines


def dumps(adm: Admission) -> str:
    return json.dumps(adm.to_json(), indent=2) + "\n"




# how far a cell's evidence got, for combining the cells of several runs: the status a
# run's own evidence proves that is furthest along wins, once no run rejects the cell
_REACH = {AdmissionStatus.UNTESTED: 0, AdmissionStatus.COMPILED: 1,
          AdmissionStatus.EMULATED: 2, AdmissionStatus.FALLBACK: 2,
          AdmissionStatus.MEASURED: 3, AdmissionStatus.UNSUPPORTED: 4}


def _combine_cells(cells: Sequence[tuple[str, Cell]]) -> Cell:
    """One (qt, path, arch) cell decided by several runs, each with its own kernel table:
    rejected when any run rejects it, incomplete when any run lacks evidence, else the
    furthest any run's evidence reached."""
    if len(cells) == 1:
        return cells[0][1]
    for bad in (AdmissionStatus.REJECTED, AdmissionStatus.INCOMPLETE):
        hit = [(src, c) for src, c in cells if c.status is bad]
        if hit:
            break
    else:
        best = max(_REACH[c.status] for _, c in cells)
        hit = [(src, c) for src, c in cells if _REACH[c.status] == best]
    first = hit[0][1]
    return Cell(first.qt, first.format, first.arch, first.path, first.status,
                tuple(f"{src}: {r}" for src, c in hit for r in c.reasons),
                tuple(sorted({e for _, c in hit for e in c.evidence})),
                tuple(sorted({f for _, c in hit for f in c.failing})),
                tuple(k for _, c in hit for k in c.kernels))


def combine(admissions: Sequence[Admission], sources: Sequence[str]) -> Admission:
    """Admissions of several runs, each decided with its own kernel table, as one: every
    cell combined (``_combine_cells``), every problem of every run kept."""
    if len(admissions) == 1:
        return admissions[0]
    if not admissions:
        return Admission((), (), 0, empty=True)
    by_key: dict[str, list[tuple[str, Cell]]] = {}
    for src, adm in zip(sources, admissions, strict=True):
        for c in adm.cells:
            by_key.setdefault(c.key, []).append((src, c))

    def every(field_name: str) -> tuple[str, ...]:
        return tuple(x for a in admissions for x in getattr(a, field_name))

    return Admission(
        tuple(_combine_cells(v) for v in by_key.values()),
        every("infrastructure"), sum(a.unclassified for a in admissions),
        regressions=tuple(dict.fromkeys(every("regressions"))), outside=every("outside"),
        findings=every("findings"), missing=every("missing"), self_test=every("self_test"),
        skipped_gates=every("skipped_gates"), empty=all(a.empty for a in admissions),
        not_gating=every("not_gating"), damage=every("damage"),
        unconfirmed=every("unconfirmed"), unpaired=every("unpaired"), disagree=every("disagree"))
