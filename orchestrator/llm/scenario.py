"""Scenario files for the scripted model server: YAML parsed once into pydantic models, checked per request.

A scenario plays one scripted reply per ``/v1/chat/completions`` request, in order, and can check what the
runtime sent before answering::

    goal: "Make a 5-slide deck on Q3 results"   # required: the goal the scenario was written for
    model: scripted-demo                        # optional: model id echoed back (default: the request's)
    inputs: [data/sales.csv]                    # optional: the goal's input files, relative to this file
    forbid: ["def main(", "import pptx"]        # optional: text NO request may contain (whole body)
    steps:                                      # one per request, played in order
      - purpose: plan                           # optional: required X-Orch-Purpose header
        expect:                                 # optional checks on the request (a string or a list each)
          contains: [brand-guidelines]          # must appear in the messages
          not_contains: [Brand colors]          # must not appear in the messages
          tool_result_for: [read_ref]           # a tool message answers a call of each named tool
          last_tool_result_contains: ['"ok": false']  # in the content of the last tool message
          tools_offered: [run_script]           # names in the request's tools
        reply:                                  # content and/or tool_calls, or error
          content: "text or JSON text"
          tool_calls:
            - name: run_script
              arguments: {path: scripts/build.py}   # a mapping (sent as JSON) or raw text
          usage: {prompt_tokens: 120, completion_tokens: 20}  # optional; a missing figure is estimated
                                                # (cached_tokens: N reports provider prompt-cache hits)
          finish_reason: tool_calls             # default: tool_calls with tool calls, else stop
          # error: {status: 429, message: slow down, code: rate_limit_exceeded}  # an HTTP error instead

Steps are numbered from 1 everywhere a person reads them: error messages, trace lines and tool-call ids
(``call_<step>_<i>``, ``i`` from 0). A request that fails its step's checks gets HTTP 400 (code
``scenario_mismatch``) and does not use the step up. Estimated usage: prompt tokens = the estimate of the JSON
text of the request's messages plus tools, completion tokens = the estimate of the reply's content plus its
tool-call arguments, so a runtime that sends less is charged less. An ``error`` step answers one HTTP request,
so each of the SDK's retries of a 429/5xx consumes a step.

Text checks (``contains``, ``not_contains``, ``forbid``) look at the *unescaped* strings of the request: every
string value, and, when a string is itself a JSON object or array (a JSON tool result), the strings inside it
too. So ``"ok": false`` in a JSON tool result or a line of source code with quotes matches as written, not as
JSON-escaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from orchestrator.errors import ConfigError, ModelError, ModelErrorCode
from orchestrator.llm.interface import Purpose
from orchestrator.tokens import estimate_tokens


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


StrList = Annotated[list[str], BeforeValidator(_as_list)]


class ScriptMismatch(ModelError, AssertionError):
    """A scripted model was called in a way its script did not foresee (or not called as often as scripted).

    It is a :class:`ModelError`, so the runtime handles it like any model failure, and an ``AssertionError``,
    so a test that catches neither still fails with the message.
    """

    default_code = ModelErrorCode.SCRIPT_MISMATCH


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expectation(_Strict):
    """What one request must look like for its step to be played."""

    contains: StrList = []
    not_contains: StrList = []
    tool_result_for: StrList = []
    last_tool_result_contains: StrList = []
    tools_offered: StrList = []


class ScriptedToolCall(_Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """A mapping (sent as JSON text) or the raw argument text, which may be deliberately invalid JSON."""

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class ScriptedUsage(_Strict):
    """Reported usage; a missing figure is estimated from the request or the reply."""

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    """Prompt tokens served from the provider's prompt cache (sent as ``prompt_tokens_details.cached_tokens``)."""


class ScriptedError(_Strict):
    """An HTTP error answer instead of a completion (one per request: SDK retries consume further steps)."""

    status: int = Field(ge=400, le=599)
    message: str = "scripted error"
    type: str = "api_error"
    code: str | None = None


