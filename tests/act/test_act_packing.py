"""Context packing: older tool results go as summaries, the L2 body once, and requests stay bounded as Acts grow."""

from __future__ import annotations

import json

from orchestrator.act.packing import pack_messages, request_tokens, summarize_result
from orchestrator.llm.interface import Message, ToolCall

L2_BODY = "# Slide decks\n" + "Use python-pptx to build decks. " * 400


def _history(turns: int, result_chars: int = 6000) -> list[Message]:
    messages = [
        Message(role="system", content="You run one skill."),
        Message(role="user", content=f"Goal: a deck\nSKILL.md body (L2):\n{L2_BODY}"),
    ]
    for i in range(turns):
        call = ToolCall(id=f"call_{i}", name="read_file", arguments=json.dumps({"path": f"ref{i}.md"}))
        messages.append(Message(role="assistant", content=f"Reading reference {i}.", tool_calls=(call,)))
        payload = {"ok": True, "path": f"ref{i}.md", "text": f"line {i} " * (result_chars // 8)}
        messages.append(Message(role="tool", tool_call_id=f"call_{i}", content=json.dumps(payload)))
    return messages


def test_older_tool_results_are_sent_as_summaries_and_recent_ones_whole():
    history = _history(8)
    packed = pack_messages(history, keep_recent=3, max_tokens=100_000)
    tools = [m for m in packed if m.role == "tool"]
    assert [json.loads(m.content)["path"] for m in tools] == [f"ref{i}.md" for i in range(8)]
    assert all("earlier_result" in json.loads(m.content) for m in tools[:5])
    assert [m.content for m in tools[5:]] == [m.content for m in history if m.role == "tool"][5:]
    assert history[3].content != packed[3].content and "earlier_result" not in (history[3].content or "")


def test_the_l2_body_is_sent_once_per_request():
    packed = pack_messages(_history(20), keep_recent=4, max_tokens=24_000)
    assert sum((m.content or "").count("Use python-pptx to build decks.") for m in packed) == 400
    assert packed[1].content == _history(1)[1].content


def test_requests_stay_bounded_as_an_act_grows_to_twenty_steps():
    sizes = [request_tokens(pack_messages(_history(n), keep_recent=4, max_tokens=24_000)) for n in (2, 5, 10, 20)]
    unpacked = request_tokens(_history(20))
    assert max(sizes) <= 24_000 < unpacked
    per_step = (sizes[-1] - sizes[1]) / 15
    assert per_step < 200  # a summary, not the ~1,500-token result


def test_a_tight_budget_cuts_old_turns_but_keeps_the_pairs_and_the_last_turn():
    history = _history(20)
    packed = pack_messages(history, keep_recent=4, max_tokens=8_000)
    assert len(packed) == len(history)
    assert [m.role for m in packed] == [m.role for m in history]
    assert [m.tool_call_id for m in packed] == [m.tool_call_id for m in history]
    assert packed[-1] == history[-1]


def test_a_summary_keeps_ok_error_and_short_fields():
    content = json.dumps({"ok": False, "error": "no such file", "path": "x.md", "text": "y" * 5000, "exit_code": 2})
    summary = json.loads(summarize_result(content))
    assert summary["ok"] is False and summary["error"] == "no such file" and summary["path"] == "x.md"
    assert len(json.dumps(summary)) < 500
    assert "summarised" in summarize_result("plain text " * 100)


def test_a_runaway_reply_is_sent_as_its_start_in_every_later_request():
    runaway = "I will carefully check every rule again before the next step. " * 300  # ~4,700 tokens, cut by the server
    history = _history(2)
    history.insert(4, Message(role="assistant", content=runaway))
    history.insert(5, Message(role="user", content="Call a tool, or call finish(summary, outputs)."))
    packed = pack_messages(history, keep_recent=4, max_tokens=24_000)
    [sent] = [m for m in packed if m.role == "assistant" and "carefully" in (m.content or "")]
    assert 300 <= request_tokens([sent]) < 400 and "tokens, is left out" in (sent.content or "")
    assert history[4].content == runaway  # the Act's own history (the evidence) keeps all of it
    assert [m.content for m in packed if m.role == "assistant"][0] == "Reading reference 0."
