"""Check cells: the check registry, the context a check runs in, and ``run_cell``.

A cell is (check, kernel, arch, backend) with one identity string
``check[kernel|arch|backend]`` (``hqval.result.cell_id``).  A check is a function
``(ctx, spec) -> Row``; ``run_cell`` turns anything it raises into an ``error`` row (or a
``fail`` row for a memory fault or guard violation, which are the kernel's fault) so a cell
always has a verdict and never passes by accident.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hqval import deadline
from hqval.backends.base import Backend, Program
from hqval.checks.launch import GuardViolation
from hqval.errors import infrastructure_details, is_infrastructure, is_program_error
from hqval.result import Row, Status, cell_id

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

# The check registry: one explicit dict, name -> "module:function".
CHECKS: dict[str, str] = {
    "bit_identity": "hqval.checks.bit_identity:check",
    "reference_parity": "hqval.checks.reference_parity:check",
    "padded_offset": "hqval.checks.padded_offset:check",
    "prefill_parity": "hqval.checks.prefill_parity:check",
    "fallback": "hqval.checks.fallback:check",
}

CheckFn = Callable[["CheckContext", "KernelSpec"], Row]


@dataclass(frozen=True)
class Sizes:
    """Fixture shapes.  The emulator gets small ones that still discriminate (K spans the
    unrolled main loop and its remainder; M is not a multiple of any R, so tail rows run);
    hardware gets bigger ones."""

    gemv_m: int
    gemv_k: int
    gemm_m: int
    gemm_k: int
    prefill_n: tuple[int, ...]
    # padded_qt45 asserts no payload dword equals any header dword; on random bytes the
    # expected number of such clashes grows as rows^2, so its row count stays small.
    padded_m: int


# K=1280 is 5 groups: one pass of the 4-group unrolled main loop plus the remainder loop.
EMU_SIZES = Sizes(gemv_m=7, gemv_k=1280, gemm_m=20, gemm_k=512,
                  prefill_n=(1, 8, 12, 16, 32, 21), padded_m=7)
HARDWARE_SIZES = Sizes(gemv_m=515, gemv_k=4352, gemm_m=272, gemm_k=2048,
                       prefill_n=(1, 8, 12, 16, 32, 21, 77), padded_m=61)


def sizes_for(backend: Backend) -> Sizes:
    return EMU_SIZES if backend.name == "emu" else HARDWARE_SIZES


@dataclass(frozen=True)
class Cell:
    check: str
    kernel: str
    arch: str
    backend: str

    @property
    def identity(self) -> str:
        return cell_id(self.check, self.kernel, self.arch, self.backend)


@dataclass
class CheckContext:
    """What a check needs: where it runs, what else the manifest holds, the fixture seed."""

    backend: Backend
    arch: Arch
    manifest: Manifest
    seed: int = 0
    sizes: Sizes | None = None
    _programs: dict[str, Program] = field(default_factory=dict)
    # the programs the current cell loaded (name -> the sha256 of its object), and whether
    # its row is one its kernels' code decided (``run_cell``): what the check row cache
    # (``hqval.checks.rowcache``) records
    loaded: dict[str, str | None] = field(default_factory=dict)
    decided: bool = False

    def __post_init__(self) -> None:
        if self.sizes is None:
            self.sizes = sizes_for(self.backend)

    @property
    def shape(self) -> Sizes:
        assert self.sizes is not None
        return self.sizes

    def shape_for(self, spec: KernelSpec) -> Sizes:
        """The fixture shapes for ``spec``: a K-specialised build (manifest ``k_multiple``)
        gets every K rounded up to its multiple; one with explicit ``shapes`` gets the
        smallest of them on the emulator and the first on hardware, for GEMV and GEMM."""
        s = self.shape
        if spec.shapes:
            pick = min(spec.shapes, key=lambda mk: mk[0] * mk[1]) \
                if self.backend.name == "emu" else spec.shapes[0]
            m, k = pick
            return dataclasses.replace(s, gemv_m=m, gemv_k=k, gemm_m=m, gemm_k=k,
                                       padded_m=min(s.padded_m, m))
        km = max(256, spec.k_multiple)
        return dataclasses.replace(s, gemv_k=-(-s.gemv_k // km) * km,
                                   gemm_k=-(-s.gemm_k // km) * km)

    def program(self, spec: KernelSpec) -> Program:
        if spec.name not in self._programs:
            self._programs[spec.name] = self.backend.load(spec)
        program = self._programs[spec.name]
        sha = program.provenance.get("sha256")
        self.loaded[spec.name] = sha if isinstance(sha, str) else None
        return program

    def cell_objects(self) -> dict[str, str | None] | None:
        """The objects the last cell loaded ("kernel|arch" -> sha256) when its row is one
        its kernels' code decided (the check returned, or the kernel faulted), else None."""
        if not self.decided:
            return None
        return {f"{name}|{self.arch.name}": sha for name, sha in sorted(self.loaded.items())}

    def kernel(self, name: str) -> KernelSpec:
        for spec in self.manifest.kernels:
            if spec.name == name:
                return spec
        raise LookupError(f"kernel {name!r} is not in the manifest")

    def row(
        self, check: str, spec: KernelSpec, status: Status, message: str = "", *,
        measured: float | None = None, tolerance: float | None = None, derivation: str = "",
        details: dict[str, Any] | None = None,
    ) -> Row:
        d = {"selection": self.backend.selection} if self.backend.selection else {}
        d.update(details or {})
        handling = sys.exc_info()[1]
        if status is Status.ERROR and handling is not None and is_infrastructure(handling):
            # an error row made while handling hqval's own failure (a fixture that does not
            # hold, I/O): no verdict on the kernel, whichever check site made it
            d = {**infrastructure_details(handling), **d}
        program = self._programs.get(spec.name)
        sha = program.provenance.get("sha256") if program is not None else None
        return Row(
            kind="check", check=check, kernel=spec.name, arch=self.arch.name,
            backend=self.backend.name, status=status, measured=measured, tolerance=tolerance,
            derivation=derivation, seed=self.seed, message=message, details=d,
            object_sha256=sha if isinstance(sha, str) else None,
        )


