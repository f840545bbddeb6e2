"""Tools that produce: artifacts under build/, sandboxed templates, validation, the blackboard, finish."""

from __future__ import annotations

import base64
import binascii
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, field_validator

from orchestrator.act.checks import CHECK_TIMEOUT_S, schema_violations_bounded
from orchestrator.act.context import ActContext
from orchestrator.act.templating import RENDER_TIMEOUT_S, Bound, Bounded, render_bounded
from orchestrator.act.tools._base import (
    MAX_VALUE_BYTES,
    Finish,
    ToolArgs,
    ToolOutcome,
    fail,
    is_script,
    tool,
    violation,
)
from orchestrator.act.tools.reading import input_path, nearest_files, reading_path
from orchestrator.errors import PathEscapeError, SandboxError, SandboxErrorCode, SkillError, ValidationRulesError
from orchestrator.prompts import render_prompt, tool_text
from orchestrator.sandbox.protocol import clean_build_path
from orchestrator.tokens import cut_to_tokens
from orchestrator.validate.rules import ContractRules, ExpectedOutputs
from orchestrator.validate.validator import validate_outputs

# --- producing ---------------------------------------------------------------------------------------------------


def record_write(ctx: ActContext, rel: str, sha: str, size: int) -> tuple[str, bool]:
    version, changed = ctx.deps.blackboard.record_artifact(rel, sha, size, ctx.deps.request.skill_id)
    return version.label, changed


@dataclass(frozen=True)
class Stored:
    """A file written to ``build/`` and versioned: what the model is told, and whether it changed."""

    rel: str
    size: int
    sha256: str
    version: str
    changed: bool
    first_here: bool = False
    """The first time this Act wrote the file: progress for the Act even when an earlier attempt (a retry's first
    run) left the same bytes there."""

    def data(self) -> dict[str, Any]:
        return {"path": f"build/{self.rel}", "bytes": self.size, "sha256": self.sha256, "version": self.version,
                "changed": self.changed}

    @property
    def changed_files(self) -> tuple[str, ...]:
        return (self.rel,) if self.changed or self.first_here else ()


def store_in_build(ctx: ActContext, rel: str, data: bytes, *, full_hint: str) -> Stored | ToolOutcome:
    """Write ``build/rel`` and version it; a full ``build/`` is a failure the model can act on (``full_hint``: the
    ``prompts/notes/`` text telling it how), any other sandbox failure propagates."""
    try:
        written = ctx.deps.build.write_file(rel, data)
    except SandboxError as e:
        if e.code is SandboxErrorCode.DISK_FULL:
            return fail(str(e), hint=render_prompt(full_hint))
        raise
    label, changed = record_write(ctx, rel, written.sha256, written.size)
    first_here = rel not in ctx.state.written
    ctx.state.written.add(rel)
    return Stored(rel, written.size, written.sha256, label, changed, first_here)


class WriteArtifactArgs(ToolArgs):
    path: str = Field(
        description=tool_text("write_artifact.path"),
        validation_alias=AliasChoices(
            "path", "rel_path", "relPathUnderBuild", "rel_path_under_build", "file", "file_path", "filename"
        ),
    )
    text: str | None = Field(
        None, description=tool_text("write_artifact.text"), validation_alias=AliasChoices("text", "content")
    )

    @field_validator("text", mode="before")
    @classmethod
    def _json_value_as_text(cls, value: Any) -> Any:
        """Small models often give a JSON file's content as the JSON value itself, not as text: write it as JSON."""
        return json.dumps(value, ensure_ascii=False, indent=2) + "\n" if isinstance(value, dict | list) else value
    base64: str | None = Field(
        None,
        description=tool_text("write_artifact.base64"),
        validation_alias=AliasChoices("base64", "bytes", "bytes_base64", "data_base64"),
    )


@tool()
def write_artifact(ctx: ActContext, args: WriteArtifactArgs) -> ToolOutcome:
    if (args.text is None) == (args.base64 is None):
        return fail(render_prompt("errors/give_exactly_one_text"))
    try:
        rel = clean_build_path(args.path)
    except PathEscapeError as e:
        return violation(str(e), f"write outside build/: {args.path}")
    except ValueError as e:
        return fail(str(e))
    try:
        data = (
            args.text.encode("utf-8") if args.text is not None else base64.b64decode(args.base64 or "", validate=True)
        )
    except binascii.Error as e:
        return fail(render_prompt("errors/base64_not_valid", error=e))
    stored = store_in_build(ctx, rel, data, full_hint="notes/build_full_write")
    if isinstance(stored, ToolOutcome):
        return stored
    return ToolOutcome(ok=True, data=stored.data(), changed_files=stored.changed_files)


