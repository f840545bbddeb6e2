"""What OpenAI-compatible servers send besides the API's own shape, read through the real ``openai`` client: call
arguments as an object instead of JSON text, the older single ``function_call`` field, and reasoning models'
``<think>`` blocks, whose calls are only considered, never made."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from orchestrator.llm.interface import Message, ToolSpec
from orchestrator.llm.jsonreply import json_in_reply
from orchestrator.llm.openai_client import OpenAIChatModel

READ_REF = ToolSpec(name="read_ref", description="read", parameters={"type": "object"})


class _Handler(BaseHTTPRequestHandler):
    message: dict[str, Any] = {}

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "quirky",
                           "choices": [{"index": 0, "message": self.message, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def answer(fast_settings) -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def complete(message: dict[str, Any]) -> Any:
        _Handler.message = {"role": "assistant", **message}
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with OpenAIChatModel("quirky", fast_settings, base_url=base_url) as model:
            return model.complete([Message(role="user", content="go")], tools=[READ_REF], purpose="act")

    try:
        yield complete
    finally:
        server.shutdown()
        server.server_close()


def test_call_arguments_sent_as_an_object_are_the_arguments(answer) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_ref", "arguments": {"path": "a.md"}}}
    [got] = answer({"content": None, "tool_calls": [call]}).tool_calls
    assert (got.id, got.name, json.loads(got.arguments)) == ("c1", "read_ref", {"path": "a.md"})


def test_the_older_function_call_field_is_a_call(answer) -> None:
    [got] = answer({"content": None, "function_call": {"name": "read_ref", "arguments": '{"path": "a.md"}'}}).tool_calls
    assert got.name == "read_ref" and json.loads(got.arguments) == {"path": "a.md"} and got.id


def test_a_call_only_thought_about_is_not_made(answer) -> None:
    thinking = '<think>\nMaybe {"name": "read_ref", "arguments": {"path": "guess.md"}} first?\n</think>\n'
    response = answer({"content": thinking + '{"name": "read_ref", "arguments": {"path": "a.md"}}'})
    assert [json.loads(c.arguments)["path"] for c in response.tool_calls] == ["a.md"]
    assert answer({"content": thinking.removesuffix("</think>\n")}).tool_calls == ()  # cut while thinking


def test_an_answer_after_thinking_is_the_answer() -> None:
    text = '<think>The plan could be {"steps": []} but no.</think>\n{"steps": [{"skill": "brand-guidelines"}]}'
    assert json_in_reply(text) == {"steps": [{"skill": "brand-guidelines"}]}
