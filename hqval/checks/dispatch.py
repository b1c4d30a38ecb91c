"""Prefill dispatch: batched WMMA GEMM where the arch has the WMMA generation the format
needs, per-token decode (GEMV) everywhere else.

Mirrors the design note (status line, sections 1b and 9): qt=44 has dense WMMA prefill on
gfx11 and gfx12; qt=45 on gfx12 only ("do not claim gfx11 WMMA for qt=45"); gfx10 has no
WMMA at all; "unsupported batched prefill falls back to per-token decode rather than
inventing a WMMA route".  The table is the policy; the manifest only says which kernels
exist, so a manifest entry that claims more (a qt=45 GEMM for gfx11) is never routed to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch


# qt -> the WMMA generations with a batched-prefill GEMM.  qt=6/13 are the v1 baselines the
# qt=44 WMMA port mirrors (HasWmma: gfx11 + gfx12).
PREFILL_WMMA: dict[int, frozenset[str]] = {
    6: frozenset({"gfx11", "gfx12"}),
    13: frozenset({"gfx11", "gfx12"}),
    44: frozenset({"gfx11", "gfx12"}),
    45: frozenset({"gfx12"}),
}

Path = Literal["gemm", "per_token_gemv"]


class NoRoute(LookupError):
    """The manifest has no kernel that can serve this (qt, arch) at all."""


@dataclass(frozen=True)
class Route:
    path: Path
    kernel: KernelSpec
    reason: str


def wmma_prefill_allowed(qt: int, arch: Arch) -> bool:
    return arch.wmma in PREFILL_WMMA.get(qt, frozenset())


def _real(manifest: Manifest) -> list[KernelSpec]:
    return [k for k in manifest.kernels if not k.is_mutant]


def decode_kernel(manifest: Manifest, qt: int, arch: Arch, *, residual: bool = False
                  ) -> KernelSpec:
    """The per-token decode GEMV for ``qt`` on ``arch``: a plain GEMV whose ``residual``
    (``y +=``) is the one asked for, with the arch's ``gemv_rows_default`` rows per block
    when built, else the fewest rows.  A residual projection's decode is the residual
    GEMV, never the plain one: the two are different kernels and can fail apart (one can
    spill where the other fits, or overwrite ``y`` instead of adding)."""
    cands = [k for k in _real(manifest)
             if k.kind == "gemv" and k.qt == qt and k.residual == residual
             and k.applies_to(arch)]
    if not cands:
        what = "residual (y +=) decode GEMV" if residual else "decode GEMV"
        raise NoRoute(f"no {what} for qt={qt} on {arch.name} in the manifest")
    return by_decode_preference(cands, arch)[0]


def by_decode_preference(cands: list[KernelSpec], arch: Arch) -> list[KernelSpec]:
    """Decode kernels in the order the engine would pick one for ``arch``: its
    ``gemv_rows_default`` rows per block first, then the fewest rows."""
    rows = getattr(arch, "gemv_rows_default", None)  # absent on toolchain's fallback table
    return sorted(cands, key=lambda k: (k.rows_per_block != rows, k.rows_per_block))


def per_token_reference(manifest: Manifest, spec: KernelSpec, arch: Arch
                        ) -> tuple[KernelSpec, bool]:
    """The decode GEMV that prefill parity compares the GEMM ``spec`` with, and whether it
    adds the residual itself.  A residual GEMM is compared with the residual GEMV where the
    manifest has one; else with the plain GEMV, the residual added on the host (a
    reference, not a path: the fallback check never does that)."""
    if spec.residual:
        try:
            return decode_kernel(manifest, spec.qt, arch, residual=True), True
        except NoRoute:
            pass
    return decode_kernel(manifest, spec.qt, arch), False


def prefill_route(
    manifest: Manifest, qt: int, arch: Arch, batch_tile: int | None = None, *,
    residual: bool = False,
) -> Route:
    """How a batch of tokens is prefilled for ``qt`` on ``arch``, for a projection that
    writes ``y`` (``residual=False``) or adds to it (``residual=True``)."""
    if wmma_prefill_allowed(qt, arch):
        gemms = [k for k in _real(manifest)
                 if k.kind == "gemm" and k.qt == qt and k.residual == residual
                 and k.applies_to(arch)
                 and (batch_tile is None or k.batch_tile == batch_tile)]
        # Prefer the kernel written for this exact generation over a generic one.
        gemms.sort(key=lambda k: (k.requires != f"wmma_{arch.wmma}", k.batch_tile))
        if gemms:
            return Route("gemm", gemms[0], f"{arch.name} has {arch.wmma} WMMA for qt={qt}")
        reason = f"no qt={qt} {'residual ' if residual else ''}GEMM built for {arch.name}"
    else:
        have = ", ".join(sorted(PREFILL_WMMA.get(qt, frozenset()))) or "no arch"
        reason = (f"qt={qt} batched prefill needs WMMA {have}; {arch.name} has "
                  f"{arch.wmma if arch.wmma != 'none' else 'no WMMA'}")
    return Route("per_token_gemv", decode_kernel(manifest, qt, arch, residual=residual),
                 reason)
