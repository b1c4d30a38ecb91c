from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hqval.admission import (
    POLICY_PATH,
    Admission,
    AdmissionStatus,
    KernelInfo,
    PolicyError,
    admit,
    load_policy,
    parse_policy,
    problem_lines,
    to_markdown,
)
from hqval.matrix import load_arches
from hqval.result import Row, Status

S = AdmissionStatus
_MATRIX = load_arches()
ARCHES = {
    **{n: _MATRIX[n] for n in ("gfx1010", "gfx1100", "gfx1201", "gfx1030")},
    # a wave64 target (none ships): the policy's wave_size need must make it unsupported
    "w64": dataclasses.replace(_MATRIX["gfx1100"], name="w64", wave_size=64),
}
KERNELS = {
    "gemv44": KernelInfo(44, "decode"),
    "gemm44": KernelInfo(44, "prefill"),
    "gemv45": KernelInfo(45, "decode"),
    "gemm45": KernelInfo(45, "prefill"),
}
POLICY = load_policy()


def r(row_kind: str, check: str, kernel: str, arch: str, backend: str = "emu",
      status: Status = Status.PASS, measured: float | None = None, **details: object) -> Row:
    return Row(row_kind, check, kernel, arch, backend, status, measured=measured,
               details=dict(details))


def compiled(kernel: str, arch: str) -> list[Row]:
    return [r("compile", "compile", kernel, arch, "toolchain"),
            r("audit", "scalar_header_loads", kernel, arch, "isa")]


def full_emu(arch: str) -> list[Row]:
    rows = []
    for k in ("gemv44", "gemm44", "gemv45", "gemm45"):
        rows += compiled(k, arch)
    pairs = [("bit_identity", "gemv44"), ("reference_parity", "gemv44"),
             ("bit_identity", "gemv45"), ("padded_offset", "gemv45"),
             ("prefill_parity", "gemm44"), ("bit_identity", "gemm44"),
             ("prefill_parity", "gemm45"), ("padded_offset", "gemm45"),
             # hqval.checks.fallback keys its cells on the GEMMs (passing where the arch
             # lacks the WMMA the format needs, unsupported where it has it)
             ("fallback", "gemm44"), ("fallback", "gemm45")]
    rows += [r("check", c, k, arch) for c, k in pairs]
    return rows


def status(adm: Admission, qt: int, path: str, arch: str) -> AdmissionStatus:
    for c in adm.cells:
        if (c.qt, c.path, c.arch) == (qt, path, arch):
            return c.status
    raise AssertionError(f"no cell qt{qt} {path} {arch}")


def run(rows: list[Row], **kw: Any) -> Admission:
    return admit(rows, POLICY, ARCHES, kernels=KERNELS, **kw)


def test_shipped_policy_parses_and_covers_both_formats() -> None:
    assert {(p.qt, p.path) for p in POLICY.paths} == {
        (44, "decode"), (44, "prefill"), (45, "decode"), (45, "prefill"),
        (44, "fused_decode"), (44, "fused_prefill"), (44, "moe_decode"), (44, "moe_prefill"),
        (45, "fused_decode"), (45, "fused_prefill")}


def test_policy_paths_follow_the_design_note() -> None:
    """MoE: qt=44 only, gfx11 and gfx12 (unsupported elsewhere); fused prefill falls back
    to per-token decode where the format has no WMMA GEMM (qt=45 on gfx11, gfx10)."""
    paths = {(p.qt, p.path): p for p in POLICY.paths}
    arches = load_arches()
    assert (45, "moe_decode") not in paths and (45, "moe_prefill") not in paths
    for path in ("moe_decode", "moe_prefill"):
        for arch, ok in (("gfx1010", False), ("gfx1030", False), ("gfx1100", True),
                         ("gfx1151", True), ("gfx1201", True)):
            unmet = [n for n in paths[(44, path)].needs
                     if arches[arch].cap(n.cap) not in n.allowed]
            assert (not unmet) is ok and all(n.otherwise is S.UNSUPPORTED for n in unmet)
    for qt, arch, falls in ((44, "gfx1100", False), (45, "gfx1100", True),
                            (45, "gfx1201", False), (44, "gfx1030", True)):
        unmet = [n for n in paths[(qt, "fused_prefill")].needs
                 if arches[arch].cap(n.cap) not in n.allowed]
        assert bool(unmet) is falls and all(n.otherwise is S.FALLBACK for n in unmet)


