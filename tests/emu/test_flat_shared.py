"""Flat accesses into the shared aperture: a kernel that stages x in LDS and reads it
through a generic pointer (x or its LDS copy, chosen at run time, as the engine's MoE
gate/up GEMV does) loads ``src_shared_base`` and reaches LDS through flat loads; the
emulator runs it (it stopped at 'cannot parse operand src_shared_base', leaving the
kernel untested) and its checks reach a verdict either way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hqval.backends.emu import EmuBackend
from hqval.checks.cell import CheckContext, run_cell
from hqval.emu import Machine
from hqval.manifest import load_manifest
from hqval.matrix import load_arches
from hqval.result import Status
from hqval.toolchain import compile_kernel

pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

TREE = Path(__file__).resolve().parents[1] / "data" / "engine_tree" / "moe_fused.yaml"
KERNEL = "ew_moe_gate_up_mq4g256v2_ldsx"


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1030"])
def test_a_generic_pointer_into_lds_runs_and_is_judged(arch: str, tmp_path: Path) -> None:
    m = load_manifest(TREE)
    spec = m.by_name(KERNEL)
    res = compile_kernel(spec, arch, tmp_path)
    assert res.ok and res.code_object is not None, res.message
    module = Machine(arch).load(res.code_object.read_bytes())
    text = " ".join(i.text for i in module.program(spec.symbol).instructions)
    assert "src_shared_base" in text and "flat_load" in text
    ctx = CheckContext(backend=EmuBackend(arch), arch=load_arches()[arch], manifest=m)
    for check in ("reference_parity", "bit_identity"):
        row = run_cell(ctx, check, spec)
        assert row.status is Status.PASS, (check, row.message)
