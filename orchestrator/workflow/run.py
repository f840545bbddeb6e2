"""The outer loop: Plan → Act (each chosen skill, outputs chained) → Reflect (retry once, validate, judge).

Each phase is a function over a plain ``GoalState`` so the worker tasks can run them one by one and save the state
in between; ``run_goal`` runs them all in this process (the embedded default).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from orchestrator.act.blackboard import Blackboard
from orchestrator.act.engine import execute_skill
from orchestrator.act.evidence import catalog_files
from orchestrator.act.memo import MemoStore, verdict_key
from orchestrator.act.models import ActRequest, ActResult, Disclosure, Unmet
from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError, WorkflowError
from orchestrator.llm.images import ImageLimits
from orchestrator.llm.interface import ChatModel
from orchestrator.logs import get_logger
from orchestrator.prompts import render_prompt
from orchestrator.sandbox.backend import SandboxBackend
from orchestrator.select.index import SkillIndex
from orchestrator.select.shortlist import make_shortlist, model_invocable
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.models import SkillSummary
from orchestrator.skills.tree import tree_hash
from orchestrator.validate.layout.findings import BRAND_FILE
from orchestrator.validate.rules import ContractRules, ExpectedOutputs
from orchestrator.validate.semantic import prompt_fingerprint
from orchestrator.validate.stats import ValidationStats
from orchestrator.validate.validator import ValidationReport, validate_outputs
from orchestrator.workflow.models import (
    GoalError,
    GoalMetrics,
    GoalRequest,
    GoalResult,
    GoalState,
    Replan,
    Suggestion,
)
from orchestrator.workflow.outputs import check_input_files, check_job_id, check_output_dir, publish_file
from orchestrator.workflow.plan import PlanOutcome, make_plan

EventSink = Callable[[str, dict[str, Any]], None]
_log = get_logger("orchestrator.workflow")


@dataclass
class Runtime:
    """What a goal needs to run. ``sandbox`` is a ``SandboxRunner`` (None: skills cannot run scripts)."""

    settings: Settings
    model: ChatModel
    library: SkillLibrary
    sandbox: SandboxBackend | None = None
    store: MemoStore | None = None
    """Tools of the sandbox image (asked only when a skill declares tools it requires)."""
    on_event: EventSink = field(default=lambda name, data: None)

    def emit(self, name: str, **data: Any) -> None:
        _log.info(name, **data)
        self.on_event(name, data)


def new_job_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


def start_goal(request: GoalRequest, out_dir: Path, settings: Settings) -> GoalState:
    """Check the request and the output folder, then create the job's folders (owner-only) and stage the inputs.

    Nothing is created when a check fails: a missing input, an input that is a folder, an output folder that
    cannot be written, or a job id that cannot name a folder.
    """
    job_id = check_job_id(request.job_id or new_job_id())
    check_input_files(request.inputs)
    check_output_dir(out_dir)
    work_dir = settings.cache_dir / "jobs" / job_id
    inputs_dir = work_dir / "inputs"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WorkflowError(
            f"cannot use {out_dir} as the output folder: {e.strerror or e}",
            where="output",
            next_step="pass --out DIR naming a folder you can write (it is created when missing)",
        ) from e
    try:
        for folder in (settings.cache_dir, settings.cache_dir / "jobs", work_dir, work_dir / "published"):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        work_dir.chmod(0o700)  # job folders hold inputs, outputs and evidence: their owner's only
        # Mounted into script containers as /inputs: the sandbox user must read it (the job folder above it
        # still keeps every other host user out).
        inputs_dir.mkdir(mode=0o755, exist_ok=True)
        inputs_dir.chmod(0o755)
    except OSError as e:
        raise WorkflowError(
            f"cannot create the job folder {work_dir}: {e.strerror or e}",
            where="cache",
            next_step="set ORCH_CACHE_DIR to a writable folder",
        ) from e
    for path in request.inputs:
        shutil.copyfile(path, inputs_dir / path.name)
    return GoalState(request=request, job_id=job_id, out_dir=out_dir.resolve(), work_dir=work_dir)


def published_dir(state: GoalState) -> Path:
    """The job's own copy of what it published: the only files listed, validated and shown for this goal."""
    return state.work_dir / "published"


