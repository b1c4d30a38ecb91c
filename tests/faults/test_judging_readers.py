"""Faults of class 'one judged run', readers: every reader whose answer rests on a whole
run (``hqval compare``, ``hqval history``, ``admit --baseline``) refuses a run the judge
cannot vouch for, exit 2, as ``hqval admit`` does; the report, no gate, is written and its
admission.json says exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    PARITY,
    Result,
    as_another_run,
    assert_damaged,
    fail_bit_identity,
    rewrite_each,
    set_fields,
)

Hq = Callable[..., Result]


def _foreign(run: Path) -> None:
    rewrite_each(run, set_fields(PARITY, run_id="0" * 32))


@pytest.mark.parametrize("which", ["new", "base"])
def test_compare_of_a_damaged_run_is_exit_2(golden: Path, copy_of: Callable[[], Path],
                                            hqval: Hq, which: str) -> None:
    run = copy_of()
    _foreign(run)
    args = [str(golden), str(run)] if which == "new" else [str(run), str(golden)]
    assert_damaged(hqval("compare", *args), "damaged", "written by run 000")


def test_compare_of_damaged_history_is_exit_2(golden: Path, copy_of: Callable[[], Path],
                                              hqval: Hq) -> None:
    run = copy_of()
    _foreign(run)
    assert_damaged(hqval("compare", str(golden), str(golden), "--history", str(run)),
             "--history", "damaged")


def test_history_of_a_damaged_run_is_exit_2(golden: Path, copy_of: Callable[[], Path],
                                            hqval: Hq) -> None:
    run = copy_of()
    _foreign(run)
    assert_damaged(hqval("history", str(golden), str(run)), "damaged", "written by run 000")


def test_a_damaged_baseline_row_is_exit_2(golden: Path, copy_of: Callable[[], Path],
                                          hqval: Hq) -> None:
    run = as_another_run(copy_of())  # last night's run, not tonight's copy
    _foreign(run)
    assert_damaged(hqval("admit", str(golden), "--baseline", str(run)),
             f"--baseline {run}", "written by run 000")


def test_a_report_of_a_damaged_run_is_written_and_says_exit_2(
        copy_of: Callable[[], Path], hqval: Hq, tmp_path: Path) -> None:
    """The control: the report is no gate (exit 0 when written); its admission.json says
    the run is damaged, exit 2."""
    run = copy_of()
    _foreign(run)
    res = hqval("report", str(run), "-o", str(tmp_path / "rep"))
    assert res.code == 0, res.err
    adm = json.loads((tmp_path / "rep" / "admission.json").read_text())
    assert adm["exit_code"] == 2 and adm["damage"]


def test_compare_of_a_failing_run_is_exit_1(golden: Path, copy_of: Callable[[], Path],
                                            hqval: Hq) -> None:
    """The control: a failing row the base run passed is a regression, exit 1."""
    run = copy_of()
    fail_bit_identity(run)
    res = hqval("compare", str(golden), str(run))
    assert res.code == 1 and "REGRESSION" in res.out
