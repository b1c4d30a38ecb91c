"""The cells a run must produce, known before anything executes: manifest x matrix x
policy x checks x arches.

Each step's list holds row identities (``check[kernel|arch|backend]``).  A step is done
only when every one of its identities has a row; the run records the lists in its
envelope (``expected``), so ``hqval admit`` can tell a complete run from one that was cut
short, emptied or lost rows, without re-deriving them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hqval import isa
from hqval.admission import Policy
from hqval.checks.cell import CHECKS, Cell, not_applicable
from hqval.checks.mutation import VERDICT_CHECK
from hqval.checks.plugin import load_for_cells
from hqval.result import cell_id
from hqval.run import steps
from hqval.run.context import RunContext
from hqval.timing import bench

if TYPE_CHECKING:
    from hqval.matrix import Arch


def _note(step: str, arch: str, backend: str) -> str:
    return cell_id(step, "-", arch, backend)


def expected_cells(ctx: RunContext, policy: Policy) -> dict[str, list[str]]:
    """step -> identities of every cell it must produce on the run's arches."""
    real = list(ctx.manifest.kernels)
    muts = list(ctx.mutants.kernels) if ctx.mutants else []
    out: dict[str, list[str]] = {s: [] for s in ("compile", "audit", "checks", "mutants",
                                                 "timing", "admit")}
    for a in ctx.arches:
        backend = ctx.backend_label(a.name)
        if not a.is_amd:
            out["compile"].append(_note("compile", a.name, backend))
            out["audit"].append(_note("audit", a.name, backend))
            out["admit"].append(_note("admit", a.name, backend))
        else:
            for spec in [*real, *muts]:
                out["compile"].append(cell_id("compile", spec.name, a.name, "toolchain"))
                if spec.applies_to(a):
                    out["audit"] += [cell_id(f"audit_{rule}", spec.name, a.name, "isa")
                                     for rule in isa.RULES]
            out["admit"] += [cell_id(f"admit_{pp.path}", f"qt{pp.qt}", a.name, "policy")
                             for pp in policy.paths]
        # only the cells a check applies to: the check session makes no other
        out["checks"] += [Cell(check, spec.name, a.name, backend).identity
                          for spec in real for check in CHECKS
                          if not not_applicable(check, spec, a, ctx.manifest)]
        if ctx.mutants is None:
            out["mutants"].append(_note("mutants", a.name, backend))
        else:
            # the manifest the check session resolves the mutants' baselines in
            _, both = load_for_cells(Path(ctx.mutants.path))
            for m in muts:
                out["mutants"] += [Cell(check, m.name, a.name, backend).identity
                                   for check in CHECKS
                                   if not not_applicable(check, m, a, both)]
                out["mutants"].append(cell_id(VERDICT_CHECK, m.name, a.name, backend))
        out["timing"] += _timing(ctx, a, backend, policy)
    return out


def _timing(ctx: RunContext, arch: Arch, backend: str, policy: Policy) -> list[str]:
    """The timing step's cells on ``arch``: its note where it does not time (the emulator,
    ``--no-timing``), else every cell of the bench it will run (``steps.timing_plan``).  A
    plan the bench cannot run expects the note, which a timing step on hardware never
    writes: the step's crash names why, and the run stays incomplete."""
    note = [_note("timing", arch.name, backend)]
    if not ctx.config.timing or ctx.backends[arch.name].name not in steps.HARDWARE:
        return note
    try:
        cells = bench.planned_cells(ctx.manifest, steps.timing_plan(ctx, arch, policy),
                                    backend)
    except NotImplementedError:
        return note
    return cells or note
