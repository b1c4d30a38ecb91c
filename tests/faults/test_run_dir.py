"""Faults of class 'the run directory': one writer at a time, whole
files, a damaged or non-UTF-8 envelope or rows file, and OSError (an unwritable --out, a
file size limit standing in for a full disk): one line naming the path, exit 2, nothing
admitted."""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import ARCH, CLEAN, Result, _env, admission, hqval_process, rows, run_args

Hq = Callable[..., Result]


def _one_line(res: Result, *words: str) -> None:
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    for w in words:
        assert w in lines[0], lines[0]
    assert "Traceback" not in res.err


@pytest.mark.parametrize("text, why", [
    ("{}", "empty JSON object"),
    ("", "not valid JSON"),
    ('{"schema_version": 2, "arch": ["gfx1010"]', "not valid JSON"),
    ('{"schema_version": 2, "arch": ["gfx1010"]}', "lacks kernels"),
    ('{"arch": ["gfx1010"], "kernels": {}}', "no schema_version"),
    ("[]", "JSON object"),
])
def test_damaged_envelope_is_exit_2(copy_of: Callable[[], Path], hqval: Hq, text: str,
                                    why: str) -> None:
    run = copy_of()
    (run / "envelope.json").write_text(text)
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, str(run / "envelope.json"), why)


def test_non_utf8_envelope_is_exit_2(copy_of: Callable[[], Path], hqval: Hq) -> None:
    run = copy_of()
    (run / "envelope.json").write_bytes(b'{"schema_version": "\xff\xfe"}')
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, "envelope.json: not UTF-8")


def test_non_utf8_row_is_exit_2(copy_of: Callable[[], Path], hqval: Hq) -> None:
    run = copy_of()
    data = (run / "rows.jsonl").read_bytes().splitlines(keepends=True)
    data.insert(3, b'{"kind": "\xff"}\n')
    (run / "rows.jsonl").write_bytes(b"".join(data))
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, "rows.jsonl:4: not UTF-8")


def test_corrupt_middle_row_is_exit_2(copy_of: Callable[[], Path], hqval: Hq) -> None:
    run = copy_of()
    data = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    data[5] = data[5][: len(data[5]) // 2] + "\n"
    (run / "rows.jsonl").write_text("".join(data))
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, "rows.jsonl:6: unreadable row")


