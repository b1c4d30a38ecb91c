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
    parser.add_argument("-o", "--out", required=True, metavar="DIR",
                        help="output directory for report.html, checkpoint.md, admission.json")
    for opt in (options.BASELINE, options.POLICY):
        opt.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hqval.admission import evaluate, load_policy
    from hqval.cli import UsageError
    from hqval.run.steps import write_report

    try:
        runs, adm, cmp = evaluate(args.runs, args.baseline, args.policy)
        policy = load_policy(args.policy)  # the report draws the gate admission applied
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out)
    paths = write_report(runs, adm, cmp, out, policy=policy)
    for kind, path in paths.items():
        print(f"hqval report: {kind}: {path}")
    return 0
