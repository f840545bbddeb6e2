"""Run one skill: build its context (skill, build area, memo), check its declarations, drive the loop."""

from __future__ import annotations

from pathlib import Path

from orchestrator.act.act_io import ActRequest, ActResult, ExitReason, RemainingBudgets, Unmet
from orchestrator.act.blackboard import Blackboard
from orchestrator.act.context import ActDeps
from orchestrator.act.loop import run_act
from orchestrator.act.memo import MemoStore, SkillMemoFile, work_identity
from orchestrator.config import Settings
from orchestrator.errors import ImageToolMissing
from orchestrator.llm.interface import ChatModel
from orchestrator.sandbox.egress import EgressShortfall, resolve_egress
from orchestrator.sandbox.image import missing_tools
from orchestrator.sandbox.lazy import LazyJob
from orchestrator.sandbox.protocol import SandboxBackend
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.parsed import Skill
from orchestrator.skills.tree import tree_hash


def execute_skill(
    request: ActRequest,
    *,
    model: ChatModel,
    library: SkillLibrary,
    settings: Settings,
    out_dir: Path,
    sandbox: SandboxBackend | None = None,
    blackboard: Blackboard | None = None,
    store: MemoStore | None = None,
) -> ActResult:
    """Run ``request.skill_id`` to completion. Without a ``sandbox`` scripts cannot run (``build/`` is a host folder).

    Raises ``SkillError`` for an unknown skill. A declared tool missing from the sandbox image, or network hosts
    and secrets the operator has not granted (``egress`` settings), give one ``failed`` result naming all of it and
    the setting that would grant it, before any model call.
    """
    skill = library.get(request.skill_id)
    unknown = unknown_operations(skill, settings)
    if unknown:
        known = ", ".join(sorted(known_operations(settings)))
        why = f"skill {skill.id} declares operations this runtime does not know: {', '.join(unknown)}"
        return _refused(request, why, f"declare only known operations ({known}) under metadata.operations")
    missing_tool = _missing_tools(skill, sandbox)
    egress = resolve_egress(
        settings,
        library_root=library.root,
        skill_id=skill.id,
        skill_name=skill.name,
        network=skill.declarations.network,
        secrets=skill.declarations.secrets,
    )
    if isinstance(egress, EgressShortfall):
        return _not_granted(request, egress, missing_tool)
    if missing_tool:
        error = ImageToolMissing(
            f"skill {skill.id} requires {', '.join(missing_tool)}, which the sandbox image does not provide",
            where=f"skill:{skill.id}",
            next_step=REBUILD_HINT,
        )
        return _refused(request, str(error), error.next_step or "")
    out_dir.mkdir(parents=True, exist_ok=True)
    # The job's sandbox starts no container until a script runs; without a sandbox, build/ stays on the host.
    build = LazyJob(
        sandbox,
        request.job_id,
        skill.root,
        disk_mb=request.budgets.disk_write_limit_mb,
        inputs_dir=request.inputs_dir,
        operations=tuple(skill.declarations.operations),
        goal=request.goal_id or request.job_id,
        egress=egress,
    )
    try:
        identity = _identity(skill, sandbox) if store is not None else ""
        deps = ActDeps(
            request=request,
            settings=settings,
            library=library,
            skill=skill,
            build=build,
            blackboard=blackboard or Blackboard(),
            store=store,
            prior=store.load(identity) if store is not None else SkillMemoFile(),
            identity=identity,
        )
        return run_act(deps, model, out_dir)
    finally:
        build.close()


REBUILD_HINT = "add the tool to sandbox-image/ and rebuild it (python -m orchestrator sandbox build-image --force)"


def _identity(skill: Skill, sandbox: SandboxBackend | None) -> str:
    """The skill version's work identity: every file of its folder and the image its scripts would run in."""
    return work_identity(tree_hash(skill.root), sandbox.image_id() if sandbox is not None else "")


KNOWN_OPERATIONS = frozenset({"fs-temp", "fs-project", "process-single", "process-chain", "browser-automation"})
"""The operation kinds of the execution-engine ADR; ``sandbox.profiles`` may name more."""
OPERATION_TOOLS: dict[str, tuple[str, ...]] = {"browser-automation": ("chromium",)}
"""Tools the image must have for an operation to be possible at all."""


def known_operations(settings: Settings) -> frozenset[str]:
    return KNOWN_OPERATIONS | frozenset(settings.sandbox.profiles)


def unknown_operations(skill: Skill, settings: Settings) -> list[str]:
    known = known_operations(settings)
    return [op for op in skill.declarations.operations if op not in known]


def _missing_tools(skill: Skill, sandbox: SandboxBackend | None) -> list[str]:
    required = [*skill.declarations.requires_tools]
    for operation in skill.declarations.operations:
        required += [t for t in OPERATION_TOOLS.get(operation, ()) if t not in required]
    if sandbox is None or not required:
        return []
    return missing_tools(sandbox.image_tools(), required)


def _not_granted(request: ActRequest, shortfall: EgressShortfall, missing_tool: list[str]) -> ActResult:
    """One refusal naming everything the skill lacks here (hosts, secrets, tools) and what would grant it."""
    problems = shortfall.problems()
    steps = [shortfall.hint]
    if missing_tool:
        problems.append(f"tools missing from the sandbox image: {', '.join(missing_tool)}")
        steps.append(REBUILD_HINT)
    why = f"skill {request.skill_id} is not granted what it declares: {'; '.join(problems)}"
    return _refused(request, why, "; ".join(s for s in steps if s), exit_reason="not_granted")


def _refused(
    request: ActRequest, why: str, next_step: str, *, exit_reason: ExitReason = "missing_tool"
) -> ActResult:
    b = request.budgets
    return ActResult(
        skill_id=request.skill_id,
        status="failed",
        exit_reason=exit_reason,
        where=f"skill:{request.skill_id}",
        next_step=next_step,
        remaining_budgets=RemainingBudgets(
            tool_calls=b.max_tool_calls,
            time_ms=b.time_budget_ms,
            tokens=b.token_budget,
            disk_mb=b.disk_write_limit_mb,
        ),
        unmet=[Unmet(what=f"skill {request.skill_id}", why=why, next_step=next_step)],
        final_message=why,
    )
