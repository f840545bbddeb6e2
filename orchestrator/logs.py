"""Structured JSON logging (structlog), configured once per process, with secrets masked before writing."""

from __future__ import annotations

import json as json_module
import logging
import math
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog
from opentelemetry import trace

_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), "sk-***"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._\-~+/=]{8,}"), r"\1 ***"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}"), "gh*_***"),
    (re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{8,}"), "xox*-***"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "AKIA***"),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}"), "jwt-***"),
    (re.compile(r"(?i)\b((?:api[_-]?key|token|secret|password|passwd)\s*[=:]\s*)[^\s,;\"']{4,}"), r"\1***"),
    # Credentials inside a URL (https://user:password@host/...). The look-behinds make every pattern start only
    # where a run of its characters starts, so masking stays linear in the text's length.
    # The user part runs to the authority's last "@" (a password may hold one; URL parsers split there too), and a
    # token alone before the "@" (https://TOKEN@host) is a credential as well.
    (re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@:?#]*:[^/\s?#]*@"), r"\1***:***@"),
    (re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://)(?!\*\*\*:\*\*\*@)[^/\s:?#]+@"), r"\1***@"),
    (re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}"), "***@***"),
)
MAX_MASK_DEPTH = 64
_SECRET_KEYS = re.compile(r"(?i)(api[_-]?key|authorization|password|passwd|secret|token)$")
_COUNT_KEY = re.compile(r"(?i)tokens?_(in|out|used|budget|left|total)$|^tokens?$|_tokens$")


def mask_secrets(text: str) -> str:
    """``text`` with API keys, bearer tokens, credentials and e-mail addresses replaced by ``***``."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def mask_value(value: Any, key: str = "", _depth: int = 0) -> Any:
    """Recursively mask secrets in a log value; values under secret-looking keys are hidden whole.

    Keys are masked like values (a secret can be a key too); nesting deeper than ``MAX_MASK_DEPTH`` is replaced
    by a marker, so a hostile value can neither leak through depth nor crash the logger.
    """
    if _depth > MAX_MASK_DEPTH:
        return "[nested too deeply]"
    if key and _SECRET_KEYS.search(key) and not _COUNT_KEY.search(key) and isinstance(value, str):
        return "***"
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {mask_secrets(str(k)): mask_value(v, str(k), _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_value(v, "", _depth + 1) for v in value]
    return value


def _mask_processor(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    return {k: mask_value(v, k) for k, v in event_dict.items()}


def _add_trace_ids(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The current OpenTelemetry trace and span ids, so every log line of a goal can be joined to its trace."""
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        event_dict.setdefault("trace_id", f"{ctx.trace_id:032x}")
        event_dict.setdefault("span_id", f"{ctx.span_id:016x}")
    return event_dict


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def check_level(level: str) -> str:
    """``level`` upper-cased, or ``ValueError`` naming the valid levels."""
    if level.upper() not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    return level.upper()


def _safe_json(value: Any, **kwargs: Any) -> str:
    # ASCII-only: no control character, lone surrogate or terminal sequence survives as a raw character.
    kwargs.setdefault("default", repr)
    try:
        return json_module.dumps(value, ensure_ascii=True, **kwargs)
    except (ValueError, RecursionError):  # an int too long to print, or nesting the masker did not see
        return json_module.dumps({k: repr(v)[:2000] for k, v in value.items()}, ensure_ascii=True)


_HUGE_INT = 10**4000
# Inside JSON text only these can still be raw (json.dumps escapes C0 itself).
_UNSAFE_IN_JSON = re.compile(r"[\x7f-\x9f\ud800-\udfff]")


def dumps_safe(value: Any, *, indent: int | None = 2) -> str:
    """JSON text of ``value`` that any terminal or UTF-8 stream takes: NaN/Infinity become null, odd characters
    escapes, objects nested too deeply a marker (never a crash)."""
    try:
        text = json_module.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False, default=str)
    except (ValueError, RecursionError):
        text = json_module.dumps(_finite(value), indent=indent, ensure_ascii=False, default=str)
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


class _CurrentStderr:
    """Whatever ``sys.stderr`` is when a line is written (not when logging was set up): a caller that swaps
    stderr for a while (a test runner, an embedding program) and closes its stand-in leaves logging working."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str = "INFO", *, json: bool = True, stream: TextIO | None = None) -> None:
    """Route structlog and stdlib logging (httpx, openai, urllib3, docker, warnings) to ``stream`` (stderr by
    default) through one pipeline: masked, then one JSON object per line (or console text with ``json=False``)."""
    level = check_level(level)
    target: Any = stream or _CurrentStderr()
    renderer: Any = (
        structlog.processors.JSONRenderer(serializer=_safe_json)
        if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        _add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, _mask_processor, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=target),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(target)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                _mask_processor,
                renderer,
            ],
        )
    )
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.captureWarnings(True)
    for noisy in ("urllib3", "docker", "httpx", "httpcore", "openai"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))


def get_logger(name: str | None = None, **bound: Any) -> Any:
    return structlog.get_logger(name).bind(**bound) if bound else structlog.get_logger(name)
