"""Embeddings from the user's own OpenAI-compatible server (``selection.embeddings_url``), through the real ``openai``
client over HTTP, and the fall back to the bundled model when that server fails or answers nonsense."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from select_corpus import write_skill
from structlog.testing import capture_logs

from orchestrator.config import SelectionSettings
from orchestrator.select.index import SkillIndex
from orchestrator.select.semantic import DIMENSIONS
from orchestrator.select.shortlist import model_invocable
from orchestrator.skills.loader import SkillLibrary

SIZE = 64


def bag_of_words(text: str) -> list[float]:
    """A server's vector: each word hashed into one of 64 dimensions (texts sharing words point alike)."""
    vector = [0.0] * SIZE
    for word in re.findall(r"[a-z]+", text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % SIZE] += 1.0
    return vector


@dataclass
class EmbeddingsServer:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint; ``answer`` says how it answers (``ok`` or a way to fail)."""

    answer: str = "ok"
    fail_after: int | None = None
    inputs: list[str] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    url: str = ""

    def respond(self, body: dict[str, object]) -> tuple[int, object]:
        texts = body["input"]
        assert isinstance(texts, list)
        self.inputs += texts
        if self.fail_after is not None and len(self.inputs) > self.fail_after:
            return 503, {"error": {"message": "overloaded"}}
        vectors = [bag_of_words(t) for t in texts]
        if self.answer == "short":
            vectors = vectors[:-1]
        elif self.answer == "nan":
            vectors = [[float("nan")] * SIZE for _ in texts]
        elif self.answer == "ragged":
            vectors = [v[: SIZE - i] for i, v in enumerate(vectors)]
        elif self.answer == "not-a-list":
            return 200, {"object": "list", "data": "no vectors today", "model": body["model"]}
        elif self.answer == "strings":
            vectors = [["0.1"] * SIZE for _ in texts]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1}}


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    state = EmbeddingsServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.authorizations.append(self.headers.get("Authorization", ""))
            status, answer = state.respond(body) if self.path == "/v1/embeddings" else (404, {})
            raw = json.dumps(answer).encode()  # NaN is written as JSON's non-standard NaN, as some servers do
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield state
    httpd.shutdown()
    httpd.server_close()


def _library(root: Path) -> SkillLibrary:
    write_skill(root, "pastry", name="pastry", description="Croissants and brioche for a bakery counter.", body="x")
    write_skill(root, "invoices", name="invoices", description="Turn a timesheet into a client invoice.", body="x")
    write_skill(root, "tides", name="tides", description="Tide tables for harbours on the coast.", body="x")
    return SkillLibrary(root)


def _index(library: SkillLibrary, settings: SelectionSettings, cache: Path | None = None) -> SkillIndex:
    return SkillIndex.for_library(library, model_invocable(library.l1_index()), cache, settings)


def test_skills_and_goals_are_embedded_by_the_configured_server(server, tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_EMBEDDINGS_API_KEY", "k-embeddings")
    settings = SelectionSettings(embeddings_url=server.url, embeddings_model="my-embedder")
    index = _index(_library(tmp_path / "s"), settings, tmp_path / "cache")
    assert index.vectors is not None and index.vectors.shape == (3, SIZE)  # the server's vectors, not the bundled
    assert any("bakery" in text for text in server.inputs)
    before = len(server.inputs)
    hits = index.search("croissants brioche bakery counter today", k=1)
    assert hits[0].id == "pastry" and len(server.inputs) == before + 1  # the goal went to the server too
    assert set(server.authorizations) == {"Bearer k-embeddings"}
    # a second build (another process would do the same) reads the vectors from the cache: no skill is sent again
    # (a new embedder asks the server once for its vectors' size)
    _index(_library(tmp_path / "s"), settings, tmp_path / "cache")
    assert not any("bakery" in text for text in server.inputs[before + 1 :])


@pytest.mark.parametrize("answer", ["short", "nan", "ragged", "not-a-list", "strings"])
def test_a_server_answering_nonsense_is_refused_and_the_bundled_model_ranks(server, tmp_path, answer):
    server.answer = answer
    settings = SelectionSettings(embeddings_url=server.url, embeddings_model="my-embedder")
    with capture_logs() as logs:
        index = _index(_library(tmp_path / "s"), settings)
    assert index.vectors is not None and index.vectors.shape == (3, DIMENSIONS)  # the bundled model's
    failed = [e for e in logs if e["event"] == "select.embeddings_failed"]
    assert failed and "bundled model" in failed[0]["reason"] and "my-embedder" in failed[0]["model"]


def test_an_unreachable_server_falls_back_to_the_bundled_model(tmp_path):
    settings = SelectionSettings(embeddings_url="http://127.0.0.1:9/v1", embeddings_model="m")
    with capture_logs() as logs:
        index = _index(_library(tmp_path / "s"), settings)
    assert index.semantic and index.vectors is not None and index.vectors.shape == (3, DIMENSIONS)
    assert any(e["event"] == "select.embeddings_failed" for e in logs)


def test_a_server_failing_on_the_goal_leaves_that_goal_ranked_by_its_words(server, tmp_path):
    settings = SelectionSettings(embeddings_url=server.url, embeddings_model="my-embedder")
    index = _index(_library(tmp_path / "s"), settings)
    server.fail_after = len(server.inputs)  # the skills were embedded; the goal's request fails
    with capture_logs() as logs:
        hits = index.search("a client invoice from my timesheet", k=3)
    assert [h.id for h in hits] == ["invoices"]  # its words still find it; no vector of another model was mixed in
    assert any(e["event"] == "select.embeddings_failed" and e["for_"] == "goal" for e in logs)


def test_a_server_without_its_model_name_or_with_another_scheme_is_a_settings_error():
    with pytest.raises(ValueError, match="embeddings_model"):
        SelectionSettings(embeddings_url="http://localhost:11434/v1")
    with pytest.raises(ValueError, match="http"):
        SelectionSettings(embeddings_url="file:///etc/passwd", embeddings_model="m")
