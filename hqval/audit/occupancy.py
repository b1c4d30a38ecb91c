"""Occupancy facts of the RDNA arches the audit and the cost model use."""

from __future__ import annotations

from typing import Any


def vgpr_file(arch: Any) -> int:
    """VGPRs per SIMD lane: 1536 on the full-VGPR RDNA3/4 parts, else 1024."""
    value = getattr(arch, "vgprs_per_simd", None) or getattr(arch, "vgpr_file", None)
    if value:
        return int(value)
    name = getattr(arch, "name", str(arch))
    return 1536 if name in ("gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201") else 1024


def vgpr_granule(arch: Any) -> int:
    name = getattr(arch, "name", str(arch))
    if vgpr_file(arch) == 1536:
        return 24
    return 8 if name.startswith("gfx101") else 16


def max_waves_per_simd(arch: Any) -> int:
    """Wave slots per SIMD: 20 on RDNA1 (gfx101x), 16 from RDNA2 on (clang-19's
    kernel-resource-usage remark on a 32-VGPR kernel: 20 on gfx1010, 16 on gfx1030)."""
    name = getattr(arch, "name", str(arch))
    return 20 if name.startswith("gfx101") else 16


def occupancy(arch: Any, vgprs: int) -> int:
    """Waves per SIMD that the VGPR file admits for a wave32 kernel using ``vgprs``."""
    g = vgpr_granule(arch)
    alloc = max(g, -(-vgprs // g) * g)
    return min(max_waves_per_simd(arch), vgpr_file(arch) // alloc)
