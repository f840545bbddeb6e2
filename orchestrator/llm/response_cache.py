"""The response cache: an identical deterministic model request is answered from disk instead of the model.

A reply is reused only when everything that decides it is the same: who answers (the server's base URL and the
model, or a scripted scenario's content), the whole request body (messages, tools, temperature, seed,
``max_tokens``, the response format) and its purpose. The key is the sha256 of all of that as canonical JSON, so an
entry can never be served for another request; an entry file names its key inside and is checked against it, so a
file copied or renamed under another key is a miss, and anything that does not parse as an entry is a miss too.
Only deterministic requests are cached (temperature 0 with a seed) and only replies the server gave (errors never).

What is stored is the reply as the server sent it (content, its own tool calls, finish reason, usage); reading tool
calls out of text happens after the cache, so changing ``model.text_tool_calls`` needs no new entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.llm.interface import Usage
from orchestrator.logs import get_logger

MAX_ENTRY_BYTES = 8 * 1024 * 1024
_log = get_logger("orchestrator.llm")


class WireCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"


class WireReply(BaseModel):
    """One reply as the server sent it, before any reading of text calls."""

    model_config = ConfigDict(frozen=True)

    content: str | None = None
    tool_calls: tuple[WireCall, ...] = ()
    finish_reason: str | None = None
    model: str = ""
    usage: Usage = Usage()


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    reply: WireReply


def request_key(identity: str, request: dict[str, Any], purpose: str) -> str:
    """The cache key of ``request`` sent to ``identity`` for ``purpose``: sha256 of the canonical JSON of all three."""
    text = json.dumps(
        {"identity": identity, "purpose": purpose, "request": request},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """Content-addressed replies under ``root`` (``<cache folder>/store/responses``), written atomically, 0600."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> WireReply | None:
        path = self._path(key)
        try:
            if path.is_symlink() or path.stat().st_size > MAX_ENTRY_BYTES:
                return None
            entry = _Entry.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, ValidationError) as e:
            _log.warning("llm.cache_entry_unusable", key=key[:16], error=str(e)[:200])
            return None
        return entry.reply if entry.key == key else None

    def put(self, key: str, reply: WireReply) -> None:
        data = _Entry(key=key, reply=reply).model_dump_json().encode("utf-8")
        if len(data) > MAX_ENTRY_BYTES:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:  # a cache that cannot be written costs tokens, never the run
            _log.warning("llm.cache_write_failed", error=str(e)[:200])
