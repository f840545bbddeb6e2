"""A lazy sandbox job keeps build/ on the host until something runs, then hands over to the real job intact."""

from __future__ import annotations

from pathlib import Path

from orchestrator.sandbox.lazy import LazyJob
from orchestrator.testing.memory_sandbox import InMemorySandbox


def _echo(args: object, files: dict[str, bytes]) -> object:
    return {"got": args, "files": sorted(files)}


def test_writes_open_no_real_job_until_a_script_runs(tmp_path: Path) -> None:
    backend = InMemorySandbox({"scripts/build.py": _echo})
    job = LazyJob(backend, "j1", tmp_path, disk_mb=5)
    job.write_file("brand.json", b"{}")
    assert [f.path for f in job.list_files()] == ["brand.json"]
    assert backend.jobs == []
    job.close()


def test_the_real_job_gets_the_declared_operations_the_staged_files_and_the_command_line(tmp_path: Path) -> None:
    backend = InMemorySandbox({"scripts/build.py": _echo}, commands={"soffice": _echo})
    job = LazyJob(backend, "j2", tmp_path, disk_mb=5, operations=["process-chain"])
    job.write_file("outline.json", b'{"title": "Q3"}')

    result = job.run_script("scripts/build.py", {"n": 1}, argv=["out.pptx", "60"])
    command = job.run_command(["soffice", "--headless", "--convert-to", "pdf", "build/out.pptx"])

    assert backend.operations == [("process-chain",)]
    assert result.stdout_json == {"got": {"argv": ["out.pptx", "60"], "stdin": {"n": 1}}, "files": ["outline.json"]}
    assert command.stdout_json["got"] == {"argv": ["soffice", "--headless", "--convert-to", "pdf", "build/out.pptx"]}
    job.close()
    assert backend.jobs[0].closed
