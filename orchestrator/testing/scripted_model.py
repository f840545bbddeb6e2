"""In-memory fakes of :class:`~orchestrator.llm.interface.ChatModel` for unit tests (no HTTP, no ``openai``).

``ScriptedModel`` plays a list of responses in order, records every call and fails loudly on a call nobody
scripted; ``FunctionModel`` answers with a function of the conversation so far, for branching cases. Neither
parses prompts: a test scripts *what the model says*, and the function form decides from the typed history
(e.g. the last tool result), never from prompt wording.

Tool calls built by the helpers have an empty id; the fakes give them deterministic ids (``call_<n>_<i>``,
``n`` the 1-based call number), like the scenario server does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.llm.interface import Message, ModelResponse, Purpose, ToolCall, ToolSpec, Usage
from orchestrator.llm.scenario import ScriptMismatch, estimate_completion_tokens, estimate_prompt_tokens

ResponseFn = Callable[[list[Message], list[ToolSpec], Purpose], ModelResponse]
"""``fn(messages, tools, purpose) -> ModelResponse``: an answer computed from the typed history."""


class RecordedCall(BaseModel):
    """One call a fake model received."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    purpose: Purpose
    json_response: bool = False

    @property
    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    @property
    def last_message(self) -> Message | None:
        return self.messages[-1] if self.messages else None


# --- response helpers -----------------------------------------------------------------------------


def text_response(
    text: str, *, prompt_tokens: int = 0, completion_tokens: int = 0, finish_reason: str = "stop"
) -> ModelResponse:
    """A plain assistant answer."""
    return ModelResponse(
        content=text,
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        finish_reason=finish_reason,
    )


def json_response(value: Any, *, prompt_tokens: int = 0, completion_tokens: int = 0) -> ModelResponse:
    """An assistant answer whose content is ``value`` as JSON text (for ``json_response=True`` calls)."""
    return text_response(
        json.dumps(value, ensure_ascii=False),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def tool_call(tool: str, /, **arguments: Any) -> ToolCall:
    """One tool call with JSON arguments (the id is filled in by the fake model)."""
    return ToolCall(id="", name=tool, arguments=json.dumps(arguments, ensure_ascii=False))


def tool_call_response(
    tool: str, /, *, _content: str | None = None, _usage: Usage | None = None, **arguments: Any
) -> ModelResponse:
    """An answer calling one tool: ``tool_call_response("run_script", path="scripts/build.py", args={})``."""
    return tool_calls_response(tool_call(tool, **arguments), content=_content, usage=_usage)


def tool_calls_response(
    *calls: ToolCall, content: str | None = None, usage: Usage | None = None
) -> ModelResponse:
    """An answer that calls several tools at once (build each with :func:`tool_call`)."""
    return ModelResponse(
        content=content, tool_calls=calls, usage=usage or Usage(), finish_reason="tool_calls"
    )


def raw_tool_call_response(tool: str, arguments_text: str) -> ModelResponse:
    """An answer whose tool-call arguments are exactly ``arguments_text`` (e.g. invalid JSON)."""
    call = ToolCall(id="", name=tool, arguments=arguments_text)
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")


# --- the fakes ------------------------------------------------------------------------------------


class _RecordingModel:
    """Shared bookkeeping: records calls, numbers tool-call ids and optionally estimates usage."""

    def __init__(self, *, name: str, estimate_usage: bool) -> None:
        self.name = name
        self.estimate_usage = estimate_usage
        self.calls: list[RecordedCall] = []

    def _record(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], purpose: Purpose, json_response: bool
    ) -> RecordedCall:
        call = RecordedCall(
            messages=tuple(messages), tools=tuple(tools), purpose=purpose, json_response=json_response
        )
        self.calls.append(call)
        return call

    def _finish(self, response: Any, call: RecordedCall) -> ModelResponse:
        if not isinstance(response, ModelResponse):
            raise ScriptMismatch(
                f"{self.name}: call {len(self.calls)} produced {type(response).__name__}, "
                "not a ModelResponse",
                where="model",
            )
        n = len(self.calls)
        calls = tuple(
            c if c.id else c.model_copy(update={"id": f"call_{n}_{i}"})
            for i, c in enumerate(response.tool_calls)
        )
        update: dict[str, Any] = {"tool_calls": calls, "model": response.model or self.name}
        if self.estimate_usage and response.usage.total_tokens == 0:
            update["usage"] = Usage(
                prompt_tokens=estimate_prompt_tokens(
                    [m.to_openai() for m in call.messages], [t.to_openai() for t in call.tools]
                ),
                completion_tokens=estimate_completion_tokens(response.content, [c.arguments for c in calls]),
            )
        return response.model_copy(update=update)


class ScriptedModel(_RecordingModel):
    """Plays ``responses`` in order: each a :class:`ModelResponse`, or a :data:`ResponseFn` given the history.

    The goal restated for the skill search (purpose ``select``) is answered from ``restatements`` in order, and with
    no text once they are used up (as a scenario that scripts no ``select`` step answers it); those calls are
    recorded in ``select_calls``, not ``calls``, and take none of ``responses``.

    With ``estimate_usage=True`` a response whose usage is zero gets the estimate the scenario server reports.
    """

    def __init__(
        self,
        responses: Iterable[ModelResponse | ResponseFn],
        *,
        name: str = "scripted-memory",
        estimate_usage: bool = False,
        restatements: Iterable[str] = (),
    ) -> None:
        super().__init__(name=name, estimate_usage=estimate_usage)
        self.responses = list(responses)
        self.restatements = list(restatements)
        self.select_calls: list[RecordedCall] = []

    @property
    def remaining(self) -> int:
        return len(self.responses) - len(self.calls)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        if purpose == "select":
            call = RecordedCall(
                messages=tuple(messages), tools=tuple(tools), purpose=purpose, json_response=json_response
            )
            self.select_calls.append(call)
            played = len(self.select_calls) - 1
            text = self.restatements[played] if played < len(self.restatements) else ""
            return ModelResponse(content=text, model=self.name)
        call = self._record(messages, tools, purpose, json_response)
        index = len(self.calls) - 1
        if index >= len(self.responses):
            last = call.last_message
            seen = f"; last message ({last.role}): {(last.content or '')[:200]!r}" if last else ""
            raise ScriptMismatch(
                f"{self.name}: unexpected call {index + 1} (purpose {purpose}): only {len(self.responses)} "
                f"responses were scripted{seen}",
                where="model",
                next_step="script another response, or find why the runtime made an extra model call",
            )
        scripted = self.responses[index]
        response = (
            scripted
            if isinstance(scripted, ModelResponse)
            else scripted(list(messages), list(tools), purpose)
        )
        return self._finish(response, call)

    def assert_all_used(self) -> None:
        """Raise :class:`ScriptMismatch` if some scripted responses were never requested."""
        if self.remaining > 0:
            raise ScriptMismatch(
                f"{self.name}: {self.remaining} of {len(self.responses)} scripted responses were never used "
                f"(the runtime stopped after {len(self.calls)} calls)",
                where="model",
            )


class FunctionModel(_RecordingModel):
    """Answers every call with ``fn(messages, tools, purpose)``; records calls like :class:`ScriptedModel`."""

    def __init__(self, fn: ResponseFn, *, name: str = "function-model", estimate_usage: bool = False) -> None:
        super().__init__(name=name, estimate_usage=estimate_usage)
        self.fn = fn

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        call = self._record(messages, tools, purpose, json_response)
        return self._finish(self.fn(list(messages), list(tools), purpose), call)
