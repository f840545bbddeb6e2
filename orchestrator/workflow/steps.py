"""What each phase of a goal does to its state: start, plan, run one step, retry a step, re-plan.

These are the effects; *when* each one happens is decided in one place, ``workflow.machine.advance`` (and, for
Reflect, ``workflow.reflect.decide``).
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from orchestrator.act.act_io import ActRequest
from orchestrator.act.blackboard import Blackboard
from orchestrator.act.engine import execute_skill
from orchestrator.act.hints import next_actions
from orchestrator.config import Settings
from orchestrator.errors import BudgetExceeded, SkillError, WorkflowError
from orchestrator.llm.usage_ledger import LedgerModel
from orchestrator.logs import get_logger
from orchestrator.prompts import render_prompt
from orchestrator.select.index import SkillIndex, skill_docs
from orchestrator.select.restate import restated_goal, should_restate
from orchestrator.select.shortlist import make_shortlist, model_invocable
from orchestrator.skills.parsed import SkillSummary
from orchestrator.workflow.budget import GoalBudget, goal_model, plan_spending
from orchestrator.workflow.folders import PUBLISHED, jobs_folder, work_folder
from orchestrator.workflow.goal import GoalState, Replan, Suggestion
from orchestrator.workflow.outputs import check_input_files, check_output_dir, publish_file
from orchestrator.workflow.plan import PlanOutcome, make_plan
from orchestrator.workflow.reflect import Refused
from orchestrator.workflow.request import GoalRequest, check_job_id
from orchestrator.workflow.runtime import Runtime

_log = get_logger("orchestrator.workflow")
SUGGESTIONS = 5


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
    work_dir = work_folder(settings.cache_dir, job_id)
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
        for folder in (settings.cache_dir, jobs_folder(settings.cache_dir), work_dir, work_dir / PUBLISHED):
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
    return state.work_dir / PUBLISHED


def plan_goal(state: GoalState, rt: Runtime) -> None:
    rt.emit("plan.started", job=state.job_id, goal=state.request.goal)
    outcome = _plan(state, rt, goal_model(state, rt.model, rt.settings.limits, "plan"))
    state.plan = outcome.plan
    state.plan_ms = outcome.duration_ms
    state.plan_offered = len(outcome.offered)
    rt.emit(
        "plan.done",
        job=state.job_id,
        steps=[s.skill for s in outcome.plan.steps],
        no_fit=outcome.plan.no_fit.reason if outcome.plan.no_fit else None,
        tokens=outcome.spent.tokens,
        offered=len(outcome.offered),
        searches=len(outcome.searches),
    )


def _plan(state: GoalState, rt: Runtime, model: LedgerModel, feedback: Sequence[str] = ()) -> PlanOutcome:
    """One plan call over the goal's shortlist (the whole library when it is small), within the plan's and the
    goal's budgets (``model`` refuses a request once the goal's budget is spent)."""
    selection = rt.settings.selection
    l1 = rt.library.l1_index()
    invocable = model_invocable(l1)
    index = None
    if len(invocable) > selection.shortlist_threshold:
        index = SkillIndex.for_library(rt.library, invocable, rt.settings.cache_dir, selection)
    used = plan_spending(state).model_calls
    goal = state.request.goal
    restated = restated_goal(goal, model) if index is not None and should_restate(goal, selection.restate) else None
    if restated:
        rt.emit("plan.restated", job=state.job_id, restated=restated)
    shortlist = make_shortlist(
        state.request.goal,
        l1,
        index,
        threshold=selection.shortlist_threshold,
        size=selection.shortlist_size,
        restated=restated,
    )
    by_id = {s.id: s for s in invocable}
    # Suggestions are ranked by the goal at every library size; a small library is shown to the planner whole, so
    # it gets a lexical index of its own here (no embedder: a few milliseconds for twenty skills).
    ranking = index or SkillIndex.build(skill_docs(rt.library, invocable), rt.settings.cache_dir)
    also = [restated] if restated else []
    closest = [by_id[h.id] for h in ranking.search(state.request.goal, k=SUGGESTIONS, also=also) if h.id in by_id]
    state.candidates = [
        Suggestion(id=s.id, name=s.name or "", description=(s.description or "")[:300])
        for s in list({s.id: s for s in [*closest, *shortlist.skills]}.values())[:SUGGESTIONS]
    ]

    def search(query: str, exclude: Sequence[str]) -> list[SkillSummary]:
        assert index is not None
        return [by_id[h.id] for h in index.search(query, k=8, exclude=exclude) if h.id in by_id]

    return make_plan(
        state.request.goal,
        shortlist.skills,
        model,
        inputs=sorted(p.name for p in (state.work_dir / "inputs").iterdir()),
        constraints=state.request.constraints,
        feedback=feedback,
        explicit=shortlist.explicit,
        catalog_max_tokens=selection.catalog_max_tokens,
        search=search if index is not None and selection.search_tool else None,
        max_searches=selection.max_searches,
        max_calls=max(1, selection.max_plan_calls - used),  # and ``model`` refuses past the goal's budget
        library_size=shortlist.library_size,
        triage=selection.triage,
    )


def act_step(state: GoalState, index: int, rt: Runtime, *, feedback: Sequence[str] = ()) -> None:
    """Run step ``index`` of the plan; its outputs go to the output folder and become inputs of later steps."""
    assert state.plan is not None
    step = state.plan.steps[index]
    step_dir = state.work_dir / "steps" / f"{index:02d}-{_slug(step.skill)}"
    if step_dir.exists():
        shutil.rmtree(step_dir)
    board = Blackboard.from_snapshot(state.blackboard)
    budget = GoalBudget.of(state, rt.settings.limits)
    request = ActRequest(
        goal=state.request.goal,
        skill_id=step.skill,
        expected=step.expected_outputs(),
        constraints=[*state.request.constraints, *feedback],
        inputs_dir=state.work_dir / "inputs",
        budgets=rt.settings.limits,
        qa_mode=rt.settings.qa.mode,
        job_id=f"{state.job_id}-{index}",
        goal_id=state.job_id,
        goal_tokens_left=budget.tokens_left,
        goal_calls_left=budget.calls_left,
    )
    rt.emit("act.started", job=state.job_id, step=index, skill=step.skill)
    result = execute_skill(
        request,
        model=goal_model(state, rt.model, rt.settings.limits, "act", step=index, guarded=False),
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


def retry_step(state: GoalState, index: int, rt: Runtime) -> None:
    """Run step ``index`` once more, told why it stayed unmet; its first try stays as evidence (and in metrics)."""
    result = state.results[index]
    state.retried.append(index)
    unmet = "; ".join(f"{u.what}: {u.why}" for u in result.unmet)[:600]
    missing = [u.what for u in result.unmet if u.why == "expected output missing"]
    try:
        actions = next_actions(rt.library.l2(result.skill_id).text, missing)
    except SkillError:
        actions = []
    feedback = [render_prompt("reflect/retry", reason=result.exit_reason, unmet=unmet, missing=missing,
                              actions=actions)]
    rt.emit("reflect.retry", job=state.job_id, step=index, skill=result.skill_id)
    state.superseded.append(result)
    act_step(state, index, rt, feedback=feedback)


def refuse(state: GoalState, refused: Refused, rt: Runtime) -> None:
    """Say in the goal's notes that a re-plan (or a retry) was due after a step but a budget refused it."""
    step = refused.step
    done = "retried" if refused.action == "retry" else "re-planned"
    note = f"not {done} after step {step + 1} ({state.results[step].skill_id}) stayed unmet: "
    note += f"{refused.scope} budget spent ({refused.budget})"
    if note not in state.notes:
        state.notes.append(note)
        rt.emit(f"reflect.{refused.action.replace('-', '')}_refused", job=state.job_id, step=step,
                reason=refused.budget, scope=refused.scope)


