"""scripts/emu_bench.py: the row comparison says no to any difference in a judged row and to
an empty run; the benchmark runs one kernel (hqval only) and reports a rate."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "emu_bench.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("emu_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["emu_bench"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _run(d: Path, rows: list[dict[str, Any]]) -> Path:
    d.mkdir()
    (d / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


ROW = {"kind": "check", "identity": "bit_identity[k|gfx1100|emu]", "status": "pass",
       "measured": 0.0, "message": "", "details": {"seconds": 1.5, "x": [1, 2]}, "run_id": "a"}


def test_compare_rows_equal_apart_from_times_and_run_ids(tmp_path: Path) -> None:
    bench = _bench()
    a = _run(tmp_path / "a", [ROW, {"kind": "step", "identity": "s", "measured": 3.0}])
    b = _run(tmp_path / "b", [{**ROW, "run_id": "b", "details": {"seconds": 9.0, "x": [1, 2]}},
                              {"kind": "step", "identity": "s", "measured": 4.0}])
    assert bench.compare_rows(a, b) == 0


@pytest.mark.parametrize("change", [{"status": "fail"}, {"measured": 1e-9},
                                    {"details": {"seconds": 1.5, "x": [1, 3]}},
                                    {"identity": "bit_identity[k|gfx1201|emu]"}])
def test_compare_rows_says_no_to_any_difference(tmp_path: Path, change: dict[str, Any],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    a = _run(tmp_path / "a", [ROW])
    b = _run(tmp_path / "b", [{**ROW, **change}])
    assert bench.compare_rows(a, b) == 1
    assert " 0 differ" not in capsys.readouterr().out


def test_compare_rows_of_runs_without_judged_rows_is_no_evidence(tmp_path: Path) -> None:
    bench = _bench()
    a = _run(tmp_path / "a", [{"kind": "step", "identity": "s"}])
    b = _run(tmp_path / "b", [{"kind": "step", "identity": "s"}])
    assert bench.compare_rows(a, b) == 1


def test_bench_reports_a_rate_for_one_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    rows = bench.bench(1, None, "gemv_mq4c_r1")
    assert len(rows) == 1 and rows[0]["wave_instructions"] > 0
    assert rows[0]["hqval"]["wave_instructions_per_s"] > 0
    assert rows[0][f"hqval x{bench.TOKENS} batched"]["wave_instructions_per_s"] > 0
    assert "gemv_mq4c_r1" in capsys.readouterr().out


def test_matrix_runs_cold_then_warm_and_compares_their_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One small tree on one arch: the cold run fills a cache of the benchmark's own (the
    warm one replays its launches from it), both are timed and their rows are equal."""
    bench = _bench()
    tree = SCRIPT.parents[1] / "tests" / "data" / "engine_tree" / "toolchain_gap.yaml"
    top = tmp_path / "m"
    code = bench.matrix(top, ["gfx1100"], ["--manifest", str(tree), "--no-mutants",
                                           "--workers", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    figures = json.loads((top / "matrix.json").read_text())
    assert set(figures) == {"cold", "warm"}
    for label in ("cold", "warm"):
        assert figures[label]["wall_s"] > 0 and figures[label]["cpu_s"] > 0
        assert figures[label]["steps"]["checks"] is not None
        assert f"{label}: " in out
    assert any((top / "cache" / "emu-replay-v1").rglob("*")), "the cold run cached no launch"
    assert " 0 differ" in out


def test_matrix_refuses_a_directory_in_use(tmp_path: Path) -> None:
    bench = _bench()
    (tmp_path / "old").write_text("x")
    assert bench.matrix(tmp_path, ["gfx1100"], []) == 2
    assert (tmp_path / "old").read_text() == "x"


def test_matrix_run_that_writes_no_rows_is_exit_2(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A matrix whose run is refused before it writes rows (here a manifest that does not
    exist) is no figure: exit 2, naming the log, and no matrix.json."""
    bench = _bench()
    top = tmp_path / "m"
    assert bench.matrix(top, ["gfx1100"], ["--manifest", str(tmp_path / "none.yaml")]) == 2
    assert "wrote no rows" in capsys.readouterr().err
    assert (top / "cold.log").is_file() and not (top / "matrix.json").exists()
