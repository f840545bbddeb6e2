"""The response cache: an identical deterministic request is answered from disk, nothing else ever is.

Requests go through the real ``openai`` client to our scenario server; the cache lives in a temporary folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.config import ModelSettings
from orchestrator.llm.factory import open_scripted_model
from orchestrator.llm.interface import Message, ToolSpec
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.response_cache import ResponseCache, request_key
from orchestrator.llm.scenario import parse_scenario
from orchestrator.llm.scenario_server import start_scenario_server

FAST = ModelSettings(max_retries=0, request_timeout_s=5)
HELLO = [Message(role="user", content="hello")]


def _scenario(*replies: str, **extra: object):
    steps = [{"reply": {"content": r}} for r in replies]
    return parse_scenario(json.dumps({"goal": "g", "steps": steps, **extra}))


def _model(server, cache: ResponseCache, settings: ModelSettings = FAST, *, model: str = "m") -> OpenAIChatModel:
    return OpenAIChatModel(model, settings, api_key="x", base_url=server.base_url, cache=cache)


@pytest.fixture
def cache(tmp_path: Path) -> ResponseCache:
    return ResponseCache(tmp_path / "responses")


def test_an_identical_deterministic_request_is_answered_from_the_cache(cache) -> None:
    with start_scenario_server(_scenario("first answer", "second answer")) as server:
        model = _model(server, cache)
        first = model.complete(HELLO, purpose="act")
        again = model.complete(HELLO, purpose="act")
    assert len(server.requests) == 1
    assert (first.content, first.cache_hit) == ("first answer", False)
    assert (again.content, again.cache_hit) == ("first answer", True)
    assert again.usage.prompt_tokens == again.usage.completion_tokens == 0
    assert first.usage.prompt_tokens > 0


@pytest.mark.parametrize(
    "change",
    ["messages", "tools", "model", "max_tokens", "seed", "purpose", "json", "base_url"],
)
def test_anything_that_decides_the_reply_makes_another_entry(cache, change: str) -> None:
    tool = ToolSpec(name="read_ref", description="d", parameters={"type": "object"})
    with start_scenario_server(_scenario("a", "b")) as server, start_scenario_server(_scenario("c")) as other:
        _model(server, cache).complete(HELLO, purpose="act")
        settings, messages, tools, purpose, json_response, target, name = FAST, HELLO, [], "act", False, server, "m"
        if change == "messages":
            messages = [Message(role="user", content="hello!")]
        elif change == "tools":
            tools = [tool]
        elif change == "model":
            name = "another-model"
        elif change == "max_tokens":
            settings = FAST.model_copy(update={"max_tokens": 100})
        elif change == "seed":
            settings = FAST.model_copy(update={"seed": 8})
        elif change == "purpose":
            purpose = "plan"
        elif change == "json":
            json_response = True
        else:
            target = other
        answer = _model(target, cache, settings, model=name).complete(
            messages, tools=tools, purpose=purpose, json_response=json_response
        )
    assert not answer.cache_hit
    assert answer.content in ("b", "c")


@pytest.mark.parametrize(
    "settings",
    [FAST.model_copy(update=change) for change in ({"temperature": 0.7}, {"seed": None}, {"response_cache": False})],
    ids=["temperature", "no-seed", "setting-off"],
)
def test_replies_that_may_differ_are_never_reused(cache, settings: ModelSettings) -> None:
    with start_scenario_server(_scenario("a", "b")) as server:
        model = _model(server, cache, settings)
        assert [model.complete(HELLO).content for _ in range(2)] == ["a", "b"]
    assert not any(cache.root.rglob("*.json"))


def test_errors_are_never_cached(cache) -> None:
    scenario = parse_scenario(json.dumps({"goal": "g", "steps": [
        {"reply": {"error": {"status": 400, "message": "bad"}}}, {"reply": {"content": "fine"}}]}))
    with start_scenario_server(scenario) as server:
        model = _model(server, cache)
        with pytest.raises(Exception, match="bad"):
            model.complete(HELLO)
        assert model.complete(HELLO).content == "fine"
    assert len(server.requests) == 2


def _only_entry(cache: ResponseCache) -> Path:
    entries = list(cache.root.rglob("*.json"))
    assert len(entries) == 1
    return entries[0]


@pytest.mark.parametrize("attack", ["garbage", "wrong-key-inside", "another-entry-copied-over", "symlink", "huge"])
def test_a_tampered_entry_is_a_miss_never_a_wrong_answer(cache, tmp_path: Path, attack: str) -> None:
    with start_scenario_server(_scenario("real", "asked again", "other")) as server:
        model = _model(server, cache)
        model.complete(HELLO)
        entry = _only_entry(cache)
        if attack == "garbage":
            entry.write_text("{not json")
        elif attack == "wrong-key-inside":
            data = json.loads(entry.read_text())
            data["key"] = "0" * 64
            entry.write_text(json.dumps(data))
        elif attack == "another-entry-copied-over":
            other = [Message(role="user", content="something else")]
            model.complete(other)
            other_key = request_key(model.cache_identity, model._request(other, [], "other", False), "other")
            other_path = cache.root / other_key[:2] / f"{other_key}.json"
            entry.write_bytes(other_path.read_bytes())
        elif attack == "symlink":
            target = tmp_path / "planted.json"
            target.write_text(entry.read_text().replace("real", "planted"))
            entry.unlink()
            os.symlink(target, entry)
        else:
            with entry.open("ab") as fh:
                fh.truncate(9 * 1024 * 1024)
        answer = model.complete(HELLO)
    assert not answer.cache_hit
    assert answer.content in ("asked again", "other")


def test_a_scripted_conversation_stays_in_step_when_its_first_turns_come_from_the_cache(cache, tmp_path) -> None:
    steps = [
        {"purpose": "plan", "reply": {"content": "plan"}},
        {"purpose": "act", "expect": {"contains": ["turn 2"]}, "reply": {"content": "act one"}},
        {"purpose": "act", "expect": {"contains": ["turn 3"]}, "reply": {"content": "act two"}},
    ]
    scenario = parse_scenario(json.dumps({"goal": "g", "steps": steps}))
    turns = [("plan", "turn 1"), ("act", "turn 2")]
    with open_scripted_model(scenario, FAST, cache=cache) as (model, server):
        for purpose, text in turns:
            model.complete([Message(role="user", content=text)], purpose=purpose)  # type: ignore[arg-type]
        model.complete([Message(role="user", content="turn 3")], purpose="act")
    assert server.steps_left == 0
    trace = tmp_path / "trace.jsonl"
    with open_scripted_model(scenario, FAST, cache=cache, trace_path=trace) as (model, server):
        replayed = [model.complete([Message(role="user", content=t)], purpose=p) for p, t in turns]  # type: ignore[arg-type]
        assert [r.cache_hit for r in replayed] == [True, True]
        fresh = model.complete([Message(role="user", content="turn 3, asked differently")], purpose="act")
    assert server.failures == []
    assert fresh.content == "act two" and not fresh.cache_hit
    assert json.loads(trace.read_text().splitlines()[0])["_trace"]["cached_turns_skipped"] == 2


def test_provider_prompt_cache_hits_are_reported() -> None:
    scenario = parse_scenario(json.dumps({"goal": "g", "steps": [
        {"reply": {"content": "ok", "usage": {"prompt_tokens": 4000, "completion_tokens": 10, "cached_tokens": 3500}}}
    ]}))
    with open_scripted_model(scenario, FAST) as (model, _):
        usage = model.complete(HELLO).usage
    assert (usage.prompt_tokens, usage.cached_tokens) == (4000, 3500)


@pytest.mark.parametrize(("purpose", "expected"), [("act", 4096), ("reflect", 512), ("plan", 2048), ("other", 4096)])
def test_every_request_sends_max_tokens_by_purpose(purpose: str, expected: int) -> None:
    with open_scripted_model(_scenario("ok"), FAST) as (model, server):
        model.complete(HELLO, purpose=purpose)  # type: ignore[arg-type]
    assert server.requests[0]["max_tokens"] == expected


def test_servers_that_want_max_completion_tokens_get_it_instead() -> None:
    settings = FAST.model_copy(update={"max_tokens_param": "max_completion_tokens", "max_tokens": 300})
    with open_scripted_model(_scenario("ok"), settings) as (model, server):
        model.complete(HELLO, purpose="act")
    assert server.requests[0]["max_completion_tokens"] == 300
    assert "max_tokens" not in server.requests[0]
