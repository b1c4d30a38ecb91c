"""Admission status per (qt, arch, path), derived from result rows and ``matrices/policy.yaml``.

The policy says, per format and path, which arch capabilities the path needs (and what
happens when one is missing: ``fallback`` to per-token decode or ``unsupported``), which
checks must pass, and which gates (audit, mutants, timing) apply.  The rows say what
happened.  The status is the strongest level the rows support, and any failing or erroring
row of a cell rejects it (fails closed), naming the failing cells.  Nothing here knows
which arch "should" come out as what.

Rows are mapped to formats and paths by their kernel: ``details["qt"]`` and
``details["kind"]`` (or ``details["path"]``) when the producing step put them there,
otherwise the kernel table recorded in the run envelope from the manifest.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hqval import markdown as md
from hqval import suite_dir
from hqval.matrix import Arch, load_arches
from hqval.result import Row, Status
from hqval.timing.gate import Gate, GateError, TimingPolicy, parse_timing, rejudge_rows

POLICY_PATH = suite_dir("matrices") / "policy.yaml"
HARDWARE_EMULATOR = "emu"
PATH_OF_KIND = {"gemv": "decode", "gemv_qkv": "decode", "gemm": "prefill"}


class AdmissionStatus(enum.StrEnum):
    MEASURED = "measured"
    EMULATED = "emulated"
    # an expected cell of the path has no row (a killed step, a crashed worker, rows lost):
    # never emulated or measured, and exit 2
    INCOMPLETE = "incomplete"
    COMPILED = "compiled"
    FALLBACK = "fallback"
    UNSUPPORTED = "unsupported"
    REJECTED = "rejected"
    UNTESTED = "untested"

    @property
    def admitted(self) -> bool:
        return self in (AdmissionStatus.MEASURED, AdmissionStatus.EMULATED,
                        AdmissionStatus.COMPILED, AdmissionStatus.FALLBACK)


class PolicyError(ValueError):
    """policy.yaml does not follow its schema; the message names the file, key and fix."""


# ---------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class Need:
    cap: str
    allowed: tuple[str, ...]
    otherwise: AdmissionStatus  # FALLBACK or UNSUPPORTED
    why: str


@dataclass(frozen=True)
class PathPolicy:
    format: str
    qt: int
    path: str
    kinds: tuple[str, ...]
    needs: tuple[Need, ...]
    checks: tuple[str, ...]
    fallback_checks: tuple[str, ...] = ()
    audit: bool = True
    mutants: bool = True
    # The timing gate per cache mode (hqval.timing.gate), None: timing not gated.
    timing: TimingPolicy | None = None

    @property
    def timing_required(self) -> bool:
        """measured needs hardware timing rows too (GEMV paths have timing cells; a path
        without timing cells would otherwise never reach measured)."""
        return self.timing.required if self.timing is not None else True

    def gate(self, mode: str) -> Gate | None:
        return self.timing.gate(mode) if self.timing is not None else None

    @property
    def max_ratio(self) -> float | None:
        """The largest ratio_max over the modes (for a plot's single gate line)."""
        if self.timing is None:
            return None
        return max(g.ratio_max for g in self.timing.gates.values())


@dataclass(frozen=True)
class Policy:
    paths: tuple[PathPolicy, ...]
    notes: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def gate(self, qt: int, path: str, mode: str) -> Gate | None:
        """The timing gate of (qt, path) in cache mode ``mode``; None where ungated."""
        for pp in self.paths:
            if pp.qt == qt and pp.path == path:
                return pp.gate(mode)
        return None


CAPS = ("wmma", "wave_size", "family")


def _need(src: str, where: str, d: Any) -> Need:
    if not isinstance(d, dict):
        raise PolicyError(f"{src}: {where}: expected a mapping with cap, in, otherwise, why")
    cap = d.get("cap")
    if cap not in CAPS:
        raise PolicyError(f"{src}: {where}.cap: {cap!r} is not one of {', '.join(CAPS)}")
    allowed = d.get("in")
    if not isinstance(allowed, list) or not allowed:
        raise PolicyError(f"{src}: {where}.in: give a non-empty list of allowed {cap} values")
    otherwise = d.get("otherwise")
    if otherwise not in ("fallback", "unsupported"):
        raise PolicyError(
            f"{src}: {where}.otherwise: {otherwise!r}; use 'fallback' or 'unsupported'")
    return Need(str(cap), tuple(str(a) for a in allowed), AdmissionStatus(otherwise),
                str(d.get("why", "")))


def parse_policy(data: Any, source: str = "policy.yaml") -> Policy:
    if not isinstance(data, dict) or not isinstance(data.get("formats"), dict):
        raise PolicyError(f"{source}: top level needs a 'formats' mapping (format -> qt, paths)")
    if data.get("schema") != 1:
        raise PolicyError(f"{source}: schema: {data.get('schema')!r}; this hqval reads schema 1")
    paths: list[PathPolicy] = []
    for fmt, fd in data["formats"].items():
        where = f"formats.{fmt}"
        if not isinstance(fd, dict) or not isinstance(fd.get("qt"), int):
            raise PolicyError(f"{source}: {where}.qt: give the format's integer qt")
        if not isinstance(fd.get("paths"), dict) or not fd["paths"]:
            raise PolicyError(f"{source}: {where}.paths: give at least one of decode, prefill")
        for pname, pd in fd["paths"].items():
            pw = f"{where}.paths.{pname}"
            if pname not in ("decode", "prefill"):
                raise PolicyError(f"{source}: {pw}: unknown path; use decode or prefill")
            if not isinstance(pd, dict):
                raise PolicyError(f"{source}: {pw}: expected a mapping")
            unknown = set(pd) - {"kinds", "needs", "checks", "fallback_checks", "audit",
                                 "mutants", "timing"}
            if unknown:
                raise PolicyError(f"{source}: {pw}: unknown key(s) {sorted(unknown)}")
            kinds = pd.get("kinds")
            if not isinstance(kinds, list) or not kinds:
                raise PolicyError(f"{source}: {pw}.kinds: list the kernel kinds (gemv, gemm)")
            checks = pd.get("checks")
            if not isinstance(checks, list) or not checks:
                raise PolicyError(f"{source}: {pw}.checks: list at least one required check")
            needs = tuple(_need(source, f"{pw}.needs[{i}]", n)
                          for i, n in enumerate(pd.get("needs") or []))
            fb = tuple(str(c) for c in pd.get("fallback_checks") or [])
            if any(n.otherwise is AdmissionStatus.FALLBACK for n in needs) and not fb:
                raise PolicyError(
                    f"{source}: {pw}.fallback_checks: a need falls back, so name the checks "
                    "that verify the fallback (e.g. [fallback])")
            try:
                timing = parse_timing(pd.get("timing"), f"{pw}.timing")
            except GateError as exc:
                raise PolicyError(f"{source}: {exc}") from None
            paths.append(PathPolicy(
                format=str(fmt), qt=int(fd["qt"]), path=str(pname),
                kinds=tuple(str(k) for k in kinds), needs=needs,
                checks=tuple(str(c) for c in checks), fallback_checks=fb,
                audit=bool(pd.get("audit", True)), mutants=bool(pd.get("mutants", True)),
                timing=timing,
            ))
    notes = data.get("notes") or {}
    if not isinstance(notes, dict):
        raise PolicyError(f"{source}: notes: expected a mapping arch -> text")
    return Policy(tuple(paths), {str(k): str(v) for k, v in notes.items()}, source)


@functools.lru_cache(maxsize=1)
def _suite_kernels() -> dict[str, KernelInfo]:
    """(qt, path) of the suite's own kernels (kernels/kernels.yaml), for timing rows of runs
    that recorded no kernel table (bench runs before the table, held-out H200 runs): their
    cells find the same gate as any other run's."""
    from hqval.manifest import ManifestError, load_manifest

    try:
        specs = load_manifest(None).kernels
    except (ManifestError, OSError):
        return {}
    return {s.name: KernelInfo(s.qt, PATH_OF_KIND[s.kind]) for s in specs
            if s.kind in PATH_OF_KIND}


def gate_for_row(
    policy: Policy, kernels: Mapping[str, KernelInfo]
) -> Callable[[Row], Gate | None]:
    """A function row -> the policy's timing gate for the row's (qt, path, mode), or None.
    A timing mutant's rows take the gate of the kernel it slows."""
    def gate_for(row: Row) -> Gate | None:
        d = row.details
        qt, mode = d.get("qt"), d.get("mode")
        path = d.get("path") or PATH_OF_KIND.get(str(d.get("kind")))
        if not (isinstance(qt, int) and path):
            name = row.kernel.split("@", 1)[0].split("+", 1)[0]  # a timing mutant: its real kernel
            info = kernels.get(name) or _suite_kernels().get(name)
            if info is None:
                return None
            qt, path = info.qt, info.path
        if mode not in ("hot", "cold"):
            return None
        return policy.gate(qt, str(path), str(mode))
    return gate_for


def load_policy(path: str | Path | None = None) -> Policy:
    p = Path(path) if path else POLICY_PATH
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise PolicyError(
            f"{p}: cannot read the policy ({exc.strerror}); pass --policy FILE") from exc
    except yaml.YAMLError as exc:
        raise PolicyError(f"{p}: not valid YAML ({exc})") from exc
    return parse_policy(data, str(p))


# ---------------------------------------------------------------------------- arch caps


def arch_caps_from_matrix(path: str | Path | None = None) -> dict[str, Arch]:
    """Every arch of matrices/arches.yaml (its capabilities are what the policy names)."""
    return load_arches(path)


# ---------------------------------------------------------------------------- evidence


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


@dataclass(frozen=True)
class KernelInfo:
    qt: int
    path: str
    mutant_of: str | None = None
    kind: str = ""
    # the manifest's requires (any | wmma_gfx11 | wmma_gfx12); None when the run did not
    # record it (then a kernel is expected on an arch where it has rows that apply)
    requires: str | None = None
    # a mutant of the suite's own kernels run on an external tree: a suite self-test, never
    # evidence about the tree's cells
    self_test: bool = False
    # the manifest's ``production: false``: its rows are kept and reported, never gating
    production: bool = True

    def applies_to(self, arch: Arch) -> bool | None:
        if self.requires is None:
            return None
        needed = {"any": None, "wmma_gfx11": "gfx11", "wmma_gfx12": "gfx12"}.get(self.requires)
        return needed is None or arch.wmma == needed


def kernel_table(envelopes: Iterable[Mapping[str, Any]]) -> dict[str, KernelInfo]:
    """Kernel -> (qt, path) from the kernel tables the runs recorded."""
    out: dict[str, KernelInfo] = {}
    for env in envelopes:
        for name, k in (env.get("kernels") or {}).items():
            kind = k.get("kind")
            qt = k.get("qt")
            if isinstance(qt, int) and kind in PATH_OF_KIND:
                req = k.get("requires")
                out[name] = KernelInfo(qt, PATH_OF_KIND[kind], k.get("mutant_of"), str(kind),
                                       str(req) if isinstance(req, str) else None,
                                       bool(k.get("self_test")),
                                       k.get("production") is not False)
    return out


def _classify(row: Row, kernels: Mapping[str, KernelInfo]) -> KernelInfo | None:
    """The (qt, path) a row is evidence for, or None.  Timing cells name their kernel as
    ``kernel@MxK``.  A mutant's own check rows are not evidence about the real kernel:
    only the kill-matrix rows (kind ``mutant``) count, as a gate."""
    d = row.details
    qt = d.get("qt")
    path = d.get("path") or PATH_OF_KIND.get(str(d.get("kind")))
    info: KernelInfo | None
    if isinstance(qt, int) and path in ("decode", "prefill"):
        info = KernelInfo(qt, str(path), d.get("mutant_of"))
    else:
        info = kernels.get(row.kernel.split("@", 1)[0])
        if info is None and isinstance(d.get("mutant_of"), str):
            info = kernels.get(d["mutant_of"])
    if info is not None and info.mutant_of is not None and row.kind != "mutant":
        return None
    return info


def _classify_any(row: Row, kernels: Mapping[str, KernelInfo]) -> KernelInfo | None:
    """Like ``_classify`` but keeps mutants' own rows (to recognise them as such)."""
    info = kernels.get(row.kernel.split("@", 1)[0])
    if info is None and isinstance(row.details.get("mutant_of"), str):
        return KernelInfo(0, "decode", str(row.details["mutant_of"]))
    return info


def is_infrastructure(row: Row) -> bool:
    """An error that says nothing about the kernels: a missing backend, tool or step."""
    return row.status is Status.ERROR and bool(row.details.get("infrastructure"))


def _failed(row: Row) -> bool:
    return row.status in (Status.FAIL, Status.ERROR)


def emulator_gap(row: Row) -> str | None:
    """The instruction the emulator lacks, when that is why ``row`` reached no verdict."""
    gap = row.details.get("emulator_gap")
    return str(gap) if gap and row.status is Status.SKIPPED else None


def _gaps(rows: Iterable[Row]) -> list[str]:
    return sorted({f"{r.kernel} ({r.check}): the emulator lacks {emulator_gap(r)}"
                   for r in rows if emulator_gap(r)})


def kernel_statuses(kernels: Sequence[str], checks: Sequence[str],
                    rows: Sequence[Row]) -> tuple[tuple[str, str, str], ...]:
    """Each kernel's own status behind a cell: failed (a failing gate row of its own),
    untested (an instruction the emulator lacks, named), passed (every required check has
    a passing row), or no evidence (what is missing)."""
    out = []
    for k in kernels:
        mine = [r for r in rows if r.kernel == k and r.kind in ("compile", "audit", "check",
                                                                 "timing")]
        bad = sorted(r.check for r in mine if _failed(r))
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


def _listed(items: Sequence[str], last: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``: a list as a sentence reads it."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def _unmet(need: Need, arch: Arch) -> str:
    """Why a need is not met, as a sentence: 'wmma is none here, not gfx11 or gfx12: ...'."""
    return (f"{arch.name} has {need.cap} {arch.cap(need.cap)}, not "
            f"{_listed(need.allowed, 'or')}: {need.why}")


@dataclass(frozen=True)
class Evidence:
    """What a path needs on an arch, kernel by kernel: the path's kernels that apply
    there, the expected cells without any row, and the gates the run skipped."""

    kernels: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


def gate_skips(rows: Iterable[Row]) -> dict[str, list[str]]:
    """arch -> the gates a run was told to skip there (``--no-mutants``): the steps'
    own ``skipped`` rows that name the flag."""
    out: dict[str, list[str]] = {}
    for r in rows:
        flag = r.details.get("skipped_by")
        if r.kind == "step" and r.status is Status.SKIPPED and isinstance(flag, str):
            out.setdefault(r.arch, []).append(f"{r.check} gate skipped ({flag})")
    return out


def expected_evidence(
    pp: PathPolicy, arch: Arch, kernels: Mapping[str, KernelInfo], rows: Sequence[Row],
    qt_rows: Sequence[Row], skipped: Sequence[str] = (),
) -> Evidence:
    """Every expected cell of every kernel of the path on ``arch``: its compile row, its
    audit rows (when the policy audits), a row of each required check (each fallback
    check when the arch falls back) and a verdict for each of its mutants (unless the
    run skipped the mutants gate).  A cell with a row of any status is present; the
    status is judged by ``admit_cell``."""
    fallback = any(arch.cap(n.cap) not in n.allowed for n in pp.needs)
    present: dict[tuple[str, str], set[str]] = {}
    for r in [*rows, *qt_rows]:
        present.setdefault((r.kernel, r.kind), set()).add(r.check)
    path_kernels = sorted(n for n, k in kernels.items()
                          if k.qt == pp.qt and k.path == pp.path and k.mutant_of is None)
    mine: list[str] = []
    for name in path_kernels:
        applies = kernels[name].applies_to(arch)
        if applies is None:  # not recorded: expected where it has applicable rows
            applies = any(r.kernel == name and r.status is not Status.UNSUPPORTED
                          for r in rows)
        if applies or fallback:
            mine.append(name)
    missing: list[str] = []
    notes = list(skipped)
    if pp.mutants and not fallback and mine \
            and not any("mutants gate" in s for s in skipped) \
            and not any(k.mutant_of in mine and not k.self_test for k in kernels.values()):
        # not blocking (a tree need not ship mutants) but never silent
        notes.append(f"mutants gate: no mutant of this tree breaks {_listed(mine)}; the "
                     "kill matrix says nothing about these kernels")
    for name in mine:
        applies = kernels[name].applies_to(arch) is not False
        if applies and not fallback:
            if "compile" not in present.get((name, "compile"), set()):
                missing.append(f"compile of {name}")
            if pp.audit and not present.get((name, "audit")):
                missing.append(f"audit of {name}")
        checks = pp.fallback_checks if fallback else pp.checks
        missing += [f"{c} of {name}" for c in checks
                    if c not in present.get((name, "check"), set())]
        if pp.mutants and not fallback and not any("mutants gate" in s for s in skipped):
            # the suite's own mutants on an external tree are a self-test of the checks,
            # not evidence about this tree's cells (they are dropped before this point)
            for m, k in kernels.items():
                if k.mutant_of == name and not k.self_test \
                        and "mutant" not in present.get((m, "mutant"), set()):
                    missing.append(f"mutant verdict of {m}")
    return Evidence(tuple(mine), tuple(missing), tuple(notes))


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
        fb_rows = [r for r in qt_rows if r.check in pp.fallback_checks]
        failing = [r.identity for r in fb_rows if _failed(r)]
        # the fallback runs the decode kernels, so their own failures count too
        own = {r.identity for r in rows}
        decode_fail = [r.identity for r in qt_rows
                       if _failed(r) and r.identity not in own and r.check not in
                       pp.fallback_checks and r.kind in ("compile", "audit", "check")]
        if failing or decode_fail:
            reasons.append("fallback evidence failed: " + ", ".join(failing + decode_fail))
            return cell(AdmissionStatus.REJECTED, fb_rows, failing + decode_fail)
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
        return cell(AdmissionStatus.REJECTED, [r for r in gates if _failed(r)], failing)
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

    @property
    def incomplete(self) -> bool:
        return bool(self.missing) or self.empty or any(
            c.status is AdmissionStatus.INCOMPLETE for c in self.cells)

    @property
    def exit_code(self) -> int:
        """2: an infrastructure problem or incomplete evidence (or none); 1: a row failed
        (a rejected cell, a kernel-level finding, a failure outside the policy) or
        regressed; 0: complete evidence and no failure."""
        if self.infrastructure or self.incomplete:
            return 2
        rejected = any(c.status is AdmissionStatus.REJECTED for c in self.cells)
        return 1 if rejected or self.regressions or self.outside or self.findings else 0

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
    lines = [f"infrastructure: {m}" for m in adm.infrastructure]
    if adm.empty:
        lines.append("empty: the runs hold no evidence (no rows, or no kernel of any admission "
                     "path: nothing to admit)")
    if adm.missing:
        lines.append(f"incomplete: {len(adm.missing)} expected cell(s) have no row, first: "
                     + ", ".join(adm.missing[:5]) + "; rerun with --resume")
    lines += [f"kernel-level finding: {f}" for f in adm.findings]
    lines += [f"failing outside the policy: {i}" for i in adm.outside]
    lines += [f"skipped: {s}" for s in adm.skipped_gates]
    if adm.self_test:
        lines.append(f"suite self-test: {len(adm.self_test)} verdict(s) of the suite's own "
                     "mutants (they break the suite's kernels, not this tree's: not evidence "
                     "about its cells)")
    lines += [f"not gating (production: false): {s}" for s in adm.not_gating
              if not s.endswith((": pass", ": unsupported", ": skipped"))]
    return lines


def dumps(adm: Admission) -> str:
    return json.dumps(adm.to_json(), indent=2) + "\n"


def admit_runs(
    runs: Sequence[Any],
    *,
    policy: Policy | None = None,
    arches: Mapping[str, Arch] | None = None,
    baseline: Sequence[Any] = (),
    only_arches: Iterable[str] | None = None,
) -> tuple[Admission, Any]:
    """Admission over loaded runs (``hqval.results.store.Run``), optionally against baseline
    runs.  Returns the admission and the comparison (None without a baseline)."""
    from hqval.results.compare import compare_rows, same_device

    policy = policy or load_policy()
    if arches is None:
        arches = arch_caps_from_matrix()
    kernels = kernel_table(run.envelope for run in [*runs, *baseline])
    # Verdicts are recomputed from the stored samples under this policy's gate.
    rows = rejudge_rows([r for run in runs for r in run.rows], gate_for_row(policy, kernels))
    cmp = None
    regressed: list[str] = []
    if baseline:
        cmp = compare_rows([r for b in baseline for r in b.rows], rows,
                           ", ".join(str(b.path) for b in baseline),
                           ", ".join(str(r.path) for r in runs),
                           gate_for=gate_for_row(policy, kernels),
                           same_device=same_device(*(r.envelope for r in [*baseline, *runs])))
        regressed = [c.identity for c in cmp.regressions]
    if only_arches is None:  # every arch the runs were asked for, rows or not
        asked = [a for run in runs for a in run.envelope.get("arch") or []]
        only_arches = list(dict.fromkeys(
            [a for a in asked if a in arches]
            + sorted({r.arch for r in rows if r.arch in arches})))
    adm = admit(rows, policy, arches, kernels=kernels, regressed=regressed,
                only_arches=only_arches, missing=missing_cells(runs))
    if regressed:
        adm = dataclasses.replace(adm, regressions=tuple(regressed))
    return adm, cmp


# the steps whose cells are evidence (admit and report only derive from them)
EVIDENCE_STEPS = ("compile", "audit", "checks", "mutants", "timing")


def expected_cells_damage(envelope: Mapping[str, Any]) -> str:
    """Why the expected cells a ``hqval run`` recorded up front cannot be trusted, or "".
    Only a run's envelope (it names its ``steps``; schema 2 and later) has them; there
    every evidence step has a list covering every arch of the run (a step with nothing to
    do expects its note), whose length is the count recorded beside it.  An envelope
    without them would let a row be removed unnoticed wherever the kernels' own evidence
    does not reach."""
    if "steps" not in envelope:
        return ""  # a bench run, an older schema: judged on the kernels' own evidence
    cells, counts = envelope.get("expected_cells"), envelope.get("expected")
    if not isinstance(cells, Mapping):
        return "envelope.json has no expected_cells (the envelope is damaged; re-run)"
    for step in EVIDENCE_STEPS:
        ids = cells.get(step)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return f"envelope.json expected_cells has no list for step {step} (damaged)"
        if isinstance(counts, Mapping) and counts.get(step) != len(ids):
            return (f"envelope.json expects {counts.get(step)!r} cells of step {step} but "
                    f"lists {len(ids)} (damaged)")
        lacking = [a for a in envelope.get("arch") or []
                   if not any(i.rsplit("|", 2)[-2:-1] == [a] for i in ids)]
        if lacking:
            return (f"envelope.json expected_cells lists no cell of step {step} on "
                    f"{', '.join(map(str, lacking))} (damaged)")
    return ""


def missing_cells(runs: Sequence[Any]) -> list[str]:
    """The expected cells each run recorded up front (envelope ``expected_cells``) that
    have no row in it."""
    out: list[str] = []
    for run in runs:
        damage = expected_cells_damage(run.envelope) \
            if getattr(run, "written_schema", 0) >= 2 else ""
        if damage:
            out.append(f"every expected cell: {damage} ({run.path})")
            continue
        expected = run.envelope.get("expected_cells") or {}
        have = {r.identity for r in run.rows}
        for step in EVIDENCE_STEPS:
            out += [f"{i} (step {step}, {run.path})" for i in expected.get(step, [])
                    if i not in have]
    return out


def evaluate(run_paths: Sequence[str | Path], baseline_paths: Sequence[str | Path] = (),
             policy_path: str | Path | None = None) -> tuple[list[Any], Admission, Any]:
    """(runs, Admission, Comparison | None) for run directories, baselines and a policy
    (``hqval admit`` and ``hqval report``).  A damaged run or policy raises ValueError
    (``RunDirError``, ``PolicyError``) naming the file."""
    from hqval.results.store import load_runs

    runs = load_runs(run_paths)
    baseline = load_runs(baseline_paths, "--baseline")
    policy = load_policy(policy_path)
    adm, cmp = admit_runs(runs, policy=policy, baseline=baseline)
    return runs, adm, cmp


def compare_runs(base: object, new: object, *, policy: object = None,
                 history: Sequence[object] = (), same_device: bool | None = None) -> Any:
    """Two loaded runs (``hqval.results.store.Run``) compared under ``policy``'s timing
    gates (default matrices/policy.yaml); ``history``: earlier loaded runs;
    ``same_device``: True when the caller knows both were timed on one GPU, for runs that
    do not record its UUID (what the envelopes record takes precedence).  Here, not in
    ``hqval.results.compare``, which admission calls: the comparison needs the policy."""
    from hqval.results.compare import compare_rows
    from hqval.results.compare import same_device as envelopes_same_device
    from hqval.results.store import Run

    assert isinstance(base, Run) and isinstance(new, Run)
    pol = policy if isinstance(policy, Policy) else load_policy()
    kernels = kernel_table(r.envelope for r in (base, new))
    runs = [h for h in history if isinstance(h, Run)]
    recorded = envelopes_same_device(base.envelope, new.envelope)  # what they record wins
    return compare_rows(base.rows, new.rows, str(base.path), str(new.path),
                        gate_for=gate_for_row(pol, kernels), history=[h.rows for h in runs],
                        same_device=recorded if recorded is not None else same_device)
