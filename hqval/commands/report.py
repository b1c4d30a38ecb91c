"""``hqval report RUN... -o DIR``: one HTML report, markdown checkpoint and admission.json
from one or more run directories (several machines' runs merge into one report).

Writing the report is not a gate: exit 0 when written (use ``hqval admit`` for the
verdict), 2 on bad input.
"""

from __future__ import annotations

import argparse

from hqval.commands.admit import add_admission_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories to merge")
    parser.add_argument("-o", "--out", required=True, metavar="DIR",
                        help="output directory for report.html, checkpoint.md, admission.json")
    add_admission_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.admission import load_policy
    from hqval.commands.admit import evaluate, load_runs
    from hqval.report.render import build, write_report
    from hqval.results.compare import to_markdown as compare_markdown

    adm, cmp = evaluate(args)
    runs = load_runs(args.runs)
    md = compare_markdown(cmp) if cmp is not None else ""
    # evaluate() has read the policy (a bad one is exit 2 there); the report draws its gate
    paths = write_report(build(runs, adm, md, policy=load_policy(args.policy)), args.out)
    for kind, path in paths.items():
        print(f"hqval report: {kind}: {path}")
    return 0
