"""Run one untrusted-input function in a child process with hard memory and time bounds.

Parsing what skills and scripts produce (Office packages, zip members, XML, JSON, YAML) and rendering templates the
model picked can take unbounded memory or time in libraries we do not control. :func:`run_bounded` runs such a
function in a child process forked from a fork server (cheap after the first call, safe with threads in the parent)
under ``RLIMIT_AS`` and ``RLIMIT_CPU``, and kills it at the wall-clock limit. The parent only ever receives the
function's (small) result or a :class:`Bounded` error saying which bound was hit.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import resource
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from orchestrator.errors import OrchestratorError

T = TypeVar("T")
Bound = Literal["memory", "time", "crash", "error"]
DEFAULT_MEMORY_MB = 1024
DEFAULT_TIMEOUT_S = 30.0
# The fork server imports these once, so each child starts with them loaded.
PRELOAD = ["orchestrator.validate.contract", "orchestrator.act.templating", "orchestrator.act.checks"]

_context: Any = None
_lock = threading.Lock()


class Bounded(OrchestratorError):
    """The child hit a bound (``bound``: memory, time, crash) or raised (``error``, with its message)."""

    def __init__(self, message: str, *, bound: Bound, **data: Any) -> None:
        super().__init__(message, bound=bound, **data)
        self.bound: Bound = bound


def _ctx() -> Any:
    global _context
    with _lock:
        if _context is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            _context = ctx
        return _context


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], memory_bytes: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        outcome: tuple[str, Any] = ("ok", fn(*args))
    except MemoryError:
        outcome = ("memory", None)
    except RecursionError:
        outcome = ("error", "too deeply nested (RecursionError)")
    except BaseException as e:  # noqa: BLE001 - everything the function raises goes back as text
        outcome = ("error", f"{type(e).__name__}: {str(e)[:500]}")
    try:
        conn.send(outcome)
    except MemoryError:
        conn.send(("memory", None))
    finally:
        conn.close()


def run_bounded(
    fn: Callable[..., T],
    *args: Any,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    what: str = "the check",
) -> T:
    """``fn(*args)`` computed in a child process limited to ``memory_mb`` of address space and ``timeout_s``.

    ``fn`` must be a module-level function and its arguments and result picklable. Raises :class:`Bounded`
    when a limit was hit, the child died, or ``fn`` raised (its type and message are kept).
    """
    timeout_s = max(float(timeout_s), 0.05)
    ctx = _ctx()
    receiver, sender = ctx.Pipe(duplex=False)
    cpu_s = max(1, int(timeout_s) + 1)
    process = ctx.Process(target=_child, args=(sender, fn, args, memory_mb * 1024 * 1024, cpu_s), daemon=True)
    # A Celery prefork worker is a daemonic process, which multiprocessing forbids to start children; ours is
    # always joined or killed below before returning, so the flag is lifted just for the start.
    current = multiprocessing.current_process()
    daemonic = current._config.get("daemon")  # type: ignore[attr-defined]
    if daemonic:
        current._config["daemon"] = False  # type: ignore[attr-defined]
    try:
        process.start()
    finally:
        if daemonic:
            current._config["daemon"] = daemonic  # type: ignore[attr-defined]
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            raise Bounded(f"{what} took longer than {timeout_s:g}s and was stopped", bound="time")
        try:
            kind, value = receiver.recv()
        except (EOFError, OSError) as e:
            raise Bounded(f"{what} was killed (memory {memory_mb} MiB or CPU time limit)", bound="crash") from e
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join(5)
    if kind == "memory":
        raise Bounded(f"{what} needed more than {memory_mb} MiB of memory and was stopped", bound="memory")
    if kind == "error":
        raise Bounded(f"{what} failed: {value}", bound="error", detail=value)
    return value  # type: ignore[no-any-return]
