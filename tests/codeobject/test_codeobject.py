"""hqval.codeobject: ELF, msgpack metadata, kernel descriptors, errors, and the one
disassembly decoded once per (object, disassembler)."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest

import hqval.codeobject as cobj
from hqval.codeobject import CodeObject, CodeObjectError, elf_symbols, load, unpack_msgpack
from hqval.codeobject import cache as dcache


def test_metadata_is_decoded_by_the_msgpack_package() -> None:
    value = {"a": [1, -1, "x"], "b": True, "c": 300, "d": 1.5, "e": b"\x00\x01"}
    assert unpack_msgpack(msgpack.packb(value) + b"\0\0\0") == value
    with pytest.raises(CodeObjectError, match="trailing bytes"):
        unpack_msgpack(msgpack.packb(value) + b"\x01")
    with pytest.raises(CodeObjectError, match="not valid msgpack"):
        unpack_msgpack(msgpack.packb(value)[:5])


def test_kernel_descriptor_of_compiled_kernels(build: Callable[[str, str], bytes]) -> None:
    co = CodeObject.parse(build("ops", "gfx1100"))
    assert co.target.endswith("gfx1100") and co.processor == "gfx1100"
    k = co.kernels["lds_reduce"]
    assert k.descriptor.wave32
    assert k.descriptor.group_segment_fixed_size == 512  # float s[128]
    assert ("kernarg_segment_ptr", 2) in k.descriptor.user_sgprs
    assert k.descriptor.workgroup_id_enabled[0]
    assert k.descriptor.float_denorm_mode_32 == 3  # HIP default: f32 denormals kept
    assert [a[".size"] for a in k.args][:2] == [8, 8]
    assert {"lds_reduce", "lds_reduce.kd"} <= elf_symbols(co.raw)
    gfx10 = CodeObject.parse(build("ops", "gfx1010")).kernels["lds_reduce"]
    assert gfx10.descriptor.user_sgprs[0][0] == "private_segment_buffer"


def test_not_an_elf_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CodeObjectError, match="not a 64-bit ELF"):
        CodeObject.parse(b"hello world, not a code object" * 4)
    with pytest.raises(ValueError, match="not a 64-bit ELF"):
        elf_symbols(b"\x7fELF\x01" + bytes(80))
    with pytest.raises(CodeObjectError, match="cannot read code object"):
        load(tmp_path / "missing.co")


def test_damaged_tables_are_errors_not_crashes(build: Callable[[str, str], bytes]) -> None:
    raw = bytearray(build("ops", "gfx1100"))
    raw[0x3C:0x3E] = (0xFFFF).to_bytes(2, "little")  # e_shnum far past the file
    with pytest.raises(CodeObjectError, match="damaged ELF section table"):
        CodeObject.parse(bytes(raw))


def test_disassembly_of_a_real_code_object(build: Callable[[str, str], bytes]) -> None:
    co = load(build("ops", "gfx1100"))
    assert {"fma_f32", "diverge", "wmma_gfx11"} <= set(co.disassembled_symbols())
    body = co.disassembly("fma_f32")
    assert body[-1].mnemonic == "s_endpgm"  # the alignment padding after it is dropped
    for a, b in itertools.pairwise(body):  # sizes come from the encoding words
        assert a.addr + a.size == b.addr
    wmma = [i for i in co.disassembly("wmma_gfx11") if i.mnemonic.startswith("v_wmma")]
    assert wmma and all(i.klass == "wmma" and i.valu_ops == 0 for i in wmma)
    with pytest.raises(CodeObjectError, match="no code in the disassembly"):
        co.disassembly("no_such_kernel")


def test_branch_targets_come_from_the_encoding(build: Callable[[str, str], bytes]) -> None:
    """Every branch's target is an instruction of its function, and equals the address
    llvm-objdump's own symbolised comment gives."""
    co = load(build("ops", "gfx1100"))
    text = dcache.disassembly_text(co.raw, co.sha256, "gfx1100", None)
    for sym in ("diverge", "fma_f32"):
        body = co.disassembly(sym)
        addrs = {i.addr for i in body}
        for ins in body:
            if ins.is_branch:
                assert ins.target in addrs, ins.text
                line = next(ln for ln in text.splitlines() if f"{ins.addr:X}:" in ln.upper())
                off = line.rsplit("+", 1)[-1].rstrip(">") if "+" in line else "0"
                assert ins.target == body[0].addr + int(off, 16), line


def test_whole_object_disassembly_equals_per_symbol_runs(
        build: Callable[[str, str], bytes]) -> None:
    """The one decode of the whole object, split by symbol, is what a run restricted to
    each symbol gives."""
    raw = build("ops", "gfx1201")
    co = load(raw)
    tool = cobj.find_objdump()
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(raw)
        f.flush()
        for sym in sorted(co.functions)[:6]:
            out = subprocess.run([tool, "-d", f"--disassemble-symbols={sym}",
                                  "--mcpu=gfx1201", f.name], capture_output=True, text=True,
                                 check=True).stdout
            alone = cobj.parse_lines(cobj.symbol_lines(out)[sym])
            assert [(i.addr, i.words, i.text) for i in co.disassembly(sym)] == \
                [(i.addr, i.words, i.text) for i in alone], sym


