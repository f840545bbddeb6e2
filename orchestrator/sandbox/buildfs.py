"""Tar archives in and out of a job's ``build/`` (put_archive / get_archive through the holder container).

Archives coming out of a container are untrusted: only regular files and folders are taken, member names must be
relative without ``..``, and nothing on the host side is ever followed through a symlink.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from orchestrator.errors import PathEscapeError, SandboxError, SandboxErrorCode
from orchestrator.sandbox.models import BuildFile

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Go's os.FileMode type bits (dir, symlink, device, pipe, socket, char device, irregular) as reported in the
# X-Docker-Container-Path-Stat header of get_archive: a regular file has none of them.
GO_MODE_NOT_REGULAR = (1 << 31) | (1 << 27) | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)


class ChunkReader(io.RawIOBase):
    """A read-only file object over an iterator of byte chunks (the body of ``get_archive``)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        target = memoryview(buffer).cast("B")
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
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


def iter_regular_files(tar: tarfile.TarFile) -> Iterator[tuple[str, tarfile.TarInfo]]:
    """(path relative to build/, member) for every regular file; links, devices and fifos are skipped."""
    for member in tar:
        rel = member_path(member.name)
        if rel is not None and member.isreg():
            yield rel, member


def list_archive(chunks: Iterable[bytes]) -> list[BuildFile]:
    files: list[BuildFile] = []
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(chunks)), mode="r|") as tar:
        for rel, member in iter_regular_files(tar):
            digest = hashlib.sha256()
            source = tar.extractfile(member)
            assert source is not None
            while block := source.read(1024 * 1024):
                digest.update(block)
            files.append(BuildFile(path=rel, size=member.size, sha256=digest.hexdigest()))
    return sorted(files, key=lambda f: f.path)


def extract_archive(chunks: Iterable[bytes], dest: Path) -> list[BuildFile]:
    """Write the regular files of a ``build/`` archive under ``dest``; never through an existing symlink."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    files: list[BuildFile] = []
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(chunks)), mode="r|") as tar:
        for rel, member in iter_regular_files(tar):
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
            with os.fdopen(fd, "wb") as out:
                while block := source.read(1024 * 1024):
                    digest.update(block)
                    out.write(block)
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
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(chunks)), mode="r|") as tar:
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


# Run by python3 inside the holder after every script call. A tmpfs counts only the blocks a file really uses, so a
# sparse file (``truncate -s 1T``) fits under the size limit yet would be copied out at its full apparent size; and a
# name that is not UTF-8 cannot be reported. Such files are removed and named in the report (as repr()).
PRUNE_SCRIPT = r"""
import json, os, sys
root, limit = sys.argv[1], int(sys.argv[2])
removed, total = [], 0
for folder, dirs, files in os.walk(root):
    for name in files:
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        why = None
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            why = "name is not UTF-8"
        if st.st_size > limit:
            why = "apparent size %d bytes exceeds the %d-byte disk limit" % (st.st_size, limit)
        elif st.st_size > st.st_blocks * 512 + 65536:
            why = "sparse file: %d bytes apparent, %d allocated" % (st.st_size, st.st_blocks * 512)
        if why is None:
            total += st.st_size
            continue
        os.unlink(path)
        removed.append({"path": repr(os.path.relpath(path, root))[1:-1], "why": why})
print(json.dumps({"removed": removed, "apparent_bytes": total}))
"""
