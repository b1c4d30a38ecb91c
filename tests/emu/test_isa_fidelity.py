"""Special-value semantics that follow a definite ISA pseudocode line (RDNA3/RDNA4, as
tinygrad's wheel ships it in tinygrad.runtime.autogen.amd.rdna{3,4}.str_pcode) or LLVM's
AMDGPU lowering, one instruction at a time.  Each test quotes the line it follows."""

from __future__ import annotations

import numpy as np
import pytest

from tests.emu.instr import execute, f32bits, state

QNAN = 0x7FC00000
SNAN = 0x7FA00000  # the example: a signalling NaN with payload bit 21


def _f(bits: int) -> float:
    return float(np.array(bits, np.uint32).view(np.float32))


@pytest.mark.parametrize(("arch", "mnemonic"), [("gfx1100", "v_med3_f32"),
                                                ("gfx1201", "v_med3_num_f32")])
def test_med3_with_a_nan_takes_the_min3_path(arch: str, mnemonic: str) -> None:
    # V_MED3_F32 / V_MED3_NUM_F32: "if (isNAN(64'F(S0.f32)) || isNAN(64'F(S1.f32)) ||
    # isNAN(64'F(S2.f32))) then D0.f32 = v_min3_f32(S0.f32, S1.f32, S2.f32)"
    st = state()
    st.V[1, 0, :4] = [QNAN, f32bits(3.0)[0], f32bits(3.0)[0], f32bits(1.0)[0]]
    st.V[2, 0, :4] = f32bits(1.0, QNAN and _f(QNAN), 1.0, 2.0)
    st.V[3, 0, :4] = f32bits(2.0, 2.0, 2.0, 3.0)
    execute(f"{mnemonic} v0, v1, v2, v3", st, arch=arch)
    got = st.V[0, 0, :4].view(np.float32)
    assert got[0] == 1.0  # med3(qNaN, 1, 2) = min3 = 1 (it was the NaN before)
    assert got[1] == 2.0  # med3(3, qNaN, 2) = min3 = 2
    assert got[2] == 2.0 and got[3] == 2.0  # ordinary medians


def test_med3_without_nan_is_the_median() -> None:
    st = state()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 32)).astype(np.float32)
    for k in range(3):
        st.V[1 + k, 0] = x[k].view(np.uint32)
    execute("v_med3_f32 v0, v1, v2, v3", st)
    np.testing.assert_array_equal(st.V[0, 0].view(np.float32), np.median(x, axis=0))


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_cvt_f16_f32_quiets_a_signalling_nan(arch: str) -> None:
    # V_CVT_F16_F32: "D0.f16 = f32_to_f16(S0.f32)"; a signalling NaN is quieted (LLVM's
    # APFloat::convert: f32 0x7fa00000 -> f16 0x7f00, not numpy's truncated 0x7d00)
    st = state()
    st.V[1, 0, :3] = [SNAN, 0xFFA00001, QNAN]
    execute("v_cvt_f16_f32_e32 v0, v1", st, arch=arch)
    assert [hex(v & 0xFFFF) for v in st.V[0, 0, :3]] == ["0x7f00", "0xff00", "0x7e00"]


def test_cvt_f32_f16_quiets_a_signalling_nan() -> None:
    # V_CVT_F32_F16: "D0.f32 = f16_to_f32(S0.f16)": f16 0x7d00 (signalling) -> 0x7fe00000
    st = state()
    st.V[1, 0, :2] = [0x7D00, 0xFE00]
    execute("v_cvt_f32_f16_e32 v0, v1", st)
    assert st.V[0, 0, 0] == 0x7FE00000 and st.V[0, 0, 1] == 0xFFC00000


def test_cvt_pk_rtz_quiets_both_halves() -> None:
    # V_CVT_PK_RTZ_F16_F32: "tmp[15 : 0].f16 = f32_to_f16(S0.f32); tmp[31 : 16].f16 =
    # f32_to_f16(S1.f32)" under ROUND_TOWARD_ZERO
    st = state()
    st.V[1, 0, 0], st.V[2, 0, 0] = SNAN, f32bits(65520.0)[0]  # 65520 rounds to inf (RNE)
    execute("v_cvt_pk_rtz_f16_f32_e32 v0, v1, v2", st)
    assert st.V[0, 0, 0] == (0x7BFF << 16) | 0x7F00  # toward zero: 65504, and qNaN


def test_s_cvt_f16_f32_quiets_on_gfx12() -> None:
    # S_CVT_F16_F32 (RDNA4 SOP1): "D0.f16 = f32_to_f16(S0.f32)"
    st = state()
    st.S[1] = SNAN
    execute("s_cvt_f16_f32 s0, s1", st, arch="gfx1201")
    assert st.S[0, 0] & 0xFFFF == 0x7F00
    st.S[2] = 0x7D00
    execute("s_cvt_f32_f16 s3, s2", st, arch="gfx1201")
    assert st.S[3, 0] == 0x7FE00000


