"""The shape every Act tool shares: typed arguments in, a structured outcome out."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.act.context import ActContext
from orchestrator.llm.interface import ToolSpec

MAX_VALUE_BYTES = 64 * 1024
MAX_SCRIPT_FAILURES = 2  # the first failure plus exactly one informed retry


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field("", description="Why this step, in at most a few words (kept as evidence).")


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    changed_files: tuple[str, ...] = ()
    disclosure: str | None = None  # "L2" | "L3"
    memo_hit: bool = False
    dedup: bool = False
    container: dict[str, Any] | None = None
    finish: bool = False
    violation: str | None = None  # a sandbox/confinement violation: the Act exits early

    def content(self) -> str:
        payload = {"ok": self.ok, **self.data}
        if self.error:
            payload["error"] = self.error
        return json.dumps(payload, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[ToolArgs]
    fn: Callable[[ActContext, Any], ToolOutcome]

    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)


def fail(error: str, **data: Any) -> ToolOutcome:
    return ToolOutcome(ok=False, error=error, data=data)


def is_script(ctx: ActContext, rel_path: str) -> bool:
    return PurePosixPath(rel_path).suffix.lower() in ctx.settings.sandbox.allowed_extensions
