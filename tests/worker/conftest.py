"""Fixtures of the distributed-mode tests: a private Redis and a cluster of real worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_helpers import Cluster, RedisServer


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh Redis and no workers yet: for tests that kill or restart things."""
    server = RedisServer(tmp_path / "redis").start()
    c = Cluster(root=tmp_path, redis=server)
    yield c
    c.stop_all()
    server.stop()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One Redis and one running worker shared by a module's tests (use distinct job ids)."""
    root = tmp_path_factory.mktemp("cluster")
    server = RedisServer(root / "redis").start()
    c = Cluster(root=root, redis=server)
    c.start_worker("w1")
    yield c
    c.stop_all()
    server.stop()
