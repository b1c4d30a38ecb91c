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
    # qt=44 has no padded layout: that cell is not made (n/a), never a skipped item
    assert "padded_offset[gemv_mq4g256v2_r1|gfx1100|emu]" not in by_id
    assert all(r["status"] == "pass" for r in rows)
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


def test_junit_has_name_time_and_failure_only_with_classnames_per_check_and_arch(
        tmp_path: Path) -> None:
    code, rows, junit = _run(tmp_path, [DEFAULT_MUTANTS], "-k",
                             "gemv_mut_halves_swapped_r1 and (reference_parity or bit_identity)")
    assert code == 1 and len(rows) == 2
    root = ET.parse(junit).getroot()
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    assert set(cases) == {r["identity"] for r in rows}
    assert not list(root.iter("properties")) and not list(root.iter("property"))
    assert "hqval_row" not in junit.read_text() and '"details"' not in junit.read_text()
    failed = cases["reference_parity[gemv_mut_halves_swapped_r1|gfx1100|emu]"]
    assert failed.get("classname", "").endswith("mutants.yaml.reference_parity.gfx1100")
    assert failed.get("time") is not None
    (failure,) = failed.iter("failure")
    assert "reference_parity[gemv_mut_halves_swapped_r1|gfx1100|emu]: fail" in (
        failure.get("message") or "")
    assert cases["bit_identity[gemv_mut_halves_swapped_r1|gfx1100|emu]"].get(
        "classname", "").endswith("mutants.yaml.bit_identity.gfx1100")


def test_markers_per_check_and_arch_select_with_m(tmp_path: Path) -> None:
    code, rows, _ = _run(tmp_path, [DEFAULT_MANIFEST], "--hqval-arch", "gfx1201",
                         "-m", "padded_offset and gfx1201", "-k", "gemv_mq4c_r1")
    assert code == 0
    assert [r["identity"] for r in rows] == ["padded_offset[gemv_mq4c_r1|gfx1201|emu]"]


def test_rows_travel_on_the_reports_through_xdist(tmp_path: Path) -> None:
    """With a worker, each row reaches the controller on its test report (pytest's own
    report serialisation), and the session's stash holds them, not a module global."""
    from hqval.checks import plugin

    seen: dict[str, object] = {}

    class Probe:
        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session: pytest.Session) -> None:
            seen["rows"] = plugin.collected_rows(session.config)

    ini = tmp_path / "pytest.ini"
    ini.write_text(INI)
    out = tmp_path / "rows.json"
    code = pytest.main([str(DEFAULT_MANIFEST), "-p", "hqval.checks.plugin", "-n", "1",
                        "-p", "no:cacheprovider", "-p", "no:benchmark", "-c", str(ini),
                        "--rootdir", str(DEFAULT_MANIFEST.parent), "-q",
                        "--hqval-arch", "gfx1100", "--hqval-backend", "emu",
                        "--hqval-json", str(out), "-k", "gemv_mq4g256v2_r1 and bit_identity"],
                       plugins=[Probe()])
    assert int(code) == 0
    assert [r["identity"] for r in json.loads(out.read_text())] == [
        "bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]"]
    rows = seen["rows"]
    assert isinstance(rows, list) and [r.status.value for r in rows] == ["pass"]
    assert not [n for n in vars(plugin) if n.startswith("_pending")]


