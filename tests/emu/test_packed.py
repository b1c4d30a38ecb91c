"""VOP3P and the dot ops: integer dots per their pseudocode (signedness from NEG[0]/NEG[1]
for the iu forms), the 16-bit-result dot2s, one instruction at a time."""

from __future__ import annotations

import numpy as np
import pytest

from hqval.emu.packed import dot2_bf16_bf16, int_dot, round_bf16
from tests.emu.instr import execute, state


def _pack(vals: list[int], bits: int) -> int:
    m = (1 << bits) - 1
    return sum((v & m) << (bits * i) for i, v in enumerate(vals))


def test_dot4_iu8_signedness_follows_neg_lo() -> None:
    # V_DOT4_I32_IU8: "A[i] = NEG[0].u1 ? 32'I(signext(A8.i8)) : 32'I(32'U(A8.u8))"
    st = state()
    st.V[1] = _pack([-1, 2, -3, 4], 8)
    st.V[2] = _pack([5, -6, 7, 8], 8)
    st.V[3] = 10
    execute("v_dot4_i32_iu8 v0, v1, v2, v3 neg_lo:[1,1,0]", st)
    assert st.V[0, 0, 0] == np.uint32(10 + (-5) + (-12) + (-21) + 32)
    execute("v_dot4_i32_iu8 v0, v1, v2, v3", st)  # both unsigned: 0xff * 5 ...
    assert st.V[0, 0, 0] == 10 + 255 * 5 + 2 * 250 + 253 * 7 + 4 * 8
    execute("v_dot4_i32_iu8 v0, v1, v2, v3 neg_lo:[1,0,0]", st)  # A signed, B unsigned
    assert st.V[0, 0, 0] == np.uint32(10 - 5 + 2 * 250 - 3 * 7 + 32)


def test_dot8_iu4_and_unsigned_dots_with_clamp() -> None:
    # V_DOT8_I32_IU4: "A[i] = NEG[0].u1 ? 32'I(signext(A4.i4)) : 32'I(32'U(A4.u4))"
    st = state()
    st.V[1] = _pack([-8] * 8, 4)
    st.V[2] = _pack([7] * 8, 4)
    st.V[3] = 0x80000000  # INT_MIN
    execute("v_dot8_i32_iu4 v0, v1, v2, v3 neg_lo:[1,0,0]", st)
    assert st.V[0, 0, 0] == np.uint32((-(2**31) - 448) & 0xFFFFFFFF)  # wraps
    execute("v_dot8_i32_iu4 v0, v1, v2, v3 neg_lo:[1,0,0] clamp", st)
    assert st.V[0, 0, 0] == 0x80000000  # saturates
    # V_DOT4_U32_U8 / V_DOT8_U32_U4: "tmp += u8_to_u32(S0[7 : 0].u8) * u8_to_u32(...)"
    st.V[1], st.V[2], st.V[3] = 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFF0
    execute("v_dot4_u32_u8 v0, v1, v2, v3 clamp", st)
    assert st.V[0, 0, 0] == 0xFFFFFFFF
    execute("v_dot8_u32_u4 v0, v1, v2, v3", st)
    assert st.V[0, 0, 0] == (0xFFFFFFF0 + 8 * 225) & 0xFFFFFFFF


def test_gfx1030_dot4c_accumulates_into_the_destination() -> None:
    st = state()
    st.V[1] = _pack([1, -2, 3, -4], 8)
    st.V[2] = _pack([-1, -1, -1, -1], 8)
    st.V[0] = 100
    execute("v_dot4c_i32_i8_e32 v0, v1, v2", st, arch="gfx1030")
    assert st.V[0, 0, 0] == 102  # 100 + (-1 + 2 - 3 + 4)
    execute("v_dot2_i32_i16 v3, v1, v2, v0", st, arch="gfx1030")
    lo1, hi1 = st.V[1, 0, 0] & 0xFFFF, st.V[1, 0, 0] >> 16
    s16 = [((int(v) ^ 0x8000) - 0x8000) for v in (lo1, hi1)]
    assert st.V[3, 0, 0] == np.uint32(102 + s16[0] * -1 + s16[1] * -1)


def test_dot2_f16_f16_exact_and_fused() -> None:
    # V_DOT2_F16_F16: "tmp = S2.f16; tmp += S0[15 : 0].f16 * S1[15 : 0].f16; tmp +=
    # S0[31 : 16].f16 * S1[31 : 16].f16; D0.f16 = tmp"
    st = state()
    h = np.array([1.5, 2.0], np.float16).view(np.uint16).astype(np.uint32)
    g = np.array([4.0, -0.25], np.float16).view(np.uint16).astype(np.uint32)
    st.V[1] = h[0] | (h[1] << 16)
    st.V[2] = g[0] | (g[1] << 16)
    st.V[3] = np.array(0.5, np.float16).view(np.uint16)
    st.V[0] = 0xABCD0000
    execute("v_dot2_f16_f16 v0, v1, v2, v3", st)
    assert st.V[0, 0, 0] == 0xABCD0000 | int(np.array(6.0, np.float16).view(np.uint16))


def test_dot2_bf16_rounds_to_bf16() -> None:
    # bf16 1 + 2^-7 squared = 1 + 2^-6 + 2^-14: one rounding to bf16 gives 1 + 2^-6
    one_eps = int(round_bf16(1 + 2.0**-7))
    a = np.uint32(one_eps)
    r = dot2_bf16_bf16(a, a, np.uint32(0))
    assert int(r) == int(round_bf16(1 + 2.0**-6))
    assert int(round_bf16(np.nan)) & 0x7FC0 == 0x7FC0  # quiet NaN
    st = state()
    st.V[1], st.V[2], st.V[3] = int(a), int(a), 0
    execute("v_dot2_bf16_bf16 v0, v1, v2, v3", st)
    assert st.V[0, 0, 0] & 0xFFFF == int(round_bf16(1 + 2.0**-6))


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_int_dot_random_against_python(bits: int) -> None:
    rng = np.random.default_rng(bits)
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    c = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    got = int_dot(a, b, c, bits, True, False, True, False)
    for k in range(64):
        def field(x: int, i: int, signed: bool) -> int:
            v = (x >> (bits * i)) & ((1 << bits) - 1)
            return v - (1 << bits) if signed and v >> (bits - 1) else v
        want = int(c[k]) + sum(field(int(a[k]), i, True) * field(int(b[k]), i, False)
                               for i in range(32 // bits))
        assert int(got[k]) == want & 0xFFFFFFFF
