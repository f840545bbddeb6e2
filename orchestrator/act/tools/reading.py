"""Tools that read: SKILL.md (L2), references and files (L3, deduplicated by content hash), summaries, diffs.

Script source is never returned: a script is described by its path, language, size and hash. Long text is sent
a page at a time (:mod:`orchestrator.act.paging`); each cut names the ``read_file``/``read_ref`` call for the rest.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import AliasChoices, Field

from orchestrator.act.context import ActContext
from orchestrator.act.paging import MAX_PAGE_CHARS, Page, cut_marker, next_call, page_of
from orchestrator.act.text import diff_texts, summarize_text
from orchestrator.act.tools._base import (
    Disclosure,
    RepeatedRead,
    ToolArgs,
    ToolOutcome,
    fail,
    is_script,
    tool,
    violation,
)
from orchestrator.errors import PathEscapeError, SandboxError, SkillError
from orchestrator.isolation import Bound, Bounded, run_bounded
from orchestrator.prompts import render_prompt, tool_text
from orchestrator.sandbox.protocol import BUILD_MOUNTS
from orchestrator.skills.frontmatter import SKILL_MD
from orchestrator.skills.read_cache import DEFAULT_MAX_BYTES
from orchestrator.tokens import estimate_tokens

READ_MAX_BYTES = DEFAULT_MAX_BYTES  # the part of one file the reading tools can page through
DIFF_MAX_CHARS = 200_000
"""Each side of a line-by-line diff at most (difflib is quadratic on unlike texts: two 100 KB files took 60 s)."""
DIFF_TIMEOUT_S = 10.0
DIFF_MEMORY_MB = 512
SUMMARY_MAX_CHARS = 2_000_000
"""The text ``summarize`` reads at most (it is linear; this only bounds the memory a summary may take)."""

# --- reading -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Window:
    """Which page a reading tool was asked for, and how the model asks for the next one."""

    tool: str  # "read_file" | "read_ref"
    offset: int = 0
    limit: int | None = None


def _send_text(
    ctx: ActContext, *, path: str, text: str, sha: str, level: Disclosure, full: bool, window: _Window
) -> ToolOutcome:
    """Send one page of ``text`` unless identical content was already sent (or digested in an earlier run)."""
    try:
        page = page_of(
            text, offset=window.offset, limit_chars=window.limit, max_tokens=ctx.deps.settings.disclosure.l3_max_tokens
        )
    except ValueError as e:
        return fail(render_prompt("errors/cannot_read", path=path, error=e), total_chars=len(text))
    whole = page.offset == 0 and page.next_offset is None
    key = sha if whole else f"{sha}@{page.offset}:{page.end}"
    if key in ctx.state.sent:
        return ToolOutcome(
            ok=True,
            data={
                "path": path,
                "sha256": sha,
                "unchanged": True,
                "note": render_prompt("notes/already_sent", step=ctx.state.sent[key]),
                **_paging_data(page, window, path),
            },
            effect=RepeatedRead(path),
        )
    summary = None if ctx.state.replaying else ctx.deps.prior.digests.get(sha)
    if summary is not None and not full and page.offset == 0:
        ctx.state.sent[sha] = ctx.state.step
        ctx.state.read_docs[sha] = summary
        return ToolOutcome(
            ok=True,
            data={
                "path": path,
                "sha256": sha,
                "summary": summary,
                "note": render_prompt("notes/digest_shown"),
            },
            disclosure=level,  # the first showing in this run: a read like any other, not a re-read
        )
    shown = page.text
    if page.next_offset is not None:
        shown += cut_marker(page, next_call(window.tool, path, page.next_offset, window.limit))
    ctx.state.sent[key] = ctx.state.step
    ctx.state.read_docs[sha] = summarize_text(text)
    return ToolOutcome(
        ok=True,
        data={"path": path, "sha256": sha, "text": shown, **_paging_data(page, window, path)},
        disclosure=level,
    )


def _paging_data(page: Page, window: _Window, path: str) -> dict[str, object]:
    if page.offset == 0 and page.next_offset is None:
        return {}
    data: dict[str, object] = {"offset": page.offset, "end": page.end, "total_chars": page.total}
    if page.next_offset is not None:
        data["next"] = next_call(window.tool, path, page.next_offset, window.limit)
    return data


def _script_card(ctx: ActContext, rel_path: str) -> ToolOutcome:
    path = ctx.deps.library.resolve(ctx.deps.request.skill_id, rel_path)
    data = path.read_bytes()
    return ToolOutcome(
        ok=True,
        data={
            "path": rel_path,
            "kind": "script",
            "language": {".py": "python", ".sh": "bash", ".js": "node"}.get(path.suffix.lower(), path.suffix),
            "bytes": len(data),
            "lines": data.count(b"\n") + 1,
            "sha256": hashlib.sha256(data).hexdigest(),
            "note": render_prompt("notes/script_card"),
        },
        disclosure="L3",
    )


def tool_path(path: str) -> str:
    """A path as the tools name it: the sandbox's own mounts (``/skill/…``, ``/inputs/…``, ``/build/…``), which
    scripts see and the model is told about, stand for the skill folder, ``inputs/`` and ``build/``."""
    path = path.strip()
    if path.startswith(SANDBOX_SKILL_ROOT):
        return path.removeprefix(SANDBOX_SKILL_ROOT) or SKILL_MD
    if path.startswith(SANDBOX_INPUTS):
        return "inputs/" + path.removeprefix(SANDBOX_INPUTS)
    if (mount := next((m for m in BUILD_MOUNTS if path.startswith(m)), None)) is not None:
        return "build/" + path.removeprefix(mount)
    return path


def reading_path(ctx: ActContext, path: str) -> str:
    """What a reading tool reads for ``path``, under every name the prompt gives a file: ``inputs/NAME`` and
    ``/inputs/NAME`` are the goal's inputs, ``build/…`` and ``/build/…`` the outputs, anything else the skill's
    file, except a bare name the skill has no file by that is one of the goal's inputs (``sales.csv``)."""
    path = tool_path(path)
    clean = path.replace("\\", "/").removeprefix("./")
    if clean.startswith(("build/", "inputs/")) or not clean or _is_skill_file(ctx, clean):
        return path
    root = ctx.deps.request.inputs_dir
    if root is not None and root.is_dir():
        try:
            named = input_path(ctx, "inputs/" + clean)
        except (PathEscapeError, FileNotFoundError, OSError, ValueError):
            return path
        if named.is_file():
            return "inputs/" + clean
    return path


