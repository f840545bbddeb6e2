"""Workers people can see: a worker that is up but not ready (here: its model server does not answer) is listed with
its reason beside a ready one in ``jobs`` (a workers section), ``jobs --workers --json`` and a batch's JSON; its log
never says Celery's ``ready.`` (only a worker whose checks passed does, after them).

Real Redis (a private server), real Celery workers, the real CLI."""

from __future__ import annotations

import json
import re

from worker_helpers import Cluster, goal_line, wait_for


def test_a_worker_that_is_not_ready_is_named_with_its_reason_beside_a_ready_one(cluster: Cluster) -> None:
    cluster.start_worker("good")
    cluster.settings_env["ORCH_WORKER__CHECK_MODEL"] = "true"  # its model server (127.0.0.1:9) does not answer
    cluster.start_worker("lame")
    ledger = cluster.ledger()

    def both_known() -> bool:
        seen = {w["name"].split("@")[0]: w for w in ledger.workers()}
        return "good" in seen and "lame" in seen and seen["good"]["ready"] and bool(seen["lame"]["missing"])

    wait_for(both_known, 120, "one worker ready and one not, with its reason")
    workers = {w["name"].split("@")[0]: w for w in json.loads(cluster.cli("jobs", "--workers", "--json").stdout)}
    assert workers["good"]["ready"] is True and workers["good"]["missing"] == []
    assert workers["lame"]["ready"] is False and workers["lame"]["missing"]
    reason = workers["lame"]["missing"][0]
    table = cluster.cli("jobs").stdout
    assert "workers" in table and "not ready" in table and reason[:40] in table

    assert cluster.cli("submit", "-", "--batch", "seen", stdin=goal_line("seen-1")).returncode == 0
    batch = json.loads(cluster.cli("jobs", "--batch", "seen", "--json").stdout)
    assert {w["name"].split("@")[0]: w["ready"] for w in batch["workers"]} == {"good": True, "lame": False}

    lame_log = cluster.log("lame")
    assert "worker.not_ready" in lame_log
    assert not re.search(r"lame@\S+ ready\.", lame_log), lame_log[-3000:]
    said = wait_for(lambda: re.search(r"good@\S+ ready\.", cluster.log("good")), 30, "the ready worker's ready.")
    assert 0 <= cluster.log("good").find("worker.ready") < said.start()  # after its checks passed, not before
