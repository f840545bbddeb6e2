"""The Act tools: typed functions whose argument models give the JSON schemas offered to the model.

A tool never raises for something the model can fix: it returns ``ToolOutcome(ok=False, error=...)`` and the model
sees the reason. Only misuse or infrastructure failures propagate (``SandboxError`` that is not the script's fault).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
import jsonschema
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.act.context import ActContext
from orchestrator.act.memo import MemoEntry, ScriptReplay, canonical_digest
from orchestrator.act.text import diff_summary, scrub_source_lines, summarize_text
from orchestrator.act.workspace import clean_build_path
from orchestrator.errors import (
    PathEscapeError,
    SandboxError,
    SandboxRefused,
    SkillError,
    ValidationRulesError,
)
from orchestrator.llm.interface import ToolSpec
from orchestrator.tokens import cut_to_tokens, estimate_tokens

MAX_VALUE_BYTES = 64 * 1024
MAX_SCRIPT_FAILURES = 2  # the first failure plus exactly one informed retry


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field("", description="Why this step, in at most a few words (kept as evidence).")


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    changed_files: tuple[str, ...] = ()
    disclosure: str | None = None  # "L2" | "L3"
    memo_hit: bool = False
    dedup: bool = False
    container: dict[str, Any] | None = None
    finish: bool = False
    violation: str | None = None  # a sandbox/confinement violation: the Act exits early

    def content(self) -> str:
        payload = {"ok": self.ok, **self.data}
        if self.error:
            payload["error"] = self.error
        return json.dumps(payload, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[ToolArgs]
    fn: Callable[[ActContext, Any], ToolOutcome]

    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)


def fail(error: str, **data: Any) -> ToolOutcome:
    return ToolOutcome(ok=False, error=error, data=data)


# --- reading -----------------------------------------------------------------------------------------------------


def is_script(ctx: ActContext, rel_path: str) -> bool:
    return PurePosixPath(rel_path).suffix.lower() in ctx.settings.sandbox.allowed_extensions


def _send_text(ctx: ActContext, *, path: str, text: str, sha: str, level: str, full: bool) -> ToolOutcome:
    """Send ``text`` unless identical content was already sent (or digested in an earlier validated run)."""
    if sha in ctx.sent:
        return ToolOutcome(
            ok=True,
            data={
                "path": path,
                "sha256": sha,
                "unchanged": True,
                "note": f"identical content was already sent at step {ctx.sent[sha]}; use it from there",
            },
            dedup=True,
        )
    summary = ctx.prior.digests.get(sha)
    if summary is not None and not full:
        ctx.sent[sha] = ctx.step
        ctx.read_docs[sha] = summary
        return ToolOutcome(
            ok=True,
            data={
                "path": path,
                "sha256": sha,
                "summary": summary,
                "note": "unchanged since an earlier validated run: summary shown; "
                "call again with full=true for the whole text",
            },
            disclosure=level,
            dedup=True,
        )
    shown, cut = cut_to_tokens(text, ctx.settings.disclosure.l3_max_tokens)
    if cut:
        shown += f"\n[... cut: {cut} more tokens of {path} not shown ...]"
    ctx.sent[sha] = ctx.step
    ctx.read_docs[sha] = summarize_text(text)
    return ToolOutcome(ok=True, data={"path": path, "sha256": sha, "text": shown}, disclosure=level)


def _script_card(ctx: ActContext, rel_path: str) -> ToolOutcome:
    path = ctx.library.resolve(ctx.request.skill_id, rel_path)
    data = path.read_bytes()
    return ToolOutcome(
        ok=True,
        data={
            "path": rel_path,
            "kind": "script",
            "language": {".py": "python", ".sh": "bash", ".js": "node"}.get(path.suffix.lower(), path.suffix),
            "bytes": len(data),
            "lines": data.count(b"\n") + 1,
            "sha256": hashlib.sha256(data).hexdigest(),
            "note": "script source is never shown; run it with run_script(path, args): stdin is the args JSON, "
            "stdout is JSON; see SKILL.md for what it expects",
        },
        disclosure="L3",
    )


def _read_skill_file(ctx: ActContext, rel_path: str, *, full: bool) -> ToolOutcome:
    try:
        if is_script(ctx, rel_path):
            return _script_card(ctx, rel_path)
        text, sha = ctx.library.read_text(ctx.request.skill_id, rel_path)
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"path escape: {rel_path}")
    except (SkillError, FileNotFoundError) as e:
        if ctx.library.resolve(ctx.request.skill_id, rel_path).exists():  # binary, a folder, unreadable
            return fail(f"cannot read {rel_path}: {e}")
        if rel_path not in ctx.missing_refs:
            ctx.missing_refs.append(rel_path)
        return fail(
            f"cannot read {rel_path}: it does not exist in the skill",
            missing=rel_path,
            hint="a missing reference: try once to do without it, otherwise finish and report it",
        )
    return _send_text(ctx, path=rel_path, text=text, sha=sha, level="L3", full=full)


class NoArgs(ToolArgs):
    pass


def read_skill_md(ctx: ActContext, args: NoArgs) -> ToolOutcome:
    body = ctx.library.l2(ctx.request.skill_id)
    if body.sha256 in ctx.sent:
        return ToolOutcome(
            ok=True,
            data={"unchanged": True, "note": f"SKILL.md already sent at step {ctx.sent[body.sha256]}"},
            dedup=True,
        )
    ctx.sent[body.sha256] = ctx.step
    return ToolOutcome(
        ok=True,
        data={"skill": ctx.request.skill_id, "text": body.text, "truncated": body.truncated},
        disclosure="L2",
    )


class ReadRefArgs(ToolArgs):
    path: str = Field(description="A path relative to the skill root, as referenced from SKILL.md.")
    full: bool = Field(False, description="Send the whole text even if a summary is available.")


def read_ref(ctx: ActContext, args: ReadRefArgs) -> ToolOutcome:
    return _read_skill_file(ctx, args.path, full=args.full)


class ListFilesArgs(ToolArgs):
    glob: str = Field("**/*", description="Glob relative to the skill root; 'build/**' lists outputs so far.")


def list_files(ctx: ActContext, args: ListFilesArgs) -> ToolOutcome:
    pattern = args.glob.strip() or "**/*"
    if pattern.startswith("build/") or pattern == "build":
        files = [f"build/{f.path}" for f in ctx.build.list_files()]
        return ToolOutcome(ok=True, data={"files": files[:500], "count": len(files)})
    if pattern.startswith("inputs/"):
        return ToolOutcome(ok=True, data={"files": _input_files(ctx)})
    try:
        files = ctx.library.glob(ctx.request.skill_id, pattern)
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"path escape: {pattern}")
    return ToolOutcome(ok=True, data={"files": files[:500], "count": len(files), "inputs": _input_files(ctx)})


def _input_files(ctx: ActContext) -> list[str]:
    root = ctx.request.inputs_dir
    if root is None or not root.is_dir():
        return []
    return sorted(f"inputs/{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file())


def _input_path(ctx: ActContext, rel_path: str) -> Path:
    root = ctx.request.inputs_dir
    inner = rel_path.split("/", 1)[1] if "/" in rel_path else ""
    if root is None or not inner:
        raise FileNotFoundError(rel_path)
    target = (root / inner).resolve()
    if not target.is_relative_to(root.resolve()):
        raise PathEscapeError(f"path leaves inputs/: {rel_path}", path=rel_path)
    return target


class ReadFileArgs(ToolArgs):
    path: str = Field(
        description="A file in the skill root, 'build/NAME' (outputs) or 'inputs/NAME' (inputs)."
    )
    full: bool = False


def read_file(ctx: ActContext, args: ReadFileArgs) -> ToolOutcome:
    path = args.path.strip()
    try:
        if path.startswith("build/"):
            data = ctx.build.read_file(path)
        elif path.startswith("inputs/"):
            data = _input_path(ctx, path).read_bytes()
        else:
            return _read_skill_file(ctx, path, full=args.full)
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"path escape: {path}")
    except (FileNotFoundError, IsADirectoryError, SandboxError) as e:
        return fail(f"cannot read {path}: {e}")
    sha = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ToolOutcome(ok=True, data={"path": path, "binary": True, "bytes": len(data), "sha256": sha})
    return _send_text(ctx, path=path, text=text, sha=sha, level="L3", full=True)


# --- producing ---------------------------------------------------------------------------------------------------


def _record_write(ctx: ActContext, rel: str, sha: str, size: int) -> tuple[str, bool]:
    version, changed = ctx.blackboard.record_artifact(rel, sha, size, ctx.request.skill_id)
    return version.label, changed


class WriteArtifactArgs(ToolArgs):
    path: str = Field(description="Path under build/ (e.g. 'outline.json' or 'build/outline.json').")
    text: str | None = Field(None, description="Text content.")
    base64: str | None = Field(None, description="Binary content, base64-encoded (instead of text).")


def write_artifact(ctx: ActContext, args: WriteArtifactArgs) -> ToolOutcome:
    if (args.text is None) == (args.base64 is None):
        return fail("give exactly one of text or base64")
    try:
        rel = clean_build_path(args.path)
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"write outside build/: {args.path}")
    try:
        data = (
            args.text.encode("utf-8")
            if args.text is not None
            else base64.b64decode(args.base64 or "", validate=True)
        )
    except binascii.Error as e:
        return fail(f"base64 is not valid: {e}")
    try:
        written = ctx.build.write_file(rel, data)
    except SandboxError as e:
        if e.data.get("code") == "disk_full":
            return fail(str(e), hint="write less, or remove earlier drafts")
        raise
    label, changed = _record_write(ctx, rel, written.sha256, written.size)
    return ToolOutcome(
        ok=True,
        data={
            "path": f"build/{rel}",
            "bytes": written.size,
            "sha256": written.sha256,
            "version": label,
            "changed": changed,
        },
        changed_files=(rel,) if changed else (),
    )


class TemplateExpandArgs(ToolArgs):
    template_path: str = Field(description="Jinja2 template in the skill root or build/.")
    data: dict[str, Any] = Field(default_factory=dict, description="Variables for the template.")
    output_path: str | None = Field(None, description="Write the result to this path under build/.")


def template_expand(ctx: ActContext, args: TemplateExpandArgs) -> ToolOutcome:
    try:
        if args.template_path.startswith("build/"):
            source = ctx.build.read_file(args.template_path).decode("utf-8")
        else:
            source, _ = ctx.library.read_text(ctx.request.skill_id, args.template_path)
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"path escape: {args.template_path}")
    except (SkillError, FileNotFoundError, SandboxError, UnicodeDecodeError) as e:
        return fail(f"cannot read template {args.template_path}: {e}")
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)
    try:
        rendered = env.from_string(source).render(**args.data)
    except jinja2.TemplateError as e:  # includes SecurityError and UndefinedError
        return fail(f"template {args.template_path} failed: {type(e).__name__}: {e}")
    if args.output_path is None:
        shown, cut = cut_to_tokens(rendered, ctx.settings.disclosure.l3_max_tokens)
        return ToolOutcome(ok=True, data={"text": shown, "cut_tokens": cut})
    return write_artifact(ctx, WriteArtifactArgs(path=args.output_path, text=rendered, reason=args.reason))


class ValidateArgs(ToolArgs):
    path: str | None = Field(None, description="A JSON/YAML file to check (build/NAME or inputs/NAME).")
    object: Any = Field(None, description="A JSON value to check against the schema (instead of path).")
    schema_: dict[str, Any] | str | None = Field(
        None, alias="schema", description="JSON Schema (inline, or a path in the skill root)."
    )
    rules: dict[str, Any] | None = Field(
        None, description="Contract rules (required/limits/allowed_extensions) checked against build/."
    )


def validate(ctx: ActContext, args: ValidateArgs) -> ToolOutcome:
    from orchestrator.validate.rules import ContractRules, ExpectedOutputs
    from orchestrator.validate.validator import validate_outputs

    if args.schema_ is not None:
        return _validate_schema(ctx, args)
    try:
        rules = (
            ctx.request.expected.rules
            if args.rules is None
            else ContractRules.from_mapping(
                args.rules, source="validate(rules=...)", schema_base=ctx.skill_root
            )
        )
    except ValidationRulesError as e:
        return fail(f"rules are malformed: {e}")
    with tempfile.TemporaryDirectory(prefix="orch-validate-") as tmp:
        ctx.build.export(Path(tmp))
        try:
            report = validate_outputs(
                Path(tmp), ExpectedOutputs(rules=rules), model=None, qa_mode="off", schema_base=ctx.skill_root
            )
        except ValidationRulesError as e:
            return fail(f"rules are malformed: {e}")
    data = report.model_dump(by_alias=True, include={"pass_", "stage", "missing", "violations", "metrics"})
    return ToolOutcome(ok=report.pass_, data=data, error=None if report.pass_ else "contract check failed")


def _validate_schema(ctx: ActContext, args: ValidateArgs) -> ToolOutcome:
    schema: Any = args.schema_
    try:
        if isinstance(schema, str):
            schema = json.loads(ctx.library.read_text(ctx.request.skill_id, schema)[0])
        if args.path is not None:
            raw = (
                ctx.build.read_file(args.path)
                if args.path.startswith("build/")
                else (_input_path(ctx, args.path).read_bytes())
            )
            import yaml

            instance = (
                yaml.safe_load(raw.decode("utf-8"))
                if args.path.endswith((".yaml", ".yml"))
                else json.loads(raw)
            )
        else:
            instance = args.object
        jsonschema.validators.validator_for(schema).check_schema(schema)
        errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(instance), key=str)
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation="path escape in validate")
    except Exception as e:  # noqa: BLE001 - unreadable file, bad JSON, bad schema: all fixable by the model
        return fail(f"cannot validate: {type(e).__name__}: {e}")
    violations = [
        f"{'/'.join(map(str, err.absolute_path)) or '(root)'}: {err.message}" for err in errors[:20]
    ]
    return ToolOutcome(
        ok=not violations,
        data={"violations": violations},
        error="schema validation failed" if violations else None,
    )


# --- running -----------------------------------------------------------------------------------------------------


class RunScriptArgs(ToolArgs):
    path: str = Field(description="Script path relative to the skill root (.py, .sh or .js).")
    args: dict[str, Any] | list[Any] | None = Field(None, description="JSON given to the script on stdin.")


def run_script(ctx: ActContext, args: RunScriptArgs) -> ToolOutcome:
    rel = args.path.strip().removeprefix("./")
    if not is_script(ctx, rel):
        allowed = ", ".join(ctx.settings.sandbox.allowed_extensions)
        return fail(f"refused: {rel} does not have an allowed extension ({allowed})")
    try:
        script_path = ctx.library.resolve(ctx.request.skill_id, rel)
        source = script_path.read_bytes()
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"script outside the skill root: {rel}")
    except (SkillError, FileNotFoundError, IsADirectoryError) as e:
        return fail(f"no such script in the skill: {rel} ({e})")
    if ctx.script_failures >= MAX_SCRIPT_FAILURES:
        return fail(
            "script retry budget used: a failed script gets exactly one informed retry; finish with what "
            "you have or report what is missing"
        )
    build_state = [(f.path, f.sha256) for f in ctx.build.list_files()]
    key = canonical_digest(
        "run_script", hashlib.sha256(source).hexdigest(), args.args, build_state, _inputs_state(ctx)
    )
    remembered = ctx.memo.get(key)
    if remembered is not None:
        return ToolOutcome(
            ok=remembered.ok,
            error=remembered.reason,
            memo_hit=True,
            data={
                **remembered.content,
                "memo": f"same script, args and inputs as step {remembered.step}: result "
                "repeated, not run again",
            },
        )
    replay = ctx.prior.attempts.get(key)
    if replay is not None and ctx.store is not None and (outcome := _replay(ctx, key, replay)) is not None:
        return outcome
    before = {f.path: f.sha256 for f in ctx.build.list_files()}
    try:
        result = ctx.build.run_script(rel, args.args, timeout_s=ctx.request.budgets.script_timeout_s)
    except SandboxRefused as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"sandbox refused {rel}: {e.message}")
    after = ctx.build.list_files()
    changed = tuple(f.path for f in after if before.get(f.path) != f.sha256)
    text = source.decode("utf-8", errors="replace")
    data: dict[str, Any] = {
        "script": rel,
        "exit_code": result.exit_code,
        "duration_ms": result.duration_ms,
        "stdout_json": result.stdout_json,
        "stderr_summary": scrub_source_lines(result.stderr_summary, text),
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
        "violations": result.violations,
        "files_changed": [f"build/{p}" for p in changed],
    }
    if result.stdout_json is None and result.stdout_text:
        data["stdout_text"] = scrub_source_lines(result.stdout_text[:2000], text)
    container = {
        "container": result.container,
        "cmd": rel,
        "exit_code": result.exit_code,
        "elapsed_ms": result.duration_ms,
        "stdout_bytes": len(result.stdout_text or ""),
        "stderr_lines": result.stderr_lines,
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
    }
    for path in changed:
        f = next(x for x in after if x.path == path)
        _record_write(ctx, path, f.sha256, f.size)
    if not result.ok:
        ctx.script_failures += 1
        left = MAX_SCRIPT_FAILURES - ctx.script_failures
        data["retry"] = (
            f"{left} informed retry left: change the args or use another script, based on the reason"
            if left
            else "no retries left for scripts"
        )
        ctx.memo.put(
            key, MemoEntry(step=ctx.step, tool="run_script", ok=False, content=data, reason=result.reason)
        )
        return ToolOutcome(
            ok=False,
            error=result.reason or "script failed",
            data=data,
            changed_files=changed,
            container=container,
        )
    ctx.memo.put(key, MemoEntry(step=ctx.step, tool="run_script", ok=True, content=data))
    ctx.stdout_results.append(result.stdout_json)
    ctx.new_replays[key] = (data, {p: next(x.sha256 for x in after if x.path == p) for p in changed})
    return ToolOutcome(ok=True, data=data, changed_files=changed, container=container)


def _inputs_state(ctx: ActContext) -> list[tuple[str, str]]:
    root = ctx.request.inputs_dir
    if root is None or not root.is_dir():
        return []
    return [
        (p.relative_to(root).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def _replay(ctx: ActContext, key: str, replay: ScriptReplay) -> ToolOutcome | None:
    """Restore the files an identical earlier run wrote, instead of starting a container. None if blobs are gone."""
    assert ctx.store is not None
    blobs = {path: ctx.store.get_blob(sha) for path, sha in replay.outputs.items()}
    if any(b is None for b in blobs.values()):
        return None
    changed = []
    for path, blob in blobs.items():
        assert blob is not None
        written = ctx.build.write_file(path, blob)
        _, did_change = _record_write(ctx, path, written.sha256, written.size)
        if did_change:
            changed.append(path)
    data = {**replay.result, "memo": "identical run found from an earlier run: its files were restored"}
    ctx.memo.put(key, MemoEntry(step=ctx.step, tool="run_script", ok=True, content=data))
    ctx.stdout_results.append(replay.result.get("stdout_json"))
    return ToolOutcome(ok=True, data=data, changed_files=tuple(changed), memo_hit=True)


# --- helpers -----------------------------------------------------------------------------------------------------


class SummarizeArgs(ToolArgs):
    text: str | None = None
    path: str | None = Field(None, description="A file in the skill root, build/ or inputs/.")
    max_items: int = Field(8, ge=1, le=40)


def summarize(ctx: ActContext, args: SummarizeArgs) -> ToolOutcome:
    if (args.text is None) == (args.path is None):
        return fail("give exactly one of text or path")
    text = args.text
    if args.path is not None:
        if is_script(ctx, args.path):
            return _script_card(ctx, args.path)
        loaded = _load_text(ctx, args.path)
        if isinstance(loaded, ToolOutcome):
            return loaded
        text = loaded
    assert text is not None
    return ToolOutcome(
        ok=True,
        data={"summary": summarize_text(text, max_items=args.max_items), "tokens": estimate_tokens(text)},
    )


def _load_text(ctx: ActContext, path: str) -> str | ToolOutcome:
    try:
        if path.startswith("build/"):
            return ctx.build.read_file(path).decode("utf-8", errors="replace")
        if path.startswith("inputs/"):
            return _input_path(ctx, path).read_text(encoding="utf-8", errors="replace")
        if is_script(ctx, path):
            return fail("script source is never shown; compare outputs instead")
        return ctx.library.read_text(ctx.request.skill_id, path)[0]
    except PathEscapeError as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"path escape: {path}")
    except (SkillError, FileNotFoundError, IsADirectoryError, SandboxError) as e:
        return fail(f"cannot read {path}: {e}")


class DiffArgs(ToolArgs):
    a_path: str
    b_path: str


def diff(ctx: ActContext, args: DiffArgs) -> ToolOutcome:
    a = _load_text(ctx, args.a_path)
    if isinstance(a, ToolOutcome):
        return a
    b = _load_text(ctx, args.b_path)
    if isinstance(b, ToolOutcome):
        return b
    return ToolOutcome(ok=True, data=diff_summary(a, b, a_name=args.a_path, b_name=args.b_path))


class BlackboardPutArgs(ToolArgs):
    key: str = Field(min_length=1, max_length=200)
    value: Any


def blackboard_put(ctx: ActContext, args: BlackboardPutArgs) -> ToolOutcome:
    size = len(json.dumps(args.value, default=str))
    if size > MAX_VALUE_BYTES:
        return fail(
            f"value is {size} bytes; the blackboard keeps at most {MAX_VALUE_BYTES} (write a file instead)"
        )
    ctx.blackboard.put(args.key, args.value)
    return ToolOutcome(ok=True, data={"key": args.key, "keys": ctx.blackboard.keys()})


class BlackboardGetArgs(ToolArgs):
    key: str


def blackboard_get(ctx: ActContext, args: BlackboardGetArgs) -> ToolOutcome:
    found, value = ctx.blackboard.get(args.key)
    if not found:
        return fail(f"no blackboard entry {args.key!r}", keys=ctx.blackboard.keys())
    return ToolOutcome(ok=True, data={"key": args.key, "value": value})


class FinishArgs(ToolArgs):
    summary: str = Field("", description="What was produced (and anything left unmet).")
    outputs: list[str] = Field(default_factory=list, description="The build/ paths that are the results.")


def finish(ctx: ActContext, args: FinishArgs) -> ToolOutcome:
    return ToolOutcome(ok=True, data={"summary": args.summary, "outputs": args.outputs}, finish=True)


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
        Tool(
            "read_file", "Read a text file from the skill root, build/ or inputs/.", ReadFileArgs, read_file
        ),
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
            "Run a skill script in the sandbox: stdin = args JSON, stdout = JSON; it may write "
            "build/. No network.",
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


def tool_specs() -> list[ToolSpec]:
    return [t.spec() for t in TOOLS.values()]
