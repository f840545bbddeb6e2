"""Run one untrusted-input function in a child process with hard memory and time bounds.

Parsing what skills and scripts produce (Office packages, zip members, XML, JSON, YAML) and rendering templates the
model picked can take unbounded memory or time in libraries we do not control. :func:`run_bounded` runs such a
function in a fresh interpreter (``python -I``) under ``RLIMIT_AS`` and ``RLIMIT_CPU``, and kills it at the
wall-clock limit. The parent only ever receives the function's (small) result as JSON, or a :class:`Bounded` error
saying which bound was hit.

A plain subprocess rather than :mod:`multiprocessing`: a Celery prefork worker is a daemonic process, which
``multiprocessing`` forbids to start children (and its workarounds trip over the worker's authkey), while
``subprocess`` works under any parent. The child sets its own limits before it reads its work, so nothing from the
input runs unbounded, and no ``preexec_fn`` runs in the (threaded) parent. Starting an interpreter and importing
the parsing libraries costs far more than most checks, so the next child is started ahead (see :class:`_Standby`).
"""

from __future__ import annotations

import atexit
import importlib
import json
import math
import os
import pickle
import resource
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
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
_HEADER = 8  # bytes of the big-endian length that precedes the call's JSON head on the child's stdin
_RECENT_MODULES = 2

# -I: no PYTHONPATH, no user site, no script folder or cwd on sys.path (the parent's import path is passed instead).
_BOOTSTRAP = (
    "import sys, json\n"
    "head = json.loads(sys.argv[1])\n"
    "sys.path[:] = head['path']\n"
    "from orchestrator.isolation import child_main\n"
    "child_main(head['modules'])\n"
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


def _spawn(modules: list[str]) -> subprocess.Popen[bytes]:
    head = json.dumps({"path": _import_path(), "modules": modules})
    return subprocess.Popen(
        [sys.executable, "-I", "-c", _BOOTSTRAP, head],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a terminal's Ctrl-C goes to the parent, which kills the child itself
        close_fds=True,
    )


class _Standby:
    """One child started ahead of the next call, its interpreter up and the recent callers' modules imported.

    Starting Python and importing the parsing libraries costs far more than most checks; the standby takes that
    off the call. It has run nothing but our own imports: every call still gets a fresh process, and the child
    sets the call's limits before it reads the call's work. A standby that is never used waits on its stdin and
    ends when this process closes it (at exit, or by dying).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = 0  # the pid that started it: a forked process (a Celery prefork worker) starts its own
        self._modules: dict[str, None] = {}

    def take(self, module: str) -> subprocess.Popen[bytes]:
        with self._lock:
            self._modules.pop(module, None)
            self._modules[module] = None
            while len(self._modules) > _RECENT_MODULES:
                del self._modules[next(iter(self._modules))]
            modules = list(self._modules)
            ready = self._process if self._owner == os.getpid() else None
            self._process = None
        if ready is None or ready.poll() is not None:
            ready = _spawn(modules)
        with self._lock:
            if self._process is None:
                self._process, self._owner = _spawn(modules), os.getpid()
        return ready

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
            owned = self._owner == os.getpid()
        if process is not None and owned:
            _stop(process)

    def forget(self) -> None:
        """In a forked child: the parent's standby is not ours (release our copy of its pipes only)."""
        process, self._process = self._process, None
        self._lock = threading.Lock()
        if process is not None:
            for pipe in (process.stdin, process.stdout):
                with suppress(OSError):
                    if pipe is not None:
                        pipe.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    with suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()  # EOF: an idle child ends by itself
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


_standby = _Standby()
atexit.register(_standby.close)
os.register_at_fork(after_in_child=_standby.forget)


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
    head = json.dumps(
        {"path": _import_path(), "cwd": os.getcwd(), "memory_bytes": memory_mb * 1024 * 1024, "cpu_s": cpu_s}
    ).encode()
    payload = len(head).to_bytes(_HEADER, "big") + head + pickle.dumps((fn, args))
    with _standby.take(getattr(fn, "__module__", "") or "") as process:
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


def child_main(modules: list[str]) -> None:
    """The child's side: import ``modules`` (ours), wait for a call, set its limits, then read its work, run it
    and print ``[kind, value]`` as JSON."""
    for name in modules:
        with suppress(Exception):
            importlib.import_module(name)
    result_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the function or its libraries print goes nowhere near the result
    size = int.from_bytes(sys.stdin.buffer.read(_HEADER) or b"\0", "big")
    if not size:
        return  # the parent closed our stdin: no call is coming
    head = json.loads(sys.stdin.buffer.read(size))
    used = resource.getrusage(resource.RUSAGE_SELF)
    # The imports above do not eat into the call's time, and rounding up keeps the CPU limit a backstop behind the
    # parent's wall-clock limit: rounded down it could stop a busy call up to a second before that limit.
    cpu_s = math.ceil(used.ru_utime + used.ru_stime) + head["cpu_s"]
    resource.setrlimit(resource.RLIMIT_AS, (head["memory_bytes"], head["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        sys.path[:] = head["path"]
        os.chdir(head["cwd"])
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
    os._exit(0)  # the parent waits for the exit: an interpreter's tear-down costs more than most checks
