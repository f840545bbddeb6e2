"""The goal's verdict: the final validation of its whole output, and the one result shape for every ending.

``judge`` ends a goal that ran its course; ``failed_result`` ends one that broke, from the last state saved before
the failure, the same way whichever driver (``run`` or a worker) ran it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from orchestrator.act.act_io import Unmet
from orchestrator.act.blackboard import Blackboard
from orchestrator.act.evidence import catalog_files
from orchestrator.act.memo import verdict_key
from orchestrator.config import Settings
from orchestrator.errors import BudgetExceeded, OrchestratorError
from orchestrator.llm.image_input import ImageLimits
from orchestrator.llm.usage_ledger import LedgerModel
from orchestrator.logs import get_logger
from orchestrator.skills.tree import tree_hash
from orchestrator.validate.layout.findings import BRAND_FILE
from orchestrator.validate.rules import ContractRules, ExpectedOutputs
from orchestrator.validate.semantic_stage import prompt_fingerprint
from orchestrator.validate.stats import ValidationStats
from orchestrator.validate.validator import ValidationReport, validate_outputs
from orchestrator.workflow.budget import goal_metrics, goal_model, plan_spending
from orchestrator.workflow.goal import GoalError, GoalResult, GoalState
from orchestrator.workflow.respond import respond
from orchestrator.workflow.runtime import Runtime
from orchestrator.workflow.steps import published_dir

_log = get_logger("orchestrator.workflow")


def judge(state: GoalState, rt: Runtime) -> GoalResult:
    """Validate the whole output and judge the goal (``unmet`` with suggestions when no skill fitted), answered
    by the goal's response strategy (``respond``: SUMMARY, or SCORED with one more model call). The semantic check
    and the scoring call are made only while the goal's budget is not spent."""
    assert state.plan is not None
    limits = rt.settings.limits
    if state.plan.steps:
        result = build_result(state, _final_validation(state, rt, goal_model(state, rt.model, limits, "final_check")))
    elif state.plan.answered_without_skills:
        result = _answered_result(state)
    else:
        result = _no_fit_result(state)
    if (note := _model_blamed(result, rt.model.name)) is not None:
        result.notes.append(note)
    result = respond(result, goal_model(state, rt.model, limits, "respond"),
                     state.request.response or rt.settings.supervisor.response)
    result.metrics = goal_metrics(state, result.validation)  # the scoring's requests are in the ledger now
    return result


def _answered_result(state: GoalState) -> GoalResult:
    """``done`` with the planner's own answer: the goal needed no skill, so nothing ran and no file is claimed."""
    assert state.plan is not None and state.plan.no_skill_needed is not None
    reason = state.plan.no_skill_needed.reason or "the goal asks for an answer, not for a skill's work"
    report = ValidationReport.model_validate(
        {
            "pass": True,
            "stage": "contract",
            "missing": [],
            "violations": [],
            "rationale": f"no skill was needed ({reason}); the model answered the goal itself and no file was made",
            "metrics": {"files": 0, "bytes": 0},
        }
    )
    result = build_result(state, report)
    result.status = "done"
    return result


MODEL_EXITS = frozenset({"stalled", "validation_failed", "budget_tool_calls", "budget_tokens", "budget_time",
                         "budget_goal"})
"""Exits that say the model could not finish a skill that had what it needed (no missing reference, no sandbox
failure): the goal's note names the model as the reason."""


def _model_blamed(result: GoalResult, model_name: str) -> str | None:
    """A note naming the model when every unfinished step of an unmet goal ended for the model's own reasons."""
    unfinished = [r for r in result.skills if r.status != "done"]
    if result.status != "unmet" or not unfinished or any(r.exit_reason not in MODEL_EXITS for r in unfinished):
        return None
    steps = "; ".join(f"{r.skill_id} ({r.exit_reason})" for r in unfinished)
    return f"not finished because of the model {model_name}: {steps}; a stronger model may finish it"


