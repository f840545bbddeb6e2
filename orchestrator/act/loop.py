"""The Pure Act loop: acquire → decide → apply → record → progress/exit. The model picks every step.

The code never wires the order of tools. It only keeps budgets, evidence and the exit rules:
validated outputs, budget exhaustion, a reference cycle, a sandbox violation, or a stall after one Micro-Reflect.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.act.budget import BudgetTracker
from orchestrator.act.context import ActContext
from orchestrator.act.evidence import build_artifacts, initial_messages, log_step, persist_success
from orchestrator.act.memo import canonical_digest
from orchestrator.act.models import ActResult, ExitReason, StepRecord, Unmet
from orchestrator.act.packing import pack_messages
from orchestrator.act.tools import TOOLS, ToolOutcome, tool_name, tool_specs
from orchestrator.errors import ModelError, OrchestratorError, SandboxError, SandboxRefused
from orchestrator.llm.interface import ChatModel, Message, ModelResponse, ToolCall
from orchestrator.logs import get_logger
from orchestrator.prompts import load_prompt
from orchestrator.validate.validator import ValidationReport, validate_outputs

NO_PROGRESS_TURNS = 2  # turns without a new or changed artifact before the one Micro-Reflect
STALL_TURNS_AFTER_REFLECT = 4
MAX_FAILED_FINISHES = 2
CYCLE_REPEATS = 3
_log = get_logger("orchestrator.act")


@dataclass(frozen=True)
class Exit:
    reason: ExitReason
    why: str
    next_step: str = ""


@dataclass
class _Loop:
    ctx: ActContext
    model: ChatModel
    budget: BudgetTracker
    out_dir: Path
    messages: list[Message]
    no_progress: int = 0
    failed_finishes: int = 0
    repeat_reads: int = 0
    report: ValidationReport | None = None
    final_message: str = ""
    last_usage: tuple[int, int, int] = (0, 0, 0)
    progressed: bool = False


def run_act(ctx: ActContext, model: ChatModel, out_dir: Path) -> ActResult:
    """Run one skill to completion; returns the typed result (never raises for the model's own failures)."""
    loop = _Loop(
        ctx=ctx,
        model=model,
        budget=BudgetTracker(ctx.request.budgets),
        out_dir=out_dir,
        messages=initial_messages(ctx),
    )
    specs = tool_specs()
    exit_: Exit | None = None
    while exit_ is None:
        exit_ = _budget_exit(loop)  # acquire
        if exit_ is not None:
            break
        try:
            response = _decide(loop, specs)
        except ModelError as e:
            exit_ = Exit("model_error", str(e), e.next_step or "check the model settings and retry")
            break
        exit_ = _apply_all(loop, response)  # apply + record
        if exit_ is None:
            exit_ = _progress(loop)
    return _finalize(loop, exit_)


def _budget_exit(loop: _Loop) -> Exit | None:
    reason = loop.budget.exhausted()
    if reason is None:
        return None
    why, next_step = loop.budget.describe(reason)
    return Exit(reason, why, next_step)


def _decide(loop: _Loop, specs: list[Any]) -> ModelResponse:
    ctx = loop.ctx
    started = time.monotonic()
    response = loop.model.complete(_packed(loop), tools=specs, purpose="act")
    _count_usage(loop, response)
    ctx.step += 1
    ms = int((time.monotonic() - started) * 1000)
    if not response.tool_calls:
        log_step(
            ctx,
            StepRecord(
                step=ctx.step,
                kind="model",
                reason_short=(response.content or "")[:200],
                tokens_in=response.usage.prompt_tokens,
                tokens_out=response.usage.completion_tokens,
                ms=ms,
            ),
        )
    loop.messages.append(response.as_message())
    loop.last_usage = (response.usage.prompt_tokens, response.usage.completion_tokens, ms)
    return response


def _packed(loop: _Loop) -> list[Message]:
    """The history as sent: older tool results summarised, bounded in size (see ``act/packing.py``)."""
    disclosure = loop.ctx.settings.disclosure
    return pack_messages(
        loop.messages,
        keep_recent=disclosure.act_keep_recent_results,
        max_tokens=disclosure.act_request_max_tokens,
    )


def _count_usage(loop: _Loop, response: ModelResponse) -> None:
    m = loop.ctx.metrics
    m.model_calls += 1
    m.tokens_in += response.usage.prompt_tokens
    m.tokens_out += response.usage.completion_tokens
    loop.budget.tokens += response.usage.total_tokens


def _apply_all(loop: _Loop, response: ModelResponse) -> Exit | None:
    ctx = loop.ctx
    loop.progressed = False
    if not response.tool_calls:
        loop.final_message = response.content or ""
        loop.messages.append(
            Message(
                role="user",
                content="Call a tool, or call finish(summary, outputs) when the outputs are produced.",
            )
        )
        return None
    tokens_in, tokens_out, model_ms = loop.last_usage
    exit_: Exit | None = None
    for index, call in enumerate(response.tool_calls):
        if exit_ is not None or loop.budget.tool_calls >= ctx.request.budgets.max_tool_calls:
            loop.messages.append(
                Message(
                    role="tool",
                    tool_call_id=call.id,
                    content=json.dumps({"ok": False, "error": "not run: the step ended"}),
                )
            )
            continue
        started = time.monotonic()
        try:
            outcome = _apply(ctx, call)
        except SandboxError as e:
            loop.messages.append(
                Message(role="tool", tool_call_id=call.id, content=json.dumps({"ok": False, "error": str(e)}))
            )
            log_step(ctx, StepRecord(step=ctx.step, kind="tool", tool=call.name, ok=False, error=str(e)))
            exit_ = Exit("sandbox_error", str(e), e.next_step or "check the Docker engine and the sandbox image")
            continue
        loop.budget.tool_calls += 1
        ctx.metrics.tool_calls += 1
        record = _record(ctx, call, outcome, started, (tokens_in, tokens_out, model_ms) if index == 0 else None)
        log_step(ctx, record)
        loop.messages.append(Message(role="tool", tool_call_id=call.id, content=outcome.content()))
        if outcome.changed_files:
            loop.progressed = True
        exit_ = _after_tool(loop, call, outcome)
    return exit_


def _apply(ctx: ActContext, call: ToolCall) -> ToolOutcome:
    tool = TOOLS.get(call.name) or TOOLS.get(tool_name(call.name))
    if tool is None:
        return ToolOutcome(ok=False, error=f"unknown tool {call.name!r}; available: {', '.join(TOOLS)}")
    try:
        raw = json.loads(call.arguments or "{}")
        args = tool.args_model.model_validate(raw if raw is not None else {})
    except (json.JSONDecodeError, ValidationError) as e:
        return ToolOutcome(ok=False, error=f"bad arguments for {call.name}: {e}")
    try:
        return tool.fn(ctx, args)
    except SandboxRefused as e:
        return ToolOutcome(ok=False, error=str(e), violation=f"sandbox refused: {e.message}")
    except SandboxError:
        raise  # the engine, not the model: ends the Act with the reason
    except (OrchestratorError, ValueError, OSError) as e:
        return ToolOutcome(ok=False, error=f"{call.name} failed: {e}")
    except Exception as e:  # a bug of ours must not cost the run: the model and the evidence see it
        _log.exception("act.tool_crashed", tool=call.name)
        return ToolOutcome(ok=False, error=f"{call.name} failed unexpectedly: {type(e).__name__}: {e}")


def _record(
    ctx: ActContext, call: ToolCall, outcome: ToolOutcome, started: float, usage: tuple[int, int, int] | None
) -> StepRecord:
    if outcome.disclosure == "L2":
        ctx.metrics.disclosure.l2 += 1
    elif outcome.disclosure == "L3":
        ctx.metrics.disclosure.l3 += 1
    if outcome.dedup:
        ctx.metrics.disclosure.dedup_hits += 1
    if outcome.memo_hit:
        ctx.metrics.memo_hits += 1
    if outcome.container is not None:
        ctx.metrics.containers += 1
    try:
        reason = str(json.loads(call.arguments or "{}").get("reason", ""))[:400]
    except (json.JSONDecodeError, AttributeError):
        reason = ""
    tokens_in, tokens_out, model_ms = usage or (0, 0, 0)
    return StepRecord(
        step=ctx.step,
        kind="tool",
        tool=call.name,
        reason_short=reason,
        inputs_digest=canonical_digest(call.name, call.arguments)[:16],
        ok=outcome.ok,
        error=outcome.error,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        ms=model_ms + int((time.monotonic() - started) * 1000),
        diff_summary=", ".join(f"build/{p} changed" for p in outcome.changed_files),
        file_ids=[f"build/{p}" for p in outcome.changed_files],
        memo_hit=outcome.memo_hit,
        container=outcome.container,
    )


def _after_tool(loop: _Loop, call: ToolCall, outcome: ToolOutcome) -> Exit | None:
    if outcome.violation:
        return Exit(
            "sandbox_violation",
            outcome.violation,
            "the skill or the model tried to leave its sandbox; check the skill's paths and scripts",
        )
    if outcome.dedup and call.name in ("read_ref", "read_file") and _on_a_cycle(loop.ctx, call):
        loop.repeat_reads += 1
        if loop.repeat_reads >= CYCLE_REPEATS:
            cycles = "; ".join(p.message for p in loop.ctx.skill.problems if p.code == "reference_cycle")
            return Exit(
                "reference_cycle",
                f"the model went round a reference cycle {loop.repeat_reads} times ({cycles})",
                "break the cycle in the skill's documents, or tell the model which document ends the chain",
            )
    if outcome.finish:
        return _finish_attempt(loop, outcome)
    return None


def _on_a_cycle(ctx: ActContext, call: ToolCall) -> bool:
    """Whether the document this call re-read lies on a reference cycle the skills library reported."""
    try:
        path = str(json.loads(call.arguments or "{}").get("path", "")).strip().removeprefix("./")
    except (json.JSONDecodeError, AttributeError):
        return False
    return bool(path) and any(p.code == "reference_cycle" and path in p.message for p in ctx.skill.problems)


def _finish_attempt(loop: _Loop, outcome: ToolOutcome) -> Exit | None:
    ctx = loop.ctx
    loop.final_message = str(outcome.data.get("summary", ""))
    ctx.build.export(loop.out_dir)
    if ctx.request.qa_mode == "off" and not ctx.request.expected.rules.required:
        return Exit("finished_unvalidated", "finished; QA is off")
    semantic_model = loop.model if ctx.request.qa_mode == "step" else None
    try:
        report = validate_outputs(
            loop.out_dir,
            ctx.request.expected,
            model=semantic_model,
            qa_mode="step" if semantic_model else "off",
            schema_base=ctx.skill_root,
        )
    except ModelError as e:
        return Exit("model_error", f"semantic check failed: {e}", e.next_step or "check the model and retry")
    loop.report = report
    ctx.validation_stats.add(report)
    _count_report_tokens(loop, report)
    if report.pass_:
        return Exit("validated", "expected outputs validated")
    loop.failed_finishes += 1
    loop.messages.append(
        Message(
            role="user",
            content="Validation failed: "
            + json.dumps(
                report.model_dump(by_alias=True, include={"pass_", "stage", "missing", "violations", "rationale"}),
                ensure_ascii=False,
            )
            + ("\nFix it, then call finish again." if loop.failed_finishes < MAX_FAILED_FINISHES else ""),
        )
    )
    if loop.failed_finishes >= MAX_FAILED_FINISHES:
        return Exit(
            "validation_failed",
            "; ".join(report.missing + report.violations)[:500] or report.rationale,
            "look at the violations; adjust the goal's expected outputs or the skill",
        )
    return None


def _count_report_tokens(loop: _Loop, report: ValidationReport) -> None:
    loop.ctx.metrics.tokens_in += report.tokens_in
    loop.ctx.metrics.tokens_out += report.tokens_out
    loop.budget.tokens += report.tokens_in + report.tokens_out


def _progress(loop: _Loop) -> Exit | None:
    if loop.progressed:
        loop.no_progress = 0
        return None
    loop.no_progress += 1
    ctx = loop.ctx
    if loop.budget.exhausted() is not None:
        return None  # the budget exit comes next; a re-plan could not be acted on
    if ctx.metrics.micro_reflects == 0 and loop.no_progress >= NO_PROGRESS_TURNS:
        return _micro_reflect(loop)
    if ctx.metrics.micro_reflects > 0 and loop.no_progress >= STALL_TURNS_AFTER_REFLECT:
        return Exit(
            "stalled",
            f"{loop.no_progress} turns without a new or changed artifact after a Micro-Reflect",
            "give the goal more detail or check that the skill can produce the expected outputs",
        )
    return None


def _micro_reflect(loop: _Loop) -> Exit | None:
    ctx = loop.ctx
    ctx.metrics.micro_reflects += 1
    loop.no_progress = 0
    started = time.monotonic()
    prompt = Message(role="user", content=load_prompt("micro_reflect"))
    try:
        response = loop.model.complete([*_packed(loop), prompt], purpose="reflect")
    except ModelError as e:
        return Exit("model_error", str(e), e.next_step or "check the model settings and retry")
    _count_usage(loop, response)
    ctx.step += 1
    plan = (response.content or "").strip()[:1200]
    log_step(
        ctx,
        StepRecord(
            step=ctx.step,
            kind="reflect",
            reason_short=plan[:400],
            tokens_in=response.usage.prompt_tokens,
            tokens_out=response.usage.completion_tokens,
            ms=int((time.monotonic() - started) * 1000),
        ),
    )
    loop.messages.append(Message(role="user", content=f"Micro-Reflect (your short re-plan): {plan}\nGo on."))
    return None


FAILING_EXITS = ("model_error", "sandbox_violation", "sandbox_error")


def _finalize(loop: _Loop, exit_: Exit) -> ActResult:
    ctx = loop.ctx
    ctx.metrics.duration_ms = loop.budget.elapsed_ms()
    done = exit_.reason in ("validated", "finished_unvalidated")
    if not done:
        _export_partial(loop)
    status = "done" if done else ("failed" if exit_.reason in FAILING_EXITS else "unmet")
    if loop.report is None and not done and ctx.request.qa_mode != "off":
        loop.report = validate_outputs(
            loop.out_dir, ctx.request.expected, model=None, qa_mode="off", schema_base=ctx.skill_root
        )
    unmet = [] if done else _unmet(ctx, exit_, loop.report)
    if status == "unmet" and ctx.missing_refs and exit_.reason != "reference_cycle":
        exit_ = Exit(
            "missing_reference",
            f"missing references: {', '.join(ctx.missing_refs)} ({exit_.why})",
            "add the missing files to the skill or remove the references",
        )
    if done:
        persist_success(ctx)
    return ActResult(
        skill_id=ctx.request.skill_id,
        status=status,
        exit_reason=exit_.reason,
        where=_where(ctx),
        next_step=exit_.next_step,
        artifacts=build_artifacts(ctx, loop.out_dir, partial=not done),
        validation=loop.report,
        validation_stats=ctx.validation_stats,
        evidence_summary=list(ctx.records),
        metrics=ctx.metrics,
        remaining_budgets=loop.budget.remaining(),
        unmet=unmet,
        final_message=loop.final_message or exit_.why,
        stdout_results=ctx.stdout_results,
    )


def _export_partial(loop: _Loop) -> None:
    """Keep what was produced (marked partial in the catalog), even when the sandbox itself failed."""
    try:
        loop.ctx.build.export(loop.out_dir)
    except OrchestratorError as e:
        _log.warning("act.partial_export_failed", skill=loop.ctx.request.skill_id, error=str(e))


def _where(ctx: ActContext) -> str:
    """``skill:ID``, then the last failing tool and its container, for errors people can act on."""
    where = f"skill:{ctx.request.skill_id}"
    failed = next((r for r in reversed(ctx.records) if not r.ok and r.tool), None)
    if failed is not None:
        where += f" / tool:{failed.tool}"
        if failed.container and failed.container.get("container"):
            where += f" / container:{failed.container['container']}"
    return where


def _unmet(ctx: ActContext, exit_: Exit, report: ValidationReport | None) -> list[Unmet]:
    items = [
        Unmet(what=f"reference {ref}", why="missing from the skill", next_step="add it or remove the link")
        for ref in ctx.missing_refs
    ]
    if report is not None and not report.pass_:
        items += [Unmet(what=m, why="expected output missing", next_step=exit_.next_step) for m in report.missing]
        items += [Unmet(what=v, why="contract violation", next_step=exit_.next_step) for v in report.violations]
    if not items:
        items.append(Unmet(what=f"skill {ctx.request.skill_id}", why=exit_.why, next_step=exit_.next_step))
    return items
