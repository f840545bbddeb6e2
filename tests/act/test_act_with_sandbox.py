"""The Act loop driving real scripts in the real Docker sandbox (the model is scripted)."""

from __future__ import annotations

import json

from act_helpers import act, expect_files

from orchestrator.config import Budgets
from orchestrator.testing import ScriptedModel, text_response, tool_call_response
from orchestrator.testing.memory_sandbox import InMemorySandbox

MAKE_REPORT = """\
import json, sys
args = json.load(sys.stdin)
if args.get("rows") is None:
    sys.stderr.write("need rows\\n")
    sys.exit(3)
with open("build/report.json", "w") as fh:
    json.dump({"rows": args["rows"], "total": sum(args["rows"])}, fh)
print(json.dumps({"written": "build/report.json", "total": sum(args["rows"])}))
"""


def _report_skill(write_skill):  # noqa: ANN001, ANN202
    return write_skill(
        "report",
        'Run `scripts/make_report.py` with {"rows": [numbers]}.',
        files={"scripts/make_report.py": MAKE_REPORT},
    )


def test_a_skill_with_a_script_runs_to_a_validated_artifact(
    write_skill, skills_root, settings, sandbox_runner, tmp_path
):
    _report_skill(write_skill)
    model = ScriptedModel(
        [
            tool_call_response("run_script", path="scripts/make_report.py", args={"rows": [1, 2, 3]}),
            tool_call_response("finish", summary="report", outputs=["build/report.json"]),
        ]
    )
    result = act(
        "report",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        expected=expect_files("report.json", kind="json"),
        sandbox=sandbox_runner,
    )
    model.assert_all_used()
    assert result.status == "done", result.unmet
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == {"rows": [1, 2, 3], "total": 6}
    reply = json.loads(model.calls[1].messages[-1].content or "")
    assert reply["stdout_json"] == {"written": "build/report.json", "total": 6}
    assert reply["files_changed"] == ["build/report.json"]
    assert "sum(args" not in json.dumps([m.model_dump() for m in model.calls[1].messages])
    step = result.evidence_summary[0]
    assert step.container is not None and step.container["exit_code"] == 0 and result.metrics.containers == 1
    assert result.stdout_results == [{"written": "build/report.json", "total": 6}]


def test_a_failed_script_gets_exactly_one_informed_retry(
    write_skill, skills_root, settings, sandbox_runner, tmp_path
):
    _report_skill(write_skill)
    model = ScriptedModel(
        [
            tool_call_response("run_script", path="scripts/make_report.py", args={}),
            tool_call_response("run_script", path="scripts/make_report.py", args={"rows": None}),
            text_response("The script needs rows; none are available."),  # the Micro-Reflect
            tool_call_response("run_script", path="scripts/make_report.py", args={"rows": [1]}),
            tool_call_response("finish", summary="could not"),
            tool_call_response("finish", summary="could not"),
        ]
    )
    result = act(
        "report",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        expected=expect_files("report.json", kind="json"),
        sandbox=sandbox_runner,
    )
    model.assert_all_used()
    tool_results = [json.loads(m.content or "") for m in model.calls[-1].messages if m.role == "tool"]
    first, retry, refused = tool_results[:3]
    assert first["ok"] is False and first["exit_code"] == 3 and "need rows" in first["stderr_summary"]
    assert "1 informed retry left" in first["retry"]
    assert retry["ok"] is False and retry["retry"] == "no retries left for scripts/make_report.py"
    assert refused["ok"] is False and "retry budget" in refused["error"] and "exit_code" not in refused
    assert result.metrics.containers == 2 and result.status == "unmet"


def test_a_script_past_its_timeout_is_killed_and_reported(
    write_skill, skills_root, settings, sandbox_runner, tmp_path
):
    write_skill("slow", "Run `scripts/slow.sh`.", files={"scripts/slow.sh": "sleep 30\n"})
    model = ScriptedModel(
        [
            tool_call_response("run_script", path="scripts/slow.sh"),
            tool_call_response("finish", summary="timed out"),
        ]
    )
    act(
        "slow",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        qa_mode="off",
        budgets=Budgets(script_timeout_s=1),
        sandbox=sandbox_runner,
    )
    reply = json.loads(model.calls[1].messages[-1].content or "")
    assert reply["ok"] is False and reply["timed_out"] is True


