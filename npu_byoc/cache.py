"""A per-user cache directory for built artifacts (shared libraries of the C models, ...).

``cache_dir()`` is ``$NPU_BYOC_CACHE`` if set, else ``~/.cache/npu_byoc``. Entries are keyed
by a hash of everything that determines them (``content_key``), and written atomically
(``atomic_write`` / ``atomic_output``: a temporary file in the same directory, then
``os.replace``), so concurrent processes building the same entry are safe: each produces a
complete file and the last rename wins; a reader never sees a partial file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path


def cache_dir() -> Path:
    """The cache directory (created if missing)."""
    root = os.environ.get("NPU_BYOC_CACHE")
    path = Path(root).expanduser() if root else Path.home() / ".cache" / "npu_byoc"
    path.mkdir(parents=True, exist_ok=True)
    return path


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
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write(dest: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``dest`` atomically."""
    with atomic_output(dest) as tmp:
        tmp.write_bytes(data)
    return Path(dest)


__all__ = ["cache_dir", "content_key", "atomic_output", "atomic_write"]
