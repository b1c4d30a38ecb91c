from __future__ import annotations

from pathlib import Path

import pytest

from hqval.cli import main

from ..conftest import RunFactory, evidence  # type: ignore[import-not-found]


def test_compare_reports_regressions_as_markdown(make_run: RunFactory, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(evidence("gfx1100", "hip"), arch="gfx1100", backend="hip")
    new = make_run(evidence("gfx1100", "hip", fail="reference_parity", slow=1.03, seed=5),
                   arch="gfx1100", backend="hip")
    out = tmp_path / "cmp.md"
    assert main(["compare", str(base), str(new), "-o", str(out)]) == 1
    md = capsys.readouterr().out
    assert md == out.read_text()
    assert "2 regression(s)" in md
    worse = md[md.index("#### worse"):md.index("#### status flips")]
    assert "`timing_hot[gemv_mq4g256v2_r1@4096x4096\\|gfx1100\\|hip]`" in worse
    flips = md[md.index("#### status flips"):]
    assert "`reference_parity[gemv_mq4g256v2_r1\\|gfx1100\\|hip]`" in flips


def test_compare_identical_runs_exit_0(make_run: RunFactory,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(evidence("gfx1100"))
    b = make_run(evidence("gfx1100"))
    assert main(["compare", str(a), str(b)]) == 0
    assert "No changes." in capsys.readouterr().out


def test_compare_missing_run_exit_2(make_run: RunFactory, tmp_path: Path) -> None:
    assert main(["compare", str(make_run(evidence("gfx1100"))), str(tmp_path / "nope")]) == 2
