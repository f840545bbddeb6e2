"""Tar archives in and out of a job's ``build/`` (put_archive / get_archive through the holder container).

Archives coming out of a container are untrusted: only regular files and folders are taken, member names must be
relative without ``..`` and UTF-8, nothing on the host side is ever followed through a symlink, and the host reads
at most the job's disk limit (file sizes as declared in the archive, checked before their data is read) and a bounded
number of raw bytes, whatever the in-container check saw.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from orchestrator.errors import PathEscapeError, SandboxError, SandboxErrorCode
from orchestrator.sandbox.limits import escape_controls, has_controls
from orchestrator.sandbox.models import BuildFile

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Go's os.FileMode type bits (dir, symlink, device, pipe, socket, char device, irregular) as reported in the
# X-Docker-Container-Path-Stat header of get_archive: a regular file has none of them.
GO_MODE_NOT_REGULAR = (1 << 31) | (1 << 27) | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)


# Room for tar headers on top of the file data: a build/ tmpfs holds at most ~100 entries per MiB (see
# limits.inode_limit), each costing a few 512-byte header blocks.
HEADER_ALLOWANCE_PER_MB = 100 * 3 * 1024
HEADER_ALLOWANCE_MIN = 4 * 1024 * 1024


class OverLimit(Exception):
    """The archive holds more than the job's disk limit; ``path`` is the member that crossed it (None: raw bytes)."""

    def __init__(self, path: str | None, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


@dataclass
class Budget:
    """How much of an archive the host accepts: ``limit`` bytes of file data and ``raw_limit`` bytes in all.

    Names that cannot be reported (not UTF-8) are dropped and described in ``violations``.
    """

    limit: int
    used: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def raw_limit(self) -> int:
        return self.limit + max(HEADER_ALLOWANCE_MIN, (self.limit // (1024 * 1024) + 1) * HEADER_ALLOWANCE_PER_MB)

    def take(self, rel: str, size: int) -> None:
        if size < 0 or self.used + size > self.limit:
            raise OverLimit(
                rel,
                f"disk_limit: build/ holds more than the {self.limit} bytes allowed "
                f"(build/{rel} declares {size} bytes after {self.used}); the host stopped reading",
            )
        self.used += size


def unlimited() -> Budget:
    return Budget(limit=1 << 62)


class ChunkReader(io.RawIOBase):
    """A read-only file object over an iterator of byte chunks (the body of ``get_archive``), at most ``max_bytes``.

    Past ``max_bytes`` it raises :class:`OverLimit`: the rest of the stream is never received.
    """

    def __init__(self, chunks: Iterable[bytes], max_bytes: int | None = None) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""
        self._left = max_bytes

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        target = memoryview(buffer).cast("B")
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
            if self._left is not None:
                self._left -= len(self._buffer)
                if self._left < 0:
                    raise OverLimit(None, "disk_limit: the archive of build/ is larger than allowed; the host "
                                          "stopped reading")
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def file_archive(rel_path: str, data: bytes, uid: int) -> bytes:
    """A tar holding ``rel_path`` (and its parent folders), owned by the sandbox user."""
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        parents = PurePosixPath(rel_path).parents
        for parent in reversed(list(parents)[:-1]):
            info = tarfile.TarInfo(parent.as_posix())
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, 0o755, uid, uid, now
            tar.addfile(info)
        info = tarfile.TarInfo(rel_path)
        info.size, info.mode, info.uid, info.gid, info.mtime = len(data), 0o644, uid, uid, now
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def member_path(name: str) -> str | None:
    """The member's path relative to ``build/`` (the archive's first component), or None for the root itself.

    Raises :class:`PathEscapeError` for absolute names or ``..`` components.
    """
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        raise PathEscapeError(f"archive member {name!r} leaves build/", where="sandbox:export", path=name)
    parts = [p for p in pure.parts if p not in (".", "")]
    return "/".join(parts[1:]) or None


def iter_regular_files(tar: tarfile.TarFile, budget: Budget) -> Iterator[tuple[str, tarfile.TarInfo]]:
    """(path relative to build/, member) for every regular file; links, devices and fifos are skipped.

    A name that is not UTF-8 or holds control characters is dropped (named in ``budget.violations``, escaped); a
    file whose declared size does not fit in what is left of the budget raises :class:`OverLimit` before its data
    is read.
    """
    for member in tar:
        rel = member_path(member.name)
        if rel is None or not member.isreg():
            continue
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            shown = rel.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            budget.violations.append(f"disk_limit: dropped build/{shown} (name is not UTF-8)")
            continue
        if has_controls(rel):
            shown = escape_controls(rel)
            budget.violations.append(f"disk_limit: dropped build/{shown} (name holds control characters)")
            continue
        budget.take(rel, member.size)
        yield rel, member


def open_stream(chunks: Iterable[bytes], budget: Budget) -> tarfile.TarFile:
    reader = ChunkReader(chunks, budget.raw_limit)
    return tarfile.open(fileobj=io.BufferedReader(reader), mode="r|", encoding="utf-8", errors="surrogateescape")


def list_archive(chunks: Iterable[bytes], budget: Budget | None = None) -> list[BuildFile]:
    budget = budget or unlimited()
    files: list[BuildFile] = []
    with open_stream(chunks, budget) as tar:
        for rel, member in iter_regular_files(tar, budget):
            digest = hashlib.sha256()
            source = tar.extractfile(member)
            assert source is not None
            while block := source.read(1024 * 1024):
                digest.update(block)
            files.append(BuildFile(path=rel, size=member.size, sha256=digest.hexdigest()))
    return sorted(files, key=lambda f: f.path)


def extract_archive(chunks: Iterable[bytes], dest: Path, budget: Budget | None = None) -> list[BuildFile]:
    """Write the regular files of a ``build/`` archive under ``dest``; never through an existing symlink."""
    budget = budget or unlimited()
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    files: list[BuildFile] = []
    with open_stream(chunks, budget) as tar:
        for rel, member in iter_regular_files(tar, budget):
            target = root.joinpath(*rel.split("/"))
            _make_parents(root, target)
            source = tar.extractfile(member)
            assert source is not None
            digest = hashlib.sha256()
            # O_NOFOLLOW: a symlink already at the target (planted or left over) is refused, not written through.
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            except OSError as e:
                raise _unsafe(target, e) from e
            try:
                with os.fdopen(fd, "wb") as out:
                    while block := source.read(1024 * 1024):
                        digest.update(block)
                        out.write(block)
            except OverLimit:
                target.unlink(missing_ok=True)  # never leave a half-written file behind
                raise
            files.append(BuildFile(path=rel, size=member.size, sha256=digest.hexdigest()))
    return sorted(files, key=lambda f: f.path)


def _make_parents(root: Path, target: Path) -> None:
    current = root
    for part in target.relative_to(root).parts[:-1]:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            raise _unsafe(current, "it is a symlink or a file")
        current.mkdir(exist_ok=True)


def _unsafe(path: Path, why: object) -> SandboxError:
    return SandboxError(
        f"cannot export into {path}: {why}",
        where="sandbox:export",
        next_step="export into an empty folder",
        retryable=False,
        code=SandboxErrorCode.UNSAFE_DESTINATION,
    )


def read_single_file(chunks: Iterable[bytes], max_bytes: int) -> bytes:
    """The content of the one regular file in an archive made by ``get_archive`` of a file path."""
    with open_stream(chunks, Budget(limit=max_bytes)) as tar:
        for member in tar:
            if not member.isreg():
                break
            if member.size > max_bytes:
                raise SandboxError(
                    f"file is {member.size} bytes, more than the {max_bytes} allowed",
                    where="sandbox:read_file",
                    retryable=False,
                    code=SandboxErrorCode.TOO_LARGE,
                )
            source = tar.extractfile(member)
            assert source is not None
            return source.read()
    raise SandboxError(
        "not a regular file", where="sandbox:read_file", retryable=False, code=SandboxErrorCode.NOT_A_FILE
    )


def stat_is_regular(path_stat: dict[str, object]) -> bool:
    mode = int(str(path_stat.get("mode", 0)))
    return not mode & GO_MODE_NOT_REGULAR


# Run by ``python3 -I`` (isolated: no skill folder on sys.path, no PYTHON* variables) from ``/`` inside the holder
# after every script call. A tmpfs counts only the blocks a file really uses, so a sparse file (``truncate -s 1T``)
# fits under the size limit yet would be copied out at its full apparent size; a name that is not UTF-8 cannot be
# reported, nor passed on when it holds control characters (a newline or an escape sequence would forge lines on
# a terminal); a folder a script made unreadable would hide its files from this walk (everything in build/ belongs
# to the sandbox user, so its mode is restored first). Such files are removed and named in the report (escaped), and
# when the apparent sizes add up past the limit the files past it are removed too. Hard links count once.
PRUNE_SCRIPT = r"""
import json, os, re, stat, sys
root, limit = sys.argv[1], int(sys.argv[2])
removed, kept, seen, total = [], [], set(), 0
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
def shown(path):
    text = os.fsencode(os.path.relpath(path, root)).decode("utf-8", "backslashreplace")
    return CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()), text)
def drop(path, why):
    try:
        os.unlink(path)
    except OSError as e:
        why += " (could not remove: %s)" % e.strerror
    removed.append({"path": shown(path), "why": why})
def unlisted(error):
    removed.append({"path": shown(error.filename or root), "why": "folder cannot be listed: %s" % error.strerror})
for folder, dirs, files in os.walk(root, onerror=unlisted):
    for name in dirs:
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o700 != 0o700:
                os.chmod(path, st.st_mode | 0o700)
        except OSError:
            pass
    for name in files:
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        try:
            rel = os.fsencode(os.path.relpath(path, root)).decode("utf-8")
        except UnicodeDecodeError:
            drop(path, "name is not UTF-8")
            continue
        if CONTROL.search(rel):
            drop(path, "name holds control characters")
            continue
        if st.st_size > limit:
            drop(path, "apparent size %d bytes exceeds the %d-byte disk limit" % (st.st_size, limit))
        elif st.st_size > st.st_blocks * 512 + 65536:
            drop(path, "sparse file: %d bytes apparent, %d allocated" % (st.st_size, st.st_blocks * 512))
        elif (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            kept.append((path, st.st_size))
for path, size in kept:
    if total + size > limit:
        drop(path, "build/ adds up to more than the %d-byte disk limit" % limit)
    else:
        total += size
print(json.dumps({"removed": removed, "apparent_bytes": total}))
"""
