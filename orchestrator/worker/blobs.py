"""Bytes handed between machines through the service itself (Redis), content-addressed by sha256.

A producer's input files travel to the job this way, so a worker never opens a path a goal line names, and producer
and worker need share no folder. The store is small on purpose: every blob is capped in size, expires after a time
to live, and is checked against its sha256 when read back (a blob that was altered is not returned). It is meant to
be reused for anything a job hands across machines (e.g. downloading a job's outputs).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from orchestrator.errors import ConfigError

KEY_PREFIX = "orch:blob:"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def blob_key(sha256: str) -> str:
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ConfigError(f"not a sha256: {sha256[:80]!r}", where="blobs")
    return f"{KEY_PREFIX}{sha256}"


class BlobStore:
    """Put and get blobs by sha256 on a Redis client (``redis.Redis``; responses not decoded)."""

    def __init__(self, client: Any, *, max_bytes: int, ttl_s: int) -> None:
        self.r = client
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s

    def put(self, data: bytes) -> str:
        """Store ``data`` (at most ``max_bytes``) for ``ttl_s``; returns its sha256. Storing it again renews it."""
        if len(data) > self.max_bytes:
            raise ConfigError(f"{len(data)} bytes is more than the {self.max_bytes} a blob may hold", where="blobs")
        digest = hashlib.sha256(data).hexdigest()
        key = blob_key(digest)
        if not self.r.set(key, data, ex=self.ttl_s, nx=True):
            self.r.expire(key, self.ttl_s)
        return digest

    def get(self, sha256: str) -> bytes | None:
        """The blob's bytes, or None when it is gone (expired), too large or not what its sha256 says."""
        key = blob_key(sha256)
        size = self.r.strlen(key)
        if not size or size > self.max_bytes:
            return None
        data = self.r.get(key)
        if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != sha256:
            return None
        return data

    def exists(self, sha256: str) -> bool:
        return bool(self.r.exists(blob_key(sha256)))
