"""Prefill dispatch against the suite's real manifest and arch table (design note rules)."""

from __future__ import annotations

import pytest

from hqval.checks.dispatch import (
    PREFILL_WMMA,
    NoRoute,
    by_decode_preference,
    decode_kernel,
    per_token_reference,
    prefill_route,
    wmma_prefill_allowed,
)
from hqval.manifest import Manifest, load_manifest
from hqval.matrix import load_arches

ARCHES = load_arches()
MANIFEST = load_manifest(None)


@pytest.mark.parametrize(("qt", "arch", "path"), [
    (44, "gfx1100", "gemm"), (44, "gfx1151", "gemm"), (44, "gfx1201", "gemm"),
    (45, "gfx1201", "gemm"), (45, "gfx1100", "per_token_gemv"), (45, "gfx1151", "per_token_gemv"),
    (44, "gfx1030", "per_token_gemv"), (44, "gfx1010", "per_token_gemv"),
    (6, "gfx1010", "per_token_gemv"), (6, "gfx1100", "gemm"),
])
def test_route_follows_the_design_note(qt: int, arch: str, path: str) -> None:
    route = prefill_route(MANIFEST, qt, ARCHES[arch])
    assert route.path == path, route.reason
    assert route.kernel.qt == qt and route.kernel.applies_to(ARCHES[arch])
    assert not route.kernel.is_mutant


def test_gfx12_prefers_its_own_generation_and_decode_uses_default_rows() -> None:
    route = prefill_route(MANIFEST, 44, ARCHES["gfx1201"])
    assert route.kernel.requires == "wmma_gfx12"
    fallback = prefill_route(MANIFEST, 44, ARCHES["gfx1010"])
    assert fallback.kernel.rows_per_block == ARCHES["gfx1010"].gemv_rows_default
    assert fallback.kernel.kind == "gemv" and not fallback.kernel.residual
    assert "no WMMA" in fallback.reason


def test_qt45_is_never_claimed_on_gfx11() -> None:
    assert PREFILL_WMMA[45] == frozenset({"gfx12"})
    assert not any(wmma_prefill_allowed(45, a) for a in ARCHES.values() if a.wmma == "gfx11")
    assert not any(wmma_prefill_allowed(q, a) for q in PREFILL_WMMA
                   for a in ARCHES.values() if a.wmma == "none")


def test_batch_tile_request_selects_that_tile() -> None:
    route = prefill_route(MANIFEST, 44, ARCHES["gfx1100"], batch_tile=4)
    assert route.path == "gemm" and route.kernel.batch_tile == 4


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030"])
@pytest.mark.parametrize("qt", [6, 44, 45])
def test_a_residual_projection_routes_to_the_residual_decode(qt: int, arch: str) -> None:
    plain = prefill_route(MANIFEST, qt, ARCHES[arch])
    residual = prefill_route(MANIFEST, qt, ARCHES[arch], residual=True)
    assert plain.path == residual.path == "per_token_gemv"
    assert not plain.kernel.residual and residual.kernel.residual
    assert residual.kernel.kind == "gemv" and residual.kernel.qt == qt
    assert decode_kernel(MANIFEST, qt, ARCHES[arch], residual=True) == residual.kernel


def test_a_residual_gemm_is_routed_to_a_residual_gemm() -> None:
    assert prefill_route(MANIFEST, 44, ARCHES["gfx1100"], residual=True).kernel.residual
    assert not prefill_route(MANIFEST, 44, ARCHES["gfx1100"]).kernel.residual


def test_prefill_parity_compares_a_residual_gemm_with_the_residual_decode() -> None:
    arch = ARCHES["gfx1201"]
    gemm = next(k for k in MANIFEST.kernels if k.name == "gemm_mq4g256v2_wmma_gfx12_residual")
    kernel, adds = per_token_reference(MANIFEST, gemm, arch)
    assert kernel.residual and adds
    # a tree without residual GEMVs: the plain GEMV, the residual added on the host
    bare = Manifest(path=MANIFEST.path,
                    kernels=[k for k in MANIFEST.kernels if not (k.kind == "gemv" and k.residual)])
    kernel, adds = per_token_reference(bare, gemm, arch)
    assert not kernel.residual and not adds
    with pytest.raises(NoRoute, match="residual"):
        decode_kernel(bare, 44, arch, residual=True)


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1100", "gfx1201"])
def test_decode_kernels_are_ordered_as_the_engine_picks_them(arch: str) -> None:
    """The arch's gemv_rows_default rows per block first, then the fewest: one rule for the
    dense fallback (decode_kernel) and the multi-matrix per-token references."""
    a = ARCHES[arch]
    cands = [k for k in MANIFEST.kernels if k.kind == "gemv" and k.qt == 44
             and not k.residual and not k.is_mutant]
    ordered = by_decode_preference(list(reversed(cands)), a)
    assert ordered[0].rows_per_block == a.gemv_rows_default
    rest = [k.rows_per_block for k in ordered[1:]]
    assert rest == sorted(rest) and a.gemv_rows_default not in rest
    assert decode_kernel(MANIFEST, 44, a) == ordered[0]
