"""Mutant manifest entries grouped by the check expected to kill them, for the check tests."""

from __future__ import annotations

from hqval.manifest import KernelSpec, load_mutants
from hqval.matrix import load_arches


def mutants_killed_by(check: str) -> list[tuple[str, str]]:
    """(mutant name, an arch it applies to) for every mutant whose expected killer is
    ``check``; the arch is the first of gfx1100 / gfx1201 / gfx1030 it is built for."""
    arches = load_arches()
    out: list[tuple[str, str]] = []
    for m in load_mutants(None).kernels:
        if m.expected_killer != check:
            continue
        arch = next(a for a in ("gfx1100", "gfx1201", "gfx1030") if m.applies_to(arches[a]))
        out.append((m.name, arch))
    return out


def spec(name: str) -> KernelSpec:
    return load_mutants(None).by_name(name)