def test_design_note_status_shape_from_emulated_evidence() -> None:
    """gfx11: qt=44 prefill admitted, qt=45 prefill falls back; gfx12: both; gfx10: decode
    only, prefill by fallback.  Only the kernels that compile for an arch leave rows."""
    rows = full_emu("gfx1100") + full_emu("gfx1201")
    # gfx1010 has no WMMA, so no GEMM compiles there: decode + the GEMMs' fallback cells
    rows += [x for x in full_emu("gfx1010")
             if not x.kernel.startswith("gemm") or x.check == "fallback"]
    adm = run(rows)
    assert status(adm, 44, "prefill", "gfx1100") is S.EMULATED
    assert status(adm, 45, "prefill", "gfx1100") is S.FALLBACK
    assert status(adm, 44, "prefill", "gfx1201") is S.EMULATED
    assert status(adm, 45, "prefill", "gfx1201") is S.EMULATED
    assert status(adm, 44, "decode", "gfx1010") is S.EMULATED
    assert status(adm, 45, "decode", "gfx1010") is S.EMULATED
    assert status(adm, 44, "prefill", "gfx1010") is S.FALLBACK
    assert adm.exit_code == 0
    # reasons are sentences: no Python list reprs or key=value shorthand
    reasons = [x for c in adm.cells for x in c.reasons]
    assert not [x for x in reasons if re.search(r"\[|'| not in ", x)]
    fb = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "prefill", "gfx1010"))
    assert fb.reasons[0].startswith("gfx1010 has wmma none, not gfx11 or gfx12: ")
    em = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1010"))
    assert "required checks bit_identity and reference_parity passed on the emulator" \
        in em.reasons


def test_measured_needs_hardware_checks_and_timing() -> None:
    rows = full_emu("gfx1100")
    hw = [r("check", "bit_identity", "gemv44", "gfx1100", "hip"),
          r("check", "reference_parity", "gemv44", "gfx1100", "hip")]
    assert status(run(rows + hw), 44, "decode", "gfx1100") is S.EMULATED
    timing = r("timing", "ratio", "gemv44", "gfx1100", "hip", measured=1.004)
    assert status(run(rows + hw + [timing]), 44, "decode", "gfx1100") is S.MEASURED
    # emulator timing does not count as a measurement
    emu_t = r("timing", "ratio", "gemv44", "gfx1100", "emu", measured=1.0)
    assert status(run([*rows, emu_t]), 44, "decode", "gfx1100") is S.EMULATED


def test_timing_gate_rejects_slow_v2() -> None:
    rows = [*full_emu("gfx1030"),
            r("check", "bit_identity", "gemv44", "gfx1030", "hip"),
            r("check", "reference_parity", "gemv44", "gfx1030", "hip"),
            r("timing", "ratio", "gemv44", "gfx1030", "hip", measured=1.16)]
    adm = run(rows)
    assert status(adm, 44, "decode", "gfx1030") is S.REJECTED
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1030"))
    assert any("1.160" in x for x in cell.reasons)
    assert any("Infinity Cache" in x for x in cell.reasons)  # the arch note rides along
    assert adm.exit_code == 1


def test_compiled_only_is_incomplete_and_skipped_checks_are_compiled() -> None:
    """Compile and audit rows alone: the path's check cells have no row, so the cell is
    incomplete (exit 2), never compiled-and-fine.  With the check cells present but
    skipped, the evidence is complete and the cell is compiled."""
    adm = run(compiled("gemv44", "gfx1100"))
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.INCOMPLETE and not cell.status.admitted
    assert "bit_identity of gemv44" in cell.reasons[-1]
    assert status(adm, 45, "decode", "gfx1100") is S.UNTESTED  # no qt=45 kernel here
    assert adm.exit_code == 2
    skipped = [*compiled("gemv44", "gfx1100"),
               *(r("check", c, "gemv44", "gfx1100", status=Status.SKIPPED)
                 for c in ("bit_identity", "reference_parity"))]
    # (a table of this one kernel: the others' cells, the GEMMs' fallback ones included,
    # would be expected too)
    adm = admit(skipped, POLICY, ARCHES, kernels={"gemv44": KERNELS["gemv44"]})
    assert status(adm, 44, "decode", "gfx1100") is S.COMPILED
    assert adm.exit_code == 2  # compiled is not what an emulator run can prove: unproven


def test_compile_without_audit_is_not_admitted() -> None:
    rows = [r("compile", "compile", "gemv44", "gfx1100", "clang"),
            *(r("check", c, "gemv44", "gfx1100") for c in ("bit_identity", "reference_parity"))]
    adm = run(rows)
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.INCOMPLETE and "audit of gemv44" in cell.reasons[-1]


