"""The runner's contract on the real engine: I/O, build/ across calls, files in and out, errors, cleanup."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_helpers import tree_digest

from orchestrator.errors import PathEscapeError, SandboxError
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.sandbox.engine import connect

ECHO = """
import json, sys
args = json.load(sys.stdin)
json.dump({"got": args}, sys.stdout)
"""


def test_a_script_reads_args_on_stdin_and_its_json_stdout_is_parsed(make_skill, open_job):
    root = make_skill(
        {
            "scripts/echo.py": ECHO,
            "echo.sh": 'read -r line; echo "{\\"sh\\": $line}"\n',
            "echo.js": "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>"
            "console.log(JSON.stringify({js: JSON.parse(s)})));\n",
        }
    )
    job = open_job(root)
    py = job.run_script("scripts/echo.py", {"n": 1, "text": "héllo"})
    sh = job.run_script("echo.sh", [1, 2])
    js = job.run_script("echo.js", {"k": "v"})
    assert py.ok and py.stdout_json == {"got": {"n": 1, "text": "héllo"}} and py.exit_code == 0
    assert py.command == ["python3", "/skill/scripts/echo.py"] and py.script == "scripts/echo.py"
    assert sh.stdout_json == {"sh": [1, 2]}
    assert js.stdout_json == {"js": {"k": "v"}}
    assert py.container and py.container != sh.container  # a fresh container per call


def test_the_result_carries_the_spec_keys():
    from orchestrator.sandbox.models import ScriptResult

    keys = set(ScriptResult(ok=True, exit_code=0, script="x.py").model_dump())
    spec = {
        "ok",
        "exit_code",
        "stdout_json",
        "stderr_summary",
        "duration_ms",
        "timed_out",
        "oom_killed",
        "violations",
    }
    assert spec <= keys


def test_a_failing_script_is_a_result_with_a_reason_and_its_stderr(make_skill, open_job):
    root = make_skill(
        {
            "fail.py": "import sys\nprint('about to fail', file=sys.stderr)\nraise SystemExit(3)\n",
            "crash.py": "1/0\n",
            "text.py": "print('not json')\n",
            "quiet.py": "pass\n",
        }
    )
    job = open_job(root)
    fail = job.run_script("fail.py")
    crash = job.run_script("crash.py")
    text = job.run_script("text.py")
    quiet = job.run_script("quiet.py")
    assert not fail.ok and fail.exit_code == 3 and fail.reason == "exit code 3"
    assert fail.stderr_summary == "about to fail" and fail.stderr_lines == 1
    assert crash.exit_code == 1 and "ZeroDivisionError" in crash.stderr_summary.splitlines()[-1]
    assert not text.ok and text.reason == "stdout is not JSON" and text.stdout_text == "not json\n"
    assert not quiet.ok and quiet.reason.startswith("stdout is empty")
    assert not fail.oom_killed and not fail.timed_out and fail.violations == []


def test_build_persists_across_calls_and_host_writes_reach_scripts(make_skill, open_job, tmp_path):
    root = make_skill(
        {
            "write.py": """
        import json, os, sys
        os.makedirs("build/deck", exist_ok=True)
        open("build/deck/notes.txt", "w").write("from call 1")
        json.dump({"ok": True}, sys.stdout)
        """,
            "read.py": """
        import json, sys
        json.dump({"notes": open("build/deck/notes.txt").read(), "seed": open("build/seed.json").read()}, sys.stdout)
        """,
        }
    )
    job = open_job(root)
    written = job.write_file("seed.json", b'{"a": 1}')
    assert written.path == "seed.json" and written.size == 8
    assert job.run_script("write.py").ok
    assert job.run_script("read.py").stdout_json == {"notes": "from call 1", "seed": '{"a": 1}'}
    assert [f.path for f in job.list_files()] == ["deck/notes.txt", "seed.json"]
    assert job.read_file("build/deck/notes.txt") == b"from call 1"
    exported = job.export(tmp_path / "out")
    assert {f.path for f in exported} == {"deck/notes.txt", "seed.json"}
    assert (tmp_path / "out" / "deck" / "notes.txt").read_text() == "from call 1"


def test_scripts_write_files_readable_by_later_host_writes(make_skill, open_job):
    root = make_skill({"touch.py": "import json,sys\nopen('build/a.txt','w').write('x')\nprint('{}')\n"})
    job = open_job(root)
    job.write_file("a.txt", b"host first")
    assert job.run_script("touch.py").ok  # the sandbox user may overwrite what the host wrote
    assert job.read_file("a.txt") == b"x"


def test_a_host_write_that_does_not_fit_raises_disk_full_and_leaves_nothing(make_skill, open_job):
    job = open_job(make_skill({"x.py": "print('{}')"}), disk_mb=2)
    job.write_file("small.bin", b"s" * 1024)
    with pytest.raises(SandboxError) as caught:
        job.write_file("big.bin", b"b" * (3 * 1024 * 1024))
    assert caught.value.code == "disk_full" and caught.value.retryable is False
    assert [f.path for f in job.list_files()] == ["small.bin"]


def test_build_paths_cannot_escape(make_skill, open_job):
    job = open_job(make_skill({"x.py": "print('{}')"}))
    for bad in ("../x", "/etc/passwd", "a/../../b", ""):
        with pytest.raises(PathEscapeError):
            job.write_file(bad, b"x")
        with pytest.raises(PathEscapeError):
            job.read_file(bad)


def test_symlinks_made_in_build_are_neither_read_nor_exported(make_skill, open_job, tmp_path):
    root = make_skill(
        {
            "link.py": """
        import json, os, sys
        os.symlink("/etc/passwd", "build/passwd")
        os.symlink("/", "build/root")
        open("build/real.txt", "w").write("real")
        json.dump({}, sys.stdout)
        """
        }
    )
    job = open_job(root)
    assert job.run_script("link.py").ok
    with pytest.raises(SandboxError) as caught:
        job.read_file("passwd")
    assert caught.value.code == "not_a_file"
    assert [f.path for f in job.list_files()] == ["real.txt"]
    out = tmp_path / "export"
    assert [f.path for f in job.export(out)] == ["real.txt"]
    assert sorted(p.name for p in out.iterdir()) == ["real.txt"]


def test_export_does_not_write_through_a_symlink_at_the_destination(make_skill, open_job, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    out = tmp_path / "out"
    out.mkdir()
    (out / "real.txt").symlink_to(victim)
    job = open_job(make_skill({"x.py": "print('{}')"}))
    job.write_file("real.txt", b"overwritten?")
    with pytest.raises(SandboxError) as caught:
        job.export(out)
    assert caught.value.code == "unsafe_destination"
    assert victim.read_text() == "original"


def test_missing_files_in_build_are_reported(make_skill, open_job):
    job = open_job(make_skill({"x.py": "print('{}')"}))
    with pytest.raises(SandboxError) as caught:
        job.read_file("nope.txt")
    assert caught.value.code == "not_found"


def test_inputs_are_mounted_read_only(make_skill, open_job, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "data.csv").write_text("a,b\n1,2\n")
    root = make_skill(
        {
            "read.py": """
        import json, sys
        try:
            open("/inputs/new.txt", "w")
            wrote = True
        except OSError:
            wrote = False
        json.dump({"csv": open("/inputs/data.csv").read(), "wrote": wrote}, sys.stdout)
        """
        }
    )
    result = open_job(root, inputs_dir=inputs).run_script("read.py")
    assert result.stdout_json == {"csv": "a,b\n1,2\n", "wrote": False}
    assert sorted(p.name for p in inputs.iterdir()) == ["data.csv"]


def test_the_host_skill_folder_is_untouched_after_runs(make_skill, open_job, tmp_path):
    root = make_skill(
        {
            "busy.py": """
        import json, os, sys
        open("build/out.txt", "w").write("x" * 1000)
        for target in ("busy.py", "new.txt", "build.txt"):
            try:
                open(target, "a").write("tamper")
            except OSError:
                pass
        json.dump({}, sys.stdout)
        """,
            "assets/logo.txt": "logo",
        }
    )
    os.chmod(root / "busy.py", 0o644)
    before = tree_digest(root)
    job = open_job(root)
    for _ in range(3):
        assert job.run_script("busy.py").ok
    job.close()
    assert tree_digest(root) == before
    assert not (root / "build").exists()


def test_the_copy_fallback_runs_the_same_way_and_is_removed(make_skill, sandbox_settings, docker_client, tmp_path):
    root = make_skill({"echo.py": ECHO, "build/stale.txt": "shipped with the skill"})
    work = tmp_path / "work"
    runner = SandboxRunner(sandbox_settings, docker_client, work_dir=work, skill_view="copy", reap_on_start=False)
    before = tree_digest(root)
    try:
        with runner.open_job("copy", root) as job:
            assert job.skill_view == "copy"
            assert job.run_script("echo.py", {"x": 1}).stdout_json == {"got": {"x": 1}}
            assert job.list_files() == []  # the skill's own build/ is not the job's build/
    finally:
        runner.close()
    assert tree_digest(root) == before
    assert not any((work / "jobs").iterdir())


@pytest.mark.parametrize("prewarm", ["created", "off"])
def test_every_prewarm_mode_gives_the_same_results(make_skill, sandbox_settings, docker_client, tmp_path, prewarm):
    runner = SandboxRunner(
        sandbox_settings, docker_client, work_dir=tmp_path / "w", prewarm=prewarm, reap_on_start=False
    )
    try:
        with runner.open_job("modes", make_skill({"echo.py": ECHO})) as job:
            assert [job.run_script("echo.py", {"i": i}).stdout_json for i in range(2)] == [
                {"got": {"i": 0}},
                {"got": {"i": 1}},
            ]
    finally:
        runner.close()


def test_a_closed_job_refuses_calls(make_skill, open_job):
    job = open_job(make_skill({"echo.py": ECHO}))
    job.close()
    job.close()  # twice is fine
    with pytest.raises(SandboxError):
        job.run_script("echo.py")


def test_a_missing_image_names_the_build_command(make_skill, sandbox_settings, docker_client, tmp_path):
    settings = sandbox_settings.model_copy(update={"image": "orchtest-no-such-image:never"})
    runner = SandboxRunner(settings, docker_client, work_dir=tmp_path / "w", reap_on_start=False)
    with pytest.raises(SandboxError) as caught:
        runner.open_job("x", make_skill({"echo.py": ECHO}))
    runner.close()
    assert "python -m orchestrator sandbox build-image" in str(caught.value)
    assert caught.value.retryable is False and caught.value.code == "image_missing"


def test_an_unreachable_engine_is_a_retryable_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(SandboxError) as caught:
        connect(timeout_s=5)
    assert caught.value.retryable is True and caught.value.code == "engine_unreachable"


def test_a_missing_skill_root_is_refused(open_job, tmp_path):
    with pytest.raises(SandboxError):
        open_job(tmp_path / "nowhere")


def test_nothing_is_left_after_a_job_even_mid_prewarm(make_skill, runner: SandboxRunner, docker_client):
    job = runner.open_job("quick", make_skill({"echo.py": ECHO}))
    job.close()  # the next container may still be in creation: close waits and removes it
    from sandbox_helpers import leftovers

    assert leftovers(docker_client) == []


def test_files_are_reported_with_sha256(make_skill, open_job):
    import hashlib

    job = open_job(make_skill({"echo.py": ECHO}))
    data = os.urandom(100_000)
    job.write_file("blob.bin", data)
    (listed,) = job.list_files()
    assert listed.sha256 == hashlib.sha256(data).hexdigest() and listed.size == len(data)
    assert job.read_file("blob.bin") == data
    with pytest.raises(SandboxError):
        job.read_file("blob.bin", max_bytes=10)


def test_script_settings_paths_are_host_independent(tmp_path: Path):
    from orchestrator.sandbox.limits import sandbox_environment

    assert "OPENAI_API_KEY" not in sandbox_environment()
    assert sandbox_environment()["HOME"] == "/tmp"
