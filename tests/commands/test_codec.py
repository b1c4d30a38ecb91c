"""``hqval codec``: the table, --json, --bench, and usage errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hqval.cli import main
from hqval.formats import QT_F32, save_tensor


def test_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "q.json"
    rc = main(["codec", "--dataset", "synthetic", "-M", "16", "-K", "1024", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "| mq4g256v2 | 44 |" in text and "PASS  section5_mse" in text
    data = json.loads(out.read_text())
    assert {q["format"] for q in data["table"]} == {"hfq4g256", "mq4g256", "mq4g256v2",
                                                    "mq4cg256", "mq4cg256c", "mq4_k"}
    assert all(r["kind"] == "check" for r in data["rows"])


def test_json_to_stdout_and_format_filter(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["codec", "--dataset", "synthetic", "-M", "8", "-K", "512", "--format", "mq4",
               "--format", "13", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and [q["qt"] for q in data["table"]] == [44, 13]


def test_own_weights_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = (np.random.default_rng(0).standard_normal((4, 512)) * 0.02).astype(np.float32)
    save_tensor(tmp_path / "w.npz", w, QT_F32)
    rc = main(["codec", "--dataset", "synthetic", "-M", "4", "-K", "256", "--weights",
               str(tmp_path / "w.npz"), "--rotate", "42", "--format", "mq4"])
    assert rc == 0 and "### w.npz" in capsys.readouterr().out


def test_bench_small_shape(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["codec", "--bench", "--shape", "64x512", "--repeats", "1", "--target-s", "60"])
    out = capsys.readouterr().out
    assert rc == 0 and "mq4g256v2 (qt=44) 64x512" in out and "met" in out


def test_bench_missed_target_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["codec", "--bench", "--shape", "256x1024", "--repeats", "1",
               "--target-s", "0"])
    assert rc == 1 and "MISSED" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["codec", "--format", "mq9"], "unknown format name 'mq9'"),
    (["codec", "--bench", "--shape", "64x500"], "K a positive multiple of 256"),
    (["codec", "--bench", "--shape", "big"], "expected MxK"),
    (["codec", "-K", "300", "--dataset", "synthetic"], "not a positive multiple of 256"),
])
def test_usage_errors_exit_2(argv: list[str], msg: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert msg in capsys.readouterr().err


def test_weights_of_another_format_refused(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    save_tensor(tmp_path / "b.npz", np.zeros((1, 136), np.uint8), 44)
    assert main(["codec", "--dataset", "synthetic", "-M", "2", "-K", "256", "--weights",
                 str(tmp_path / "b.npz")]) == 2
    assert "holds qt=44" in capsys.readouterr().err
