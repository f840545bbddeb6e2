"""``open_model`` and the OpenAI client's configuration errors: each says what is wrong and what to do."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrator.config import ModelSettings
from orchestrator.errors import ConfigError, ModelError
from orchestrator.llm.factory import open_model, parse_model_spec
from orchestrator.llm.interface import ChatModel, Message, Usage
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.scenario_server import start_scenario_server


def test_openai_models_honour_openai_base_url_and_key(write_scenario, fast_settings, monkeypatch) -> None:
    path = write_scenario("goal: g\nsteps:\n  - reply: {content: from the env server}\n")
    with start_scenario_server(path) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "local-placeholder")
        with open_model("openai:llama3.1:8b", fast_settings) as model:
            assert isinstance(model, ChatModel)
            assert model.name == "openai:llama3.1:8b"
            response = model.complete([Message(role="user", content="hi")])
    assert response.content == "from the env server"
    assert server.requests[0]["model"] == "llama3.1:8b"


def test_a_missing_api_key_fails_before_any_call(fast_settings, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ModelError) as info, open_model("openai:gpt-4o-mini", fast_settings):
        pytest.fail("no model should be opened without a key")
    assert info.value.message.startswith("OPENAI_API_KEY is not set; ")
    assert "scripted:PATH" in info.value.message
    assert info.value.next_step


def test_an_empty_api_key_counts_as_missing(fast_settings, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(ModelError, match="OPENAI_API_KEY is not set"):
        OpenAIChatModel("gpt-4o-mini", fast_settings)


@pytest.mark.parametrize("spec", ["gpt-4o", "anthropic:claude", "openai:", "scripted:", ""])
def test_an_unknown_model_form_lists_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_model_spec(spec)
    assert "openai:NAME" in info.value.message
    assert "scripted:PATH" in info.value.message
    with pytest.raises(ConfigError), open_model(spec, ModelSettings()):
        pytest.fail("unreachable")


def test_a_missing_scenario_file_is_a_config_error(tmp_path) -> None:
    with (
        pytest.raises(ConfigError, match="cannot read scenario file"),
        open_model(f"scripted:{tmp_path / 'missing.yaml'}", ModelSettings()),
    ):
        pytest.fail("unreachable")


def test_connection_refused_is_clear_and_fast(fast_settings) -> None:
    # The autouse fixture points OPENAI_BASE_URL at a closed loopback port.
    started = time.monotonic()
    with open_model("openai:gpt-4o-mini", fast_settings) as model, pytest.raises(ModelError) as info:
        model.complete([Message(role="user", content="hi")], purpose="plan")
    assert time.monotonic() - started < 3
    assert info.value.message.startswith("cannot connect to the model server at http://127.0.0.1:9/v1")
    assert info.value.where == "model:plan"
    assert info.value.retryable is True
    assert "OPENAI_BASE_URL" in (info.value.next_step or "")


def test_the_api_key_never_appears_in_errors(fast_settings, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value-123456")
    with open_model("openai:gpt-4o-mini", fast_settings) as model, pytest.raises(ModelError) as info:
        model.complete([Message(role="user", content="hi")])
    assert "sk-very-secret" not in str(info.value)
    assert "sk-very-secret" not in repr(info.value.to_dict())


class _BareHandler(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible server that omits ``usage``, as some local servers do."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "bare",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_usage_is_zero_when_the_server_reports_none(fast_settings) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BareHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with OpenAIChatModel("bare", fast_settings, base_url=base_url) as model:
            response = model.complete([Message(role="user", content="hi")])
    finally:
        server.shutdown()
        server.server_close()
    assert response.content == "hi"
    assert response.usage == Usage()


def test_a_server_that_never_answers_times_out_with_advice() -> None:
    with socket.socket() as silent:  # accepts connections (backlog) but never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        base_url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        settings = ModelSettings(max_retries=0, request_timeout_s=0.3)
        with OpenAIChatModel("slow", settings, base_url=base_url) as model, pytest.raises(ModelError) as info:
            model.complete([Message(role="user", content="hi")])
    assert "did not answer within 0.3s" in info.value.message
    assert "ORCH_MODEL__REQUEST_TIMEOUT_S" in (info.value.next_step or "")
    assert info.value.retryable is True
