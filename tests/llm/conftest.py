"""Fixtures for the model client tests: scenario files written on the fly and fast model settings."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.config import ModelSettings


@pytest.fixture
def write_scenario(tmp_path: Path) -> Callable[[str], Path]:
    """Write a YAML scenario (dedented) to a fresh file and return its path."""
    counter = iter(range(1000))

    def write(text: str) -> Path:
        path = tmp_path / f"scenario-{next(counter)}.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write


@pytest.fixture
def fast_settings() -> ModelSettings:
    """No SDK retries and a short timeout, so failures surface at once."""
    return ModelSettings(max_retries=0, request_timeout_s=5)
