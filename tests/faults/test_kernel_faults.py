"""Fault class: a kernel that misbehaves at run time on the emulator.  Each fails its own
row (exit 1), naming what it did and, where there is one, the instruction and address:
traps and halts, an executed word that is no instruction of the arch, reads and writes
outside every allocation (just past a buffer, far away, through a null pointer), writes
into another buffer or an input, a launch that never ends (an endless loop: the
emulator's step bound), a jump to no instruction, half an output, NaN in one row.  Never
a pass, never untested, never an error blamed on hqval's machinery.  The kernels are real
(clang, inline asm where C++ cannot say it), each the suite's qt=6 GEMV body followed by
the one misbehaviour."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hqval.manifest import KERNELS_DIR
from tests.faults.conftest import ARCH
from tests.guards import no_hang

PRELUDE = '''#include "hq4_gemv.h"
#define BODY gemv_rows<HdrHfq4v1, 1, false>(W, x, y, M, K, hq_block_x())
#define K_(NAME, AFTER) \\
HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(const unsigned char* __restrict__ W, \\
        const float* __restrict__ x, float* __restrict__ y, int M, int K) { \\
    BODY; \\
    const bool b0 = hq_block_x() == 0 && hq_lane() == 0; (void)b0; \\
    AFTER; \\
}
#define NULLP(T) reinterpret_cast<volatile T*>(static_cast<unsigned long>(M) >> 40)
'''
# name -> (the kernel's source after its prelude, what its row must say)
KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rt_trap_last_block_r1": (
        'K_(rt_trap_last_block_r1, if (hq_block_x() == static_cast<unsigned int>(M - 1)) '
        'asm volatile("s_trap 2"))', ("trap: ", "'s_trap 2' at 0x")),
    "rt_trap_code_3_r1": ('K_(rt_trap_code_3_r1, if (b0) asm volatile("s_trap 0x3"))',
                          ("trap: ", "'s_trap 3' at 0x")),
    "rt_sethalt_r1": ('K_(rt_sethalt_r1, if (hq_block_x() == 1) asm volatile("s_sethalt 1"))',
                      ("trap: ", "'s_sethalt 1' at 0x")),
    "rt_illegal_word_r1": (
        'K_(rt_illegal_word_r1, if (b0) asm volatile(".long 0xffffffff\\n.long 0xffffffff"))',
        ("illegal instruction: ", "'.long 0xffffffff' at 0x", "no instruction of gfx1010")),
    "rt_read_past_x_r1": (
        'K_(rt_read_past_x_r1, if (b0) y[0] += 0.0f * '
        'reinterpret_cast<const volatile float*>(x)[K])',
        ("memory fault", "0 B past the end of x", "flat_load_dword")),
    "rt_read_far_r1": (
        'K_(rt_read_far_r1, if (b0) y[0] += 0.0f * '
        'reinterpret_cast<const volatile float*>(x)[1 << 26])',
        ("memory fault", "flat_load_dword", "at 0x")),
    "rt_write_past_y_r1": (
        'K_(rt_write_past_y_r1, if (b0) reinterpret_cast<volatile float*>(y)[M] = 0.5f)',
        ("memory fault", "0 B past the end of y", "flat_store_dword")),
    "rt_write_far_r1": (
        'K_(rt_write_far_r1, if (b0) reinterpret_cast<volatile float*>(y)[1 << 26] = 0.5f)',
        ("memory fault", "flat_store_dword", "at 0x")),
    "rt_null_write_r1": ('K_(rt_null_write_r1, if (b0) *NULLP(float) = 1.0f)',
                         ("memory fault at 0x0", "flat_store_dword")),
    "rt_null_read_r1": ('K_(rt_null_read_r1, if (b0) y[0] += 0.0f * *NULLP(float))',
                        ("memory fault at 0x0", "flat_load_dword")),
    "rt_write_w_r1": ('K_(rt_write_w_r1, if (b0) const_cast<unsigned char*>(W)[3] ^= 1)',
                      ("write into const input W (byte 3 of",)),
    "rt_write_x_through_y_r1": (
        'K_(rt_write_x_through_y_r1, if (b0) { volatile float* p = y; p[x - y + 1] = 2.0f; })',
        ("write into const input x (byte 4 of",)),
    "rt_endless_loop_r1": (
        'K_(rt_endless_loop_r1, if (b0) { for (;;) asm volatile("s_nop 0"); })',
        ("could not reach a verdict: ", "steps without finishing (at 0x", "'s_nop 0'")),
    "rt_branch_to_itself_r1": ('K_(rt_branch_to_itself_r1, if (b0) asm volatile("1: s_branch 1b"))',
                               ("could not reach a verdict: ", "'s_branch 65535'")),
    "rt_jump_to_null_r1": (
        'K_(rt_jump_to_null_r1, if (b0) asm volatile("s_mov_b64 s[0:1], 0\\n'
        's_setpc_b64 s[0:1]" ::: "s0", "s1"))',
        ("bad jump: ", "s_setpc_b64 at 0x", "jumps to 0x0")),
    "rt_nan_in_one_row_r1": (
        'K_(rt_nan_in_one_row_r1, if (hq_block_x() == 3 && hq_lane() == 0) '
        'y[3] = __builtin_nanf(""))', ("non-finite y value(s), first at [3]: nan",)),
    "rt_half_output_r1": (
        'HQ_GLOBAL void HQ_GEMV_BOUNDS rt_half_output_r1(const unsigned char* __restrict__ W,'
        ' const float* __restrict__ x, float* __restrict__ y, int M, int K) {'
        ' if (hq_block_x() < static_cast<unsigned int>(M / 2)) BODY; }',
        ("unwritten (NaN pattern)",)),
    "rt_early_endpgm_r1": (
        'HQ_GLOBAL void HQ_GEMV_BOUNDS rt_early_endpgm_r1(const unsigned char* __restrict__ W,'
        ' const float* __restrict__ x, float* __restrict__ y, int M, int K) {'
        ' if (hq_block_x() == 2) asm volatile("s_endpgm"); BODY; }',
        ("first at [2]: unwritten (NaN pattern)",)),
}


def _tree(dest: Path) -> Path:
    dest.mkdir()
    (dest / "rt.hip").write_text(PRELUDE + "\n".join(src for src, _ in KERNELS.values()) + "\n")
    manifest = dest / "kernels.yaml"
    manifest.write_text(yaml.safe_dump({
        "schema": 1, "allow_outside_tree": True, "include_dirs": [str(KERNELS_DIR / "include")],
        "kernels": [{"name": n, "source": "rt.hip", "qt": 6, "kind": "gemv", "requires": "any"}
                    for n in KERNELS]}, sort_keys=False))
    return manifest


@pytest.fixture(scope="module")
def faulty_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    """``hqval check`` of every misbehaving kernel, reference_parity, on the emulator (the
    step bound lowered so an endless loop ends in seconds, not minutes)."""
    from hqval.cli import main
    from hqval.emu import machine

    base = tmp_path_factory.mktemp("kernel-faults")
    manifest = _tree(base / "tree")
    out = base / "rows.json"
    with pytest.MonkeyPatch.context() as mp, no_hang():
        mp.setattr(machine, "MAX_STEPS", 200_000)
        code = main(["check", "--arch", ARCH, "--backend", "emu", "--workers", "0",
                     "--manifest", str(manifest), "--check", "reference_parity",
                     "--json", str(out), "--cache-dir", str(base / "cache")])
    return code, {r["kernel"]: r for r in json.loads(out.read_text())}


def test_the_check_exits_1(faulty_rows: tuple[int, dict[str, Any]]) -> None:
    code, rows = faulty_rows
    assert code == 1
    assert set(rows) == set(KERNELS)


# A launch that never finishes is no verdict: the interpreter runs waves by lowest program
# counter, so a correct kernel waiting on another workgroup stops the same way.
NO_VERDICT = ("rt_endless_loop_r1", "rt_branch_to_itself_r1")


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k not in NO_VERDICT])
def test_a_misbehaving_kernel_fails_its_row_naming_what_it_did(
        faulty_rows: tuple[int, dict[str, Any]], kernel: str) -> None:
    row = faulty_rows[1][kernel]
    assert row["status"] == "fail", row
    assert not row["details"].get("infrastructure")
    for words in KERNELS[kernel][1]:
        assert words in row["message"], row["message"]


@pytest.mark.parametrize("kernel", NO_VERDICT)
def test_a_launch_that_never_finishes_is_no_verdict_naming_where(
        faulty_rows: tuple[int, dict[str, Any]], kernel: str) -> None:
    """An endless loop reaches the step bound: the row is an error naming the instruction
    and address (fail closed, exit 2), never a pass and never the kernel's failure."""
    row = faulty_rows[1][kernel]
    assert row["status"] == "error", row
    assert not row["details"].get("infrastructure")
    for words in KERNELS[kernel][1]:
        assert words in row["message"], row["message"]


