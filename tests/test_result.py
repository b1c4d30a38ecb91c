"""hqval.result: a row's dict is what ``dataclasses.asdict`` made of it, a copy its caller
may change, with status and identity as strings and non-finite numbers kept visible."""

from __future__ import annotations

import dataclasses
import math
from collections import namedtuple
from typing import Any

import numpy as np

from hqval.result import Row, Status

Pair = namedtuple("Pair", "a b")


@dataclasses.dataclass
class Inner:
    x: list[int]


DETAILS: dict[str, Any] = {
    "n": 3, "f": 0.5, "s": "text", "b": True, "none": None, "status": Status.FAIL,
    "list": [1, [2, 3], {"k": (4, 5)}], "tuple": (1, "a"), "pair": Pair(1, [2]),
    "inner": Inner([7]), "np": np.float32(1.5), "nested": {"a": {"b": {"c": [1.0, 2.0]}}},
}


def _row(**over: Any) -> Row:
    base: dict[str, Any] = dict(kind="check", check="bit_identity", kernel="k", arch="gfx1100",
                                backend="emu", status=Status.PASS, measured=0.0,
                                tolerance=1e-4, details=DETAILS, run_id="r",
                                object_sha256="ab" * 32)
    return Row(**{**base, **over})


def test_to_dict_is_asdict_with_status_and_identity() -> None:
    row = _row()
    want = dataclasses.asdict(row)
    want["status"] = "pass"
    want["identity"] = "bit_identity[k|gfx1100|emu]"
    got = row.to_dict()
    assert got == want
    assert [type(got["details"][k]) for k in DETAILS] == \
        [type(want["details"][k]) for k in DETAILS]
    assert got["details"]["inner"] == {"x": [7]} and type(got["details"]["pair"]) is Pair


def test_to_dict_is_a_copy() -> None:
    row = _row(details={"list": [1, 2], "d": {"a": 1}})
    d = row.to_dict()
    d["details"]["list"].append(3)
    d["details"]["d"]["a"] = 2
    assert row.details == {"list": [1, 2], "d": {"a": 1}}


def test_non_finite_numbers_are_kept_as_text() -> None:
    d = _row(measured=math.nan, tolerance=math.inf).to_dict()
    assert (d["measured"], d["tolerance"]) == ("nan", "inf")
    assert Row.from_dict(d).measured is not None
