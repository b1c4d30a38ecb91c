"""The results store: one run is one directory.

``envelope.json`` says where the rows came from (schema and suite version, git commits of
the suite and of an external kernel tree, compiler, backend, device, runtime, host, date,
command line); ``rows.jsonl`` holds one ``hqval.result.Row`` per line.

Rows are appended in batches with one ``write`` + flush + fsync each, so a run that is
killed loses nothing it already appended; at worst the last line is torn, and a torn last
line is dropped on load with a warning (any other unreadable line is an error: that is
corruption, not an interruption).  ``--resume`` asks the store which cell identities
already have a row and skips them; a cell appended again (a retried step) supersedes its
earlier row when the run is loaded.

Older schema versions are migrated forward on load through ``MIGRATIONS`` (asv's results
API versions): each entry turns a version-N envelope and its rows into version N+1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import fcntl
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hqval
from hqval import safeio
from hqval.result import Row, Status

if TYPE_CHECKING:
    import pandas as pd

ENVELOPE = safeio.RUN_ENVELOPE
ROWS = safeio.RUN_ROWS
LOCK = safeio.RUN_LOCK
# what every envelope holds once migrated: a run without them is damaged, not empty
REQUIRED = ("schema_version", "arch", "kernels")
# the row kinds that are evidence: each such cell is written once by the run that ran it
# (``--resume`` skips cells that have a row), so a failing one is never superseded
EVIDENCE_KINDS = ("compile", "audit", "check", "mutant", "timing")


class RunDirError(ValueError):
    """A run directory that cannot be read; the message names the file and the fix."""


class RunLocked(RunDirError):
    """Another process is writing to the run directory."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a uniquely named temporary file beside it, renamed
    into place whole (two writers never share a temporary name)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def not_a_link(path: Path) -> Path:
    """``path`` itself, refused when it is a symbolic link: a run directory's own files
    (envelope, rows, lock) are never links, or hqval would read another run's rows or
    write, truncate or lock a file outside ``--out`` through it."""
    if path.is_symlink():
        raise RunDirError(f"{path}: a symbolic link (to {os.readlink(path)}), not a file of "
                          "this run; a run directory's files are never links: remove it or "
                          "choose a fresh --out")
    return path


class TornLineWarning(UserWarning):
    """The last line of rows.jsonl was cut off by an interrupted write and was dropped."""


# ---------------------------------------------------------------------------- envelope


def git_commit(path: Path) -> str | None:
    """The commit checked out at ``path`` (with ``+dirty`` when the tree has edits), or None
    when ``path`` is not inside a git work tree or git is missing."""
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=False,
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip()
    return commit + ("+dirty" if dirty.stdout.strip() else "")


