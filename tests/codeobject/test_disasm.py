"""hqval.codeobject.disasm: parsing llvm-objdump text (operands, modifiers, VOPD, encodings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval.codeobject import Instruction, parse_text, split_top


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


def test_split_without_nesting_equals_the_bracket_aware_scan() -> None:
    """split_top takes str.split when nothing nests; the pieces must be the scan's."""
    import random

    from hqval.codeobject.disasm import _split_nested

    rng = random.Random(3)
    alphabet = "v0s1, :[]()x"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        for sep in (",", " "):
            assert split_top(text, sep) == _split_nested(text, sep), (text, sep)
    assert split_top("v1, v[2:3],  s4 offset:8", ",") == ["v1", "v[2:3]", "s4 offset:8"]
    assert split_top("a  b ", " ") == ["a", "", "b"]


def test_one_instruction_class_for_the_audit_and_the_emulator() -> None:
    """The classes the audit and cost model count by: v_wmma is not VALU, a dual-issue
    pair is two VALU ops, loads and branches are known, registers are named."""
    assert parse_text("v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]").klass \
        == "wmma"
    pair = parse_text("v_dual_mov_b32 v4, 0 :: v_dual_lshlrev_b32 v1, 5, v0")
    assert pair.klass == "valu" and pair.valu_ops == 2
    ld = Instruction.of(8, "s_load_b64", "s[0:1], s[4:5], 0x10")
    assert ld.klass == "smem" and ld.is_load and ld.imm_offset == 0x10
    assert ld.dst_src == (("s0", "s1"), ("s4", "s5"))
    g = parse_text("global_load_b32 v1, v[2:3], off offset:136")
    assert g.imm_offset == 136 and g.operand_text == "v1, v[2:3], off offset:136"
    back = parse_text("s_branch 65533", 0x100, [0xBFA0FFFD])  # -3 words after 0x104
    assert back.is_branch and back.target == 0x100 + 4 - 12


def test_one_text_at_two_addresses_parses_to_independent_instructions() -> None:
    """The fields of a text are split once; each instruction still has its own operand
    list and modifier dict, and a branch's target follows its own address and words."""
    a = parse_text("global_load_b32 v1, v[2:3], off offset:4", 0x100, [1, 2])
    b = parse_text("global_load_b32 v1, v[2:3], off offset:4", 0x200, [1, 2])
    assert (a.operands, a.modifiers) == (b.operands, b.modifiers)
    a.operands.append("x")
    a.modifiers["offset"] = "8"
    assert b.operands == ["v1", "v[2:3]", "off"] and b.modifiers == {"offset": "4"}
    again = parse_text("global_load_b32 v1, v[2:3], off offset:4", 0x300, [1, 2])
    assert again.operands == ["v1", "v[2:3]", "off"] and again.modifiers == {"offset": "4"}
    near = parse_text("s_cbranch_scc1 3", 0x100, [0xBF850003])
    far = parse_text("s_cbranch_scc1 3", 0x200, [0xBF850003])
    back = parse_text("s_cbranch_scc1 65535", 0x200, [0xBF85FFFF])
    assert (near.target, far.target, back.target) == (0x110, 0x210, 0x200)


def test_parse_lines_leaves_the_collector_as_it_found_it() -> None:
    """The parse runs with the cyclic collector paused (it makes only acyclic objects)
    and restores it: on stays on, off stays off, also when the parse raises; the result
    equals a parse with the collector on."""
    import gc

    import pytest

    from hqval.codeobject.disasm import parse_lines

    lines = ["  s_mov_b32 s0, 1  // 000000001000: BE800081",
             "  v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v2, v3  // 000000001004: CA100101 00020103",
             "  s_cbranch_scc1 1  // 000000001010: BF850001",
             "  s_endpgm  // 000000001014: BFB00000",
             "  s_code_end  // 000000001018: BF9F0000"]
    seen: list[bool] = []
    import hqval.codeobject.disasm as disasm

    real = disasm._LINE

    class Spy:  # the line pattern, noting whether the collector is on as it matches
        def match(self, line: str) -> object:
            seen.append(gc.isenabled())
            return real.match(line)

    assert gc.isenabled()
    reference = [(i.addr, i.text, i.words, i.operands, i.modifiers, i.target)
                 for i in parse_lines(lines)]
    disasm._LINE = Spy()  # type: ignore[assignment]
    try:
        got = parse_lines(lines)
        assert gc.isenabled() and seen and not any(seen)
        assert [(i.addr, i.text, i.words, i.operands, i.modifiers, i.target)
                for i in got] == reference
        assert got[1].second is not None and got[1].second.text == "v_dual_mov_b32 v2, v3"
        gc.disable()
        try:
            parse_lines(lines)
            assert not gc.isenabled()
        finally:
            gc.enable()
        with pytest.raises(TypeError):
            parse_lines([None])  # type: ignore[list-item]
        assert gc.isenabled()
    finally:
        disasm._LINE = real


def _tool(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{text}'\n")
    path.chmod(0o755)
    return path


def test_the_disassembler_is_the_compilers_own_llvm(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's layout: /usr/bin/clang-22 -> ../lib/llvm-22/bin/clang, and /usr/bin/llvm-objdump
    the distribution's default LLVM (14 on Debian 12, no gfx11/12).  The tool is
    llvm-objdump-22 beside the compiler, else the one in the compiler's own installation,
    never the unversioned default beside a versioned compiler."""
    import os

    from hqval.codeobject import disasm

    real = _tool(tmp_path / "lib" / "llvm-22" / "bin" / "clang", "Debian clang version 22.1.8")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(real, bindir / "clang-22")
    _tool(bindir / "llvm-objdump", "LLVM version 14.0.6")
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("HQVAL_CLANG", "clang-22")
    monkeypatch.delenv("ROCM_PATH", raising=False)
    disasm.find_llvm_tool.cache_clear()
    try:
        own = _tool(tmp_path / "lib" / "llvm-22" / "bin" / "llvm-objdump", "LLVM version 22.1.8")
        assert disasm.find_llvm_tool("llvm-objdump") == str(own)
        disasm.find_llvm_tool.cache_clear()
        versioned = _tool(bindir / "llvm-objdump-22", "LLVM version 22.1.8")
        assert disasm.find_llvm_tool("llvm-objdump") == str(versioned)
        # without clang-22's own, a versioned LLVM on PATH before the LLVM 14 default that
        # sits beside the compiler (which had been taken first)
        versioned.unlink()
        own.unlink()
        v19 = _tool(bindir / "llvm-objdump-19", "LLVM version 19.1.7")
        disasm.find_llvm_tool.cache_clear()
        assert disasm.find_llvm_tool("llvm-objdump") == str(v19)
    finally:
        disasm.find_llvm_tool.cache_clear()
