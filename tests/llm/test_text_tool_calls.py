"""Tool calls written as text are read as tool calls (``model.text_tool_calls: auto``), the way small models and
servers without a tool parser send them; what looks like a call but cannot be read is reported, never guessed."""

from __future__ import annotations

import json
import time

import pytest

from orchestrator.config import ModelSettings
from orchestrator.llm.factory import open_scripted_model
from orchestrator.llm.interface import Message, ToolSpec
from orchestrator.llm.scenario import parse_scenario
from orchestrator.llm.textcalls import read_text_calls

OFFERED = ["read_ref", "write_artifact", "finish", "list_files"]


def _only(content: str) -> tuple[str, dict]:
    found = read_text_calls(content, OFFERED)
    assert not found.unread, found.unread
    assert len(found.calls) == 1, found
    return found.calls[0].name, json.loads(found.calls[0].arguments)


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "read_ref", "arguments": {"path": "brand.schema.json"}}',
        'I will read the schema first.\n{"name": "read_ref", "arguments": {"path": "brand.schema.json"}}',
        '```json\n{"name": "read_ref", "arguments": {"path": "brand.schema.json"}}\n```',
        "```\n{\"name\": \"read_ref\", \"parameters\": {\"path\": \"brand.schema.json\"}}\n```",
        '<tool_call>\n{"name": "read_ref", "arguments": {"path": "brand.schema.json"}}\n</tool_call>',
        '{"name": "read_ref", "arguments": "{\\"path\\": \\"brand.schema.json\\"}"}',
        '{"type": "function", "function": {"name": "read_ref", "arguments": {"path": "brand.schema.json"}}}',
        '[TOOL_CALLS] [{"name": "read_ref", "arguments": {"path": "brand.schema.json"}}]',
        '{"read_ref": {"path": "brand.schema.json"}}',
        '{"name": "read_ref", "path": "brand.schema.json"}',
    ],
    ids=["bare", "after-prose", "json-fence", "plain-fence", "tags", "string-arguments", "wire-shape", "mistral",
         "tool-as-key", "flattened"],
)
def test_each_way_small_models_write_a_call_is_read_as_that_call(content: str) -> None:
    assert _only(content) == ("read_ref", {"path": "brand.schema.json"})


def test_several_calls_in_one_reply_are_all_read_in_order() -> None:
    content = (
        '<tool_call>{"name": "read_ref", "arguments": {"path": "a.md"}}</tool_call>\n'
        '<tool_call>{"name": "list_files", "arguments": {"glob": "**/*"}}</tool_call>'
    )
    found = read_text_calls(content, OFFERED)
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [
        ("read_ref", {"path": "a.md"}),
        ("list_files", {"glob": "**/*"}),
    ]
    assert len({c.id for c in found.calls}) == 2
    assert found.rest is None
    bare = read_text_calls('{"name": "read_ref", "arguments": {"path": "a.md"}}\n'
                           '{"name": "finish", "arguments": {"summary": "s", "outputs": []}}', OFFERED)
    assert [c.name for c in bare.calls] == ["read_ref", "finish"]
    listed = read_text_calls('[{"name": "read_ref", "arguments": {}}, {"name": "finish", "arguments": {}}]', OFFERED)
    assert [c.name for c in listed.calls] == ["read_ref", "finish"]


def test_the_words_before_a_call_are_kept_and_ids_are_deterministic_per_turn() -> None:
    content = 'Reading it now.\n```json\n{"name": "read_ref", "arguments": {"path": "a.md"}}\n```\nThen I write.'
    first, again = read_text_calls(content, OFFERED, salt="3"), read_text_calls(content, OFFERED, salt="3")
    later = read_text_calls(content, OFFERED, salt="5")
    assert first.rest == "Reading it now."  # what follows a call is not the model's words (it has not seen a result)
    assert first.calls[0].id == again.calls[0].id != later.calls[0].id


@pytest.mark.parametrize(
    "content",
    [
        "The brand colours are navy and orange.",
        '{"primary": "#1F3A5F", "accent": "#F28C28"}',
        '```json\n{"steps": [{"skill": "brand-guidelines"}]}\n```',
        '```python\nprint({"name": "x", "arguments": {}})\n```',
        '{"name": "Acme", "colors": {"primary": "#1F3A5F"}}',
    ],
    ids=["prose", "json-answer", "plan-json", "python-code", "data-with-a-name"],
)
def test_text_that_is_not_a_call_stays_text(content: str) -> None:
    found = read_text_calls(content, OFFERED)
    assert found.calls == () and found.unread == ()
    assert found.rest == content


