"""hqval.toolchain: compiler search, real device-only builds, the validated cache, the matrix."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from hqval.manifest import KernelSpec, load_manifest, load_mutants
from hqval.matrix import load_arches
from hqval.result import Status
from hqval.toolchain import (
    EM_AMDGPU,
    ToolchainError,
    cache_root,
    compile_kernel,
    compile_matrix,
    find_compiler,
)

PRELUDE = Path(__file__).resolve().parents[1] / "kernels" / "include"
CLANG = shutil.which("clang-19") or shutil.which("clang-20")
pytestmark = pytest.mark.skipif(CLANG is None, reason="needs clang-19 or clang-20 on PATH")

TINY = """\
#include "hqval_prelude.h"
#include "tiny.h"
HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) tiny(const unsigned char* W, const float* x, float* y,
                                         int M, int K) {
    if (hq_lane() == 0) y[0] = x[0] * TINY_SCALE + (float)W[0];
}
"""


def tiny_spec(tmp_path: Path, source: str = TINY, **kw: object) -> KernelSpec:
    (tmp_path / "tiny.h").write_text("#define TINY_SCALE 2.0f\n")
    (tmp_path / "tiny.hip").write_text(source)
    base = KernelSpec(name="tiny", source=tmp_path / "tiny.hip", symbol="tiny", qt=6,
                      kind="gemv", include_dirs=(PRELUDE,))
    return replace(base, **kw)  # type: ignore[arg-type]


def entry_files(cache: Path, key: str) -> tuple[Path, Path]:
    d = cache_root(cache) / key[:2]
    return d / f"{key}.co", d / f"{key}.json"


# ---- compiler search ------------------------------------------------------------------

def test_default_search_finds_a_versioned_clang() -> None:
    c = find_compiler({"PATH": os.environ["PATH"]})
    assert c.kind in ("clang", "rocm-clang", "hipcc")
    assert "clang" in c.version.lower()
    assert os.access(c.path, os.X_OK)


def test_hqval_clang_wins_and_a_bad_one_is_named(tmp_path: Path) -> None:
    assert CLANG is not None
    c = find_compiler({"HQVAL_CLANG": CLANG, "PATH": str(tmp_path)})
    assert (c.path, c.found_by, c.kind) == (CLANG, "HQVAL_CLANG", "clang")
    with pytest.raises(ToolchainError, match="HQVAL_CLANG=/no/such/clang"):
        find_compiler({"HQVAL_CLANG": "/no/such/clang", "PATH": os.environ["PATH"]})


def test_rocm_clang_comes_before_path_and_uses_hip_headers(tmp_path: Path) -> None:
    assert CLANG is not None
    bindir = tmp_path / "rocm" / "llvm" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "clang").symlink_to(CLANG)
    c = find_compiler({"ROCM_PATH": str(tmp_path / "rocm"), "PATH": os.environ["PATH"]})
    assert c.kind == "rocm-clang" and c.path == str(bindir / "clang")
    assert c.hip_headers and "-nogpuinc" not in c.flags("gfx1100")
    assert "-nogpuinc" in find_compiler({"PATH": os.environ["PATH"]}).flags("gfx1100")


def test_path_search_prefers_clang_20_then_19(tmp_path: Path) -> None:
    assert CLANG is not None
    for name in ("clang-19", "clang-20"):
        (tmp_path / name).symlink_to(CLANG)
    c = find_compiler({"PATH": str(tmp_path)})
    assert Path(c.path).name == "clang-20" and c.found_by == "clang-20 on PATH"
    (tmp_path / "clang-20").unlink()
    assert Path(find_compiler({"PATH": str(tmp_path)}).path).name == "clang-19"


def _fake_hipcc(bindir: Path, llvm: str) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    exe = bindir / "hipcc"
    exe.write_text(f"#!/bin/sh\necho 'HIP version: 5.2.21153-0'\necho '{llvm}'\n")
    exe.chmod(0o755)
    return exe


def test_an_old_hipcc_on_path_does_not_shadow_clang_19(tmp_path: Path) -> None:
    # Debian 12's ROCm 5.2 hipcc drives LLVM 15 (no gfx115x, no gfx12): with clang-19 on
    # PATH the suite builds with clang-19 and says why
    assert CLANG is not None
    old = tmp_path / "old"
    _fake_hipcc(old, "Debian clang version 15.0.6")
    (old / "clang-19").symlink_to(CLANG)
    c = find_compiler({"PATH": str(old)})
    assert Path(c.path).name == "clang-19" and c.kind == "clang"
    assert "hipcc on PATH is LLVM 15" in c.found_by
    # must say no: a hipcc of LLVM 19 or newer is still ROCm's choice ...
    new = tmp_path / "new"
    _fake_hipcc(new, "AMD clang version 19.0.0git (ROCm 6.4)")
    (new / "clang-19").symlink_to(CLANG)
    assert find_compiler({"PATH": str(new)}).kind == "hipcc"
    # ... and an old hipcc with no newer clang beside it is still used (its compile cells
    # then name the fix: test_a_target_the_compiler_does_not_know_...)
    alone = tmp_path / "alone"
    _fake_hipcc(alone, "Debian clang version 15.0.6")
    assert find_compiler({"PATH": str(alone)}).kind == "hipcc"


def test_no_compiler_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="apt-get install clang-19"):
        find_compiler({"PATH": str(tmp_path)})


# ---- compile and cache -----------------------------------------------------------------

def test_compile_builds_a_real_amdgpu_object_then_hits_the_cache(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    cache = tmp_path / "cache"
    first = compile_kernel(spec, "gfx1100", cache)
    assert first.ok, first.message
    assert first.code_object is not None and not first.cached
    data = first.code_object.read_bytes()
    assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == EM_AMDGPU
    meta = json.loads(first.code_object.with_suffix(".json").read_text())
    assert meta["key"] == first.key and meta["arch"] == "gfx1100"
    second = compile_kernel(spec, "gfx1100", cache)
    assert second.ok and second.cached and second.code_object == first.code_object
    other_arch = compile_kernel(spec, "gfx1201", cache)
    assert other_arch.ok and not other_arch.cached and other_arch.key != first.key


@pytest.mark.parametrize(("damage", "reason"), [
    ("flip", "sha256 mismatch"),
    ("truncate", "size"),
    ("stale", "stale"),
    ("meta", "unreadable metadata"),
])
def test_a_damaged_cache_entry_is_rebuilt_never_used(
        tmp_path: Path, damage: str, reason: str) -> None:
    spec = tiny_spec(tmp_path)
    cache = tmp_path / "cache"
    good = compile_kernel(spec, "gfx1100", cache)
    assert good.ok and good.code_object is not None
    original = good.code_object.read_bytes()
    co, meta = entry_files(cache, good.key)
    if damage == "flip":
        buf = bytearray(original)
        buf[len(buf) // 2] ^= 0xFF
        co.write_bytes(bytes(buf))
    elif damage == "truncate":
        co.write_bytes(original[: len(original) // 2])
    elif damage == "stale":
        info = json.loads(meta.read_text())
        info["key"] = "0" * 64
        meta.write_text(json.dumps(info))
    else:
        meta.write_text("{not json")
    again = compile_kernel(spec, "gfx1100", cache)
    assert again.ok and not again.cached
    assert reason in again.details["rebuilt"]
    assert co.read_bytes() == original  # the rebuild is byte-identical to the first build


def test_key_follows_included_files_and_defines(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    cache = tmp_path / "cache"
    a = compile_kernel(spec, "gfx1100", cache)
    (tmp_path / "tiny.h").write_text("#define TINY_SCALE 3.0f\n")
    b = compile_kernel(spec, "gfx1100", cache)
    assert a.ok and b.ok and a.key != b.key and not b.cached
    assert a.code_object is not None and b.code_object is not None
    assert a.code_object.read_bytes() != b.code_object.read_bytes()
    c = compile_kernel(replace(spec, defines=(("HQ_UNUSED", "1"),)), "gfx1100", cache)
    assert c.ok and c.key != b.key


def test_compile_error_is_a_failed_result_with_the_compiler_message(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, source=TINY.replace("x[0] *", "undeclared_thing *"))
    r = compile_kernel(spec, "gfx1100", tmp_path / "cache")
    assert not r.ok and r.code_object is None
    assert "tiny.hip" in r.message and "undeclared_thing" in r.message
    leftovers = list(cache_root(tmp_path / "cache").rglob("*"))
    # no object or metadata (the recorded -M list of the source may stay: it is valid)
    assert not [p for p in leftovers if p.is_file() and "deps" not in p.parts]


def test_a_target_the_compiler_does_not_know_is_an_error_of_the_machine(tmp_path: Path) -> None:
    """clang-19 has no gfx1250 (as Debian 12's ROCm 5.2 hipcc has no gfx115x/gfx12): every
    kernel would "fail", which reads as the kernels' fault.  It is an ERROR row naming
    the compiler and the fix; a kernel's own compile error stays a FAIL."""
    from hqval.toolchain import CompileCell, unknown_target

    spec = tiny_spec(tmp_path)
    r = compile_kernel(spec, "gfx1250", tmp_path / "cache")
    assert not r.ok and "gfx1250" in r.message
    row = CompileCell(spec, "gfx1250", r).row()
    assert row.status is Status.ERROR, row
    assert "does not target gfx1250" in row.message and "clang-19" in row.message
    assert "\n" not in row.message
    # must say no: a kernel's error, or the phrase about another arch, is the kernel's
    bad = tiny_spec(tmp_path, source=TINY.replace("x[0] *", "undeclared_thing *"))
    row = CompileCell(bad, "gfx1100", compile_kernel(bad, "gfx1100", tmp_path / "cache")).row()
    assert row.status is Status.FAIL and "undeclared_thing" in row.message
    assert unknown_target("error: invalid target ID 'gfx1250'", "gfx1200") is None
    assert unknown_target("error: unsupported CUDA gpu architecture: gfx1151", "gfx1151")


def test_missing_symbol_names_the_symbols_that_exist(tmp_path: Path) -> None:
    r = compile_kernel(tiny_spec(tmp_path, symbol="tinny"), "gfx1100", tmp_path / "cache")
    assert not r.ok and "'tinny'" in r.message and "tiny" in r.message


def test_wmma_source_on_a_gfx10_target_says_why(tmp_path: Path) -> None:
    spec = load_manifest().by_name("gemm_mq4g256v2_wmma_gfx11")
    r = compile_kernel(spec, "gfx1030", tmp_path / "cache")
    assert not r.ok and "needs a gfx11 or gfx12 target" in r.message


def test_matrix_keeps_going_past_a_failing_cell(tmp_path: Path) -> None:
    good = tiny_spec(tmp_path)
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = replace(tiny_spec(bad_dir, source=TINY.replace("y[0] =", "y[0] = )")),
                  name="broken")
    wmma = replace(good, name="needs_wmma", kind="gemm", requires="wmma_gfx12")
    arches = load_arches()
    cells = compile_matrix([good, bad, wmma], [arches["gfx1010"], arches["gfx1201"]],
                           jobs=2, cache_dir=tmp_path / "cache", include_unsupported=True)
    rows = {r.identity: r for r in (c.row() for c in cells)}
    assert rows["compile[tiny|gfx1010|toolchain]"].status is Status.PASS
    assert rows["compile[tiny|gfx1201|toolchain]"].status is Status.PASS
    assert rows["compile[broken|gfx1010|toolchain]"].status is Status.FAIL
    assert "error" in rows["compile[broken|gfx1010|toolchain]"].message
    assert rows["compile[needs_wmma|gfx1010|toolchain]"].status is Status.UNSUPPORTED
    # needs_wmma shares tiny's code object: applies on gfx1201, so it compiled there.
    assert rows["compile[needs_wmma|gfx1201|toolchain]"].status is Status.PASS
    assert len(rows) == 6


def test_cells_of_one_object_share_its_validation_and_check_their_own_symbol(
        tmp_path: Path) -> None:
    """Specs with one cache key: the first compiles (or validates the entry), the others
    take its validated object and look up their own symbol in it."""
    good = tiny_spec(tmp_path)
    other = replace(good, name="tiny_again")
    typo = replace(good, name="tiny_typo", symbol="tinny")
    cells = compile_matrix([good, other, typo], [load_arches()["gfx1100"]],
                           cache_dir=tmp_path / "cache")
    got = {c.spec.name: c.result for c in cells}
    first, again, wrong = got["tiny"], got["tiny_again"], got["tiny_typo"]
    assert first is not None and again is not None and wrong is not None
    assert first.ok and not first.cached
    assert again.ok and again.cached and again.key == first.key
    assert again.sha256 == first.sha256 and again.code_object == first.code_object
    assert again.dependencies == first.dependencies and again.command == first.command
    assert not wrong.ok and "'tinny'" in wrong.message and wrong.sha256 == first.sha256
    # the same cells one at a time: the same results, but for the time taken
    alone = compile_kernel(other, "gfx1100", tmp_path / "cache")
    assert (alone.ok, alone.cached, alone.key, alone.sha256, alone.details,
            alone.dependencies) == (again.ok, again.cached, again.key, again.sha256,
                                    again.details, again.dependencies)
    alone_wrong = compile_kernel(typo, "gfx1100", tmp_path / "cache")
    assert alone_wrong.message == wrong.message


def test_a_shared_object_gives_each_cell_its_own_kernels_occupancy_finding(
        tmp_path: Path) -> None:
    """One object, two kernels: the one whose launch bounds ask for more waves per SIMD
    than gfx1100 has slots (clang drops the request and warns) has the finding, shared
    from the first cell's compile or not; the other has none."""
    two = TINY + """
HQ_GLOBAL void __attribute__((amdgpu_flat_work_group_size(1, 32), amdgpu_waves_per_eu(32)))
greedy(const unsigned char* W, const float* x, float* y, int M, int K) {
    if (hq_lane() == 0) y[1] = x[1] * TINY_SCALE + (float)W[1];
}
"""
    plain = tiny_spec(tmp_path, source=two)
    greedy = replace(plain, name="greedy", symbol="greedy")
    cells = compile_matrix([plain, greedy], [load_arches()["gfx1100"]],
                           cache_dir=tmp_path / "cache")
    got = {c.spec.name: c.result for c in cells}
    first, shared = got["tiny"], got["greedy"]
    assert first is not None and shared is not None and first.key == shared.key
    assert first.ok and "occupancy_target_missed" not in first.details
    assert shared.ok and shared.cached
    assert shared.details["occupancy_target_missed"] == {"desired": 32, "final": 16}
    alone = compile_kernel(greedy, "gfx1100", tmp_path / "cache")
    assert alone.details == shared.details


def test_a_shared_object_changed_since_its_validation_is_not_shared(tmp_path: Path) -> None:
    """The bytes a cell's symbol is read from must still be the bytes its group's first
    cell validated; otherwise the cell validates the entry itself (and finds it bad)."""
    from hqval.toolchain import _shared_compile

    good = tiny_spec(tmp_path)
    first = compile_kernel(good, "gfx1100", tmp_path / "cache")
    assert first.ok and first.code_object is not None
    other = replace(good, name="tiny_again")
    compiler = find_compiler()
    shared = _shared_compile(first, other, "gfx1100", compiler)
    assert shared is not None and shared.ok and shared.sha256 == first.sha256
    data = bytearray(first.code_object.read_bytes())
    data[-1] ^= 0xFF
    first.code_object.write_bytes(bytes(data))
    assert _shared_compile(first, other, "gfx1100", compiler) is None
    again = compile_kernel(other, "gfx1100", tmp_path / "cache")
    assert again.ok and not again.cached and again.details["rebuilt"].startswith("sha256")
    # nor is a cell whose command differs (another define is another object)
    defined = replace(good, name="tiny_defined", defines=(("TINY_EXTRA", "1"),))
    assert _shared_compile(again, defined, "gfx1100", compiler) is None


@pytest.mark.slow
def test_every_kernel_and_mutant_compiles_for_the_ci_arches() -> None:
    """Through the session's own code object cache (``$HQVAL_CACHE``, as every command
    uses it): an entry is the validated object of these very inputs (compiler, flags,
    sources and every header read), so a cell another test built already compiled, and
    the objects built here serve the later tests that run these kernels."""
    arches = load_arches()
    specs = [*load_manifest().kernels, *load_mutants().kernels]
    ci = [arches[n] for n in ("gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201")]
    cells = compile_matrix(specs, ci)
    failed = [(c.spec.name, c.arch, c.result.message) for c in cells
              if c.result is None or not c.result.ok]
    assert failed == []
    per_arch = {a.name: sum(1 for c in cells if c.arch == a.name) for a in ci}
    gemv = sum(1 for s in specs if s.requires == "any")
    assert per_arch["gfx1010"] == per_arch["gfx1030"] == gemv
    assert per_arch["gfx1100"] == per_arch["gfx1151"] > gemv
    assert per_arch["gfx1201"] > gemv


def test_a_vanished_source_is_a_failed_cell_not_a_crash(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    (tmp_path / "tiny.hip").unlink()
    r = compile_kernel(spec, "gfx1100", tmp_path / "cache")
    assert not r.ok and "tiny.hip" in r.message and "source path" in r.message
    cells = compile_matrix([spec], [load_arches()["gfx1100"]], cache_dir=tmp_path / "cache")
    assert [c.row().status for c in cells] == [Status.FAIL]


# ---- a key that cannot go stale --------------------------------------------------------

MACRO_TINY = """\
#include "hqval_prelude.h"
#define TINY_HEADER "tiny_macro.h"
#include TINY_HEADER
HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) tiny(const unsigned char* W, const float* x, float* y,
                                         int M, int K) {
    if (hq_lane() == 0) y[0] = x[0] * TINY_SCALE + (float)W[0];
}
"""


def test_a_header_reached_through_a_macro_include_is_in_the_key(tmp_path: Path) -> None:
    """The stale-cache fault: ``#include MACRO`` was invisible to the key, so a warm cache
    served the old object after the header changed."""
    spec = tiny_spec(tmp_path, source=MACRO_TINY)
    header = tmp_path / "tiny_macro.h"
    header.write_text("#define TINY_SCALE 2.0f\n")
    cache = tmp_path / "cache"
    a = compile_kernel(spec, "gfx1100", cache)
    assert a.ok and compile_kernel(spec, "gfx1100", cache).cached  # warm
    header.write_text("#define TINY_SCALE 5.0f\n")  # same size, other bytes
    b = compile_kernel(spec, "gfx1100", cache)
    assert b.ok and not b.cached and b.key != a.key
    assert a.code_object is not None and b.code_object is not None
    assert a.code_object.read_bytes() != b.code_object.read_bytes()
    from hqval.toolchain import dependencies

    assert str(header) in dependencies(spec, "gfx1100", find_compiler())


def test_a_new_header_that_shadows_an_included_one_changes_the_key(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    spec = tiny_spec(src, include_dirs=(PRELUDE, inc))
    (src / "tiny.h").rename(inc / "tiny.h")  # found through -I inc
    cache = tmp_path / "cache"
    a = compile_kernel(spec, "gfx1100", cache)
    assert a.ok
    (src / "tiny.h").write_text("#define TINY_SCALE 7.0f\n")  # "" finds the source dir first
    b = compile_kernel(spec, "gfx1100", cache)
    assert b.ok and not b.cached and b.key != a.key


def test_another_compiler_binary_is_another_key(tmp_path: Path) -> None:
    from hqval.toolchain import cache_key

    spec = tiny_spec(tmp_path)
    c = find_compiler()
    copy = tmp_path / "clang-copy"
    shutil.copy2(os.path.realpath(c.path), copy)
    os.utime(copy, ns=(1, 1))
    other = replace(c, path=str(copy))  # same --version line, another binary
    assert other.version == c.version
    assert cache_key(spec, "gfx1100", c) != cache_key(spec, "gfx1100", other)


def test_a_cached_object_for_another_arch_is_rebuilt(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    cache = tmp_path / "cache"
    mine = compile_kernel(spec, "gfx1100", cache)
    theirs = compile_kernel(spec, "gfx1201", cache)
    assert mine.ok and theirs.ok and theirs.code_object is not None
    co, meta = entry_files(cache, mine.key)
    # a consistent entry (size and sha256 recorded) holding the gfx1201 bytes
    data = theirs.code_object.read_bytes()
    co.write_bytes(data)
    info = json.loads(meta.read_text())
    info.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    meta.write_text(json.dumps(info))
    again = compile_kernel(spec, "gfx1100", cache)
    assert again.ok and not again.cached
    assert "built for gfx1201, not gfx1100" in again.details["rebuilt"]
    from hqval.toolchain import code_object_target

    assert code_object_target(co.read_bytes()) == "gfx1100"


def test_a_source_that_cannot_be_preprocessed_is_a_failed_cell(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, source=TINY.replace('"tiny.h"', '"no_such_header.h"'))
    r = compile_kernel(spec, "gfx1100", tmp_path / "cache")
    assert not r.ok and "no_such_header.h" in r.message


def test_one_cache_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.toolchain import cache_base

    monkeypatch.setenv("HQVAL_CACHE", str(tmp_path / "env"))
    assert cache_base() == tmp_path / "env"
    assert cache_base(tmp_path / "flag") == tmp_path / "flag"
    monkeypatch.delenv("HQVAL_CACHE")
    assert cache_base() == Path.home() / ".cache" / "hqval"


def test_compiler_errors_do_not_quote_files_outside_the_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that includes a file from outside its tree gets a failed cell whose message
    names the location but not the file's text (it goes into rows, reports and JUnit).
    Without the sandbox (which does not show clang the file at all) the dependency list
    refuses it before compiling."""
    monkeypatch.setenv("HQVAL_SANDBOX", "off")
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("root_password hunter2 ;\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    spec = tiny_spec(tree, source=f'#include "{secret}"\n' + TINY)
    r = compile_kernel(spec, "gfx1100", tmp_path / "cache")
    assert not r.ok
    assert "hunter2" not in r.message and "root_password" not in r.message
    # refused before compiling: the dependency list names a file outside the tree
    assert f"dependency {secret} is outside the kernel tree" in r.message
    assert r.details.get("infrastructure") and r.details.get("refused")
    # an error in the tree itself keeps its text and excerpt
    bad = tiny_spec(tree, source=TINY.replace("x[0] *", "undeclared_thing *"))
    r2 = compile_kernel(bad, "gfx1100", tmp_path / "cache")
    assert "undeclared_thing" in r2.message


# ---- manifest schema 2 in the build ------------------------------------------------------

TREE2 = Path(__file__).resolve().parent / "data" / "schema2_tree"


def _tree2_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "tree"
    shutil.copytree(TREE2, dst)
    text = (dst / "kernels.yaml").read_text()
    (dst / "kernels.yaml").write_text(text.replace("../../../kernels/include", str(PRELUDE)))
    return dst / "kernels.yaml"


def test_the_arch_variant_is_compiled_with_the_preinclude_and_flags(tmp_path: Path) -> None:
    from hqval.toolchain import dependencies

    spec = load_manifest(_tree2_copy(tmp_path)).by_name("gemv_tree_r1")
    cache = tmp_path / "cache"
    for arch, want in (("gfx1100", "gemv_tree.gfx1100.hip"), ("gfx1151", "gemv_tree.gfx11.hip"),
                       ("gfx1201", "gemv_tree.gfx12.hip"), ("gfx1030", "gemv_tree.hip")):
        r = compile_kernel(spec, arch, cache)
        assert r.ok, r.message
        assert Path(r.command[-1]).name == want
        assert r.details.get("source", str(spec.source)).endswith(want)
        deps = {Path(p).name for p in dependencies(spec, arch, find_compiler())}
        assert {want, "gemv_tree.hip", "policy.inc"} <= deps
    cmd = list(compile_kernel(spec, "gfx1100", cache).command)
    assert cmd.index("-ffp-contract=fast") > cmd.index("-O3")  # the manifest's flags last
    assert cmd[cmd.index("-include") + 1].endswith("policy.inc")


def test_without_the_preinclude_the_tree_does_not_build(tmp_path: Path) -> None:
    spec = load_manifest(_tree2_copy(tmp_path)).by_name("gemv_tree_r1")
    r = compile_kernel(replace(spec, preinclude=()), "gfx1030", tmp_path / "cache")
    assert not r.ok and "policy.inc was not preincluded" in r.message


def test_a_changed_preinclude_or_variant_changes_the_key(tmp_path: Path) -> None:
    manifest = _tree2_copy(tmp_path)
    spec = load_manifest(manifest).by_name("gemv_tree_r1")
    cache = tmp_path / "cache"
    a, a12 = compile_kernel(spec, "gfx1030", cache), compile_kernel(spec, "gfx1201", cache)
    (manifest.parent / "policy.inc").write_text("#define TREE_POLICY_SCALE 1.0f\n// edit\n")
    b = compile_kernel(spec, "gfx1030", cache)
    assert not b.cached and b.key != a.key
    (manifest.parent / "gemv_tree.gfx12.hip").write_text(
        '#define TREE_VARIANT 120\n#include "gemv_tree.hip"\n')
    b12 = compile_kernel(spec, "gfx1201", cache)
    assert not b12.cached and b12.key != a12.key
    assert compile_kernel(spec, "gfx1030", cache).cached  # the default is not the variant

# ---- HIP compatibility headers and pre-included files --------------------------------

HIP_SOURCE = """\
#include <hip/hip_runtime.h>
__launch_bounds__(64, 4)
extern "C" __global__ void hipk(const unsigned char* W, const float* x, float* y, int M, int K) {
    float v = x[threadIdx.x] * PRE_SCALE;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down(v, o);
    if (threadIdx.x == 0) y[blockIdx.x] = v + __half2float(__ushort_as_half(W[0]));
}
"""


def test_compat_headers_are_used_only_without_rocms_and_feed_the_key(tmp_path: Path) -> None:
    from hqval.toolchain import HIPCOMPAT_DIR, Compiler, include_flags, source_closure

    bare = find_compiler({"PATH": os.environ.get("PATH", ""), "HQVAL_CLANG": str(CLANG)})
    assert not bare.hip_headers and bare.compat_includes == (HIPCOMPAT_DIR,)
    rocm = Compiler("/opt/rocm/llvm/bin/clang", "AMD clang 19", "rocm-clang", "ROCm")
    assert rocm.compat_includes == ()  # ROCm's own headers win
    (tmp_path / "pre.inc").write_text("#define PRE_SCALE 3.0f\n")
    (tmp_path / "hipk.hip").write_text(HIP_SOURCE)
    spec = KernelSpec(name="hipk", source=tmp_path / "hipk.hip", symbol="hipk", qt=6,
                      kind="gemv", block=64, preinclude=(tmp_path / "pre.inc",))
    flags = include_flags(spec, bare)
    assert flags == ["-isystem", str(HIPCOMPAT_DIR), "-include", str(tmp_path / "pre.inc")]
    assert "-isystem" not in include_flags(spec, rocm)
    files = {Path(p).name for p, _ in source_closure(spec, "gfx1100", bare)}
    assert {"hipk.hip", "pre.inc", "hip_runtime.h", "hip_fp16.h"} <= files
    res = compile_kernel(spec, "gfx1100", tmp_path / "cache", bare)
    assert res.ok, res.message
    # the pre-included file is part of what the key covers
    (tmp_path / "pre.inc").write_text("#define PRE_SCALE 4.0f\n")
    again = compile_kernel(spec, "gfx1100", tmp_path / "cache", bare)
    assert again.ok and again.key != res.key and not again.cached
    # without the pre-included file the source does not build (PRE_SCALE is its)
    bad = compile_kernel(replace(spec, preinclude=()), "gfx1100", tmp_path / "cache", bare)
    assert not bad.ok and "PRE_SCALE" in bad.message


def test_a_recorded_dependency_list_is_reused_only_while_it_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process reuses the -M list the cache recorded (no preprocessor run) while the
    listed files have the recorded contents and the searched directories the same
    entries; an edited header or a new shadowing header sends it back to clang -M."""
    import subprocess as sp

    from hqval import toolchain

    spec = tiny_spec(tmp_path, source=MACRO_TINY)
    (tmp_path / "tiny_macro.h").write_text("#define TINY_SCALE 2.0f\n")
    cache = tmp_path / "cache"
    compiler = find_compiler()
    first = toolchain.dependencies(spec, "gfx1100", compiler, cache)
    assert list((toolchain.cache_root(cache) / "deps").rglob("*.json"))
    runs: list[list[str]] = []
    real_run = sp.run

    def counting(cmd: list[str], *a: object, **kw: object) -> object:
        if "-dependency-file" in cmd:
            runs.append(cmd)
        return real_run(cmd, *a, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(toolchain.subprocess, "run", counting)
    toolchain._deps_memo.clear()  # a new process
    assert toolchain.dependencies(spec, "gfx1100", compiler, cache) == first and runs == []
    (tmp_path / "tiny_macro.h").write_text("#define TINY_SCALE 3.0f\n")
    toolchain._deps_memo.clear()
    toolchain.dependencies(spec, "gfx1100", compiler, cache)
    assert len(runs) == 1
    (tmp_path / "new_header.h").write_text("// a new entry in a searched directory\n")
    toolchain._deps_memo.clear()
    toolchain.dependencies(spec, "gfx1100", compiler, cache)
    assert len(runs) == 2


@pytest.mark.parametrize("name", ["clang-19", "clang-20", "clang-21", "clang-22"])
def test_every_installed_clang_lists_the_headers_a_device_compile_reads(
        tmp_path: Path, name: str) -> None:
    """The dependency run is the device compile's own (system headers too): from LLVM 20
    the driver drops ``-MF -`` for a --cuda-device-only HIP build and printed no rule, so
    under Debian's clang-22 every kernel failed 'unreadable dependency output'."""
    from hqval import toolchain

    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed")
    spec = tiny_spec(tmp_path, source=MACRO_TINY)
    (tmp_path / "tiny_macro.h").write_text("#define TINY_SCALE 2.0f\n")
    compiler = toolchain.find_compiler({"HQVAL_CLANG": name, "PATH": os.environ["PATH"]})
    deps = toolchain.dependencies(spec, "gfx1201", compiler, tmp_path / "cache")
    assert deps[0] == str(tmp_path / "tiny.hip")
    assert str(tmp_path / "tiny_macro.h") in deps
    assert any(d.endswith("hqval_prelude.h") for d in deps)


# ---- a ROCm install: its HIP headers call into its device libraries -------------------

# Debian 12's ROCm 5.2 (libamdhip64-dev, rocm-device-libs): bitcode for gfx10.3, not gfx11+
DEBIAN_BITCODE = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
ROCM_SOURCE = """\
#include <hip/hip_runtime.h>
extern "C" __global__ void __launch_bounds__(64) rocm_k(float* y, const float* x) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    y[i] = expf(x[i]);
}
"""


def rocm_layout(tmp_path: Path) -> Path:
    """A ROCm root laid out as /opt/rocm is (llvm/bin/clang, include/hip, amdgcn/bitcode)
    over Debian's ROCm 5.2 packages and clang-19."""
    assert CLANG is not None
    root = tmp_path / "rocm"
    (root / "llvm" / "bin").mkdir(parents=True)
    (root / "llvm" / "bin" / "clang").symlink_to(CLANG)
    (root / "include").mkdir()
    (root / "include" / "hip").symlink_to("/usr/include/hip")
    (root / "amdgcn").mkdir()
    (root / "amdgcn" / "bitcode").symlink_to(DEBIAN_BITCODE)
    return root


@pytest.mark.skipif(not (DEBIAN_BITCODE / "ockl.bc").is_file()
                    or not Path("/usr/include/hip/hip_runtime.h").is_file(),
                    reason="needs ROCm's HIP headers and device libraries "
                           "(apt-get install libamdhip64-dev rocm-device-libs)")
def test_a_rocm_build_links_its_device_libraries_and_keys_on_them(tmp_path: Path) -> None:
    from hqval.toolchain import compile_command, device_libraries, source_closure

    root = rocm_layout(tmp_path)
    compiler = find_compiler({"ROCM_PATH": str(root), "PATH": os.environ["PATH"]})
    assert compiler.kind == "rocm-clang" and compiler.rocm_root == str(root)
    (tmp_path / "k.hip").write_text(ROCM_SOURCE)
    spec = KernelSpec(name="rocm_k", source=tmp_path / "k.hip", symbol="rocm_k", qt=6,
                      kind="gemv")
    built = compile_kernel(spec, "gfx1030", tmp_path / "c1", compiler)
    assert built.ok, built.message
    # the same command with -nogpulib (what hqval passed before): ROCm's threadIdx and
    # expf are undefined symbols at link time
    cmd = [*compile_command(spec, "gfx1030", compiler), "-nogpulib", "-o", str(tmp_path / "x")]
    unlinked = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert unlinked.returncode != 0 and "__ockl_get_local_id" in unlinked.stderr
    libs = device_libraries(compiler, "gfx1030")
    assert any(p.endswith("ockl.bc") for p in libs) and any(p.endswith("ocml.bc") for p in libs)
    closure = dict(source_closure(spec, "gfx1030", compiler, tmp_path / "c1"))
    assert all(p in closure for p in libs)  # in the key and the provenance
    # gfx1100 has no bitcode in ROCm 5.2: one clear compiler message, no object
    gfx11 = compile_kernel(spec, "gfx1100", tmp_path / "c1", compiler)
    assert not gfx11.ok and "device library" in gfx11.message
    # the bare-LLVM build links none
    assert device_libraries(find_compiler({"PATH": os.environ["PATH"]}), "gfx1030") == ()


DEBIAN_HIPCC = Path("/usr/bin/hipcc.pl")


@pytest.mark.skipif(not DEBIAN_HIPCC.is_file() or not (DEBIAN_BITCODE / "ockl.bc").is_file(),
                    reason="needs Debian's hipcc and rocm-device-libs (apt-get install hipcc "
                           "rocm-device-libs); not installed in CI, where it would be found "
                           "before clang-19")
def test_hipcc_builds_a_device_code_object_for_amd(tmp_path: Path) -> None:
    """hipcc adds host link flags unless the build is --genco (with --cuda-device-only:
    "cannot specify -o when generating multiple output files"), and builds for NVIDIA
    when nvcc is on PATH unless HIP_PLATFORM=amd."""
    compiler = find_compiler({"HQVAL_CLANG": str(DEBIAN_HIPCC), "PATH": os.environ["PATH"]})
    assert compiler.kind == "hipcc" and "--genco" in compiler.flags("gfx1030")
    assert compiler.environment["HIP_PLATFORM"] == "amd"
    (tmp_path / "k.hip").write_text(ROCM_SOURCE)
    spec = KernelSpec(name="rocm_k", source=tmp_path / "k.hip", symbol="rocm_k", qt=6,
                      kind="gemv")
    built = compile_kernel(spec, "gfx1030", tmp_path / "c", compiler)
    assert built.ok, built.message
    assert built.code_object is not None
    data = built.code_object.read_bytes()
    assert int.from_bytes(data[18:20], "little") == EM_AMDGPU
    from hqval.toolchain import compile_command
    cmd = [c if c != "--genco" else "--cuda-device-only"
           for c in compile_command(spec, "gfx1030", compiler)]
    proc = subprocess.run([*cmd, "-o", str(tmp_path / "x.co")], capture_output=True, text=True,
                          env=compiler.environment, timeout=300, check=False)
    assert proc.returncode != 0 and "multiple output files" in proc.stderr


# ---- the contained compiler ----------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-DALIGN(x)=__attribute__((aligned(x)))", "-DN=4", "-UX",
                                  "-O2", "-Wno-unused", "-Werror=shadow", "-std=c++20",
                                  "-ffast-math", "-ffp-contract=fast", "-mcumode", "-g0"])
def test_the_flag_allow_list_takes_what_a_kernel_needs(flag: str) -> None:
    from hqval.containment import flag_problem

    assert flag_problem(flag) is None


@pytest.mark.parametrize("flag", ["-ftime-trace", "-fsave-optimization-record", "-save-temps",
                                  "-Wl,-o,/tmp/x", "-Wp,-MD,/tmp/x", "-Xclang", "-mllvm",
                                  "-fplugin=x.so", "-fdiagnostics-format=clang",
                                  "-fcaret-diagnostics", "-o", "-MD", "-isystem/x",
                                  "-fmodules-cache-path=/tmp", "-fcrash-diagnostics-dir=/tmp",
                                  "-Wno-sarif-format-unstable", "-B/tmp", "--save-temps"])
def test_the_flag_allow_list_refuses_everything_else(flag: str) -> None:
    from hqval.containment import flag_problem

    assert flag_problem(flag) is not None


def test_a_dependency_that_is_a_device_is_refused_in_one_line(tmp_path: Path) -> None:
    """``#include "/dev/zero"``: clang lists it, hqval refuses it before hashing or
    compiling (once: a MemoryError traceback)."""
    spec = tiny_spec(tmp_path, source='#include "/dev/zero"\n' + TINY)
    r = compile_kernel(spec, "gfx1100", tmp_path / "cache")
    assert not r.ok and r.details.get("infrastructure")
    assert "/dev/zero is a character device, not a regular file" in r.message
    assert "\n" not in r.message


def test_an_embed_of_an_outside_file_never_reaches_the_message(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """``#embed`` of a file outside the tree plus a template error that would print its
    bytes: refused from the dependency list (sandbox off), or not found (sandbox on)."""
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("hunter2")
    tree = tmp_path / "tree"
    tree.mkdir()
    src = ("constexpr char data[] = {\n#embed \"" + str(secret) + "\"\n};\n"
           "template <int N> struct T { static_assert(N == 0, \"x\"); };\n"
           "extern \"C\" __attribute__((global)) void tiny(float* y) { T<data[0]> t; }\n")
    for sandbox in ("off", ""):
        monkeypatch.setenv("HQVAL_SANDBOX", sandbox)
        r = compile_kernel(tiny_spec(tree, source=src), "gfx1100", tmp_path / f"c{sandbox}")
        assert not r.ok
        assert "hunter2" not in r.message and "104" not in r.message  # 'h' is 104


def test_a_fifo_in_the_tree_never_hangs_the_compile(tmp_path: Path) -> None:
    import os

    from tests.guards import no_hang

    os.mkfifo(tmp_path / "hang.h")
    spec = tiny_spec(tmp_path, source='#include "hang.h"\n' + TINY)
    with no_hang():  # a FIFO opened for reading blocks until a writer comes: never
        r = compile_kernel(spec, "gfx1100", tmp_path / "cache")
    assert not r.ok and "FIFO or device" in r.message and "hang.h" in r.message


def test_clang_runs_in_a_private_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """Nothing the compiler writes lands in hqval's working directory."""
    monkeypatch.chdir(tmp_path)
    tree = tmp_path / "tree"
    tree.mkdir()
    r = compile_kernel(tiny_spec(tree), "gfx1100", tmp_path / "cache")
    assert r.ok, r.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "tree"]
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if ".hqval-cc-" in str(p)]
    assert leftovers == []
