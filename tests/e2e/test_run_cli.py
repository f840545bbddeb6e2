"""End to end: `python -m orchestrator run` with the scripted OpenAI-compatible server, the real `openai` client,
the real sandbox and the bundled skills."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "ops" / "scenarios" / "brand-deck.yaml"


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )


def _script_lines(min_chars: int = 20) -> set[str]:
    """Lines of the bundled scripts long enough to be their own (``else:`` or ``pass`` say nothing)."""
    lines = set()
    for script in (REPO / "skills").rglob("*"):
        if script.suffix in (".py", ".sh", ".js") and script.is_file():
            lines |= {line.strip() for line in script.read_text().splitlines() if len(line.strip()) >= min_chars}
    return lines


def test_the_demo_goal_produces_a_validated_five_slide_deck_and_a_clean_trace(cli_env, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(
        "run",
        "--skills",
        "skills",
        "--out",
        str(out),
        "--model",
        f"scripted:{SCENARIO}",
        "--json",
        env=cli_env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "done"
    assert {a["path"] for a in result["artifacts"]} >= {"deck.pptx", "brand.json", "outline.json"}
    assert all(len(a["sha256"]) == 64 and a["size"] > 0 for a in result["artifacts"])
    assert result["validation"]["pass"] is True and result["validation"]["stage"] == "semantic"
    assert set(result["metrics"]) >= {"tokens_in", "tokens_out", "tool_calls", "duration_ms"}

    from pptx import Presentation

    assert len(Presentation(str(out / "deck.pptx")).slides) == 5

    requests = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    texts = [json.dumps(r, ensure_ascii=False) for r in requests]
    leaked = [line for line in _script_lines() for text in texts if line in text]
    assert leaked == []
    plan_text = texts[0]
    assert "Acme brand guidelines" not in plan_text and "# Slide decks (.pptx)" not in plan_text
    assert "brand-guidelines" in plan_text


@pytest.fixture
def pinned_sandbox_image(docker_client, sandbox_image) -> Iterator[str]:
    """The sandbox image under a tag of this test's own, so both runs use the same image even when another process on
    the shared engine rebuilds the default tag meanwhile (stored results are reused only for the same image, so a
    rebuild between the runs rightly makes the second run the script again)."""
    image = docker_client.images.get(sandbox_image)
    repository, tag = sandbox_image.rsplit(":", 1)[0], f"orchtest-{uuid.uuid4().hex[:12]}"
    image.tag(repository, tag)
    try:
        yield f"{repository}:{tag}"
    finally:
        with contextlib.suppress(docker.errors.APIError):  # an image still in use elsewhere only loses this tag
            docker_client.images.remove(f"{repository}:{tag}")


def test_a_second_run_replays_an_identical_script_run_without_a_container(cli_env, pinned_sandbox_image, tmp_path):
    env = {**cli_env, "ORCH_SANDBOX__IMAGE": pinned_sandbox_image}
    results = []
    for n in range(2):
        proc = run_cli("run", "--skills", "skills", "--out", str(tmp_path / f"out{n}"), "--model",
                       f"scripted:{SCENARIO}", "--json", env=env)
        results.append(json.loads(proc.stdout))
        # the second run's replies come from the response cache and its verdict from the memo: the script was
        # played all the same, so nothing warns that steps were left over
        assert "scripted.unfinished" not in proc.stderr, proc.stderr
    assert results[1]["metrics"]["tokens_in"] == 0 and results[1]["validation"]["pass"] is True
    # the first run: the script, then the thumbnail of deck.pptx; the second run restores both from the memo
    assert results[0]["metrics"]["containers"] == 2 and results[1]["metrics"]["containers"] == 0
    assert results[1]["metrics"]["memo_hits"] >= 1
    decks = [(tmp_path / f"out{n}" / "deck.pptx").read_bytes() for n in range(2)]
    assert decks[0] == decks[1]


def test_a_goal_with_a_bad_skills_folder_fails_with_an_actionable_error(cli_env, tmp_path):
    proc = run_cli(
        "run",
        "x",
        "--skills",
        str(tmp_path / "nope"),
        "--out",
        str(tmp_path / "o"),
        "--model",
        f"scripted:{SCENARIO}",
        "--json",
        env=cli_env,
    )
    assert proc.returncode == 2
    error = json.loads(proc.stdout)
    assert error["ok"] is False and "skills folder not found" in error["message"] and error["next_step"]


def write_scenario(path: Path, goal: str, steps: list[dict]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"goal": goal, "steps": steps}, sort_keys=False))
    return path


def test_an_output_path_that_is_a_file_is_an_actionable_error(cli_env, tmp_path):
    blocker = tmp_path / "taken"
    blocker.write_text("a file, not a folder")
    proc = run_cli("run", "--skills", "skills", "--out", str(blocker), "--model", f"scripted:{SCENARIO}", "--json",
                   env=cli_env)
    assert proc.returncode == 2, proc.stderr
    error = json.loads(proc.stdout)
    assert error["where"] == "output" and "--out" in error["next_step"]


def test_a_plan_naming_unknown_skills_fails_at_the_plan_with_a_validation_report(cli_env, tmp_path):
    bad_plan = {"purpose": "plan", "reply": {"content": '{"steps": [{"skill": "no-such-skill"}]}'}}
    scenario = write_scenario(tmp_path / "s.yaml", "do something", [bad_plan, bad_plan])
    proc = run_cli("run", "--skills", "skills", "--out", str(tmp_path / "out"), "--model", f"scripted:{scenario}",
                   "--json", env=cli_env)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["status"] == "failed" and result["error"]["where"] == "plan"
    assert "no-such-skill" in result["error"]["message"] and result["error"]["next_step"]
    assert result["validation"]["pass"] is False and result["validation"]["violations"]


def test_a_skill_whose_model_stops_answering_fails_the_goal_naming_the_skill(cli_env, tmp_path):
    plan = {"purpose": "plan", "reply": {"content": json.dumps(
        {"steps": [{"skill": "brand-guidelines", "outputs": [{"path": "brand.json", "kind": "json"}]},
                   {"skill": "document-skills/pptx"}]})}}
    write = {"purpose": "act", "reply": {"tool_calls": [
        {"name": "write_artifact", "arguments": {"path": "brand.json", "text": "{\"name\": \"Acme\"}"}}]}}
    scenario = write_scenario(tmp_path / "s.yaml", "brand then deck", [plan, write])
    proc = run_cli("run", "--skills", "skills", "--out", str(tmp_path / "out"), "--model", f"scripted:{scenario}",
                   "--json", env=cli_env)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["status"] == "failed" and result["error"]["where"].startswith("skill:brand-guidelines")
    assert [s["skill_id"] for s in result["skills"]] == ["brand-guidelines"]  # the deck skill never started
    [artifact] = result["artifacts"]
    assert artifact["path"] == "brand.json" and artifact["partial"] is True
    assert (tmp_path / "out" / "brand.json").exists()


def test_input_files_reach_skills_read_only_and_stdout_results_are_printed(cli_env, tmp_path):
    skill = tmp_path / "skills" / "csv-stats"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: csv-stats\ndescription: Count the rows of a CSV input.\n---\n"
                                    "Run `scripts/stats.py` with {\"csv\": \"/inputs/NAME.csv\"}.\n")
    (skill / "scripts" / "stats.py").write_text(
        "import csv, json, sys\nargs = json.load(sys.stdin)\n"
        "rows = list(csv.reader(open(args['csv'], newline='')))\n"
        "try:\n    open(args['csv'], 'a').write('tamper')\n    tampered = True\n"
        "except OSError:\n    tampered = False\n"
        "print(json.dumps({'rows': len(rows) - 1, 'tampered': tampered}))\n")
    data = tmp_path / "sales.csv"
    data.write_text("region,amount\nnorth,1\nsouth,2\neast,3\n")
    plan = {"purpose": "plan", "expect": {"contains": ["sales.csv"]},
            "reply": {"content": json.dumps({"steps": [{"skill": "csv-stats", "expected": "the row count"}]})}}
    run = {"purpose": "act", "expect": {"contains": ["sales.csv"]}, "reply": {"tool_calls": [
        {"name": "run_script", "arguments": {"path": "scripts/stats.py", "args": {"csv": "/inputs/sales.csv"}}}]}}
    finish = {"purpose": "act", "expect": {"last_tool_result_contains": ['"rows": 3']},
              "reply": {"tool_calls": [{"name": "finish", "arguments": {"summary": "3 rows"}}]}}
    semantic = {"purpose": "semantic", "reply": {"content": json.dumps(
        {"pass": True, "missing": [], "violations": [], "rationale": "the count was reported"})}}
    scenario = write_scenario(tmp_path / "s.yaml", "How many rows are in sales.csv?", [plan, run, finish, semantic])
    proc = run_cli("run", "--skills", str(tmp_path / "skills"), "--out", str(tmp_path / "out"), "--input", str(data),
                   "--model", f"scripted:{scenario}", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"rows": 3' in proc.stdout and '"tampered": false' in proc.stdout
    assert data.read_text() == "region,amount\nnorth,1\nsouth,2\neast,3\n"