def test_decoded_once_and_kept_on_disk(build: Callable[[str, str], bytes], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    raw = build("ops", "gfx1030")
    runs: list[str] = []
    real = dcache.objdump_text

    def counting(data: bytes, mcpu: str, tool: str | None = None) -> str:
        runs.append(mcpu)
        return real(data, mcpu, tool)

    monkeypatch.setattr(dcache, "objdump_text", counting)
    monkeypatch.setattr(dcache, "_TEXT", {})
    monkeypatch.setattr(cobj, "_LOADED", {})
    first = load(raw, cache_dir=tmp_path).disassembly("fma_f32")
    assert load(raw, cache_dir=tmp_path).disassembly("diverge") and runs == ["gfx1030"]
    files = list((tmp_path / "disasm-v1").rglob("*.json"))
    assert len(files) == 1
    # a new process (empty in-process caches) reads the disk entry, not the tool
    monkeypatch.setattr(dcache, "_TEXT", {})
    monkeypatch.setattr(cobj, "_LOADED", {})
    again = load(raw, cache_dir=tmp_path).disassembly("fma_f32")
    assert runs == ["gfx1030"] and [i.text for i in again] == [i.text for i in first]
    # a damaged entry is decoded again, never believed
    entry = json.loads(files[0].read_text())
    files[0].write_text(json.dumps({**entry, "text": entry["text"].replace("v_", "w_")}))
    monkeypatch.setattr(dcache, "_TEXT", {})
    monkeypatch.setattr(cobj, "_LOADED", {})
    assert [i.text for i in load(raw, cache_dir=tmp_path).disassembly("fma_f32")] == \
        [i.text for i in first]
    assert runs == ["gfx1030", "gfx1030"]


def test_another_disassembler_is_another_key(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    import shutil

    real = shutil.which("llvm-objdump-19")
    if real is None:
        pytest.skip("needs llvm-objdump-19")
    copy = tmp_path / "llvm-objdump"
    copy.write_bytes(Path(real).read_bytes())
    copy.chmod(0o755)
    k1 = dcache.key("0" * 64, "gfx1100", cobj.tool_identity(real))
    k2 = dcache.key("0" * 64, "gfx1100", cobj.tool_identity(str(copy)))
    assert k1 != k2
    monkeypatch.setenv("HQVAL_OBJDUMP", str(tmp_path / "nope"))
    with pytest.raises(CodeObjectError, match="HQVAL_OBJDUMP"):
        cobj.find_objdump()


def _manifest_object(kernel: str, arch: str) -> CodeObject:
    from hqval.manifest import load_manifest
    from hqval.toolchain import compile_kernel

    res = compile_kernel(load_manifest(None).by_name(kernel), arch)
    assert res.ok and res.code_object is not None, res.message
    return load(res.code_object.read_bytes())


def test_code_identity_is_everything_but_the_target() -> None:
    """gfx1200 and gfx1201 objects of one kernel differ in bytes (the target in e_flags
    and the metadata) and share a code identity; another generation's build, one changed
    byte of text, of a kernel descriptor or of the metadata each make another."""
    a = _manifest_object("gemv_hfq4g256_r1", "gfx1200")
    b = _manifest_object("gemv_hfq4g256_r1", "gfx1201")
    assert a.raw != b.raw and a.processor == "gfx1200" and b.processor == "gfx1201"
    assert a.code_identity == b.code_identity
    assert _manifest_object("gemv_hfq4g256_r1", "gfx1100").code_identity != a.code_identity

    def flipped(offset: int) -> str:
        raw = bytearray(a.raw)
        raw[offset] ^= 1
        return CodeObject.parse(bytes(raw)).code_identity

    text = next(s for s in a.sections if s.name == ".text")
    assert flipped(text.offset + 4) != a.code_identity
    rodata = next(s for s in a.sections if s.name == ".rodata")  # the kernel descriptors
    assert flipped(rodata.offset + 44) != a.code_identity  # a descriptor's rsrc3
    meta = dict(a.metadata)
    meta["amdhsa.kernels"] = [{**k, ".sgpr_count": k[".sgpr_count"] + 1}
                              for k in meta["amdhsa.kernels"]]
    changed = CodeObject(raw=a.raw, target=a.target, sections=a.sections, metadata=meta)
    assert changed.code_identity != a.code_identity
    renamed = CodeObject(raw=a.raw, target=a.target, sections=a.sections,
                         metadata={**a.metadata, "amdhsa.target": b.target})
    assert renamed.code_identity == a.code_identity
