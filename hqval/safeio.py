"""The one bounded reader and the one safe writer every file hqval reads or writes goes
through.

Reading: ``read_bytes`` / ``read_text`` / ``load_json`` / ``loads_json`` / ``load_yaml``
take regular files only.  The path is ``stat``-ed before it is opened, so a FIFO, a device
(``/dev/zero``), a socket or a directory is refused without being opened; the file is then
opened ``O_NONBLOCK`` (a FIFO swapped in after the ``stat`` cannot block the open) and
``fstat``-ed again, and at most ``limit`` bytes are read, so a file that grows while it is
read cannot make hqval read without end.  JSON nesting depth and YAML nesting depth,
alias count and alias expansion are bounded before any value is built.  Every error is a
``SafeIOError`` whose one-line message names the file and the fix; bytes that are not
UTF-8 name the file, the line and the byte.

Writing: ``write_atomic(path, data)`` writes a temporary file beside the target
(``O_CREAT | O_EXCL | O_NOFOLLOW``), fsyncs it and renames it over the target, so a reader
sees the old file or the new one, never half of one.  It refuses a symbolic link, a
directory or any other non-regular file at the target, and leaves no temporary behind on
any failure (a full disk, an interrupt).  ``make_dir`` creates a directory the same way:
never through a link.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import json
import os
import re
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

PathLike = str | os.PathLike[str]

# Default caps.  The suite's own YAML files are a few KiB and an engine tree's manifest of a
# thousand kernels is ~200 KiB, so 1 MiB leaves room.  JSON documents (envelopes, cache
# records, a cost table) stay well under 64 MiB; a caller reading something larger passes
# its own ``limit``.
DEFAULT_LIMIT = 64 << 20
YAML_LIMIT = 1 << 20
MAX_DEPTH = 64
# the policy shares its timing gates through a handful of aliases; a thousand is far more
# than any hand-written file uses, and with MAX_YAML_NODES it bounds what aliases expand to
MAX_ALIASES = 1000
MAX_YAML_NODES = 100_000

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class SafeIOError(ValueError):
    """A file hqval cannot read or write safely.  The message is one line,
    ``FILE[:LINE]: PROBLEM; fix: FIX``; ``path``, ``line``, ``problem`` and ``fix`` hold its
    parts (a schema error is made from them); ``errno`` is the operating system's error
    number where one caused it (``errno.ENOENT``: the file does not exist)."""

    def __init__(self, message: str, *, path: PathLike | None = None,
                 errno: int | None = None, line: int = 0, problem: str = "",
                 fix: str = "") -> None:
        super().__init__(message)
        self.path = os.fspath(path) if path is not None else None
        self.errno = errno
        self.line = line
        self.problem = problem or message
        self.fix = fix


def _fail(where: str, problem: str, fix: str, *, path: PathLike | None = None,
          line: int = 0, errno: int | None = None) -> SafeIOError:
    at = f"{where}:{line}" if line else where
    return SafeIOError(f"{at}: {problem}; fix: {fix}", path=path, errno=errno, line=line,
                       problem=problem, fix=fix)


def kind_of(mode: int) -> str:
    """``st_mode`` in words: "a regular file", "a FIFO (named pipe)", ..."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _label(what: str, path: PathLike) -> str:
    return f"{what} {os.fspath(path)}" if what else os.fspath(path)


def _os_error(what: str, path: PathLike, exc: OSError, doing: str) -> SafeIOError:
    fix = {
        _errno.ENOENT: "check the path",
        _errno.EACCES: "check its permissions",
        _errno.EPERM: "check its permissions",
        _errno.ELOOP: "it is a symbolic link; give the file itself",
        _errno.ENOTDIR: "a part of the path is not a directory; check the path",
        _errno.ENOSPC: "free space, then rerun",
        _errno.EFBIG: "free space or raise the file size limit, then rerun",
        _errno.EROFS: "the file system is read-only; choose a writable path",
    }.get(exc.errno or 0, "check the path")
    reason = exc.strerror or str(exc)
    return _fail(_label(what, path), f"cannot {doing}: {reason}", fix, path=path,
                 errno=exc.errno)


def check_regular(path: PathLike, *, what: str = "", follow_symlinks: bool = True
                  ) -> os.stat_result:
    """``stat`` ``path`` and refuse anything but a regular file (a link is followed unless
    ``follow_symlinks`` is false, then refused), without opening it."""
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError as exc:
        raise _os_error(what, path, exc, "read it") from None
    if not stat.S_ISREG(st.st_mode):
        raise _fail(_label(what, path), f"is {kind_of(st.st_mode)}, not a regular file",
                    "give the path of a regular file", path=path)
    return st


