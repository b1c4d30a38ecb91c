"""operands: operand syntax and constant bit patterns per source width."""

from __future__ import annotations

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