def _no_fit_result(state: GoalState) -> GoalResult:
    """``unmet`` with the closest skills and what is missing; nothing ran, so no artifact is claimed."""
    assert state.plan is not None and state.plan.no_fit is not None
    no_fit = state.plan.no_fit
    closest = ", ".join(c.id for c in state.candidates[:3]) or "none"
    missing = no_fit.missing or ["a skill that can serve this goal"]
    result = build_result(state, not_validated(f"no skill fits the goal: {no_fit.reason or 'the planner found none'}"))
    result.status = "unmet"
    result.suggestions = state.candidates[:3]
    result.unmet = [
        Unmet(
            what=m,
            why=no_fit.reason or "no skill in the library fits the goal",
            next_step=f"add or install a skill for it, or name one with $skill-name; closest skills: {closest}",
        )
        for m in missing
    ]
    return result


def _final_validation(state: GoalState, rt: Runtime, model: LedgerModel) -> ValidationReport | None:
    assert state.plan is not None
    if rt.settings.qa.mode == "off":
        return None
    rules = ContractRules()
    for step in state.plan.steps:
        rules = rules.merged(step.expected_outputs().rules)
    description = "\n".join(
        [
            f"Goal: {state.request.goal}",
            *[f"- {s.skill}: {s.expected}" for s in state.plan.steps],
            *[f"Evaluation: {e}" for e in state.plan.evaluation],
        ]
    )
    expected = ExpectedOutputs(description=description, rules=rules)
    contract = validate_outputs(published_dir(state), expected, model=None, qa_mode="off", **_layout(state, rt))
    unfinished = [r for r in state.results if r.status != "done"]
    if not contract.pass_:
        report = contract
    elif unfinished:
        names = ", ".join(f"{r.skill_id} ({r.exit_reason})" for r in unfinished)
        report = contract.model_copy(
            update={"rationale": f"{contract.rationale}; semantic check skipped: {names} did not finish"}
        )
    else:
        report = _semantic(state, rt, model, expected, contract)
    rt.emit("validate.done", job=state.job_id, passed=report.pass_, stage=report.stage,
            violations=len(report.violations))
    return report


def _layout(state: GoalState, rt: Runtime) -> dict[str, Any]:
    """The layout check's rule set, and the goal's published brand.json when one of its skills made it."""
    brand = published_dir(state) / BRAND_FILE
    return {"layout": rt.settings.qa.layout, "brand": brand if brand.is_file() and not brand.is_symlink() else None}


def _sheet_limits(settings: Settings) -> ImageLimits | None:
    """Contact sheets go to the semantic check as images unless ``qa.semantic_images`` is off."""
    if not settings.qa.semantic_images:
        return None
    return ImageLimits(max_bytes=settings.disclosure.image_max_bytes, max_side_px=settings.disclosure.image_max_side_px)


def _semantic(
    state: GoalState, rt: Runtime, model: LedgerModel, expected: ExpectedOutputs, contract: ValidationReport
) -> ValidationReport:
    """The model's verdict, reused when the same expectations were already judged on byte-identical artifacts;
    not given (the report fails, naming the budget) when the goal's budget is spent before the verdict."""
    assert state.plan is not None
    key = verdict_key(
        rt.model.name,
        rt.settings.model.model_dump(mode="json"),
        prompt_fingerprint(),
        expected.model_dump(mode="json"),
        sorted({tree_hash(rt.library.get(s.skill).root) for s in state.plan.steps}),
        sorted((f.path, f.sha256) for f in contract.files),
    )
    cached = rt.store.get_verdict(key) if rt.store is not None else None
    if cached is not None:
        rt.emit("validate.reused", job=state.job_id)
        # The verdict's requests were played for it: a scripted model passes over their steps.
        asked = int(cached.get("model_calls") or 0) + int(cached.get("response_cache_hits") or 0)
        rt.pass_over("semantic", max(1, asked))
        return ValidationReport.model_validate(
            {
                **cached,
                "tokens_in": 0,
                "tokens_out": 0,
                "model_calls": 0,
                "duration_ms": 0,
                "rationale": f"(same verdict as an earlier run on identical artifacts) {cached.get('rationale', '')}",
            }
        )
    mark = state.ledger.mark()
    try:
        report = validate_outputs(
            published_dir(state), expected, model=model, qa_mode=rt.settings.qa.mode, **_layout(state, rt),
            images=_sheet_limits(rt.settings),
        )
    except BudgetExceeded as e:
        why = f"semantic check not finished: {e.message}"
        rt.emit("validate.refused", job=state.job_id, reason=e.message)
        spent = state.ledger.since(mark)  # the requests made before the refusal
        return contract.model_copy(
            update={"pass_": False, "violations": [why], "rationale": f"{contract.rationale}; {why}",
                    "tokens_in": spent.tokens_in, "tokens_out": spent.tokens_out, "model_calls": spent.model_calls}
        )
    if rt.store is not None and report.pass_ and report.stage == "semantic":
        rt.store.put_verdict(key, report.model_dump(mode="json", by_alias=True))
    return report


