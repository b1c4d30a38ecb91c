"""Sample order and cache-state sizing for interleaved timing.

ABBA: iteration ``i`` times A then B when ``i`` is even and B then A when it is odd, so the
sample stream reads A B B A A B B A ...  Neither arm always runs first, and each arm
follows the other as often as it follows itself, which cancels first-launch and
clock-ramp order effects (measured on an H200: two kernels reading identical bytes
differed by 30% on a cache-resident shape with A always first).

Hot mode primes: each timed launch is preceded by an untimed launch of the same arm on
the same copy.  Unprimed, ABBA makes half of each arm's samples follow the other arm, whose
weights have just displaced its own from the cache whenever the two arms' weights together
exceed it: on the H200 at 17408x5120 (47 MB a weight set, 50 MB of L2) those samples ran
3-4% slower than the ones following their own arm, each arm's samples fell into two modes,
and the pooled median sat in the gap between them, where a few samples move it by 1-2%
(reports/checkpoints/2026-12-01-h200-timing-stability-2/).

Cold mode rotates among copies of the weights: between two reads of one copy the device
streams the other copies, whose total must exceed the last-level cache for the copy to
have been evicted.  Replacement is not perfect LRU, hence a safety factor of two.
"""

from __future__ import annotations

import math
from typing import Literal

Mode = Literal["hot", "cold"]
MODES: tuple[Mode, ...] = ("hot", "cold")

# Other copies streamed between two reads of one copy, as a multiple of the LLC size.
COLD_EVICTION_FACTOR = 2.0


def abba_order(iterations: int) -> list[tuple[int, int]]:
    """Arm order per iteration: (0, 1) = A then B, (1, 0) = B then A."""
    if iterations < 2 or iterations % 2:
        raise ValueError(
            f"iterations {iterations}: ABBA needs an even count >= 2 so both orders occur "
            "equally often (e.g. 100)"
        )
    return [(0, 1) if i % 2 == 0 else (1, 0) for i in range(iterations)]


# Hot mode's weight copies: run r reads copy r (mod HOT_COPIES), primed, so a run is hot on
# one buffer and the runs average over where the buffers landed (on the H200 two buffers
# of one kernel sat up to 0.7% apart hot at 47 MB, the same from re-run to re-run).
HOT_COPIES = 3

# Untimed launches of the same arm and copy before each timed sample, per mode.
PRIMES: dict[Mode, int] = {"hot": 1, "cold": 0}


def primes(mode: Mode) -> int:
    """Untimed same-arm launches before each timed sample: hot 1 (the sample reads what its
    own arm just read), cold 0 (a primer would make the copy it reads hot)."""
    if mode not in PRIMES:
        raise ValueError(f"mode {mode!r}: choose hot or cold")
    return PRIMES[mode]


def rotation_copies(weight_bytes: int, llc_bytes: int, mode: Mode) -> int:
    """How many copies of one arm's weights to rotate through.

    Hot: HOT_COPIES, one per run (hqval.timing.harness.TimingConfig.copy_per_run): within
    a run the same buffer every launch, the weights as cached as they can be.
    Cold: the smallest n >= 2 with (n - 1) * weight_bytes >= COLD_EVICTION_FACTOR * llc.
    """
    if weight_bytes <= 0:
        raise ValueError(f"weight_bytes {weight_bytes} must be positive")
    if mode == "hot":
        return HOT_COPIES
    if mode != "cold":
        raise ValueError(f"mode {mode!r}: choose hot or cold")
    if llc_bytes <= 0:
        raise ValueError(
            f"cold mode needs the last-level cache size; got {llc_bytes} B "
            "(set it in matrices/arches.yaml or read it from the device)"
        )
    return max(2, 1 + math.ceil(COLD_EVICTION_FACTOR * llc_bytes / weight_bytes))


def copy_sequence(iterations: int, copies: int, warmup: int = 0) -> list[int]:
    """Copy index for each launch of one arm: round-robin, continuing after the warm-ups
    so the first timed launch never re-reads the copy the last warm-up read."""
    return [(warmup + i) % copies for i in range(iterations)]
