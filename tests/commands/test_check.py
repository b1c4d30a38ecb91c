"""``hqval check``: exit codes and the rows it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval.cli import main


def test_emu_cells_pass_and_rows_are_written(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    code = main(["check", "--arch", "gfx1030", "--backend", "emu", "--workers", "0",
                 "-k", "gemv_mq4c_r2", "--json", str(out),
                 "--junit-xml", str(tmp_path / "j.xml")])
    assert code == 0
    rows = json.loads(out.read_text())
    assert {r["identity"] for r in rows} >= {"padded_offset[gemv_mq4c_r2|gfx1030|emu]",
                                             "bit_identity[gemv_mq4c_r2|gfx1030|emu]"}
    assert all(r["status"] in ("pass", "unsupported") for r in rows)
    assert (tmp_path / "j.xml").exists()
    assert "gfx1030: emu: requested by name" in capsys.readouterr().out


def test_auto_records_its_choice(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--arch", "gfx1100", "--backend", "auto", "--workers", "0",
                 "-k", "gemv_hfq4g256_r1 and reference_parity"])
    assert code == 0
    assert "gfx1100: auto: " in capsys.readouterr().out


def test_unavailable_backend_is_exit_2_naming_what_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hqval.backends.hip import visible_devices

    if visible_devices() > 0:
        pytest.skip("an AMD GPU is present: hip is available here")
    assert main(["check", "--arch", "gfx1100", "--backend", "hip"]) == 2
    assert "libamdhip64" in capsys.readouterr().err


def test_bad_input_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--arch", "gfx9999", "--backend", "emu"]) == 2
    assert "unknown arch gfx9999" in capsys.readouterr().err
    assert main(["check", "--backend", "emu"]) == 2
    assert main(["check", "--arch", "gfx1100", "--backend", "emu", "--check", "nope"]) == 2
    assert "unknown check(s) nope" in capsys.readouterr().err
    missing = tmp_path / "nope.yaml"
    assert main(["check", "--arch", "gfx1100", "--backend", "emu",
                 "--manifest", str(missing)]) == 2


def test_external_manifest_gets_the_same_checks(tmp_path: Path) -> None:
    # An external tree: one kernel of ours copied under another manifest.
    src = Path(__file__).resolve().parents[2] / "kernels"
    manifest = tmp_path / "kernels.yaml"
    manifest.write_text(
        "schema: 1\n"
        "allow_outside_tree: true\n"
        f"include_dirs: [{src / 'include'}]\n"
        "kernels:\n"
        "  - name: gemv_hfq4g256_r1\n"
        f"    source: {src / 'gemv_hfq4g256.hip'}\n"
        "    qt: 6\n    kind: gemv\n    requires: any\n"
        "  - name: gemv_mq4g256v2_r1\n"
        f"    source: {src / 'gemv_hfq4g256.hip'}\n"
        "    qt: 44\n    kind: gemv\n    requires: any\n    baseline: gemv_hfq4g256_r1\n")
    out = tmp_path / "rows.json"
    assert main(["check", "--arch", "gfx1201", "--backend", "emu", "--workers", "0",
                 "--manifest", str(manifest), "--json", str(out)]) == 0
    rows = {r["identity"]: r["status"] for r in json.loads(out.read_text())}
    assert rows["bit_identity[gemv_mq4g256v2_r1|gfx1201|emu]"] == "pass"


def test_k_without_a_match_is_exit_2_at_once_naming_close_matches(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.checks import session

    def no_workers(*a: object, **k: object) -> None:
        raise AssertionError("cells started although -k matches nothing")

    monkeypatch.setattr(session, "run_cells", no_workers)
    code = main(["check", "--arch", "gfx1100", "--backend", "emu", "-k", "bit_identiy"])
    err = capsys.readouterr().err
    assert code == 2  # refused before any cell started (no_workers above)
    assert err.count("\n") == 1  # one line
    assert "-k 'bit_identiy' matches none of the" in err
    assert "close matches: bit_identity" in err
    assert main(["check", "--arch", "gfx1100", "--backend", "emu", "-k", "and or"]) == 2
    assert "could not be evaluated" in capsys.readouterr().err


def test_k_that_matches_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.checks.session import keyword_problem
    from hqval.manifest import DEFAULT_MANIFEST

    # the same collection pytest runs: an expression that selects cells passes
    assert keyword_problem([DEFAULT_MANIFEST], ["gfx1100"], "emu", None,
                           "gemv_mq4c_r2 and not padded_offset") == ""


def test_cache_dir_is_where_the_checks_compile(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """--cache-dir decides where the check session's backend compiles, not $HQVAL_CACHE
    (the run used to compile and audit into --cache-dir and check from $HQVAL_CACHE)."""
    env_cache, flag_cache = tmp_path / "env", tmp_path / "flag"
    monkeypatch.setenv("HQVAL_CACHE", str(env_cache))
    code = main(["check", "--arch", "gfx1030", "--backend", "emu", "--workers", "0",
                 "-k", "gemv_mq4c_r2 and bit_identity", "--cache-dir", str(flag_cache)])
    assert code == 0
    assert list(flag_cache.rglob("*.co"))
    assert not env_cache.exists() or not list(env_cache.rglob("*.co"))
