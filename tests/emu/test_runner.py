"""Every kernel of kernels/kernels.yaml, on gfx1010, gfx1030, gfx1100, gfx1151 and
gfx1201, run on the interpreter and compared with the numpy oracle of hqval.formats; and
every mutant that changes numbers is caught by the same comparison."""

from __future__ import annotations

import shutil

import pytest

from hqval.emu.errors import OutOfBounds
from hqval.emu.runner import run_kernel
from hqval.manifest import load_manifest
from hqval.matrix import load_arches

ARCHES = ("gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201")
_ARCH = load_arches()


def _cells(mutants: bool) -> list[tuple[str, str]]:
    man = load_manifest(None, mutants=mutants)
    return [(s.name, a) for s in man.kernels if s.kind in ("gemv", "gemv_qkv", "gemm")
            for a in ARCHES if s.applies_to(_ARCH[a])]


needs_clang = pytest.mark.skipif(shutil.which("clang-19") is None and shutil.which("clang") is
                                 None, reason="needs clang-19 to build the kernels")


@needs_clang
@pytest.mark.parametrize(("kernel", "arch"), _cells(False), ids=lambda v: str(v))
def test_kernel_matches_oracle(kernel: str, arch: str) -> None:
    spec = load_manifest(None).by_name(kernel)
    r = run_kernel(spec, arch, M=40 if spec.kind == "gemv" else 32, K=512, N=20)
    assert r.nonfinite == 0
    assert r.error <= r.tolerance, (r.error, r.tolerance, r.derivation)
    assert r.counts["VALU"] > 0 and r.counts["VMEM"] > 0
    if spec.kind == "gemm":
        assert r.counts["WMMA"] > 0
    else:
        # the suite's GEMVs keep the section 2 lane order: bit-exact with that model
        assert r.bit_mismatches == 0


def _numeric_mutants() -> list[tuple[str, str]]:
    man = load_manifest(None, mutants=True)
    keep = {s.name for s in man.kernels if not str(s.expected_killer).startswith("audit_")}
    return [(k, a) for k, a in _cells(True) if k in keep and a in ("gfx1030", "gfx1100",
                                                                      "gfx1201")]


@needs_clang
@pytest.mark.parametrize(("kernel", "arch"), _numeric_mutants(), ids=lambda v: str(v))
def test_number_changing_mutant_is_caught(kernel: str, arch: str) -> None:
    """Caught by the oracle comparison, or by the emulator's bounds guard when the mutant
    reads past a buffer (the fused QKV with K and V swapped reads Mk rows of the smaller
    Wv); an unmodelled instruction or any other emulator error is no catch."""
    spec = load_manifest(None, mutants=True).by_name(kernel)
    try:
        r = run_kernel(spec, arch, K=512)
    except OutOfBounds as exc:
        assert kernel in str(exc)
        return
    assert not r.ok, f"{kernel} on {arch} matched the oracle (error {r.error:.2e})"
