"""A run as ``hqval run`` records it, built around given rows, for the admission tests:
an envelope naming the run, its arches, kernel table, steps and expected cells (each
step's cells: the rows of that step, or the step's own note on an arch it has none), and
every row stamped with the run's id."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import hqval
from hqval.admission import EVIDENCE_STEPS
from hqval.result import Row, Status
from hqval.results.store import Run

RUN_ID = "0123456789abcdef0123456789abcdef"
STEP_OF_KIND = {"compile": "compile", "audit": "audit", "check": "checks",
                "mutant": "mutants", "timing": "timing"}


def bound_run(rows: Sequence[Row], kernels: Mapping[str, Mapping[str, Any]],
              arches: Sequence[str], path: str = "run", **envelope: Any) -> Run:
    # a run's id is its own (hqval run makes one per run directory): RUN_ID for the default
    # path, else one made from the path, so two runs of a test are two runs
    rid = RUN_ID if path == "run" else hashlib.sha256(path.encode()).hexdigest()[:32]
    # every check row states the run's seed (0), as hqval.checks.cell writes it
    stamped = [dataclasses.replace(r, run_id=rid,
                                   seed=0 if r.kind == "check" and r.seed is None else r.seed)
               for r in rows]
    # the object of every kernel that built (its compile row passes), named by the rows
    # that judged it, as the compile step records them (a row naming another keeps it)
    objects = {f"{r.kernel}|{r.arch}": r.object_sha256 or hashlib.sha256(
                   f"{r.kernel}|{r.arch}".encode()).hexdigest()
               for r in stamped if r.kind == "compile" and r.status is Status.PASS}
    stamped = [dataclasses.replace(r, object_sha256=objects[f"{r.kernel}|{r.arch}"])
               if r.kind in ("compile", "audit", "check", "mutant") and r.object_sha256 is None
               and f"{r.kernel}|{r.arch}" in objects else r for r in stamped]
    expected: dict[str, list[str]] = {s: [] for s in EVIDENCE_STEPS}
    for r in stamped:
        if r.kind in STEP_OF_KIND:
            expected[STEP_OF_KIND[r.kind]].append(r.identity)
    for step in EVIDENCE_STEPS:
        for a in arches:
            if not any(i.rsplit("|", 2)[-2] == a for i in expected[step]):
                note = Row("step", step, "-", a, "step", Status.SKIPPED, run_id=rid)
                stamped.append(note)
                expected[step].append(note.identity)
    env = {"schema_version": hqval.SCHEMA_VERSION, "run_id": rid, "arch": list(arches),
           # the backend hqval run records (its arches' one backend; a row of another is
           # damage)
           "backend": ",".join(sorted({r.backend for r in stamped
                                       if r.kind in ("check", "mutant", "timing")})) or "emu",
           "kernels": {k: dict(v) for k, v in kernels.items()},
           "steps": ["compile", "audit", "checks", "mutants", "timing", "admit", "report"],
           "expected_cells": expected, "expected": {k: len(v) for k, v in expected.items()},
           "objects": objects, "seed": 0, **envelope}
    return Run(Path(path), env, stamped, hqval.SCHEMA_VERSION)
