"""Pictures of Office files and PDFs in ``build/``: every page on one contact sheet, or one page on request.

LibreOffice turns the document into a PDF, then the image's ``render_pages.py`` (pypdfium2 and Pillow) draws the
pages: a numbered contact sheet of the first ``max_pages`` pages, page 1 on its own, and every page when asked.
Each step is an ordinary ``run_command`` of the job (a fresh container, the same limits), so the conversion of a
hostile document is as contained as any script; the renderer scales every page to a fixed size whatever the PDF
claims. Everything lands in ``build/.thumbnails/<file>/`` (``<stem>.pdf``, ``contact.png``, ``<stem>.png``,
``page-N.png``), out of the way of the skill's own outputs.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import PathEscapeError, SandboxRefused
from orchestrator.sandbox.limits import safe_build_path
from orchestrator.sandbox.models import ScriptResult
from orchestrator.sandbox.protocol import SandboxJobArea

OFFICE_SUFFIXES = frozenset({".pptx", ".docx", ".xlsx", ".ppt", ".doc", ".xls", ".odp", ".odt", ".ods"})
RENDERABLE_SUFFIXES = OFFICE_SUFFIXES | {".pdf"}
THUMBNAIL_DIR = ".thumbnails"
CONTACT_SHEET = "contact.png"
RENDERER = "/opt/sandbox/render_pages.py"  # shipped in the sandbox image (sandbox-image/render_pages.py)
CELL_PX = 400
PAGE_PX = 1280


class Thumbnail(BaseModel):
    """The outcome of one rendering: what was written under ``build/`` when it worked, and the calls as evidence."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(..., description="the rendered file, relative to build/")
    png: str | None = Field(None, description="page 1 (or the page asked for), relative to build/; None on failure")
    sheet: str | None = Field(None, description="the contact sheet of every page, relative to build/")
    pages: int | None = Field(None, description="pages in the document")
    page_pngs: list[str] = Field(default_factory=list, description="one PNG per page, when asked for")
    steps: list[ScriptResult] = Field(default_factory=list)
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.png is not None


def is_renderable(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in RENDERABLE_SUFFIXES


def thumbnail_folder(rel: str) -> str:
    """``build/.thumbnails/<rel>``: one folder per source, so deck.pptx and deck.docx do not collide."""
    return f"build/{THUMBNAIL_DIR}/{rel}"


def office_thumbnail(
    job: SandboxJobArea, rel_path: str, *, timeout_s: float = 60, max_pages: int = 24, keep_pages: bool = False,
) -> Thumbnail:
    """Render ``build/rel_path``: a contact sheet of its pages and page 1 as ``<stem>.png`` (every page too with
    ``keep_pages``), in ``build/.thumbnails/<rel_path>/``.

    ``timeout_s`` applies to each step and is capped like any call. Raises :class:`SandboxRefused` for a path that
    is not an Office file or PDF inside ``build/``; a conversion that fails is a :class:`Thumbnail` without ``png``.
    """
    rel = _checked(rel_path)
    stem = PurePosixPath(rel).stem
    folder = thumbnail_folder(rel)
    pdf, steps, reason = _pdf(job, rel, folder, timeout_s)
    if pdf is None:
        return Thumbnail(source=rel, steps=steps, reason=reason)
    argv = ["python3", "-I", RENDERER, pdf, folder, "--sheet", CONTACT_SHEET, "--first", f"{stem}.png",
            "--max-pages", str(max(1, max_pages)), "--cell", str(CELL_PX)]
    render = job.run_command([*argv, "--keep-pages"] if keep_pages else argv, timeout_s=timeout_s)
    steps.append(render)
    out = render.stdout_json if isinstance(render.stdout_json, dict) else {}
    if not render.ok or not out.get("ok"):
        why = out.get("error") or render.reason
        return Thumbnail(source=rel, steps=steps, reason=f"the pages could not be drawn: {why}")
    written = [str(name) for name in out.get("files", []) if isinstance(name, str)]
    return Thumbnail(
        source=rel,
        png=f"{THUMBNAIL_DIR}/{rel}/{stem}.png",
        sheet=f"{THUMBNAIL_DIR}/{rel}/{CONTACT_SHEET}",
        pages=out.get("pages") if isinstance(out.get("pages"), int) else None,
        page_pngs=[f"{THUMBNAIL_DIR}/{rel}/{name}" for name in written if name.startswith("page-")],
        steps=steps,
    )


def page_image(
    job: SandboxJobArea, rel_path: str, page: int, *, timeout_s: float = 60, convert: bool = True
) -> Thumbnail:
    """Render page ``page`` (1-based) of ``build/rel_path`` at ``PAGE_PX`` as ``.thumbnails/<rel_path>/page-N.png``.

    ``convert=False`` draws from the PDF an earlier :func:`office_thumbnail` of the same file left in its folder.
    """
    rel = _checked(rel_path)
    folder = thumbnail_folder(rel)
    if convert or rel.lower().endswith(".pdf"):
        pdf, steps, reason = _pdf(job, rel, folder, timeout_s)
    else:
        pdf, steps, reason = f"{folder}/{PurePosixPath(rel).stem}.pdf", [], ""
    if pdf is None:
        return Thumbnail(source=rel, steps=steps, reason=reason)
    render = job.run_command(["python3", "-I", RENDERER, pdf, folder, "--page", str(page), "--size", str(PAGE_PX)],
                             timeout_s=timeout_s)
    steps.append(render)
    out = render.stdout_json if isinstance(render.stdout_json, dict) else {}
    if not render.ok or not out.get("ok"):
        return Thumbnail(source=rel, steps=steps, reason=str(out.get("error") or render.reason))
    return Thumbnail(source=rel, png=f"{THUMBNAIL_DIR}/{rel}/page-{page}.png",
                     pages=out.get("pages") if isinstance(out.get("pages"), int) else None, steps=steps)


def _checked(rel_path: str) -> str:
    try:
        rel = safe_build_path(rel_path)
    except PathEscapeError as e:
        raise SandboxRefused(e.message, where="sandbox:thumbnail", retryable=False, violation="path_escape") from e
    if not is_renderable(rel):
        raise SandboxRefused(
            f"{rel_path!r} is not an Office file or a PDF ({', '.join(sorted(RENDERABLE_SUFFIXES))})",
            where="sandbox:thumbnail",
            retryable=False,
            violation="not_office",
        )
    return rel


def _pdf(job: SandboxJobArea, rel: str, folder: str, timeout_s: float) -> tuple[str | None, list[ScriptResult], str]:
    """The PDF to draw: the file itself, or LibreOffice's conversion of it into ``folder``."""
    if rel.lower().endswith(".pdf"):
        return f"build/{rel}", [], ""
    convert = job.run_command(
        ["soffice", "--headless", "--convert-to", "pdf", "--outdir", folder, f"build/{rel}"], timeout_s=timeout_s
    )
    if not convert.ok:
        return None, [convert], f"LibreOffice could not convert it: {convert.reason}"
    return f"{folder}/{PurePosixPath(rel).stem}.pdf", [convert], ""