def plan_goal(state: GoalState, rt: Runtime) -> GoalState:
    rt.emit("plan.started", job=state.job_id, goal=state.request.goal)
    outcome = _plan(state, rt)
    state.plan = outcome.plan
    state.plan_metrics = GoalMetrics(
        tokens_in=outcome.tokens_in,
        tokens_out=outcome.tokens_out,
        model_calls=outcome.model_calls,
        duration_ms=outcome.duration_ms,
        disclosure=Disclosure(l1=len(outcome.offered)),
    )
    rt.emit(
        "plan.done",
        job=state.job_id,
        steps=[s.skill for s in outcome.plan.steps],
        no_fit=outcome.plan.no_fit.reason if outcome.plan.no_fit else None,
        tokens=outcome.tokens_in + outcome.tokens_out,
        offered=len(outcome.offered),
        searches=len(outcome.searches),
    )
    return state


def _plan(state: GoalState, rt: Runtime, feedback: Sequence[str] = ()) -> PlanOutcome:
    """One plan call over the goal's shortlist (the whole library when it is small)."""
    selection = rt.settings.selection
    l1 = rt.library.l1_index()
    invocable = model_invocable(l1)
    index = None
    if len(invocable) > selection.shortlist_threshold:
        index = SkillIndex.for_library(rt.library, invocable, rt.settings.cache_dir, selection)
    shortlist = make_shortlist(
        state.request.goal, l1, index, threshold=selection.shortlist_threshold, size=selection.shortlist_size
    )
    state.candidates = [
        Suggestion(id=s.id, name=s.name or "", description=(s.description or "")[:300]) for s in shortlist.skills[:5]
    ]
    by_id = {s.id: s for s in invocable}

    def search(query: str, exclude: Sequence[str]) -> list[SkillSummary]:
        assert index is not None
        return [by_id[h.id] for h in index.search(query, k=8, exclude=exclude) if h.id in by_id]

    used = state.plan_metrics.model_calls
    return make_plan(
        state.request.goal,
        shortlist.skills,
        rt.model,
        inputs=sorted(p.name for p in (state.work_dir / "inputs").iterdir()),
        constraints=state.request.constraints,
        feedback=feedback,
        explicit=shortlist.explicit,
        catalog_max_tokens=selection.catalog_max_tokens,
        search=search if index is not None and selection.search_tool else None,
        max_searches=selection.max_searches,
        max_calls=max(1, selection.max_plan_calls - used),
        library_size=shortlist.library_size,
    )


def act_step(state: GoalState, index: int, rt: Runtime, *, feedback: Sequence[str] = ()) -> GoalState:
    """Run step ``index`` of the plan; its outputs go to the output folder and become inputs of later steps."""
    assert state.plan is not None
    step = state.plan.steps[index]
    step_dir = state.work_dir / "steps" / f"{index:02d}-{_slug(step.skill)}"
    if step_dir.exists():
        shutil.rmtree(step_dir)
    board = Blackboard.from_snapshot(state.blackboard)
    constraints = [*state.request.constraints, *feedback]
    request = ActRequest(
        goal=state.request.goal,
        skill_id=step.skill,
        expected=step.expected_outputs(),
        constraints=constraints,
        inputs_dir=state.work_dir / "inputs",
        budgets=rt.settings.limits,
        qa_mode=rt.settings.qa.mode,
        job_id=f"{state.job_id}-{index}",
        goal_id=state.job_id,
    )
    rt.emit("act.started", job=state.job_id, step=index, skill=step.skill)
    result = execute_skill(
        request,
        model=rt.model,
        library=rt.library,
        settings=rt.settings,
        out_dir=step_dir,
        sandbox=rt.sandbox,
        blackboard=board,
        store=rt.store,
    )
    for rel in _publish(step_dir, state):
        if rel not in state.published:
            state.published.append(rel)
    state.blackboard = board.snapshot()
    if index < len(state.results):
        state.results[index] = result
    else:
        state.results.append(result)
    rt.emit(
        "act.done",
        job=state.job_id,
        step=index,
        skill=step.skill,
        status=result.status,
        exit_reason=result.exit_reason,
        tool_calls=result.metrics.tool_calls,
    )
    return state


