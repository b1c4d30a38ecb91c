"""Faults of class 'exit codes that mean admission', a kernel that misbehaves on one arch
only: its qt=44 header load traps where the compiler targets gfx1030 (``#if
defined(__gfx1030__)``), not on gfx1010.  The gfx1030 cell fails naming the trap, the
gfx1010 cell of the same kernel passes (its object differs, so neither the cell cache nor
the emulator's same-code sharing carries one arch's verdict to the other), exit 1.
(Held on main.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Result, header_load_broken

Hq = Callable[..., Result]
ONE_ARCH_TRAP = "{\n#if defined(__gfx1030__)\n            __builtin_trap();\n#endif\n        }"


def test_a_kernel_that_traps_on_one_arch_fails_that_arch_only(
        tree: Path, tmp_path: Path, hqval: Hq, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = header_load_broken(tree, tmp_path / "t", ONE_ARCH_TRAP)
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "off")
    out = tmp_path / "rows.json"
    res = hqval("check", "--arch", "gfx1010,gfx1030", "--backend", "emu", "--manifest",
                str(manifest), "--check", "reference_parity", "--workers", "0",
                "--json", str(out))
    assert res.code == 1, res.out[-2000:] + res.err[-2000:]
    got = {r["identity"]: r for r in json.loads(out.read_text())}
    bad = got["reference_parity[gemv_mq4g256v2_r1|gfx1030|emu]"]
    assert bad["status"] == "fail" and "executed 's_trap 2' at 0x" in bad["message"]
    assert got["reference_parity[gemv_mq4g256v2_r1|gfx1010|emu]"]["status"] == "pass"
    assert [i for i, r in got.items() if r["status"] != "pass"] == [bad["identity"]]
