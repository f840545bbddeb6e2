"""Scenario files are parsed once; a bad one is refused with the file, the field and the line."""

from __future__ import annotations

import textwrap

import pytest

import orchestrator.llm.scenario as scenario_module
from orchestrator.errors import ConfigError
from orchestrator.llm.scenario import load_scenario, parse_scenario


def test_a_full_scenario_parses_into_typed_steps(write_scenario) -> None:
    path = write_scenario(
        """
        goal: "Make a 5-slide deck on Q3 results"
        model: scripted-demo
        forbid: "import pptx"
        steps:
          - purpose: plan
            expect:
              contains: brand-guidelines
              tool_result_for: [read_ref]
            reply:
              tool_calls:
                - name: run_script
                  arguments: {path: scripts/build.py, args: {title: Q3}}
                - name: broken
                  arguments: "{not json"
              usage: {prompt_tokens: 120}
          - reply: {content: done}
        """
    )
    scenario = load_scenario(path)
    assert scenario.goal.startswith("Make a 5-slide deck")
    assert scenario.source == str(path)
    assert scenario.forbid == ["import pptx"]
    first = scenario.steps[0]
    assert first.purpose == "plan"
    assert first.expect.contains == ["brand-guidelines"]
    assert (
        first.reply.tool_calls[0].arguments_text() == '{"path": "scripts/build.py", "args": {"title": "Q3"}}'
    )
    assert first.reply.tool_calls[1].arguments_text() == "{not json"
    assert first.reply.usage.prompt_tokens == 120
    assert first.reply.usage.completion_tokens is None
    assert scenario.steps[1].reply.content == "done"


def test_a_missing_goal_is_named(write_scenario) -> None:
    path = write_scenario("steps:\n  - reply: {content: hi}\n")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    assert str(path) in info.value.message
    assert "goal" in info.value.message
    assert "Field required" in info.value.message


def test_a_bad_field_inside_a_step_names_the_step_the_field_and_the_line(write_scenario) -> None:
    path = write_scenario(
        """
        goal: g
        steps:
          - reply: {content: one}
          - purpose: plan
            reply:
              tool_calls:
                - arguments: {a: 1}
        """
    )
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    message = info.value.message
    assert f"scenario {path}: step 2: reply.tool_calls[0].name (line 8): Field required" in message


def test_a_misspelt_key_is_refused_not_ignored(write_scenario) -> None:
    path = write_scenario(
        """
        goal: g
        steps:
          - exepct: {contains: [x]}
            reply: {content: hi}
        """
    )
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    assert "step 1: exepct (line 4): Extra inputs are not permitted" in info.value.message


def test_an_unknown_purpose_lists_the_accepted_ones(write_scenario) -> None:
    path = write_scenario("goal: g\nsteps:\n  - purpose: planning\n    reply: {content: hi}\n")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    assert "step 1: purpose (line 3)" in info.value.message
    assert "'plan'" in info.value.message


def test_a_reply_must_say_something(write_scenario) -> None:
    path = write_scenario("goal: g\nsteps:\n  - reply: {}\n")
    with pytest.raises(
        ConfigError, match=r"step 1: reply \(line 3\).*needs `content`, `tool_calls` or `error`"
    ):
        load_scenario(path)


def test_a_scenario_needs_at_least_one_step() -> None:
    with pytest.raises(ConfigError, match="steps"):
        parse_scenario("goal: g\nsteps: []\n", source="inline.yaml")


def test_invalid_yaml_and_non_mappings_are_refused_with_the_file_name() -> None:
    with pytest.raises(ConfigError, match="scenario bad.yaml is not valid YAML"):
        parse_scenario("goal: [unclosed\n", source="bad.yaml")
    with pytest.raises(ConfigError, match="scenario list.yaml must be a mapping"):
        parse_scenario("- a\n- b\n", source="list.yaml")


def test_a_missing_file_says_which_file(tmp_path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=f"cannot read scenario file {missing}"):
        load_scenario(missing)


def test_the_documented_example_is_a_valid_scenario() -> None:
    doc = scenario_module.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    scenario = parse_scenario(textwrap.dedent(block), source="docstring")
    assert scenario.steps[0].expect.last_tool_result_contains == ['"ok": false']
    assert scenario.steps[0].reply.tool_calls[0].name == "run_script"
