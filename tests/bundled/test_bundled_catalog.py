"""The bundled skills as a catalog: they load cleanly, say what they do in words a retriever and a planner can
match, declare tools the sandbox image has, document every script they ship, and each one has a scenario."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from bundled_helpers import SCENARIOS, SKILLS

from orchestrator.llm.scenario import load_scenario, scenario_inputs
from orchestrator.skills.loader import SkillLibrary

EXPECTED = {
    "brand-guidelines",
    "document-skills/pptx",
    "document-skills/xlsx",
    "document-skills/report",
    "data/csv-summary",
    "meeting-notes",
}


@pytest.fixture(scope="module")
def library() -> SkillLibrary:
    return SkillLibrary(SKILLS)


def _plan_of(path: Path) -> list[str]:
    scenario = load_scenario(path)
    plan = next(step for step in scenario.steps if step.purpose == "plan")
    return [s["skill"] for s in json.loads(plan.reply.content or "{}")["steps"]]


def test_at_least_six_bundled_skills_load_without_errors(library):
    ids = {s.id for s in library.list()}
    assert ids >= EXPECTED
    for skill_id in ids:
        assert library.get(skill_id).errors == [], skill_id


@pytest.mark.parametrize("skill_id", sorted(EXPECTED))
def test_each_description_says_what_it_makes_and_when_to_use_it(library, skill_id):
    description = library.get(skill_id).description or ""
    assert 150 <= len(description) <= 1024
    assert "Use it when" in description or "Use it whenever" in description


@pytest.mark.parametrize("skill_id", sorted(EXPECTED))
def test_every_shipped_script_is_documented_in_its_skill_md(library, skill_id):
    skill = library.get(skill_id)
    scripts = sorted(p.relative_to(skill.root).as_posix() for p in skill.root.rglob("*.py"))
    assert all(script in skill.body for script in scripts), scripts


def test_declared_tools_are_in_the_sandbox_image(library, docker_client, sandbox_image):
    from orchestrator.sandbox.image import image_tools, missing_tools

    tools = image_tools(docker_client, sandbox_image)
    for skill_id in sorted(EXPECTED):
        assert missing_tools(tools, library.get(skill_id).declarations.requires_tools) == [], skill_id


def test_every_bundled_skill_is_planned_by_a_scenario_and_one_chains_at_least_three():
    plans = {path.stem: _plan_of(path) for path in sorted(SCENARIOS.glob("*.yaml"))}
    assert {skill for plan in plans.values() for skill in plan} >= EXPECTED
    assert max(len(plan) for plan in plans.values()) >= 3
    for path in SCENARIOS.glob("*.yaml"):
        assert all(p.is_file() for p in scenario_inputs(load_scenario(path))), path


def test_the_meeting_minutes_template_renders_schema_valid_notes_in_the_jinja_sandbox():
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    folder = SKILLS / "meeting-notes"
    schema = json.loads((folder / "notes.schema.json").read_text())
    scenario = yaml.safe_load((SCENARIOS / "meeting-notes.yaml").read_text())
    notes = next(
        call["arguments"]["object"]
        for step in scenario["steps"]
        for call in step["reply"].get("tool_calls", [])
        if call["name"] == "validate"
    )
    jsonschema.validate(notes, schema)
    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    text = env.from_string((folder / "minutes.md.j2").read_text()).render(**notes)
    assert text.startswith("# Website relaunch weekly\n")
    assert "| Ken Ito | Put the Stripe API keys in the vault | 2026-11-21 |" in text
    assert "- Who answers the agency about the logo refresh?" in text
    empty = {**notes, "decisions": [], "questions": [], "actions": [{"owner": "unassigned", "task": "t", "due": None}]}
    rendered = env.from_string((folder / "minutes.md.j2").read_text()).render(**empty)
    assert "- No decisions were recorded." in rendered and "| unassigned | t | no date |" in rendered


def test_the_notes_schema_refuses_an_action_without_an_owner():
    schema = json.loads((SKILLS / "meeting-notes" / "notes.schema.json").read_text())
    notes = {"title": "t", "date": "d", "attendees": ["a"], "summary": "s", "decisions": [], "questions": [],
             "actions": [{"task": "do it", "due": None}]}
    with pytest.raises(jsonschema.ValidationError, match="'owner' is a required property"):
        jsonschema.validate(notes, schema)


def test_the_brand_json_shown_in_brand_guidelines_is_valid_and_the_schema_refuses_a_bad_colour():
    import re

    folder = SKILLS / "brand-guidelines"
    schema = json.loads((folder / "brand.schema.json").read_text())
    [example] = re.findall(r"```json\n(.*?)```", (folder / "SKILL.md").read_text(), flags=re.S)
    brand = json.loads(example)
    jsonschema.validate(brand, schema)
    brand["colors"]["primary"] = "navy"
    with pytest.raises(jsonschema.ValidationError, match="does not match"):
        jsonschema.validate(brand, schema)
