"""Faults of class 'causes kept apart', second round: an error of hqval's own machinery
in the audit, the mutants or the timing step is exit 2 (infrastructure), never a kernel
failure (exit 1) and never a pass."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Result, rows

Admit = Callable[..., Result]


@pytest.mark.parametrize("kind", ["audit", "mutant"])
def test_an_infrastructure_error_in_audit_or_mutants_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit, kind: str) -> None:
    """The qt=44 kernel's no-spill audit row, or every mutant verdict, an error of hqval's
    machinery (``details.infrastructure``)."""
    run = copy_of()
    rs = rows(run)
    for r in rs:
        if (kind == "audit" and r["kernel"] == "gemv_mq4g256v2_r1"
                and r["check"] == "audit_no_spill") or (kind == "mutant"
                                                        and r["kind"] == "mutant"):
            r.update(status="error", measured=None, message="cache unreadable",
                     details={"infrastructure": True})
        r.pop("identity", None)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    res = hqval("admit", str(run))
    assert res.code == 2, res.out + res.err
