"""Steps that say no: a hardware timing step without its planned rows is not done; a
skipped gate's note names the flag (a mutant whose cells did not all run gets no verdict:
tests/faults/test_steps.py, the session that collects nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hqval.admission import load_policy
from hqval.manifest import load_manifest
from hqval.matrix import resolve_arch
from hqval.result import Status
from hqval.results import store
from hqval.run import steps
from hqval.run.chain import run_step
from hqval.run.context import RunConfig, RunContext
from hqval.run.expected import expected_cells
from hqval.run.progress import Silent
from hqval.timing.simulate import SimulatedDevice


def test_hardware_timing_without_its_planned_rows_is_not_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = SimulatedDevice()
    device.name = "cuda"  # stands where a cuda device would; its bench returns nothing
    config = RunConfig(arches=["sm_90"], out=tmp_path / "run")
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="cuda"))
    ctx = RunContext(config, [resolve_arch("sm_90")], load_manifest(), None,
                     {"sm_90": device}, writer, Silent(), load_policy())
    ctx.expected = expected_cells(ctx, load_policy())

    def no_rows(*a: Any, **k: Any) -> list[Any]:
        return []

    monkeypatch.setattr(steps.bench, "run_bench", no_rows)
    result = run_step(ctx, "timing", steps.timing)
    assert not result.done
    assert len(result.missing) == len(ctx.expected["timing"]) > 1
    assert "copy_bandwidth[device_copy|sm_90|cuda]" in result.missing


def test_note_rows_name_the_flag_that_skipped_a_gate() -> None:
    row = steps.note_row("mutants", "gfx1100", "emu", "skipped", skipped_by="--no-mutants")
    assert row.status is Status.SKIPPED and row.details == {"skipped_by": "--no-mutants"}
    assert row.identity == "mutants[-|gfx1100|emu]"


def test_hardware_timing_judges_its_cells_on_the_policy_gate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = SimulatedDevice()
    device.name = "cuda"
    config = RunConfig(arches=["sm_90"], out=tmp_path / "run")
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="cuda"))
    ctx = RunContext(config, [resolve_arch("sm_90")], load_manifest(), None,
                     {"sm_90": device}, writer, Silent(), load_policy())
    plans: list[Any] = []

    def capture(backend: Any, manifest: Any, plan: Any, **k: Any) -> list[Any]:
        plans.append(plan)
        return []

    monkeypatch.setattr(steps.bench, "run_bench", capture)
    steps.timing(ctx)
    (plan,) = plans
    spec = load_manifest().by_name("gemv_mq4g256v2_r8")
    gate = plan.gate(spec, "cold")
    assert gate.ratio_max == 1.05 and gate.source.endswith("decode.timing.cold")


def test_compile_and_audit_report_cells_as_they_are_done_not_at_the_end(
        tmp_path: Path) -> None:
    """The display hears of each compile cell as it is built and of each arch's audits as
    they finish, before the step writes its rows, so a long compile does not sit at 0/495
    and then jump."""
    from hqval.manifest import Manifest

    m = load_manifest()
    small = Manifest(path=m.path, kernels=[m.by_name("gemv_hfq4g256_r1"),
                                           m.by_name("gemv_mq4g256v2_r1")])
    config = RunConfig(arches=["gfx1100", "gfx1030"], out=tmp_path / "run")
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="emu"))
    heard: list[tuple[str, bool]] = []  # (cell, whether its row was already written)

    class Recorder(Silent):
        def cell(self, identity: str, status: str) -> None:
            heard.append((identity, identity in writer.done))

    ctx = RunContext(config, [resolve_arch("gfx1100"), resolve_arch("gfx1030")], small,
                     None, {}, writer, Recorder(), load_policy())
    steps.compile(ctx)
    compiled = [(i, w) for i, w in heard if i.startswith("compile[")]
    assert len({i for i, _ in compiled}) == 4
    assert not compiled[0][1], "the first compile cell was shown only once written"
    heard.clear()
    steps.audit(ctx)
    first: dict[str, bool] = {}
    for i, w in heard:
        first.setdefault(i, w)  # each cell's first report (the step reports it again)
    assert len(first) > 4 and not any(first.values()), \
        "the audits were shown only once all were written"
