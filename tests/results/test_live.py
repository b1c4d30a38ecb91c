from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from hqval.result import Row, Status
from hqval.results import live, store

CELLS = textwrap.dedent("""
    import json
    import pytest

    @pytest.mark.parametrize("k", ["k0", "k1", "k2"])
    def test_cell(k, record_property):
        row = {"kind": "check", "check": "c", "kernel": k, "arch": "gfx1100",
               "backend": "emu", "status": "fail" if k == "k2" else "pass"}
        record_property("hqval_row", json.dumps(row))
        assert k != "k2"
""")


def _session(tmp_path: Path) -> int:
    (tmp_path / "cells").mkdir(exist_ok=True)
    f = tmp_path / "cells" / "test_cells.py"
    f.write_text(CELLS)
    ini = tmp_path / "cells" / "pytest.ini"
    ini.write_text("[pytest]\n")
    return int(pytest.main([str(f), "-c", str(ini), "-q", "-p", "no:cacheprovider",
                            "-p", "no:xdist", "-p", "no:benchmark",
                            "--import-mode=importlib"]))


def test_rows_are_appended_as_cells_finish_and_done_cells_are_deselected(
        tmp_path: Path) -> None:
    w = store.RunWriter.create(tmp_path / "run", store.make_envelope(backend="emu"))
    w.append([Row("check", "c", "k1", "gfx1100", "emu", Status.PASS)])
    scratch = tmp_path / "s"
    scratch.mkdir()
    # items are matched by name; hqval.checks.plugin names each item by its identity
    with live.attach(w, {"test_cell[k1]"}, scratch):
        code = _session(tmp_path)
    assert code == 1  # k2 failed
    # k1 was deselected (already in the run); k0 and k2 were appended when they finished
    assert live.appended == {"c[k0|gfx1100|emu]", "c[k2|gfx1100|emu]"}
    lines = [json.loads(x) for x in (w.path / "rows.jsonl").read_text().splitlines()]
    assert [d["kernel"] for d in lines] == ["k1", "k0", "k2"]
    assert lines[2]["status"] == "fail"
    # the environment is restored: a later session in this process is untouched
    assert live.SKIP_ENV not in os.environ
    assert "hqval.results.live" not in os.environ.get("PYTEST_ADDOPTS", "")


def test_everything_done_collects_nothing(tmp_path: Path) -> None:
    w = store.RunWriter.create(tmp_path / "run", store.make_envelope(backend="emu"))
    w.append([Row("check", "c", k, "gfx1100", "emu", Status.PASS) for k in ("k0", "k1", "k2")])
    scratch = tmp_path / "s"
    scratch.mkdir()
    with live.attach(w, {f"test_cell[k{i}]" for i in range(3)}, scratch):
        assert _session(tmp_path) == pytest.ExitCode.NO_TESTS_COLLECTED
    assert len(store.load(w.path).rows) == 3
