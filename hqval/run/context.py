"""What every step of ``hqval run`` works over: the run's configuration, its typed
context (arches, manifests, the opened backends, the expected cells, the writer) and the
progress callbacks a step reports through.

A step is a plain function ``step(ctx: RunContext) -> StepResult`` (``hqval.run.steps``);
it appends its rows through ``ctx.writer`` and reports each finished cell to
``ctx.progress`` (``start(step, expected)``, ``cell(identity, status)``, ``finish(step,
summary)``), so the display never parses printed text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hqval.result import Row

if TYPE_CHECKING:
    from hqval.admission import Judged, Policy
    from hqval.backends.base import Backend
    from hqval.manifest import Manifest
    from hqval.matrix import Arch
    from hqval.results.store import RunWriter
    from hqval.toolchain import CompileResult

STEP_NAMES = ("compile", "audit", "checks", "mutants", "timing", "admit", "report")


class Progress(Protocol):
    """The callbacks a step reports through (``hqval.run.progress`` draws them)."""

    def start(self, step: str, expected: int) -> None:
        """``step`` begins; ``expected`` cells (over every arch) will be reported."""

    def cell(self, identity: str, status: str) -> None:
        """One cell finished: ``status`` is a row status (pass, fail, error, skipped,
        unsupported), ``n/a`` for a check that does not apply to the cell, or, for a
        mutant's cell, ``kill`` (an expected failure).  A cell may be reported again when
        its row is written: the display counts it once."""

    def finish(self, step: str, summary: str) -> None:
        """``step`` ended; ``summary`` is one line (rows, failures, seconds)."""

    def note(self, line: str) -> None:
        """A line of its own (the run directory, a resumed step)."""


@dataclass
class RunConfig:
    arches: list[str]
    out: Path
    backend: str = "auto"
    manifest: Path | None = None
    resume: bool = False
    baseline: list[Path] = field(default_factory=list)
    seed: int = 0
    workers: str = "2"
    mutants: bool = True
    timing: bool = True  # only ever runs on a hardware backend
    timing_iterations: int = 100
    timing_runs: int = 3
    cache_dir: str | None = None
    # the admission policy file (--policy / HQVAL_POLICY); None: matrices/policy.yaml
    policy: Path | None = None
    verbose: bool = False  # pytest's own output for the check sessions
    argv: Sequence[str] | None = None


@dataclass
class RunContext:
    config: RunConfig
    arches: list[Arch]
    manifest: Manifest
    mutants: Manifest | None  # None with --no-mutants
    backends: dict[str, Backend]  # arch name -> the backend opened for it, before compiling
    writer: RunWriter
    progress: Progress
    # the admission policy, parsed once when the run opens (every step judges with it)
    policy: Policy
    # step -> the identities of every cell it must produce (hqval.run.expected)
    expected: dict[str, list[str]] = field(default_factory=dict)
    compiled: dict[tuple[str, str], CompileResult] = field(default_factory=dict)
    # (kernel, arch) whose compile failed in hqval's machinery (the cache, a refused input),
    # not in the kernel: the cells that need its object are infrastructure errors too
    compile_infrastructure: set[tuple[str, str]] = field(default_factory=set)
    # (kernel, arch) this toolchain cannot build (its compiler lacks a target builtin the
    # source calls) -> the builtin: the cells that need its object are untested
    compile_gaps: dict[tuple[str, str], str] = field(default_factory=dict)
    # the run judged once (``hqval.admission.judge``) by the admit step; the report step
    # and the chain's exit code read it
    judged: Judged | None = None
    # the mutants' check rows the checks step's session produced (``steps._together``),
    # which the mutants step reports as its own
    mutant_rows: list[Row] = field(default_factory=list)

    def backend_label(self, arch: str) -> str:
        """The backend part of a cell identity on ``arch`` (what ``auto`` chose)."""
        return self.backends[arch].name

    def arch(self, name: str) -> Arch:
        for a in self.arches:
            if a.name == name:
                return a
        raise KeyError(name)


@dataclass(frozen=True)
class StepResult:
    """What a step did: the rows it wrote (check cells appended live included), and
    whether every expected cell now has a row.  ``error`` is set when the step could not
    finish (a crash, a check session that did not run); ``skipped`` names a gate the run
    was told to skip (``--no-mutants``)."""

    name: str
    rows: tuple[Row, ...] = ()
    expected: int = 0
    missing: tuple[str, ...] = ()
    error: str = ""
    skipped: str = ""
    seconds: float = 0.0

    @property
    def done(self) -> bool:
        return not self.error and not self.missing