class TemplateExpandArgs(ToolArgs):
    template_path: str = Field(
        description=tool_text("template_expand.template_path"),
        validation_alias=AliasChoices("template_path", "templatePath", "template", "path"),
    )
    data: dict[str, Any] = Field(
        default_factory=dict,
        description=tool_text("template_expand.data"),
        validation_alias=AliasChoices("data", "json", "variables", "context"),
    )
    output_path: str | None = Field(
        None,
        description=tool_text("template_expand.output_path"),
        validation_alias=AliasChoices("output_path", "outputPath", "output", "out"),
    )


@tool()
def template_expand(ctx: ActContext, args: TemplateExpandArgs) -> ToolOutcome:
    if is_script(ctx, args.template_path):
        return fail(render_prompt("errors/refused_script_scripts_are", template_path=args.template_path))
    try:
        if args.template_path.startswith("build/"):
            source = ctx.deps.build.read_file(args.template_path).decode("utf-8")
        else:
            source, _ = ctx.deps.library.read_text(ctx.deps.request.skill_id, args.template_path)
    except PathEscapeError as e:
        return violation(str(e), f"path escape: {args.template_path}")
    except (SkillError, FileNotFoundError, SandboxError, UnicodeDecodeError) as e:
        return fail(render_prompt("errors/cannot_read_template", template_path=args.template_path, error=e))
    left_s = ctx.state.clock.left_s()
    if left_s == 0:
        return fail(render_prompt("errors/not_rendered_act_s"))
    try:
        rendered = render_bounded(source, args.data, timeout_s=min(RENDER_TIMEOUT_S, left_s))
    except Bounded as e:  # a bound hit, or the template's own error (SecurityError, TypeError, ...)
        why = e.detail if e.bound is Bound.ERROR else e.message
        return fail(render_prompt("errors/template_failed", template_path=args.template_path, why=why))
    if args.output_path is None:
        shown, cut = cut_to_tokens(rendered, ctx.deps.settings.disclosure.l3_max_tokens)
        return ToolOutcome(ok=True, data={"text": shown, "cut_tokens": cut})
    return write_artifact(ctx, WriteArtifactArgs(path=args.output_path, text=rendered, reason=args.reason))


class ValidateArgs(ToolArgs):
    path: str | None = Field(
        None,
        description=tool_text("validate.path"),
        validation_alias=AliasChoices("path", "file", "file_path", "filePath"),
    )
    object: Any = Field(
        None,
        description=tool_text("validate.object"),
        validation_alias=AliasChoices("object", "value", "instance"),
    )
    schema_: dict[str, Any] | str | None = Field(
        None,
        description=tool_text("validate.schema"),
        validation_alias=AliasChoices("schema", "schema_ref", "schemaRef"),
        serialization_alias="schema",
    )
    rules: dict[str, Any] | None = Field(None, description=tool_text("validate.rules"))


@tool()
def validate(ctx: ActContext, args: ValidateArgs) -> ToolOutcome:
    if args.schema_ is not None:
        return _validate_schema(ctx, args)
    try:
        rules = (
            ctx.deps.request.expected.rules
            if args.rules is None
            else ContractRules.from_mapping(args.rules, source="validate(rules=...)", schema_base=ctx.deps.skill_root)
        )
    except ValidationRulesError as e:
        return fail(render_prompt("errors/rules_are_malformed", error=e))
    with tempfile.TemporaryDirectory(prefix="orch-validate-") as tmp:
        ctx.deps.build.export(Path(tmp))
        try:
            report = validate_outputs(
                Path(tmp), ExpectedOutputs(rules=rules), model=None, qa_mode="off", schema_base=ctx.deps.skill_root,
                layout=ctx.deps.settings.qa.layout, brand=ctx.deps.brand_file,
            )
        except ValidationRulesError as e:
            return fail(render_prompt("errors/rules_are_malformed", error=e))
    data = report.model_dump(by_alias=True, include={"pass_", "stage", "missing", "violations", "warnings", "metrics"})
    return ToolOutcome(ok=report.pass_, data=data, error=None if report.pass_ else "contract check failed")


