"""Launches remembered on disk (``hqval.emu.replay.DiskReplay``): a later process replays
what an earlier one ran, another arch's identical code included; an entry that another
emulator, another key or a damaged file would answer with is never used; launches that
must be seen (traced, recorded) or that failed are never stored."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hqval.emu import Machine, Module, OutOfBounds
from hqval.emu.replay import LAYOUT, DiskReplay, ReplayStore, _parse, emulator_identity

ROOT = Path(__file__).resolve().parents[2]
SPEC = "gemv_hfq4g256_r1"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache directory of its own, with its own key outside it."""
    monkeypatch.setenv("HQVAL_CACHE_KEY", str(tmp_path / "cache.key"))
    c = tmp_path / "cache"
    c.mkdir()
    return c


_OBJECTS: dict[str, bytes] = {}


def _object(arch: str) -> bytes:
    """The GEMV's code object for ``arch``, compiled once per process (each test has a
    cache key of its own, under which the compile cache's entries would be rebuilt)."""
    from hqval.manifest import load_manifest
    from hqval.toolchain import compile_kernel

    if arch not in _OBJECTS:
        res = compile_kernel(load_manifest(None).by_name(SPEC), arch)
        assert res.ok and res.code_object is not None, res.message
        _OBJECTS[arch] = res.code_object.read_bytes()
    return _OBJECTS[arch]


def _gemv(m: Machine, rows: int = 2, seed: int = 3,
          free: bool = True) -> tuple[np.ndarray, dict[str, int], Module]:
    """The suite's qt=6 GEMV on fixed inputs: its output and counts."""
    from hqval.formats import by_qt
    from hqval.manifest import load_manifest

    spec = load_manifest(None).by_name(SPEC)
    mod = m.load(_object(m.arch))
    rng = np.random.default_rng(seed)
    w = by_qt(6).encode(rng.standard_normal((rows, 256)).astype(np.float32))
    x = rng.standard_normal(256).astype(np.float32)
    addrs = []
    for a in (w.reshape(-1), x, np.full(rows, -1, np.float32)):
        addrs.append(m.alloc(a.nbytes))
        m.write(addrs[-1], a)
    wa, xa, y = addrs
    stats = m.launch(mod, spec.symbol, (rows, 1, 1), (32, 1, 1), [wa, xa, y, rows, 256])
    got = m.read(y, 4 * rows).view(np.float32).copy()
    if free:
        for a in reversed(addrs):
            m.free(a)
    return got, stats.counts, mod


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / LAYOUT).rglob("*") if p.is_file())


def test_a_later_process_replays_the_launch_an_earlier_one_ran(cache: Path) -> None:
    """Two processes, one cache: the second replays the first's launch (same output and
    counts), its kernel never translated; a third with the disk layer off runs it."""
    script = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
from hqval.emu import Machine
from hqval.emu.replay import DiskReplay
from tests.emu import test_replay
test_replay._OBJECTS["gfx1100"] = open(sys.argv[3], "rb").read()
m = Machine("gfx1100", disk=DiskReplay(sys.argv[1]) if sys.argv[2] == "on" else None)
got, counts, mod = test_replay._gemv(m)
print(json.dumps({{"got": got.tolist(), "counts": counts, "replayed": m.replayed,
                  "translated": sorted(mod._programs)}}))
