"""Attacks on the producers' front door: two producers with their own keys and an admin, a real API server on a
real Redis. Every attempt on another producer's job or batch is answered as a job that does not exist and changes
nothing; no key, a wrong key and a revoked key are refused."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import httpx
from api_helpers import ApiServer, goal

from orchestrator.worker.records import JobRecord


def _submit(client: httpx.Client, *lines: dict[str, Any], batch: str | None = None, **files: bytes) -> dict[str, Any]:
    params = {"batch": batch} if batch else {}
    if files:
        parts: dict[str, Any] = {"goals": ("goals.jsonl", "\n".join(json.dumps(line) for line in lines))}
        parts.update({name: (name.rsplit("/", 1)[-1], data) for name, data in files.items()})
        answer = client.post("/v1/jobs", files=parts, params=params)
    else:
        answer = client.post("/v1/jobs", json=list(lines), params=params)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _snapshot(door: ApiServer, job_id: str) -> dict[str, Any]:
    record = door.ledger.get(job_id)
    assert record is not None
    return record.model_dump(mode="json")


def _finish(door: ApiServer, job_id: str, files: dict[str, bytes], state: str = "done") -> JobRecord:
    """What a worker leaves when a job ends: its files in its own folder, the ledger's end state and artifacts."""
    import hashlib

    folder = door.settings.output_root / job_id
    artifacts = []
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
        artifacts.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    door.ledger.update(job_id, state=state, artifacts=artifacts, finished_at=1.0, next="end",
                       result={"status": state, "out_dir": str(folder)})
    record = door.ledger.get(job_id)
    assert record is not None
    return record


def test_no_key_a_wrong_key_a_malformed_header_and_a_revoked_key_are_refused(door: ApiServer) -> None:
    assert door.client(None).get("/healthz").status_code == 200
    assert door.client(None).get("/openapi.json").status_code == 200
    for client in (door.client(None), door.client("orch-not-a-key"), door.client("x" * 5000)):
        for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", "/v1/jobs/x"),
                             ("GET", "/v1/batches/b"), ("POST", "/v1/jobs/x/cancel")):
            answer = client.request(method, path)
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.headers["www-authenticate"] == "Bearer"
    for client in (door.client(None), door.client("orch-not-a-key")):  # URLs no route serves say nothing either
        for path in ("/v1/jobs/x/files/%0A0", "/v1/no-such-thing", "/v1/jobs/x/y/z"):
            answer = client.get(path)
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer", (path, answer.text)
    basic = httpx.get(f"{door.url}/v1/jobs", headers={"Authorization": "Basic YWxpY2U6eA=="})
    assert basic.status_code == 401
    _, secret = door.keys.create("carol")
    carol = door.client(secret)
    assert carol.get("/v1/jobs").status_code == 200
    assert carol.get("/v1/jobs/x/files/%0A0").status_code == 404  # with a key, a URL no route serves is not found
    assert carol.get("/nowhere").status_code == 404
    assert door.keys.revoke("carol")
    assert carol.get("/v1/jobs").status_code == 401
    assert carol.post("/v1/jobs", json=[goal("c1")]).status_code == 401
    assert door.ledger.get("c1") is None


def test_only_the_keys_hash_is_kept_in_redis(door: ApiServer) -> None:
    key, secret = door.keys.create("dave")
    dump = b"".join(door.ledger.r.dump(k) or b"" for k in door.ledger.r.keys("*"))
    assert secret.encode() not in dump
    assert key.sha256.encode() in dump


def test_another_producers_job_answers_404_exactly_as_a_missing_one_and_changes_nothing(door: ApiServer) -> None:
    alice, bob = door.producer("alice"), door.producer("bob")
    report = _submit(alice, goal("alice-1", inputs=["notes.csv"]), batch="alice-batch", **{"notes.csv": b"a,b\n1,2\n"})
    assert [a["job_id"] for a in report["accepted"]] == ["alice-1"]
    sha = door.ledger.get("alice-1").request.inputs[0].sha256
    before = _snapshot(door, "alice-1")

    def same_as_missing(method: str, path: str) -> None:
        theirs = bob.request(method, path.format(job="alice-1", batch="alice-batch"))
        missing = bob.request(method, path.format(job="nobody-1", batch="nobody-batch"))
        assert theirs.status_code == missing.status_code == 404, (path, theirs.text)
        assert theirs.json()["detail"].replace("alice-1", "X").replace("alice-batch", "X") == \
            missing.json()["detail"].replace("nobody-1", "X").replace("nobody-batch", "X")
        assert "alice" not in theirs.text.replace("alice-1", "").replace("alice-batch", "") and sha not in theirs.text

    for method, path in (("GET", "/v1/jobs/{job}"), ("GET", "/v1/jobs/{job}/files"),
                         ("GET", "/v1/jobs/{job}/files/brand.json"), ("POST", "/v1/jobs/{job}/cancel"),
                         ("POST", "/v1/jobs/{job}/rerun"), ("GET", "/v1/batches/{batch}"),
                         ("GET", "/v1/batches/{batch}/report"), ("POST", "/v1/batches/{batch}/cancel"),
                         ("POST", "/v1/batches/{batch}/rerun"), ("GET", "/v1/batches/{batch}/files")):
        same_as_missing(method, path)
    for query in ({}, {"batch": "alice-batch"}, {"state": "queued"}, {"limit": 1000}):
        listed = bob.get("/v1/jobs", params=query)
        assert listed.status_code == 200 and listed.json() == [], listed.text
    # Taking over the job id, as a new line or as a re-run, is refused without a word about the job.
    for rerun in (False, True):
        answer = bob.post("/v1/jobs", json=[goal("alice-1", goal="something else")], params={"rerun": rerun}).json()
        assert answer["accepted"] == [] and answer["rejected"][0]["reason"] == "job_id: alice-1 is taken: choose " \
            "another id"
    identical = bob.post("/v1/jobs", json=[door.ledger.get("alice-1").request.model_dump(exclude={"inputs"})]).json()
    assert identical["accepted"] == [] and "queued" not in json.dumps(identical)
    assert _snapshot(door, "alice-1") == before
    assert sha not in json.dumps(identical)