def skip_steps(state: GoalState, first: int, spent: str, rt: Runtime) -> None:
    """Say in the goal's notes that the steps from ``first`` on were not run: the goal's budget is spent."""
    assert state.plan is not None
    left = state.plan.steps[first:]
    numbers = f"step {first + 1}" if len(left) == 1 else f"steps {first + 1}-{first + len(left)}"
    state.notes.append(f"{numbers} ({', '.join(s.skill for s in left)}) not run: goal budget spent ({spent})")
    rt.emit("act.skipped", job=state.job_id, first=first, reason=spent)


def replan(state: GoalState, stuck: int, rt: Runtime) -> bool:
    """Ask for a new plan from step ``stuck`` on, telling the planner what is done and what failed; the steps before
    it are kept (their outputs are inputs now). True when the new plan has steps to run (from ``stuck``)."""
    assert state.plan is not None
    failed = state.results[stuck]
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
    model = goal_model(state, rt.model, rt.settings.limits, "replan")
    mark = state.ledger.mark()
    try:
        outcome = _plan(state, rt, model, feedback)
    except (WorkflowError, BudgetExceeded) as e:
        rt.emit("reflect.replan_failed", job=state.job_id, error=e.message)
        record.outcome = f"no usable plan: {e.message}"
        record.plan_calls = state.ledger.since(mark).model_calls  # the requests it made before giving up count
        return False
    state.plan_ms += outcome.duration_ms
    record.plan_calls = outcome.spent.model_calls
    if not outcome.plan.steps:
        no_fit = outcome.plan.no_fit
        record.outcome = "no skill fits the remaining work" + (f": {no_fit.reason}" if no_fit and no_fit.reason else "")
        return False
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
    return True


def _slug(skill_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", skill_id)[:60]
