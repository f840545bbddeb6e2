"""run_script and run_command: code in the sandbox, with the AttemptMemo, one informed retry per script, replays.

``run_script`` runs a script of the skill or code the model wrote under ``build/`` (``args`` on stdin as JSON,
``argv`` as its command line); ``run_command`` runs one program of the allowlist. Both run in a fresh container of
the job with the same rules, and both record the container call (cmd, exit code, output sizes, elapsed) as a
``command`` step. What they print is scrubbed of the skill's script source before the model sees it.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any

from pydantic import AliasChoices, Field

from orchestrator.act.context import ActContext
from orchestrator.act.memo import MemoEntry, ScriptReplay, canonical_digest
from orchestrator.act.text import scrub_source_lines
from orchestrator.act.tools._base import MAX_SCRIPT_FAILURES, ToolArgs, ToolOutcome, fail, is_script, tool, violation
from orchestrator.act.tools.producing import record_write
from orchestrator.act.tools.reading import meant_path, nearest_files, tool_path
from orchestrator.errors import PathEscapeError, SandboxError, SandboxRefused, SkillError
from orchestrator.prompts import render_prompt, tool_text
from orchestrator.sandbox.models import ScriptResult
from orchestrator.sandbox.protocol import clean_build_path

STDOUT_SHOWN_CHARS = 4000


class RunScriptArgs(ToolArgs):
    path: str = Field(
        description=tool_text("run_script.path"),
        validation_alias=AliasChoices("path", "script", "script_path"),
    )
    args: dict[str, Any] | list[Any] | None = Field(
        None,
        description=tool_text("run_script.args"),
        validation_alias=AliasChoices("args", "args_json", "argsJson", "arguments", "input"),
    )
    argv: list[str] = Field(
        default_factory=list,
        description=tool_text("run_script.argv"),
    )
    timeout_s: float | None = Field(None, gt=0, description=tool_text("args.timeout_s"))


@tool()
def run_script(ctx: ActContext, args: RunScriptArgs) -> ToolOutcome:
    rel = tool_path(args.path).replace("\\", "/").removeprefix("./")  # /skill/scripts/x.py is scripts/x.py
    if not is_script(ctx, rel):
        allowed = ", ".join(ctx.deps.settings.sandbox.allowed_extensions)
        return fail(render_prompt("errors/refused_does_not_have", rel=rel, allowed=allowed))
    loaded = _script_source(ctx, rel)
    if isinstance(loaded, ToolOutcome):
        return loaded
    rel, source, generated = loaded
    source_sha = hashlib.sha256(source).hexdigest()
    attempt = f"{rel}@{source_sha}"  # the one-retry rule counts per script (a rewritten build/ script is new)
    if ctx.state.script_failures_by.get(attempt, 0) >= MAX_SCRIPT_FAILURES:
        return fail(render_prompt("notes/retry_used", script=rel))
    build_state = [(f.path, f.sha256) for f in ctx.deps.build.list_files()]
    key = canonical_digest(
        "run_script", ctx.deps.identity, rel, source_sha, args.args, args.argv, build_state, _inputs_state(ctx)
    )
    if (remembered := _remembered(ctx, key, command=False)) is not None:
        return remembered
    replay = ctx.deps.prior.attempts.get(key)
    if replay is not None and ctx.deps.store is not None and (outcome := _replay(ctx, key, replay)) is not None:
        return outcome
    timeout_s = args.timeout_s or ctx.deps.request.budgets.script_timeout_s
    try:
        result = ctx.deps.build.run_script(rel, args.args, argv=args.argv, timeout_s=timeout_s)
    except SandboxRefused as e:
        return violation(str(e), f"sandbox refused {rel}: {e.message}")
    call = _finish_call(ctx, result, dict(build_state), hide=None if generated else source)
    data: dict[str, Any] = {"script": rel, **call.data}
    if generated:
        data["generated"] = True
    plain_text = _plain_text_result(result)
    if result.stdout_json is None and plain_text:
        data["note"] = render_prompt("notes/plain_stdout")
    if not result.ok and not plain_text:
        failures = ctx.state.script_failures_by.get(attempt, 0) + 1
        ctx.state.script_failures_by[attempt] = failures
        ctx.state.script_failures += 1
        left = MAX_SCRIPT_FAILURES - failures
        data["retry"] = render_prompt("notes/retry_left", left=left, script=rel)
        ctx.state.memo.put(
            key, MemoEntry(step=ctx.state.step, tool="run_script", ok=False, content=data, reason=result.reason)
        )
        return ToolOutcome(
            ok=False, error=result.reason or "script failed", data=data, changed_files=call.changed,
            container=call.container,
        )
    ctx.state.memo.put(key, MemoEntry(step=ctx.state.step, tool="run_script", ok=True, content=data))
    ctx.state.stdout_results.append(result.stdout_json if result.stdout_json is not None else data.get("stdout_text"))
    ctx.state.new_replays[key] = (data, call.outputs)
    return ToolOutcome(ok=True, data=data, changed_files=call.changed, container=call.container)


def _script_source(ctx: ActContext, rel: str) -> tuple[str, bytes, bool] | ToolOutcome:
    """(path as run, source bytes, whether the model wrote it under build/) or the outcome refusing it."""
    if rel.startswith("build/"):
        try:
            inner = clean_build_path(rel)
        except PathEscapeError as e:
            return violation(str(e), f"script outside build/: {rel}")
        except ValueError as e:
            return fail(str(e))
        try:
            return f"build/{inner}", ctx.deps.build.read_file(inner), True
        except (FileNotFoundError, SandboxError) as e:
            return fail(render_prompt("errors/no_such_file_build", inner=inner, error=e))
    try:
        path = ctx.deps.library.resolve(ctx.deps.request.skill_id, rel)
        # the sandbox tells case apart: run the file as it is spelled on disk (SCRIPTS/x.py finds scripts/x.py)
        return path.relative_to(ctx.deps.skill.root).as_posix(), path.read_bytes(), False
    except PathEscapeError as e:
        return violation(str(e), f"script outside the skill root: {rel}")
    except (SkillError, FileNotFoundError, IsADirectoryError):
        meant = meant_path(ctx, rel)
        if meant is not None:  # the skill's id in front of one of its scripts
            return _script_source(ctx, meant)
        nearest = nearest_files(ctx, rel)
        scripts = [f for f in nearest if is_script(ctx, f)] or nearest
        return fail(render_prompt("errors/no_such_script_skill", rel=rel, nearest=scripts), nearest=scripts)


class RunCommandArgs(ToolArgs):
    argv: list[str] = Field(
        min_length=1,
        description=tool_text("run_command.argv"),
        validation_alias=AliasChoices("argv", "command", "cmd"),
    )
    timeout_s: float | None = Field(None, gt=0, description=tool_text("args.timeout_s"))


@tool()
def run_command(ctx: ActContext, args: RunCommandArgs) -> ToolOutcome:
    allowed = list(ctx.deps.settings.sandbox.allowed_commands)
    program = args.argv[0]
    if program not in allowed:  # refused here, before any container (the job checks again)
        return fail(
            render_prompt("errors/refused_not_an_allowed", program=repr(program), detail=', '.join(allowed)),
            allowed=allowed,
        )
    build_state = [(f.path, f.sha256) for f in ctx.deps.build.list_files()]
    key = canonical_digest("run_command", ctx.deps.identity, args.argv, build_state, _inputs_state(ctx))
    if (remembered := _remembered(ctx, key, command=True)) is not None:
        return remembered
    timeout_s = args.timeout_s or ctx.deps.request.budgets.script_timeout_s
    try:
        result = ctx.deps.build.run_command(args.argv, timeout_s=timeout_s)
    except SandboxRefused as e:
        return fail(render_prompt("errors/refused", message=e.message))
    call = _finish_call(ctx, result, dict(build_state), hide=None)
    data: dict[str, Any] = {"command": shlex.join(args.argv), **call.data}
    ok = result.exit_code == 0 and not result.timed_out and not result.oom_killed and not result.violations
    ctx.state.memo.put(
        key, MemoEntry(step=ctx.state.step, tool="run_command", ok=ok, content=data, reason=result.reason)
    )
    if not ok:
        return ToolOutcome(ok=False, error=result.reason or "the command failed", data=data,
                           changed_files=call.changed, container=call.container)
    return ToolOutcome(ok=True, data=data, changed_files=call.changed, container=call.container)


EGRESS_SHOWN = {"host", "port", "method", "path", "status", "allowed", "reason"}


class _Call:
    def __init__(self, data: dict[str, Any], changed: tuple[str, ...], outputs: dict[str, str],
                 container: dict[str, Any]) -> None:
        self.data, self.changed, self.outputs, self.container = data, changed, outputs, container


def _finish_call(ctx: ActContext, result: ScriptResult, before: dict[str, str], *, hide: bytes | None) -> _Call:
    """What changed in build/, the model's view of the result (script source scrubbed) and the command record."""
    after = ctx.deps.build.list_files()
    pruned = ctx.deps.build.take_pruned()  # files the call left that break the build/ contract, already removed
    if pruned:
        result = result.model_copy(update={
            "ok": False, "violations": [*result.violations, *pruned],
            "reason": result.reason or "the call left files that break the build/ contract (removed)"})
    changed = tuple(f.path for f in after if before.get(f.path) != f.sha256)
    outputs = {f.path: f.sha256 for f in after if f.path in changed}
    for f in after:
        if f.path in changed:
            record_write(ctx, f.path, f.sha256, f.size)
    data: dict[str, Any] = {
        "exit_code": result.exit_code,
        "duration_ms": result.duration_ms,
        "stdout_json": result.stdout_json,
        "stderr_summary": _scrub(ctx, result.stderr_summary, hide),
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
        "violations": result.violations,
        "files_changed": [f"build/{p}" for p in changed],
    }
    if result.limit:
        data["limit"] = result.limit
        data["next_step"] = result.next_step
    if result.stdout_json is None and result.stdout_text:
        data["stdout_text"] = _scrub(ctx, result.stdout_text[:STDOUT_SHOWN_CHARS], hide)
        if len(result.stdout_text) > STDOUT_SHOWN_CHARS:
            shown, total = STDOUT_SHOWN_CHARS, len(result.stdout_text)
            data["stdout_cut"] = render_prompt("notes/stdout_cut", shown=shown, total=total)
    if result.egress:  # what the egress proxy let through or refused, so the model knows why a call failed
        data["egress"] = [r.model_dump(include=EGRESS_SHOWN, exclude_none=True) for r in result.egress]
    record = result.command_record()
    container: dict[str, Any] = {
        "container": result.container,
        "cmd": shlex.join(record.cmd) if record.cmd else result.script,
        "exit_code": record.exit_code,
        "elapsed_ms": record.elapsed_ms,
        "stdout_bytes": record.stdout_bytes,
        "stderr_bytes": record.stderr_bytes,
        "stderr_lines": result.stderr_lines,
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
        "limit": record.limit,
    }
    if result.egress:
        container["egress"] = [r.model_dump() for r in result.egress]
    return _Call(data, changed, outputs, container)


