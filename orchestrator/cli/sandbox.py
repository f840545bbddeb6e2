"""CLI: run a script in the sandbox, build the sandbox image, list its tools, reap orphans."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli.common import emit_json, fail, plain, state
from orchestrator.config import SandboxSettings, Settings
from orchestrator.errors import ConfigError, OrchestratorError, SandboxRefused
from orchestrator.logs import dumps_safe
from orchestrator.sandbox.browser import build_browser_image
from orchestrator.sandbox.commands import resolve_command
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.sandbox.engine import connect, docker_errors
from orchestrator.sandbox.image import BaseChoice, build_image, probe_fonts
from orchestrator.sandbox.limits import resolve_script
from orchestrator.sandbox.models import ScriptResult
from orchestrator.sandbox.reaper import reap_orphans

app = typer.Typer(no_args_is_help=True)
_BASES: dict[str, BaseChoice] = {"auto": "auto", "debootstrap": "debootstrap", "public": "public"}

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
SkillRootOpt = Annotated[Path, typer.Option("--skill-root", help="The skill folder (mounted read-only).")]
BuildOpt = Annotated[
    Path, typer.Option("--build", help="Host folder copied into build/ before the call and receiving it after.")
]
InputsOpt = Annotated[Path | None, typer.Option("--inputs", help="Folder mounted read-only at /inputs.")]
TimeoutOpt = Annotated[float | None, typer.Option("--timeout", help="Wall-clock seconds (capped).")]
DiskMbOpt = Annotated[int | None, typer.Option("--disk-mb", help="Size of build/.")]
OperationOpt = Annotated[
    list[str] | None, typer.Option("--operation", help="A declared operation selecting a limit profile.")
]


def _sandbox_settings(settings: Settings, **changes: Any) -> SandboxSettings:
    values = {k: v for k, v in changes.items() if v is not None}
    try:
        return SandboxSettings.model_validate({**settings.sandbox.model_dump(), **values})
    except ValueError as e:
        raise ConfigError(f"invalid sandbox option: {e}", where="cli:sandbox") from e


def _parse_args(text: str) -> Any:
    source = Path(text[1:]).read_text(encoding="utf-8") if text.startswith("@") else text
    try:
        return json.loads(source)
    except ValueError as e:
        raise typer.BadParameter(f"--args is not JSON: {e}") from e


def _seed_build(job: Any, build: Path) -> list[str]:
    """Files already in --build go into the job's build/ first, so successive runs can chain; returns their paths."""
    seeded: list[str] = []
    if not build.is_dir():
        return seeded
    for path in sorted(build.rglob("*")):
        if path.is_file() and not path.is_symlink():
            rel = path.relative_to(build).as_posix()
            job.write_file(rel, path.read_bytes())
            seeded.append(rel)
    return seeded


def _drop_deleted(build: Path, seeded: list[str], kept: set[str]) -> None:
    """Remove from --build the seeded files the call deleted in build/ (and folders that left empty), so the host
    folder is what build/ was at the end of the call, as the next call will see it."""
    for rel in seeded:
        if rel in kept:
            continue
        path = build / rel
        if path.is_file() and not path.is_symlink():
            path.unlink()
        folder = path.parent
        while folder != build and folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent


@app.command("run", help="Run one script of a skill (or build/NAME) in a throwaway container; print its ScriptResult.")
def run_cmd(
    ctx: typer.Context,
    script: Annotated[
        str, typer.Argument(help="Script path relative to the skill root (.py, .sh, .js), or build/NAME from --build.")
    ],
    skill_root: SkillRootOpt,
    build: BuildOpt,
    args: Annotated[str, typer.Option("--args", help="Args JSON for the script's stdin (or @file.json).")] = "{}",
    argv: Annotated[
        list[str] | None, typer.Option("--argv", help="One command-line argument of the script (repeatable).")
    ] = None,
    timeout: TimeoutOpt = None,
    memory_mb: Annotated[int | None, typer.Option("--memory-mb", help="Memory limit (no swap).")] = None,
    cpus: Annotated[float | None, typer.Option("--cpus", help="CPU quota.")] = None,
    disk_mb: DiskMbOpt = None,
    inputs: InputsOpt = None,
    operation: OperationOpt = None,
    as_json: JsonFlag = False,
) -> None:
    payload = _parse_args(args)
    words = list(argv or [])
    result = _in_job(
        ctx,
        label=script,
        check=lambda sandbox: resolve_script(skill_root, script, sandbox.allowed_extensions, words),
        call=lambda job, timeout_s: job.run_script(script, payload, argv=words, timeout_s=timeout_s),
        skill_root=skill_root,
        build=build,
        inputs=inputs,
        timeout=timeout,
        disk_mb=disk_mb,
        operations=operation or [],
        as_json=as_json,
        sandbox_changes={"memory_mb": memory_mb, "cpus": cpus},
    )
    _finish(result, as_json)


