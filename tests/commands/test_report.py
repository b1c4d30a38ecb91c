from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval.cli import main

from ..conftest import RunFactory, evidence  # type: ignore[import-not-found]


def test_report_merges_runs_from_several_machines(make_run: RunFactory, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(evidence("gfx1100", "hip"), arch="gfx1100", backend="hip", host="lab-a")
    b = make_run(evidence("gfx1201"), arch="gfx1201", host="lab-b")
    out = tmp_path / "rep"
    assert main(["report", str(a), str(b), "-o", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "lab-a" in html and "lab-b" in html
    adm = json.loads((out / "admission.json").read_text())
    assert {c["arch"] for c in adm["cells"]} == {"gfx1100", "gfx1201"}
    md = (out / "checkpoint.md").read_text()
    assert "| gfx1100 | measured |" in md and "| gfx1201 | emulated |" in md
    assert "report.html" in capsys.readouterr().out


def test_report_with_baseline_shows_the_comparison(make_run: RunFactory,
                                                   tmp_path: Path) -> None:
    base = make_run(evidence("gfx1100"))
    new = make_run(evidence("gfx1100", fail="bit_identity"))
    assert main(["report", str(new), "--baseline", str(base), "-o", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "checkpoint.md").read_text()
    assert "## Against the baseline" in md and "1 regression(s)" in md


def test_report_needs_out(make_run: RunFactory) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", str(make_run(evidence("gfx1100")))])
    assert exc.value.code == 2


def test_report_records_which_backend_ran_and_why(make_run: RunFactory,
                                                  tmp_path: Path) -> None:
    run = make_run(evidence("gfx1100"))
    env_path = run / "envelope.json"
    env = json.loads(env_path.read_text())
    why = "auto: emu (backend 'hip': failed to dlopen libamdhip64.so)"
    env.update(requested_backend="auto",
               backends={"gfx1100": {"backend": "emu", "selection": why}})
    env_path.write_text(json.dumps(env))
    assert main(["report", str(run), "-o", str(tmp_path / "r")]) == 0
    html = (tmp_path / "r" / "report.html").read_text()
    assert "requested_backend" in html and "failed to dlopen libamdhip64.so" in html