def test_a_shared_batch_name_shows_each_producer_only_its_own_jobs(door: ApiServer) -> None:
    alice, bob, admin = door.producer("alice"), door.producer("bob"), door.producer("root", admin=True)
    _submit(alice, goal("a-1"), batch="nightly")
    _submit(bob, goal("b-1"), batch="nightly")
    assert [j["job_id"] for j in alice.get("/v1/batches/nightly").json()["jobs"]] == ["a-1"]
    assert [j["job_id"] for j in bob.get("/v1/batches/nightly").json()["jobs"]] == ["b-1"]
    assert sorted(j["job_id"] for j in admin.get("/v1/batches/nightly").json()["jobs"]) == ["a-1", "b-1"]
    assert [j["job_id"] for j in bob.post("/v1/batches/nightly/cancel").json()["jobs"]] == ["b-1"]
    assert door.ledger.get("a-1").state == "queued" and door.ledger.get("b-1").state == "cancelled"
    assert sorted(j["job_id"] for j in admin.get("/v1/jobs").json()) == ["a-1", "b-1"]
    assert admin.get("/v1/jobs/a-1").json()["owner"] == "alice"
    assert admin.post("/v1/jobs/a-1/cancel").json()["outcome"] == "cancelled"


def test_an_input_is_only_ever_a_part_of_the_same_request_never_a_path_on_the_server(door: ApiServer) -> None:
    alice = door.producer("alice")
    secret_file = door.settings.output_root.parent / "server-secret.txt"
    secret_file.write_text("the server's own file")
    report = _submit(alice, goal("p-1", inputs=[str(secret_file)]), goal("p-2", inputs=["/etc/passwd"]))
    assert report["accepted"] == [] and [r["line"] for r in report["rejected"]] == [1, 2]
    assert all("was not sent" in r["reason"] for r in report["rejected"])
    hostile = _submit(alice, goal("p-3", inputs=["../../x"]), goal("p-4", inputs=[".hidden"]),
                      goal("p-5", inputs=["a\nb"]), **{"../../x": b"1", ".hidden": b"2", "a\nb": b"3"})
    assert [a["job_id"] for a in hostile["accepted"]] == ["p-3"]  # a client's relative name: only its last part
    assert [ref.name for ref in door.ledger.get("p-3").request.inputs] == ["x"]
    assert [r["line"] for r in hostile["rejected"]] == [2, 3]


def test_caps_on_body_lines_and_files_refuse_before_anything_is_stored(door: ApiServer, tmp_path: Any) -> None:
    from api_helpers import RedisServer, door_settings

    server = RedisServer(tmp_path / "redis2").start()
    small = ApiServer(door_settings(tmp_path / "small", server.url,
                                    api={"max_body_mb": 0.05, "max_lines": 3, "max_files": 2})).start()
    try:
        alice = small.producer("alice")
        big = alice.post("/v1/jobs", files={"goals": ("g", json.dumps(goal("c-1", inputs=["big"]))),
                                            "big": ("big", b"x" * 200_000)})
        assert big.status_code == 413, big.text
        streamed = alice.post("/v1/jobs", content=iter([b"[", b" " * 60_000, b"]"]),
                              headers={"content-type": "application/json"})
        assert streamed.status_code == 413, streamed.text
        lines = alice.post("/v1/jobs", json=[goal(f"c-{n}") for n in range(4)])
        assert lines.status_code == 413 and "3 goal lines" in lines.json()["detail"]
        many = {"goals": ("g", json.dumps(goal("c-9", inputs=["f1", "f2", "f3"])))}
        many.update({f"f{n}": (f"f{n}", b"1") for n in (1, 2, 3)})
        assert alice.post("/v1/jobs", files=many).status_code == 413
        assert small.ledger.job_ids() == [] and not small.ledger.r.keys("orch:blob:*")
    finally:
        small.stop()
        server.stop()


