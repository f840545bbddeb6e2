"""A goal's inputs are inputs for every reading tool, under every name the prompt gives them (``inputs/NAME``,
``/inputs/NAME``) and by their bare name when the skill has no file by it (issue 31: ``read_ref inputs/x.txt``
answered "no such file in the skill" for an input the model had just read with ``read_file``)."""

from __future__ import annotations

import json

import pytest
from act_helpers import act, expect_files

from orchestrator.testing import FunctionModel, ScriptedModel, tool_call_response

CSV = "region,revenue\nNorth,10\nSouth,20\n"


def _results(model: ScriptedModel, call: int) -> list[dict]:
    return [json.loads(m.content or "") for m in model.calls[call].messages if m.role == "tool"]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_ref", {"path": "inputs/sales.csv"}),
        ("read_ref", {"path": "/inputs/sales.csv"}),
        ("read_ref", {"path": "sales.csv"}),
        ("read_file", {"path": "sales.csv"}),
        ("read_file", {"path": "/inputs/sales.csv"}),
        ("summarize", {"path": "/inputs/sales.csv"}),
        ("summarize", {"path": "sales.csv"}),
    ],
)
def test_every_reading_tool_reads_the_goals_input_under_every_name(write_skill, skills_root, settings, tmp_path,
                                                                   tool, arguments):
    write_skill("summary", "Total the revenue per region of the CSV you are given; write summary.json.")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "sales.csv").write_text(CSV, encoding="utf-8")
    model = ScriptedModel([
        tool_call_response(tool, **arguments),
        tool_call_response("write_artifact", path="summary.json", text='{"North": 10, "South": 20}'),
        tool_call_response("finish", summary="totals written", outputs=["build/summary.json"]),
    ])
    result = act("summary", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("summary.json", kind="json"), inputs_dir=inputs)
    [read] = _results(model, 1)
    assert read["ok"] is True, read
    assert "North" in json.dumps(read) and "no such file" not in json.dumps(read)
    assert result.status == "done"


def test_a_skill_file_keeps_its_name_when_an_input_has_the_same_one(write_skill, skills_root, settings, tmp_path):
    write_skill("summary", "See [the example](sales.csv).", files={"sales.csv": "example,only\n"})
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "sales.csv").write_text(CSV, encoding="utf-8")
    model = ScriptedModel([
        tool_call_response("read_ref", path="sales.csv"),
        tool_call_response("read_ref", path="inputs/sales.csv"),
        tool_call_response("write_artifact", path="summary.json", text="{}"),
        tool_call_response("finish", summary="done", outputs=["build/summary.json"]),
    ])
    act("summary", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
        expected=expect_files("summary.json", kind="json"), inputs_dir=inputs)
    assert "example,only" in json.dumps(_results(model, 1)[0])
    assert "North" in json.dumps(_results(model, 2)[1])


@pytest.mark.parametrize("path", ["../inputs/sales.csv", "inputs/../../etc/passwd", "/inputs/../secret.txt"])
def test_an_input_name_cannot_leave_the_inputs_folder(write_skill, skills_root, settings, tmp_path, path):
    write_skill("summary", "Summarise the input.")
    inputs = tmp_path / "job" / "inputs"
    inputs.mkdir(parents=True)
    (inputs / "sales.csv").write_text(CSV, encoding="utf-8")
    (tmp_path / "job" / "secret.txt").write_text("secret", encoding="utf-8")
    def reads_then_stops(messages, tools, purpose):
        if not any(m.role == "tool" for m in messages):
            return tool_call_response("read_ref", path=path)
        return tool_call_response("finish", summary="stop", outputs=[])

    model = FunctionModel(reads_then_stops)
    result = act("summary", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 expected=expect_files("summary.json", kind="json"), inputs_dir=inputs)
    sent = json.dumps([m.content for c in model.calls for m in c.messages])
    assert "secret" not in sent.replace("secret.txt", "") and "root:" not in sent
    assert result.status != "done"
