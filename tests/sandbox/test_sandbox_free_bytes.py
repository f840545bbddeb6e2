"""How much of build/ is free, and what a holder command's exit code is: a clear number or a clear error, never a
crash on an odd answer and never a missing exit code read as success."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.errors import SandboxError, SandboxErrorCode
from orchestrator.sandbox.buildfolder import available_bytes

HEADER = "Filesystem     1-blocks  Used Available Capacity Mounted on\n"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (HEADER + "tmpfs 52428800 4096 52424704 1% /build\n", 52424704),
        (HEADER + "orch vol with spaces 8388608 0 8388608 0% /build\n", 8388608),
        (HEADER + "tmpfs 0 0 0 100% /build", 0),
        ("", None),
        ("\n\n", None),
        (HEADER, None),
        ("df: /build: No such file or directory\n", None),
        (HEADER + "tmpfs 52428800 4096 lots 1% /build\n", None),
        (HEADER + "tmpfs 52428800 4096 52424704 /build\n", None),
        (HEADER + "tmpfs 52428800 4096 -5 1% /build\n", None),
    ],
)
def test_the_available_bytes_are_read_from_dfs_posix_output_or_none(output, expected):
    assert available_bytes(output) == expected


@given(st.text())
def test_no_answer_crashes_the_reading_of_df(output):
    free = available_bytes(output)
    assert free is None or free >= 0


def test_free_bytes_is_within_the_disk_limit_and_shrinks_by_what_is_written(make_skill, open_job):
    job = open_job(make_skill({"x.sh": "echo '{}'\n"}), disk_mb=4)
    before = job.free_bytes()
    assert 0 < before <= 4 * 1024 * 1024
    job.write_file("blob.bin", b"x" * 100_000)
    assert before - job.free_bytes() >= 100_000


def test_a_holder_command_returns_its_own_exit_code_and_output(make_skill, open_job):
    job = open_job(make_skill({"x.sh": "echo '{}'\n"}))
    assert job._build().exec_holder(["sh", "-c", "echo out; exit 3"]) == (3, "out\n")


def test_a_command_the_engine_reports_no_exit_code_for_is_an_engine_error_not_a_success(make_skill, open_job):
    """An exec the engine never ran to its end answers ``Running: false, ExitCode: null`` (here: created and never
    started); read as 0 it made an empty ``df`` answer pass for a clean run."""
    job = open_job(make_skill({"x.sh": "echo '{}'\n"}))
    folder = job._build()
    exec_id = folder._api.exec_create(folder.holder, ["true"])["Id"]
    with pytest.raises(SandboxError) as raised:
        folder.exit_code(exec_id, "true")
    assert raised.value.retryable and raised.value.code == SandboxErrorCode.ENGINE_ERROR
    assert "no exit code for true" in str(raised.value)