def test_every_kernel_of_the_path_needs_its_rows() -> None:
    """One kernel's passing row does not cover another kernel of the path (55 of 56
    reference_parity rows removed used to stay emulated)."""
    kernels = {**KERNELS, "gemv44b": KernelInfo(44, "decode")}
    rows = [*full_emu("gfx1100"), *compiled("gemv44b", "gfx1100"),
            r("check", "bit_identity", "gemv44b", "gfx1100")]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.INCOMPLETE
    assert "reference_parity of gemv44b" in cell.reasons[-1] and adm.exit_code == 2
    rows.append(r("check", "reference_parity", "gemv44b", "gfx1100", status=Status.SKIPPED))
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    assert status(adm, 44, "decode", "gfx1100") is S.COMPILED  # gemv44b never passed it
    rows[-1] = r("check", "reference_parity", "gemv44b", "gfx1100")
    assert status(admit(rows, POLICY, ARCHES, kernels=kernels), 44, "decode",
                  "gfx1100") is S.EMULATED


def test_failing_rows_no_policy_cell_holds_are_kernel_level_findings() -> None:
    """A failing row of a qt no policy names, or of a kernel missing from the kernel
    table, is exit 1 and named, never dropped; a mutant's own failing cell is a kill."""
    kernels = {**KERNELS, "gemv999": KernelInfo(999, "decode"),
               "mut_a": KernelInfo(44, "decode", mutant_of="gemv44")}
    base = [*full_emu("gfx1100"),
            r("mutant", "mutant", "mut_a", "gfx1100", mutant_of="gemv44"),
            r("check", "reference_parity", "mut_a", "gfx1100", status=Status.FAIL)]
    assert admit(base, POLICY, ARCHES, kernels=kernels).exit_code == 0
    for bad in (r("check", "bit_identity", "gemv999", "gfx1100", status=Status.FAIL),
                r("check", "bit_identity", "not_in_table", "gfx1100", status=Status.ERROR)):
        adm = admit([*base, bad], POLICY, ARCHES, kernels=kernels)
        assert adm.findings and adm.findings[0].startswith(bad.identity), adm.findings
        assert adm.exit_code == 1
        assert status(adm, 44, "decode", "gfx1100") is S.EMULATED


def test_skipped_mutants_gate_is_in_the_reasons() -> None:
    kernels = {**KERNELS, "mut_a": KernelInfo(44, "decode", mutant_of="gemv44")}
    rows = full_emu("gfx1100")
    # the kernel table lists a mutant: its verdict is expected evidence
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    assert status(adm, 44, "decode", "gfx1100") is S.INCOMPLETE
    skip = Row("step", "mutants", "-", "gfx1100", "emu", Status.SKIPPED,
               message="mutants step disabled (--no-mutants)",
               details={"skipped_by": "--no-mutants"})
    adm = admit([*rows, skip], POLICY, ARCHES, kernels=kernels)
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.EMULATED
    assert "mutants gate skipped (--no-mutants)" in cell.reasons
    assert adm.skipped_gates == ("mutants gate skipped (--no-mutants) on gfx1100",)


def test_no_rows_is_empty_and_exit_2() -> None:
    adm = run([], only_arches=["gfx1100"])
    assert adm.empty and adm.exit_code == 2


@pytest.mark.parametrize("bad", [Status.FAIL, Status.ERROR])
def test_any_failing_row_rejects_and_is_named(bad: Status) -> None:
    rows = full_emu("gfx1100")
    rows.append(r("check", "reference_parity", "gemv44", "gfx1100", status=bad, seed=3))
    adm = run(rows)
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.REJECTED
    assert cell.failing == ("reference_parity[gemv44|gfx1100|emu]",)
    assert adm.exit_code == 1


def test_surviving_mutant_rejects() -> None:
    rows = [*full_emu("gfx1100"), r("mutant", "survived", "mut_halves_swapped", "gfx1100",
                                    status=Status.FAIL, qt=44, kind="gemv")]
    assert status(run(rows), 44, "decode", "gfx1100") is S.REJECTED


def test_missing_required_check_is_incomplete_and_unpassed_is_compiled() -> None:
    rows = [x for x in full_emu("gfx1100") if x.check != "reference_parity"]
    assert status(run(rows), 44, "decode", "gfx1100") is S.INCOMPLETE
    rows.append(r("check", "reference_parity", "gemv44", "gfx1100", status=Status.SKIPPED))
    assert status(run(rows), 44, "decode", "gfx1100") is S.COMPILED


def test_failed_fallback_rejects_and_missing_fallback_is_incomplete() -> None:
    rows = [x for x in full_emu("gfx1100") if x.check != "fallback"]
    assert status(run(rows), 45, "prefill", "gfx1100") is S.INCOMPLETE
    rows.append(r("check", "fallback", "gemm45", "gfx1100", status=Status.SKIPPED))
    assert status(run(rows), 45, "prefill", "gfx1100") is S.UNTESTED
    rows.append(r("check", "fallback", "gemm45", "gfx1100", status=Status.FAIL))
    assert status(run(rows), 45, "prefill", "gfx1100") is S.REJECTED


