"""An OpenAI-compatible HTTP server that plays a scenario file, one step per chat completion request.

It runs on the standard library's ``ThreadingHTTPServer`` in a background thread, so the real ``openai``
client and real HTTP are exercised end to end. A request that does not match its step, or that comes after the
last step, gets an HTTP 400 in OpenAI's error shape (code ``scenario_mismatch``) whose message names the
scenario file, the step and what was wrong; the failure is also kept in :attr:`ScenarioServer.failures`.

:class:`ScenarioServer` plays one scenario for one conversation. :class:`ScenarioLibraryServer` plays every
scenario of a folder for many conversations at once (the compose stack's offline model): the request's model name
picks the scenario and the ``X-Orch-Job`` header the conversation, each with its own step cursor.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Self, cast
from urllib.parse import urlsplit

from orchestrator.errors import ConfigError
from orchestrator.llm import headers
from orchestrator.llm.scenario import Scenario, load_scenario
from orchestrator.llm.scenario_player import ScenarioPlayer, _Answer, _error
from orchestrator.llm.serving import BackgroundHTTP, HTTPServer
from orchestrator.logs import get_logger

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")

log = get_logger("orchestrator.scenario_server")


def _models_answer(path: str, names: list[str]) -> _Answer:
    entries = {n: {"id": n, "object": "model", "created": 0, "owned_by": "orchestrator-scripted"} for n in names}
    for prefix in MODELS_PATHS:
        if path.startswith(prefix + "/"):
            wanted = path[len(prefix) + 1 :]
            if wanted in entries:
                return _Answer(200, entries[wanted])
            message = f"model {wanted!r} is not served here; this server serves {', '.join(map(repr, names))}"
            return _error(404, message, type_="invalid_request_error", code="model_not_found")
    return _Answer(200, {"object": "list", "data": list(entries.values())})


class _Serving(BackgroundHTTP):
    """The HTTP side of both servers: our handler, served from a background thread."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port, _Handler, name="scenario-server")

    def start(self) -> Self:
        if self._thread is None:
            log.debug("scenario_server.started", base_url=self.base_url, server=type(self).__name__)
        return super().start()

    def _answer_chat(
        self,
        body: Any,
        purpose: str | None,
        path: str,
        job: str | None,
        cursor: str | None = None,
    ) -> _Answer:
        raise NotImplementedError

    def _answer_models(self, path: str) -> _Answer:
        raise NotImplementedError


class ScenarioServer(_Serving):
    """Plays ``scenario`` over HTTP, thread-safe; start with :func:`start_scenario_server` or as a context."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        trace_path: Path | None = None,
    ) -> None:
        self.player = ScenarioPlayer(scenario, trace_path=trace_path)
        super().__init__(host, port)

    @property
    def scenario(self) -> Scenario:
        return self.player.scenario

    @property
    def trace_path(self) -> Path | None:
        return self.player.trace_path

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received on the chat completions route, in order (including rejected ones)."""
        return self.player.requests

    @property
    def purposes(self) -> list[str | None]:
        return self.player.purposes

    @property
    def failures(self) -> list[str]:
        """The message of every mismatch, exhausted-steps or malformed request, in order."""
        return self.player.failures

    @property
    def model_name(self) -> str:
        return self.player.model_name

    @property
    def steps_used(self) -> int:
        return self.player.steps_used

    @property
    def steps_left(self) -> int:
        return self.player.steps_left

    @property
    def position(self) -> str:
        """Where the conversation stands (``X-Orch-Cursor``)."""
        return self.player.position

    def assert_all_used(self) -> None:
        """Raise :class:`ScriptMismatch` if a request failed its step or a step was never requested."""
        self.player.assert_all_used()

    def _answer_chat(
        self,
        body: Any,
        purpose: str | None,
        path: str,
        job: str | None,
        cursor: str | None = None,
    ) -> _Answer:
        return self.player.answer(body, purpose, path, cursor)

    def _answer_models(self, path: str) -> _Answer:
        return _models_answer(path, [self.model_name])


