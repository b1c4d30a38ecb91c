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


def _session_ctx(tmp_path: Path) -> tuple[RunContext, list[int]]:
    # a cache of the test's own: no check row another run left answers a cell here
    config = RunConfig(arches=["gfx1100"], out=tmp_path / "run", cache_dir=str(tmp_path / "cache"))
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="emu"))
    batches: list[int] = []
    real = writer.append

    def counting(rows: Any) -> int:
        n = real(rows)
        batches.append(n)
        return n
    writer.append = counting  # type: ignore[method-assign]
    from hqval.backends.emu import EmuBackend

    ctx = RunContext(config, [resolve_arch("gfx1100")], load_manifest(), None,
                     {"gfx1100": EmuBackend("gfx1100")}, writer, Silent(), load_policy())
    return ctx, batches


def _cell(i: int) -> Any:
    from hqval.result import Row

    return Row("check", "bit_identity", f"k{i}", "gfx1100", "emu", Status.PASS)


def test_session_rows_are_appended_in_batches_and_none_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """200 finished cells (one reported twice) reach the store in a few appends (one fsync
    each) rather than 200, every one of them once."""
    ctx, batches = _session_ctx(tmp_path)

    class Result:
        def problem(self) -> str:
            return ""

    def run_cells(*a: Any, on_row: Any, **k: Any) -> Result:
        for i in range(200):
            on_row(_cell(i))
        on_row(_cell(7))
        return Result()
    monkeypatch.setattr(steps.session, "run_cells", run_cells)
    monkeypatch.setattr(steps, "SESSION_BATCH_SECONDS", 1e9)
    rows, why = steps._session(ctx, "checks", [Path(ctx.manifest.path)], [])
    assert why == "" and len(rows) == 200
    assert sum(batches) == 200 and len(batches) == 4  # 64 + 64 + 64 + 8
    assert len(store.load(ctx.writer.path).rows) == 200


def test_a_session_that_raises_still_appends_what_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, _ = _session_ctx(tmp_path)

    def run_cells(*a: Any, on_row: Any, **k: Any) -> None:
        for i in range(10):
            on_row(_cell(i))
        raise KeyboardInterrupt
    monkeypatch.setattr(steps.session, "run_cells", run_cells)
    with pytest.raises(KeyboardInterrupt):
        steps._session(ctx, "checks", [Path(ctx.manifest.path)], [])
    assert {r.kernel for r in store.load(ctx.writer.path).rows} == {f"k{i}" for i in range(10)}


def test_a_row_after_a_pause_is_appended_at_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell finishing SESSION_BATCH_SECONDS after the last append is written with it."""
    ctx, batches = _session_ctx(tmp_path)
    monkeypatch.setattr(steps, "SESSION_BATCH_SECONDS", 0.0)
    out = steps._SessionRows(ctx, frozenset())
    out.add(_cell(1))
    assert batches == [1] and "bit_identity[k1|gfx1100|emu]" in ctx.writer.done


def _mutants_ctx(tmp_path: Path) -> RunContext:
    """A gfx1100 emu run with the suite's mutants and every cell expected."""
    from hqval.backends.emu import EmuBackend
    from hqval.manifest import DEFAULT_MUTANTS, load_mutants

    # a cache of the test's own: no check row another run left answers a cell here
    config = RunConfig(arches=["gfx1100"], out=tmp_path / "run", cache_dir=str(tmp_path / "cache"))
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="emu"))
    ctx = RunContext(config, [resolve_arch("gfx1100")], load_manifest(),
                     load_mutants(DEFAULT_MUTANTS),
                     {"gfx1100": EmuBackend("gfx1100")}, writer, Silent(), load_policy())
    ctx.expected = expected_cells(ctx, load_policy())
    return ctx


