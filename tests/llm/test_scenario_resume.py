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
    with open_scripted_model(path, fast_settings, start_at=2, partial=True) as (model, server):
        assert model.complete([Message(role="user", content="hi")]).content == "third"
        assert server.steps_used == 3 and server.steps_left == 0
