"""Faults of class 'one judged run', readers, second round: what the judge finds a run
cannot vouch for is every reader's answer.  ``hqval compare``, ``hqval history`` and
``admit --baseline`` refuse a run holding an audit pass its own details contradict (held:
they read ``admission.undamaged``); ``hqval.results.store.load_run`` gave such a row as a
bare pass, the damage nowhere in its frame, where ``hqval admit`` exits 2: the frame now
says it (``attrs["damage"]``, a ``damage`` column)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hqval.results.store import load_run

from .conftest import ARCH, Result, as_another_run, assert_damaged, rewrite_each

Hq = Callable[..., Result]
PAYLOAD = f"audit_payload_offset[gemv_mq4g256v2_r1|{ARCH}|isa]"
WHY = "passes, but its details say cells_missing 5"


def _contradicted(run: Path) -> None:
    def change(r: dict[str, Any]) -> None:
        if r["identity"] == PAYLOAD:
            r["details"]["cells_missing"] = 5
    rewrite_each(run, change)


@pytest.mark.parametrize("reader", ["compare", "history", "admit-baseline"])
def test_every_reader_refuses_a_row_its_own_details_contradict(
        golden: Path, copy_of: Callable[[], Path], hqval: Hq, reader: str) -> None:
    run = as_another_run(copy_of())  # another night's run of the same inputs
    _contradicted(run)
    args = {"compare": ["compare", str(golden), str(run)],
            "history": ["history", str(golden), str(run)],
            "admit-baseline": ["admit", str(golden), "--baseline", str(run)]}[reader]
    assert_damaged(hqval(*args), "damaged", WHY)


def test_load_run_says_the_damage_admit_exits_2_on(golden: Path,
                                                  copy_of: Callable[[], Path],
                                                  hqval: Hq) -> None:
    run = copy_of()
    _contradicted(run)
    assert_damaged(hqval("admit", str(run)), WHY)
    df = load_run(run)
    assert any(WHY in line for line in df.attrs["damage"])
    row = df[df["identity"] == PAYLOAD]
    assert row["status"].tolist() == ["pass"] and WHY in row["damage"].iloc[0]
    clean = load_run(golden)
    assert clean.attrs["damage"] == [] and set(clean["damage"]) == {""}
