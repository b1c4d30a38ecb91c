"""Faults of class 'one judged run': every reader of a run's verdicts (``hqval admit``,
``report``, ``load_run``, the run's own admission) goes through one
``hqval.admission.judge``, under the one policy the run or the command was given."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hqval.admission import load_policy
from hqval.results.store import load_run

from .conftest import ARCH, Result, append_rows, hqval_process, run_args

Admit = Callable[..., Result]
CELL = f"timing_hot[gemv_mq4g256v2_r1@64x256|{ARCH}|emu]"


def _slow_pass(run: Path) -> None:
    """A timing cell stored as a pass whose own samples say v2 is 1.5x slower than v1."""
    rng = np.random.default_rng(0)
    a = [list(10.0 + rng.normal(0, 0.05, 20)) for _ in range(3)]
    b = [list(15.0 + rng.normal(0, 0.05, 20)) for _ in range(3)]
    append_rows(run, {"kind": "timing", "check": "timing_hot",
                      "kernel": "gemv_mq4g256v2_r1@64x256", "arch": ARCH, "backend": "emu",
                      "status": "pass", "measured": 1.0, "tolerance": 1.05,
                      "details": {"mode": "hot", "qt": 44, "kind": "gemv",
                                  "samples_a": a, "samples_b": b}})


def test_load_run_gives_the_verdict_admit_gives(copy_of: Callable[[], Path],
                                                hqval: Admit) -> None:
    """A stored pass its samples contradict: ``load_run`` and ``hqval admit`` both judge
    it failed (once: ``load_run`` returned the stored verdicts, the report and admit
    re-judged them: one run, two verdicts)."""
    run = copy_of()
    _slow_pass(run)
    df = load_run(run)
    row = df[df["identity"] == CELL].iloc[0]
    assert row["status"] == "fail" and row["verdict"] == "fail" and row["unit"] == "ratio"
    assert row["ratio"] == pytest.approx(1.5, rel=0.01)
    assert row["ci_low"] > 1.05 and row["ci_high"] >= row["ci_low"]
    assert load_run(run, load_policy())["status"].tolist() == df["status"].tolist()
    res = hqval("admit", str(run), "--json", str(run.parent / "adm.json"))
    assert res.code == 1
    adm = json.loads((run.parent / "adm.json").read_text())
    decode = next(c for c in adm["cells"] if c["qt"] == 44 and c["path"] == "decode")
    assert decode["status"] == "rejected" and CELL in decode["failing"]


def test_a_bad_policy_is_refused_before_the_run_writes(tree: Path, tmp_path: Path) -> None:
    """``hqval run --policy`` and ``HQVAL_POLICY``: the run's policy is parsed once, when
    the run opens; a bad one is one line naming the file, line and key, exit 2, no run
    directory (once: ``hqval run`` had no --policy and ignored HQVAL_POLICY)."""
    bad = tmp_path / "policy.yaml"
    shipped = Path(load_policy().source).read_text()
    assert "- cap: wave_size" in shipped
    bad.write_text(shipped.replace("- cap: wave_size", "- cap: wave_sise", 1))
    out = tmp_path / "run"
    res = hqval_process(run_args(tree, out, "--policy", str(bad)))
    assert res.code == 2 and not out.exists()
    assert f"{bad}:" in res.err and "cap: 'wave_sise' is not one of" in res.err


def test_the_command_line_policy_overrides_hqval_policy(golden: Path, tree: Path,
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """HQVAL_POLICY names a file that does not exist: the run refuses it; with --policy
    naming the shipped policy, the command line wins (a resumed complete run: exit 0)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(golden, run)
    monkeypatch.setenv("HQVAL_POLICY", str(tmp_path / "absent.yaml"))
    refused = hqval_process(run_args(tree, run, "--resume"))
    assert refused.code == 2 and "absent.yaml" in refused.err
    ok = hqval_process(run_args(tree, run, "--resume", "--policy", load_policy().source))
    assert ok.code == 0, ok.err[-2000:]
