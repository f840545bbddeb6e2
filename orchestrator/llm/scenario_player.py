"""One conversation's walk through a scenario: the step cursor, the checks, the replies and the trace lines.

A :class:`~orchestrator.llm.scenario_server.ScenarioServer` has one player; a library server has one per
(scenario, job).

Where the conversation stands is its *position* (:attr:`ScenarioPlayer.position`, ``X-Orch-Cursor``): every answer
carries the position after it, and a request carrying one is played from there. That is how a goal's phases on
different workers continue one script, and how a phase run again after a takeover plays its steps again. A cursor
also counts the turns the client answered from its response cache since (``POSITION+act=2``): their steps are
passed over before the request is played, so the script stays in step with the conversation.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from orchestrator.llm.headers import CURSOR, split_cursor
from orchestrator.llm.scenario import (
    Reply,
    Scenario,
    ScriptMismatch,
    Step,
    check_forbidden,
    check_step,
    estimate_completion_tokens,
    estimate_prompt_tokens,
)
from orchestrator.logs import get_logger

_RETRYABLE_STATUSES = {408, 409, 429}
_POSITION = re.compile(r"^(\d{1,6})((?:;[a-z_]{0,20}=\d{1,6}){0,10})$")

log = get_logger("orchestrator.scenario_server")


class _Answer:
    __slots__ = ("status", "payload", "headers")

    def __init__(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.payload = payload
        self.headers = headers or {}


def _error(status: int, message: str, *, type_: str, code: str | None, retry: bool | None = None) -> _Answer:
    headers = {}
    if retry is not None:
        # The SDK obeys these headers: no retries of a mismatch, and quick retries of a scripted 429/5xx.
        headers = {"x-should-retry": "true", "retry-after-ms": "1"} if retry else {"x-should-retry": "false"}
    payload = {"error": {"message": message, "type": type_, "code": code, "param": None}}
    return _Answer(status, payload, headers)


#: Purposes a scenario may leave unscripted (see :meth:`ScenarioPlayer._unscripted`).
OPTIONAL_PURPOSES = frozenset({"select"})


def _empty_reply(body: Any, model: str | None) -> _Answer:
    """An answer with no text and no usage: what an unscripted optional request gets."""
    name = model or (str(body.get("model") or "scripted") if isinstance(body, dict) else "scripted")
    payload = {
        "id": "chatcmpl-scripted-optional",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": name,
        "system_fingerprint": "scripted",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "", "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
    return _Answer(200, payload)


class ScenarioPlayer:
    """One conversation's walk through a scenario: its step cursor, the requests it got and its failures.

    Thread-safe. A :class:`ScenarioServer` has one; a :class:`ScenarioLibraryServer` has one per (scenario, job).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        trace_path: Path | None = None,
        session: str | None = None,
        trace_lock: threading.Lock | None = None,
    ) -> None:
        self.scenario = scenario
        self.trace_path = Path(trace_path) if trace_path else None
        self.session = session
        """The job this conversation belongs to (``X-Orch-Job``), written into trace lines."""
        self.requests: list[dict[str, Any]] = []
        """Every request body received on the chat completions route, in order (including rejected ones)."""
        self.purposes: list[str | None] = []
        self.failures: list[str] = []
        """The message of every mismatch, exhausted-steps or malformed request, in order."""
        self._next_step = 0
        self._by_purpose: dict[str | None, int] = {}
        """``order: by_purpose``: how many steps each purpose's queue has played."""
        self._played: set[int] = set()
        self._lock = threading.Lock()
        self._trace_lock = trace_lock or threading.Lock()

    @property
    def model_name(self) -> str:
        return self.scenario.model or "scripted"

    # --- state ------------------------------------------------------------------------------------

    @property
    def steps_used(self) -> int:
        with self._lock:
            return len(self._played) if self.scenario.order == "by_purpose" else self._next_step

    @property
    def steps_left(self) -> int:
        return len(self.scenario.steps) - self.steps_used

    @property
    def position(self) -> str:
        """Where the conversation stands: ``N`` (the next step) and, for ``order: by_purpose``, how many steps of
        each purpose's queue were played (``N;plan=1;act=3``)."""
        with self._lock:
            return self._position()

    def _position(self) -> str:
        played = "".join(f";{p or ''}={n}" for p, n in sorted(self._by_purpose.items(), key=lambda kv: kv[0] or ""))
        return f"{self._next_step}{played}"

    def _resume(self, cursor: str | None) -> int:
        """Play from the cursor's position (``X-Orch-Cursor``), past the turns it counts as answered from the
        client's cache; a cursor that does not parse is ignored (and logged). How many steps were passed over."""
        if cursor is None:
            return 0
        position, passes = split_cursor(cursor.strip())
        if position and position != self._position():
            match = _POSITION.match(position)
            if match is None or int(match.group(1)) > len(self.scenario.steps):
                log.warning("scenario_server.bad_cursor", session=self.session, cursor=cursor[:100])
                return 0
            self._move_to(match)
        return self._pass_over(passes)

    def _move_to(self, match: re.Match[str]) -> None:
        self._next_step = int(match.group(1))
        self._by_purpose = {}
        for part in filter(None, (match.group(2) or "").split(";")):
            purpose, _, count = part.partition("=")
            self._by_purpose[purpose or None] = int(count)
        queued = [self._queue(p)[:n] for p, n in self._by_purpose.items()]
        self._played = {i for q in queued for i in q} | set(range(self._next_step if self.scenario.order ==
                                                                  "sequence" else 0))

    def clear_records(self) -> None:
        """Forget the requests and failures kept so far (a worker's server serves goal after goal)."""
        with self._lock:
            self.requests.clear()
            self.purposes.clear()
            self.failures.clear()

    def assert_all_used(self) -> None:
        """Raise :class:`ScriptMismatch` if a request failed its step or a step was never requested."""
        with self._lock:
            problems = list(self.failures)
            used = self._next_step
            unplayed = [i for i in range(len(self.scenario.steps)) if i not in self._played]
        total = len(self.scenario.steps)
        if self.scenario.order == "by_purpose" and unplayed:
            listed = ", ".join(f"{i + 1} ({self.scenario.steps[i].purpose or 'any'})" for i in unplayed)
            problems.append(f"{len(unplayed)} of {total} steps were never requested: steps {listed}")
        elif self.scenario.order == "sequence" and used < total:
            purposes = ", ".join(
                f"{i + 1} ({s.purpose or 'any'})" for i, s in enumerate(self.scenario.steps[used:], used)
            )
            problems.append(f"{total - used} of {total} steps were never requested: steps {purposes}")
        if problems:
            raise ScriptMismatch(
                f"scenario {self.scenario.source}: " + "; ".join(problems),
                where="scenario",
                next_step="compare the scenario's steps with what the runtime sent (see the trace file)",
                failures=problems,
            )

    # --- request handling -------------------------------------------

    def answer(self, body: Any, purpose: str | None, path: str, cursor: str | None = None) -> _Answer:
        """Play the next step for one chat completion request (called from handler threads). ``cursor`` is the
        ``X-Orch-Cursor`` header: the position to play from and the turns answered from the client's cache since,
        whose steps are passed over first. The answer carries the position after it (``X-Orch-Cursor``)."""
        with self._lock:
            request_no = len(self.requests) + 1
            self.requests.append(body if isinstance(body, dict) else {"_raw": body})
            self.purposes.append(purpose)
            skipped = self._resume(cursor)
            step_no: int | None
            problems: list[str]
            if self._unscripted(purpose):
                step_no, answer, problems = None, _empty_reply(body, self.scenario.model), []
            else:
                step_no, answer, problems = self._play(body, purpose, request_no)
            answer.headers[CURSOR] = self._position()
            self._trace(request_no, step_no, purpose, path, answer, problems, body, skipped)
        if step_no is not None and not problems:
            step = self.scenario.steps[step_no - 1]
            delay_ms = self.scenario.delay_ms if step.delay_ms is None else step.delay_ms
            time.sleep(delay_ms / 1000)  # outside the lock: concurrent requests think in parallel
        return answer

    def _pass_over(self, passes: dict[str, int]) -> int:
        """Pass over the steps of turns the client answered from its cache (``{purpose: turns}``)."""
        skipped = 0
        for purpose, count in passes.items():
            if self._unscripted(purpose):
                continue
            for _ in range(count):
                step = self._next_index(purpose)
                if step is None:
                    break
                self._advance(step, purpose)
                skipped += 1
        if skipped:
            log.info("scenario_server.cached_turns", session=self.session, skipped=skipped)
        return skipped

    def _unscripted(self, purpose: str | None) -> bool:
        """A request the scenario need not script: the goal restated for the skill search (purpose ``select``) when
        no step has that purpose. It is answered with no text (the goal is then ranked by its own words) and takes
        no step, so scenarios written before the runtime asked it play as they did."""
        return purpose in OPTIONAL_PURPOSES and all(step.purpose != purpose for step in self.scenario.steps)

    def _queue(self, purpose: str | None) -> list[int]:
        """``order: by_purpose``: the steps a request of ``purpose`` takes, in order."""
        steps = self.scenario.steps
        own = [i for i, s in enumerate(steps) if s.purpose is not None and s.purpose == purpose]
        return own or [i for i, s in enumerate(steps) if s.purpose is None]

    def _next_index(self, purpose: str | None) -> int | None:
        """The step the next request of ``purpose`` takes (None: all used and the scenario does not cycle)."""
        if self.scenario.order == "sequence":
            if self._next_step >= len(self.scenario.steps) and self.scenario.cycle:
                self._next_step = 0
            return self._next_step if self._next_step < len(self.scenario.steps) else None
        queue = self._queue(purpose)
        played = self._by_purpose.get(purpose, 0)
        if played >= len(queue) and self.scenario.cycle and queue:
            played = self._by_purpose[purpose] = 0
        return queue[played] if played < len(queue) else None

    def _advance(self, index: int, purpose: str | None) -> None:
        self._played.add(index)
        if self.scenario.order == "sequence":
            self._next_step = index + 1
        else:
            self._by_purpose[purpose] = self._by_purpose.get(purpose, 0) + 1

    def _play(self, body: Any, purpose: str | None, request_no: int) -> tuple[int | None, _Answer, list[str]]:
        source = self.scenario.source
        if not isinstance(body, dict):
            return (
                None,
                self._reject(f"scenario {source}: request {request_no} body is not a JSON object"),
                [],
            )
        if body.get("stream"):
            message = (
                f"scenario {source}: request {request_no} asked for streaming (stream=true), which the "
                "scripted server does not support; call chat.completions.create without stream"
            )
            return None, self._reject(message), []
        index = self._next_index(purpose)
        if index is None:
            by_purpose = self.scenario.order == "by_purpose"
            count = len(self._queue(purpose)) if by_purpose else len(self.scenario.steps)
            message = (
                f"scenario {source}: request {request_no} (purpose {purpose}) came after all {count} "
                f"{f'{purpose} ' if by_purpose else ''}steps were used; the runtime made more model calls than scripted"
            )
            return None, self._reject(message), []
        step_no = index + 1
        step = self.scenario.steps[index]
        problems = check_forbidden(self.scenario, body) + check_step(step, body, purpose)
        if problems:
            message = f"scenario {source} step {step_no} (purpose {step.purpose or purpose}): " + "; ".join(problems)
            return step_no, self._reject(message), problems
        self._advance(index, purpose)
        return step_no, self._reply(step, step_no, body), []

    def _reject(self, message: str) -> _Answer:
        self.failures.append(message)
        log.warning("scenario_server.mismatch", message=message)
        return _error(400, message, type_="invalid_request_error", code="scenario_mismatch", retry=False)

    def _reply(self, step: Step, step_no: int, body: dict[str, Any]) -> _Answer:
        reply: Reply = step.reply
        if reply.error is not None:
            err = reply.error
            retry = err.status in _RETRYABLE_STATUSES or err.status >= 500
            return _error(err.status, err.message, type_=err.type, code=err.code, retry=retry)
        arguments = [call.arguments_text() for call in reply.tool_calls]
        calls = [
            {
                "id": f"call_{step_no}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": args},
            }
            for i, (call, args) in enumerate(zip(reply.tool_calls, arguments, strict=True))
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        prompt = reply.usage.prompt_tokens
        if prompt is None:
            prompt = estimate_prompt_tokens(body.get("messages", []), body.get("tools"))
        completion = reply.usage.completion_tokens
        if completion is None:
            completion = estimate_completion_tokens(reply.content, arguments)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reply.usage.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": reply.usage.cached_tokens}
        payload = {
            "id": f"chatcmpl-scripted-{step_no}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.scenario.model or str(body.get("model") or "scripted"),
            "system_fingerprint": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop"),
                    "logprobs": None,
                }
            ],
            "usage": usage,
        }
        return _Answer(200, payload)

    def _trace(
        self,
        request_no: int,
        step_no: int | None,
        purpose: str | None,
        path: str,
        answer: _Answer,
        problems: list[str],
        body: Any,
        skipped: int = 0,
    ) -> None:
        if self.trace_path is None:
            return
        # Each line IS the request body as received (``model``, ``messages``, ``tools``, …), so any reader of
        # OpenAI request bodies can use the trace; what the server did with it sits under one reserved key.
        meta = {
            "request": request_no,
            "step": step_no,
            "purpose": purpose,
            "path": path,
            "status": answer.status,
            "problems": problems,
        }
        if self.session is not None:
            meta["session"] = self.session
        if skipped:
            meta["cached_turns_skipped"] = skipped
        record = {**body, "_trace": meta} if isinstance(body, dict) else {"body": body, "_trace": meta}
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._trace_lock:  # conversations of a library server share the file: whole lines only
            self.trace_path.parent.mkdir(parents=True, exist_ok=True)
            with self.trace_path.open("a", encoding="utf-8") as handle:
                handle.write(line)
