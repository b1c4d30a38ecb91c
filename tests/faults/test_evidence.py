"""Faults of class 'expected evidence': no verdict without complete
evidence.  Each case damages a copy of a complete run and asks ``hqval admit``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .conftest import ARCH, CLEAN, Result, append_rows, rewrite_rows, rows

Admit = Callable[..., Result]


def _admit(hqval: Admit, run: Path) -> tuple[Result, dict[tuple[int, str], str]]:
    out = run.parent / f"{run.name}-admission.json"
    res = hqval("admit", str(run), "--json", str(out))
    data = json.loads(out.read_text())
    return res, {(c["qt"], c["path"]): c["status"] for c in data["cells"]}


def test_clean_run_admits_with_exit_0(copy_of: Callable[[], Path], hqval: Admit) -> None:
    """The control: the untouched run is complete, exit 0, the clean statuses."""
    res, cells = _admit(hqval, copy_of())
    assert res.code == 0 and cells == CLEAN


def test_emptied_rows_is_exit_2(copy_of: Callable[[], Path], hqval: Admit) -> None:
    run = copy_of()
    (run / "rows.jsonl").write_text("")
    res, cells = _admit(hqval, run)
    assert res.code == 2
    # without rows no cell is admitted; only the paths the policy does not claim for the
    # arch (no evidence needed to say so) keep the clean run's "unsupported"
    policy_only = {k for k, v in CLEAN.items() if v == "unsupported"}
    assert {k for k, v in cells.items() if v == "unsupported"} == policy_only
    rest = {v for k, v in cells.items() if k not in policy_only}
    assert rest <= {"incomplete", "untested"} and "incomplete" in rest
    assert "expected cell(s) have no row" in res.err


def test_all_but_one_reference_parity_row_removed(copy_of: Callable[[], Path],
                                                  hqval: Admit) -> None:
    """One kernel's pass no longer covers the path's other kernels: only the qt=6
    baseline's reference_parity row is left (named, not the first in the file: the rows'
    order is the check session's); qt=44 decode, which requires its own, is incomplete
    (qt=45 decode requires bit_identity and padded_offset, not reference_parity)."""
    run = copy_of()
    kept = f"reference_parity[gemv_hfq4g256_r1|{ARCH}|emu]"
    seen: list[str] = []

    def keep(r: dict[str, object]) -> bool:
        if r["check"] != "reference_parity" or r["kind"] != "check":
            return True
        seen.append(str(r["identity"]))
        return r["identity"] == kept

    assert rewrite_rows(run, keep) >= 2 and kept in seen
    res, cells = _admit(hqval, run)
    assert res.code == 2
    assert cells[(44, "decode")] == "incomplete" and cells[(45, "decode")] == "emulated"


def test_one_required_check_row_removed(copy_of: Callable[[], Path], hqval: Admit) -> None:
    run = copy_of()
    ident = f"padded_offset[gemv_mq4c_r1|{ARCH}|emu]"
    assert rewrite_rows(run, lambda r: r["identity"] != ident) == 1
    res, cells = _admit(hqval, run)
    assert res.code == 2 and cells[(45, "decode")] == "incomplete"
    assert cells[(44, "decode")] == "emulated"


def test_compile_row_removed(copy_of: Callable[[], Path], hqval: Admit) -> None:
    run = copy_of()
    ident = f"compile[gemv_mq4g256v2_r1|{ARCH}|toolchain]"
    assert rewrite_rows(run, lambda r: r["identity"] != ident) == 1
    res, cells = _admit(hqval, run)
    assert res.code == 2 and cells[(44, "decode")] == "incomplete"


def test_audit_rows_removed(copy_of: Callable[[], Path], hqval: Admit) -> None:
    run = copy_of()
    assert rewrite_rows(run, lambda r: not (r["kind"] == "audit"
                                            and r["kernel"] == "gemv_mq4c_r1")) >= 1
    res, cells = _admit(hqval, run)
    assert res.code == 2 and cells[(45, "decode")] == "incomplete"


def test_mutant_verdict_removed(copy_of: Callable[[], Path], hqval: Admit) -> None:
    run = copy_of()
    verdicts = [r for r in rows(run) if r["kind"] == "mutant" and r["status"] == "pass"]
    gone = str(verdicts[0]["identity"])
    assert rewrite_rows(run, lambda r: r["identity"] != gone) == 1
    res, _ = _admit(hqval, run)
    assert res.code == 2 and gone in res.err


def test_fallback_row_removed(copy_of: Callable[[], Path], hqval: Admit) -> None:
    run = copy_of()
    ident = f"fallback[gemm_mq4c_wmma_gfx12|{ARCH}|emu]"
    assert rewrite_rows(run, lambda r: r["identity"] != ident) == 1
    res, cells = _admit(hqval, run)
    assert res.code == 2 and cells[(45, "prefill")] == "incomplete"


def test_timing_note_removed_is_incomplete(copy_of: Callable[[], Path],
                                           hqval: Admit) -> None:
    """A step's own expected cell (the emulator's timing note) is evidence too."""
    run = copy_of()
    assert rewrite_rows(run, lambda r: r["identity"] != f"timing[-|{ARCH}|emu]") == 1
    res, _ = _admit(hqval, run)
    assert res.code == 2 and f"timing[-|{ARCH}|emu]" in res.err


def test_failing_check_row_rejects_with_exit_1(copy_of: Callable[[], Path],
                                               hqval: Admit) -> None:
    run = copy_of()
    ident = f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"
    data = rows(run)
    for r in data:
        if r["identity"] == ident:
            r["status"], r["message"] = "fail", "wrong half"
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    res, cells = _admit(hqval, run)
    assert res.code == 1 and cells[(44, "decode")] == "rejected"


def _with_duplicate(run: Path, ident: str, status: str, before: bool) -> None:
    """A second row of cell ``ident`` with ``status``, before or after its own row."""
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    i = next(k for k, x in enumerate(lines) if json.loads(x)["identity"] == ident)
    twin = json.loads(lines[i])
    twin["status"] = status
    lines.insert(i if before else i + 1, json.dumps(twin) + "\n")
    (run / "rows.jsonl").write_text("".join(lines))


def test_a_failing_row_superseded_by_a_pass_is_exit_2(copy_of: Callable[[], Path],
                                                      hqval: Admit) -> None:
    """Two verdicts of one cell, fail then pass: a run writes each evidence cell once, so
    the later pass cannot hide the failure (once: the pass superseded it, exit 0)."""
    for kind, ident in (("check", f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"),
                        ("compile", f"compile[gemv_mq4c_r1|{ARCH}|toolchain]")):
        run = copy_of()
        _with_duplicate(run, ident, "fail", before=True)
        res = hqval("admit", str(run))
        assert res.code == 2, kind
        assert f"says {ident} is pass after an earlier row of that cell failed" in res.err


def test_a_duplicate_row_of_the_same_verdict_changes_nothing(copy_of: Callable[[], Path],
                                                            hqval: Admit) -> None:
    """The control: a cell's row repeated, and a pass followed by a fail (the failure is
    the later verdict: rejected, exit 1)."""
    ident = f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"
    run = copy_of()
    _with_duplicate(run, ident, "pass", before=False)
    res, cells = _admit(hqval, run)
    assert res.code == 0 and cells == CLEAN
    run = copy_of()
    _with_duplicate(run, ident, "fail", before=False)
    res, cells = _admit(hqval, run)
    assert res.code == 1 and cells[(44, "decode")] == "rejected"


def test_failing_row_of_a_qt_no_policy_names(copy_of: Callable[[], Path],
                                             hqval: Admit) -> None:
    """qt=999 is in no policy cell: its failing row is a kernel-level finding, exit 1.  (The
    table is edited here, so the run's manifest, which holds no such kernel, is moved
    away first: a table its manifest contradicts is damage, ``test_kernel_table.py``.)"""
    run = copy_of()
    env = json.loads((run / "envelope.json").read_text())
    env["manifest"] = str(run / "moved-away.yaml")
    env["kernels"]["gemv_q999"] = {"qt": 999, "kind": "gemv", "requires": "any"}
    (run / "envelope.json").write_text(json.dumps(env))
    append_rows(run, {"kind": "check", "check": "bit_identity", "kernel": "gemv_q999",
                      "arch": ARCH, "backend": "emu", "status": "fail", "message": "wrong",
                      "details": {}})
    res, cells = _admit(hqval, run)
    assert res.code == 1 and cells == CLEAN
    assert f"kernel-level finding: bit_identity[gemv_q999|{ARCH}|emu]: fail" in res.err


def test_failing_row_of_a_kernel_missing_from_the_table(copy_of: Callable[[], Path],
                                                        hqval: Admit) -> None:
    """A row of a kernel the run's manifest does not hold is no evidence of this run: the
    run is damaged, exit 2, naming the row (once: a kernel-level finding, exit 1)."""
    run = copy_of()
    append_rows(run, {"kind": "check", "check": "reference_parity", "kernel": "not_in_table",
                      "arch": ARCH, "backend": "emu", "status": "error",
                      "message": "no verdict", "details": {}})
    res, _ = _admit(hqval, run)
    assert res.code == 2
    assert (f"damaged: {run}: reference_parity[not_in_table|{ARCH}|emu]: kernel not_in_table "
            "is not in the run's manifest") in res.err


def test_failing_baseline_kernel_is_a_finding(copy_of: Callable[[], Path],
                                              hqval: Admit) -> None:
    """qt=6 (the v1 baseline) has no policy cell; its failure still fails the gate."""
    run = copy_of()
    ident = f"reference_parity[gemv_hfq4g256_r1|{ARCH}|emu]"
    data = rows(run)
    for r in data:
        if r["identity"] == ident:
            r["status"] = "fail"
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    res, _ = _admit(hqval, run)
    assert res.code == 1 and ident in res.err


def test_infrastructure_step_mark_is_exit_2(copy_of: Callable[[], Path],
                                            hqval: Admit) -> None:
    run = copy_of()
    append_rows(run, {"kind": "step", "check": "checks", "kernel": "-", "arch": ARCH,
                      "backend": "step", "status": "error", "message": "checks: session stopped",
                      "details": {"infrastructure": True}})
    res, _ = _admit(hqval, run)
    assert res.code == 2 and "infrastructure" in res.err


def test_no_mutants_is_a_skipped_gate_in_reasons_and_checkpoint(tree: Path,
                                                                 tmp_path: Path) -> None:
    """--no-mutants: the run still admits (the policy's other gates pass) but every cell
    whose policy has the mutants gate says it was skipped, and so does the checkpoint."""
    from .conftest import hqval_process, run_args

    out = tmp_path / "run"
    res = hqval_process(run_args(tree, out, "--no-mutants"))
    assert res.code == 0, res.err[-2000:]
    data = json.loads((out / "admission.json").read_text())
    decode = [c for c in data["cells"] if c["path"] == "decode"]
    assert all("mutants gate skipped (--no-mutants)" in c["reasons"] for c in decode)
    assert data["skipped_gates"] == [f"mutants gate skipped (--no-mutants) on {ARCH}"]
    assert "mutants gate skipped (--no-mutants)" in (out / "report" / "checkpoint.md").read_text()
    assert "skipped: mutants gate skipped" in res.out
