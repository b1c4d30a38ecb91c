"""One check session: rows reach the callback as cells finish, cells a run already has
are deselected in every process, and a session that collects nothing says so."""

from __future__ import annotations

from hqval.checks.session import run_cells
from hqval.manifest import DEFAULT_MANIFEST
from hqval.result import Row, Status

KEY = "gemv_mq4g256v2_r1 and (bit_identity or padded_offset)"
BIT = "bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]"
PAD = "padded_offset[gemv_mq4g256v2_r1|gfx1100|emu]"


def test_rows_reach_the_callback_and_done_cells_are_deselected() -> None:
    seen: list[Row] = []
    result = run_cells([DEFAULT_MANIFEST], ["gfx1100"], "emu", keyword=KEY, workers="0",
                       on_row=seen.append)
    assert result.code == 0 and result.collected == 2 and not result.problem()
    assert {r.identity: r.status for r in seen} == {BIT: Status.PASS, PAD: Status.UNSUPPORTED}
    assert result.output  # pytest's own output was kept, not printed
    again = run_cells([DEFAULT_MANIFEST], ["gfx1100"], "emu", keyword=KEY, workers="0",
                      skip={BIT})
    assert [r.identity for r in again.rows] == [PAD] and again.collected == 1


def test_nothing_collected_is_reported() -> None:
    result = run_cells([DEFAULT_MANIFEST], ["gfx1100"], "emu", keyword="no_such_cell",
                       workers="0")
    assert result.collected == 0 and result.rows == [] and result.code == 5
