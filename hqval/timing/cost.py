"""Cost model: predict the v2/v1 GEMV time ratio per arch, shape and cache state.

Inputs, none fitted to any measurement:

- instruction counts per (256-weight group x row), by class, measured on the RDNA
  emulator as the slope between two K values on the kernel's unrolled main loop (so
  per-row overhead, reduction and store drop out; the intercept is kept per row);
- the arch's rates from ``matrices/arches.yaml``: VRAM bandwidth, last-level cache size,
  CU count and clock.  Issue rules: on RDNA each SIMD32 (two per CU) can issue, per clock
  and from different waves, one VALU, one SALU, one vector-memory and one scalar-memory
  instruction, so the issue time is that of the busiest pipe (``max`` over VALU, SALU,
  VMEM, SMEM), not their sum; RDNA3's dual issue (VOPD) needs no rule of its own, since
  the emulator counts a ``v_dual_*`` pair as the one instruction it issues as.  On NVIDIA
  each of the SM's four warp schedulers issues one instruction of any kind per clock
  (the classes share the slot: their sum).

Time of one kernel = max(memory, issue):

- memory = bytes moved / VRAM bandwidth, unless the weights are cache-resident (hot mode
  and weights <= LLC), where the LLC bandwidth is unknown to the matrix and memory is
  taken as not binding: the kernel is then predicted compute-bound, section 6's gfx1030
  mechanism;
- issue = (group-rows x the binding pipe's instructions per group-row + blocks x the same
  per block) / issue rate.  Latency (too few waves to hide a dependency chain) is not
  modelled: see reports/checkpoints/2026-12-01-h200-timing-stability for what that leaves
  unexplained on gfx1030.

v2/v1 = time(v2) / time(v1).  A cell is flagged ``exposed`` when the prediction is
issue-bound, i.e. v2's extra header VALU work shows in the time.  For NVIDIA devices the
counts are the RDNA ones (a proxy: the same source compiled for gfx1100), which the
prediction records; the H200 checkpoint shows how far that proxy is off.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hqval.timing.gemv import Shape, gemv_bytes

# Instruction classes that occupy an issue slot (LDS and branches are negligible here).
ISSUE_CLASSES = ("VALU", "SALU", "SMEM", "VMEM")
# Issue rules: "pipes" -- each class has its own issue port (RDNA: one VALU, SALU, VMEM and
# SMEM per SIMD per clock, from different waves): the busiest class binds; "shared" -- one
# instruction of any class per scheduler per clock (NVIDIA): the classes add up.
PIPES, SHARED = "pipes", "shared"
# K values of the slope measurement: 8 and 16 groups, both whole multiples of the
# kernels' unroll (4 or 8), so both run only the main loop.
SLOPE_K = (2048, 4096)


@dataclass(frozen=True)
class KernelCost:
    """Wave instructions per group-row (slope) and per block of R rows (intercept: setup,
    wave reduction, stores), by class."""

    kernel: str
    arch: str
    per_group_row: dict[str, float]
    per_block: dict[str, float]

    def issue_per_group_row(self, rule: str = SHARED) -> float:
        return issue_slots(self.per_group_row, rule)

    def binding_class(self, rule: str = PIPES) -> str:
        if rule == SHARED:
            return "all"
        return max(ISSUE_CLASSES, key=lambda c: self.per_group_row.get(c, 0.0))


def issue_slots(counts: dict[str, float], rule: str) -> float:
    """Issue slots per SIMD (RDNA) or scheduler (NVIDIA) that ``counts`` occupy."""
    if rule == PIPES:
        return max(counts.get(c, 0.0) for c in ISSUE_CLASSES)
    if rule == SHARED:
        return sum(counts.get(c, 0.0) for c in ISSUE_CLASSES)
    raise ValueError(f"issue rule {rule!r}: {PIPES} or {SHARED}")


@dataclass(frozen=True)
class ArchRates:
    name: str
    vram_gbps: float
    llc_bytes: int
    issue_per_s: float  # wave instructions per second, whole device
    source: str
    rule: str = SHARED  # issue rule (PIPES on RDNA, SHARED on NVIDIA)

    @classmethod
    def from_arch(cls, arch: Any) -> ArchRates:
        """RDNA arch from arches.yaml: 2 SIMD32 per CU, one wave instruction per clock each."""
        return cls(arch.name, float(arch.vram_gbps), int(arch.last_level_cache_bytes),
                   arch.cu_count * 2 * arch.boost_mhz * 1e6,
                   f"arches.yaml {arch.name}: {arch.cu_count} CU x 2 SIMD x {arch.boost_mhz} "
                   "MHz; per-pipe issue", PIPES)

    @classmethod
    def from_device(cls, device: Any, sm_clock_mhz: float) -> ArchRates:
        """NVIDIA device from arches.yaml's devices: 4 warp schedulers per SM."""
        return cls(device.arch, float(device.hbm_gbps), int(device.l2_bytes),
                   device.sm_count * 4 * sm_clock_mhz * 1e6,
                   f"arches.yaml devices.{device.name}: {device.sm_count} SM x 4 x "
                   f"{sm_clock_mhz:g} MHz")


@dataclass(frozen=True)
class Prediction:
    t_mem_us: float
    t_issue_us: float
    resident: bool

    @property
    def t_us(self) -> float:
        return max(self.t_mem_us, self.t_issue_us)

    @property
    def bound(self) -> str:
        return "issue" if self.t_issue_us >= self.t_mem_us else "memory"


