"""The Act tools: typed functions whose argument models give the JSON schemas offered to the model.

How to add a tool
-----------------
1. In the module for what it does (``reading``, ``producing``, ``running``, or a new one), write an argument model
   and a function, and decorate it::

       class CountLinesArgs(ToolArgs):
           path: str = Field(description=tool_text("count_lines.path"))

       @tool()
       def count_lines(ctx: ActContext, args: CountLinesArgs) -> ToolOutcome:
           data = ctx.deps.build.read_file(args.path)
           return ToolOutcome(ok=True, data={"lines": data.count(b"\\n")})

   The tool's name is the function's name (or ``@tool(name=...)``). What the model reads is package data: the
   description in ``orchestrator/prompts/tools/count_lines.md``, each argument's in ``tools/count_lines.path.md``
   (or ``tools/args.<field>.md`` when tools share it); the JSON schema comes from the argument model. Arguments
   arrive validated, as the model object. Notes and hints in results come from ``prompts/notes/`` too.
2. Add it to ``TOOLS`` below (the order is the order the model sees).

A tool uses ``ctx.deps`` (frozen: request, settings, skill library, build area, blackboard, memo store) and may
update ``ctx.state`` (what the run learned). It never raises for something the model can fix: it returns
``fail("why", **data)`` and the model sees the reason. What the loop must act on is the outcome's one ``effect``:
``Finish`` (validate and end), ``Violation`` (end the Act: a sandbox rule was broken, see ``violation(...)``) or
``RepeatedRead`` (content already sent). Record facts ride on the outcome too (``changed_files`` for progress,
``disclosure`` L2/L3, ``memo_hit``, ``container``); the loop turns them into the step's record and the metrics.
Only infrastructure failures propagate (a ``SandboxError`` that is not the script's fault ends the Act).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import ValidationError

from orchestrator.act.context import ActContext
from orchestrator.act.tools._base import (
    Effect,
    Finish,
    PreparedCall,
    RepeatedRead,
    Tool,
    ToolArgs,
    ToolOutcome,
    Violation,
    fail,
    is_script,
    tool,
    violation,
)
from orchestrator.act.tools.editing import copy_file, edit_file
from orchestrator.act.tools.producing import (
    blackboard_get,
    blackboard_put,
    finish,
    template_expand,
    validate,
    write_artifact,
)
from orchestrator.act.tools.reading import diff, list_files, read_file, read_ref, read_skill_md, summarize
from orchestrator.act.tools.running import run_command, run_script
from orchestrator.act.tools.viewing import view_image
from orchestrator.errors import OrchestratorError, SandboxError, SandboxRefused
from orchestrator.llm.interface import ToolSpec
from orchestrator.logs import get_logger
from orchestrator.prompts import render_prompt

__all__ = [
    "TOOLS",
    "Effect",
    "Finish",
    "PreparedCall",
    "RepeatedRead",
    "Tool",
    "ToolArgs",
    "ToolOutcome",
    "ToolSet",
    "Violation",
    "fail",
    "is_script",
    "tool",
    "tool_name",
    "violation",
]


_log = get_logger("orchestrator.act")


def tool_name(name: str) -> str:
    """The snake_case tool name for a spelling from the design documents (``readSkillMd``, ``blackboard.put``)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name.strip()).replace(".", "_").replace("-", "_").lower()


class ToolSet:
    """The tools offered to the model, by name (design-document spellings are understood too)."""

    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"two tools are named {t.name!r}")
            self._tools[t.name] = t

    def get(self, name: str) -> Tool[Any] | None:
        name = name.strip().removeprefix("functions.")  # how some chat templates spell a function tool
        return self._tools.get(name) or self._tools.get(tool_name(name))

    def specs(self) -> list[ToolSpec]:
        return [t.spec() for t in self._tools.values()]

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def call(self, ctx: ActContext, name: str, arguments: str | None) -> tuple[PreparedCall | None, ToolOutcome]:
        """Find the tool, validate the arguments once, run it. Whatever the model can fix becomes a failed outcome
        it will see; a ``SandboxError`` (the engine, not the model) propagates."""
        tool = self.get(name)
        if tool is None:
            available = ", ".join(self.names())
            return None, fail(render_prompt("errors/unknown_tool", name=repr(name), available=available))
        try:
            prepared = tool.prepare(arguments)
        except (json.JSONDecodeError, ValidationError) as e:
            error = render_prompt("errors/bad_arguments_for", name=tool.name, error=_problems(e),
                                  expected=_signature(tool))
            return None, fail(error)
        try:
            return prepared, prepared.run(ctx)
        except SandboxRefused as e:
            return prepared, ToolOutcome(ok=False, error=str(e), effect=Violation(f"sandbox refused: {e.message}"))
        except SandboxError:
            raise
        except (OrchestratorError, ValueError, OSError) as e:
            return prepared, fail(render_prompt("errors/failed", name=name, error=e))
        except Exception as e:  # a bug of ours must not cost the run: the model and the evidence see it
            _log.exception("act.tool_crashed", tool=name)
            error = render_prompt("errors/failed_unexpectedly", name=name, error_type=type(e).__name__, error=e)
            return prepared, fail(error)


def _problems(error: json.JSONDecodeError | ValidationError) -> str:
    """What is wrong with the arguments, one short clause per field (no library boilerplate)."""
    if isinstance(error, json.JSONDecodeError):
        return f"they are not JSON ({error.msg} at column {error.colno})"
    problems = []
    for item in error.errors()[:6]:
        field = ".".join(str(part) for part in item["loc"] if not _is_type_tag(part)) or "arguments"
        if item["type"] == "missing":
            problems.append(f"{field!r} is required")
        elif item["type"] == "extra_forbidden":
            problems.append(f"{field!r} is not an argument")
        else:
            problems.append(f"{field!r}: {item['msg']} (got {type(item['input']).__name__})")
    return "; ".join(dict.fromkeys(problems))


def _is_type_tag(part: object) -> bool:
    """pydantic names the union member it tried in an error's location (``args.dict[str,any]``)."""
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "float", "bool", "function-after"})


def _signature(tool: Tool[Any]) -> str:
    """``{path: string (required), text: string, …}``: the arguments as the schema the model was given says."""
    schema = tool.spec().parameters
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        if name == "reason":
            continue
        kinds = [p.get("type", "any") for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
        parts.append(f"{name}: {' or '.join(map(str, kinds)) or 'any'}{' (required)' if name in required else ''}")
    return "{" + ", ".join(parts) + "}"


TOOLS = ToolSet(
    [
        read_skill_md,
        read_ref,
        list_files,
        read_file,
        template_expand,
        validate,
        run_script,
        run_command,
        write_artifact,
        edit_file,
        copy_file,
        view_image,
        summarize,
        diff,
        blackboard_put,
        blackboard_get,
        finish,
    ]
)
