"""The reference pages are made from the code (orchestrator/cli/reference.py, added to the site by ops/docs/hooks.py):
every command's --help, every setting with the variable that really sets it, the schemas of a goal line and of
the results."""

from __future__ import annotations

import json
import re

import pytest
import typer
from pydantic import BaseModel, Field

from orchestrator.cli import app
from orchestrator.cli.reference import (
    CLI_PAGE,
    SCHEMAS_PAGE,
    SETTINGS_PAGE,
    command_paths,
    help_text,
    reference_pages,
    settings_page,
)
from orchestrator.config import Settings, load_settings
from orchestrator.errors import ConfigError
from orchestrator.sandbox.models import ScriptResult
from orchestrator.workflow.goal import GoalResult
from orchestrator.workflow.request import GoalRequest


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return reference_pages()


def test_every_command_is_on_the_cli_page_with_its_help(pages: dict[str, str]) -> None:
    page = pages[CLI_PAGE]
    paths = list(command_paths(typer.main.get_command(app)))
    assert ("sandbox", "run") in paths and ("submit",) in paths and ("cache", "clear") in paths
    for path in paths:
        assert f"## `python -m orchestrator{''.join(' ' + p for p in path)}`" in page
        assert help_text(app, path) in page


@pytest.mark.parametrize("command", ["run", "submit", "jobs", "worker"])
def test_the_help_of_the_main_commands_says_exit_codes_and_what_they_need(command: str) -> None:
    text = " ".join(help_text(app, (command,)).replace("│", " ").split())
    assert "Exit codes: " in text
    assert "Needs: " in text
    if command == "worker":
        assert "Readiness: " in text and "Only then does it take work" in text
    if command == "submit":
        assert "3 --wait --timeout ran out" in text


def _setting_rows(page: str) -> list[tuple[str, str, str, str]]:
    rows = re.findall(r"^\| `([^`]+)` \| `(ORCH_[A-Z0-9_]+)` \| `([^`]+)` \| `([^`]*)` \|", page, flags=re.M)
    return [(key, env, kind, default) for key, env, kind, default in rows]


def _leaves(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys |= _leaves(kind, f"{prefix}{name}.")
        else:
            keys.add(prefix + name)
    return keys


def test_every_setting_is_listed_once(pages: dict[str, str]) -> None:
    keys = [row[0] for row in _setting_rows(pages[SETTINGS_PAGE])]
    assert sorted(keys) == sorted(_leaves(Settings))


def test_each_listed_variable_really_sets_its_setting(pages: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    tried = 0
    for key, env, kind, default in _setting_rows(pages[SETTINGS_PAGE]):
        if kind != "int":
            continue
        for wanted in (int(default) + 1, int(default) - 1):  # one of them is inside the field's bounds
            monkeypatch.setenv(env, str(wanted))
            try:
                value: object = load_settings()
            except ConfigError:
                continue
            for part in key.split("."):
                value = getattr(value, part)
            assert value == wanted, f"{env} did not set {key}"
            tried += 1
            break
        monkeypatch.delenv(env)
    assert tried > 30


def test_defaults_and_meanings_come_from_the_models() -> None:
    class Inner(BaseModel):
        depth_mb: int = Field(3, description="how deep")

    class Section(BaseModel):
        """A section for the test."""

        size_mb: int = Field(5, description="how big | in MB")
        inner: Inner = Inner()

    class Fake(BaseModel):
        part: Section = Section()
        name: str = "x"

    page = settings_page(Fake)
    assert "## `part`\n\nA section for the test." in page
    assert "| `part.size_mb` | `ORCH_PART__SIZE_MB` | `int` | `5` | how big \\| in MB |" in page
    assert "| `part.inner.depth_mb` | `ORCH_PART__INNER__DEPTH_MB` | `int` | `3` | how deep |" in page
    assert "| `name` | `ORCH_NAME` | `str` | `\"x\"` |  |" in page


def test_the_schemas_page_holds_each_models_json_schema(pages: dict[str, str]) -> None:
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", pages[SCHEMAS_PAGE], flags=re.S)]
    assert GoalRequest.model_json_schema() in blocks
    assert GoalResult.model_json_schema(mode="serialization") in blocks
    assert ScriptResult.model_json_schema(mode="serialization") in blocks
    result = GoalResult.model_json_schema(mode="serialization")
    assert {"status", "artifacts", "validation", "metrics", "answer"} <= set(result["properties"])