@functools.cache
def stated_tolerances(name: str) -> frozenset[float]:
    """The tolerances a row of check ``name`` may state: its module's ``TOLERANCES`` (read
    once per check: the judge asks for every row)."""
    module = importlib.import_module(CHECKS[name].split(":", 1)[0])
    return frozenset(float(t) for t in module.TOLERANCES)


def check_function(name: str) -> CheckFn:
    try:
        target = CHECKS[name]
    except KeyError:
        raise ValueError(f"unknown check {name!r}: choose one of {', '.join(CHECKS)}") from None
    module_name, _, fn = target.partition(":")
    result: CheckFn = getattr(importlib.import_module(module_name), fn)
    return result


def _emu_errors() -> tuple[type[BaseException], type[BaseException]] | None:
    try:
        from hqval.emu.errors import KernelFault, UnsupportedInstruction
    except ImportError:
        return None
    return KernelFault, UnsupportedInstruction


def kernel_fault(exc: BaseException) -> str:
    """What the kernel did when ``exc`` is its own behaviour on the emulator
    (``hqval.emu.errors.KernelFault``: "trap" for ``s_trap``/``s_sethalt``, "memory fault"
    outside every allocation, "illegal instruction", "bad jump"), else "" (a launch that
    never finished, ``LaunchNeverEnds``, is no verdict: the interpreter cannot tell an
    endless loop from a wait on another workgroup)."""
    emu_errors = _emu_errors()
    if emu_errors is None or not isinstance(exc, emu_errors[0]):
        return ""
    return str(getattr(exc, "label", "fault"))


def unknown_checks(names: list[str] | None) -> str:
    """'' when every name is a registered check, else the message naming the choices."""
    unknown = [n for n in names or [] if n not in CHECKS]
    if not unknown:
        return ""
    return f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}"


