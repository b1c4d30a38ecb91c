"""Vector ALU semantics, checked on compiled kernels against values worked out by hand or
by exact arithmetic: fma single rounding, f16 conversion rounding, NaN compares,
division sequences, cross-lane ops (ds_bpermute, ds_swizzle, DPP) and VOP3P."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from hqval.emu import Machine, Module
from tests.emu.conftest import ARCHES

Ops = Callable[[str], tuple[Machine, Module]]


def buf(m: Machine, a: np.ndarray) -> int:
    addr = m.alloc(a.nbytes)
    m.write(addr, a)
    return addr


def f32(*xs: float) -> np.ndarray:
    a = np.zeros(32, np.float32)
    a[: len(xs)] = xs
    return a


@pytest.mark.parametrize("arch", ARCHES)
def test_fma_f32_rounds_once(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 exactly; + 2^-70 puts it just above the midpoint
    # between 1 + 2^-11 and its successor.  Rounding the f64 sum to f32 (double rounding)
    # gives 1 + 2^-11; one rounding gives 1 + 2^-11 + 2^-23.
    u = 1 + 2.0**-12
    a = f32(u, 3.0, np.inf, 1e-30, -2.0)
    b = f32(u, 1 / 3, 0.0, 1e-30, 0.5)
    c = f32(2.0**-70, -1.0, 1.0, 0.0, 1.0)
    out = m.alloc(128)
    m.launch(mod, "fma_f32", (1, 1, 1), (32, 1, 1), [buf(m, a), buf(m, b), buf(m, c), out])
    got = m.read(out, 128).view(np.float32)
    assert got[0] == np.float32(1 + 2.0**-11 + 2.0**-23)
    exact = Fraction(float(a[1])) * Fraction(float(b[1])) - 1
    assert got[1] == np.float32(float(exact))  # the tiny residual, exactly rounded
    assert np.isnan(got[2])  # inf * 0 + 1
    assert got[3] == np.float32(1e-30 * 1e-30 + 0) or got[3] == 0  # underflow to denormal/0
    assert got[4] == 0.0 and not np.signbit(got[4])  # -1 + 1 = +0


@pytest.mark.parametrize("arch", ARCHES)
def test_f32_add_mul_div_max(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(32) * np.exp2(rng.integers(-60, 60, 32))).astype(np.float32)
    b = (rng.standard_normal(32) * np.exp2(rng.integers(-60, 60, 32))).astype(np.float32)
    a[:6] = [1.0, np.nan, 0.0, -0.0, 1e-40, 3.0]  # 1e-40: an f32 denormal
    b[:6] = [3.0, 2.0, 0.0, 5.0, 3.0, np.inf]
    out = m.alloc(4 * 128)
    m.launch(mod, "arith_f32", (1, 1, 1), (32, 1, 1), [buf(m, a), buf(m, b), out])
    got = m.read(out, 4 * 128).view(np.float32).reshape(32, 4)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got[:, 0], a + b)
        np.testing.assert_array_equal(got[:, 1], a * b)
        # the compiler's division sequence (div_scale/rcp/fma/div_fmas/div_fixup) is
        # correctly rounded: bit-equal to IEEE division, NaN and denormals included
        np.testing.assert_array_equal(got[:, 2], a / b)
    assert got[1, 3] == 2.0  # max(NaN, 2) = 2 (IEEE maxNum)
    assert got[0, 2] == np.float32(1 / 3)
    assert got[4, 1] == np.float32(np.float32(1e-40) * np.float32(3.0))  # denormal kept


@pytest.mark.parametrize("arch", ARCHES)
def test_cvt_f16_rounds_to_nearest_even(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    h = 2.0**-10  # f16 ulp at 1.0
    vals = f32(1 + h / 2,           # tie -> even (1.0)
               1 + 3 * h / 2,       # tie -> even (1 + 2h)
               1 + h / 2 + 2.0**-20,  # just above the tie -> up
               65520.0,             # rounds to inf
               65519.0,             # largest finite 65504
               2.0**-25,            # half of the smallest denormal: tie -> 0
               3 * 2.0**-26,        # 1.5 x smallest denormal... rounds to 2^-24
               -0.0, np.nan, -np.inf, 6.1e-5)
    o16, back = m.alloc(64), m.alloc(128)
    m.launch(mod, "cvt_f16", (1, 1, 1), (32, 1, 1), [buf(m, vals), o16, back])
    bits = m.read(o16, 64).view(np.uint16)
    with np.errstate(over="ignore"):
        want16 = vals.astype(np.float16)
    want = want16.view(np.uint16)
    nan = np.isnan(vals)
    np.testing.assert_array_equal(bits[~nan], want[~nan])
    assert bits[0] == 0x3C00 and bits[1] == 0x3C02 and bits[2] == 0x3C01
    assert bits[3] == 0x7C00 and bits[4] == 0x7BFF and bits[5] == 0 and bits[6] == 0x0001
    assert bits[7] == 0x8000 and (bits[8] & 0x7C00) == 0x7C00 and (bits[8] & 0x3FF)
    np.testing.assert_array_equal(m.read(back, 128).view(np.float32)[~nan],
                                  want16.astype(np.float32)[~nan])


@pytest.mark.parametrize("arch", ARCHES)
def test_float_compares_with_nan(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    a = f32(1.0, 2.0, np.nan, 1.0, -0.0, np.inf)
    b = f32(2.0, 2.0, 1.0, np.nan, 0.0, np.inf)
    out = m.alloc(128)
    m.launch(mod, "cmp_f32", (1, 1, 1), (32, 1, 1), [buf(m, a), buf(m, b), out])
    got = m.read(out, 128).view(np.uint32)
    # bit0 <, bit1 ==, bit2 != (unordered-or-not-equal), bit3 >=, bit4 unordered
    assert got[:6].tolist() == [0b00101, 0b01010, 0b10100, 0b10100, 0b01010, 0b01010]


@pytest.mark.parametrize("arch", ARCHES)
def test_integer_division_sequences(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    rng = np.random.default_rng(11)
    a = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(1, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    b[:8] = [1, 2, 3, 7, 0xFFFFFFFF, 0x80000000, 65536, 12345]
    a[:2] = [0xFFFFFFFF, 0x80000000]
    b[8:16] >>= 20  # small divisors exercise the correction steps
    b[b == 0] = 5
    out = m.alloc(4 * 128)
    m.launch(mod, "int_div", (1, 1, 1), (32, 1, 1), [buf(m, a), buf(m, b), out])
    got = m.read(out, 4 * 128).view(np.uint32).reshape(32, 4)
    np.testing.assert_array_equal(got[:, 0], a // b)
    np.testing.assert_array_equal(got[:, 1], a % b)
    sa, sb = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    q = np.trunc(sa / sb).astype(np.int64)  # C truncating division
    exact = sa - q * sb
    fix = (exact != 0) & ((exact < 0) != (sa < 0))
    q = np.where(fix, q + np.sign(exact) * np.sign(sb), q)
    ok = ~((sa == -(2**31)) & (sb == -1))
    np.testing.assert_array_equal(got[ok, 2].view(np.int32), q[ok].astype(np.int32))
    np.testing.assert_array_equal(got[ok, 3].view(np.int32),
                                  (sa - q * sb)[ok].astype(np.int32))


@pytest.mark.parametrize("arch", ARCHES)
def test_cross_lane_bpermute_swizzle_dpp(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    a = (np.arange(32, dtype=np.int32) + 1) * 10
    out = m.alloc(4 * 5 * 32)
    m.launch(mod, "cross_lane", (1, 1, 1), (32, 1, 1), [buf(m, a), out])
    got = m.read(out, 4 * 5 * 32).view(np.int32).reshape(32, 5)
    lane = np.arange(32)
    np.testing.assert_array_equal(got[:, 0], a[lane ^ 5])                     # bpermute
    np.testing.assert_array_equal(got[:, 1], a[(lane & ~3) + (3 - (lane & 3))])  # quad [3,2,1,0]
    np.testing.assert_array_equal(got[:, 2], a[lane ^ 16])                    # bitmask xor 16
    row_shr = np.where(lane % 16 == 0, 0, a[np.maximum(lane - 1, 0)])        # shifted-in: 0
    np.testing.assert_array_equal(got[:, 3], row_shr)
    np.testing.assert_array_equal(got[:, 4], a[lane ^ 1])                     # quad [1,0,3,2]


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1151", "gfx1201"])
def test_vop3p_fma_mix_dot2_pk_fma(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    rng = np.random.default_rng(5)
    hh = rng.standard_normal((32, 2)).astype(np.float16)
    gg = rng.standard_normal((32, 2)).astype(np.float16)
    f = rng.standard_normal(32).astype(np.float32)
    hh[0] = [np.float16(0.5), np.float16(-3.0)]
    f[0] = 7.0
    out, pk = m.alloc(4 * 64), m.alloc(128)
    m.launch(mod, "vop3p", (1, 1, 1), (32, 1, 1),
             [buf(m, hh.view(np.uint32).ravel()), buf(m, f), buf(m, gg.view(np.uint32).ravel()),
              out, pk])
    got = m.read(out, 4 * 64).view(np.float32).reshape(32, 2)
    h64, g64, f64 = hh.astype(np.float64), gg.astype(np.float64), f.astype(np.float64)
    # fma_mix: f16 lo * f32 + f16 hi, one rounding to f32 (exact in f64 here: <= 35 bits)
    np.testing.assert_array_equal(got[:, 0], (h64[:, 0] * f64 + h64[:, 1]).astype(np.float32))
    assert got[0, 0] == 0.5 * 7.0 - 3.0
    # dot2 in the ISA pseudocode's order: (c + lo*lo) + hi*hi in f32, products exact
    want = (f + (h64[:, 0] * g64[:, 0]).astype(np.float32)).astype(np.float32)
    want = (want + (h64[:, 1] * g64[:, 1]).astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(got[:, 1], want)
    # pk_fma_f16: per half h*g + h, single rounding to f16
    p = m.read(pk, 128).view(np.float16).reshape(32, 2)
    np.testing.assert_array_equal(p, (h64 * g64 + h64).astype(np.float16))


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_flush_denormals_mode_from_the_kernel_descriptor(build: Callable[..., bytes],
                                                         arch: str) -> None:
    m = Machine(arch)
    mod = m.load(build("ops", arch, "-fgpu-flush-denormals-to-zero"))
    a = f32(1e-40, 2e-38, 1.0)
    b = f32(1.0, 0.25, 3.0)
    out = m.alloc(4 * 128)
    m.launch(mod, "arith_f32", (1, 1, 1), (32, 1, 1), [buf(m, a), buf(m, b), out])
    got = m.read(out, 4 * 128).view(np.float32).reshape(32, 4)
    assert got[0, 0] == 1.0 and got[0, 1] == 0.0  # denormal input flushed
    assert got[1, 1] == 0.0  # 2e-38 * 0.25 = 5e-39 is a denormal result: flushed
    assert got[1, 2] == np.float32(8e-38)  # division is still correctly rounded
    assert got[2, 2] == np.float32(1 / 3)


# ---- single instructions with hand-worked values (tests/emu/instr.py harness)

def test_inactive_lanes_keep_their_values() -> None:
    from tests.emu.instr import execute, state

    st = state(exec_mask=0x0000000F)
    st.V[1] = 5
    st.V[2] = 7
    st.V[0] = 99
    execute("v_add_nc_u32_e32 v0, v1, v2", st)
    assert st.V[0, 0, :4].tolist() == [12] * 4 and (st.V[0, 0, 4:] == 99).all()


def test_cndmask_selects_per_lane() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[1] = 10
    st.V[2] = 20
    st.S[106] = 0xAAAAAAAA  # vcc_lo: odd lanes
    execute("v_cndmask_b32_e32 v0, v1, v2, vcc_lo", st)
    assert st.V[0, 0, :4].tolist() == [10, 20, 10, 20]


def test_vopd_halves_read_before_either_writes() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[0] = 1
    st.V[1] = 2
    execute("v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v1, v0", st)
    assert st.V[0, 0, 0] == 2 and st.V[1, 0, 0] == 1


def test_carry_chain_for_64_bit_vector_add() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[0] = 0xFFFFFFFF
    st.V[1] = 0
    st.V[2] = np.arange(32, dtype=np.uint32)
    execute("v_add_co_u32 v3, vcc_lo, v0, v2", st)
    execute("v_add_co_ci_u32_e32 v4, vcc_lo, 0, v1, vcc_lo", st)
    lo, hi = st.V[3, 0], st.V[4, 0]
    total = lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))
    assert total.tolist() == [0xFFFFFFFF + k for k in range(32)]


def test_compare_class_and_nan_handling() -> None:
    from tests.emu.instr import execute, f32bits, state

    st = state()
    vals = [np.nan, -np.inf, -1.0, -1e-40, -0.0, 0.0, 1e-40, 1.0, np.inf] + [2.0] * 23
    st.V[0] = f32bits(*vals)
    st.V[1] = 0x3  # classes 0, 1: NaNs
    execute("v_cmp_class_f32_e64 s0, v0, v1", st)
    assert st.S[0, 0] == 0b1
    st.V[1] = (1 << 4) | (1 << 7)  # negative and positive denormals
    execute("v_cmp_class_f32_e64 s0, v0, v1", st)
    assert st.S[0, 0] == (1 << 3) | (1 << 6)
    st.V[1] = f32bits(*([1.0] * 32))
    execute("v_max_f32_e32 v2, v0, v1", st)
    assert st.V[2, 0, 0] == f32bits(1.0)[0]  # max(NaN, 1) = 1
    execute("v_cmp_neq_f32_e32 vcc_lo, v0, v1", st)  # unordered or not equal
    execute("v_cmp_lg_f32_e64 s1, v0, v1", st)       # ordered and not equal
    assert st.S[106, 0] & 1 == 1 and st.S[1, 0] & 1 == 0


def test_perm_and_pack_rtz() -> None:
    from tests.emu.instr import execute, f32bits, state

    st = state()
    st.V[0] = 0x11223344
    st.V[1] = 0xAABBCCDD
    execute("v_perm_b32 v2, v0, v1, 0x0c070400", st)  # bytes: src1[0], src0[0], src0[3], 0
    assert st.V[2, 0, 0] == 0x001144DD
    st.V[3] = f32bits(*([1 + 2.0**-11 + 2.0**-20] * 32))  # just above a tie: RNE rounds up
    execute("v_cvt_pk_rtz_f16_f32 v4, v3, v3", st)
    assert st.V[4, 0, 0] == 0x3C003C00  # toward zero: 1.0 in both halves
    execute("v_cvt_f16_f32_e32 v5, v3", st)
    assert st.V[5, 0, 0] == 0x3C01


def test_dpp_row_mask_leaves_disabled_rows_unwritten() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[1] = np.arange(32, dtype=np.uint32)
    st.V[0] = 1000
    execute("v_mov_b32_dpp v0, v1 quad_perm:[3,2,1,0] row_mask:0x1 bank_mask:0xf", st)
    assert st.V[0, 0, :4].tolist() == [3, 2, 1, 0]
    assert (st.V[0, 0, 16:] == 1000).all()  # row 1 disabled by row_mask


def test_mad_u64_u32_and_ldexp_frexp() -> None:
    from tests.emu.instr import execute, f32bits, state

    st = state()
    st.V[0] = 0xFFFFFFFF
    st.V[1] = 0xFFFFFFFF
    st.V[2] = 1
    st.V[3] = 0
    execute("v_mad_u64_u32 v[4:5], null, v0, v1, v[2:3]", st)
    assert (st.V[4, 0, 0], st.V[5, 0, 0]) == (2, 0xFFFFFFFE)  # (2^32-1)^2 + 1
    st.V[6] = f32bits(*([3.0] * 32))
    execute("v_ldexp_f32 v7, v6, -3", st)
    assert st.V[7, 0, 0] == f32bits(0.375)[0]
    execute("v_frexp_exp_i32_f32_e32 v8, v6", st)
    execute("v_frexp_mant_f32_e32 v9, v6", st)
    assert st.V[8, 0, 0] == 2 and st.V[9, 0, 0] == f32bits(0.75)[0]


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_f64_division_sequence_and_fma(build: Callable[..., bytes], arch: str) -> None:
    m = Machine(arch)
    mod = m.load(build("more", arch))
    rng = np.random.default_rng(2)
    a = rng.standard_normal(32) * np.exp2(rng.integers(-300, 300, 32))
    b = rng.standard_normal(32) * np.exp2(rng.integers(-300, 300, 32))
    a[:4] = [1.0, 0.0, np.inf, 5e-324]
    b[:4] = [3.0, 0.0, 2.0, 3.0]
    out = m.alloc(8 * 128)
    m.launch(mod, "f64ops", (1, 1, 1), (32, 1, 1), [buf(m, a), buf(m, b), out])
    got = m.read(out, 8 * 128).view(np.float64).reshape(32, 4)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got[:, 0], a / b)  # correctly rounded, like IEEE
        want_fma = np.array([float(Fraction(x) * Fraction(y) + 1) if np.isfinite(x * y)
                             else x * y + 1 for x, y in zip(a, b, strict=True)])
        np.testing.assert_array_equal(got[:, 1], want_fma)
        np.testing.assert_array_equal(got[:, 2], np.sqrt(np.abs(a)))
        ints = np.trunc(np.clip(np.nan_to_num(a, posinf=2**31 - 1), -(2**31), 2**31 - 1))
        np.testing.assert_array_equal(got[:, 3], ints)


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_16_bit_integers_and_indexed_registers(build: Callable[..., bytes], arch: str) -> None:
    m = Machine(arch)
    mod = m.load(build("more", arch))
    rng = np.random.default_rng(4)
    x = rng.integers(0, 65536, 32).astype(np.uint16)
    y = rng.integers(0, 65536, 32).astype(np.uint16)
    out = m.alloc(2 * 6 * 32)
    m.launch(mod, "i16ops", (1, 1, 1), (32, 1, 1), [buf(m, x), buf(m, y), out])
    got = m.read(out, 2 * 6 * 32).view(np.uint16).reshape(32, 6).astype(np.int64)
    xi, yi = x.astype(np.int64), y.astype(np.int64)
    sx, sy = x.view(np.int16).astype(np.int64), y.view(np.int16).astype(np.int64)
    np.testing.assert_array_equal(got[:, 0], (xi + yi) & 0xFFFF)
    np.testing.assert_array_equal(got[:, 1], (xi * yi) & 0xFFFF)
    np.testing.assert_array_equal(got[:, 2], (xi << (yi & 15)) & 0xFFFF)
    np.testing.assert_array_equal(got[:, 3], (sx >> (yi & 15)) & 0xFFFF)
    np.testing.assert_array_equal(got[:, 4], np.maximum(xi, yi))
    np.testing.assert_array_equal(got[:, 5], np.where(sx < sy, xi, yi))
    a = rng.integers(-1000, 1000, 32).astype(np.int32)
    out2 = m.alloc(128)
    m.launch(mod, "regidx", (1, 1, 1), (32, 1, 1), [buf(m, a), out2])
    np.testing.assert_array_equal(m.read(out2, 128).view(np.int32), a * ((a & 7) + 1))


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_f16_arithmetic_and_f32_library_calls(build: Callable[..., bytes], arch: str) -> None:
    m = Machine(arch)
    mod = m.load(build("more", arch))
    rng = np.random.default_rng(6)
    x = rng.standard_normal(32).astype(np.float16)
    y = (rng.standard_normal(32) + 3).astype(np.float16)
    out = m.alloc(2 * 4 * 32)
    m.launch(mod, "halfops", (1, 1, 1), (32, 1, 1), [buf(m, x), buf(m, y), out])
    got = m.read(out, 2 * 4 * 32).view(np.float16).reshape(32, 4)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    np.testing.assert_array_equal(got[:, 0], (x64 + y64).astype(np.float16))
    np.testing.assert_array_equal(got[:, 1], (x64 * y64).astype(np.float16))
    # f16 division goes through an f32 reciprocal and v_div_fixup_f16: within 1 f16 ulp
    q = (x64 / y64).astype(np.float16)
    ulp = np.abs(np.spacing(q)).astype(np.float64)
    assert np.all(np.abs(got[:, 2].astype(np.float64) - q) <= ulp)
    np.testing.assert_array_equal(got[:, 3], (x64 * y64 + x64).astype(np.float16))
    v = (rng.standard_normal(32) * 10).astype(np.float32)
    fo, io = m.alloc(4 * 4 * 32), m.alloc(4 * 2 * 32)
    m.launch(mod, "floatmisc", (1, 1, 1), (32, 1, 1), [buf(m, v), fo, io])
    f = m.read(fo, 4 * 4 * 32).view(np.float32).reshape(32, 4)
    i = m.read(io, 4 * 2 * 32).view(np.int32).reshape(32, 2)
    np.testing.assert_array_equal(f[:, 0], np.floor(v))
    np.testing.assert_array_equal(f[:, 1], np.sqrt(np.abs(v)))
    # expf/logf are library sequences over v_exp_f32/v_log_f32 (hardware: ~1 ulp)
    np.testing.assert_allclose(f[:, 2], np.exp(v.astype(np.float64)), rtol=4e-7)
    np.testing.assert_allclose(f[:, 3], np.log(np.abs(v.astype(np.float64)) + 1), rtol=4e-7)
    np.testing.assert_array_equal(i[:, 0], np.rint(v).astype(np.int32))
    np.testing.assert_array_equal(i[:, 1], np.abs(v).astype(np.uint32).astype(np.int32))


def test_permlane16_and_permlanex16() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[1] = np.arange(32, dtype=np.uint32) + 100
    st.S[0], st.S[1] = 0x89ABCDEF, 0x01234567  # nibble i = 15 - i: lane i reads 15 - i
    execute("v_permlane16_b32 v0, v1, s0, s1", st)
    lane = np.arange(32)
    assert st.V[0, 0].tolist() == ((lane & ~15) + (15 - (lane & 15)) + 100).tolist()
    st.S[0], st.S[1] = 0x76543210, 0xFEDCBA98  # identity selection, other row
    execute("v_permlanex16_b32 v2, v1, s0, s1", st)
    assert st.V[2, 0].tolist() == ((lane ^ 16) + 100).tolist()


def test_salu_float_on_gfx1150() -> None:
    from tests.emu.instr import execute, f32bits, state

    st = state()
    st.S[1], st.S[2] = f32bits(1.5)[0], f32bits(-0.25)[0]
    execute("s_add_f32 s0, s1, s2", st, arch="gfx1150")
    assert st.S[0, 0] == f32bits(1.25)[0]
    execute("s_fmac_f32 s0, s1, s2", st, arch="gfx1150")  # 1.25 + 1.5 * -0.25
    assert st.S[0, 0] == f32bits(0.875)[0]
    execute("s_cmp_lt_f32 s2, s1", st, arch="gfx1150")
    assert st.S[253, 0] == 1
    st.S[3] = 0xFFFFFFF9  # -7
    execute("s_cvt_f32_i32 s4, s3", st, arch="gfx1150")
    assert st.S[4, 0] == f32bits(-7.0)[0]


def test_f16_denormal_flush_follows_the_16_64_mode() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[1] = 0x0001  # smallest f16 denormal
    st.V[2] = 0x0000
    execute("v_add_f16_e32 v0, v1, v2", st)
    assert st.V[0, 0, 0] & 0xFFFF == 0x0001  # HIP default: f16 denormals kept
    execute("s_denorm_mode 3", st)  # f32 keep, f16/f64 flush
    assert st.denorm32 and not st.denorm16_64
    execute("v_add_f16_e32 v0, v1, v2", st)
    assert st.V[0, 0, 0] & 0xFFFF == 0x0000


@pytest.mark.parametrize(("mods", "src_lane"), [
    ("row_xmask:5 row_mask:0xf bank_mask:0xf", lambda ln: (ln & ~15) | ((ln & 15) ^ 5)),
    ("row_share:3 row_mask:0xf bank_mask:0xf", lambda ln: (ln & ~15) + 3),
    ("row_ror:4 row_mask:0xf bank_mask:0xf", lambda ln: (ln & ~15) + (((ln & 15) - 4) & 15)),
    ("row_mirror row_mask:0xf bank_mask:0xf", lambda ln: (ln & ~15) + (15 - (ln & 15))),
    ("dpp8:[7,6,5,4,3,2,1,0]", lambda ln: (ln & ~7) + (7 - (ln & 7))),
])
def test_dpp_lane_patterns(mods: str, src_lane: Callable[[np.ndarray], np.ndarray]) -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[1] = np.arange(32, dtype=np.uint32) * 3
    execute(f"v_mov_b32_dpp v0, v1 {mods}", st)
    lane = np.arange(32)
    assert st.V[0, 0].tolist() == (src_lane(lane) * 3).tolist()


def test_dot2acc_accumulates_into_the_destination_also_in_vopd() -> None:
    from tests.emu.instr import execute, f32bits, state

    st = state()
    st.V[1] = np.array([1.5, -2.0], np.float16).view(np.uint32)[0]
    st.V[2] = np.array([2.0, 0.25], np.float16).view(np.uint32)[0]
    st.V[0] = f32bits(10.0)[0]
    execute("v_dot2acc_f32_f16_e32 v0, v1, v2", st)
    assert st.V[0, 0, 0] == f32bits(12.5)[0]  # 10 + 3 - 0.5
    st.V[3] = f32bits(1.0)[0]
    execute("v_dual_dot2acc_f32_f16 v0, v1, v2 :: v_dual_mov_b32 v4, v3", st)
    assert st.V[0, 0, 0] == f32bits(15.0)[0] and st.V[4, 0, 0] == f32bits(1.0)[0]


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_64_bit_integer_division_and_bit_ops(build: Callable[..., bytes], arch: str) -> None:
    m = Machine(arch)
    mod = m.load(build("more", arch))
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2**63, 32, dtype=np.uint64) * np.uint64(2)
    b = rng.integers(1, 2**40, 32, dtype=np.uint64)
    b[:4] = [1, 3, 2**63 + 5, 7]
    a[0] = 2**64 - 1
    out = m.alloc(8 * 8 * 32)
    m.launch(mod, "i64ops", (1, 1, 1), (32, 1, 1), [buf(m, a), buf(m, b), out])
    g = m.read(out, 8 * 8 * 32).view(np.uint64).reshape(32, 8)
    sa, sb = a.view(np.int64), b.view(np.int64)

    def sdiv(x: int, y: int) -> int:  # C: truncate toward zero
        q = abs(x) // abs(y)
        return (q if (x < 0) == (y < 0) else -q) & (2**64 - 1)
    np.testing.assert_array_equal(g[:, 0], a // b)
    np.testing.assert_array_equal(g[:, 1], a % b)
    np.testing.assert_array_equal(g[:, 2], [sdiv(int(x), int(y)) for x, y in zip(sa, sb,
                                                                                strict=True)])
    np.testing.assert_array_equal(g[:, 3], a * b)
    np.testing.assert_array_equal(g[:, 4], [64 - int(v | 1).bit_length() for v in a])
    np.testing.assert_array_equal(g[:, 5], [bin(int(v)).count("1") for v in a])
    np.testing.assert_array_equal(g[:, 6], a >> (b & np.uint64(63)))
    np.testing.assert_array_equal(g[:, 7], (sa >> (sb & 63)).view(np.uint64))


def test_dot2_bf16_products_in_the_documented_order() -> None:
    from tests.emu.instr import execute, f32bits, state

    st = state()
    bf = lambda x: int(f32bits(x)[0]) >> 16  # noqa: E731  (exact bf16 values)
    st.V[1] = bf(1.5) | (bf(-2.0) << 16)
    st.V[2] = bf(4.0) | (bf(0.75) << 16)
    st.V[3] = f32bits(0.5)[0]
    execute("v_dot2_f32_bf16 v0, v1, v2, v3", st)
    assert st.V[0, 0, 0] == f32bits(0.5 + 6.0 - 1.5)[0]


def test_salu_fmamk_multiplies_by_the_literal_and_fmaak_adds_it() -> None:
    """S_FMAMK_F32 D = S0 * K + S1 and S_FMAAK_F32 D = S0 * S1 + K (K the literal, written
    in the middle for fmamk and last for fmaak).  Distinct values tell the orders apart."""
    from tests.emu.instr import execute, f32bits, state

    st = state(nwaves=2)
    st.S[1] = f32bits(3.0)[0]
    st.S[2] = f32bits(2.0)[0]
    st.S[2, 1] = f32bits(5.0)[0]  # a second wave with another S1
    execute("s_fmamk_f32 s0, s1, 0x42c80000, s2", st, arch="gfx1201")  # 3 * 100 + S1
    assert st.S[0].tolist() == f32bits(302.0, 305.0).tolist()
    execute("s_fmaak_f32 s3, s1, s2, 0x42c80000", st, arch="gfx1201")  # 3 * S1 + 100
    assert st.S[3].tolist() == f32bits(106.0, 115.0).tolist()


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030", "gfx1100"])
def test_sdwa_selects_bytes_and_words(build: Callable[..., bytes], arch: str) -> None:
    """gfx10 runs these through SDWA (src*_sel BYTE_n/WORD_n, sext(), VOPC with selects):
    before the selects were modelled, BYTE_1 x BYTE_1 multiplied whole dwords."""
    m = Machine(arch)
    mod = m.load(build("sdwa", arch))
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    out = m.alloc(4 * 12 * 32)
    m.launch(mod, "sdwa_probe", (1, 1, 1), (32, 1, 1), [out, buf(m, x), buf(m, y)])
    got = m.read(out, 4 * 12 * 32).view(np.uint32).reshape(32, 12).astype(np.int64)
    X, Y = x.astype(np.int64), y.astype(np.int64)

    def sbyte(v: np.ndarray, k: int) -> np.ndarray:
        return ((v >> (8 * k)) & 0xFF ^ 0x80) - 0x80

    def sword(v: np.ndarray, k: int) -> np.ndarray:
        return ((v >> (16 * k)) & 0xFFFF ^ 0x8000) - 0x8000

    m32 = 0xFFFFFFFF
    np.testing.assert_array_equal(got[:, 0], ((X >> 8) & 0xFF) * ((Y >> 8) & 0xFF))
    np.testing.assert_array_equal(got[:, 1], (((X >> 16) & 0xFFFF) * ((Y >> 16) & 0xFFFF)) & m32)
    np.testing.assert_array_equal(got[:, 2], (sbyte(X, 3) * sbyte(Y, 2)) & m32)
    xi = np.where(X >= 2**31, X - 2**32, X)
    np.testing.assert_array_equal(got[:, 3], xi.astype(np.float32).view(np.uint32))
    lo, hi = (X + Y) & 0xFFFF, ((X >> 16) + (Y >> 16)) & 0xFFFF
    np.testing.assert_array_equal(got[:, 4], lo | hi << 16)
    c0, c1 = (X + (Y >> 8)) & 0xFF, ((X >> 8) ^ Y) & 0xFF
    np.testing.assert_array_equal(got[:, 5], c0 | c1 << 8 | (X & 0xFFFF0000))
    np.testing.assert_array_equal(got[:, 6], np.where(((X >> 8) & 0xFF) > ((Y >> 24) & 0xFF),
                                                      7, 9))
    np.testing.assert_array_equal(got[:, 7], np.where(sbyte(X, 2) < sbyte(Y, 0), 11, 13))
    np.testing.assert_array_equal(got[:, 8], (sword(X, 1) * sword(Y, 0)) & m32)
    xy = np.where((X ^ Y) >= 2**31, (X ^ Y) - 2**32, X ^ Y)
    clrsb = np.array([31 - int(v if v >= 0 else ~v).bit_length() for v in xy])
    np.testing.assert_array_equal(got[:, 9], clrsb)
    f = (X & 0xFF).astype(np.float32) * np.float32(0.5) + ((Y >> 16) & 0xFF).astype(np.float32)
    np.testing.assert_array_equal(got[:, 10], f.view(np.uint32))
    want11 = (-((X >> 12).astype(np.float32))).astype(np.int64) & m32
    np.testing.assert_array_equal(got[:, 11], want11)


def test_sdwa_destination_selects_and_unused_bits() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.V[1] = 0x11223344
    st.V[2] = 0x000080F0
    st.V[0] = 0xAABBCCDD
    execute("v_mov_b32_sdwa v0, v1 dst_sel:BYTE_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_3",
            st, "gfx1030")
    assert st.V[0, 0, 0] == 0xAABB11DD
    execute("v_mov_b32_sdwa v0, v1 dst_sel:BYTE_1 dst_unused:UNUSED_PAD src0_sel:BYTE_3",
            st, "gfx1030")
    assert st.V[0, 0, 0] == 0x00001100
    # UNUSED_SEXT: the field's top bit fills the bits above it, the bits below are zero
    execute("v_mov_b32_sdwa v0, v2 dst_sel:BYTE_1 dst_unused:UNUSED_SEXT src0_sel:BYTE_0",
            st, "gfx1030")
    assert st.V[0, 0, 0] == 0xFFFFF000
    execute("v_add_nc_u32_sdwa v0, v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_SEXT "
            "src0_sel:BYTE_0 src1_sel:WORD_0", st, "gfx1030")
    assert st.V[0, 0, 0] == ((0x44 + 0x80F0) << 16) & 0xFFFFFFFF
    execute("v_add_nc_u32_sdwa v0, sext(v2), v1 dst_sel:DWORD dst_unused:UNUSED_PAD "
            "src0_sel:BYTE_0 src1_sel:BYTE_0", st, "gfx1030")
    assert st.V[0, 0, 0] == (-0x10 + 0x44) & 0xFFFFFFFF
    st.V[3] = 0x3C00_0000  # f16 1.0 in the high word
    st.V[4] = 0x4000  # f16 2.0 in the low word
    execute("v_add_f16_sdwa v5, v3, v4 dst_sel:WORD_0 dst_unused:UNUSED_PAD "
            "src0_sel:WORD_1 src1_sel:WORD_0", st, "gfx1030")
    assert st.V[5, 0, 0] == 0x4200  # 3.0


def test_ffbh_i32_counts_bits_equal_to_the_sign() -> None:
    from tests.emu.instr import execute, state

    st = state()
    vals = [0, 0xFFFFFFFF, 1, 0x7FFFFFFF, 0x80000000, 0xFFFF0000, 0x00010000, 0xC0000000]
    st.V[1, 0, :len(vals)] = vals
    execute("v_ffbh_i32_e32 v0, v1", st, "gfx1030")
    assert st.V[0, 0, :len(vals)].tolist() == [0xFFFFFFFF, 0xFFFFFFFF, 31, 1, 1, 16, 15, 2]


def test_an_sdwa_form_without_semantics_is_unsupported_not_run_whole() -> None:
    from tests.emu.instr import execute, state

    with pytest.raises(AssertionError, match="no semantics"):
        execute("v_add_co_ci_u32_sdwa v0, vcc_lo, v1, v2, vcc_lo dst_sel:DWORD "
                "dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:DWORD", state(), "gfx1030")


_EDGE_U32 = [0, 1, 2, 7, 8, 15, 16, 24, 31, 32, 33, 0xFF, 0x100, 0x7FFFFFFF, 0x80000000,
             0x80000001, 0xFFFFFFFE, 0xFFFFFFFF, 0xDEADBEEF, 0x3F800000]


@pytest.mark.parametrize("name", sorted(__import__("hqval.emu.vector",
                                                   fromlist=["_FAST_B32"])._FAST_B32))
@pytest.mark.parametrize("sources", ["vvv", "svv", "vcv", "vvc"])
def test_fast_integer_ops_equal_the_generic_path(name: str, sources: str) -> None:
    """The uint32 forms of the plain integer ops must write the bits the generic
    (int64, masked, typed) path writes, on edge and random operands, with part of exec
    off, for every wave and for an index selection."""
    from hqval.emu.operands import Ctx, parse_operand
    from hqval.emu.vector import OPS, _compute_parts, _fast_b32
    from tests.emu.instr import state

    rng = np.random.default_rng(len(name) * 7 + len(sources))
    spec = OPS[name]
    nsrc = len(spec.srcs)
    operands = []
    for k in range(nsrc):
        kind = sources[k]
        operands.append({"v": f"v{1 + k}", "s": f"s{4 + k}", "c": "0x1f"}[kind]
                        if kind != "c" or k else "v1")
    for constant in ("0x1f", "17", "0", "-1", "0x80000000"):
        text_ops = ["v0", *[constant if o == "0x1f" else o for o in operands]]
        ops = [parse_operand(o) for o in text_ops]
        fast = _fast_b32(name, name + "_e64", ops, {})
        assert fast is not None
        compute, write, _ = _compute_parts(name, spec, ops, {}, Ctx("gfx1100", "t", 11, {}),
                                           32)
        a, b = state(3, 8, exec_mask=0xF0F0FFFF), state(3, 8, exec_mask=0xF0F0FFFF)
        vals = np.where(rng.random((8, 3, 32)) < 0.5,
                        rng.choice(np.array(_EDGE_U32, np.uint32), (8, 3, 32)),
                        rng.integers(0, 2**32, (8, 3, 32), dtype=np.uint64).astype(np.uint32))
        svals = rng.choice(np.array(_EDGE_U32, np.uint32), (8, 3))
        for st in (a, b):
            st.V[:] = vals
            st.S[4:12] = svals
        for w in (slice(None), np.array([2, 0])):
            fast(a, w)
            write(b, w, compute(b, w), None)
            np.testing.assert_array_equal(a.V, b.V, err_msg=f"{name} {text_ops}")


def test_true16_half_writes_keep_the_other_half() -> None:
    """A 16-bit result written to a named half (true16 ``v3.l`` / ``v3.h``, as clang-22
    emits for gfx11 and gfx12: ``v_cvt_f16_f32 v42.h, v42`` then ``v_cvt_f16_f32 v42.l,
    v43`` packs two halves into one VGPR) leaves the other half as it was; written to the
    whole VGPR (``v3``: gfx10, fake16) it still clears the high half.  Once the ``.l``
    write cleared the ``.h`` half just written: the engine's gfx11 MoE grouped GEMM built
    with clang-22 missed its oracle by 1.45 (prefill_parity)."""
    from tests.emu.instr import execute, f32bits, state

    def f16bits(x: float) -> int:
        return int(np.array(x, np.float16).view(np.uint16))

    st = state()
    st.V[1] = f32bits(1.5)[0]
    st.V[2] = f32bits(-2.25)[0]
    st.V[3] = 0xDEADBEEF
    execute("v_cvt_f16_f32_e32 v3.h, v1", st)
    assert (st.V[3] == (f16bits(1.5) << 16 | 0xBEEF)).all()
    execute("v_cvt_f16_f32_e32 v3.l, v2", st)
    assert (st.V[3] == (f16bits(1.5) << 16 | f16bits(-2.25))).all()
    # the whole-register (fake16) form still zeroes the high half: no half is kept there
    execute("v_cvt_f16_f32_e32 v3, v2", st)
    assert (st.V[3] == f16bits(-2.25)).all()
    # and a true16 .l write does not keep a stale low half
    st.V[3] = 0x12345678
    execute("v_cvt_f16_f32_e32 v3.l, v1", st)
    assert (st.V[3] == (0x1234 << 16 | f16bits(1.5))).all()
