"""Occupancy facts of the RDNA arches the audit and the cost model use."""

from __future__ import annotations

from typing import Any

MAX_VGPRS_WAVE32 = 256  # architectural limit of one wave32 on gfx10+


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


def lds_per_cu(arch: Any) -> int:
    """LDS bytes of one CU: the arch's ``lds_bytes`` (matrices/arches.yaml).  The arch's
    facts are in the audit cache's key; a bare name carries none, so it is refused."""
    value = getattr(arch, "lds_bytes", None)
    if not value:
        raise ValueError(f"{getattr(arch, 'name', arch)}: no lds_bytes to state an LDS "
                         "kernel's occupancy with (pass the arch of matrices/arches.yaml)")
    return int(value)


def occupancy(arch: Any, vgprs: int, lds_bytes: int = 0, block: int = 32) -> int:
    """Waves per SIMD a wave32 kernel using ``vgprs`` VGPRs and ``lds_bytes`` of LDS per
    workgroup of ``block`` threads can have resident: the VGPR file and the wave slots,
    and LDS (the CU's LDS over a workgroup's use, each workgroup's waves split over the
    CU's 2 SIMDs).  SGPRs do not limit it on gfx10+ (each wave has its own fixed set;
    clang-19 reports the same occupancy for 102 SGPRs as for a few).  The audit's rows
    and the cost model state this one figure; tests/timing/test_cost.py checks it against
    clang-19's occupancy remark, an LDS-bound kernel included."""
    g = vgpr_granule(arch)
    alloc = max(g, -(-vgprs // g) * g)
    occ = min(max_waves_per_simd(arch), vgpr_file(arch) // alloc)
    if lds_bytes > 0:
        blocks = lds_per_cu(arch) // lds_bytes
        occ = min(occ, max(1, blocks * -(-block // 32) // 2))
    return occ


def waves_per_simd(flat_workgroup_size: int, wave_size: int = 32) -> int:
    """Waves of one workgroup of ``flat_workgroup_size`` threads on each SIMD: a workgroup's
    waves share the 2 SIMDs of a WGP (CU mode: 2 SIMDs per CU on RDNA)."""
    if flat_workgroup_size < 1 or wave_size < 1:
        raise ValueError(f"launch bounds {flat_workgroup_size} of wave{wave_size}: a "
                         "workgroup has at least one thread and a wave at least one lane")
    waves_per_wg = -(-flat_workgroup_size // wave_size)
    return -(-waves_per_wg // 2)


def vgpr_budget(arch: Any, flat_workgroup_size: int, wave_size: int = 32) -> int:
    """The VGPRs one wave may use so that a whole workgroup of ``flat_workgroup_size``
    threads (the kernel's launch bounds, ``.max_flat_workgroup_size``) is resident on
    ``arch``: the VGPR file split among the workgroup's waves per SIMD, rounded down to the
    allocation granule, at most the 256 a wave32 can address.  The ISA audit's vgpr_budget
    rule compares with it, and the judge re-derives it to check what a row states."""
    g = vgpr_granule(arch)
    return min(MAX_VGPRS_WAVE32,
               vgpr_file(arch) // waves_per_simd(flat_workgroup_size, wave_size) // g * g)


def vgpr_budget_derivation(arch: Any, flat_workgroup_size: int, wave_size: int = 32) -> str:
    """How ``vgpr_budget`` arrives at its value, in the words the audit row states."""
    return (f"min({MAX_VGPRS_WAVE32}, {vgpr_file(arch)} VGPRs / "
            f"{waves_per_simd(flat_workgroup_size, wave_size)} waves per SIMD for launch "
            f"bounds {flat_workgroup_size})")
