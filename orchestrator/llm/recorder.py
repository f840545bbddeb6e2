"""Recording real model sessions: a pass-through proxy in front of an OpenAI-compatible server, and replay.

``record-llm --upstream URL --out DIR`` listens on a loopback port; point ``OPENAI_BASE_URL`` at it and every chat
completion is forwarded to the upstream server unchanged and appended to ``DIR/exchanges.jsonl``: the request body,
the runtime's ``X-Orch-*`` headers (purpose, job, cursor), the status, the response body and the time it took. The
API key is forwarded, never written. :func:`load_recording` turns a recording into a :class:`Scenario` whose steps
reply exactly what the real model replied, so ``scripted-llm --scenario DIR`` and ``--model scripted:DIR`` replay
the session offline (record with ``--no-memo`` so no turn was answered from the response cache).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, cast, get_args
from urllib.parse import urlsplit

from orchestrator.errors import ConfigError
from orchestrator.llm import headers as orch_headers
from orchestrator.llm.interface import Purpose
from orchestrator.llm.scenario import Scenario
from orchestrator.llm.serving import BackgroundHTTP, HTTPServer, is_loopback
from orchestrator.logs import get_logger, mask_secrets

EXCHANGES = "exchanges.jsonl"
META = "recording.json"
MAX_BODY_BYTES = 64 * 1024 * 1024
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens")
_OURS = orch_headers.PREFIX.lower()
_FORWARDED = ("authorization", "content-type", "accept", "openai-organization", "openai-project", "api-key")
_RECORDED_HEADERS = {"purpose": orch_headers.PURPOSE, "job": orch_headers.JOB, "cursor": orch_headers.CURSOR}
log = get_logger("orchestrator.llm")


class RecordingProxy(BackgroundHTTP):
    """Forwards ``/v1/...`` to ``upstream`` and records chat completions under ``out_dir``; start, then close."""

    def __init__(
        self,
        upstream: str,
        out_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        goal: str | None = None,
        timeout_s: float = 3600,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"--upstream {upstream!r} is not an http(s) URL",
                where="record-llm",
                next_step="give the server's base URL, e.g. http://127.0.0.1:8765/v1",
            )
        self.upstream = upstream.rstrip("/")
        self.out_dir = out_dir
        self.exchanges = 0
        self._lock = threading.Lock()
        self.timeout_s = timeout_s
        # A proxy from the environment must not capture a server on this machine.
        handlers = [urllib.request.ProxyHandler({})] if is_loopback(parts.hostname or "") else []
        self._opener = urllib.request.build_opener(*handlers)
        out_dir.mkdir(parents=True, exist_ok=True)
        meta = {"upstream": _without_credentials(self.upstream), "started": time.time(), "goal": goal}
        (out_dir / META).write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        super().__init__(host, port, _Handler, name="record-llm")

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, str]:
        """Send one request upstream; (status, body, content type). An unreachable upstream is a 502."""
        inner = path.removeprefix("/v1") if path.startswith("/v1") else path
        sent = {k: v for k, v in headers.items() if k.lower() in _FORWARDED or k.lower().startswith(_OURS)}
        request = urllib.request.Request(self.upstream + inner, data=body or None, headers=sent, method=method)
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return response.status, response.read(), response.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as e:  # the server's own error answer: passed on as it is
            return e.code, e.read(), e.headers.get("Content-Type", "application/json")
        except (urllib.error.URLError, OSError) as e:
            message = f"record-llm could not reach the upstream server {_without_credentials(self.upstream)}: {e}"
            payload = {"error": {"message": message, "type": "upstream_error", "code": "upstream_unreachable"}}
            return 502, json.dumps(payload).encode("utf-8"), "application/json"

    def record(self, headers: dict[str, str], request: bytes, status: int, response: bytes, ms: int) -> None:
        """Append one exchange (never a credential: only the X-Orch-* headers are kept)."""
        given = {k.lower(): v for k, v in headers.items()}
        entry: dict[str, Any] = {
            key: given[name.lower()][:200] for key, name in _RECORDED_HEADERS.items() if name.lower() in given
        }
        entry.update(status=status, ms=ms, request=_json_or_text(request), response=_json_or_text(response))
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            self.exchanges += 1
            with (self.out_dir / EXCHANGES).open("a", encoding="utf-8") as fh:
                fh.write(line)


class _Handler(BaseHTTPRequestHandler):
    server: HTTPServer
    server_version = "orchestrator-record-llm/1"

    @property
    def proxy(self) -> RecordingProxy:
        return cast(RecordingProxy, self.server.owner)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._pass(record=False)

    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path.rstrip("/")
        self._pass(record=path.endswith("/chat/completions"))

    def _pass(self, *, record: bool) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.send_error(413, "request body too large")
            return
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items()}
        started = time.perf_counter()
        status, data, content_type = self.proxy.forward(self.command, urlsplit(self.path).path, headers, body)
        if record:
            self.proxy.record(headers, body, status, data, int((time.perf_counter() - started) * 1000))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature fixed by http.server
        log.debug("record_llm.http", line=format % args)


def _json_or_text(data: bytes) -> Any:
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _without_credentials(url: str) -> str:
    return mask_secrets(url)


# --- replay -------------------------------------------------------------------------------------------------------


def is_recording(path: Path) -> bool:
    return (path.is_dir() and (path / EXCHANGES).is_file()) or path.name == EXCHANGES


def load_recording(path: Path) -> Scenario:
    """A recorded session as a scenario: one step per recorded chat completion, replying what the server replied
    (an error status as that error), with the recorded purpose required. Raises ``ConfigError`` naming the line."""
    folder = path if path.is_dir() else path.parent
    exchanges = folder / EXCHANGES
    try:
        lines = exchanges.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read recording {exchanges}: {e}", where="scenario", path=str(exchanges)) from e
    steps = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            steps.append(_step(json.loads(line)))
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise ConfigError(
                f"recording {exchanges}:{number}: not a recorded exchange ({e})",
                where="scenario",
                path=str(exchanges),
                next_step="record sessions with python -m orchestrator record-llm",
            ) from e
    goal = _meta_goal(folder) or "(a recorded session; give the goal on the command line)"
    try:
        return Scenario.model_validate({"goal": goal, "steps": steps, "source": str(folder)})
    except ValueError as e:
        raise ConfigError(f"recording {folder} cannot be replayed: {e}", where="scenario", path=str(folder)) from e


#: The purposes a scenario step may require (``other`` is no purpose to check).
_NAMED_PURPOSES = frozenset(get_args(Purpose)) - {"other"}


def _step(entry: dict[str, Any]) -> dict[str, Any]:
    status = int(entry["status"])
    response = entry.get("response")
    purpose = entry.get("purpose") if entry.get("purpose") in _NAMED_PURPOSES else None
    if status >= 400 or not isinstance(response, dict):
        error = response.get("error") if isinstance(response, dict) else None
        message = (error or {}).get("message") if isinstance(error, dict) else str(response)[:500]
        return {"purpose": purpose, "reply": {"error": {"status": max(400, min(status, 599)),
                                                         "message": message or "recorded error"}}}
    choice = response["choices"][0]
    message = choice.get("message") or {}
    calls = [
        {"name": c["function"]["name"], "arguments": c["function"].get("arguments") or "{}"}
        for c in message.get("tool_calls") or []
    ]
    usage = dict(response.get("usage") or {})
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        usage["cached_tokens"] = details["cached_tokens"]
    reply: dict[str, Any] = {
        "content": message.get("content") if message.get("content") is not None or calls else "",
        "tool_calls": calls,
        "finish_reason": choice.get("finish_reason"),
        "usage": {k: usage[k] for k in USAGE_FIELDS if isinstance(usage.get(k), int)},
    }
    return {"purpose": purpose, "reply": reply}


def _meta_goal(folder: Path) -> str | None:
    try:
        goal = json.loads((folder / META).read_text(encoding="utf-8")).get("goal")
    except (OSError, ValueError, AttributeError):
        return None
    return goal if isinstance(goal, str) and goal.strip() else None
