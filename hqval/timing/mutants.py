"""Timing mutants: the timing twin of the kill matrix.

A timing mutant is a real kernel built with ``HQ_TIMING_SLOW = k`` (kernels/include/
hq4_gemv.h): it makes a redundant second pass (reload, decode, dot, discarded through an
opaque zero) over k/256 of its groups, on every backend (AMD per-weight path, NVIDIA
per-weight and tensor-core paths).  Its outputs are unchanged -- it must pass every
correctness check -- and it is slower by an amount set by ``k``.  What that amount is in
per cent depends on the device and shape, so it is never assumed: each mutant's true
slowdown is measured against its unslowed twin (the real kernel, the same code object
``k = 0`` compiles to) in the same run.  The gate (``change_max``) and ``hqval compare``
must flag it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

DEFINE = "HQ_TIMING_SLOW"
# k is out of 256 groups.
SLOW_DENOMINATOR = 256


def mutant_name(real: str, slow: int) -> str:
    return f"{real}+slow{slow}"


def timing_mutant(spec: Any, slow: int) -> Any:
    """The timing mutant of manifest kernel ``spec`` redoing ``slow``/256 of its groups."""
    if not 1 <= slow <= SLOW_DENOMINATOR:
        raise ValueError(f"timing mutant slow={slow}: give 1..{SLOW_DENOMINATOR} "
                         f"(groups redone out of {SLOW_DENOMINATOR})")
    if spec.kind not in ("gemv",) or spec.is_mutant:
        raise ValueError(f"{spec.name}: timing mutants are made of real GEMV kernels")
    if any(k == DEFINE for k, _ in spec.defines):
        raise ValueError(f"{spec.name}: already defines {DEFINE}")
    defines = (*spec.defines, (DEFINE, str(slow)))
    if not any(k == "HQ_GEMV_ONLY" for k, _ in spec.defines):
        # only the mutated format's kernels in the translation unit (a third of the compile)
        defines = (*defines, ("HQ_GEMV_ONLY", str(spec.qt)))
    return dataclasses.replace(
        spec, name=mutant_name(spec.name, slow), defines=defines,
        mutant_of=spec.name,
        mutation=f"redundant second pass over {slow}/{SLOW_DENOMINATOR} of the groups "
                 "(same outputs, slower)",
        expected_killer="timing")


def parse_slow_list(text: str) -> list[int]:
    """``"4,8,16"`` -> [4, 8, 16] (each 1..256)."""
    try:
        out = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--timing-mutants {text!r}: comma-separated integers 1..256, "
                         "e.g. 4,8,16") from None
    bad = [v for v in out if not 1 <= v <= SLOW_DENOMINATOR]
    if bad or not out:
        raise ValueError(f"--timing-mutants {text!r}: each k must be 1..{SLOW_DENOMINATOR} "
                         "(groups redone out of 256), e.g. 4,8,16")
    return sorted(set(out))
