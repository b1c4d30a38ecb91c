"""The mutation kill matrix: every deliberately broken kernel must be killed.

A mutant (``kernels/mutants/mutants.yaml``: ``mutant_of``, ``mutation``,
``expected_killer``) is killed on an arch when at least one check cell or ISA audit rule
*fails* it there.  An ``error`` is no kill: the check reached no verdict, so a mutant that
only errors survives (fail closed).  Arches the mutant does not compile for, or does not
apply to, are ``unsupported`` for it.  The real kernels must show zero failing or erroring
cells in the same run, or the matrix proves nothing.

The verdict is one ``Row(kind="mutant", check="mutant")`` per (mutant, arch): ``pass`` if
killed (the suite did its job), ``fail`` if it survived, with the killers, the expected
killer and every cell's status in ``details``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

VERDICT_CHECK = "mutant"


@dataclass(frozen=True)
class Built:
    """Whether a mutant applies to and compiles for an arch, and why not."""

    ok: bool
    reason: str = ""


def killers(rows: Iterable[Row]) -> list[str]:
    """Names of the checks / audit rules whose rows fail (never error) the kernel."""
    return sorted({r.check for r in rows if r.status == Status.FAIL})


def expected_hit(expected: str, found: Sequence[str]) -> bool:
    """``expected_killer`` names a check (``bit_identity``) or an audit rule
    (``audit_header_scalar``, ``header_scalar`` or ``audit:header_scalar``)."""
    want = expected.replace("audit:", "audit_").strip()
    return any(k == want or k == f"audit_{want}" for k in found)


def verdicts(
    mutants: Sequence[KernelSpec], arches: Sequence[str], backend: str,
    built: Mapping[tuple[str, str], Built], rows: Iterable[Row],
    real_rows: Iterable[Row] = (),
) -> list[Row]:
    """One verdict row per (mutant, arch) from the check and audit rows of the mutants.
    ``real_rows`` are the real kernels' rows: a check or rule that also fails the kernel a
    mutant is a copy of (``mutant_of``) on that arch is no kill (it fails the real kernel
    too, so it says nothing about the mutation)."""
    by_cell: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by_cell.setdefault((r.kernel, r.arch), []).append(r)
    real_fails = {(r.kernel, r.arch, r.check) for r in real_rows if r.status == Status.FAIL}
    out: list[Row] = []
    for m in mutants:
        for arch in arches:
            b = built.get((m.name, arch), Built(False, "not compiled"))
            base = {"mutant_of": m.mutant_of, "mutation": m.mutation,
                    "expected_killer": m.expected_killer}
            if not b.ok:
                out.append(Row(kind="mutant", check=VERDICT_CHECK, kernel=m.name, arch=arch,
                               backend=backend, status=Status.UNSUPPORTED,
                               message=f"not built for {arch}: {b.reason}", details=base))
                continue
            cell_rows = by_cell.get((m.name, arch), [])
            failing = killers(cell_rows)
            also_real = [k for k in failing if (m.mutant_of, arch, k) in real_fails]
            found = [k for k in failing if k not in also_real]
            cells = {r.check: str(r.status) for r in cell_rows}
            errors = sorted(r.check for r in cell_rows if r.status == Status.ERROR)
            details = {**base, "killed_by": found, "cells": cells, "errors": errors,
                       "expected_hit": expected_hit(m.expected_killer, found),
                       "fails_real_kernel_too": also_real}
            if not found and is_isa_only_off_amd(m.expected_killer, arch):
                # Mutations such as a lane-dependent header address change the machine
                # code, not the numbers: only the AMD ISA audit sees them, and there is no
                # audit of NVIDIA code.  Not applicable there, rather than a survivor.
                out.append(Row(kind="mutant", check=VERDICT_CHECK, kernel=m.name, arch=arch,
                               backend=backend, status=Status.UNSUPPORTED,
                               message=f"its killer {m.expected_killer!r} is an AMD ISA audit "
                                       f"rule; {arch} has no ISA audit", details=details))
                continue
            gaps = sorted({str(r.details["emulator_gap"]) for r in cell_rows
                           if r.details.get("emulator_gap")})
            if not found and gaps:
                # No check reached a verdict because the emulator cannot run the mutant:
                # neither killed nor survived.
                out.append(Row(kind="mutant", check=VERDICT_CHECK, kernel=m.name, arch=arch,
                               backend=backend, status=Status.SKIPPED,
                               message=f"untested: the emulator lacks {', '.join(gaps)}",
                               details={**details, "emulator_gap": ", ".join(gaps)}))
                continue
            if found:
                note = "" if details["expected_hit"] else (
                    f" (expected killer {m.expected_killer!r} did not fail it)")
                out.append(Row(kind="mutant", check=VERDICT_CHECK, kernel=m.name, arch=arch,
                               backend=backend, status=Status.PASS,
                               message=f"killed by {', '.join(found)}{note}",
                               measured=float(len(found)), details=details))
            else:
                why = f"; errors (no verdict) in {', '.join(errors)}" if errors else ""
                if also_real:
                    why += (f"; {', '.join(also_real)} failed it but fail {m.mutant_of} too "
                            "(no kill)")
                out.append(Row(kind="mutant", check=VERDICT_CHECK, kernel=m.name, arch=arch,
                               backend=backend, status=Status.FAIL,
                               message=f"SURVIVED: no check or audit rule failed it{why}",
                               measured=0.0, details=details))
    return out


def is_isa_only_off_amd(expected_killer: str, arch: str) -> bool:
    """True when a mutant can only be caught by an AMD ISA audit rule and ``arch`` is not
    an AMD gfx target (the cuda backend's sm_XX), where no such audit exists."""
    from hqval.matrix import NVIDIA_ARCH

    return expected_killer.startswith(("audit_", "audit:")) and bool(NVIDIA_ARCH.fullmatch(arch))


def build(mutants: Manifest, arches: Sequence[Arch], cache_dir: str | None = None,
          real: Manifest | None = None) -> tuple[dict[tuple[str, str], Built], list[Row]]:
    """Compile each mutant per arch and audit what compiled: (built map, audit rows).
    With ``real`` (the manifest the mutants' ``baseline`` and ``mutant_of`` name), the
    audit rows also hold those of each mutant's real kernel (``mutant_of``), so a rule
    that fails the real kernel too is told apart from a kill (``verdicts``)."""
    from hqval.audit import audit_matrix
    from hqval.toolchain import compile_kernel

    built: dict[tuple[str, str], Built] = {}
    audit_rows: list[Row] = []
    originals = [] if real is None else [real.by_name(n) for n in
                                        sorted({m.mutant_of for m in mutants.kernels
                                                if m.mutant_of})]
    for arch in arches:
        cells = []
        if arch.is_amd:
            for o in originals:
                if o.applies_to(arch):
                    res = compile_kernel(o, arch.name, cache_dir)
                    if res.ok:
                        cells.append((o, res))
        for m in mutants.kernels:
            if not arch.is_amd:
                ok = not m.amd_only
                built[(m.name, arch.name)] = Built(ok, "" if ok else "AMD-only source")
                continue
            if not m.applies_to(arch):
                built[(m.name, arch.name)] = Built(False, m.not_for(arch))
                continue
            res = compile_kernel(m, arch.name, cache_dir)
            built[(m.name, arch.name)] = Built(res.ok, "" if res.ok else res.message)
            if res.ok:
                cells.append((m, res))
        if cells:
            audit_rows += audit_matrix(cells, arch, cache_dir=cache_dir,
                                       real_manifest=None if real is None else real.path)
    return built, audit_rows


def gating(rows: Iterable[Row], real: Manifest) -> tuple[list[Row], list[Row]]:
    """Real-kernel failing or erroring cells split into (gating, listed only): a kernel
    with ``production: false`` is run and reported but never gates."""
    names = {k.name: k for k in real.kernels}
    bad = real_failures(rows)
    listed = [r for r in bad if r.kernel in names and not names[r.kernel].production]
    return [r for r in bad if r not in listed], listed


def real_failures(rows: Iterable[Row]) -> list[Row]:
    """Real-kernel cells that failed or errored (must be none)."""
    return [r for r in rows if r.status in (Status.FAIL, Status.ERROR)]


def matrix_text(verdict_rows: Sequence[Row], cell_rows: Iterable[Row]) -> str:
    """mutant x check table per arch: K killed (fails), . passes (survives it),
    E error, - unsupported (the mutant is not built for that arch)."""
    rows = list(cell_rows)
    columns = sorted({r.check for r in rows})
    status = {(r.kernel, r.arch, r.check): r.status for r in rows}
    mark = {Status.FAIL: "K", Status.PASS: ".", Status.ERROR: "E",
            Status.UNSUPPORTED: "-", Status.SKIPPED: "s"}
    abbrev = [c.replace("audit_", "a:") for c in columns]
    width = max([len(v.kernel) + len(v.arch) + 3 for v in verdict_rows] + [10])
    lines = ["mutant|arch".ljust(width) + " " + " ".join(abbrev) + "  verdict"]
    for v in verdict_rows:
        marks = [mark.get(status.get((v.kernel, v.arch, c), Status.UNSUPPORTED), "?")
                 .center(len(a)) for c, a in zip(columns, abbrev, strict=True)]
        verdict = {Status.PASS: "killed", Status.FAIL: "SURVIVED",
                   Status.UNSUPPORTED: "unsupported"}.get(v.status, str(v.status))
        lines.append(f"{v.kernel}|{v.arch}".ljust(width) + " " + " ".join(marks) + "  " + verdict)
    return "\n".join(lines)
