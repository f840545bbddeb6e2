"""Logs are structlog JSON lines, and secrets or personal data are masked before anything is written."""

from __future__ import annotations

import io
import json

from orchestrator.logs import configure_logging, get_logger, mask_secrets


def test_log_lines_are_json_with_level_and_timestamp() -> None:
    stream = io.StringIO()
    configure_logging("INFO", json=True, stream=stream)
    get_logger("t").info("act.step", tool="run_script", ms=12)
    record = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert record["event"] == "act.step" and record["tool"] == "run_script" and record["level"] == "info"
    assert "timestamp" in record


def test_api_keys_tokens_and_emails_are_masked_before_writing() -> None:
    stream = io.StringIO()
    configure_logging("INFO", json=True, stream=stream)
    get_logger("t").info(
        "model.call",
        note="key sk-proj-abcdefghijklmnop1234 sent by jane.doe@example.com with Bearer abcdefghijklmnopqrstuvwx",
        api_key="plain-secret-value",
        headers={"Authorization": "Basic dXNlcjpwYXNz"},
        tokens_in=1234,
    )
    line = stream.getvalue()
    for secret in ("sk-proj-abcdefghijklmnop1234", "jane.doe@example.com", "abcdefghijklmnopqrstuvwx",
                   "plain-secret-value", "dXNlcjpwYXNz"):
        assert secret not in line
    assert json.loads(line.strip().splitlines()[-1])["tokens_in"] == 1234


def test_mask_secrets_keeps_ordinary_text() -> None:
    text = "tool read_ref read 3 files; tokens_in=10"
    assert mask_secrets(text) == text
    assert mask_secrets("password: hunter22") == "password: ***"
    assert "0123456789abcdefghijABCD" not in mask_secrets("token ghp_0123456789abcdefghijABCD")


def test_a_password_holding_an_at_sign_is_masked_whole() -> None:
    # URL parsers take the user part up to the authority's last "@": so must the mask, or the rest of it leaks.
    for url in ("https://user:p@ss@host/v1", "https://u:p@ss@w@rd@host:8080/v1"):
        masked = mask_secrets(f"model at {url} failed")
        assert masked.startswith("model at https://***:***@host") and "ss@" not in masked and "rd@" not in masked


def test_a_token_alone_in_the_user_part_of_a_url_is_masked() -> None:
    assert mask_secrets("base https://tok3nvalue@proxy.local/v1 down") == "base https://***@proxy.local/v1 down"
    assert mask_secrets("clone git+ssh://git@github.com/o/r") == "clone git+ssh://***@github.com/o/r"


def test_urls_without_credentials_are_left_alone() -> None:
    for text in ("https://example.com/x", "http://h/p?x=1@y", "see https://example.com/@user"):
        assert mask_secrets(text) == text


def test_logging_follows_stderr_after_a_stand_in_was_swapped_in_and_closed(monkeypatch, capsys) -> None:
    stand_in = io.StringIO()
    with monkeypatch.context() as m:
        m.setattr("sys.stderr", stand_in)
        configure_logging("INFO", json=True)  # set up while stderr is the stand-in (as inside a CLI test runner)
        get_logger("t").info("during")
    stand_in.close()
    get_logger("t").info("after", n=1)
    record = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert record["event"] == "after" and record["n"] == 1
