"""The expected cells, known before anything runs: every kernel x check x arch, every
compile and audit rule where a kernel applies, every mutant's cells and verdict, every
policy cell, and a step's own note where it has nothing to do."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

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
                      backends, writer, Silent(), load_policy())  # type: ignore[arg-type]


def test_expected_cells_of_gfx1100_with_mutants(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, ["gfx1100"], mutants=True)
    real, muts = load_manifest().kernels, load_mutants().kernels
    exp = expected_cells(ctx, load_policy())
    gfx1100 = ctx.arches[0]
    assert len(exp["compile"]) == len(real) + len(muts)
    applies = [s for s in [*real, *muts] if s.applies_to(gfx1100)]
    assert len(exp["audit"]) == len(applies) * len(isa.RULES)
    # only the cells a check applies to: qt=44 has no padded layout, a GEMV no prefill
    assert len(muts) < len(exp["mutants"]) < len(muts) * (len(CHECKS) + 1)
    assert len(exp["checks"]) < len(real) * len(CHECKS)
    assert "padded_offset[gemv_mq4g256v2_r1|gfx1100|emu]" not in exp["checks"]
    assert "padded_offset[gemv_mq4c_r1|gfx1100|emu]" in exp["checks"]
    assert "prefill_parity[gemv_mq4c_r1|gfx1100|emu]" not in exp["checks"]
    assert "fallback[gemm_mq4g256v2_wmma_gfx11|gfx1100|emu]" not in exp["checks"]
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
    # the cuda backend times: no note is expected there, the bench's cells are
    assert exp["timing"][0] == "timing[-|gfx1010|emu]"
    assert "timing[-|sm_90|cuda]" not in exp["timing"]
    assert all("|sm_90|cuda]" in i for i in exp["timing"][1:]) and len(exp["timing"]) > 1


# ---- the timing step's cells on hardware: the bench plan, before anything runs ----------


def test_planned_timing_cells_are_the_rows_the_bench_writes() -> None:
    """On the simulated device (real bench code, a model clock): two R values, a timing
    mutant ladder; every row the bench writes was planned, and nothing else."""
    from hqval.timing import bench
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig
    from hqval.timing.simulate import SimulatedDevice

    plan = bench.BenchPlan(arch="sim", shapes=[Shape(128, 1024), Shape(64, 512)],
                           modes=["hot"], rows=[1, 8], copy=False, read_floor=False,
                           torch=False, timing_mutants=(16,),
                           config=TimingConfig(warmup=2, iterations=20, runs=2),
                           gates=bench.policy_gates(load_policy()))
    planned = bench.planned_cells(load_manifest(), plan, "sim")
    written = [r.identity for r in bench.run_bench(SimulatedDevice(seed=1), load_manifest(),
                                                   plan)]
    assert sorted(planned) == sorted(written) and len(set(planned)) == len(planned)
    assert "timing_mutant_hot[gemv_mq4g256v2_r8+slow16@64x512|sim|sim]" in planned


def test_planned_ceilings_once_per_shape_and_mode() -> None:
    from hqval.timing import bench
    from hqval.timing.gemv import Shape

    plan = bench.BenchPlan(arch="sm_90", shapes=[Shape(4096, 5120)], modes=["hot", "cold"],
                           rows=[1, 8])
    cuda = bench.planned_cells(load_manifest(), plan, "cuda")
    assert cuda[0] == "copy_bandwidth[device_copy|sm_90|cuda]"
    for mode in ("hot", "cold"):  # shared by both R
        assert cuda.count(f"stream_read_{mode}[stream_read@4096x5120|sm_90|cuda]") == 1
        assert cuda.count(f"torch_mv_bf16_{mode}[torch.mv@4096x5120|sm_90|cuda]") == 1
    assert "timing_aa_cold[gemv_hfq4g256_r8@4096x5120|sm_90|cuda]" in cuda
    hip = bench.planned_cells(load_manifest(), plan, "hip")
    assert not [i for i in hip if "torch" in i]  # torch.mv is a CUDA baseline
    assert len(cuda) - len(hip) == 2
    with pytest.raises(NotImplementedError, match="rows_per_block 3"):
        bench.planned_cells(load_manifest(), dataclasses.replace(plan, rows=[3]), "cuda")


def test_a_hardware_run_expects_its_timing_plan(tmp_path: Path) -> None:
    """The cuda arch's timing cells are the plan's (shapes.yaml, hot and cold, R of the
    arch), not 'at least one row'; --no-timing expects the step's note instead."""
    ctx = _ctx(tmp_path, ["sm_90"], mutants=False)
    exp = expected_cells(ctx, load_policy())["timing"]
    from hqval.matrix import load_shapes

    shapes = load_shapes()
    # per shape and mode: A/A, read floor, torch.mv, qt=44 and qt=45; plus the copy once
    assert len(exp) == 1 + len(shapes) * 2 * 5
    assert "timing_hot[gemv_mq4c_r1@27648x5120|sm_90|cuda]" in exp
    off = _ctx(tmp_path / "off", ["sm_90"], mutants=False)
    off.config.timing = False
    assert expected_cells(off, load_policy())["timing"] == ["timing[-|sm_90|cuda]"]
