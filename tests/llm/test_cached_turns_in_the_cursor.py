"""Turns answered from the response cache travel in the cursor, so a scripted script stays in step across phases.

A worker opens a model client per phase and keeps only the cursor between them (in the goal's saved state). These
tests play that with real clients against our scenario servers over HTTP: each phase is a new client made from the
cursor the phase before left.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import ModelSettings
from orchestrator.llm.headers import pass_over, split_cursor
from orchestrator.llm.interface import Message, Purpose
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.response_cache import ResponseCache
from orchestrator.llm.scenario import parse_scenario
from orchestrator.llm.scenario_server import ScenarioLibraryServer

FAST = ModelSettings(max_retries=0, request_timeout_s=10)
COUNT = """
goal: count
order: {order}
steps:
  - {{purpose: plan, reply: {{content: one}}}}
  - {{purpose: act, reply: {{content: two}}}}
  - {{purpose: act, reply: {{content: three}}}}
  - {{purpose: semantic, reply: {{content: verdict}}}}
"""
RETRIED = """
goal: a 429 after a cached plan
steps:
  - {purpose: plan, reply: {content: one}}
  - {purpose: act, reply: {error: {status: 429, message: slow down, code: rate_limit_exceeded}}}
  - {purpose: act, reply: {content: answered}}
"""


def user(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


class Phases:
    """A job's phases as a worker runs them: a new client per phase, built from the cursor saved before it."""

    def __init__(self, server: ScenarioLibraryServer, cache: ResponseCache, job: str, settings: ModelSettings = FAST):
        self.server, self.cache, self.job, self.settings = server, cache, job, settings
        self.saved = "0"

    def ask(self, purpose: Purpose, text: str) -> tuple[str | None, bool]:
        model = OpenAIChatModel(
            "count", self.settings, api_key="k", base_url=self.server.base_url, job_id=self.job, cursor=self.saved,
            cache=self.cache,
        )
        with model:
            reply = model.complete(user(text), purpose=purpose)
        assert model.cursor is not None
        self.saved = model.cursor
        return reply.content, reply.cache_hit


@pytest.mark.parametrize("order", ["sequence", "by_purpose"])
def test_a_second_goal_answered_partly_from_the_cache_stays_in_step_across_its_phases(
    tmp_path: Path, order: str
) -> None:
    scenario = parse_scenario(COUNT.format(order=order), source="count.yaml")
    cache = ResponseCache(tmp_path / "responses")
    turns: list[tuple[Purpose, str]] = [("plan", "count"), ("act", "first"), ("act", "second"), ("semantic", "judge")]
    with ScenarioLibraryServer({"count": scenario}) as server:
        first = Phases(server, cache, "job-1")
        assert [first.ask(p, t) for p, t in turns] == [
            ("one", False), ("two", False), ("three", False), ("verdict", False)
        ]
        again = Phases(server, cache, "job-2")
        assert again.ask("plan", "count") == ("one", True)
        assert again.ask("act", "first") == ("two", True)
        assert split_cursor(again.saved) == ("0", {"plan": 1, "act": 1})  # what the checkpoint keeps
        assert again.ask("act", "second, asked differently") == ("three", False)  # the server passed over two
        assert again.ask("semantic", "judge, differently") == ("verdict", False)
    assert server.failures == []
    assert {p.session: len(p.requests) for p in server.players} == {"job-1": 4, "job-2": 2}
    assert [p.steps_left for p in server.players] == [0, 0]


def test_the_sdks_retry_of_a_request_after_cached_turns_passes_over_them_once(tmp_path: Path) -> None:
    scenario = parse_scenario(RETRIED, source="retried.yaml")
    cache = ResponseCache(tmp_path / "responses")
    retrying = FAST.model_copy(update={"max_retries": 2})
    with ScenarioLibraryServer({"count": scenario}) as server:
        first = Phases(server, cache, "job-1", retrying)
        assert [first.ask("plan", "count"), first.ask("act", "go")] == [("one", False), ("answered", False)]
        again = Phases(server, cache, "job-2", retrying)
        assert again.ask("plan", "count") == ("one", True)
        assert again.ask("act", "go, differently") == ("answered", False)  # the 429's retry did not skip again
    assert server.failures == []
    assert again.saved == "3"


def test_a_client_that_tracks_no_position_still_tells_the_server_its_cached_turns(tmp_path: Path) -> None:
    scenario = parse_scenario(COUNT.format(order="sequence"), source="count.yaml")
    cache = ResponseCache(tmp_path / "responses")
    with ScenarioLibraryServer({"count": scenario}) as server:
        for job in ("job-1", "job-2"):
            model = OpenAIChatModel("count", FAST, api_key="k", base_url=server.base_url, job_id=job, cache=cache)
            with model:
                plan = model.complete(user("count"), purpose="plan")
                assert model.cursor == (None if job == "job-1" else "+plan=1")
                act = model.complete(user(f"act of {job}"), purpose="act")
                assert model.cursor is None
            assert (plan.content, plan.cache_hit, act.content) == ("one", job == "job-2", "two")
    assert server.failures == []


@pytest.mark.parametrize(
    ("cursor", "position", "passes"),
    [
        ("3", "3", {}),
        ("0;act=1;plan=1+act=2+plan=1", "0;act=1;plan=1", {"act": 2, "plan": 1}),
        ("+act=1+act=2", "", {"act": 3}),
        ("2+ACT=1", "2+ACT=1", {}),  # not a count of ours: all position, which the server refuses
        ("2+act=1234567", "2+act=1234567", {}),
        ("2" + "+act=1" * 11, "2" + "+act=1" * 11, {}),
    ],
)
def test_the_cursor_grammar_reads_only_what_it_wrote(cursor: str, position: str, passes: dict[str, int]) -> None:
    assert split_cursor(cursor) == (position, passes)


def test_counting_a_cached_turn_keeps_the_cursor_short() -> None:
    cursor = "7;plan=1"
    for _ in range(50_000):
        cursor = pass_over(cursor, "act")
    assert cursor == "7;plan=1+act=50000"
    assert split_cursor(pass_over(None, "plan")) == ("", {"plan": 1})


@pytest.mark.parametrize("cursor", ["2+ACT=1", "x+act=1", "99+act=1", "1+act=" + "9" * 7])
def test_a_cursor_the_server_cannot_read_is_ignored_not_half_applied(cursor: str) -> None:
    scenario = parse_scenario(COUNT.format(order="sequence"), source="count.yaml")
    with ScenarioLibraryServer({"count": scenario}) as server:
        model = OpenAIChatModel("count", FAST, api_key="k", base_url=server.base_url, job_id="j", cursor=cursor)
        with model:
            assert model.complete(user("count"), purpose="plan").content == "one"
        assert model.cursor == "1"
    assert server.failures == []


def test_passes_beyond_the_script_stop_at_its_end(tmp_path: Path) -> None:
    scenario = parse_scenario(COUNT.format(order="sequence"), source="count.yaml")
    with ScenarioLibraryServer({"count": scenario}) as server:
        model = OpenAIChatModel("count", FAST, api_key="k", base_url=server.base_url, job_id="j", cursor="0+act=9")
        with model, pytest.raises(Exception, match="came after all 4"):
            model.complete(user("count"), purpose="plan")
        assert model.cursor == "4"
