"""Attacks by someone who can only submit goal lines, stopped at `submit` with the line's number and the reason.

Host files through `inputs` (the submitter's own /proc, devices, FIFOs, folders, sizes), skills from anywhere but a
registered library, writing into another job's folder, squatting a job id, budgets past the operator's ceilings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from worker_helpers import BRAND_GOAL, BRAND_JSON, REPO, RedisServer

from orchestrator.config import load_settings
from orchestrator.worker.blobs import BlobStore
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.submit import parse_lines, submit_lines


def _settings(tmp_path: Path, **extra: object):  # noqa: ANN202
    return load_settings(skills_dir=REPO / "skills", output_root=tmp_path / "out", cache_dir=tmp_path / "cache",
                         scenario_dirs=[REPO / "ops" / "scenarios"], **extra)


def _line(**fields: object) -> str:
    return json.dumps({"goal": BRAND_GOAL, "model": f"scripted:{BRAND_JSON}", **fields})


def _rejected(tmp_path: Path, *lines: str, **settings: object) -> dict[int, str]:
    good, bad = parse_lines(list(lines), _settings(tmp_path, **settings))
    return {r.line: r.reason for r in bad}


@pytest.mark.parametrize(
    "target",
    ["/proc/self/environ", "/proc/1/environ", "/proc/self/cmdline", "/sys/kernel/hostname", "/dev/zero",
     "/dev/null", "/proc/self/fd/0"],
)
def test_an_input_on_a_kernel_pseudo_filesystem_is_rejected(tmp_path: Path, target: str) -> None:
    reasons = _rejected(tmp_path, _line(inputs=[target]))
    assert list(reasons) == [1]
    assert target in reasons[1] or "not a regular file" in reasons[1]


def test_a_symlink_to_the_submitters_environ_is_rejected(tmp_path: Path) -> None:
    link = tmp_path / "notes.txt"
    link.symlink_to("/proc/self/environ")
    assert "proc" in _rejected(tmp_path, _line(inputs=[str(link)]))[1]


def test_fifos_folders_and_missing_files_are_rejected_each_on_its_line(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    reasons = _rejected(
        tmp_path,
        _line(inputs=[str(fifo)]),
        _line(inputs=[str(folder)]),
        _line(inputs=[str(tmp_path / "missing.csv")]),
    )
    assert sorted(reasons) == [1, 2, 3]
    assert "not a regular file" in reasons[1] and "not a regular file" in reasons[2] and "not found" in reasons[3]


def test_inputs_over_the_per_file_and_per_job_caps_are_rejected(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 300_000)
    small = [tmp_path / f"s{i}.txt" for i in range(3)]
    for path in small:
        path.write_bytes(b"y" * 200_000)
    caps = {"job_inputs": {"file_max_mb": 0.25, "job_max_mb": 0.5}}
    reasons = _rejected(tmp_path, _line(inputs=[str(big)]), _line(inputs=[str(p) for p in small]), **caps)
    assert "cap" in reasons[1] and "per file" in reasons[1]
    assert "per goal line" in reasons[2]


def test_skills_name_a_registered_library_never_a_path(tmp_path: Path) -> None:
    other = tmp_path / "lookalike"
    (other / "brand-guidelines").mkdir(parents=True)
    reasons = _rejected(
        tmp_path,
        _line(skills=str(REPO / "skills")),
        _line(skills=str(other)),
        _line(skills="../skills"),
        _line(skills="nobody-registered-this"),
        _line(skills="acme"),
        _line(),
        libraries={"acme": str(REPO / "skills")},
    )
    assert sorted(reasons) == [1, 2, 3, 4]
    assert all("not a registered library" in reasons[n] for n in (1, 2, 3, 4))
    assert "acme, default" in reasons[4]


@pytest.mark.parametrize("out", ["victim", "../elsewhere", "/etc", "victim/../victim", ""])
def test_out_can_only_be_the_jobs_own_folder(tmp_path: Path, out: str) -> None:
    reasons = _rejected(tmp_path, _line(job_id="mine", out=out))
    assert "its own folder" in reasons[1]
    assert _rejected(tmp_path, _line(job_id="mine", out="mine")) == {}


def test_budgets_over_the_operators_ceilings_are_rejected_naming_the_ceiling(tmp_path: Path) -> None:
    reasons = _rejected(
        tmp_path,
        _line(budgets={"disk_write_limit_mb": 1_000_000}),
        _line(budgets={"token_budget": 10**9, "max_tool_calls": 10_000}),
        _line(budgets={"script_timeout_s": 121}),
        _line(budgets={"max_tool_calls": 50}),
    )
    assert sorted(reasons) == [1, 2, 3]
    assert "disk_write_limit_mb=1000000 is over the ceiling 256" in reasons[1]
    assert "token_budget" in reasons[2] and "max_tool_calls=10000 is over the ceiling 100" in reasons[2]
    assert "script_timeout_s=121.0 is over the ceiling 120" in reasons[3]
    custom = _rejected(tmp_path, _line(budgets={"max_tool_calls": 50}), ceilings={"max_tool_calls": 10})
    assert "over the ceiling 10" in custom[1]


@pytest.fixture
def ledger(tmp_path: Path):  # noqa: ANN201
    server = RedisServer(tmp_path / "redis").start()
    yield Ledger.from_url(server.url)
    server.stop()


def test_a_job_id_taken_with_another_line_is_rejected_the_same_line_is_a_duplicate(ledger, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    queued: list[str] = []

    def submit(*lines: str):  # noqa: ANN202
        return submit_lines(list(lines), settings, ledger, lambda rec, phase: queued.append(rec.job_id),
                            new_job_id=lambda: "fresh")

    squat = submit(_line(job_id="q3-report", goal="a squatter's goal"))
    assert [a.job_id for a in squat.accepted] == ["q3-report"]
    owner = submit(_line(goal="ignored"), _line(job_id="q3-report"))
    assert [r.line for r in owner.rejected] == [2] and "exists with a different goal line" in owner.rejected[0].reason
    again = submit(_line(job_id="q3-report", goal="a squatter's goal"))
    assert again.rejected == [] and again.accepted[0].duplicate is True
    assert queued == ["q3-report", "fresh"]  # nothing queued twice, the rejected line never


def test_input_bytes_travel_by_hash_and_the_ledger_holds_no_path(ledger, tmp_path: Path) -> None:
    data = tmp_path / "producer-only" / "sales.csv"
    data.parent.mkdir()
    data.write_bytes(b"region,revenue\nNorth,1\n")
    report = submit_lines([_line(job_id="carried", inputs=[str(data)])], _settings(tmp_path), ledger,
                          lambda rec, phase: None, new_job_id=lambda: "x")
    assert report.rejected == []
    record = ledger.get("carried")
    assert record is not None
    assert record.request is not None
    [ref] = record.request.inputs
    assert ref.name == "sales.csv" and str(data.parent) not in record.request.model_dump_json()
    assert BlobStore(ledger.r, max_bytes=1 << 20, ttl_s=60).get(ref.sha256) == data.read_bytes()
    assert 0 < ledger.r.ttl(f"orch:blob:{ref.sha256}") <= 7 * 24 * 3600


def test_a_scripted_model_names_only_a_scenario_in_a_scenario_folder(tmp_path: Path) -> None:
    """A worker reads the scenario and reports what is wrong with it: any other file would leak into a reason."""
    outside = tmp_path / "evidence.yaml"
    outside.write_text("goal: x\nsteps: []\n")
    reasons = _rejected(
        tmp_path,
        _line(model="scripted:/proc/self/environ", inputs=[str(BRAND_JSON)]),
        _line(model=f"scripted:{outside}"),
        _line(model=f"scripted:{REPO / 'pyproject.toml'}"),
        _line(),
    )
    assert sorted(reasons) == [1, 2, 3]
    assert all("scenario folder" in reasons[n] for n in (2, 3)) and "scenario" in reasons[1]