class Reply(_Strict):
    content: str | None = None
    tool_calls: list[ScriptedToolCall] = []
    usage: ScriptedUsage = ScriptedUsage()
    finish_reason: str | None = None
    error: ScriptedError | None = None

    @model_validator(mode="after")
    def _says_something(self) -> Reply:
        if self.content is None and not self.tool_calls and self.error is None:
            raise ValueError("a reply needs `content`, `tool_calls` or `error`")
        return self


class Step(_Strict):
    purpose: Purpose | None = None
    """Required value of the ``X-Orch-Purpose`` header (not checked when absent)."""
    expect: Expectation = Expectation()
    reply: Reply
    delay_ms: int | None = Field(None, ge=0, le=600_000)
    """Think time before this reply (default: the scenario's ``delay_ms``); a real model is never instant."""


class Scenario(_Strict):
    goal: str = Field(min_length=1)
    model: str | None = None
    inputs: StrList = []
    """Input files of the goal, relative to the scenario file (used by ``run`` when no ``--input`` is given)."""
    forbid: StrList = []
    steps: list[Step] = Field(min_length=1)
    delay_ms: int = Field(0, ge=0, le=600_000)
    """Think time before every reply whose step sets none."""
    order: Literal["sequence", "by_purpose"] = "sequence"
    """``sequence``: each request takes the next step. ``by_purpose``: the next step of the request's purpose (steps
    without a purpose serve purposes that have none of their own), so a script does not depend on how many phases
    of each kind the runtime runs."""
    cycle: bool = False
    """When the steps (of a purpose) are used up, play them again from the first: a model that never finishes."""
    source: str = Field("<memory>", exclude=True)
    """Where the scenario came from (the file path); used in every mismatch message."""


def scenario_inputs(scenario: Scenario) -> list[Path]:
    """The scenario's input files as paths (relative entries resolve from the scenario file's folder)."""
    base = Path(scenario.source).parent
    return [base / entry for entry in scenario.inputs]


def load_scenario(path: Path | str) -> Scenario:
    """Parse a scenario file; errors name the file, the field (``step N: reply.tool_calls[0].name``), line.

    A recording of a real session (a ``record-llm`` folder, or its ``exchanges.jsonl``) is read as the scenario
    that replays it."""
    path = Path(path)
    # Deferred: the recorder builds its scenarios with this module's models.
    from orchestrator.llm.recorder import is_recording, load_recording

    if is_recording(path):
        return load_recording(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(
            f"cannot read scenario file {path}: {e.strerror or e}",
            where="scenario",
            next_step="pass an existing YAML file as scripted:PATH or --scenario PATH",
            path=str(path),
        ) from e
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"scenario file {path} is not UTF-8 text (byte {e.start} cannot be decoded)",
            where="scenario",
            next_step="save the scenario as UTF-8 YAML",
            path=str(path),
        ) from e
    return parse_scenario(text, source=str(path))


def parse_scenario(text: str, *, source: str = "<memory>") -> Scenario:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(
            f"scenario {source} is not valid YAML: {e}",
            where="scenario",
            path=source,
            next_step="fix the YAML",
        ) from e
    if not isinstance(data, dict):
        raise ConfigError(
            f"scenario {source} must be a mapping with `goal:` and `steps:`",
            where="scenario",
            path=source,
            next_step="see docs/reference/scenario-files.md",
        )
    try:
        return Scenario.model_validate({**data, "source": source})
    except ValidationError as e:
        problems = [_describe(err["loc"], err["msg"], root) for err in e.errors()]
        raise ConfigError(
            f"scenario {source}: " + "; ".join(problems),
            where="scenario",
            path=source,
            problems=problems,
            next_step="fix the named field (see docs/reference/scenario-files.md)",
        ) from e


def _describe(loc: tuple[Any, ...], msg: str, root: yaml.Node | None) -> str:
    names = [str(part) for part in loc if not _is_union_tag(part)]
    where = ""
    if len(names) >= 2 and names[0] == "steps" and names[1].isdigit():
        where = f"step {int(names[1]) + 1}: "
        names = names[2:]
    field = ""
    for part in names:
        field += f"[{part}]" if part.isdigit() else (f".{part}" if field else part)
    line = _line_of(root, loc)
    suffix = f" (line {line})" if line else ""
    return f"{where}{field or '(top level)'}{suffix}: {msg}"


