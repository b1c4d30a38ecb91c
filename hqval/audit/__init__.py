"""The ISA audit: static rules over a kernel's machine code (``static``), the same rules
decided from what the emulator executed (``executed``), the manifest's waivers
(``waivers``) and the audit of a matrix cached by content (``cache``)."""

from __future__ import annotations

from hqval.audit.cache import (
    AUDIT_CACHE_LAYOUT,
    RULE_MODULES,
    IsaError,
    audit_arches,
    audit_key,
    audit_matrix,
    cached_rows,
    disassembler_identity,
    rules_identity,
)
from hqval.audit.occupancy import (
    MAX_VGPRS_WAVE32,
    max_waves_per_simd,
    occupancy,
    vgpr_budget,
    vgpr_file,
    vgpr_granule,
)
from hqval.audit.rules import FIXED_TOLERANCES, RULE_LETTER, RULES, V2_VALU_BUDGET
from hqval.audit.static import (
    AddressFlow,
    Audit,
    KernelCode,
    LoadFacts,
    WeightLoads,
    analyze,
    audit_kernel,
    pointer_origins,
    summary,
    weight_args,
)
from hqval.audit.waivers import apply_waivers

__all__ = [
    "AUDIT_CACHE_LAYOUT",
    "FIXED_TOLERANCES",
    "MAX_VGPRS_WAVE32",
    "RULES",
    "RULE_LETTER",
    "RULE_MODULES",
    "V2_VALU_BUDGET",
    "AddressFlow",
    "Audit",
    "IsaError",
    "KernelCode",
    "LoadFacts",
    "WeightLoads",
    "analyze",
    "apply_waivers",
    "audit_arches",
    "audit_kernel",
    "audit_key",
    "audit_matrix",
    "cached_rows",
    "disassembler_identity",
    "max_waves_per_simd",
    "occupancy",
    "pointer_origins",
    "rules_identity",
    "summary",
    "vgpr_budget",
    "vgpr_file",
    "vgpr_granule",
    "weight_args",
]
