"""The Act tools: typed functions whose argument models give the JSON schemas offered to the model.

A tool never raises for something the model can fix: it returns ``ToolOutcome(ok=False, error=...)`` and the model
sees the reason. Only misuse or infrastructure failures propagate (a ``SandboxError`` that is not the script's fault).
"""

from __future__ import annotations

import re

from orchestrator.act.tools._base import Tool, ToolArgs, ToolOutcome, fail, is_script
from orchestrator.act.tools.producing import (
    BlackboardGetArgs,
    BlackboardPutArgs,
    FinishArgs,
    TemplateExpandArgs,
    ValidateArgs,
    WriteArtifactArgs,
    blackboard_get,
    blackboard_put,
    finish,
    template_expand,
    validate,
    write_artifact,
)
from orchestrator.act.tools.reading import (
    DiffArgs,
    ListFilesArgs,
    NoArgs,
    ReadFileArgs,
    ReadRefArgs,
    SummarizeArgs,
    diff,
    list_files,
    read_file,
    read_ref,
    read_skill_md,
    summarize,
)
from orchestrator.act.tools.running import RunScriptArgs, run_script
from orchestrator.llm.interface import ToolSpec

__all__ = ["TOOLS", "Tool", "ToolArgs", "ToolOutcome", "fail", "is_script", "tool_name", "tool_specs"]

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "read_skill_md",
            "Read this skill's SKILL.md (L2). Sent once; repeats say it is unchanged.",
            NoArgs,
            read_skill_md,
        ),
        Tool(
            "read_ref",
            "Read a file referenced by SKILL.md (L3, on demand). Scripts are described, never shown.",
            ReadRefArgs,
            read_ref,
        ),
        Tool(
            "list_files",
            "List files of the skill (glob), of build/ ('build/**') or of inputs/ ('inputs/**').",
            ListFilesArgs,
            list_files,
        ),
        Tool("read_file", "Read a text file from the skill root, build/ or inputs/.", ReadFileArgs, read_file),
        Tool(
            "template_expand",
            "Render a Jinja2 template (sandboxed) with data; optionally write it to build/.",
            TemplateExpandArgs,
            template_expand,
        ),
        Tool(
            "validate",
            "Check a file/object against a JSON Schema, or build/ against contract rules "
            "(no arguments: the expected outputs of this step).",
            ValidateArgs,
            validate,
        ),
        Tool(
            "run_script",
            "Run a skill script in the sandbox: stdin = args JSON, stdout = JSON; it may write build/. No network.",
            RunScriptArgs,
            run_script,
        ),
        Tool(
            "write_artifact",
            "Write a text or base64 file under build/ (versioned).",
            WriteArtifactArgs,
            write_artifact,
        ),
        Tool("summarize", "Extractive summary of a text or file.", SummarizeArgs, summarize),
        Tool("diff", "Compare two text files (skill root, build/ or inputs/).", DiffArgs, diff),
        Tool(
            "blackboard_put",
            "Store a small JSON value for later steps and later skills.",
            BlackboardPutArgs,
            blackboard_put,
        ),
        Tool("blackboard_get", "Read a value stored on the blackboard.", BlackboardGetArgs, blackboard_get),
        Tool(
            "finish",
            "Declare the outputs done; they are validated before the skill ends.",
            FinishArgs,
            finish,
        ),
    )
}


def tool_name(name: str) -> str:
    """The snake_case tool name for a spelling from the design documents (``readSkillMd``, ``blackboard.put``)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name.strip()).replace(".", "_").replace("-", "_").lower()


def tool_specs() -> list[ToolSpec]:
    return [t.spec() for t in TOOLS.values()]