@dataclass(frozen=True)
class RatioPrediction:
    v1: Prediction
    v2: Prediction
    counts_source: str

    @property
    def ratio(self) -> float:
        return self.v2.t_us / self.v1.t_us

    @property
    def exposed(self) -> bool:
        """v2's extra VALU work shows: the candidate is predicted issue-bound."""
        return self.v2.bound == "issue"

    def to_dict(self) -> dict[str, Any]:
        return {"predicted_ratio": self.ratio, "predicted_us_a": self.v1.t_us,
                "predicted_us_b": self.v2.t_us, "predicted_bound_b": self.v2.bound,
                "predicted_resident": self.v2.resident, "predicted_exposed": self.exposed,
                "counts_source": self.counts_source}


def resident(shape: Shape, rates: ArchRates, mode: str) -> bool:
    """Weights stay in the LLC between launches: hot mode and they fit."""
    return mode == "hot" and rates.llc_bytes >= shape.M * (shape.K // 256) * 136


def predict(cost: KernelCost, shape: Shape, rates: ArchRates, mode: str,
            rows_per_block: int = 1) -> Prediction:
    group_rows = shape.M * (shape.K // 256)
    is_resident = resident(shape, rates, mode)
    t_mem = 0.0 if is_resident else gemv_bytes(shape) / (rates.vram_gbps * 1e9)
    blocks = -(-shape.M // rows_per_block)
    per_block = issue_slots(cost.per_block, rates.rule)
    instructions = group_rows * cost.issue_per_group_row(rates.rule) + blocks * per_block
    t_issue = instructions / rates.issue_per_s
    return Prediction(t_mem * 1e6, t_issue * 1e6, is_resident)


def predict_ratio(v1: KernelCost, v2: KernelCost, shape: Shape, rates: ArchRates, mode: str,
                  rows_per_block: int = 1) -> RatioPrediction:
    src = f"emulator counts on {v2.arch}" + (
        "" if v2.arch == rates.name else f" (proxy for {rates.name})")
    return RatioPrediction(predict(v1, shape, rates, mode, rows_per_block),
                           predict(v2, shape, rates, mode, rows_per_block), src)


def slope(counts_lo: dict[str, int], counts_hi: dict[str, int], groups_lo: int,
          groups_hi: int, rows: int, waves: int) -> tuple[dict[str, float], dict[str, float]]:
    """(per group-row, per wave) counts from two launches that differ only in K, each of
    ``waves`` waves covering ``rows`` rows in all."""
    if groups_hi <= groups_lo or rows <= 0:
        raise ValueError("slope needs two K values with more groups in the second launch")
    keys = set(counts_lo) | set(counts_hi)
    per_gr = {k: (counts_hi.get(k, 0) - counts_lo.get(k, 0)) / ((groups_hi - groups_lo) * rows)
              for k in keys}
    per_wave = {k: (counts_lo.get(k, 0) - per_gr[k] * groups_lo * rows) / waves for k in keys}
    return per_gr, per_wave


_CACHE: dict[tuple[str, str], KernelCost] = {}


def measure_cost(spec: Any, arch: str = "gfx1100", seed: int = 0) -> KernelCost:
    """Run ``spec`` on the emulator at two K values (one block of R rows) and take the slope."""
    key = (spec.name, arch)
    if key in _CACHE:
        return _CACHE[key]
    from hqval.backends import get
    from hqval.formats import by_qt

    be = get("emu", arch)
    program = be.load(spec)
    R = spec.rows_per_block
    counts = []
    for K in SLOPE_K:
        w = np.random.default_rng(seed).standard_normal((R, K)).astype(np.float32)
        blob = by_qt(spec.qt).encode(w)
        x = np.random.default_rng(seed + 1).standard_normal(K).astype(np.float32)
        bw, bx, by = be.alloc(blob.nbytes), be.alloc(x.nbytes), be.alloc(4 * R)
        be.copy_in(bw, blob)
        be.copy_in(bx, x)
        info = be.launch(program, (1, 1, 1), (spec.block, 1, 1), [bw, bx, by, R, K])
        if not info.counts:
            raise RuntimeError(f"{spec.name}: the emulator reported no instruction counts")
        counts.append(info.counts)
        for b in (bw, bx, by):
            be.free(b)
    per_gr, per_block = slope(counts[0], counts[1], SLOPE_K[0] // 256, SLOPE_K[1] // 256, R, 1)
    cost = KernelCost(spec.name, arch, per_gr, per_block)
    _CACHE[key] = cost
    return cost


def save_costs(costs: list[KernelCost], path: str) -> None:
    """Write measured costs as JSON (the device run reads them: no emulator there)."""
    import json

    Path(path).write_text(json.dumps([asdict(c) for c in costs], indent=1, sort_keys=True)
                          + "\n")


def load_costs(path: str) -> dict[str, KernelCost]:
    import json

    try:
        data = json.loads(Path(path).read_text())
        costs = [KernelCost(d["kernel"], d["arch"], dict(d["per_group_row"]),
                            dict(d["per_block"])) for d in data]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costs file written by `hqval bench --predict "
                         f"--costs-out` ({exc})") from None
    return {c.kernel: c for c in costs}
