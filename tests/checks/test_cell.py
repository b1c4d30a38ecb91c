"""Cells: the check registry, identities, and ``run_cell`` turning every outcome into a
row (a memory fault or guard is the kernel's failure; anything else unresolved is an error)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from hqval.checks import cell
from hqval.checks.cell import CHECKS, Cell, CheckContext, check_function, run_cell, unknown_checks
from hqval.checks.launch import gemv
from hqval.manifest import KernelSpec
from hqval.result import Row, Status

Ctx = Callable[..., CheckContext]


def test_registry_and_identity() -> None:
    assert list(CHECKS) == ["bit_identity", "reference_parity", "padded_offset",
                            "prefill_parity", "fallback"]
    for name in CHECKS:
        assert callable(check_function(name))
    with pytest.raises(ValueError, match="choose one of bit_identity"):
        check_function("nope")
    c = Cell("bit_identity", "gemv_mq4g256v2_r1", "gfx1100", "emu")
    assert c.identity == "bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]"
    assert unknown_checks(["bit_identity"]) == ""
    assert "unknown check(s) nope; choose from bit_identity" in unknown_checks(["nope"])


def _register(monkeypatch: pytest.MonkeyPatch, fn: Callable[[CheckContext, KernelSpec], Row]
              ) -> None:
    monkeypatch.setattr(cell, "check_function", lambda name: fn)


def test_out_of_bounds_read_is_a_failure(emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = emu_ctx("gfx1100")
    spec = ctx.kernel("gemv_hfq4g256_r1")

    def short_weights(c: CheckContext, s: KernelSpec) -> Row:
        # The kernel is told K=1024 but W holds one 256-group per row: it reads past W.
        blob = np.zeros((4, 136), np.uint8)
        gemv(c.backend, c.program(s), s, blob, np.zeros(1024, np.float32), None)
        return c.row("probe", s, Status.PASS)

    _register(monkeypatch, short_weights)
    row = run_cell(ctx, "probe", spec)
    assert row.status == Status.FAIL, row.message
    assert row.message.startswith(("memory fault", "guard"))


def test_other_exceptions_are_errors_never_passes(emu_ctx: Ctx,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = emu_ctx("gfx1100")

    def broken(c: CheckContext, s: KernelSpec) -> Row:
        raise KeyError("no such fixture")

    _register(monkeypatch, broken)
    row = run_cell(ctx, "probe", ctx.kernel("gemv_hfq4g256_r1"))
    assert row.status == Status.ERROR and "could not reach a verdict" in row.message
    assert "infrastructure" not in row.details  # a kernel's cell error, not hqval's


def test_a_missed_deadline_is_an_infrastructure_error_naming_the_cell(
        emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.deadline import Deadline

    ctx = emu_ctx("gfx1100")

    def stalls(c: CheckContext, s: KernelSpec) -> Row:
        raise Deadline(f"probe[{s.name}|gfx1100|hip]", 120).error("synchronising the device")

    _register(monkeypatch, stalls)
    row = run_cell(ctx, "probe", ctx.kernel("gemv_hfq4g256_r1"))
    assert row.status == Status.ERROR and row.details["infrastructure"] is True
    assert "probe[gemv_hfq4g256_r1|gfx1100|hip]" in row.message and "deadline" in row.message


def test_uncompilable_kernel_is_an_error(emu_ctx: Ctx) -> None:
    ctx = emu_ctx("gfx1100")
    bad = dataclasses.replace(ctx.kernel("gemv_mq4g256v2_r1"), name="broken_define",
                              defines=(("HQ_GEMV_UNROLL", "this is not C"),))
    row = run_cell(ctx, "reference_parity", bad)
    assert row.status == Status.ERROR and "does not compile" in row.message


def test_an_instruction_the_emulator_lacks_is_untested_naming_it(
        emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    """No verdict either way: skipped with the instruction in the row (admission makes the
    kernel untested on that arch), never an error that would reject it."""
    from hqval.emu.errors import UnsupportedInstruction

    ctx = emu_ctx("gfx1201")

    def gap(c: CheckContext, s: KernelSpec) -> Row:
        raise UnsupportedInstruction("v_msad_u8", 0x1a0, s.name, "gfx1201", "no semantics")

    _register(monkeypatch, gap)
    row = run_cell(ctx, "probe", ctx.kernel("gemv_hfq4g256_r1"))
    assert row.status is Status.SKIPPED
    assert row.details["emulator_gap"] == "v_msad_u8"
    assert "the emulator lacks v_msad_u8" in row.message


# ---- manifest schema 2: trailing arguments and K-specialised shapes --------------------

def _tree2() -> CheckContext:
    from pathlib import Path

    from hqval.backends.emu import EmuBackend
    from hqval.manifest import load_manifest
    from hqval.matrix import resolve_arch

    m = load_manifest(Path(__file__).resolve().parents[1] / "data" / "schema2_tree" /
                      "kernels.yaml")
    return CheckContext(backend=EmuBackend("gfx1100"), arch=resolve_arch("gfx1100"), manifest=m)


def test_extra_args_reach_the_kernel_as_the_manifest_gives_them() -> None:
    """gemv_tree_r1 computes y only when its trailing (bias, alpha, tag) arrive as
    (null, 1.0f, 7); the same kernel given alpha 2.0 leaves y unwritten."""
    ctx = _tree2()
    good = run_cell(ctx, "reference_parity", ctx.kernel("gemv_tree_r1"))
    assert good.status == Status.PASS, good.message
    wrong = run_cell(ctx, "reference_parity", ctx.kernel("gemv_tree_wrong_args_r1"))
    assert wrong.status == Status.FAIL and "unwritten" in wrong.message


def test_check_shapes_follow_k_multiple_and_shapes() -> None:
    ctx = _tree2()
    base = ctx.shape
    km = ctx.shape_for(ctx.kernel("gemv_tree_r1"))  # k_multiple: 512
    assert km.gemv_k % 512 == 0 and km.gemv_k >= base.gemv_k and km.gemv_m == base.gemv_m
    shaped = ctx.shape_for(ctx.kernel("gemv_tree_waived_r1"))  # the smallest on the emulator
    assert (shaped.gemv_m, shaped.gemv_k) == (9, 768)
    row = run_cell(ctx, "reference_parity", ctx.kernel("gemv_tree_waived_r1"))
    assert row.status == Status.PASS, row.message
