"""``hqval run --arch gfx1100 [--backend auto] [--manifest F] --out DIR``: the whole chain
(compile, audit, checks, mutants, timing where hardware exists, admission, report) into
one run directory, with hqval's own progress display and a summary at the end.

Exit status is admission's: 0 complete evidence and no failure, 1 a row failed (a cell
rejected, a kernel-level finding, a regression against ``--baseline``), 2 bad input, a
backend that cannot run here, or incomplete evidence (admission fails closed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.BACKEND, options.MANIFEST, options.CACHE_DIR):
        opt.add_to(parser)
    parser.add_argument("--out", type=options.path_value, default=None, metavar="DIR",
                        help="run directory (default runs/<arch>-<UTC timestamp>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out: cells already recorded are kept, "
                             "every step with a missing cell is redone")
    for opt in (options.BASELINE, options.POLICY, options.SEED, options.WORKERS):
        opt.add_to(parser)
    parser.add_argument("--no-mutants", action="store_true",
                        help="skip the mutants step (the reasons and checkpoint say so)")
    parser.add_argument("--fresh-cache", action="store_true",
                        help="build every code object in a new private cache under a new "
                             "cache key, removed when the run ends: no entry another job "
                             "made, or this machine's cache holds, is used (it takes the "
                             "place of --cache-dir and $HQVAL_CACHE)")
    parser.add_argument("--no-timing", action="store_true",
                        help="skip timing even on hardware")
    parser.add_argument("--timing-iterations",
                        type=options.positive_int(options.TIMING_ITERATIONS_MAX), default=100,
                        help="timing samples per arm per run (default 100)")
    parser.add_argument("--timing-runs",
                        type=options.positive_int(options.TIMING_RUNS_MAX), default=3,
                        help="timing runs (default 3)")
    options.VERBOSE.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError

    if args.resume and not args.out:
        raise UsageError("--resume needs the --out DIR of the run to continue")
    for b in args.baseline:
        if not (Path(b) / "envelope.json").is_file():
            raise UsageError(f"--baseline {b}: no envelope.json; pass a run directory")
    if args.fresh_cache:
        from hqval.cacheauth import fresh_cache
        from hqval.toolchain import selected_cache

        with fresh_cache() as cache, selected_cache(cache):
            args.cache_dir = str(cache)
            return _run(args)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from hqval.backends.base import BackendUnavailable
    from hqval.cli import UsageError
    from hqval.run.chain import default_out, run_pipeline
    from hqval.run.context import RunConfig
    from hqval.run.progress import Display

    raw_arches = [a.strip() for item in args.arch or [] for a in item.split(",") if a.strip()]
    config = RunConfig(
        arches=list(args.arch or []),
        out=Path(args.out) if args.out else default_out(raw_arches or ["none"]),
        backend=args.backend, manifest=Path(args.manifest) if args.manifest else None,
        resume=args.resume, baseline=[Path(b) for b in args.baseline], seed=args.seed,
        workers=str(args.workers), mutants=not args.no_mutants, timing=not args.no_timing,
        timing_iterations=args.timing_iterations, timing_runs=args.timing_runs,
        cache_dir=args.cache_dir, policy=Path(args.policy) if args.policy else None,
        verbose=args.verbose, argv=sys.argv,
    )
    try:
        result = run_pipeline(config, Display())
    except BackendUnavailable as exc:
        print(f"hqval run: backend unavailable: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # an unknown arch, a manifest or run directory problem
        raise UsageError(str(exc)) from None
    print(result.summary)
    verdict = {0: "complete evidence, no failure", 1: "a row failed or regressed",
               2: "damaged, incomplete or unproven evidence or an infrastructure problem: "
                  "admission fails closed"
               }[result.exit_code]
    print(f"hqval run: {verdict} (exit {result.exit_code}); run directory {result.path}")
    return result.exit_code
