"""Tool calls written as text: what many servers and small models send instead of ``tool_calls``.

A server without a tool parser for the model (llama.cpp, Ollama or vLLM without one) returns the model's call as
plain ``content``: a bare JSON object ``{"name": ..., "arguments": ...}``, a fenced JSON block, or
``<tool_call>…</tool_call>`` tags. :func:`read_text_calls` finds every such call in a reply (several work) and says
which spans looked like a call but could not be read, so the model can be told and fix it.

Only the shapes of calls are read, never prose: a JSON object is a call when it names a tool and carries its
arguments (``arguments``/``parameters``/``args``/``input``), when its ``name`` is an offered tool, or when it is
``{"<offered tool>": {...}}``. Everything is bounded: the text read, the calls kept, the nesting JSON may have.

Tags, fences and bare JSON are all searched, in the order they were written. A readable call wins over an unreadable
look-alike in the same reply. The calls run are those of the first block that holds one and of the blocks right
after it (only blank space between); whatever follows them (an invented result, an echoed tool response, an empty
fence) is neither run nor kept as the model's words: ``rest`` is what the model said before its call.
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
_LOOKS_LIKE_CALL_AT_OPEN = re.compile(
    r"""\{\s*["'](?:name|tool|tool_name|function)["']\s*:\s*["']([^"'\\]{1,100})["']""")
_EMPTY_FENCE = re.compile(r"```[ \t]*[A-Za-z_]*[ \t]*\n?\s*```")


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
    finder.tags(text)
    finder.fences(_blanked(text, finder.spans()))
    prose = _code_blanked(text)
    finder.bare(_blanked(prose, finder.spans()))
    blocks = sorted(finder.blocks, key=lambda b: b.start)
    first = next((i for i, b in enumerate(blocks) if b.calls), None)
    if first is None:
        unread = [u for b in blocks for u in b.unread]
        if not unread:
            unread = finder.unread_lookalike(prose)
        return TextCalls(unread=tuple(unread[:MAX_CALLS]), rest=_said(content))
    taken = [blocks[first]]
    for block in blocks[first + 1 :]:
        if not block.calls or block.unread or text[taken[-1].end : block.start].strip(" \t\r\n,;"):
            break
        taken.append(block)
    digest = hashlib.sha256(f"{salt}\x00{content}".encode("utf-8", "surrogatepass")).hexdigest()[:12]
    found = list(dict.fromkeys(c for b in taken for c in b.calls))[:MAX_CALLS]  # a call written twice is one call
    calls = tuple(ToolCall(id=f"call_t{digest}_{i}", name=n, arguments=a) for i, (n, a) in enumerate(found))
    before = _blanked(text[: blocks[first].start], [(b.start, b.end) for b in blocks[:first]])
    return TextCalls(calls=calls, rest=_said(before))


def _said(text: str) -> str | None:
    """The model's own words in ``text``: empty code fences and surrounding blank space removed; None when nothing
    is left (an empty fence is not an answer)."""
    words = _EMPTY_FENCE.sub("", text).strip()
    return words or None


def _thinking_blanked(text: str) -> str:
    """``text`` with reasoning blocks (``<think>…</think>``; an unclosed one runs to the end) blanked out, same
    length: a call the model only considers while thinking is not a call."""
    return THINKING.sub(lambda match: " " * len(match.group(0)), text)


def _code_blanked(text: str) -> str:
    """``text`` with fenced blocks of other languages blanked out (same length): code is not a call."""
    def blank(match: re.Match[str]) -> str:
        return match.group(0) if match.group(1).lower() in JSON_FENCES else " " * len(match.group(0))

    return _FENCE.sub(blank, text)


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with ``spans`` blanked out (same length, so positions stay valid)."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _leading_name(body: str) -> str | None:
    """The tool a JSON object names by its first key (``{"name": "read_file", ...}``), never a key deeper inside."""
    start = body.lstrip().lstrip("[").lstrip()
    if not start.startswith("{"):
        return None
    match = _LOOKS_LIKE_CALL.match(start, 1)
    return match.group(1) if match else None


def _outermost(text: str, positions: list[int]) -> set[int]:
    """Those of ``positions`` (sorted) that are not inside a JSON object or list opened before them, nor inside a
    string: one pass over the text, counting brackets outside double-quoted strings."""
    found: set[int] = set()
    wanted = iter(positions)
    target = next(wanted, None)
    depth, in_string, escaped = 0, False, False
    for at, char in enumerate(text):
        while target is not None and target == at:
            if depth == 0 and not in_string:
                found.add(at)
            target = next(wanted, None)
        if target is None:
            break
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth = max(0, depth - 1)
    return found


@dataclass
class _Block:
    """One place in a reply that was read as calls: where it is, the calls read and the look-alikes not readable."""

    start: int
    end: int
    calls: list[tuple[str, str]]
    unread: list[UnreadCall]


class _Finder:
    def __init__(self, offered: set[str], *, cut: bool) -> None:
        self.offered = offered
        self.cut = cut
        self.calls: list[tuple[str, str]] = []
        self.unread: list[UnreadCall] = []
        self.blocks: list[_Block] = []

    def spans(self) -> list[tuple[int, int]]:
        return [(b.start, b.end) for b in self.blocks]

    def _block(self, start: int, end: int, body: str, *, closed: bool) -> None:
        """Read ``body`` and keep what it held as the block ``start:end``."""
        self.calls, self.unread = [], []
        self._read_block(body, closed=closed)
        if self.calls or self.unread:
            self.blocks.append(_Block(start, end, self.calls, self.unread))
        self.calls, self.unread = [], []

    # --- where calls are written --------------------------------------------------------------------

    def tags(self, text: str) -> None:
        """``<tool_call>{...}</tool_call>`` (an unterminated last tag reaches the end of the reply)."""
        for match in _TAG.finditer(text):
            closed = match.group(0).rstrip().lower().endswith(f"</{match.group(1)}>")
            self._block(*match.span(), match.group(2), closed=closed)

    def fences(self, text: str) -> None:
        """Fenced blocks holding JSON (```json, ```tool_call or no language); other languages are code, not calls."""
        for match in _FENCE.finditer(text):
            language, body = match.group(1).lower(), match.group(2).strip()
            if language not in JSON_FENCES or body[:1] not in "{[":
                continue
            if not self._call_like(body):
                continue
            closed = match.group(0).rstrip().endswith("```") and len(match.group(0)) > 3
            self._block(*match.span(), body, closed=closed)

    def bare(self, text: str) -> None:
        """JSON values in the prose (a Mistral ``[TOOL_CALLS]`` prefix is dropped)."""
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
            self.calls, self.unread = [], []
            calls = self._calls_in(value)
            if calls or self.unread:
                head = text[:start].rstrip()
                begin = len(head) - len(MISTRAL_PREFIX) if head.upper().endswith(MISTRAL_PREFIX) else start
                self.blocks.append(_Block(begin, end, calls, self.unread))
            self.calls, self.unread = [], []
            at = end

    def unread_lookalike(self, text: str) -> list[UnreadCall]:
        """Text that names a tool the way a call does but is not valid JSON: tell the model, do not guess. Only a
        name that opens an object counts (``{"name": "x", ...``), never a key inside one."""
        self.unread = []
        last_args = max((m.start() for m in _HAS_ARGS.finditer(text)), default=-1)
        matches = [m for _, m in zip(range(MAX_CANDIDATES), _LOOKS_LIKE_CALL_AT_OPEN.finditer(text), strict=False)]
        outermost = _outermost(text, [m.start() for m in matches])
        for match in matches:
            if match.start() not in outermost:
                continue
            if last_args > match.start() or match.group(1) in self.offered:
                self._unread(match.group(1), _json_error(text[match.start() :]), text[match.start() :])
                return self.unread
        for name in self.offered:
            if re.search(rf"(?m)^\W{{0,3}}{re.escape(name)}\s*\(", text):
                self._unread(name, "written as a function call, not as JSON", text)
                return self.unread
        return self.unread

    # --- reading one block ------------------------------------------------------------------------

    def _read_block(self, body: str, *, closed: bool) -> None:
        fenced = _FENCE.fullmatch(body.strip())
        if fenced:  # a fence inside a tag
            body = fenced.group(2).strip()
        try:
            value = loads_lenient(body)
        except (ValueError, RecursionError):
            detail = "the tag was never closed" if not closed and self.cut else _json_error(body)
            self._unread(_leading_name(body) or "", detail, body)
            return
        calls = self._calls_in(value)
        if calls:
            self.calls += calls
        else:
            self._unread("", "no tool name and arguments in it", body)

    def _call_like(self, body: str) -> bool:
        """A fence whose object opens with a tool's name, or names an offered tool: data with a ``name`` deeper
        inside (an invented result) is not a call."""
        return _leading_name(body) is not None or any(f'"{name}"' in body for name in self.offered)

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
