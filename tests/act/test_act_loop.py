"""The Act loop, specified with an in-memory scripted model and a host build area (no scripts run here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from act_helpers import act, expect_files

from orchestrator.config import Budgets
from orchestrator.llm.interface import Usage
from orchestrator.testing import (
    ScriptedModel,
    text_response,
    tool_call,
    tool_call_response,
    tool_calls_response,
)

NOTES_BODY = """
# Meeting notes

Write the notes as `notes.md` with a title line and the decisions as bullets.
See [the template](template.md.j2) for the shape.
"""
TEMPLATE = "# {{ title }}\n{% for d in decisions %}- {{ d }}\n{% endfor %}"


def test_a_skill_md_only_skill_completes_with_a_validated_artifact(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("notes", NOTES_BODY, files={"template.md.j2": TEMPLATE})
    model = ScriptedModel(
        [
            tool_call_response(
                "template_expand",
                template_path="template.md.j2",
                data={"title": "Weekly", "decisions": ["ship it"]},
                output_path="notes.md",
            ),
            tool_call_response("finish", summary="notes written", outputs=["build/notes.md"]),
        ]
    )
    result = act(
        "notes",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        expected=expect_files("notes.md", kind="markdown"),
    )
    model.assert_all_used()
    assert result.status == "done" and result.exit_reason == "validated"
    assert (tmp_path / "out" / "notes.md").read_text() == "# Weekly\n- ship it\n"
    [artifact] = result.artifacts
    assert artifact.path == "notes.md" and artifact.version == "act.notes.md@v1" and not artifact.partial
    assert result.metrics.tool_calls == 2 and result.metrics.disclosure.l2 == 1
    assert result.validation is not None and result.validation.pass_


def test_the_first_request_holds_the_chosen_skill_body_and_the_tools(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("notes", NOTES_BODY, files={"template.md.j2": TEMPLATE})
    model = ScriptedModel([tool_call_response("finish", summary="nothing")])
    act("notes", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    first = model.calls[0]
    assert "# Meeting notes" in (first.messages[1].content or "")
    assert {"read_ref", "run_script", "write_artifact", "finish", "blackboard_put"} <= set(first.tool_names)
    assert first.purpose == "act"


def test_a_repeated_read_of_unchanged_content_is_not_sent_again(write_skill, skills_root, settings, tmp_path):
    write_skill("docs", "Read [the guide](guide.md).", files={"guide.md": "# Guide\nUse blue.\n"})
    model = ScriptedModel(
        [
            tool_call_response("read_ref", path="guide.md"),
            tool_call_response("read_ref", path="guide.md"),
            text_response("Next: finish."),  # two turns without an artifact: the Micro-Reflect
            tool_call_response("finish", summary="done"),
        ]
    )
    result = act(
        "docs", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off"
    )
    model.assert_all_used()
    first, second = (json.loads(m.content or "") for m in model.calls[3].messages if m.role == "tool")
    assert first["text"].startswith("# Guide")
    assert second["unchanged"] is True and "text" not in second
    assert result.metrics.disclosure.l3 == 1 and result.metrics.disclosure.dedup_hits == 1


def test_script_source_is_never_shown_by_read_tools(write_skill, skills_root, settings, tmp_path):
    write_skill(
        "tool", "Run `scripts/go.py`.", files={"scripts/go.py": "SECRET_SOURCE_LINE = 1\nprint('{}')\n"}
    )
    model = ScriptedModel(
        [
            tool_calls_response(
                tool_call("read_ref", path="scripts/go.py"),
                tool_call("read_file", path="scripts/go.py"),
                tool_call("summarize", path="scripts/go.py"),
            ),
            tool_call_response("finish", summary="done"),
        ]
    )
    act("tool", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    sent = json.dumps([m.model_dump() for m in model.calls[1].messages])
    assert "SECRET_SOURCE_LINE" not in sent
    assert sent.count('\\"kind\\": \\"script\\"') == 3


def test_two_turns_without_progress_trigger_exactly_one_micro_reflect(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("docs", "Read [a](a.md) and [b](b.md).", files={"a.md": "A\n", "b.md": "B\n", "c.md": "C\n"})
    model = ScriptedModel(
        [
            tool_call_response("read_ref", path="a.md"),
            tool_call_response("read_ref", path="b.md"),
            text_response("Missing: out.txt. Next: write it."),  # the Micro-Reflect answer
            tool_call_response("list_files", glob="*.md"),
            tool_call_response("read_ref", path="c.md"),
            tool_call_response("write_artifact", path="out.txt", text="ok"),
            tool_call_response("finish", summary="done", outputs=["build/out.txt"]),
        ]
    )
    result = act(
        "docs",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        expected=expect_files("out.txt"),
    )
    model.assert_all_used()
    assert [c.purpose for c in model.calls].count("reflect") == 1
    assert model.calls[2].tools == () and "Micro-Reflect" in (model.calls[2].messages[-1].content or "")
    assert result.metrics.micro_reflects == 1 and result.status == "done"
    assert [r.kind for r in result.evidence_summary].count("reflect") == 1


def test_the_same_action_with_the_same_inputs_returns_the_memo(write_skill, skills_root, settings, tmp_path):
    write_skill("v", "Check `data.json`.", files={"schema.json": '{"type": "object", "required": ["a"]}'})
    model = ScriptedModel(
        [
            tool_call_response("write_artifact", path="data.json", text='{"b": 1}'),
            tool_call_response("write_artifact", path="data.json", text='{"b": 1}'),
            tool_call_response("finish", summary="done"),
        ]
    )
    result = act(
        "v", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off"
    )
    second = json.loads(model.calls[2].messages[-1].content or "")
    assert second["changed"] is False and second["version"] == "act.data.json@v1"
    assert result.artifacts[0].version == "act.data.json@v1"


def test_tool_call_budget_ends_the_act_with_a_reason_and_a_next_step(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("docs", "Read [a](a.md).", files={"a.md": "A\n"})
    model = ScriptedModel(
        [tool_call_response("write_artifact", path="a.txt", text=f"draft {i}") for i in range(3)]
    )
    result = act(
        "docs",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        budgets=Budgets(max_tool_calls=3),
    )
    model.assert_all_used()
    assert result.status == "unmet" and result.exit_reason == "budget_tool_calls"
    assert "max_tool_calls" in result.next_step and result.remaining_budgets.tool_calls == 0


def test_token_budget_counts_the_usage_the_api_reports(write_skill, skills_root, settings, tmp_path):
    write_skill("docs", "Read [a](a.md).", files={"a.md": "A\n"})
    heavy = Usage(prompt_tokens=600, completion_tokens=10)
    model = ScriptedModel(
        [tool_call_response("write_artifact", path="a.txt", text=f"v{i}", _usage=heavy) for i in range(2)]
    )
    result = act(
        "docs",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        budgets=Budgets(token_budget=1000),
    )
    assert result.exit_reason == "budget_tokens" and len(model.calls) == 2
    assert result.metrics.tokens_in == 1200 and result.remaining_budgets.tokens == 0


@pytest.mark.unused_script_steps  # how many slow turns fit in the budget depends on the machine
def test_time_budget_ends_the_act(write_skill, skills_root, settings, tmp_path):
    import time

    write_skill("docs", "Read [a](a.md).", files={"a.md": "A\n"})

    def slow(messages, tools, purpose):  # noqa: ANN001
        time.sleep(0.06)
        return tool_call_response("list_files", glob="*")

    model = ScriptedModel([slow] * 5)
    result = act(
        "docs",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        budgets=Budgets(time_budget_ms=100),
    )
    assert result.exit_reason == "budget_time" and len(model.calls) < 5


def test_disk_budget_refuses_a_write_that_does_not_fit(write_skill, skills_root, settings, tmp_path):
    write_skill("big", "Write big files.")
    model = ScriptedModel(
        [
            tool_call_response("write_artifact", path="big.txt", text="x" * (2 * 1024 * 1024)),
            tool_call_response("finish", summary="gave up"),
        ]
    )
    result = act(
        "big",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        budgets=Budgets(disk_write_limit_mb=1),
        qa_mode="off",
    )
    reply = json.loads(model.calls[1].messages[-1].content or "")
    assert reply["ok"] is False and "full" in reply["error"]
    assert not (tmp_path / "out" / "big.txt").exists() and result.artifacts == []


def test_a_missing_reference_gets_one_attempt_then_is_reported_unmet(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("gap", "Follow [the rules](rules.md) to write `out.json`.")
    model = ScriptedModel(
        [
            tool_call_response("read_ref", path="rules.md"),
            tool_call_response("finish", summary="cannot do it without rules.md"),
            text_response("rules.md is missing; nothing else to try."),  # the Micro-Reflect
            tool_call_response("finish", summary="still missing"),
        ]
    )
    result = act(
        "gap",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        expected=expect_files("out.json", kind="json"),
    )
    assert "Missing references" in (model.calls[0].messages[1].content or "")
    assert result.status == "unmet" and result.exit_reason == "missing_reference"
    assert any(u.what == "reference rules.md" for u in result.unmet)
    assert any("out.json" in u.what for u in result.unmet)


def test_a_failed_validation_is_told_to_the_model_which_can_fix_it(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("j", "Write `data.json`.")
    model = ScriptedModel(
        [
            tool_call_response("write_artifact", path="data.json", text="{not json"),
            tool_call_response("finish", summary="done?"),
            tool_call_response("write_artifact", path="data.json", text='{"ok": 1}'),
            tool_call_response("finish", summary="fixed"),
        ]
    )
    result = act(
        "j",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        expected=expect_files("data.json", kind="json"),
    )
    assert "Validation failed" in (model.calls[2].messages[-1].content or "")
    assert result.status == "done" and result.artifacts[0].version == "act.data.json@v2"


def test_a_path_escape_is_a_sandbox_violation_that_ends_the_act(write_skill, skills_root, settings, tmp_path):
    write_skill("esc", "Nothing.")
    (skills_root / "secret.txt").write_text("top secret")
    model = ScriptedModel([tool_call_response("read_ref", path="../secret.txt")])
    result = act("esc", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out")
    assert result.status == "failed" and result.exit_reason == "sandbox_violation"
    assert "top secret" not in json.dumps([m.model_dump() for m in model.calls[0].messages])


def test_bad_tool_arguments_go_back_to_the_model(write_skill, skills_root, settings, tmp_path):
    from orchestrator.testing import raw_tool_call_response

    write_skill("x", "Nothing.")
    model = ScriptedModel(
        [
            raw_tool_call_response("read_ref", "{not json"),
            tool_call_response("no_such_tool"),
            text_response("Use the right tool."),  # the Micro-Reflect
            tool_call_response("finish", summary="ok"),
        ]
    )
    result = act(
        "x", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off"
    )
    assert "bad arguments for read_ref" in (model.calls[1].messages[-1].content or "")
    assert "unknown tool" in (model.calls[2].messages[-2].content or "")
    assert result.status == "done"


def test_template_expand_runs_untrusted_templates_in_a_jinja_sandbox(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("t", "Use `evil.j2`.", files={"evil.j2": "{{ ''.__class__.__mro__[1].__subclasses__() }}"})
    model = ScriptedModel(
        [
            tool_call_response("template_expand", template_path="evil.j2"),
            tool_call_response("finish", summary="x"),
        ]
    )
    act("t", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    reply = json.loads(model.calls[1].messages[-1].content or "")
    assert reply["ok"] is False and "SecurityError" in reply["error"]


def test_blackboard_values_are_shared_along_the_goal(write_skill, skills_root, settings, tmp_path):
    write_skill("a", "Put a note.")
    model = ScriptedModel(
        [
            tool_call_response("blackboard_put", key="palette", value={"primary": "#000"}),
            tool_call_response("blackboard_get", key="palette"),
            text_response("Finish now."),  # the Micro-Reflect
            tool_call_response("finish", summary="x"),
        ]
    )
    act("a", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    assert json.loads(model.calls[2].messages[-2].content or "")["value"] == {"primary": "#000"}


def test_evidence_records_every_step_with_digest_cost_and_files(write_skill, skills_root, settings, tmp_path):
    write_skill("n", "Write `a.txt`.")
    model = ScriptedModel(
        [
            tool_call_response("write_artifact", path="a.txt", text="hi", reason="first draft"),
            tool_call_response("finish", summary="x", outputs=["build/a.txt"]),
        ],
        estimate_usage=True,
    )
    result = act(
        "n",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        expected=expect_files("a.txt"),
    )
    first = result.evidence_summary[0]
    assert first.tool == "write_artifact" and first.reason_short == "first draft"
    assert len(first.inputs_digest) == 16 and first.tokens_in > 0 and first.file_ids == ["build/a.txt"]
    assert result.metrics.tokens_in == sum(r.tokens_in for r in result.evidence_summary)


def test_a_second_identical_run_sends_fewer_tokens(write_skill, skills_root, settings, tmp_path):
    from orchestrator.act.memo import MemoStore

    long_doc = "# Rules\n" + "\n\n".join(
        f"Rule {i}: keep paragraph {i} short and factual." for i in range(120)
    )
    write_skill("r", "Read [rules](rules.md), write `out.txt`.", files={"rules.md": long_doc})
    store = MemoStore(tmp_path / "store")

    def script() -> ScriptedModel:
        return ScriptedModel(
            [
                tool_call_response("read_ref", path="rules.md"),
                tool_call_response("write_artifact", path="out.txt", text="done"),
                tool_call_response("finish", summary="x", outputs=["build/out.txt"]),
            ],
            estimate_usage=True,
        )

    runs = []
    for n in range(2):
        model = script()
        runs.append(
            act(
                "r",
                model,
                skills_root=skills_root,
                settings=settings,
                out_dir=tmp_path / f"out{n}",
                expected=expect_files("out.txt"),
                store=store,
            )
        )
        model.assert_all_used()
    first, second = runs
    assert first.status == second.status == "done"
    assert second.metrics.tokens < first.metrics.tokens
    assert second.metrics.tool_calls <= first.metrics.tool_calls
    assert (Path(tmp_path / "out1" / "out.txt")).read_text() == "done"


def test_template_expand_never_expands_a_script_or_crashes_on_a_bad_template(write_skill, skills_root, settings,
                                                                             tmp_path):
    write_skill("t", "Templates.", files={"scripts/gen.js": "const SECRET_JS_LINE = 1;\n",
                                          "bad.j2": "{{ 1 + 'a' }}", "inc.j2": "{% include 'SKILL.md' %}"})
    model = ScriptedModel([
        tool_calls_response(tool_call("template_expand", template_path="scripts/gen.js", output_path="x.txt"),
                            tool_call("template_expand", template_path="bad.j2"),
                            tool_call("template_expand", template_path="inc.j2")),
        tool_call_response("finish", summary="x"),
    ])
    result = act("t", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    script, bad, inc = (json.loads(m.content or "") for m in model.calls[1].messages if m.role == "tool")
    assert script["ok"] is False and "is a script" in script["error"]
    assert bad["ok"] is False and "TypeError" in bad["error"]
    assert inc["ok"] is False and "failed" in inc["error"]
    assert "SECRET_JS_LINE" not in json.dumps([m.model_dump() for m in model.calls[1].messages])
    assert result.status == "done" and result.artifacts == []


def test_a_write_to_a_path_naming_no_file_is_a_fixable_error_not_a_violation(write_skill, skills_root, settings,
                                                                             tmp_path):
    write_skill("w", "Write things.")
    model = ScriptedModel([
        tool_calls_response(tool_call("write_artifact", path="a\x00b.md", text="x"),
                            tool_call("write_artifact", path="build/", text="x")),
        tool_call_response("write_artifact", path="ok.md", text="fine"),
        tool_call_response("finish", summary="x", outputs=["build/ok.md"]),
    ])
    result = act("w", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("ok.md"))
    nul, folder = (json.loads(m.content or "") for m in model.calls[1].messages if m.role == "tool")
    assert nul["ok"] is False and "control characters" in nul["error"]
    assert folder["ok"] is False and "not a file path" in folder["error"]
    assert result.status == "done"


def test_rereading_documents_is_not_a_reference_cycle_unless_the_skill_has_one(write_skill, skills_root, settings,
                                                                              tmp_path):
    write_skill("plain", "Read [a](a.md).", files={"a.md": "A\n"})
    write_skill("loop", "Read [a](a.md).", files={"a.md": "See [b](b.md).\n", "b.md": "See [a](a.md).\n"})
    rereads = [tool_call_response("read_ref", path="a.md") for _ in range(4)]
    plain = ScriptedModel([*rereads[:2], text_response("reflect"), *rereads[2:],
                           tool_call_response("finish", summary="x")])
    result = act("plain", plain, skills_root=skills_root, settings=settings, out_dir=tmp_path / "o1", qa_mode="off")
    assert result.exit_reason == "finished_unvalidated"
    looping = ScriptedModel([tool_call_response("read_ref", path="a.md"), tool_call_response("read_ref", path="b.md"),
                             text_response("reflect"), *[tool_call_response("read_ref", path=p)
                                                         for p in ("a.md", "b.md", "a.md")]])
    result = act("loop", looping, skills_root=skills_root, settings=settings, out_dir=tmp_path / "o2")
    assert result.exit_reason == "reference_cycle" and "a.md" in result.final_message
    assert result.status == "unmet"


def test_tool_and_argument_spellings_from_the_design_documents_are_understood(write_skill, skills_root, settings,
                                                                              tmp_path):
    import base64

    write_skill("s", "Spellings.", files={"t.j2": "Hello {{ who }}"})
    model = ScriptedModel([
        tool_calls_response(
            tool_call("writeArtifact", rel_path="a.bin", bytes=base64.b64encode(b"\x00\x01").decode()),
            tool_call("templateExpand", templatePath="t.j2", json={"who": "Acme"}, output_path="hello.txt"),
            tool_call("blackboard.put", key="k", value=1),
        ),
        tool_call_response("finish", summary="x", outputs=["build/a.bin", "build/hello.txt"]),
    ])
    result = act("s", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("a.bin", "hello.txt"))
    assert all(json.loads(m.content or "")["ok"] for m in model.calls[1].messages if m.role == "tool")
    assert (tmp_path / "out" / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "out" / "hello.txt").read_text() == "Hello Acme"
    assert result.status == "done"
