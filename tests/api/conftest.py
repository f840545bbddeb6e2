"""Fixtures of the front-door tests: a private Redis and a real API server on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import ApiServer, RedisServer, door_settings


@pytest.fixture
def door(tmp_path: Path) -> Iterator[ApiServer]:
    server = RedisServer(tmp_path / "redis").start()
    api = ApiServer(door_settings(tmp_path, server.url)).start()
    yield api
    api.stop()
    server.stop()
