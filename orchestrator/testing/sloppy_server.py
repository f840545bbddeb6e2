"""The sloppy model (``sloppy_model.py``) behind an OpenAI-compatible HTTP server, for ``--model openai:NAME`` runs
through the real ``openai`` client (``OPENAI_BASE_URL`` = :attr:`SloppyServer.base_url`).

Like llama.cpp's or Ollama's server without a tool parser, it never answers with ``tool_calls``: what the model
writes is ``content``, cut at the request's ``max_tokens`` with ``finish_reason: length``. It does not read our
``X-Orch-*`` headers: what a request is for is read from the request, as a real model has to.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.llm.scenario import estimate_completion_tokens, estimate_prompt_tokens
from orchestrator.llm.scenario_player import _Answer, _error
from orchestrator.llm.scenario_server import _models_answer, _Serving
from orchestrator.testing.sloppy_model import HABITS, Intent, SloppyPolicy, intents_in

MODEL_NAME = "sloppy-1.5b"


class SloppyServer(_Serving):
    """Serves :class:`SloppyPolicy` on a loopback port (port 0: a free one); start it as a context manager."""

    def __init__(
        self,
        intents: Mapping[str, Intent],
        *,
        habits: tuple[str, ...] = HABITS,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.policy = SloppyPolicy(intents, habits)
        self.exchanges: list[tuple[dict[str, Any], dict[str, Any]]] = []
        """Every (request body, reply message and finish reason), in order."""
        self._lock = threading.Lock()
        super().__init__(host, port)

    @classmethod
    def from_folder(cls, folder: Path, **kwargs: Any) -> SloppyServer:
        return cls(intents_in(folder), **kwargs)

    def _answer_chat(
        self,
        body: Any,
        purpose: str | None,
        path: str,
        job: str | None,
        cursor: str | None = None,
    ) -> _Answer:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "the request needs a messages list", type_="invalid_request_error", code=None)
        with self._lock:
            reply = self.policy.answer(body)
        message = {"role": "assistant", "content": reply.content}
        prompt = estimate_prompt_tokens(body["messages"], body.get("tools"))
        completion = estimate_completion_tokens(reply.content, [])
        with self._lock:
            self.exchanges.append((body, {**message, "finish_reason": reply.finish_reason, "habit": reply.habit,
                                          "mistake": reply.mistake}))
        payload = {
            "id": f"chatcmpl-sloppy-{len(self.exchanges)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or MODEL_NAME),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }
        return _Answer(200, payload)

    def _answer_models(self, path: str) -> _Answer:
        return _models_answer(path, [MODEL_NAME])
