"""Faults of class 'a trap is the failure of the kernel that trapped': a kernel that
executes ``s_trap`` fails its own rows (``test_exit_codes.py``); here the trapping kernel
is a mutant (killed only by the checks that ran it and saw the trap, never making the
real kernel's rows fail) or the v1 baseline a bit_identity compares against (the v2
kernel's row says the baseline failed, reaching no verdict about v2; the run never exits
0).  The traps are real: ``__builtin_trap()`` behind a test the compiler cannot fold
(clang emits ``s_trap 2``), run on the emulator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import ARCH, built_once, hqval_process, rows, run_args

REAL = "gemv_mq4g256v2_r1"
BASE = "gemv_hfq4g256_r1"
TRAP = ("        const Hq4Raw r{hq_load_u32(gp), hq_load_u32(gp + 4)};\n"
        "        if (r.a != 0x7fc00001u) __builtin_trap();  // every real header traps\n"
        "        return r;")
MUTANTS = '''#include "hq4_gemv.h"
// the header load traps on every launch
struct MutTrap : HdrMq4v2 {
    static HQ_DEVICE Hq4Raw load(const unsigned char* __restrict__ gp, unsigned int) {
@TRAP@
    }
};
HQ_GEMV(gemv_mut_trap_r1, MutTrap, 1, false)
// scale and zero swapped inside the packed fp16 pair (no trap)
struct MutScaleZeroSwapped : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        HdrMq4v2::decode(h, boff, zp, sc);
    }
};
HQ_GEMV(gemv_mut_swapped_r1, MutScaleZeroSwapped, 1, false)
'''.replace("@TRAP@", TRAP)


def _mutant(name: str, what: str) -> dict[str, Any]:
    return {"name": name, "source": "tree_mutants.hip", "qt": 44, "kind": "gemv",
            "rows_per_block": 1, "requires": "any", "baseline": BASE, "mutant_of": REAL,
            "mutation": what, "expected_killer": "reference_parity"}


def _tree(manifest: Path, dest: Path, baseline_traps: bool) -> Path:
    """The small tree with its own two mutants of the qt=44 GEMV (one trapping, one with
    scale and zero swapped); with ``baseline_traps`` the v1 header load (qt=6, the
    baseline of every bit_identity) traps too."""
    shutil.copytree(manifest.parent, dest)
    (dest / "tree_mutants.hip").write_text(MUTANTS)
    (dest / "mutants.yaml").write_text(yaml.safe_dump({
        "schema": 1, "include_dirs": ["include"], "manifest": "kernels.yaml",
        "kernels": [_mutant("gemv_mut_trap_r1", "the header load traps"),
                    _mutant("gemv_mut_swapped_r1", "scale and zero swapped")]},
        sort_keys=False))
    data = yaml.safe_load((dest / "kernels.yaml").read_text())
    data["mutants"] = "mutants.yaml"
    (dest / "kernels.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    if baseline_traps:
        header = dest / "include" / "hq4_header.h"
        text = header.read_text()
        v1 = text.index("struct HdrHfq4v1")
        old = "        return Hq4Raw{hq_load_u32(gp), hq_load_u32(gp + 4)};\n"
        at = text.index(old, v1)
        assert at < text.index("struct HdrMq4v2")
        header.write_text(text[:at] + TRAP + "\n" + text[at + len(old):])
    return dest / "kernels.yaml"


CASES = (("mutant", False), ("baseline", True))


@pytest.fixture(scope="module")
def runs(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, Path]]:
    """Two runs of the small tree with its own mutants: the baseline sound, or trapping
    (made once for the test run's xdist workers; the tests only read them)."""
    def make(base: Path) -> None:
        codes = {}
        for name, traps in CASES:
            manifest = _tree(tree, base / f"tree-{name}", traps)
            codes[name] = hqval_process(run_args(manifest, base / f"run-{name}")).code
        (base / "codes.json").write_text(json.dumps(codes))

    base = built_once(tmp_path_factory, "traps", make)
    codes = json.loads((base / "codes.json").read_text())
    return {name: (int(codes[name]), base / f"run-{name}") for name, _ in CASES}


def _row(run: Path, ident: str) -> dict[str, Any]:
    return next(r for r in rows(run) if r["identity"] == ident)


def test_a_trapping_mutant_is_killed_by_the_checks_that_saw_its_trap(
        runs: dict[str, tuple[int, Path]]) -> None:
    """The trapping mutant is killed by the checks whose launch of it trapped (each cell a
    failure naming the mutant's own ``s_trap``), by no audit rule; the real kernel's rows
    all pass and the run exits 0 (a control: so it did before)."""
    code, run = runs["mutant"]
    assert code == 0
    verdict = _row(run, f"mutant[gemv_mut_trap_r1|{ARCH}|emu]")
    assert verdict["status"] == "pass"
    killers = verdict["details"]["killed_by"]
    assert killers and set(killers) <= {"bit_identity", "reference_parity"}
    for check in killers:
        cell = _row(run, f"{check}[gemv_mut_trap_r1|{ARCH}|emu]")
        assert cell["status"] == "fail"
        assert "kernel 'gemv_mut_trap_r1' executed 's_trap" in cell["message"]
    real = [r for r in rows(run) if r["kernel"] == REAL and r["kind"] in ("check", "audit")]
    assert real and all(r["status"] in ("pass", "unsupported") for r in real)
    assert not _row(run, f"mutant[gemv_mut_trap_r1|{ARCH}|emu]")["details"][
        "fails_real_kernel_too"]


def test_a_trapping_baseline_is_the_baseline_s_failure(
        runs: dict[str, tuple[int, Path]], tmp_path: Path) -> None:
    """The v1 baseline traps: the v2 kernel's bit_identity row is an error saying the
    baseline failed (no verdict about v2; once: a failure of v2 naming the baseline's
    trap only in its message), v2's own parity still passes, and the run is not exit 0
    (the baseline's own reference_parity fails: exit 1)."""
    code, run = runs["baseline"]
    assert code == 1
    row = _row(run, f"bit_identity[{REAL}|{ARCH}|emu]")
    assert row["status"] == "error", row
    assert row["message"].startswith(f"no verdict: the baseline {BASE} failed on its own "
                                     "launch (trap: ")
    assert row["details"]["baseline_fails"]["status"] == "fail"
    assert _row(run, f"reference_parity[{REAL}|{ARCH}|emu]")["status"] == "pass"
    assert _row(run, f"reference_parity[{BASE}|{ARCH}|emu]")["status"] == "fail"
    adm = hqval_process(["admit", str(run), "--json", str(tmp_path / "adm.json")])
    assert adm.code == 1
    cell = next(c for c in json.loads((tmp_path / "adm.json").read_text())["cells"]
                if (c["qt"], c["path"]) == (44, "decode"))
    assert f"bit_identity[{REAL}|{ARCH}|emu] reached no verdict: its baseline {BASE} failed " \
           "on its own launch" in cell["reasons"]
    assert cell["kernels"][0]["why"] == f"failing: bit_identity (its baseline {BASE} failed)"


def test_a_mutant_is_never_killed_by_its_baseline_s_trap(
        runs: dict[str, tuple[int, Path]]) -> None:
    """With the baseline trapping, the swapped mutant's bit_identity reached no verdict:
    it is killed by reference_parity alone (once: bit_identity counted a kill made by
    the baseline's trap)."""
    _, run = runs["baseline"]
    verdict = _row(run, f"mutant[gemv_mut_swapped_r1|{ARCH}|emu]")
    assert verdict["details"]["cells"]["bit_identity"] == "error"
    assert "bit_identity" not in verdict["details"]["killed_by"]
    assert verdict["details"]["killed_by"] == ["reference_parity"]
