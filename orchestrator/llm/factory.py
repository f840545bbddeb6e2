"""``MODEL`` strings to chat models: ``openai:NAME`` (a real server) or ``scripted:PATH`` (a scenario file).

A scripted model is not a shortcut around HTTP: the scenario is served by our OpenAI-compatible server on an
ephemeral loopback port and called through the same :class:`OpenAIChatModel` a real model uses.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config import ModelSettings
from orchestrator.errors import ConfigError
from orchestrator.llm.headers import passed_over
from orchestrator.llm.interface import ChatModel
from orchestrator.llm.response_cache import ResponseCache
from orchestrator.llm.scenario import Scenario, load_scenario
from orchestrator.logs import get_logger

if TYPE_CHECKING:  # the client (and the openai SDK) loads when a model is opened, not when a spec is parsed
    from orchestrator.llm.openai_client import OpenAIChatModel
    from orchestrator.llm.scenario_server import ScenarioServer

SCRIPTED_API_KEY = "scripted-no-key"
TRACE_ENV = "ORCH_SCRIPTED_TRACE"
ACCEPTED_FORMS = (
    "openai:NAME (e.g. openai:gpt-4o-mini; uses OPENAI_API_KEY and OPENAI_BASE_URL) or scripted:PATH"
)

log = get_logger("orchestrator.llm")


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``(kind, value)`` of a ``MODEL`` string; :class:`ConfigError` listing the accepted forms otherwise."""
    kind, sep, value = spec.partition(":")
    if not sep or kind not in ("openai", "scripted") or not value.strip():
        raise ConfigError(
            f"unknown model {spec!r}: expected {ACCEPTED_FORMS}",
            where="model",
            next_step="pass --model openai:NAME or --model scripted:PATH",
            model=spec,
        )
    return kind, value.strip()


@contextmanager
def open_model(
    spec: str,
    settings: ModelSettings,
    *,
    trace_path: Path | None = None,
    job_id: str | None = None,
    cursor: str | None = None,
    cache_dir: Path | None = None,
) -> Iterator[ChatModel]:
    """A chat model for ``spec``, closed (and its scenario server stopped) on exit.

    ``trace_path`` (scripted only) defaults to ``$ORCH_SCRIPTED_TRACE``: every request body is appended to it.
    ``job_id`` (``openai:`` models) is sent as the ``X-Orch-Job`` header of every request; ``cursor`` (not None:
    tracked) is where a scripted conversation stands (``X-Orch-Cursor``, see ``orchestrator.llm.headers``).
    ``cache_dir`` (the cache folder; None with ``--no-memo``) holds the response cache under ``store/responses``.
    """
    # Deferred: the openai SDK takes a second to import; parsing a model spec (submit, jobs) must not pay for it.
    from orchestrator.llm.openai_client import OpenAIChatModel

    kind, value = parse_model_spec(spec)
    cache = response_cache(cache_dir)
    if kind == "openai":
        with OpenAIChatModel(value, settings, name=spec, job_id=job_id, cursor=cursor, cache=cache) as model:
            yield model
        return
    scenario = Path(value)
    with open_scripted_model(scenario, settings, trace_path=trace_path, name=spec, cursor=cursor, cache=cache) as (
        model,
        _,
    ):
        yield model


def response_cache(cache_dir: Path | None) -> ResponseCache | None:
    """The response cache of a cache folder (None: no cache)."""
    return ResponseCache(cache_dir / "store" / "responses") if cache_dir is not None else None


def scenario_identity(scenario: Scenario) -> str:
    """Who answers a scripted model, for the response cache: the scenario's content (its server's port changes)."""
    return "scripted:" + hashlib.sha256(scenario.model_dump_json().encode("utf-8")).hexdigest()


@contextmanager
def open_scripted_model(
    scenario: Scenario | Path,
    settings: ModelSettings,
    *,
    trace_path: Path | None = None,
    name: str | None = None,
    cursor: str | None = None,
    partial: bool = False,
    cache: ResponseCache | None = None,
) -> Iterator[tuple[OpenAIChatModel, ScenarioServer]]:
    """The model and its running scenario server (for tests that inspect ``server.requests``).

    ``cursor`` is where the conversation stands (``X-Orch-Cursor``; an earlier process played the steps before
    it); ``partial`` means this process plays only some of the steps, so steps left over are expected.
    """
    # Deferred: the openai SDK takes a second to import; parsing a model spec (submit, jobs) must not pay for it.
    from orchestrator.llm.openai_client import OpenAIChatModel
    from orchestrator.llm.scenario_server import start_scenario_server

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    if trace_path is None and os.environ.get(TRACE_ENV):
        trace_path = Path(os.environ[TRACE_ENV])
    server = start_scenario_server(scenario, trace_path=trace_path)
    model: OpenAIChatModel | None = None
    try:
        model = OpenAIChatModel(
            server.model_name,
            settings,
            api_key=SCRIPTED_API_KEY,
            base_url=server.base_url,
            name=name or f"scripted:{scenario.source}",
            cache=cache,
            cache_identity=scenario_identity(scenario),
            cursor=cursor,
        )
        with model:
            yield model, server
    finally:
        server.close()
        # A turn answered from the response cache played its step: a goal run again from the cache is not unfinished.
        from_cache = passed_over(model.cursor) if model is not None else 0
        steps_left = max(0, server.steps_left - from_cache)
        if server.failures or (steps_left and not partial):
            log.warning(
                "scripted.unfinished",
                scenario=scenario.source,
                steps_left=steps_left,
                failures=len(server.failures),
            )
