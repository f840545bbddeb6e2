"""Rendering a document of ``build/`` once per content for this Act, under the per-Act cap.

Shared by ``view_image`` (the model looks at a deck while it works) and the outputs' thumbnails, so a deck the model
already looked at is not converted again when the Act ends.
"""

from __future__ import annotations

from orchestrator.act.context import ActContext
from orchestrator.sandbox.thumbnails import Thumbnail, office_thumbnail


class OverCap(Exception):
    """This Act already rendered ``qa.thumbnail_max_files`` files."""


def render_once(ctx: ActContext, source: str, sha: str) -> Thumbnail:
    """The rendering of ``build/source`` with content ``sha``: made now, or the one made earlier in this Act.

    Raises :class:`OverCap` past the per-Act cap and :class:`SandboxError` when there is no sandbox to render in.
    """
    qa = ctx.deps.settings.qa
    key = f"{sha}:{source}"
    earlier = ctx.state.renders.get(key)
    if earlier is not None and earlier.ok and (earlier.page_pngs or not qa.thumbnail_pages):
        return earlier
    if ctx.state.renders_made >= qa.thumbnail_max_files:
        raise OverCap(f"{qa.thumbnail_max_files} files were already rendered in this Act (qa.thumbnail_max_files)")
    ctx.state.renders_made += 1
    # a render counts against the Act's time budget: it gets what is left of it (and never more than the cap)
    left_s = max(1.0, ctx.state.clock.left_s())
    thumbnail = office_thumbnail(ctx.deps.build, source, timeout_s=min(ctx.deps.settings.sandbox.timeout_cap_s, left_s),
                                 max_pages=qa.thumbnail_max_pages, keep_pages=qa.thumbnail_pages)
    ctx.state.renders[key] = thumbnail
    return thumbnail