@app.command(
    "command",
    help="Run one allowed program (soffice, pdftoppm, qpdf, pandoc, python3, ...) in a throwaway container, "
    "working folder the skill root; print the same result as `sandbox run`. Put the command after `--`.",
)
def command_cmd(
    ctx: typer.Context,
    command: Annotated[list[str], typer.Argument(help="PROGRAM [ARG...]: the program must be allowed.")],
    skill_root: SkillRootOpt,
    build: BuildOpt,
    inputs: InputsOpt = None,
    timeout: TimeoutOpt = None,
    disk_mb: DiskMbOpt = None,
    operation: OperationOpt = None,
    as_json: JsonFlag = False,
) -> None:
    result = _in_job(
        ctx,
        label=command[0] if command else "",
        check=lambda sandbox: resolve_command(command, sandbox.allowed_commands),
        call=lambda job, timeout_s: job.run_command(command, timeout_s=timeout_s),
        skill_root=skill_root,
        build=build,
        inputs=inputs,
        timeout=timeout,
        disk_mb=disk_mb,
        operations=operation or [],
        as_json=as_json,
        sandbox_changes={},
    )
    _finish(result, as_json)


def _in_job(
    ctx: typer.Context,
    *,
    label: str,
    check: Callable[[SandboxSettings], object],
    call: Callable[[Any, float], ScriptResult],
    skill_root: Path,
    build: Path,
    inputs: Path | None,
    timeout: float | None,
    disk_mb: int | None,
    operations: list[str],
    as_json: bool,
    sandbox_changes: dict[str, Any],
) -> ScriptResult:
    """One call in a fresh job: refused before the engine is touched, build/ seeded from and exported to --build."""

    try:
        settings = state(ctx).settings()
        sandbox = _sandbox_settings(settings, **sandbox_changes)
        check(sandbox)  # refuse before touching the engine
        runner = SandboxRunner(sandbox, work_dir=settings.cache_dir / "sandbox")
        try:
            with runner.open_job(
                "cli",
                skill_root,
                disk_mb=disk_mb or settings.limits.disk_write_limit_mb,
                inputs_dir=inputs,
                operations=operations,
            ) as job:
                seeded = _seed_build(job, build)
                try:
                    result = call(job, timeout or settings.limits.script_timeout_s)
                except SandboxRefused as e:
                    result = _refused(label, e)
                _drop_deleted(build, seeded, {file.path for file in job.export(build)})
                pruned = job.take_pruned()
                if pruned:
                    result = result.model_copy(update={
                        "ok": False, "violations": [*result.violations, *pruned],
                        "reason": result.reason or "the call left files that break the build/ contract (removed)"})
        finally:
            runner.close()
    except SandboxRefused as e:
        result = _refused(label, e)
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    return result


def _finish(result: ScriptResult, as_json: bool) -> None:
    if as_json:
        emit_json(result)
    else:
        _print_result(result)
    raise typer.Exit(0 if result.ok else 1)


def _refused(script: str, error: SandboxRefused) -> ScriptResult:
    return ScriptResult.refused(script, error.message, f"{error.violation}: {error.message}")


def _print_result(result: ScriptResult) -> None:
    status = "ok" if result.ok else f"FAILED: {result.reason}"
    typer.echo(f"{result.script}: {status} (exit {result.exit_code}, {result.duration_ms} ms)")
    for violation in result.violations:
        typer.echo(plain(f"  violation: {violation}"))
    if result.stdout_json is not None:
        typer.echo(dumps_safe(result.stdout_json))
    elif result.stdout_text:
        typer.echo(plain(result.stdout_text))
    if result.stderr_summary:
        typer.echo("--- stderr ---", err=True)
        typer.echo(plain(result.stderr_summary), err=True)


