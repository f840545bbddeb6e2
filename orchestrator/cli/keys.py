"""``keys create|list|revoke``: producers' API keys, made by an operator (it holds the Redis credentials)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from orchestrator.api.keys import KeyStore
from orchestrator.cli.common import emit_json, fail, notice, state
from orchestrator.cli.ledger_access import console, literal, open_ledger
from orchestrator.errors import ConfigError, OrchestratorError

app = typer.Typer(no_args_is_help=True)


def _store(ctx: typer.Context, *, as_json: bool) -> KeyStore:
    try:
        return KeyStore(open_ledger(state(ctx).settings()).r)
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The producer's name (letters, digits, '.', '_', '-').")],
    admin: Annotated[bool, typer.Option("--admin", help="The key sees and controls every producer's jobs.")] = False,
    max_active_jobs: Annotated[
        int | None, typer.Option("--max-active-jobs", min=1, help="Quota: jobs queued or running at once.")
    ] = None,
    max_input_mb: Annotated[
        float | None, typer.Option("--max-input-mb", min=0.001, help="Quota: MB of input files kept for its jobs.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Make a key for producer NAME and print it once: only its sha256 is kept."""
    store = _store(ctx, as_json=as_json)
    try:
        key, secret = store.create(name, admin=admin, max_active_jobs=max_active_jobs, max_input_mb=max_input_mb)
    except ConfigError as e:
        fail(e, as_json=as_json, code=1)
    if as_json:
        emit_json({**key.public(), "key": secret})
        return
    sys.stdout.write(secret + "\n")
    notice("keys.created", f"key of producer {name}{' (admin)' if admin else ''}: shown once, only its hash is kept; "
           "give it to the producer as ORCH_API_KEY")


@app.command("list")
def list_keys(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False
) -> None:
    """The producers that hold a key (never the keys)."""
    keys = _store(ctx, as_json=as_json).all()
    if as_json:
        emit_json([k.public() for k in keys])
        return
    out = console()
    for k in keys:
        quotas = f"max_active_jobs={k.max_active_jobs or '-'} max_input_mb={k.max_input_mb or '-'}"
        out.print(literal(f"{k.name}{'  admin' if k.admin else ''}  {quotas}"), highlight=False)
    if not keys:
        notice("keys.none", "no keys: keys create NAME makes one")


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The producer whose key stops working at once.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Revoke producer NAME's key: its next request is refused (401)."""
    revoked = _store(ctx, as_json=as_json).revoke(name)
    if as_json:
        emit_json({"name": name, "revoked": revoked})
    elif revoked:
        notice("keys.revoked", f"key of producer {name} revoked")
    else:
        notice("keys.unknown", f"producer {name!r} has no key", level="warning")
    raise typer.Exit(0 if revoked else 1)
