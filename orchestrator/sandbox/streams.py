"""Reading a container's attached output: demultiplexing, bounded collection, and the stderr summary.

Nothing here buffers without a bound: stdout stops at its cap (the caller then kills the container), stderr keeps
only its last lines, each line cut to a fixed length.
"""

from __future__ import annotations

import itertools
import json
import math
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

STDOUT, STDERR = 1, 2
LINE_MAX_CHARS = 500
STDOUT_TEXT_BYTES = 4096
SUMMARY_MAX_CHARS = 2000

Outcome = Literal["eof", "timeout", "stdout_limit"]


@dataclass
class OutputCollector:
    """Keeps stdout up to ``stdout_limit`` bytes and the last ``stderr_max_lines`` lines of stderr."""

    stdout_limit: int
    stderr_max_lines: int
    stdout: bytearray = field(default_factory=bytearray)
    stdout_bytes: int = 0
    stdout_overflow: bool = False
    stderr_bytes: int = 0
    stderr_lines: int = 0
    _tail: deque[str] = field(init=False)
    _partial: bytearray = field(default_factory=bytearray)
    _partial_cut: bool = False

    def __post_init__(self) -> None:
        self._tail = deque(maxlen=self.stderr_max_lines)

    def feed(self, kind: int, data: memoryview | bytes) -> None:
        if kind == STDERR:
            self._feed_stderr(bytes(data))
            return
        self.stdout_bytes += len(data)
        room = self.stdout_limit - len(self.stdout)
        if len(data) > room:
            self.stdout += data[: max(room, 0)]
            self.stdout_overflow = True
        else:
            self.stdout += data

    def _feed_stderr(self, data: bytes) -> None:
        self.stderr_bytes += len(data)
        *complete, rest = data.split(b"\n")
        for piece in complete:
            self._append_partial(piece)
            self._end_line()
        self._append_partial(rest)

    def _append_partial(self, piece: bytes) -> None:
        room = LINE_MAX_CHARS * 4 - len(self._partial)  # bytes: a UTF-8 character is at most 4
        if len(piece) > room:
            self._partial += piece[: max(room, 0)]
            self._partial_cut = True
        else:
            self._partial += piece

    def _end_line(self) -> None:
        line = self._partial.decode("utf-8", errors="replace").rstrip("\r")
        if self._partial_cut or len(line) > LINE_MAX_CHARS:
            line = line[:LINE_MAX_CHARS] + " [line cut]"
        self._tail.append(line)
        self.stderr_lines += 1
        self._partial.clear()
        self._partial_cut = False

    def finish(self) -> None:
        """Count a last line that did not end with a newline."""
        if self._partial or self._partial_cut:
            self._end_line()

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._tail)

    def stdout_text(self) -> str:
        return self.stdout[:STDOUT_TEXT_BYTES].decode("utf-8", errors="replace")

    def stdout_json(self) -> tuple[bool, Any]:
        """(parsed, value): stdout as JSON, or (False, None) when it is empty or not JSON.

        The value is plain data every later step can print, log and send: NaN and infinities become null, lone
        surrogates U+FFFD, integers too long to print a string; nesting deeper than ``MAX_JSON_DEPTH`` is not JSON.
        """
        if not self.stdout.strip():
            return False, None
        try:
            return True, plain_json(json.loads(bytes(self.stdout), parse_int=_parse_int))
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: absurdly deep nesting
            return False, None


MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 200
_INT_BOUND = 10**MAX_INT_DIGITS


def _parse_int(digits: str) -> int | str:
    # An integer too long to print is kept as its digits: converting it would cost time quadratic in its length,
    # and past 4300 digits Python refuses (the whole output would read as "not JSON").
    return digits if len(digits) > MAX_INT_DIGITS + 1 else int(digits)


def plain_json(value: Any, depth: int = 0) -> Any:
    """``value`` (parsed JSON) made safe to print and re-encode, or ``ValueError`` when nested too deeply."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        return _plain_str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value if -_INT_BOUND < value < _INT_BOUND else str(value)
    if isinstance(value, list):
        return [plain_json(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_plain_str(k): plain_json(v, depth + 1) for k, v in value.items()}
    return value


def _plain_str(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:  # lone surrogates from \ud800-style escapes
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class Demultiplexer:
    """Splits Docker's attach stream (8-byte frame headers: stream, 0, 0, 0, big-endian size) incrementally."""

    def __init__(self, collector: OutputCollector) -> None:
        self._collector = collector
        self._header = bytearray()
        self._kind = 0
        self._left = 0

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        i = 0
        while i < len(view):
            if self._left == 0:
                need = 8 - len(self._header)
                self._header += view[i : i + need]
                i += need
                if len(self._header) < 8:
                    return
                self._kind = self._header[0]
                self._left = int.from_bytes(self._header[4:8], "big")
                self._header.clear()
                continue
            take = min(self._left, len(view) - i)
            self._collector.feed(self._kind, view[i : i + take])
            i += take
            self._left -= take


def pump(sock: socket.socket, collector: OutputCollector, deadline: float) -> Outcome:
    """Read the attach stream until EOF, the deadline (monotonic) or the stdout cap, whichever comes first."""
    demux = Demultiplexer(collector)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(256 * 1024)
        except TimeoutError:
            return "timeout"
        except OSError:  # the engine dropped the stream: what was read is all there is
            chunk = b""
        if not chunk:
            collector.finish()
            return "eof"
        demux.feed(chunk)
        if collector.stdout_overflow:
            return "stdout_limit"


def summarise_stderr(tail: list[str], total_lines: int, max_chars: int = SUMMARY_MAX_CHARS) -> str:
    """A short, readable digest of the kept stderr lines.

    Runs of identical lines collapse to one line with a count; lines not kept are announced; when still too long
    the start and (mostly) the end are kept, since tracebacks and final errors come last.
    """
    lines = [line if count == 1 else f"{line}  [x{count}]" for line, count in _runs(tail)]
    dropped = total_lines - len(tail)
    if dropped > 0:
        lines.insert(0, f"[{dropped} earlier stderr lines not kept]")
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    head_budget, tail_budget = max_chars // 4, max_chars - max_chars // 4
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > head_budget:
            break
        head.append(line)
        used += len(line) + 1
    end: list[str] = []
    used = 0
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > tail_budget:
            break
        end.insert(0, line)
        used += len(line) + 1
    if not end and lines:
        end = [lines[-1][-tail_budget:]]
    omitted = len(lines) - len(head) - len(end)
    return "\n".join([*head, f"[... {omitted} lines omitted ...]", *end])


def _runs(lines: list[str]) -> list[tuple[str, int]]:
    return [(line, sum(1 for _ in group)) for line, group in itertools.groupby(lines)]
