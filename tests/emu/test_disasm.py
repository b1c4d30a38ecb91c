"""disasm: parsing llvm-objdump's text (operands, modifiers, VOPD halves, encodings)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from hqval.emu.disasm import disassemble, parse_text, split_top


def test_split_top_keeps_brackets_together() -> None:
    assert split_top("v1, v[2:3], op_sel:[0,1]") == ["v1", "v[2:3]", "op_sel:[0,1]"]


def test_operands_and_trailing_modifiers() -> None:
    ins = parse_text("global_load_b128 v[7:10], v[1:2], off offset:-28")
    assert ins.mnemonic == "global_load_b128"
    assert ins.operands == ["v[7:10]", "v[1:2]", "off"]
    assert ins.modifiers == {"offset": "-28"}
    mix = parse_text("v_fma_mix_f32 v17, v16, v17, v16 op_sel:[0,0,1] op_sel_hi:[1,0,1]")
    assert mix.operands == ["v17", "v16", "v17", "v16"]
    assert mix.modifiers == {"op_sel": "[0,0,1]", "op_sel_hi": "[1,0,1]"}


def test_vopd_has_two_halves() -> None:
    ins = parse_text("v_dual_mov_b32 v4, 0 :: v_dual_lshlrev_b32 v1, 5, v0")
    assert ins.mnemonic == "v_dual_mov_b32" and ins.operands == ["v4", "0"]
    assert ins.second is not None
    assert ins.second.mnemonic == "v_dual_lshlrev_b32"
    assert ins.second.operands == ["v1", "5", "v0"]


def test_disassembly_of_a_real_code_object(build: Callable[[str, str], bytes]) -> None:
    listing = disassemble(build("ops", "gfx1100"), "gfx1100")
    assert {"fma_f32", "diverge", "wmma_gfx11"} <= set(listing)
    body = listing["fma_f32"]
    assert "s_endpgm" in [i.mnemonic for i in body]
    addrs = [i.addr for i in body]
    assert addrs == sorted(addrs)
    # sizes come from the encoding words: consecutive instructions abut
    for a, b in itertools.pairwise(body):
        assert a.addr + a.size == b.addr


def test_split_without_nesting_equals_the_bracket_aware_scan() -> None:
    """split_top takes str.split when nothing nests; the pieces must be the scan's."""
    import random

    from hqval.emu.disasm import _split_nested, split_top

    rng = random.Random(3)
    alphabet = "v0s1, :[]()x"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        for sep in (",", " "):
            assert split_top(text, sep) == _split_nested(text, sep), (text, sep)
    assert split_top("v1, v[2:3],  s4 offset:8", ",") == ["v1", "v[2:3]", "s4 offset:8"]
    assert split_top("a  b ", " ") == ["a", "", "b"]


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_one_whole_object_disassembly_equals_per_symbol_runs(
        build: Callable[[str, str], bytes], arch: str) -> None:
    """Module.program splits one llvm-objdump run of the whole code object by symbol;
    each symbol's instructions must be those of a run restricted to that symbol."""
    from hqval.emu.codeobject import CodeObject

    raw = build("ops", arch)
    whole = disassemble(raw, arch)
    for sym in CodeObject.parse(raw).functions:
        alone = disassemble(raw, arch, [sym])[sym]
        assert [(i.addr, i.words, i.text) for i in whole[sym]] == \
            [(i.addr, i.words, i.text) for i in alone], sym
