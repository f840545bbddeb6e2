"""Tools that change build/ in place or fill it from elsewhere: edit_file (one exact replacement), copy_file.

Both write only under ``build/`` through the build area (the sandbox job's size-limited volume), and read only
from ``build/``, the goal's inputs or the skill folder, each confined on its own. A skill script is never copied:
its copy could be read back, and script source never reaches the model.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field

from orchestrator.act.context import ActContext
from orchestrator.act.tools._base import ToolArgs, ToolOutcome, fail, is_script, tool, violation
from orchestrator.act.tools.producing import store_in_build
from orchestrator.act.tools.reading import input_path, reading_path
from orchestrator.errors import PathEscapeError, SandboxError, SkillError
from orchestrator.prompts import render_prompt, tool_text
from orchestrator.sandbox.protocol import clean_build_path

EDIT_MAX_BYTES = 10 * 1024 * 1024
COPY_MAX_BYTES = 50 * 1024 * 1024
_SHOWN_LINES = 8


class EditFileArgs(ToolArgs):
    path: str = Field(description=tool_text("edit_file.path"))
    old: str = Field(description=tool_text("edit_file.old"))
    new: str = Field(description=tool_text("edit_file.new"))


@tool()
def edit_file(ctx: ActContext, args: EditFileArgs) -> ToolOutcome:
    if not args.path.strip().replace("\\", "/").startswith("build/"):
        return fail(
            render_prompt("errors/edit_file_changes_files_under", path=repr(args.path)),
        )
    try:
        rel = clean_build_path(args.path)
    except PathEscapeError as e:
        return violation(str(e), f"edit outside build/: {args.path}")
    except ValueError as e:
        return fail(str(e))
    if not args.old:
        return fail(render_prompt("errors/old_empty_give_exact"))
    try:
        data = ctx.deps.build.read_file(rel, max_bytes=EDIT_MAX_BYTES + 1)
    except (FileNotFoundError, SandboxError) as e:
        return fail(render_prompt("errors/cannot_edit_build", rel=rel, error=e))
    if len(data) > EDIT_MAX_BYTES:
        return fail(render_prompt("errors/build_over_bytes_edit_file", rel=rel, edit_max_bytes=EDIT_MAX_BYTES))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return fail(render_prompt("errors/build_not_utf_8", rel=rel))
    count = text.count(args.old)
    if count != 1:
        return fail(_match_error(rel, text, args.old, count), matches=count)
    at_line = text[: text.index(args.old)].count("\n") + 1
    stored = store_in_build(ctx, rel, text.replace(args.old, args.new, 1).encode("utf-8"),
                            full_hint="notes/build_full_write")
    if isinstance(stored, ToolOutcome):
        return stored
    shown = {"path": "", "line": at_line, **stored.data()}  # the path first, then the line (as the model reads it)
    return ToolOutcome(ok=True, data=shown, changed_files=stored.changed_files)


def _match_error(rel: str, text: str, old: str, count: int) -> str:
    if count == 0:
        return (
            f"old text not found in build/{rel}; nothing was changed. read_file it and copy the text exactly "
            "(spaces, quotes and line breaks count)"
        )
    lines: list[int] = []
    start = 0
    while len(lines) < _SHOWN_LINES and (found := text.find(old, start)) >= 0:
        lines.append(text[:found].count("\n") + 1)
        start = found + 1
    more = ", ..." if count > len(lines) else ""
    return (
        f"old text occurs {count} times in build/{rel} (lines {', '.join(map(str, lines))}{more}); nothing was "
        "changed. Include more of the surrounding text so that it occurs exactly once"
    )


class CopyFileArgs(ToolArgs):
    src: str = Field(
        description=tool_text("copy_file.src"),
        validation_alias=AliasChoices("src", "source", "from"),
    )
    dest: str = Field(
        description=tool_text("copy_file.dest"),
        validation_alias=AliasChoices("dest", "destination", "to"),
    )


@tool()
def copy_file(ctx: ActContext, args: CopyFileArgs) -> ToolOutcome:
    src = reading_path(ctx, args.src).replace("\\", "/").removeprefix("./")
    try:
        rel = clean_build_path(args.dest)
    except PathEscapeError as e:
        return violation(str(e), f"copy outside build/: {args.dest}")
    except ValueError as e:
        return fail(str(e))
    if src.startswith("build/"):
        return fail(render_prompt("errors/copy_file_copies_goal_input"))
    if not src.startswith("inputs/") and is_script(ctx, src):
        return fail(
            render_prompt("errors/refused_skill_script_scripts", src=src)
        )
    try:
        data = _read_source(ctx, src)
    except PathEscapeError as e:
        return violation(str(e), f"copy from outside the skill and inputs: {src}")
    except (SkillError, OSError) as e:
        return fail(render_prompt("errors/cannot_copy", src=src, detail=getattr(e, 'message', None) or e))
    if data is None:
        return fail(render_prompt("errors/cannot_copy_it_over", src=src, copy_max_bytes=COPY_MAX_BYTES))
    stored = store_in_build(ctx, rel, data, full_hint="notes/build_full_copy")
    if isinstance(stored, ToolOutcome):
        return stored
    return ToolOutcome(ok=True, data={"src": src, **stored.data()}, changed_files=stored.changed_files)


def _read_source(ctx: ActContext, src: str) -> bytes | None:
    """The bytes of a goal input or a skill file (each confined to its own folder), None when too large."""
    deps = ctx.deps
    path = input_path(ctx, src) if src.startswith("inputs/") else deps.library.resolve(deps.request.skill_id, src)
    if not path.is_file():
        raise FileNotFoundError(f"{src} is not a file")
    with path.open("rb") as fh:
        data = fh.read(COPY_MAX_BYTES + 1)
    return None if len(data) > COPY_MAX_BYTES else data
