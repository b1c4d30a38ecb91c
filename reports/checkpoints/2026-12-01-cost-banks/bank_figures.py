"""Figures of README.md section 2: section 6's gfx1030 cells predicted with and without
the VGPR-bank term, and under the SGPR-pair reading of the same source, which the model
does not use.  From the repository root:

    PYTHONPATH=. python3 reports/checkpoints/2026-12-01-cost-banks/bank_figures.py

The two engine pairs need the manifests of README.md under /tmp/costeng (sources outside
the repository); without them only the suite pair is printed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hqval.manifest import load_manifest
from hqval.matrix import load_arches
from hqval.timing import cost
from hqval.timing.gemv import Shape

PAIRS = [
    ("suite", None, "gemv_hfq4g256_r1", "gemv_mq4g256v2_r1"),
    ("engine generic", "/tmp/costeng/real.yaml", "eng_v1", "eng_real_v2"),
    ("engine gfx1030.v1", "/tmp/costeng/rdna2v1.yaml", "eng_rdna2v1_v1", "eng_rdna2v1_v2"),
]


def sgpr_pair_stall(op: cost.LoopOp) -> int:
    """The source's SGPR rule too: 8 SGPR banks, allocated in pairs (s0:s1 bank 0,
    s2:s3 bank 1, ...), one dword each a cycle, beside the 4 VGPR banks."""
    if op.kind not in ("valu", "trans"):
        return 0
    per: dict[tuple[str, int], int] = {}
    for r in set(op.src):
        if r[1:].isdigit() and r[0] in "vs":
            bank = (r[0], int(r[1:]) % 4 if r[0] == "v" else int(r[1:]) // 2 % 8)
            per[bank] = per.get(bank, 0) + 1
    return max(per.values(), default=1) - 1


def issue_with_sgpr_pairs(c: cost.KernelCost, shape: Shape, rates: cost.ArchRates) -> float:
    assert c.loop is not None
    per_group_row = dict(c.per_group_row)
    per_group_row["VALU"] += sum(sgpr_pair_stall(o) for o in c.loop.ops) / \
        c.loop.group_rows_per_iter
    return (shape.M * (shape.K // 256) * cost.issue_slots(per_group_row, rates.rule)
            + shape.M * cost.issue_slots(c.per_block, rates.rule))


def main() -> None:
    rates = cost.ArchRates.from_arch(load_arches()["gfx1030"])
    no_banks = dataclasses.replace(
        rates, latencies=dataclasses.replace(rates.latencies, vgpr_banks=None))
    for label, manifest, a, b in PAIRS:
        if manifest is not None and not Path(manifest).is_file():
            print(f"{label}: {manifest} not found, skipped")
            continue
        m = load_manifest(Path(manifest) if manifest else None)
        ca, cb = (cost.measure_cost(m.by_name(n), "gfx1030") for n in (a, b))
        parts = [label]
        for c in (ca, cb):
            parts.append(f"{c.per_group_row['VALU']:.2f} VALU + "
                         f"{cost.bank_stalls_per_group_row(c, rates.latencies):.2f} bank")
        for text in ("4096x5120", "4096x17408"):
            shape = Shape.parse(text)
            r = cost.predict_ratio(ca, cb, shape, rates, "hot")
            r0 = cost.predict_ratio(ca, cb, shape, no_banks, "hot")
            alt = issue_with_sgpr_pairs(cb, shape, rates) / issue_with_sgpr_pairs(ca, shape,
                                                                                  rates)
            parts.append(f"{text}: {r0.ratio:.4f} -> {r.ratio:.4f} (v1 {r.v1.t_us:.2f} us, "
                         f"{r.v1.bound}-bound); SGPR pairs too: {alt:.4f}")
        print(" | ".join(parts))


if __name__ == "__main__":
    main()
