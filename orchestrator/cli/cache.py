"""CLI: what the cache folder holds (``cache info``) and removing it (``cache clear [--older-than DAYS]``).

The cache folder (``ORCH_CACHE_DIR``, default ``~/.cache/orchestrator``) holds ``jobs/<job_id>/`` (inputs, published
copies and the evidence file ``result.json`` of each goal, owner-only) and ``store/`` (the memo, the read cache and
the response cache that make second runs cheaper). Nothing outside the cache folder is touched, and symlinks in it are
removed, never followed.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli.common import emit_json, fail, plain, state
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.workflow.folders import jobs_folder

app = typer.Typer(no_args_is_help=True)
DAY_S = 86400


def _size(path: Path) -> int:
    """Bytes under ``path`` (symlinks counted as themselves, never followed)."""
    try:
        info = path.lstat()
    except OSError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        return info.st_size
    total = 0
    for folder, dirs, files in os.walk(path, followlinks=False):
        for name in [*files, *dirs]:
            try:
                entry = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if not stat.S_ISDIR(entry.st_mode):
                total += entry.st_size
    return total


def _entries(cache_dir: Path) -> list[tuple[str, Path]]:
    """(kind, path) of each removable unit: every job folder, and each part of the store."""
    units: list[tuple[str, Path]] = []
    for kind, folder in (("job", jobs_folder(cache_dir)), ("store", cache_dir / "store")):
        if folder.is_dir() and not folder.is_symlink():
            units += [(kind, child) for child in sorted(folder.iterdir())]
    return units


def _age_days(path: Path, now: float) -> float:
    try:
        return (now - path.lstat().st_mtime) / DAY_S
    except OSError:
        return 0.0


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@app.command(
    "info", help="Show the cache folder, its job folders and its store (memo, read cache, response cache), their sizes."
)
def cache_info(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    try:
        cache_dir = state(ctx).settings().cache_dir
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    now = time.time()
    units = _entries(cache_dir)
    jobs = [p for kind, p in units if kind == "job"]
    info: dict[str, Any] = {
        "cache_dir": str(cache_dir),
        "exists": cache_dir.is_dir(),
        "jobs": len(jobs),
        "jobs_bytes": sum(_size(p) for p in jobs),
        "store_bytes": sum(_size(p) for kind, p in units if kind == "store"),
        "oldest_job_days": round(max((_age_days(p, now) for p in jobs), default=0.0), 2),
    }
    info["total_bytes"] = info["jobs_bytes"] + info["store_bytes"]
    if as_json:
        emit_json(info)
        return
    typer.echo(plain(f"cache folder: {cache_dir}" + ("" if info["exists"] else " (does not exist yet)")))
    typer.echo(f"jobs: {info['jobs']} ({info['jobs_bytes']} bytes, oldest {info['oldest_job_days']} days)")
    typer.echo(f"store (memo, read cache, response cache): {info['store_bytes']} bytes")
    typer.echo("clear it with: python -m orchestrator cache clear [--older-than DAYS]")


@app.command(
    "clear",
    help="Remove job folders and the store: memo, read cache, response cache (only those older than DAYS with "
    "--older-than).",
)
def cache_clear(
    ctx: typer.Context,
    older_than: Annotated[
        float | None,
        typer.Option("--older-than", min=0, help="Only remove what was last changed more than DAYS days ago."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    try:
        cache_dir = state(ctx).settings().cache_dir
        if cache_dir.is_symlink() or (cache_dir.exists() and not cache_dir.is_dir()):
            raise ConfigError(
                f"the cache folder {cache_dir} is a symlink or not a folder: nothing removed",
                where="cache",
                next_step="set ORCH_CACHE_DIR to the real folder",
            )
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    now = time.time()
    removed: list[str] = []
    freed = 0
    errors: list[str] = []
    for _kind, path in _entries(cache_dir):
        if older_than is not None and _age_days(path, now) <= older_than:
            continue
        size = _size(path)
        try:
            _remove(path)
        except OSError as e:
            errors.append(f"{path}: {e.strerror or e}")
            continue
        removed.append(str(path.relative_to(cache_dir)))
        freed += size
    report = {"cache_dir": str(cache_dir), "removed": len(removed), "freed_bytes": freed, "errors": errors,
              "older_than_days": older_than}
    if as_json:
        emit_json(report)
    else:
        typer.echo(plain(f"removed {len(removed)} item(s) from {cache_dir}, {freed} bytes freed"))
        for error in errors:
            typer.echo(plain(f"not removed: {error}"), err=True)
    raise typer.Exit(1 if errors else 0)
