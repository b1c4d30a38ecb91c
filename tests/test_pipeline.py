from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from hqval import pipeline
from hqval.cli import main
from hqval.result import Row, Status
from hqval.results import store


def _ctx(tmp_path: Path, resume: bool = False) -> pipeline.Context:
    config = pipeline.RunConfig(arches=["gfx1100"], out=tmp_path / "run", resume=resume)
    writer = store.RunWriter.create(config.out, store.make_envelope(backend="emu"),
                                    resume=resume)
    finished = {r.identity for r in store.load(writer.path).rows
                if r.kind == "step" and r.status is Status.PASS}
    return pipeline.Context(config, writer, pipeline.Progress(io.StringIO()), {}, None,
                            finished=finished)


def test_need_names_the_missing_piece() -> None:
    with pytest.raises(pipeline.MissingPiece, match=r"hqval\.nothing_here is not part of "
                                                    r"this build \(issue 9\)"):
        pipeline.need("hqval.nothing_here", issue="9")
    with pytest.raises(pipeline.MissingPiece, match=r"hqval\.result\.no_such_fn"):
        pipeline.need("hqval.result", "no_such_fn")
    assert pipeline.need("hqval.result", "Row") is Row


def test_missing_step_is_an_infrastructure_error_and_is_retried_on_resume(
        tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)

    def missing(ctx: pipeline.Context, arch: str) -> list[Row]:
        pipeline.need("hqval.not_built_yet", issue="3")
        return []

    rows = pipeline.run_step(ctx, "audit", missing, "gfx1100")
    assert len(rows) == 1 and rows[0].status is Status.ERROR
    assert rows[0].details["infrastructure"] is True
    assert "hqval.not_built_yet is not part of this build" in rows[0].message
    assert rows[0].identity == "audit[-|gfx1100|step]"  # the step's own cell, no mark

    ctx2 = _ctx(tmp_path, resume=True)

    def now_built(ctx: pipeline.Context, arch: str) -> list[Row]:
        return [Row("step", "audit", "-", arch, "emu", Status.PASS)]

    # the retry's row supersedes the error row of the same cell
    pipeline.run_step(ctx2, "audit", now_built, "gfx1100")
    loaded = store.load(ctx2.writer.path).rows
    assert not any(r.status is Status.ERROR for r in loaded)


def test_crashing_step_is_an_error_row_not_a_pass(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)

    def crash(ctx: pipeline.Context, arch: str) -> list[Row]:
        raise RuntimeError("disk on fire")

    (row,) = pipeline.run_step(ctx, "checks", crash, "gfx1100")
    assert row.status is Status.ERROR and "disk on fire" in row.message


def test_resume_skips_marked_steps(tmp_path: Path) -> None:
    calls: list[str] = []

    def step(ctx: pipeline.Context, arch: str) -> list[Row]:
        calls.append(arch)
        return [Row("check", "c", "k", arch, "emu", Status.PASS)]

    pipeline.run_step(_ctx(tmp_path), "checks", step, "gfx1100")
    ctx = _ctx(tmp_path, resume=True)
    assert pipeline.run_step(ctx, "checks", step, "gfx1100") == []
    assert calls == ["gfx1100"]
    assert "done in an earlier run" in ctx.progress.stream.getvalue()  # type: ignore[attr-defined]


def test_progress_plain_lines_off_a_terminal() -> None:
    buf = io.StringIO()
    p = pipeline.Progress(buf)
    p.bar("compile", 3, 9, "gfx1100")
    assert buf.getvalue() == f"{'compile':<10} [{'#' * 8}{'.' * 16}] 3/9 gfx1100\n"


def test_run_rejects_unknown_arch_before_writing(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--arch", "gfx9999", "--out", str(tmp_path / "r")]) == 2
    assert "gfx9999" in capsys.readouterr().err
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
    assert code == adm["exit_code"]
    # any infrastructure error names its missing piece, and only then is the exit 2
    assert (code == 2) == bool(adm["infrastructure"])
    for line in adm["infrastructure"]:
        assert "not part of this build" in line or "no mutants" in line, line
    cells = {(c["qt"], c["path"]): c["status"] for c in adm["cells"]}
    assert cells[(44, "prefill")] == "fallback"
    assert cells[(45, "prefill")] == "fallback"
    assert cells[(44, "decode")] in ("emulated", "rejected")
    kinds = {r.kind for r in run.rows}
    assert {"compile", "check", "step", "admit"} <= kinds
    assert any(r.kind == "check" and r.backend == "emu" and r.status is Status.PASS
               for r in run.rows)
    env = run.envelope
    assert env["backends"]["gfx1010"]["backend"] == "emu"
    assert env["compiler_version"] and "clang" in env["compiler_version"]
    assert env["kernels"]["gemv_mq4g256v2_r1"]["qt"] == 44
    html = (out / "report" / "report.html").read_text()
    assert '<table id="admission-table">' in html
    assert "# " in (out / "report" / "checkpoint.md").read_text()
    summary = capsys.readouterr().out
    assert "| gfx1010 | qt=45 mq4cg256 | prefill | **fallback** |" in summary
    # --resume: nothing re-runs, no row is duplicated
    n = len(run.rows)
    assert main(["run", "--arch", "gfx1010", "--backend", "emu", "--out", str(out),
                 "--resume"]) == code
    assert len(store.load(out).rows) == n


@pytest.mark.slow
def test_required_backend_missing_fails_closed(tmp_path: Path) -> None:
    """--backend hip on a machine without ROCm: the steps that need it are infrastructure
    errors naming what is missing, no cell is admitted beyond compiled, exit 2."""
    backends = pytest.importorskip("hqval.backends")
    try:
        backends.get("hip", "gfx1010")
    except backends.BackendUnavailable:
        pass
    else:
        pytest.skip("a HIP device is present here")
    out = tmp_path / "run"
    assert main(["run", "--arch", "gfx1010", "--backend", "hip", "--out", str(out),
                 "--no-mutants"]) == 2
    adm = json.loads((out / "admission.json").read_text())
    assert any("backend 'hip' for gfx1010" in line for line in adm["infrastructure"])
    assert {c["status"] for c in adm["cells"]} <= {"compiled", "untested"}


@pytest.mark.slow
def test_killed_run_resumes_per_cell(tmp_path: Path) -> None:
    """Kill `hqval run` in the middle of its check cells; the cells that finished are in
    the run, and --resume runs only the rest (no cell runs twice)."""
    import collections
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "hqval", "run", "--arch", "gfx1010", "--backend", "emu",
           "--out", str(out), "--workers", "0", "--no-mutants"]
    rows_file = out / "rows.jsonl"

    def check_lines() -> list[dict[str, object]]:
        if not rows_file.exists():
            return []
        lines = rows_file.read_text().splitlines()
        return [d for d in map(json.loads, lines[:-1]) if d["kind"] == "check"]

    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        deadline = time.monotonic() + 300
        while len(check_lines()) < 5 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, "the run finished before it could be interrupted"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    before = {d["identity"] for d in check_lines()}
    assert len(before) >= 5
    assert "checks[-|gfx1010|step]" not in {r.identity for r in store.load(out).rows}

    assert main([*cmd[3:], "--resume"]) in (0, 1, 2)
    raw = [json.loads(x) for x in rows_file.read_text().splitlines() if x.strip()]
    counts = collections.Counter(d["identity"] for d in raw if d["kind"] == "check")
    assert counts and max(counts.values()) == 1, counts.most_common(3)  # none ran twice
    assert before < set(counts)
    assert "checks[-|gfx1010|step]" in {r.identity for r in store.load(out).rows}
