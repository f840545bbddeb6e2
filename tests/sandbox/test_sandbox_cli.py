"""The sandbox commands as a user runs them: `python -m orchestrator sandbox ...` and `bench sandbox`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def orchestrator(*args: str, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORCH_SANDBOX__LABEL_PREFIX": "orchtest"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def test_sandbox_run_prints_the_result_and_exports_build(make_skill, tmp_path):
    root = make_skill(
        {
            "make.py": """
        import json, sys
        args = json.load(sys.stdin)
        open("build/report.txt", "w").write(args["text"])
        json.dump({"wrote": "report.txt"}, sys.stdout)
        """
        }
    )
    build = tmp_path / "out"
    done = orchestrator(
        "sandbox",
        "run",
        "make.py",
        "--skill-root",
        str(root),
        "--build",
        str(build),
        "--args",
        '{"text": "hello"}',
        "--timeout",
        "10",
        "--memory-mb",
        "128",
        "--json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert {
        "ok",
        "exit_code",
        "stdout_json",
        "stderr_summary",
        "duration_ms",
        "timed_out",
        "oom_killed",
        "violations",
    } <= set(result)
    assert result["ok"] is True and result["stdout_json"] == {"wrote": "report.txt"}
    assert (build / "report.txt").read_text() == "hello"


def test_sandbox_run_chains_through_the_build_folder(make_skill, tmp_path):
    root = make_skill(
        {
            "append.py": """
        import json, os, sys
        path = "build/log.txt"
        text = open(path).read() if os.path.exists(path) else ""
        open(path, "w").write(text + "x")
        json.dump({"len": len(text) + 1}, sys.stdout)
        """
        }
    )
    build = tmp_path / "out"
    for expected in (1, 2):
        done = orchestrator("sandbox", "run", "append.py", "--skill-root", str(root), "--build", str(build), "--json")
        assert json.loads(done.stdout)["stdout_json"] == {"len": expected}


def test_a_refused_script_is_reported_as_json_without_a_traceback(make_skill, tmp_path):
    root = make_skill({"tool.rb": "puts 1"})
    done = orchestrator(
        "sandbox", "run", "tool.rb", "--skill-root", str(root), "--build", str(tmp_path / "o"), "--json"
    )
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["ok"] is False and result["violations"][0].startswith("extension_not_allowed")
    assert "Traceback" not in done.stderr


def test_a_timed_out_script_exits_non_zero_with_the_reason(make_skill, tmp_path):
    root = make_skill({"nap.py": "import time\ntime.sleep(30)\n"})
    done = orchestrator(
        "sandbox",
        "run",
        "nap.py",
        "--skill-root",
        str(root),
        "--build",
        str(tmp_path / "o"),
        "--timeout",
        "1",
        "--json",
    )
    result = json.loads(done.stdout)
    assert done.returncode == 1 and result["timed_out"] is True and result["reason"] == "timed out after 1s"


def test_sandbox_tools_and_reap_print_json():
    tools = orchestrator("sandbox", "tools", "--json")
    assert tools.returncode == 0 and "python-pptx" in json.loads(tools.stdout)
    reap = orchestrator("sandbox", "reap", "--json")
    assert reap.returncode == 0 and isinstance(json.loads(reap.stdout)["removed"], int)


def test_bench_sandbox_beats_docker_run(tmp_path):
    done = orchestrator("bench", "sandbox", "--pairs", "5", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {
        "runner_median_ms",
        "runner_p95_ms",
        "docker_run_median_ms",
        "ratio_vs_docker_run",
        "job_setup_ms",
        "pairs",
    } <= set(result)
    assert result["pairs"] == 5
    assert result["ratio_vs_docker_run"] <= 1.0


SHAPE = {"ok", "exit_code", "stdout_json", "stderr_summary", "duration_ms", "timed_out", "oom_killed", "violations"}


def test_sandbox_run_passes_argv_to_a_script_seeded_into_build(make_skill, tmp_path):
    root = make_skill({"SKILL.md": "# s\n"})
    build = tmp_path / "out"
    build.mkdir()
    (build / "gen.py").write_text("import json, sys\njson.dump(sys.argv[1:], sys.stdout)\n")
    done = orchestrator(
        "sandbox", "run", "build/gen.py", "--skill-root", str(root), "--build", str(build),
        "--argv", "out.xlsx", "--argv", "60", "--argv", "--flag", "--argv", "a b", "--json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["stdout_json"] == ["out.xlsx", "60", "--flag", "a b"] and set(result) >= SHAPE


def test_sandbox_command_runs_an_allowed_program_and_exports_build(make_skill, tmp_path):
    root = make_skill({"SKILL.md": "# s\n"})
    build = tmp_path / "out"
    done = orchestrator(
        "sandbox", "command", "--skill-root", str(root), "--build", str(build), "--timeout", "30", "--json",
        "--", "python3", "-c", "import sys; open('build/x.txt', 'w').write(sys.argv[1]); print('done')", "$(id)",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert set(result) >= SHAPE and result["ok"] and result["stdout_text"] == "done\n"
    assert result["command"][0] == "python3" and (build / "x.txt").read_text() == "$(id)"


def test_sandbox_command_refuses_a_program_not_on_the_list(make_skill, tmp_path):
    done = orchestrator(
        "sandbox", "command", "--skill-root", str(make_skill({"SKILL.md": "# s\n"})), "--build", str(tmp_path / "o"),
        "--json", "--", "curl", "http://example.com",
    )
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert set(result) >= SHAPE and not result["ok"] and result["exit_code"] is None
    assert result["violations"][0].startswith("command_not_allowed") and "soffice" in result["reason"]
