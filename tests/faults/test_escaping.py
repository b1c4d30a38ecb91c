"""Fault class: identities, messages and envelope fields with markdown in them.  What the
CLI writes for review (hqval compare, the report's checkpoint.md) keeps them as text: no
extra table column, no link, image, HTML or autolink."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hqval.cli import main
from hqval.result import Row, Status

from ..conftest import RunFactory, evidence, live_markup, table_cells  # type: ignore[import-not-found]

EVIL = "k|x`y`` <img src=x onerror=alert(1)> [click](https://evil.example) www.evil.example"


def _tables_keep_their_columns(md: str) -> None:
    for table in re.findall(r"(?m)(^\|.*\n)+", md + "\n"):
        lines = table.splitlines()
        assert len({table_cells(line) for line in lines}) == 1, lines


def test_hqval_compare_escapes_identities_and_labels(make_run: RunFactory, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # a kernel of the runs' own tables, its rows as a check writes them (compare refuses a
    # run whose rows its envelope does not vouch for)
    table = {EVIL: {"qt": 44, "kind": "gemv", "requires": "any"}}
    base = make_run([Row("check", "reference_parity", EVIL, "gfx1100", "emu", Status.PASS,
                         measured=1e-6, tolerance=1e-4, seed=0)],
                    name=f"base {EVIL}".replace("/", "_"), kernels=table)
    new = make_run([Row("check", "reference_parity", EVIL, "gfx1100", "emu", Status.FAIL,
                        measured=1.0, tolerance=1e-4, seed=0, message=f"wrong | {EVIL}")],
                   name="new", kernels=table)
    out = tmp_path / "cmp.md"
    assert main(["compare", str(base), str(new), "-o", str(out)]) == 1
    capsys.readouterr()
    md = out.read_text()
    assert "reference_parity" in md  # the cell is listed
    assert live_markup(md) == []
    _tables_keep_their_columns(md)


def test_hqval_report_checkpoint_escapes_what_the_rows_carry(
        make_run: RunFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [*evidence("gfx1100", fail="reference_parity"),
            Row("check", "bit_identity", EVIL, "gfx1100", "emu", Status.FAIL,
                message=f"wrong | {EVIL}")]
    run = make_run(rows, arch="gfx1100", host=f"lab {EVIL}")
    out = tmp_path / "report"
    main(["report", str(run), "-o", str(out)])
    capsys.readouterr()
    md = (out / "checkpoint.md").read_text()
    assert "bit_identity" in md
    # the report's own figure links (fixed names under plots/) are the only markup
    body = "\n".join(ln for ln in md.splitlines()
                     if not re.fullmatch(r"!\[[^\]`]*\]\(plots/[\w.-]+\.svg\)", ln))
    assert live_markup(body) == []
    _tables_keep_their_columns(md)
