"""The output folder belongs to the user: checks before a goal starts, and publishing that never follows a link.

A goal writes only the files it produced. Each lands by writing a temporary file in the same folder and renaming it
over the name, so a symlink or a file already at that name is replaced as a directory entry, never written
through; a folder on the way that is a symlink (or a file) is refused. What the goal itself produced is mirrored in
its job folder, and only that mirror is listed, validated and shown to the model: files that were already in the
output folder, or that another goal writes there meanwhile, are never read.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from orchestrator.errors import WorkflowError


def check_input_files(paths: Sequence[Path]) -> None:
    """Refuse a goal input that is not an existing file, before any work starts."""
    for path in paths:
        if not path.is_file():
            what = "is a folder, not a file" if path.is_dir() else "not found"
            raise WorkflowError(
                f"input file {path}: {what}",
                where="inputs",
                next_step="pass existing files with --input PATH (repeat it for several files)",
            )


def check_output_dir(out_dir: Path) -> None:
    """Refuse an output folder that is not a folder or cannot be written, without creating anything in it."""
    probe = out_dir
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        probe = probe.parent  # the nearest existing folder is where the first folder would be created
    why = None
    if out_dir.exists() and not out_dir.is_dir():
        why = "it is not a folder"
    elif not probe.is_dir():
        why = f"{probe} is not a folder"
    else:
        why = _not_writable(probe)
    if why is not None:
        raise WorkflowError(
            f"cannot use {out_dir} as the output folder: {why}",
            where="output",
            next_step="pass --out DIR naming a folder you can write (it is created when missing)",
        )


def _not_writable(folder: Path) -> str | None:
    """Why no file can be created in ``folder`` (tried for real: permissions, read-only mounts, root), or None."""
    try:
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".orch-probe-")
    except OSError as e:
        return f"{folder} is not writable ({e.strerror or e})"
    os.close(fd)
    with suppress(OSError):
        os.unlink(temp)
    return None


def check_zip_target(dest: Path) -> None:
    """Refuse a ``--zip`` target that cannot be written, before any work starts."""
    parent = dest.parent
    why = None
    if dest.is_dir():
        why = "it is a folder"
    elif not parent.is_dir():
        why = f"its folder {parent} does not exist"
    else:
        why = _not_writable(parent)
    if why is not None:
        raise WorkflowError(
            f"cannot write the ZIP bundle {dest}: {why}",
            where="output",
            next_step="pass --zip FILE in an existing folder you can write",
        )


def publish_file(source: Path, root: Path, rel: str) -> str | None:
    """Place ``source`` at ``root/rel`` without following any link; a note when an existing file was replaced.

    Raises :class:`WorkflowError` when a folder on the way is a symlink or a file, or the name is a folder.
    """
    parts = rel.split("/")
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        try:
            info = folder.lstat()
        except FileNotFoundError:
            folder.mkdir()
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise _refused(root, rel, f"{folder} is a symlink or a file")
    target = folder / parts[-1]
    note = None
    try:
        info = target.lstat()
        if stat.S_ISDIR(info.st_mode):
            raise _refused(root, rel, f"{target} is a folder")
        note = f"{target} already existed ({'a symlink' if stat.S_ISLNK(info.st_mode) else 'a file'}): replaced"
    except FileNotFoundError:
        pass
    atomic_copy(source, target)
    return note


def atomic_copy(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file in the same folder and a rename."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".orch-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise


def _refused(root: Path, rel: str, why: str) -> WorkflowError:
    return WorkflowError(
        f"not written to the output folder: {rel} ({why})",
        where="output",
        next_step=f"remove it from {root}, or pass another --out folder",
    )
