"""``model.profile``: hosted (a fast API) or local (a slow server on this machine) picks the defaults that depend on
the model's speed; anything set explicitly still wins."""

from __future__ import annotations

import pytest

from orchestrator.config import ModelSettings, Settings, load_settings
from orchestrator.errors import ConfigError


def test_the_hosted_profile_keeps_the_design_defaults() -> None:
    settings = load_settings()
    assert settings.model.profile == "hosted"
    assert (settings.model.request_timeout_s, settings.model.max_tokens) == (60, 4096)
    assert settings.limits.time_budget_ms == 120_000
    assert (settings.limits.goal_token_budget, settings.limits.goal_model_calls) == (300_000, 60)


def test_the_local_profile_gives_a_slow_server_time_and_bounds_its_replies() -> None:
    settings = load_settings(model={"profile": "local"})
    assert settings.model.request_timeout_s >= 600 and settings.model.max_retries == 0
    assert settings.model.max_tokens == 1024 and settings.model.max_tokens_for("reflect") <= 256
    assert settings.limits.time_budget_ms >= 1_200_000
    assert settings.disclosure.act_request_max_tokens <= 12_000  # a 16k context holds the request and the reply
    assert settings.limits.max_tool_calls == 24  # what the profile does not name keeps its default
    assert (settings.limits.goal_token_budget, settings.limits.goal_model_calls) == (150_000, 40)
    # a small model restates only goals not in English, and briefly (docs/concepts/choosing-skills.md)
    assert settings.selection.restate == "other-languages" and settings.model.max_tokens_for("select") <= 96
    assert load_settings().selection.restate == "always"


def test_explicit_settings_win_over_the_profile(tmp_path, monkeypatch) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(
        "skillruntime:\n  model: {profile: local, max_tokens: 2048}\n"
        "  limits: {time_budget_ms: 5000, goal_model_calls: 9}\n"
    )
    monkeypatch.setenv("ORCH_MODEL__REQUEST_TIMEOUT_S", "120")
    settings = load_settings(config)
    assert settings.model.max_tokens == 2048
    assert settings.limits.time_budget_ms == 5000
    assert settings.limits.goal_model_calls == 9 and settings.limits.goal_token_budget == 150_000
    assert settings.model.request_timeout_s == 120
    assert Settings(model=ModelSettings(profile="local", max_retries=3)).model.max_retries == 3


def test_the_profile_can_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("ORCH_MODEL__PROFILE", "local")
    assert load_settings().model.max_tokens == 1024


def test_an_unknown_profile_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match="model.profile"):
        load_settings(model={"profile": "turbo"})


def test_model_settings_stay_hashable_for_clients_kept_by_them() -> None:
    settings = load_settings(model={"profile": "local", "max_tokens_by_purpose": {"act": 512}})
    assert hash(settings.model) == hash(settings.model.model_copy())
    assert settings.model.max_tokens_for("act") == 512 and settings.model.max_tokens_for("reflect") == 256
