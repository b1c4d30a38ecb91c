"""Fault class: a cache shared with, or poisoned by, another job must never admit a broken
tree.  Another job can write entries that are consistent in themselves (an object whose
recorded sha256 and size match it); only a tag made with this machine's cache key, which
lives outside the cache (``hqval.cacheauth``), makes an entry usable.  Each case forges an
entry as such a job could and checks it is rebuilt or decoded again, never used."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqval import cacheauth
from hqval.manifest import KernelSpec, load_manifest
from hqval.toolchain import CompileResult, cache_root, compile_kernel

KERNELS = Path(__file__).resolve().parents[2] / "kernels" / "include"
SOURCE = """\
#include "hq4_gemv.h"
#include "tweak.h"
struct HdrTweak : HdrHfq4v1 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        HdrHfq4v1::decode(h, boff, sc, zp);
        sc *= TWEAK_SCALE;
    }
};
HQ_GEMV(gemv_tweak_r1, HdrTweak, 1, false)
"""


def _spec(root: Path, scale: str) -> KernelSpec:
    root.mkdir(parents=True)
    (root / "gemv_tweak.hip").write_text(SOURCE)
    (root / "tweak.h").write_text(f"#define TWEAK_SCALE {scale}\n")
    (root / "kernels.yaml").write_text(f"""\
schema: 1
allow_outside_tree: true
include_dirs: [{KERNELS}]
kernels:
  - {{name: gemv_tweak_r1, source: gemv_tweak.hip, qt: 6, kind: gemv, requires: any}}
""")
    return load_manifest(root / "kernels.yaml").kernels[0]


class Built:
    """An honest kernel (scale 1) and a broken one (scale 2) built into one cache."""

    def __init__(self, root: Path) -> None:
        self.cache = root / "cache"
        self.good = _spec(root / "good", "1.0f")
        self.bad = _spec(root / "bad", "2.0f")
        self.g = compile_kernel(self.good, "gfx1010", self.cache)
        self.b = compile_kernel(self.bad, "gfx1010", self.cache)
        assert self.g.ok and self.b.ok and self.g.sha256 != self.b.sha256

    def entry(self, r: CompileResult) -> tuple[Path, Path]:
        co = cache_root(self.cache) / r.key[:2] / f"{r.key}.co"
        return co, co.with_suffix(".json")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("cache-more"))


@pytest.fixture
def fresh(built: Built) -> Iterator[Built]:
    """``built`` with the honest entry restored after the case."""
    co, meta = built.entry(built.g)
    saved = co.read_bytes(), meta.read_bytes()
    yield built
    co.write_bytes(saved[0])
    meta.write_bytes(saved[1])


def _forge(b: Built, how: str) -> None:
    """Put the broken object into the honest entry's place as another job could."""
    co, meta = b.entry(b.g)
    bad_co, bad_meta = b.entry(b.b)
    data = bad_co.read_bytes()
    co.write_bytes(data)
    info = json.loads(meta.read_text())
    info.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    if how == "mac-kept":
        pass  # the honest entry's tag, over the honest object
    elif how == "mac-of-the-broken-entry":
        info["mac"] = json.loads(bad_meta.read_text())["mac"]  # a valid tag, another key
    elif how == "no-mac":
        info.pop("mac")  # as an older hqval, or a job without the key, writes it
    elif how == "mac-forged":
        info["mac"] = hashlib.sha256(b"guess").hexdigest()
    meta.write_text(json.dumps(info))


@pytest.mark.parametrize("how", ["mac-kept", "mac-of-the-broken-entry", "no-mac",
                                 "mac-forged"])
def test_a_forged_consistent_entry_is_rebuilt_never_used(fresh: Built, how: str) -> None:
    """Object and metadata both replaced before the run (sha256 and size consistent):
    once used as the honest kernel's object (a broken tree admitted)."""
    _forge(fresh, how)
    again = compile_kernel(fresh.good, "gfx1010", fresh.cache)
    assert again.ok and not again.cached
    assert "not authenticated by this machine's cache key" in again.details["rebuilt"]
    assert again.sha256 == fresh.g.sha256  # the honest object, rebuilt
    assert again.code_object is not None
    assert hashlib.sha256(again.code_object.read_bytes()).hexdigest() == fresh.g.sha256


def test_an_honest_entry_is_used(built: Built) -> None:
    """The control: the entry this machine wrote is a cache hit."""
    again = compile_kernel(built.good, "gfx1010", built.cache)
    assert again.ok and again.cached and again.sha256 == built.g.sha256


def test_a_forged_dependency_record_is_not_used(built: Built) -> None:
    """A dependency record without the header (consistent in itself): once trusted, so
    a changed header would not change the key."""
    from hqval import toolchain

    records = list((cache_root(built.cache) / "deps").rglob("*.json"))
    assert records
    for rec in records:
        info = json.loads(rec.read_text())
        assert toolchain._recorded_deps(rec) is not None  # the control: honest, used
        info["deps"] = [p for p in info["deps"] if not p.endswith("tweak.h")]
        info["sha256"] = {p: d for p, d in info["sha256"].items() if p in info["deps"]}
        rec.write_text(json.dumps(info))
        assert toolchain._recorded_deps(rec) is None