def _read_skill_file(ctx: ActContext, rel_path: str, *, full: bool, window: _Window) -> ToolOutcome:
    rel_path = tool_path(rel_path)
    try:
        if is_script(ctx, rel_path):
            return _script_card(ctx, rel_path)
        if rel_path.strip().removeprefix("./") == SKILL_MD:
            # The body as L2 shows it, so the offset in L2's cut marker continues exactly where L2 stopped.
            body = ctx.deps.skill.body
            sha = hashlib.sha256(body.encode("utf-8", errors="surrogatepass")).hexdigest()
            return _send_text(ctx, path=SKILL_MD, text=body, sha=sha, level="L3", full=full, window=window)
        text, sha = ctx.deps.library.read_text(ctx.deps.request.skill_id, rel_path, max_bytes=READ_MAX_BYTES)
    except PathEscapeError as e:
        return violation(str(e), f"path escape: {rel_path}")
    except (SkillError, FileNotFoundError) as e:
        return _not_in_skill(ctx, rel_path, e, full=full, window=window)
    return _send_text(ctx, path=rel_path, text=text, sha=sha, level="L3", full=full, window=window)


SANDBOX_SKILL_ROOT = "/skill/"
SANDBOX_INPUTS = "/inputs/"


def _not_in_skill(ctx: ActContext, rel_path: str, error: Exception, *, full: bool, window: _Window) -> ToolOutcome:
    """A path that names no readable file of the skill. Only a reference the skill's own files make is the skill's
    missing reference; a path the model made up is its own mistake, answered with the nearest real files."""
    skill_id = ctx.deps.request.skill_id
    if ctx.deps.library.resolve(skill_id, rel_path).exists():  # binary, a folder, unreadable
        return fail(render_prompt("errors/cannot_read_2", rel_path=rel_path, error=error))
    meant = meant_path(ctx, rel_path)
    if meant is not None:  # the skill's id (or skills/<id>/) put in front of one of its files
        return _read_skill_file(ctx, meant, full=full, window=window)
    if written_in_skill(ctx, rel_path):
        if rel_path not in ctx.state.missing_refs:
            ctx.state.missing_refs.append(rel_path)
        return fail(
            render_prompt("errors/cannot_read_it_does", rel_path=rel_path),
            missing=rel_path,
            hint=render_prompt("notes/missing_reference"),
        )
    nearest = nearest_files(ctx, rel_path)
    return fail(render_prompt("errors/no_such_file_skill", rel_path=rel_path, nearest=nearest), nearest=nearest)


