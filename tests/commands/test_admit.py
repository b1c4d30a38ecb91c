from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval.cli import main
from hqval.result import Row, Status

from ..conftest import RunFactory, evidence  # type: ignore[import-not-found]


def test_admit_passes_and_writes_json(make_run: RunFactory, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(evidence("gfx1201"), arch="gfx1201")
    out = tmp_path / "adm.json"
    assert main(["admit", str(run), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| gfx1201 | qt=44 mq4g256v2 | decode | **emulated** |" in text
    data = json.loads(out.read_text())
    assert data["exit_code"] == 0
    assert {c["status"] for c in data["cells"]} == {"emulated", "untested"}


def test_admit_exit_1_on_failing_cell(make_run: RunFactory,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(evidence("gfx1100", fail="bit_identity"), arch="gfx1100")
    assert main(["admit", str(run)]) == 1
    assert "**rejected**" in capsys.readouterr().out


def test_admit_exit_1_on_timing_regression_against_baseline(make_run: RunFactory) -> None:
    base = make_run(evidence("gfx1100", "hip"), arch="gfx1100", backend="hip")
    same = make_run(evidence("gfx1100", "hip", seed=1), arch="gfx1100", backend="hip")
    slower = make_run(evidence("gfx1100", "hip", slow=1.03, seed=2), arch="gfx1100",
                      backend="hip")
    assert main(["admit", str(same), "--baseline", str(base)]) == 0
    assert main(["admit", str(slower), "--baseline", str(base)]) == 1


def test_admit_exit_2_on_infrastructure_error(make_run: RunFactory) -> None:
    rows = [*evidence("gfx1100"),
            Row("step", "timing", "-", "gfx1100", "hip", Status.ERROR,
                message="backend hip unavailable: failed to dlopen libamdhip64.so",
                details={"infrastructure": True})]
    assert main(["admit", str(make_run(rows))]) == 2


def test_admit_bad_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admit", str(tmp_path)]) == 2
    assert "no envelope.json" in capsys.readouterr().err


def test_admit_bad_policy_exit_2(make_run: RunFactory, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("schema: 1\nformats: {x: {qt: 44}}\n")
    assert main(["admit", str(make_run(evidence("gfx1100"))), "--policy", str(bad)]) == 2
    assert "formats.x.paths" in capsys.readouterr().err
