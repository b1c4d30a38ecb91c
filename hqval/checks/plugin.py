"""pytest plugin: the check matrix as pytest items.

Load it explicitly (``-p hqval.checks.plugin``) and pass kernel manifests (a kernels.yaml,
or a mutants.yaml, whose entries carry ``mutant_of``) as the paths to collect; every
(check x kernel x arch x backend) cell the check applies to
(``hqval.checks.cell.not_applicable``) becomes one item whose name is the cell identity,
e.g. ``bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]``, so ``-k``, the JUnit XML, the failure
list and the result rows all use one string.  Items sit under one collector per check and
arch (``kernels.yaml::bit_identity.gfx1100::bit_identity[...]``: the JUnit classname
``kernels.yaml.bit_identity.gfx1100``), and carry the check, the arch and the backend as
markers, so ``-m "reference_parity and gfx1201"`` selects.

Works under pytest-xdist: each worker rebuilds the same items; a cell's row travels back
to the controller on its test report (the ``hqval_row`` attribute, carried by pytest's own
report serialisation: ``pytest_report_to_serializable`` / ``pytest_report_from_serializable``),
and the controller writes every row to ``--hqval-json``.  JUnit gets the name, the time
and the failure, nothing of the row (it used to embed every row as a property: 2.2 MB of
XML for 1,800 cells).  The plugin's state (rows, backends) lives in the config's stash.

Verdicts: pass -> passed; unsupported / skipped -> skipped with the reason; fail / error
-> failed, with the message (an error is never a pass).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.checks.cell import CheckContext
    from hqval.manifest import KernelSpec, Manifest

# the test report's attribute that carries a cell's row (``Row.to_dict()``)
ROW_ATTR = "hqval_row"
# the attribute that carries the objects a cell loaded, when its row may be remembered
# (``hqval.checks.rowcache``): "kernel|arch" -> sha256
OBJECTS_ATTR = "hqval_objects"
BACKENDS = ("emu", "hip", "cuda")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hqval", "hqval check matrix")
    group.addoption("--hqval-arch", action="append", default=[],
                    help="gfx target to check (repeatable)")
    group.addoption("--hqval-backend", default="auto",
                    help="emu, hip, cuda or auto (default auto)")
    group.addoption("--hqval-check", action="append", default=[],
                    help="only these checks (repeatable; default all)")
    group.addoption("--hqval-seed", type=int, default=0, help="fixture seed (default 0)")
    group.addoption("--hqval-cache-dir", default=None,
                    help="code object cache (hqval.toolchain.cache_base; default $HQVAL_CACHE)")
    group.addoption("--hqval-json", default=None, help="write every result row here (JSON list)")
    group.addoption("--hqval-skip", default=None,
                    help="file of cell identities (one a line) to deselect: cells a resumed "
                         "run already has")


@dataclass
class _State:
    """This process's part of a session: the rows reported (on the controller, in report
    order) and one check context per (backend, arch, manifest, cache)."""

    rows: list[Row] = field(default_factory=list)
    contexts: dict[tuple[str, str, str, str], CheckContext] = field(default_factory=dict)
    cache: Any = None  # the --hqval-cache-dir in effect (``toolchain.selected_cache``)


_STATE = pytest.StashKey[_State]()


def _state(config: pytest.Config) -> _State:
    if _STATE not in config.stash:  # configured before this plugin was (never, in hqval)
        config.stash[_STATE] = _State()
    return config.stash[_STATE]


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.cache is not None:
        state.cache.__exit__(None, None, None)
        state.cache = None


def pytest_configure(config: pytest.Config) -> None:
    from hqval.checks.cell import CHECKS
    from hqval.matrix import load_arches

    state = config.stash[_STATE] = _State()
    config.pluginmanager.register(_Recorder(state), "hqval-checks-rows")
    cache = config.getoption("--hqval-cache-dir")
    if cache:
        # every cache of the session's processes (disassemblies, the emulator's compiled
        # FMA) follows --hqval-cache-dir, as the code objects do
        from hqval.toolchain import selected_cache

        state.cache = selected_cache(cache)
        state.cache.__enter__()
    # a marker per check, arch and backend (strict markers: each is registered)
    arches = dict.fromkeys([*load_arches(), *(config.getoption("--hqval-arch") or [])])
    for name, what in ([(c, "check") for c in CHECKS] + [(a, "arch") for a in arches]
                       + [(b, "backend") for b in BACKENDS]):
        config.addinivalue_line("markers", f"{name}: hqval cells of the {name} {what}")


_TOP_KEY = re.compile(r"^(kernels|schema)\s*:", re.MULTILINE)


def _is_manifest(path: Path, named: bool = False) -> bool:
    """A YAML file named on the command line is a manifest (its loader then says what is
    wrong with it); one found in a directory is when it has top-level ``schema:`` and
    ``kernels:`` keys anywhere in the file, not only near the top."""
    if path.suffix not in (".yaml", ".yml"):
        return False
    if named:
        return True
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return len({m.group(1) for m in _TOP_KEY.finditer(text)}) == 2


def _named(config: pytest.Config, path: Path) -> bool:
    for arg in config.args:
        try:
            if Path(arg.split("::", 1)[0]).resolve() == path.resolve():
                return True
        except OSError:
            continue
    return False


def _session_real(config: pytest.Config) -> Path | None:
    """The one kernel (non-mutant) manifest named on the command line, if exactly one: a
    mutant manifest of the same session without ``manifest:`` resolves in it."""
    named = []
    for arg in config.args:
        p = Path(arg.split("::", 1)[0])
        if p.suffix in (".yaml", ".yml") and p.is_file() and not is_mutant_manifest(p):
            named.append(p.resolve())
    return named[0] if len(set(named)) == 1 else None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if _is_manifest(file_path, _named(parent.config, file_path)):
        collector: pytest.Collector = ManifestFile.from_parent(parent, path=file_path)
        return collector
    return None


def _context(config: pytest.Config, backend_name: str, arch_name: str, manifest: Manifest,
             seed: int, cache_dir: str | None = None) -> CheckContext:
    """One backend and check context per (backend, arch, manifest, cache) in this
    process, kept in the config's stash."""
    contexts = _state(config).contexts
    key = (backend_name, arch_name, str(manifest.path), str(cache_dir))
    if key not in contexts:
        from hqval.backends import get
        from hqval.checks.cell import CheckContext
        from hqval.matrix import resolve_arch

        arch = resolve_arch(arch_name)
        backend = get(backend_name, arch_name, cache_dir)
        contexts[key] = CheckContext(backend=backend, arch=arch, manifest=manifest, seed=seed)
    return contexts[key]


