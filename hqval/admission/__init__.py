"""Admission: from a run's rows and ``matrices/policy.yaml`` to a status per (qt, arch,
path) and the exit code that gates a format.

- ``policy``: the policy file, parsed once per run (``load_policy``, ``Policy``);
- ``evidence``: what each row is evidence for (the run's kernel table), the evidence a
  path needs, the expected cells without a row;
- ``decision``: the status of each cell and the ``Admission`` with its exit code;
- ``judge``: ``judge(runs, policy) -> Judged``, the one judged run every reader uses.
"""

from __future__ import annotations

from hqval.admission.decision import (
    Admission,
    Cell,
    admit,
    admit_cell,
    combine,
    dumps,
    kernel_statuses,
    problem_lines,
    to_markdown,
)
from hqval.admission.evidence import (
    EVIDENCE_STEPS,
    Evidence,
    KernelInfo,
    emulator_gap,
    expected_cells_damage,
    expected_evidence,
    gate_for_row,
    gate_skips,
    is_infrastructure,
    kernel_table,
    missing_cells,
)
from hqval.admission.judge import (
    DamagedRun,
    Judged,
    JudgedRun,
    admit_runs,
    applied_gate,
    compare_runs,
    judge,
    judge_run,
    undamaged,
)
from hqval.admission.policy import (
    CAPS,
    HARDWARE_EMULATOR,
    PATH_OF_KIND,
    POLICY_PATH,
    AdmissionStatus,
    Need,
    PathPolicy,
    Policy,
    PolicyError,
    arch_caps_from_matrix,
    load_policy,
    parse_policy,
)

__all__ = [
    "CAPS", "EVIDENCE_STEPS", "HARDWARE_EMULATOR", "PATH_OF_KIND", "POLICY_PATH",
    "Admission", "AdmissionStatus", "Cell", "DamagedRun", "Evidence", "Judged", "JudgedRun",
    "KernelInfo",
    "Need", "PathPolicy", "Policy", "PolicyError", "admit", "admit_cell", "admit_runs",
    "applied_gate", "arch_caps_from_matrix", "combine", "compare_runs", "dumps",
    "emulator_gap", "expected_cells_damage", "expected_evidence",
    "gate_for_row", "gate_skips", "is_infrastructure", "judge", "judge_run",
    "kernel_statuses", "kernel_table", "load_policy", "missing_cells", "parse_policy",
    "problem_lines", "to_markdown", "undamaged",
]

