"""Long text is read a page at a time: every cut names the call that reads on, and following the cuts reads it all."""

from __future__ import annotations

import json

from act_helpers import act
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from orchestrator.act.paging import page_of
from orchestrator.config import Budgets
from orchestrator.llm.interface import Message, ModelResponse
from orchestrator.testing import FunctionModel, text_response, tool_call, tool_call_response, tool_calls_response

MARKER = "\n[... characters "


def follow(tool: str, first_args: dict) -> tuple[FunctionModel, list[dict]]:
    """A model that calls ``tool`` and then exactly the call each cut names, until a page has no cut."""
    pages: list[dict] = []

    def answer(messages: list[Message], tools: object, purpose: str) -> ModelResponse:
        if purpose != "act":
            return text_response("keep reading the pages")
        reads = {c.id for m in messages for c in m.tool_calls if c.name == tool}
        results = [m for m in messages if m.role == "tool" and m.tool_call_id in reads]
        if not results:
            return tool_call_response(tool, **first_args)
        data = json.loads(results[-1].content or "{}")
        if len(results) > len(pages):
            pages.append(data)
        nxt = data.get("next")
        if nxt is None:
            return tool_call_response("finish", summary="read it all")
        assert nxt["tool"] == tool
        assert f"read the rest with {tool} {json.dumps(nxt['arguments'], ensure_ascii=False)}" in data["text"]
        # notes taken while reading are the progress that keeps a long read from looking like a stall
        notes = tool_call("write_artifact", path="notes.txt", text=f"read {len(pages)} pages")
        return tool_calls_response(tool_call(nxt["tool"], **nxt["arguments"]), notes)

    return FunctionModel(answer), pages


def joined(pages: list[dict]) -> str:
    return "".join(p["text"].split(MARKER)[0] if p.get("next") else p["text"] for p in pages)


LONG = "".join(f"line {i}: naïve café — 価格表 {'x' * (i % 70)}\n" for i in range(3000)) + "tail without newline"


def test_read_file_pages_through_a_long_build_input_and_every_character_is_reached(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("docs", "Read the input.")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "long.txt").write_text(LONG, encoding="utf-8")
    model, pages = follow("read_file", {"path": "inputs/long.txt", "limit": 7000})
    result = act(
        "docs", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        inputs_dir=inputs, budgets=Budgets(max_tool_calls=200),
    )
    assert result.status == "done", result.final_message
    assert len(pages) > 10 and joined(pages) == LONG
    assert [p["offset"] for p in pages] == [0, *[p["end"] for p in pages[:-1]]]
    assert all(p["total_chars"] == len(LONG) for p in pages)
    assert all(len(p["text"].split(MARKER)[0]) <= 7000 for p in pages)


def test_read_ref_pages_a_skill_document_and_the_default_page_fits_the_l3_limit(
    write_skill, skills_root, settings, tmp_path
):
    write_skill("docs", "Read [the guide](guide.md).", files={"guide.md": LONG})
    model, pages = follow("read_ref", {"path": "guide.md"})
    result = act(
        "docs", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        budgets=Budgets(max_tool_calls=200),
    )
    assert result.status == "done", result.final_message
    assert joined(pages) == LONG
    from orchestrator.tokens import estimate_tokens

    assert all(estimate_tokens(p["text"].split(MARKER)[0]) <= settings.disclosure.l3_max_tokens for p in pages)


def test_a_minified_file_with_no_line_breaks_is_cut_inside_its_one_line(write_skill, skills_root, settings, tmp_path):
    minified = json.dumps({"k": ["é" * 5 + str(i) for i in range(4000)]}, ensure_ascii=False)
    write_skill("docs", "Read data.json.", files={"data.json": minified})
    model, pages = follow("read_file", {"path": "data.json", "limit": 5000})
    act(
        "docs", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        budgets=Budgets(max_tool_calls=200),
    )
    assert len(pages) > 3 and joined(pages) == minified


def test_the_l2_cut_names_the_read_ref_call_that_continues_the_body(write_skill, skills_root, settings, tmp_path):
    body = "# Big\n\n" + "".join(f"Step {i}: do the thing number {i} carefully.\n" for i in range(3000))
    write_skill("big", body)
    model, pages = follow("read_ref", {})
    inner = model.fn
    shown_at_l2: list[str] = []

    def answer(messages: list[Message], tools: object, purpose: str) -> ModelResponse:
        if not shown_at_l2:
            text = next(m.content for m in messages if m.content and "[... L2 cut" in m.content)
            l2_text, marker = text.split("\n\n[... L2 cut", 1)
            shown_at_l2.append(l2_text[l2_text.index("# Big"):])
            args = json.loads(marker.split("read the rest with read_ref ", 1)[1].split(" ...]")[0])
            return tool_call_response("read_ref", **args)
        return inner(messages, tools, purpose)

    model.fn = answer
    result = act(
        "big", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off",
        budgets=Budgets(max_tool_calls=200),
    )
    assert result.status == "done", result.final_message
    assert pages[0]["offset"] == len(shown_at_l2[0])
    assert shown_at_l2[0] + joined(pages) == body


def test_an_offset_past_the_end_is_a_fixable_error(write_skill, skills_root, settings, tmp_path):
    write_skill("docs", "Read [g](g.md).", files={"g.md": "short"})
    from orchestrator.testing import ScriptedModel

    model = ScriptedModel([tool_call_response("read_ref", path="g.md", offset=99), tool_call_response("finish")])
    act("docs", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", qa_mode="off")
    reply = json.loads(model.calls[1].messages[-1].content or "{}")
    assert reply["ok"] is False and "offset 99 is outside the text (5 characters" in reply["error"]


@hyp_settings(max_examples=200, deadline=None)
@given(
    text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=3000),
    limit=st.integers(1, 500),
    max_tokens=st.integers(1, 300),
)
def test_following_next_offset_from_zero_reads_every_character_exactly_once(text, limit, max_tokens):
    if not text:
        assert page_of(text, max_tokens=max_tokens).next_offset is None
        return
    offset, parts = 0, []
    while True:
        page = page_of(text, offset=offset, limit_chars=limit, max_tokens=max_tokens)
        assert page.offset == offset and len(page.text) >= 1 and len(page.text) <= limit
        parts.append(page.text)
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert "".join(parts) == text
