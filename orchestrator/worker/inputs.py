"""A goal line's input files: read on the producer's machine, carried as blobs, written into the job's own folder.

``submit`` reads each file named by a line *on the producer's machine* — regular files only: no folders, FIFOs,
sockets or devices, and nothing on a kernel pseudo-filesystem (``/proc``, ``/sys``, ``/dev``: ``/proc/self/environ``
is a "regular file" of size 0 that holds the submitter's secrets) — within per-file and per-job caps, and hands the
bytes to the job through Redis (:mod:`orchestrator.worker.blobs`). The ledger keeps only each input's name, size and
sha256. A worker writes the blobs into the job's own ``received/`` folder under its cache folder; it never opens a
path a goal line names, so a producer and a worker that share no filesystem work the same.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import ConfigError, WorkflowError
from orchestrator.worker.blobs import BlobStore

PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs", "cgroup", "cgroup2", "configfs",
    "pstore", "bpf", "efivarfs", "fusectl", "hugetlbfs", "mqueue", "binfmt_misc", "autofs", "rpc_pipefs", "nsfs",
})
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
_NAME = re.compile(r"^[^\x00-\x1f\x7f/\\]{1,255}$")


class InputRef(BaseModel):
    """One input as the ledger keeps it: the file's name (as the skills see it, ``/inputs/NAME``), size, hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[^\x00-\x1f\x7f/\\]{1,255}$")
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def read_input(item: str, *, max_bytes: int) -> tuple[str, bytes]:
    """``(name, bytes)`` of the input file ``item`` on this machine, or a :class:`ConfigError` saying why not."""
    path = Path(item)
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as e:
        raise ConfigError(f"inputs: file not found: {item}") from e
    name = path.name if _NAME.match(path.name) and path.name not in (".", "..") else resolved.name
    if not _NAME.match(name) or name.startswith("."):
        raise ConfigError(f"inputs: {item}: the file name cannot name an input (control characters or hidden)")
    if (fstype := pseudo_filesystem(resolved)) is not None:
        raise ConfigError(f"inputs: {item} is on the kernel's {fstype} filesystem, not a file of yours")
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ConfigError(f"inputs: cannot read {item}: {e.strerror or e}") from e
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"inputs: {item} is not a regular file (a folder, FIFO, socket or device)")
        if info.st_size > max_bytes:
            raise ConfigError(f"inputs: {item} is {info.st_size} bytes, over the cap of {max_bytes} per file")
        data = _read_at_most(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ConfigError(f"inputs: {item} holds more than the cap of {max_bytes} bytes per file")
    return name, data


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def pseudo_filesystem(path: Path) -> str | None:
    """The kernel pseudo-filesystem ``path`` lies on (``proc``, ``sysfs``, …), or None for a real one."""
    text = str(path)
    mounts = _mounts()
    best: tuple[str, str] | None = None
    for point, fstype in mounts:
        if (text == point or text.startswith(point.rstrip("/") + "/")) and (best is None or len(point) > len(best[0])):
            best = (point, fstype)
    if best is not None and best[1] in PSEUDO_FILESYSTEMS:
        return best[1]
    for root in PSEUDO_ROOTS:  # when the mount table cannot be read, or a pseudo root is bound elsewhere
        if text == root or text.startswith(root + "/"):
            return root.lstrip("/")
    return None


def _mounts() -> list[tuple[str, str]]:
    """(mount point, filesystem type) of this process' mounts, from ``/proc/self/mountinfo``."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        kinds = right.split()
        if len(fields) >= 5 and kinds:
            point = fields[4].encode().decode("unicode_escape", errors="replace")
            found.append((point, kinds[0]))
    return found


def gather_inputs(items: list[str], *, file_max_bytes: int, job_max_bytes: int) -> tuple[list[InputRef], list[bytes]]:
    """Read every input of one goal line: their refs and bytes, or a :class:`ConfigError` for the first bad one."""
    refs: list[InputRef] = []
    blobs: list[bytes] = []
    total = 0
    for item in items:
        name, data = read_input(item, max_bytes=file_max_bytes)
        if any(ref.name == name for ref in refs):
            raise ConfigError(f"inputs: two inputs are named {name} (skills see them as /inputs/NAME)")
        total += len(data)
        if total > job_max_bytes:
            raise ConfigError(f"inputs: together over the cap of {job_max_bytes} bytes per goal line")
        refs.append(InputRef(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
        blobs.append(data)
    return refs, blobs


def materialise(refs: list[InputRef], store: BlobStore, folder: Path) -> list[Path]:
    """Write each input's blob into ``folder`` (the job's own, created owner-only) and return the files' paths.

    Raises :class:`WorkflowError` when a blob is gone (expired) or not what its hash says: the job fails saying so.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths = []
    for ref in refs:
        data = store.get(ref.sha256)
        if data is None or len(data) != ref.size:
            raise WorkflowError(
                f"input {ref.name} ({ref.sha256[:12]}…) is no longer in Redis or does not match its hash",
                where="inputs",
                next_step="submit the goal line again (inputs expire after ORCH_JOB_INPUTS__TTL_S)",
            )
        target = folder / ref.name
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        paths.append(target)
    return paths