def _scrub(ctx: ActContext, text: str, source: bytes | None) -> str:
    """``text`` with lines of the skill's scripts hidden (a traceback, or a program told to print a script)."""
    if not text:
        return text
    if source is not None:
        text = scrub_source_lines(text, source.decode("utf-8", errors="replace"))
    return scrub_source_lines(text, skill_script_text(ctx))


def skill_script_text(ctx: ActContext) -> str:
    """All script source of the skill, joined (computed once per Act): what must never reach the model."""
    if ctx.state.script_source is None:
        parts = []
        for rel in ctx.deps.library.glob(ctx.deps.request.skill_id, "**/*"):
            if is_script(ctx, rel):
                try:
                    parts.append(ctx.deps.library.resolve(ctx.deps.request.skill_id, rel).read_bytes()[:1_000_000])
                except OSError:
                    continue
        ctx.state.script_source = b"\n".join(parts).decode("utf-8", errors="replace")
    return ctx.state.script_source


def _remembered(ctx: ActContext, key: str, *, command: bool) -> ToolOutcome | None:
    remembered = ctx.state.memo.get(key)
    if remembered is None:
        return None
    return ToolOutcome(
        ok=remembered.ok,
        error=remembered.reason,
        memo_hit=True,
        data={
            **remembered.content,
            "memo": render_prompt("notes/memo_repeated", command=command, step=remembered.step),
        },
    )


