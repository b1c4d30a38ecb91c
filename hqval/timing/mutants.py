"""Timing mutants: the timing twin of the kill matrix.

A timing mutant is a real kernel built with one of two defines of kernels/include/
hq4_gemv.h, on every backend (AMD per-weight path, NVIDIA per-weight and tensor-core
paths); its outputs are unchanged -- it must pass every correctness check -- and it is
slower by an amount the define sets:

- ``slowK`` (``HQ_TIMING_SLOW = K``, 1..256): a redundant second pass (reload, decode,
  dot, discarded through an opaque zero) over K/256 of the groups, picked by a hash of
  (block, group).  The pick is a test in the group loop, which costs something of its own
  where the loop is issue-bound (on the H200, +1-2% already at K = 1).
- ``extraM`` (``HQ_TIMING_EXTRA = M``, 1..32): M redundant steps of work in every group
  (per-weight path: M value-preserving fmas a group-row; tensor cores: M mma a group on
  the group's own operands), the same in every warp and with no test in the loop: the
  fine-grained kind.  Its first steps hide in the loop's slack (on the H200 M = 1-4 were
  flat, M = 6 +2%), so it has no step near +1%.
- ``chainN`` (``HQ_TIMING_CHAIN = N``, 1..256): every lane ends its row with N dependent
  loads of words of its own row (cache hits, each waiting for the one before), folded in
  as +0.0f; no test and no work in the group loop, so nothing hides it and it adds N cache
  round trips after each warp's last group: the controllable small kind.

What either costs in per cent depends on device and shape, so it is never assumed: each
mutant's true slowdown is measured against its unslowed twin (the real kernel, the code
object a zero amount compiles to) in the same run.  The gate (``change_max``) and
``hqval compare`` must flag it.  Only kernels built on hq4_gemv.h know these defines.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

KINDS = {"slow": ("HQ_TIMING_SLOW", 256, "redundant second pass over {n}/256 of the groups"),
         "extra": ("HQ_TIMING_EXTRA", 32, "{n} redundant steps of work in every group"),
         "chain": ("HQ_TIMING_CHAIN", 256, "{n} dependent cached loads after each row")}
DEFINE = KINDS["slow"][0]
SLOW_DENOMINATOR = 256
_TOKEN = re.compile(r"(slow|extra|chain)?(\d+)")


def mutant_name(real: str, token: str) -> str:
    return f"{real}+{token}"


def parse_token(token: str | int) -> tuple[str, int]:
    """``"slow8"`` / ``"extra2"`` / ``"chain8"`` / ``8`` (= slow8) -> (kind, amount),
    range-checked."""
    m = _TOKEN.fullmatch(str(token).strip())
    if m is None:
        raise ValueError(f"timing mutant {token!r}: write slowK (K/256 of the groups redone, "
                         "1..256), extraM (M extra steps a group, 1..32) or chainN (N "
                         "dependent loads after each row, 1..256), e.g. chain8")
    kind, n = m.group(1) or "slow", int(m.group(2))
    hi = KINDS[kind][1]
    if not 1 <= n <= hi:
        raise ValueError(f"timing mutant {token!r}: {kind} takes 1..{hi}")
    return kind, n


def timing_mutant(spec: Any, token: str | int) -> Any:
    """The timing mutant ``token`` (see :func:`parse_token`) of manifest kernel ``spec``."""
    kind, n = parse_token(token)
    define, _, what = KINDS[kind]
    if spec.kind not in ("gemv",) or spec.is_mutant:
        raise ValueError(f"{spec.name}: timing mutants are made of real GEMV kernels")
    if any(k in (d for d, _, _ in KINDS.values()) for k, _ in spec.defines):
        raise ValueError(f"{spec.name}: already defines a timing mutant amount")
    defines = (*spec.defines, (define, str(n)))
    if not any(k == "HQ_GEMV_ONLY" for k, _ in spec.defines):
        # only the mutated format's kernels in the translation unit (a third of the compile)
        defines = (*defines, ("HQ_GEMV_ONLY", str(spec.qt)))
    return dataclasses.replace(
        spec, name=mutant_name(spec.name, f"{kind}{n}"), defines=defines,
        mutant_of=spec.name, mutation=what.format(n=n) + " (same outputs, slower)",
        expected_killer="timing")


def token_of(spec: Any) -> str | None:
    """The token a timing mutant was built with (None for other kernels)."""
    d = dict(spec.defines) if not isinstance(spec, dict) else spec
    for kind, (define, _, _) in KINDS.items():
        if define in d:
            return f"{kind}{d[define]}"
    return None


def parse_slow_list(text: str) -> list[str]:
    """``"4,extra2,slow8"`` -> ["extra2", "slow4", "slow8"] (a bare number is slowK)."""
    out = []
    for v in text.split(","):
        if v.strip():
            kind, n = parse_token(v)
            out.append(f"{kind}{n}")
    if not out:
        raise ValueError(f"--timing-mutants {text!r}: e.g. extra1,extra2,slow8")
    return sorted(set(out))
