"""Where a job's folders are; every path of one is built here.

- its output folder, ``<output root>/<job id>`` (``run --out`` names its own instead);
- its work folder, ``<cache>/jobs/<job id>``: staged inputs, ``published/`` copies, and ``run``'s evidence;
- a worker's evidence of each run, ``<cache>/jobs/<stack>/<job id>/run-<n>`` (two ledgers sharing a cache folder
  never write over each other's).

The job id and the stack are checked by the callers that read them from outside (``check_job_id``, the tenancy
rules); these functions only join.
"""

from __future__ import annotations

from pathlib import Path

JOBS = "jobs"
PUBLISHED = "published"


def jobs_folder(cache_dir: Path) -> Path:
    """``<cache>/jobs``: every job's work folder (and the workers' evidence) lives under it."""
    return cache_dir / JOBS


def work_folder(cache_dir: Path, job_id: str) -> Path:
    """``<cache>/jobs/<job id>``."""
    return jobs_folder(cache_dir) / job_id


def published_folder(cache_dir: Path, job_id: str) -> Path:
    """``<cache>/jobs/<job id>/published``: a copy of what the job published, kept beside its work."""
    return work_folder(cache_dir, job_id) / PUBLISHED


def out_folder(output_root: Path, job_id: str) -> Path:
    """``<output root>/<job id>``: the only folder a worker's job writes its results to."""
    return output_root / job_id


def evidence_folder(cache_dir: Path, stack: str, job_id: str, run: int) -> Path:
    """``<cache>/jobs/<stack>/<job id>/run-<n>``: a worker's evidence of one run of a job."""
    return jobs_folder(cache_dir) / stack / job_id / f"run-{run}"