def written_in_skill(ctx: ActContext, rel_path: str) -> bool:
    """Whether the skill's own documents reference ``rel_path`` (as written or as resolved, case aside)."""
    wanted = {rel_path.strip().removeprefix("./").casefold(), rel_path.strip().casefold()}
    return any(
        not ref.exists and ({ref.ref.strip().removeprefix("./").casefold(), (ref.path or "").casefold()} & wanted)
        for ref in ctx.deps.skill.references
    )


def meant_path(ctx: ActContext, rel_path: str) -> str | None:
    """The skill's file a path means with the skill's id (or ``skills/<id>/``) put in front, if there is one."""
    path = rel_path.strip().removeprefix("./")
    skill_id = ctx.deps.request.skill_id
    for prefix in (f"skills/{skill_id}/", f"{skill_id}/", f"{skill_id.rsplit('/', 1)[-1]}/"):
        rest = path.removeprefix(prefix)
        if rest != path and rest and _is_skill_file(ctx, rest):
            return rest
    return None


def _is_skill_file(ctx: ActContext, rel_path: str) -> bool:
    try:
        return ctx.deps.library.resolve(ctx.deps.request.skill_id, rel_path).is_file()
    except (SkillError, PathEscapeError, OSError):
        return False


def nearest_files(ctx: ActContext, rel_path: str, limit: int = 8) -> list[str]:
    """The skill's files closest to a path that does not exist: the same name, similar paths, the same kind, then
    the rest (a small skill is listed whole)."""
    try:
        files = ctx.deps.library.glob(ctx.deps.request.skill_id, "**/*")[:2000]
    except (SkillError, PathEscapeError):
        return []
    name, suffix = PurePosixPath(rel_path).name.casefold(), PurePosixPath(rel_path).suffix.casefold()
    same_name = [f for f in files if PurePosixPath(f).name.casefold() == name]
    similar = difflib.get_close_matches(rel_path, files, n=limit, cutoff=0.4)
    same_kind = [f for f in files if PurePosixPath(f).suffix.casefold() == suffix]
    return list(dict.fromkeys([*same_name, *similar, *same_kind, *files]))[:limit]


class NoArgs(ToolArgs):
    pass


@tool()
def read_skill_md(ctx: ActContext, args: NoArgs) -> ToolOutcome:
    body = ctx.deps.library.l2(ctx.deps.request.skill_id)
    if body.sha256 in ctx.state.sent:
        return ToolOutcome(
            ok=True,
            data={"unchanged": True, "note": render_prompt("notes/skill_md_sent", step=ctx.state.sent[body.sha256])},
            effect=RepeatedRead(),
        )
    ctx.state.sent[body.sha256] = ctx.state.step
    return ToolOutcome(
        ok=True,
        data={"skill": ctx.deps.request.skill_id, "text": body.text, "truncated": body.truncated},
        disclosure="L2",
    )


class ReadRefArgs(ToolArgs):
    path: str = Field(
        description=tool_text("read_ref.path"), validation_alias=AliasChoices("path", "file", "file_path", "filename")
    )
    offset: int = Field(0, ge=0, description=tool_text("args.offset"))
    full: bool = Field(False, description=tool_text("read_ref.full"))


@tool()
def read_ref(ctx: ActContext, args: ReadRefArgs) -> ToolOutcome:
    path = reading_path(ctx, args.path)
    if path.startswith(("build/", "inputs/")):  # the goal's inputs and the outputs read as read_file reads them
        return read_file(ctx, ReadFileArgs(path=path, offset=args.offset))
    return _read_skill_file(ctx, path, full=args.full, window=_Window("read_ref", args.offset))


