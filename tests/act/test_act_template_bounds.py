"""template_expand is bounded: a hostile template stops at a memory, time or output bound, and the Act's time
budget holds while it renders."""

from __future__ import annotations

import time

import pytest
from act_helpers import act

from orchestrator.act.templating import MAX_RENDER_CHARS, render_bounded
from orchestrator.config import Budgets
from orchestrator.isolation import Bounded
from orchestrator.testing.scripted_model import ScriptedModel, tool_call, tool_calls_response

HOSTILE = {
    # The Jinja sandbox stops range() past 100000, so each of these stays under that and nests instead.
    "spin.j2": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "huge.j2": "{{ 'x' * 10**10 }}",
    "wide.j2": "{% for i in range(99999) %}{% for j in range(99999) %}xxxxxxxx{% endfor %}{% endfor %}",
    "grow.j2": "{% set a = ['x' * 10**6] %}{% for i in range(99999) %}{% set _ = a.append(a[-1] ~ a[-1]) %}"
               "{% endfor %}",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_template_stops_at_a_bound(name):
    started = time.monotonic()
    with pytest.raises(Bounded) as caught:
        render_bounded(HOSTILE[name], {}, timeout_s=5)
    assert time.monotonic() - started < 15
    assert caught.value.bound in ("time", "memory", "crash", "error")


def test_the_output_is_capped():
    with pytest.raises(Bounded) as caught:
        render_bounded("{% for i in range(9999) %}{% for j in range(999) %}0123456789{% endfor %}{% endfor %}", {},
                       timeout_s=20)
    assert caught.value.bound == "error" and str(MAX_RENDER_CHARS) in caught.value.message


def test_an_ordinary_template_renders():
    assert render_bounded("Hello {{ name }}!", {"name": "Ada"}, timeout_s=20) == "Hello Ada!"


def test_the_act_time_budget_holds_while_a_template_renders(write_skill, skills_root, settings, tmp_path):
    write_skill("t", "Templates.", files=HOSTILE)
    model = ScriptedModel([
        tool_calls_response(tool_call("template_expand", template_path="spin.j2", output_path="a.txt"),
                            tool_call("template_expand", template_path="huge.j2", output_path="b.txt")),
    ])  # no further response: the time budget ends the Act before the model is asked again
    started = time.monotonic()
    result = act("t", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
                 budgets=Budgets(time_budget_ms=3000))
    assert time.monotonic() - started < 20
    assert result.exit_reason == "budget_time"
    errors = [r.error or "" for r in result.evidence_summary if r.tool == "template_expand"]
    assert "template spin.j2 failed" in errors[0]
    # the second starts with what is left of the budget (nothing, or a few ms in which it meets its memory bound)
    assert "not rendered: the Act's time budget is used up" in errors[1] or "template huge.j2 failed" in errors[1]


def test_a_yaml_alias_bomb_given_to_validate_stops_within_the_act_time_budget(write_skill, skills_root, settings,
                                                                             tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    schema = {"type": "object", "additionalProperties": {"$ref": "#/$defs/n"},
              "$defs": {"n": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}}}
    # The bomb ships in the skill, so no sandbox start (slow on a loaded machine) eats the budget before the check.
    write_skill("v", "Validates.", files={"bomb.yaml": "\n".join(lines) + "\n"})
    model = ScriptedModel([
        tool_calls_response(tool_call("validate", path="bomb.yaml", schema=schema)),
    ])  # no further response: the check runs until the time budget, which ends the Act
    started = time.monotonic()
    result = act("v", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
                 budgets=Budgets(time_budget_ms=4000))
    assert time.monotonic() - started < 30
    [error] = [r.error or "" for r in result.evidence_summary if r.tool == "validate"]
    # Stopped at the wall-clock bound, or killed at the CPU/memory bound first (which one wins depends on load).
    assert "cannot validate" in error and ("stopped" in error or "killed" in error)
