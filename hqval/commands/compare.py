"""``hqval compare BASE NEW [--history RUN...]``: timing changes and status flips between
two run directories, as asv-style markdown sections (worse, better, noisy, missing, status
flips, new) for a review.

A timing cell is compared by its ratio to its own interleaved baseline in each run (drift
cancels), judged on the policy's ``change_max`` (matrices/policy.yaml, ``--policy``);
absolute time only beyond the measured noise floor (each run's baseline spread: the same
baseline kernel's absolute time over the A/A control and the cells of that run; or the
spread over ``--history`` runs when at least 3 hold the cell), and only between runs timed
on one device (both envelopes name the same GPU UUID, or ``--same-device``).  See
hqval.results.compare.

Exit 0 with no regression, 1 with at least one, 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE", help="baseline run directory")
    parser.add_argument("new", metavar="NEW", help="new run directory")
    parser.add_argument("--all", action="store_true", help="list unchanged cells too")
    parser.add_argument("--history", nargs="+", default=[], metavar="RUN",
                        help="earlier runs: the absolute-time noise floor of each cell")
    parser.add_argument("--same-device", action="store_true",
                        help="both runs were timed on one GPU (for runs whose envelopes do "
                             "not record its UUID): absolute time is then judged too")
    options.POLICY.add_to(parser)
    parser.add_argument("-o", "--output", type=options.path_value, default=None,
                        help="also write the markdown here")


def run(args: argparse.Namespace) -> int:
    from hqval.admission import DamagedRun, PolicyError, compare_runs, load_policy
    from hqval.cli import UsageError
    from hqval.results.compare import same_device, to_markdown
    from hqval.results.store import RunDirError, load_runs

    try:
        base, new = load_runs([args.base, args.new])
        history = load_runs(args.history, "--history")
        policy = load_policy(args.policy)
    except (RunDirError, PolicyError) as exc:
        raise UsageError(str(exc)) from None
    if args.same_device and same_device(base.envelope, new.envelope) is False:
        raise UsageError(f"--same-device: {args.base} and {args.new} record different "
                         "devices (GPU UUIDs) in their envelopes; leave --same-device out")
    try:
        cmp = compare_runs(base, new, policy=policy, history=history,
                           same_device=True if args.same_device else None)
    except DamagedRun as exc:
        raise UsageError(str(exc)) from None
    md = to_markdown(cmp, all_cells=args.all)
    print(md, end="")
    if args.output:
        from hqval.safeio import write_atomic

        write_atomic(Path(args.output), md, what="--output")
    return 1 if cmp.regressions else 0
