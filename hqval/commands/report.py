"""``hqval report RUN... -o DIR``: one HTML report, markdown checkpoint and admission.json
from one or more run directories (several machines' runs merge into one report).

Writing the report is not a gate: exit 0 when written (use ``hqval admit`` for the
verdict), 2 on bad input.
"""

from __future__ import annotations

import argparse

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories to merge")
    parser.add_argument("-o", "--out", type=options.path_value, required=True, metavar="DIR",
                        help="output directory for report.html, checkpoint.md, admission.json")
    for opt in (options.BASELINE, options.POLICY):
        opt.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hqval.admission import judge, load_policy
    from hqval.cli import UsageError
    from hqval.results.store import load_runs
    from hqval.run.steps import write_report

    try:
        j = judge(load_runs(args.runs), load_policy(args.policy),
                  baseline=load_runs(args.baseline, "--baseline"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out)
    # the report draws the gate admission applied: the policy that judged the runs
    paths = write_report(j.runs, j.admission, j.comparison, out, policy=j.policy)
    for kind, path in paths.items():
        print(f"hqval report: {kind}: {path}")
    return 0
