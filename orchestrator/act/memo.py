"""AttemptMemo (same action + same inputs → remembered outcome) and the small on-disk store behind it.

The store lives under ``cache_dir`` and is keyed by content hashes only, never by a skill id or a path: each skill
*version* has its own file, named by its work identity — the hash of every file of the skill folder and the id of
the sandbox image (:func:`work_identity`). Two libraries sharing ids and an entry script but differing in one helper
file, or a skill update touching only a helper, never see each other's entries. It keeps, per skill version:

* ``attempts``: successful script runs (script hash + args + build/input state → result and the files it wrote,
  the file bodies kept as content-addressed blobs) so an identical later run can be replayed without a container;
* ``digests``: documents read during a validated run, by content hash, with their summary — a later run is sent the
  summary of unchanged documents instead of the full text (the model can still ask for the full text);
* ``verdicts``: semantic verdicts by (model, prompt, expectations, the skills' identities, artifact hashes), so
  identical outputs of identical skills are not judged twice (:func:`verdict_key`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def canonical_digest(*parts: Any) -> str:
    """A stable sha256 over JSON-serialisable parts (dict keys sorted)."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def work_identity(skill_tree: str, image_id: str) -> str:
    """What a skill's stored work depends on besides its call: the skill folder's tree hash and the image id."""
    return canonical_digest("work", skill_tree, image_id)


def verdict_key(
    model: str, model_settings: Any, prompt: str, expected: Any, skill_trees: Any, files: Any
) -> str:
    """The key of a stored semantic verdict: everything the model's judgement was made from."""
    return canonical_digest("verdict", model, model_settings, prompt, expected, skill_trees, files)


class MemoEntry(BaseModel):
    step: int
    tool: str
    ok: bool
    content: dict[str, Any]
    reason: str | None = None


class AttemptMemo:
    """In-run memo: the same action with the same inputs hash returns the earlier outcome instead of running again."""

    def __init__(self) -> None:
        self._entries: dict[str, MemoEntry] = {}

    def get(self, key: str) -> MemoEntry | None:
        return self._entries.get(key)

    def put(self, key: str, entry: MemoEntry) -> None:
        self._entries[key] = entry


class ScriptReplay(BaseModel):
    result: dict[str, Any]
    outputs: dict[str, str]
    """build/ path → sha256 of the file the script wrote (bodies are blobs in the store)."""


class SkillMemoFile(BaseModel):
    attempts: dict[str, ScriptReplay] = {}
    digests: dict[str, str] = {}
    """``sha256`` of a document read in a validated run → its summary."""


class MemoStore:
    """The on-disk part. Every write is atomic (temp file + rename) so concurrent workers never see half a file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()

    def _skill_file(self, identity: str) -> Path:
        if len(identity) != 64 or any(c not in "0123456789abcdef" for c in identity):
            raise ValueError("a memo file is named by a work identity (a sha256), never by an id or a path")
        return self.root / "memo" / f"{identity}.json"

    def load(self, identity: str) -> SkillMemoFile:
        """What validated runs of the skill version ``identity`` (:func:`work_identity`) left behind."""
        path = self._skill_file(identity)
        try:
            return SkillMemoFile.model_validate_json(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return SkillMemoFile()

    def save(self, identity: str, memo: SkillMemoFile) -> None:
        with self._lock:
            self._atomic_write(self._skill_file(identity), memo.model_dump_json(indent=1).encode("utf-8"))

    def get_verdict(self, key: str) -> dict[str, Any] | None:
        """A stored semantic verdict for ``key`` (:func:`verdict_key`), or None."""
        path = self.root / "verdicts" / f"{key}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def put_verdict(self, key: str, verdict: dict[str, Any]) -> None:
        self._atomic_write(self.root / "verdicts" / f"{key}.json", json.dumps(verdict).encode("utf-8"))

    def put_blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / "blobs" / digest[:2] / digest
        if not path.exists():
            self._atomic_write(path, data)
        return digest

    def get_blob(self, digest: str) -> bytes | None:
        path = self.root / "blobs" / digest[:2] / digest
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return data if hashlib.sha256(data).hexdigest() == digest else None

    @staticmethod
    def _atomic_write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