"""
    obj = cache.parent / "gemv.co"
    obj.write_bytes(_object("gfx1100"))

    def run(disk: str) -> dict[str, object]:
        out = subprocess.run([sys.executable, "-c", script, str(cache), disk, str(obj)],
                             check=True,
                             capture_output=True, text=True, env=os.environ.copy())
        res: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
        return res

    first, second, off = run("on"), run("on"), run("off")
    assert first["replayed"] == 0 and first["translated"]
    assert second["replayed"] == 1 and second["translated"] == []
    assert off["replayed"] == 0 and off["translated"]
    assert first["got"] == second["got"] == off["got"] != [-1.0, -1.0]
    assert first["counts"] == second["counts"] == off["counts"]
    assert len(_entries(cache)) == 1


def test_another_arch_replays_identical_code_from_disk(cache: Path) -> None:
    """gfx1201's object of the GEMV differs from gfx1200's only in the target it names:
    a gfx1201 machine in a new store replays gfx1200's entry, naming gfx1200; gfx1100's
    code differs and runs."""
    ran, counts, _ = _gemv(Machine("gfx1200", disk=DiskReplay(cache)))
    other = Machine("gfx1201", replay=ReplayStore(), disk=DiskReplay(cache))
    again, again_counts, _ = _gemv(other)
    assert other.replayed == 1 and other.ran_on == ["gfx1200"]
    np.testing.assert_array_equal(again, ran)
    assert again_counts == counts
    gfx11 = Machine("gfx1100", disk=DiskReplay(cache))
    np.testing.assert_array_equal(_gemv(gfx11)[0], ran)
    assert gfx11.replayed == 0 and gfx11.ran_on == ["gfx1100"]


def _damage(entry: Path, how: str, cache: Path, tmp_path: Path) -> None:
    raw = bytearray(entry.read_bytes())
    if how == "payload byte":
        raw[-1] ^= 0x40
        entry.write_bytes(bytes(raw))
    elif how == "torn":
        entry.write_bytes(bytes(raw[: len(raw) - 3]))
    elif how == "stats":
        entry.write_bytes(bytes(raw).replace(b'"waves": 2', b'"waves": 3', 1))
    elif how == "other key":
        # a self-consistent entry sealed under another job's key: its HMAC is valid, but
        # not for this cache's key
        os.environ["HQVAL_CACHE_KEY"] = str(tmp_path / "other.key")
        try:
            entry.unlink()
            _gemv(Machine("gfx1100", disk=DiskReplay(cache)))
        finally:
            os.environ["HQVAL_CACHE_KEY"] = str(tmp_path / "cache.key")
    elif how == "renamed":
        # another launch's entry put in this one's place (its name inside says whose)
        theirs = Machine("gfx1100", disk=DiskReplay(cache))
        _gemv(theirs, seed=4)
        other = next(p for p in _entries(cache) if p != entry)
        other.replace(entry)
    elif how == "link":
        target = tmp_path / "elsewhere"
        target.write_bytes(bytes(raw))
        entry.unlink()
        entry.symlink_to(target)


@pytest.mark.parametrize("how", ["payload byte", "torn", "stats", "other key", "renamed",
                                 "link"])
def test_a_damaged_or_foreign_entry_is_not_used(cache: Path, tmp_path: Path,
                                                how: str) -> None:
    """Each damaged entry is passed over: the launch runs again and gives the right
    output, not the entry's."""
    want, counts, _ = _gemv(Machine("gfx1100", disk=DiskReplay(cache)))
    (entry,) = _entries(cache)
    _damage(entry, how, cache, tmp_path)
    m = Machine("gfx1100", disk=DiskReplay(cache))
    got, got_counts, _ = _gemv(m)
    assert m.replayed == 0, how
    np.testing.assert_array_equal(got, want)
    assert got_counts == counts


def test_an_intact_entry_is_used_and_names_its_launch(cache: Path) -> None:
    """The control for the damage cases: the entry as written is replayed."""
    _gemv(Machine("gfx1100", disk=DiskReplay(cache)))
    (entry,) = _entries(cache)
    assert entry.name in entry.read_bytes().decode("utf-8", "replace")
    m = Machine("gfx1100", disk=DiskReplay(cache))
    _gemv(m)
    assert m.replayed == 1


def test_only_the_allocations_a_launch_changed_are_stored(cache: Path) -> None:
    """The entry holds the output (8 bytes for two rows), not the weights or the input."""
    _gemv(Machine("gfx1100", disk=DiskReplay(cache)))
    (entry,) = _entries(cache)
    # read with replay's own parser (a search for the header's "{" stops early when the
    # size before it has a low byte of 0x7b)
    header, payload = _parse(entry.read_bytes(), entry.name)
    assert [size for _, size in header["changed"]] == [8]
    assert len(payload) == 8


