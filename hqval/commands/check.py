"""``hqval check``: run the validation cells (check x kernel x arch) on one backend.

The cells run under pytest through ``hqval.checks.plugin`` (pytest-xdist workers, JUnit
XML); this command resolves and opens the backend first, so a backend that cannot run is
exit 2 naming what is missing before any cell starts.  Exit 0 only if every applicable cell
passed; 1 if a cell failed or errored; 2 for bad input or an unavailable backend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval import options

if TYPE_CHECKING:
    from hqval.result import Row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.BACKEND, options.MANIFEST, options.JSON_OUT):
        opt.add_to(parser)
    add_run_arguments(parser)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="append", default=None, metavar="NAME",
                        help="only this check (repeatable; default: all)")
    parser.add_argument("-k", dest="keyword", default=None,
                        help="pytest -k expression over cell identities")
    parser.add_argument("--junit-xml", default=None, help="write JUnit XML here")
    for opt in (options.WORKERS, options.SEED):
        opt.add_to(parser)


def arch_names(raw: list[str] | None) -> list[str]:
    from hqval.cli import UsageError
    from hqval.toolchain import resolve_arches

    if not raw:
        raise UsageError("no --arch given; pass --arch gfx1100 (repeatable) or --arch all")
    names: list[str] = []
    gfx: list[str] = []
    for item in raw:
        for name in (n.strip() for n in item.split(",") if n.strip()):
            (names if name.startswith("sm_") else gfx).append(name)
    try:
        resolved = [a.name for a in resolve_arches(gfx)] if gfx else []
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return resolved + names


def check_names(names: list[str] | None) -> None:
    from hqval.checks.cell import CHECKS
    from hqval.cli import UsageError

    unknown = [n for n in names or [] if n not in CHECKS]
    if unknown:
        raise UsageError(f"unknown check(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(CHECKS)}")


def open_backends(backend: str, arches: list[str]) -> dict[str, str]:
    """arch -> the backend's selection line; raises UsageError-like exit via SystemExit."""
    from hqval.backends import BackendUnavailable, get

    chosen: dict[str, str] = {}
    for arch in arches:
        try:
            b = get(backend, arch)
        except BackendUnavailable as exc:
            raise BackendMissing(str(exc)) from exc
        except ValueError as exc:
            from hqval.cli import UsageError

            raise UsageError(str(exc)) from None
        chosen[arch] = b.selection
    return chosen


class BackendMissing(RuntimeError):
    pass


PYTEST_INI = "[pytest]\naddopts = --strict-markers\nxfail_strict = true\n"


class _Selection:
    """pytest plugin recording which cells ``-k`` keeps and which it drops."""

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.dropped: list[str] = []

    def pytest_deselected(self, items: list[Any]) -> None:
        self.dropped += [i.name for i in items]

    def pytest_collection_finish(self, session: Any) -> None:
        self.kept = [i.name for i in session.items]


def require_keyword_match(manifests: list[Path], arches: list[str], backend: str,
                          checks: list[str] | None, keyword: str | None) -> None:
    """Raise UsageError, before any worker starts, when ``-k`` selects no cell; the message
    names the closest identities, checks, kernels or arches.  Selection is pytest's own
    (an in-process ``--collect-only`` of the same cells), so the two cannot disagree."""
    if not keyword:
        return
    import contextlib
    import difflib
    import io
    import re

    import pytest

    from hqval.cli import UsageError

    sel = _Selection()
    args = [*map(str, manifests), "-p", "hqval.checks.plugin", "-p", "no:cacheprovider",
            "-p", "no:xdist", "-p", "no:benchmark", "--collect-only", "-qq",
            "--hqval-backend", backend, "-k", keyword]
    for arch in arches:
        args += ["--hqval-arch", arch]
    for c in checks or []:
        args += ["--hqval-check", c]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = int(pytest.main(args, plugins=[sel]))
    if code not in (0, 5):  # pytest's usage error (a malformed expression) or a crash
        lines = [ln.removeprefix("ERROR: ") for ln in out.getvalue().splitlines() if ln.strip()]
        raise UsageError(f"-k {keyword!r} could not be evaluated: "
                         + (lines[-1] if lines else f"pytest exit {code}"))
    if sel.kept:
        return
    words = set(sel.dropped)
    for ident in sel.dropped:  # check[kernel|arch|backend]: each part is a word too
        words.update(w for w in re.split(r"[\[\]|]", ident) if w)
    close = difflib.get_close_matches(keyword, sorted(words), n=5, cutoff=0.6)
    hint = ("; close matches: " + ", ".join(close)) if close else \
        "; run `hqval matrix` to list the kernels and checks"
    raise UsageError(f"-k {keyword!r} matches none of the {len(sel.dropped)} cells{hint}")


