"""hqval.doctor: every probe reports found or missing with what a missing piece disables."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval import doctor, isa


def test_this_machine_has_the_toolchain() -> None:
    """CI installs clang-19, lld-19 and llvm-19 (.ci/run): all found, with a version."""
    found = {f.piece: f for f in doctor.diagnose()}
    for piece in ("HIP-capable clang (LLVM 19)", "ld.lld (LLVM 19)", "llvm-objdump",
                  "llvm-readelf"):
        assert found[piece].found, found[piece].detail
        assert "19" in found[piece].detail
    assert "code object cache" in found
    assert all(f.disables for f in found.values())


def test_an_empty_path_reports_every_tool_missing_and_what_it_disables(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    monkeypatch.delenv("HQVAL_CLANG", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    isa.find_llvm_tool.cache_clear()
    try:
        got = {f.piece: f for f in doctor.diagnose()}
    finally:
        isa.find_llvm_tool.cache_clear()
    clang = got["HIP-capable clang (LLVM 19)"]
    assert not clang.found and clang.required
    assert "apt-get install clang-19" in clang.detail
    assert "no code object can be built" in clang.disables
    assert not got["ld.lld (LLVM 19)"].found
    assert not got["Chromium"].found and "apt-get install chromium" in got["Chromium"].detail
    assert "report test" in got["Chromium"].disables


def test_cache_size_is_counted(tmp_path: Path) -> None:
    from hqval.toolchain import cache_root

    root = cache_root(tmp_path)
    (root / "ab").mkdir(parents=True)
    (root / "ab" / "x.co").write_bytes(b"\0" * (3 * 2**20))
    f = doctor.cache(str(tmp_path))
    assert f.found and "1 files, 3.0 MiB" in f.detail and str(root) in f.detail
    assert "not created yet" in doctor.cache(str(tmp_path / "none")).detail


def test_cache_count_survives_concurrent_writers(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run may rename its in-flight ``*.co.tmp`` into place (or remove it) between
    the doctor's listing and its stat; that once made ``hqval doctor`` exit 2 in CI.  An
    in-flight file is not counted, and one that vanishes is skipped, not an error."""
    from hqval.toolchain import cache_root

    root = cache_root(tmp_path)
    (root / "ab").mkdir(parents=True)
    (root / "ab" / "x.co").write_bytes(b"\0" * 2**20)
    (root / "ab" / "tmp123.co.tmp").write_bytes(b"\0" * 2**20)  # being written
    (root / "ab" / "y.json.tmp4242").write_bytes(b"{}")  # a per-pid record being written
    gone = root / "ab" / "tmpgone.co"
    real_rglob = Path.rglob

    def rglob_with_a_vanished_file(self: Path, pattern: str):  # type: ignore[no-untyped-def]
        yield from real_rglob(self, pattern)
        yield gone  # listed, then renamed away by another process before the stat

    monkeypatch.setattr(Path, "rglob", rglob_with_a_vanished_file)
    f = doctor.cache(str(tmp_path))
    assert f.found and "1 files, 1.0 MiB" in f.detail


def test_doctor_says_whether_the_compiler_sandbox_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval import doctor

    monkeypatch.setenv("HQVAL_SANDBOX", "off")
    off = doctor.sandbox()
    assert not off.found and off.detail.startswith("off: HQVAL_SANDBOX=off")
    monkeypatch.delenv("HQVAL_SANDBOX")
    monkeypatch.setenv("PATH", "/nonexistent")
    missing = doctor.sandbox()
    assert not missing.found and "apt-get install bubblewrap" in missing.detail
