"""Context packing: what an Act sends the model on each turn, bounded however many turns it takes.

The Act keeps its full history (evidence is built from it); each request is a packed copy:

* the system prompt and the first user message (goal, expected outputs and the L2 body) are sent as they are —
  the L2 body is in that message only, so it is sent once per request and never repeated;
* the last ``keep_recent`` tool results are sent whole; older ones are replaced by a short summary that keeps
  ``ok``, ``error`` and the short fields (paths, exit codes) and says how much was left out — the model can call
  the tool again, and repeated reads are answered from the read cache;
* an assistant reply longer than ``REPLY_TOKENS`` (a small model's runaway text, up to ``max_tokens`` of it) is
  sent as its start: it would otherwise ride along with every later request of the Act;
* if the request is still over ``max_tokens``, older summaries and older assistant texts are cut further, oldest
  first, until it fits (tool calls and their results stay paired, as the API requires).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orchestrator.llm.interface import Message
from orchestrator.prompts import render_prompt
from orchestrator.tokens import cut_to_tokens, estimate_tokens

_FIELD_CHARS = 160
_TEXT_CHARS = 240
REPLY_TOKENS = 300


def summarize_result(content: str, *, max_chars: int = _TEXT_CHARS) -> str:
    """A short stand-in for an older tool result (JSON in, JSON out when it was JSON)."""
    tokens = estimate_tokens(content)
    try:
        data: Any = json.loads(content)
    except ValueError:
        data = None
    if isinstance(data, dict):
        kept: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, bool | int | float) or value is None:
                kept[key] = value
            elif isinstance(value, str):
                kept[key] = value if len(value) <= _FIELD_CHARS else value[:_FIELD_CHARS] + "…"
            if len(json.dumps(kept, ensure_ascii=False)) > max_chars:
                kept.pop(key, None)
                break
        kept["earlier_result"] = render_prompt("notes/result_summarised", tokens=tokens)
        return json.dumps(kept, ensure_ascii=False)
    head = content[:max_chars]
    head += "…" if len(content) > max_chars else ""
    return render_prompt("notes/text_result_summarised", head=head, tokens=tokens)


def request_tokens(messages: Sequence[Message]) -> int:
    total = 0
    for m in messages:
        total += estimate_tokens(m.content or "") + 4
        total += sum(estimate_tokens(c.name) + estimate_tokens(c.arguments) for c in m.tool_calls)
    return total


def pack_messages(messages: Sequence[Message], *, keep_recent: int = 4, max_tokens: int = 24_000) -> list[Message]:
    """The request to send for this history: older tool results summarised, then cut to ``max_tokens``."""
    packed = list(messages)
    tool_positions = [i for i, m in enumerate(packed) if m.role == "tool"]
    older = tool_positions[:-keep_recent] if keep_recent > 0 else tool_positions
    for i in older:
        packed[i] = packed[i].model_copy(update={"content": summarize_result(packed[i].content or "")})
    for i, m in enumerate(packed):
        if m.role == "assistant" and m.content and estimate_tokens(m.content) > REPLY_TOKENS:
            start, left_out = cut_to_tokens(m.content, REPLY_TOKENS)
            packed[i] = m.model_copy(update={"content": render_prompt("notes/reply_cut", text=start, tokens=left_out)})
    if request_tokens(packed) <= max_tokens:
        return packed
    # Still too big: shrink what is oldest first (never the first two messages, never the last turn).
    head, last = 2, len(packed) - 1
    for i in range(head, last):
        m = packed[i]
        if not m.content or estimate_tokens(m.content) <= 40:
            continue
        short, _ = cut_to_tokens(m.content, 30)
        packed[i] = m.model_copy(update={"content": render_prompt("notes/cut_to_fit", text=short)})
        if request_tokens(packed) <= max_tokens:
            break
    return packed