def test_a_forged_disassembly_is_decoded_again(tmp_path: Path, built: Built) -> None:
    """A disassembly entry whose text digest matches its text but no key made it: once
    read by the audit and the emulator as the object's code."""
    from hqval.codeobject import cache as dcache
    from hqval.codeobject.disasm import find_objdump, tool_identity

    assert built.g.code_object is not None
    raw = built.g.code_object.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    cache = str(tmp_path / "c")
    k = dcache.key(sha, "gfx1010", tool_identity(find_objdump()))
    real = dcache.disassembly_text(raw, sha, "gfx1010", cache)
    stored = json.loads(dcache._file(cache, k).read_text())
    assert "mac" in stored
    fake = real.replace("s_endpgm", "s_nop 0")
    assert fake != real
    dcache._file(cache, k).write_text(json.dumps(
        {"key": k, "sha256": hashlib.sha256(fake.encode()).hexdigest(), "text": fake,
         "mac": stored["mac"]}))
    dcache._TEXT.clear()
    again = dcache.disassembly_text(raw, sha, "gfx1010", cache)
    assert again != fake and again.count("s_endpgm") == real.count("s_endpgm") > 0


def test_forged_audit_rows_are_audited_again(tmp_path: Path) -> None:
    from hqval.audit import cache as acache
    from hqval.result import Row, Status

    row = Row("audit", "audit_no_spill", "k", "gfx1010", "isa", Status.FAIL, message="spills")
    acache._store_rows(tmp_path, "ab" * 32, [row])
    assert acache.cached_rows(tmp_path, "ab" * 32) == [row]  # the control
    path = acache._cache_file(tmp_path, "ab" * 32)
    entry = json.loads(path.read_text())
    entry["rows"][0]["status"] = "pass"
    entry["sha256"] = acache._rows_digest(entry["rows"])
    path.write_text(json.dumps(entry))
    assert acache.cached_rows(tmp_path, "ab" * 32) is None


def test_a_planted_fma_library_is_never_loaded(tmp_path: Path) -> None:
    """A shared object another job put where the emulator's compiled FMA is cached would
    run inside hqval: it is built again."""
    from hqval.emu import fastfma

    root = tmp_path / "c" / "emu-ext"
    try:
        target = fastfma.build(root)
    except fastfma.EmuError as exc:  # pragma: no cover - a machine without clang
        pytest.skip(str(exc))
    honest = target.read_bytes()
    assert fastfma._authentic(target, root)
    target.write_bytes(honest[:-1] + bytes([honest[-1] ^ 1]))
    assert not fastfma._authentic(target, root)
    assert fastfma.build(root).read_bytes() == honest


@pytest.mark.parametrize("where", ["group-readable", "inside-the-cache", "a-fifo"])
def test_an_unsafe_cache_key_is_an_infrastructure_error(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A key others could read (or one kept in the cache it authenticates) could mint
    entries: refused, one line naming it, an infrastructure error (never the kernel's)."""
    key = (built.cache if where == "inside-the-cache" else tmp_path) / "cache.key"
    if where == "a-fifo":
        os.mkfifo(key, 0o600)
    else:
        key.write_text("00" * 32 + "\n")
        key.chmod(0o640 if where == "group-readable" else 0o600)
    monkeypatch.setenv(cacheauth.KEY_ENV, str(key))
    try:
        r = compile_kernel(built.good, "gfx1010", built.cache)
    finally:
        if where == "inside-the-cache":
            key.unlink()
    assert not r.ok and r.details["infrastructure"] is True
    assert str(key) in r.message and "\n" not in r.message
    assert {"group-readable": "mode 0640", "inside-the-cache": "inside the cache",
            "a-fifo": "not a regular file"}[where] in r.message


def test_fresh_cache_is_private_keyed_apart_and_removed(monkeypatch: pytest.MonkeyPatch,
                                                         built: Built) -> None:
    """``hqval run --fresh-cache``: every object built in a new cache under a new key
    (outside it); nothing of this machine's cache is used; both removed afterwards."""
    import argparse

    from hqval.commands import run as run_cmd
    from hqval.toolchain import cache_base

    seen: dict[str, object] = {}

    def fake_run(args: argparse.Namespace) -> int:
        cache = Path(args.cache_dir)
        seen.update(cache=cache, base=cache_base(), key=cacheauth.key_path(),
                    mode=cache.stat().st_mode & 0o777)
        r = compile_kernel(built.good, "gfx1010")  # no cache_dir: the run's cache
        seen.update(ok=r.ok, cached=r.cached, sha=r.sha256, where=r.code_object)
        return 0

    monkeypatch.setattr(run_cmd, "_run", fake_run)
    args = argparse.Namespace(resume=False, out=None, baseline=[], fresh_cache=True,
                              cache_dir=str(built.cache))
    assert run_cmd.run(args) == 0
    cache = Path(str(seen["cache"]))
    assert seen["base"] == cache != built.cache and seen["mode"] == 0o700
    assert not Path(str(seen["key"])).is_relative_to(cache)
    assert seen["key"] != cacheauth.key_path()
    assert seen["ok"] and not seen["cached"] and seen["sha"] == built.g.sha256
    assert Path(str(seen["where"])).is_relative_to(cache)
    assert not cache.exists() and not Path(str(seen["key"])).exists()
