"""Reference pages made from the code, so they cannot drift from it: the CLI from each command's ``--help``, every
setting from the settings models, and the JSON Schemas of a goal line and of the results from their pydantic models.

``ops/docs/hooks.py`` adds these pages to the documentation site each time it is built (``mkdocs build``); they
are never committed, so there is no copy to fall behind.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python
from typer.testing import CliRunner

CLI_PAGE = "reference/cli.md"
SETTINGS_PAGE = "reference/all-settings.md"
SCHEMAS_PAGE = "reference/schemas.md"
PROG = "python -m orchestrator"
HELP_WIDTH = 100
ENV_PREFIX = "ORCH_"
ENV_NESTING = "__"


def reference_pages() -> dict[str, str]:
    """Every generated page, by its path under ``docs/``."""
    # Deferred: the CLI package imports every command module; this module is imported by the docs hook only.
    from orchestrator.cli import app
    from orchestrator.config import Settings
    from orchestrator.sandbox.models import ScriptResult
    from orchestrator.workflow.goal import GoalResult
    from orchestrator.workflow.request import GoalRequest

    schemas: list[tuple[str, str, type[BaseModel], str]] = [
        ("A goal line", "One line of `submit`'s JSONL (and what `run`'s options say); only `goal` is required.",
         GoalRequest, "validation"),
        ("The overall result", "What `run --json` prints and `jobs ID --json` holds under `result`.",
         GoalResult, "serialization"),
        ("A sandbox call's result", "What `sandbox run` and `sandbox command` print with `--json`.",
         ScriptResult, "serialization"),
    ]
    return {CLI_PAGE: cli_page(app), SETTINGS_PAGE: settings_page(Settings), SCHEMAS_PAGE: schemas_page(schemas)}


# --- the CLI -------------------------------------------------------------------------------------------------------


def cli_page(app: typer.Typer) -> str:
    """Every command's ``--help``, as a terminal 100 columns wide shows it, in the order the CLI lists them."""
    lines = [
        "# CLI reference",
        "",
        "Generated from each command's `--help` when the site is built. Every command also takes `--help` itself;",
        f"the global options (`--config FILE`, `--log-level LEVEL`) come before the command: `{PROG} --log-level",
        "INFO run …`.",
        "",
    ]
    for path in command_paths(typer.main.get_command(app)):
        lines += [f"## `{' '.join((PROG, *path))}`", "", "```text", help_text(app, path), "```", ""]
    return "\n".join(lines)


def command_paths(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of ``command`` and of every command below it, depth first, hidden ones left out."""
    yield prefix
    # Typer's groups carry their sub-commands in ``commands`` (its vendored click has no public Group type).
    for name, sub in getattr(command, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            yield from command_paths(sub, (*prefix, name))


def help_text(app: typer.Typer, path: tuple[str, ...]) -> str:
    """What ``python -m orchestrator PATH --help`` prints, without colour, trailing blanks cut."""
    shown = CliRunner().invoke(
        app, [*path, "--help"], prog_name=PROG, env={"COLUMNS": str(HELP_WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
    )
    if shown.exit_code != 0:
        raise RuntimeError(f"{' '.join(path)} --help exited {shown.exit_code}: {shown.output[-2000:]}")
    return "\n".join(line.rstrip() for line in shown.output.strip("\n").splitlines()).strip("\n")


# --- settings ------------------------------------------------------------------------------------------------------


def settings_page(settings_model: type[BaseModel]) -> str:
    """One table per section of the settings: the YAML key, the ``ORCH_*`` variable, type, default, meaning."""
    lines = [
        "# Every setting",
        "",
        "Generated from the settings models (`orchestrator/config.py`) when the site is built. Each setting is read",
        "from, highest first: the environment (`ORCH_*`, sections nested with `__`; lists and mappings as JSON), the",
        "YAML file (`--config FILE` or `ORCH_CONFIG`, optionally under a `skillruntime:` block), then the default",
        "below. [Settings](settings.md) shows them at work.",
        "",
    ]
    top: list[tuple[str, FieldInfo]] = []
    for name, field in settings_model.model_fields.items():
        section = _model_type(field.annotation)
        if section is None:
            top.append((name, field))
            continue
        lines += [f"## `{name}`", ""]
        if section.__doc__:
            lines += [" ".join(section.__doc__.split()), ""]
        lines += _settings_table(list(_leaf_fields(section, name)))
    if top:
        lines += ["## Top-level settings", ""] + _settings_table(top)
    return "\n".join(lines)


def _leaf_fields(section: type[BaseModel], prefix: str) -> Iterator[tuple[str, FieldInfo]]:
    """Each setting of ``section`` by its dotted key; a nested section's settings one by one."""
    for name, field in section.model_fields.items():
        nested = _model_type(field.annotation)
        if nested is None:
            yield f"{prefix}.{name}", field
        else:
            yield from _leaf_fields(nested, f"{prefix}.{name}")


def _settings_table(fields: list[tuple[str, FieldInfo]]) -> list[str]:
    rows = ["| Setting | Environment | Type | Default | Meaning |", "|---|---|---|---|---|"]
    for key, field in fields:
        env = ENV_PREFIX + key.replace(".", ENV_NESTING).upper()
        rows.append(
            f"| `{key}` | `{env}` | {_code(_type_name(field.annotation))} | {_code(_default(field))} "
            f"| {_cell(field.description or '')} |"
        )
    return [*rows, ""]


def _model_type(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(json.dumps(arg) for arg in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join("..." if arg is Ellipsis else _type_name(arg) for arg in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "(required)"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, Path):
        home = str(Path.home())
        text = str(value)
        return "~" + text[len(home):] if text == home or text.startswith(home + "/") else text
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# --- schemas -------------------------------------------------------------------------------------------------------


def schemas_page(schemas: list[tuple[str, str, type[BaseModel], str]]) -> str:
    """Each model's top-level fields as a table, then its whole JSON Schema (``model_json_schema``)."""
    lines = [
        "# Schemas",
        "",
        "Generated from the pydantic models when the site is built: the JSON Schema each edge is parsed with",
        "(a goal line) or printed by (the results).",
        "",
    ]
    for title, summary, model, mode in schemas:
        schema = model.model_json_schema(mode="serialization" if mode == "serialization" else "validation")
        required = set(schema.get("required", ()))
        lines += [f"## {title}", "", f"{summary} Model: `{model.__module__}.{model.__qualname__}`.", ""]
        lines += ["| Field | Type | Required | Meaning |", "|---|---|---|---|"]
        for name, prop in schema.get("properties", {}).items():
            lines.append(
                f"| `{name}` | {_code(_schema_type(prop))} | {'yes' if name in required else ''} "
                f"| {_cell(prop.get('description', ''))} |"
            )
        lines += ["", "```json", json.dumps(schema, indent=2, ensure_ascii=False), "```", ""]
    return "\n".join(lines)


def _schema_type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " | ".join(_schema_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    kind = prop.get("type", "any")
    if kind == "array" and isinstance(prop.get("items"), dict):
        return f"array[{_schema_type(prop['items'])}]"
    return str(kind)
