"""What the ledger commands (``submit``, ``jobs``) share: reaching Redis, and printing ledger text safely."""

from __future__ import annotations

import sys
import time

import redis
from rich.console import Console
from rich.text import Text

from orchestrator.cli.common import notice, plain
from orchestrator.config import Settings
from orchestrator.errors import ConfigError
from orchestrator.logs import mask_secrets
from orchestrator.worker.ledger import Ledger

COLOURS = {"done": "green", "unmet": "yellow", "failed": "red", "cancelled": "magenta", "stalled": "red"}
"""A job state's colour in every table (``jobs``, ``submit --wait``)."""
PIPED_WIDTH = 10_000
"""Off a terminal nothing is cut or folded: ids, reasons and span lines stay whole on one line each."""


def open_ledger(settings: Settings) -> Ledger:
    ledger = Ledger.from_url(settings.broker_url)
    try:
        ledger.r.ping()
    except redis.RedisError as e:
        raise ConfigError(
            f"cannot reach Redis at {settings.broker_url}: {e}",
            where="broker",
            next_step="start Redis or set ORCH_BROKER_URL to a reachable one",
        ) from e
    return ledger


def console(*, stderr: bool = False) -> Console:
    """A console for tables and trees: the terminal's width on a terminal, no width limit when piped."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPED_WIDTH
    return Console(stderr=stderr, soft_wrap=True, width=width)


def literal(value: object) -> Text:
    """A goal, a reason or a file name as the worker stored it: shown literally (no markup, control characters
    escaped, secrets masked), on one line."""
    return Text(plain(mask_secrets(str(value))).replace("\n", "\\n"))


class Outage:
    """Redis lost while a command follows jobs (``submit --wait``, ``jobs --watch``): one line when it goes, one when
    it is back; the command keeps trying meanwhile instead of dying with a traceback."""

    def __init__(self, settings: Settings, command: str) -> None:
        self._where = mask_secrets(settings.broker_url)
        self._command = command
        self.since: float | None = None

    def lost(self, error: redis.RedisError) -> None:
        if self.since is not None:
            return
        self.since = time.monotonic()
        notice(f"{self._command}.redis_lost",
               f"lost Redis at {self._where} ({plain(str(error))[:200]}): the jobs go on; still waiting, retrying "
               f"every second", level="warning")

    def back(self) -> None:
        if self.since is None:
            return
        notice(f"{self._command}.redis_back", f"Redis is back after {self.seconds():.0f} s: waiting goes on",
               gone_s=round(self.seconds(), 1))
        self.since = None

    def seconds(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since
