"""Confinement: every path a skill names is checked against its folder before anything is opened.

A relative path is joined to its base, normalised lexically (``..`` may not climb above the root), then
resolved with symlinks followed; the resolved path must still be inside the resolved root. Absolute paths
(POSIX, ``~``, Windows drive or UNC) are refused outright. Nothing outside the root is ever opened or reported
as existing.

A path that exists only under another letter case (``FORMS.md`` for ``forms.md``: skills written on macOS or
Windows) is found too, when exactly one name matches in each folder; the result says so (``case_differs``) and
names the file as it is spelled on disk, so callers can warn and the sandbox (case-sensitive) gets the real name.
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from orchestrator.errors import PathEscapeError

#: Folders never walked into (speed; they never hold skill content).
SKIP_DIRS: frozenset[str] = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox", ".mypy_cache", ".pytest_cache"}
)

_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


class Verdict(StrEnum):
    INSIDE = "inside"  # inside the root (it may or may not exist)
    ESCAPE = "escape"  # absolute, or '..' above the root
    SYMLINK_ESCAPE = "symlink_escape"  # lexically inside, but a symlink leads out
    INVALID = "invalid"  # NUL byte, empty, or a symlink loop


@dataclass(frozen=True)
class Located:
    """Where a path lands: ``rel`` is the normalised POSIX path under the root (None unless INSIDE)."""

    verdict: Verdict
    rel: str | None = None
    resolved: Path | None = None
    exists: bool = False
    is_dir: bool = False
    reason: str = ""
    case_differs: bool = False  # found only by ignoring letter case; ``rel`` is the spelling on disk


def display_text(name: str) -> str:
    """A file-system name as valid Unicode: bytes that are not UTF-8 (surrogate escapes) become U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def is_absolute_like(path: str) -> bool:
    return path.startswith(("/", "~")) or bool(_WINDOWS_ABSOLUTE.match(path))


def normalize_rel(path: str, base: str = ".") -> str | None:
    """``base``/``path`` normalised to a POSIX path relative to the root; None if it climbs out."""
    joined = posixpath.normpath(posixpath.join(base, path))
    if joined == ".." or joined.startswith("../"):
        return None
    return joined


def locate(root: Path, path: str, base: str = ".") -> Located:
    """Classify ``path`` (relative to ``base``, itself relative to ``root``) without opening anything.

    ``root`` must already be resolved. A name that exists on disk only in another Unicode normal form (NFC vs
    NFD) is found too.
    """
    if not path or "\0" in path:
        return Located(Verdict.INVALID, reason="empty path or NUL byte")
    if is_absolute_like(path):
        return Located(Verdict.ESCAPE, reason="absolute path")
    rel = normalize_rel(path, base)
    if rel is None:
        return Located(Verdict.ESCAPE, reason="'..' leaves the skill folder")
    located = _resolve(root, rel)
    if located.verdict is Verdict.INSIDE and located.exists and path.endswith("/") and not located.is_dir:
        # "file.md/" names a folder; on a regular file the kernel answers ENOTDIR, so it does not exist.
        return Located(Verdict.INSIDE, rel=located.rel, resolved=located.resolved, exists=False,
                       reason="a trailing '/' names a folder, but this is a file")
    if located.verdict is Verdict.INSIDE and not located.exists:
        for form in ("NFC", "NFD"):
            other = unicodedata.normalize(form, rel)
            if other != rel:
                alt = _resolve(root, other)
                if alt.verdict is not Verdict.INSIDE or alt.exists:
                    return alt
        folded = _case_insensitive(root, rel)
        if folded is not None and folded != rel:
            alt = _resolve(root, folded)
            if alt.verdict is not Verdict.INSIDE or alt.exists:
                return replace(alt, case_differs=alt.verdict is Verdict.INSIDE)
    return located


def _case_insensitive(root: Path, rel: str) -> str | None:
    """``rel`` spelled as on disk when each segment matches exactly one name ignoring case; else None.

    Each folder is listed only after it resolved inside ``root``, so no folder outside is ever listed.
    """
    parts: list[str] = []
    for segment in rel.split("/"):
        folder = root.joinpath(*parts)
        try:
            if not folder.resolve(strict=True).is_relative_to(root):
                return None
            with os.scandir(folder) as it:
                names = [e.name for e in it]
        except (OSError, RuntimeError):
            return None
        if segment in names:
            parts.append(segment)
            continue
        wanted = unicodedata.normalize("NFC", segment).casefold()
        matches = [n for n in names if unicodedata.normalize("NFC", display_text(n)).casefold() == wanted]
        if len(matches) != 1:
            return None  # none, or ambiguous (Forms.md and forms.md): never guess
        parts.append(matches[0])
    return "/".join(parts)


def _resolve(root: Path, rel: str) -> Located:
    candidate = root / rel
    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError):  # RuntimeError: symlink loop on Python 3.11/3.12
        return Located(Verdict.INVALID, reason="symlink loop")
    if not resolved.is_relative_to(root):
        return Located(Verdict.SYMLINK_ESCAPE, reason="a symlink leads outside the skill folder")
    try:
        is_dir = resolved.is_dir()
        exists = is_dir or resolved.exists()
    except OSError:
        is_dir = exists = False
    return Located(Verdict.INSIDE, rel=rel, resolved=resolved, exists=exists, is_dir=is_dir)


def confine(root: Path, path: str, *, where: str | None = None) -> Path:
    """The resolved absolute path of ``path`` under ``root``; raises :class:`PathEscapeError` if it leaves."""
    root = root.resolve()
    located = locate(root, path)
    if located.verdict is not Verdict.INSIDE or located.resolved is None:
        raise PathEscapeError(
            f"path {path!r} is refused: {located.reason or 'outside the skill folder'}",
            where=where,
            next_step="use a path relative to the skill folder that stays inside it",
            path=path,
            reason=located.verdict.value,
        )
    return located.resolved


def walk_files(root: Path, *, prune: frozenset[str] = frozenset(), limit: int = 20_000) -> Iterator[str]:
    """Relative POSIX paths of files under ``root`` (resolved), sorted per folder.

    Symlinked folders are never entered; a symlinked file is listed only when it resolves inside ``root``.
    ``prune`` holds relative folder paths not to enter (nested skills). Stops after ``limit`` files.
    """
    count = 0
    stack: list[str] = ["."]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[str] = []
        for entry in entries:
            if display_text(entry.name) != entry.name:
                continue  # not UTF-8: no document can name it, and it could not be reported as text
            rel = entry.name if rel_dir == "." else f"{rel_dir}/{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS and rel not in prune:
                        subdirs.append(rel)
                    continue
                if entry.is_symlink():
                    target = Path(entry.path).resolve(strict=False)
                    if not (target.is_relative_to(root) and target.is_file()):
                        continue
                elif not entry.is_file(follow_symlinks=False):
                    continue
            except (OSError, RuntimeError):
                continue
            yield rel
            count += 1
            if count >= limit:
                return
        stack.extend(reversed(subdirs))
