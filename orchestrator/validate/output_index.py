"""The artifacts index: every file under the output root with its size, kind, sha256 and a short text preview.

Walking never follows a symlink out of the boundary: a link pointing outside is reported, not read. Directory
symlinks are not descended into (their target, when inside, is indexed under its real path).
"""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
from pathlib import Path

from pydantic import BaseModel

from orchestrator.validate.report import PREVIEW_CHARS, FileEntry, Violation
from orchestrator.validate.rules import TEXT_KINDS, kind_of_extension

_SNIFF_BYTES = 4096
# Enough bytes for 400 characters of any UTF-8 text (at most 4 bytes per character).
_PREVIEW_BYTES = PREVIEW_CHARS * 4
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"%PDF-", "pdf"),
)


class Scan(BaseModel):
    entries: list[FileEntry] = []
    problems: list[Violation] = []
    root_exists: bool = True


def artifacts_index(out_dir: Path, output_root: str = ".") -> list[FileEntry]:
    """Every regular file under ``out_dir/output_root`` (sorted by path); links pointing out are left out."""
    return scan_outputs(out_dir, output_root).entries


def scan_outputs(
    out_dir: Path, output_root: str = ".", *, boundary: Path | None = None, hash_files: bool = True
) -> Scan:
    """Index the files under ``out_dir/output_root``.

    Symlinks leaving ``boundary`` (the output root by default), dangling links and special files are
    reported as boundary problems and left out of the index.
    """
    base = resolve_or_none(out_dir)
    if base is None or not base.is_dir():
        return Scan(root_exists=False)
    root = resolve_or_none(base / output_root)
    if root is None or not root.is_relative_to(base):
        return Scan(
            problems=[_boundary(f"output root {output_root} resolves outside {out_dir} (to {root})")],
            root_exists=False,
        )
    limit = (boundary or root).resolve()
    if limit == root:
        shown_root = f"the output root {output_root if output_root != '.' else out_dir}"
    else:
        shown_root = f"the output folder {out_dir}"
    if not root.is_dir():
        return Scan(root_exists=False)
    scan = Scan()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        current = Path(dirpath)
        for name in sorted(dirnames):
            link = current / name
            if link.is_symlink():
                problem = _link_problem(link, _rel(link, base), limit, shown_root)
                if problem is not None:
                    scan.problems.append(problem)
        for name in sorted(filenames):
            entry_or_problem = _inspect_file(current / name, base, limit, shown_root, hash_files)
            if isinstance(entry_or_problem, FileEntry):
                scan.entries.append(entry_or_problem)
            elif entry_or_problem is not None:
                scan.problems.append(entry_or_problem)
    scan.entries.sort(key=lambda e: e.path)
    return scan


def _inspect_file(
    path: Path, base: Path, limit: Path, shown_root: str, hash_files: bool
) -> FileEntry | Violation | None:
    rel = _rel(path, base)
    if path.is_symlink():
        problem = _link_problem(path, rel, limit, shown_root)
        if problem is not None:
            return problem
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return None if stat.S_ISDIR(info.st_mode) else _boundary(f"{rel} is not a regular file")
        return build_entry(path, rel, info.st_size, hash_files=hash_files)
    except OSError as e:
        return _boundary(f"{rel} cannot be read: {e.strerror or e}")


def _link_problem(link: Path, rel: str, limit: Path, shown_root: str) -> Violation | None:
    """Why the symlink ``link`` may not be followed (a loop, outside ``limit``, dangling), or ``None``."""
    target = resolve_or_none(link)
    if target is None:
        return _boundary(f"{rel} is a symlink loop")
    if not target.is_relative_to(limit):
        return _boundary(f"{rel} is a symlink pointing outside {shown_root} (to {target})")
    if not target.exists():
        return _boundary(f"{rel} is a dangling symlink (to {target})")
    return None


def resolve_or_none(path: Path) -> Path | None:
    """``path`` with every symlink resolved, or ``None`` for a symlink loop."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError for a loop, 3.13 OSError(ELOOP)
        return None


def build_entry(path: Path, rel: str, size: int, *, hash_files: bool = True) -> FileEntry:
    """The index entry of one regular file (``rel`` is its path relative to the validated folder)."""
    with path.open("rb") as fh:
        head = fh.read(max(_SNIFF_BYTES, _PREVIEW_BYTES))
    kind = kind_of_extension(rel) or _sniff(head)
    preview = _preview(head) if kind in TEXT_KINDS else None
    return FileEntry(
        name=path.name,
        path=rel,
        size=size,
        kind=kind,
        sha256=sha256_of(path) if hash_files else "",
        preview=preview,
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def _sniff(head: bytes) -> str:
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if b"\x00" in head:
        return "binary"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        # A multi-byte character cut by the read limit at the very end is still text.
        if e.start < len(head) - 3:
            return "binary"
    return "text"


def _preview(head: bytes) -> str:
    # An incremental decoder holds back a character cut by the read limit instead of showing U+FFFD for it.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return decoder.decode(head[:_PREVIEW_BYTES], final=False)[:PREVIEW_CHARS]


def _rel(path: Path, base: Path) -> str:
    return path.relative_to(base).as_posix()


def _boundary(message: str) -> Violation:
    return Violation(category="boundary", message=message)
