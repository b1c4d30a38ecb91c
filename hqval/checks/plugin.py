"""pytest plugin: the check matrix as pytest items.

Load it explicitly (``-p hqval.checks.plugin``) and pass kernel manifests (a kernels.yaml,
or a mutants.yaml, whose entries carry ``mutant_of``) as the paths to collect; every
(check x kernel x arch x backend) cell becomes one item whose name is the
cell identity, e.g. ``bit_identity[gemv_mq4g256v2_r1|gfx1100|emu]``, so ``-k``, the JUnit
XML, the failure list and the result rows all use one string.  Works under pytest-xdist:
each worker rebuilds the same items; the result row travels back to the controller in the
report's ``user_properties`` and the controller writes every row to ``--hqval-json``.

Verdicts: pass -> passed; unsupported / skipped -> skipped with the reason; fail / error
-> failed, with the message (an error is never a pass).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.checks.cell import CheckContext
    from hqval.manifest import KernelSpec, Manifest

ROW_PROPERTY = "hqval_row"
_ROWS_KEY = pytest.StashKey[list[Row]]()
# Rows reported in this session (controller side), in report order.
_pending: list[Row] = []


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


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ROWS_KEY] = []
    _pending.clear()


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


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if _is_manifest(file_path, _named(parent.config, file_path)):
        collector: pytest.Collector = ManifestFile.from_parent(parent, path=file_path)
        return collector
    return None


class _Contexts:
    """One backend and check context per (backend, arch) in this process."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str, str, str], CheckContext] = {}

    def get(self, backend_name: str, arch_name: str, manifest: Manifest, seed: int,
            cache_dir: str | None = None) -> CheckContext:
        key = (backend_name, arch_name, str(manifest.path), str(cache_dir))
        if key not in self._by_key:
            from hqval.backends import get
            from hqval.checks.cell import CheckContext
            from hqval.matrix import resolve_arch

            arch = resolve_arch(arch_name)
            backend = get(backend_name, arch_name, cache_dir)
            self._by_key[key] = CheckContext(backend=backend, arch=arch, manifest=manifest,
                                             seed=seed)
        return self._by_key[key]


_CONTEXTS = _Contexts()


def is_mutant_manifest(path: Path) -> bool:
    return "mutant_of:" in path.read_text(errors="replace")


def load_for_cells(path: Path) -> tuple[Manifest, Manifest]:
    """(the manifest whose kernels are checked, the manifest baselines resolve in).  A
    mutant manifest's baselines and fallback references are the kernels of its real
    manifest (its ``manifest:`` key; the suite's kernels.yaml when it has none)."""
    from hqval.manifest import load_manifest, load_mutants

    if is_mutant_manifest(path):
        muts = load_mutants(path)
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
    def collect(self) -> Iterator[pytest.Item]:
        from hqval.checks.cell import CHECKS, Cell

        opt = self.config.getoption
        arches: list[str] = opt("--hqval-arch")
        if not arches:
            raise pytest.UsageError("hqval plugin: pass --hqval-arch (one or more gfx targets)")
        checks: list[str] = opt("--hqval-check") or list(CHECKS)
        unknown = [c for c in checks if c not in CHECKS]
        if unknown:
            raise pytest.UsageError(f"unknown check(s) {unknown}: choose from {list(CHECKS)}")
        subject, context_manifest = load_for_cells(self.path)
        backend_name: str = opt("--hqval-backend")
        for arch in arches:
            label = backend_label(backend_name, arch)
            for spec in subject.kernels:
                for check in checks:
                    cell = Cell(check, spec.name, arch, label)
                    yield CellItem.from_parent(
                        self, name=cell.identity, check=check, spec=spec, arch=arch,
                        backend_name=backend_name, manifest=context_manifest,
                    )


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

    def runtest(self) -> None:
        from hqval.checks.cell import run_cell

        seed: int = self.config.getoption("--hqval-seed")
        ctx = _CONTEXTS.get(self.backend_name, self.arch, self.manifest, seed,
                            self.config.getoption("--hqval-cache-dir"))
        row = run_cell(ctx, self.check, self.spec)
        self.row = row
        self.user_properties.append((ROW_PROPERTY, json.dumps(row.to_dict())))
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
    skip_file = config.getoption("--hqval-skip")
    if not skip_file:
        return
    skip = set(Path(skip_file).read_text().splitlines())
    dropped = [i for i in items if i.name in skip]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.name not in skip]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # On the controller (and without xdist) collect the row once, from the call phase (or
    # the setup phase if the call never ran).
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    for key, value in report.user_properties:
        if key == ROW_PROPERTY:
            _pending.append(Row.from_dict(json.loads(str(value))))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: its rows reached the controller through the reports
    rows = list(_pending)
    session.config.stash[_ROWS_KEY] = rows
    out = session.config.getoption("--hqval-json")
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps([r.to_dict() for r in rows], indent=1) + "\n")
        tmp.replace(path)


def collected_rows(config: pytest.Config) -> list[Row]:
    rows: list[Row] = config.stash.get(_ROWS_KEY, [])
    return list(rows)