def test_quotas_answer_429_with_what_is_left_and_store_nothing(door: ApiServer) -> None:
    alice = door.producer("alice", max_active_jobs=2, max_input_mb=0.001)
    over = alice.post("/v1/jobs", json=[goal(f"q-{n}") for n in range(3)])
    assert over.status_code == 429, over.text
    assert over.json()["quota"] == "active_jobs" and over.json()["left"] == 2 and over.json()["limit"] == 2
    assert door.ledger.job_ids() == []
    assert alice.post("/v1/jobs", json=[goal("q-1")]).status_code == 200
    big = alice.post("/v1/jobs", files={"goals": ("g", json.dumps(goal("q-2", inputs=["d"]))), "d": ("d", b"x" * 2000)})
    assert big.status_code == 429 and big.json()["quota"] == "input_bytes" and big.json()["left"] == 1048
    assert alice.post("/v1/jobs", json=[goal("q-3")]).status_code == 200
    full = alice.post("/v1/jobs", json=[goal("q-4")])
    assert full.status_code == 429 and full.json()["left"] == 0
    assert alice.post("/v1/jobs/q-1/cancel").status_code == 200  # an ended job frees its place
    assert alice.post("/v1/jobs", json=[goal("q-4")]).status_code == 200


def test_downloads_serve_an_ended_jobs_checked_files_and_say_a_running_job_has_not_ended(door: ApiServer) -> None:
    alice = door.producer("alice")
    _submit(alice, goal("d-1"))
    running = alice.get("/v1/jobs/d-1/files")
    assert running.status_code == 409 and "has not ended" in running.json()["detail"]
    assert alice.get("/v1/jobs/d-1/files/brand.json").status_code == 409
    _finish(door, "d-1", {"brand.json": b'{"ok": true}', "deck/slides.txt": b"one\ntwo\n", "tampered.txt": b"v1"})
    folder = door.settings.output_root / "d-1"
    (folder / "tampered.txt").write_bytes(b"v2 written after the job ended")
    (folder / "escape").symlink_to("/etc/passwd")
    (folder / "linked-dir").symlink_to("/etc", target_is_directory=True)
    archive = alice.get("/v1/jobs/d-1/files")
    assert archive.status_code == 200 and archive.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(archive.content)) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("manifest.json"))
        assert z.read("files/deck/slides.txt") == b"one\ntwo\n"
    assert {"files/brand.json", "files/deck/slides.txt", "evidence/job.json", "evidence/result.json"} <= names
    assert not [n for n in names if "tampered" in n or "escape" in n or "linked-dir" in n or "passwd" in n]
    assert {s["path"] for s in manifest["skipped"]} == {"tampered.txt", "escape", "linked-dir"}
    one = alice.get("/v1/jobs/d-1/files/deck/slides.txt")
    import hashlib

    assert one.content == b"one\ntwo\n" and one.headers["x-content-sha256"] == hashlib.sha256(one.content).hexdigest()
    for bad in ("../d-1/brand.json", "escape", "linked-dir/passwd", "tampered.txt", "%2e%2e/x", "missing"):
        assert alice.get(f"/v1/jobs/d-1/files/{bad}").status_code == 404, bad


def test_cancel_and_rerun_of_ones_own_jobs_and_batches(door: ApiServer) -> None:
    alice = door.producer("alice")
    _submit(alice, goal("r-1"), goal("r-2"), goal("r-3"), batch="mine")
    assert alice.post("/v1/jobs/r-1/rerun").status_code == 409  # queued: nothing to run again
    first = alice.post("/v1/jobs/r-1/cancel")
    assert first.status_code == 200 and first.json()["outcome"] == "cancelled"
    again = alice.post("/v1/jobs/r-1/cancel")
    assert again.status_code == 409 and again.json()["outcome"] == "ended"
    _finish(door, "r-2", {}, state="failed")
    rerun = alice.post("/v1/batches/mine/rerun").json()
    assert [(j["job_id"], j["outcome"]) for j in rerun["jobs"]] == [("r-2", "queued")]  # not the cancelled r-1
    assert door.ledger.get("r-2").run == 2 and door.ledger.get("r-2").owner == "alice"
    cancelled = alice.post("/v1/batches/mine/cancel").json()
    assert sorted(j["job_id"] for j in cancelled["jobs"]) == ["r-2", "r-3"]
    assert alice.post("/v1/jobs/r-1/rerun").json()["outcome"] == "queued"
    batch = alice.get("/v1/batches/mine/files")
    with zipfile.ZipFile(io.BytesIO(batch.content)) as z:
        manifest = json.loads(z.read("manifest.json"))
    assert {j["job_id"]: bool(j.get("not_ended")) for j in manifest["jobs"]} == {"r-1": True, "r-2": False,
                                                                                  "r-3": False}
