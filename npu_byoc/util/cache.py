"""A per-user cache directory for built artifacts (shared libraries of the C models, ...).

``cache_dir()`` is ``$NPU_BYOC_CACHE`` if set, else ``~/.cache/npu_byoc``. Entries are keyed
by a hash of everything that determines them (``content_key``), and written atomically
(``atomic_write`` / ``atomic_output``: a temporary file in the same directory, then
``os.replace``), so concurrent processes building the same entry are safe: each produces a
complete file and the last rename wins; a reader never sees a partial file. Each entry has
a ``<name>.sha256`` seal written after it; ``is_intact`` checks it, so an entry truncated or
emptied later (a full disk, a killed copy) is rebuilt instead of loaded (a truncated ``.so``
is a SIGBUS, an empty ``.o`` an undefined symbol). ``build_lock`` serializes builders of one
entry across processes, so a key is built once.

The cache holds code that is linked and loaded, so no other user may write into it. Every
call of ``cache_dir()`` checks the directory with ``lstat``: it must be a real directory (not
a symlink), owned by the effective uid and not group- or other-writable (a group that is ours
alone excepted: the user-private groups of umask 002 on Debian/Ubuntu), and every directory
above it must be owned by root or by us and, if others can write it, sticky (else another user
could swap the whole directory). A directory that fails is refused with ``CacheError`` (one
line naming the path, the problem and the fix), whether it came from ``$NPU_BYOC_CACHE`` or
the default: its entries may already be planted, and building elsewhere would hide that.
Missing directories are created mode 0700. ``cache_subdir`` does the same for every
subdirectory that holds entries, and ``is_intact`` also rejects an entry that is not a regular
file of ours that only we can write.

A cache directory that cannot be created or written (no writable HOME) falls back, with one
warning, to ``$TMPDIR/npu_byoc-cache-<euid>``, created mode 0700 and checked after creation;
if that path already exists and fails the check (another user planted it, a symlink, a loose
mode), a fresh ``mkdtemp`` directory is used instead and the warning says why.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import grp
import hashlib
import os
import pwd
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import NpuByocError


class CacheError(NpuByocError):
    """The cache directory (or a subdirectory) is not safe to load code from, or cannot be made."""


_FALLBACK: dict[str, Path] = {}  # per primary path: the fallback chosen (and warned about) once


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}"


def _unsafe(path: Path) -> str | None:
    """Why another user could write into the directory ``path`` (None when only we can)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    return _writers(st)


def _writers(st: os.stat_result) -> str | None:
    """Why users other than the owner can write ``st`` (None when none can)."""
    if st.st_mode & stat.S_IWOTH:
        return f"is writable by other users ({_mode(st)})"
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid, st.st_uid):
        return f"is writable by other users of group {st.st_gid} ({_mode(st)})"
    return None


@functools.lru_cache(maxsize=16)
def _private_group(gid: int, uid: int) -> bool:
    """``gid`` is ``uid``'s user-private group (its only member, as primary group or listed):
    where the umask is 002 (Debian, Ubuntu), group-writable directories of such a group are
    as private as 0755 ones. The rule of Debian's OpenSSH StrictModes."""
    try:
        members = grp.getgrgid(gid).gr_mem
        owner = pwd.getpwuid(uid).pw_name
    except KeyError:
        return False
    primary = [p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid]
    return all(u == uid for u in primary) and all(m == owner for m in members) and bool(primary or members)


def _unsafe_parent(path: Path) -> str | None:
    """Why another user could replace ``path`` through a directory above it (None if none can):
    each one, as written and resolved, is owned by root or us and, when others can write it,
    sticky (/tmp is fine: only we can rename our entries of it)."""
    written = Path(os.path.abspath(path)).parents
    resolved = Path(os.path.realpath(path.parent)).parents
    for parent in dict.fromkeys([*written, Path(os.path.realpath(path.parent)), *resolved]):
        st = os.lstat(parent)
        if st.st_uid not in (0, os.geteuid()):
            return f"is inside {parent}, owned by uid {st.st_uid}"
        if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_ISVTX and (problem := _writers(st)):
            return f"is inside {parent}, which {problem} and not sticky"
    return None


def _refusal(path: Path, problem: str) -> CacheError:
    if problem.startswith("is writable"):
        fix = "chmod go-w it"
    elif problem == "is a symlink":  # its target is not what the check saw: name it instead
        fix = "set NPU_BYOC_CACHE to the directory it points to, if that one is yours"
    elif problem.startswith("is inside"):
        fix = "set NPU_BYOC_CACHE to a directory where only you can write"
    else:
        fix = "remove it or set NPU_BYOC_CACHE to a directory of your own"
    return CacheError(f"cache directory {path} {problem}: another user could plant code in it that npu-byoc loads; {fix}")


