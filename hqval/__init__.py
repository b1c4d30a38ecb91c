"""hqval: cross-architecture validation and benchmarking for 4-bit quantized RDNA kernels."""

__version__ = "0.1.0"

# Version of the on-disk results schema (envelope + rows); bump with a migration in
# hqval.results.store when a row or envelope field changes meaning.
# 2: HFQ4G256 is the engine's qt=6 (schema 1 called it qt=1, the engine's F16).
SCHEMA_VERSION = 2
