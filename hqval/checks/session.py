"""One pytest session over the check cells of one or more manifests (the checks plugin,
``hqval.checks.plugin``), for ``hqval check``, ``hqval mutants`` and the run's checks and
mutants steps.

The session is configured on its own (an ini of its own, independent of the project's
test settings and of the directory the user runs from).  Each finished cell's row reaches
``on_row`` on the controller at once (the run appends it to its run directory, so a
killed run loses no finished cell); ``skip`` lists cell identities to deselect in every
process that collects (a resumed run's finished cells).  pytest's own terminal output is
shown only with ``verbose``; otherwise it is kept and returned, for a session that did not
run.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hqval.result import Row

PYTEST_INI = "[pytest]\naddopts = --strict-markers\nxfail_strict = true\n"
# The checks plugin for a nested session.  A caller (a test, a notebook) that imported
# hqval.checks.plugin already makes pytest warn that it cannot rewrite its asserts, and a
# project ini with filterwarnings=error turns that into a failed session; the plugin has
# no asserts to rewrite, so the warning says nothing here.
PLUGIN_ARGS = ("-p", "hqval.checks.plugin", "-W", "ignore::pytest.PytestAssertRewriteWarning")
# The pytest plugins a session uses are named, never auto-loaded from whatever is installed:
# an installed plugin (hypothesis's, a randomiser, a coverage hook) has no business in the
# check cells, and each one loaded is re-read and assertion-rewritten in the controller and
# in every worker (with PYTHONDONTWRITEBYTECODE nothing is cached): hypothesis's alone cost
# ~2 s of CPU per process.  The checks plugin has no asserts to rewrite (--assert=plain).
XDIST_PLUGINS = ("xdist", "xdist.looponfail")


@dataclass
class SessionResult:
    code: int  # pytest's exit code
    rows: list[Row]  # every cell's row, in report order
    collected: int  # cells collected (after deselection), over every worker
    crashed: list[str] = field(default_factory=list)  # cells whose report carried no row
    output: str = ""  # pytest's own output (empty with verbose: it went to the terminal)

    def problem(self) -> str:
        """Why the session did not produce a row for every cell it collected, or ''."""
        if self.crashed:
            return (f"{len(self.crashed)} cell(s) ended without a verdict (a crashed worker "
                    f"or an internal error): {', '.join(self.crashed[:5])}")
        if self.code not in (0, 1, 5):
            tail = " | ".join(ln for ln in self.output.strip().splitlines()[-3:] if ln)
            return (f"the check session stopped (pytest exit {self.code})"
                    + (f": {tail}" if tail else ""))
        return ""


class _Controller:
    """Registered in the controller only: rows to ``on_row``, crashes and counts noted."""

    def __init__(self, on_row: Callable[[Row], None] | None,
                 on_objects: Callable[[Row, dict[str, str | None]], None] | None = None
                 ) -> None:
        self.on_row = on_row
        self.on_objects = on_objects
        self.rows: list[Row] = []
        self.crashed: list[str] = []
        self.collected = 0
        self._seen: set[str] = set()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(session.config, "workerinput"):
            self.collected = max(self.collected, len(session.items))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when not in ("setup", "call", "teardown"):  # xdist: a worker crashed
            self._crash(report)
            return
        if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
            if report.when == "teardown" and report.outcome == "failed":
                self._crash(report)
            return
        from hqval.checks.plugin import report_objects, report_row

        # the row rides on the call phase's report (hqval.checks.plugin); a setup phase
        # that failed, or a call without one, is a cell that ended without a verdict
        row = report_row(report) if report.when == "call" else None
        if row is None:
            self._crash(report)
            return
        if row.identity in self._seen:
            return
        self._seen.add(row.identity)
        self.rows.append(row)
        if self.on_row is not None:
            self.on_row(row)
        objects = report_objects(report) if self.on_objects is not None else None
        if objects is not None and self.on_objects is not None:
            self.on_objects(row, objects)

    def _crash(self, report: pytest.TestReport) -> None:
        name = report.nodeid.rsplit("::", 1)[-1]
        if name not in self._seen and name not in self.crashed:
            self.crashed.append(name)


class _Workers:
    """The xdist side of the controller (registered only when xdist runs)."""

    def __init__(self, controller: _Controller) -> None:
        self.controller = controller

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.controller.collected = max(self.controller.collected, len(ids))


class _Selection:
    """pytest plugin recording which cells ``-k`` keeps and which it drops."""

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.dropped: list[str] = []

    def pytest_deselected(self, items: list[Any]) -> None:
        self.dropped += [i.name for i in items]

    def pytest_collection_finish(self, session: Any) -> None:
        self.kept = [i.name for i in session.items]


def keyword_problem(manifests: Iterable[Path], arches: Iterable[str], backend: str,
                    checks: Iterable[str] | None, keyword: str | None) -> str:
    """'' when ``-k`` selects at least one cell, else why not (before any worker starts),
    naming the closest identities, checks, kernels or arches.  Selection is pytest's own
    (an in-process ``--collect-only`` of the same cells), so the two cannot disagree."""
    if not keyword:
        return ""
    import difflib
    import re

    sel = _Selection()
    args = [*(str(Path(m).resolve()) for m in manifests), *PLUGIN_ARGS,
            *isolation_args(workers=False), "-p", "no:cacheprovider", "-p", "no:xdist",
            "-p", "no:benchmark",
            "--collect-only", "-qq", "--hqval-backend", backend, "-k", keyword]
    for arch in arches:
        args += ["--hqval-arch", arch]
    for c in checks or []:
        args += ["--hqval-check", c]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = int(pytest.main(args, plugins=[sel]))
    if code not in (0, 5):  # pytest's usage error (a malformed expression) or a crash
        lines = [ln.removeprefix("ERROR: ") for ln in out.getvalue().splitlines() if ln.strip()]
        return (f"-k {keyword!r} could not be evaluated: "
                + (lines[-1] if lines else f"pytest exit {code}"))
    if sel.kept:
        return ""
    words = set(sel.dropped)
    for ident in sel.dropped:  # check[kernel|arch|backend]: each part is a word too
        words.update(w for w in re.split(r"[\[\]|]", ident) if w)
    close = difflib.get_close_matches(keyword, sorted(words), n=5, cutoff=0.6)
    hint = ("; close matches: " + ", ".join(close)) if close else \
        "; run `hqval matrix` to list the kernels and checks"
    return f"-k {keyword!r} matches none of the {len(sel.dropped)} cells{hint}"


def _installed_plugins() -> list[str]:
    """Names of the pytest plugins installed through entry points (``pytest11``)."""
    from importlib.metadata import entry_points

    return sorted({ep.name for ep in entry_points(group="pytest11")})


def isolation_args(workers: bool) -> list[str]:
    """pytest arguments that keep a nested session to the plugins it names: every
    installed entry-point plugin blocked (``-p no:NAME``, which pytest 8.0 understands;
    ``--disable-plugin-autoload`` needs 8.4) except pytest-xdist's when workers run, and no
    assertion rewriting."""
    keep = set(XDIST_PLUGINS) if workers else set()
    args = ["--assert=plain"]
    for name in _installed_plugins():
        if name not in keep:
            args += ["-p", f"no:{name}"]
    return args


@contextlib.contextmanager
def _noting_interrupts() -> Iterator[list[bool]]:
    """A list that holds True once SIGINT arrived inside the block (main thread only)."""
    seen: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous = signal.getsignal(signal.SIGINT)

    def note(signum: int, frame: Any) -> None:
        seen.append(True)
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def run_cells(
    manifests: Iterable[Path], arches: Iterable[str], backend: str, *,
    checks: Iterable[str] | None = None, keyword: str | None = None, workers: str = "2",
    junit_xml: str | None = None, seed: int = 0, verbose: bool = False,
    skip: Iterable[str] = (), on_row: Callable[[Row], None] | None = None,
    cache_dir: str | None = None,
    on_objects: Callable[[Row, dict[str, str | None]], None] | None = None,
) -> SessionResult:
    """Run the cells of ``manifests`` on ``arches``; never raises for a failing cell.
    ``on_objects`` gets each row whose cell returned normally, after ``on_row``, with the
    objects the cell loaded ("kernel|arch" -> sha256: what the check row cache records)."""
    manifests = [Path(m).resolve() for m in manifests]
    scratch = Path(tempfile.mkdtemp(prefix="hqval-cells-"))
    ini = scratch / "pytest.ini"
    ini.write_text(PYTEST_INI)
    rootdir = os.path.commonpath([m.parent for m in manifests])
    use_workers = workers not in ("0", "")
    args = [*map(str, manifests), *PLUGIN_ARGS, *isolation_args(use_workers),
            "-p", "no:cacheprovider", "-p", "no:benchmark", "-c", str(ini), "--rootdir", rootdir,
            "--hqval-backend", backend, "--hqval-seed", str(seed)]
    args += ["-v"] if verbose else ["-q", "--no-header", "--no-summary"]
    skip = sorted(set(skip))
    if skip:
        skip_file = scratch / "skip-cells.txt"
        skip_file.write_text("".join(f"{i}\n" for i in skip))
        args += ["--hqval-skip", str(skip_file)]
    for arch in arches:
        args += ["--hqval-arch", arch]
    for c in checks or []:
        args += ["--hqval-check", c]
    if keyword:
        args += ["-k", keyword]
    if cache_dir:  # the backends compile where the compile and audit steps did
        args += ["--hqval-cache-dir", str(cache_dir)]
    args += ["-n", workers] if use_workers else ["-p", "no:xdist"]
    if junit_xml:
        # pytest writes its report into the scratch directory; hqval.junit publishes it
        # through the safe writer (never through a link; merged on a resumed run)
        args += ["--junit-xml", str(scratch / "junit.xml")]
    controller = _Controller(on_row, on_objects)
    plugins: list[object] = [controller]
    if use_workers:
        plugins.append(_Workers(controller))
    out = io.StringIO()
    try:
        # pytest turns SIGINT into an interrupted session and returns; a user's interrupt
        # must stop hqval's command too (exit 130, the run resumable), so it is noted
        # here and raised again once pytest has finished its reports
        with _noting_interrupts() as interrupted:
            if verbose:
                code = int(pytest.main(args, plugins=plugins))
            else:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    code = int(pytest.main(args, plugins=plugins))
        if interrupted:
            raise KeyboardInterrupt
        if junit_xml:
            from hqval.junit import publish

            publish(scratch / "junit.xml", junit_xml, keep_existing=bool(skip))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return SessionResult(code, controller.rows, controller.collected, controller.crashed,
                         out.getvalue())