def test_a_kernel_that_never_ends_fails_its_cell_in_a_run(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hqval run`` of the small tree whose qt=44 header load spins for ever on every
    real header (a loop the compiler cannot drop: an asm statement in it): the qt=44
    decode cell is rejected, each of its kernel's check rows an error "could not reach a
    verdict" naming the loop's address; qt=45 (same body, other header) stays emulated
    (the step bound lowered: 10 M steps a launch take minutes each)."""
    import re

    from hqval.cli import main
    from hqval.emu import machine
    from tests.faults.conftest import admission, header_load_broken, rows, run_args

    manifest = header_load_broken(tree, tmp_path / "tree",
                                  'for (;;) asm volatile("s_nop 0");')
    out = tmp_path / "run"
    monkeypatch.setattr(machine, "MAX_STEPS", 200_000)
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "off")
    with no_hang(600):
        code = main(run_args(manifest, out, "--no-mutants", "--cache-dir",
                             str(tmp_path / "cache")))
    assert code == 1
    assert admission(out)[(44, "decode")] == "rejected"
    assert admission(out)[(45, "decode")] == "emulated"
    spun = [r for r in rows(out) if r["kind"] == "check"
            and r["kernel"] == "gemv_mq4g256v2_r1" and r["status"] != "unsupported"]
    # no verdict (the interpreter cannot tell an endless loop from a wait on another
    # workgroup), and the cell fails closed: an error row is a kernel-level failure
    assert spun and all(r["status"] == "error" for r in spun)
    for r in spun:
        assert re.search(r"could not reach a verdict: .* steps without finishing \(at 0x[0-9a-f]+ "
                         r"'s_nop 0'\)", str(r["message"])), r
