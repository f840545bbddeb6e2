"""End to end through `python -m orchestrator run`: a skill that calls a granted service (the local upstream) with
a secret it never sees, driven by the scripted OpenAI-compatible server through the real `openai` client, in the
real sandbox behind the real egress proxy. Ungranted, the same goal is refused before the skill's Act asks the
model anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from egress_world import (
    EGRESS_PREFIX,
    GOAL,
    SECRET_NAME,
    SECRET_VALUE,
    assert_forecast_saved,
    assert_secret_nowhere,
    egress_image,
    egress_section,
    forecast_library,
    forecast_scenario,
    leftovers,
)

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, library: Path, scenario: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", GOAL, "--skills", str(library), "--out", str(tmp_path / "out"),
         "--model", f"scripted:{scenario}", "--json", "--no-memo"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )


def _env(cli_env: dict[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in cli_env.items() if not k.startswith("ORCH_SECRET_")}
    env.update(ORCH_SANDBOX__LABEL_PREFIX=EGRESS_PREFIX, **extra)
    return env


def test_run_calls_a_granted_service_with_the_injected_secret_and_keeps_the_request_log(
    cli_env, upstream, docker_client, tmp_path
):
    egress_image(docker_client)
    library = forecast_library(tmp_path)
    env = _env(cli_env, ORCH_EGRESS=json.dumps(egress_section(upstream, library=str(library))),
               **{f"ORCH_SECRET_{SECRET_NAME}": SECRET_VALUE})
    proc = _run(tmp_path, library, forecast_scenario(tmp_path / "granted.yaml", granted=True), env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "done", result
    assert_forecast_saved(tmp_path / "out")
    assert_secret_nowhere(proc.stdout, proc.stderr, (tmp_path / "trace.jsonl").read_text(), folders=(tmp_path / "out",))
    assert '"host": "api.granted.test"' in proc.stdout and '"path": "/v1/forecast?city=Lyon"' in proc.stdout
    assert leftovers(docker_client, EGRESS_PREFIX) == []


def test_run_refuses_an_ungranted_skill_before_its_act_calls_the_model(cli_env, upstream, tmp_path):
    library = forecast_library(tmp_path)
    env = _env(cli_env)  # no ORCH_EGRESS: nothing is granted
    proc = _run(tmp_path, library, forecast_scenario(tmp_path / "ungranted.yaml", granted=False), env)
    result = json.loads(proc.stdout)
    assert result["status"] in ("failed", "unmet"), result
    text = json.dumps(result)
    assert "api.granted.test:8443" in text and SECRET_NAME in text and "ORCH_EGRESS" in text
    lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    purposes = [json.loads(line)["_trace"]["purpose"] for line in lines]
    assert "plan" in purposes and "act" not in purposes, purposes
