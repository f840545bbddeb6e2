"""Scenario ``order: by_purpose`` and ``cycle``: scripts that do not depend on how many phases of each kind the
runtime runs, and a model that never finishes."""

from __future__ import annotations

import json

import pytest

from orchestrator.config import ModelSettings
from orchestrator.errors import ModelError
from orchestrator.llm.factory import open_scripted_model
from orchestrator.llm.interface import Message
from orchestrator.llm.response_cache import ResponseCache
from orchestrator.llm.scenario import ScriptMismatch, parse_scenario

FAST = ModelSettings(max_retries=0, request_timeout_s=5)


def _scenario(steps: list[dict], **extra: object):
    return parse_scenario(json.dumps({"goal": "g", "steps": steps, **extra}))


def _ask(model, purpose: str, text: str = "q") -> str:
    return model.complete([Message(role="user", content=text)], purpose=purpose).content or ""


def test_by_purpose_each_request_takes_the_next_step_of_its_own_purpose() -> None:
    scenario = _scenario(
        [
            {"purpose": "plan", "reply": {"content": "plan 1"}},
            {"purpose": "act", "reply": {"content": "act 1"}},
            {"purpose": "act", "reply": {"content": "act 2"}},
            {"purpose": "plan", "reply": {"content": "plan 2"}},
            {"reply": {"content": "anything else"}},
        ],
        order="by_purpose",
    )
    with open_scripted_model(scenario, FAST) as (model, server):
        got = [_ask(model, p) for p in ("act", "plan", "semantic", "plan", "act")]
        server.assert_all_used()
    assert got == ["act 1", "plan 1", "anything else", "plan 2", "act 2"]


def test_a_cycling_scenario_never_runs_out_like_a_model_that_never_finishes() -> None:
    scenario = _scenario(
        [{"purpose": "act", "reply": {"content": "thinking"}}, {"purpose": "act", "reply": {"content": "still"}}],
        order="by_purpose",
        cycle=True,
    )
    with open_scripted_model(scenario, FAST) as (model, _):
        assert [_ask(model, "act") for _ in range(5)] == ["thinking", "still", "thinking", "still", "thinking"]
        with pytest.raises(ModelError, match="came after all 0 plan steps"):
            _ask(model, "plan")


def test_a_sequence_that_cycles_starts_again_at_the_first_step() -> None:
    scenario = _scenario([{"reply": {"content": "a"}}, {"reply": {"content": "b"}}], cycle=True)
    with open_scripted_model(scenario, FAST) as (model, _):
        assert [_ask(model, "act") for _ in range(3)] == ["a", "b", "a"]


def test_an_unused_step_of_a_purpose_is_reported() -> None:
    scenario = _scenario(
        [{"purpose": "plan", "reply": {"content": "p"}}, {"purpose": "semantic", "reply": {"content": "s"}}],
        order="by_purpose",
    )
    with open_scripted_model(scenario, FAST) as (model, server):
        _ask(model, "plan")
        with pytest.raises(ScriptMismatch, match=r"steps 2 \(semantic\)"):
            server.assert_all_used()


def test_cached_turns_pass_over_the_steps_of_their_own_purposes(tmp_path) -> None:
    steps = [
        {"purpose": "plan", "reply": {"content": "plan"}},
        {"purpose": "act", "reply": {"content": "act 1"}},
        {"purpose": "act", "reply": {"content": "act 2"}},
        {"purpose": "semantic", "reply": {"content": "verdict"}},
    ]
    scenario = _scenario(steps, order="by_purpose")
    cache = ResponseCache(tmp_path / "responses")
    with open_scripted_model(scenario, FAST, cache=cache) as (model, _):
        [_ask(model, p, t) for p, t in (("plan", "1"), ("act", "2"), ("act", "3"), ("semantic", "4"))]
    with open_scripted_model(scenario, FAST, cache=cache) as (model, server):
        assert _ask(model, "plan", "1") == "plan" and _ask(model, "act", "2") == "act 1"
        assert _ask(model, "act", "3, differently") == "act 2"
        assert _ask(model, "semantic", "4, differently") == "verdict"
    assert server.failures == []
