"""The names of the ISA audit rules (``hqval.audit`` applies them), on their own so the
manifest loader can check an ``audit_waive`` entry names a rule without importing the
audit, which loads manifests itself."""

from __future__ import annotations

RULES = ("header_scalar", "no_spill", "vgpr_budget", "v2_valu_delta", "wmma", "payload_offset")
RULE_LETTER = dict(zip(RULES, "abcdef", strict=True))

# Section 4: one v_cndmask plus two v_cvt_f32_f16 per group per row.
V2_VALU_BUDGET = 3.0
# The bound every row of a rule states where the rule has one fixed bound (the judge
# refuses a row stating another); the other rules derive theirs per kernel (the arch's VGPR
# budget at the declared occupancy, the baseline's W traffic).
FIXED_TOLERANCES: dict[str, float] = {"no_spill": 0.0, "v2_valu_delta": V2_VALU_BUDGET}
