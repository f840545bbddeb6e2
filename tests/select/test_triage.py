"""Triage (``selection.triage``, on in the ``local`` profile): before a plan, the model is asked whether a chat reply
answers the goal. "CHAT" answers it with no skill and no catalog; anything else plans as before."""

from __future__ import annotations

import pytest

from orchestrator.config import load_settings
from orchestrator.skills.parsed import SkillSummary
from orchestrator.testing import ScriptedModel, json_response, text_response
from orchestrator.workflow.plan import TRIAGE_REASON, make_plan
from orchestrator.workflow.triage import says_chat, triage_request

PLAN = {"steps": [{"skill": "slides", "why": "a deck", "expected": "deck.pptx"}]}


def _skills() -> list[SkillSummary]:
    return [
        SkillSummary(id="slides", name="slides", description="Makes slide decks.", path="/x"),
        SkillSummary(id="crm", name="crm", description="A personal CRM of your contacts.", path="/y"),
    ]


def test_a_goal_the_model_calls_chat_is_answered_without_a_skill_and_without_the_catalog():
    model = ScriptedModel([text_response("CHAT"), text_response("22.2 °C")])
    outcome = make_plan("72 fahrenheit in celsius?", _skills(), model, triage=True)
    assert outcome.plan.answered_without_skills and outcome.plan.steps == []
    assert outcome.plan.no_skill_needed is not None
    assert outcome.plan.no_skill_needed.answer == "22.2 °C" and outcome.plan.no_skill_needed.reason == TRIAGE_REASON
    assert outcome.offered == [] and outcome.spent.requests == 2
    assert [c.purpose for c in model.calls] == ["plan", "answer"]
    sent = " ".join(m.content or "" for c in model.calls for m in c.messages)
    assert "personal CRM" not in sent and "Makes slide decks" not in sent  # no skill was shown
    asked = model.calls[0].last_message
    assert asked is not None and asked.content == "72 fahrenheit in celsius?"


def test_a_goal_the_model_calls_tool_is_planned_and_the_question_costs_no_plan_call():
    model = ScriptedModel([text_response("TOOL"), json_response(PLAN)])
    outcome = make_plan("deck on Q3 for the board", _skills(), model, triage=True, max_calls=1)
    assert [s.skill for s in outcome.plan.steps] == ["slides"]
    assert "Makes slide decks" in (model.calls[1].messages[-1].content or "")
    assert outcome.spent.requests == 2 and outcome.offered == ["slides", "crm"]


@pytest.mark.parametrize("reply", ["", "TOOL.", "chatbot", "I think CHAT", '{"steps": []}', "Sure! Here is the answer"])
def test_any_reply_but_chat_plans_as_usual(reply):
    model = ScriptedModel([text_response(reply), json_response(PLAN)])
    plan = make_plan("deck on Q3", _skills(), model, triage=True).plan
    assert [s.skill for s in plan.steps] == ["slides"]


@pytest.mark.parametrize("reply", ["CHAT", "chat", " **CHAT** ", "Chat.", "CHAT: a greeting"])
def test_chat_is_read_however_a_small_model_dresses_it(reply):
    assert says_chat(reply)


def test_the_goals_constraints_are_part_of_the_question_and_of_the_answers_request():
    model = ScriptedModel([text_response("CHAT"), text_response("Bonjour !")])
    make_plan("say hello", _skills(), model, triage=True, constraints=["in French", "one line"])
    for call in model.calls:
        assert call.messages[-1].content == "say hello\n\nConstraints: in French; one line"


def test_a_chat_answer_cut_at_its_token_cap_is_marked_cut():
    model = ScriptedModel([text_response("CHAT"), text_response("Closures capture", finish_reason="length")])
    plan = make_plan("what's a closure in JS?", _skills(), model, triage=True).plan
    assert plan.no_skill_needed is not None and plan.no_skill_needed.answer == "Closures capture [… cut]"


def test_an_empty_chat_answer_falls_back_to_a_plan():
    model = ScriptedModel([text_response("CHAT"), text_response("  "), json_response(PLAN)])
    plan = make_plan("deck on Q3", _skills(), model, triage=True).plan
    assert [s.skill for s in plan.steps] == ["slides"] and len(model.calls) == 3


@pytest.mark.parametrize(
    "given",
    [{"inputs": ["sales.csv"]}, {"explicit": ["crm"]}, {"feedback": ["step 1 stayed unmet"]}],
)
def test_no_question_is_asked_for_a_goal_with_files_a_named_skill_or_a_failed_plan(given):
    plan = {"steps": [{"skill": "crm"}]}
    model = ScriptedModel([json_response(plan)])
    outcome = make_plan("thanks!", _skills(), model, triage=True, **given)
    assert [s.skill for s in outcome.plan.steps] == ["crm"] and len(model.calls) == 1


def test_without_triage_the_first_call_is_the_plan():
    model = ScriptedModel([json_response(PLAN)])
    make_plan("thanks!", _skills(), model)
    assert len(model.calls) == 1 and model.calls[0].json_response


def test_the_question_shows_labelled_examples_of_both_answers_and_ends_with_the_goal():
    messages = triage_request("hola")
    labels = [m.content for m in messages if m.role == "assistant"]
    assert {"CHAT", "TOOL"} == set(labels) and labels.count("CHAT") >= 3 and labels.count("TOOL") >= 3
    assert messages[0].role == "system" and "TOOL or CHAT" in (messages[0].content or "")
    assert messages[-1].role == "user" and messages[-1].content == "hola"


def test_triage_is_on_for_small_local_models_and_off_for_hosted_ones():
    assert load_settings().selection.triage is False
    assert load_settings(model={"profile": "local"}).selection.triage is True
    assert load_settings(model={"profile": "local"}, selection={"triage": False}).selection.triage is False
