"""The expected cells, known before anything runs: every kernel x check x arch, every
compile and audit rule where a kernel applies, every mutant's cells and verdict, every
policy cell, and a step's own note where it has nothing to do."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hqval import isa
from hqval.admission import load_policy
from hqval.backends import get
from hqval.checks.cell import CHECKS
from hqval.manifest import load_manifest, load_mutants
from hqval.matrix import resolve_arches
from hqval.results import store
from hqval.run.context import RunConfig, RunContext
from hqval.run.expected import expected_cells
from hqval.run.progress import Silent


def _ctx(tmp_path: Path, arches: list[str], mutants: bool) -> RunContext:
    config = RunConfig(arches=arches, out=tmp_path / "run", mutants=mutants)
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="emu"))
    resolved = resolve_arches(arches)
    backends = {a.name: get("emu", a.name) if a.is_amd else SimpleNamespace(name="cuda")
                for a in resolved}
    return RunContext(config, resolved, load_manifest(), load_mutants() if mutants else None,
                      backends, writer, Silent())  # type: ignore[arg-type]


def test_expected_cells_of_gfx1100_with_mutants(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, ["gfx1100"], mutants=True)
    real, muts = load_manifest().kernels, load_mutants().kernels
    exp = expected_cells(ctx, load_policy())
    gfx1100 = ctx.arches[0]
    assert len(exp["compile"]) == len(real) + len(muts)
    applies = [s for s in [*real, *muts] if s.applies_to(gfx1100)]
    assert len(exp["audit"]) == len(applies) * len(isa.RULES)
    assert len(exp["checks"]) == len(real) * len(CHECKS)
    assert len(exp["mutants"]) == len(muts) * (len(CHECKS) + 1)
    assert exp["timing"] == ["timing[-|gfx1100|emu]"]  # the emulator has no clock
    assert len(exp["admit"]) == len(load_policy().paths)
    assert "reference_parity[gemv_mq4g256v2_r1|gfx1100|emu]" in exp["checks"]
    assert "compile[gemm_mq4c_wmma_gfx12|gfx1100|toolchain]" in exp["compile"]
    # a kernel that does not apply gets no audit cells (its compile row is unsupported)
    assert not [i for i in exp["audit"] if "gemm_mq4c_wmma_gfx12|" in i]


def test_no_mutants_and_nvidia_arches_expect_step_notes(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, ["gfx1010", "sm_90"], mutants=False)
    exp = expected_cells(ctx, load_policy())
    assert exp["mutants"] == ["mutants[-|gfx1010|emu]", "mutants[-|sm_90|cuda]"]
    assert "compile[-|sm_90|cuda]" in exp["compile"] and "audit[-|sm_90|cuda]" in exp["audit"]
    assert "admit[-|sm_90|cuda]" in exp["admit"]
    assert not [i for i in exp["compile"] if "mut_" in i]
    # the cuda backend times: no note is expected there, the bench rows are
    assert exp["timing"] == ["timing[-|gfx1010|emu]"]
