"""Fixtures of the skill-selection specifications."""

from select_corpus import skills_root  # noqa: F401
