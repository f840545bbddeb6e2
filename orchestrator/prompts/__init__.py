"""Prompts are package data, versioned and reviewed like code: every text the model is sent lives here.

Each prompt is ``orchestrator/prompts/<name>.md``. :func:`load_prompt` gives its text; :func:`render_prompt` fills
its ``$placeholders`` (``string.Template``, so JSON braces in a prompt need no escaping).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def load_prompt(name: str) -> str:
    """The text of ``orchestrator/prompts/<name>.md``."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").strip()


def render_prompt(name: str, **fields: object) -> str:
    """The prompt ``name`` with its ``$placeholders`` filled; a missing field is a ``KeyError`` (a bug of ours)."""
    return Template(load_prompt(name)).substitute({k: str(v) for k, v in fields.items()}).strip()
