"""Fault class: an input that would make hqval read without end or expand without bound.
Every file goes through ``hqval.safeio``: regular files only, a size cap, nesting and alias
bounds; the answer is one line and exit 2, at once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.faults.conftest import Result
from tests.guards import cpu_seconds, no_hang


def _one_line(r: Result) -> str:
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err + r.out
    return lines[0]


def test_policy_from_dev_zero_is_refused_unread(golden: Path,
                                                 hqval: Callable[..., Result]) -> None:
    with no_hang():  # /dev/zero read to its end is a read without end
        r = hqval("admit", str(golden), "--policy", "/dev/zero")
    assert r.code == 2
    line = _one_line(r)
    assert "/dev/zero" in line and "character device" in line


def test_an_alias_bomb_policy_does_not_expand(golden: Path, tmp_path: Path,
                                              hqval: Callable[..., Result]) -> None:
    lines = ["a0: &a0 [" + ", ".join(["xxxxxxxxxxxxxxxxxxxx"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    policy = tmp_path / "policy.yaml"
    policy.write_text("\n".join(lines) + "\n" + "# " + "x" * 5000 + "\n")
    assert 5000 < policy.stat().st_size < 7000  # a 6 KB file that would expand to 9**10
    with cpu_seconds() as cpu:  # 9**10 leaves, walked or built, is hours of CPU
        r = hqval("admit", str(golden), "--policy", str(policy))
    assert r.code == 2 and cpu.seconds < 10
    line = _one_line(r)
    assert str(policy) in line and "expand" in line


def test_deeply_nested_json_output_target_is_one_line(golden: Path, copy_of: Callable[[], Path],
                                                      hqval: Callable[..., Result]) -> None:
    run = copy_of()
    env = run / "envelope.json"
    data = json.loads(env.read_text())
    data["host"] = json.loads("[" * 50 + "]" * 50)
    env.write_text(json.dumps(data)[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = hqval("admit", str(run))
    assert r.code == 2
    _one_line(r)


def test_a_numeric_kernel_field_is_one_line(copy_of: Callable[[], Path],
                                            hqval: Callable[..., Result]) -> None:
    run = copy_of()
    rows = (run / "rows.jsonl").read_text().splitlines()
    row = json.loads(rows[0])
    row["kernel"] = 12345
    rows[0] = json.dumps(row)
    (run / "rows.jsonl").write_text("\n".join(rows) + "\n")
    r = hqval("admit", str(run))
    assert r.code == 2
    _one_line(r)


def test_a_manifest_that_is_a_fifo_is_refused_without_blocking(
        tmp_path: Path, hqval: Callable[..., Result]) -> None:
    import os

    fifo = tmp_path / "kernels.yaml"
    os.mkfifo(fifo)
    with no_hang():  # a FIFO opened for reading blocks until a writer comes: never
        r = hqval("compile", "--arch", "gfx1010", "--manifest", str(fifo))
    assert r.code == 2
    assert "FIFO" in _one_line(r)
