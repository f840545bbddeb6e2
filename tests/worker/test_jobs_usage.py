"""Usage errors of `jobs` come first: a bad option is named (exit 2) before Redis is asked, reachable or not."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from worker_helpers import REPO

NOWHERE = "redis://127.0.0.1:9/0"  # nothing listens there: a Redis error would show instead of the usage error


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--state", "bogus"], "--state 'bogus': expected one of queued"),
        (["--trace"], "--trace needs a job id"),
        (["--report", "r.html"], "--report needs --batch B"),
        (["j1", "--cancel", "--rerun"], "one of --cancel, --rerun at a time"),
    ],
)
def test_a_bad_option_is_named_before_redis_is_asked(args: list[str], said: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "jobs", *args], cwd=REPO, env={**env, "ORCH_BROKER_URL": NOWHERE},
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert said in done.stderr and "cannot reach Redis" not in done.stderr