def run_cells(
    manifests: list[Path], arches: list[str], backend: str, *, json_out: Path,
    checks: list[str] | None, keyword: str | None, workers: str, junit_xml: str | None,
    seed: int, quiet: bool = False,
) -> tuple[int, list[Row]]:
    """Run pytest over the cells of ``manifests``; returns (pytest exit code, rows)."""
    import json
    import os
    import shutil
    import tempfile

    import pytest

    from hqval.result import Row

    # A configuration of its own: independent of the project's test settings and of the
    # directory the user runs from.
    ini_dir = tempfile.mkdtemp(prefix="hqval-cells-")
    ini = Path(ini_dir) / "pytest.ini"
    ini.write_text(PYTEST_INI)
    rootdir = os.path.commonpath([m.parent for m in manifests])
    args = [*map(str, manifests), "-p", "hqval.checks.plugin", "-p", "no:cacheprovider",
            "-p", "no:benchmark", "-c", str(ini), "--rootdir", rootdir, "--hqval-backend", backend,
            "--hqval-json", str(json_out), "--hqval-seed", str(seed), "-q", "-rfE"]
    if quiet:
        args += ["--no-header", "--no-summary", "-qq"]
    for arch in arches:
        args += ["--hqval-arch", arch]
    for c in checks or []:
        args += ["--hqval-check", c]
    if keyword:
        args += ["-k", keyword]
    if workers not in ("0", ""):
        args += ["-n", workers]
    else:
        args += ["-p", "no:xdist"]
    if junit_xml:
        args += ["--junit-xml", junit_xml]
    try:
        code = int(pytest.main(args))
    finally:
        shutil.rmtree(ini_dir, ignore_errors=True)
    rows: list[Row] = []
    if json_out.exists():
        rows = [Row.from_dict(d) for d in json.loads(json_out.read_text())]
    return code, rows


def run(args: argparse.Namespace) -> int:
    import tempfile

    from hqval.cli import UsageError
    from hqval.manifest import DEFAULT_MANIFEST, ManifestError, load_manifest
    from hqval.result import Status

    arches = arch_names(args.arch)
    check_names(args.check)
    manifest = Path(args.manifest) if args.manifest else DEFAULT_MANIFEST
    try:
        load_manifest(manifest)
    except (ManifestError, OSError) as exc:
        raise UsageError(f"manifest {manifest}: {exc}") from None
    try:
        chosen = open_backends(args.backend, arches)
    except BackendMissing as exc:
        print(f"hqval check: backend unavailable: {exc}", file=sys.stderr)
        return 2
    require_keyword_match([manifest.resolve()], arches, args.backend, args.check, args.keyword)
    for arch, line in chosen.items():
        print(f"hqval check: {arch}: {line}")
    with tempfile.TemporaryDirectory(prefix="hqval-check-") as tmp:
        json_out = Path(args.json) if args.json else Path(tmp) / "rows.json"
        code, rows = run_cells(
            [manifest.resolve()], arches, args.backend, json_out=json_out, checks=args.check,
            keyword=args.keyword, workers=str(args.workers), junit_xml=args.junit_xml,
            seed=args.seed,
        )
    counts = {s: sum(r.status == s for r in rows) for s in Status}
    print("hqval check: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
          + f" ({len(rows)} cells)")
    if code == 0 and rows and all(r.status.ok for r in rows):
        return 0
    if code in (0, 1) and rows:
        return 1
    if code == 5 or not rows:
        print("hqval check: no cells ran (check --arch, --check and -k)", file=sys.stderr)
    return 2 if code not in (0, 1) else 1
