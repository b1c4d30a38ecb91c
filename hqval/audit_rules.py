"""The audit rule names' old module name (they live in ``hqval.audit.rules``)."""

from __future__ import annotations

from hqval.audit.rules import RULE_LETTER as RULE_LETTER
from hqval.audit.rules import RULES as RULES
