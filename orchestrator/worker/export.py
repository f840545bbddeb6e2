"""A job's output files handed to the producer through Redis (the worker side of ``jobs ID --download``).

Any worker can serve it: the output root is shared by all workers. Files are read without following symlinks,
only from inside the job's output folder, and within size caps, so a download cannot become a way to read other
files of the host or to fill Redis."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

from orchestrator.config import Settings
from orchestrator.worker.blobs import BlobStore
from orchestrator.worker.jobfiles import job_out_dir
from orchestrator.worker.records import JobRecord

MAX_FILE_BYTES = 100 * 1024 * 1024
MAX_TOTAL_BYTES = 300 * 1024 * 1024
MAX_FILES = 2000
BLOB_TTL_S = 3600


def export_files(client: redis.Redis, settings: Settings, record: JobRecord) -> dict[str, Any]:
    """``{"out_dir", "files": [{"path", "size", "sha256"}], "skipped": [{"path", "reason"}]}``."""
    folder = job_out_dir(settings, record)
    blobs = BlobStore(client, max_bytes=MAX_FILE_BYTES, ttl_s=BLOB_TTL_S)
    files: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for rel, data, reason in read_job_files(folder):
        if data is None:
            skipped.append({"path": rel, "reason": reason})
        else:
            files.append({"path": rel, "size": len(data), "sha256": blobs.put(data)})
    return {"out_dir": str(folder), "files": files, "skipped": skipped}


def read_job_files(folder: Path) -> Iterator[tuple[str, bytes | None, str]]:
    """``(relative path, bytes, "")`` for each regular file of a job's output folder within the caps, and
    ``(relative path, None, reason)`` for each left out (links, special files, over a cap, unreadable)."""
    total = 0
    count = 0
    if not folder.is_dir():
        yield ".", None, "no output folder"
        return
    root = folder.resolve()
    for path in _walk(folder):
        rel = path.relative_to(folder).as_posix()
        if not path.parent.resolve().is_relative_to(root):
            yield rel, None, "outside the job's folder"
            continue
        try:
            info = path.lstat()
        except OSError as e:
            yield rel, None, f"unreadable: {e.strerror}"
            continue
        if stat.S_ISDIR(info.st_mode):
            continue
        reason = _refusal(info, total, count)
        if reason:
            yield rel, None, reason
            continue
        data = _read_no_follow(path)
        if data is None or total + len(data) > MAX_TOTAL_BYTES:
            yield rel, None, "changed or unreadable while reading"
            continue
        total += len(data)
        count += 1
        yield rel, data, ""


def _walk(folder: Path) -> list[Path]:
    """Every entry under ``folder``, sorted; linked folders are listed, never entered."""
    found = []
    for parent, dirs, names in os.walk(folder, followlinks=False):
        found += [Path(parent) / name for name in dirs + names]
    return sorted(found)


def _refusal(info: os.stat_result, total: int, count: int) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link (not followed)"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES} bytes"
    if total + info.st_size > MAX_TOTAL_BYTES or count >= MAX_FILES:
        return f"over the download's cap ({MAX_TOTAL_BYTES} bytes, {MAX_FILES} files)"
    return None


def _read_no_follow(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