def _fake_session(calls: list[tuple[list[str], int]], lose: set[str]) -> Any:
    """A session that writes a passing row for every cell not skipped of the manifests'
    expected cells (but, in a session of both manifests, those in ``lose``), noting
    (manifest names, rows) per call."""
    from hqval.result import Row

    class Result:
        def problem(self) -> str:
            return ""

    def run_cells(manifests: Any, arches: Any, backend: Any, *, on_row: Any, skip: Any,
                  **k: Any) -> Result:
        names = [Path(m).name for m in manifests]
        n = 0
        for ident in sorted(_CELLS[tuple(names)]):
            if ident in skip or (ident in lose and len(names) > 1):
                continue
            check, rest = ident.split("[", 1)
            kernel, arch, be = rest.rstrip("]").split("|")
            on_row(Row("check", check, kernel, arch, be, Status.PASS))
            n += 1
        calls.append((names, n))
        return Result()
    return run_cells


_CELLS: dict[tuple[str, ...], list[str]] = {}


def test_the_checks_session_runs_the_mutants_cells_and_the_mutants_step_what_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With mutants resolving in the run's manifest, the checks step runs one session over
    both manifests: every mutant cell's row is in the run after it, and the mutants step
    reports them as its own and starts no session; a mutant cell that session lost is run
    by the mutants step's own session, alone."""
    for lost in (set(), {"one"}):
        ctx = _mutants_ctx(tmp_path / f"lost{len(lost)}")
        mutant_cells = steps._mutant_cells(ctx)
        assert mutant_cells and all(not i.startswith("kill[") for i in mutant_cells)
        lose = {mutant_cells[0]} if lost else set()
        _CELLS.clear()
        _CELLS[("kernels.yaml", "mutants.yaml")] = [*ctx.expected["checks"], *mutant_cells]
        _CELLS[("mutants.yaml",)] = mutant_cells
        calls: list[tuple[list[str], int]] = []
        monkeypatch.setattr(steps.session, "run_cells", _fake_session(calls, lose))
        checks = run_step(ctx, "checks", steps.checks)
        assert checks.done and calls == [(["kernels.yaml", "mutants.yaml"],
                                         len(ctx.expected["checks"]) + len(mutant_cells)
                                         - len(lose))]
        assert {r.identity for r in checks.rows} == set(ctx.expected["checks"])
        assert {r.identity for r in ctx.mutant_rows} == set(mutant_cells) - lose
        assert set(mutant_cells) - lose <= ctx.writer.done
        _CELLS[("kernels.yaml", "mutants.yaml")] = []  # nothing more to give
        result = run_step(ctx, "mutants", steps.mutants)
        assert result.done, result.missing[:3]
        assert calls[1:] == ([(["mutants.yaml"], 1)] if lose else [])
        assert set(mutant_cells) <= {r.identity for r in result.rows}
        counts: dict[str, int] = {}
        for r in store.load(ctx.writer.path).rows:
            counts[r.identity] = counts.get(r.identity, 0) + 1
        assert all(counts[i] == 1 for i in mutant_cells)  # no cell ran twice


def test_mutants_resolving_elsewhere_keep_a_session_of_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutants whose real manifest is not the run's (a session naming the run's manifest
    would resolve them there instead) are run by the mutants step's own session."""
    import dataclasses

    ctx = _mutants_ctx(tmp_path)
    assert steps._together(ctx)
    assert ctx.mutants is not None
    ctx.mutants = dataclasses.replace(ctx.mutants, real=tmp_path / "elsewhere.yaml")
    assert not steps._together(ctx)
    _CELLS.clear()
    _CELLS[("kernels.yaml",)] = ctx.expected["checks"]
    _CELLS[("mutants.yaml",)] = steps._mutant_cells(ctx)
    calls: list[tuple[list[str], int]] = []
    monkeypatch.setattr(steps.session, "run_cells", _fake_session(calls, set()))
    run_step(ctx, "checks", steps.checks)
    run_step(ctx, "mutants", steps.mutants)
    assert [names for names, _ in calls] == [["kernels.yaml"], ["mutants.yaml"]]
