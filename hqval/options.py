"""Options shared by several subcommands, each defined once: flag, environment variable,
default and help together (nox's _options style).  A subcommand picks the ones it takes."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    env: str | None
    help: str
    default: str | None = None
    repeat: bool = False
    choices: tuple[str, ...] | None = None

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        env_value = os.environ.get(self.env) if self.env else None
        help_text = self.help + (f" [env {self.env}]" if self.env else "")
        if self.repeat:
            default: object = env_value.split(",") if env_value else None
            parser.add_argument(
                *self.flags, action="append", default=default, help=help_text,
                choices=self.choices,
            )
        else:
            parser.add_argument(
                *self.flags, default=env_value if env_value is not None else self.default,
                help=help_text, choices=self.choices,
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
