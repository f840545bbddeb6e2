"""The in-memory fakes: scripted answers in order, recorded calls, loud failures, history-driven branching."""

from __future__ import annotations

import json

import pytest

from orchestrator.errors import ModelError
from orchestrator.llm.interface import ChatModel, Message, ModelResponse, ToolCall, ToolSpec, Usage
from orchestrator.testing import (
    FunctionModel,
    ScriptedModel,
    ScriptMismatch,
    json_response,
    raw_tool_call_response,
    text_response,
    tool_call,
    tool_call_response,
    tool_calls_response,
)

TOOL = ToolSpec(name="run_script", description="run", parameters={"type": "object"})


def user(text: str) -> Message:
    return Message(role="user", content=text)


def test_responses_are_played_in_order_and_calls_recorded() -> None:
    model = ScriptedModel(
        [tool_call_response("run_script", path="scripts/build.py", args={"n": 1}), text_response("done")]
    )
    assert isinstance(model, ChatModel)
    first = model.complete([user("go")], tools=[TOOL], purpose="act")
    second = model.complete([user("go"), first.as_message()], purpose="reflect", json_response=True)
    assert first.tool_calls == (
        ToolCall(
            id="call_1_0", name="run_script", arguments='{"path": "scripts/build.py", "args": {"n": 1}}'
        ),
    )
    assert first.finish_reason == "tool_calls"
    assert second.content == "done"
    assert [c.purpose for c in model.calls] == ["act", "reflect"]
    assert model.calls[0].tool_names == ["run_script"]
    assert model.calls[1].json_response is True
    assert model.calls[1].messages[1].tool_calls[0].id == "call_1_0"
    model.assert_all_used()


def test_an_unexpected_extra_call_fails_loudly() -> None:
    model = ScriptedModel([text_response("only")])
    model.complete([user("one")])
    with pytest.raises(ScriptMismatch) as info:
        model.complete([user("two please")], purpose="plan")
    assert isinstance(info.value, ModelError)
    assert isinstance(info.value, AssertionError)
    assert "unexpected call 2 (purpose plan): only 1 responses were scripted" in info.value.message
    assert "'two please'" in info.value.message
    assert len(model.calls) == 2


@pytest.mark.unused_script_steps
def test_unused_responses_fail_assert_all_used() -> None:
    model = ScriptedModel([text_response("a"), text_response("b")])
    model.complete([user("one")])
    assert model.remaining == 1
    with pytest.raises(ScriptMismatch, match="1 of 2 scripted responses were never used"):
        model.assert_all_used()


def test_a_scripted_callable_answers_from_the_history() -> None:
    def after_tool(messages: list[Message], tools: list[ToolSpec], purpose: str) -> ModelResponse:
        last = messages[-1]
        assert last.role == "tool"
        return text_response("retry" if json.loads(last.content or "{}")["ok"] is False else "done")

    model = ScriptedModel([tool_call_response("run_script", path="a.py"), after_tool])
    first = model.complete([user("go")])
    failed = Message(role="tool", tool_call_id=first.tool_calls[0].id, content='{"ok": false}')
    assert model.complete([user("go"), first.as_message(), failed]).content == "retry"


def test_a_function_model_branches_on_the_history_for_every_call() -> None:
    def fn(messages: list[Message], tools: list[ToolSpec], purpose: str) -> ModelResponse:
        tool_results = [m for m in messages if m.role == "tool"]
        if len(tool_results) < 2:
            return tool_call_response("run_script", attempt=len(tool_results) + 1)
        return text_response(f"finished after {len(tool_results)} results")

    model = FunctionModel(fn)
    history = [user("go")]
    for _ in range(3):
        response = model.complete(history, tools=[TOOL])
        history.append(response.as_message())
        for call in response.tool_calls:
            history.append(Message(role="tool", tool_call_id=call.id, content="{}"))
    assert response.content == "finished after 2 results"
    assert [m.tool_calls[0].id for m in history if m.role == "assistant" and m.tool_calls] == [
        "call_1_0",
        "call_2_0",
    ]
    assert len(model.calls) == 3


def test_estimated_usage_is_filled_in_only_when_asked_and_not_given() -> None:
    given = Usage(prompt_tokens=5, completion_tokens=1)
    model = ScriptedModel(
        [text_response("hello"), text_response("hi", prompt_tokens=5, completion_tokens=1)],
        estimate_usage=True,
    )
    estimated = model.complete([user("x" * 400)], tools=[TOOL])
    assert estimated.usage.prompt_tokens > 100
    assert estimated.usage.completion_tokens == 2
    assert model.complete([user("x")]).usage == given
    plain = ScriptedModel([text_response("hello")])
    assert plain.complete([user("x" * 400)]).usage == Usage()


def test_helpers_build_terse_responses() -> None:
    both = tool_calls_response(tool_call("read_ref", ref="a.md"), tool_call("list_files", glob="*.md"))
    assert [c.name for c in both.tool_calls] == ["read_ref", "list_files"]
    assert json.loads(json_response({"pass": True}).content or "") == {"pass": True}
    assert raw_tool_call_response("run_script", "{broken").tool_calls[0].arguments == "{broken"
    # A tool argument may be called `name` without clashing with the helper's own parameters.
    assert json.loads(tool_call_response("blackboard_put", name="k", value=1).tool_calls[0].arguments) == {
        "name": "k",
        "value": 1,
    }


def test_ids_given_explicitly_are_kept() -> None:
    response = ModelResponse(tool_calls=(ToolCall(id="mine", name="run_script"),))
    assert ScriptedModel([response]).complete([user("go")]).tool_calls[0].id == "mine"


def test_a_callable_that_returns_something_else_is_a_script_error() -> None:
    model = FunctionModel(lambda messages, tools, purpose: "not a response")  # type: ignore[arg-type,return-value]
    with pytest.raises(ScriptMismatch, match="produced str, not a ModelResponse"):
        model.complete([user("go")])
