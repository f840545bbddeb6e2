"""``python -m orchestrator scripted-llm`` as a real process, called with the real ``openai`` client."""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import openai

SCENARIO = """
goal: say hello
model: scripted-cli
steps:
  - purpose: act
    expect: {contains: [hello]}
    reply:
      tool_calls:
        - name: write_artifact
          arguments: {rel_path: hello.txt, text: hi}
"""


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "scripted-llm", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_line(proc: subprocess.Popen[str], timeout_s: float = 20) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            proc.kill()
            raise AssertionError("scripted-llm printed no base URL in time")
    return proc.stdout.readline().strip()


def test_the_cli_serves_a_scenario_until_sigterm(tmp_path: Path) -> None:
    scenario = tmp_path / "hello.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    proc = start("--scenario", str(scenario), "--port", "0", "--trace", str(trace), "--strict")
    try:
        base_url = first_line(proc)
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        client = openai.OpenAI(
            api_key="scripted-no-key",
            base_url=base_url,
            max_retries=0,
            timeout=10,
            http_client=openai.DefaultHttpxClient(trust_env=False),
        )
        completion = client.chat.completions.create(
            model="anything",
            messages=[{"role": "user", "content": "say hello"}],
            extra_headers={"X-Orch-Purpose": "act"},
        )
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    [call] = completion.choices[0].message.tool_calls or []
    assert call.type == "function"
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_1_0",
        "write_artifact",
        {"rel_path": "hello.txt", "text": "hi"},
    )
    assert completion.model == "scripted-cli"
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert proc.returncode == 0, stderr
    assert "1/1 steps played, 0 mismatches" in stderr
    [line] = trace.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["_trace"]["purpose"] == "act" and json.loads(line)["messages"]


def test_strict_mode_exits_1_when_steps_were_never_requested(tmp_path: Path) -> None:
    scenario = tmp_path / "hello.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    proc = start("--scenario", str(scenario), "--strict")
    try:
        first_line(proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "0/1 steps played" in stderr


def test_a_broken_scenario_file_is_reported_with_exit_2(tmp_path: Path) -> None:
    scenario = tmp_path / "broken.yaml"
    scenario.write_text("goal: g\nsteps:\n  - reply: {contnet: hi}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", "scripted-llm", "--scenario", str(scenario)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert f"scenario {scenario}: step 1: reply.contnet (line 3)" in result.stderr
    assert result.stdout == ""
