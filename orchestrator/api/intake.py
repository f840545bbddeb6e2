"""``POST /v1/jobs``: a request's goal lines and input files, read within the caps as they stream in.

The body is a JSON array of goal lines, JSONL, or ``multipart/form-data`` with a part ``goals`` (either of those)
and one part per input file, named exactly as the line's ``inputs`` names it. Bytes are counted as they arrive: a
body over ``api.max_body_mb`` is refused (413) before it is all read and before anything is stored; so are more
lines than ``api.max_lines`` and more file parts than ``api.max_files``. A line's input is never a path on the
server: only a part of the same request.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request

from orchestrator.api.access import ApiRefusal
from orchestrator.config import Settings
from orchestrator.errors import ConfigError
from orchestrator.worker.inputs import InputRef

MB = 1024 * 1024
GOALS_PART = "goals"
_NAME = re.compile(r"[^\x00-\x1f\x7f/\\]{1,255}")
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class Intake:
    """What one ``POST /v1/jobs`` carried: its goal lines (numbered as sent) and its input parts by name."""

    def __init__(self, lines: list[str], parts: dict[str, bytes]) -> None:
        self.lines = lines
        self.parts = parts

    def reader(self, settings: Settings) -> Callable[[list[str]], tuple[list[InputRef], list[bytes]]]:
        """``read(names)`` for :func:`orchestrator.worker.submit.resolve_line`: each name's part, within caps."""
        caps = settings.job_inputs
        file_max, job_max = int(caps.file_max_mb * MB), int(caps.job_max_mb * MB)

        def read(names: list[str]) -> tuple[list[InputRef], list[bytes]]:
            refs: list[InputRef] = []
            blobs: list[bytes] = []
            total = 0
            for name in names:
                data = self.parts.get(name)
                if data is None:
                    raise ConfigError(f"inputs: {name[:200]!r} was not sent: send each input as a multipart part "
                                      "named as the line's inputs name it")
                base = Path(name).name
                if not _NAME.fullmatch(base) or base.startswith(".") or base in ("..",):
                    raise ConfigError(f"inputs: {name[:200]!r}: the file name cannot name an input")
                if any(ref.name == base for ref in refs):
                    raise ConfigError(f"inputs: two inputs are named {base} (skills see them as /inputs/NAME)")
                if len(data) > file_max:
                    raise ConfigError(f"inputs: {name[:200]!r} is {len(data)} bytes, over the cap of {file_max} "
                                      "per file")
                total += len(data)
                if total > job_max:
                    raise ConfigError(f"inputs: together over the cap of {job_max} bytes per goal line")
                refs.append(InputRef(name=base, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
                blobs.append(data)
            return refs, blobs

        return read


def _counting(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def counted() -> MutableMapping[str, Any]:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise ApiRefusal(413, f"the request body is over the cap of {limit} bytes (api.max_body_mb)")
        return message

    return counted


async def read_intake(request: Request, settings: Settings) -> Intake:
    """The goal lines and parts of a ``POST /v1/jobs``, or an :class:`ApiRefusal` (413 over a cap, 400 unreadable)."""
    caps = settings.api
    limit = int(caps.max_body_mb * MB)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiRefusal(413, f"the request body is over the cap of {limit} bytes (api.max_body_mb)")
    counted = Request(request.scope, receive=_counting(request.receive, limit))
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    parts: dict[str, bytes] = {}
    if kind == "multipart/form-data":
        text, parts = await _multipart(counted, settings)
    else:
        body = bytearray()
        async for chunk in counted.stream():
            body += chunk
        text = _text(bytes(body))
    lines = _lines(text)
    if sum(1 for line in lines if line.strip() and not line.strip().startswith("#")) > caps.max_lines:
        raise ApiRefusal(413, f"more than {caps.max_lines} goal lines in one request (api.max_lines)")
    return Intake(lines, parts)


async def _multipart(request: Request, settings: Settings) -> tuple[str, dict[str, bytes]]:
    caps = settings.api
    limit = int(caps.max_body_mb * MB)
    try:
        form = await request.form(max_files=caps.max_files + 1, max_fields=caps.max_files + 10, max_part_size=limit)
    except ApiRefusal:
        raise
    except Exception as e:  # noqa: BLE001 - starlette's parser errors: a malformed or over-long multipart body
        if "Too many" in str(e):  # more parts than the caps allow (starlette says so in words only)
            raise ApiRefusal(413, f"more than {caps.max_files} input files in one request (api.max_files)") from e
        raise ApiRefusal(400, f"unreadable multipart body: {str(e)[:200]}") from e
    goals: str | None = None
    parts: dict[str, bytes] = {}
    files = 0
    try:
        for name, value in form.multi_items():
            data = await value.read() if isinstance(value, UploadFile) else value.encode("utf-8")
            if name == GOALS_PART:
                if goals is not None:
                    raise ApiRefusal(400, f"more than one part {GOALS_PART!r}")
                goals = _text(data)
                continue
            files += 1
            if files > caps.max_files:
                raise ApiRefusal(413, f"more than {caps.max_files} input files in one request (api.max_files)")
            key = str(Path(name))
            if key in parts:
                raise ApiRefusal(400, f"two parts are named {name[:200]!r}")
            parts[key] = data
    finally:
        await form.close()
    if goals is None:
        raise ApiRefusal(400, f"a multipart request needs a part {GOALS_PART!r} with the goal lines")
    return goals, parts


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiRefusal(400, f"the goal lines are not UTF-8 text (byte {e.start})") from e


def _lines(text: str) -> list[str]:
    """JSONL lines, or a JSON array's items one per line (numbered from 1 in the array's order)."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise ApiRefusal(400, f"the body starts like a JSON array but is not one: {e.msg} (line {e.lineno})") from e
        if not isinstance(items, list):
            raise ApiRefusal(400, "expected a JSON array of goal lines")
        return [json.dumps(item) for item in items]
    return text.splitlines()
