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


def _values() -> list[object]:
    """Values of every kind an instruction's result may be: integer arrays out of uint32's
    range and negative, floats with NaN and out-of-range values (a warning), bools,
    narrower and wider dtypes, broadcast shapes, numpy and Python scalars."""
    shape = (2, 32)
    return [np.full(shape, -1, np.int64), np.full(shape, 2**40 + 7, np.int64),
            np.full(shape, 2**64 - 1, np.uint64), np.full(shape, np.nan),
            np.full(shape, -3.7), np.full(shape, 1e20), np.ones(shape, bool),
            np.full(shape, 1.5, np.float16), np.full(shape, -2, np.int16),
            np.full((2, 1), 9, np.uint32), np.full((1, 32), -9, np.int32),
            np.arange(64, dtype=np.int64).reshape(shape) - 30,
            np.float32(2.5), np.uint32(7), np.int64(-5), np.uint64(2**63),
            -1, 5, 2**40, 3.5, True, np.zeros((3, 32), np.uint32)]


@pytest.mark.parametrize("k", range(len(_values())))
def test_full_exec_write_casts_as_the_masked_copy(k: int) -> None:
    """The every-lane-on write (an assignment) leaves the same bits, warnings and errors as
    the masked copy (np.copyto, casting="unsafe") it stands for, for every kind of value."""
    import warnings

    from hqval.emu.operands import EXEC, WaveState, vwrite, vwrite_regs

    val = _values()[k]

    def outcome(write: object) -> tuple[object, ...]:
        st = WaveState(2, 8)
        st.S[EXEC] = np.array([0xFFFFFFFF, 0xFFFFFFFF], np.uint32)
        st.set_exec(slice(None))
        assert st.full
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                write(st)  # type: ignore[operator]
            except (ValueError, TypeError, OverflowError) as exc:
                return (type(exc).__name__, [str(x.message) for x in seen])
        return (st.V.tobytes(), [str(x.message) for x in seen])

    def copied(st: WaveState) -> None:
        np.copyto(st.V[3], val, casting="unsafe", where=np.ones((2, 32), bool))

    assert outcome(lambda st: vwrite(st, slice(None), 3, val)) == outcome(copied)
    if isinstance(val, np.ndarray) and val.shape == (2, 32):
        vals = np.stack([val, val], axis=-1)

        def copied_regs(st: WaveState) -> None:
            np.copyto(st.V[3:5], vals.transpose(2, 0, 1), casting="unsafe",
                      where=np.ones((1, 2, 32), bool))

        assert outcome(lambda st: vwrite_regs(st, slice(None), 3, vals)) == outcome(copied_regs)
