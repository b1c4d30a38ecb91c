"""``hqval run --arch gfx1100 [--backend auto] [--manifest F] --out DIR``: the whole chain
(compile, audit, checks, mutants, timing where hardware exists, admission, report) into
one run directory, with progress on long steps and a summary at the end.

Exit status is admission's: 0 every admitted cell passes, 1 a cell was rejected or
regressed against ``--baseline``, 2 bad input or an infrastructure problem (a missing
backend, compiler or pipeline step fails closed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.BACKEND, options.MANIFEST, options.CACHE_DIR):
        opt.add_to(parser)
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="run directory (default runs/<arch>-<UTC timestamp>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out: steps and cells already recorded "
                             "are skipped")
    for opt in (options.BASELINE, options.SEED, options.WORKERS):
        opt.add_to(parser)
    parser.add_argument("--no-mutants", action="store_true", help="skip the mutants step")
    parser.add_argument("--no-timing", action="store_true",
                        help="skip timing even on hardware")
    parser.add_argument("--timing-iterations", type=int, default=100,
                        help="timing samples per arm per run (default 100)")
    parser.add_argument("--timing-runs", type=int, default=3, help="timing runs (default 3)")


def run(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError
    from hqval.pipeline import RunConfig, default_out, run_pipeline
    from hqval.results.store import RunDirError

    if not args.arch:
        raise UsageError("no --arch given; pass --arch gfx1100 (repeatable) or --arch all")
    arches = [a.strip() for item in args.arch for a in item.split(",") if a.strip()]
    if args.resume and not args.out:
        raise UsageError("--resume needs the --out DIR of the run to continue")
    for b in args.baseline:
        if not (Path(b) / "envelope.json").is_file():
            raise UsageError(f"--baseline {b}: no envelope.json; pass a run directory")
    config = RunConfig(
        arches=arches, out=Path(args.out) if args.out else default_out(arches),
        backend=args.backend, manifest=Path(args.manifest) if args.manifest else None,
        resume=args.resume, baseline=[Path(b) for b in args.baseline], seed=args.seed,
        workers=str(args.workers), mutants=not args.no_mutants, timing=not args.no_timing,
        timing_iterations=args.timing_iterations, timing_runs=args.timing_runs,
        cache_dir=args.cache_dir, argv=sys.argv,
    )
    try:
        result = run_pipeline(config)
    except (RunDirError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(result.summary)
    verdict = {0: "every admitted cell passes", 1: "a cell was rejected or regressed",
               2: "infrastructure problem: admission fails closed"}[result.exit_code]
    print(f"hqval run: {verdict} (exit {result.exit_code}); run directory {result.path}")
    return result.exit_code
