"""Tool calls written as text: what many servers and small models send instead of ``tool_calls``.

A server without a tool parser for the model (llama.cpp, Ollama or vLLM without one) returns the model's call as
plain ``content``: a bare JSON object ``{"name": ..., "arguments": ...}``, a fenced JSON block, or
``<tool_call>…</tool_call>`` tags. :func:`read_text_calls` finds every such call in a reply (several work) and says
which spans looked like a call but could not be read, so the model can be told and fix it.

Only the shapes of calls are read, never prose: a JSON object is a call when it names a tool and carries its
arguments (``arguments``/``parameters``/``args``/``input``), when its ``name`` is an offered tool, or when it is
``{"<offered tool>": {...}}``. Everything is bounded: the text read, the calls kept, the nesting JSON may have.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from orchestrator.llm.interface import ToolCall, UnreadCall
from orchestrator.llm.jsonreply import THINKING, loads_lenient, value_at

MAX_TEXT_CHARS = 64_000
"""Only the start of a reply is searched (a reply is bounded by ``max_tokens`` anyway)."""
MAX_CALLS = 16
MAX_CANDIDATES = 400
MAX_LENIENT = 8
"""At most this many call-like spans that are not strict JSON are read leniently (each reads at most 64k)."""
"""At most this many ``{``/``[`` positions are tried as the start of a bare JSON value (hostile text stays cheap)."""

_TAG = re.compile(r"<(tool_call|function_call)>\s*(.*?)\s*(?:</\1>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z_]*)[^\n]*\n(.*?)(?:```|$)", re.DOTALL)
MISTRAL_PREFIX = "[TOOL_CALLS]"
JSON_FENCES = ("", "json", "json5", "tool_call", "tool_code", "tool")
_NAME_KEYS = ("name", "tool", "tool_name", "function", "function_name")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input")
_LOOKS_LIKE_CALL = re.compile(r"""\s*["'](?:name|tool|tool_name|function)["']\s*:\s*["']([^"'\\]{1,100})["']""")
_HAS_ARGS = re.compile(r"""["'](?:arguments|parameters|args|input)["']\s*:""")


@dataclass(frozen=True)
class TextCalls:
    """What a reply's text held: the calls read, the spans that looked like calls but were not readable, and the
    prose around them (``None`` when nothing else was said)."""

    calls: tuple[ToolCall, ...] = ()
    unread: tuple[UnreadCall, ...] = ()
    rest: str | None = None


def read_text_calls(content: str, offered: Collection[str], *, cut: bool = False, salt: str = "") -> TextCalls:
    """The tool calls written in ``content``. ``offered`` are the tool names of the request; ``cut`` says the reply
    ended at ``max_tokens`` (an unreadable call is then reported as cut); ``salt`` makes the call ids of this turn
    differ from another turn's identical reply (ids are deterministic: the same reply in the same place gets the
    same ids, so a replayed conversation is byte-identical)."""
    text = _thinking_blanked(content[:MAX_TEXT_CHARS])
    finder = _Finder(set(offered), cut=cut)
    prose = _code_blanked(text)
    spans = finder.tags(text) or finder.fences(text) or finder.bare(prose)
    if not finder.calls and not finder.unread:
        finder.unread_lookalike(prose)
    if not finder.calls and not finder.unread:
        return TextCalls(rest=content)
    digest = hashlib.sha256(f"{salt}\x00{content}".encode("utf-8", "surrogatepass")).hexdigest()[:12]
    calls = tuple(
        ToolCall(id=f"call_t{digest}_{i}", name=name, arguments=arguments)
        for i, (name, arguments) in enumerate(finder.calls[:MAX_CALLS])
    )
    rest = _without(text, spans).strip() if calls else content
    return TextCalls(calls=calls, unread=tuple(finder.unread[:MAX_CALLS]), rest=rest or None)


def _thinking_blanked(text: str) -> str:
    """``text`` with reasoning blocks (``<think>…</think>``; an unclosed one runs to the end) blanked out, same
    length: a call the model only considers while thinking is not a call."""
    return THINKING.sub(lambda match: " " * len(match.group(0)), text)


def _code_blanked(text: str) -> str:
    """``text`` with fenced blocks of other languages blanked out (same length): code is not a call."""
    def blank(match: re.Match[str]) -> str:
        return match.group(0) if match.group(1).lower() in JSON_FENCES else " " * len(match.group(0))

    return _FENCE.sub(blank, text)


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    kept, at = [], 0
    for start, end in sorted(spans):
        kept.append(text[at:start])
        at = max(at, end)
    kept.append(text[at:])
    return "".join(kept)


class _Finder:
    def __init__(self, offered: set[str], *, cut: bool) -> None:
        self.offered = offered
        self.cut = cut
        self.calls: list[tuple[str, str]] = []
        self.unread: list[UnreadCall] = []

    # --- where calls are written --------------------------------------------------------------------

    def tags(self, text: str) -> list[tuple[int, int]]:
        """``<tool_call>{...}</tool_call>`` (an unterminated last tag reaches the end of the reply)."""
        spans = []
        for match in _TAG.finditer(text):
            spans.append(match.span())
            self._read_block(match.group(2), closed=match.group(0).rstrip().lower().endswith(f"</{match.group(1)}>"))
        return spans

    def fences(self, text: str) -> list[tuple[int, int]]:
        """Fenced blocks holding JSON (```json, ```tool_call or no language); other languages are code, not calls."""
        spans = []
        for match in _FENCE.finditer(text):
            language, body = match.group(1).lower(), match.group(2).strip()
            if language not in JSON_FENCES or body[:1] not in "{[":
                continue
            if not self._call_like(body):
                continue
            spans.append(match.span())
            self._read_block(body, closed=match.group(0).rstrip().endswith("```") and len(match.group(0)) > 3)
        return spans

    def bare(self, text: str) -> list[tuple[int, int]]:
        """JSON values in the prose (a Mistral ``[TOOL_CALLS]`` prefix is dropped)."""
        spans: list[tuple[int, int]] = []
        decoder = json.JSONDecoder(strict=False)  # raw line breaks inside strings are how small models write text
        at, tried, lenient = 0, 0, 0
        while tried < MAX_CANDIDATES:
            starts = [i for i in (text.find("{", at), text.find("[", at)) if i >= 0]
            if not starts:
                break
            start = min(starts)
            tried += 1
            try:
                value, end = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):
                found = None
                if lenient < MAX_LENIENT and _LOOKS_LIKE_CALL.match(text, start + 1, start + 160):
                    lenient += 1  # single quotes, Python's constants, trailing commas
                    found = value_at(text, start)
                if found is None:
                    at = start + 1
                    continue
                value, end = found
            calls = self._calls_in(value)
            if calls:
                self.calls += calls
                head = text[:start].rstrip()
                spans.append((len(head) - len(MISTRAL_PREFIX) if head.upper().endswith(MISTRAL_PREFIX) else start, end))
            at = end
        return spans

    def unread_lookalike(self, text: str) -> None:
        """Text that names a tool the way a call does but is not valid JSON: tell the model, do not guess."""
        match = _LOOKS_LIKE_CALL.search(text)
        if match and (_HAS_ARGS.search(text) or match.group(1) in self.offered):
            start = text.rfind("{", 0, match.start())
            detail = _json_error(text[start if start >= 0 else match.start() :])
            self._unread(match.group(1), detail, text[max(0, start) :])
            return
        for name in self.offered:
            if re.search(rf"(?m)^\W{{0,3}}{re.escape(name)}\s*\(", text):
                self._unread(name, "written as a function call, not as JSON", text)
                return

    # --- reading one block ------------------------------------------------------------------------

    def _read_block(self, body: str, *, closed: bool) -> None:
        fenced = _FENCE.fullmatch(body.strip())
        if fenced:  # a fence inside a tag
            body = fenced.group(2).strip()
        try:
            value = loads_lenient(body)
        except (ValueError, RecursionError):
            name = _LOOKS_LIKE_CALL.search(body)
            detail = "the tag was never closed" if not closed and self.cut else _json_error(body)
            self._unread(name.group(1) if name else "", detail, body)
            return
        calls = self._calls_in(value)
        if calls:
            self.calls += calls
        else:
            self._unread("", "no tool name and arguments in it", body)

    def _call_like(self, body: str) -> bool:
        return bool(_LOOKS_LIKE_CALL.search(body)) or any(f'"{name}"' in body for name in self.offered)

    def _calls_in(self, value: Any) -> list[tuple[str, str]]:
        if isinstance(value, list):
            found = [self._one(item) for item in value[:MAX_CALLS]]
            return [c for c in found if c is not None] if found and all(found) else []
        if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
            return self._calls_in(value["tool_calls"])
        one = self._one(value)
        return [one] if one is not None else []

    def _one(self, value: Any) -> tuple[str, str] | None:
        if not isinstance(value, dict):
            return None
        if isinstance(value.get("function"), dict):  # the wire shape: {"type": "function", "function": {...}}
            return self._one(value["function"])
        name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
        if name is None:
            if len(value) == 1:
                (key, arguments), = value.items()
                if key in self.offered and isinstance(arguments, dict):
                    return key, json.dumps(arguments, ensure_ascii=False)
            return None
        arg_key = next((k for k in _ARG_KEYS if k in value), None)
        if arg_key is not None:
            return self._with_arguments(name.strip(), value[arg_key])
        if name.strip() in self.offered:  # flattened: {"name": "finish", "summary": ..., "outputs": [...]}
            rest = {k: v for k, v in value.items() if k not in _NAME_KEYS and k not in ("type", "id")}
            return name.strip(), json.dumps(rest, ensure_ascii=False)
        return None

    def _with_arguments(self, name: str, arguments: Any) -> tuple[str, str] | None:
        if isinstance(arguments, str):  # the API's own form: the arguments as JSON text
            try:
                arguments = loads_lenient(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                self._unread(name, f"its arguments are not JSON ({_json_error(arguments)})", arguments)
                return None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            self._unread(name, f"its arguments are JSON {type(arguments).__name__}, not an object", str(arguments))
            return None
        return name, json.dumps(arguments, ensure_ascii=False)

    def _unread(self, name: str, detail: str, text: str) -> None:
        self.unread.append(UnreadCall(name=name[:100], detail=detail[:300], cut=self.cut, text=text[:300]))


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return f"{e.msg} at line {e.lineno} column {e.colno}"
    except (ValueError, RecursionError) as e:
        return str(e)[:200]
    return "more than one JSON value"