def test_traceback_source_lines_are_hidden_from_the_model(
    write_skill, skills_root, settings, sandbox_runner, tmp_path
):
    write_skill(
        "boom",
        "Run `scripts/boom.py`.",
        files={
            "scripts/boom.py": "def explode_with_a_distinctive_name():\n"
            "    raise ValueError('kaboom happened here')\n"
            "explode_with_a_distinctive_name()\n"
        },
    )
    model = ScriptedModel(
        [tool_call_response("run_script", path="scripts/boom.py"), tool_call_response("finish", summary="x")]
    )
    act(
        "boom",
        model,
        skills_root=skills_root,
        settings=settings,
        out_dir=tmp_path / "out",
        qa_mode="off",
        sandbox=sandbox_runner,
    )
    reply = json.loads(model.calls[1].messages[-1].content or "")
    assert "ValueError: kaboom happened here" in reply["stderr_summary"]
    assert "raise ValueError" not in reply["stderr_summary"]
    assert "explode_with_a_distinctive_name()" not in reply["stderr_summary"].replace("in explode", "")


def test_a_declared_tool_missing_from_the_image_is_refused_before_any_model_call(
    write_skill, skills_root, settings, tmp_path
):
    from orchestrator.act.act_io import ActRequest
    from orchestrator.act.blackboard import Blackboard
    from orchestrator.act.engine import execute_skill
    from orchestrator.skills.loader import SkillLibrary

    write_skill("needs", "Needs ffmpeg.", frontmatter="metadata:\n  requires-tools: [ffmpeg]\n")
    model = ScriptedModel([])
    result = execute_skill(
        ActRequest(goal="g", skill_id="needs"),
        model=model,
        library=SkillLibrary(skills_root),
        settings=settings,
        out_dir=tmp_path / "out",
        blackboard=Blackboard(),
        sandbox=InMemorySandbox(tools={"python3": "3.11", "node": "18"}),
    )
    assert result.status == "failed" and result.exit_reason == "missing_tool"
    assert "ffmpeg" in result.unmet[0].why and model.calls == []


def test_a_script_that_prints_plain_text_succeeds_with_its_text_as_result(write_skill, skills_root, settings,
                                                                          sandbox_runner, tmp_path):
    write_skill("hello", "Run `scripts/hello.sh`.", files={"scripts/hello.sh": "echo 'hello, plain world'\n"})
    model = ScriptedModel([tool_call_response("run_script", path="scripts/hello.sh"),
                           tool_call_response("finish", summary="said hello")])
    result = act("hello", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox_runner)
    reply = json.loads(model.calls[1].messages[-1].content or "")
    assert reply["ok"] is True and reply["stdout_text"].strip() == "hello, plain world"
    assert result.stdout_results == ["hello, plain world"] and result.status == "done"


def test_a_broken_sandbox_ends_the_act_as_failed_and_keeps_the_evidence(write_skill, skills_root, settings,
                                                                        docker_client, tmp_path):
    from orchestrator.config import load_settings
    from orchestrator.sandbox.docker import SandboxRunner

    _report_skill(write_skill)
    broken = load_settings(cache_dir=tmp_path / "c", sandbox={"label_prefix": "orchtest",
                                                              "image": "orchtest-no-such-image:never"})
    runner = SandboxRunner(broken.sandbox, client=docker_client)
    model = ScriptedModel([
        tool_call_response("read_ref", path="SKILL.md"),
        tool_call_response("run_script", path="scripts/make_report.py", args={"rows": [1]}),
    ])
    result = act("report", model, skills_root=skills_root, settings=broken, out_dir=tmp_path / "out",
                 sandbox=runner)
    assert result.status == "failed" and result.exit_reason == "sandbox_error"
    assert "build-image" in result.next_step + result.final_message
    assert [r.tool for r in result.evidence_summary] == ["read_ref", "run_script"]
    assert result.where == "skill:report / tool:run_script"


def test_a_symlinked_folder_in_build_cannot_lead_a_read_to_script_source(write_skill, skills_root, settings,
                                                                         sandbox_runner, tmp_path):
    write_skill("sneak", "Run `scripts/link.sh`.", files={"scripts/link.sh": "ln -s / build/root\necho '{}'\n"})
    model = ScriptedModel([
        tool_call_response("run_script", path="scripts/link.sh"),
        tool_call_response("read_file", path="build/root/skill/scripts/link.sh"),
        text_response("Nothing to read there."),  # the Micro-Reflect
        tool_call_response("finish", summary="x"),
    ])
    act("sneak", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        sandbox=sandbox_runner)
    model.assert_all_used()
    reply = json.loads(model.calls[2].messages[-2].content or "")
    assert reply["ok"] is False and "does not exist" in reply["error"]
    assert "ln -s" not in json.dumps([m.model_dump() for m in model.calls[3].messages])
