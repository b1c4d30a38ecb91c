"""Faults of class 'causes kept apart', second round: an error of hqval's own machinery
in the audit, the mutants or the timing step is exit 2 (infrastructure), never a kernel
failure (exit 1) and never a pass."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.guards import no_hang

from .conftest import Result, rows

Admit = Callable[..., Result]


@pytest.mark.parametrize("kind", ["audit", "mutant"])
def test_an_infrastructure_error_in_audit_or_mutants_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit, kind: str) -> None:
    """The qt=44 kernel's no-spill audit row, or every mutant verdict, an error of hqval's
    machinery (``details.infrastructure``)."""
    run = copy_of()
    rs = rows(run)
    for r in rs:
        if (kind == "audit" and r["kernel"] == "gemv_mq4g256v2_r1"
                and r["check"] == "audit_no_spill") or (kind == "mutant"
                                                        and r["kind"] == "mutant"):
            r.update(status="error", measured=None, message="cache unreadable",
                     details={"infrastructure": True})
        r.pop("identity", None)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    res = hqval("admit", str(run))
    assert res.code == 2, res.out + res.err


@pytest.mark.parametrize("what", ["a-file", "fifo-entries", "garbage-entries"])
def test_a_cache_replaced_before_the_checks_is_never_the_kernels(
        tree: Path, tmp_path: Path, hqval: Admit, monkeypatch: pytest.MonkeyPatch,
        what: str) -> None:
    """Right before the checks step the cache directory the compile step filled is
    replaced by a regular file, or each of its entries (the key outside it kept) by a
    FIFO or by garbage.  No row is a failure, no cell is rejected for it: the run exits
    2 naming the cache (the file, a FIFO where it writes) or rebuilds (garbage: exit 0);
    ``--resume`` with a working cache finishes clean.  Once, with the file, every
    decode and prefill cell was "rejected" and its kernels "failed" (the run still exit 2
    from the infrastructure errors)."""
    from hqval.run import chain

    from .conftest import CLEAN, admission, run_args

    cache = tmp_path / "cache"
    out = tmp_path / "run"
    run_step = chain.run_step

    def replaced_first(ctx: object, name: str, fn: object) -> object:
        if name == "checks":
            if what == "a-file":
                shutil.rmtree(cache)
                cache.write_text("not a directory\n")
            for f in [p for p in cache.rglob("*") if p.is_file()] if cache.is_dir() else []:
                f.unlink()
                if what == "fifo-entries":
                    os.mkfifo(f)
                else:
                    f.write_bytes(b"\x00garbage" * 10)
        return run_step(ctx, name, fn)  # type: ignore[arg-type]

    monkeypatch.setattr(chain, "run_step", replaced_first)
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "cache")
    with no_hang(600):
        r = hqval(*run_args(tree, out, "--no-mutants", "--cache-dir", str(cache)))
    got = rows(out)
    assert not [x["identity"] for x in got if x["status"] == "fail"]
    assert not [x["identity"] for x in got if x["status"] == "error"
                and not x["details"].get("infrastructure")]
    if what == "garbage-entries":
        assert r.code == 0, r.out[-2000:] + r.err[-2000:]
        return
    assert r.code == 2, r.out[-2000:] + r.err[-2000:]
    assert str(cache) in r.out + r.err
    cells = json.loads((out / "admission.json").read_text())["cells"]
    assert not [c for c in cells if c["status"] == "rejected"]
    monkeypatch.setattr(chain, "run_step", run_step)
    resumed = hqval(*run_args(tree, out, "--no-mutants", "--resume", "--cache-dir",
                              str(tmp_path / "cache2")))
    assert resumed.code == 0, resumed.out[-2000:] + resumed.err[-2000:]
    assert admission(out) == CLEAN