def _is_union_tag(part: Any) -> bool:
    # pydantic adds the tried member type to the location of union errors, e.g. 'dict[str,any]'.
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "function-after"})


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest YAML node on ``loc`` that exists (the parent of a missing field)."""
    node = root
    for part in loc:
        child = _child(node, part)
        if child is None:
            break
        node = child
    return node.start_mark.line + 1 if node is not None else None


def _child(node: yaml.Node | None, part: Any) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part) and isinstance(value, yaml.Node):
                return value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        item = node.value[part]
        return item if isinstance(item, yaml.Node) else None
    return None


# --- checking a request against a step ------------------------------------------------------------


def request_strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, plus the strings inside strings that are JSON objects or arrays."""
    if isinstance(value, str):
        yield value
        stripped = value.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                inner = json.loads(value)
            except ValueError:
                return
            yield from request_strings(inner)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from request_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from request_strings(item)


def _text(value: Any) -> str:
    return "\n".join(request_strings(value))


def _tool_names_by_call_id(messages: list[Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                if isinstance(call, Mapping) and call.get("id"):
                    function = call.get("function") or {}
                    names[str(call["id"])] = str(function.get("name", ""))
    return names


def _offered_tools(body: Mapping[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, Mapping):
            names.add(str((tool.get("function") or {}).get("name", tool.get("name", ""))))
    return names


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def check_forbidden(scenario: Scenario, body: Mapping[str, Any]) -> list[str]:
    """Problems with the scenario-wide ``forbid`` list (checked on every request, whole body)."""
    text = _text(body)
    return [f"request contains forbidden text {_short(s)}" for s in scenario.forbid if s in text]


def check_step(step: Step, body: Mapping[str, Any], purpose: str | None) -> list[str]:
    """Problems with one request against one step's ``purpose`` and ``expect`` (empty when it matches)."""
    problems: list[str] = []
    if step.purpose is not None and purpose != step.purpose:
        problems.append(f"expected purpose {step.purpose!r} (header X-Orch-Purpose) but got {purpose!r}")
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    text = _text(messages)
    expect = step.expect
    problems += [f"expected request to contain {_short(s)}" for s in expect.contains if s not in text]
    problems += [f"expected request not to contain {_short(s)}" for s in expect.not_contains if s in text]
    answered = set()
    names = _tool_names_by_call_id(messages)
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "tool":
            answered.add(names.get(str(message.get("tool_call_id")), ""))
    problems += [
        f"expected a tool result for a call of {name!r}"
        for name in expect.tool_result_for
        if name not in answered
    ]
    if expect.last_tool_result_contains:
        tool_messages = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "tool"]
        if not tool_messages:
            problems.append("expected a tool result, but the request has no tool message")
        else:
            last = _text(tool_messages[-1].get("content"))
            problems += [
                f"expected the last tool result to contain {_short(s)}"
                for s in expect.last_tool_result_contains
                if s not in last
            ]
    offered = _offered_tools(body)
    problems += [
        f"expected tool {name!r} to be offered" for name in expect.tools_offered if name not in offered
    ]
    return problems


# --- usage estimates ------------------------------------------------------------------------------


IMAGE_TOKENS = 765
"""What one image costs in the estimate (OpenAI's figure for a 1024x1024 image at high detail), whatever its bytes."""


def estimate_prompt_tokens(messages: Any, tools: Any) -> int:
    """Estimated prompt size: the JSON text of the messages plus the tools (so sending less costs less).

    An image part counts :data:`IMAGE_TOKENS`, not the length of its base64 text.
    """
    images = 0

    def without_images(value: Any) -> Any:
        nonlocal images
        if isinstance(value, Mapping):
            if value.get("type") == "image_url":
                images += 1
                return {"type": "image_url"}
            return {k: without_images(v) for k, v in value.items()}
        if isinstance(value, list):
            return [without_images(v) for v in value]
        return value

    text = json.dumps(without_images(messages), ensure_ascii=False) + json.dumps(tools or [], ensure_ascii=False)
    return estimate_tokens(text) + images * IMAGE_TOKENS


def estimate_completion_tokens(content: str | None, arguments: list[str]) -> int:
    return estimate_tokens((content or "") + "".join(arguments))
