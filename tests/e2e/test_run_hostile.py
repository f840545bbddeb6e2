"""`run` against hostile output folders, hostile text, hostile script output, stops, and the small things a new user
hits. Real CLI, real scripted server, real sandbox; each test is an attempt that must fail safely."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_run_cli import REPO, run_cli

BRAND = REPO / "ops" / "scenarios" / "brand-json.yaml"


def scenario_with_goal(tmp_path: Path, goal: str) -> Path:
    data = yaml.safe_load(BRAND.read_text())
    data["goal"] = goal
    data["steps"][0]["expect"] = {"contains": ["brand-guidelines"]}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


# -- 7. the output folder belongs to the user ------------------------------------------------------------------


def test_files_already_in_the_output_folder_are_never_read_followed_or_reported(cli_env, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("must not change")
    (out / "brand.json").symlink_to(victim)  # a planted link where the goal will write
    (out / "notes.txt").write_text("PRE-EXISTING-MARKER")
    (out / "broken.json").write_text("{not json")  # would fail the contract if it were validated
    proc = run_cli("run", "--skills", "skills", "--out", str(out), "--model", f"scripted:{BRAND}", "--json",
                   env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert victim.read_text() == "must not change"
    assert not (out / "brand.json").is_symlink() and json.loads((out / "brand.json").read_text())["name"] == "Acme"
    assert [a["path"] for a in result["artifacts"]] == ["brand.json"]
    assert result["validation"]["pass"] is True and result["validation"]["metrics"]["files"] == 1
    assert any("brand.json" in note and "replaced" in note for note in result["notes"])
    assert (out / "notes.txt").read_text() == "PRE-EXISTING-MARKER" and (out / "broken.json").exists()
    assert "PRE-EXISTING-MARKER" not in (tmp_path / "trace.jsonl").read_text()
    assert not [p for p in out.iterdir() if p.name.startswith(".orch-")]  # no temporary files left


def test_a_symlinked_folder_in_the_output_is_not_written_through(cli_env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    data = yaml.safe_load(BRAND.read_text())
    data["steps"][0]["reply"]["content"] = data["steps"][0]["reply"]["content"].replace('"brand.json"',
                                                                                        '"sub/brand.json"')
    for step in data["steps"]:
        for call in step["reply"].get("tool_calls", []):
            args = call["arguments"]
            for key in ("path",):
                if args.get(key) in ("brand.json", "build/brand.json"):
                    args[key] = args[key].replace("brand.json", "sub/brand.json")
            if "outputs" in args:
                args["outputs"] = ["build/sub/brand.json"]
        step.pop("expect", None)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    (out / "sub").symlink_to(outside, target_is_directory=True)
    proc = run_cli("run", "--skills", "skills", "--out", str(out), "--model", f"scripted:{scenario}", "--json",
                   env=cli_env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert list(outside.iterdir()) == []
    assert any("sub/brand.json" in note and "symlink" in note for note in result["notes"]), result["notes"]


def test_two_goals_writing_into_one_folder_never_report_each_others_files(cli_env, tmp_path):
    out = tmp_path / "shared"
    other = scenario_with_goal(tmp_path, "Give me our brand rules as a machine-readable brand.json, again")
    data = yaml.safe_load(other.read_text())
    for step in data["steps"]:
        for call in step["reply"].get("tool_calls", []):
            if call["name"] == "write_artifact":
                call["arguments"]["path"] = "brand2.json"
            if call["name"] == "validate":
                call["arguments"]["path"] = "build/brand2.json"
            if call["name"] == "finish":
                call["arguments"]["outputs"] = ["build/brand2.json"]
    data["steps"][0]["reply"]["content"] = data["steps"][0]["reply"]["content"].replace("brand.json",
                                                                                        "brand2.json")
    data["steps"][1].pop("expect")
    other.write_text(yaml.safe_dump(data, sort_keys=False))
    procs = [
        subprocess.Popen([sys.executable, "-m", "orchestrator", "run", "--skills", "skills", "--out", str(out),
                          "--model", f"scripted:{scenario}", "--json"], cwd=REPO, env=cli_env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for scenario in (BRAND, other)
    ]
    results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert [[a["path"] for a in r["artifacts"]] for r in results] == [["brand.json"], ["brand2.json"]]
    assert [r["validation"]["metrics"]["files"] for r in results] == [1, 1]


@pytest.mark.parametrize("flag", ["--out", "--zip"])
def test_an_unwritable_output_or_zip_target_is_refused_before_anything_is_created(cli_env, tmp_path, flag):
    target = "/proc/orchestrator-nope" + (".zip" if flag == "--zip" else "")
    args = ["--out", str(tmp_path / "out")] if flag == "--zip" else []
    proc = run_cli("run", "--skills", "skills", flag, target, *args, "--model", f"scripted:{BRAND}", "--json",
                   env=cli_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["where"] == "output"
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()


# -- 12. small things a new user hits -----------------------------------------------------------------------------


def _usage_error(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "jobs").exists()
    return json.loads(proc.stdout)["message"]


def test_a_scenario_file_that_is_not_utf8_is_a_usage_error(cli_env, tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("goal: café\n".encode("latin-1"))
    message = _usage_error(run_cli("run", "--skills", "skills", "--out", str(tmp_path / "o"), "--model",
                                   f"scripted:{bad}", "--json", env=cli_env), tmp_path)
    assert "not UTF-8" in message


def test_an_input_that_is_a_folder_is_a_usage_error(cli_env, tmp_path):
    message = _usage_error(run_cli("run", "--skills", "skills", "--out", str(tmp_path / "o"), "--input",
                                   str(tmp_path), "--model", f"scripted:{BRAND}", "--json", env=cli_env), tmp_path)
    assert "is a folder" in message


def test_a_skills_folder_with_no_skills_is_a_usage_error(cli_env, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    message = _usage_error(run_cli("run", "--skills", str(empty), "--out", str(tmp_path / "o"), "--model",
                                   f"scripted:{BRAND}", "--json", env=cli_env), tmp_path)
    assert "no skills found" in message


@pytest.mark.parametrize("goal", ["", "   \n\t "])
def test_an_empty_or_blank_goal_is_a_usage_error(cli_env, tmp_path, goal):
    message = _usage_error(run_cli("run", goal, "--skills", "skills", "--out", str(tmp_path / "o"), "--model",
                                   f"scripted:{BRAND}", "--json", env=cli_env), tmp_path)
    assert "goal" in message


def test_a_very_long_goal_is_refused_at_the_documented_limit(cli_env, tmp_path):
    message = _usage_error(run_cli("run", "x" * 100_000, "--skills", "skills", "--out", str(tmp_path / "o"),
                                   "--model", f"scripted:{BRAND}", "--json", env=cli_env), tmp_path)
    assert "8000" in message


def test_run_without_model_says_which_model_it_uses(cli_env, tmp_path):
    env = {k: v for k, v in cli_env.items() if k not in ("OPENAI_API_KEY", "ORCH_MODEL")}
    proc = run_cli("run", "a goal", "--skills", "skills", "--out", str(tmp_path / "o"), env=env)
    assert "openai:gpt-4o-mini" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_bad_log_level_is_a_usage_error_naming_the_levels(cli_env):
    proc = run_cli("--log-level", "LOUD", "skills", "list", "--root", "skills", env=cli_env)
    assert proc.returncode == 2 and "DEBUG, INFO, WARNING, ERROR, CRITICAL" in proc.stderr


# -- 8, 9, 10. text is text, secrets stay masked, stderr is JSON ------------------------------------------------


def test_markup_and_escape_sequences_in_a_goal_are_printed_literally_and_secrets_masked(cli_env, tmp_path):
    goal = ("Give me our brand rules as brand.json [bold red]LOUD[/] \x1b[2J\x9b31m "
            "using https://ada:hunter2@llm.example/v1 and sk-abcdefghijklmnop1234")
    scenario = scenario_with_goal(tmp_path, goal)
    proc = run_cli("--log-level", "INFO", "run", "--skills", "skills", "--out", str(tmp_path / "out"), "--model",
                   f"scripted:{scenario}", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[bold red]LOUD[/]" in proc.stdout
    for stream in (proc.stdout, proc.stderr):
        assert "\x1b" not in stream and "\x9b" not in stream
        assert "hunter2" not in stream and "abcdefghijklmnop1234" not in stream
    lines = proc.stderr.splitlines()
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)  # stderr is not a terminal
    [evidence] = (tmp_path / "cache" / "jobs").glob("*/result.json")
    text = evidence.read_text()
    assert "hunter2" not in text and "abcdefghijklmnop1234" not in text and "***:***@llm.example" in text
    assert stat.S_IMODE(evidence.stat().st_mode) == 0o600
    assert stat.S_IMODE(evidence.parent.stat().st_mode) == 0o700


# -- 6. no script output crashes a run; every ending keeps its evidence ---------------------------------------


def _script_skill(tmp_path: Path, source: str) -> Path:
    skill = tmp_path / "skills" / "odd"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: odd\ndescription: Runs run.py.\n---\nRun `run.py`.\n")
    (skill / "run.py").write_text(source)
    return tmp_path / "skills"


def _script_scenario(tmp_path: Path) -> Path:
    steps = [
        {"purpose": "plan", "reply": {"content": json.dumps({"steps": [{"skill": "odd", "expected": "a result"}]})}},
        {"purpose": "act", "reply": {"tool_calls": [{"name": "run_script", "arguments": {"path": "run.py"}}]}},
        {"purpose": "act", "reply": {"tool_calls": [{"name": "finish", "arguments": {"summary": "ran"}}]}},
        {"purpose": "semantic", "reply": {"content": json.dumps(
            {"pass": True, "missing": [], "violations": [], "rationale": "ok"})}},
    ]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"goal": "run the odd script", "steps": steps}, sort_keys=False))
    return path


def _start_a_run_whose_script_sleeps(cli_env: dict[str, str], tmp_path: Path) -> subprocess.Popen[str]:
    """A ``run`` in the background, returned once its script's container is running (sleeping for 120 s)."""
    skills = _script_skill(tmp_path, "import time\ntime.sleep(120)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "--skills", str(skills), "--out", str(tmp_path / "out"),
         "--model", f"scripted:{_script_scenario(tmp_path)}"],
        cwd=REPO, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    trace = tmp_path / "trace.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not trace.exists() or len(trace.read_text().splitlines()) < 2):
        time.sleep(0.2)
    time.sleep(3)  # the script's container is running now
    return proc


