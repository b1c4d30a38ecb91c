"""Fault class: a warm code object cache must never run a stale or foreign object.  The
kernel's scale comes from a header reached through ``#include MACRO``; after the header
changes, the same cache must rebuild, and the check must see the new (wrong) kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
KERNELS = Path(ROOT) / "kernels" / "include"

SOURCE = """\
#include "hq4_gemv.h"
#define TWEAK_HEADER "tweak.h"
#include TWEAK_HEADER
struct HdrTweak : HdrHfq4v1 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        HdrHfq4v1::decode(h, boff, sc, zp);
        sc *= TWEAK_SCALE;
    }
};
HQ_GEMV(gemv_macro_r1, HdrTweak, 1, false)
"""


def _tree(root: Path) -> Path:
    root.mkdir()
    (root / "gemv_macro.hip").write_text(SOURCE)
    (root / "tweak.h").write_text("#define TWEAK_SCALE 1.0f\n")
    manifest = root / "kernels.yaml"
    manifest.write_text(f"""\
schema: 1
allow_outside_tree: true
include_dirs: [{KERNELS}]
kernels:
  - {{name: gemv_macro_r1, source: gemv_macro.hip, qt: 6, kind: gemv, requires: any}}
""")
    return manifest


def _check(manifest: Path, cache: Path, out: Path) -> tuple[int, dict[str, str]]:
    # a process per check, as CI runs them (one process keeps its loaded programs)
    proc = subprocess.run(
        [sys.executable, "-m", "hqval", "check", "--arch", "gfx1100", "--backend", "emu",
         "--workers", "0", "--manifest", str(manifest), "--check", "reference_parity",
         "--cache-dir", str(cache), "--json", str(out)],
        capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": ROOT})
    return proc.returncode, {r["identity"]: r["status"] for r in json.loads(out.read_text())}


def test_a_changed_macro_included_header_is_recompiled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HQVAL_CACHE", str(tmp_path / "elsewhere"))
    manifest = _tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    code, rows = _check(manifest, cache, tmp_path / "a.json")
    assert code == 0 and set(rows.values()) == {"pass"}
    (tmp_path / "tree" / "tweak.h").write_text("#define TWEAK_SCALE 2.0f\n")  # now wrong
    code, rows = _check(manifest, cache, tmp_path / "b.json")
    assert code == 1 and set(rows.values()) == {"fail"}  # a stale object would pass
    # nothing of this run is written outside --cache-dir: code objects, dependency lists,
    # disassemblies, audit rows and the emulator's compiled FMA all follow it
    assert not (tmp_path / "elsewhere").exists()
    assert any((cache / "co-v2").iterdir()) and any((cache / "disasm-v1").iterdir())


def test_a_cached_object_of_another_arch_is_not_used(tmp_path: Path) -> None:
    """The gfx1201 object copied over the gfx1100 entry (a consistent entry: size and
    sha256 match) is rebuilt, and the row says why."""
    import hashlib

    from hqval.manifest import load_manifest
    from hqval.toolchain import cache_root, compile_kernel

    manifest = _tree(tmp_path / "tree")
    spec = load_manifest(manifest).kernels[0]
    cache = tmp_path / "cache"
    mine, theirs = compile_kernel(spec, "gfx1100", cache), compile_kernel(spec, "gfx1201", cache)
    assert mine.ok and theirs.ok and theirs.code_object is not None
    co = cache_root(cache) / mine.key[:2] / f"{mine.key}.co"
    meta = co.with_suffix(".json")
    data = theirs.code_object.read_bytes()
    co.write_bytes(data)
    info = json.loads(meta.read_text())
    info.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    meta.write_text(json.dumps(info))
    again = compile_kernel(spec, "gfx1100", cache)
    assert again.ok and not again.cached
    assert again.details["rebuilt"] == "built for gfx1201, not gfx1100"


def test_a_header_changed_with_its_clock_set_back_is_recompiled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Clock skew: the header changes (same size) and its own and its directory's
    timestamps are set back to what they were when the cache entry was made, as a clock
    stepped backwards (or an rsync -t, a touch -r) leaves them.  The cache keys on
    contents, never on times: the next process rebuilds and sees the new (wrong) kernel."""
    monkeypatch.setenv("HQVAL_CACHE", str(tmp_path / "elsewhere"))
    manifest = _tree(tmp_path / "tree")
    header, tree = tmp_path / "tree" / "tweak.h", tmp_path / "tree"
    cache = tmp_path / "cache"
    code, rows = _check(manifest, cache, tmp_path / "a.json")
    assert code == 0 and set(rows.values()) == {"pass"}
    before = {p: (p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in (header, tree)}
    header.write_text("#define TWEAK_SCALE 2.0f\n")  # same length, now wrong
    for p, (atime, mtime) in before.items():
        os.utime(p, ns=(atime, mtime))
    assert header.stat().st_mtime_ns == before[header][1]
    code, rows = _check(manifest, cache, tmp_path / "b.json")
    assert code == 1 and set(rows.values()) == {"fail"}  # a time-keyed cache would pass