def test_traced_recorded_and_failed_launches_are_never_stored(cache: Path) -> None:
    from hqval.manifest import load_manifest

    m = Machine("gfx1100", disk=DiskReplay(cache))
    seen: list[object] = []
    m.mem.recorder = lambda ins, wave, addr, ok: seen.append(ins)
    _gemv(m)
    assert seen and _entries(cache) == []
    m.mem.recorder = None
    mod = m.load(_object("gfx1100"))
    x = m.alloc(64)
    with pytest.raises(OutOfBounds):  # 2 rows of weights read from a 64-byte buffer
        m.launch(mod, load_manifest(None).by_name(SPEC).symbol, (2, 1, 1), (32, 1, 1),
                 [x, x, x, 2, 256])
    assert _entries(cache) == []


def test_no_usable_key_stores_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache key that cannot be used (here: inside the cache) means no entry is written
    that could not be vouched for, and none is read; the launch still runs."""
    monkeypatch.setenv("HQVAL_CACHE_KEY", str(cache / "inside.key"))
    m = Machine("gfx1100", disk=DiskReplay(cache))
    got, _, _ = _gemv(m)
    assert not np.array_equal(got, [-1, -1])
    assert _entries(cache) == []


def test_the_identity_covers_the_emulators_source_and_fma(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry is named by the emulator's identity: a change to any source file of a
    module it covers, or another FMA implementation asked for, is another identity."""
    from hqval import cacheauth

    pkg = tmp_path / "fakeemu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sem.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = cacheauth.source_identity(("fakeemu",), "salt")
    (pkg / "sem.py").write_text("X = 2\n")
    assert cacheauth.source_identity(("fakeemu",), "salt") != before
    assert cacheauth.source_identity(("fakeemu",), "other salt") != \
        cacheauth.source_identity(("fakeemu",), "salt")
    base = emulator_identity()
    monkeypatch.setenv("HQVAL_EMU_FMA", "numpy")
    assert emulator_identity() != base


# what hqval.emu and hqval.codeobject may import from the rest of hqval: where the cache
# lives, its key, its reader and writer and the error classes, none of which decide what
# a launch does (the compiled FMA's compiler is checked against the numpy FMA before use)
_OUTSIDE_OK = {"hqval.toolchain", "hqval.cacheauth", "hqval.safeio", "hqval.errors"}
# modules of the packages that are not on a launch's path: the kernel runner tests use and
# the coverage report (they import the formats and the result rows)
_OFF_PATH = {"runner.py", "coverage.py"}


def test_the_emulators_imports_lie_inside_what_the_identity_covers() -> None:
    outside: set[str] = set()
    for pkg in ("emu", "codeobject"):
        for f in sorted((ROOT / "hqval" / pkg).glob("*.py")):
            if f.name in _OFF_PATH:
                continue
            for node in ast.walk(ast.parse(f.read_text())):
                names: list[str] = []
                if isinstance(node, ast.ImportFrom) and node.module == "hqval":
                    names = [f"hqval.{a.name}" for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                for name in names:
                    if name.startswith("hqval") and not name.startswith(
                            ("hqval.emu", "hqval.codeobject")):
                        outside.add(f"{f.name}: {name}" if name not in _OUTSIDE_OK else "")
    assert outside - {""} == set()


def test_the_switch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hqval.backends import BackendUnavailable
    from hqval.backends.emu import EmuBackend

    monkeypatch.setenv("HQVAL_EMU_REPLAY", "off")
    assert EmuBackend("gfx1100").machine.disk is None
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "cache")
    b = EmuBackend("gfx1100")
    b.cache_dir = str(tmp_path)
    assert b.machine.disk is not None and b.machine.disk.cache == tmp_path
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "sometimes")
    with pytest.raises(BackendUnavailable, match="HQVAL_EMU_REPLAY='sometimes': use one of"):
        EmuBackend("gfx1100")