def is_mutant_manifest(path: Path) -> bool:
    return "mutant_of:" in path.read_text(errors="replace")


def load_for_cells(path: Path, real_path: Path | None = None) -> tuple[Manifest, Manifest]:
    """(the manifest whose kernels are checked, the manifest baselines resolve in).  A
    mutant manifest's baselines and fallback references are the kernels of its real
    manifest (its ``manifest:`` key; else ``real_path``, the session's one kernel manifest;
    else the suite's kernels.yaml)."""
    from hqval.manifest import load_manifest, load_mutants

    if is_mutant_manifest(path):
        muts = load_mutants(path, real=real_path)
        real = load_manifest(muts.real_manifest)
        merged = type(real)(path=muts.path, kernels=[*real.kernels, *muts.kernels])
        return muts, merged
    m = load_manifest(path)
    return m, m


def backend_label(name: str, arch: str) -> str:
    """The backend part of a cell identity: ``auto`` resolves to what it chose."""
    if name != "auto":
        return name
    from hqval.backends import BackendUnavailable, get
    from hqval.matrix import resolve_arch

    try:
        return get("auto", arch).name
    except BackendUnavailable:
        return "hip" if resolve_arch(arch).is_amd else "cuda"


class ManifestFile(pytest.File):
    def collect(self) -> Iterator[pytest.Collector]:
        from hqval.checks.cell import CHECKS

        opt = self.config.getoption
        arches: list[str] = opt("--hqval-arch")
        if not arches:
            raise pytest.UsageError("hqval plugin: pass --hqval-arch (one or more gfx targets)")
        checks: list[str] = opt("--hqval-check") or list(CHECKS)
        unknown = [c for c in checks if c not in CHECKS]
        if unknown:
            raise pytest.UsageError(f"unknown check(s) {unknown}: choose from {list(CHECKS)}")
        subject, context_manifest = load_for_cells(self.path, _session_real(self.config))
        backend_name: str = opt("--hqval-backend")
        for arch in arches:
            label = backend_label(backend_name, arch)
            for check in checks:
                yield CheckArch.from_parent(self, name=f"{check}.{arch}", check=check,
                                            arch=arch, label=label, subject=subject,
                                            backend_name=backend_name,
                                            manifest=context_manifest)


