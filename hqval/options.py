"""Options shared by several subcommands, each defined once: flag, environment variable,
default and help together (nox's _options style).  A subcommand picks the ones it takes."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
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


ARCH = Option(
    ("--arch",), "HQVAL_ARCH",
    "gfx target (repeatable, or 'all' for every arch in arches.yaml)", repeat=True,
)
MANIFEST = Option(
    ("--manifest",), "HQVAL_MANIFEST",
    "kernels.yaml of an external kernel tree (default: the suite's own kernels/kernels.yaml)",
)
JSON_OUT = Option(("--json",), None, "also write the result rows as JSON to this path")
BACKEND = Option(
    ("--backend",), "HQVAL_BACKEND",
    "execution backend: emu (CPU wave interpreter), hip, cuda, or auto",
    default="auto", choices=("auto", "emu", "hip", "cuda"),
)
CACHE_DIR = Option(
    ("--cache-dir",), "HQVAL_CACHE",
    "content-addressed code object cache (default ~/.cache/hqval)",
)
JSON_PRINT = Option(
    ("--json",), None,
    "write the results as JSON to PATH ('-' or no PATH: stdout, instead of the table)",
    metavar="PATH", bare="-",
)
SEED = Option(("--seed",), "HQVAL_SEED", "fixture and synthetic-data seed (default 0)",
              default="0", type=int)
JOBS = Option(("--jobs", "-j"), "HQVAL_JOBS",
              "compiler processes at once (default: CPU count)", type=int)
WORKERS = Option(("--workers", "-n"), "HQVAL_WORKERS",
                 "pytest-xdist workers for the check cells ('0' runs in this process; default 2)",
                 default="2")
BASELINE = Option(("--baseline",), None,
                  "baseline run directory (repeatable): a regression against it fails the cell",
                  repeat=True, metavar="RUN")


POLICY = Option(("--policy",), "HQVAL_POLICY",
                "admission policy YAML (default: matrices/policy.yaml)", metavar="YAML")

# the options of a check session (hqval check, hqval mutants)
CHECK = Option(("--check",), None, "only this check (repeatable; default: all)",
               repeat=True, metavar="NAME")
KEYWORD = Option(("-k", "--keyword"), None, "pytest -k expression over cell identities",
                 metavar="EXPR")
JUNIT_XML = Option(("--junit-xml",), None, "write JUnit XML of the cells here", metavar="PATH")
VERBOSE = Option(("-v", "--verbose"), None,
                 "show pytest's own output (default: hqval's progress only)", flag=True)
SESSION = (CHECK, KEYWORD, JUNIT_XML, WORKERS, SEED, VERBOSE)


def write_json(payload: Any, dest: str) -> None:
    """``payload`` as indented JSON to ``dest`` (``-``: standard output).  A file is written
    beside itself and renamed into place, so an interrupted run leaves no half-written file."""
    text = json.dumps(payload, indent=1) + "\n"
    if dest == "-":
        sys.stdout.write(text)
        return
    path = Path(dest)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial",
                               dir=path.parent if str(path.parent) else ".")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
