"""Thumbnails of Office files in ``build/``: LibreOffice → PDF → PNG of the first page, both steps in the sandbox.

Each step is an ordinary ``run_command`` of the job (a fresh container, the same limits), so the conversion of a
hostile document is as contained as any script. Both files land in ``build/.thumbnails/<file>/`` (the PDF and
``<stem>.png``), out of the way of the skill's own outputs.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import PathEscapeError, SandboxRefused
from orchestrator.sandbox.limits import safe_build_path
from orchestrator.sandbox.models import ScriptResult

OFFICE_SUFFIXES = frozenset({".pptx", ".docx", ".xlsx", ".ppt", ".doc", ".xls", ".odp", ".odt", ".ods"})
THUMBNAIL_DIR = ".thumbnails"


class CommandRunner(Protocol):
    def run_command(self, argv: list[str], *, timeout_s: float = ...) -> ScriptResult: ...


class Thumbnail(BaseModel):
    """The outcome of one thumbnail: the PNG's path under ``build/`` when it worked, and both calls as evidence."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(..., description="the Office file, relative to build/")
    png: str | None = Field(None, description="the thumbnail, relative to build/ (None when a step failed)")
    steps: list[ScriptResult] = Field(default_factory=list)
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.png is not None


def is_office_file(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in OFFICE_SUFFIXES


def office_thumbnail(
    job: CommandRunner, rel_path: str, *, timeout_s: float = 60, dpi: int = 50
) -> Thumbnail:
    """Render page/slide 1 of ``build/rel_path`` as ``build/.thumbnails/<rel_path>/<stem>.png``.

    ``timeout_s`` applies to each step and is capped like any call. Raises :class:`SandboxRefused` for a path that
    is not an Office file inside ``build/``; a conversion that fails is a :class:`Thumbnail` without ``png``.
    """
    try:
        rel = safe_build_path(rel_path)
    except PathEscapeError as e:
        raise SandboxRefused(e.message, where="sandbox:thumbnail", retryable=False, violation="path_escape") from e
    if not is_office_file(rel):
        raise SandboxRefused(
            f"{rel_path!r} is not an Office file ({', '.join(sorted(OFFICE_SUFFIXES))})",
            where="sandbox:thumbnail",
            retryable=False,
            violation="not_office",
        )
    stem = PurePosixPath(rel).stem
    folder = f"build/{THUMBNAIL_DIR}/{rel}"  # one folder per source: deck.pptx and deck.docx do not collide
    convert = job.run_command(
        ["soffice", "--headless", "--convert-to", "pdf", "--outdir", folder, f"build/{rel}"],
        timeout_s=timeout_s,
    )
    if not convert.ok:
        return Thumbnail(source=rel, steps=[convert], reason=f"LibreOffice could not convert it: {convert.reason}")
    render = job.run_command(
        ["pdftoppm", "-png", "-r", str(dpi), "-f", "1", "-l", "1", "-singlefile", f"{folder}/{stem}.pdf",
         f"{folder}/{stem}"],
        timeout_s=timeout_s,
    )
    if not render.ok:
        return Thumbnail(source=rel, steps=[convert, render], reason=f"pdftoppm failed: {render.reason}")
    return Thumbnail(source=rel, png=f"{THUMBNAIL_DIR}/{rel}/{stem}.png", steps=[convert, render])