def test_only_cells_a_check_applies_to_become_items(tmp_path: Path) -> None:
    """Every kernel x check on gfx1030 (no WMMA): the items are exactly the cells
    hqval.checks.cell.not_applicable lets through, none collected only to be skipped."""
    from hqval.checks.cell import CHECKS, not_applicable
    from hqval.manifest import load_manifest
    from hqval.matrix import resolve_arch

    names: list[str] = []

    class Names:
        def pytest_collection_finish(self, session: pytest.Session) -> None:
            names.extend(i.name for i in session.items)

    ini = tmp_path / "pytest.ini"
    ini.write_text(INI)
    pytest.main([str(DEFAULT_MANIFEST), "-p", "hqval.checks.plugin", "-p", "no:xdist",
                 "-p", "no:cacheprovider", "-p", "no:benchmark", "-c", str(ini),
                 "--rootdir", str(DEFAULT_MANIFEST.parent), "-qq", "--collect-only",
                 "--hqval-arch", "gfx1030", "--hqval-backend", "emu"], plugins=[Names()])
    m, arch = load_manifest(), resolve_arch("gfx1030")
    every = [(c, s) for s in m.kernels for c in CHECKS]
    applicable = {f"{c}[{s.name}|gfx1030|emu]" for c, s in every
                  if not not_applicable(c, s, arch, m)}
    assert set(names) == applicable and len(names) == len(applicable)
    assert len(applicable) < len(every) / 2  # most cells do not apply
    assert "fallback[gemm_mq4g256v2_wmma_gfx11|gfx1030|emu]" in applicable  # no WMMA here
    assert "prefill_parity[gemm_mq4g256v2_wmma_gfx11|gfx1030|emu]" not in applicable


def test_a_mutants_cells_follow_those_of_the_kernel_it_breaks(tmp_path: Path) -> None:
    """In a session of the kernels and their mutants, every mutant's cells come right
    after the cells of the kernel it breaks (xdist hands out runs of consecutive items:
    the mutant's launches of the same baseline meet the real kernel's in one worker);
    each kernel's own cells stay together, in the order the manifests give."""
    from hqval.checks.session import _Selection
    from hqval.manifest import load_mutants

    ini = tmp_path / "pytest.ini"
    ini.write_text(INI)
    sel = _Selection()
    code = pytest.main([str(DEFAULT_MANIFEST), str(DEFAULT_MUTANTS), "-p", "hqval.checks.plugin",
                        "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:benchmark",
                        "-c", str(ini), "--rootdir", str(DEFAULT_MANIFEST.parent), "-qq",
                        "--collect-only", "--hqval-arch", "gfx1100", "--hqval-arch", "gfx1201",
                        "--hqval-backend", "emu"], plugins=[sel])
    assert code == 0
    kernel = [i.split("[", 1)[1].split("|")[0] for i in sel.kept]
    broken = {m.name: m.mutant_of for m in load_mutants(DEFAULT_MUTANTS).kernels}
    runs: list[str] = []  # each kernel's run of consecutive cells
    for k in kernel:
        if not runs or runs[-1] != k:
            runs.append(k)
    assert len(runs) == len(set(runs))  # one run per kernel
    assert any(m in runs for m in broken)
    for m, real in broken.items():
        if m in runs and real in runs:
            between = runs[runs.index(real) + 1:runs.index(m)]
            assert all(broken.get(k) == real for k in between), (m, real, between)


def test_cells_share_one_case_per_inputs_across_arches_and_the_memo_ends_with_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session turns the oracle's memo on around its cells: a fused GEMV's reference
    parity on two arches builds its case once (the inputs do not depend on the arch),
    and the memo is off again when the session ends."""
    from hqval.checks import oracle

    built: list[tuple[bool, int]] = []
    real = oracle.build_case

    def spy(*args: object, **kw: object) -> oracle.Case:
        case = real(*args, **kw)  # type: ignore[arg-type]
        built.append((oracle._MEMO is not None, id(case)))
        return case

    monkeypatch.setattr(oracle, "build_case", spy)
    code, rows, _ = _run(tmp_path, [DEFAULT_MANIFEST], "--hqval-arch", "gfx1201",
                         "-k", "gemv_mq4g256v2_gate_up_r1 and reference_parity")
    assert code == 0 and len(rows) == 2 and all(r["status"] == "pass" for r in rows)
    assert len(built) == 2 and all(on for on, _ in built)
    assert built[0][1] == built[1][1]  # one case for both arches' cells
    assert oracle._MEMO is None
