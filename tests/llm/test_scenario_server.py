"""The real ``openai`` client against our scenario server over HTTP: replies, usage, expectations, traces."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import openai
import pytest

from orchestrator.config import ModelSettings
from orchestrator.errors import ModelError, ModelErrorCode
from orchestrator.llm.factory import open_model, open_scripted_model
from orchestrator.llm.interface import Message, ToolCall, ToolSpec
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.scenario import ScriptMismatch
from orchestrator.llm.scenario_server import start_scenario_server

RUN_SCRIPT = ToolSpec(
    name="run_script",
    description="Run a skill script in the sandbox.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
READ_REF = ToolSpec(name="read_ref", description="Read a referenced file.", parameters={"type": "object"})


def user(text: str) -> Message:
    return Message(role="user", content=text)


def raw_client(base_url: str) -> openai.OpenAI:
    """The plain SDK client, ignoring any proxy from the environment (the server is on loopback)."""
    http_client = openai.DefaultHttpxClient(trust_env=False)
    return openai.OpenAI(api_key="x", base_url=base_url, max_retries=0, http_client=http_client)


def test_tool_calls_round_trip_through_the_real_client(write_scenario, fast_settings) -> None:
    path = write_scenario(
        """
        goal: build a deck
        model: scripted-demo
        steps:
          - purpose: act
            delay_ms: 150
            reply:
              content: "building"
              tool_calls:
                - name: run_script
                  arguments: {path: scripts/build.py, args: {title: Q3}}
                - name: read_ref
                  arguments: '{"ref": "brand.md"'
        """
    )
    with open_model(f"scripted:{path}", fast_settings) as model:
        response = model.complete([user("go")], tools=[RUN_SCRIPT, READ_REF], purpose="act")
    assert model.name == f"scripted:{path}"
    assert response.content == "building"
    assert response.tool_calls == (
        ToolCall(
            id="call_1_0",
            name="run_script",
            arguments='{"path": "scripts/build.py", "args": {"title": "Q3"}}',
        ),
        ToolCall(id="call_1_1", name="read_ref", arguments='{"ref": "brand.md"'),
    )
    assert response.finish_reason == "tool_calls"
    assert response.model == "scripted-demo"
    assert response.latency_ms >= 150  # the step's think time is in the measured latency


def test_the_request_carries_tools_settings_purpose_and_json_mode(write_scenario) -> None:
    path = write_scenario("goal: g\nsteps:\n  - reply: {content: '{\"ok\": true}'}\n")
    settings = ModelSettings(temperature=0.3, seed=42, max_retries=0)
    with open_scripted_model(path, settings) as (model, server):
        response = model.complete([user("hi")], tools=[RUN_SCRIPT], purpose="semantic", json_response=True)
    assert response.content == '{"ok": true}'
    assert response.finish_reason == "stop"
    [body] = server.requests
    assert body["temperature"] == 0.3
    assert body["seed"] == 42
    assert body["response_format"] == {"type": "json_object"}
    assert body["tools"] == [RUN_SCRIPT.to_openai()]
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert server.purposes == ["semantic"]


def test_no_tools_key_is_sent_when_no_tools_are_offered(write_scenario, fast_settings) -> None:
    path = write_scenario("goal: g\nsteps:\n  - reply: {content: hi}\n")
    with open_scripted_model(path, fast_settings) as (model, server):
        model.complete([user("hi")])
    assert "tools" not in server.requests[0]
    assert "response_format" not in server.requests[0]


def test_scripted_usage_is_reported_as_written(write_scenario, fast_settings) -> None:
    path = write_scenario(
        "goal: g\nsteps:\n  - reply: {content: hi, usage: {prompt_tokens: 120, completion_tokens: 20}}\n"
    )
    with open_model(f"scripted:{path}", fast_settings) as model:
        response = model.complete([user("hi")])
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (120, 20)


def test_estimated_usage_grows_with_what_the_runtime_sends(write_scenario, fast_settings) -> None:
    path = write_scenario(
        """
        goal: g
        steps:
          - reply: {content: short}
          - reply: {content: short}
          - reply:
              content: a much longer answer than the first one, with many more words in it
        """
    )
    with open_model(f"scripted:{path}", fast_settings) as model:
        small = model.complete([user("hi")])
        large = model.complete([user("hi " * 400)], tools=[RUN_SCRIPT])
        longer_answer = model.complete([user("hi")])
    assert 0 < small.usage.prompt_tokens < large.usage.prompt_tokens
    assert large.usage.prompt_tokens >= 300
    assert small.usage.completion_tokens < longer_answer.usage.completion_tokens


def test_matching_expectations_let_the_step_play(write_scenario, fast_settings) -> None:
    path = write_scenario(
        """
        goal: g
        steps:
          - purpose: act
            expect:
              contains: ["brand-guidelines", 'script "build.py"']
              not_contains: ["Brand colors"]
              tool_result_for: [read_ref]
              last_tool_result_contains: ['"ok": false']
              tools_offered: [run_script]
            reply: {content: fine}
        """
    )
    history = [
        user('use brand-guidelines and the script "build.py"'),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="read_ref", arguments="{}"),)),
        Message(role="tool", tool_call_id="c1", content=json.dumps({"ok": False, "error": "missing"})),
    ]
    with open_scripted_model(path, fast_settings) as (model, server):
        assert model.complete(history, tools=[RUN_SCRIPT], purpose="act").content == "fine"
    server.assert_all_used()
    assert server.failures == []


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        ("contains: [abc]", "expected request to contain 'abc'"),
        ("not_contains: [hello]", "expected request not to contain 'hello'"),
        ("tool_result_for: [read_ref]", "expected a tool result for a call of 'read_ref'"),
        ("last_tool_result_contains: [ok]", "expected a tool result, but the request has no tool message"),
        ("tools_offered: [validate]", "expected tool 'validate' to be offered"),
    ],
)
def test_an_unmet_expectation_is_a_model_error_with_the_scenario_message(
    write_scenario, fast_settings, expect: str, problem: str
) -> None:
    path = write_scenario(
        f"goal: g\nsteps:\n  - purpose: act\n    expect: {{{expect}}}\n    reply: {{content: x}}\n"
    )
    with open_scripted_model(path, fast_settings) as (model, server), pytest.raises(ModelError) as info:
        model.complete([user("hello")], tools=[RUN_SCRIPT], purpose="act")
    # The adapter treats our server like any OpenAI-compatible one: a 400 whose message is the scenario's.
    assert info.value.message.endswith(f"(HTTP 400): scenario {path} step 1 (purpose act): {problem}")
    assert info.value.code is ModelErrorCode.REQUEST_REJECTED
    assert info.value.data["server_code"] == "scenario_mismatch"
    assert info.value.where == "model:act"
    assert server.failures == [f"scenario {path} step 1 (purpose act): {problem}"]
    with pytest.raises(ScriptMismatch, match="1 of 1 steps were never requested"):
        server.assert_all_used()


def test_a_tool_result_for_another_tool_does_not_count(write_scenario, fast_settings) -> None:
    path = write_scenario(
        "goal: g\nsteps:\n  - expect: {tool_result_for: [read_ref]}\n    reply: {content: x}\n"
    )
    history = [
        user("go"),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="list_files", arguments="{}"),)),
        Message(role="tool", tool_call_id="c1", content="[]"),
    ]
    with (
        open_model(f"scripted:{path}", fast_settings) as model,
        pytest.raises(ModelError, match="'read_ref'"),
    ):
        model.complete(history)


def test_the_purpose_header_is_checked(write_scenario, fast_settings) -> None:
    path = write_scenario("goal: g\nsteps:\n  - purpose: plan\n    reply: {content: x}\n")
    with open_scripted_model(path, fast_settings) as (model, server):
        with pytest.raises(
            ModelError, match=r"expected purpose 'plan' \(header X-Orch-Purpose\) but got 'act'"
        ):
            model.complete([user("hi")], purpose="act")
        assert model.complete([user("hi")], purpose="plan").content == "x"
    assert server.steps_left == 0  # a mismatch does not use up the step
    assert len(server.failures) == 1
    with pytest.raises(ScriptMismatch, match="expected purpose 'plan'"):
        server.assert_all_used()


def test_a_request_after_the_last_step_is_refused(write_scenario, fast_settings) -> None:
    path = write_scenario("goal: g\nsteps:\n  - reply: {content: only}\n")
    with open_scripted_model(path, fast_settings) as (model, server):
        model.complete([user("one")])
        with pytest.raises(ModelError) as info:
            model.complete([user("two")], purpose="reflect")
    assert info.value.message.endswith(
        f"(HTTP 400): scenario {path}: request 2 (purpose reflect) came after all 1 steps were used; "
        "the runtime made more model calls than scripted"
    )
    assert len(server.failures) == 1


def test_forbidden_text_fails_any_request_even_inside_a_json_tool_result(
    write_scenario, fast_settings
) -> None:
    path = write_scenario(
        """
        goal: g
        forbid: ['print("secret source")']
        steps:
          - reply: {content: a}
          - reply: {content: b}
        """
    )
    leak = json.dumps({"ok": True, "source": 'import sys\nprint("secret source")\n'})
    history = [
        user("go"),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="read_file", arguments="{}"),)),
        Message(role="tool", tool_call_id="c1", content=leak),
    ]
    with open_model(f"scripted:{path}", fast_settings) as model:
        assert model.complete([user("go")]).content == "a"
        with pytest.raises(ModelError, match=r"step 2 \(purpose other\): request contains forbidden text"):
            model.complete(history)


def test_the_trace_file_gets_one_json_line_per_request(write_scenario, fast_settings, tmp_path: Path) -> None:
    path = write_scenario("goal: g\nsteps:\n  - purpose: plan\n    reply: {content: a}\n")
    trace = tmp_path / "traces" / "requests.jsonl"
    with open_model(f"scripted:{path}", fast_settings, trace_path=trace) as model:
        model.complete([user("first")], purpose="plan")
        with pytest.raises(ModelError):
            model.complete([user("second")], purpose="act")
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    meta = [r["_trace"] for r in lines]
    assert [(r["request"], r["step"], r["purpose"], r["status"]) for r in meta] == [
        (1, 1, "plan", 200),
        (2, None, "act", 400),
    ]
    assert lines[0]["messages"] == [{"role": "user", "content": "first"}]
    assert lines[1]["messages"] == [{"role": "user", "content": "second"}]


def test_the_trace_path_defaults_to_the_environment(
    write_scenario, fast_settings, tmp_path, monkeypatch
) -> None:
    path = write_scenario("goal: g\nsteps:\n  - reply: {content: a}\n")
    trace = tmp_path / "env-trace.jsonl"
    monkeypatch.setenv("ORCH_SCRIPTED_TRACE", str(trace))
    with open_model(f"scripted:{path}", fast_settings) as model:
        model.complete([user("traced")])
    assert "traced" in trace.read_text(encoding="utf-8")


def test_models_route_lists_the_scenario_model(write_scenario) -> None:
    path = write_scenario("goal: g\nmodel: scripted-demo\nsteps:\n  - reply: {content: a}\n")
    with start_scenario_server(path) as server:
        client = raw_client(server.base_url)
        assert [m.id for m in client.models.list()] == ["scripted-demo"]
        assert client.models.retrieve("scripted-demo").id == "scripted-demo"
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("gpt-4o")
        with OpenAIChatModel("scripted-demo", api_key="x", base_url=server.base_url) as model:
            assert model.list_models() == ["scripted-demo"]
        client.close()
    assert server.requests == []


def test_streaming_is_refused_with_a_clear_error(write_scenario) -> None:
    path = write_scenario("goal: g\nsteps:\n  - reply: {content: a}\n")
    with start_scenario_server(path) as server:
        client = raw_client(server.base_url)
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        client.close()
    assert "streaming" in str(info.value)
    assert server.steps_left == 1


def test_concurrent_requests_each_get_their_own_step(write_scenario, fast_settings) -> None:
    steps = "".join(f"  - reply: {{content: 'answer {i}'}}\n" for i in range(8))
    path = write_scenario(f"goal: g\nsteps:\n{steps}")
    answers: list[str] = []
    with open_scripted_model(path, fast_settings) as (model, server):

        def call() -> None:
            answers.append(model.complete([user("hi")]).content or "")

        threads = [threading.Thread(target=call) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        server.assert_all_used()
    assert sorted(answers) == sorted(f"answer {i}" for i in range(8))


@pytest.mark.parametrize(
    ("status", "code", "expected", "retryable", "error_code"),
    [
        (401, "invalid_api_key", "rejected the API key (HTTP 401", False, ModelErrorCode.AUTH_REJECTED),
        (404, "model_not_found", "model 'scripted' was not found at", False, ModelErrorCode.MODEL_NOT_FOUND),
        (400, None, "rejected the request (HTTP 400): scripted error", False, ModelErrorCode.REQUEST_REJECTED),
        (500, None, "failed after 0 retries (HTTP 500", True, ModelErrorCode.SERVER_ERROR),
    ],
)
def test_server_errors_become_actionable_model_errors(
    write_scenario,
    fast_settings,
    status: int,
    code: str | None,
    expected: str,
    retryable: bool,
    error_code: ModelErrorCode,
) -> None:
    code_line = f", code: {code}" if code else ""
    path = write_scenario(f"goal: g\nsteps:\n  - reply: {{error: {{status: {status}{code_line}}}}}\n")
    with open_model(f"scripted:{path}", fast_settings) as model, pytest.raises(ModelError) as info:
        model.complete([user("hi")])
    assert expected in info.value.message
    assert info.value.retryable is retryable
    assert info.value.code is error_code
    assert info.value.to_dict()["code"] == error_code.value
    assert info.value.next_step


def test_rate_limits_are_retried_by_the_sdk_then_reported(write_scenario) -> None:
    path = write_scenario(
        """
        goal: g
        steps:
          - reply: {error: {status: 429, message: slow down, code: rate_limit_exceeded}}
          - reply: {error: {status: 429, message: slow down, code: rate_limit_exceeded}}
          - reply: {content: after the rate limit}
        """
    )
    settings = ModelSettings(max_retries=1, request_timeout_s=5)
    with open_scripted_model(path, settings) as (model, server):
        with pytest.raises(ModelError) as info:
            model.complete([user("hi")])
        assert server.steps_used == 2  # the first try and the SDK's one retry
        assert model.complete([user("hi")]).content == "after the rate limit"
    assert "after 1 retries (HTTP 429: slow down)" in info.value.message
    assert info.value.retryable is True
    assert info.value.code is ModelErrorCode.RATE_LIMITED


def test_a_retry_after_a_server_error_succeeds_transparently(write_scenario) -> None:
    path = write_scenario(
        "goal: g\nsteps:\n  - reply: {error: {status: 503, message: busy}}\n  - reply: {content: recovered}\n"
    )
    with open_scripted_model(path, ModelSettings(max_retries=2)) as (model, server):
        assert model.complete([user("hi")]).content == "recovered"
    server.assert_all_used()
