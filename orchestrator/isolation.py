"""Run one untrusted-input function in a child process with hard memory and time bounds.

Parsing what skills and scripts produce (Office packages, zip members, XML, JSON, YAML) and rendering templates the
model picked can take unbounded memory or time in libraries we do not control. :func:`run_bounded` runs such a
function in a fresh interpreter (``python -I``) under ``RLIMIT_AS`` and ``RLIMIT_CPU``, and kills it at the
wall-clock limit. The parent only ever receives the function's (small) result as JSON, or a :class:`Bounded` error
saying which bound was hit.

A plain subprocess rather than :mod:`multiprocessing`: a Celery prefork worker is a daemonic process, which
``multiprocessing`` forbids to start children (and its workarounds trip over the worker's authkey), while
``subprocess`` works under any parent. The child sets its own limits before it reads its work, so nothing from the
input runs unbounded, and no ``preexec_fn`` runs in the (threaded) parent.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import subprocess
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from orchestrator.errors import OrchestratorError

T = TypeVar("T")
class Bound(StrEnum):
    """Which bound the child hit (or ``ERROR``: ``fn`` raised), for callers to branch on."""

    MEMORY = "memory"
    TIME = "time"
    CRASH = "crash"
    ERROR = "error"
DEFAULT_MEMORY_MB = 1024
DEFAULT_TIMEOUT_S = 30.0
MAX_RESULT_BYTES = 64 * 1024 * 1024
_HEADER = 8  # bytes of the big-endian length that precedes the pickled work on the child's stdin

# -I: no PYTHONPATH, no user site, no script folder or cwd on sys.path (the parent's import path is sent instead).
_BOOTSTRAP = (
    "import sys, json\n"
    "n = int.from_bytes(sys.stdin.buffer.read(8), 'big')\n"
    "head = json.loads(sys.stdin.buffer.read(n))\n"
    "sys.path[:] = head['path']\n"
    "from orchestrator.isolation import child_main\n"
    "child_main(head['memory_bytes'], head['cpu_s'])\n"
)


class Bounded(OrchestratorError):
    """The child hit a bound (``bound``: memory, time, crash) or raised (``error``, with its message)."""

    def __init__(self, message: str, *, bound: Bound, detail: str = "", **data: Any) -> None:
        if detail:
            data["detail"] = detail
        super().__init__(message, bound=bound, **data)
        self.bound: Bound = bound
        self.detail = detail
        """What ``fn`` raised (its type and message) when ``bound`` is ``error``."""


def _import_path() -> list[str]:
    cwd = os.getcwd()
    return [os.path.join(cwd, p) if not os.path.isabs(p) else p for p in sys.path]


def run_bounded(
    fn: Callable[..., T],
    *args: Any,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    what: str = "the check",
    returns: Any = None,
) -> T:
    """``fn(*args)`` computed in a child process limited to ``memory_mb`` of address space and ``timeout_s``.

    ``fn`` must be a module-level function, its arguments picklable and its result JSON-able (pydantic's rules);
    ``returns`` (a type) turns the JSON back into that type. Raises :class:`Bounded` when a limit was hit, the
    child died, or ``fn`` raised (its type and message are kept).
    """
    timeout_s = max(float(timeout_s), 0.05)
    cpu_s = max(1, int(timeout_s) + 1)
    head = json.dumps({"path": _import_path(), "memory_bytes": memory_mb * 1024 * 1024, "cpu_s": cpu_s}).encode()
    payload = len(head).to_bytes(_HEADER, "big") + head + pickle.dumps((fn, args))
    with subprocess.Popen(
        [sys.executable, "-I", "-c", _BOOTSTRAP],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a terminal's Ctrl-C goes to the parent, which kills the child itself
        close_fds=True,
    ) as process:
        try:
            out, _ = process.communicate(payload, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            process.kill()
            process.communicate()
            raise Bounded(f"{what} took longer than {timeout_s:g}s and was stopped", bound=Bound.TIME) from e
        finally:
            if process.poll() is None:
                process.kill()
    if process.returncode != 0 or not out or len(out) > MAX_RESULT_BYTES:
        raise Bounded(f"{what} was killed (memory {memory_mb} MiB or CPU time limit)", bound=Bound.CRASH)
    try:
        kind, value = json.loads(out)
    except ValueError as e:
        raise Bounded(f"{what} answered something unreadable", bound=Bound.CRASH) from e
    if kind == "memory":
        raise Bounded(f"{what} needed more than {memory_mb} MiB of memory and was stopped", bound=Bound.MEMORY)
    if kind == "error":
        raise Bounded(f"{what} failed: {value}", bound=Bound.ERROR, detail=str(value))
    if returns is not None:
        return TypeAdapter(returns).validate_python(value)  # type: ignore[no-any-return]
    return value  # type: ignore[no-any-return]


def child_main(memory_bytes: int, cpu_s: int) -> None:
    """The child's side: set the limits, then read the work, run it and print ``[kind, value]`` as JSON."""
    result_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the function or its libraries print goes nowhere near the result
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        fn, args = pickle.loads(sys.stdin.buffer.read())
        outcome: list[Any] = ["ok", to_jsonable_python(fn(*args))]
        text = json.dumps(outcome, ensure_ascii=False)
    except MemoryError:
        text = '["memory", null]'
    except RecursionError:
        text = json.dumps(["error", "too deeply nested (RecursionError)"])
    except BaseException as e:  # noqa: BLE001 - everything the function raises goes back as text
        text = json.dumps(["error", f"{type(e).__name__}: {str(e)[:500]}"], ensure_ascii=False)
    with os.fdopen(result_fd, "wb") as out:
        out.write(text.encode("utf-8", errors="replace"))

