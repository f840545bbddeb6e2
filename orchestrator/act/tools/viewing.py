"""view_image: the model looks at a PNG or JPEG from build/ (a slide thumbnail, a rendered page).

The tool checks the file (see :mod:`orchestrator.act.images`) and answers with its size; the image itself follows
in a user message right after the tool results (``ToolOutcome.image``), since Chat Completions takes images there.
At most ``disclosure.images_max`` images per Act are sent.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field

from orchestrator.act.context import ActContext
from orchestrator.act.images import ImageLimits, ImageRefused, check_image
from orchestrator.act.tools._base import ToolArgs, ToolOutcome, fail, tool, violation
from orchestrator.act.workspace import clean_build_path
from orchestrator.errors import PathEscapeError, SandboxError
from orchestrator.prompts import render_prompt, tool_text


class ViewImageArgs(ToolArgs):
    path: str = Field(
        description=tool_text("view_image.path"),
        validation_alias=AliasChoices("path", "image", "file"),
    )


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
    limits = ImageLimits(max_bytes=disclosure.image_max_bytes, max_side_px=disclosure.image_max_side_px)
    try:
        data = ctx.deps.build.read_file(rel, max_bytes=limits.max_bytes + 1)
        image = check_image(f"build/{rel}", data, limits)
    except (FileNotFoundError, SandboxError) as e:
        return fail(render_prompt("errors/cannot_view_build", rel=rel, error=e))
    except ImageRefused as e:
        return fail(str(e))
    ctx.state.images_viewed += 1
    return ToolOutcome(
        ok=True,
        data={"path": image.path, "mime": image.mime, "width": image.width, "height": image.height,
              "bytes": len(image.data), "note": render_prompt("notes/image_follows")},
        image=image,
    )
