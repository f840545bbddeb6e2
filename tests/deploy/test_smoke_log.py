"""The CI smoke suite's log: its command lines (Chromium's URLs with Flower's login, the broker URL) and its FAIL
line never show this run's Redis password or Flower login."""

from __future__ import annotations

import base64
import importlib.util
import secrets
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def smoke() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compose_smoke_under_test", ROOT / "ops" / "ci" / "compose_smoke.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_printed_command_line_hides_the_flower_login_and_the_redis_password(smoke, capsys) -> None:
    password, login = secrets.token_urlsafe(24), f"smoke:{secrets.token_urlsafe(16)}"
    smoke.hide(password, login, login.partition(":")[2])
    smoke.run([sys.executable, "-c", "pass", "--dump-dom", f"http://{login}@127.0.0.1:5555/tasks",
               f"redis://:{password}@127.0.0.1:6390/0", f"--flower-login={login}", password])
    printed = capsys.readouterr().out
    assert "--dump-dom" in printed and "127.0.0.1:5555/tasks" in printed  # the command is still readable
    for secret in (password, login, login.partition(":")[2]):
        assert secret not in printed


def test_a_failure_message_is_masked_before_it_is_printed(smoke) -> None:
    password = secrets.token_urlsafe(24)
    basic = base64.b64encode(f"smoke:{password}".encode()).decode()
    smoke.hide(password, basic)
    text = smoke.masked(f"redis said NOAUTH for {password}; header Basic {basic}; OPENAI_API_KEY=sk-abcdefghijkl")
    assert password not in text and basic not in text and "sk-abcdefghijkl" not in text
    assert "NOAUTH" in text
