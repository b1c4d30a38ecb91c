"""hqval: validate and time 4-bit quantized GPU kernels across AMD RDNA targets.

Start with "hqval run --arch gfx1100" (compile, audit, checks, mutants, timing,
admission and report in one go); the other commands are its steps, run alone.  Exit codes:
0 all applicable cells passed, 1 a check failed or regressed, 2 a usage or infrastructure
problem (bad input, a requested backend missing).

Each subcommand lives in ``hqval.commands.<name>`` and exposes ``add_arguments(parser)``
and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import hqval

# The registry is one explicit dict, in workflow order (the whole chain first, then its
# steps in the order the chain runs them, then the tools around it):
# name -> (module, what the command is for, in one line).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("hqval.commands.run",
            "validate arches end to end: compile, audit, checks, mutants, timing, admit, report"),
    "compile": ("hqval.commands.compile",
                "build every kernel's code object for each arch it applies to"),
    "audit": ("hqval.commands.audit",
              "check the compiled machine code: forbidden instructions, registers, occupancy"),
    "check": ("hqval.commands.check",
              "run the correctness checks (parity, bit identity, ...) on one backend"),
    "mutants": ("hqval.commands.mutants",
                "prove the checks catch broken kernels: which check kills each mutant"),
    "bench": ("hqval.commands.bench",
              "time v2 against v1 kernels on a GPU (interleaved, with A/A noise control)"),
    "admit": ("hqval.commands.admit",
              "decide which (format, arch, path) cells the runs' evidence admits"),
    "report": ("hqval.commands.report",
               "write the HTML report and markdown checkpoint of one or more runs"),
    "compare": ("hqval.commands.compare",
                "list what changed between a baseline run and a new one, as markdown"),
    "history": ("hqval.commands.history",
                "each timing cell's ratio over nights, its steps and regressions (SVG plots)"),
    "bisect": ("hqval.commands.bisect",
               "find the commit of a kernel tree that broke (or fixed) one cell, by git bisect"),
    "emu": ("hqval.commands.emu",
            "run one kernel on the RDNA wave interpreter (trace, coverage, speed)"),
    "codec": ("hqval.commands.codec",
              "measure each format's quantization error (MSE, tail MSE, max rel)"),
    "matrix": ("hqval.commands.matrix",
               "show the arches, formats and kernels the suite knows, and which apply where"),
    "doctor": ("hqval.commands.doctor",
               "say which toolchains, runtimes and browser this machine has, and what is missing"),
}


class UsageError(Exception):
    """Bad input from the user: reported as one line naming the problem and the fix, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line naming the option and the fix (exit 2),
    like every other error of hqval."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}; see "
                     f"'{self.prog} --help'\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hqval", description=__doc__.split("\n\nEach subcommand")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hqval {hqval.__version__}",
                        help="print the version and exit")
    parser.add_argument("-v", "--verbose", dest="_traceback", action="store_true",
                        help="show the traceback of an internal error (a subcommand's own "
                             "-v does too)")
    parser.add_argument("--bisect-exit", action="store_true",
                        help=f"for `git bisect run`: exit 0 good, 1 bad, 125 skip (any other "
                             f"outcome) [env {BISECT_ENV}=1]")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


# the exit status of a command stopped by SIGINT (128 + the signal's number), as a shell's
EXIT_INTERRUPTED = 130
# ... and by SIGTERM (a CI job cancelled, timeout(1), a runner shutting down), which stops
# a command the way SIGINT does (``_terminating_as_interrupt``)
EXIT_TERMINATED = 128 + signal.SIGTERM

# ``git bisect run`` mode (``hqval --bisect-exit CMD ...`` or HQVAL_BISECT_EXIT=1): every
# command's exit code as git bisect reads it: 0 good, 1 bad; 2 (bad input, incomplete
# evidence, infrastructure, an internal error) 125, skip this commit; an interrupt stays
# 130, which stops git bisect run.
BISECT_EXIT: dict[int, int] = {0: 0, 1: 1, EXIT_INTERRUPTED: EXIT_INTERRUPTED,
                               EXIT_TERMINATED: EXIT_TERMINATED}
BISECT_SKIP = 125
BISECT_ENV = "HQVAL_BISECT_EXIT"


def bisect_exit(code: int) -> int:
    """``code`` as ``git bisect run`` reads it (good 0, bad 1, skip 125)."""
    return BISECT_EXIT.get(code, BISECT_SKIP)


