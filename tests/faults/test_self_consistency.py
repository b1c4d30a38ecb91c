"""Faults of class 'rows checked against themselves': a row's status must agree with its
own measured value, tolerance, samples and identity; a row with duplicate keys, a row
contradicting its status, an error row followed by a pass, and a timing verdict without
the samples it rests on are damage: exit 2, naming the row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARCH, Result, append_rows, rows

Admit = Callable[..., Result]
PARITY = f"reference_parity[gemv_mq4g256v2_r1|{ARCH}|emu]"


def _rewrite(run: Path, ident: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = rows(run)
    hit = [r for r in data if r["identity"] == ident]
    assert len(hit) == 1
    change(hit[0])
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))


@pytest.mark.parametrize("fields,named", [
    ({"measured": 0.9}, "passes with measured 0.9 beyond its tolerance 0.0001"),
    ({"measured": "nan"}, "passes with measured nan"),
    ({"measured": "inf"}, "passes with measured inf"),
    ({"tolerance": "nan"}, "passes with tolerance nan"),
], ids=["beyond-tolerance", "nan", "inf", "nan-tolerance"])
def test_a_pass_its_numbers_contradict_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, fields: dict[str, Any], named: str) -> None:
    """(once: a pass with measured 0.9 against tolerance 1e-4, or with NaN, admitted)"""
    run = copy_of()
    _rewrite(run, PARITY, lambda r: r.update(fields))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"damaged: {run}: {PARITY}: {named}" in res.err


def test_a_row_whose_identity_contradicts_its_fields_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    run = copy_of()
    _rewrite(run, PARITY, lambda r: r.update(kernel="gemv_mq4c_r1"))
    res = hqval("admit", str(run))
    assert res.code == 2 and "the row contradicts itself" in res.err


def test_a_row_with_a_duplicate_key_is_damage(copy_of: Callable[[], Path],
                                              hqval: Admit) -> None:
    """``{"status": "fail", ..., "status": "pass"}``: which one is the row's?"""
    run = copy_of()
    lines = (run / "rows.jsonl").read_text().splitlines()
    i = next(k for k, x in enumerate(lines) if json.loads(x)["identity"] == PARITY)
    lines[i] = lines[i][:-1] + ', "status": "fail"}'
    (run / "rows.jsonl").write_text("\n".join(lines) + "\n")
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"rows.jsonl:{i + 1}: a row with the key 'status' twice" in res.err


def test_an_error_row_is_never_superseded_by_a_pass(copy_of: Callable[[], Path],
                                                    hqval: Admit) -> None:
    """An error of the kernel's own, then a pass for the same cell (once: the pass
    superseded it, exit 0; a failure already was not)."""
    run = copy_of()
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    i = next(k for k, x in enumerate(lines) if json.loads(x)["identity"] == PARITY)
    err = {**json.loads(lines[i]), "status": "error", "message": "could not reach a verdict"}
    lines.insert(i, json.dumps(err) + "\n")
    (run / "rows.jsonl").write_text("".join(lines))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"says {PARITY} is pass after an earlier row of that cell erred" in res.err


def test_an_infrastructure_error_is_superseded_by_its_redo(copy_of: Callable[[], Path],
                                                           hqval: Admit) -> None:
    """The control: hqval's own error (``details.infrastructure``) is what ``--resume``
    redoes, so the later pass stands."""
    run = copy_of()
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    i = next(k for k, x in enumerate(lines) if json.loads(x)["identity"] == PARITY)
    err = json.loads(lines[i])
    err.update(status="error", message="cache unwritable",
               details={**err["details"], "infrastructure": True})
    lines.insert(i, json.dumps(err) + "\n")
    (run / "rows.jsonl").write_text("".join(lines))
    assert hqval("admit", str(run)).code == 0


def test_a_timing_verdict_without_its_samples_is_damage(copy_of: Callable[[], Path],
                                                        hqval: Admit) -> None:
    """A timing row at ratio 1.5 that says pass and whose samples were removed (once:
    admitted on its stored status)."""
    run = copy_of()
    append_rows(run, {"kind": "timing", "check": "timing_hot",
                      "kernel": "gemv_mq4g256v2_r1@64x256", "arch": ARCH, "backend": "emu",
                      "status": "pass", "measured": 1.5, "tolerance": 1.05,
                      "details": {"mode": "hot", "qt": 44, "kind": "gemv"}})
    res = hqval("admit", str(run))
    assert res.code == 2
    assert (f"timing_hot[gemv_mq4g256v2_r1@64x256|{ARCH}|emu]: a timing verdict without "
            "its paired samples") in res.err