def test_torn_last_row_is_incomplete_then_resume_completes(
        tree: Path, copy_of: Callable[[], Path], hqval: Hq) -> None:
    """What a kill mid-write leaves: the torn line is dropped (its cell is missing, so
    admission says incomplete), and --resume cuts it and redoes the cell."""
    run = copy_of()
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    check = max(i for i, x in enumerate(lines) if '"kind": "check"' in x)
    torn = lines.pop(check)
    (run / "rows.jsonl").write_text("".join(lines) + torn[: len(torn) // 2])
    res = hqval("admit", str(run))
    assert res.code == 2 and "incomplete" in res.err
    warned = [x for x in res.err.splitlines() if "torn last line" in x]
    assert len(warned) == 1 and warned[0].startswith("hqval admit: warning: ")
    assert "Warning" not in res.err  # one line of hqval's, not Python's two
    resumed = hqval(*run_args(tree, run, "--resume"))
    assert resumed.code == 0 and "torn last line" in resumed.err
    assert admission(run) == CLEAN


def test_damaged_baseline_is_exit_2(copy_of: Callable[[], Path], hqval: Hq) -> None:
    run, base = copy_of(), copy_of()
    (base / "envelope.json").write_text("{}")
    res = hqval("admit", str(run), "--baseline", str(base))
    assert res.code == 2
    _one_line(res, "--baseline", "envelope is damaged")


def test_second_writer_is_refused_at_once(tree: Path, tmp_path: Path) -> None:
    out, held, release = tmp_path / "run", tmp_path / "held.pid", tmp_path / "release"
    # the first writer stops inside a check cell (tests/faults/hold_cell.py) until the
    # test releases it: the second writers meet a run directory that is being written,
    # whatever the host's load; one that waited for the lock instead of refusing would
    # wait for ever, which the subprocess timeout reports
    env = {**_env(), "PYTEST_PLUGINS": "tests.faults.hold_cell",
           "HQVAL_TEST_HOLD_CELL": f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]",
           "HQVAL_TEST_HOLD_MARKER": str(held), "HQVAL_TEST_HOLD_RELEASE": str(release)}
    first = subprocess.Popen([sys.executable, "-m", "hqval", *run_args(tree, out,
                                                                         "--no-mutants")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        for _ in range(6000):  # the first run reaches the cell in seconds; 300 s is a hang
            if held.exists() or first.poll() is not None:
                break
            time.sleep(0.05)
        assert held.exists(), "the first writer ended before its held cell"
        for extra in ((), ("--resume",)):
            second = hqval_process(run_args(tree, out, "--no-mutants", *extra), timeout=300)
            assert second.code == 2
            _one_line(second, "another hqval process (pid", "is writing this run directory")
        assert first.poll() is None  # still held: refused while the first one writes
        release.touch()
        _, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, err[-2000:]
    assert admission(out) == CLEAN


@pytest.mark.slow
def test_concurrent_writers_one_wins_none_crashes(tree: Path, tmp_path: Path, hqval: Hq) -> None:
    """Six processes start on one fresh --out: one runs, five are refused (exit 2, one
    line), none crashes on a shared temporary file, and the run is clean."""
    out = tmp_path / "run"
    procs = [subprocess.Popen([sys.executable, "-m", "hqval", *run_args(tree, out)],
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(6)]
    results = [(p.wait(timeout=900), p.communicate()[1]) for p in procs]
    codes = sorted(c for c, _ in results)
    assert codes == [0, 2, 2, 2, 2, 2], [e[-500:] for _, e in results]
    for code, err in results:
        assert "Traceback" not in err
        if code == 2:
            assert "is writing this run directory" in err or "already holds a run" in err
    assert hqval("admit", str(out)).code == 0
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_unwritable_out_is_one_line_exit_2(tree: Path, tmp_path: Path, hqval: Hq) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    res = hqval(*run_args(tree, blocker / "run"))
    assert res.code == 2
    _one_line(res, str(blocker / "run"), "cannot create the run directory")


def _file_size_limit() -> None:
    # what a full disk does to a writer: write(2) fails (EFBIG here, ENOSPC there)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # room for the envelope (its kernel table, sources, objects and expected cells), not
    # for the rows a whole run appends
    resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))


def test_full_disk_is_one_line_exit_2_and_nothing_admitted(tree: Path, tmp_path: Path,
                                                           hqval: Hq) -> None:
    out = tmp_path / "run"
    res = hqval_process(run_args(tree, out), preexec=_file_size_limit)
    assert res.code == 2, res.err[-2000:]
    lines = [x for x in res.err.strip().splitlines() if x.startswith("hqval run: error")]
    assert len(lines) == 1 and str(out / "rows.jsonl") in lines[0], res.err[-2000:]
    assert "Traceback" not in res.err
    assert not (out / "admission.json").exists()
    assert hqval("admit", str(out)).code == 2
    # with room again, --resume finishes the run
    assert hqval_process(run_args(tree, out, "--resume")).code == 0
    assert admission(out) == CLEAN


def test_non_utf8_manifest_is_one_line_exit_2(tree: Path, tmp_path: Path, hqval: Hq) -> None:
    bad = tree.parent / "latin1.yaml"
    bad.write_bytes("# caf\xe9 (latin-1)\n".encode("latin-1") + tree.read_bytes())
    res = hqval(*run_args(bad, tmp_path / "run"))
    assert res.code == 2
    _one_line(res, "latin1.yaml")
    assert not (tmp_path / "run").exists()


def test_rows_of_a_run_are_never_left_in_a_temporary(copy_of: Callable[[], Path]) -> None:
    run = copy_of()
    assert not [p for p in run.rglob("*") if ".tmp" in p.name or ".partial" in p.name]
    assert rows(run) and json.loads((run / "envelope.json").read_text())["expected_cells"]


def test_row_with_an_unknown_status_is_exit_2(copy_of: Callable[[], Path], hqval: Hq) -> None:
    run = copy_of()
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    i = next(k for k, x in enumerate(lines) if '"kind": "check"' in x)
    row = json.loads(lines[i])
    row["status"] = "passed"  # not one of pass, fail, error, skipped, unsupported
    lines[i] = json.dumps(row) + "\n"
    (run / "rows.jsonl").write_text("".join(lines))
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, f"rows.jsonl: row {i + 1} is not a valid result row", "'passed'")


def test_row_of_an_unknown_kind_is_not_evidence(copy_of: Callable[[], Path], hqval: Hq) -> None:
    """A required check's row with its kind misspelt keeps its identity (kind is not part
    of it) but is no check row: the path's kernel lacks that check, incomplete, exit 2."""
    run = copy_of()
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    ident = "reference_parity[gemv_mq4g256v2_r1|gfx1010|emu]"
    i = next(k for k, x in enumerate(lines) if json.loads(x)["identity"] == ident)
    row = json.loads(lines[i])
    row["kind"] = "chekc"
    lines[i] = json.dumps(row) + "\n"
    (run / "rows.jsonl").write_text("".join(lines))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert "reference_parity of gemv_mq4g256v2_r1" in res.out + res.err


def test_envelope_of_another_run_is_exit_2(tree: Path, copy_of: Callable[[], Path],
                                           tmp_path: Path, hqval: Hq) -> None:
    """envelope.json swapped with one from a run of other options (--no-mutants), both
    ways: the envelope's expected cells are not the rows' (a run of the very same options
    is indistinguishable, and admits as that run would)."""
    other = tmp_path / "other"
    assert hqval(*run_args(tree, other, "--no-mutants")).code == 0
    full = copy_of()
    (full / "envelope.json").write_bytes((other / "envelope.json").read_bytes())
    res = hqval("admit", str(full))
    assert res.code == 2 and "incomplete" in res.err and "mutants[-|gfx1010|emu]" in res.err
    (other / "envelope.json").write_bytes((copy_of() / "envelope.json").read_bytes())
    res = hqval("admit", str(other))
    assert res.code == 2 and "incomplete" in res.err


@pytest.mark.parametrize("name", [".hqval-lock", "rows.jsonl", "envelope.json"])
def test_a_run_file_that_is_a_symlink_is_refused_and_its_target_untouched(
        tree: Path, tmp_path: Path, hqval: Hq, name: str) -> None:
    """--out DIR where one of the run's own files links elsewhere: hqval would truncate,
    append to or lock that file (once: the lock's target was truncated to a pid)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    out = tmp_path / "run"
    out.mkdir()
    (out / name).symlink_to(victim)
    res = hqval(*run_args(tree, out))
    assert res.code == 2
    _one_line(res, f"{out / name}: a symbolic link", "remove it or choose a fresh --out")
    assert victim.read_text() == "keep\n"


def test_rows_file_that_is_a_symlink_is_refused_on_read(copy_of: Callable[[], Path],
                                                        hqval: Hq) -> None:
    """rows.jsonl linked to another run's rows: not this run's evidence."""
    run, other = copy_of(), copy_of()
    (run / "rows.jsonl").unlink()
    (run / "rows.jsonl").symlink_to(other / "rows.jsonl")
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, "rows.jsonl: a symbolic link")


def test_a_new_run_into_a_directory_with_stray_rows_is_refused(
        tree: Path, copy_of: Callable[[], Path], tmp_path: Path, hqval: Hq) -> None:
    """rows.jsonl without envelope.json (another run's rows copied in): a new run would
    append to them and be judged with them (once: exit 1 on the stray rows)."""
    out = tmp_path / "run"
    out.mkdir()
    stray = (copy_of() / "rows.jsonl").read_bytes()
    (out / "rows.jsonl").write_bytes(stray)
    res = hqval(*run_args(tree, out))
    assert res.code == 2
    _one_line(res, "holds rows.jsonl but no envelope.json")
    assert (out / "rows.jsonl").read_bytes() == stray and not (out / "envelope.json").exists()


def _expected_zeroed(env: dict[str, object]) -> None:
    env["expected_cells"]["timing"] = []  # type: ignore[index]
    env["expected"]["timing"] = 0  # type: ignore[index]


@pytest.mark.parametrize("damage, why", [
    (lambda env: env.pop("expected_cells"), "has no expected_cells"),
    (lambda env: env.update(expected_cells={}), "has no list for step compile"),
    (lambda env: env["expected_cells"].update(timing=[]), "expects 1 cells of step timing"),
    (_expected_zeroed, "lists no cell of step timing on gfx1010"),
])
def test_envelope_without_its_expected_cells_is_exit_2(
        copy_of: Callable[[], Path], hqval: Hq, damage: Callable[[dict[str, object]], None],
        why: str) -> None:
    """The expected cells removed or emptied from the envelope, and a row that no kernel's
    own evidence covers (the timing step's note) removed with them (once: exit 0)."""
    run = copy_of()
    env = json.loads((run / "envelope.json").read_text())
    damage(env)
    (run / "envelope.json").write_text(json.dumps(env))
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    (run / "rows.jsonl").write_text("".join(x for x in lines
                                            if '"identity": "timing[-|gfx1010|emu]"' not in x))
    res = hqval("admit", str(run))
    assert res.code == 2 and why in res.err, res.err[-1500:]


@pytest.mark.parametrize("link", ["report", "report/report.html"])
def test_a_report_path_that_is_a_symlink_is_refused(tree: Path, copy_of: Callable[[], Path],
                                                    tmp_path: Path, hqval: Hq,
                                                    link: str) -> None:
    """--resume of a complete run whose report directory, or a file in it, links
    elsewhere: the report step refuses (exit 2) and the target is untouched (once: the
    report was written through the link)."""
    run = copy_of()
    victim = tmp_path / "victim"
    if link == "report":
        victim.mkdir()
        shutil.rmtree(run / "report")
    else:
        victim.write_text("keep\n")
        (run / link).unlink()
    (run / link).symlink_to(victim)
    res = hqval(*run_args(tree, run, "--resume"))
    assert res.code == 2
    assert f"{run / link}: a symbolic link" in res.err
    assert (list(victim.iterdir()) == [] if victim.is_dir()
            else victim.read_text() == "keep\n")
