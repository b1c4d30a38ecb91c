"""Cache entries authenticated with a key that lives outside the cache.

Threat: the on-disk cache (code objects and their records, the preprocessor's dependency
lists, disassemblies, audit rows, the emulator's compiled FMA library) may be shared with,
or poisoned by, another job: a directory on a shared file system, a CI cache restored from
an artifact store, a ``--cache-dir`` another user can write.  Such a job can make an entry
that is self-consistent (an object whose recorded sha256 and size match it), so a content
check alone would admit a broken tree built by someone else.

Every entry hqval writes therefore carries an HMAC-SHA256 tag over what it vouches for
(the entry's key, the object's digest, size and processor; the dependency list; the
decoded text; the audit rows), made with a 256-bit key read from ``key_path()``:
``$HQVAL_CACHE_KEY`` when set, else ``$XDG_CONFIG_HOME/hqval/cache.key`` (default
``~/.config/hqval/cache.key``).  The key file is made on first use (mode 0600, in a 0700
directory), must be a regular file owned by this user that no one else can read or write,
and must lie outside the cache it authenticates.  An entry without a valid tag (another
job's, another key's, an older hqval's) is never used: it is rebuilt.

What it does not cover: a job running as the same user (it can read the key, or change
hqval itself).  For a run that trusts no cache at all, ``hqval run --fresh-cache`` builds
everything in a new private cache under a new key, removed when the run ends.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from hqval.errors import InfrastructureError

KEY_ENV = "HQVAL_CACHE_KEY"
_KEY_BYTES = 32
_memo: dict[tuple[str, int, int, int], bytes] = {}


class CacheKeyError(InfrastructureError):
    """The cache key cannot be used (unsafe permissions, inside the cache, unreadable)."""


def key_path() -> Path:
    """Where the cache key lives: ``$HQVAL_CACHE_KEY``, else the user's config directory."""
    given = os.environ.get(KEY_ENV)
    if given:
        return Path(given)
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "hqval" / "cache.key"


def _inside(path: Path, directory: Path) -> bool:
    p, d = os.path.realpath(path), os.path.realpath(directory)
    return p == d or p.startswith(d.rstrip(os.sep) + os.sep)


def _create(path: Path) -> None:
    """Make the key file with a new random key, all at once (a concurrent maker's file
    wins: linking the finished temporary refuses to replace it)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".cache.key.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, secrets.token_hex(_KEY_BYTES).encode() + b"\n")
        os.fsync(fd)
        os.close(fd)
        fd = -1
        with suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(tmp)


def _problem(path: Path, st: os.stat_result) -> str:
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not this user ({os.getuid()})"
    if st.st_mode & 0o077:
        return (f"has mode {stat.S_IMODE(st.st_mode):04o}: others could read it and mint "
                "cache entries")
    return ""


def cache_key(cache: Path) -> bytes:
    """The key authenticating entries of the cache at ``cache``; made on first use.
    Raises ``CacheKeyError`` (one line naming the file and the fix)."""
    path = key_path()
    fix = (f"fix: remove it (a new key is made) or set {KEY_ENV} to a file only you can "
           "read, outside the cache; or run with --fresh-cache")
    if _inside(path, cache):
        raise CacheKeyError(f"the cache key {path} lies inside the cache {cache}: a job that "
                            f"can write the cache could read it and mint entries; fix: set "
                            f"{KEY_ENV} to a file outside the cache")
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        try:
            _create(path)
            st = os.stat(path, follow_symlinks=False)
        except OSError as exc:
            raise CacheKeyError(f"the cache key {path} cannot be made ({exc.strerror or exc}); "
                                f"{fix}") from None
    except OSError as exc:
        raise CacheKeyError(f"the cache key {path} cannot be read ({exc.strerror or exc}); "
                            f"{fix}") from None
    why = _problem(path, st)
    if why:
        raise CacheKeyError(f"the cache key {path} {why}; {fix}")
    memo = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    got = _memo.get(memo)
    if got is not None:
        return got
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            raw = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError as exc:
        raise CacheKeyError(f"the cache key {path} cannot be read ({exc.strerror or exc}); "
                            f"{fix}") from None
    text = raw.strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != _KEY_BYTES:
        raise CacheKeyError(f"the cache key {path} is not {_KEY_BYTES * 2} hex digits; {fix}")
    _memo[memo] = key
    return key


def _message(kind: str, parts: tuple[str | bytes, ...]) -> bytes:
    h = hashlib.sha256()
    for p in (kind, *parts):
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


def seal(cache: Path, kind: str, *parts: str | bytes) -> str:
    """The tag of an entry of ``kind`` vouching for ``parts`` (hex)."""
    return hmac.new(cache_key(cache), _message(kind, parts), hashlib.sha256).hexdigest()


def sealed(tag: object, cache: Path, kind: str, *parts: str | bytes) -> bool:
    """Whether ``tag`` is this key's tag for ``parts``.  A key that cannot be used raises
    ``CacheKeyError``."""
    if not isinstance(tag, str):
        return False
    return hmac.compare_digest(tag, seal(cache, kind, *parts))


def usable(tag: object, cache: Path, kind: str, *parts: str | bytes) -> bool:
    """``sealed`` for caches of derived facts (a disassembly, audit rows): a key that cannot
    be used makes every entry unusable (the fact is computed again), never trusted."""
    try:
        return sealed(tag, cache, kind, *parts)
    except CacheKeyError:
        return False


def seal_or_none(cache: Path, kind: str, *parts: str | bytes) -> str | None:
    """``seal``, or None where the key cannot be used (the entry is then not stored)."""
    try:
        return seal(cache, kind, *parts)
    except CacheKeyError:
        return None


def source_identity(modules: Sequence[str], salt: str) -> str:
    """A sha256 over ``salt`` and the source of every module in ``modules`` (a package: each
    of its .py files, subpackages included), for cache entries whose facts that code
    derives: an entry made by other code is another entry.  A module that cannot be found
    raises ``InfrastructureError``."""
    import importlib.util

    h = hashlib.sha256(salt.encode())
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise InfrastructureError(f"module {name} not found: hqval's installation is "
                                      "incomplete; fix: reinstall hqval")
        origin = Path(spec.origin)
        files = sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]
        for f in files:
            h.update(f"\0{name}:{f.relative_to(origin.parent)}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


@contextmanager
def fresh_cache() -> Iterator[Path]:
    """A new private cache directory (0700) and a new key beside it, outside it, in effect
    for this process and its children while the block runs (``$HQVAL_CACHE_KEY``); both
    removed afterwards.  Yields the cache directory."""
    import shutil

    top = Path(tempfile.mkdtemp(prefix="hqval-fresh-cache-"))
    saved = os.environ.get(KEY_ENV)
    try:
        cache = top / "cache"
        cache.mkdir(mode=0o700)
        os.environ[KEY_ENV] = str(top / "cache.key")
        yield cache
    finally:
        if saved is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = saved
        shutil.rmtree(top, ignore_errors=True)
