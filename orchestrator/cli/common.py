"""Helpers shared by the CLI modules: settings, logging, JSON output and actionable errors."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import BaseModel

from orchestrator.config import Settings, load_settings
from orchestrator.errors import OrchestratorError
from orchestrator.logs import configure_logging

EXIT_USAGE = 2


@dataclass
class CliState:
    config_file: Path | None = None
    log_level: str = "WARNING"
    _settings: Settings | None = None

    def settings(self, **overrides: Any) -> Settings:
        if self._settings is None or overrides:
            settings = load_settings(self.config_file, **overrides)
            configure_logging(self.log_level, json=settings.log_json)
            if overrides:
                return settings
            self._settings = settings
        return self._settings


def state(ctx: typer.Context) -> CliState:
    obj = ctx.find_root().obj
    if not isinstance(obj, CliState):  # invoked without the root callback, e.g. from tests
        obj = CliState()
        ctx.find_root().obj = obj
    return obj


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    return value


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(value), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def fail(error: OrchestratorError, *, as_json: bool, code: int = 1) -> NoReturn:
    """Print an actionable error (JSON on stdout with --json, text on stderr otherwise) and exit."""
    if as_json:
        emit_json({"ok": False, **error.to_dict()})
    else:
        typer.secho(f"error: {error}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)
