"""What a launch reports: its dynamic instruction counts, by class and by wave."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass
class LaunchStats:
    """Dynamic instruction counts of one launch.  ``counts``: wave-instructions per class
    summed over the launch; ``per_wave``: the same divided by the number of waves;
    ``per_wave_counts``: exact per-wave totals by class ([class][wave])."""

    counts: dict[str, int]
    waves: int
    wave_instructions: int
    seconds: float
    per_wave_counts: dict[str, list[int]] = field(default_factory=dict)
    # launch_many's remembered batch: each launch's stats
    batch: list[LaunchStats] = field(default_factory=list)

    @property
    def per_wave(self) -> dict[str, float]:
        return {k: v / max(self.waves, 1) for k, v in self.counts.items()}

    @property
    def rate(self) -> float:
        """Wave-instructions per second."""
        return self.wave_instructions / self.seconds if self.seconds > 0 else 0.0

    def copy(self) -> LaunchStats:
        """A copy whose dicts and lists are its own (a replayed launch hands one out per
        replay: a caller that edits its stats cannot change the remembered ones)."""
        return replace(self, counts=dict(self.counts),
                       per_wave_counts={k: list(v) for k, v in self.per_wave_counts.items()},
                       batch=[b.copy() for b in self.batch])

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "waves": self.waves,
                "wave_instructions": self.wave_instructions, "seconds": self.seconds,
                "per_wave_counts": {k: list(v) for k, v in self.per_wave_counts.items()},
                "batch": [b.to_json() for b in self.batch]}

    @classmethod
    def from_json(cls, data: Any) -> LaunchStats:
        """The stats ``to_json`` wrote; ``ValueError`` for anything else (a damaged cache
        entry is then not used)."""
        if not isinstance(data, dict) or set(data) != {
                "counts", "waves", "wave_instructions", "seconds", "per_wave_counts", "batch"}:
            raise ValueError("not launch stats")
        counts, pwc, batch = data["counts"], data["per_wave_counts"], data["batch"]
        if not (isinstance(counts, dict) and isinstance(pwc, dict) and isinstance(batch, list)):
            raise ValueError("not launch stats")
        if not all(isinstance(k, str) and type(v) is int for k, v in counts.items()):
            raise ValueError("launch stats: counts are not integers by class")
        if not all(isinstance(k, str) and isinstance(v, list) and
                   all(type(x) is int for x in v) for k, v in pwc.items()):
            raise ValueError("launch stats: per-wave counts are not integer lists")
        waves, total, secs = data["waves"], data["wave_instructions"], data["seconds"]
        if type(waves) is not int or type(total) is not int or \
                not isinstance(secs, int | float) or isinstance(secs, bool):
            raise ValueError("launch stats: waves, wave_instructions or seconds malformed")
        return cls(counts=dict(counts), waves=waves, wave_instructions=total,
                   seconds=float(secs), per_wave_counts={k: list(v) for k, v in pwc.items()},
                   batch=[cls.from_json(b) for b in batch])
