"""Faults of class 'rows checked against themselves', fifth round: a timing row's stored
samples are the bench's, or no verdict is recomputed from them.  Every sample is a JSON
number (never text or a boolean, which a lenient reader took as one), and the arms are
paired as ABBA pairs them: each run of samples_a holds as many samples as the same run of
samples_b.  A row whose samples are otherwise is damage (exit 2, naming it).  And an
audit pass whose own details say the rule did not pass (a count it passes only at zero,
per-lane header evidence, W traffic above the baseline's, another VGPR count) is damage,
and so is a check pass whose details count differing words or hold a fixture's error
beyond its tolerance."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARCH, BIT_IDENTITY, PARITY, Result, assert_damaged, rewrite_each
from .test_timing import timed  # noqa: F401  (the timed run, a fixture)

Hq = Callable[..., Result]
TIMED = f"timing_hot[gemv_mq4g256v2_r1@128x1024|{ARCH}|hip]"
AA = f"timing_aa_hot[gemv_hfq4g256_r1@128x1024|{ARCH}|hip]"


def _copy(timed: Path, tmp_path: Path) -> Path:  # noqa: F811
    run = tmp_path / "run"
    shutil.copytree(timed, run)
    return run


def _change(run: Path, ident: str, change: Callable[[dict[str, Any]], None]) -> None:
    def each(r: dict[str, Any]) -> None:
        if r["identity"] == ident:
            change(r["details"])
    rewrite_each(run, each)


def _slower(d: dict[str, Any]) -> None:
    d["samples_b"] = [[x * 1.5 for x in s] for s in d["samples_b"]]


CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "text": lambda d: d.update(samples_a=[[str(x) for x in s] for s in d["samples_a"]]),
    "bool": lambda d: d["samples_a"][0].__setitem__(0, True),
    "word": lambda d: d["samples_a"][0].__setitem__(0, "abc"),
    "nested": lambda d: d["samples_a"][0].__setitem__(0, [1.0]),
    "mapping": lambda d: d.update(samples_a={"0": d["samples_a"][0]}),
}


@pytest.mark.parametrize("cell", [TIMED, AA], ids=["candidate", "aa-control"])
@pytest.mark.parametrize("how", list(CHANGES))
def test_timing_samples_of_another_type_are_damage(
        timed: Path, tmp_path: Path, hqval: Hq, cell: str, how: str) -> None:  # noqa: F811
    """A sample as text or a boolean was read as a number (exit 0); a word was "could not
    convert string to float" naming no row; a list inside a run an internal error."""
    run = _copy(timed, tmp_path)
    _change(run, cell, CHANGES[how])
    res = hqval("admit", str(run))
    assert_damaged(res, f"damaged: {run}: {cell}: a timing row whose samples are no event "
                        "times (samples_a ")


@pytest.mark.parametrize("how", ["one-sample-of-b", "slower-b-cut-to-its-fastest"])
def test_unpaired_timing_samples_are_damage(timed: Path, tmp_path: Path, hqval: Hq,  # noqa: F811
                                            how: str) -> None:
    """B's runs cut to one sample each where A's hold 40: B faster than A (once: admitted,
    exit 0), or a 1.5x slower B (the control without the cut: exit 1) cut to its fastest
    sample of each run."""
    run = _copy(timed, tmp_path)
    if how == "one-sample-of-b":
        _change(run, TIMED, lambda d: d.update(
            samples_b=[[min(s) * 0.9] for s in d["samples_a"]]))
    else:
        _change(run, TIMED, _slower)
        assert hqval("admit", str(run)).code == 1  # the control
        _change(run, TIMED, lambda d: d.update(samples_b=[[min(s)] for s in d["samples_b"]]))
    res = hqval("admit", str(run))
    assert_damaged(res, f"damaged: {run}: {TIMED}: a timing row whose samples are no event "
                        "times (run 0 holds 40 sample(s) of A and 1 of B: the arms are "
                        "unpaired")


