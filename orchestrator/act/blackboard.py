"""The blackboard: versioned artifacts (``act.<artifact>@vN``) and key/value notes shared along a goal's skills."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel


class ArtifactVersion(BaseModel):
    path: str
    version: int
    sha256: str
    size: int
    skill_id: str

    @property
    def label(self) -> str:
        return f"act.{self.path}@v{self.version}"


class Blackboard:
    """Shared by every Act of one goal, so the outputs and notes of skill A are visible to skill B."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._artifacts: dict[str, list[ArtifactVersion]] = {}

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._values[key] = value

    def get(self, key: str) -> tuple[bool, Any]:
        with self._lock:
            return (key in self._values, self._values.get(key))

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._values)

    def record_artifact(self, path: str, sha256: str, size: int, skill_id: str) -> tuple[ArtifactVersion, bool]:
        """Register content for ``path``; a new version only when the content changed. Returns (version, changed)."""
        with self._lock:
            versions = self._artifacts.setdefault(path, [])
            if versions and versions[-1].sha256 == sha256:
                return versions[-1], False
            version = ArtifactVersion(path=path, version=len(versions) + 1, sha256=sha256, size=size, skill_id=skill_id)
            versions.append(version)
            return version, True

    def latest(self, path: str) -> ArtifactVersion | None:
        with self._lock:
            versions = self._artifacts.get(path)
            return versions[-1] if versions else None

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> Blackboard:
        board = cls()
        board._values = dict(snapshot.get("values", {}))
        board._artifacts = {
            p: [ArtifactVersion.model_validate(v) for v in vs] for p, vs in snapshot.get("artifacts", {}).items()
        }
        return board

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "values": dict(self._values),
                "artifacts": {p: [v.model_dump() for v in vs] for p, vs in self._artifacts.items()},
            }