def test_wave64_unsupported_even_with_passing_rows() -> None:
    adm = run(full_emu("w64"))
    assert {c.status for c in adm.cells} == {S.UNSUPPORTED}
    assert all("wave64" in c.reasons[0] for c in adm.cells)
    assert adm.exit_code == 0


def test_infrastructure_error_fails_closed_with_exit_2() -> None:
    rows = [*full_emu("gfx1100"), r("check", "backend", "-", "gfx1100", "hip",
                                    status=Status.ERROR, infrastructure=True)]
    assert run(rows).exit_code == 2


def test_unknown_arch_requested_is_infrastructure() -> None:
    adm = run(full_emu("gfx1100"), only_arches=["gfx1100", "gfx9999"])
    assert adm.exit_code == 2
    assert "gfx9999" in adm.infrastructure[0]


def test_baseline_regression_rejects() -> None:
    rows = full_emu("gfx1100")
    adm = run(rows, regressed=["bit_identity[gemv44|gfx1100|emu]"])
    assert status(adm, 44, "decode", "gfx1100") is S.REJECTED
    assert adm.exit_code == 1


def test_details_classify_rows_without_a_kernel_table() -> None:
    rows = [r("compile", "compile", "ext", "gfx1100", "clang", qt=44, kind="gemv"),
            r("audit", "no_spills", "ext", "gfx1100", "isa", qt=44, kind="gemv")]
    adm = admit(rows, POLICY, ARCHES)
    assert status(adm, 44, "decode", "gfx1100") is S.COMPILED
    assert admit([r("check", "x", "mystery", "gfx1100")], POLICY, ARCHES).unclassified == 1


def test_statuses_follow_the_policy_not_a_table(tmp_path: Path) -> None:
    """Moving qt=45 prefill to gfx11 in the policy changes gfx1100's status."""
    data = yaml.safe_load(POLICY_PATH.read_text())
    data["formats"]["mq4cg256"]["paths"]["prefill"]["needs"][1]["in"] = ["gfx11", "gfx12"]
    pol = parse_policy(data)
    adm = admit(full_emu("gfx1100"), pol, ARCHES, kernels=KERNELS)
    assert status(adm, 45, "prefill", "gfx1100") is S.EMULATED


def test_markdown_lists_every_cell() -> None:
    md = to_markdown(run(full_emu("gfx1201")))
    assert md.count("| gfx1201 |") == len(POLICY.paths)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.pop("schema"), "schema"),
    (lambda d: d["formats"]["mq4g256v2"].pop("qt"), "formats.mq4g256v2.qt"),
    (lambda d: d["formats"]["mq4g256v2"]["paths"].update(train={}), "unknown path"),
    (lambda d: d["formats"]["mq4g256v2"]["paths"]["decode"].update(checks=[]),
     "decode.checks"),
    (lambda d: d["formats"]["mq4g256v2"]["paths"]["prefill"]["needs"][1].update(cap="vram"),
     "needs[1].cap"),
    (lambda d: d["formats"]["mq4g256v2"]["paths"]["prefill"]["needs"][1].update(
        otherwise="maybe"), "otherwise"),
    (lambda d: d["formats"]["mq4g256v2"]["paths"]["prefill"].pop("fallback_checks"),
     "fallback_checks"),
    (lambda d: d["formats"]["mq4g256v2"]["paths"]["decode"].update(timing={"max_ratio": 0.5}),
     "max_ratio"),
    (lambda d: d["formats"]["mq4g256v2"]["paths"]["decode"].update(typo=1), "typo"),
])
def test_bad_policy_names_the_key(mutate: object, message: str) -> None:
    data = yaml.safe_load(POLICY_PATH.read_text())
    mutate(data)  # type: ignore[operator]
    with pytest.raises(PolicyError, match=re.escape(message)):
        parse_policy(data, "policy.yaml")


def test_unreadable_policy_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="--policy"):
        load_policy(tmp_path / "nope.yaml")


def test_hardware_checks_without_required_timing_are_not_measured() -> None:
    hw = [r("compile", "compile", k, "gfx1100", "clang") for k in ("gemv44", "gemm44")]
    hw += [r("audit", "no_spills", k, "gfx1100", "isa") for k in ("gemv44", "gemm44")]
    hw += [r("check", c, "gemv44", "gfx1100", "hip")
           for c in ("bit_identity", "reference_parity")]
    hw += [r("check", c, "gemm44", "gfx1100", "hip")
           for c in ("bit_identity", "prefill_parity")]
    adm = run(hw)
    # decode requires hardware timing: without it the cell is not measured (nor emulated)
    assert status(adm, 44, "decode", "gfx1100") is S.UNTESTED
    # prefill has no timing cells (policy: timing.required false)
    assert status(adm, 44, "prefill", "gfx1100") is S.MEASURED


