"""run_script: a skill script in the sandbox, with the AttemptMemo, the one informed retry and memo replays."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import AliasChoices, Field

from orchestrator.act.context import ActContext
from orchestrator.act.memo import MemoEntry, ScriptReplay, canonical_digest
from orchestrator.act.text import scrub_source_lines
from orchestrator.act.tools._base import MAX_SCRIPT_FAILURES, ToolArgs, ToolOutcome, fail, is_script, tool, violation
from orchestrator.act.tools.producing import record_write
from orchestrator.errors import PathEscapeError, SandboxRefused, SkillError
from orchestrator.sandbox.models import ScriptResult

# --- running -----------------------------------------------------------------------------------------------------


class RunScriptArgs(ToolArgs):
    path: str = Field(
        description="Script path relative to the skill root (.py, .sh or .js).",
        validation_alias=AliasChoices("path", "script", "script_path"),
    )
    args: dict[str, Any] | list[Any] | None = Field(
        None,
        description="JSON given to the script on stdin.",
        validation_alias=AliasChoices("args", "args_json", "argsJson", "arguments", "input"),
    )


@tool("Run a skill script in the sandbox: stdin = args JSON, stdout = JSON; it may write build/. No network.")
def run_script(ctx: ActContext, args: RunScriptArgs) -> ToolOutcome:
    rel = args.path.strip().removeprefix("./")
    if not is_script(ctx, rel):
        allowed = ", ".join(ctx.deps.settings.sandbox.allowed_extensions)
        return fail(f"refused: {rel} does not have an allowed extension ({allowed})")
    try:
        script_path = ctx.deps.library.resolve(ctx.deps.request.skill_id, rel)
        source = script_path.read_bytes()
    except PathEscapeError as e:
        return violation(str(e), f"script outside the skill root: {rel}")
    except (SkillError, FileNotFoundError, IsADirectoryError) as e:
        return fail(f"no such script in the skill: {rel} ({e})")
    if ctx.state.script_failures >= MAX_SCRIPT_FAILURES:
        return fail(
            "script retry budget used: a failed script gets exactly one informed retry; finish with what "
            "you have or report what is missing"
        )
    build_state = [(f.path, f.sha256) for f in ctx.deps.build.list_files()]
    key = canonical_digest("run_script", hashlib.sha256(source).hexdigest(), args.args, build_state, _inputs_state(ctx))
    remembered = ctx.state.memo.get(key)
    if remembered is not None:
        return ToolOutcome(
            ok=remembered.ok,
            error=remembered.reason,
            memo_hit=True,
            data={
                **remembered.content,
                "memo": f"same script, args and inputs as step {remembered.step}: result repeated, not run again",
            },
        )
    replay = ctx.deps.prior.attempts.get(key)
    if replay is not None and ctx.deps.store is not None and (outcome := _replay(ctx, key, replay)) is not None:
        return outcome
    before = dict(build_state)  # nothing wrote to build/ since it was listed for the memo key
    try:
        result = ctx.deps.build.run_script(rel, args.args, timeout_s=ctx.deps.request.budgets.script_timeout_s)
    except SandboxRefused as e:
        return violation(str(e), f"sandbox refused {rel}: {e.message}")
    after = ctx.deps.build.list_files()
    pruned = ctx.deps.build.take_pruned()  # files the script left that break the build/ contract, already removed
    if pruned:
        result = result.model_copy(update={
            "ok": False, "violations": [*result.violations, *pruned],
            "reason": result.reason or "the script left files that break the build/ contract (removed)"})
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
    plain_text = _plain_text_result(result)
    if result.stdout_json is None and result.stdout_text:
        data["stdout_text"] = scrub_source_lines(result.stdout_text[:2000], text)
        if plain_text:
            data["note"] = "stdout was plain text, not JSON: kept as the script's text result"
    container = {
        "container": result.container,
        "cmd": rel,
        "exit_code": result.exit_code,
        "elapsed_ms": result.duration_ms,
        "stdout_bytes": result.stdout_bytes,
        "stderr_lines": result.stderr_lines,
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
    }
    for path in changed:
        f = next(x for x in after if x.path == path)
        record_write(ctx, path, f.sha256, f.size)
    if not result.ok and not plain_text:
        ctx.state.script_failures += 1
        left = MAX_SCRIPT_FAILURES - ctx.state.script_failures
        data["retry"] = (
            f"{left} informed retry left: change the args or use another script, based on the reason"
            if left
            else "no retries left for scripts"
        )
        entry = MemoEntry(step=ctx.state.step, tool="run_script", ok=False, content=data, reason=result.reason)
        ctx.state.memo.put(key, entry)
        return ToolOutcome(
            ok=False,
            error=result.reason or "script failed",
            data=data,
            changed_files=changed,
            container=container,
        )
    ctx.state.memo.put(key, MemoEntry(step=ctx.state.step, tool="run_script", ok=True, content=data))
    ctx.state.stdout_results.append(result.stdout_json if result.stdout_json is not None else data.get("stdout_text"))
    ctx.state.new_replays[key] = (data, {p: next(x.sha256 for x in after if x.path == p) for p in changed})
    return ToolOutcome(ok=True, data=data, changed_files=changed, container=container)


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
    data = {**replay.result, "memo": "identical run found from an earlier run: its files were restored"}
    ctx.state.memo.put(key, MemoEntry(step=ctx.state.step, tool="run_script", ok=True, content=data))
    ctx.state.stdout_results.append(replay.result.get("stdout_json"))
    return ToolOutcome(ok=True, data=data, changed_files=tuple(changed), memo_hit=True)
