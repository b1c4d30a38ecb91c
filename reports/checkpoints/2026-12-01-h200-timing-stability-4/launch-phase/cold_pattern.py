"""The launch-phase diagnostic of section 3c: one cold cell (qt=44 against qt=6, R=8),
timed 3 times over the same buffers with 6 runs each, at 100 iterations and at the next
multiple of 2 x the copy count; prints each run's ratio and writes, per run, the median
of each (arm, ABBA position) stratum to $OUT/diag.json.  On a CUDA host, from the
repository root:

    PYTHONPATH=. python3 \
        reports/checkpoints/2026-12-01-h200-timing-stability-4/launch-phase/cold_pattern.py \
        4096x5120

before.json was written by the harness before the launch-phase segments (main at
6162fad), after.json with them (2aab7ba).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np

from hqval.backends import get
from hqval.manifest import load_manifest
from hqval.timing import stats
from hqval.timing.bench import device_facts, mode_config
from hqval.timing.gemv import Shape, setup_gemv
from hqval.timing.harness import TimingConfig, filler_for, time_pair


def main(shapes: list[str]) -> None:
    be = get("cuda", "sm_90")
    facts = device_facts(be, "sm_90")
    m = load_manifest(None)
    v1, v2 = m.by_name("gemv_hfq4g256_r8"), m.by_name("gemv_mq4g256v2_r8")
    filler = filler_for(be)
    out: dict[str, Any] = {}
    for text in shapes:
        shape = Shape.parse(text)
        a = setup_gemv(be, v1, shape, "cold", facts.llc_bytes, 0)
        b = setup_gemv(be, v2, shape, "cold", facts.llc_bytes, 0)
        copies = len(a.weights)
        multiple = -(-100 // (2 * copies)) * 2 * copies
        for name, iterations in (("default_100", 100), (f"multiple_{multiple}", multiple)):
            for rep in range(3):
                cfg = mode_config(TimingConfig(warmup=32, iterations=iterations, runs=6),
                                  "cold")
                p = time_pair(be, a.arm, b.arm, cfg, filler)
                rr = [stats.run_ratio(x, y) for x, y in zip(p.runs_a, p.runs_b, strict=True)]
                # per run: A first (even i), A second (odd i), B first (odd i), B second
                pos = [[float(np.median(np.asarray(x)[i::2])) for i in (0, 1)]
                       + [float(np.median(np.asarray(y)[i::2])) for i in (1, 0)]
                       for x, y in zip(p.runs_a, p.runs_b, strict=True)]
                out.setdefault(text, {}).setdefault(name, []).append(
                    {"run_ratios": rr, "pos": pos, "copies": copies})
                print(text, name, rep, "copies", copies, " ".join(f"{r:.4f}" for r in rr),
                      flush=True)
        for s in (a, b):
            s.free(be)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "diag.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1:])
