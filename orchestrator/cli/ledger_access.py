"""What the ledger commands (``submit``, ``jobs``) share: reaching Redis, and printing ledger text safely."""

from __future__ import annotations

import sys

import redis
from rich.console import Console
from rich.text import Text

from orchestrator.cli.common import plain
from orchestrator.config import Settings
from orchestrator.errors import ConfigError
from orchestrator.logs import mask_secrets
from orchestrator.worker.ledger import Ledger

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
