"""The Pure Act loop: acquire → decide → apply → record → progress/exit. The model picks every step.

The code never wires the order of tools and never looks at their names: each turn returns one typed step result
(:class:`Continue`, :class:`Finished`, :class:`Stopped`), each tool call one typed outcome whose single effect the
loop acts on. Every step becomes one ``StepRecord`` (built in ``finally``); budgets and metrics are counted from the
records. Exits: validated outputs, budget exhaustion, a reference cycle, a sandbox violation, or a stall after one
Micro-Reflect.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.act.budget import BudgetTracker
from orchestrator.act.context import ActContext, ActDeps, ActState
from orchestrator.act.evidence import initial_messages, log_step, step_record
from orchestrator.act.finish import PASSING_EXITS, finalize, finish_attempt
from orchestrator.act.images import ViewedImage
from orchestrator.act.models import ActResult
from orchestrator.act.packing import pack_messages
from orchestrator.act.steps import Continue, Exit, Finished, StepResult, Stopped
from orchestrator.act.tools import TOOLS, Finish, PreparedCall, RepeatedRead, ToolOutcome, ToolSet, Violation
from orchestrator.errors import ModelError, SandboxError
from orchestrator.llm.interface import ChatModel, ImagePart, Message, ModelResponse, ToolCall, Usage
from orchestrator.prompts import load_prompt, render_prompt
from orchestrator.tracing import tracer
from orchestrator.validate.validator import ValidationReport

NO_PROGRESS_TURNS = 2  # turns without a new or changed artifact before the one Micro-Reflect
STALL_TURNS_AFTER_REFLECT = 4
CYCLE_REPEATS = 3


@dataclass
class _Run:
    ctx: ActContext
    model: ChatModel
    tools: ToolSet
    budget: BudgetTracker
    out_dir: Path
    messages: list[Message]
    report: ValidationReport | None = None
    final_message: str = ""
    failed_finishes: int = 0
    no_progress: int = 0
    reflected: bool = False
    repeat_reads: int = 0
    images: list[ViewedImage] = field(default_factory=list)  # view_image results to send after the tool results


def run_act(deps: ActDeps, model: ChatModel, out_dir: Path, *, tools: ToolSet = TOOLS) -> ActResult:
    """Run one skill to completion; returns the typed result (never raises for the model's own failures)."""
    ctx = ActContext(deps, ActState())
    budget = BudgetTracker(deps.request.budgets, ctx.state.records)
    ctx.state.deadline = budget.started + deps.request.budgets.time_budget_ms / 1000
    run = _Run(ctx, model, tools, budget, out_dir, initial_messages(ctx))
    while True:
        match _turn(run):
            case Continue():
                continue
            case Finished(exit=exit_) | Stopped(exit=exit_):
                return finalize(ctx, run.budget, out_dir, exit_, run.report, run.final_message)


def _turn(run: _Run) -> StepResult:
    if (reason := run.budget.exhausted()) is not None:  # acquire
        return Stopped(Exit(reason, *run.budget.describe(reason)))
    started = time.monotonic()
    try:  # decide
        response = run.model.complete(_packed(run), tools=run.tools.specs(), purpose="act")
    except ModelError as e:
        return Stopped(Exit("model_error", str(e), e.next_step or "check the model settings and retry"))
    state = run.ctx.state
    state.step += 1
    run.messages.append(response.as_message())
    usage = (response.usage, int((time.monotonic() - started) * 1000))
    if not response.tool_calls:
        log_step(run.ctx, step_record(state.step, "model", usage, text=response.content or ""))
        run.final_message = response.content or ""
        run.messages.append(Message(role="user", content=load_prompt("act_nudge")))
        return _progress(run, progressed=False)
    first_record = len(state.records)
    result: StepResult = Continue()
    for index, call in enumerate(response.tool_calls):  # apply + record
        if not isinstance(result, Continue) or run.budget.tool_calls >= run.ctx.deps.request.budgets.max_tool_calls:
            run.messages.append(_tool_message(call, json.dumps({"ok": False, "error": render_prompt("notes/not_run")})))
            continue
        result = _call(run, call, usage if index == 0 else None)
    _attach_images(run)
    if not isinstance(result, Continue):
        return result
    return _progress(run, progressed=any(r.file_ids for r in state.records[first_record:]))


def _call(run: _Run, call: ToolCall, usage: tuple[Usage, int] | None) -> StepResult:
    """One tool call as a ``tool`` span (a container it starts is a child span); its record gives the attributes."""
    ctx = run.ctx
    attrs: dict[str, str | int] = {
        "orch.tool": call.name[:100], "orch.skill_id": ctx.deps.request.skill_id, "orch.step": ctx.state.step
    }
    with tracer().start_as_current_span("tool", attributes=attrs) as span:
        recorded = len(ctx.state.records)
        result = _apply(run, call, usage)
        for record in ctx.state.records[recorded:]:
            span.set_attribute("orch.ok", record.ok)
            if record.error:
                span.set_attribute("orch.error", record.error[:300])
            if record.memo_hit:
                span.set_attribute("orch.memo_hit", True)
        if isinstance(result, Stopped | Finished):
            span.set_attribute("orch.exit", result.exit.reason)
            if result.exit.reason == "sandbox_violation":
                span.set_attribute("orch.violation", result.exit.why[:300])
        return result


def _apply(run: _Run, call: ToolCall, usage: tuple[Usage, int] | None) -> StepResult:
    """Apply one tool call and act on its effect; its record is built in ``finally``, whatever happened."""
    started = time.monotonic()
    prepared: PreparedCall | None = None
    outcome = ToolOutcome(ok=False, error="not run")
    report: ValidationReport | None = None
    answered = False
    try:
        prepared, outcome = run.tools.call(run.ctx, call.name, call.arguments)
        run.messages.append(_tool_message(call, outcome.content()))
        answered = True
        if outcome.image is not None:
            run.images.append(outcome.image)
        match outcome.effect:
            case Violation(what=what):
                next_step = "the skill or the model tried to leave its sandbox; check the skill's paths and scripts"
                return Stopped(Exit("sandbox_violation", what, next_step))
            case RepeatedRead(path=path):
                return _repeated_read(run, path)
            case Finish(summary=summary):
                run.final_message = summary
                exit_, report = finish_attempt(run.ctx, run.model, run.out_dir, run.messages, run.failed_finishes)
                if report is not None:
                    run.report = report
                    run.failed_finishes += not report.pass_
                if exit_ is not None:
                    return Finished(exit_) if exit_.reason in PASSING_EXITS else Stopped(exit_)
        return Continue()
    except SandboxError as e:  # the engine, not the model: the Act ends with the reason
        if not answered:
            outcome = ToolOutcome(ok=False, error=str(e))
            run.messages.append(_tool_message(call, outcome.content()))
        return Stopped(Exit("sandbox_error", str(e), e.next_step or "check the Docker engine and the sandbox image"))
    finally:
        record = step_record(
            run.ctx.state.step, "tool", usage, started=started, call=call, prepared=prepared, outcome=outcome,
            report=report,
        )
        log_step(run.ctx, record)


def _packed(run: _Run) -> list[Message]:
    """The history as sent: older tool results summarised, bounded in size (see ``act/packing.py``)."""
    disclosure = run.ctx.deps.settings.disclosure
    return pack_messages(
        run.messages, keep_recent=disclosure.act_keep_recent_results, max_tokens=disclosure.act_request_max_tokens
    )


def _attach_images(run: _Run) -> None:
    """Send this turn's viewed images in one user message; only the latest few stay attached in later turns."""
    if not run.images:
        return
    disclosure = run.ctx.deps.settings.disclosure
    names = ", ".join(f"{i.path} ({i.width}x{i.height})" for i in run.images)
    parts = tuple(ImagePart(url=i.data_url, detail=disclosure.image_detail) for i in run.images)
    run.messages.append(Message(role="user", content=render_prompt("notes/images_attached", names=names), images=parts))
    run.images.clear()
    attached = [i for i, m in enumerate(run.messages) if m.images]
    kept = 0
    for index in reversed(attached):
        message = run.messages[index]
        if kept + len(message.images) <= disclosure.images_attached:
            kept += len(message.images)
            continue
        note = render_prompt("notes/images_detached", content=message.content)
        run.messages[index] = message.model_copy(update={"images": (), "content": note})


def _tool_message(call: ToolCall, content: str) -> Message:
    return Message(role="tool", tool_call_id=call.id, content=content)


def _repeated_read(run: _Run, path: str) -> StepResult:
    """A re-read of a document on a reference cycle the skills library reported; the third one ends the Act."""
    path = path.strip().removeprefix("./")
    cycles = [p.message for p in run.ctx.deps.skill.problems if p.code == "reference_cycle"]
    if not path or not any(path in message for message in cycles):
        return Continue()
    run.repeat_reads += 1
    if run.repeat_reads < CYCLE_REPEATS:
        return Continue()
    return Stopped(
        Exit(
            "reference_cycle",
            f"the model went round a reference cycle {run.repeat_reads} times ({'; '.join(cycles)})",
            "break the cycle in the skill's documents, or tell the model which document ends the chain",
        )
    )


def _progress(run: _Run, *, progressed: bool) -> StepResult:
    if progressed:
        run.no_progress = 0
        return Continue()
    run.no_progress += 1
    if run.budget.exhausted() is not None:
        return Continue()  # the budget exit comes next; a re-plan could not be acted on
    if not run.reflected and run.no_progress >= NO_PROGRESS_TURNS:
        return _micro_reflect(run)
    if run.reflected and run.no_progress >= STALL_TURNS_AFTER_REFLECT:
        return Stopped(
            Exit(
                "stalled",
                f"{run.no_progress} turns without a new or changed artifact after a Micro-Reflect",
                "give the goal more detail or check that the skill can produce the expected outputs",
            )
        )
    return Continue()


def _micro_reflect(run: _Run) -> StepResult:
    run.reflected = True
    run.no_progress = 0
    started = time.monotonic()
    prompt = Message(role="user", content=load_prompt("micro_reflect"))
    try:
        response: ModelResponse = run.model.complete([*_packed(run), prompt], purpose="reflect")
    except ModelError as e:
        return Stopped(Exit("model_error", str(e), e.next_step or "check the model settings and retry"))
    run.ctx.state.step += 1
    plan = (response.content or "").strip()[:1200]
    usage = (response.usage, int((time.monotonic() - started) * 1000))
    log_step(run.ctx, step_record(run.ctx.state.step, "reflect", usage, text=plan[:400]))
    run.messages.append(Message(role="user", content=render_prompt("act_reflect_note", plan=plan)))
    return Continue()
