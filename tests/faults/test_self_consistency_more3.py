"""Faults of class 'rows checked against themselves', fourth round: a field of another
type than the one hqval writes (a number as text, a boolean for a number, an integer for a
string) is no row hqval wrote: damage, naming the file and row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    BIT_IDENTITY,
    PARITY,
    Result,
    assert_damaged,
    rewrite_each,
    set_fields,
)

Hq = Callable[..., Result]


@pytest.mark.parametrize("field,value", [
    ("measured", "0.0"), ("tolerance", "0.0001"), ("measured", " 1e-9"),
    ("measured", "\u0660"), ("measured", "NaN"), ("measured", True), ("measured", [0.0]),
    ("seed", "0"), ("seed", 0.0), ("status", "PASS"), ("kernel", 44), ("details", []),
    ("object_sha256", 5),
], ids=["measured-text", "tolerance-text", "measured-spaced", "measured-arabic-zero",
        "measured-NaN-text", "measured-true", "measured-list", "seed-text", "seed-float",
        "status-upper", "kernel-int", "details-list", "sha-int"])
def test_a_field_of_another_type_is_damage(copy_of: Callable[[], Path], hqval: Hq,
                                           field: str, value: object) -> None:
    run = copy_of()
    rewrite_each(run, set_fields(PARITY, **{field: value}))
    res = hqval("admit", str(run))
    assert_damaged(res, "rows.jsonl", "not a valid result row")


def test_a_non_finite_text_written_by_hqval_still_reads(copy_of: Callable[[], Path],
                                                        hqval: Hq) -> None:
    """The control: a failing row whose measured value is 'inf' (as Row.to_dict writes a
    non-finite number) is read as inf and fails the cell."""
    run = copy_of()
    rewrite_each(run, set_fields(BIT_IDENTITY, status="fail", measured="inf"))
    res = hqval("admit", str(run))
    assert res.code == 1, res.err