@pytest.mark.parametrize("mnemonic", ["v_rcp_f32_e32", "v_rcp_iflag_f32_e32"])
def test_rcp_f32_produces_no_denormals(mnemonic: str) -> None:
    # LLVM SIISelLowering.cpp, lowerFDIV_FAST: "// rcp does not support denormals." (it
    # scales |x| > 2^96 by 2^-32 before v_rcp_f32 so the result stays normal)
    fmax = float(np.finfo(np.float32).max)
    st = state()
    st.V[1, 0, :6] = f32bits(fmax, -fmax, 2.0, 2.0**-140, 2.0**127, 2.0**126)
    execute(f"{mnemonic} v0, v1", st)
    got = st.V[0, 0, :6]
    assert got[0] == 0 and got[1] == 0x80000000  # 0 with the operand's sign, not 0x00200000
    assert got[2] == f32bits(0.5)[0]
    assert got[3] == 0x7F800000  # a denormal operand is read as 0: +inf
    assert got[4] == 0  # 2^-127 would be a denormal: flushed
    assert got[5] == 0x00800000  # 2^-126 is the smallest normal: kept


def test_div_fixup_f32_nan_quotient_stays_nan() -> None:
    # V_DIV_FIXUP_F32, last branch: "else D0.f32 = sign_out ? -abs(S0.f32) : abs(S0.f32)";
    # a NaN S0 with ordinary S1, S2 falls through to it and stays NaN (it gave +-inf)
    st = state()
    st.V[1, 0, :2] = [QNAN, QNAN]
    st.V[2, 0, :2] = f32bits(1.0, -1.0)
    st.V[3, 0, :2] = f32bits(2.0, 2.0)
    execute("v_div_fixup_f32 v0, v1, v2, v3", st)
    assert np.isnan(st.V[0, 0, :2].view(np.float32)).all()
    # "if isNAN(64'F(S2.f32)) then D0.f32 = 32'F(cvtToQuietNAN(64'F(S2.f32)))"
    st.V[3, 0, 0] = SNAN
    execute("v_div_fixup_f32 v0, v1, v2, v3", st)
    assert st.V[0, 0, 0] == SNAN | 0x400000


def test_div_fixup_f64_and_f16_follow_the_same_branches() -> None:
    st = state()
    nan64 = np.array([np.nan], np.float64).view(np.uint32)
    st.V[2, 0], st.V[3, 0] = nan64[0], nan64[1]  # S0 = NaN
    one, two = (np.array([v], np.float64).view(np.uint32) for v in (1.0, 2.0))
    st.V[4, 0], st.V[5, 0] = one[0], one[1]
    st.V[6, 0], st.V[7, 0] = two[0], two[1]
    execute("v_div_fixup_f64 v[0:1], v[2:3], v[4:5], v[6:7]", st)
    d = (st.V[0, 0].astype(np.uint64) | (st.V[1, 0].astype(np.uint64) << np.uint64(32)))
    assert np.isnan(d.view(np.float64)).all()
    # V_DIV_FIXUP_F16: "if isNAN(64'F(S2.f16)) then D0.f16 = 16'F(cvtToQuietNAN(...))"
    st2 = state()
    st2.V[1, 0] = 0x3C00  # 1.0
    st2.V[2, 0] = 0x3C00
    st2.V[3, 0] = 0x7D00  # signalling
    execute("v_div_fixup_f16 v0, v1, v2, v3", st2)
    assert (st2.V[0, 0] & 0xFFFF == 0x7F00).all()


def test_bfrev_of_an_inline_constant() -> None:
    # clang emits `v_bfrev_b32 v0, 32`: it crashed on the 0-d constant (numpy dtype view)
    st = state()
    execute("v_bfrev_b32_e32 v0, 32", st)
    assert (st.V[0, 0] == 0x04000000).all()
    execute("v_bcnt_u32_b32 v1, 7, 0", st)
    assert (st.V[1, 0] == 3).all()


def test_max_min_order_zeros_and_quiet_signalling_nans() -> None:
    # V_MAX_F32 (IEEE mode): "if isSignalNAN(64'F(S0.f32)) then D0.f32 =
    # 32'F(cvtToQuietNAN(64'F(S0.f32)))" ... "GT_NEG_ZERO: +0 > -0"
    st = state()
    st.V[1, 0, :3] = [0x80000000, SNAN, QNAN]
    st.V[2, 0, :3] = [0x00000000, f32bits(1.0)[0], f32bits(1.0)[0]]
    execute("v_max_f32_e32 v0, v1, v2", st)
    assert st.V[0, 0, :3].tolist() == [0, SNAN | 0x400000, f32bits(1.0)[0]]
    execute("v_min_f32_e32 v0, v2, v1", st)
    assert st.V[0, 0, 0] == 0x80000000  # -0 < +0
    # V_MAX_NUM_F32 (RDNA4): a signalling NaN is just a NaN: the other operand
    execute("v_max_num_f32_e32 v0, v1, v2", st, arch="gfx1201")
    assert st.V[0, 0, 1] == f32bits(1.0)[0]


