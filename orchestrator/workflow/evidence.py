"""The evidence file of a goal, ``result.json``, written the same by ``run`` and by workers: secrets and e-mail
addresses masked, folder ``0700``, file ``0600``, written whole and renamed into place.

``run`` keeps it in ``<cache>/jobs/<job_id>/``; a worker in its job's run folder (``worker.jobfiles.evidence_dir``).
"""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

from orchestrator.logs import dumps_safe, mask_value
from orchestrator.workflow.folders import work_folder
from orchestrator.workflow.goal import GoalResult


def save_evidence(result: GoalResult, folder: Path) -> str:
    """Write ``result`` as ``folder/result.json``; returns the file's path."""
    return write_evidence(folder, result.model_dump(mode="json", by_alias=True))


def run_evidence_dir(cache_dir: Path, job_id: str) -> Path:
    """Where ``run`` keeps a goal's evidence."""
    return work_folder(cache_dir, job_id)


def write_evidence(folder: Path, data: dict[str, Any]) -> str:
    """Write ``data`` (masked) as ``folder/result.json``; returns the file's path."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / "result.json"
    text = dumps_safe(mask_value(data))
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".result-", suffix=".part")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise
    return str(path)