def test_timing_rows_name_kernel_at_shape_and_mutant_checks_are_not_evidence() -> None:
    kernels = {**KERNELS, "mut_tid8": KernelInfo(44, "decode", mutant_of="gemv44")}
    rows = [*full_emu("gfx1100"),
            r("check", "bit_identity", "gemv44", "gfx1100", "hip"),
            r("check", "reference_parity", "gemv44", "gfx1100", "hip"),
            r("timing", "timing_cold", "gemv44@17408x5120", "gfx1100", "hip", measured=1.003),
            # the mutant failing its checks is the point of a mutant, not a defect
            r("check", "reference_parity", "mut_tid8", "gfx1100", status=Status.FAIL),
            r("mutant", "mutant", "mut_tid8", "gfx1100", mutant_of="gemv44")]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    assert status(adm, 44, "decode", "gfx1100") is S.MEASURED


def test_failures_on_arches_outside_the_policy_fail_the_gate() -> None:
    kernels = {**KERNELS, "mut_x": KernelInfo(44, "decode", mutant_of="gemv44")}
    rows = [*full_emu("gfx1100"), r("mutant", "mutant", "mut_x", "gfx1100", mutant_of="gemv44"),
            r("check", "reference_parity", "mut_x", "sm_90", "cuda", status=Status.FAIL),
            r("check", "reference_parity", "gemv44", "sm_90", "cuda"),
            r("mutant", "mutant", "mut_y", "sm_90", "cuda", status=Status.FAIL,
              mutant_of="gemv44"),
            r("timing", "timing_cold", "gemv44@4096x5120", "sm_90", "cuda",
              status=Status.FAIL)]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    assert adm.outside == ("mutant[mut_y|sm_90|cuda]",
                           "timing_cold[gemv44@4096x5120|sm_90|cuda]")
    assert adm.exit_code == 1
    assert {c.arch for c in adm.cells} == {"gfx1100"}


def test_markdown_escapes_reasons() -> None:
    from ..conftest import live_markup, table_cells  # type: ignore[import-not-found]

    rows = [r if r.kernel != "gemv44" or r.check != "reference_parity" else
            Row(r.kind, r.check, r.kernel, r.arch, r.backend, Status.FAIL,
                message="bad | <img src=x> [a](https://e.example)")
            for r in full_emu("gfx1201")]
    md = to_markdown(run(rows))
    assert "**rejected**" in md
    assert live_markup(md) == []
    # arch, format, path, status, reasons, kernels
    assert {table_cells(line) for line in md.splitlines()} == {6}


def _sampled_timing(slowdown: float, arch: str = "gfx1100") -> Row:
    import numpy as np

    rng = np.random.default_rng(9)
    a = [list(50.0 * rng.lognormal(0.0, 0.005, 100)) for _ in range(3)]
    b = [list(50.0 * slowdown * rng.lognormal(0.0, 0.005, 100)) for _ in range(3)]
    # stored as a bench of an older policy would have: pass, whatever the samples say
    return r("timing", "timing_cold", "gemv44@17408x5120", arch, "hip", measured=slowdown,
             mode="cold", qt=44, kind="gemv", samples_a=a, samples_b=b)


def _admit_with(policy_edit: Any, rows: list[Row]) -> Admission:
    from hqval.admission import admit_runs

    from .runs import bound_run

    data = yaml.safe_load(POLICY_PATH.read_text())
    policy_edit(data["formats"]["mq4g256v2"]["paths"]["decode"]["timing"])
    policy = parse_policy(data, "edited policy")
    table = {k: {"qt": v.qt, "kind": "gemv" if v.path == "decode" else "gemm"}
             for k, v in KERNELS.items()}
    adm, _ = admit_runs([bound_run(rows, table, ["gfx1100"])], policy=policy,
                        arches=ARCHES, only_arches=["gfx1100"])
    return adm


