"""Several producers submitting at once through the API: nothing is lost, nothing is mixed up."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from api_helpers import ApiServer, goal

PRODUCERS = 4
REQUESTS_EACH = 5
LINES_EACH = 4


def test_concurrent_submits_from_several_producers_lose_nothing(door: ApiServer) -> None:
    clients = {f"p{n}": door.producer(f"p{n}") for n in range(PRODUCERS)}

    def submit(name: str, request: int) -> list[str]:
        lines = [goal(f"{name}-{request}-{line}") for line in range(LINES_EACH)]
        parts = {"goals": ("g.jsonl", "\n".join(json.dumps({**ln, "inputs": ["in.txt"]}) for ln in lines)),
                 "in.txt": ("in.txt", f"{name} {request}".encode())}
        answer = clients[name].post("/v1/jobs", files=parts, params={"batch": f"{name}-batch"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["rejected"] == []
        return [a["job_id"] for a in answer.json()["accepted"]]

    with ThreadPoolExecutor(max_workers=PRODUCERS * 2) as pool:
        futures = [pool.submit(submit, name, r) for name in clients for r in range(REQUESTS_EACH)]
        accepted = [job for f in futures for job in f.result()]
    assert len(accepted) == len(set(accepted)) == PRODUCERS * REQUESTS_EACH * LINES_EACH
    assert sorted(door.ledger.job_ids()) == sorted(accepted)
    for name, client in clients.items():
        mine = client.get("/v1/jobs", params={"limit": 1000}).json()
        assert sorted(j["job_id"] for j in mine) == sorted(j for j in accepted if j.startswith(f"{name}-"))
        batch = client.get(f"/v1/batches/{name}-batch").json()
        assert len(batch["jobs"]) == REQUESTS_EACH * LINES_EACH
        record = door.ledger.get(f"{name}-0-0")
        assert record.owner == name and door.ledger.r.exists(f"orch:blob:{record.request.inputs[0].sha256}")
