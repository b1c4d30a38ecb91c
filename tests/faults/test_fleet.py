"""The nightly fleet's admission: every lab runner's run admitted together against the last
successful night's runs (``hqval admit RUN... --baseline RUN... --expect-arch all``).

The runs here are the hardware-shaped runs of ``tests/conftest.py`` (``make_run`` around
``evidence``: gfx1100 and gfx1201 on hip, with timing cells and their samples), made in
milliseconds; ``slow`` runs time the qt=44 decode GEMV 3% slower than the baseline does,
inside its ratio gate (alone it passes) and beyond the policy's change_max (against the
baseline it regressed).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import RunFactory, evidence
from tests.faults.conftest import Result

Hqval = Callable[..., Result]
REGRESSED = "timing_hot[gemv_mq4g256v2_r1@4096x4096|gfx1100|hip]"
SLOW = 1.03


def _hip(make_run: RunFactory, name: str, arch: str = "gfx1100", seed: int = 1,
         slow: float = 1.0, backend: str = "hip") -> str:
    return str(make_run(evidence(arch, backend, seed=seed, slow=slow), arch=arch,
                        backend=backend, name=name))


def _regressed(res: Result) -> None:
    """The qt=44 decode cell says it regressed, naming the timing cell (the markdown
    table escapes its brackets and bars)."""
    line = next(x for x in res.out.splitlines() if "| qt=44" in x and "| decode |" in x)
    assert r"regressed against the baseline: timing_hot\[gemv_mq4g256v2_r1" in line, line


def _verdict(res: Result, code: int) -> None:
    assert res.code == code, res.out + res.err
    assert res.err.rstrip().endswith(f"(exit {code})"), res.err


def test_the_slow_run_alone_passes_its_gate_and_regresses_against_the_baseline(
        make_run: RunFactory, hqval: Hqval) -> None:
    slow = _hip(make_run, "slow", seed=2, slow=SLOW)
    _verdict(hqval("admit", slow), 0)
    res = hqval("admit", slow, "--baseline", _hip(make_run, "base", seed=3))
    _verdict(res, 1)
    _regressed(res)


@pytest.mark.parametrize("order", ["fresh-first", "fresh-last"])
def test_a_second_run_of_one_arch_never_masks_a_regression(
        make_run: RunFactory, hqval: Hqval, order: str) -> None:
    # two runs of gfx1100 on hip in one night (a re-run job's, a stale copy): the slow one
    # regressed; the rows of every run were merged by identity, the last one's winning, so
    # with the clean run last the regression vanished (once: exit 0)
    slow = _hip(make_run, "slow", seed=2, slow=SLOW)
    clean = _hip(make_run, "clean", seed=4)
    runs = [slow, clean] if order == "fresh-first" else [clean, slow]
    res = hqval("admit", *runs, "--baseline", _hip(make_run, "base", seed=3))
    _verdict(res, 1)
    _regressed(res)
    # the regression is the slow run's, never blamed on the clean one
    assert f"{clean}: regressed" not in res.out and f"{slow}: regressed" in res.out


def test_two_baselines_of_one_arch_are_ambiguous(make_run: RunFactory, hqval: Hqval) -> None:
    # the slow run against two baselines of gfx1100: the slow copy given last masked the
    # regression (once: exit 0)
    slow = _hip(make_run, "slow", seed=2, slow=SLOW)
    other = _hip(make_run, "stale", seed=5, slow=SLOW)
    res = hqval("admit", slow, "--baseline", _hip(make_run, "base", seed=3),
                "--baseline", other)
    _verdict(res, 2)
    assert "hqval admit: baseline: --baseline: 2 baseline runs of gfx1100 (hip)" in res.err


def test_an_arch_with_no_baseline_run_is_exit_2(make_run: RunFactory, hqval: Hqval) -> None:
    # the baseline night has gfx1201 only (an arch added to the matrix, an expired
    # artifact): gfx1100's regression was compared with nothing (once: exit 0)
    slow = _hip(make_run, "slow", seed=2, slow=SLOW)
    res = hqval("admit", slow, _hip(make_run, "n1201", arch="gfx1201"),
                "--baseline", _hip(make_run, "b1201", arch="gfx1201", seed=3))
    _verdict(res, 2)
    assert (f"hqval admit: baseline: {slow}: no --baseline run of gfx1100 (hip): its cells "
            "are compared with nothing") in res.err


@pytest.mark.parametrize("base_arch,base_backend", [("gfx1100", "emu"), ("gfx1201", "hip")])
def test_a_baseline_of_another_arch_or_backend_is_no_kernel_regression(
        make_run: RunFactory, hqval: Hqval, base_arch: str, base_backend: str) -> None:
    # tonight gfx1100 on hip, the baseline an emulated night's gfx1100 or another arch:
    # every baseline cell "vanished", each one a kernel's regression (once: exit 1)
    night = _hip(make_run, "night", seed=2)
    base = _hip(make_run, "base", arch=base_arch, backend=base_backend, seed=3)
    res = hqval("admit", night, "--baseline", base)
    _verdict(res, 2)
    assert "no --baseline run of gfx1100 (hip)" in res.err
    assert (f"hqval admit: baseline: --baseline {base}: {base_arch} ({base_backend}) has no "
            "run to compare with") in res.err


@pytest.mark.parametrize("how", ["twice", "copy", "own-baseline"])
def test_the_same_run_twice_is_a_usage_error(make_run: RunFactory, hqval: Hqval,
                                             tmp_path: Path, how: str) -> None:
    # `admit A A` counted its evidence twice; `admit A --baseline A` (or a copy of A as the
    # baseline) compared the night with itself, so no regression could show (once: exit 0)
    slow = _hip(make_run, "slow", seed=2, slow=SLOW)
    copy = str(tmp_path / "copy")
    shutil.copytree(slow, copy)
    args = {"twice": [slow, slow], "copy": [slow, copy],
            "own-baseline": [slow, "--baseline", copy]}[how]
    res = hqval("admit", *args)
    assert res.code == 2, res.out + res.err
    assert "the same run twice" in res.err and res.err.count("\n") == 1, res.err


def test_admit_with_no_run_is_a_usage_error(hqval: Hqval) -> None:
    with pytest.raises(SystemExit) as exc:
        hqval("admit", "--expect-arch", "all")
    assert exc.value.code == 2


def _edit(run: str, **fields: object) -> None:
    env = Path(run) / "envelope.json"
    data = json.loads(env.read_text())
    data.update(fields)
    env.write_text(json.dumps(data))


@pytest.mark.parametrize("key,value", [("suite_commit", "0" * 40),
                                       ("hqval_version", "0.1.0"),
                                       ("manifest_sha256", "f" * 64),
                                       ("policy_sha256", "e" * 64)])
def test_a_run_of_another_checkout_manifest_or_policy_in_the_night_is_exit_2(
        make_run: RunFactory, hqval: Hqval, key: str, value: str) -> None:
    # one runner checked out another commit (an older hqval, another kernels.yaml or
    # policy.yaml): its cells were admitted beside the others' as one night (once: exit 0)
    a = _hip(make_run, "a", seed=2)
    b = _hip(make_run, "b", arch="gfx1201", seed=3)
    _verdict(hqval("admit", a, b), 0)
    _edit(b, **{key: value})
    res = hqval("admit", a, b)
    _verdict(res, 2)
    assert f"hqval admit: mixed: the runs differ in {key}: " in res.err
    assert f"{value[:16]} ({b})" in res.err


def test_an_emulated_arch_in_a_hardware_night_is_exit_2(make_run: RunFactory,
                                                        hqval: Hqval) -> None:
    # the fleet expects hip; one arch's run is the emulator's (a runner whose job ran
    # --backend emu or auto): it was admitted as emulated beside the measured ones (once:
    # exit 0, nothing said which backend the night expected)
    hw = _hip(make_run, "hw", seed=2)
    emu = _hip(make_run, "emu", arch="gfx1201", backend="emu", seed=3)
    _verdict(hqval("admit", hw, "--expect-backend", "hip"), 0)
    _verdict(hqval("admit", hw, emu), 0)
    res = hqval("admit", hw, emu, "--expect-backend", "hip")
    _verdict(res, 2)
    assert ("hqval admit: gfx1201: ran on emu, not hip (--expect-backend): no cell of "
            "gfx1201 is admitted as hip evidence") in res.err
    assert "gfx1100: ran on" not in res.err