def _printable_streams() -> None:
    """stdout and stderr write what is no Unicode character (a path of bytes that are no
    UTF-8, carried as lone surrogates) as its escape, never raising: under a UTF-8 locale
    Python's stdout is strict, and a line naming such a run directory crashed the command
    after its work was done."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _printable_streams()
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((i for i, w in enumerate(words) if w in COMMANDS), len(words))
    if "--bisect-exit" in words[:command] or os.environ.get(BISECT_ENV) == "1":
        try:
            code = _main_words(words)
        except SystemExit as exc:  # argparse's usage error (2), --help (0)
            code = exc.code if isinstance(exc.code, int) else 2
        return bisect_exit(code)
    return _main_words(words)


def _main_words(words: list[str]) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(words)
    except KeyboardInterrupt:
        print("hqval: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.command is None:
        parser.print_help()
        return 2
    # hqval's own warnings (a dropped torn row, ...) print as one line each, like its
    # errors; any other warning is passed on as Python would show it
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", module=r"hqval(\.|$)")
        try:
            return _guarded(args)
        finally:
            for w in caught:
                if w.category.__module__.startswith("hqval"):
                    text = " ".join(str(w.message).split())
                    print(f"hqval {args.command}: warning: {text}", file=sys.stderr)
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _one_line(exc: BaseException) -> str:
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return text or type(exc).__name__


# An error of many problems (a mutants file that does not fit its tree: one per entry) is
# shown by its first ones and a count: a line of every problem ran to 30 KB.  A schema
# error's message holds a problem per line; -v shows every one.
PROBLEMS_SHOWN = 8


def _problems_line(exc: BaseException, verbose: bool) -> str:
    """``exc`` on one line (``_one_line``): its first ``PROBLEMS_SHOWN`` lines and how many
    more there are, or every line under ``verbose``."""
    lines = [" ".join(line.split()) for line in str(exc).splitlines() if line.strip()]
    if verbose or len(lines) <= PROBLEMS_SHOWN:
        return _one_line(exc)
    return (f"{'; '.join(lines[:PROBLEMS_SHOWN])}; and {len(lines) - PROBLEMS_SHOWN} more "
            f"({len(lines)} in all; hqval -v lists every one)")


def _verbose(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "_traceback", False) or getattr(args, "verbose", False))


@contextlib.contextmanager
def _terminating_as_interrupt() -> Iterator[list[bool]]:
    """SIGTERM inside the block stops the command as SIGINT does: it runs the SIGINT
    handler in effect (the check session's, which stops pytest and raises the interrupt
    once its reports are done; else Python's, a KeyboardInterrupt), so the rows are
    flushed, the lock released and temporaries removed, and the run is resumable.  Yields
    a list that holds True once SIGTERM arrived.  (SIGTERM's default ended the process on
    the spot: exit -15, its scratch directories and a --fresh-cache left behind.)  A
    SIGTERM the parent ignores stays ignored; off the main thread nothing changes."""
    seen: list[bool] = []
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield seen
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        seen.append(True)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # SIGINT ignored (a background job) or at its default: stop all the same
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)


def _guarded(args: argparse.Namespace) -> int:
    """``_main`` with every way out of a command made one line: an interrupt is exit 130
    and SIGTERM exit 143 (a run stopped by either is resumable: its rows are flushed, its
    lock released), an error of hqval's own machinery or any unexpected exception exit 2,
    with the traceback only under ``-v``."""
    from hqval.errors import InfrastructureError

    verbose = _verbose(args)
    terminated: list[bool] = []
    try:
        with _terminating_as_interrupt() as terminated:
            return _main(args)
    except KeyboardInterrupt:
        how = "terminated (SIGTERM)" if terminated else "interrupted"
        print(f"hqval {args.command}: {how}; nothing was admitted"
              + (" (continue with --resume)" if args.command == "run" else ""),
              file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except InfrastructureError as exc:
        if verbose:
            traceback.print_exc()
        print(f"hqval {args.command}: infrastructure error: {_one_line(exc)}; nothing was "
              "admitted", file=sys.stderr)
        return 2
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        hint = "" if verbose else " (rerun with -v for the traceback)"
        print(f"hqval: internal error: hqval {args.command}: {type(exc).__name__}: "
              f"{_one_line(exc)}{hint}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    from hqval.safeio import SafeIOError
    from hqval.schema import SchemaError
    from hqval.toolchain import selected_cache

    try:
        # one cache root for every cache the command writes (code objects, dependency
        # lists, disassemblies, audit rows, the emulator's compiled FMA)
        with selected_cache(getattr(args, "cache_dir", None)):
            return int(args._run(args))
    except (UsageError, SchemaError, SafeIOError) as exc:
        # a manifest or matrix problem, a file that cannot be read or written safely, is
        # bad input wherever it surfaces (every command, every step): one line, every
        # problem on it, exit 2
        print(f"hqval {args.command}: error: {_problems_line(exc, _verbose(args))}",
              file=sys.stderr)
        return 2
    except OSError as exc:  # a read-only --out, a full disk: one line naming the path
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"hqval {args.command}: error: {where}{exc.strerror or exc}; nothing was "
              "admitted (fix the path or free space, then rerun)", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        print(f"hqval {args.command}: error: input is not UTF-8 ({exc.reason} at byte "
              f"{exc.start}); nothing was admitted", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