class ScenarioLibraryServer(_Serving):
    """Every scenario of a folder at once, for many concurrent goals (the compose stack's offline model).

    The request's ``model`` names the scenario (``brand-deck`` plays ``brand-deck.yaml``) and the ``X-Orch-Job``
    header the conversation: each job walks its own copy of the steps, so goals sharing the server never take each
    other's steps. Requests without the header share one conversation per scenario. At most ``max_sessions``
    conversations are kept; the least recently used one is forgotten first.
    """

    def __init__(
        self,
        scenarios: dict[str, Scenario],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        trace_path: Path | None = None,
        max_sessions: int = 10_000,
    ) -> None:
        if not scenarios:
            raise ConfigError("a scenario library needs at least one scenario", where="scenario")
        self.scenarios = dict(scenarios)
        self.trace_path = Path(trace_path) if trace_path else None
        self.max_sessions = max_sessions
        self._players: OrderedDict[tuple[str, str], ScenarioPlayer] = OrderedDict()
        self._lock = threading.Lock()
        self._trace_lock = threading.Lock()
        super().__init__(host, port)

    def player(self, name: str, job: str | None) -> ScenarioPlayer:
        """The conversation of ``job`` with scenario ``name`` (made on first use)."""
        key = (name, job or "")
        with self._lock:
            player = self._players.get(key)
            if player is None:
                player = ScenarioPlayer(
                    self.scenarios[name], trace_path=self.trace_path, session=job, trace_lock=self._trace_lock
                )
                self._players[key] = player
                if len(self._players) > self.max_sessions:
                    self._players.popitem(last=False)
            else:
                self._players.move_to_end(key)
            return player

    @property
    def players(self) -> list[ScenarioPlayer]:
        with self._lock:
            return list(self._players.values())

    @property
    def failures(self) -> list[str]:
        return [failure for player in self.players for failure in player.failures]

    def _answer_chat(
        self,
        body: Any,
        purpose: str | None,
        path: str,
        job: str | None,
        cursor: str | None = None,
    ) -> _Answer:
        name = body.get("model") if isinstance(body, dict) else None
        if not isinstance(name, str) or name not in self.scenarios:
            served = ", ".join(map(repr, sorted(self.scenarios)))
            message = f"model {name!r} is not served here; the scenarios served are {served}"
            log.warning("scenario_server.unknown_model", model=name, job=job)
            return _error(404, message, type_="invalid_request_error", code="model_not_found", retry=False)
        player = self.player(name, job[:200] if job else None)
        return player.answer(body, purpose, path, cursor)

    def _answer_models(self, path: str) -> _Answer:
        return _models_answer(path, sorted(self.scenarios))


def load_library(folder: Path) -> dict[str, Scenario]:
    """Every ``*.yaml``/``*.yml`` scenario directly in ``folder``, by file stem; a broken one stops the start."""
    if not folder.is_dir():
        raise ConfigError(f"scenario folder not found: {folder}", where="scenario", path=str(folder))
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        raise ConfigError(f"no scenario files (*.yaml) in {folder}", where="scenario", path=str(folder))
    return {path.stem: load_scenario(path) for path in files}


class _Handler(BaseHTTPRequestHandler):
    server: HTTPServer
    server_version = "orchestrator-scripted/1"

    @property
    def service(self) -> _Serving:
        return cast(_Serving, self.server.owner)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = urlsplit(self.path).path.rstrip("/")
        if path in MODELS_PATHS or any(path.startswith(p + "/") for p in MODELS_PATHS):
            self._send(self.service._answer_models(path))
        else:
            self._not_found(path)

    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path.rstrip("/")
        if path not in CHAT_PATHS:
            self._not_found(path)
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            message = "request body is not valid JSON"
            self._send(_error(400, message, type_="invalid_request_error", code="invalid_json", retry=False))
            return
        purpose = self.headers.get(headers.PURPOSE)
        job = self.headers.get(headers.JOB)
        cursor = self.headers.get(headers.CURSOR)
        self._send(self.service._answer_chat(body, purpose, path, job, cursor))

    def _not_found(self, path: str) -> None:
        message = f"no route {path!r}: the scripted server serves POST /v1/chat/completions and GET /v1/models"
        self._send(_error(404, message, type_="invalid_request_error", code="unknown_url"))

    def _send(self, answer: _Answer) -> None:
        data = json.dumps(answer.payload, ensure_ascii=False).encode("utf-8")
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature fixed by http.server
        log.debug("scenario_server.http", line=format % args)


def start_scenario_server(
    scenario: Scenario | Path | str,
    *,
    trace_path: Path | str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> ScenarioServer:
    """Serve ``scenario`` (parsed, or a file path) from a background thread; port 0 picks a free port."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    return ScenarioServer(
        scenario, host=host, port=port, trace_path=Path(trace_path) if trace_path else None
    ).start()
