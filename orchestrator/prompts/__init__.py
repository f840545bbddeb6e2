"""Prompts are package data, versioned and reviewed like code."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load_prompt(name: str) -> str:
    """The text of ``orchestrator/prompts/<name>.md``."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").strip()
