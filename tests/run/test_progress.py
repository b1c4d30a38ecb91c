"""hqval's own progress display: cells done of expected, outcomes (kills as kills),
elapsed and ETA on a terminal; one line per step off a terminal."""

from __future__ import annotations

import io

from hqval.run.progress import Display


def test_off_a_terminal_one_line_per_step_and_no_bars() -> None:
    buf = io.StringIO()
    p = Display(buf, tty=False)
    p.start("checks", 3)
    for i in range(3):
        p.cell(f"c[k{i}|gfx1100|emu]", "pass")
    p.finish("checks", "3 rows, 0 fail/error, 1.0 s")
    assert buf.getvalue() == "checks   3 rows, 0 fail/error, 1.0 s\n"


def test_terminal_line_counts_cells_of_expected_with_kills_and_eta() -> None:
    buf = io.StringIO()
    p = Display(buf, tty=True)
    p.start("mutants", 4)
    p.cell("bit_identity[mut_a|gfx1100|emu]", "kill")
    p.cell("bit_identity[mut_b|gfx1100|emu]", "pass")
    line = p.line()
    assert line.startswith("mutants  [############............] 2/4 ")
    assert "ETA" in line and "1 pass 1 kill" in line and "fail" not in line
    p.finish("mutants", "done")
    assert buf.getvalue().endswith("\r\x1b[2Kmutants  done\n")
