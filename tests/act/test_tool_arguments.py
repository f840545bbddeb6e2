"""Tool arguments as small models send them: a JSON object or list written as text, a list of strings written as one
string, are taken as meant; whatever else does not fit comes back as an error naming the field and the arguments the
tool takes, without library boilerplate."""

from __future__ import annotations

import json

import pytest

from orchestrator.act.tools import TOOLS


def prepared(name: str, **arguments: object) -> dict[str, object]:
    tool = TOOLS.get(name)
    assert tool is not None
    return tool.prepare(json.dumps(arguments)).args.model_dump(exclude={"reason"})


@pytest.mark.parametrize(
    ("name", "arguments", "field", "meant"),
    [
        ("run_script", {"path": "scripts/s.py", "args": '{"csv": "/inputs/a.csv"}'}, "args", {"csv": "/inputs/a.csv"}),
        ("run_script", {"path": "scripts/s.py", "args": '["--x", "1"]'}, "args", ["--x", "1"]),
        ("run_script", {"path": "scripts/s.py", "argv": "--in a.csv --out 'b c'"}, "argv",
         ["--in", "a.csv", "--out", "b c"]),
        ("template_expand", {"template_path": "t.j2", "data": '{"title": "Q3"}'}, "data", {"title": "Q3"}),
        ("finish", {"summary": "s", "outputs": "build/a.json, build/chart.png"}, "outputs",
         ["build/a.json", "build/chart.png"]),
        ("finish", {"summary": "s", "outputs": "build/a.json"}, "outputs", ["build/a.json"]),
        ("finish", {"summary": "s", "outputs": '["build/a.json"]'}, "outputs", ["build/a.json"]),
        ("run_command", {"argv": "soffice --headless --convert-to pdf build/a.docx"}, "argv",
         ["soffice", "--headless", "--convert-to", "pdf", "build/a.docx"]),
    ],
    ids=["args-object-as-text", "args-list-as-text", "argv-as-one-string", "data-as-text", "outputs-comma-list",
         "outputs-one-path", "outputs-json-text", "command-as-one-string"],
)
def test_values_in_the_shape_small_models_send_are_taken_as_meant(name, arguments, field, meant):
    assert prepared(name, **arguments)[field] == meant


def test_fields_that_take_text_keep_it():
    assert prepared("validate", path="build/a.json", schema="brand.schema.json")["schema_"] == "brand.schema.json"
    assert prepared("write_artifact", path="notes.md", text='["a", "b"]')["text"] == '["a", "b"]'
    assert prepared("blackboard_put", key="k", value='{"a": 1}')["value"] == '{"a": 1}'


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("write_artifact", '{"text": "x"}', "'path' is required"),
        ("template_expand", '{"template_path": "t.j2", "data": "title: Q3"}',
         "'data': Input should be a valid dictionary (got str)"),
        ("read_ref", "{'path': 'a.md'}", "they are not JSON"),
        ("run_script", '{"path": "scripts/s.py", "timeout": 5}', "'timeout' is not an argument"),
    ],
)
def test_what_does_not_fit_is_told_with_the_arguments_the_tool_takes(name, arguments, says):
    prepared_call, outcome = TOOLS.call(None, name, arguments)  # type: ignore[arg-type]
    assert prepared_call is None and not outcome.ok
    assert says in (outcome.error or "")
    assert f"{name} takes {{" in (outcome.error or "") and "(required)" in (outcome.error or "")
    assert "errors.pydantic.dev" not in (outcome.error or "")
