"""The goal restated by the model: one line in English, searched beside the goal when retrieval cuts the library."""

from __future__ import annotations

import json

import pytest
from select_corpus import write_skill

from orchestrator.config import ModelSettings, load_settings
from orchestrator.errors import ConfigError, ModelError
from orchestrator.llm.factory import open_scripted_model
from orchestrator.llm.interface import Message
from orchestrator.llm.scenario import parse_scenario
from orchestrator.select.index import SkillIndex, skill_docs
from orchestrator.select.restate import (
    MAX_CHARS,
    first_line,
    restate_request,
    restated_goal,
    should_restate,
    written_in_english,
)
from orchestrator.select.shortlist import make_shortlist, model_invocable
from orchestrator.skills.loader import SkillLibrary
from orchestrator.testing import FunctionModel, ScriptedModel, json_response
from orchestrator.workflow.embedded import run_goal
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtime

KOREAN_GOAL = "유튜브 영상 자막을 일본어로 바꿔 주세요"
RUSSIAN_GOAL = "переведи субтитры этого ролика на японский"
""""Translate this clip's subtitles into Japanese": the index reads no Russian, so no word of it finds a skill."""


def _library(tmp_path, extra: int = 30):
    root = tmp_path / "skills"
    write_skill(root, "media/subtitle-translator", name="subtitle-translator",
                description="Translate video subtitle files (SRT, VTT) into another language.", body="Steps.")
    write_skill(root, "docs/pdf-to-csv", name="pdf-to-csv",
                description="Extract the tables of a PDF invoice into CSV files.", body="Steps.")
    for i in range(extra):
        write_skill(root, f"misc/tool-{i:02d}", name=f"tool-{i:02d}",
                    description=f"Handles chore number {i}: {['garden', 'taxes', 'recipes', 'music'][i % 4]} notes.",
                    body="Steps.")
    return SkillLibrary(root)


def _lexical_index(library: SkillLibrary) -> SkillIndex:
    return SkillIndex.build(skill_docs(library, model_invocable(library.l1_index())), None)


# --- the question and the answer ------------------------------------------------------------------------------------


def test_the_question_is_the_goal_after_labelled_examples_and_a_system_prompt():
    messages = restate_request("zoom keeps freezing")
    assert messages[0].role == "system" and "ONE short line in English" in (messages[0].content or "")
    pairs = messages[1:-1]
    assert len(pairs) >= 4 and [m.role for m in pairs] == ["user", "assistant"] * (len(pairs) // 2)
    assert all(m.content and "→" not in m.content for m in pairs)
    assert messages[-1] == Message(role="user", content="zoom keeps freezing")


@pytest.mark.parametrize(
    ("reply", "searched"),
    [
        ('  "translate video subtitles"  ', "translate video subtitles"),
        ("\n\n**→ translate video subtitles**\nSure! Here is more:\n- a list", "translate video subtitles"),
        ("- format   a\tspreadsheet", "format a spreadsheet"),
        ("\x1b[31mtranslate\x07 subtitles\ud800", "[31mtranslate subtitles"),
        ("   \n \n", ""),
        ("", ""),
    ],
)
def test_only_the_first_line_with_text_is_searched_without_quotes_or_markup(reply, searched):
    assert first_line(reply) == searched


def test_a_runaway_restatement_is_cut():
    assert len(first_line("word " * 5000)) <= MAX_CHARS


def test_the_restatement_is_asked_with_its_own_purpose():
    model = ScriptedModel([], restatements=["translate video subtitles"])
    assert restated_goal(KOREAN_GOAL, model) == "translate video subtitles"
    [call] = model.select_calls
    assert call.purpose == "select" and call.messages[-1].content == KOREAN_GOAL and model.calls == []


def test_a_model_that_fails_or_says_nothing_leaves_the_goal_to_its_own_words():
    def unreachable(messages, tools, purpose):
        raise ModelError("connection refused", where="model")

    assert restated_goal(KOREAN_GOAL, FunctionModel(unreachable)) is None
    assert restated_goal(KOREAN_GOAL, ScriptedModel([])) is None


# --- which goals ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "goal",
    [KOREAN_GOAL, RUSSIAN_GOAL, "帮我给这篇笔记想10个标题", "毎朝ニュースをまとめて送ってほしい"],
)
def test_goals_in_other_scripts_are_not_english(goal):
    assert not written_in_english(goal)
    assert should_restate(goal, "other-languages") and should_restate(goal, "always")
    assert not should_restate(goal, "off")


@pytest.mark.parametrize(
    "goal",
    ["zoom keeps freezing on my home wifi", "post this to 小红书 tomorrow morning", "", "1234 !!"],
)
def test_english_goals_are_restated_only_when_asked_for_always(goal):
    assert written_in_english(goal)
    assert not should_restate(goal, "other-languages") and should_restate(goal, "always")


