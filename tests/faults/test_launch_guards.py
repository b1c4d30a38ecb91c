"""Fault class: a kernel whose outputs are right but which writes where it must not.  The
check cells fail (exit 1) and the rows name the buffer, the offset and the address."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval.cli import main

STRAY = Path(__file__).resolve().parents[1] / "checks" / "stray_writes" / "kernels.yaml"


def test_stray_write_kernels_fail_hqval_check(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    code = main(["check", "--arch", "gfx1100", "--backend", "emu", "--workers", "0",
                 "--manifest", str(STRAY), "--check", "reference_parity",
                 "--json", str(out), "--cache-dir", str(tmp_path / "cache")])
    capsys.readouterr()
    assert code == 1
    rows = {r["kernel"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"gemv_writes_x_r1", "gemv_writes_below_y_r1"}
    assert all(r["status"] == "fail" for r in rows.values())
    assert "write into const input x" in rows["gemv_writes_x_r1"]["message"]
    assert "1024 B below y" in rows["gemv_writes_below_y_r1"]["message"]
    assert " at 0x" in rows["gemv_writes_below_y_r1"]["message"]
