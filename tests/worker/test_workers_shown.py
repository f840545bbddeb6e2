"""Workers people can see: a worker that is up but not ready (here: its model server does not answer) is listed with
its reason beside a ready one in ``jobs`` (a workers section), ``jobs --workers --json``, a batch's JSON and Flower
(``/api/workers`` and the worker's page: its readiness in the inspect stats, only the standby queue consumed); its
log never says Celery's ``ready.`` (only a worker whose checks passed does, after them).

Real Redis (a private server), real Celery workers, real Flower, the real CLI."""

from __future__ import annotations

import json
import re
from typing import Any

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


def test_flower_shows_a_not_ready_worker_as_not_ready_with_its_reason(cluster: Cluster) -> None:
    cluster.start_worker("good")
    cluster.settings_env["ORCH_WORKER__CHECK_MODEL"] = "true"  # its model server (127.0.0.1:9) does not answer
    cluster.start_worker("lame")
    ledger = cluster.ledger()

    def both_known() -> dict[str, Any] | None:
        seen = {w["name"].split("@")[0]: w for w in ledger.workers()}
        ok = "good" in seen and "lame" in seen and seen["good"]["ready"] and bool(seen["lame"]["missing"])
        return seen if ok else None

    seen = wait_for(both_known, 120, "one worker ready and one not, with its reason")
    reason = seen["lame"]["missing"][0]
    flower_get = cluster.start_flower()

    def shown() -> dict[str, Any] | None:
        workers = json.loads(flower_get("/api/workers?refresh=1"))
        named = {name.split("@")[0]: info for name, info in workers.items() if isinstance(info, dict)}
        return named if {"good", "lame"} <= {n for n, i in named.items() if "stats" in i} else None

    workers = wait_for(shown, 90, "Flower's /api/workers to list both workers with their stats", every_s=2)
    assert workers["good"]["stats"]["orchestrator_readiness"] == "ready"
    assert workers["good"]["stats"]["orchestrator_missing"] == []
    lame = workers["lame"]["stats"]
    assert lame["orchestrator_readiness"].startswith("not ready: ") and reason[:40] in lame["orchestrator_readiness"]
    assert lame["orchestrator_missing"] and reason[:40] in lame["orchestrator_missing"][0]
    assert [q["name"] for q in workers["lame"]["active_queues"]] == ["orchestrator.standby"]

    lame_name = seen["lame"]["name"]
    page = flower_get(f"/worker/{lame_name}").decode()
    assert "orchestrator_readiness" in page and "not ready: " in page
