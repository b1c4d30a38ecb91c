"""The symbol table of an AMDGPU code object (ELF64), read without any tool: the toolchain
checks a build holds the kernel it was asked for, the ISA audit finds kernels by name."""

from __future__ import annotations

import struct

__all__ = ["elf_symbols"]


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
        str_off = sections[sh[6]][4]
        off, size, entsize = sh[4], sh[5], sh[9] or 24
        for pos in range(off, off + size, entsize):
            name_idx = struct.unpack_from("<I", data, pos)[0]
            if name_idx:
                end = data.index(b"\x00", str_off + name_idx)
                names.add(data[str_off + name_idx:end].decode())
    return names
