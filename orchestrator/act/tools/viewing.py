"""view_image: the model looks at a PNG or JPEG from build/, or at a whole document rendered in the sandbox.

A ``.pptx``, ``.docx``, ``.xlsx`` or ``.pdf`` is rendered once per content (``act.contact_sheets.render_once``:
LibreOffice -> PDF -> a numbered contact sheet of every page) and the sheet is shown; ``page`` shows one page large.
The tool checks the picture (:mod:`orchestrator.llm.image_input`) and answers with its size; the image itself follows
in a user message right after the tool results (``ToolOutcome.image``), since Chat Completions takes images there.
At most ``disclosure.images_max`` images per Act are sent, and renderings count against ``qa.thumbnail_max_files``.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field

from orchestrator.act.context import ActContext
from orchestrator.act.renders import OverCap, render_once
from orchestrator.act.tools._base import ToolArgs, ToolOutcome, fail, tool, violation
from orchestrator.errors import PathEscapeError, SandboxError
from orchestrator.llm.image_input import ImageLimits, ImageRefused, check_image
from orchestrator.prompts import render_prompt, tool_text
from orchestrator.sandbox.protocol import clean_build_path
from orchestrator.sandbox.thumbnails import Thumbnail, is_renderable, page_image

MAX_PAGE = 10_000


class ViewImageArgs(ToolArgs):
    path: str = Field(
        description=tool_text("view_image.path"),
        validation_alias=AliasChoices("path", "image", "file"),
    )
    page: int | None = Field(None, ge=1, le=MAX_PAGE, description=tool_text("view_image.page"))


@tool()
def view_image(ctx: ActContext, args: ViewImageArgs) -> ToolOutcome:
    try:
        rel = clean_build_path(args.path)
    except PathEscapeError as e:
        return violation(str(e), f"image outside build/: {args.path}")
    except ValueError as e:
        return fail(str(e))
    disclosure = ctx.deps.settings.disclosure
    if ctx.state.images_viewed >= disclosure.images_max:
        return fail(render_prompt("errors/images_were_already_shown", images_max=disclosure.images_max))
    rendered: Thumbnail | None = None
    if is_renderable(rel):
        try:
            rendered = _render(ctx, rel, args.page)
        except OverCap:
            return fail(render_prompt("errors/render_cap", cap=ctx.deps.settings.qa.thumbnail_max_files))
        except (FileNotFoundError, SandboxError) as e:
            return fail(render_prompt("errors/cannot_render", rel=rel, error=e))
        picture = (rendered.png if args.page else rendered.sheet) if rendered.ok else None
        if picture is None:
            return fail(render_prompt("errors/cannot_render", rel=rel, error=rendered.reason))
        rel = picture
    limits = ImageLimits(max_bytes=disclosure.image_max_bytes, max_side_px=disclosure.image_max_side_px)
    try:
        data = ctx.deps.build.read_file(rel, max_bytes=limits.max_bytes + 1)
        image = check_image(f"build/{rel}", data, limits)
    except (FileNotFoundError, SandboxError) as e:
        return fail(render_prompt("errors/cannot_view_build", rel=rel, error=e))
    except ImageRefused as e:
        return fail(str(e))
    ctx.state.images_viewed += 1
    shown = {"path": image.path, "mime": image.mime, "width": image.width, "height": image.height,
             "bytes": len(image.data), "note": render_prompt("notes/image_follows")}
    if rendered is not None:
        shown |= {"rendered_from": f"build/{rendered.source}", "pages": rendered.pages}
    return ToolOutcome(ok=True, data=shown, image=image)


def _render(ctx: ActContext, rel: str, page: int | None) -> Thumbnail:
    sha = next((f.sha256 for f in ctx.deps.build.list_files() if f.path == rel), None)
    if sha is None:
        raise FileNotFoundError(f"no such file: build/{rel}")
    sheet = render_once(ctx, rel, sha)
    if page is None or not sheet.ok:
        return sheet
    if sheet.pages is not None and page > sheet.pages:
        return Thumbnail(source=rel, reason=f"page {page} does not exist (it has {sheet.pages})")
    return page_image(ctx.deps.build, rel, page, timeout_s=ctx.deps.settings.sandbox.timeout_cap_s, convert=False)