def _publish(step_dir: Path, state: GoalState) -> list[str]:
    """Copy a step's outputs to the output folder (never through a link), the job's mirror and the next inputs."""
    published: list[str] = []
    if not step_dir.is_dir():
        return published
    for path in sorted(step_dir.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(step_dir).as_posix()
        try:
            note = publish_file(path, state.out_dir, rel)
        except (WorkflowError, OSError) as e:
            state.notes.append(e.message if isinstance(e, WorkflowError) else f"not written: {rel} ({e})")
            _log.warning("output.refused", job=state.job_id, path=rel, error=str(e))
            continue
        if note is not None and rel not in state.published:
            state.notes.append(note)
            _log.warning("output.replaced", job=state.job_id, path=rel)
        for root in (published_dir(state), state.work_dir / "inputs"):
            publish_file(path, root, rel)
        published.append(rel)
    return published


def reflect_goal(state: GoalState, rt: Runtime) -> GoalResult:
    """Retry each unmet step once with what was missing, re-plan if one stays unmet (within the goal's plan
    budget) and run the new steps, then validate the whole output and judge it. A plan that found no fitting
    skill ends ``unmet``."""
    assert state.plan is not None
    while state.plan.steps and (start := reflect_replan(state, rt)) is not None:
        for index in range(start, len(state.plan.steps)):
            act_step(state, index, rt)
            if state.results[index].status == "failed":
                break
    return reflect_finish(state, rt)


def reflect_replan(state: GoalState, rt: Runtime) -> int | None:
    """Retry each unmet step once; when one stays unmet, ask for a new plan of the remaining work. Returns the
    index of the first new step to run (the worker enqueues it), or None when there is nothing to re-run."""
    _retry_unmet(state, rt)
    return _replan(state, rt)


def reflect_finish(state: GoalState, rt: Runtime) -> GoalResult:
    """Validate the whole output and judge the goal (``unmet`` with suggestions when no skill fitted)."""
    assert state.plan is not None
    if not state.plan.steps:
        return _no_fit_result(state)
    return _result(state, _final_validation(state, rt))


def _retry_unmet(state: GoalState, rt: Runtime) -> None:
    for index, result in enumerate(list(state.results)):
        if result.status == "unmet" and index not in state.retried and _has_budget(result):
            state.retried.append(index)
            unmet = "; ".join(f"{u.what}: {u.why}" for u in result.unmet)[:600]
            feedback = [render_prompt("reflect/retry", reason=result.exit_reason, unmet=unmet)]
            rt.emit("reflect.retry", job=state.job_id, step=index, skill=result.skill_id)
            state.superseded.append(result)  # the retry replaces it: its model calls and tokens still count
            act_step(state, index, rt, feedback=feedback)


def _replan(state: GoalState, rt: Runtime) -> int | None:
    """Ask for a new plan from the first step that stayed unmet, telling the planner what failed; the steps before
    it are kept (their outputs are inputs now). Only within ``selection.replans`` and the goal's plan budget; a
    re-plan the budget refuses is said in the goal's notes."""
    assert state.plan is not None
    selection = rt.settings.selection
    stuck = next(
        (i for i, r in enumerate(state.results) if r.status == "unmet" and (i in state.retried or not _has_budget(r))),
        None,
    )
    if stuck is None:
        return None
    failed = state.results[stuck]
    spent = state.plan_metrics.tokens_in + state.plan_metrics.tokens_out
    refused = (
        f"{state.replans} of {selection.replans} re-plan(s) used"
        if state.replans >= selection.replans
        else f"{state.plan_metrics.model_calls} of {selection.max_plan_calls} plan calls used"
        if state.plan_metrics.model_calls >= selection.max_plan_calls
        else f"{spent} of {selection.plan_token_budget} plan tokens used"
        if spent >= selection.plan_token_budget
        else None
    )
    if refused is not None:
        if state.replans < selection.replans:  # a re-plan was due but the budget is spent: say so
            note = f"not re-planned after step {stuck + 1} ({failed.skill_id}) stayed unmet: "
            note += f"plan budget spent ({refused})"
            if note not in state.notes:
                state.notes.append(note)
                rt.emit("reflect.replan_refused", job=state.job_id, step=stuck, reason=refused)
        return None
    state.replans += 1
    done = [
        render_prompt("reflect/step_done", number=i + 1, skill=r.skill_id)
        for i, r in enumerate(state.results[:stuck])
        if r.status == "done"
    ]
    why = "; ".join(f"{u.what}: {u.why}" for u in failed.unmet)[:600] or failed.exit_reason
    feedback = [
        *done,
        render_prompt(
            "reflect/step_unmet", number=stuck + 1, skill=failed.skill_id, reason=failed.exit_reason, why=why
        ),
        render_prompt("reflect/remaining_work"),
    ]
    rt.emit("reflect.replan", job=state.job_id, step=stuck, skill=failed.skill_id)
    record = Replan(step=stuck, skill=failed.skill_id, reason=f"{failed.exit_reason}: {why}")
    state.replan_log.append(record)
    try:
        outcome = _plan(state, rt, feedback)
    except WorkflowError as e:
        rt.emit("reflect.replan_failed", job=state.job_id, error=e.message)
        record.outcome = f"no usable plan: {e.message}"
        return None
    state.plan_metrics.tokens_in += outcome.tokens_in
    state.plan_metrics.tokens_out += outcome.tokens_out
    state.plan_metrics.model_calls += outcome.model_calls
    state.plan_metrics.duration_ms += outcome.duration_ms
    record.plan_calls = outcome.model_calls
    if not outcome.plan.steps:
        record.outcome = "no skill fits the remaining work" + (
            f": {outcome.plan.no_fit.reason}" if outcome.plan.no_fit and outcome.plan.no_fit.reason else ""
        )
        return None
    record.steps = [s.skill for s in outcome.plan.steps]
    record.outcome = "re-planned"
    state.plan = state.plan.model_copy(
        update={
            "steps": [*state.plan.steps[:stuck], *outcome.plan.steps],
            "evaluation": outcome.plan.evaluation or state.plan.evaluation,
        }
    )
    state.superseded += state.results[stuck:]
    state.results = state.results[:stuck]
    state.retried = [i for i in state.retried if i < stuck]
    return stuck


def _no_fit_result(state: GoalState) -> GoalResult:
    """``unmet`` with the closest skills and what is missing; nothing ran, so no artifact is claimed."""
    assert state.plan is not None and state.plan.no_fit is not None
    no_fit = state.plan.no_fit
    closest = ", ".join(c.id for c in state.candidates[:3]) or "none"
    missing = no_fit.missing or ["a skill that can serve this goal"]
    result = _result(state, _not_validated(f"no skill fits the goal: {no_fit.reason or 'the planner found none'}"))
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


def _has_budget(result: ActResult) -> bool:
    return result.exit_reason in ("validation_failed", "stalled", "missing_reference")


def _final_validation(state: GoalState, rt: Runtime) -> ValidationReport | None:
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
        report = _semantic(state, rt, expected, contract)
    rt.emit(
        "validate.done",
        job=state.job_id,
        passed=report.pass_,
        stage=report.stage,
        violations=len(report.violations),
    )
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


def _semantic(state: GoalState, rt: Runtime, expected: ExpectedOutputs, contract: ValidationReport) -> ValidationReport:
    """The model's verdict, reused when the same expectations were already judged on byte-identical artifacts."""
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
        return ValidationReport.model_validate(
            {
                **cached,
                "tokens_in": 0,
                "tokens_out": 0,
                "duration_ms": 0,
                "rationale": f"(same verdict as an earlier run on identical artifacts) {cached.get('rationale', '')}",
            }
        )
    report = validate_outputs(
        published_dir(state), expected, model=rt.model, qa_mode=rt.settings.qa.mode, **_layout(state, rt),
        images=_sheet_limits(rt.settings),
    )
    if rt.store is not None and report.pass_ and report.stage == "semantic":
        rt.store.put_verdict(key, report.model_dump(mode="json", by_alias=True))
    return report


def _result(state: GoalState, report: ValidationReport | None) -> GoalResult:
    metrics = state.plan_metrics.plus([r.metrics for r in [*state.superseded, *state.results]], report)
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
    partial = status != "done"
    artifacts = catalog_files(
        published_dir(state), state.published, partial=partial, versions=Blackboard.from_snapshot(state.blackboard)
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
        plan_calls=state.plan_metrics.model_calls,
        replans=list(state.replan_log),
        skills=state.results,
        unmet=unmet,
        stdout=stdout,
        out_dir=str(state.out_dir),
        notes=list(state.notes),
        error=GoalError(
            where=failed.where or f"skill:{failed.skill_id}", message=failed.final_message, next_step=failed.next_step
        )
        if failed is not None
        else None,
    )


def bundle_zip(result: GoalResult, dest: Path, source: Path | None = None) -> Path:
    """Bundle the output files into one ZIP (the artifact catalog's optional bundle).

    ``source`` is where the goal's own copies are (its job folder's mirror; the output folder by default). The ZIP
    is written beside ``dest`` and renamed over it, so a link at ``dest`` is replaced, never written through.
    """
    root = source or Path(result.out_dir)
    fd, temp = tempfile.mkstemp(dir=dest.parent, prefix=".orch-", suffix=".zip.part")
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for artifact in result.artifacts:
                path = root / artifact.path
                if path.is_file() and not path.is_symlink():
                    zf.write(path, artifact.path)
        os.chmod(temp, 0o644)
        os.replace(temp, dest)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise
    return dest


class GoalInterrupted(WorkflowError):
    """The goal was stopped (Ctrl-C, SIGTERM); ``result`` is what it had done, its artifacts marked partial."""

    def __init__(self, message: str, *, result: GoalResult, exit_code: int) -> None:
        super().__init__(message, where="interrupted", next_step="run the goal again; kept files are marked partial")
        self.result = result
        self.exit_code = exit_code


def run_goal(request: GoalRequest, out_dir: Path, rt: Runtime) -> GoalResult:
    """Plan → Act → Reflect in this process. Failures become a ``failed``/``unmet`` result saying where and why.

    A stop (Ctrl-C, or SIGTERM raised as ``SystemExit``) raises :class:`GoalInterrupted` carrying the partial result.
    """
    started = time.monotonic()
    state = start_goal(request, out_dir, rt.settings)
    try:
        plan_goal(state, rt)
        assert state.plan is not None
        for index in range(len(state.plan.steps)):
            act_step(state, index, rt)
            if state.results[index].status == "failed":
                break  # later skills build on this one's outputs
        result = reflect_goal(state, rt)
    except OrchestratorError as e:
        rt.emit("goal.failed", job=state.job_id, where=e.where, error=e.message)
        result = _failed(state, e.where or "workflow", e.message, e.next_step or "", code=e.code)
    except (KeyboardInterrupt, SystemExit) as e:
        how = "Ctrl-C" if isinstance(e, KeyboardInterrupt) else f"a stop signal (exit {e.code})"
        _log.warning("goal.interrupted", job=state.job_id, how=how)
        result = _failed(state, "interrupted", f"stopped by {how}", "run the goal again")
        result.metrics.duration_ms = int((time.monotonic() - started) * 1000)
        code = 130 if isinstance(e, KeyboardInterrupt) else (e.code if isinstance(e.code, int) else 1)
        raise GoalInterrupted(f"stopped by {how}", result=result, exit_code=code) from e
    except Exception as e:  # noqa: BLE001 - a bug of ours still ends with a result and its evidence
        _log.exception("goal.crashed", job=state.job_id)
        result = _failed(state, "workflow", f"internal error: {type(e).__name__}: {e}", "report this as a bug")
    result.metrics.duration_ms = int((time.monotonic() - started) * 1000)
    rt.emit(
        "goal.done",
        job=state.job_id,
        status=result.status,
        tokens_in=result.metrics.tokens_in,
        tokens_out=result.metrics.tokens_out,
        tool_calls=result.metrics.tool_calls,
    )
    return result


def _failed(
    state: GoalState, where: str, message: str, next_step: str, *, code: StrEnum | None = None
) -> GoalResult:
    """The result of a goal that did not finish: what it published, every artifact marked partial."""
    try:
        result = _result(state, None) if state.plan is not None else None
    except Exception:  # noqa: BLE001 - the failure being reported must not be hidden by a second one
        _log.exception("goal.result_failed", job=state.job_id)
        result = None
    if result is None:
        result = GoalResult(
            job_id=state.job_id,
            goal=state.request.goal,
            status="failed",
            out_dir=str(state.out_dir),
            metrics=state.plan_metrics,
            notes=list(state.notes),
        )
    result.status = "failed"
    for artifact in result.artifacts:
        artifact.partial = True
    result.error = GoalError(where=where, message=message, next_step=next_step, code=code and code.value)
    if result.validation is None:
        result.validation = _not_validated(f"the goal failed at {where} before validation: {message}")
    return result


def _not_validated(why: str) -> ValidationReport:
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


def _slug(skill_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", skill_id)[:60]
