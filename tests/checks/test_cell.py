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
    """A device runtime's error (a RuntimeError: the illegal address a GPU kernel's stray
    store gives) is the kernel's cell error; a bug of hqval's own code (a KeyError looking
    up a fixture: ``errors.PROGRAM_ERRORS``) is an error of hqval's, never the kernel's."""
    ctx = emu_ctx("gfx1100")

    def runtime(c: CheckContext, s: KernelSpec) -> Row:
        raise RuntimeError("hipErrorIllegalAddress: an illegal memory access")

    _register(monkeypatch, runtime)
    row = run_cell(ctx, "probe", ctx.kernel("gemv_hfq4g256_r1"))
    assert row.status == Status.ERROR and "could not reach a verdict" in row.message
    assert "infrastructure" not in row.details  # a kernel's cell error, not hqval's

    def broken(c: CheckContext, s: KernelSpec) -> Row:
        raise KeyError("no such fixture")

    _register(monkeypatch, broken)
    row = run_cell(ctx, "probe", ctx.kernel("gemv_hfq4g256_r1"))
    assert row.status == Status.ERROR and "hqval's own code failed" in row.message
    assert row.details["infrastructure"] is True


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


# ---- identical code runs once --------------------------------------------------------


def _fresh(arch: str, mutants: bool = False) -> CheckContext:
    from hqval.backends.emu import EmuBackend
    from hqval.matrix import load_arches

    from .conftest import mutant_manifest, real_manifest

    return CheckContext(backend=EmuBackend(arch), arch=load_arches()[arch],
                        manifest=mutant_manifest() if mutants else real_manifest())


def _as_run_alone(row: Row) -> dict[str, object]:
    """The row without what says its launches ran on another arch."""
    d = dataclasses.asdict(row)
    details = dict(d["details"])
    same = details.pop("same_code_as", None)
    details.pop("launches_run_on", None)
    message = str(d["message"])
    if same:
        message = message.removeprefix(f"same code as {same}").removeprefix("; ")
    return {**d, "details": details, "message": message}


@pytest.fixture
def process_store_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backends' machines replay from the process's store alone (no disk layer: an
    earlier test's or process's entries would answer the launches these tests run)."""
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "off")


@pytest.mark.usefixtures("process_store_only")
@pytest.mark.parametrize(("check", "kernel", "mutants", "status"), [
    ("prefill_parity", "gemm_mq4g256v2_wmma_gfx12", False, Status.PASS),
    ("reference_parity", "gemv_mut_halves_swapped_r1", True, Status.FAIL),
])
def test_identical_code_on_another_arch_runs_once_and_the_row_says_so(
        check: str, kernel: str, mutants: bool, status: Status) -> None:
    """gfx1200 and gfx1201 build these kernels to objects that differ only in the target
    they name: the gfx1201 cell runs none of its launches (each is gfx1200's, replayed),
    says "same code as gfx1200", and is, in everything else, the row of a real execution
    on gfx1201 (the replay store emptied first), a failing mutant's too."""
    from hqval.codeobject import load
    from hqval.emu.replay import SHARED_REPLAY

    SHARED_REPLAY.clear()
    first = _fresh("gfx1200", mutants)
    run_cell(first, check, first.kernel(kernel))
    ctx = _fresh("gfx1201", mutants)
    spec = ctx.kernel(kernel)
    reused = run_cell(ctx, check, spec)
    assert ctx.backend.ran_on() and set(ctx.backend.ran_on()) == {"gfx1200"}
    assert reused.details["same_code_as"] == "gfx1200"
    assert reused.message.startswith("same code as gfx1200")
    SHARED_REPLAY.clear()
    alone = _fresh("gfx1201", mutants)
    real = run_cell(alone, check, spec)
    assert alone.backend.ran_on() and set(alone.backend.ran_on()) == {"gfx1201"}
    assert "same_code_as" not in real.details and "same code" not in real.message
    assert real.status is status
    assert _as_run_alone(reused) == _as_run_alone(real)
    # the row names gfx1201's own object, a different file from gfx1200's: only the
    # target it names differs
    a = load(first.program(first.kernel(kernel)).provenance["code_object"])
    b = load(ctx.program(spec).provenance["code_object"])
    assert reused.object_sha256 == b.sha256 != a.sha256
    assert a.code_identity == b.code_identity


@pytest.mark.usefixtures("process_store_only")
def test_code_that_differs_between_arches_runs_again() -> None:
    """gfx1100 and gfx1101 build the gfx11 WMMA GEMM differently (each target's own
    scheduling): the gfx1101 cell runs every launch itself right after gfx1100's cell on
    the same inputs, and its row says nothing of gfx1100."""
    from hqval.codeobject import load
    from hqval.emu.replay import SHARED_REPLAY

    kernel, check = "gemm_mq4g256v2_wmma_gfx11", "prefill_parity"
    SHARED_REPLAY.clear()
    first = _fresh("gfx1100")
    run_cell(first, check, first.kernel(kernel))
    ctx = _fresh("gfx1101")
    row = run_cell(ctx, check, ctx.kernel(kernel))
    a = load(first.program(first.kernel(kernel)).provenance["code_object"])
    b = load(ctx.program(ctx.kernel(kernel)).provenance["code_object"])
    assert a.code_identity != b.code_identity
    assert ctx.backend.ran_on() and set(ctx.backend.ran_on()) == {"gfx1101"}
    assert row.status is Status.PASS and "same_code_as" not in row.details
    assert "launches_run_on" not in row.details and "same code" not in row.message


def test_a_row_with_some_launches_run_elsewhere_counts_them() -> None:
    row = Row("check", "prefill_parity", "k", "gfx1101", "emu", Status.PASS, message="ok")
    assert cell.same_code(row, ["gfx1101", "gfx1101"]) is row
    part = cell.same_code(row, ["gfx1151", "gfx1101", "gfx1151"])
    assert part.details["launches_run_on"] == {"gfx1101": 1, "gfx1151": 2}
    assert part.message == "ok" and "same_code_as" not in part.details
    whole = cell.same_code(row, ["gfx1151", "gfx1151"])
    assert whole.message == "same code as gfx1151; ok"
    assert whole.details == {"same_code_as": "gfx1151"}
