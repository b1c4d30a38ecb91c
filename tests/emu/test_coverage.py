"""hqval.emu.coverage: the scan that lists what a code object needs and the interpreter
lacks (before anything runs), on the suite's probe kernels for all nine targets, and the
ISA table derived from llvm-mc."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from hqval.emu.coverage import isa_coverage, isa_opcodes, opcode_name, scan_object
from hqval.emu.errors import EmuError

TARGETS = ("gfx1010", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
           "gfx1200", "gfx1201")


@pytest.mark.parametrize("arch", TARGETS)
def test_probe_kernels_run_on_every_target(build: Callable[..., bytes], arch: str) -> None:
    """Engine-style probes (buffer loads with cache-policy bits, LDS-staged block-128/256
    GEMV with residual, fused QKV with rsqrt/exp/atomics, WMMA, dots, SALU floats): clang-19
    -O3 emits nothing the interpreter cannot run."""
    scan = scan_object(build("probes", arch))
    assert scan.arch == arch
    assert len(scan.kernels) >= 5
    assert {k.kernel: k.mnemonics for k in scan.kernels if k.mnemonics} == {}


def test_scan_lists_what_cannot_run(build: Callable[..., bytes]) -> None:
    scan = scan_object(build("unsupported", "gfx1100"))
    assert "s_getreg_b32" in scan.mnemonics
    (kernel,) = scan.kernels
    assert kernel.kernel == "reads_mode_register" and kernel.unsupported[0][1] > 0  # its address


def test_scan_refuses_what_is_not_a_code_object() -> None:
    with pytest.raises(EmuError, match="ELF"):
        scan_object(b"not an elf")


def test_opcode_name_folds_encodings() -> None:
    assert opcode_name("v_add_f32_e64_dpp") == opcode_name("v_add_f32_e32") == "v_add_f32"
    assert opcode_name("s_add_u32") == "s_add_u32"


@pytest.mark.skipif(shutil.which("llvm-mc-19") is None, reason="needs llvm-mc-19 (llvm-19)")
def test_isa_table_of_gfx1201_from_llvm_mc() -> None:
    table = isa_opcodes("gfx1201")
    # opcodes only gfx12 has, and the ones the issue named
    for name in ("v_s_rcp_f32", "s_addk_co_i32", "v_wmma_i32_16x16x32_iu4",
                 "v_permlane16_var_b32", "v_dot4_i32_iu8"):
        assert name in table.samples
    assert "v_dot2c_f32_f16" not in table.samples  # a gfx10.3 opcode
    cov = isa_coverage("gfx1201", table)
    assert cov.total == len(table.samples) > 600
    assert "v_s_rcp_f32" in cov.implemented and "s_addk_co_i32" in cov.implemented
    assert any(m.startswith("image_") for m in cov.missing)  # no image model: says so
