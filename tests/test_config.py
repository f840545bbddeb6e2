"""Settings: seed defaults, a YAML file shaped like the seed's `skillruntime:` block, then ORCH_* variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError


def test_defaults_are_the_seed_budgets() -> None:
    limits = load_settings().limits
    assert (limits.max_tool_calls, limits.time_budget_ms, limits.token_budget) == (24, 120_000, 60_000)
    assert (limits.script_timeout_s, limits.disk_write_limit_mb) == (20, 50)
    settings = load_settings()
    assert settings.model.temperature == 0 and settings.qa.mode == "final"


def test_a_skillruntime_yaml_block_overrides_the_defaults(tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("skillruntime:\n  qa:\n    mode: step\n  supervisor:\n    response: SCORED\n"
                      "  limits:\n    max_tool_calls: 20\n    disk_write_limit_mb: 5\n")
    settings = load_settings(config)
    assert settings.qa.mode == "step" and settings.supervisor.response == "SCORED"
    assert settings.limits.max_tool_calls == 20 and settings.limits.disk_write_limit_mb == 5
    assert settings.limits.token_budget == 60_000


def test_environment_variables_override_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("limits:\n  max_tool_calls: 20\n")
    monkeypatch.setenv("ORCH_LIMITS__MAX_TOOL_CALLS", "7")
    monkeypatch.setenv("ORCH_SANDBOX__MEMORY_MB", "256")
    settings = load_settings(config)
    assert settings.limits.max_tool_calls == 7 and settings.sandbox.memory_mb == 256


def test_the_config_file_can_be_named_by_orch_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "s.yaml"
    config.write_text("qa: {mode: 'off'}\n")
    monkeypatch.setenv("ORCH_CONFIG", str(config))
    assert load_settings().qa.mode == "off"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("limits:\n  max_tool_calls: 0\n", "limits.max_tool_calls"),
        ("limits:\n  max_tool_call: 3\n", "limits.max_tool_call"),
        ("qa: {mode: sometimes}\n", "qa.mode"),
        ("limits: [1, 2\n", "not valid YAML"),
        ("- just\n- a list\n", "must hold a mapping"),
    ],
)
def test_a_bad_settings_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert message in str(caught.value)


def test_a_missing_settings_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="settings file not found"):
        load_settings(tmp_path / "nope.yaml")