@pytest.mark.parametrize(
    ("content", "name", "detail"),
    [
        ('{"name": "read_ref", "arguments": {"path": "a.md"}', "read_ref", "Expecting"),
        ('<tool_call>{"name": "write_artifact", "arguments": {"path": "x.json", "text": "{</tool_call>',
         "write_artifact", "Unterminated"),
        ('```json\n{"name": "read_ref", "arguments": {path: a.md}}\n```', "read_ref", "property name"),
        ('{"name": "read_ref", "arguments": "path=a.md"}', "read_ref", "not JSON"),
        ('{"name": "read_ref", "arguments": ["a.md"]}', "read_ref", "not an object"),
        ('read_ref(path="brand.schema.json")', "read_ref", "function call"),
    ],
    ids=["unclosed-brace", "broken-tag", "unquoted-keys", "arguments-text", "arguments-list", "python-style"],
)
def test_a_call_that_cannot_be_read_is_reported_with_why(content: str, name: str, detail: str) -> None:
    found = read_text_calls(content, OFFERED)
    assert found.calls == ()
    assert len(found.unread) == 1
    assert found.unread[0].name == name
    assert detail in found.unread[0].detail
    assert found.rest == content  # the model's own words stay in the history


def test_a_call_cut_at_max_tokens_is_reported_as_cut() -> None:
    found = read_text_calls('<tool_call>{"name": "write_artifact", "arguments": {"path": "a", "text": "lo', OFFERED,
                            cut=True)
    assert found.unread and found.unread[0].cut and found.unread[0].name == "write_artifact"


def test_hostile_text_is_read_in_bounded_time() -> None:
    nested = "[" * 100_000 + "]" * 100_000
    braces = '{"name": "x", ' * 20_000
    started = time.monotonic()
    for content in (nested, braces, "{" * 200_000, '{"a":' * 50_000):
        found = read_text_calls(content, OFFERED)
        assert found.calls == ()
    many = "\n".join(json.dumps({"name": "read_ref", "arguments": {"path": str(i)}}) for i in range(500))
    assert len(read_text_calls(many, OFFERED).calls) == 16
    assert time.monotonic() - started < 10


# --- through the client, over HTTP -------------------------------------------------------------------------------

TOOLS = [ToolSpec(name=n, description=n, parameters={"type": "object"}) for n in OFFERED]


def _serve(content: str, *, finish_reason: str | None = None, settings: ModelSettings | None = None):
    reply = {"content": content} | ({"finish_reason": finish_reason} if finish_reason else {})
    scenario = parse_scenario(json.dumps({"goal": "g", "steps": [{"reply": reply}]}))
    return open_scripted_model(scenario, settings or ModelSettings(max_retries=0, request_timeout_s=5))


def test_the_client_returns_text_calls_as_tool_calls_and_keeps_the_history_valid() -> None:
    with _serve('Let me look.\n{"name": "read_ref", "arguments": {"path": "brand.schema.json"}}') as (model, _):
        response = model.complete([Message(role="user", content="go")], tools=TOOLS, purpose="act")
    assert response.calls_from_text
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("read_ref", {"path": "brand.schema.json"})
    ]
    message = response.as_message().to_openai()
    assert message["content"] == "Let me look."
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"path": "brand.schema.json"}


def test_text_calls_are_only_read_when_tools_were_offered_and_the_setting_is_auto() -> None:
    content = '{"name": "read_ref", "arguments": {"path": "a.md"}}'
    with _serve(content) as (model, _):
        assert model.complete([Message(role="user", content="go")]).content == content
    off = ModelSettings(max_retries=0, request_timeout_s=5, text_tool_calls="off")
    with _serve(content, settings=off) as (model, _):
        response = model.complete([Message(role="user", content="go")], tools=TOOLS)
    assert response.tool_calls == () and response.content == content


