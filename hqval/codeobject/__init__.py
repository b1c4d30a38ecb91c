"""THE reader of AMDGPU code objects: ELF sections and symbols, the metadata note (through
the msgpack package), kernel descriptors and disassembly (one llvm-objdump, one
``Instruction``), decoded once per (object sha256, disassembler identity) and kept in
process and on disk (``<cache>/disasm-v1``).

    co = hqval.codeobject.load(path_or_bytes)
    co.target, co.processor, co.kernels["k"].descriptor, co.kernels["k"].metadata
    co.disassembly("k") -> list[Instruction]

The toolchain, the audit, the cost model and the emulator all read code objects here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hqval.codeobject import cache as _cache
from hqval.codeobject import elf
from hqval.codeobject.descriptor import KernelDescriptor
from hqval.codeobject.disasm import (
    CLASSES,
    Instruction,
    find_llvm_tool,
    find_objdump,
    parse_lines,
    parse_text,
    regs,
    split_top,
    symbol_lines,
    tool_identity,
)
from hqval.codeobject.elf import elf_symbols
from hqval.codeobject.errors import CodeObjectError
from hqval.codeobject.metadata import NT_AMDGPU_METADATA
from hqval.codeobject.metadata import find as _find_metadata
from hqval.codeobject.metadata import unpack as unpack_msgpack

__all__ = ["CLASSES", "CodeObject", "CodeObjectError", "Instruction", "KernelDescriptor",
           "KernelInfo", "elf_symbols", "find_llvm_tool", "find_objdump", "load",
           "parse_lines", "parse_text", "regs", "split_top", "symbol_lines", "tool_identity",
           "unpack_msgpack"]


@dataclass(frozen=True)
class KernelInfo:
    name: str
    symbol_address: int  # address of the code
    descriptor: KernelDescriptor
    metadata: dict[str, Any]

    @property
    def args(self) -> list[dict[str, Any]]:
        return list(self.metadata.get(".args", []))

    @property
    def kernarg_size(self) -> int:
        return int(self.metadata.get(".kernarg_segment_size", self.descriptor.kernarg_size))

    @property
    def wavefront_size(self) -> int:
        return int(self.metadata.get(".wavefront_size", 32 if self.descriptor.wave32 else 64))


@dataclass
class CodeObject:
    """A parsed code object: text bytes, symbols, kernels by name, the target string."""

    raw: bytes
    target: str
    sha256: str = ""
    kernels: dict[str, KernelInfo] = field(default_factory=dict)
    text_address: int = 0
    text: bytes = b""
    # every function symbol (kernels and the device functions they may call): name -> address
    functions: dict[str, int] = field(default_factory=dict)
    symbols: dict[str, int] = field(default_factory=dict)
    sections: list[elf.Section] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    _lines: dict[str, dict[str, list[str]]] = field(default_factory=dict, repr=False)
    _code: dict[tuple[str, str], list[Instruction]] = field(default_factory=dict, repr=False)
    _identity: str = field(default="", repr=False)

    @classmethod
    def parse(cls, raw: bytes) -> CodeObject:
        raw = bytes(raw)
        secs = elf.sections(raw)
        if elf.machine(raw) != elf.EM_AMDGPU:
            raise CodeObjectError(f"ELF machine {elf.machine(raw)} is not AMDGPU "
                                  f"({elf.EM_AMDGPU})")
        metadata = _find_metadata(elf.notes(raw, secs))
        symbols: dict[str, int] = {}
        functions: dict[str, int] = {}
        for s in elf.symbols(raw, secs):
            symbols[s.name] = s.value
            if s.type == elf.STT_FUNC:
                functions[s.name] = s.value
        text = next((s for s in secs if s.name == ".text"), None)
        co = cls(raw=raw, target=str(metadata.get("amdhsa.target", "")),
                 sha256=hashlib.sha256(raw).hexdigest(),
                 text_address=text.address if text else 0,
                 text=raw[text.offset:text.offset + text.size] if text else b"",
                 functions=functions, symbols=symbols, sections=secs, metadata=metadata)
        for meta in metadata.get("amdhsa.kernels", []):
            sym = meta.get(".symbol", meta[".name"] + ".kd")
            if sym not in symbols:
                raise CodeObjectError(f"kernel descriptor symbol {sym!r} missing from the "
                                      "symbol table")
            kd = KernelDescriptor.parse(elf.read_at(raw, secs, symbols[sym], 64))
            co.kernels[meta[".name"]] = KernelInfo(
                name=meta[".name"], symbol_address=symbols[sym] + kd.entry_offset,
                descriptor=kd, metadata=meta)
        return co

    @property
    def processor(self) -> str:
        """The processor the object was built for (``gfx1100``), from ``amdhsa.target``."""
        return self.target.rpartition("--")[2].split(":")[0]

    def _symbol_lines(self, mcpu: str) -> dict[str, list[str]]:
        if mcpu not in self._lines:
            self._lines[mcpu] = symbol_lines(_cache.disassembly_text(
                self.raw, self.sha256, mcpu, self.cache_dir))
        return self._lines[mcpu]

    def disassembly(self, symbol: str, mcpu: str | None = None) -> list[Instruction]:
        """The instructions of function ``symbol`` (a kernel or a device function), decoded
        once per object and disassembler; a new list each call (the instructions are
        shared: do not change them)."""
        cpu = mcpu or self.processor
        key = (cpu, symbol)
        if key not in self._code:
            self._code[key] = parse_lines(self.disassembly_lines(symbol, cpu))
        return list(self._code[key])

    def disassembly_lines(self, symbol: str, mcpu: str | None = None) -> list[str]:
        """The disassembler's lines under function ``symbol``, unparsed (what
        ``disassembly`` parses: each line's address, encoding and text)."""
        lines = self._symbol_lines(mcpu or self.processor)
        if symbol not in lines:
            raise CodeObjectError(f"{symbol!r} has no code in the disassembly (has: "
                                  f"{', '.join(sorted(lines))})")
        return lines[symbol]

    def disassembled_symbols(self, mcpu: str | None = None) -> list[str]:
        return sorted(self._symbol_lines(mcpu or self.processor))

    @property
    def code_identity(self) -> str:
        """A sha256 of everything in the object apart from the target it names: the ELF
        header without ``e_flags`` (the processor), every section's header and bytes, every
        note but the metadata's, and the metadata without ``amdhsa.target`` (the kernels'
        descriptors, arguments and registers included).  Two arches' objects with one
        code identity hold byte-identical text, kernel descriptors and metadata."""
        if not self._identity:
            h = hashlib.sha256(b"code-identity-v1")
            h.update(self.raw[:48] + self.raw[52:64])  # e_flags: bytes 48-51
            for sec in self.sections:
                h.update(repr((sec.name, sec.type, sec.address, sec.size, sec.link,
                               sec.entsize)).encode())
                if sec.type not in (elf.SHT_NOTE, elf.SHT_NOBITS):
                    h.update(self.raw[sec.offset:sec.offset + sec.size])
            for note in elf.notes(self.raw, self.sections):  # but the metadata's own
                if (note.name, note.type) != (b"AMDGPU", NT_AMDGPU_METADATA):
                    h.update(repr((note.name, note.type)).encode() + note.desc)
            meta = {k: v for k, v in self.metadata.items() if k != "amdhsa.target"}
            h.update(json.dumps(meta, sort_keys=True, default=repr).encode())
            self._identity = h.hexdigest()
        return self._identity


_LOADED: dict[str, CodeObject] = {}
_LOADED_LIMIT = 512


def load(source: str | Path | bytes, *, cache_dir: str | Path | None = None) -> CodeObject:
    """The parsed code object of a file or of bytes, one per content per process."""
    raw = bytes(source) if isinstance(source, bytes | bytearray | memoryview) else \
        _read(Path(source))
    digest = hashlib.sha256(raw).hexdigest()
    co = _LOADED.get(digest)
    if co is None:
        co = CodeObject.parse(raw)
        if len(_LOADED) >= _LOADED_LIMIT:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[digest] = co
    if cache_dir is not None and co.cache_dir is None:
        co.cache_dir = str(cache_dir)
    return co


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CodeObjectError(f"cannot read code object {path}: {exc.strerror or exc}") from exc
