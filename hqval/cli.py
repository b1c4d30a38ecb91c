"""``hqval`` command line: a thin layer that parses arguments and calls one library function.

Each subcommand lives in ``hqval.commands.<name>`` and exposes ``add_arguments(parser)``
and ``run(args) -> int``.  Exit codes: 0 all applicable cells passed, 1 a check failed or
regressed, 2 a usage or infrastructure problem (bad input, a requested backend missing).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# The registry is one explicit dict: name -> (module, one-line help).
COMMANDS: dict[str, tuple[str, str]] = {
    "codec": ("hqval.commands.codec", "codec quality table (MSE, tail MSE, max_rel) and --bench"),
    "matrix": ("hqval.commands.matrix", "print the loaded arch/format/kernel matrix"),
    "compile": ("hqval.commands.compile", "compile every kernel for every arch it applies to"),
    "audit": ("hqval.commands.audit", "ISA audit of the compiled code objects"),
    "emu": ("hqval.commands.emu", "run one kernel on the RDNA wave interpreter (--bench)"),
    "check": ("hqval.commands.check", "run the validation checks on a backend"),
    "mutants": ("hqval.commands.mutants", "mutation kill matrix"),
    "bench": ("hqval.commands.bench", "interleaved device-event timing"),
    "admit": ("hqval.commands.admit", "admission status per (qt, arch, path)"),
    "compare": ("hqval.commands.compare", "compare two runs: regressions as markdown"),
    "report": ("hqval.commands.report", "render HTML and markdown checkpoint reports"),
    "run": ("hqval.commands.run", "the whole chain for one or more arches"),
}


class UsageError(Exception):
    """Bad input from the user: reported as one line naming the problem and the fix, exit 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hqval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            p.set_defaults(_missing=module_name)
            continue
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_missing", None):
        print(f"hqval {args.command}: not built in this version ({args._missing})",
              file=sys.stderr)
        return 2
    try:
        return int(args._run(args))
    except UsageError as exc:
        print(f"hqval {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
