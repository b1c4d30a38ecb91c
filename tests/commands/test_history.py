"""``hqval history``: exit 1 on a step up beyond change_max, 0 on a clean series, 2 on bad
input; one SVG per cell."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from hqval.cli import UsageError
from hqval.commands import history
from hqval.result import Row, Status
from hqval.results.store import RunWriter, make_envelope


def _run(d: Path, ratio: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    a = [list(20.0 * rng.lognormal(0, 0.002, 60)) for _ in range(3)]
    b = [list(20.0 * ratio * rng.lognormal(0, 0.002, 60)) for _ in range(3)]
    w = RunWriter.create(d, make_envelope(backend="cuda", arch="sm_90"))
    w.append([Row("timing", "timing_cold", "gemv_mq4g256v2_r8@17408x5120", "sm_90", "cuda",
                  Status.PASS, measured=ratio,
                  details={"mode": "cold", "qt": 44, "kind": "gemv", "samples_a": a,
                           "samples_b": b})])
    w.close()
    return d


def _args(runs: list[Path], svg: Path | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    history.add_arguments(p)
    return p.parse_args([*map(str, runs), *(["--svg", str(svg)] if svg else [])])


def test_a_step_up_is_a_regression_at_its_first_night(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    runs = [_run(tmp_path / f"n{i:02d}", 1.0 if i < 5 else 1.03, i) for i in range(9)]
    assert history.run(_args(runs, tmp_path / "svg")) == 1
    out = capsys.readouterr().out
    assert "REGRESSED" in out and "at n05" in out
    assert len(list((tmp_path / "svg").glob("*.svg"))) == 1


def test_a_clean_series_passes(tmp_path: Path) -> None:
    runs = [_run(tmp_path / f"n{i:02d}", 1.0, i) for i in range(6)]
    assert history.run(_args(runs)) == 0


def test_one_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="at least 2 runs"):
        history.run(_args([_run(tmp_path / "n0", 1.0, 0)]))
