"""How an Act ends: validating a finish, and turning the exit and the step records into the ``ActResult``."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.act.act_io import ActMetrics, ActResult, ExitReason, Unmet
from orchestrator.act.budget import BudgetTracker
from orchestrator.act.contact_sheets import add_thumbnails
from orchestrator.act.context import ActContext
from orchestrator.act.evidence import TASK_DISCLOSURE, build_artifacts, persist_success
from orchestrator.act.transitions import Exit
from orchestrator.errors import ModelError, OrchestratorError
from orchestrator.llm.interface import ChatModel, Message
from orchestrator.logs import get_logger
from orchestrator.prompts import render_prompt
from orchestrator.validate.validator import ValidationReport, validate_outputs

MAX_FAILED_FINISHES = 2
PASSING_EXITS: tuple[ExitReason, ...] = ("validated", "finished_unvalidated")
FAILING_EXITS: tuple[ExitReason, ...] = ("model_error", "sandbox_violation", "sandbox_error")
_log = get_logger("orchestrator.act")


def finish_attempt(
    ctx: ActContext, model: ChatModel, out_dir: Path, messages: list[Message], failed_before: int
) -> tuple[Exit | None, ValidationReport | None]:
    """Export ``build/`` and validate it. ``(None, report)``: failed, the model is told and may try again."""
    deps = ctx.deps
    deps.build.export(out_dir)
    if deps.request.qa_mode == "off" and not deps.request.expected.rules.required:
        return Exit("finished_unvalidated", "finished; QA is off"), None
    semantic_model = model if deps.request.qa_mode == "step" else None
    try:
        report = validate_outputs(
            out_dir,
            deps.request.expected,
            model=semantic_model,
            qa_mode="step" if semantic_model else "off",
            schema_base=deps.skill_root,
            layout=deps.settings.qa.layout,
            brand=deps.brand_file,
        )
    except ModelError as e:
        return Exit("model_error", f"semantic check failed: {e}", e.next_step or "check the model and retry"), None
    ctx.state.validation_stats.add(report)
    if report.pass_:
        return Exit("validated", "expected outputs validated"), report
    failed = failed_before + 1
    shown = report.model_dump(
        by_alias=True, include={"pass_", "stage", "missing", "violations", "warnings", "rationale"}
    )
    never_made = [m for m in report.missing if m not in ctx.state.written]
    messages.append(
        Message(
            role="user",
            content=render_prompt(
                "act_validation_failed",
                report=json.dumps(shown, ensure_ascii=False),
                may_retry=failed < MAX_FAILED_FINISHES,
                never_made=never_made,
            ),
        )
    )
    if failed < MAX_FAILED_FINISHES:
        return None, report
    if never_made and not report.violations:  # the model declared done what it never made: its mistake
        return Exit(
            "validation_failed",
            f"the model called finish without producing {', '.join(never_made)[:400]}",
            "the model stopped before making the outputs: run the goal again, give it more detail or use a "
            "stronger model",
        ), report
    return Exit(
        "validation_failed",
        "; ".join(report.missing + report.violations)[:500] or report.rationale,
        "look at the violations; adjust the goal's expected outputs or the skill",
    ), report


def finalize(
    ctx: ActContext,
    budget: BudgetTracker,
    out_dir: Path,
    exit_: Exit,
    report: ValidationReport | None,
    final_message: str,
) -> ActResult:
    deps, state = ctx.deps, ctx.state
    done = exit_.reason in PASSING_EXITS
    if not done:
        _export_partial(ctx, out_dir)
    status = "done" if done else ("failed" if exit_.reason in FAILING_EXITS else "unmet")
    if report is None and not done and deps.request.qa_mode != "off":
        report = validate_outputs(
            out_dir, deps.request.expected, model=None, qa_mode="off", schema_base=deps.skill_root,
            layout=deps.settings.qa.layout, brand=deps.brand_file,
        )
    unmet = [] if done else _unmet(ctx, exit_, report)
    if status == "unmet" and state.missing_refs and exit_.reason != "reference_cycle":
        exit_ = Exit(
            "missing_reference",
            f"missing references: {', '.join(state.missing_refs)} ({exit_.why})",
            "add the missing files to the skill or remove the references",
        )
    if done and not state.clock.is_up():  # thumbnails count against the Act's time budget
        add_thumbnails(ctx, out_dir)  # before persisting: a second run restores them instead of converting again
    if done:
        persist_success(ctx)
    return ActResult(
        skill_id=deps.request.skill_id,
        status=status,
        exit_reason=exit_.reason,
        where=_where(ctx),
        next_step=exit_.next_step,
        artifacts=build_artifacts(ctx, out_dir, partial=not done),
        validation=report,
        validation_stats=state.validation_stats,
        evidence_summary=list(state.records),
        metrics=ActMetrics.from_records(state.records, budget.spent(), duration_ms=budget.elapsed_ms(),
                                        disclosed=TASK_DISCLOSURE),
        remaining_budgets=budget.remaining(),
        unmet=unmet,
        final_message=final_message or exit_.why,
        stdout_results=state.stdout_results,
    )


def _export_partial(ctx: ActContext, out_dir: Path) -> None:
    """Keep what was produced (marked partial in the catalog), even when the sandbox itself failed."""
    try:
        ctx.deps.build.export(out_dir)
    except OrchestratorError as e:
        _log.warning("act.partial_export_failed", skill=ctx.deps.request.skill_id, error=str(e))


def _where(ctx: ActContext) -> str:
    """``skill:ID``, then the last failing tool and its container, for errors people can act on."""
    where = f"skill:{ctx.deps.request.skill_id}"
    failed = next((r for r in reversed(ctx.state.records) if not r.ok and r.tool), None)
    if failed is not None:
        where += f" / tool:{failed.tool}"
        if failed.container and failed.container.get("container"):
            where += f" / container:{failed.container['container']}"
    return where


def _unmet(ctx: ActContext, exit_: Exit, report: ValidationReport | None) -> list[Unmet]:
    items = [
        Unmet(what=f"reference {ref}", why="missing from the skill", next_step="add it or remove the link")
        for ref in ctx.state.missing_refs
    ]
    if report is not None and not report.pass_:
        items += [Unmet(what=m, why="expected output missing", next_step=exit_.next_step) for m in report.missing]
        items += [Unmet(what=v, why="contract violation", next_step=exit_.next_step) for v in report.violations]
    if not items or exit_.reason in ("stalled", "budget_goal"):  # first: why the model got nowhere
        id_ = ctx.deps.request.skill_id
        items.insert(0, Unmet(what=f"skill {id_}", why=exit_.why, next_step=exit_.next_step))
    return items