def read_bytes(path: PathLike, *, limit: int = DEFAULT_LIMIT, what: str = "",
               follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (a larger file is
    refused before it is read, and one that grows past ``limit`` while read is refused)."""
    st = check_regular(path, what=what, follow_symlinks=follow_symlinks)
    if st.st_size > limit:
        raise _fail(_label(what, path), f"{st.st_size} bytes is over the {limit} byte limit",
                    "give a smaller file (split it, or drop what hqval does not read)",
                    path=path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _os_error(what, path, exc, "open it") from None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):  # swapped between the stat and the open
            raise _fail(_label(what, path), f"is {kind_of(fst.st_mode)}, not a regular file",
                        "give the path of a regular file", path=path)
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            except OSError as exc:
                raise _os_error(what, path, exc, "read it") from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _fail(_label(what, path), f"grew past the {limit} byte limit while it "
                            "was read", "give a smaller file", path=path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode_utf8(raw: bytes, *, what: str, path: PathLike) -> str:
    """``raw`` as UTF-8; an invalid byte names the file, its line and its offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise _fail(_label(what, path), f"not UTF-8 ({exc.reason} at byte {exc.start})",
                    "save the file as UTF-8", path=path, line=line) from None


def read_text(path: PathLike, *, limit: int = DEFAULT_LIMIT, what: str = "",
              follow_symlinks: bool = True) -> str:
    """``read_bytes`` decoded as UTF-8 (an invalid byte names the file, line and byte)."""
    raw = read_bytes(path, limit=limit, what=what, follow_symlinks=follow_symlinks)
    return decode_utf8(raw, what=what, path=path)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def json_depth_ok(text: str, max_depth: int) -> int | None:
    """None when ``text`` nests at most ``max_depth`` arrays/objects deep, else the offset
    where it goes deeper.  Linear, and cheap where a document holds few brackets."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    stripped = _JSON_STRING.sub('""', text) if '"' in text else text
    for m in _JSON_BRACKET.finditer(stripped):
        if m.group() in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        else:
            depth -= 1
    return None


def nesting_exceeds(value: Any, max_depth: int, text: str | None = None) -> bool:
    """Whether the parsed JSON ``value`` nests arrays/objects more than ``max_depth`` deep
    (iterative: no recursion however deep it is).  ``text``, the document ``value`` was
    parsed from, when given: a document with at most ``max_depth`` opening brackets in all
    (those inside strings counted too) cannot nest deeper, and is not walked (most of a
    run's rows: 9,196 of a matrix's 9,620)."""
    if text is not None and text.count("[") + text.count("{") <= max_depth:
        return False
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > max_depth:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def loads_json(text: str | bytes, *, what: str = "JSON", max_depth: int = MAX_DEPTH) -> Any:
    """Parse the JSON ``text``; nesting deeper than ``max_depth`` is refused.  Every failure
    is a ``SafeIOError`` naming ``what`` (say which file or line it is).

    The parse comes first and the depth is checked on what it gave (CPython's decoder
    raises RecursionError past the interpreter's recursion limit, never exhausting the C
    stack); only a document that failed is scanned for where it nests too deep, so a large
    document with many brackets inside its strings (a disassembly) costs one parse."""
    if isinstance(text, bytes):
        text = decode_utf8(text, what=what, path="")

    def too_deep() -> SafeIOError | None:
        where = json_depth_ok(text, max_depth)
        if where is None:
            return None
        line = text.count("\n", 0, where) + 1
        return _fail(what, f"nested deeper than {max_depth} levels (line {line})",
                     "flatten the data or regenerate the file")

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise too_deep() or _fail(
            what, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            "regenerate or fix the file") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of 5000 digits
        text1 = " ".join(str(exc).split())
        raise too_deep() or _fail(what, f"not valid JSON ({text1})",
                                  "regenerate or fix the file") from None
    if nesting_exceeds(value, max_depth, text):
        raise too_deep() or _fail(what, f"nested deeper than {max_depth} levels",
                                  "flatten the data or regenerate the file")
    return value


def load_json(path: PathLike, *, what: str = "", limit: int = DEFAULT_LIMIT,
              max_depth: int = MAX_DEPTH, follow_symlinks: bool = True) -> Any:
    """The JSON document in the regular file ``path``, bounded as ``read_bytes`` and
    ``loads_json`` bound it."""
    text = read_text(path, limit=limit, what=what, follow_symlinks=follow_symlinks)
    return loads_json(text, what=_label(what, path), max_depth=max_depth)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader composing under a nesting depth and an alias count."""

    def __init__(self, stream: str, label: str, max_depth: int, max_aliases: int) -> None:
        super().__init__(stream)
        self._label = label
        self._max_depth = max_depth
        self._max_aliases = max_aliases
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > self._max_aliases:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _fail(self._label, f"more than {self._max_aliases} aliases",
                            "write the values out", line=mark.line + 1)
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _fail(self._label, f"nested deeper than {self._max_depth} levels",
                            "flatten the structure", line=mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _children(n: yaml.Node) -> list[yaml.Node]:
    if isinstance(n, yaml.MappingNode):
        return [c for kv in n.value for c in kv]
    if isinstance(n, yaml.SequenceNode):
        return list(n.value)
    return []


def _check_expansion(label: str, root: yaml.Node, max_nodes: int) -> None:
    """Refuse a composed document whose aliases expand it past ``max_nodes`` values (an
    alias bomb: 9 levels of 9 aliases is 81 aliases and 9**9 values) or that refers to
    itself.  Sizes are memoised per node: linear in the composed document."""
    size: dict[int, int] = {}
    active: set[int] = set()
    # iterative post-order walk (the depth is bounded already, but stay off the C stack)
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    while stack:
        n, state = stack.pop()
        if state == 0:
            if id(n) in size:
                continue
            if id(n) in active:
                raise _fail(label, "an alias refers to the value that contains it",
                            "write the value out instead of the alias",
                            line=n.start_mark.line + 1)
            active.add(id(n))
            stack.append((n, 1))
            stack.extend((c, 0) for c in _children(n) if id(c) not in size)
            continue
        total = 1 + sum(size[id(c)] for c in _children(n))
        if total > max_nodes:
            raise _fail(label, f"the aliases here expand the document past {max_nodes} "
                        "values", "write the values out; anchors and aliases may share small "
                        "values, not multiply them", line=n.start_mark.line + 1)
        active.discard(id(n))
        size[id(n)] = total


def compose_yaml(text: str, *, what: str, max_depth: int = MAX_DEPTH,
                 max_aliases: int = MAX_ALIASES, max_nodes: int = MAX_YAML_NODES
                 ) -> tuple[yaml.SafeLoader, yaml.Node | None]:
    """Compose ``text`` (one YAML document) under the bounds, for a caller that constructs
    the values itself (``hqval.schema`` keeps each value's line).  Returns the loader (the
    caller constructs with it, then calls ``dispose``) and the root node.  YAML syntax
    errors propagate as PyYAML's own exceptions; bounds are ``SafeIOError``."""
    if len(text) > YAML_LIMIT * 4:
        raise _fail(what, f"{len(text)} characters is too large for a YAML file",
                    "split it")
    loader = _BoundedLoader(text, what, max_depth, max_aliases)
    try:
        node = loader.get_single_node()
    except RecursionError:
        loader.dispose()
        raise _fail(what, "nested too deeply to read", "flatten the structure") from None
    except BaseException:
        loader.dispose()
        raise
    if node is not None:
        _check_expansion(what, node, max_nodes)
    return loader, node


def load_yaml(path: PathLike, *, what: str = "", limit: int = YAML_LIMIT,
              max_depth: int = MAX_DEPTH, max_aliases: int = MAX_ALIASES) -> Any:
    """The YAML document in the regular file ``path`` as plain Python values (safe types
    only), bounded in size, nesting depth, alias count and alias expansion.  Syntax errors
    are ``SafeIOError`` naming the file and line too."""
    label = _label(what, path)
    text = read_text(path, limit=limit, what=what)
    return loads_yaml(text, what=label, max_depth=max_depth, max_aliases=max_aliases)


def loads_yaml(text: str, *, what: str, max_depth: int = MAX_DEPTH,
               max_aliases: int = MAX_ALIASES) -> Any:
    """``text`` parsed as ``load_yaml`` parses a file (``what`` names it in errors)."""
    try:
        loader, node = compose_yaml(text, what=what, max_depth=max_depth,
                                    max_aliases=max_aliases)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise _fail(what, f"YAML syntax: {exc.problem}", "fix the YAML at that line",
                    line=line) from None
    except yaml.YAMLError as exc:
        raise _fail(what, f"YAML: {' '.join(str(exc).split())}", "fix the YAML") from None
    try:
        return loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise _fail(what, f"YAML: {' '.join(str(exc).split())}", "fix the YAML") from None
    finally:
        loader.dispose()


# a run directory's own evidence (hqval.results.store writes them, and nothing else):
# a run holds its envelope and its rows beside its lock
RUN_ENVELOPE = "envelope.json"
RUN_ROWS = "rows.jsonl"
RUN_LOCK = ".hqval-lock"
RUN_FILES = (RUN_ENVELOPE, RUN_ROWS, RUN_LOCK)


def _refuse_target(path: Path, what: str) -> None:
    if path.name in RUN_FILES and any(
            os.path.lexists(path.parent / n) for n in (RUN_ENVELOPE, RUN_ROWS)):
        # an output a user named (--json, -o, --junit-xml) over a run's own evidence would
        # destroy the run it reports on: only the run's store writes those
        raise _fail(_label(what, path), "is a file of the hqval run directory "
                    f"{os.fspath(path.parent)} (its evidence); hqval writes an output there "
                    "never", "choose another path", path=path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _os_error(what, path, exc, "write it") from None
    if stat.S_ISLNK(st.st_mode):
        raise _fail(_label(what, path), "is a symbolic link; hqval does not write through "
                    "links", "remove the link or choose another path", path=path)
    if not stat.S_ISREG(st.st_mode):
        raise _fail(_label(what, path), f"is {kind_of(st.st_mode)}; hqval replaces only "
                    "regular files", "choose another path", path=path)


def write_atomic(path: PathLike, data: str | bytes, *, what: str = "",
                 mode: int = 0o666, fsync: bool = True) -> None:
    """Write ``data`` (str: UTF-8) to ``path`` through a temporary file beside it, fsync'd
    and renamed into place.  A symbolic link, directory or special file at ``path`` is
    refused (nothing is written); no temporary is left behind on any failure.  ``mode`` is
    masked by the umask as ``open`` masks it.  ``fsync=False`` skips both fsyncs, for
    cache entries a reader verifies anyway: after a crash the file is whole or absent or
    fails its check, never trusted half written (the rename is still atomic).  Text that
    holds what is no Unicode character (a path of bytes that are no UTF-8, which Python
    carries as lone surrogates) is written with each such code point as its ``\\udcXX``
    escape: the file is UTF-8 and says which byte it was, never a crash of the writer."""
    target = Path(path)
    payload = data.encode("utf-8", errors="backslashreplace") if isinstance(data, str) \
        else bytes(data)
    _refuse_target(target, what)
    parent = target.parent
    tmp = parent / f".{target.name}.{secrets.token_hex(6)}.partial"
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(tmp, flags, mode)
    except OSError as exc:
        raise _os_error(what, target, exc, "write it") from None
    done = False
    try:
        try:
            view = memoryview(payload)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        _refuse_target(target, what)  # a link put there while we wrote
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise _os_error(what, target, exc, "write it") from None
        done = True
    except OSError as exc:
        raise _os_error(what, target, exc, "write it") from None
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    if fsync:
        _fsync_dir(parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_targets(files: Iterable[tuple[PathLike, str]],
                  dirs: Iterable[tuple[PathLike, str]] = ()) -> None:
    """Refuse, before anything is written, every (path, what) ``make_dir`` (``dirs``) or
    ``write_atomic`` (``files``) would refuse: a command that writes several files checks
    them all first, so a refused one leaves none of the others written."""
    for d, what in dirs:
        _refuse_dir(Path(d), what)
    for f, what in files:
        _refuse_target(Path(f), what)


def _refuse_dir(target: Path, what: str) -> bool:
    """Refuse a symbolic link or anything but a directory at ``target``; whether one is
    there."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _os_error(what, target, exc, "create it") from None
    if stat.S_ISLNK(st.st_mode):
        raise _fail(_label(what, target), "is a symbolic link; hqval does not write "
                    "through links", "remove the link or choose another path", path=target)
    if not stat.S_ISDIR(st.st_mode):
        raise _fail(_label(what, target), f"is {kind_of(st.st_mode)}, not a directory",
                    "choose another path", path=target)
    return True


def make_dir(path: PathLike, *, what: str = "") -> Path:
    """Create the directory ``path`` (and its parents) unless it exists; refuse a symbolic
    link or anything but a directory at ``path`` itself."""
    target = Path(path)
    if not _refuse_dir(target, what):
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_error(what, target, exc, "create it") from None
        _refuse_dir(target, what)  # what is there now (another process may have raced)
    return target