def test_permlane16_fetch_inactive_is_op_sel_0() -> None:
    # llvm-objdump prints llvm.amdgcn.permlanex16's fi operand as op_sel:[1,0]
    st = state(exec_mask=0x0000FFFF)  # lanes 16-31 inactive
    st.V[1] = np.arange(32, dtype=np.uint32) + 100
    st.V[0] = 7
    st.S[0], st.S[1] = 0x76543210, 0xFEDCBA98
    execute("v_permlanex16_b32 v0, v1, s0, s1", st)
    assert (st.V[0, 0, :16] == 7).all()  # read inactive lanes 16-31: D kept
    execute("v_permlanex16_b32 v0, v1, s0, s1 op_sel:[1,0]", st)
    assert st.V[0, 0, :16].tolist() == list(range(116, 132))


def test_permlane16_var_reads_the_lane_in_src1() -> None:
    # V_PERMLANE16_VAR_B32: "VGPR[lane][VDST.u32] = tmp[row * 16 +
    # VGPR[lane][SRC1.u32][3 : 0].i32]"
    st = state()
    lane = np.arange(32, dtype=np.int64)
    st.V[1] = lane + 100
    st.V[2] = (15 - (lane & 15)) | 0xF0  # only bits 3:0 count
    execute("v_permlane16_var_b32 v0, v1, v2", st, arch="gfx1201")
    assert st.V[0, 0].tolist() == ((lane & ~15) + (15 - (lane & 15)) + 100).tolist()
    execute("v_permlanex16_var_b32 v3, v1, v2", st, arch="gfx1201")
    assert st.V[3, 0].tolist() == (((lane & ~15) ^ 16) + (15 - (lane & 15)) + 100).tolist()


def test_salu_in_valu_transcendentals_on_gfx12() -> None:
    # V_S_RCP_F32: "D0.f32 = 1.0F / S0.f32" into an SGPR; V_S_RCP_F16: "D0[31 : 16] = 16'0x0"
    st = state()
    st.S[2] = f32bits(4.0)[0]
    execute("v_s_rcp_f32 s1, s2", st, arch="gfx1201")
    assert st.S[1, 0] == f32bits(0.25)[0]
    execute("v_s_sqrt_f32 s3, s2", st, arch="gfx1201")
    assert st.S[3, 0] == f32bits(2.0)[0]
    st.S[4] = 0xABCD4400  # f16 4.0 in the low half, junk above
    st.S[5] = 0xFFFFFFFF
    execute("v_s_rcp_f16 s5, s4", st, arch="gfx1201")
    assert st.S[5, 0] == 0x3400  # 0.25, high half zero
    st.S[6] = f32bits(np.finfo(np.float32).max)[0]
    execute("v_s_rcp_f32 s7, s6", st, arch="gfx1201")
    assert st.S[7, 0] == 0  # the same no-denormal rcp as v_rcp_f32
    st.S[8] = f32bits(3.0)[0]
    execute("v_s_log_f32 s9, -s8", st, arch="gfx1201")
    assert np.isnan(np.array(st.S[9, 0], np.uint32).view(np.float32))


def test_maxmin_minmax_and_cls() -> None:
    # V_MAXMIN_F32: "D0.f32 = v_min_f32(v_max_f32(S0.f32, S1.f32), S2.f32)" (clang-19 emits
    # it for fminf(fmaxf(x, lo), hi) on gfx11; v_maxmin_num_f32 on gfx12)
    st = state()
    st.V[1, 0, :3] = f32bits(5.0, -5.0, 0.5)
    st.V[2, 0, :3] = f32bits(-1.0, -1.0, -1.0)
    st.V[3, 0, :3] = f32bits(1.0, 1.0, 1.0)
    execute("v_maxmin_f32 v0, v1, v2, v3", st)
    assert st.V[0, 0, :3].view(np.float32).tolist() == [1.0, -1.0, 0.5]
    execute("v_minmax_num_f32 v0, v1, v3, v2", st, arch="gfx1201")  # max(min(x, 1), -1)
    assert st.V[0, 0, :3].view(np.float32).tolist() == [1.0, -1.0, 0.5]
    # V_CLS_I32: "for i in 1 : 31 do if S0.i32[31 - i] != S0.i32[31] then D0.i32 = i"
    st.V[1, 0, :5] = [0x40000000, 0x00000001, 0xFFFFFFFF, 0, 0xBFFFFFFF]
    execute("v_cls_i32_e32 v0, v1", st)
    assert st.V[0, 0, :5].tolist() == [1, 31, 0xFFFFFFFF, 0xFFFFFFFF, 1]
