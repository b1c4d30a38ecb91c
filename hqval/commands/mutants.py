"""``hqval mutants``: the mutation kill matrix (mutant x check, per arch).

Compiles every mutant for every requested arch it applies to, audits the code objects
(``hqval.checks.mutation.build``), runs every check cell for the mutants and the real
kernels in one pytest session (``hqval.checks.session``), and prints mutant x check.  Exit
1 if a mutant survives on an arch it compiles for or a real kernel's cell fails or errors
(a ``production: false`` kernel's failures are listed, never gating); a check or rule that
fails a mutant's real kernel (``mutant_of``) too is no kill.  A mutants file naming no
``manifest:`` resolves its baselines and ``mutant_of`` in ``--manifest``;
2 for bad input, an unavailable backend or a session that left cells without a row; 0
otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hqval import options

MUTANTS = options.Option(
    ("--mutants",), "HQVAL_MUTANTS",
    "mutant manifest (default: the --manifest tree's own, its `mutants:`, else the suite's "
    "kernels/mutants/mutants.yaml)", type=options.path_value,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.BACKEND, options.MANIFEST, MUTANTS, options.JSON_OUT,
                options.CACHE_DIR):
        opt.add_to(parser)
    for opt in options.SESSION:
        opt.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.backends import BackendUnavailable, open_for
    from hqval.checks.cell import CHECKS, unknown_checks
    from hqval.checks.mutation import build, gating, matrix_text, verdicts
    from hqval.checks.session import keyword_problem, run_cells
    from hqval.cli import UsageError
    from hqval.manifest import DEFAULT_MANIFEST, load_manifest, mutants_file
    from hqval.manifest import load_mutants as load_mutant_manifest
    from hqval.matrix import resolve_arches
    from hqval.result import Row, Status
    from hqval.run.progress import Display

    real_path = Path(args.manifest) if args.manifest else DEFAULT_MANIFEST
    try:
        arches = resolve_arches(args.arch)
        bad = unknown_checks(args.check)
        if bad:
            raise UsageError(bad)
        real = load_manifest(real_path)
        # the mutants hqval run would run with this tree (its own, else the suite's)
        mutants_path = Path(args.mutants) if args.mutants else mutants_file(real)
        if mutants_path is None:
            raise UsageError(f"{real_path} names no mutants (mutants:) and the suite's "
                             "kernels/mutants/mutants.yaml is missing; give --mutants FILE")
        # a mutants file naming no ``manifest:`` resolves its baselines and mutant_of in
        # the --manifest tree (the suite's kernels.yaml without --manifest)
        mutants = load_mutant_manifest(mutants_path,
                                       real=real_path if args.manifest else None)
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    try:
        chosen = open_for(args.backend, [a.name for a in arches])
    except BackendUnavailable as exc:
        print(f"hqval mutants: backend unavailable: {exc}", file=sys.stderr)
        return 2
    why_not = keyword_problem([real_path, mutants_path], [a.name for a in arches],
                              args.backend, args.check, args.keyword)
    if why_not:
        raise UsageError(why_not)
    for arch, b in chosen.items():
        print(f"hqval mutants: {arch}: {b.selection}")

    real_of_mutants = load_manifest(mutants.real_manifest)
    built, audit_rows = build(mutants, arches, args.cache_dir, real_of_mutants)
    names = [a.name for a in arches]
    mutant_names = {m.name for m in mutants.kernels}
    display = Display()
    display.start("mutants", 0 if args.keyword else
                  (len(mutants.kernels) + len(load_manifest(real_path).kernels))
                  * len(args.check or CHECKS) * len(names))

    def shown(r: Row) -> None:  # a mutant's failing cell is an expected kill
        kill = r.kernel in mutant_names and r.status is Status.FAIL
        display.cell(r.identity, "kill" if kill else str(r.status))

    result = run_cells([real_path, mutants_path], names, args.backend, checks=args.check,
                       keyword=args.keyword, workers=str(args.workers),
                       junit_xml=args.junit_xml, seed=args.seed, verbose=args.verbose,
                       cache_dir=args.cache_dir, on_row=shown)
    cell_rows = result.rows
    display.finish("mutants", f"{len(cell_rows)} cells")
    why = result.problem()
    if why or not cell_rows:
        print(f"hqval mutants: the check session did not run every cell: "
              f"{why or 'no cells collected'}", file=sys.stderr)
        return 2
    mutant_rows = [r for r in [*cell_rows, *audit_rows] if r.kernel in mutant_names]
    real_rows = [r for r in cell_rows if r.kernel not in mutant_names]
    real_audit = [r for r in audit_rows if r.kernel not in mutant_names]
    verdict_rows = [v for a in names for v in
                    verdicts(mutants.kernels, [a], chosen[a].name, built, mutant_rows,
                             [*real_rows, *real_audit])]

    print(matrix_text(verdict_rows, mutant_rows))
    survived = [v for v in verdict_rows if v.status == Status.FAIL]
    broken, listed = gating(real_rows, real)
    killed = sum(v.status == Status.PASS for v in verdict_rows)
    print(f"hqval mutants: {killed} killed, {len(survived)} survived, "
          f"{sum(v.status == Status.UNSUPPORTED for v in verdict_rows)} unsupported; "
          f"real kernels: {len(broken)} failing or erroring cells of {len(real_rows)}")
    for v in survived:
        print(f"  SURVIVED {v.identity}: {v.message} ({v.details.get('mutation')})")
    for r in broken:
        print(f"  REAL KERNEL {r.identity}: {r.status}: {r.message}")
    for r in listed:
        print(f"  not gating (production: false) {r.identity}: {r.status}: {r.message}")
    if args.json:
        everything = [*verdict_rows, *mutant_rows, *real_rows]
        options.write_json([r.to_dict() for r in everything], args.json)
    return 1 if survived or broken else 0
