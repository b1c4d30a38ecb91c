"""Scalar ALU and SCC/EXEC semantics with hand-worked values, one instruction at a time."""

from __future__ import annotations

import numpy as np

from hqval.emu.operands import EXEC, SCC, VCC
from tests.emu.instr import execute, state


def test_add_with_carry_chain_builds_a_64_bit_sum() -> None:
    st = state()
    st.S[0], st.S[1], st.S[2], st.S[3] = 0xFFFFFFFF, 1, 1, 2
    execute("s_add_u32 s4, s0, s2", st)
    assert st.S[4, 0] == 0 and st.S[SCC, 0] == 1  # carry out
    execute("s_addc_u32 s5, s1, s3", st)
    assert st.S[5, 0] == 4 and st.S[SCC, 0] == 0  # 1 + 2 + carry


def test_signed_overflow_sets_scc_and_sub_borrows() -> None:
    st = state()
    st.S[0], st.S[1] = 0x7FFFFFFF, 1
    execute("s_add_i32 s2, s0, s1", st)
    assert st.S[2, 0] == 0x80000000 and st.S[SCC, 0] == 1
    execute("s_sub_u32 s3, s1, s0", st)
    assert st.S[3, 0] == 0x80000002 and st.S[SCC, 0] == 1  # borrow


def test_bfe_signed_and_unsigned() -> None:
    st = state()
    st.S[0] = 0x0000F0F0
    st.S[1] = (8 << 16) | 4  # width 8, offset 4
    execute("s_bfe_u32 s2, s0, s1", st)
    execute("s_bfe_i32 s3, s0, s1", st)
    assert st.S[2, 0] == 0x0F
    assert st.S[3, 0] == 0x0F  # bit 7 of the field is 0: positive
    st.S[1] = (4 << 16) | 4
    execute("s_bfe_i32 s3, s0, s1", st)
    assert st.S[3, 0] == 0xFFFFFFFF  # field 0xF sign-extends to -1


def test_cselect_and_cmpk_use_a_sign_extended_16_bit_immediate() -> None:
    st = state()
    st.S[0] = 0xFFFFFFFF  # -1
    execute("s_cmpk_lt_i32 s0, 0x1", st)
    assert st.S[SCC, 0] == 1
    execute("s_cmpk_gt_u32 s0, 0xffff", st)
    assert st.S[SCC, 0] == 1  # 0xffffffff > 0xffff unsigned
    st.S[1], st.S[2] = 11, 22
    execute("s_cselect_b32 s3, s1, s2", st)
    assert st.S[3, 0] == 11
    execute("s_cmp_eq_u32 s1, s2", st)
    execute("s_cselect_b32 s3, s1, s2", st)
    assert st.S[3, 0] == 22


def test_and_saveexec_narrows_exec_and_saves_the_old_mask() -> None:
    st = state(exec_mask=0x0000FFFF)
    st.S[VCC] = 0x00FF00FF
    execute("s_and_saveexec_b32 s0, vcc_lo", st)
    assert st.S[0, 0] == 0x0000FFFF
    assert st.S[EXEC, 0] == 0x000000FF and st.S[SCC, 0] == 1
    assert st.em[0].tolist() == [True] * 8 + [False] * 24
    st.S[VCC] = 0xFF000000
    execute("s_and_saveexec_b32 s1, vcc_lo", st)
    assert st.S[EXEC, 0] == 0 and st.S[SCC, 0] == 0 and not st.em.any()
    execute("s_or_b32 exec_lo, exec_lo, s0", st)  # restore: the join after an if
    assert st.S[EXEC, 0] == 0x0000FFFF and st.em[0, :16].all() and not st.em[0, 16:].any()


def test_64_bit_shift_popcount_find_first_one() -> None:
    st = state()
    st.S[0], st.S[1] = 0x80000001, 0
    execute("s_lshl_b64 s[2:3], s[0:1], 1", st)
    assert (st.S[2, 0], st.S[3, 0]) == (2, 1)
    execute("s_bcnt1_i32_b32 s4, s0", st)
    assert st.S[4, 0] == 2 and st.S[SCC, 0] == 1
    st.S[5] = 0x00010000
    execute("s_ctz_i32_b32 s6, s5", st)
    assert st.S[6, 0] == 16
    st.S[5] = 0
    execute("s_ff1_i32_b32 s6, s5", st, arch="gfx1030")  # gfx10 spelling
    assert st.S[6, 0] == 0xFFFFFFFF


def test_mul_hi_signed_and_unsigned() -> None:
    st = state()
    st.S[0], st.S[1] = 0xFFFFFFFF, 2  # -1 * 2
    execute("s_mul_hi_u32 s2, s0, s1", st)
    execute("s_mul_hi_i32 s3, s0, s1", st)
    execute("s_mul_i32 s4, s0, s1", st)
    assert st.S[2, 0] == 1 and st.S[3, 0] == 0xFFFFFFFF and st.S[4, 0] == 0xFFFFFFFE


def test_conditional_branch_splits_waves() -> None:
    st = state(nwaves=3)
    st.S[SCC] = np.array([1, 0, 1], np.uint32)
    # simm16 = 1: target is 0 + 4 + 4 = 8, instruction index 2
    taken = execute("s_cbranch_scc1 1", st, words=[0xBFA20001])
    assert taken.tolist() == [True, False, True]
    st.S[SCC] = 1
    assert execute("s_cbranch_scc1 1", st, words=[0xBFA20001]) == 2
    st.S[SCC] = 0
    assert execute("s_cbranch_scc1 1", st, words=[0xBFA20001]) is None


def test_setreg_mode_denormal_field_and_flat_scratch_base() -> None:
    st = state()
    execute("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0", st, arch="gfx1030")
    assert not st.denorm32 and not st.denorm16_64
    execute("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3", st, arch="gfx1030")
    assert st.denorm32 and not st.denorm16_64
    execute("s_setreg_b32 hwreg(HW_REG_FLAT_SCR_LO), s6", st, arch="gfx1010")  # no-op


def test_setreg_of_the_rounding_mode_is_unsupported() -> None:
    import pytest

    from hqval.emu.errors import UnsupportedInstruction

    with pytest.raises(UnsupportedInstruction, match="FP_DENORM"):
        execute("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 1", state(), arch="gfx1100")


def test_gfx12_prefetch_hints_change_no_state() -> None:
    """s_prefetch_data / s_prefetch_inst are hints (gfx12 ISA, "Scalar memory"): they
    read an address but write no register and no memory."""
    from tests.emu.instr import execute, state

    st = state()
    st.S[2], st.S[3] = 0x1000, 0
    before_s, before_v = st.S.copy(), st.V.copy()
    for text in ("s_prefetch_data s[2:3], 0x110, null, 0",
                 "s_prefetch_inst s[2:3], 0x110, null, 0"):
        execute(text, st, "gfx1201")
    assert np.array_equal(st.S, before_s) and np.array_equal(st.V, before_v)
