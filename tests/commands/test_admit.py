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


def test_expect_arch_fails_closed_naming_an_arch_with_no_run(
        make_run: RunFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A runner that was offline leaves no run: --expect-arch makes that an explicit
    failure naming its arch, never a green night over the arches that did run."""
    a = make_run(evidence("gfx1201"), arch="gfx1201")
    b = make_run(evidence("gfx1100"), arch="gfx1100")
    assert main(["admit", str(a), str(b), "--expect-arch", "gfx1201,gfx1100"]) == 0
    capsys.readouterr()
    out = tmp_path / "adm.json"
    # must say no: gfx1100's run is missing tonight
    assert main(["admit", str(a), "--expect-arch", "gfx1201", "--expect-arch", "gfx1100",
                 "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "hqval admit: gfx1100: no run (--expect-arch)" in err
    assert "gfx1201: no run" not in err
    assert json.loads(out.read_text())["missing_arches"] == ["gfx1100"]
    # bare --expect-arch: every arch of arches.yaml, each missing one named on its own line
    from hqval.matrix import load_arches

    assert main(["admit", str(a), str(b), "--expect-arch"]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if "no run (--expect-arch)" in x]
    assert len(lines) == len(load_arches()) - 2
    # an unknown arch is bad input
    assert main(["admit", str(a), "--expect-arch", "gfx9999"]) == 2
    assert "unknown arch gfx9999" in capsys.readouterr().err


def test_missing_arches_reads_envelope_arch_lists_and_backends() -> None:
    from hqval.commands.admit import missing_arches

    envs = [{"arch": ["gfx1030"]}, {"arch": "gfx1100,gfx1150"},
            {"arch": [], "backends": {"gfx1201": {}}}]
    assert missing_arches(["gfx1010", "gfx1030", "gfx1100", "gfx1150", "gfx1201"],
                          envs) == ["gfx1010"]
    assert missing_arches([], envs) == []
