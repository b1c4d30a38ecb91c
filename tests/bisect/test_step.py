"""The kernels a bisect step builds for a cell: its own, its baseline and the decode GEMV
its prefill or fallback check runs (the residual one for a residual GEMM)."""

from __future__ import annotations

import pytest

from hqval.bisect.cells import parse
from hqval.bisect.step import _needed
from hqval.manifest import load_manifest
from hqval.matrix import load_arches

MANIFEST = load_manifest(None)
ARCHES = load_arches()


@pytest.mark.parametrize(("check", "arch"), [("fallback", "gfx1030"),
                                             ("prefill_parity", "gfx1100")])
@pytest.mark.parametrize("gemm", ["gemm_mq4g256v2_wmma_gfx11",
                                  "gemm_mq4g256v2_wmma_gfx11_residual"])
def test_a_gemm_cell_builds_the_decode_its_check_runs(check: str, arch: str, gemm: str
                                                      ) -> None:
    target = parse(f"{check}[{gemm}|{arch}|emu]")
    assert target is not None
    spec = next(k for k in MANIFEST.kernels if k.name == gemm)
    decodes = [k for k in _needed(MANIFEST, spec, ARCHES[arch], target) if k.kind == "gemv"]
    assert len(decodes) == 1 and decodes[0].qt == 44
    assert decodes[0].residual == spec.residual