def _validate_schema(ctx: ActContext, args: ValidateArgs) -> ToolOutcome:
    if args.path is None and args.object is None:
        return fail(render_prompt("errors/validate_nothing"))
    schema: Any = args.schema_
    raw: bytes | None = None
    if args.path is not None:  # build/ and inputs/ as the sandbox mounts them, a goal input by its bare name
        args = args.model_copy(update={"path": reading_path(ctx, args.path)})
    if isinstance(schema, str) and not _in_skill(ctx, schema):  # a schema the model guessed: the nearest real files
        nearest = nearest_files(ctx, schema)
        return fail(render_prompt("errors/no_such_file_skill", rel_path=schema, nearest=nearest), nearest=nearest)
    try:
        if isinstance(schema, str):
            schema = json.loads(ctx.deps.library.read_text(ctx.deps.request.skill_id, schema)[0])
        if args.path is not None:
            if is_script(ctx, args.path):
                return fail(render_prompt("errors/refused_script_validate_its", path=args.path))
            if args.path.startswith("build/"):
                raw = ctx.deps.build.read_file(args.path)
            elif args.path.startswith("inputs/"):
                raw = input_path(ctx, args.path).read_bytes()
            else:
                raw = ctx.deps.library.read_text(ctx.deps.request.skill_id, args.path)[0].encode("utf-8")
    except PathEscapeError as e:
        return violation(str(e), "path escape in validate")
    except Exception as e:  # noqa: BLE001 - unreadable file, bad schema file: all fixable by the model
        return fail(render_prompt("errors/cannot_validate", error_type=type(e).__name__, error=e))
    left_s = ctx.state.clock.left_s()
    if left_s == 0:
        return fail(render_prompt("errors/not_checked_act_s"))
    yaml_text = bool(args.path and args.path.endswith((".yaml", ".yml")))
    try:
        violations = schema_violations_bounded(
            raw, yaml_text, args.object if raw is None else None, schema, timeout_s=min(CHECK_TIMEOUT_S, left_s)
        )
    except Bounded as e:  # bad JSON/YAML, a bad schema, or a bound hit: all reported to the model
        return fail(render_prompt("errors/cannot_validate_2", detail=e.detail if e.bound is Bound.ERROR else e.message))
    return ToolOutcome(
        ok=not violations,
        data={"violations": violations},
        error="schema validation failed" if violations else None,
    )


def _in_skill(ctx: ActContext, rel_path: str) -> bool:
    try:
        return ctx.deps.library.resolve(ctx.deps.request.skill_id, rel_path).is_file()
    except PathEscapeError:
        return True  # refused where it is read, as an escape
    except (SkillError, OSError):
        return False


class BlackboardPutArgs(ToolArgs):
    key: str = Field(min_length=1, max_length=200)
    value: Any


@tool()
def blackboard_put(ctx: ActContext, args: BlackboardPutArgs) -> ToolOutcome:
    size = len(json.dumps(args.value, default=str))
    if size > MAX_VALUE_BYTES:
        return fail(render_prompt("errors/value_bytes_blackboard_keeps", size=size, max_value_bytes=MAX_VALUE_BYTES))
    ctx.deps.blackboard.put(args.key, args.value)
    return ToolOutcome(ok=True, data={"key": args.key, "keys": ctx.deps.blackboard.keys()})


class BlackboardGetArgs(ToolArgs):
    key: str


@tool()
def blackboard_get(ctx: ActContext, args: BlackboardGetArgs) -> ToolOutcome:
    found, value = ctx.deps.blackboard.get(args.key)
    if not found:
        return fail(render_prompt("errors/no_blackboard_entry", key=repr(args.key)), keys=ctx.deps.blackboard.keys())
    return ToolOutcome(ok=True, data={"key": args.key, "value": value})


class FinishArgs(ToolArgs):
    summary: str = Field("", description=tool_text("finish.summary"))
    outputs: list[str] = Field(default_factory=list, description=tool_text("finish.outputs"))


@tool()
def finish(ctx: ActContext, args: FinishArgs) -> ToolOutcome:
    ctx.state.final_outputs = [o.strip().removeprefix("./").removeprefix("build/") for o in args.outputs]
    return ToolOutcome(
        ok=True,
        data={"summary": args.summary, "outputs": args.outputs},
        effect=Finish(args.summary, tuple(args.outputs)),
    )
