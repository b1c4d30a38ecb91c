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


# Special f16 and f32 bit patterns: zeros, denormals, limits, infinities, quiet and
# signalling NaNs with payloads, ones.
_F16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00,
                0xFC00, 0x7E00, 0xFE01, 0x7D01, 0xFC01, 0x3C00, 0xBC00, 0x3555]
_F32_SPECIAL = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
                0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00123, 0x7FA00000,
                0x7F800001, 0x3F800000, 0xBF800000, 0x33800000, 0x47800000]


def _mix_operand_slow(x: np.ndarray, sel: int, is_f16: int, nlo: int, nhi: int) -> np.ndarray:
    """The v_fma_mix source as the generic path reads it (f16 widened to f32)."""
    with np.errstate(all="ignore"):
        v = (((x >> np.uint32(16)) if sel else x) & np.uint32(0xFFFF)).astype(np.uint16) \
            .view(np.float16).astype(np.float32) if is_f16 else x.view(np.float32)
        if nhi:
            v = np.abs(v)
        if nlo:
            v = -v
    return v


@pytest.mark.parametrize("name", ["v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16"])
@pytest.mark.parametrize("mods", ["", " op_sel_hi:[1,1,1]", " op_sel:[1,0,1] op_sel_hi:[1,1,0]",
                                  " op_sel:[0,1,0] op_sel_hi:[0,1,1] neg_lo:[1,0,1]",
                                  " op_sel_hi:[1,0,1] neg_hi:[1,1,0] neg_lo:[0,1,1]"])
def test_fma_mix_register_fast_path_equals_the_generic_reading(name: str, mods: str) -> None:
    """The mix ops read register halves in place and widen straight to f64; the result
    must be the bits the generic reading (f16 -> f32 -> f64) gives, on special values."""
    from hqval.emu.fparith import f32_to_f16
    from hqval.emu.packed import _flags, fma_round

    rng = np.random.default_rng(5)
    halves = np.array(_F16_SPECIAL, np.uint32)
    f32s = np.array(_F32_SPECIAL, np.uint32)
    n = 32
    srcs = []
    for _ in range(3):
        lo = rng.choice(halves, n)
        hi = rng.choice(halves, n)
        packed = lo | (hi << np.uint32(16))
        whole = rng.choice(f32s, n)
        srcs.append(np.where(rng.random(n) < 0.5, packed, whole).astype(np.uint32))
    old_d = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    st = state()
    for k, v in enumerate(srcs):
        st.V[1 + k, 0] = v
    st.V[0, 0] = old_d
    execute(f"{name} v0, v1, v2, v3{mods}", st)
    parsed = dict(m.split(":") for m in mods.split())
    opsel, hi = _flags(parsed, "op_sel", 0), _flags(parsed, "op_sel_hi", 0)
    nlo, nhi = _flags(parsed, "neg_lo", 0), _flags(parsed, "neg_hi", 0)
    vals = [_mix_operand_slow(srcs[k], opsel[k], hi[k], nlo[k], nhi[k]) for k in range(3)]
    with np.errstate(all="ignore"):
        r = fma_round(*vals, np.float32)
    if name == "v_fma_mix_f32":
        want = r.view(np.uint32)
    else:
        bits = f32_to_f16(r).view(np.uint16).astype(np.uint32)
        want = ((old_d & np.uint32(0xFFFF)) | (bits << np.uint32(16)) if name.endswith("hi_f16")
                else (old_d & np.uint32(0xFFFF0000)) | bits)
    np.testing.assert_array_equal(st.V[0, 0], want)


@pytest.mark.parametrize("src", ["s4", "0.5", "-2.0", "0x3f800000", "1"])
def test_fma_mix_scalar_and_constant_sources(src: str) -> None:
    """SGPR halves are read in place like VGPRs; a constant goes through the generic
    reading once, at translation.  Both must give the generic reading's result."""
    from hqval.emu.operands import parse_operand
    from hqval.emu.packed import fma_round

    st = state()
    st.V[1, 0] = np.array([0x3C00BC00, 0x7E00FC00, 0x00013555, 0x7D01FC01] * 8, np.uint32)
    st.V[2, 0] = np.arange(32, dtype=np.uint32) * np.uint32(0x01010101)
    st.S[4, 0] = 0x4000C200
    op = parse_operand(src)
    raw = np.uint32(st.S[4, 0] if src == "s4" else op.bits(32, op.kind == "float"))
    for opsel, hi in (([0, 0, 0], [1, 1, 1]), ([1, 1, 1], [1, 0, 1]), ([0, 1, 0], [0, 1, 0])):
        execute(f"v_fma_mix_f32 v0, v1, {src}, v2 op_sel:[{','.join(map(str, opsel))}] "
                f"op_sel_hi:[{','.join(map(str, hi))}]", st)
        b = np.full(32, raw, np.uint32)
        vals = [_mix_operand_slow(x, opsel[k], hi[k], 0, 0)
                for k, x in enumerate((st.V[1, 0], b, st.V[2, 0]))]
        with np.errstate(all="ignore"):
            want = fma_round(*vals, np.float32).view(np.uint32)
        np.testing.assert_array_equal(st.V[0, 0], want, err_msg=f"{src} {opsel} {hi}")


@pytest.mark.parametrize("name", ["v_fma_mixlo_f16", "v_fma_mixhi_f16"])
@pytest.mark.parametrize("exec_mask", [0xFFFFFFFF, 0x0F0F00F1])
def test_fma_mix_half_write_keeps_the_other_half_and_inactive_lanes(
        name: str, exec_mask: int) -> None:
    """mixlo/mixhi write their f16 half in place: the other half of every lane and the
    whole register of an inactive lane stay as they were."""
    st = state(exec_mask=exec_mask)
    st.V[1, 0] = np.arange(32, dtype=np.uint32) * np.uint32(0x00010001) + np.uint32(0x3C003C00)
    st.V[2, 0] = 0x40004000
    st.V[3, 0] = np.arange(32, dtype=np.uint32) * np.uint32(0x3F800000 // 64)
    before = np.arange(32, dtype=np.uint32) * np.uint32(0x01234567)
    st.V[0, 0] = before
    execute(f"{name} v0, v1, v2, v3 op_sel_hi:[1,1,0]", st)
    got = st.V[0, 0]
    with np.errstate(all="ignore"):
        want16 = (st.V[1, 0] & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64) \
            * 2.0 + st.V[3, 0].view(np.float32).astype(np.float64)
    bits = want16.astype(np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
    merged = ((before & np.uint32(0xFFFF)) | (bits << np.uint32(16)) if name.endswith("hi_f16")
              else (before & np.uint32(0xFFFF0000)) | bits)
    active = ((exec_mask >> np.arange(32)) & 1) == 1
    np.testing.assert_array_equal(got, np.where(active, merged, before))
