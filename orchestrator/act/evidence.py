"""What the Act sends first, what it records per step, and what it leaves behind (catalog, memo)."""

from __future__ import annotations

import hashlib
import json
import mimetypes
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from orchestrator.act.act_io import Artifact, ArtifactType, Disclosure, StepRecord
from orchestrator.act.blackboard import Blackboard
from orchestrator.act.context import ActContext
from orchestrator.act.memo import ScriptReplay, canonical_digest
from orchestrator.act.tools import PreparedCall, RepeatedRead, ToolOutcome
from orchestrator.llm.interface import Message, ToolCall
from orchestrator.llm.usage_ledger import ModelRequest
from orchestrator.logs import get_logger
from orchestrator.prompts import load_prompt, render_prompt
from orchestrator.validate.validator import ValidationReport

_log = get_logger("orchestrator.act")


TASK_DISCLOSURE = Disclosure(l1=1, l2=1)
"""What the task message discloses: the chosen skill's L1 line and its SKILL.md body."""


def initial_messages(ctx: ActContext) -> list[Message]:
    """System prompt, then the task: goal, the chosen skill's L1 line and its SKILL.md body (L2, sent once)."""
    req = ctx.deps.request
    skill = ctx.deps.skill
    body = ctx.deps.library.l2(req.skill_id)
    ctx.state.sent[body.sha256] = 0
    required = [
        r.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True) | {"path": r.path}
        for r in req.expected.rules.required
    ]
    task = render_prompt(
        "act_task",
        goal=req.goal,
        skill_id=req.skill_id,
        name=skill.name,
        description=skill.description,
        expected=req.expected.description,
        required=json.dumps(required, ensure_ascii=False) if required else "",
        constraints=req.constraints,
        inputs=_list_inputs(req.inputs_dir),
        keys=ctx.deps.blackboard.keys(),
        missing=[r.ref for r in skill.references if not r.exists],
        budgets=req.budgets,
        script_timeout_s=f"{req.budgets.script_timeout_s:g}",
        truncated=body.truncated,
        body=body.text,
    )
    return [
        Message(role="system", content=load_prompt("act_system")),
        Message(role="user", content=task),
    ]


def _list_inputs(root: Path | None) -> list[str]:
    if root is None or not root.is_dir():
        return []
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@dataclass(frozen=True)
class ModelUse:
    """The model request a step came from, as the ledger recorded it: its usage and time go on the step's first
    record only."""

    request: ModelRequest | None = None
    cache_hit: bool = False

    @classmethod
    def of(cls, request: ModelRequest) -> ModelUse:
        return cls(request, request.cache_hit)

    def later(self) -> ModelUse:
        """What the step's later records carry: whether the call was a cache hit, no usage."""
        return ModelUse(cache_hit=self.cache_hit)


def step_record(
    step: int,
    kind: Literal["tool", "reflect", "model"],
    usage: ModelUse | None,
    *,
    text: str = "",
    started: float | None = None,
    call: ToolCall | None = None,
    prepared: PreparedCall | None = None,
    outcome: ToolOutcome | None = None,
    report: ValidationReport | None = None,
) -> StepRecord:
    """The one place a step's record is built: the model's usage (on the first record of its response), the tool
    call's reason (from the validated arguments), its outcome's facts, and a finish's validation tokens."""
    use = usage or ModelUse()
    request = use.request or ModelRequest(purpose="act")  # a later record of the step: no usage of its own
    tokens_in = request.prompt_tokens + (report.tokens_in if report else 0)
    tokens_out = request.completion_tokens + (report.tokens_out if report else 0)
    ms = request.ms + (int((time.monotonic() - started) * 1000) if started is not None else 0)
    cached = {"cache_hit": use.cache_hit, "cached_tokens": request.cached_tokens,
              "check_calls": report.model_calls if report else 0}
    if call is None or outcome is None:
        return StepRecord(step=step, kind=kind, reason_short=text[:200] if kind == "model" else text,
                          tokens_in=tokens_in, tokens_out=tokens_out, ms=ms, **cached)
    return StepRecord(
        step=step,
        kind=kind,
        tool=call.name,
        reason_short=prepared.args.reason[:400] if prepared is not None else "",
        inputs_digest=canonical_digest(call.name, call.arguments)[:16],
        ok=outcome.ok,
        error=outcome.error,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        ms=ms,
        diff_summary=", ".join(f"build/{p} changed" for p in outcome.changed_files),
        file_ids=[f"build/{p}" for p in outcome.changed_files],
        memo_hit=outcome.memo_hit,
        container=outcome.container,
        disclosure=outcome.disclosure,
        dedup=isinstance(outcome.effect, RepeatedRead),
        **cached,
    )


