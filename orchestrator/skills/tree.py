"""One hash of a whole skill folder: every entry's path, kind, executable bit and bytes (symlinks by their target).

Stored work (a replayed script run, a document summary, a semantic verdict) is reused only when the skill folder
that made it is identical, so this hash covers *every* file a script could import or read, not just the one that
was run: two libraries sharing ids and an entry script but differing in one helper module hash differently.

Hashing reads every byte, so the result is remembered per process while nothing in the folder changes. "Nothing
changed" is judged by each entry's inode, size, mode and modification *and* status-change times; the status-change
time cannot be set back by a user, so a file rewritten in place with its old mtime is still noticed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

_CHUNK = 1 << 20
_Signature = tuple[tuple[str, int, int, int, int, int], ...]
_MEMO: dict[str, tuple[_Signature, str]] = {}
_MEMO_MAX = 4096  # a library of a few thousand skills stays remembered
_LOCK = threading.Lock()


def tree_hash(root: Path) -> str:
    """sha256 over everything under ``root`` (``root`` itself excluded: moving a folder keeps its hash)."""
    root = Path(root)
    entries = _walk(root)
    signature: _Signature = tuple((rel, *_stat_key(st)) for rel, st in entries)
    key = str(root.resolve())
    with _LOCK:
        known = _MEMO.get(key)
    if known is not None and known[0] == signature:
        return known[1]
    digest = hashlib.sha256(b"orchestrator-tree-v1\0")
    for rel, st in entries:
        _add_entry(digest, root, rel, st)
    value = digest.hexdigest()
    with _LOCK:
        while len(_MEMO) >= _MEMO_MAX:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = (signature, value)
    return value


def _walk(root: Path) -> list[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every entry under ``root``, sorted; symlinks are listed, never followed."""
    found: list[tuple[str, os.stat_result]] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        folder = root / rel_dir if rel_dir else root
        try:
            names = os.listdir(folder)
        except OSError as e:  # an unreadable folder still counts, as what it is
            found.append((f"{rel_dir}/\0unreadable:{e.errno}", os.lstat(folder)))
            continue
        for name in names:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                st = os.lstat(folder / name)
            except OSError:
                continue  # vanished meanwhile
            found.append((rel, st))
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)
    found.sort(key=lambda item: item[0].encode("utf-8", errors="surrogateescape"))
    return found


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _add_entry(digest: hashlib._Hash, root: Path, rel: str, st: os.stat_result) -> None:
    name = rel.encode("utf-8", errors="surrogateescape")
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        digest.update(b"D\0" + name + b"\0")
    elif stat.S_ISLNK(mode):
        target = os.readlink(root / rel)
        digest.update(b"L\0" + name + b"\0" + os.fsencode(target) + b"\0")
    elif stat.S_ISREG(mode):
        executable = b"x" if mode & 0o111 else b"-"
        digest.update(b"F\0" + name + b"\0" + executable + b"\0" + str(st.st_size).encode() + b"\0")
        _add_bytes(digest, root / rel)
    else:  # a FIFO, socket or device: never opened, counted by kind
        digest.update(b"S\0" + name + b"\0" + str(stat.S_IFMT(mode)).encode() + b"\0")


def _add_bytes(digest: hashlib._Hash, path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        digest.update(f"\0unreadable:{e.errno}\0".encode())
        return
    try:
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
    finally:
        os.close(fd)
    digest.update(b"\0")
