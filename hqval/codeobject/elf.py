"""The ELF64 container of an AMDGPU code object: section headers, symbols and notes, read
from the bytes without any tool."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hqval.codeobject.errors import CodeObjectError

EM_AMDGPU = 224
SHT_SYMTAB, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 7, 8, 11
STT_FUNC = 2


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    address: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    type: int  # STT_*
    bind: int  # STB_*
    section: int


@dataclass(frozen=True)
class Note:
    name: bytes
    type: int
    desc: bytes


def _check(raw: bytes) -> None:
    if len(raw) < 64 or raw[:4] != b"\x7fELF" or raw[4] != 2:
        raise CodeObjectError("not a 64-bit ELF code object (expected an AMDGPU .co / .hsaco)")


def sections(raw: bytes) -> list[Section]:
    """Every section header, names resolved through the section-name string table."""
    _check(raw)
    try:
        (shoff,) = struct.unpack_from("<Q", raw, 40)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", raw, 58)
        heads = [struct.unpack_from("<IIQQQQIIQQ", raw, shoff + k * shentsize)
                 for k in range(shnum)]
        strtab_off = heads[shstrndx][4] if shstrndx < len(heads) else 0
        out = []
        for name, typ, _flags, addr, off, size, link, _info, _al, entsize in heads:
            start = strtab_off + name
            out.append(Section(raw[start:raw.index(b"\0", start)].decode(), typ, addr, off,
                               size, link, entsize))
        return out
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise CodeObjectError(f"damaged ELF section table ({exc})") from exc


def machine(raw: bytes) -> int:
    _check(raw)
    return int(struct.unpack_from("<H", raw, 18)[0])


def symbols(raw: bytes, secs: list[Section] | None = None) -> list[Symbol]:
    """Every entry of the symbol tables (SYMTAB and DYNSYM), empty names left out."""
    secs = sections(raw) if secs is None else secs
    out: list[Symbol] = []
    try:
        for sh in secs:
            if sh.type not in (SHT_SYMTAB, SHT_DYNSYM):
                continue
            strtab = secs[sh.link]
            entsize = sh.entsize or 24
            for pos in range(sh.offset, sh.offset + sh.size, entsize):
                st_name, st_info, _oth, shndx, value, size = struct.unpack_from(
                    "<IBBHQQ", raw, pos)
                if not st_name:
                    continue
                s0 = strtab.offset + st_name
                out.append(Symbol(raw[s0:raw.index(b"\0", s0)].decode(), value, size,
                                  st_info & 0xF, st_info >> 4, shndx))
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise CodeObjectError(f"damaged ELF symbol table ({exc})") from exc
    return out


def notes(raw: bytes, secs: list[Section] | None = None) -> list[Note]:
    """The entries of every SHT_NOTE section (name, type, descriptor bytes)."""
    secs = sections(raw) if secs is None else secs
    out: list[Note] = []
    for sh in secs:
        if sh.type != SHT_NOTE:
            continue
        data = raw[sh.offset:sh.offset + sh.size]
        i = 0
        while i + 12 <= len(data):
            namesz, descsz, typ = struct.unpack_from("<III", data, i)
            i += 12
            name = data[i:i + namesz].rstrip(b"\0")
            i += (namesz + 3) & ~3
            out.append(Note(name, typ, data[i:i + descsz]))
            i += (descsz + 3) & ~3
    return out


def read_at(raw: bytes, secs: list[Section], vaddr: int, n: int) -> bytes:
    """``n`` bytes at virtual address ``vaddr`` of a loaded (non-NOBITS) section."""
    for s in secs:
        if s.type != SHT_NOBITS and s.address and s.address <= vaddr < s.address + s.size:
            return raw[s.offset + vaddr - s.address: s.offset + vaddr - s.address + n]
    raise CodeObjectError(f"address 0x{vaddr:x} is in no loaded section")


def elf_symbols(raw: bytes) -> set[str]:
    """Names in the ELF64 symbol table of a code object (kernels and their ``.kd``)."""
    try:
        return {s.name for s in symbols(raw)}
    except CodeObjectError as exc:
        raise ValueError(str(exc)) from exc