class ListFilesArgs(ToolArgs):
    glob: str = Field(
        "**/*",
        description=tool_text("list_files.glob"),
        validation_alias=AliasChoices("glob", "pattern"),
    )


@tool()
def list_files(ctx: ActContext, args: ListFilesArgs) -> ToolOutcome:
    pattern = args.glob.strip() or "**/*"
    if pattern.startswith("build/") or pattern == "build":
        files = [f"build/{f.path}" for f in ctx.deps.build.list_files()]
        return ToolOutcome(ok=True, data={"files": files[:500], "count": len(files)})
    if pattern.startswith("inputs/"):
        return ToolOutcome(ok=True, data={"files": input_files(ctx)})
    try:
        files = ctx.deps.library.glob(ctx.deps.request.skill_id, pattern)
    except PathEscapeError as e:
        return violation(str(e), f"path escape: {pattern}")
    return ToolOutcome(ok=True, data={"files": files[:500], "count": len(files), "inputs": input_files(ctx)})


def input_files(ctx: ActContext) -> list[str]:
    root = ctx.deps.request.inputs_dir
    if root is None or not root.is_dir():
        return []
    return sorted(f"inputs/{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file())


def input_path(ctx: ActContext, rel_path: str) -> Path:
    root = ctx.deps.request.inputs_dir
    inner = rel_path.split("/", 1)[1] if "/" in rel_path else ""
    if root is None or not inner:
        raise FileNotFoundError(rel_path)
    target = (root / inner).resolve()
    if not target.is_relative_to(root.resolve()):
        raise PathEscapeError(f"path leaves inputs/: {rel_path}", path=rel_path)
    return target


class ReadFileArgs(ToolArgs):
    path: str = Field(
        description=tool_text("read_file.path"), validation_alias=AliasChoices("path", "file", "file_path", "filename")
    )
    offset: int = Field(0, ge=0, description=tool_text("args.offset"))
    limit: int | None = Field(None, ge=1, le=MAX_PAGE_CHARS, description=tool_text("read_file.limit"))
    full: bool = False


@tool()
def read_file(ctx: ActContext, args: ReadFileArgs) -> ToolOutcome:
    path = reading_path(ctx, args.path)
    window = _Window("read_file", args.offset, args.limit)
    try:
        if path.startswith("build/"):
            data = ctx.deps.build.read_file(path, max_bytes=READ_MAX_BYTES + 1)
        elif path.startswith("inputs/"):
            with input_path(ctx, path).open("rb") as fh:
                data = fh.read(READ_MAX_BYTES + 1)
        else:
            return _read_skill_file(ctx, path, full=args.full, window=window)
    except PathEscapeError as e:
        return violation(str(e), f"path escape: {path}")
    except (FileNotFoundError, IsADirectoryError, SandboxError) as e:
        return fail(render_prompt("errors/cannot_read", path=path, error=e))
    sha = hashlib.sha256(data).hexdigest()
    if (script := skill_script_hashes(ctx).get(hashlib.sha256(data[:READ_MAX_BYTES]).hexdigest())) is not None:
        return fail(render_prompt("errors/copy_skill_script_script", path=path, script=script))
    cut = len(data) > READ_MAX_BYTES
    text = _utf8(data[:READ_MAX_BYTES], cut=cut)
    if text is None:
        return ToolOutcome(ok=True, data={"path": path, "binary": True, "bytes": len(data), "sha256": sha})
    if cut:
        text += "\n" + render_prompt("notes/read_file_cut", max_bytes=READ_MAX_BYTES) + "\n"
    return _send_text(ctx, path=path, text=text, sha=sha, level="L3", full=True, window=window)


def _utf8(data: bytes, *, cut: bool) -> str | None:
    """``data`` as UTF-8, or None when it is not text; a cut may end inside a character (up to 3 bytes)."""
    for drop in range(4 if cut else 1):
        try:
            return data[: len(data) - drop].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def skill_script_hashes(ctx: ActContext) -> dict[str, str]:
    """sha256 → path of every script of the skill (read once per Act): copies of them are never shown either."""
    if ctx.state.script_hashes is None:
        hashes: dict[str, str] = {}
        for rel in ctx.deps.library.glob(ctx.deps.request.skill_id, "**/*"):
            if is_script(ctx, rel):
                try:
                    data = ctx.deps.library.resolve(ctx.deps.request.skill_id, rel).read_bytes()
                except OSError:
                    continue
                hashes.setdefault(hashlib.sha256(data).hexdigest(), rel)
        ctx.state.script_hashes = hashes
    return ctx.state.script_hashes


# --- helpers -----------------------------------------------------------------------------------------------------


class SummarizeArgs(ToolArgs):
    text: str | None = None
    path: str | None = Field(
        None,
        description=tool_text("summarize.path"),
        validation_alias=AliasChoices("path", "file", "file_path", "filePath"),
    )
    max_items: int = Field(8, ge=1, le=40)


@tool()
def summarize(ctx: ActContext, args: SummarizeArgs) -> ToolOutcome:
    if (args.text is None) == (args.path is None):
        return fail(render_prompt("errors/give_exactly_one_text_2"))
    text = args.text
    if args.path is not None:
        if is_script(ctx, args.path):
            return _script_card(ctx, args.path)
        loaded = _load_text(ctx, args.path)
        if isinstance(loaded, ToolOutcome):
            return loaded
        text = loaded
    assert text is not None
    data: dict[str, object] = {}
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[:SUMMARY_MAX_CHARS]
        data["note"] = render_prompt("notes/summary_cut", cap=SUMMARY_MAX_CHARS)
    data.update(summary=summarize_text(text, max_items=args.max_items), tokens=estimate_tokens(text))
    return ToolOutcome(ok=True, data=data)


def _load_text(ctx: ActContext, path: str) -> str | ToolOutcome:
    path = reading_path(ctx, path)
    try:
        if path.startswith("build/"):
            return ctx.deps.build.read_file(path).decode("utf-8", errors="replace")
        if path.startswith("inputs/"):
            with input_path(ctx, path).open("rb") as fh:  # at most what the reading tools page through
                return fh.read(READ_MAX_BYTES).decode("utf-8", errors="replace")
        if is_script(ctx, path):
            return fail(render_prompt("errors/script_source_never_shown"))
        return ctx.deps.library.read_text(ctx.deps.request.skill_id, path)[0]
    except PathEscapeError as e:
        return violation(str(e), f"path escape: {path}")
    except (SkillError, FileNotFoundError, IsADirectoryError, SandboxError) as e:
        return fail(render_prompt("errors/cannot_read", path=path, error=e))


class DiffArgs(ToolArgs):
    a_path: str = Field(validation_alias=AliasChoices("a_path", "aPath", "a"))
    b_path: str = Field(validation_alias=AliasChoices("b_path", "bPath", "b"))


@tool()
def diff(ctx: ActContext, args: DiffArgs) -> ToolOutcome:
    a = _load_text(ctx, args.a_path)
    if isinstance(a, ToolOutcome):
        return a
    b = _load_text(ctx, args.b_path)
    if isinstance(b, ToolOutcome):
        return b
    if max(len(a), len(b)) > DIFF_MAX_CHARS:
        note = render_prompt("notes/diff_too_large", a_path=args.a_path, b_path=args.b_path, a_chars=len(a),
                             b_chars=len(b), cap=DIFF_MAX_CHARS)
        return ToolOutcome(ok=True, data={"identical": a == b, "too_large": True, "note": note})
    left_s = ctx.state.clock.left_s()
    if left_s == 0:
        return fail(render_prompt("errors/not_compared_act_s"))
    try:  # in a bounded child: stopped at its own limit or at the end of the Act's time budget, whichever is first
        data = run_bounded(diff_texts, a, b, args.a_path, args.b_path, memory_mb=DIFF_MEMORY_MB,
                           timeout_s=min(DIFF_TIMEOUT_S, left_s), what="the diff")
    except Bounded as e:
        why = e.detail if e.bound is Bound.ERROR else e.message
        return fail(render_prompt("errors/diff_failed", a_path=args.a_path, b_path=args.b_path, why=why))
    return ToolOutcome(ok=True, data=data)
