"""The names of the ISA audit rules (``hqval.audit`` applies them), on their own so the
manifest loader can check an ``audit_waive`` entry names a rule without importing the
audit, which loads manifests itself."""

from __future__ import annotations

RULES = ("header_scalar", "no_spill", "vgpr_budget", "v2_valu_delta", "wmma", "payload_offset")
RULE_LETTER = dict(zip(RULES, "abcdef", strict=True))
