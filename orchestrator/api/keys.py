"""Producers' API keys, kept in Redis by their sha256 only (``keys create|list|revoke``).

A key is 256 random bits, printed once when made; Redis holds its sha256 (a key that random needs no slow hash),
so a copy of Redis hands out no key. A request's key is hashed and looked up by that hash, then compared in constant
time; revoking deletes the lookup, so the next request with the key is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.worker.tenancy import OWNER_PATTERN as PRODUCER_PATTERN

KEY_PREFIX = "orch:apikey:"
HASH_PREFIX = "orch:apikey-sha256:"
NAMES = "orch:apikeys"
SECRET_PREFIX = "orch-"
MAX_SECRET_CHARS = 200


class ApiKey(BaseModel):
    """One producer's key as Redis keeps it: no secret, only its sha256."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=rf"^{PRODUCER_PATTERN}$")
    admin: bool = False
    created_at: float
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    max_active_jobs: int | None = Field(None, ge=1)
    """Jobs queued or running at once (``None``: the setting ``api.max_active_jobs``)."""
    max_input_mb: float | None = Field(None, gt=0)
    """Input bytes kept for this producer's jobs (``None``: the setting ``api.max_input_mb``)."""

    def public(self) -> dict[str, Any]:
        return self.model_dump(exclude={"sha256"})


def check_producer_name(name: str) -> str:
    if not isinstance(name, str) or not re.fullmatch(PRODUCER_PATTERN, name):
        raise ConfigError(
            f"producer name {str(name)[:80]!r}: letters, digits, '.', '_' and '-' only (at most 64, not starting "
            "with '.', '_' or '-')",
            where="keys",
        )
    return name


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", errors="surrogatepass")).hexdigest()


class KeyStore:
    """Create, list, revoke and check keys on a Redis client (``redis.Redis``; responses not decoded)."""

    def __init__(self, client: Any) -> None:
        self.r = client

    def create(
        self, name: str, *, admin: bool = False, max_active_jobs: int | None = None, max_input_mb: float | None = None
    ) -> tuple[ApiKey, str]:
        """A new key for producer ``name`` (refused when it has one): the record and the secret, shown only now."""
        check_producer_name(name)
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(name=name, admin=admin, created_at=time.time(), sha256=_digest(secret),
                     max_active_jobs=max_active_jobs, max_input_mb=max_input_mb)
        if not self.r.set(KEY_PREFIX + name, key.model_dump_json(), nx=True):
            raise ConfigError(f"producer {name!r} has a key already", where="keys",
                              next_step=f"keys revoke {name} first, then create it again")
        self.r.set(HASH_PREFIX + key.sha256, name)
        self.r.sadd(NAMES, name)
        return key, secret

    def get(self, name: str) -> ApiKey | None:
        raw = self.r.get(KEY_PREFIX + name)
        if not raw:
            return None
        try:
            return ApiKey.model_validate(json.loads(raw))
        except (ValueError, ValidationError):
            return None  # an altered record authenticates nobody

    def all(self) -> list[ApiKey]:
        names = sorted(n.decode() if isinstance(n, bytes) else str(n) for n in self.r.smembers(NAMES))
        return [key for name in names if (key := self.get(name)) is not None]

    def revoke(self, name: str) -> bool:
        """Delete producer ``name``'s key: refused from the next request on. False when it had none."""
        key = self.get(name)
        self.r.srem(NAMES, name)
        if key is None:
            return bool(self.r.delete(KEY_PREFIX + name))
        self.r.delete(HASH_PREFIX + key.sha256, KEY_PREFIX + name)
        return True

    def authenticate(self, secret: str) -> ApiKey | None:
        """The key ``secret`` is, or None (unknown, revoked, malformed)."""
        if not secret or len(secret) > MAX_SECRET_CHARS:
            return None
        digest = _digest(secret)
        name = self.r.get(HASH_PREFIX + digest)
        if not name:
            return None
        key = self.get(name.decode() if isinstance(name, bytes) else str(name))
        if key is None or not hmac.compare_digest(key.sha256, digest):
            return None
        return key