@app.command("build-image", help="Build the sandbox image (skipped when the same content is already built).")
def build_image_cmd(
    ctx: typer.Context,
    base: Annotated[
        str, typer.Option("--base", help="auto | debootstrap (no registry) | public (debian:bookworm-slim).")
    ] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the same content is built.")] = False,
    wheelhouse: Annotated[
        Path | None, typer.Option("--wheelhouse", help="Use these wheels (air-gapped), not a download.")
    ] = None,
    node_modules: Annotated[
        Path | None, typer.Option("--node-modules", help="Use this node_modules (air-gapped), not `npm ci`.")
    ] = None,
    rootfs: Annotated[Path | None, typer.Option("--rootfs", help="Debian rootfs folder to import.")] = None,
    browser: Annotated[
        bool,
        typer.Option(
            "--browser/--no-browser",
            help="Also build the browser image (Playwright + Chromium) FROM the sandbox image; calls that start a "
            "browser need it.",
        ),
    ] = True,
    as_json: JsonFlag = False,
) -> None:
    if base not in _BASES:
        raise typer.BadParameter("--base must be auto, debootstrap or public")

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    quiet: Callable[[str], None] = say if not as_json else (lambda _t: None)
    try:
        settings = state(ctx).settings()
        client = connect()
        result = build_image(
            client,
            settings,
            base=_BASES[base],
            force=force,
            wheelhouse=wheelhouse,
            node_modules=node_modules,
            rootfs=rootfs,
            say=quiet,
        )
        if browser:
            browser_build = build_browser_image(client, settings, result, force=force, wheelhouse=wheelhouse, say=quiet)
            result = result.model_copy(update={"browser": browser_build})
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        for built in (result, result.browser):
            if built is not None:
                verb = "built" if built.built else "up to date"
                typer.echo(f"{built.image} {verb} ({built.base}: {built.base_image}) in {built.duration_ms} ms")


@app.command(
    "tools",
    help="The tools the sandbox image provides (from its label), with the browser image's (Playwright, Chromium) "
    "when it is built.",
)
def tools_cmd(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    try:
        settings = state(ctx).settings()
        work_dir = settings.cache_dir / "sandbox"
        runner = SandboxRunner(settings.sandbox, connect(), work_dir=work_dir, reap_on_start=False)
        try:
            tools = runner.image_tools()
        finally:
            runner.close()
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(tools)
    else:
        for name, version in sorted(tools.items()):
            typer.echo(f"{name:16} {version}")


@app.command("fonts", help="The font families the sandbox image has (what renders without substitution).")
def fonts_cmd(
    ctx: typer.Context,
    write: Annotated[
        Path | None,
        typer.Option("--write", help="Write the layout check's font table (families and widths) to this file."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    try:
        settings = state(ctx).settings()
        table = probe_fonts(connect(), settings.sandbox.image)
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if write is not None:
        write.write_text(json.dumps(table, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    families = sorted(table.get("families", []))
    measured = sorted(table.get("metrics", {}))
    if as_json:
        emit_json({"image": settings.sandbox.image, "families": families, "measured": measured})
    else:
        for family in families:
            typer.echo(f"{family}{'' if family in measured else '  (no Latin text)'}")


@app.command("reap", help="Remove containers and volumes left by dead processes.")
def reap_cmd(
    ctx: typer.Context,
    older_than: Annotated[float, typer.Option("--older-than", help="Only resources older than S seconds.")] = 0,
    foreign_after: Annotated[
        float, typer.Option("--foreign-after", help="Resources of other hosts: only after S seconds.")
    ] = 3600,
    as_json: JsonFlag = False,
) -> None:
    try:
        settings = state(ctx).settings()
        client = connect()
        with docker_errors("sandbox:reap"):
            report = reap_orphans(
                client,
                settings.sandbox.label_prefix,
                older_than_s=older_than,
                foreign_after_s=foreign_after,
                work_root=settings.cache_dir / "sandbox" / "jobs",
            )
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json({"removed": report.removed, **report.model_dump()})
    else:
        typer.echo(f"removed {len(report.containers)} containers, {len(report.volumes)} volumes")