def build_result(state: GoalState, report: ValidationReport | None) -> GoalResult:
    """The goal's result from its state and the final report (None: not validated)."""
    metrics = goal_metrics(state, report)
    unmet: list[Unmet] = []
    stdout: list[Any] = []
    stats = ValidationStats()
    for r in state.results:
        stats.merge(r.validation_stats)
        unmet += r.unmet
        stdout += [s for s in r.stdout_results if s is not None]
    if report is not None:
        stats.add(report)
    statuses = {r.status for r in state.results}
    validated = report is None or report.pass_
    failed = next((r for r in state.results if r.status == "failed"), None)
    status: Literal["done", "unmet", "failed"]
    if failed is not None:
        status = "failed"
    elif statuses == {"done"} and validated:
        status = "done"
    else:
        status = "unmet"
    if report is not None and not report.pass_ and statuses == {"done"}:
        unmet += [
            Unmet(what=v, why=f"final {report.stage} check", next_step="refine the goal or the skill")
            for v in (report.missing + report.violations) or [report.rationale]
        ]
    artifacts = catalog_files(
        published_dir(state),
        state.published,
        partial=status != "done",
        versions=Blackboard.from_snapshot(state.blackboard),
    )
    error = None
    if failed is not None:
        error = GoalError(
            where=failed.where or f"skill:{failed.skill_id}", message=failed.final_message, next_step=failed.next_step
        )
    return GoalResult(
        job_id=state.job_id,
        goal=state.request.goal,
        status=status,
        artifacts=artifacts,
        validation=report,
        validation_stats=stats,
        metrics=metrics,
        plan=state.plan,
        plan_calls=plan_spending(state).model_calls,
        replans=list(state.replan_log),
        skills=state.results,
        unmet=unmet,
        stdout=stdout,
        out_dir=str(state.out_dir),
        notes=list(state.notes),
        error=error,
    )


def failed_result(
    state: GoalState, where: str, message: str, next_step: str = "", *, code: StrEnum | None = None
) -> GoalResult:
    """The result of a goal that broke, built from ``state`` (the last one saved): its plan, the metrics and the
    artifacts of the steps that ran, every artifact marked partial, and the error saying where and why."""
    try:
        result = build_result(state, None) if state.plan is not None else None
    except Exception:  # noqa: BLE001 - the failure being reported must not be hidden by a second one
        _log.exception("goal.result_failed", job=state.job_id)
        result = None
    if result is None:
        result = GoalResult(
            job_id=state.job_id,
            goal=state.request.goal,
            status="failed",
            out_dir=str(state.out_dir),
            metrics=goal_metrics(state),
            notes=list(state.notes),
        )
    result.status = "failed"
    result.response = state.request.response or "SUMMARY"  # no scoring call for a goal that broke
    for artifact in result.artifacts:
        artifact.partial = True
    result.error = GoalError(where=where, message=message, next_step=next_step, code=code and code.value)
    if result.validation is None:
        result.validation = not_validated(f"the goal failed at {where} before validation: {message}")
    return result


def error_result(state: GoalState, error: OrchestratorError, where: str) -> GoalResult:
    """:func:`failed_result` for a raised error (``where`` when the error does not say)."""
    return failed_result(state, error.where or where, error.message, error.next_step or "", code=error.code)


def not_validated(why: str) -> ValidationReport:
    return ValidationReport.model_validate(
        {
            "pass": False,
            "stage": "contract",
            "missing": [],
            "violations": [why],
            "rationale": why,
            "metrics": {"files": 0, "bytes": 0},
        }
    )
