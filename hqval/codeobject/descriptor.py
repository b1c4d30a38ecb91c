"""The 64-byte kernel descriptor (``<kernel>.kd``) that says how a wave starts
(AMDGPUUsage, "Kernel Descriptor")."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hqval.codeobject.errors import CodeObjectError


@dataclass(frozen=True)
class KernelDescriptor:
    """The fields of the kernel descriptor a launch needs."""

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
            raise CodeObjectError(f"kernel descriptor is {len(raw)} bytes, expected 64")
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
