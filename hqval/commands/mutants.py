"""``hqval mutants``: the mutation kill matrix (mutant x check, per arch).

Compiles every mutant for every requested arch it applies to, audits the code objects
(``hqval.isa``), runs every check cell for the mutants and the real kernels in one pytest
session (``hqval.checks.plugin``), and prints mutant x check.  Exit 1 if a mutant survives
on an arch it compiles for or a real kernel's cell fails or errors; 2 for bad input or an
unavailable backend; 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hqval import options
from hqval.commands import check as check_command

if TYPE_CHECKING:
    from hqval.checks.mutation import Built
    from hqval.manifest import Manifest
    from hqval.result import Row

MUTANTS = options.Option(
    ("--mutants",), "HQVAL_MUTANTS",
    "mutant manifest (default: the suite's kernels/mutants/mutants.yaml)",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.BACKEND, options.MANIFEST, MUTANTS, options.JSON_OUT):
        opt.add_to(parser)
    check_command.add_run_arguments(parser)


def build(mutants: Manifest, arches: list[str]) -> tuple[dict[tuple[str, str], Built], list[Row]]:
    """Compile each mutant per arch and audit what compiled: (built map, audit rows)."""
    from hqval.checks.cell import arch_caps
    from hqval.checks.mutation import Built
    from hqval.isa import audit_matrix
    from hqval.toolchain import compile_kernel

    built: dict[tuple[str, str], Built] = {}
    audit_rows: list[Row] = []
    for arch_name in arches:
        arch = arch_caps(arch_name)
        cells = []
        for m in mutants.kernels:
            if arch_name.startswith("sm_"):
                ok = not m.amd_only
                built[(m.name, arch_name)] = Built(ok, "" if ok else "AMD-only source")
                continue
            if not m.applies_to(arch):
                built[(m.name, arch_name)] = Built(False, f"requires {m.requires}")
                continue
            res = compile_kernel(m, arch_name)
            built[(m.name, arch_name)] = Built(res.ok, "" if res.ok else res.message)
            if res.ok:
                cells.append((m, res))
        if cells:
            audit_rows += audit_matrix(cells, arch)
    return built, audit_rows


def run(args: argparse.Namespace) -> int:
    import json
    import tempfile

    from hqval.checks.mutation import matrix_text, real_failures, verdicts
    from hqval.cli import UsageError
    from hqval.manifest import DEFAULT_MANIFEST, DEFAULT_MUTANTS, ManifestError, load_manifest
    from hqval.manifest import load_mutants as load_mutant_manifest
    from hqval.result import Status

    arches = check_command.arch_names(args.arch)
    check_command.check_names(args.check)
    real_path = Path(args.manifest) if args.manifest else DEFAULT_MANIFEST
    mutants_path = Path(args.mutants) if args.mutants else DEFAULT_MUTANTS
    try:
        load_manifest(real_path)
        mutants = load_mutant_manifest(mutants_path)
    except (ManifestError, OSError) as exc:
        raise UsageError(str(exc)) from None
    try:
        chosen = check_command.open_backends(args.backend, arches)
    except check_command.BackendMissing as exc:
        print(f"hqval mutants: backend unavailable: {exc}", file=sys.stderr)
        return 2
    check_command.require_keyword_match([real_path.resolve(), mutants_path.resolve()], arches,
                                        args.backend, args.check, args.keyword)
    for arch, line in chosen.items():
        print(f"hqval mutants: {arch}: {line}")

    built, audit_rows = build(mutants, arches)
    with tempfile.TemporaryDirectory(prefix="hqval-mutants-") as tmp:
        code, cell_rows = check_command.run_cells(
            [real_path.resolve(), mutants_path.resolve()], arches, args.backend,
            json_out=Path(tmp) / "rows.json", checks=args.check, keyword=args.keyword,
            workers=str(args.workers), junit_xml=args.junit_xml, seed=args.seed, quiet=True,
        )
    if code not in (0, 1) or not cell_rows:
        print(f"hqval mutants: the check session did not run (pytest exit {code})",
              file=sys.stderr)
        return 2
    mutant_names = {m.name for m in mutants.kernels}
    mutant_rows = [r for r in [*cell_rows, *audit_rows] if r.kernel in mutant_names]
    real_rows = [r for r in cell_rows if r.kernel not in mutant_names]
    backend_label = cell_rows[0].backend
    verdict_rows = verdicts(mutants.kernels, arches, backend_label, built, mutant_rows)

    print(matrix_text(verdict_rows, mutant_rows))
    survived = [v for v in verdict_rows if v.status == Status.FAIL]
    broken = real_failures(real_rows)
    killed = sum(v.status == Status.PASS for v in verdict_rows)
    print(f"hqval mutants: {killed} killed, {len(survived)} survived, "
          f"{sum(v.status == Status.UNSUPPORTED for v in verdict_rows)} unsupported; "
          f"real kernels: {len(broken)} failing or erroring cells of {len(real_rows)}")
    for v in survived:
        print(f"  SURVIVED {v.identity}: {v.message} ({v.details.get('mutation')})")
    for r in broken:
        print(f"  REAL KERNEL {r.identity}: {r.status}: {r.message}")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        everything = [*verdict_rows, *mutant_rows, *real_rows]
        out.write_text(json.dumps([r.to_dict() for r in everything], indent=1) + "\n")
    return 1 if survived or broken else 0