def test_timing_verdicts_are_recomputed_under_the_policy_in_force() -> None:
    rows = [*full_emu("gfx1100"),
            r("check", "bit_identity", "gemv44", "gfx1100", "hip"),
            r("check", "reference_parity", "gemv44", "gfx1100", "hip"),
            _sampled_timing(1.03)]
    adm = _admit_with(lambda t: None, rows)
    assert status(adm, 44, "decode", "gfx1100") is S.MEASURED

    def strict(t: dict[str, Any]) -> None:
        t["cold"] = {**t["cold"], "ratio_max": 1.01}

    adm = _admit_with(strict, rows)
    assert status(adm, 44, "decode", "gfx1100") is S.REJECTED
    assert adm.exit_code == 1

    # a gate right at the measured ratio: noisy, and noisy blocks under this policy
    def at(t: dict[str, Any]) -> None:
        t["cold"] = {**t["cold"], "ratio_max": 1.03}

    assert status(_admit_with(at, rows), 44, "decode", "gfx1100") is S.REJECTED

    def at_lenient(t: dict[str, Any]) -> None:
        at(t)
        t["noisy"] = "passes"

    adm = _admit_with(at_lenient, rows)
    cell = next(c for c in adm.cells if (c.qt, c.path) == (44, "decode"))
    assert cell.status is not S.MEASURED  # noisy is not a pass: no passing timing row
    assert any("noisy timing" in x for x in cell.reasons)


def test_an_emulator_gap_leaves_the_kernel_untested_naming_the_instruction() -> None:
    """An instruction the emulator lacks decides nothing: the cell is untested (never
    rejected), the reason and the kernel's own status name the instruction."""
    rows = [x for x in full_emu("gfx1201") if not (x.kernel == "gemm45"
                                                  and x.check == "prefill_parity")]
    rows.append(r("check", "prefill_parity", "gemm45", "gfx1201", status=Status.SKIPPED,
                  emulator_gap="s_frob_b32"))
    adm = run(rows)
    assert status(adm, 45, "prefill", "gfx1201") is S.UNTESTED
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (45, "prefill", "gfx1201"))
    assert any("the emulator lacks s_frob_b32" in why for why in cell.reasons)
    assert ("gemm45", "untested", "the emulator lacks s_frob_b32 (prefill_parity)") \
        in cell.kernels
    assert status(adm, 44, "prefill", "gfx1201") is S.EMULATED  # the other format is not hit
    # the same row as an error (a kernel that could not reach a verdict) still rejects
    bad = [*rows[:-1], r("check", "prefill_parity", "gemm45", "gfx1201", status=Status.ERROR)]
    assert status(run(bad), 45, "prefill", "gfx1201") is S.REJECTED


def test_every_cell_lists_its_kernels_with_their_own_status() -> None:
    rows = full_emu("gfx1100")
    rows = [x for x in rows if not (x.kernel == "gemv44" and x.check == "bit_identity")]
    rows.append(r("check", "bit_identity", "gemv44", "gfx1100", status=Status.FAIL))
    adm = run(rows)
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.REJECTED
    assert cell.kernels == (("gemv44", "failed", "failing: bit_identity"),)
    ok = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "prefill", "gfx1100"))
    assert ok.kernels == (("gemm44", "passed", "every required check passed"),)
    assert adm.to_json()["cells"][0]["kernels"]


def test_suite_mutants_on_an_external_tree_are_a_self_test_not_evidence() -> None:
    """The suite's own mutants break the suite's kernels: on an external tree their
    verdicts (a survivor included) are listed as a suite self-test and gate no cell."""
    kernels = {**KERNELS, "suite_mut": KernelInfo(44, "decode", "gemv_mq4g256v2_r1",
                                                  self_test=True)}
    rows = [*full_emu("gfx1100"),
            r("mutant", "mutant_verdict", "suite_mut", "gfx1100", status=Status.FAIL),
            r("check", "bit_identity", "suite_mut", "gfx1100", status=Status.FAIL)]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    assert status(adm, 44, "decode", "gfx1100") is S.EMULATED
    assert len(adm.self_test) == 1 and "suite_mut" in adm.self_test[0]
    assert not adm.findings
    # without the label the same survivor rejects the cell
    plain = {**KERNELS, "suite_mut": KernelInfo(44, "decode", "gemv_mq4g256v2_r1")}
    assert status(admit(rows, POLICY, ARCHES, kernels=plain), 44, "decode",
                  "gfx1100") is S.REJECTED


def test_a_production_false_kernel_is_reported_never_gating() -> None:
    """An experimental kernel of qt=44 decode that fails its check: the path stays as its
    production kernels make it, the exit code is unmoved, and the failure is listed."""
    kernels = {**KERNELS, "gemv44_try": KernelInfo(44, "decode", production=False)}
    rows = [*full_emu("gfx1201"), *compiled("gemv44_try", "gfx1201"),
            r("check", "reference_parity", "gemv44_try", "gfx1201", status=Status.FAIL)]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels,
                missing=["reference_parity[gemv44_try|gfx1201|emu]"])
    assert status(adm, 44, "decode", "gfx1201") is S.EMULATED
    assert adm.exit_code == 0 and not adm.findings and not adm.missing
    assert "reference_parity[gemv44_try|gfx1201|emu]: fail" in adm.not_gating
    assert any("not gating (production: false)" in line for line in problem_lines(adm))
    # the same kernel in production rejects the path
    gating = admit(rows, POLICY, ARCHES, kernels={**KERNELS, "gemv44_try": KernelInfo(
        44, "decode")})
    assert status(gating, 44, "decode", "gfx1201") is S.REJECTED and gating.exit_code == 1


