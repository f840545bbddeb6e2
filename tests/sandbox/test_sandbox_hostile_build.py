"""Hostile skills against the host side of the sandbox, on the real engine: what the host reads out of build/, what
the runtime runs in a job's holder, and what reaches the launcher. Each test is an attack that must fail."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.errors import SandboxRefused
from orchestrator.sandbox import buildfs
from orchestrator.sandbox.limits import LAUNCHER

# -- 1. the host never reads more than the disk limit out of build/ -------------------------------------------------


def _without_in_container_check(job) -> None:
    """The host-side cap must hold on its own, whatever the in-container clean-up saw (or missed)."""
    job._build_folder.prune = lambda: None


def test_a_sparse_file_the_in_container_check_missed_is_stopped_at_its_declared_size(make_skill, open_job, tmp_path):
    root = make_skill({"w.sh": "mkdir build/d\ntruncate -s 2G build/d/huge.bin\necho ok > build/keep.txt\necho '{}'\n"})
    job = open_job(root, disk_mb=4)
    assert job.run_script("w.sh").ok
    _without_in_container_check(job)
    usage_before = shutil.disk_usage(tmp_path).used
    started = time.monotonic()
    files = job.export(tmp_path / "out")
    assert time.monotonic() - started < 20  # 2 GiB was never streamed
    assert [f.path for f in files] == ["keep.txt"]
    assert sorted(p.name for p in (tmp_path / "out").rglob("*") if p.is_file()) == ["keep.txt"]
    assert shutil.disk_usage(tmp_path).used - usage_before < 16 * 1024 * 1024
    assert any(v.startswith("disk_limit") and "d/huge.bin" in v for v in job.take_pruned())
    assert [f.path for f in job.list_files()] == ["keep.txt"]  # removed from build/ too


def test_slightly_sparse_files_cannot_add_up_past_the_limit(make_skill, open_job, tmp_path):
    # Each file is only a little sparse (under the per-file slack) but together they are far past 4 MiB.
    root = make_skill({"w.sh": "for i in $(seq 1 200); do printf x > build/f$i; truncate -s 60K build/f$i; done\n"
                               "echo '{}'\n"})
    job = open_job(root, disk_mb=4)
    assert job.run_script("w.sh", timeout_s=30).ok
    files = job.export(tmp_path / "out")
    assert sum(f.size for f in files) <= 4 * 1024 * 1024
    assert sum(p.stat().st_size for p in (tmp_path / "out").iterdir()) <= 4 * 1024 * 1024
    assert any("adds up to more than" in v for v in job.take_pruned())


def test_a_folder_the_sandbox_user_made_unlistable_hides_nothing(make_skill, open_job, tmp_path):
    root = make_skill({"w.sh": "mkdir -p build/locked/deeper\ntruncate -s 3G build/locked/deeper/big.bin\n"
                               "echo hi > build/locked/note.txt\nchmod 000 build/locked/deeper\n"
                               "chmod 000 build/locked\necho '{}'\n"})
    job = open_job(root, disk_mb=4)
    assert job.run_script("w.sh").ok
    files = job.export(tmp_path / "out")
    assert [f.path for f in files] == ["locked/note.txt"]
    assert any("big.bin" in v and "disk_limit" in v for v in job.take_pruned())


def test_hard_links_count_once_and_neither_crash_nor_smuggle_data(make_skill, open_job, tmp_path):
    root = make_skill({"w.sh": "head -c 3000000 /dev/zero > build/a.bin\n"
                               "for i in $(seq 1 20); do ln build/a.bin build/link$i.bin; done\necho '{}'\n"})
    job = open_job(root, disk_mb=4)
    assert job.run_script("w.sh").ok
    files = job.export(tmp_path / "out")
    assert sum(f.size for f in files) <= 4 * 1024 * 1024
    assert sum(p.stat().st_size for p in (tmp_path / "out").iterdir()) <= 4 * 1024 * 1024


def test_a_folder_name_that_is_not_utf8_never_reaches_the_model(make_skill, open_job, tmp_path):
    root = make_skill({"w.sh": "mkdir build/$'\\xff\\xfe'\necho x > build/$'\\xff\\xfe'/a.txt\n"
                               "echo y > build/ok.txt\necho '{}'\n"})
    job = open_job(root)
    assert job.run_script("w.sh").ok
    assert [f.path for f in job.list_files()] == ["ok.txt"]
    violations = job.take_pruned()
    assert any("not UTF-8" in v and "\\xff\\xfe/a.txt" in v for v in violations)
    assert all(v.encode("utf-8") for v in violations)  # reportable text, no surrogates


def test_a_name_that_is_not_utf8_is_dropped_by_the_host_too(make_skill, open_job, tmp_path):
    root = make_skill({"w.sh": "echo x > build/$'\\xff'.txt\necho y > build/ok.txt\necho '{}'\n"})
    job = open_job(root)
    assert job.run_script("w.sh").ok
    _without_in_container_check(job)
    assert [f.path for f in job.list_files()] == ["ok.txt"]
    assert [f.path for f in job.export(tmp_path / "out")] == ["ok.txt"]
    assert any("\\xff.txt" in v and "not UTF-8" in v for v in job.take_pruned())


CONTROL_NAMES = "printf x > build/$'two\\nlines.txt'\nprintf x > build/$'\\e]0;owned\\a.txt'\n" \
                "mkdir build/$'\\e[2J'\nprintf x > build/$'\\e[2J'/in.txt\nprintf x > build/$'\\xc2\\x9b31m.txt'\n" \
                "echo y > build/ok.txt\necho '{}'\n"


@pytest.mark.parametrize("host_only", [False, True], ids=["both-checks", "host-side-alone"])
def test_names_holding_control_characters_never_reach_the_host(make_skill, open_job, tmp_path, host_only):
    # A newline forges a line on a terminal or in a listing; an escape sequence rewrites the screen or the title.
    job = open_job(make_skill({"w.sh": CONTROL_NAMES}))
    assert job.run_script("w.sh").ok
    if host_only:
        _without_in_container_check(job)
    assert [f.path for f in job.list_files()] == ["ok.txt"]
    assert [f.path for f in job.export(tmp_path / "out")] == ["ok.txt"]
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == ["ok.txt"]
    violations = job.take_pruned()
    assert any("two\\x0alines.txt" in v and "control characters" in v for v in violations), violations
    assert any("\\x1b]0;owned\\x07.txt" in v for v in violations) and any("\\x9b31m.txt" in v for v in violations)
    assert not any(ch in v for v in violations for ch in "\n\x1b\x07\x9b")


def test_declared_sizes_are_checked_before_any_data_is_read():
    import io
    import tarfile

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("build/liar.bin")
        info.size = 10 * 1024 * 1024
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    received = 0

    def chunks():
        nonlocal received
        data = raw.getvalue()
        for i in range(0, len(data), 65536):
            received += 65536
            yield data[i : i + 65536]

    with pytest.raises(buildfs.OverLimit) as caught:
        buildfs.list_archive(chunks(), buildfs.Budget(limit=1024 * 1024))
    assert caught.value.path == "liar.bin" and received <= 1024 * 1024


def test_a_raw_stream_longer_than_allowed_is_cut():
    import tarfile

    info = tarfile.TarInfo("build/d")
    info.type = tarfile.DIRTYPE
    header = info.tobuf()  # entries without data: only the raw byte cap can stop them

    def endless():
        while True:
            yield header * 128

    with pytest.raises(buildfs.OverLimit):
        buildfs.list_archive(endless(), buildfs.Budget(limit=1024 * 1024))


# -- 2. nothing from a skill runs in the holder ------------------------------------------------------------------

SHADOW = "open('/build/pwned-{name}', 'w').write('x')\nraise SystemExit(0)\n"


@pytest.mark.parametrize("name", ["json.py", "os.py", "sitecustomize.py", "stat.py", "sys.py", "usercustomize.py"])
def test_a_skill_shadowing_stdlib_modules_changes_nothing_for_the_runtime(make_skill, open_job, tmp_path, name):
    root = make_skill({
        name: SHADOW.format(name=name),
        "w.sh": "truncate -s 3G build/sparse.bin\necho kept > build/ok.txt\necho '{}'\n",
    })
    job = open_job(root, disk_mb=4)
    assert job.run_script("w.sh").ok
    assert [f.path for f in job.list_files()] == ["ok.txt"]  # the check ran, not the skill's module
    assert any("sparse.bin" in v for v in job.take_pruned())
    job.write_file("more.txt", b"data")
    assert job.free_bytes() > 0
    assert sorted(f.path for f in job.list_files()) == ["more.txt", "ok.txt"]


# -- 3. script paths and the in-container limit -------------------------------------------------------------------


def test_a_symlinked_script_whose_target_holds_a_newline_is_refused(make_skill, open_job):
    root = make_skill({"real.sh": "echo '{}'\n"})
    evil = root / "x.sh\n999999\n.sh"
    evil.write_text("sleep 1000\n")
    os.symlink(evil.name, root / "nice.sh")
    job = open_job(root)
    with pytest.raises(SandboxRefused) as caught:
        job.run_script("nice.sh")
    assert caught.value.violation == "bad_path"


@pytest.mark.parametrize("limit", [math.nan, math.inf, -math.inf])
def test_a_time_limit_that_is_not_a_finite_number_is_refused(make_skill, open_job, limit):
    job = open_job(make_skill({"a.sh": "echo '{}'\n"}))
    with pytest.raises(SandboxRefused):
        job.run_script("a.sh", timeout_s=limit)
    assert job.run_script("a.sh", timeout_s=5).ok  # the job is still usable


@pytest.mark.parametrize("args", [{"x": "\ud800"}, {"x": math.nan}])
def test_args_that_are_not_plain_json_are_refused_not_a_crash(make_skill, open_job, args):
    job = open_job(make_skill({"a.sh": "echo '{}'\n"}))
    with pytest.raises(SandboxRefused):
        job.run_script("a.sh", args)


def test_the_launcher_refuses_a_time_limit_that_is_not_a_whole_number(sandbox_image: str, tmp_path: Path):
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "a.sh").write_text("echo ran\n")
    skill.chmod(0o755)
    for limit in (b"99 sleep", b"", b"-5"):
        proc = subprocess.run(
            ["docker", "run", "-i", "--rm", "--network", "none", "--label", "orchtest=launcher",
             "-v", f"{skill}:/skill:ro", "-w", "/skill", "--user", "65534:65534", sandbox_image, *LAUNCHER],
            input=limit + b"\n2\nbash\0/skill/a.sh\0{}", capture_output=True, timeout=60,
        )
        assert proc.returncode == 125 and b"ran" not in proc.stdout, limit
