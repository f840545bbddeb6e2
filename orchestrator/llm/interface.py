"""The one narrow model interface the rest of the program sees.

Only ``openai_client.py`` imports ``openai``. The act loop, the planner, the reflector and the semantic validator talk
to a :class:`ChatModel`; the scripted fakes in ``orchestrator.testing`` implement the same protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

Purpose = Literal["plan", "select", "act", "reflect", "semantic", "answer", "other"]


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"
    """The raw JSON text of the arguments, exactly as the model produced it (it may be invalid)."""


class ImagePart(BaseModel):
    """An image sent after a user message's text: a ``data:`` URL (PNG or JPEG) and the detail asked for."""

    model_config = ConfigDict(frozen=True)

    url: str
    detail: Literal["low", "high", "auto"] = "auto"

    def to_openai(self) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": self.url, "detail": self.detail}}


class Message(BaseModel):
    """One chat message in OpenAI Chat Completions shape.

    ``images`` (user messages only) turn the content into a list of parts: the text, then each image, which is how
    Chat Completions takes images (tool results carry text only).
    """

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    images: tuple[ImagePart, ...] = ()

    def to_openai(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.images:
            data["content"] = [{"type": "text", "text": self.content or ""}, *(i.to_openai() for i in self.images)]
        if self.tool_calls:
            data["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data


class ToolSpec(BaseModel):
    """A function tool offered to the model; ``parameters`` is a JSON Schema generated from a pydantic model."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False

    def to_openai(self) -> dict[str, Any]:
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.strict:
            function["strict"] = True
        return {"type": "function", "function": function}


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    cached_tokens: int = Field(0, ge=0)
    """Prompt tokens the provider served from its own prompt cache (part of ``prompt_tokens``), when it says so."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class UnreadCall(BaseModel):
    """A tool call the reply tried to make but that could not be read: the model is told and can fix it."""

    model_config = ConfigDict(frozen=True)

    name: str = ""
    """The tool it seems to call, when that much could be read."""
    detail: str
    """Why it could not be read (a JSON error, a missing part)."""
    cut: bool = False
    """The reply ended at ``max_tokens`` inside this call."""
    text: str = ""
    """The start of what the model wrote (at most 300 characters)."""


class ModelResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    unread_calls: tuple[UnreadCall, ...] = ()
    """Calls that could not be read (written as text but malformed, or cut off at ``max_tokens``)."""
    calls_from_text: bool = False
    """The tool calls were read from the reply's text (the server returned none of its own)."""
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str = ""
    latency_ms: int = 0
    cache_hit: bool = False
    """Answered from the response cache: nothing was sent to the model (``usage`` is zero)."""

    @property
    def cut(self) -> bool:
        """The reply ended because it reached ``max_tokens``."""
        return self.finish_reason == "length"

    def as_message(self) -> Message:
        content = self.content
        if content is None and not self.tool_calls:  # e.g. only a cut call: keep what the model wrote
            content = "\n".join(u.text for u in self.unread_calls)
        return Message(role="assistant", content=content, tool_calls=self.tool_calls)


@runtime_checkable
class ChatModel(Protocol):
    """A chat model with function tools. Deterministic settings (temperature, seed) are fixed at construction."""

    name: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        """One model call. ``purpose`` is sent along (header ``X-Orch-Purpose``) for tracing.

        ``json_response`` asks for a JSON object answer (``response_format={"type": "json_object"}``).
        Raises :class:`orchestrator.errors.ModelError` when the model cannot be reached or answers unusably.
        """
        ...