def test_kernel_table_reads_production_from_the_envelope() -> None:
    from hqval.admission import kernel_table

    table = kernel_table([{"kernels": {"a": {"qt": 44, "kind": "gemv", "production": False},
                                       "b": {"qt": 44, "kind": "gemv"}}}])
    assert not table["a"].production and table["b"].production


def test_suite_mutants_of_a_same_named_tree_kernel_are_not_expected_evidence() -> None:
    """An external tree reusing a suite kernel's name: the suite mutant of that name is a
    self-test (its verdict is not evidence), so it is not expected either; the cell is
    admitted and says that no mutant of the tree breaks its kernels.  A tree mutant of
    the same kernel without a verdict still leaves the cell incomplete."""
    kernels = {**KERNELS, "suite_mut": KernelInfo(44, "decode", "gemv44", self_test=True)}
    rows = [*full_emu("gfx1100"),
            r("mutant", "mutant_verdict", "suite_mut", "gfx1100")]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.EMULATED and adm.exit_code == 0
    assert any("no mutant of this tree breaks gemv44" in x for x in cell.reasons)
    own = {**kernels, "tree_mut": KernelInfo(44, "decode", "gemv44")}
    adm = admit(rows, POLICY, ARCHES, kernels=own)
    assert status(adm, 44, "decode", "gfx1100") is S.INCOMPLETE and adm.exit_code == 2
    with_verdict = [*rows, r("mutant", "mutant", "tree_mut", "gfx1100")]
    cell = next(c for c in admit(with_verdict, POLICY, ARCHES, kernels=own).cells
                if (c.qt, c.path, c.arch) == (44, "decode", "gfx1100"))
    assert cell.status is S.EMULATED
    assert not any("no mutant of this tree" in x for x in cell.reasons)


def test_markdown_names_each_cells_kernels_with_their_status() -> None:
    rows = [x for x in full_emu("gfx1100") if not (x.kernel == "gemv44"
                                                  and x.check == "bit_identity")]
    rows.append(r("check", "bit_identity", "gemv44", "gfx1100", status=Status.FAIL))
    text = to_markdown(run(rows))
    line = next(ln for ln in text.splitlines() if "| gfx1100 | qt=44 mq4g256v2 | decode |" in ln)
    assert "**rejected**" in line and line.rstrip().endswith("gemv44: failed |")


def test_timing_rows_of_runs_without_a_kernel_table_find_their_gate() -> None:
    # bench runs before the envelope kept a kernel table (the held-out H200 runs): the
    # suite's own kernel names still map to their format, path and gate
    from hqval.admission import gate_for_row

    gate_for = gate_for_row(POLICY, {})
    row = Row("timing", "timing_cold", "gemv_mq4g256v2_r8@17408x5120", "sm_90", "cuda",
              Status.PASS, details={"mode": "cold"})
    g = gate_for(row)
    assert g is not None and g.source.endswith("mq4g256v2.paths.decode.timing.cold")
    mutant = Row("timing", "timing_cold", "gemv_mq4c_r8+extra2@17408x5120", "sm_90", "cuda",
                 Status.PASS, details={"mode": "hot"})
    m = gate_for(mutant)
    assert m is not None and "mq4cg256" in m.source
    unknown = Row("timing", "timing_cold", "someone_elses@1x256", "sm_90", "cuda",
                  Status.PASS, details={"mode": "cold"})
    assert gate_for(unknown) is None


def test_a_run_with_no_kernel_of_any_admission_path_is_empty_and_exit_2() -> None:
    """A tree of v1 kernels only: every cell would be untested with nothing behind it,
    which must not read as 'every admitted cell passes'."""
    kernels = {"gemv6": KernelInfo(6, "decode")}
    rows = [*compiled("gemv6", "gfx1100"), r("check", "reference_parity", "gemv6", "gfx1100")]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels, only_arches=["gfx1100"])
    assert all(not c.kernels for c in adm.cells)
    assert adm.empty and adm.exit_code == 2
    assert "no kernel of any admission path" in "\n".join(problem_lines(adm))


