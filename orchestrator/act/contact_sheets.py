"""The whole document in view: contact sheets of the Office files (and PDFs) an Act makes, in the sandbox.

:func:`render_once` renders a file of ``build/`` once per content (LibreOffice -> PDF -> a numbered contact sheet of
every page, page 1 alone); ``view_image`` uses it to show the model a deck while it works, and
:func:`add_thumbnails` once the outputs validated (a failed Act costs no conversion), reusing what ``view_image``
already rendered. Renders per Act are capped by ``qa.thumbnail_max_files`` (both uses count). The sheets land in
``build/.thumbnails/<file>/``, are exported with the other files and are listed in the artifact catalog as type
``thumbnail`` with the file they show. A conversion that fails never fails the Act: the catalog simply has no
thumbnail for that file, and the step record says why.
"""

from __future__ import annotations

import time
from pathlib import Path

from orchestrator.act.act_io import StepRecord
from orchestrator.act.context import ActContext
from orchestrator.act.evidence import log_step
from orchestrator.act.memo import canonical_digest
from orchestrator.act.renders import OverCap, render_once
from orchestrator.errors import SandboxError
from orchestrator.logs import get_logger
from orchestrator.sandbox.thumbnails import THUMBNAIL_DIR, Thumbnail, is_renderable

OFFICE_SUFFIXES = (".pptx", ".docx", ".xlsx")
THUMBNAIL_SUFFIXES = (*OFFICE_SUFFIXES, ".pdf")  # a PDF only when the finish names it (not an intermediate one)
_log = get_logger("orchestrator.act")


def add_thumbnails(ctx: ActContext, out_dir: Path) -> dict[str, str]:
    """Render each ``.pptx``/``.docx``/``.xlsx``/``.pdf`` output; returns ``{picture path: source path}``.

    The outputs are the files the model's finish named, or every Office file in ``build/`` when it named none.
    """
    deps = ctx.deps
    qa = deps.settings.qa
    if not qa.thumbnails:
        return {}
    files = deps.build.list_files()
    named = ctx.state.final_outputs
    sources = sorted(
        f.path
        for f in files
        if f.path.lower().endswith(THUMBNAIL_SUFFIXES if named else OFFICE_SUFFIXES) and is_renderable(f.path)
        and not f.path.startswith(f"{THUMBNAIL_DIR}/")
        and (not named or f.path in named)
    )
    made: dict[str, str] = {}
    shas = {f.path: f.sha256 for f in files}
    for source in sources:
        key = canonical_digest("thumbnail", deps.identity, shas[source], source, qa.thumbnail_max_pages,
                               qa.thumbnail_pages)
        if (restored := _restore(ctx, key, source)) is not None:
            made.update(dict.fromkeys(restored, source))
            continue
        started = time.monotonic()
        try:
            thumbnail = render_once(ctx, source, shas[source])
        except OverCap as e:
            log_step(ctx, StepRecord(step=ctx.state.step, kind="tool", tool="thumbnail", ok=False, error=str(e),
                                     reason_short=f"no thumbnail of {source}"))
            continue
        except SandboxError as e:  # no sandbox (a host build/), or the engine failed: no thumbnails, not a failure
            _log.info("act.thumbnail_skipped", skill=deps.request.skill_id, file=source, why=str(e))
            return made
        _record(ctx, thumbnail, started)
        pictures = [p for p in (thumbnail.sheet, thumbnail.png, *thumbnail.page_pngs) if p]
        if thumbnail.ok:
            made.update(dict.fromkeys(pictures, source))
            folder = f"{THUMBNAIL_DIR}/{source}/"  # the pictures and the PDF they came from, restored together
            made_files = {f.path: f.sha256 for f in deps.build.list_files() if f.path.startswith(folder)}
            if all(p in made_files for p in pictures):
                ctx.state.new_replays[key] = ({"thumbnails": pictures}, made_files)
    if made:
        deps.build.export(out_dir)
    return made


def _record(ctx: ActContext, thumbnail: Thumbnail, started: float) -> None:
    last = thumbnail.steps[-1] if thumbnail.steps else None
    log_step(ctx, StepRecord(
        step=ctx.state.step,
        kind="tool",
        tool="thumbnail",
        reason_short=f"thumbnail of {thumbnail.source}" + (f" ({thumbnail.pages} pages)" if thumbnail.pages else ""),
        ok=thumbnail.ok,
        error=thumbnail.reason,
        ms=int((time.monotonic() - started) * 1000),
        file_ids=[f"build/{p}" for p in (thumbnail.sheet, thumbnail.png) if p],
        container={"cmd": " ".join(last.command), "exit_code": last.exit_code, "container": last.container,
                   "elapsed_ms": sum(s.duration_ms for s in thumbnail.steps)} if last else None,
    ))


def _restore(ctx: ActContext, key: str, source: str) -> list[str] | None:
    """The pictures an earlier validated run made of the same file, written back without a container."""
    replay = ctx.deps.prior.attempts.get(key)
    pictures = replay.result.get("thumbnails") if replay is not None else None
    if replay is None or ctx.deps.store is None or not isinstance(pictures, list):
        return None
    if not pictures or not all(isinstance(p, str) and p in replay.outputs for p in pictures):
        return None
    blobs = {path: ctx.deps.store.get_blob(sha) for path, sha in replay.outputs.items()}
    if any(blob is None for blob in blobs.values()):
        return None
    for path, blob in blobs.items():
        assert blob is not None
        ctx.deps.build.write_file(path, blob)
    log_step(ctx, StepRecord(step=ctx.state.step, kind="tool", tool="thumbnail", memo_hit=True,
                             reason_short=f"thumbnail of {source} (from an earlier run)",
                             file_ids=[f"build/{path}" for path in blobs]))
    return [str(p) for p in pictures]
