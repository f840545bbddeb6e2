"""The Act loop against the in-memory sandbox backend: what the loop does with script results, without Docker."""

from __future__ import annotations

import json

from act_helpers import act, expect_files

from orchestrator.testing import (
    InMemorySandbox,
    ScriptedModel,
    tool_call,
    tool_call_response,
    tool_calls_response,
)

REPORT_BODY = "Run `scripts/report.py` with `{\"rows\": [...]}`; it writes `report.json`."


def _report(args, files):  # noqa: ANN001, ANN202 - a fake script: (stdin JSON, build/) -> stdout JSON
    files["report.json"] = json.dumps({"rows": len(args["rows"])}).encode()
    return {"written": "report.json"}


def test_a_script_result_and_its_files_reach_the_model_and_the_metrics(write_skill, skills_root, settings, tmp_path):
    write_skill("report", REPORT_BODY, files={"scripts/report.py": "print('never run here')\n"})
    sandbox = InMemorySandbox({"scripts/report.py": _report})
    model = ScriptedModel([
        tool_call_response("run_script", path="scripts/report.py", args={"rows": [1, 2]}, reason="make it"),
        tool_call_response("finish", summary="report written", outputs=["build/report.json"]),
    ])
    result = act("report", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("report.json", kind="json"), sandbox=sandbox)
    model.assert_all_used()
    reply = json.loads(model.calls[1].messages[-1].content or "")
    assert reply["stdout_json"] == {"written": "report.json"} and reply["files_changed"] == ["build/report.json"]
    assert result.status == "done" and json.loads((tmp_path / "out" / "report.json").read_text()) == {"rows": 2}
    [job] = sandbox.jobs
    assert job.calls == [("scripts/report.py", {"rows": [1, 2]})] and job.closed
    run, finish = result.evidence_summary
    assert run.reason_short == "make it" and run.file_ids == ["build/report.json"] and run.container is not None
    assert result.metrics.containers == 1 and result.metrics.tool_calls == 2 and result.metrics.model_calls == 2


def test_the_same_script_with_the_same_inputs_is_answered_from_the_memo(write_skill, skills_root, settings, tmp_path):
    write_skill("report", REPORT_BODY, files={"scripts/report.py": "print('never run here')\n"})
    sandbox = InMemorySandbox({"scripts/report.py": lambda args, files: {"rows": len(args["rows"])}})
    model = ScriptedModel([
        tool_calls_response(
            tool_call("run_script", path="scripts/report.py", args={"rows": [1]}),
            tool_call("run_script", path="scripts/report.py", args={"rows": [1]}),
        ),
        tool_call_response("finish", summary="done"),
    ])
    result = act("report", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox)
    model.assert_all_used()
    assert len(sandbox.jobs[0].calls) == 1
    assert [r.memo_hit for r in result.evidence_summary] == [False, True, False]
    assert result.metrics.memo_hits == 1 and result.metrics.containers == 1 and result.metrics.model_calls == 2
    assert result.metrics.tokens_in == sum(r.tokens_in for r in result.evidence_summary)


def test_a_skill_that_never_touches_build_opens_no_sandbox_job(write_skill, skills_root, settings, tmp_path):
    write_skill("plain", "Just finish.")
    sandbox = InMemorySandbox()
    model = ScriptedModel([tool_call_response("finish", summary="nothing to do")])
    result = act("plain", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 qa_mode="off", sandbox=sandbox)
    model.assert_all_used()
    assert result.status == "done" and sandbox.jobs == []


def test_a_script_path_the_model_invents_is_answered_with_the_real_scripts_and_no_host_path(
        write_skill, skills_root, settings, tmp_path):
    write_skill("report", REPORT_BODY, files={"scripts/report.py": "print('never run here')\n",
                                              "reference/notes.md": "Notes."})
    sandbox = InMemorySandbox({"scripts/report.py": _report})
    model = ScriptedModel([
        tool_call_response("run_script", path="resources/report.py", args={"rows": [1]}),
        tool_call_response("run_script", path="/skill/scripts/report.py", args={"rows": [1]}),
        tool_call_response("run_script", path="report/scripts/report.py", args={"rows": [1, 2]}),
        tool_call_response("finish", summary="report written", outputs=["build/report.json"]),
    ])
    result = act("report", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("report.json", kind="json"), sandbox=sandbox)
    invented = json.loads(model.calls[1].messages[-1].content or "")
    assert invented["ok"] is False and invented["nearest"] == ["scripts/report.py"]
    assert "no such script in the skill: resources/report.py; the nearest are: scripts/report.py" in invented["error"]
    assert str(skills_root) not in invented["error"] and "Errno" not in invented["error"]
    assert result.status == "done"
    assert sandbox.jobs[0].calls == [("scripts/report.py", {"rows": [1]}), ("scripts/report.py", {"rows": [1, 2]})]
    assert not any("missing from the skill" in u.why for u in result.unmet)


def test_validate_with_nothing_to_check_says_so(write_skill, skills_root, settings, tmp_path):
    write_skill("report", REPORT_BODY, files={"report.schema.json": '{"type": "object", "required": ["rows"]}'})
    model = ScriptedModel([
        tool_call_response("validate", schema="report.schema.json"),
        tool_call_response("write_artifact", path="report.json", text='{"rows": 1}'),
        tool_call_response("validate", path="/skill/build/report.json", schema="report.schema.json"),
        tool_call_response("finish", summary="ok", outputs=["build/report.json"]),
    ])
    act("report", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    nothing = json.loads(model.calls[1].messages[-1].content or "")
    assert not nothing["ok"] and "nothing to check: give the file (path" in nothing["error"]
    assert "violations" not in nothing
    checked = json.loads(model.calls[3].messages[-1].content or "")
    assert checked == {"ok": True, "violations": []}


def test_a_schema_the_model_invents_is_answered_with_the_nearest_real_files(write_skill, skills_root, settings,
                                                                            tmp_path):
    write_skill("report", REPORT_BODY, files={"report.schema.json": '{"type": "object"}'})
    model = ScriptedModel([
        tool_call_response("validate", object={"rows": 1}, schema="resources/report.schema.json"),
        tool_call_response("finish", summary="ok"),
    ])
    act("report", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    guessed = json.loads(model.calls[1].messages[-1].content or "")
    assert not guessed["ok"] and guessed["nearest"][0] == "report.schema.json"
    assert "no such file in the skill" in guessed["error"] and str(skills_root) not in guessed["error"]