def make_envelope(
    *,
    backend: str,
    device: str = "",
    arch: str | Iterable[str] = (),
    compiler: str | None = None,
    compiler_version: str | None = None,
    runtime: Mapping[str, str] | None = None,
    kernel_tree: Path | None = None,
    argv: Iterable[str] | None = None,
    kernels: Mapping[str, Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the envelope for a new run.  ``kernels`` is the manifest's kernel table
    (name -> qt, kind, baseline, ...) so admission can classify rows offline later."""
    suite_root = Path(hqval.__file__).resolve().parent.parent
    arches = [arch] if isinstance(arch, str) else list(arch)
    env: dict[str, Any] = {
        "schema_version": hqval.SCHEMA_VERSION,
        # the run's name: every row the run writes carries it (RunWriter.append), kept
        # across --resume, so a row of any other run is told apart
        "run_id": uuid.uuid4().hex,
        "hqval_version": hqval.__version__,
        "suite_commit": git_commit(suite_root),
        "kernel_tree": str(kernel_tree) if kernel_tree else None,
        "kernel_tree_commit": git_commit(kernel_tree) if kernel_tree else None,
        "compiler": compiler,
        "compiler_version": compiler_version,
        "backend": backend,
        "device": device,
        "arch": arches,
        "runtime": dict(runtime or {}),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command_line": shlex.join(list(argv) if argv is not None else sys.argv),
        "kernels": {k: dict(v) for k, v in (kernels or {}).items()},
    }
    if extra:
        env.update(extra)
    return env


# ---------------------------------------------------------------------------- migrations

RawRun = tuple[dict[str, Any], list[dict[str, Any]]]
Migration = Callable[[dict[str, Any], list[dict[str, Any]]], RawRun]


def _v0_to_v1(
    envelope: dict[str, Any], rows: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """v0 (the prototype layout): envelope key ``version`` instead of ``schema_version``,
    ``commit`` instead of ``suite_commit``, a single ``arch`` string, and rows whose
    outcome was in ``result`` with upper-case values (PASS/FAIL/...) and whose metric was
    ``value``.  v1 renames them and adds the fields v0 lacked, empty."""
    env = dict(envelope)
    env.pop("version", None)
    env["schema_version"] = 1
    if "commit" in env:
        env["suite_commit"] = env.pop("commit")
    arch = env.get("arch", [])
    env["arch"] = [arch] if isinstance(arch, str) else list(arch)
    for key in ("kernel_tree", "kernel_tree_commit", "compiler", "compiler_version",
                "device", "host", "date", "command_line"):
        env.setdefault(key, None)
    env.setdefault("runtime", {})
    env.setdefault("kernels", {})
    out = []
    for r in rows:
        n = dict(r)
        if "result" in n:
            n["status"] = str(n.pop("result")).lower()
        if "value" in n:
            n["measured"] = n.pop("value")
        n.setdefault("kind", "check")
        n.setdefault("details", {})
        out.append(n)
    return env, out


# Schema 1 registered HFQ4G256 as qt=1; the engine's id is qt=6 (qt=1 is its F16).
_V1_HFQ4G256_QT, _V2_HFQ4G256_QT = 1, 6


def _v1_to_v2(
    envelope: dict[str, Any], rows: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """v1 called HFQ4G256 qt=1.  v2 uses the engine's id, qt=6: the envelope's kernel table
    and every row's ``details.qt`` (admission rows and check details) say 6 where they said
    1.  Messages are kept as written (they are the run's own words)."""
    env = dict(envelope)
    env["schema_version"] = 2
    kernels = env.get("kernels")
    if isinstance(kernels, dict):
        env["kernels"] = {
            name: _renumber(info) if isinstance(info, dict) else info
            for name, info in kernels.items()
        }
    out = []
    for r in rows:
        n = dict(r)
        details = n.get("details")
        if isinstance(details, dict):
            n["details"] = _renumber(details)
        if n.get("kind") == "admit" and n.get("kernel") == f"qt{_V1_HFQ4G256_QT}":
            n["kernel"] = f"qt{_V2_HFQ4G256_QT}"  # the identity follows from the fields
        out.append(n)
    return env, out


def _renumber(d: dict[str, Any]) -> dict[str, Any]:
    qt = d.get("qt")
    if qt == _V1_HFQ4G256_QT and not isinstance(qt, bool):
        return {**d, "qt": _V2_HFQ4G256_QT}
    return d


def _v2_to_v3(
    envelope: dict[str, Any], rows: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """v3 names the run (envelope ``run_id``) and binds every row to it (``run_id``) and
    to the code object it judged (``object_sha256``, the envelope's ``objects``).  A v2
    run has neither: its rows are read as written, and admission says they are unbound
    (``hqval.admission.evidence.binding_damage``)."""
    env = dict(envelope)
    env["schema_version"] = 3
    return env, rows


# version N -> function producing version N+1
MIGRATIONS: dict[int, Migration] = {0: _v0_to_v1, 1: _v1_to_v2, 2: _v2_to_v3}


def migrate(
    envelope: dict[str, Any], rows: list[dict[str, Any]], source: str = "run"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    version = envelope.get("schema_version", envelope.get("version", 0))
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunDirError(f"{source}: schema_version {version!r} is not an integer")
    if version > hqval.SCHEMA_VERSION:
        raise RunDirError(
            f"{source}: schema version {version} is newer than this hqval "
            f"(reads up to {hqval.SCHEMA_VERSION}); upgrade hqval to read it"
        )
    while version < hqval.SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise RunDirError(f"{source}: no migration from schema version {version}")
        envelope, rows = step(envelope, rows)
        version += 1
    return envelope, rows


# ---------------------------------------------------------------------------- run dir


@dataclass(frozen=True)
class Run:
    """A loaded run: its directory, envelope (migrated to the current schema) and rows."""

    path: Path
    envelope: dict[str, Any]
    rows: list[Row]
    # the schema the envelope was written in, before migration (a run of schema 2 and
    # later records its expected cells up front: hqval.admission.expected_cells_damage)
    written_schema: int = hqval.SCHEMA_VERSION


class DuplicateKey(ValueError):
    """A JSON object names one key twice: its value is ambiguous."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(repr(k))
        out[k] = v
    return out


# rows.jsonl and envelope.json are read whole, through the bounded reader: a committed
# 9-arch run with hardware samples holds a few MB of rows; a file far beyond that (a sparse
# file, a device behind the name) is refused unread rather than read into memory
ROWS_LIMIT = 512 << 20
ENVELOPE_LIMIT = safeio.DEFAULT_LIMIT
# the fields a row of the current schema holds (``Row.to_dict``): any other key is not
# hqval's, so the row was edited by hand
ROW_KEYS = frozenset(f.name for f in dataclasses.fields(Row)) | {"identity"}


def _read_bounded(path: Path, limit: int) -> bytes:
    try:
        return safeio.read_bytes(path, limit=limit, follow_symlinks=False)
    except safeio.SafeIOError as exc:
        raise RunDirError(f"{exc}; the run directory is damaged: re-run into a fresh --out "
                          "directory") from None


def _parse_json(raw: bytes) -> Any:
    """One JSON document of a run file: UTF-8, nested at most ``safeio.MAX_DEPTH`` deep
    (checked on what the parser gave: past the recursion limit the parser raises
    RecursionError, never exhausting the C stack), no key twice.
    Raises UnicodeDecodeError, json.JSONDecodeError, DuplicateKey or _TooDeep."""
    text = raw.decode("utf-8")

    def too_deep(why: str) -> _TooDeep:
        where = safeio.json_depth_ok(text, safeio.MAX_DEPTH)
        if where is not None:
            return _TooDeep(f"nested deeper than {safeio.MAX_DEPTH} levels (offset {where})")
        return _TooDeep(why)

    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except (RecursionError, OverflowError) as exc:
        raise too_deep(" ".join(str(exc).split())) from None
    except ValueError as exc:  # an integer of 5000 digits: not a JSONDecodeError
        if isinstance(exc, (json.JSONDecodeError, DuplicateKey)):
            if safeio.json_depth_ok(text, safeio.MAX_DEPTH) is not None:
                raise too_deep("") from None
            raise
        raise too_deep(" ".join(str(exc).split())) from None
    if safeio.nesting_exceeds(value, safeio.MAX_DEPTH, text):
        raise too_deep(f"nested deeper than {safeio.MAX_DEPTH} levels")
    return value


class _TooDeep(ValueError):
    """A JSON document hqval's parser must not take (too deep, a number beyond range)."""


def _read_row_lines(path: Path) -> Iterator[dict[str, Any]]:
    data = _read_bounded(path, ROWS_LIMIT)
    lines = data.split(b"\n")
    # A complete file ends in "\n", leaving one empty tail element.
    tail = lines.pop()
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            yield _parse_json(raw)
        except (DuplicateKey, _TooDeep) as exc:
            raise _damaged_row(path, lineno, exc) from None
        except UnicodeDecodeError as exc:
            raise RunDirError(
                f"{path}:{lineno}: not UTF-8 (byte {exc.start}); the file is corrupt: re-run "
                "into a fresh --out directory") from exc
        except json.JSONDecodeError as exc:
            raise RunDirError(
                f"{path}:{lineno}: unreadable row ({exc.msg}); the file is corrupt in the "
                "middle, not merely interrupted: re-run into a fresh --out directory"
            ) from exc
    if tail.strip():
        try:
            yield _parse_json(tail)
        except (DuplicateKey, _TooDeep) as exc:
            raise _damaged_row(path, len(lines) + 1, exc) from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            warnings.warn(
                f"{path}: dropped a torn last line ({len(tail)} bytes) left by an "
                "interrupted write; re-run with --resume to redo that cell",
                TornLineWarning, stacklevel=3,
            )


def _damaged_row(path: Path, lineno: int, exc: Exception) -> RunDirError:
    """A complete row that parses as JSON but is no row: a key twice, or nested too deep
    (a torn last line is told apart by the caller)."""
    what = (f"a row with the key {exc} twice (which one is the row's?)"
            if isinstance(exc, DuplicateKey) else f"unreadable row ({exc})")
    return RunDirError(f"{path}:{lineno}: {what}; the rows are damaged: re-run into a fresh "
                       "--out directory")


def read_envelope(run_dir: Path) -> dict[str, Any]:
    path = not_a_link(Path(run_dir) / ENVELOPE)
    if not path.exists():  # a FIFO or device by that name is refused by the reader
        raise RunDirError(
            f"{run_dir}: no {ENVELOPE}; pass a run directory written by `hqval run --out DIR`"
        )
    try:
        env = _parse_json(_read_bounded(path, ENVELOPE_LIMIT))
    except DuplicateKey as exc:
        raise RunDirError(f"{path}: the key {exc} twice: the envelope is damaged; re-run "
                          "into a fresh --out directory") from None
    except _TooDeep as exc:
        raise RunDirError(f"{path}: unreadable ({exc}): the envelope is damaged; re-run "
                          "into a fresh --out directory") from None
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}: not UTF-8 (byte {exc.start}): the envelope is damaged; "
                          "re-run into a fresh --out directory") from exc
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}): the "
                          "envelope is damaged; re-run into a fresh --out directory") from exc
    if not isinstance(env, dict) or not env:
        raise RunDirError(f"{path}: {'empty' if env in ({}, [], None, '') else 'not a'} JSON "
                          "object: the envelope is damaged; re-run into a fresh --out directory")
    if "schema_version" not in env and "version" not in env:
        raise RunDirError(f"{path}: no schema_version: the envelope is damaged (or not "
                          "hqval's); re-run into a fresh --out directory")
    return env