def test_a_fallback_owes_the_failures_of_the_decode_kernels_it_runs_only() -> None:
    """On gfx1010 (no WMMA) qt=44 prefill falls back to the decode kernel its own fallback
    rows name: a failing row of that kernel rejects the cell; a failing row of an unrelated
    qt=44 kernel (a MoE GEMV, run by the grouped MoE GEMM's fallback, a path gfx1010 does
    not have) does not."""
    kernels = {**KERNELS, "moe44": KernelInfo(44, "moe_decode"),
               "moeg44": KernelInfo(44, "moe_prefill")}
    rows = [x for x in full_emu("gfx1010") if x.check != "fallback"]
    rows += [r("check", "fallback", "gemm44", "gfx1010", decode_kernel="gemv44"),
             r("check", "fallback", "gemm45", "gfx1010", decode_kernel="gemv45"),
             # the grouped MoE GEMM's fallback runs the MoE GEMV: the MoE prefill path's
             r("check", "fallback", "moeg44", "gfx1010", decode_kernel="moe44"),
             *compiled("moe44", "gfx1010"), *compiled("moeg44", "gfx1010"),
             r("audit", "header_scalar", "moe44", "gfx1010", "isa", status=Status.FAIL)]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    assert status(adm, 44, "prefill", "gfx1010") is S.FALLBACK
    bad = [*rows, r("audit", "no_spill", "gemv44", "gfx1010", "isa", status=Status.FAIL)]
    adm = admit(bad, POLICY, ARCHES, kernels=kernels)
    assert status(adm, 44, "prefill", "gfx1010") is S.REJECTED
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "prefill", "gfx1010"))
    assert "no_spill[gemv44|gfx1010|isa]" in " ".join(cell.reasons)
    assert "moe44" not in " ".join(cell.reasons)


def test_a_prefill_path_with_no_kernel_of_its_own_has_no_fallback_evidence() -> None:
    """A tree of MoE and fused decode kernels only (no dense or multi-matrix GEMM): on
    gfx1030 (no WMMA) the dense and fused prefill cells have no kernel, so no fallback
    evidence; the grouped MoE GEMM's failing fallback row (it runs the MoE GEMV) and the
    MoE GEMV's failing audit row are the MoE paths', never theirs: untested, not rejected.
    A dense GEMM of the tree with that failing fallback row is rejected."""
    kernels = {"gemv44": KernelInfo(44, "decode"), "qkv44": KernelInfo(44, "fused_decode"),
               "moe44": KernelInfo(44, "moe_decode"), "moeg44": KernelInfo(44, "moe_prefill")}
    rows = [*compiled("gemv44", "gfx1030"), *compiled("qkv44", "gfx1030"),
            *compiled("moe44", "gfx1030"), *compiled("moeg44", "gfx1030"),
            r("check", "reference_parity", "gemv44", "gfx1030"),
            r("check", "bit_identity", "gemv44", "gfx1030"),
            r("check", "fallback", "moeg44", "gfx1030", status=Status.ERROR,
              decode_kernel="moe44"),
            r("audit", "header_scalar", "moe44", "gfx1030", "isa", status=Status.FAIL)]
    adm = admit(rows, POLICY, ARCHES, kernels=kernels)
    for path in ("prefill", "fused_prefill"):
        assert status(adm, 44, path, "gfx1030") is S.UNTESTED
        cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, path, "gfx1030"))
        assert not cell.evidence and not cell.failing
        assert "no kernel of this path" in " ".join(cell.reasons)
    # must say no: the same failing fallback row on a GEMM of the dense prefill path
    kernels["gemm44"] = KernelInfo(44, "prefill")
    bad = [*rows, r("check", "fallback", "gemm44", "gfx1030", status=Status.FAIL,
                    decode_kernel="gemv44")]
    adm = admit(bad, POLICY, ARCHES, kernels=kernels)
    assert status(adm, 44, "prefill", "gfx1030") is S.REJECTED
    assert status(adm, 44, "fused_prefill", "gfx1030") is S.UNTESTED


@pytest.mark.parametrize("failed, said", [
    ("bit_identity", "failed on its own launch"),
    ("prefill_parity", "failed its own prefill_parity"),
])
def test_a_no_verdict_row_says_how_its_baseline_failed(failed: str, said: str) -> None:
    """A bit_identity error whose baseline failed (a trap on its own launch, or its own
    prefill parity: the engine's gfx11 v1 residual WMMA GEMM) still rejects, and the
    reason says which; it had said 'on its own launch' for both."""
    rows = [x for x in full_emu("gfx1100")
            if not (x.check == "bit_identity" and x.kernel == "gemm44")]
    rows.append(r("check", "bit_identity", "gemm44", "gfx1100", status=Status.ERROR,
                  baseline="gemm_v1", baseline_fails={"check": failed, "status": "fail",
                                                      "message": "m"}))
    adm = run(rows)
    cell = next(c for c in adm.cells if (c.qt, c.path, c.arch) == (44, "prefill", "gfx1100"))
    assert cell.status is S.REJECTED
    assert any(f"its baseline gemm_v1 {said}" in x for x in cell.reasons), cell.reasons
