"""``record-llm``: a pass-through proxy that records real sessions, and their replay as scenarios."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config import ModelSettings
from orchestrator.errors import ConfigError, ModelError
from orchestrator.llm.factory import open_model, open_scripted_model
from orchestrator.llm.interface import Message, ToolSpec
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.recorder import RecordingProxy, load_recording
from orchestrator.llm.scenario import load_scenario, parse_scenario
from orchestrator.llm.scenario_server import start_scenario_server

FAST = ModelSettings(max_retries=0, request_timeout_s=10)
SECRET = "sk-recorded-never-0123456789abcdef"
TOOLS = [ToolSpec(name="read_ref", description="d", parameters={"type": "object"})]

# What the "real" upstream says: a text tool call, a native tool call, a cut reply, then a refusal.
UPSTREAM = {
    "goal": "g",
    "steps": [
        {"reply": {"content": '```json\n{"name": "read_ref", "arguments": {"path": "a.md"}}\n```'}},
        {"reply": {"tool_calls": [{"name": "read_ref", "arguments": '{"path": "b.md"}'}],
                   "usage": {"prompt_tokens": 900, "completion_tokens": 12, "cached_tokens": 800}}},
        {"reply": {"content": "a very long answer that", "finish_reason": "length"}},
        {"reply": {"error": {"status": 400, "message": "context length exceeded"}}},
    ],
}


def _session(model: OpenAIChatModel) -> list[object]:
    got: list[object] = []
    for purpose in ("plan", "act", "reflect", "semantic"):
        try:
            got.append(model.complete([Message(role="user", content=purpose)], tools=TOOLS, purpose=purpose))
        except ModelError as e:
            got.append(str(e.message))
    return got


def test_a_recorded_session_replays_the_same_replies_offline(tmp_path: Path) -> None:
    upstream = parse_scenario(json.dumps(UPSTREAM))
    with start_scenario_server(upstream) as real, RecordingProxy(real.base_url, tmp_path / "rec", goal="G") as proxy:
        live = _session(OpenAIChatModel("qwen", FAST, api_key=SECRET, base_url=proxy.base_url))
    assert proxy.exchanges == 4
    text = (tmp_path / "rec" / "exchanges.jsonl").read_text()
    assert SECRET not in text and SECRET not in (tmp_path / "rec" / "recording.json").read_text()
    first = json.loads(text.splitlines()[0])
    assert first["purpose"] == "plan" and first["status"] == 200
    assert first["request"]["messages"][0]["content"] == "plan"

    replay = load_scenario(tmp_path / "rec")
    assert replay.goal == "G"
    assert [s.purpose for s in replay.steps] == ["plan", "act", "reflect", "semantic"]
    with open_scripted_model(replay, FAST) as (model, server):
        replayed = _session(model)
    server.assert_all_used()
    assert [getattr(r, "tool_calls", None) for r in replayed] == [getattr(r, "tool_calls", None) for r in live]
    assert [getattr(r, "content", None) for r in replayed] == [getattr(r, "content", None) for r in live]
    assert [getattr(r, "finish_reason", None) for r in replayed] == ["stop", "tool_calls", "length", None]
    assert replayed[1].usage.cached_tokens == 800  # type: ignore[union-attr]
    assert "context length exceeded" in str(replayed[3])


def test_a_recording_replays_through_model_specs_too(tmp_path: Path) -> None:
    upstream = parse_scenario(json.dumps({"goal": "g", "steps": [{"reply": {"content": "recorded"}}]}))
    with start_scenario_server(upstream) as real, RecordingProxy(real.base_url, tmp_path / "rec") as proxy:
        model = OpenAIChatModel("qwen", FAST, api_key="x", base_url=proxy.base_url)
        model.complete([Message(role="user", content="q")])
    with open_model(f"scripted:{tmp_path / 'rec'}", FAST) as model:
        assert model.complete([Message(role="user", content="q")]).content == "recorded"


def test_an_unreachable_upstream_is_a_clear_502(tmp_path: Path) -> None:
    with RecordingProxy("http://127.0.0.1:9/v1", tmp_path / "rec") as proxy:
        model = OpenAIChatModel("qwen", FAST, api_key="x", base_url=proxy.base_url)
        with pytest.raises(ModelError, match="could not reach the upstream server http://127.0.0.1:9/v1"):
            model.complete([Message(role="user", content="q")])


@pytest.mark.parametrize("upstream", ["127.0.0.1:8765", "ftp://host/v1", ""])
def test_an_upstream_that_is_not_an_http_url_is_refused(tmp_path: Path, upstream: str) -> None:
    with pytest.raises(ConfigError, match="not an http"):
        RecordingProxy(upstream, tmp_path / "rec")


def test_a_malformed_recording_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "exchanges.jsonl").write_text('{"status": 200, "response": {"choices": []}}\n')
    with pytest.raises(ConfigError, match=r"exchanges.jsonl:1"):
        load_recording(tmp_path)


def test_the_cli_proxy_prints_its_url_records_and_stops_on_sigterm(tmp_path: Path) -> None:
    upstream = parse_scenario(json.dumps({"goal": "g", "steps": [{"reply": {"content": "hi"}}]}))
    with start_scenario_server(upstream) as real:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "record-llm", "--upstream", real.base_url, "--out",
             str(tmp_path / "rec")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
        )
        try:
            assert proc.stdout is not None
            base_url = proc.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
            answer = OpenAIChatModel("m", FAST, api_key="x", base_url=base_url).complete(
                [Message(role="user", content="q")]
            )
            assert answer.content == "hi"
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "recorded 1 exchanges" in err
    assert len((tmp_path / "rec" / "exchanges.jsonl").read_text().splitlines()) == 1
