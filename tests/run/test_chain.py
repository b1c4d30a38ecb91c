"""The step chain: a step is done only when every expected cell has a row; a crash or a
short step is an infrastructure error (fails closed) that --resume redoes; bad input and
a backend that cannot run stop before anything is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hqval.admission import load_policy
from hqval.backends import get
from hqval.cli import main
from hqval.manifest import load_manifest
from hqval.matrix import resolve_arch
from hqval.result import Row, Status
from hqval.results import store
from hqval.run import steps
from hqval.run.chain import run_step
from hqval.run.context import RunConfig, RunContext, StepResult
from hqval.run.progress import Silent


def _ctx(tmp_path: Path, expected: list[str]) -> RunContext:
    config = RunConfig(arches=["gfx1100"], out=tmp_path / "run")
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="emu"))
    ctx = RunContext(config, [resolve_arch("gfx1100")], load_manifest(), None,
                     {"gfx1100": get("emu", "gfx1100")}, writer, Silent(), load_policy())
    ctx.expected = {"checks": expected}
    return ctx


def _row(kernel: str) -> Row:
    return Row("check", "c", kernel, "gfx1100", "emu", Status.PASS)


def _mark(ctx: RunContext) -> Row:
    rows = {r.identity: r for r in store.load(ctx.writer.path).rows}
    return rows["checks[-|gfx1100|step]"]


def test_step_with_every_expected_row_is_done(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, [_row("k0").identity, _row("k1").identity])

    def step(ctx: RunContext) -> StepResult:
        rows = [_row("k0"), _row("k1")]
        ctx.writer.append(rows)
        return StepResult("checks", tuple(rows))

    result = run_step(ctx, "checks", step)
    assert result.done and _mark(ctx).status is Status.PASS


def test_step_missing_a_cell_is_an_infrastructure_error(tmp_path: Path) -> None:
    """One cell without a row (a crashed worker): the step is not done, its mark says how
    many cells are missing and fails admission closed."""
    ctx = _ctx(tmp_path, [_row("k0").identity, _row("k1").identity])

    def step(ctx: RunContext) -> StepResult:
        ctx.writer.append([_row("k0")])
        return StepResult("checks", (_row("k0"),))

    result = run_step(ctx, "checks", step)
    assert not result.done and result.missing == (_row("k1").identity,)
    mark = _mark(ctx)
    assert mark.status is Status.ERROR and mark.details["infrastructure"] is True
    assert "1 of 2 expected cells have no row" in mark.message
    assert "c[k1|gfx1100|emu]" in mark.message


def test_crashing_step_is_an_error_not_a_pass(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, [])

    def crash(ctx: RunContext) -> StepResult:
        raise RuntimeError("disk on fire")

    result = run_step(ctx, "checks", crash)
    assert not result.done and "disk on fire" in result.error
    assert _mark(ctx).status is Status.ERROR and "disk on fire" in _mark(ctx).message


def test_no_mutants_is_a_skipped_gate_in_the_mark(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, [])
    ctx.expected = {"mutants": ["mutants[-|gfx1100|emu]"]}
    result = run_step(ctx, "mutants", steps.mutants)
    assert result.done and result.skipped == "--no-mutants"
    rows = {r.identity: r for r in store.load(ctx.writer.path).rows}
    assert "gate skipped (--no-mutants)" in rows["mutants[-|gfx1100|step]"].message
    assert "--no-mutants" in rows["mutants[-|gfx1100|emu]"].message


@pytest.mark.parametrize("arch, why", [("gfx9999", "unknown arch gfx9999"),
                                       (",", "names no arch"), ("", "names no arch")])
def test_bad_arch_is_usage_error_before_writing(tmp_path: Path, arch: str, why: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--arch", arch, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("backend", ["hip", "cuda"])
def test_unavailable_backend_is_exit_2_at_once_writing_nothing(
        tmp_path: Path, backend: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before anything runs: nothing compiled, no run directory (asserted by what
    happened, not by a wall time a loaded host can exceed)."""
    from hqval import toolchain

    try:
        get(backend, "gfx1100" if backend == "hip" else "sm_90")
    except Exception:
        pass
    else:
        pytest.skip(f"a {backend} device is present here")
    arch = "gfx1100" if backend == "hip" else "sm_90"

    def compiled(*args: object, **kwargs: object) -> None:
        raise AssertionError("a kernel was compiled before the backend was refused")

    monkeypatch.setattr(toolchain, "compile_matrix", compiled)
    monkeypatch.setattr(toolchain, "compile_kernel", compiled)
    code = main(["run", "--arch", arch, "--backend", backend, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("backend unavailable") == 1 and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_end_to_end_run_on_the_emulator(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`hqval run --arch gfx1010` with no GPU: real compiles, real emulated launches, a
    full report.  gfx1010 has no WMMA, so prefill must come out as fallback."""
    out = tmp_path / "run"
    code = main(["run", "--arch", "gfx1010", "--backend", "emu", "--out", str(out),
                 "--workers", "0"])
    run = store.load(out)
    adm = json.loads((out / "admission.json").read_text())
    assert code == adm["exit_code"] == 0, adm["infrastructure"]
    cells = {(c["qt"], c["path"]): c["status"] for c in adm["cells"]}
    assert cells[(44, "prefill")] == "fallback"
    assert cells[(45, "prefill")] == "fallback"
    assert cells[(44, "decode")] == "emulated"
    kinds = {r.kind for r in run.rows}
    assert {"compile", "audit", "check", "mutant", "step", "admit"} <= kinds
    env = run.envelope
    assert env["backends"]["gfx1010"]["backend"] == "emu"
    assert env["compiler_version"] and "clang" in env["compiler_version"]
    assert env["kernels"]["gemv_mq4g256v2_r1"]["qt"] == 44
    assert sum(env["expected"].values()) == len(
        [i for cells in env["expected_cells"].values() for i in cells])
    html = (out / "report" / "report.html").read_text()
    assert '<table id="admission-table">' in html
    cap = capsys.readouterr()
    summary = cap.out
    # the closing table: a row per arch and format, a column per path, a word each
    assert re.search(r"^arch\s+qt\s+decode\s+prefill\s+fused_decode", summary, re.M), summary
    assert re.search(r"^gfx1010\s+qt=44\s+emulated\s+fallback\s+emulated\s+fallback\b",
                     summary, re.M), summary
    assert "**" not in summary and "| --- |" not in summary
    # the run says which backend it opened and why
    assert "gfx1010: backend emu (emu: requested by name)" in cap.out + cap.err
    # --resume: nothing re-runs, no check row is appended again
    n = len((out / "rows.jsonl").read_text().splitlines())
    assert main(["run", "--arch", "gfx1010", "--backend", "emu", "--out", str(out),
                 "--resume", "--workers", "0"]) == code
    again = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()[n:]]
    assert {d["kind"] for d in again} <= {"step", "admit"}, {d["identity"] for d in again}


def test_external_tree_mutants_are_its_own_else_the_suites_as_a_self_test(
        tmp_path: Path) -> None:
    """A tree naming `mutants:` runs its own broken copies; a tree without them runs the
    suite's, recorded in the envelope as a suite self-test (admission gates no cell on
    them)."""
    import shutil

    from hqval.manifest import DEFAULT_MUTANTS
    from hqval.run.chain import open_run

    tree = Path(__file__).resolve().parents[1] / "data" / "engine_tree"
    own = open_run(RunConfig(arches=["gfx1100"], out=tmp_path / "own", backend="emu",
                             manifest=tree / "kernels.yaml"), Silent())
    assert own.mutants is not None and own.mutants.path == (tree / "mutants.yaml").resolve()
    table = own.writer.envelope["kernels"]
    assert "ew_mut_gemv_lane_half" in table
    assert not any(v.get("self_test") for v in table.values())
    own.writer.close()
    shutil.copytree(tree, tmp_path / "bare")
    text = (tmp_path / "bare" / "kernels.yaml").read_text()
    (tmp_path / "bare" / "kernels.yaml").write_text(
        "\n".join(ln for ln in text.splitlines() if not ln.startswith("mutants:")) + "\n")
    bare = open_run(RunConfig(arches=["gfx1100"], out=tmp_path / "bare_run", backend="emu",
                              manifest=tmp_path / "bare" / "kernels.yaml"), Silent())
    assert bare.mutants is not None and bare.mutants.path == DEFAULT_MUTANTS.resolve()
    table = bare.writer.envelope["kernels"]
    suite = [n for n, v in table.items() if v.get("mutant_of")]
    assert suite and all(table[n].get("self_test") for n in suite)
    assert not any(v.get("self_test") for n, v in table.items() if n.startswith("ew_"))
    bare.writer.close()