def test_samples_as_the_bench_writes_them_still_read(timed: Path, tmp_path: Path,  # noqa: F811
                                                     hqval: Hq) -> None:
    """The control: the timed run as written (exit 0), and its candidate's samples made
    1.5x slower (exit 1)."""
    run = _copy(timed, tmp_path)
    assert hqval("admit", str(run)).code == 0
    _change(run, TIMED, _slower)
    assert hqval("admit", str(run)).code == 1
    assert json.loads((run / "envelope.json").read_text())["run_id"]


def _audit(rule: str) -> str:
    return f"audit_{rule}[gemv_mq4g256v2_r1|{ARCH}|isa]"


AUDIT_DETAILS: dict[str, tuple[str, Callable[[dict[str, Any]], None], str]] = {
    "header-traffic": ("header_scalar", lambda d: d.update(
        traffic_per_cell_tile=2 * d["baseline_traffic_per_cell_tile"]), "W traffic"),
    "header-per-lane": ("header_scalar", lambda d: d.update(
        evidence=["flat_load_b32 at 0x1400 reads header bytes per lane"]), "per lane"),
    "payload-unread": ("payload_offset", lambda d: d.update(cells_missing=5),
                       "cells_missing 5"),
    "payload-beyond": ("payload_offset", lambda d: d.update(bytes_beyond_matrix=64),
                       "bytes_beyond_matrix 64"),
    "spills": ("no_spill", lambda d: d.update({".vgpr_spill_count": 12}),
               ".vgpr_spill_count 12"),
    "vgpr-count": ("vgpr_budget", lambda d: d.update(vgpr_count=300), "vgpr_count 300"),
}


@pytest.mark.parametrize("how", list(AUDIT_DETAILS))
def test_an_audit_pass_its_details_contradict_is_damage(copy_of: Callable[[], Path],
                                                        hqval: Hq, how: str) -> None:
    """The qt=44 kernel's audit pass of the rule, its details saying the rule failed (as a
    failing row rewritten to pass keeps them; once: admitted, exit 0)."""
    rule, change, named = AUDIT_DETAILS[how]
    run = copy_of()
    _change(run, _audit(rule), change)
    res = hqval("admit", str(run))
    assert_damaged(res, f"damaged: {run}: {_audit(rule)}: passes", named)


CHECK_DETAILS: dict[str, tuple[str, Callable[[dict[str, Any]], None], str]] = {
    "differing-words": (BIT_IDENTITY, lambda d: d.update(differing_words=12),
                        "12 output words differ"),
    "error-beyond": (PARITY, lambda d: d["errors"].update(gaussian=0.3),
                     "errors gaussian 0.3"),
    "error-nan": (PARITY, lambda d: d["errors"].update(gaussian=float("nan")),
                  "errors gaussian nan"),
}


@pytest.mark.parametrize("how", list(CHECK_DETAILS))
def test_a_check_pass_its_details_contradict_is_damage(copy_of: Callable[[], Path],
                                                       hqval: Hq, how: str) -> None:
    """The qt=44 kernel's bit_identity pass counting 12 differing words, its
    reference_parity pass holding a gaussian error of 0.3 or NaN against 1e-4, its measured
    value still within (once: admitted, exit 0)."""
    cell, change, named = CHECK_DETAILS[how]
    run = copy_of()
    _change(run, cell, change)
    assert_damaged(hqval("admit", str(run)), f"damaged: {run}: {cell}: passes", named)


def test_a_vgpr_budget_pass_of_a_spilling_kernel_is_no_damage(copy_of: Callable[[], Path],
                                                              hqval: Hq) -> None:
    """The control: vgpr_budget judges the VGPR count against the launch bounds' budget
    and lists the spill counts as evidence (no_spill judges them), so its pass of a kernel
    that spills within its budget is the rule's own (the engine's gemv_mq4g256v2_residual
    on gfx1030: 10 spilled VGPRs, a vgpr_budget pass); the no_spill pass stating spills
    is the damage."""
    run = copy_of()
    _change(run, _audit("vgpr_budget"), lambda d: d.update(vgpr_spill_count=10,
                                                           sgpr_spill_count=3))
    res = hqval("admit", str(run))
    assert res.code == 0, res.err
