"""Options shared by several subcommands, each defined once: flag, environment variable,
default and help together (nox's _options style).  A subcommand picks the ones it takes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class _FromEnvironment(list[str]):
    """A repeatable option's values read from its environment variable: the default, which
    the first value given on the command line replaces (never extends)."""


class _Append(argparse.Action):
    """``action="append"`` whose default (the environment's values) the command line
    overrides: ``HQVAL_ARCH=gfx1030 hqval run --arch gfx1100`` runs gfx1100 only, as a
    single-valued option given on the command line overrides its variable too."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        current = getattr(namespace, self.dest, None)
        items = [] if current is None or isinstance(current, _FromEnvironment) \
            else list(current)
        items.append(values)
        setattr(namespace, self.dest, items)


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    env: str | None
    help: str
    default: str | None = None
    repeat: bool = False
    choices: tuple[str, ...] | None = None
    # argparse converts string defaults (and environment values) with ``type`` too
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    # the flag may come without a value, which then means ``bare`` (``--json`` -> "-")
    bare: str | None = None
    # an on/off switch (``-v``): no value
    flag: bool = False

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        env_value = os.environ.get(self.env) if self.env else None
        help_text = self.help + (f" [env {self.env}]" if self.env else "")
        if self.flag:
            parser.add_argument(*self.flags, action="store_true", help=help_text)
            return
        kwargs: dict[str, Any] = {"help": help_text, "choices": self.choices,
                                  "metavar": self.metavar}
        if self.type is not None:
            kwargs["type"] = self.type
        elif self.choices is not None:
            # argparse checks ``choices`` on a value given on the command line only, never
            # on a default: an environment value (HQVAL_BACKEND=Emu) is checked by the
            # type, which argparse applies to a string default too
            kwargs["type"] = one_of(self.choices)
        if self.bare is not None:
            kwargs.update(nargs="?", const=self.bare)
        if self.repeat:
            default = _FromEnvironment(env_value.split(",") if env_value else [])
            parser.add_argument(*self.flags, action=_Append, default=default, **kwargs)
        else:
            parser.add_argument(
                *self.flags, default=env_value if env_value is not None else self.default,
                **kwargs,
            )


# ---- option values, each validated once ------------------------------------------------
# argparse applies these to the flag's value and to an environment default alike, so a bad
# value (``--seed -1``, ``--workers banana``, ``HQVAL_JOBS=0``) is a usage error (one line,
# exit 2) before anything runs.

# what one ``hqval emu`` launch may ask of the interpreter: the largest shapes.yaml shape
# (27648 x 17408) fits, and the f32 oracle of M x K stays under 2 GiB
EMU_MAX_ROWS = 1 << 16
EMU_MAX_K = 1 << 17
EMU_MAX_N = 4096
EMU_MAX_WEIGHTS = 1 << 29

# numpy's seed range
SEED_MAX = 2**32 - 1
# the most timing samples per arm and timed runs one cell may ask for: 100 and 3 are the
# defaults; far beyond these a bench never ends (10**20 iterations was taken)
TIMING_ITERATIONS_MAX = 1_000_000
TIMING_RUNS_MAX = 1000


def one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse ``type``: one of ``choices``, exactly as written."""
    def parse(text: str) -> str:
        if text not in choices:
            # argparse's own words for a value off its choices
            raise argparse.ArgumentTypeError(
                f"invalid choice: {text!r} (choose from {', '.join(map(repr, choices))})")
        return text
    parse.__name__ = "choice"
    return parse


_DIGITS = frozenset("0123456789")


def int_range(minimum: int | None = None, maximum: int | None = None,
              what: str = "an integer") -> Callable[[str], int]:
    """An argparse ``type``: an integer within [minimum, maximum], written in ASCII digits
    with an optional sign (``int`` alone also takes "1_000" and other scripts' digits)."""
    def parse(text: str) -> int:
        word = str(text).strip()
        digits = word[1:] if word[:1] in ("+", "-") else word
        if not digits or not set(digits) <= _DIGITS:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        value = int(word, 10)
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}: give {what}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{value} is above {maximum}: give {what}")
        return value
    parse.__name__ = "int"  # argparse names the type in its own messages
    return parse


def positive_int(maximum: int | None = None) -> Callable[[str], int]:
    bound = f" up to {maximum}" if maximum is not None else ""
    return int_range(1, maximum, f"a positive integer{bound}")


def nonneg_int(maximum: int | None = None) -> Callable[[str], int]:
    bound = f" up to {maximum}" if maximum is not None else ""
    return int_range(0, maximum, f"a non-negative integer{bound}")


def nonneg_float(text: str) -> float:
    """An argparse ``type``: a finite number, zero or above."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number, 0 or above")
    return value


def path_value(text: str) -> str:
    """A file or directory option's value: a path, never empty (an empty ``--out`` or
    ``--manifest`` would mean the default, the suite's own kernels or ``runs/``, silently)
    and without a NUL byte (no path holds one)."""
    if not str(text).strip():
        raise argparse.ArgumentTypeError(
            "an empty path: give a file or directory (an environment variable set to '' "
            "counts as given: unset it for the default)")
    if "\0" in str(text):
        raise argparse.ArgumentTypeError(f"{text!r} holds a NUL byte, which no path does")
    return str(text)


def workers_value(text: str) -> str:
    """``--workers``: a non-negative count of pytest-xdist workers, or ``auto``/``logical``
    (xdist's own words: one per CPU); kept as the string pytest-xdist takes."""
    word = str(text).strip()
    if word in ("auto", "logical"):
        return word
    return str(int_range(0, 1024, "a worker count (0 runs in this process), 'auto' or "
                         "'logical'")(word))


ARCH = Option(
    ("--arch",), "HQVAL_ARCH",
    "gfx target (repeatable, or 'all' for every arch in arches.yaml)", repeat=True,
)
MANIFEST = Option(
    ("--manifest",), "HQVAL_MANIFEST",
    "kernels.yaml of an external kernel tree (default: the suite's own kernels/kernels.yaml)",
    type=path_value,
)
JSON_OUT = Option(("--json",), None, "also write the result rows as JSON to this path",
                  type=path_value)
BACKEND = Option(
    ("--backend",), "HQVAL_BACKEND",
    "execution backend: emu (CPU wave interpreter), hip, cuda, or auto",
    default="auto", choices=("auto", "emu", "hip", "cuda"),
)
CACHE_DIR = Option(
    ("--cache-dir",), "HQVAL_CACHE",
    "content-addressed code object cache (default ~/.cache/hqval)",
    type=path_value,
)
JSON_PRINT = Option(
    ("--json",), None,
    "write the results as JSON to PATH ('-' or no PATH: stdout, instead of the table)",
    metavar="PATH", bare="-",
)
seed_value = int_range(0, SEED_MAX, f"a seed from 0 to {SEED_MAX}")
SEED = Option(("--seed",), "HQVAL_SEED",
              f"fixture and synthetic-data seed, 0 to {SEED_MAX} (default 0)",
              default="0", type=seed_value)
JOBS = Option(("--jobs", "-j"), "HQVAL_JOBS",
              "compiler processes at once (default: CPU count)", type=positive_int(4096))
WORKERS = Option(("--workers", "-n"), "HQVAL_WORKERS",
                 "pytest-xdist workers for the check cells ('0' runs in this process; default 2)",
                 default="2", type=workers_value)
BASELINE = Option(("--baseline",), None,
                  "baseline run directory (repeatable): a regression against it fails the cell",
                  repeat=True, metavar="RUN", type=path_value)


POLICY = Option(("--policy",), "HQVAL_POLICY",
                "admission policy YAML (default: matrices/policy.yaml)", metavar="YAML",
                type=path_value)

# the options of a check session (hqval check, hqval mutants)
CHECK = Option(("--check",), None, "only this check (repeatable; default: all)",
               repeat=True, metavar="NAME")
KEYWORD = Option(("-k", "--keyword"), None, "pytest -k expression over cell identities",
                 metavar="EXPR")
JUNIT_XML = Option(("--junit-xml",), None, "write JUnit XML of the cells here", metavar="PATH")
VERBOSE = Option(("-v", "--verbose"), None,
                 "show pytest's own output (default: hqval's progress only)", flag=True)
SESSION = (CHECK, KEYWORD, JUNIT_XML, WORKERS, SEED, VERBOSE)


def write_json(payload: Any, dest: str, *, what: str = "--json") -> None:
    """``payload`` as indented JSON to ``dest`` (``-``: standard output).  A file goes
    through ``hqval.safeio.write_atomic``: a temporary beside it, renamed into place, never
    through a link or over a directory, and nothing left behind on failure."""
    from hqval.safeio import write_atomic

    text = json.dumps(payload, indent=1) + "\n"
    if dest == "-":
        sys.stdout.write(text)
        return
    write_atomic(Path(dest), text, what=what)