class CheckArch(pytest.Collector):
    """The cells of one check on one arch (their JUnit classname and marks)."""

    def __init__(self, *, check: str, arch: str, label: str, subject: Manifest,
                 backend_name: str, manifest: Manifest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check, self.arch, self.label = check, arch, label
        self.subject, self.backend_name, self.manifest = subject, backend_name, manifest

    def collect(self) -> Iterator[pytest.Item]:
        from hqval.checks.cell import Cell, not_applicable
        from hqval.matrix import resolve_arch

        arch = resolve_arch(self.arch)
        for spec in self.subject.kernels:
            if not_applicable(self.check, spec, arch, self.manifest):
                continue  # no item: the cell does not exist (n/a), it is not skipped
            cell = Cell(self.check, spec.name, self.arch, self.label)
            item = CellItem.from_parent(self, name=cell.identity, check=self.check, spec=spec,
                                        arch=self.arch, backend_name=self.backend_name,
                                        manifest=self.manifest)
            for mark in (self.check, self.arch, self.label):
                item.add_marker(mark)
            yield item


class CellFailed(Exception):
    pass


class CellItem(pytest.Item):
    def __init__(self, *, check: str, spec: KernelSpec, arch: str, backend_name: str,
                 manifest: Manifest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.spec = spec
        self.arch = arch
        self.backend_name = backend_name
        self.manifest = manifest
        self.row: Row | None = None
        self.objects: dict[str, str | None] | None = None

    def runtest(self) -> None:
        from hqval.checks.cell import run_cell

        seed: int = self.config.getoption("--hqval-seed")
        ctx = _context(self.config, self.backend_name, self.arch, self.manifest, seed,
                       self.config.getoption("--hqval-cache-dir"))
        row = run_cell(ctx, self.check, self.spec)
        self.row = row
        self.objects = ctx.cell_objects()
        if row.status in (Status.UNSUPPORTED, Status.SKIPPED):
            pytest.skip(f"{row.status}: {row.message}")
        if row.status != Status.PASS:
            raise CellFailed(f"{row.status}: {row.message}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, CellFailed):
            return f"{self.name}: {excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # one kernel's cells next to each other (every check of it on one arch, then the next
    # arch, in the order given), and a mutant's right after those of the kernel it breaks
    # when both are in the session: xdist hands out runs of consecutive items, so a
    # kernel's cells on arches whose code is identical, and a mutant's cells comparing with
    # the same baseline launches, mostly meet in one worker, where the emulator runs their
    # launches once (``hqval.emu.machine.SHARED_REPLAY``)
    kernel_order = {id(i): k for k, i in enumerate(items)}
    first: dict[str, int] = {}
    for i in items:
        if isinstance(i, CellItem):
            first.setdefault(i.spec.name, kernel_order[id(i)])

    def family(i: CellItem) -> int:
        own = first.get(i.spec.name, 0)
        return min(own, first.get(i.spec.mutant_of or i.spec.name, own))

    items.sort(key=lambda i: (family(i), first.get(i.spec.name, 0), kernel_order[id(i)])
               if isinstance(i, CellItem) else (kernel_order[id(i)], 0, 0))
    skip_file = config.getoption("--hqval-skip")
    if not skip_file:
        return
    skip = set(Path(skip_file).read_text().splitlines())
    dropped = [i for i in items if i.name in skip]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.name not in skip]


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """The cells run with the oracle's memo on (``hqval.checks.oracle.memoised``): a case
    and its references are built once per process, not once per check and arch."""
    from hqval.checks import oracle

    with oracle.memoised():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Any:
    """The cell's row rides on its call-phase report (never on JUnit)."""
    report = yield
    if isinstance(item, CellItem) and item.row is not None and call.when == "call":
        setattr(report, ROW_ATTR, item.row.to_dict())
        if item.objects is not None:
            setattr(report, OBJECTS_ATTR, dict(item.objects))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Any:
    """xdist: a worker's report carries its row to the controller."""
    data = yield
    if isinstance(data, dict):
        for attr in (ROW_ATTR, OBJECTS_ATTR):
            if hasattr(report, attr):
                data[attr] = getattr(report, attr)
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(config: pytest.Config, data: dict[str, Any]) -> Any:
    report = yield
    if report is not None:
        for attr in (ROW_ATTR, OBJECTS_ATTR):
            if attr in data:
                setattr(report, attr, data[attr])
    return report


def report_row(report: Any) -> Row | None:
    """The row a cell's report carries, or None (a phase without one, a crash)."""
    d = getattr(report, ROW_ATTR, None)
    return Row.from_dict(d) if isinstance(d, dict) else None


def report_objects(report: Any) -> dict[str, str | None] | None:
    """The objects a cell's report says it loaded (``OBJECTS_ATTR``), or None."""
    d = getattr(report, OBJECTS_ATTR, None)
    if not isinstance(d, dict):
        return None
    return {str(k): v if isinstance(v, str) else None for k, v in d.items()}


class _Recorder:
    """Registered per config: on the controller (and without xdist) each cell's row,
    once, from its call-phase report, into the config's stash."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = report_row(report) if report.when == "call" else None
        if row is not None:
            self.state.rows.append(row)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: its rows reached the controller through the reports
    state = _state(session.config)
    out = session.config.getoption("--hqval-json")
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps([r.to_dict() for r in state.rows], indent=1) + "\n")
        tmp.replace(path)


def collected_rows(config: pytest.Config) -> list[Row]:
    return list(_state(config).rows)