def load(run_dir: str | os.PathLike[str]) -> Run:
    """Read a run directory: envelope + rows, migrated to the current schema."""
    run_dir = Path(run_dir)
    env = read_envelope(run_dir)
    rows_path = not_a_link(run_dir / ROWS)
    raw_rows = list(_read_row_lines(rows_path)) if rows_path.exists() else []
    written = env.get("schema_version", env.get("version", 0))
    env, raw_rows = migrate(env, raw_rows, source=str(run_dir))
    lacking = [k for k in REQUIRED if k not in env]
    if lacking or not isinstance(env.get("arch"), list) or not isinstance(env.get("kernels"), dict):
        what = ", ".join(lacking) or "arch (a list) and kernels (a mapping)"
        raise RunDirError(f"{run_dir / ENVELOPE}: lacks {what}: the envelope is damaged; "
                          "re-run into a fresh --out directory")
    by_identity: dict[str, Row] = {}
    for i, d in enumerate(raw_rows, 1):
        try:
            row = Row.from_dict(d)
        except (KeyError, ValueError, TypeError, OverflowError) as exc:
            raise RunDirError(f"{rows_path}: row {i} is not a valid result row ({exc!r})") from exc
        unknown = sorted(set(d) - ROW_KEYS) if written >= 3 else []
        if unknown:
            raise RunDirError(
                f"{rows_path}: row {i} ({row.identity}) has field(s) no hqval row holds: "
                f"{', '.join(map(repr, unknown))}; the row was edited: re-run into a fresh "
                "--out")
        if "identity" in d and d["identity"] != row.identity:
            raise RunDirError(
                f"{rows_path}: row {i} names itself {d['identity']!r} but its fields make "
                f"{row.identity}: the row contradicts itself; the rows are damaged: re-run "
                "into a fresh --out")
        # A later row for the same cell supersedes the earlier one (a step's mark, the
        # admission rows, a retried error), except that an evidence cell's failure is
        # never replaced: the run wrote that cell once, so a second verdict is damage.
        prev = by_identity.get(row.identity)
        if prev is not None and row.kind in EVIDENCE_KINDS and _verdict_of_kernel(prev) \
                and row.status is not prev.status:
            raise RunDirError(
                f"{rows_path}: row {i} says {row.identity} is {row.status} after an earlier "
                f"row of that cell {'failed' if prev.status is Status.FAIL else 'erred'}; a "
                "run writes each evidence cell once and a failure or error is never "
                "superseded: the rows are damaged; re-run into a fresh --out")
        by_identity[row.identity] = row
    return Run(run_dir, env, list(by_identity.values()), int(written))


