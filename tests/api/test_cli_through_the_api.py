"""The CLI as a client of the API: with ``ORCH_API_URL`` and ``ORCH_API_KEY`` (and a Redis it cannot reach), a
producer's ``submit`` and ``jobs`` print what the operator's direct path prints, with the same exit codes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import REPO, ApiServer, RedisServer, door_settings, goal


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    env.update(extra)
    return env


class Paths:
    def __init__(self, door: ApiServer, root: Path, secret: str) -> None:
        self.door = door
        common = {"ORCH_OUTPUT_ROOT": str(door.settings.output_root), "ORCH_CACHE_DIR": str(root / "cache"),
                  "ORCH_SCENARIO_DIRS": json.dumps([str(REPO / "ops" / "scenarios")])}
        # The producer holds no Redis credentials: its Redis URL leads nowhere, so only the API can answer.
        self.producer = _env(ORCH_API_URL=door.url, ORCH_API_KEY=secret, ORCH_BROKER_URL="redis://127.0.0.1:9/0",
                             **common)
        self.operator = _env(ORCH_BROKER_URL=door.settings.broker_url, **common)

    def run(self, who: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = self.producer if who == "producer" else self.operator
        return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=REPO, env=env, input=stdin,
                              capture_output=True, text=True, timeout=120)


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[Paths]:
    server = RedisServer(tmp_path / "redis").start()
    door = ApiServer(door_settings(tmp_path, server.url)).start()
    _, secret = door.keys.create("alice")
    yield Paths(door, tmp_path, secret)
    door.stop()
    server.stop()


def _finish(door: ApiServer, job_id: str, files: dict[str, bytes], state: str = "done") -> None:
    folder = door.settings.output_root / job_id
    artifacts = []
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
        artifacts.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    door.ledger.update(job_id, state=state, artifacts=artifacts, finished_at=2.0, next="end",
                       result={"status": state, "out_dir": str(folder)})


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def test_submit_and_jobs_through_the_api_answer_as_the_direct_path(paths: Paths, tmp_path: Path) -> None:
    data = tmp_path / "notes.csv"
    data.write_bytes(b"a,b\n1,2\n")
    lines = "\n".join([json.dumps(goal("cli-1", inputs=[str(data)])), "# a comment", "{not json",
                       json.dumps(goal("cli-2"))])
    sent = paths.run("producer", "submit", "-", "--json", "--batch", "cli-batch", stdin=lines)
    assert sent.returncode == 1, sent.stderr  # a line was rejected, as on the direct path
    report = _json(sent)
    assert [a["job_id"] for a in report["accepted"]] == ["cli-1", "cli-2"] and report["batch"] == "cli-batch"
    assert [r["line"] for r in report["rejected"]] == [3]
    stored = paths.door.ledger.get("cli-1")
    assert stored.owner == "alice" and stored.request.inputs[0].name == "notes.csv"
    # Reading a job: the same record on both paths.
    mine, theirs = paths.run("producer", "jobs", "cli-1", "--json"), paths.run("operator", "jobs", "cli-1", "--json")
    assert mine.returncode == theirs.returncode == 0, mine.stderr
    assert {k: v for k, v in _json(mine).items() if k != "note"} == \
        {k: v for k, v in _json(theirs).items() if k != "note"}
    listed = paths.run("producer", "jobs", "--json", "--state", "queued")
    assert sorted(j["job_id"] for j in _json(listed)) == ["cli-1", "cli-2"]
    missing = paths.run("producer", "jobs", "nobody", "--json")
    assert missing.returncode == 2 and "no job 'nobody'" in missing.stdout
    # Control: a running job's download says it has not ended; cancel, then cancel again; a refused re-run.
    early = paths.run("producer", "jobs", "cli-1", "--download", str(tmp_path / "early"), "--json")
    assert early.returncode == 1 and "has not ended" in " ".join(_json(early)["problems"])
    direct_early = paths.run("operator", "jobs", "cli-1", "--download", str(tmp_path / "early2"), "--json")
    assert direct_early.returncode == 1 and "has not ended" in " ".join(_json(direct_early)["problems"])
    assert paths.run("producer", "jobs", "cli-2", "--rerun").returncode == 1
    assert paths.run("producer", "jobs", "cli-2", "--cancel").returncode == 0
    again = paths.run("producer", "jobs", "cli-2", "--cancel", "--json")
    assert again.returncode == 1 and _json(again)["outcome"] == "ended"
    # Downloads of an ended job: its checked files and evidence, as the direct path lays them out.
    _finish(paths.door, "cli-1", {"brand.json": b'{"ok": true}', "deck/a.txt": b"x"})
    got = paths.run("producer", "jobs", "cli-1", "--download", str(tmp_path / "dl"), "--json")
    assert got.returncode == 0, got.stdout + got.stderr
    assert sorted(_json(got)["files"]) == ["brand.json", "deck/a.txt"]
    assert (tmp_path / "dl" / "files" / "deck" / "a.txt").read_bytes() == b"x"
    assert json.loads((tmp_path / "dl" / "evidence" / "job.json").read_text())["job_id"] == "cli-1"
    # The operator's direct path reads the output root too: no worker runs here, none is waited for.
    direct = paths.run("operator", "jobs", "cli-1", "--download", str(tmp_path / "dl2"), "--json")
    assert direct.returncode == 0 and sorted(_json(direct)["files"]) == ["brand.json", "deck/a.txt"], direct.stdout
    assert (tmp_path / "dl2" / "files" / "brand.json").read_bytes() == b'{"ok": true}'


def test_a_batch_is_cancelled_rerun_and_downloaded_in_one_command_on_either_path(paths: Paths, tmp_path: Path) -> None:
    lines = "\n".join(json.dumps(goal(f"bt-{n}")) for n in range(3))
    assert paths.run("producer", "submit", "-", "--batch", "bt", stdin=lines).returncode == 0
    _finish(paths.door, "bt-0", {"out.txt": b"zero"})
    _finish(paths.door, "bt-1", {}, state="failed")
    cancelled = paths.run("producer", "jobs", "--batch", "bt", "--cancel", "--json")
    assert cancelled.returncode == 0 and [j["job_id"] for j in _json(cancelled)["jobs"]] == ["bt-2"]
    rerun = paths.run("operator", "jobs", "--batch", "bt", "--rerun", "--json")  # an operator, directly
    assert rerun.returncode == 0 and [(j["job_id"], j["outcome"]) for j in _json(rerun)["jobs"]] == [("bt-1", "queued")]
    fetched = paths.run("producer", "jobs", "--batch", "bt", "--download", str(tmp_path / "b"), "--json")
    assert (tmp_path / "b" / "bt-0" / "files" / "out.txt").read_bytes() == b"zero"
    assert fetched.returncode == 1 and any("bt-1 has not ended" in p for p in _json(fetched)["problems"])
    direct = paths.run("operator", "jobs", "--batch", "bt", "--download", str(tmp_path / "c"), "--json")
    assert (tmp_path / "c" / "bt-0" / "files" / "out.txt").read_bytes() == b"zero"
    assert sorted(_json(direct)["files"]) == sorted(_json(fetched)["files"])
    shown = paths.run("producer", "jobs", "--batch", "bt", "--json", "--report", str(tmp_path / "r.html"))
    assert shown.returncode == 0 and _json(shown)["counts"] and (tmp_path / "r.html").is_file()