def log_step(ctx: ActContext, record: StepRecord) -> None:
    ctx.state.records.append(record)
    _log.info(
        "act.step",
        job=ctx.deps.request.job_id,
        skill=ctx.deps.request.skill_id,
        **record.model_dump(exclude_defaults=True),
    )


_TYPES: dict[str, ArtifactType] = {
    ".html": "html",
    ".htm": "html",
    ".log": "log",
    ".py": "script",
    ".sh": "script",
    ".js": "script",
}


THUMBNAILS = ".thumbnails"  # build/.thumbnails/<office file>/<stem>.png, made once the outputs validated


def thumbnail_source(path: str) -> str | None:
    """The output a thumbnail shows (``.thumbnails/deck.pptx/deck.png`` -> ``deck.pptx``), None for other files."""
    parts = PurePosixPath(path).parts
    if len(parts) < 3 or parts[0] != THUMBNAILS or PurePosixPath(path).suffix.lower() != ".png":
        return None
    return "/".join(parts[1:-1])


def artifact_type(path: str) -> ArtifactType:
    p = PurePosixPath(path)
    if thumbnail_source(path) is not None:
        return "thumbnail"
    if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp"):
        return "thumbnail" if "thumb" in p.name.lower() else "screenshot"
    return _TYPES.get(p.suffix.lower(), "file")


def catalog_files(root: Path, rel_paths: Iterable[str], *, partial: bool, versions: Blackboard) -> list[Artifact]:
    """Artifact catalog entries for ``rel_paths`` under ``root`` (symlinks and vanished files are skipped)."""
    artifacts: list[Artifact] = []
    for rel in sorted(rel_paths):
        path = root / rel
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        version = versions.latest(rel)
        artifacts.append(
            Artifact(
                path=rel,
                type=artifact_type(rel),
                mime=mimetypes.guess_type(rel)[0] or "application/octet-stream",
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                version=version.label if version else "",
                partial=partial,
                metadata=_metadata(rel, version.skill_id if version else None),
            )
        )
    return artifacts


def _metadata(rel: str, skill_id: str | None) -> dict[str, str]:
    metadata = {"skill": skill_id} if skill_id else {}
    if (source := thumbnail_source(rel)) is not None:
        metadata["thumbnail_of"] = source
    return metadata


def build_artifacts(ctx: ActContext, out_dir: Path, *, partial: bool) -> list[Artifact]:
    """The artifact catalog of what the Act exported to ``out_dir``."""
    if not out_dir.is_dir():
        return []
    files = [p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*")]
    return catalog_files(out_dir, files, partial=partial, versions=ctx.deps.blackboard)


def persist_success(ctx: ActContext) -> None:
    """Keep what a validated run learned: script results (with output blobs), document digests, the path taken."""
    if ctx.deps.store is None:
        return
    memo = ctx.deps.prior.model_copy(deep=True)
    for key, (data, outputs) in ctx.state.new_replays.items():
        for path, sha in outputs.items():
            try:
                blob = ctx.deps.build.read_file(path, max_bytes=64 * 1024 * 1024)
            except Exception:  # noqa: BLE001 - a file that vanished is simply not replayable
                break
            if hashlib.sha256(blob).hexdigest() != sha:
                break
            ctx.deps.store.put_blob(blob)
        else:
            memo.attempts[key] = ScriptReplay(result=data, outputs=outputs)
    memo.digests.update(ctx.state.read_docs)
    ctx.deps.store.save(ctx.deps.identity, memo)
