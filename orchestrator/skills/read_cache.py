"""A content-hash read cache: every read returns the sha256 of what was read and whether it is new.

"New" (``changed=True``) means this cache has not yet returned the same content for the same path. The record
lives in memory and, when ``store_dir`` is given, also as marker files under it, so a second process sharing
the directory recognises content read by the first one. Separate ``scope`` names keep independent consumers
apart (the loader reading SKILL.md for parsing must not make a later L3 read look "already seen").

Reads never follow a symlink in the last path component and never block on FIFOs or devices: callers confine
and resolve a path first (see :mod:`orchestrator.skills.confine`) and read the resolved path.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict

DEFAULT_MAX_BYTES = 8 * 1024 * 1024


class NotARegularFile(OSError):
    """The path exists but is a directory, FIFO, socket or device."""


class CachedRead(BaseModel):
    """The bytes of one read, their sha256, and whether this content is new to the cache for this path."""

    model_config = ConfigDict(frozen=True)

    path: Path
    data: bytes
    sha256: str
    changed: bool
    size: int
    truncated: bool = False

    @property
    def text(self) -> str:
        """The data decoded as UTF-8 (undecodable bytes replaced)."""
        return self.data.decode("utf-8", errors="replace")


class ReadCache:
    """Content-hash read cache; in memory, optionally persisted under ``store_dir``. Thread-safe."""

    def __init__(self, store_dir: Path | None = None) -> None:
        self._seen: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._store = store_dir / "reads" if store_dir is not None else None
        if self._store is not None:
            self._store.mkdir(parents=True, exist_ok=True)

    def read(self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, scope: str = "default") -> CachedRead:
        """Read ``path`` (at most ``max_bytes``) and report whether the content is new for it.

        Raises ``OSError`` (``FileNotFoundError``, ``PermissionError``, :class:`NotARegularFile`, ``ELOOP``
        for a symlink in the last component) without recording anything.
        """
        data, size = _read_regular(path, max_bytes)
        digest = hashlib.sha256(data).hexdigest()
        key = (scope, str(path), digest)
        with self._lock:
            known = key in self._seen or self._on_disk(key)
            if not known:
                self._seen.add(key)
                self._remember(key)
        return CachedRead(
            path=path, data=data, sha256=digest, changed=not known, size=size, truncated=size > len(data)
        )

    def seen(self, path: Path, sha256: str, *, scope: str = "default") -> bool:
        """Whether this cache already returned content ``sha256`` for ``path``."""
        key = (scope, str(path), sha256)
        with self._lock:
            return key in self._seen or self._on_disk(key)

    def _marker(self, key: tuple[str, str, str]) -> Path | None:
        if self._store is None:
            return None
        name = hashlib.sha256("\0".join(key).encode("utf-8", errors="surrogatepass")).hexdigest()
        return self._store / name[:2] / name

    def _on_disk(self, key: tuple[str, str, str]) -> bool:
        marker = self._marker(key)
        if marker is None or not marker.exists():
            return False
        self._seen.add(key)
        return True

    def _remember(self, key: tuple[str, str, str]) -> None:
        marker = self._marker(key)
        if marker is None:
            return
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch(exist_ok=True)
        except OSError:
            # a read-only or full store only costs the cross-process memory, never the read itself
            pass


def _read_regular(path: Path, max_bytes: int) -> tuple[bytes, int]:
    """Up to ``max_bytes`` of a regular file and its full size; refuses a final symlink and special files."""
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(f"not a regular file: {path}")
        chunks: list[bytes] = []
        remaining = max_bytes
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks), info.st_size
    finally:
        os.close(fd)
