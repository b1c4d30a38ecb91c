"""operands: operand syntax and constant bit patterns per source width."""

from __future__ import annotations

import numpy as np
import pytest

from hqval.emu.errors import EmuError
from hqval.emu.operands import EXEC, NULL, TTMP0, VCC, parse_operand


def test_registers_and_ranges() -> None:
    assert (parse_operand("v7").kind, parse_operand("v7").reg) == ("v", 7)
    r = parse_operand("s[4:7]")
    assert (r.kind, r.reg, r.count) == ("s", 4, 4)
    assert parse_operand("vcc_lo").reg == VCC and parse_operand("exec_lo").reg == EXEC
    assert parse_operand("null").reg == NULL and parse_operand("ttmp9").reg == TTMP0 + 9
    assert parse_operand("v3.h").high


def test_modifiers() -> None:
    op = parse_operand("-|v2|")
    assert op.neg and op.abs and op.reg == 2
    assert parse_operand("-1").kind == "int" and parse_operand("-1").value == -1


def test_constant_bits_by_width() -> None:
    assert parse_operand("1.0").bits(32) == 0x3F800000
    assert parse_operand("1.0").bits(16) == 0x3C00
    assert parse_operand("1.0").bits(64) == 0x3FF0000000000000
    assert parse_operand("-2.0").bits(32) == 0xC0000000
    assert parse_operand("0.15915494").bits(32) == 0x3E22F983  # 1/(2 pi)
    assert parse_operand("-1").bits(32) == 0xFFFFFFFF
    assert parse_operand("-1").bits(16) == 0xFFFF
    assert parse_operand("0x3ff00000").bits(64, is_float=True) == 0x3FF0000000000000


def test_garbage_is_a_clear_error() -> None:
    with pytest.raises(EmuError, match="cannot parse operand"):
        parse_operand("sendmsg(MSG_X)")


@pytest.mark.parametrize("exec_lo", [0xFFFFFFFF, 0x0F0F00F1, 0])
@pytest.mark.parametrize("selection", ["all", "some"])
def test_multi_register_write_equals_one_write_per_register(exec_lo: int,
                                                            selection: str) -> None:
    """vwrite_regs (one copy for a run of VGPRs) and vwrite with every lane active (no
    mask) must leave exactly what a masked write per register leaves."""
    from hqval.emu.operands import EXEC, WaveState, vread_regs, vwrite, vwrite_regs

    rng = np.random.default_rng(exec_lo & 0xFF)
    a, b = WaveState(3, 12), WaveState(3, 12)
    for st in (a, b):
        st.V[:] = np.arange(st.V.size, dtype=np.uint32).reshape(st.V.shape)
        st.S[EXEC] = np.array([exec_lo, 0xFFFFFFFF, exec_lo ^ 0xFFFF], np.uint32)
        st.set_exec(slice(None))
    w = slice(None) if selection == "all" else np.array([2, 0])
    n = 3 if selection == "all" else 2
    vals = rng.integers(0, 2**32, (n, 32, 4), dtype=np.uint64).astype(np.uint32)
    vwrite_regs(a, w, 5, vals)
    for i in range(4):
        vwrite(b, w, 5 + i, vals[..., i])
    np.testing.assert_array_equal(a.V, b.V)
    np.testing.assert_array_equal(vread_regs(a, w, 5, 4), np.stack(
        [a.V[5 + i][w] for i in range(4)], axis=-1))
    # past the last VGPR: the same IndexError as a single write
    with pytest.raises(IndexError):
        vwrite_regs(a, w, 10, vals)


def test_full_exec_write_skips_the_mask_only_when_every_lane_is_on() -> None:
    from hqval.emu.operands import EXEC, WaveState, vwrite

    st = WaveState(2, 4)
    st.S[EXEC] = np.array([0xFFFFFFFF, 0xFFFFFFFF], np.uint32)
    st.set_exec(slice(None))
    assert st.full
    vwrite(st, slice(None), 1, np.uint32(7))
    assert (st.V[1] == 7).all()
    st.S[EXEC] = np.array([0xFFFFFFFF, 0x7FFFFFFF], np.uint32)
    st.set_exec(np.array([1]))
    assert not st.full
    vwrite(st, slice(None), 1, np.uint32(9))
    assert st.V[1, 1, 31] == 7 and (st.V[1, 1, :31] == 9).all() and (st.V[1, 0] == 9).all()
