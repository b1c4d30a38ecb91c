from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hqval
from hqval.result import Row, Status
from hqval.results import store


def _row(i: int, status: Status = Status.PASS) -> Row:
    return Row(kind="check", check="bit_identity", kernel=f"k{i}", arch="gfx1100",
               backend="emu", status=status, measured=0.0, tolerance=0.0,
               details={"qt": 44, "i": i})


def _writer(tmp_path: Path, **kw: object) -> store.RunWriter:
    env = store.make_envelope(backend="emu", arch="gfx1100", argv=["hqval", "run"])
    return store.RunWriter.create(tmp_path / "run", env, **kw)  # type: ignore[arg-type]


def test_envelope_has_provenance(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    env = json.loads((w.path / "envelope.json").read_text())
    assert env["schema_version"] == hqval.SCHEMA_VERSION
    assert env["hqval_version"] == hqval.__version__
    for key in ("suite_commit", "kernel_tree_commit", "compiler", "compiler_version",
                "backend", "device", "arch", "runtime", "host", "date", "command_line"):
        assert key in env
    assert env["command_line"] == "hqval run"
    assert env["arch"] == ["gfx1100"]


def test_round_trip_and_frame(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    w.append([_row(0), _row(1, Status.FAIL)])
    w.append([Row(kind="timing", check="ratio", kernel="k", arch="gfx1100", backend="hip",
                  status=Status.PASS, measured=float("nan"))])
    run = store.load(w.path)
    assert [r.kernel for r in run.rows] == ["k0", "k1", "k"]
    assert run.rows[1].status is Status.FAIL
    df = store.load_run(w.path)
    assert list(df["identity"])[:2] == ["bit_identity[k0|gfx1100|emu]",
                                        "bit_identity[k1|gfx1100|emu]"]
    assert df["measured"].isna().iloc[2]  # "nan" string turned back into a float NaN
    assert list(df["details.qt"])[:2] == [44, 44]


def test_refuses_existing_run_without_resume(tmp_path: Path) -> None:
    _writer(tmp_path).close()
    with pytest.raises(store.RunDirError, match="--resume"):
        _writer(tmp_path)


def test_resume_lists_done_cells(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    w.append([_row(0), _row(1)])
    w.close()  # the run directory's lock is released (as when the process ends)
    w2 = _writer(tmp_path, resume=True)
    assert w2.done == {_row(0).identity, _row(1).identity}
    w2.append([_row(2)])
    assert len(store.load(w.path).rows) == 3


def test_torn_last_line_dropped_with_warning_and_repaired_on_resume(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    w.append([_row(0), _row(1)])
    full = json.dumps(_row(2).to_dict())
    with (w.path / "rows.jsonl").open("a") as f:
        f.write(full[: len(full) // 2])  # what a kill in the middle of a write leaves
    with pytest.warns(store.TornLineWarning, match="torn last line"):
        run = store.load(w.path)
    assert [r.kernel for r in run.rows] == ["k0", "k1"]
    w.close()
    with pytest.warns(store.TornLineWarning):
        w2 = _writer(tmp_path, resume=True)
    w2.append([_row(2)])
    assert [r.kernel for r in store.load(w.path).rows] == ["k0", "k1", "k2"]


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    w.append([_row(0)])
    with (w.path / "rows.jsonl").open("a") as f:
        f.write("{not json\n")
    w.append([_row(1)])
    with pytest.raises(store.RunDirError, match=r"rows.jsonl:2"):
        store.load(w.path)


def test_killed_writer_loses_nothing_appended(tmp_path: Path) -> None:
    """A real process appends batches and is SIGKILLed mid-run; every batch it reported
    as appended is there afterwards."""
    run_dir = tmp_path / "run"
    script = textwrap.dedent(f"""
        import sys, time
        from hqval.result import Row, Status
        from hqval.results import store
        w = store.RunWriter.create({str(run_dir)!r}, store.make_envelope(backend="emu"))
        for b in range(1000):
            w.append([Row("check", "c", f"k{{b}}_{{j}}", "gfx1100", "emu", Status.PASS)
                      for j in range(3)])
            print(b, flush=True)
            if b == 5:
                time.sleep(60)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None
        acked = [proc.stdout.readline() for _ in range(6)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert [int(a) for a in acked] == list(range(6))
    run = store.load(run_dir)
    assert len(run.rows) == 18
    assert run.rows[-1].kernel == "k5_2"


def test_missing_envelope_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(store.RunDirError, match="hqval run --out"):
        store.load(tmp_path)


def test_migrates_v0_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    (run_dir / "envelope.json").write_text(json.dumps(
        {"version": 0, "commit": "abc123", "arch": "gfx1030", "backend": "hip"}))
    (run_dir / "rows.jsonl").write_text(json.dumps(
        {"check": "bit_identity", "kernel": "k", "arch": "gfx1030", "backend": "hip",
         "result": "FAIL", "value": 3.0}) + "\n")
    run = store.load(run_dir)
    assert run.envelope["schema_version"] == hqval.SCHEMA_VERSION
    assert run.envelope["suite_commit"] == "abc123"
    assert run.envelope["arch"] == ["gfx1030"]
    assert run.rows[0].status is Status.FAIL
    assert run.rows[0].measured == 3.0
    assert run.rows[0].kind == "check"


def test_newer_schema_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "new"
    run_dir.mkdir()
    (run_dir / "envelope.json").write_text(
        json.dumps({"schema_version": hqval.SCHEMA_VERSION + 1}))
    with pytest.raises(store.RunDirError, match="upgrade hqval"):
        store.load(run_dir)


def test_every_version_below_current_has_a_migration() -> None:
    assert set(store.MIGRATIONS) == set(range(hqval.SCHEMA_VERSION))


def test_schema_1_hfq4g256_qt1_becomes_the_engines_qt6(tmp_path: Path) -> None:
    """Schema 1 called HFQ4G256 qt=1 (the engine's F16 id): the kernel table, details.qt and
    admission rows read as qt=6; other qts and the run's own messages are kept."""
    run_dir = tmp_path / "v1"
    run_dir.mkdir()
    (run_dir / "envelope.json").write_text(json.dumps({
        "schema_version": 1, "arch": ["gfx1100"], "backend": "emu",
        "kernels": {"gemv_hfq4g256_r1": {"qt": 1, "kind": "gemv"},
                    "gemv_mq4g256v2_r1": {"qt": 44, "kind": "gemv"}}}))
    rows = [
        {"kind": "check", "check": "bit_identity", "kernel": "gemv_hfq4g256_r1",
         "arch": "gfx1100", "backend": "emu", "status": "pass", "details": {"qt": 1},
         "message": "qt=1 baseline"},
        {"kind": "admit", "check": "admit_decode", "kernel": "qt1", "arch": "gfx1100",
         "backend": "policy", "status": "pass", "details": {"qt": 1, "path": "decode"}},
        {"kind": "check", "check": "bit_identity", "kernel": "gemv_mq4g256v2_r1",
         "arch": "gfx1100", "backend": "emu", "status": "pass", "details": {"qt": 44}},
    ]
    (run_dir / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = store.load(run_dir)
    assert run.envelope["schema_version"] == hqval.SCHEMA_VERSION
    assert run.envelope["kernels"]["gemv_hfq4g256_r1"]["qt"] == 6
    assert run.envelope["kernels"]["gemv_mq4g256v2_r1"]["qt"] == 44
    by_kernel = {r.kernel: r for r in run.rows}
    assert by_kernel["gemv_hfq4g256_r1"].details["qt"] == 6
    assert by_kernel["gemv_hfq4g256_r1"].message == "qt=1 baseline"
    assert by_kernel["qt6"].details["qt"] == 6 and "qt6|" in by_kernel["qt6"].identity
    assert by_kernel["gemv_mq4g256v2_r1"].details["qt"] == 44


def test_committed_checkpoints_load_with_hfq4g256_as_qt6() -> None:
    """The checkpoints under reports/ are historical (schema 1, qt=1 on disk) and are left as
    written; loading them migrates."""
    root = Path(hqval.__file__).resolve().parents[1] / "reports" / "checkpoints"
    env_files = sorted(root.rglob("envelope.json"))
    assert env_files, f"no committed run directories under {root}"
    for env_file in env_files:
        raw = json.loads(env_file.read_text())
        run = store.load(env_file.parent)
        assert run.envelope["schema_version"] == hqval.SCHEMA_VERSION
        table = run.envelope.get("kernels", {})
        for name, info in table.items():
            if raw.get("schema_version", 0) < 2 and "hfq4g256" in name:
                assert raw["kernels"][name]["qt"] == 1 and info["qt"] == 6, name
            assert info.get("qt") != 1, name
        assert all(r.details.get("qt") != 1 for r in run.rows), env_file


def test_later_row_for_a_cell_supersedes_the_earlier(tmp_path: Path) -> None:
    """An infrastructure error (hqval's own, redone by --resume) is superseded by the
    redo; an error of the kernel's own never is."""
    w = _writer(tmp_path)
    infra = dataclasses.replace(_row(0, Status.ERROR), details={"infrastructure": True})
    w.append([infra, _row(1)])
    w.append([_row(0, Status.PASS)])
    run = store.load(w.path)
    assert [(r.kernel, r.status) for r in run.rows] == [("k0", Status.PASS),
                                                        ("k1", Status.PASS)]
    w.append([_row(2, Status.ERROR)])
    w.append([_row(2, Status.PASS)])
    with pytest.raises(store.RunDirError, match=r"is pass after an earlier row of that cell "
                                                "erred"):
        store.load(w.path)


def test_second_writer_is_refused_at_once(tmp_path: Path) -> None:
    """An exclusive lock on the run directory: a second writer (resuming or not) is a
    RunLocked naming the holder, at once; after the first closes, it may resume."""
    w = _writer(tmp_path)
    for resume in (False, True):
        with pytest.raises(store.RunLocked, match=r"another hqval process \(pid \d+\) is "
                                                  "writing"):
            _writer(tmp_path, resume=resume)
    w.close()
    _writer(tmp_path, resume=True).close()


@pytest.mark.parametrize("text, why", [
    ("{}", "empty JSON object"), ("", "not valid JSON"), ("[1]", "not a JSON object"),
    ('{"schema_version": 1}', "lacks arch, kernels"),
    ('{"schema_version": 1, "arch": "gfx1100", "kernels": {}}', "arch \\(a list\\)"),
    ('{"note": "hand-written"}', "no schema_version"),
])
def test_damaged_envelope_is_a_run_dir_error(tmp_path: Path, text: str, why: str) -> None:
    w = _writer(tmp_path)
    w.append([_row(0)])
    (w.path / store.ENVELOPE).write_text(text)
    with pytest.raises(store.RunDirError, match=why):
        store.load(w.path)


def test_non_utf8_run_files_name_the_path(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    w.append([_row(0)])
    rows = w.path / store.ROWS
    rows.write_bytes(b'{"kind": "\xff\xfe"}\n' + rows.read_bytes())
    with pytest.raises(store.RunDirError, match=r"rows.jsonl:1: not UTF-8"):
        store.load(w.path)
    (w.path / store.ENVELOPE).write_bytes(b'{"schema_version": "\xff"}')
    with pytest.raises(store.RunDirError, match=r"envelope.json: not UTF-8"):
        store.load(w.path)


def test_atomic_writes_use_unique_temporary_names(tmp_path: Path) -> None:
    """Two writers of one file never share a temporary name (the shared
    envelope.json.tmp crashed 36 of 40 concurrent runs)."""
    import threading

    target = tmp_path / "envelope.json"
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for _ in range(20):
                store.write_atomic(target, f"{i}\n")
        except BaseException as exc:  # pragma: no cover - the failure being tested
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert target.read_text().strip() in {str(i) for i in range(8)}
    assert [p.name for p in tmp_path.iterdir()] == ["envelope.json"]  # no temporary left
