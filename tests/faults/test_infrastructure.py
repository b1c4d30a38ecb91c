"""Fault class: hqval's own machinery fails (the code-object cache unwritable or damaged).
That is an infrastructure error: the row is an error marked ``infrastructure``, exit 2,
never the kernel's failure; ``--resume`` redoes the cell once the machinery works."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.faults.conftest import ARCH, CLEAN, Result, admission, run_args


def test_an_unwritable_cache_is_infrastructure_not_the_kernels(
        tree: Path, tmp_path: Path, hqval: Callable[..., Result]) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would go\n")
    out = tmp_path / "rows.json"
    r = hqval("compile", "--arch", ARCH, "--manifest", str(tree), "--cache-dir",
              str(blocker / "cache"), "--json", str(out))
    assert r.code == 2, r.out + r.err
    rows = json.loads(out.read_text())
    assert rows and all(row["status"] == "error" and row["details"]["infrastructure"]
                        for row in rows if row["status"] != "unsupported")
    assert "not writable" in rows[0]["message"]


def test_a_damaged_cache_entry_is_rebuilt_never_blamed_on_the_kernel(
        tree: Path, tmp_path: Path, hqval: Callable[..., Result]) -> None:
    cache = tmp_path / "cache"
    assert hqval("compile", "--arch", ARCH, "--manifest", str(tree), "--cache-dir",
                 str(cache)).code == 0
    for meta in cache.rglob("*.json"):
        if meta.parent.name != "deps" and meta.parent.parent.name != "deps":
            meta.write_text("{" * 100_000)  # damaged beyond parsing
    r = hqval("compile", "--arch", ARCH, "--manifest", str(tree), "--cache-dir", str(cache))
    assert r.code == 0, r.out + r.err


def test_resume_redoes_an_infrastructure_error_cell(
        tree: Path, tmp_path: Path, hqval: Callable[..., Result]) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    out = tmp_path / "run"
    first = hqval(*run_args(tree, out, "--no-mutants", "--cache-dir", str(blocker / "c")))
    assert first.code == 2
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "compile" and r["details"].get("infrastructure") for r in rows)
    assert not any(r["kind"] == "compile" and r["status"] == "fail" for r in rows)
    resumed = hqval(*run_args(tree, out, "--no-mutants", "--resume", "--cache-dir",
                              str(tmp_path / "cache")))
    assert resumed.code == 0, resumed.out[-3000:] + resumed.err[-3000:]
    assert admission(out) == CLEAN
