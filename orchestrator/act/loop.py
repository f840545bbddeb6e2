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
from pathlib import Path

from orchestrator.act.act_io import ActResult
from orchestrator.act.budget import BudgetTracker
from orchestrator.act.context import ActContext, ActDeps, ActState
from orchestrator.act.evidence import ModelUse, initial_messages, log_step, step_record
from orchestrator.act.finish import PASSING_EXITS, finalize, finish_attempt
from orchestrator.act.tools import TOOLS, Finish, PreparedCall, RepeatedRead, ToolOutcome, ToolSet, Violation
from orchestrator.act.transitions import Continue, Exit, Finished, StepResult, Stopped
from orchestrator.act.turns import (
    NOOP_READ_TURNS,
    Run,
    attach_images,
    packed,
    progress,
    repeated_failure,
    repeated_read,
    tool_message,
    unread_calls,
)
from orchestrator.errors import ModelError, SandboxError
from orchestrator.llm.interface import ChatModel, Message, ToolCall
from orchestrator.llm.usage_ledger import metered
from orchestrator.prompts import load_prompt, render_prompt
from orchestrator.time_budget import TimeBudget
from orchestrator.tracing import tracer
from orchestrator.validate.validator import ValidationReport


def run_act(deps: ActDeps, model: ChatModel, out_dir: Path, *, tools: ToolSet = TOOLS) -> ActResult:
    """Run one skill to completion; returns the typed result (never raises for the model's own failures)."""
    request = deps.request
    clock = TimeBudget.of(request.budgets)  # the loop, the tools and the finish all ask it whether time is up
    ctx = ActContext(deps, ActState(clock=clock))
    model = metered(model, "act")  # every request of the Act is recorded once, in the goal's ledger when it has one
    budget = BudgetTracker(request.budgets, clock, ctx.state.records, goal_tokens_left=request.goal_tokens_left,
                           goal_calls_left=request.goal_calls_left, ledger=model.ledger, mark=model.ledger.mark())
    run = Run(ctx, model, tools, budget, out_dir, initial_messages(ctx))
    while True:
        match _turn(run):
            case Continue():
                continue
            case Finished(exit=exit_) | Stopped(exit=exit_):
                return finalize(ctx, run.budget, out_dir, exit_, run.report, run.final_message)


def _turn(run: Run) -> StepResult:
    if (reason := run.budget.exhausted()) is not None:  # acquire
        return Stopped(Exit(reason, *run.budget.describe(reason)))
    try:  # decide
        response = run.model.complete(packed(run), tools=run.tools.specs(), purpose="act")
    except ModelError as e:
        return Stopped(Exit("model_error", str(e), e.next_step or "check the model settings and retry"))
    state = run.ctx.state
    state.step += 1
    if state.step == 1:  # the Act's opening request was answered from the cache: it replays an earlier run
        state.replaying = response.cache_hit
    run.messages.append(response.as_message())
    usage = ModelUse.of(run.budget.last_request())
    if not response.tool_calls and not response.unread_calls:
        log_step(run.ctx, step_record(state.step, "model", usage, text=response.content or ""))
        run.final_message = response.content or ""
        run.messages.append(Message(role="user", content=load_prompt("act_nudge")))
        return progress(run, progressed=False)
    first_record = len(state.records)
    result: StepResult = Continue()
    for index, call in enumerate(response.tool_calls):  # apply + record
        if not isinstance(result, Continue) or run.budget.tool_calls >= run.ctx.deps.request.budgets.max_tool_calls:
            run.messages.append(tool_message(call, json.dumps({"ok": False, "error": render_prompt("errors/not_run")})))
            continue
        result = _call(run, call, usage if index == 0 else usage.later())
        if isinstance(result, Continue) and not state.records[-1].ok:
            result = repeated_failure(run, call.name, call.arguments, state.records[-1].error or "")
    attach_images(run)
    if response.unread_calls and isinstance(result, Continue):
        result = unread_calls(run, response, usage if not response.tool_calls else usage.later())
    if not isinstance(result, Continue):
        return result
    records = state.records[first_record:]
    if records and all(r.ok and r.dedup for r in records) and run.noop_reads < NOOP_READ_TURNS:
        run.noop_reads += 1  # a re-read answered "already sent" costs nothing: neither progress nor a stall
        return result
    return progress(run, progressed=any(r.file_ids for r in records))


def _call(run: Run, call: ToolCall, usage: ModelUse) -> StepResult:
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


def _apply(run: Run, call: ToolCall, usage: ModelUse) -> StepResult:
    """Apply one tool call and act on its effect; its record is built in ``finally``, whatever happened."""
    started = time.monotonic()
    prepared: PreparedCall | None = None
    outcome = ToolOutcome(ok=False, error=render_prompt("errors/not_run"))  # until the tool answers
    report: ValidationReport | None = None
    answered = False
    try:
        prepared, outcome = run.tools.call(run.ctx, call.name, call.arguments)
        run.messages.append(tool_message(call, outcome.content()))
        answered = True
        if outcome.image is not None:
            run.images.append(outcome.image)
        match outcome.effect:
            case Violation(what=what):
                next_step = "the skill or the model tried to leave its sandbox; check the skill's paths and scripts"
                return Stopped(Exit("sandbox_violation", what, next_step))
            case RepeatedRead(path=path):
                return repeated_read(run, path)
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
            run.messages.append(tool_message(call, outcome.content()))
        return Stopped(Exit("sandbox_error", str(e), e.next_step or "check the Docker engine and the sandbox image"))
    finally:
        record = step_record(
            run.ctx.state.step, "tool", usage, started=started, call=call, prepared=prepared, outcome=outcome,
            report=report,
        )
        log_step(run.ctx, record)