def _verdict_of_kernel(row: Row) -> bool:
    """A failure or error that is the kernel's (not hqval's own machinery: an
    infrastructure error is redone by ``--resume``)."""
    return row.status is Status.FAIL or (
        row.status is Status.ERROR and not row.details.get("infrastructure"))


def load_runs(paths: Iterable[str | os.PathLike[str]], what: str = "RUN") -> list[Run]:
    """Several run directories; a ``RunDirError`` names the option it came from."""
    runs = []
    for p in paths:
        try:
            runs.append(load(p))
        except RunDirError as exc:
            raise RunDirError(f"{what} {exc}") from None
    return runs


def load_run(run_dir: str | os.PathLike[str], policy: Any = None) -> pd.DataFrame:
    """One call from run directory to a DataFrame of its judged rows
    (``hqval.admission.judge``: timing verdicts recomputed from the samples under
    ``policy``, an ``hqval.admission.Policy``; default matrices/policy.yaml), the same
    verdicts ``hqval admit`` and the report give.  One row per result, the envelope's
    device/host/date as columns, the timing verdict as ``verdict``, ``ratio``,
    ``ci_low``, ``ci_high`` and ``unit`` (empty where a row has none), ``details``
    flattened to ``details.*``.  What the judge found the run cannot vouch for
    (``JudgedRun.damage``, for which ``hqval admit`` exits 2) is the frame's
    ``attrs["damage"]`` (every line) and each row's ``damage`` column (why that row is
    damage, else ""): a damaged row is never a bare verdict here either."""
    from hqval.admission import judge_run, load_policy

    run = load(run_dir)
    judged = judge_run(run, policy if policy is not None else load_policy())
    df = frame(Run(run.path, run.envelope, list(judged.rows), run.written_schema))
    why: dict[str, list[str]] = {}
    for line in judged.damage:
        ident, sep, reason = line.partition(": ")
        if sep:
            why.setdefault(ident, []).append(reason)
    df["damage"] = ["; ".join(why.get(str(i), [])) for i in df["identity"]] \
        if "identity" in df else []
    df.attrs["damage"] = list(judged.damage)
    return df


