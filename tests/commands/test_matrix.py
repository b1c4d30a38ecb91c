"""``hqval matrix``: markdown and --json output, arch filter, schema errors as exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval.cli import main
from hqval.matrix import MATRICES_DIR


def test_json_has_arches_formats_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["arches"]["gfx1030"]["gemv_rows_default"] == 1
    assert m["arches"]["gfx1151"]["gemv_rows_default"] == 2
    assert m["formats"]["mq4g256v2"]["qt"] == 44
    assert m["devices"]["h200"]["l2_bytes"] == 50 * 2**20
    assert m["kernels"], "the suite's own manifest lists kernels"
    assert all(set(k["arches"]) <= set(m["arches"]) for k in m["kernels"])


def test_markdown_and_arch_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--arch", "gfx1201"]) == 0
    out = capsys.readouterr().out
    assert "| gfx1201 | rdna4 |" in out and "| gfx1100 |" not in out
    assert main(["matrix", "--json", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["schema_version"] == 1


def test_bad_file_exits_2_naming_file_and_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    text = (MATRICES_DIR / "arches.yaml").read_text().replace("wave_size: 32", "wave_size: 48",
                                                              1)
    bad = tmp_path / "arches.yaml"
    bad.write_text(text)
    assert main(["matrix", "--arches-file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "arches.gfx1010.wave_size: 48 is not one of [32, 64]" in err


def test_unknown_arch_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--arch", "gfx906"]) == 2
    assert "unknown arch gfx906" in capsys.readouterr().err
