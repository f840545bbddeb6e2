"""What every part of the job ledger shares: one Redis client, its registered Lua scripts, the key prefix and the
encoding of hash fields (one JSON value per field)."""

from __future__ import annotations

import json
from typing import Any

import redis
from redis.commands.core import Script
from redis.typing import EncodableT, FieldT

from orchestrator.workflow import phases

PREFIX = "orch"
_END_LUA = "'" + json.dumps(phases.token(phases.Done())) + "'"
"""``next`` of a job that ended, as a Lua string of its stored JSON: the scripts write ``$END`` for it, so the token
is spelt in ``workflow.phases`` only."""


class Store:
    """A Redis client and the Lua scripts registered on it (each once, on first use)."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._scripts: dict[str, Script] = {}

    def script(self, text: str) -> Script:
        if text not in self._scripts:
            self._scripts[text] = self.r.register_script(text.replace("$END", _END_LUA))
        return self._scripts[text]


def encode(fields: dict[str, Any]) -> dict[FieldT, EncodableT]:
    return {k: json.dumps(v) for k, v in fields.items()}


def field_args(fields: dict[str, Any]) -> list[Any]:
    """``fields`` encoded, as the flat field/value arguments of ``HSET``."""
    args: list[Any] = []
    for k, v in encode(fields).items():
        args += [k, v]
    return args


def text(value: object) -> str:
    """A Redis reply item as text (this client does not decode responses)."""
    return value.decode() if isinstance(value, bytes) else str(value)
