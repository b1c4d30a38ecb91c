"""Faults of class 'a run bound to its evidence', third round: step rows are vouched for
like any other row (a step's note is one of its expected cells; a skipped gate the run
did not ask for is damage), and a passing row the run never expected is no evidence.
Each case appends to, or edits, a copy of the session's complete run and admits it in
this process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hqval.admission import judge, load_policy
from hqval.matrix import load_arches
from hqval.result import Row, Status
from tests.admission.runs import bound_run

from .conftest import ARCH, Result, append_rows, rows

Admit = Callable[..., Result]


def _note(step: str, backend: str = "emu", **details: Any) -> dict[str, Any]:
    return {"kind": "step", "check": step, "kernel": "-", "arch": ARCH, "backend": backend,
            "status": "skipped", "message": f"{step} step disabled", "details": details}


@pytest.mark.parametrize("row,named", [
    (_note("mutants", skipped_by="--no-mutants"),
     "a note of step mutants the run did not expect"),
    (_note("timing", "step", skipped_by="--no-timing"),
     "a note of step timing the run did not expect"),
    ({**_note("deploy", "step"), "status": "pass"}, "names step 'deploy'"),
    ({**_note("checks", "step"), "status": "skipped"}, "a note of step checks"),
], ids=["mutants-skipped-by-no-mutants", "timing-skipped-as-a-mark", "unknown-step-mark",
        "skipped-mark"])
def test_a_step_row_the_run_did_not_write_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, row: dict[str, Any], named: str) -> None:
    """A run that ran its mutants given a note saying the mutants gate was skipped
    (``--no-mutants``), a skipped timing mark, a mark of a step the run has not, a mark
    that is neither done nor an error (once: a note in the reasons, exit 0)."""
    run = copy_of()
    append_rows(run, row)
    res = hqval("admit", str(run))
    assert res.code == 2, res.out + res.err
    assert named in res.err


def test_a_passing_row_the_run_never_expected_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """A passing timing cell on the emulator (the run expected only the timing step's
    note there) and a check the kernel does not get, both stamped with the run's id (once:
    taken as evidence)."""
    run = copy_of()
    base = next(r for r in rows(run) if r["kind"] == "check" and r["status"] == "pass")
    row = {k: v for k, v in base.items() if k not in ("identity", "run_id")}
    append_rows(run, {**row, "kind": "timing", "check": "timing_hot",
                      "kernel": f"{row['kernel']}@4096x4096", "object_sha256": None,
                      "details": {"mode": "hot", "shape": "4096x4096",
                                  "samples_a": [[1.0, 1.0]], "samples_b": [[1.0, 1.0]]}})
    res = hqval("admit", str(run))
    assert res.code == 2 and "a cell the run never expected" in res.err


def test_a_failing_row_the_run_never_expected_still_fails() -> None:
    """The control: a failure the plan did not hold is still a failure (exit 1, a
    kernel-level finding), never hidden as damage."""
    table = {"k": {"qt": 44, "kind": "gemv", "requires": "any"}}
    good = [Row("compile", "compile", "k", "gfx1100", "toolchain", Status.PASS)]
    run = bound_run(good, table, ["gfx1100"])
    bad = Row("check", "padded_offset", "k", "gfx1100", "emu", Status.FAIL, measured=1.0,
              tolerance=1e-4, run_id=run.rows[0].run_id)
    run.rows.append(bad)
    j = judge([run], load_policy(), arches=load_arches())
    assert not any("never expected" in d for d in j.admission.damage)
    assert j.exit_code != 0


def test_a_gate_skipped_by_the_flag_of_another_step_is_damage() -> None:
    """The mutants step's expected note (a ``--no-mutants`` run) saying ``--no-timing``
    skipped it: no flag of that step (once: the mutants gate read as skipped)."""
    table = {"k": {"qt": 44, "kind": "gemv", "requires": "any"}}
    good = [Row("compile", "compile", "k", "gfx1100", "toolchain", Status.PASS)]
    run = bound_run(good, table, ["gfx1100"])
    note = next(r for r in run.rows if r.kind == "step" and r.check == "mutants")
    run.rows[run.rows.index(note)] = Row(
        note.kind, note.check, note.kernel, note.arch, note.backend, note.status,
        run_id=note.run_id, details={"skipped_by": "--no-timing"})
    j = judge([run], load_policy(), arches=load_arches())
    assert any("skipped by '--no-timing', which skips no gate" in d for d in j.admission.damage)
    assert j.exit_code == 2


def test_an_envelope_step_list_without_a_step_its_marks_name_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """``steps`` edited to drop ``admit``: the run's own admit mark names a step it no
    longer has (once: the list was read only for being present)."""
    run = copy_of()
    env = json.loads((run / "envelope.json").read_text())
    env["steps"] = [s for s in env["steps"] if s != "admit"]
    (run / "envelope.json").write_text(json.dumps(env))
    res = hqval("admit", str(run))
    assert res.code == 2 and "names step 'admit'" in res.err


def _rewrite(run: Path, pick: Callable[[dict[str, Any]], bool], **change: Any) -> None:
    rs = rows(run)
    hit = [r for r in rs if pick(r)]
    assert hit
    for r in hit:
        r.update(change)
        r.pop("identity", None)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))


def test_an_audit_waiver_the_manifest_did_not_make_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """The qt=44 kernel's audit rows rewritten to 'skipped: waived by the manifest' (as
    a failing rule the manifest waives is written), where its manifest waives nothing
    (once: exit 0, the waiver believed)."""
    run = copy_of()
    _rewrite(run, lambda r: r["kind"] == "audit" and r["kernel"] == "gemv_mq4g256v2_r1",
             status="skipped", measured=None,
             details={"waived": "known spill", "waived_status": "fail"})
    res = hqval("admit", str(run))
    assert res.code == 2
    assert "waives no such rule for gemv_mq4g256v2_r1 (its audit_waive: none)" in res.err


def test_a_compile_row_saying_skipped_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """The qt=44 kernel's compile row rewritten from pass to skipped (once: its path stayed
    emulated, exit 0: a compile row of any status counted as present)."""
    run = copy_of()
    _rewrite(run, lambda r: r["kind"] == "compile" and r["kernel"] == "gemv_mq4g256v2_r1",
             status="skipped")
    res = hqval("admit", str(run))
    assert res.code == 2 and "never skipped" in res.err


def test_resume_after_adding_a_shadowing_header_is_refused(tmp_path: Path) -> None:
    """A header added beside the source, shadowing the suite's ``hq4_gemv.h`` the run
    compiled with: no file the run recorded changed, yet the build would (once: --resume
    went on, the checks judged a new object against the old audit).  The resume names
    the new file."""
    import shutil

    from hqval import provenance
    from hqval.run.chain import added_inputs
    from hqval.toolchain import compile_kernel

    from .test_cache_more import KERNELS, _spec

    root = tmp_path / "tree"
    spec = _spec(root, "1.0f")
    arch = load_arches()["gfx1010"]
    res = compile_kernel(spec, arch.name, tmp_path / "cache")
    assert res.ok and res.sha256
    env: dict[str, Any] = {"provenance": {"files": provenance.files(res.dependencies, root)},
                           "objects": {f"{spec.name}|{arch.name}": res.sha256}}
    assert added_inputs(env, [spec], [arch], root, str(tmp_path / "cache")) == ""  # control
    shutil.copy(KERNELS / "hq4_gemv.h", root / "hq4_gemv.h")
    why = added_inputs(env, [spec], [arch], root, str(tmp_path / "cache"))
    assert why.startswith("hq4_gemv.h is read by the compiler for gemv_tweak_r1 on gfx1010")