ODD_OUTPUT = r"""
import sys
deep = "[" * 50 + "]" * 50
sys.stdout.write('{"s": "\\ud800\\udfff\\ud800", "nan": NaN, "inf": -Infinity, "big": %s, "deep": %s, '
                 '"ctl": "\\u001b[2J\\u009b"}' % ("9" * 4000, deep))
"""


@pytest.mark.parametrize("as_json", [True, False])
def test_odd_script_output_never_crashes_the_run(cli_env, tmp_path, as_json):
    skills = _script_skill(tmp_path, ODD_OUTPUT)
    proc = run_cli("run", "--skills", str(skills), "--out", str(tmp_path / "out"), "--model",
                   f"scripted:{_script_scenario(tmp_path)}", *(["--json"] if as_json else []), env=cli_env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "\x1b" not in proc.stdout and "\x9b" not in proc.stdout
    if as_json:
        json.loads(proc.stdout)
    assert list((tmp_path / "cache" / "jobs").glob("*/result.json"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_writes_its_evidence_and_says_what_was_kept(cli_env, tmp_path, sig):
    proc = _start_a_run_whose_script_sleeps(cli_env, tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (130, 143), out + err
    assert "Traceback" not in err
    [line] = [json.loads(x) for x in err.splitlines() if "kept" in x]
    assert line["event"] == "run.interrupted" and "evidence" in line["message"]
    evidence = json.loads(Path(line["evidence_path"]).read_text())
    assert evidence["status"] == "failed" and evidence["error"]["where"] == "interrupted"
    assert all(a["partial"] for a in evidence["artifacts"])



@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_stop_during_the_clean_up_does_not_leave_the_jobs_containers(cli_env, tmp_path, second):
    # A user pressing Ctrl-C twice must not cut the clean-up short and leave the job's holder container running.
    import docker

    proc = _start_a_run_whose_script_sleeps(cli_env, tmp_path)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(second)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    [line] = [json.loads(x) for x in err.splitlines() if "kept" in x]
    job_id = json.loads(Path(line["evidence_path"]).read_text())["job_id"]
    client = docker.from_env()
    # the low-level listing: containers.list() inspects each one, and another test's container may vanish meanwhile
    left = [c["Names"] for c in client.api.containers(all=True, filters={"label": "orchtest.managed=1"})
            if (c.get("Labels") or {}).get("orchtest.job", "").startswith(job_id)]
    assert left == []


# -- 11. the cache is manageable ----------------------------------------------------------------------------------


def test_cache_info_and_clear(cli_env, tmp_path):
    proc = run_cli("run", "--skills", "skills", "--out", str(tmp_path / "out"), "--model", f"scripted:{BRAND}",
                   env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = json.loads(run_cli("cache", "info", "--json", env=cli_env).stdout)
    assert info["jobs"] == 1 and info["jobs_bytes"] > 0 and info["cache_dir"] == str(tmp_path / "cache")
    kept = json.loads(run_cli("cache", "clear", "--older-than", "1", "--json", env=cli_env).stdout)
    assert kept["removed"] == 0
    cleared = json.loads(run_cli("cache", "clear", "--json", env=cli_env).stdout)
    assert cleared["removed"] >= 1 and cleared["freed_bytes"] > 0
    assert json.loads(run_cli("cache", "info", "--json", env=cli_env).stdout)["jobs"] == 0
    assert (tmp_path / "out" / "brand.json").exists()  # outputs are the user's: never part of the cache


def test_skill_text_is_printed_literally(cli_env, tmp_path):
    skill = tmp_path / "skills" / "loud"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: loud\ndescription: \"[bold]Shouts[/bold] \\e[2J\\e]0;owned\\a\"\n"
                                    "---\nBody \x1b[31mred\x1b[0m [link=x]y[/link]\n")
    for args in (["skills", "list", "--root", str(tmp_path / "skills")],
                 ["skills", "show", "loud", "--root", str(tmp_path / "skills"), "--body"]):
        proc = run_cli(*args, env=cli_env)
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
        assert "[bold]Shouts[/bold]" in proc.stdout
