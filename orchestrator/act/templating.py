"""Rendering a template the model picked: Jinja2's sandbox, no loader, and a cap on the output.

:func:`render_bounded` runs the render in a child process (:mod:`orchestrator.isolation`) with memory and time
bounds, so ``{% for i in range(10**9) %}`` or a string multiplied to gigabytes stops at the bound instead of holding
the Act (and its time budget) hostage.
"""

from __future__ import annotations

from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from orchestrator.isolation import Bound, Bounded, run_bounded

MAX_RENDER_CHARS = 4 * 1024 * 1024
RENDER_MEMORY_MB = 512
RENDER_TIMEOUT_S = 10.0


class RenderTooLarge(Exception):
    pass


def render(source: str, data: dict[str, Any], max_chars: int = MAX_RENDER_CHARS) -> str:
    """``source`` rendered with ``data`` (strict undefined, no autoescape, no includes); at most ``max_chars``."""
    # No loader: a template cannot include or extend other files (and so cannot pull in a script's source).
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)
    parts: list[str] = []
    size = 0
    for piece in env.from_string(source).generate(**data):
        size += len(piece)
        if size > max_chars:
            raise RenderTooLarge(f"the output is longer than {max_chars} characters")
        parts.append(piece)
    return "".join(parts)


def render_bounded(source: str, data: dict[str, Any], *, timeout_s: float, max_chars: int = MAX_RENDER_CHARS) -> str:
    """:func:`render` in a bounded child process; raises :class:`Bounded` (a bound hit, or the template's error)."""
    return run_bounded(
        render, source, data, max_chars, memory_mb=RENDER_MEMORY_MB, timeout_s=timeout_s, what="the template"
    )


__all__ = ["MAX_RENDER_CHARS", "Bound", "Bounded", "render", "render_bounded"]
