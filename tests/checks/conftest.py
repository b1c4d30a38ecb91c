"""Check contexts on the emulator for the check tests (real kernels, real code objects)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hqval.backends.emu import EmuBackend
from hqval.checks.cell import CheckContext
from hqval.manifest import Manifest, load_manifest, load_mutants
from hqval.matrix import load_arches

# The arches every check is exercised on: RDNA1, RDNA2, RDNA3 dGPU, RDNA3.5 APU, RDNA4.
ARCHES = ("gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201")


def real_manifest() -> Manifest:
    return load_manifest(None)


def mutant_manifest() -> Manifest:
    """Mutants together with the real kernels (baselines resolve among them)."""
    real = load_manifest(None)
    muts = load_mutants(None)
    return Manifest(path=muts.path, kernels=[*real.kernels, *muts.kernels])


_CONTEXTS: dict[tuple[str, str], CheckContext] = {}


@pytest.fixture(scope="session")
def emu_ctx() -> Callable[..., CheckContext]:
    """``emu_ctx(arch, mutants=False)``: one emulator context per arch, shared by the
    session so code objects load once."""
    def make(arch: str, mutants: bool = False) -> CheckContext:
        key = (arch, "mutants" if mutants else "real")
        if key not in _CONTEXTS:
            manifest = mutant_manifest() if mutants else real_manifest()
            _CONTEXTS[key] = CheckContext(backend=EmuBackend(arch), arch=load_arches()[arch],
                                          manifest=manifest)
        return _CONTEXTS[key]
    return make
