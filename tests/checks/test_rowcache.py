"""The check row cache: a cell is answered from an earlier run only when everything its
verdict depends on is the same, and a changed kernel is run again and judged."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hqval.checks import rowcache
from hqval.cli import main
from hqval.result import Row, Status

REPO = Path(__file__).resolve().parents[2]
SHA_A, SHA_B = "a" * 64, "b" * 64


def _row(status: Status = Status.PASS, **kw: Any) -> Row:
    return Row("check", "bit_identity", "gemv_mq4g256v2_r1", "gfx1100", "emu", status,
               measured=0.0, tolerance=0.0, seed=0, object_sha256=SHA_A, **kw)


def test_an_entry_is_used_only_for_the_objects_it_was_made_from(tmp_path: Path) -> None:
    cache = rowcache.RowCache(tmp_path / "cache")
    objects = {"gemv_mq4g256v2_r1|gfx1100": SHA_A, "gemv_hfq4g256_r1|gfx1100": SHA_B}
    cache.put("k" * 64, _row(run_id="r1"), objects)
    got = cache.get("k" * 64, objects)
    assert got is not None and got.details[rowcache.DETAIL] == "k" * 64
    assert got.run_id == "" and got.status is Status.PASS  # the new run stamps its own id
    # another object for either program, a missing one, another key: not used
    assert cache.get("k" * 64, {**objects, "gemv_hfq4g256_r1|gfx1100": SHA_A}) is None
    assert cache.get("k" * 64, {"gemv_mq4g256v2_r1|gfx1100": SHA_A}) is None
    assert cache.get("j" * 64, objects) is None


def test_an_entry_not_vouched_for_by_the_cache_key_is_not_used(tmp_path: Path) -> None:
    """A self-consistent entry another job wrote (a fail turned into a pass) has no tag of
    this key: refused, as a torn or foreign file is."""
    cache = rowcache.RowCache(tmp_path / "cache")
    objects = {"gemv_mq4g256v2_r1|gfx1100": SHA_A}
    key = "k" * 64
    cache.put(key, _row(Status.FAIL, message="3 of 7 output words differ"), objects)
    path = next((tmp_path / "cache" / rowcache.LAYOUT).rglob("*.json"))
    entry = json.loads(path.read_text())
    forged = json.loads(entry["row"])
    forged["status"], forged["message"] = "pass", ""
    entry["row"] = json.dumps(forged, sort_keys=True)
    path.write_text(json.dumps(entry))
    assert cache.get(key, objects) is None
    path.write_text(path.read_text()[:40])  # torn
    assert cache.get(key, objects) is None


def test_only_rows_the_kernels_code_decided_are_kept() -> None:
    objects = {"gemv_mq4g256v2_r1|gfx1100": SHA_A}
    assert rowcache.recordable(_row(), objects)
    assert rowcache.recordable(_row(Status.FAIL), objects)
    for status in (Status.ERROR, Status.SKIPPED):
        assert not rowcache.recordable(_row(status), objects)
    assert not rowcache.recordable(_row(), None)  # an error, gap or hqval's own failure
    assert not rowcache.recordable(_row(), {"gemv_mq4g256v2_r1|gfx1100": None})
    hip = Row("check", "bit_identity", "k", "gfx1100", "hip", Status.PASS)
    assert not rowcache.recordable(hip, {})
    assert not rowcache.enabled("hip") and not rowcache.enabled("cuda")


def test_replay_off_turns_the_row_cache_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "cache")
    assert rowcache.enabled("emu")
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "off")
    assert not rowcache.enabled("emu")


def test_the_key_of_a_manifest_is_the_same_in_every_process() -> None:
    """Sets in a signature print in an order that follows string hashing, which each
    process seeds anew: the key is made from a canonical form, not from the repr."""
    code = ("from hqval.checks import rowcache; from hqval.manifest import load_manifest; "
            "print(rowcache.manifests_identity([load_manifest()]))")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": seed,
                                            "PYTHONPATH": str(REPO)}).stdout
            for seed in ("1", "2", "3")}
    assert len(keys) == 1


def _rows(run: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (run / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        if isinstance(r, dict) and r.get("kind") == "check":
            out[r["identity"]] = r
    return out


def _plain(r: dict[str, Any]) -> dict[str, Any]:
    details = {k: v for k, v in r["details"].items() if k != rowcache.DETAIL}
    return {**{k: v for k, v in r.items() if k != "run_id"}, "details": details}


def _cases(run: Path) -> set[tuple[str, str, str]]:
    text = next(run.glob("junit-checks-*.xml")).read_text()
    return {(c, n, "failure" if "<failure" in body else "skipped" if "<skipped" in body
             else "pass")
            for c, n, body in re.findall(
                r'<testcase classname="([^"]+)" name="([^"]+)"[^>]*?(?:/>|>(.*?)</testcase>)',
                text, re.S)}


@pytest.mark.slow
def test_a_rerun_takes_every_row_and_a_changed_kernel_is_judged_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a small tree: the second run of the same inputs answers every check cell from the
    cache (the rows the first run computed, its JUnit test cases); with the v2 header's
    halves swapped in the tree's header the v2 cells are run again and its reference
    parity fails; another seed
    runs every cell again."""
    from tests.faults.conftest import small_tree

    manifest = small_tree(tmp_path / "tree")
    cache = tmp_path / "cache"

    def run(name: str, *extra: str) -> tuple[int, Path]:
        out = tmp_path / name
        code = main(["run", "--arch", "gfx1010", "--backend", "emu", "--manifest",
                     str(manifest), "--out", str(out), "--workers", "0", "--no-mutants",
                     "--cache-dir", str(cache), *extra])
        capsys.readouterr()
        return code, out

    code, cold = run("cold")
    assert code == 0
    code, warm = run("warm")
    assert code == 0
    a, b = _rows(cold), _rows(warm)
    assert a and set(a) == set(b)
    assert all(rowcache.DETAIL not in r["details"] for r in a.values())
    assert all(rowcache.DETAIL in r["details"] for r in b.values())
    assert {i: _plain(r) for i, r in a.items()} == {i: _plain(r) for i, r in b.items()}
    assert _cases(cold) == _cases(warm) and len(_cases(warm)) == len(b)

    header = manifest.parent / "include" / "hq4_header.h"
    text = header.read_text()
    broken = text.replace("const unsigned int hs = (boff < 64u) ? h.a : h.b;",
                          "const unsigned int hs = (boff < 64u) ? h.b : h.a;", 1)
    assert broken != text
    header.write_text(broken)
    code, changed = run("changed")
    assert code == 1
    c = _rows(changed)
    v2 = [i for i in c if "[gemv_mq4g256v2_r1|" in i and i.split("[")[0] in
          ("bit_identity", "reference_parity")]
    assert len(v2) == 2  # both run again (bit identity's equal halves cannot tell)
    assert all(rowcache.DETAIL not in c[i]["details"] for i in v2)
    assert c["reference_parity[gemv_mq4g256v2_r1|gfx1010|emu]"]["status"] == "fail"
    header.write_text(text)

    code, seeded = run("seeded", "--seed", "1")
    assert code == 0
    assert all(rowcache.DETAIL not in r["details"] for r in _rows(seeded).values())
