"""Faults of class 'exit codes that mean admission': exit 0 only when every expected cell
has a terminal verdict and every path cell reached what the run can prove (emulated on
the emulator, measured on hardware, fallback or unsupported where the policy says);
an untested or only-compiled cell is exit 2 with the reason; a kernel that traps fails
its rows (exit 1), naming the instruction and its address."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .conftest import (
    ARCH,
    Result,
    admission,
    header_load_broken,
    hqval_process,
    rewrite_each,
    rows,
    run_args,
)

Admit = Callable[..., Result]


def test_an_untested_cell_is_exit_2(copy_of: Callable[[], Path], hqval: Admit) -> None:
    """The qt=44 decode kernel's checks reached no verdict (an instruction the emulator
    lacks): nothing failed, but nothing was proven (once: "complete evidence, no failure",
    exit 0)."""
    run = copy_of()

    def gap(r: dict[str, Any]) -> None:
        if r["kind"] == "check" and r["kernel"] == "gemv_mq4g256v2_r1":
            r["status"], r["measured"], r["tolerance"] = "skipped", None, None
            r["message"] = "untested: the emulator lacks s_trap"
            r["details"] = {**r["details"], "emulator_gap": "s_trap"}
    rewrite_each(run, gap)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"not admitted: admit[qt44:decode|{ARCH}] is untested" in res.err
    assert "the emulator lacks s_trap" in res.err


def test_a_cell_only_compiled_is_exit_2(copy_of: Callable[[], Path], hqval: Admit) -> None:
    """Every required check of the qt=44 decode kernel skipped without a verdict: the cell
    is only compiled (compile and audit passed), exit 2 naming the missing checks."""
    run = copy_of()

    def skip(r: dict[str, Any]) -> None:
        if r["kind"] == "check" and r["kernel"] == "gemv_mq4g256v2_r1":
            r["status"], r["measured"], r["tolerance"] = "skipped", None, None
    rewrite_each(run, skip)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"not admitted: admit[qt44:decode|{ARCH}] is compiled" in res.err


def _trapping_tree(manifest: Path, dest: Path) -> Path:
    """The small tree with the qt=44 header load trapping on every launch: a real
    ``__builtin_trap()`` (clang emits ``s_trap 2``), the rest of the kernel kept (its audit
    still sees the whole loop)."""
    return header_load_broken(manifest, dest, "__builtin_trap();  // every real header traps")


def test_a_kernel_that_traps_fails_its_rows_and_the_run_exits_1(tree: Path,
                                                                tmp_path: Path) -> None:
    """A qt=44 kernel that executes ``s_trap`` on every launch (once: its checks were
    ``untested`` and ``hqval run`` said "complete evidence, no failure", exit 0)."""
    manifest = _trapping_tree(tree, tmp_path / "tree")
    out = tmp_path / "run"
    res = hqval_process(run_args(manifest, out, "--no-mutants"))
    assert res.code == 1, res.out[-3000:] + res.err[-2000:]
    assert admission(out)[(44, "decode")] == "rejected"
    trapped = [r for r in rows(out) if r["kind"] == "check"
               and r["kernel"] == "gemv_mq4g256v2_r1" and r["status"] != "unsupported"]
    assert trapped and all(r["status"] == "fail" for r in trapped)
    for r in trapped:
        assert re.search(r"executed 's_trap \w+' at 0x[0-9a-f]+", str(r["message"])), r
    # the qt=45 kernel shares the body but not the header: untouched, still emulated
    assert admission(out)[(45, "decode")] == "emulated"
