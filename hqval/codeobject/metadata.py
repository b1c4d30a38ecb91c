"""The NT_AMDGPU_METADATA note (code object v3+): a msgpack map, decoded by the msgpack
package."""

from __future__ import annotations

from typing import Any

import msgpack

from hqval.codeobject.elf import Note
from hqval.codeobject.errors import CodeObjectError

NT_AMDGPU_METADATA = 32


def unpack(desc: bytes) -> Any:
    """One msgpack value (the note is padded to 4 bytes with zeros)."""
    try:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(desc)
        value = unpacker.unpack()
        rest = desc[unpacker.tell():]
    except (msgpack.OutOfData, msgpack.ExtraData, ValueError, TypeError) as exc:
        raise CodeObjectError(f"AMDGPU metadata note is not valid msgpack ({exc})") from exc
    if any(rest):
        raise CodeObjectError(f"msgpack metadata has {len(rest)} trailing bytes")
    return value


def find(notes: list[Note]) -> dict[str, Any]:
    for n in notes:
        if n.name == b"AMDGPU" and n.type == NT_AMDGPU_METADATA:
            value = unpack(n.desc)
            if not isinstance(value, dict):
                raise CodeObjectError("AMDGPU metadata note is not a map")
            return value
    raise CodeObjectError("code object has no NT_AMDGPU_METADATA note (code object v3+ "
                          "needed)")
