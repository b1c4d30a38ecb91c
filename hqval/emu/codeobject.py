"""AMDGPU code objects: ELF sections and symbols, the NT_AMDGPU_METADATA note (msgpack)
and the 64-byte kernel descriptor (``<kernel>.kd``) that says how a wave starts."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from hqval.emu.errors import EmuError

NT_AMDGPU_METADATA = 32


def unpack_msgpack(data: bytes) -> Any:
    """Decode one msgpack value (the subset the AMDGPU metadata note uses, plus floats)."""
    value, end = _unpack(data, 0)
    # notes are padded to 4 bytes with zeros
    if end != len(data) and any(data[end:]):
            raise EmuError(f"msgpack metadata has {len(data) - end} trailing bytes")
    return value


def _unpack(d: bytes, i: int) -> tuple[Any, int]:
    b = d[i]
    i += 1
    if b <= 0x7F:
        return b, i
    if 0x80 <= b <= 0x8F:
        return _map(d, i, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _array(d, i, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return d[i:i + n].decode(), i + n
    if b >= 0xE0:
        return b - 0x100, i
    fixed: dict[int, tuple[str, int]] = {
        0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
        0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8),
        0xCA: (">f", 4), 0xCB: (">d", 8),
    }
    if b in fixed:
        fmt, n = fixed[b]
        return struct.unpack_from(fmt, d, i)[0], i + n
    if b == 0xC0:
        return None, i
    if b in (0xC2, 0xC3):
        return b == 0xC3, i
    lens = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}
    if b in lens:
        w = lens[b]
        n = int.from_bytes(d[i:i + w], "big")
        i += w
        raw = d[i:i + n]
        return (raw.decode() if b >= 0xD9 else bytes(raw)), i + n
    if b in (0xDC, 0xDD):
        w = 2 if b == 0xDC else 4
        return _array(d, i + w, int.from_bytes(d[i:i + w], "big"))
    if b in (0xDE, 0xDF):
        w = 2 if b == 0xDE else 4
        return _map(d, i + w, int.from_bytes(d[i:i + w], "big"))
    raise EmuError(f"msgpack type byte 0x{b:02x} at offset {i - 1} is not supported")


def _array(d: bytes, i: int, n: int) -> tuple[list[Any], int]:
    out = []
    for _ in range(n):
        v, i = _unpack(d, i)
        out.append(v)
    return out, i


def _map(d: bytes, i: int, n: int) -> tuple[dict[Any, Any], int]:
    out = {}
    for _ in range(n):
        k, i = _unpack(d, i)
        v, i = _unpack(d, i)
        out[k] = v
    return out, i


@dataclass(frozen=True)
class KernelDescriptor:
    """The fields of the 64-byte kernel descriptor the launch needs (AMDGPUUsage,
    "Kernel Descriptor")."""

    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    entry_offset: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    code_properties: int

    @classmethod
    def parse(cls, raw: bytes) -> KernelDescriptor:
        if len(raw) != 64:
            raise EmuError(f"kernel descriptor is {len(raw)} bytes, expected 64")
        gs, ps, ks = struct.unpack_from("<III", raw, 0)
        (entry,) = struct.unpack_from("<q", raw, 16)
        r3, r1, r2 = struct.unpack_from("<III", raw, 44)
        (props,) = struct.unpack_from("<H", raw, 56)
        return cls(gs, ps, ks, entry, r1, r2, r3, props)

    # kernel_code_properties
    @property
    def user_sgprs(self) -> list[tuple[str, int]]:
        """Enabled user SGPRs in the order the hardware loads them: (name, count)."""
        order = [("private_segment_buffer", 4), ("dispatch_ptr", 2), ("queue_ptr", 2),
                 ("kernarg_segment_ptr", 2), ("dispatch_id", 2), ("flat_scratch_init", 2),
                 ("private_segment_size", 1)]
        return [(n, c) for bit, (n, c) in enumerate(order) if self.code_properties >> bit & 1]

    @property
    def wave32(self) -> bool:
        return bool(self.code_properties >> 10 & 1)

    # compute_pgm_rsrc2
    @property
    def user_sgpr_count(self) -> int:
        return self.rsrc2 >> 1 & 0x1F

    @property
    def private_segment_wave_offset(self) -> bool:
        return bool(self.rsrc2 & 1)

    @property
    def workgroup_id_enabled(self) -> tuple[bool, bool, bool]:
        return (bool(self.rsrc2 >> 7 & 1), bool(self.rsrc2 >> 8 & 1), bool(self.rsrc2 >> 9 & 1))

    @property
    def workgroup_info(self) -> bool:
        return bool(self.rsrc2 >> 10 & 1)

    @property
    def workitem_id_dims(self) -> int:
        """How many of x, y, z workitem ids the hardware initialises (1..3)."""
        return (self.rsrc2 >> 11 & 3) + 1

    # compute_pgm_rsrc1
    @property
    def float_denorm_mode_32(self) -> int:
        """0 flushes f32 denormals on input and output; 3 keeps them."""
        return self.rsrc1 >> 16 & 3

    @property
    def float_denorm_mode_16_64(self) -> int:
        return self.rsrc1 >> 18 & 3


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
    kernels: dict[str, KernelInfo] = field(default_factory=dict)
    text_address: int = 0
    text: bytes = b""
    # every function symbol (kernels and the device functions they may call): name -> address
    functions: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: bytes) -> CodeObject:
        if raw[:4] != b"\x7fELF" or raw[4] != 2:
            raise EmuError("not a 64-bit ELF code object (expected an AMDGPU .co / .hsaco)")
        (e_machine,) = struct.unpack_from("<H", raw, 18)
        if e_machine != 224:  # EM_AMDGPU
            raise EmuError(f"ELF machine {e_machine} is not AMDGPU (224)")
        (shoff,) = struct.unpack_from("<Q", raw, 40)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", raw, 58)
        sections = []
        for k in range(shnum):
            name, typ, _flags, addr, off, size, link, _info, _al, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", raw, shoff + k * shentsize)
            sections.append((name, typ, addr, off, size, link, entsize))
        shstr = sections[shstrndx]

        def sname(n: int) -> str:
            start = shstr[3] + n
            return raw[start:raw.index(b"\0", start)].decode()

        metadata: dict[str, Any] | None = None
        symbols: dict[str, int] = {}
        functions: dict[str, int] = {}
        text_addr, text = 0, b""
        for name, typ, addr, off, size, link, entsize in sections:
            nm = sname(name)
            if typ == 7:  # SHT_NOTE
                metadata = _find_metadata(raw[off:off + size]) or metadata
            elif typ in (2, 11):  # SYMTAB, DYNSYM
                strtab = sections[link]
                for j in range(size // entsize):
                    st_name, st_info, _oth, _shndx, value, _sz = struct.unpack_from(
                        "<IBBHQQ", raw, off + j * entsize)
                    s0 = strtab[3] + st_name
                    sym_name = raw[s0:raw.index(b"\0", s0)].decode()
                    symbols[sym_name] = value
                    if st_info & 0xF == 2 and sym_name:  # STT_FUNC
                        functions[sym_name] = value
            elif nm == ".text":
                text_addr, text = addr, raw[off:off + size]
        if metadata is None:
            raise EmuError("code object has no NT_AMDGPU_METADATA note (code object v3+ needed)")

        def at(vaddr: int, n: int) -> bytes:
            for _nm, typ, addr, off, size, _l, _e in sections:
                if typ != 8 and addr <= vaddr < addr + size and addr:  # 8 = NOBITS
                    return raw[off + vaddr - addr: off + vaddr - addr + n]
            raise EmuError(f"address 0x{vaddr:x} is in no loaded section")

        co = cls(raw=raw, target=str(metadata.get("amdhsa.target", "")),
                 text_address=text_addr, text=text, functions=functions)
        for meta in metadata.get("amdhsa.kernels", []):
            sym = meta.get(".symbol", meta[".name"] + ".kd")
            if sym not in symbols:
                raise EmuError(f"kernel descriptor symbol {sym!r} missing from the symbol table")
            kd = KernelDescriptor.parse(at(symbols[sym], 64))
            co.kernels[meta[".name"]] = KernelInfo(
                name=meta[".name"], symbol_address=symbols[sym] + kd.entry_offset,
                descriptor=kd, metadata=meta)
        return co


def _find_metadata(notes: bytes) -> dict[str, Any] | None:
    i = 0
    while i + 12 <= len(notes):
        namesz, descsz, typ = struct.unpack_from("<III", notes, i)
        i += 12
        name = notes[i:i + namesz].rstrip(b"\0")
        i += (namesz + 3) & ~3
        desc = notes[i:i + descsz]
        i += (descsz + 3) & ~3
        if name == b"AMDGPU" and typ == NT_AMDGPU_METADATA:
            value = unpack_msgpack(desc)
            if not isinstance(value, dict):
                raise EmuError("AMDGPU metadata note is not a map")
            return value
    return None
