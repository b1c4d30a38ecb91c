"""hqval: cross-architecture validation and benchmarking for 4-bit quantized RDNA kernels."""

__version__ = "0.1.0"

# Version of the on-disk results schema (envelope + rows); bump with a migration in
# hqval.results.store when a row or envelope field changes meaning.
SCHEMA_VERSION = 1
