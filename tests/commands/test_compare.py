from __future__ import annotations

from pathlib import Path

import pytest

from hqval.cli import main

from ..conftest import RunFactory, evidence  # type: ignore[import-not-found]


def test_compare_reports_regressions_as_markdown(make_run: RunFactory, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(evidence("gfx1100", "hip"), arch="gfx1100", backend="hip")
    new = make_run(evidence("gfx1100", "hip", fail="reference_parity", slow=1.03, seed=5),
                   arch="gfx1100", backend="hip")
    out = tmp_path / "cmp.md"
    assert main(["compare", str(base), str(new), "-o", str(out)]) == 1
    md = capsys.readouterr().out
    assert md == out.read_text()
    assert "2 regression(s)" in md
    worse = md[md.index("#### worse"):md.index("#### status flips")]
    assert "`timing_hot[gemv_mq4g256v2_r1@4096x4096\\|gfx1100\\|hip]`" in worse
    flips = md[md.index("#### status flips"):]
    assert "`reference_parity[gemv_mq4g256v2_r1\\|gfx1100\\|hip]`" in flips


def test_compare_identical_runs_exit_0(make_run: RunFactory,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(evidence("gfx1100"))
    b = make_run(evidence("gfx1100"))
    assert main(["compare", str(a), str(b)]) == 0
    assert "No changes." in capsys.readouterr().out


def test_compare_missing_run_exit_2(make_run: RunFactory, tmp_path: Path) -> None:
    assert main(["compare", str(make_run(evidence("gfx1100"))), str(tmp_path / "nope")]) == 2


def _uniform_pair(make_run: RunFactory, uuids: tuple[str | None, str | None],
                  ) -> tuple[Path, Path, list[str]]:
    """Two runs of an A/A control and a cell, the second with every kernel 3% slower,
    and three steady history runs on the base's GPU (``--history`` arguments)."""
    from ..results.test_compare import _aa, _cell  # type: ignore[import-not-found]

    def rt(u: str | None) -> dict[str, str] | None:
        return {"uuid": u} if u else None

    base = make_run([_aa(1), _cell(2, 1.0)], backend="cuda", arch="sm_90",
                    runtime=rt(uuids[0]))
    new = make_run([_aa(3, drift=1.03), _cell(4, 1.0, drift=1.03)], backend="cuda",
                   arch="sm_90", runtime=rt(uuids[1]))
    history = [str(make_run([_cell(10 + i, 1.0)], backend="cuda", arch="sm_90",
                            runtime=rt(uuids[0]))) for i in range(3)]
    return base, new, ["--history", *history]


def test_compare_judges_absolute_time_only_on_one_gpu_with_history(
        make_run: RunFactory, capsys: pytest.CaptureFixture[str]) -> None:
    base, new, history = _uniform_pair(make_run, ("GPU-a", "GPU-a"))
    assert main(["compare", str(base), str(new), *history]) == 1
    assert "absolute time +3" in capsys.readouterr().out
    # the two runs alone do not measure the run-to-run noise: not judged, and said
    assert main(["compare", str(base), str(new)]) == 0
    assert "`--history` with 3 earlier runs" in capsys.readouterr().out
    base, new, history = _uniform_pair(make_run, ("GPU-a", "GPU-b"))
    assert main(["compare", str(base), str(new), *history]) == 0
    assert "different devices" in capsys.readouterr().out
    # runs that do not record their GPU: not judged, unless the user says they are one
    base, new, history = _uniform_pair(make_run, (None, None))
    assert main(["compare", str(base), str(new), *history]) == 0
    assert "--same-device" in capsys.readouterr().out
    assert main(["compare", "--same-device", str(base), str(new), *history]) == 1


def test_compare_same_device_refuses_runs_that_record_two_gpus(
        make_run: RunFactory, capsys: pytest.CaptureFixture[str]) -> None:
    base, new, _ = _uniform_pair(make_run, ("GPU-a", "GPU-b"))
    assert main(["compare", "--same-device", str(base), str(new)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "record different devices" in err[0]
