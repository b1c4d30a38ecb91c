"""``hqval check``: run the validation cells (check x kernel x arch) on one backend.

The cells run under pytest through ``hqval.checks.plugin`` (``hqval.checks.session``:
pytest-xdist workers, JUnit XML); the backend is opened first, so a backend that cannot
run is exit 2 naming what is missing before any cell starts.  Exit 0 only if every
collected cell has a passing (or not applicable) row; 1 if a cell failed or errored; 2 for
bad input, an unavailable backend, or cells that ended without a row.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.BACKEND, options.MANIFEST, options.JSON_OUT,
                options.CACHE_DIR):
        opt.add_to(parser)
    for opt in options.SESSION:
        opt.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.backends import BackendUnavailable, open_for
    from hqval.checks.cell import CHECKS, unknown_checks
    from hqval.checks.session import keyword_problem, run_cells
    from hqval.cli import UsageError
    from hqval.manifest import DEFAULT_MANIFEST, load_manifest
    from hqval.matrix import resolve_arches
    from hqval.result import Status, rows_exit_code
    from hqval.run.progress import Display

    try:
        arches = resolve_arches(args.arch)
        bad = unknown_checks(args.check)
        if bad:
            raise UsageError(bad)
        manifest = Path(args.manifest) if args.manifest else DEFAULT_MANIFEST
        specs = load_manifest(manifest).kernels
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        chosen = open_for(args.backend, [a.name for a in arches])
    except BackendUnavailable as exc:
        print(f"hqval check: backend unavailable: {exc}", file=sys.stderr)
        return 2
    why_not = keyword_problem([manifest], [a.name for a in arches], args.backend, args.check,
                              args.keyword)
    if why_not:
        raise UsageError(why_not)
    for arch, b in chosen.items():
        print(f"hqval check: {arch}: {b.selection}")
    label = {b.name for b in chosen.values()}
    backend = label.pop() if len(label) == 1 else args.backend
    display = Display()
    # every cell when no -k narrows them (then the count is what it selected)
    display.start("checks", 0 if args.keyword else
                  len(specs) * len(args.check or CHECKS) * len(arches))
    result = run_cells([manifest], [a.name for a in arches], backend, checks=args.check,
                       keyword=args.keyword, workers=str(args.workers),
                       junit_xml=args.junit_xml, seed=args.seed, verbose=args.verbose,
                       cache_dir=args.cache_dir,
                       on_row=lambda r: display.cell(r.identity, str(r.status)))
    rows = result.rows
    display.finish("checks", f"{len(rows)} cells")
    if args.json:
        options.write_json([r.to_dict() for r in rows], args.json)
    counts = {s: sum(r.status == s for r in rows) for s in Status}
    print("hqval check: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
          + f" ({len(rows)} cells)")
    why = result.problem()
    if why:
        print(f"hqval check: {why}", file=sys.stderr)
        return 2
    if not rows:
        print("hqval check: no cells ran (check --arch, --check and -k)", file=sys.stderr)
        return 2
    return rows_exit_code(rows, "check")
