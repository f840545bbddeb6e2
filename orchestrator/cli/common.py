"""Helpers shared by the CLI modules: settings, logging, JSON output and actionable errors."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import BaseModel

from orchestrator.config import Settings, load_settings
from orchestrator.errors import OrchestratorError
from orchestrator.logs import configure_logging, dumps_safe, mask_value

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


# C0 controls but newline and tab, DEL, C1 controls (CSI is U+009B) and lone surrogates: none may reach a terminal.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def plain(text: str) -> str:
    """``text`` safe to print on a terminal: control characters and lone surrogates shown as escapes (linear)."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                       text)


def emit_json(value: Any) -> None:
    sys.stdout.write(dumps_safe(to_jsonable(value)) + "\n")
    sys.stdout.flush()


def notice(event: str, text: str, *, level: str = "info", **fields: Any) -> None:
    """One line for the person on stderr: plain text on a terminal, else one JSON object (like every log line)."""
    if sys.stderr.isatty():
        sys.stderr.write(plain(text) + "\n")
    else:
        record = {"event": event, "level": level, "message": text, **fields}
        sys.stderr.write(dumps_safe(mask_value(record), indent=None) + "\n")
    sys.stderr.flush()


def fail(error: OrchestratorError, *, as_json: bool, code: int = 1) -> NoReturn:
    """Print an actionable error (JSON on stdout with --json, text on stderr otherwise) and exit."""
    if as_json:
        emit_json({"ok": False, **error.to_dict()})
    elif sys.stderr.isatty():
        typer.secho(f"error: {plain(str(error))}", err=True, fg=typer.colors.RED)
    else:
        notice("cli.error", f"error: {error}", level="error", **error.to_dict())
    raise typer.Exit(code)
