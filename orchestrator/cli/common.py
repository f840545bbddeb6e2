"""Helpers shared by the CLI modules: settings, logging, JSON output and actionable errors."""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import BaseModel

from orchestrator.config import Settings, load_settings
from orchestrator.errors import OrchestratorError
from orchestrator.logs import configure_logging, mask_value

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
# Inside JSON text only these can still be raw (json.dumps escapes C0 itself).
_HUGE_INT = 10**4000
_UNSAFE_IN_JSON = re.compile(r"[\x7f-\x9f\ud800-\udfff]")


def plain(text: str) -> str:
    """``text`` safe to print on a terminal: control characters and lone surrogates shown as escapes (linear)."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                       text)


def dumps_safe(value: Any, *, indent: int | None = 2) -> str:
    """JSON text of ``value`` that any terminal or UTF-8 stream takes: NaN/Infinity become null, odd characters
    escapes, objects nested too deeply a marker (never a crash)."""
    try:
        text = json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False, default=str)
    except (ValueError, RecursionError):
        text = json.dumps(_finite(value), indent=indent, ensure_ascii=False, default=str)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: Any, depth: int = 0) -> Any:
    if depth > 200:
        return "[nested too deeply]"
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _HUGE_INT:
        return "[integer too large]"
    if isinstance(value, dict):
        return {str(k): _finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, depth + 1) for v in value]
    return value


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
