"""``python -m orchestrator validate``: the report as JSON, exit 0 pass / 1 fail / 2 bad usage or rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner
from validator_helpers import make_deck, verdict, write

from orchestrator.cli import app

SPEC_KEYS = {"pass", "stage", "missing", "violations", "rationale", "metrics"}


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["validate", *args])
    return result.exit_code, result.stdout, result.stderr


def rules_file(folder: Path, text: str) -> Path:
    path = folder / "rules.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def deck_rules(tmp_path: Path) -> Path:
    return rules_file(tmp_path, "required:\n  - {path: build/deck.pptx, kind: pptx, slides: 5}\n")


def test_a_passing_contract_prints_the_report_and_exits_0(out: Path, deck_rules: Path) -> None:
    make_deck(out / "build" / "deck.pptx", 5)
    code, stdout, _ = run_cli(str(out), "--rules", str(deck_rules), "--json")
    report = json.loads(stdout)
    assert code == 0
    assert report.keys() >= SPEC_KEYS
    assert report["pass"] is True and report["stage"] == "contract" and report["metrics"]["files"] == 1
    assert report["files"][0]["path"] == "build/deck.pptx" and len(report["files"][0]["sha256"]) == 64


def test_a_four_slide_deck_exits_1_with_the_precise_violation(out: Path, deck_rules: Path) -> None:
    make_deck(out / "build" / "deck.pptx", 4)
    code, stdout, _ = run_cli(str(out), "--rules", str(deck_rules), "--json")
    report = json.loads(stdout)
    assert code == 1
    assert report["pass"] is False and report["stage"] == "contract"
    assert report["violations"] == ["build/deck.pptx has 4 slides, 5 required"]


def test_without_rules_the_contract_checks_what_was_produced(out: Path) -> None:
    write(out / "ok.json", "{}")
    assert run_cli(str(out), "--json")[0] == 0
    write(out / "bad.json", "{")
    assert run_cli(str(out), "--json")[0] == 1


def test_malformed_rules_exit_2_with_a_json_error(tmp_path: Path, out: Path) -> None:
    bad = rules_file(tmp_path, "required:\n  - {path: a.pptx, slides: many}\n")
    code, stdout, _ = run_cli(str(out), "--rules", str(bad), "--json")
    error = json.loads(stdout)
    assert code == 2
    assert error["ok"] is False and error["error"] == "ValidationRulesError"
    assert "required.0.slides" in error["message"] and str(bad) in error["message"]
    assert error["next_step"]


def test_bad_usage_exits_2(tmp_path: Path, out: Path) -> None:
    code, stdout, _ = run_cli(str(tmp_path / "nowhere"), "--json")
    assert code == 2 and "output folder not found" in json.loads(stdout)["message"]
    assert run_cli(str(out), "--qa-mode", "sometimes")[0] == 2
    code, stdout, _ = run_cli(str(out), "--model", "magic:thing", "--json")
    assert code == 2 and json.loads(stdout)["error"] == "ConfigError"


def test_without_json_a_readable_summary_is_printed(out: Path, deck_rules: Path) -> None:
    make_deck(out / "build" / "deck.pptx", 4)
    code, stdout, _ = run_cli(str(out), "--rules", str(deck_rules))
    assert code == 1
    assert "FAIL at stage contract" in stdout
    assert "violation: build/deck.pptx has 4 slides, 5 required" in stdout


# through the scripted model server (real HTTP, real openai client) -----------------------------------------


def scenario(folder: Path, answer: str, *, not_contains: str = "NEVER-SENT") -> Path:
    path = folder / "scenario.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            goal: validate a deck
            steps:
              - purpose: semantic
                expect:
                  contains: ["Expected outputs", "build/deck.pptx"]
                  not_contains: [{json.dumps(not_contains)}]
                reply:
                  content: {json.dumps(answer)}
            """
        ),
        encoding="utf-8",
    )
    return path


def test_a_failed_contract_sends_nothing_to_the_model_server(
    tmp_path: Path, out: Path, deck_rules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("ORCH_SCRIPTED_TRACE", str(trace))
    make_deck(out / "build" / "deck.pptx", 4)
    model = f"scripted:{scenario(tmp_path, verdict(True))}"
    code, stdout, _ = run_cli(str(out), "--rules", str(deck_rules), "--model", model, "--json")
    assert code == 1 and json.loads(stdout)["stage"] == "contract"
    assert not trace.exists() or trace.read_text() == ""


def test_a_passing_contract_gets_the_semantic_verdict_of_the_model(
    tmp_path: Path, out: Path, deck_rules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("ORCH_SCRIPTED_TRACE", str(trace))
    make_deck(out / "build" / "deck.pptx", 5)
    write(out / "build" / "notes.md", "Speaker notes. " + "z" * 600 + "END-OF-NOTES")
    answer = verdict(False, violations=["build/deck.pptx: no brand colours"], rationale="Off-brand.")
    model = f"scripted:{scenario(tmp_path, answer, not_contains='END-OF-NOTES')}"
    code, stdout, stderr = run_cli(
        str(out),
        "--rules",
        str(deck_rules),
        "--model",
        model,
        "--expected",
        "5 slides, brand colours",
        "--json",
    )
    report = json.loads(stdout)
    assert code == 1, stderr
    assert report["stage"] == "semantic" and report["pass"] is False
    assert (
        report["violations"] == ["build/deck.pptx: no brand colours"] and report["rationale"] == "Off-brand."
    )
    assert report["tokens_in"] > 0
    [request] = [json.loads(line) for line in trace.read_text().splitlines()]
    assert "5 slides, brand colours" in json.dumps(request)


def test_the_real_entry_point_prints_only_json_on_stdout(out: Path, deck_rules: Path) -> None:
    make_deck(out / "build" / "deck.pptx", 5)
    env = {**os.environ, "ORCH_LOG_LEVEL": "INFO"}
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", "validate", str(out), "--rules", str(deck_rules), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pass"] is True
    assert '"event": "validate.contract"' in result.stderr
