"""hqval: cross-architecture validation and benchmarking for 4-bit quantized RDNA kernels."""

from pathlib import Path

# The release: it changes whenever users see a change (CHANGELOG.md, one section each).
__version__ = "0.2.0"


def suite_dir(name: str) -> Path:
    """The suite's own ``matrices`` or ``kernels`` directory: the copy an installed wheel
    carries inside the package (``hqval/_suite/NAME``, put there by setup.py's build
    step), else the checkout's, beside the package (a source tree or an editable install).
    Every module finds the suite's files through this, so a plain ``pip install .`` runs
    from anywhere."""
    package = Path(__file__).resolve().parent
    shipped = package / "_suite" / name
    return shipped if shipped.is_dir() else package.parent / name


# Version of the on-disk results schema (envelope + rows); bump with a migration in
# hqval.results.store when a row or envelope field changes meaning.
# 2: HFQ4G256 is the engine's qt=6 (schema 1 called it qt=1, the engine's F16).
# 3: the envelope names the run (run_id); rows carry it and the code object they judged.
SCHEMA_VERSION = 3
