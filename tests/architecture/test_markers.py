"""Test markers mean what they say: ``-m "not redis"`` runs no test that needs Redis (no worker cluster either),
``-m "not docker"`` none that needs the engine. They are read from the fixtures and code a test runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _collected(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]
    return {line.strip() for line in done.stdout.splitlines() if "::" in line}


def test_not_redis_leaves_out_every_test_that_starts_redis_or_a_cluster() -> None:
    tests = _collected("-m", "not redis", "tests/worker")
    needing = {"test_ledger.py", "test_batch.py", "test_faults.py", "test_select_jobs.py", "test_drivers_agree.py",
               "test_tenancy_worker.py", "test_operator_truth.py", "test_producer_control.py"}
    assert not {t for t in tests if Path(t.split("::")[0]).name in needing}, tests
    assert not [t for t in tests if "over_tls" in t or "anonymous_clients_are_refused" in t]  # a TLS Redis of its own
    acl_page = "tests/worker/test_redis_auth.py::test_the_several_machines_page_shows_the_same_acl_file"
    assert acl_page in tests  # needs nothing


def test_not_docker_leaves_out_the_cluster_tests_and_the_cli_runs() -> None:
    tests = _collected("-m", "not docker", "tests/worker", "tests/e2e")
    names = {Path(t.split("::")[0]).name for t in tests}
    assert not names & {"test_faults.py", "test_select_jobs.py", "test_run_cli.py"}, names
