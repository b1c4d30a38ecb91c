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
    assert "ETA" not in line  # 2 cells in no time: no rate yet
    assert "1 pass 1 kill" in line and "fail" not in line
    p.finish("mutants", "done")
    assert buf.getvalue().endswith("\r\x1b[2Kmutants  done\n")


def test_no_eta_until_the_rate_means_something() -> None:
    """The first cells (cache hits, a warm-up) say nothing about the rest: no ETA from 1
    of 495 after a second, one from 50 of 495 after 10 s."""
    clock = [0.0]
    p = Display(io.StringIO(), tty=True)
    p._now = lambda: clock[0]
    p.start("compile", 495)
    clock[0] = 1.0
    p.cell("compile[k0|gfx1100|toolchain]", "pass")
    assert "ETA" not in p.line()
    for i in range(1, 50):
        p.cell(f"compile[k{i}|gfx1100|toolchain]", "pass")
    clock[0] = 10.0
    assert "50/495" in p.line() and "ETA 1:29" in p.line()


def test_a_cell_reported_twice_counts_once_and_na_is_not_unsupported() -> None:
    p = Display(io.StringIO(), tty=True)
    p.start("checks", 3)
    p.cell("bit_identity[k|gfx1100|emu]", "pass")
    p.cell("bit_identity[k|gfx1100|emu]", "pass")  # as it finished, then when written
    p.cell("padded_offset[k|gfx1100|emu]", "n/a")
    line = p.line()
    assert " 2/3 " in line and "1 pass 1 n/a" in line and "unsupported" not in line


def test_the_closing_table_is_compact() -> None:
    """A row per arch and format, a column per path: nine arches fit in 100 columns
    (the markdown table it replaces was 400 wide, with every reason and kernel)."""
    from hqval.admission import Admission, AdmissionStatus, Cell
    from hqval.run.progress import status_table

    arches = ["gfx1010", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
              "gfx1200", "gfx1201"]
    cells = tuple(Cell(qt, f"fmt{qt}", a, path,
                       AdmissionStatus.EMULATED if path == "decode" else
                       AdmissionStatus.FALLBACK, ("a long reason " * 20,), ("x",))
                  for a in arches for qt in (44, 45) for path in ("decode", "prefill"))
    table = status_table(Admission(cells, (), 0))
    lines = table.splitlines()
    assert lines[0].split() == ["arch", "qt", "decode", "prefill"]
    assert len(lines) == 2 + 18 + 1 and max(map(len, lines)) <= 100
    assert lines[2].split() == ["gfx1010", "qt=44", "emulated", "fallback"]
    assert lines[3].split() == ["gfx1010", "qt=45", "emulated", "fallback"]
    assert lines[-1] == "18 emulated, 18 fallback"
    assert "a long reason" not in table


def test_paths_past_the_width_go_to_a_further_table_never_cut_off() -> None:
    """Every path of the policy (ten of them) on a 60-column terminal: each status is
    shown whole, in a second table, none truncated."""
    from hqval.admission import Admission, AdmissionStatus, Cell
    from hqval.run.progress import status_table

    paths = ["decode", "prefill", "fused_decode", "fused_prefill", "moe_decode",
             "moe_prefill"]
    cells = tuple(Cell(qt, f"fmt{qt}", "gfx1100", p,
                       AdmissionStatus.UNSUPPORTED if p == "moe_prefill" else
                       AdmissionStatus.EMULATED, ("why",), ("x",))
                  for qt in (44, 45) for p in paths)
    table = status_table(Admission(cells, (), 0), width=60)
    lines = table.splitlines()
    assert max(map(len, lines)) <= 60
    heads = [ln.split() for ln in lines if ln.startswith("arch")]
    assert len(heads) >= 2 and [h[:2] for h in heads] == [["arch", "qt"]] * len(heads)
    assert sorted(p for h in heads for p in h[2:]) == sorted(paths)
    body = [ln.split() for ln in lines if ln.startswith("gfx1100")]
    assert sum(len(b) - 2 for b in body) == len(cells)
    assert sum(b.count("unsupported") for b in body) == 2
    assert lines[-1] == "10 emulated, 2 unsupported"
