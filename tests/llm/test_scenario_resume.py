"""A scenario can think (a fixed delay per reply) and be resumed part-way, as a goal's phases on workers need."""

from __future__ import annotations

import time

from orchestrator.llm.factory import open_scripted_model
from orchestrator.llm.interface import Message

SCENARIO = """
goal: think, then answer
delay_ms: 300
steps:
  - reply: {content: first}
  - reply: {content: second}
    delay_ms: 0
  - reply: {content: third}
"""


def test_replies_wait_for_their_think_time(write_scenario, fast_settings) -> None:
    with open_scripted_model(write_scenario(SCENARIO), fast_settings) as (model, _server):
        started = time.perf_counter()
        assert model.complete([Message(role="user", content="hi")]).content == "first"
        first = time.perf_counter() - started
        started = time.perf_counter()
        assert model.complete([Message(role="user", content="hi")]).content == "second"
        second = time.perf_counter() - started
        assert model.complete([Message(role="user", content="hi")]).content == "third"
    assert first >= 0.3
    assert second < first  # the step's own delay_ms: 0 wins over the scenario's


def test_a_resumed_scenario_continues_where_the_earlier_process_stopped(write_scenario, fast_settings) -> None:
    path = write_scenario(SCENARIO)
    with open_scripted_model(path, fast_settings, cursor="0") as (first, _server):
        first.complete([Message(role="user", content="hi")])
        first.complete([Message(role="user", content="hi")])
        saved = first.cursor  # what a worker keeps in the goal's checkpoint
    assert saved == "2"
    with open_scripted_model(path, fast_settings, cursor=saved, partial=True) as (model, server):  # another process
        assert model.complete([Message(role="user", content="hi")]).content == "third"
        assert server.steps_used == 3 and server.steps_left == 0 and model.cursor == "3"


RETRIED = """
goal: a scripted 429, then the answer
steps:
  - reply: {error: {status: 429, message: slow down, code: rate_limit_exceeded}}
  - reply: {content: answered}
"""


def test_the_sdks_own_retry_carries_the_position_the_429_answered_with(write_scenario) -> None:
    from orchestrator.config import ModelSettings

    settings = ModelSettings(max_retries=2, request_timeout_s=5)
    with open_scripted_model(write_scenario(RETRIED), settings, cursor="0") as (model, server):
        assert model.complete([Message(role="user", content="hi")]).content == "answered"
    assert model.cursor == "2" and server.failures == []


BY_PURPOSE = """
goal: queues by purpose
order: by_purpose
steps:
  - {purpose: plan, reply: {content: p1}}
  - {purpose: act, reply: {content: a1}}
  - {purpose: act, reply: {content: a2}}
"""


def test_a_by_purpose_position_names_each_queue_and_resumes_them(write_scenario, fast_settings) -> None:
    path = write_scenario(BY_PURPOSE)
    with open_scripted_model(path, fast_settings, cursor="0", partial=True) as (model, _server):
        model.complete([Message(role="user", content="hi")], purpose="act")
        model.complete([Message(role="user", content="hi")], purpose="plan")
        saved = model.cursor
    assert saved == "0;act=1;plan=1"
    with open_scripted_model(path, fast_settings, cursor=saved) as (model, server):
        assert model.complete([Message(role="user", content="hi")], purpose="act").content == "a2"
    assert server.steps_left == 0
