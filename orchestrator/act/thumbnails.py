"""Thumbnails of the Office files an Act produced: LibreOffice → PDF → PNG of page 1, in the sandbox.

They are made once the outputs validated (so a failed Act costs no conversion), land in ``build/.thumbnails/``, are
exported with the other files and are listed in the artifact catalog as type ``thumbnail`` with the file they show.
A conversion that fails never fails the Act: the catalog simply has no thumbnail for that file, and the step
record says why.
"""

from __future__ import annotations

import time
from pathlib import Path

from orchestrator.act.context import ActContext
from orchestrator.act.evidence import log_step
from orchestrator.act.memo import canonical_digest
from orchestrator.act.models import StepRecord
from orchestrator.errors import SandboxError
from orchestrator.logs import get_logger
from orchestrator.sandbox.thumbnails import THUMBNAIL_DIR, office_thumbnail

THUMBNAIL_SUFFIXES = (".pptx", ".docx", ".xlsx")
_log = get_logger("orchestrator.act")


def add_thumbnails(ctx: ActContext, out_dir: Path) -> dict[str, str]:
    """Make a thumbnail of each ``.pptx``/``.docx``/``.xlsx`` output; returns ``{thumbnail path: source path}``.

    The outputs are the files the model's finish named, or every Office file in ``build/`` when it named none.
    """
    deps = ctx.deps
    if not deps.settings.qa.thumbnails:
        return {}
    files = deps.build.list_files()
    sources = sorted(
        f.path
        for f in files
        if f.path.lower().endswith(THUMBNAIL_SUFFIXES)
        and not f.path.startswith(f"{THUMBNAIL_DIR}/")
        and (not ctx.state.final_outputs or f.path in ctx.state.final_outputs)
    )
    made: dict[str, str] = {}
    shas = {f.path: f.sha256 for f in files}
    for source in sources:
        key = canonical_digest("thumbnail", deps.identity, shas[source], source)
        if (restored := _restore(ctx, key, source)) is not None:
            made[restored] = source
            continue
        started = time.monotonic()
        try:
            thumbnail = office_thumbnail(deps.build, source, timeout_s=deps.settings.sandbox.timeout_cap_s)
        except SandboxError as e:  # no sandbox (a host build/), or the engine failed: no thumbnails, not a failure
            _log.info("act.thumbnail_skipped", skill=deps.request.skill_id, file=source, why=str(e))
            return made
        last = thumbnail.steps[-1] if thumbnail.steps else None
        log_step(ctx, StepRecord(
            step=ctx.state.step,
            kind="tool",
            tool="thumbnail",
            reason_short=f"thumbnail of {source}",
            ok=thumbnail.ok,
            error=thumbnail.reason,
            ms=int((time.monotonic() - started) * 1000),
            file_ids=[f"build/{thumbnail.png}"] if thumbnail.png else [],
            container={"cmd": " ".join(last.command), "exit_code": last.exit_code, "container": last.container,
                       "elapsed_ms": sum(s.duration_ms for s in thumbnail.steps)} if last else None,
        ))
        if thumbnail.png:
            made[thumbnail.png] = source
            folder = f"{THUMBNAIL_DIR}/{source}/"  # the PNG and the PDF it came from, restored together next time
            made_files = {f.path: f.sha256 for f in deps.build.list_files() if f.path.startswith(folder)}
            if thumbnail.png in made_files:
                ctx.state.new_replays[key] = ({"thumbnail": thumbnail.png}, made_files)
    if made:
        deps.build.export(out_dir)
    return made


def _restore(ctx: ActContext, key: str, source: str) -> str | None:
    """The thumbnail an earlier validated run made of the same file, written back without a container."""
    replay = ctx.deps.prior.attempts.get(key)
    png = replay.result.get("thumbnail") if replay is not None else None
    if replay is None or ctx.deps.store is None or not isinstance(png, str) or png not in replay.outputs:
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
    return png