def not_applicable(check: str, spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why ``check`` does not apply to the cell of ``spec`` on ``arch`` ('' when it does):
    the check module's own ``not_applicable`` (the one its ``check`` applies first), and an
    AMD-only kernel off AMD.  A cell that does not apply is not made: the plugin collects
    no item for it and a run expects no row of it (it is n/a, not unsupported)."""
    if spec.amd_only and not arch.is_amd:
        return f"{spec.name} is AMD-only (WMMA/ISA); no {arch.name} build"
    target = CHECKS.get(check)
    if target is None:  # not a registered check (a test's probe): it says for itself
        return ""
    rule = getattr(importlib.import_module(target.partition(":")[0]), "not_applicable", None)
    return str(rule(spec, arch, manifest)) if rule is not None else ""


# Backends that run on a device driver: their cells run under ``hqval.deadline``.
HARDWARE_BACKENDS = ("hip", "cuda")


def run_cell(ctx: CheckContext, check: str, spec: KernelSpec) -> Row:
    """Run one cell; never raises for a kernel or fixture problem, always returns a row.
    A cell whose every launch was replayed from another arch's run of identical code says
    so (``same_code``)."""
    fn = check_function(check)
    ctx.loaded, ctx.decided = {}, False
    why = not_applicable(check, spec, ctx.arch, ctx.manifest)
    if why:
        return ctx.row(check, spec, Status.UNSUPPORTED, why)
    before = len(ctx.backend.ran_on())
    return same_code(_run_cell(ctx, check, spec, fn), ctx.backend.ran_on()[before:])


def same_code(row: Row, ran_on: list[str]) -> Row:
    """``row`` saying which of its launches ran on another arch (``ran_on``: the arch
    that ran each of them): the emulator ran that arch's code object, identical to this
    one's apart from the target name, on the same bytes, once.  Every launch elsewhere on
    one arch: "same code as gfx1200" in the message and ``details.same_code_as``; some
    of them: ``details.launches_run_on`` (arch -> launches)."""
    others = [a for a in ran_on if a != row.arch]
    if not others:
        return row
    details = dict(row.details)
    if len(others) == len(ran_on) and len(set(others)) == 1:
        details["same_code_as"] = others[0]
        message = f"same code as {others[0]}" + (f"; {row.message}" if row.message else "")
        return dataclasses.replace(row, message=message, details=details)
    details["launches_run_on"] = {a: ran_on.count(a) for a in sorted(set(ran_on))}
    return dataclasses.replace(row, details=details)


def is_infrastructure_row(row: Row) -> bool:
    """Whether a row records hqval's own machinery failing (``infrastructure_details``)."""
    return bool(row.details.get("infrastructure"))


def _run_cell(ctx: CheckContext, check: str, spec: KernelSpec, fn: CheckFn) -> Row:
    emu_errors = _emu_errors()
    try:
        if ctx.backend.name in HARDWARE_BACKENDS:  # a deadline on its launches and waits
            with deadline.bounded(ctx.backend, cell_id(check, spec.name, ctx.arch.name,
                                                       ctx.backend.name)):
                return fn(ctx, spec)
        row = fn(ctx, spec)
        # returned normally: the row is what the kernels' code decided (a kernel's fault
        # is too, below; an emulator or compiler gap and hqval's own errors are not)
        ctx.decided = not is_infrastructure_row(row)
        return row
    except GuardViolation as exc:
        ctx.decided = True  # the kernel's own behaviour, as deterministic as its outputs
        return ctx.row(check, spec, Status.FAIL, f"guard: {exc}")
    except Exception as exc:
        fault = kernel_fault(exc)
        if fault:
            # the kernel's own behaviour (a trap, halt, fault, illegal instruction or a
            # launch that never ends): a failure naming the instruction and its address
            ctx.decided = True
            details: dict[str, Any] = {"address": int(getattr(exc, "address", 0))}
            details["trap" if fault == "trap" else "fault"] = str(
                getattr(exc, "instruction", ""))
            if fault == "memory fault":
                details = {}  # the message names address and instruction (as before)
            return ctx.row(check, spec, Status.FAIL, f"{fault}: {exc}", details=details)
        if emu_errors is not None and isinstance(exc, emu_errors[1]):
            # The emulator cannot run the kernel: no verdict either way.  Untested on this
            # arch, naming the instruction (never a failure of the kernel).
            mnemonic = str(getattr(exc, "mnemonic", "")) or "an instruction"
            return ctx.row(check, spec, Status.SKIPPED,
                           f"untested: the emulator lacks {mnemonic}: {exc}",
                           details={"emulator_gap": mnemonic})
        gap = getattr(exc, "builtin", None)
        if isinstance(gap, str) and type(exc).__name__ == "ToolchainGap":
            # this toolchain cannot build the kernel: no verdict either way
            return ctx.row(check, spec, Status.SKIPPED,
                           f"untested: the compiler lacks {gap}: {exc}",
                           details={"toolchain_gap": gap})
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        if is_infrastructure(exc):  # hqval's machinery (a missed deadline), not the kernel
            return ctx.row(check, spec, Status.ERROR, f"could not reach a verdict: {tb}",
                           details=infrastructure_details(exc))
        if is_program_error(exc):  # a bug of hqval's own code, not the kernel's behaviour
            return ctx.row(check, spec, Status.ERROR,
                           f"could not reach a verdict: hqval's own code failed ({tb}), not "
                           "the kernel; rerun with -v and report it",
                           details=infrastructure_details(exc, infrastructure_cause="hqval"))
        return ctx.row(check, spec, Status.ERROR, f"could not reach a verdict: {tb}")
