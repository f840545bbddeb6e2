"""The one model client: OpenAI Chat Completions with function tools, through the official ``openai`` package.

This is the only module that imports ``openai``. Any OpenAI-compatible server works through ``base_url``
(``OPENAI_BASE_URL``): vLLM, Ollama, LM Studio, Azure-style gateways and our scripted scenario server. Retries
of 429/5xx/timeouts are the SDK's own (``max_retries``, ``timeout`` from :class:`ModelSettings`); what is
still failing afterwards becomes a :class:`ModelError` that says what happened and what to do.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

import openai

from orchestrator.config import ModelSettings
from orchestrator.errors import ModelError, ModelErrorCode
from orchestrator.llm import headers as orch_headers
from orchestrator.llm.interface import Message, ModelResponse, Purpose, ToolCall, ToolSpec, UnreadCall, Usage
from orchestrator.llm.response_cache import ResponseCache, WireCall, WireReply, request_key
from orchestrator.llm.serving import is_loopback
from orchestrator.llm.textcalls import read_text_calls
from orchestrator.logs import get_logger

DEFAULT_BASE_URL = "https://api.openai.com/v1"

log = get_logger("orchestrator.llm")


class OpenAIChatModel:
    """A :class:`~orchestrator.llm.interface.ChatModel` over ``openai.OpenAI().chat.completions``.

    ``model`` is the id the server knows (``gpt-4o-mini``, ``llama3.1:8b``); ``name`` is what the runtime
    reports (defaults to ``openai:<model>``). ``api_key`` and ``base_url`` default to ``OPENAI_API_KEY`` and
    ``OPENAI_BASE_URL``. ``job_id`` is sent with every request (header ``X-Orch-Job``), so a server shared by many
    goals (a gateway's logs, our scenario library server) can tell their conversations apart. A ``cursor`` (a
    scripted conversation's position, ``X-Orch-Cursor``) is sent with every request and updated from every answer
    that carries one (:attr:`cursor`); None: not tracked. With a ``cache``
    (and ``model.response_cache`` on), a deterministic request already answered is answered from it
    (``cache_identity`` names who answers; by default the base URL and the model), and the turn is counted into
    the cursor, so a scripted server passes over its step (see ``orchestrator.llm.headers``).
    Raises :class:`ModelError` at construction when no API key is available.
    """

    def __init__(
        self,
        model: str,
        settings: ModelSettings | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        name: str | None = None,
        job_id: str | None = None,
        cursor: str | None = None,
        cache: ResponseCache | None = None,
        cache_identity: str | None = None,
    ) -> None:
        settings = settings or ModelSettings()
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        if not key:
            raise ModelError(
                "OPENAI_API_KEY is not set; export it with your provider's key (local servers such as Ollama "
                "or vLLM accept any placeholder value), or use --model scripted:PATH for an offline run",
                where="model",
                next_step="export OPENAI_API_KEY=... (and OPENAI_BASE_URL for a non-OpenAI server)",
                code=ModelErrorCode.NO_API_KEY,
                model=model,
            )
        self.model = model
        self.name = name or f"openai:{model}"
        self.settings = settings
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.cache = cache if settings.response_cache else None
        self.cache_identity = cache_identity or f"{self.base_url}|{model}"
        """Who answers, for the response cache: the server and the model (a scripted scenario: its content)."""
        self.cursor = cursor
        """Where a scripted conversation stands (``X-Orch-Cursor``, with the turns answered from the cache since
        the server last said); None: not tracked."""
        self._tracked = cursor is not None
        self._client = openai.OpenAI(
            api_key=key,
            base_url=self.base_url,
            max_retries=settings.max_retries,
            timeout=settings.request_timeout_s,
            default_headers={orch_headers.JOB: job_id} if job_id else None,
            http_client=self._http_client(),
        )

    def _http_client(self) -> Any:
        """The SDK's HTTP client: no proxy from the environment for a local server (Ollama, our scenario server);
        hooks that send the cursor with every request the SDK makes (its retries included) and take the position
        every answer carries."""
        loopback = is_loopback(urlsplit(self.base_url).hostname or "")

        def send_cursor(request: Any) -> None:
            if self.cursor is not None:
                request.headers[orch_headers.CURSOR] = self.cursor

        def take_cursor(response: Any) -> None:
            # An answer's position replaces the cursor and the cached turns counted into it (the server passed
            # over them); an untracked conversation forgets them once the server has answered.
            position = response.headers.get(orch_headers.CURSOR)
            if not self._tracked:
                if response.request.method == "POST":
                    self.cursor = None
            elif position:
                self.cursor = position[: orch_headers.MAX_CURSOR_CHARS]

        hooks: dict[str, list[Callable[..., Any]]] = {"request": [send_cursor], "response": [take_cursor]}
        return openai.DefaultHttpxClient(trust_env=not loopback, event_hooks=hooks)

    def pass_over(self, purpose: Purpose, turns: int = 1) -> None:
        """Count ``turns`` of ``purpose`` as answered without asking (a verdict reused from an earlier run), as a
        reply from the response cache is counted: a scripted server passes over their steps."""
        for _ in range(max(0, turns)):
            self.cursor = orch_headers.pass_over(self.cursor, purpose)

    # --- ChatModel --------------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        request = self._request(messages, tools, purpose, json_response)
        key = self._cache_key(request, purpose)
        offered = [t.name for t in tools]
        cached = self.cache.get(key) if self.cache is not None and key is not None else None
        if cached is not None:
            self.cursor = orch_headers.pass_over(self.cursor, purpose)
            log.debug("model.cache_hit", model=self.model, purpose=purpose, key=key[:16] if key else None)
            return self._response(cached, offered, len(messages), latency_ms=0, cache_hit=True)
        headers: dict[str, str] = {orch_headers.PURPOSE: purpose}
        started = time.perf_counter()
        try:
            completion = self._client.chat.completions.create(**cast(Any, request), extra_headers=headers)
        except openai.OpenAIError as e:
            raise self._model_error(e, purpose) from e
        latency_ms = int((time.perf_counter() - started) * 1000)
        wire = self._wire(completion, purpose)
        if self.cache is not None and key is not None:
            self.cache.put(key, wire)
        response = self._response(wire, offered, len(messages), latency_ms=latency_ms)
        log.debug(
            "model.call",
            model=self.model,
            purpose=purpose,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            cached_tokens=response.usage.cached_tokens,
            finish_reason=response.finish_reason,
            tool_calls=[c.name for c in response.tool_calls],
            calls_from_text=response.calls_from_text,
            unread_calls=len(response.unread_calls),
            latency_ms=latency_ms,
        )
        return response

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], purpose: Purpose, json_response: bool
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_openai() for m in messages],
            "temperature": self.settings.temperature,
            self.settings.max_tokens_param: self.settings.max_tokens_for(purpose),
        }
        if self.settings.seed is not None:
            request["seed"] = self.settings.seed
        if tools:
            request["tools"] = [t.to_openai() for t in tools]
        if json_response:
            request["response_format"] = {"type": "json_object"}
        return request

    def _cache_key(self, request: dict[str, Any], purpose: Purpose) -> str | None:
        """The response-cache key, or None when replies may not be reused (not deterministic, no cache)."""
        if self.cache is None or not self.settings.deterministic:
            return None
        return request_key(self.cache_identity, request, purpose)

    def list_models(self) -> list[str]:
        """The model ids the server offers (``GET /models``)."""
        try:
            return [m.id for m in self._client.models.list()]
        except openai.OpenAIError as e:
            raise self._model_error(e, "other") from e

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- mapping ----------------------------------------------------------------------------------

    def _wire(self, completion: Any, purpose: Purpose) -> WireReply:
        """The reply as the server sent it (what the response cache keeps)."""
        if not completion.choices:
            raise ModelError(
                f"model {self.model!r} at {self.base_url} answered without any choice",
                where=f"model:{purpose}",
                next_step="check the server's logs; the answer had no choices",
                code=ModelErrorCode.EMPTY_ANSWER,
            )
        choice = completion.choices[0]
        message = choice.message
        calls = [(c.id or "", c.function) for c in message.tool_calls or () if getattr(c, "type", "function") ==
                 "function"]
        if not calls and getattr(message, "function_call", None) is not None:  # the API's older single-call field
            calls = [("", message.function_call)]
        return WireReply(
            content=message.content,
            tool_calls=tuple(
                WireCall(id=id_, name=str(function.name or ""), arguments=_arguments_text(function.arguments))
                for id_, function in calls
            ),
            finish_reason=choice.finish_reason,
            model=completion.model or self.model,
            usage=_usage(completion.usage),
        )

    def _response(
        self, wire: WireReply, offered: list[str], turn: int, *, latency_ms: int, cache_hit: bool = False
    ) -> ModelResponse:
        """The reply as the runtime uses it: calls the server parsed, else calls written in the text (when offered
        tools and ``model.text_tool_calls`` is ``auto``); a call cut off at ``max_tokens`` is unread, not run."""
        cut = wire.finish_reason == "length"
        calls = [ToolCall(id=c.id or f"call_{turn}_{i}", name=c.name, arguments=c.arguments)
                 for i, c in enumerate(wire.tool_calls)]
        unread = [UnreadCall(name=c.name, detail="cut off at max_tokens", cut=True, text=c.arguments[:300])
                  for c in calls if cut and not _is_json(c.arguments)]
        calls = [c for c in calls if not (cut and not _is_json(c.arguments))]
        content, from_text = wire.content, False
        if not wire.tool_calls and offered and content and self.settings.text_tool_calls == "auto":
            found = read_text_calls(content, offered, cut=cut, salt=str(turn))
            calls, unread, content, from_text = list(found.calls), list(found.unread), found.rest, bool(found.calls)
        return ModelResponse(
            content=content,
            tool_calls=tuple(calls),
            unread_calls=tuple(unread),
            calls_from_text=from_text,
            usage=Usage() if cache_hit else wire.usage,
            finish_reason=wire.finish_reason,
            model=wire.model or self.model,
            latency_ms=latency_ms,
            cache_hit=cache_hit,
        )

    def _model_error(self, e: openai.OpenAIError, purpose: str) -> ModelError:
        where = f"model:{purpose}"
        base = self.base_url
        retries = self.settings.max_retries
        common: dict[str, Any] = {"where": where, "model": self.model, "base_url": base}
        if isinstance(e, openai.APITimeoutError):
            return ModelError(
                f"the model server at {base} did not answer within {self.settings.request_timeout_s:g}s "
                f"(after {retries} retries)",
                next_step="raise ORCH_MODEL__REQUEST_TIMEOUT_S or check the server's load",
                code=ModelErrorCode.TIMEOUT,
                retryable=True,
                **common,
            )
        if isinstance(e, openai.APIConnectionError):
            cause = e.__cause__ or e.__context__
            detail = f" ({cause})" if cause else ""
            return ModelError(
                f"cannot connect to the model server at {base}{detail}",
                next_step="start the server or set OPENAI_BASE_URL to a reachable OpenAI-compatible endpoint",
                code=ModelErrorCode.UNREACHABLE,
                retryable=True,
                **common,
            )
        if not isinstance(e, openai.APIStatusError):
            return ModelError(
                f"model client error: {e}", next_step="check the model settings", code=ModelErrorCode.CLIENT_ERROR,
                **common,
            )
        server_message = _server_message(e)
        status = e.status_code
        common.update(status=status, server_code=e.code)
        if isinstance(e, openai.NotFoundError) or e.code == "model_not_found":
            return ModelError(
                f"model {self.model!r} was not found at {base} (HTTP {status}: {server_message})",
                next_step=f"check the model name; list the served models with `curl {base}/models` "
                "(and check that OPENAI_BASE_URL ends with /v1 for vLLM, Ollama or LM Studio)",
                code=ModelErrorCode.MODEL_NOT_FOUND,
                **common,
            )
        if isinstance(e, openai.AuthenticationError | openai.PermissionDeniedError):
            return ModelError(
                f"the model server at {base} rejected the API key (HTTP {status}: {server_message})",
                next_step="check OPENAI_API_KEY (and that it belongs to the server in OPENAI_BASE_URL)",
                code=ModelErrorCode.AUTH_REJECTED,
                **common,
            )
        if isinstance(e, openai.RateLimitError):
            quota = e.code == "insufficient_quota"
            return ModelError(
                f"the model server at {base} refused the call for rate or quota limits after {retries} "
                f"retries (HTTP 429: {server_message})",
                next_step="check the account's quota"
                if quota
                else "wait and retry, or run fewer jobs at once",
                code=ModelErrorCode.QUOTA_EXCEEDED if quota else ModelErrorCode.RATE_LIMITED,
                retryable=not quota,
                **common,
            )
        if isinstance(e, openai.InternalServerError):
            return ModelError(
                f"the model server at {base} failed after {retries} retries "
                f"(HTTP {status}: {server_message})",
                next_step="retry later or check the server's logs",
                code=ModelErrorCode.SERVER_ERROR,
                retryable=True,
                **common,
            )
        if isinstance(e, openai.BadRequestError | openai.UnprocessableEntityError):
            return ModelError(
                f"the model server at {base} rejected the request (HTTP {status}): {server_message}",
                next_step="the server's message says which part of the request it refused",
                code=ModelErrorCode.REQUEST_REJECTED,
                **common,
            )
        return ModelError(
            f"the model server at {base} answered HTTP {status}: {server_message}",
            next_step="check the server's logs",
            code=ModelErrorCode.HTTP_ERROR,
            retryable=status >= 500,
            **common,
        )


def _usage(usage: Any) -> Usage:
    """Reported usage, with the provider's prompt-cache hits where it gives them (OpenAI, vLLM, llama.cpp:
    ``prompt_tokens_details.cached_tokens``; DeepSeek: ``prompt_cache_hit_tokens``)."""
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None:
        cached = (getattr(usage, "model_extra", None) or {}).get("prompt_cache_hit_tokens")
    prompt = usage.prompt_tokens or 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=min(prompt, cached) if isinstance(cached, int) and cached > 0 else 0,
    )


def _arguments_text(arguments: Any) -> str:
    """A call's arguments as JSON text; some servers send them as an object instead of the API's string."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _server_message(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str) and body:
        return body[:500]
    return e.message
