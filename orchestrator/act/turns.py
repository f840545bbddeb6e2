"""What an Act turn does besides applying tools: the run's mutable state, the history as sent, viewed images,
progress and the one Micro-Reflect, and re-reads on a reference cycle. The driver is ``act/loop.py``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.act.budget import BudgetTracker
from orchestrator.act.context import ActContext
from orchestrator.act.evidence import ModelUse, log_step, step_record
from orchestrator.act.hints import next_actions
from orchestrator.act.memo import canonical_digest
from orchestrator.act.packing import pack_messages
from orchestrator.act.text import repeats
from orchestrator.act.tools import ToolSet
from orchestrator.act.transitions import Continue, Exit, StepResult, Stopped
from orchestrator.errors import ModelError, OrchestratorError
from orchestrator.llm.image_input import ViewedImage
from orchestrator.llm.interface import ChatModel, ImagePart, Message, ModelResponse, ToolCall
from orchestrator.prompts import load_prompt, render_prompt
from orchestrator.validate.validator import ValidationReport

NO_PROGRESS_TURNS = 2  # turns without a new or changed artifact before the one Micro-Reflect
STALL_TURNS_AFTER_REFLECT = 4
CYCLE_REPEATS = 3
REPEATED_FAILURES = 3  # the same failing call, with nothing changed in build/ meanwhile, ends the Act the 3rd time
NOOP_READ_TURNS = 2  # turns of only re-reads answered "already sent" that count as no turn at all (then they count)


@dataclass
class Run:
    """One Act while it runs: its context, model, tools, budget and the conversation so far."""

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
    noop_reads: int = 0
    images: list[ViewedImage] = field(default_factory=list)  # view_image results to send after the tool results
    failures: dict[str, int] = field(default_factory=dict)
    """How often each failing call (name, arguments, build/ changes so far) failed."""


def packed(run: Run) -> list[Message]:
    """The history as sent: older tool results summarised, bounded in size (see ``act/packing.py``)."""
    disclosure = run.ctx.deps.settings.disclosure
    return pack_messages(
        run.messages, keep_recent=disclosure.act_keep_recent_results, max_tokens=disclosure.act_request_max_tokens
    )


def attach_images(run: Run) -> None:
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


def tool_message(call: ToolCall, content: str) -> Message:
    return Message(role="tool", tool_call_id=call.id, content=content)


def repeated_read(run: Run, path: str) -> StepResult:
    """A re-read of a document on a reference cycle the skills library reported; the third one ends the Act."""
    path = path.strip().removeprefix("./")
    cycles = [p for p in run.ctx.deps.skill.problems if p.code == "reference_cycle" and p.cycle]
    if not path or not any(path in (p.cycle or ()) for p in cycles):
        return Continue()
    run.repeat_reads += 1
    if run.repeat_reads < CYCLE_REPEATS:
        return Continue()
    return Stopped(
        Exit(
            "reference_cycle",
            f"the model went round a reference cycle {run.repeat_reads} times ({'; '.join(p.message for p in cycles)})",
            "break the cycle in the skill's documents, or tell the model which document ends the chain",
        )
    )


def progress(run: Run, *, progressed: bool) -> StepResult:
    if progressed:
        run.no_progress = 0
        return Continue()
    run.no_progress += 1
    if run.budget.exhausted() is not None:
        return Continue()  # the budget exit comes next; a re-plan could not be acted on
    if not run.reflected and run.no_progress >= NO_PROGRESS_TURNS:
        return micro_reflect(run)
    if run.reflected and run.no_progress >= STALL_TURNS_AFTER_REFLECT:
        return Stopped(
            Exit(
                "stalled",
                f"{run.no_progress} turns without a new or changed artifact after a Micro-Reflect",
                "give the goal more detail or check that the skill can produce the expected outputs",
            )
        )
    return Continue()


def micro_reflect(run: Run) -> StepResult:
    run.reflected = True
    run.no_progress = 0
    prompt = Message(role="user", content=load_prompt("micro_reflect"))
    try:
        response: ModelResponse = run.model.complete([*packed(run), prompt], purpose="reflect")
    except ModelError as e:
        return Stopped(Exit("model_error", str(e), e.next_step or "check the model settings and retry"))
    run.ctx.state.step += 1
    plan = (response.content or "").strip()[:1200]
    usage = ModelUse.of(run.budget.last_request())
    log_step(run.ctx, step_record(run.ctx.state.step, "reflect", usage, text=plan[:400]))
    if any(repeats(plan, m.content or "") for m in (prompt, *run.messages[-3:]) if m.role != "assistant"):
        plan = ""  # the runtime's own words given back are no re-plan
    missing = missing_outputs(run)
    actions = next_actions(run.ctx.deps.skill.body, missing)
    note = render_prompt("act_reflect_note", plan=plan, missing=missing, actions=actions)
    run.messages.append(Message(role="user", content=note))
    return Continue()


def missing_outputs(run: Run) -> list[str]:
    """The expected outputs not in ``build/`` yet (named files only: a glob names no file to make)."""
    required = [r.path for r in run.ctx.deps.request.expected.rules.required if not r.is_pattern]
    try:
        made = {f.path for f in run.ctx.deps.build.list_files()}
    except OrchestratorError:
        return required
    return [path for path in required if path.removeprefix("build/") not in made]


def repeated_failure(run: Run, name: str, arguments: str, error: str) -> StepResult:
    """A call that failed: the third identical failing call, with nothing changed in ``build/`` meanwhile, ends the
    Act as ``stalled``. The model keeps asking for something that cannot work; going on only spends the budgets."""
    changes = sum(len(r.file_ids) for r in run.ctx.state.records)
    key = canonical_digest(name.strip(), _canonical_arguments(arguments), changes)
    run.failures[key] = count = run.failures.get(key, 0) + 1
    if count < REPEATED_FAILURES:
        return Continue()
    what = f"{name.strip()[:60]} {arguments.strip()[:200]}".strip()
    return Stopped(
        Exit(
            "stalled",
            f"the model made the same failing call {count} times ({what}): {error[:300]}",
            "the model repeats a call that cannot work: give the goal more detail or use a stronger model",
        )
    )


def unread_calls(run: Run, response: ModelResponse, usage: ModelUse) -> StepResult:
    """Calls the reply tried to make but that could not be read (malformed text, cut at ``max_tokens``): each is a
    failed step the model is told about in one message, so it can send it again properly."""
    max_tokens = run.ctx.deps.settings.model.max_tokens_for("act")
    errors = []
    result: StepResult = Continue()
    for index, unread in enumerate(response.unread_calls):
        error = render_prompt("errors/unread_call", call=unread, max_tokens=max_tokens)
        errors.append(error)
        name = unread.name or "(unreadable call)"
        record = step_record(run.ctx.state.step, "tool", usage if index == 0 else usage.later(), text=unread.text)
        log_step(run.ctx, record.model_copy(update={"tool": name, "ok": False, "error": error,
                                                     "reason_short": ""}))
        if isinstance(result, Continue):
            result = repeated_failure(run, name, unread.text, error)
    run.messages.append(Message(role="user", content=render_prompt("errors/unread_calls", errors=errors)))
    return result


def _canonical_arguments(arguments: str) -> object:
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments.strip()
