"""codeobject: msgpack metadata, kernel descriptor fields and ELF errors."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hqval.emu.codeobject import CodeObject, unpack_msgpack
from hqval.emu.errors import EmuError


def test_msgpack_subset() -> None:
    # {"a": [1, -1, "x"], "b": true, "c": 300, "d": 1.5}
    data = bytes([0x84, 0xA1, 0x61, 0x93, 0x01, 0xFF, 0xA1, 0x78, 0xA1, 0x62, 0xC3,
                  0xA1, 0x63, 0xCD, 0x01, 0x2C, 0xA1, 0x64, 0xCB]) + \
        (1.5).hex().encode()[:0] + bytes.fromhex("3ff8000000000000")
    assert unpack_msgpack(data) == {"a": [1, -1, "x"], "b": True, "c": 300, "d": 1.5}


def test_kernel_descriptor_of_compiled_kernels(build: Callable[[str, str], bytes]) -> None:
    co = CodeObject.parse(build("ops", "gfx1100"))
    assert co.target.endswith("gfx1100")
    k = co.kernels["lds_reduce"]
    assert k.descriptor.wave32
    assert k.descriptor.group_segment_fixed_size == 512  # float s[128]
    assert ("kernarg_segment_ptr", 2) in k.descriptor.user_sgprs
    assert k.descriptor.workgroup_id_enabled[0]
    assert k.descriptor.float_denorm_mode_32 == 3  # HIP default: f32 denormals kept
    assert [a[".size"] for a in k.args][:2] == [8, 8]
    gfx10 = CodeObject.parse(build("ops", "gfx1010")).kernels["lds_reduce"]
    assert gfx10.descriptor.user_sgprs[0][0] == "private_segment_buffer"


def test_not_an_elf_is_a_clear_error() -> None:
    with pytest.raises(EmuError, match="not a 64-bit ELF"):
        CodeObject.parse(b"hello world, not a code object" * 4)