def test_a_cut_reply_marks_its_broken_call_unread_and_sends_no_broken_json_back() -> None:
    with _serve('{"name": "write_artifact", "arguments": {"path": "brand.json", "text": "{\\"na',
                finish_reason="length") as (model, _):
        response = model.complete([Message(role="user", content="go")], tools=TOOLS, purpose="act")
    assert response.cut and response.tool_calls == ()
    assert response.unread_calls[0].cut and response.unread_calls[0].name == "write_artifact"
    assert "tool_calls" not in response.as_message().to_openai()


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "write_artifact", "arguments": {"path": "a.md", "text": "# Notes\n\n- one\n"}}',
        "{'name': 'write_artifact', 'arguments': {'path': 'a.md', 'text': '# Notes\\n\\n- one\\n'}}",
        "I will write it: {'name': 'write_artifact', 'arguments': {'path': 'a.md', 'text': '# Notes\\n\\n- one\\n'}}",
        '<tool_call>{"name": "write_artifact", "arguments": {"path": "a.md", "text": "# Notes\\n\\n- one\\n",},}'
        "</tool_call>",
        '```json\n{"name": "write_artifact", '
        '"arguments": "{\'path\': \'a.md\', \'text\': \'# Notes\\\\n\\\\n- one\\\\n\'}"}\n```',
    ],
    ids=["raw-line-breaks", "single-quotes", "single-quotes-in-prose", "trailing-commas", "python-arguments-text"],
)
def test_what_small_models_get_wrong_in_json_is_read_as_meant(content: str) -> None:
    [call] = read_text_calls(content, OFFERED).calls
    assert call.name == "write_artifact"
    assert json.loads(call.arguments) == {"path": "a.md", "text": "# Notes\n\n- one\n"}


# --- what follows a call, and look-alikes (issue 31: a real 1.5B model's replies) --------------------------------

CALL = '{"name": "read_ref", "arguments": {"path": "sales.csv"}}'


@pytest.mark.parametrize(
    "after",
    [
        '\n```json\n{"name": "sales.csv", "columns": [{"name": "date", "type": "str"}], "rows": 12}\n```',
        '\n```json\n{"date": {"columns": [{"name": "region"}, {"name": "revenue"\n```',
        '\n<tool_response>\n{"name": "read_ref", "content": "date,region,revenue"}\n</tool_response>',
        '\n```\n```',
        "\n```json\n```\nThe file has 12 rows, 3 columns.",
        '\nResult: {"ok": true, "text": "date,region,revenue"}',
    ],
    ids=["invented-result-with-name", "unreadable-invented-result", "echoed-tool-response", "empty-fence",
         "empty-fence-then-invented-words", "invented-result-in-prose"],
)
def test_a_bare_call_wins_and_what_follows_it_is_neither_run_nor_kept(after: str) -> None:
    found = read_text_calls("I'll read the data.\n" + CALL + after, OFFERED)
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [("read_ref", {"path": "sales.csv"})]
    assert found.unread == ()
    assert found.rest == "I'll read the data."


def test_a_readable_call_wins_over_an_unreadable_look_alike_before_it() -> None:
    found = read_text_calls('{"name": "read_ref", "arguments": {path: a.md}}\n' + CALL, OFFERED)
    assert [c.name for c in found.calls] == ["read_ref"] and found.unread == ()


def test_an_unreadable_call_is_never_named_after_a_key_inside_it() -> None:
    broken = '```json\n{"tool_input": {"columns": [{"name": "date"}, {"name": "region"\n```'
    found = read_text_calls(broken, OFFERED)
    assert found.calls == () and all(u.name != "date" for u in found.unread)
    data = '```json\n{"rows": [{"name": "date", "arguments": 1}]}\n```'
    assert read_text_calls(data, OFFERED).unread == ()
    bare = '{"columns": [{"name": "date", "arguments": [1, 2'
    assert all(u.name != "date" for u in read_text_calls(bare, OFFERED).unread)


@pytest.mark.parametrize("content", ["```\n```", "```json\n```", "  ```\n\n```  "])
def test_an_empty_fence_is_no_answer(content: str) -> None:
    assert read_text_calls(content, OFFERED).rest is None


def test_a_call_written_twice_in_a_row_is_one_call() -> None:
    found = read_text_calls(CALL + "\n```json\n" + CALL + "\n```", OFFERED)
    assert [c.name for c in found.calls] == ["read_ref"]
