"""Replies cut at ``max_tokens``: what a runaway small model wrote before the cut is used when it is complete."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator.errors import WorkflowError
from orchestrator.llm.cutjson import close_cut_json
from orchestrator.llm.interface import ModelResponse
from orchestrator.skills.parsed import SkillSummary
from orchestrator.testing import ScriptedModel, json_response
from orchestrator.workflow.plan import make_plan

RUNAWAY = Path(__file__).parent / "recordings" / "meeting-notes-qwen-runaway-plan" / "exchanges.jsonl"
SKILLS = [
    SkillSummary(id=i, name=i.rsplit("/", 1)[-1], description=f"{i} does things", path=i)
    for i in ("brand-guidelines", "data/csv-summary", "document-skills/report", "meeting-notes")
]


def _recorded_plan_reply() -> str:
    first = json.loads(RUNAWAY.read_text().splitlines()[0])
    assert first["response"]["choices"][0]["finish_reason"] == "length"
    return str(first["response"]["choices"][0]["message"]["content"])


def test_a_plan_whose_runaway_text_was_cut_is_used_for_its_complete_steps() -> None:
    """The real reply: three complete steps, then one sentence repeated in "evaluation" until max_tokens."""
    cut = ModelResponse(content=_recorded_plan_reply(), finish_reason="length")
    outcome = make_plan("Write up the minutes", SKILLS, ScriptedModel([cut]))
    assert [s.skill for s in outcome.plan.steps] == ["brand-guidelines", "data/csv-summary", "document-skills/report"]
    assert all(len(e) <= 300 for e in outcome.plan.evaluation)
    assert outcome.spent.model_calls == 1 and "cut at max_tokens" in outcome.attempts[0]


def test_a_plan_cut_before_anything_usable_is_asked_again_once_then_refused() -> None:
    cut = ModelResponse(content='{"steps": [{"skill": "brand-gui', finish_reason="length")
    model = ScriptedModel([cut, json_response({"steps": [{"skill": "meeting-notes"}]})])
    outcome = make_plan("Write up the minutes", SKILLS, model)
    assert [s.skill for s in outcome.plan.steps] == ["meeting-notes"]
    assert "cut off at the reply length limit" in (model.calls[1].messages[-1].content or "")
    with pytest.raises(WorkflowError, match="cut off"):
        make_plan("Write up the minutes", SKILLS, ScriptedModel([cut, cut]))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1, "b"', {"a": 1}),
        ('```json\n{"a": [1, 2, {"x": tr', {"a": [1, 2, {}]}),
        ('{"why": "because it', {"why": "because it"}),
        ("[1, 2, 3,", [1, 2, 3]),
        ('Sure! {"pass": true, "missing": [], "rationale": "fine', {"pass": True, "missing": [], "rationale": "fine"}),
        ("no json at all", None),
    ],
)
def test_cut_json_is_closed_where_it_stopped(text: str, expected: object) -> None:
    assert close_cut_json(text) == expected


def test_closing_hostile_text_stays_cheap() -> None:
    started = time.monotonic()
    assert close_cut_json("[" * 300_000) is None  # deeper than any plan: not completed
    assert close_cut_json('{"a": "' + "x" * 500_000) == {"a": "x" * (200_000 - 7)}  # the first 200,000 characters
    assert len(close_cut_json('{"a": [' + "1, " * 100_000)["a"]) == 66_665  # cut at 200,000 characters
    assert time.monotonic() - started < 5


def test_a_verdict_whose_rationale_ran_past_max_tokens_is_still_a_verdict() -> None:
    from orchestrator.validate.rules import ExpectedOutputs
    from orchestrator.validate.semantic_stage import semantic_check

    cut = ModelResponse(
        content='{"pass": true, "missing": [], "violations": [], "rationale": "The file holds every rule. The file',
        finish_reason="length",
    )
    outcome = semantic_check(ScriptedModel([cut]), ExpectedOutputs(description="brand.json"), [])
    assert outcome.verdict is not None and outcome.verdict.pass_ is True and outcome.attempts == 1
    broken = ModelResponse(content='{"pass": tr', finish_reason="length")
    fixed = json_response({"pass": False, "missing": ["brand.json"], "violations": [], "rationale": "absent"})
    outcome = semantic_check(ScriptedModel([broken, fixed]), ExpectedOutputs(description="brand.json"), [])
    assert outcome.attempts == 2 and outcome.verdict is not None and outcome.verdict.pass_ is False