def _check(path: Path) -> Path:
    """``path`` if it is a directory only we can write, else CacheError."""
    try:
        problem = _unsafe(path) or _unsafe_parent(path)
    except OSError as err:
        raise CacheError(f"cache directory {path}: {err.strerror or err}") from None
    if problem:
        raise _refusal(path, problem)
    return path


def _fallback(path: Path, reason: str) -> Path:
    """The private temporary cache used instead of ``path`` (chosen and warned about once)."""
    if str(path) in _FALLBACK:
        return _check(_FALLBACK[str(path)])
    tmp = Path(tempfile.gettempdir()) / f"npu_byoc-cache-{os.geteuid()}"
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(tmp, 0o700)
        problem = _unsafe(tmp) or _unsafe_parent(tmp)
        if not problem and not os.access(tmp, os.W_OK | os.X_OK):
            problem = "is not writable"
    except OSError as err:
        problem = err.strerror or str(err)
    note = ""
    if problem:  # someone else's, or not private: never reuse it, take a new private one
        try:
            fresh = Path(tempfile.mkdtemp(prefix=f"npu_byoc-cache-{os.geteuid()}-"))
        except OSError as err:
            raise CacheError(f"cache directory {path} {reason}, and no temporary one can be made ({err})") from None
        note = f" ({tmp} {problem})"
        tmp = _check(fresh)
    _FALLBACK[str(path)] = tmp
    print(f"npu-byoc: warning: cache directory {path} {reason}; using {tmp}{note}", file=sys.stderr)
    return tmp


def cache_dir() -> Path:
    """The cache directory, checked private (created mode 0700 if missing; a private temporary
    one if it cannot be created or written; CacheError if another user could write into it)."""
    root = os.environ.get("NPU_BYOC_CACHE")
    try:
        path = Path(root).expanduser() if root else Path.home() / ".cache" / "npu_byoc"
    except RuntimeError:  # no HOME and no passwd entry
        return _fallback(Path("~/.cache/npu_byoc"), "has no home directory")
    try:
        if not os.path.lexists(path):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not os.path.islink(path) and not path.is_dir():
            return _fallback(path, "is not a directory")
    except OSError as err:
        return _fallback(path, err.strerror or str(err))
    _check(path)
    if not os.access(path, os.W_OK | os.X_OK):
        return _fallback(path, "not writable")
    return path


def cache_subdir(*parts: str) -> Path:
    """``cache_dir() / part / ...``: each level created mode 0700 if missing, and checked like
    the cache directory (a subdirectory another user can write is refused, never read)."""
    path = cache_dir()
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\0" in part:
            raise CacheError(f"{path}: '{part}' is not a plain name for a cache subdirectory")
        path = path / part
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as err:
            raise CacheError(f"cache directory {path}: cannot create it ({err.strerror or err})") from None
        try:
            problem = _unsafe(path)
        except OSError as err:
            raise CacheError(f"cache directory {path}: {err.strerror or err}") from None
        if problem:
            raise _refusal(path, problem)
    return path


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def is_intact(path: str | os.PathLike) -> bool:
    """``path`` and its seal are regular files of ours that only we can write (not symlinks:
    an entry planted before the directory was private is rebuilt, never loaded), and ``path``
    still has the contents sealed when it was built."""
    path = Path(path)
    try:
        for p in (path, _seal_path(path)):
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
        return _seal_path(path).read_text().strip() == _digest(path)
    except OSError:
        return False


@contextlib.contextmanager
def build_lock(dest: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock for building ``dest`` (other processes wait, then find it built)."""
    dest = Path(dest)
    with open(dest.with_name(dest.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def content_key(parts: Iterable[bytes | str | os.PathLike]) -> str:
    """A short hex digest of ``parts``: bytes and str are hashed as given, paths by their
    contents (and name)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, os.PathLike):
            path = Path(part)
            data = path.name.encode() + b"\0" + path.read_bytes()
        elif isinstance(part, str):
            data = part.encode()
        else:
            data = bytes(part)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:24]


@contextlib.contextmanager
def atomic_output(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``dest``; when the block succeeds, it replaces ``dest``
    atomically (on failure it is removed and ``dest`` is untouched)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, dest)
        with contextlib.suppress(FileNotFoundError):  # the seal last: a crash in between is unsealed
            os.unlink(_seal_path(dest))
        atomic_write_text(_seal_path(dest), _digest(dest))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write_text(dest: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, dest)


def atomic_write(dest: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``dest`` atomically."""
    with atomic_output(dest) as tmp:
        tmp.write_bytes(data)
    return Path(dest)


__all__ = ["CacheError", "cache_dir", "cache_subdir", "content_key", "atomic_output", "atomic_write", "build_lock", "is_intact"]
