"""A plan, a verdict or scores wrapped the way small models wrap them are still the answer: prose around a fence, a
note after the object, a Python dict. Text with no value in it is still refused with the JSON error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.llm.jsonreply import json_in_reply
from orchestrator.validate.semantic_stage import parse_verdict

PLAN = {"steps": [{"skill": "brand-guidelines", "outputs": [{"path": "brand.json", "kind": "json"}]}],
        "evaluation": ["brand.json validates"]}


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps(PLAN),
        f"```json\n{json.dumps(PLAN, indent=2)}\n```",
        f"Sure! Here is the plan for the goal:\n\n```json\n{json.dumps(PLAN, indent=2)}\n```\n\nIt uses one skill.",
        f"{json.dumps(PLAN)}\n\nNote: this plan follows the catalog.",
        f"The plan (see [1]) is: {json.dumps(PLAN)} — done.",
        repr(PLAN),
        json.dumps(PLAN).replace("true", "True") + "\n",
        f"```python\n{PLAN!r}\n```",
    ],
    ids=["plain", "fence", "prose-around-fence", "trailing-note", "prose-around", "python-dict", "python-words",
         "python-fence"],
)
def test_the_answer_is_found_however_it_is_wrapped(answer: str) -> None:
    assert json_in_reply(answer) == PLAN


def test_a_bare_list_is_kept_whole_not_its_first_item() -> None:
    steps = [{"skill": "a"}, {"skill": "b"}]
    assert json_in_reply(f"Here you go: {json.dumps(steps)}") == steps


@pytest.mark.parametrize("answer", ["Looks fine to me!", "", "{'unclosed': ", "```json\n{nope}\n```"])
def test_text_without_a_value_is_not_json(answer: str) -> None:
    with pytest.raises(ValueError):
        json_in_reply(answer)


def test_a_verdict_with_prose_around_it_is_the_verdict() -> None:
    text = 'Here is my verdict:\n```json\n{"pass": true, "missing": [], "violations": [], "rationale": "ok"}\n```'
    assert parse_verdict(text).pass_
    assert parse_verdict('{"pass": false, "missing": ["x"], "violations": [], "rationale": "no"}\nI checked.').missing


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_json_data_or_a_value_error(text: str) -> None:
    try:
        value = json_in_reply(text)
    except ValueError:
        return
    json.dumps(value)  # JSON data only (no sets, bytes or other Python objects)


def test_hostile_text_stays_cheap() -> None:
    with pytest.raises(ValueError):
        json_in_reply("{[" * 50_000)
    assert json_in_reply("[x] " * 10 + "{\"a\": 1}") == {"a": 1}