def _plain_text_result(result: ScriptResult) -> bool:
    """A script that exited 0 within its limits but printed text instead of JSON still succeeded (its text is its
    result, shown by the CLI); the sandbox contract asks for JSON, so the sandbox alone calls it not ok."""
    return (
        not result.ok
        and result.exit_code == 0
        and not result.timed_out
        and not result.oom_killed
        and not result.violations
        and result.stdout_json is None
        and bool(result.stdout_text.strip())
    )


def _inputs_state(ctx: ActContext) -> list[tuple[str, str]]:
    root = ctx.deps.request.inputs_dir
    if root is None or not root.is_dir():
        return []
    return [
        (p.relative_to(root).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def _replay(ctx: ActContext, key: str, replay: ScriptReplay) -> ToolOutcome | None:
    """Restore the files an identical earlier run wrote, instead of starting a container. None if blobs are gone."""
    assert ctx.deps.store is not None
    blobs = {path: ctx.deps.store.get_blob(sha) for path, sha in replay.outputs.items()}
    if any(b is None for b in blobs.values()):
        return None
    changed = []
    for path, blob in blobs.items():
        assert blob is not None
        written = ctx.deps.build.write_file(path, blob)
        _, did_change = record_write(ctx, path, written.sha256, written.size)
        if did_change:
            changed.append(path)
    data = dict(replay.result)
    if not ctx.state.replaying:  # a replayed conversation sees the result as the earlier run did
        data["memo"] = render_prompt("notes/memo_restored")
    ctx.state.memo.put(key, MemoEntry(step=ctx.state.step, tool="run_script", ok=True, content=data))
    ctx.state.stdout_results.append(replay.result.get("stdout_json"))
    return ToolOutcome(ok=True, data=data, changed_files=tuple(changed), memo_hit=True)
