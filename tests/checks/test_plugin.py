"""The pytest plugin: cells become items named by their identity, rows reach the JSON
file, JUnit XML names the cells, and a failing cell fails the session."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hqval.manifest import DEFAULT_MANIFEST, DEFAULT_MUTANTS

INI = "[pytest]\naddopts = --strict-markers\n"


def _run(tmp_path: Path, manifests: list[Path], *extra: str) -> tuple[int, list[dict], Path]:
    ini = tmp_path / "pytest.ini"
    ini.write_text(INI)
    out = tmp_path / "rows.json"
    junit = tmp_path / "junit.xml"
    code = pytest.main([*map(str, manifests), "-p", "hqval.checks.plugin", "-p", "no:xdist",
                        "-p", "no:cacheprovider", "-p", "no:benchmark", "-c", str(ini),
                        "--rootdir", str(DEFAULT_MANIFEST.parent), "-q",
                        "--hqval-arch", "gfx1100", "--hqval-backend", "emu",
                        "--hqval-json", str(out), "--junit-xml", str(junit), *extra])
    return int(code), json.loads(out.read_text()), junit


def test_cells_are_items_with_identity_ids(tmp_path: Path) -> None:
    code, rows, junit = _run(tmp_path, [DEFAULT_MANIFEST], "-k", "gemv_mq4g256v2_r1")
    assert code == 0
    ids = {r["identity"] for r in rows}
    assert "bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]" in ids
    assert "reference_parity[gemv_mq4g256v2_r1|gfx1100|emu]" in ids
    by_id = {r["identity"]: r for r in rows}
    assert by_id["bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]"]["status"] == "pass"
    assert by_id["padded_offset[gemv_mq4g256v2_r1|gfx1100|emu]"]["status"] == "unsupported"
    assert all(r["kind"] == "check" and r["seed"] == 0 for r in rows)
    names = {tc.get("name") for tc in ET.parse(junit).getroot().iter("testcase")}
    assert "bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]" in names


def test_a_surviving_check_fails_the_session(tmp_path: Path) -> None:
    code, rows, _ = _run(tmp_path, [DEFAULT_MUTANTS], "-k",
                         "gemv_mut_halves_swapped_r1 and reference_parity")
    assert code == 1  # the mutant fails the check: the session reports a failure
    assert [r["status"] for r in rows] == ["fail"]
    assert rows[0]["identity"] == "reference_parity[gemv_mut_halves_swapped_r1|gfx1100|emu]"


def test_missing_arch_is_a_usage_error(tmp_path: Path) -> None:
    ini = tmp_path / "pytest.ini"
    ini.write_text(INI)
    code = pytest.main([str(DEFAULT_MANIFEST), "-p", "hqval.checks.plugin", "-p", "no:xdist",
                        "-p", "no:cacheprovider", "-c", str(ini), "-q"])
    assert int(code) != 0
