"""Code object notes, disassembly and the ISA audit rules."""

from __future__ import annotations

import struct


def elf_symbols(data: bytes) -> set[str]:
    """Names in the ELF64 symbol table of a code object (kernels and their ``.kd``)."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not an ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    names: set[str] = set()
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        str_off = strtab[4]
        off, size, entsize = sh[4], sh[5], sh[9] or 24
        for pos in range(off, off + size, entsize):
            name_idx = struct.unpack_from("<I", data, pos)[0]
            if name_idx:
                end = data.index(b"\x00", str_off + name_idx)
                names.add(data[str_off + name_idx:end].decode())
    return names