def test_a_european_language_the_index_reads_is_not_english():
    assert not written_in_english("mis clientes se quejan de que la tienda online tarda siglos en cargar")


# --- ranking --------------------------------------------------------------------------------------------------------


def test_a_restatement_ranks_a_skill_the_goal_words_miss(tmp_path):
    library = _library(tmp_path)
    index, l1 = _lexical_index(library), library.l1_index()
    alone = make_shortlist(RUSSIAN_GOAL, l1, index, threshold=0, size=5)
    restated = make_shortlist(RUSSIAN_GOAL, l1, index, threshold=0, size=5,
                              restated="translate YouTube video subtitles into Japanese")
    assert "media/subtitle-translator" not in alone.ids
    assert restated.ids[0] == "media/subtitle-translator"
    assert restated.restated == "translate YouTube video subtitles into Japanese"


def test_a_misread_restatement_costs_ranks_not_the_skill_the_goal_names_in_its_words(tmp_path):
    library = _library(tmp_path)
    index, l1 = _lexical_index(library), library.l1_index()
    goal = "extract the tables of this PDF invoice into CSV"
    misread = make_shortlist(goal, l1, index, threshold=0, size=5, restated="music notes for the garden")
    assert "docs/pdf-to-csv" in misread.ids


# --- in a run ---------------------------------------------------------------------------------------------------------


def _no_fit_model(**extra):
    return ScriptedModel([json_response({"steps": [], "no_fit": {"reason": "test"}})], **extra)


def test_a_goal_in_another_language_is_restated_before_its_shortlist_and_is_no_plan_call(tmp_path):
    library = _library(tmp_path)
    model = _no_fit_model(restatements=["translate YouTube video subtitles into Japanese"])
    settings = load_settings(selection={"shortlist_threshold": 5, "shortlist_size": 3, "semantic": False})
    result = run_goal(GoalRequest(goal=RUSSIAN_GOAL), tmp_path / "out", Runtime(settings=settings, model=model,
                                                                             library=library))
    assert len(model.select_calls) == 1
    [plan] = model.calls
    assert "media/subtitle-translator" in (plan.messages[-1].content or "")
    assert result.plan_calls == 1


@pytest.mark.parametrize(("mode", "asked"), [("other-languages", 0), ("always", 1), ("off", 0)])
def test_english_goals_are_restated_only_in_mode_always(tmp_path, mode, asked):
    library = _library(tmp_path)
    model = _no_fit_model(restatements=["translate video subtitles"])
    settings = load_settings(
        selection={"shortlist_threshold": 5, "shortlist_size": 3, "semantic": False, "restate": mode}
    )
    run_goal(GoalRequest(goal="my captions need to be in japanese"), tmp_path / "out",
             Runtime(settings=settings, model=model, library=library))
    assert len(model.select_calls) == asked


def test_a_library_shown_whole_is_never_restated(tmp_path):
    library = _library(tmp_path, extra=3)
    model = _no_fit_model(restatements=["translate video subtitles"])
    settings = load_settings(selection={"restate": "always", "semantic": False})
    run_goal(GoalRequest(goal=KOREAN_GOAL), tmp_path / "out", Runtime(settings=settings, model=model, library=library))
    assert model.select_calls == []


def test_restate_rejects_an_unknown_mode():
    with pytest.raises(ConfigError, match="selection.restate"):
        load_settings(selection={"restate": "sometimes"})


# --- scripted conversations -------------------------------------------------------------------------------------------

FAST = ModelSettings(max_retries=0, request_timeout_s=5)


def test_a_scenario_that_scripts_no_restatement_answers_it_with_nothing_and_keeps_its_place():
    scenario = parse_scenario(json.dumps({"goal": "g", "steps": [{"purpose": "plan", "reply": {"content": "plan"}}]}))
    with open_scripted_model(scenario, FAST) as (model, server):
        assert model.complete([Message(role="user", content="q")], purpose="select").content in ("", None)
        assert model.complete([Message(role="user", content="q")], purpose="plan").content == "plan"
        server.assert_all_used()


def test_a_scenario_that_scripts_a_restatement_plays_it():
    steps = [{"purpose": "select", "reply": {"content": "translate subtitles"}},
             {"purpose": "plan", "reply": {"content": "plan"}}]
    scenario = parse_scenario(json.dumps({"goal": "g", "steps": steps}))
    with open_scripted_model(scenario, FAST) as (model, server):
        assert model.complete([Message(role="user", content="q")], purpose="select").content == "translate subtitles"
        assert model.complete([Message(role="user", content="q")], purpose="plan").content == "plan"
        server.assert_all_used()

