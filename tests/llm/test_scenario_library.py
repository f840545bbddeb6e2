"""One scripted server for many goals at once: the model name picks the scenario, X-Orch-Job the conversation."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from orchestrator.config import ModelSettings
from orchestrator.errors import ConfigError, ModelError
from orchestrator.llm.factory import open_model
from orchestrator.llm.interface import Message
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.scenario_server import ScenarioLibraryServer, load_library

COUNT = """
goal: count
steps:
  - purpose: plan
    expect: {contains: [count]}
    reply: {content: one}
  - purpose: act
    reply: {content: two}
  - purpose: semantic
    reply: {content: three}
"""
GREET = """
goal: greet
model: greeter
steps:
  - reply: {content: hello}
"""
SETTINGS = ModelSettings(max_retries=0, request_timeout_s=10)


def user(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "count.yaml").write_text(COUNT)
    (folder / "greet.yml").write_text(GREET)
    (folder / "notes.txt").write_text("not a scenario")
    return folder


@pytest.fixture
def server(library: Path, tmp_path: Path):
    with ScenarioLibraryServer(load_library(library), trace_path=tmp_path / "trace.jsonl") as srv:
        yield srv


def model(server: ScenarioLibraryServer, name: str, job: str | None) -> OpenAIChatModel:
    return OpenAIChatModel(name, SETTINGS, api_key="k", base_url=server.base_url, job_id=job)


def test_the_library_holds_every_scenario_file_by_its_stem(library: Path) -> None:
    assert sorted(load_library(library)) == ["count", "greet"]


def test_each_job_walks_its_own_copy_of_the_steps_even_interleaved(server: ScenarioLibraryServer) -> None:
    a, b = model(server, "count", "job-a"), model(server, "count", "job-b")
    assert a.complete(user("count"), purpose="plan").content == "one"
    assert b.complete(user("count"), purpose="plan").content == "one"
    assert a.complete(user("go"), purpose="act").content == "two"
    assert a.complete(user("go"), purpose="semantic").content == "three"
    assert b.complete(user("go"), purpose="act").content == "two"
    assert server.failures == []
    sessions = {p.session: p.steps_used for p in server.players}
    assert sessions == {"job-a": 3, "job-b": 2}


def test_the_model_name_picks_the_scenario(server: ScenarioLibraryServer) -> None:
    assert model(server, "greet", "j1").complete(user("hi")).content == "hello"
    assert model(server, "count", "j1").complete(user("count"), purpose="plan").content == "one"


def test_an_unknown_model_is_refused_with_the_names_served(server: ScenarioLibraryServer) -> None:
    with pytest.raises(ModelError) as err:
        model(server, "nope", "j1").complete(user("hi"))
    assert "'count', 'greet'" in str(err.value)
    assert server.players == []


def test_a_conversation_that_runs_out_of_steps_is_refused_not_handed_another_jobs_steps(server) -> None:
    greeter = model(server, "greet", "job-x")
    greeter.complete(user("hi"))
    with pytest.raises(ModelError, match="after all 1 steps were used"):
        greeter.complete(user("again"))
    assert model(server, "greet", "job-y").complete(user("hi")).content == "hello"


def test_concurrent_jobs_never_take_each_others_steps(server: ScenarioLibraryServer) -> None:
    errors: list[BaseException] = []

    def walk(job: str) -> None:
        try:
            chat = model(server, "count", job)
            answers = [chat.complete(user("count"), purpose=p).content for p in ("plan", "act", "semantic")]
            assert answers == ["one", "two", "three"]
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=walk, args=(f"job-{i}",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and server.failures == []
    assert sorted(p.steps_used for p in server.players) == [3] * 12


def test_trace_lines_name_their_job_and_stay_whole(server: ScenarioLibraryServer, tmp_path: Path) -> None:
    model(server, "greet", "job-1").complete(user("x" * 20000))
    model(server, "greet", "job-2").complete(user("y"))
    lines = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [line["_trace"]["session"] for line in lines] == ["job-1", "job-2"]


def test_the_runtime_sends_its_job_id_with_every_request(server: ScenarioLibraryServer, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    with open_model("openai:count", SETTINGS, job_id="from-the-runtime") as chat:
        chat.complete(user("count"), purpose="plan")
    assert [p.session for p in server.players] == ["from-the-runtime"]


def test_the_oldest_conversation_is_forgotten_beyond_the_cap(library: Path) -> None:
    with ScenarioLibraryServer(load_library(library), max_sessions=2) as srv:
        for job in ("j1", "j2", "j3"):
            model(srv, "greet", job).complete(user("hi"))
        assert [p.session for p in srv.players] == ["j2", "j3"]


def test_an_empty_or_missing_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no scenario files"):
        load_library(tmp_path)
    with pytest.raises(ConfigError, match="not found"):
        load_library(tmp_path / "missing")


def test_a_broken_scenario_stops_the_library_from_starting(library: Path) -> None:
    (library / "broken.yaml").write_text("goal: g\nsteps: []\n")
    with pytest.raises(ConfigError):
        load_library(library)


def test_the_cli_serves_a_folder_and_reports_every_conversation(library: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "scripted-llm", "--scenarios", str(library), "--strict"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        chat = OpenAIChatModel("greet", SETTINGS, api_key="k", base_url=base_url, job_id="cli-job")
        assert chat.complete(user("hi")).content == "hello"
        OpenAIChatModel("count", SETTINGS, api_key="k", base_url=base_url, job_id="half").complete(
            user("count"), purpose="plan"
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert "2 conversations over 2 scenarios" in err
    assert "(job cli-job): 1/1 steps played" in err and "(job half): 1/3 steps played" in err
    assert proc.returncode == 1  # --strict: the "half" conversation left steps unplayed


def test_the_cli_wants_exactly_one_of_scenario_or_scenarios(library: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "scripted-llm", "--scenarios", str(library), "--scenario", "x.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "exactly one of --scenario FILE or --scenarios DIR" in done.stderr


def test_a_phase_run_again_after_a_takeover_sends_its_saved_position_and_its_steps_are_played_again(
    server: ScenarioLibraryServer,
) -> None:
    def phase_from(saved: str) -> OpenAIChatModel:  # a worker's phase: the position saved before it
        return OpenAIChatModel("count", SETTINGS, api_key="k", base_url=server.base_url, job_id="job-r", cursor=saved)

    plan = phase_from("0")
    assert plan.complete(user("count"), purpose="plan").content == "one" and plan.cursor == "1"
    dying = phase_from(plan.cursor)
    assert dying.complete(user("go"), purpose="act").content == "two"  # then its worker died, nothing saved
    again = phase_from(plan.cursor)  # the takeover's run starts from the state saved after plan
    assert again.complete(user("go"), purpose="act").content == "two" and again.cursor == "2"
    assert phase_from(again.cursor).complete(user("go"), purpose="semantic").content == "three"
    assert server.failures == []


def test_a_client_that_tracks_no_position_goes_on_with_the_servers_script(server: ScenarioLibraryServer) -> None:
    def client() -> OpenAIChatModel:
        return OpenAIChatModel("count", SETTINGS, api_key="k", base_url=server.base_url, job_id="job-s")

    assert client().complete(user("count"), purpose="plan").content == "one"
    assert client().complete(user("go"), purpose="act").content == "two"  # not step 1 again
    assert server.failures == []
    assert {p.session: p.steps_used for p in server.players} == {"job-s": 2}


def test_a_position_that_is_not_one_is_ignored(server: ScenarioLibraryServer) -> None:
    junk = OpenAIChatModel("count", SETTINGS, api_key="k", base_url=server.base_url, job_id="job-j", cursor="9;x=1")
    assert junk.complete(user("count"), purpose="plan").content == "one" and junk.cursor == "1"
