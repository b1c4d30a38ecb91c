"""The signature expression language: exact arithmetic, no eval, errors that say why."""

from __future__ import annotations

import pytest

from hqval.expr import ExprError, parse


@pytest.mark.parametrize(("text", "env", "want"), [
    ("cdiv(M, R)", {"M": 7, "R": 2}, 4),
    ("ceil(M / R)", {"M": 7, "R": 2}, 4),
    ("M // R + M % R", {"M": 7, "R": 2}, 4),
    ("cdiv(Mq, R) + cdiv(Mk, R) + cdiv(Mv, R)", {"Mq": 5, "Mk": 3, "Mv": 3, "R": 2}, 7),
    ("min(M, 16) * max(1, N - 3)", {"M": 20, "N": 5}, 32),
    ("-3 + 2 * (4 - 1)", {}, 3),
    ("P / 16", {"P": 48}, 3),
    (8, {}, 8),
])
def test_values(text: str | int, env: dict[str, int], want: int) -> None:
    assert parse(text).int(env) == want


@pytest.mark.parametrize(("text", "names", "match"), [
    ("__import__('os')", None, "cannot read"),
    ("M ** 2", None, "unexpected"),
    ("M +", None, "expected more"),
    ("cdiv(M)", None, "takes 2"),
    ("pow(M, 2)", None, "unknown function"),
    ("Q + 1", frozenset({"M", "K"}), "Q, not a name here"),
    ("", None, "not an expression"),
    (True, None, "not an expression"),
    ("(" * 40 + "1" + ")" * 40, None, "nested too deeply"),
])
def test_refused(text: object, names: frozenset[str] | None, match: str) -> None:
    with pytest.raises(ExprError, match=match):
        parse(text, names)  # type: ignore[arg-type]


def test_counts_must_be_integers_and_defined() -> None:
    with pytest.raises(ExprError, match="not an integer"):
        parse("M / R").int({"M": 7, "R": 2})
    with pytest.raises(ExprError, match="division by zero"):
        parse("cdiv(M, R)").int({"M": 7, "R": 0})
    with pytest.raises(ExprError, match="R has no value"):
        parse("cdiv(M, R)").int({"M": 7})
    with pytest.raises(ExprError, match="beyond"):
        parse("M * M * M").int({"M": 1 << 20})