def frame(*runs: Run) -> pd.DataFrame:
    import pandas as pd

    records: list[dict[str, Any]] = []
    for run in runs:
        env = run.envelope
        for row in run.rows:
            d = row.to_dict()
            v = row.details.get("verdict")
            v = v if isinstance(v, dict) else {}
            d["verdict"] = v.get("verdict")
            for key in ("ratio", "ci_low", "ci_high"):
                d[key] = v.get(key)
            # a timing cell's measured value is its v2/v1 ratio; other rows say nothing
            d["unit"] = "ratio" if v else None
            details = d.pop("details")
            for k, v in details.items():
                d[f"details.{k}"] = v if not isinstance(v, (list, dict)) else json.dumps(v)
            d["run"] = str(run.path)
            d["host"] = env.get("host")
            d["device"] = env.get("device")
            d["date"] = env.get("date")
            records.append(d)
    columns = ["identity", "kind", "check", "kernel", "arch", "backend", "status", "measured",
               "tolerance", "derivation", "seed", "message", "run_id", "object_sha256",
               "verdict", "ratio", "ci_low", "ci_high", "unit", "run", "host", "device",
               "date"]
    df = pd.DataFrame.from_records(records)
    if df.empty:
        return pd.DataFrame(columns=columns)
    for col in ("measured", "tolerance", "ratio", "ci_low", "ci_high"):
        df[col] = pd.to_numeric(df[col], errors="coerce")  # "nan"/"inf" strings back to floats
    return df


class RunWriter:
    """Appends rows to a run directory.

    ``create`` makes a fresh run (refusing a directory that already holds one unless
    ``resume``); with ``resume`` the existing envelope is kept and ``done`` lists the cell
    identities that already have a row.
    """

    def __init__(self, run_dir: Path, envelope: dict[str, Any], done: set[str],
                 lock_fd: int | None = None, judged_objects: bool = False) -> None:
        self.path = run_dir
        self._lock_fd = lock_fd
        self.envelope = envelope
        self.done = done
        # a resumed run: whether a row already there names a code object it judged (the
        # run's evidence rests on objects its compiler built)
        self.judged_objects = judged_objects
        # every row this writer appended, in order (step summaries count from it, so rows
        # appended live by a pytest session count too)
        self.written: list[Row] = []
        self._rows_path = run_dir / ROWS

    @classmethod
    def create(
        cls, run_dir: str | os.PathLike[str], envelope: dict[str, Any], *, resume: bool = False
    ) -> RunWriter:
        run_dir = Path(run_dir)
        env_path = run_dir / ENVELOPE
        cls._refuse_foreign(run_dir)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"{run_dir}: cannot create the run directory "
                              f"({exc.strerror}); choose a writable --out") from exc
        lock_fd = lock(run_dir)
        try:
            not_a_link(env_path)
            rows_path = not_a_link(run_dir / ROWS)
            if env_path.exists():
                if not resume:
                    raise RunDirError(
                        f"{run_dir} already holds a run; pass --resume to continue it or "
                        "choose a new --out directory")
                existing = load(run_dir)
                cls._repair_torn_tail(run_dir / ROWS)
                # a cell whose last row is an infrastructure error (the cache, I/O: hqval's
                # machinery, not the kernel) is not done: the resumed run redoes it
                done = {r.identity for r in existing.rows
                        if not (r.status is Status.ERROR and r.details.get("infrastructure"))}
                judged = any(r.object_sha256 for r in existing.rows)
                return cls(run_dir, existing.envelope, done, lock_fd, judged)
            if rows_path.exists() and rows_path.stat().st_size:
                raise RunDirError(
                    f"{run_dir} holds {ROWS} but no {ENVELOPE}: rows of no known run (a run "
                    "would append to them); remove it or choose a new --out directory")
            rows_path.touch()
            write_atomic(env_path, json.dumps(envelope, indent=2, sort_keys=True) + "\n")
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(run_dir, envelope, set(), lock_fd)

    @staticmethod
    def _refuse_foreign(run_dir: Path) -> None:
        """Refuse an ``--out`` that is a non-empty directory but no hqval run (no envelope):
        its files would be overwritten or judged with the run's.  A run being started by
        another process (its lock, its empty rows, the envelope's temporary) is not
        foreign; that process's lock decides."""
        try:
            names = [e.name for e in os.scandir(run_dir)]
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError:
            return  # mkdir or the lock reports it in its own words
        if ENVELOPE in names:
            return
        ours = {LOCK, ROWS}
        foreign = sorted(n for n in names if n not in ours
                         and not (n.startswith(f".{ENVELOPE}.") and n.endswith(".tmp")))
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" (+{len(foreign) - 3} more)"
                                              if len(foreign) > 3 else "")
            raise RunDirError(f"{run_dir} is a non-empty directory that is not an hqval run "
                              f"(it holds {shown}); choose an empty or new --out directory")

    def close(self) -> None:
        """Release the run directory's lock (a process that exits releases it too)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @staticmethod
    def _repair_torn_tail(rows_path: Path) -> None:
        """Cut a torn last line before appending, so new rows do not glue onto it."""
        if not rows_path.exists():
            return
        data = rows_path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            with rows_path.open("r+b") as f:
                f.truncate(keep)
                f.flush()
                os.fsync(f.fileno())

    def append(self, rows: Iterable[Row]) -> int:
        """Append a batch atomically: one write, flush and fsync.  Returns rows written."""
        batch = list(rows)
        if not batch:
            return 0
        run_id = str(self.envelope.get("run_id") or "")
        batch = [r if r.run_id == run_id else dataclasses.replace(r, run_id=run_id)
                 for r in batch]
        payload = "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in batch)
        try:
            fd = os.open(self._rows_path,
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                data = payload.encode()
                written = os.write(fd, data)
                while written < len(data):  # a short write on a full disk or a signal
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk, a file size limit: name the file
            raise OSError(exc.errno, exc.strerror, str(self._rows_path)) from exc
        self.done.update(r.identity for r in batch)
        self.written.extend(batch)
        return len(batch)

    def update_envelope(self, **fields: Any) -> None:
        """Record facts learned during the run (compiler version, device) atomically."""
        self.envelope.update(fields)
        write_atomic(self.path / ENVELOPE,
                     json.dumps(self.envelope, indent=2, sort_keys=True) + "\n")


def lock(run_dir: Path) -> int:
    """Take the run directory's exclusive lock (held until the fd is closed or the process
    ends, a ``kill -9`` included); a second writer gets ``RunLocked`` at once."""
    path = Path(run_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            not_a_link(path)  # raises, naming the link
        raise RunDirError(f"{path}: cannot create the lock ({exc.strerror}); choose a "
                          "writable --out") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = ""
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            who = f" (pid {holder})" if holder else ""
            raise RunLocked(f"{run_dir}: another hqval process{who} is writing this run "
                            "directory; wait for it or choose another --out") from None
        raise RunDirError(f"{path}: cannot lock ({exc.strerror})") from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
