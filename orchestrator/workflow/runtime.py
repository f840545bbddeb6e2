"""What a goal runs with (:class:`Runtime`), and the one factory that builds it for ``run`` and for workers.

:class:`Runtimes` holds what a process keeps between goals (sandbox runners, scripted model servers) and opens a
``Runtime`` per goal or per phase. Both drivers get the same sandbox path: the Act opens each skill's job as a
``sandbox.lazy.LazyJob``, which starts no container until a script or program runs and traces every container as a
``container`` span.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestrator.act.memo import MemoStore
from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError
from orchestrator.llm.factory import (
    SCRIPTED_API_KEY,
    open_model,
    parse_model_spec,
    response_cache,
    scenario_identity,
)
from orchestrator.llm.interface import ChatModel, Message, ModelResponse, Purpose, ToolSpec
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.scenario import load_scenario
from orchestrator.llm.scenario_server import ScenarioServer, start_scenario_server
from orchestrator.logs import get_logger
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.sandbox.protocol import SandboxBackend
from orchestrator.skills.loader import RUNTIME_WORK_DIRS, SkillLibrary
from orchestrator.skills.read_cache import ReadCache
from orchestrator.skills.versions import SkillVersion, skill_versions
from orchestrator.tracing import tracer

EventSink = Callable[[str, dict[str, Any]], None]
ScenarioGuard = Callable[[str], Path]
_log = get_logger("orchestrator.workflow")
MAX_KEPT_MODELS = 8
START = "0"
"""The position of a conversation that has not begun (``X-Orch-Cursor``)."""


@dataclass
class Runtime:
    """What a goal needs to run. ``sandbox`` None: skills cannot run scripts (``build/`` is a host folder)."""

    settings: Settings
    model: ChatModel
    library: SkillLibrary
    sandbox: SandboxBackend | None = None
    store: MemoStore | None = None
    on_event: EventSink = field(default=lambda name, data: None)

    def emit(self, name: str, **data: Any) -> None:
        _log.info(name, **data)
        self.on_event(name, data)

    def skill_versions(self, skill_ids: Iterable[str]) -> list[SkillVersion]:
        return skill_versions(self.library, skill_ids)

    def cursor(self, default: str) -> str:
        """Where a scripted conversation stands now (``X-Orch-Cursor``; ``default`` when the model tracks none)."""
        position = getattr(self.model, "cursor", None)
        return position if isinstance(position, str) else default

    def pass_over(self, purpose: Purpose, turns: int) -> None:
        """Turns of ``purpose`` answered without the model (a reused verdict): a scripted model passes over them."""
        skip = getattr(self.model, "pass_over", None)
        if callable(skip):
            skip(purpose, turns)

    @property
    def model_seconds(self) -> float:
        """Wall time spent inside model calls through this runtime."""
        return self.model.seconds if isinstance(self.model, TimedModel) else 0.0

    @property
    def model_errors(self) -> list[OrchestratorError]:
        """Errors model calls raised through this runtime (the Act may have turned them into a failed step)."""
        return list(self.model.errors) if isinstance(self.model, TimedModel) else []


class TimedModel:
    """A ``ChatModel`` that counts each call's wall time and traces it as a ``model`` span."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self.name = model.name
        self.seconds = 0.0
        self.errors: list[OrchestratorError] = []

    @property
    def cursor(self) -> str | None:
        """The wrapped model's conversation position, when it tracks one."""
        position = getattr(self._model, "cursor", None)
        return position if isinstance(position, str) else None

    def pass_over(self, purpose: Purpose, turns: int) -> None:
        skip = getattr(self._model, "pass_over", None)
        if callable(skip):
            skip(purpose, turns)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        purpose: Purpose = "other",
        json_response: bool = False,
    ) -> ModelResponse:
        started = time.perf_counter()
        with tracer().start_as_current_span("model", attributes={"orch.purpose": str(purpose)}):
            try:
                return self._model.complete(messages, tools=tools, purpose=purpose, json_response=json_response)
            except OrchestratorError as e:
                self.errors.append(e)
                raise
            finally:
                self.seconds += time.perf_counter() - started


@dataclass(frozen=True)
class RuntimeSpec:
    """What a runtime is opened for: one goal (``run``) or one phase of a job (``job_id``; ``cursor``: where its
    scripted conversation stands, sent as ``X-Orch-Cursor`` and tracked; None: at its start). ``use_memo``: the memo
    and the response cache are used (``--no-memo``: neither). ``scenario_guard`` checks a ``scripted:`` model's
    scenario path (and gives the file to read) before anything reads it."""

    settings: Settings
    skills_root: Path
    model_spec: str
    scenario_guard: ScenarioGuard | None = None
    job_id: str | None = None
    cursor: str | None = None
    use_memo: bool = True
    on_event: EventSink | None = None


class RuntimeSource(Protocol):
    """What a driver needs from a factory (tests of the drivers give their own, with a fake model)."""

    def open(self, spec: RuntimeSpec) -> AbstractContextManager[Runtime]: ...


class Runtimes:
    """The runtime factory of a process. ``keep_models``: scripted model servers outlive a goal (a worker serves
    many goals' phases); without it each ``open`` starts and stops its own (``run``)."""

    def __init__(self, *, keep_models: bool = False) -> None:
        self._keep_models = keep_models
        self._sandboxes: dict[str, SandboxRunner] = {}
        self._models: OrderedDict[tuple[Any, ...], tuple[OpenAIChatModel, ScenarioServer]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def open(self, spec: RuntimeSpec) -> Iterator[Runtime]:
        """A ready ``Runtime`` for what ``spec`` says."""
        settings, model_spec = spec.settings, spec.model_spec
        library = SkillLibrary(
            spec.skills_root,
            l2_max_tokens=settings.disclosure.l2_max_tokens,
            cache=ReadCache(),
            work_dirs=RUNTIME_WORK_DIRS,
        )
        if spec.scenario_guard is not None and (kind := parse_model_spec(model_spec))[0] == "scripted":
            model_spec = f"{kind[0]}:{spec.scenario_guard(kind[1])}"
        # The response cache lives beside the memo. Turns it answers are counted into the cursor, which a worker
        # saves with the goal's state, so a scripted server stays in step across phases and workers.
        cache_dir = settings.cache_dir if spec.use_memo else None
        with self._model(settings, model_spec, spec.job_id, spec.cursor or START, cache_dir) as model:
            yield Runtime(
                settings=settings,
                model=TimedModel(model),
                library=library,
                sandbox=self._sandbox(settings),
                store=MemoStore(settings.cache_dir / "store") if spec.use_memo else None,
                on_event=spec.on_event or (lambda name, data: None),
            )

    def _sandbox(self, settings: Settings) -> SandboxRunner:
        """One runner per sandbox settings, reused by every goal; it connects to the Docker engine on first use."""
        # By value, as JSON: the sandbox settings hold dicts (limit profiles), so the model itself is not hashable.
        key = settings.sandbox.model_dump_json()
        with self._lock:
            if key not in self._sandboxes:
                self._sandboxes[key] = SandboxRunner(settings.sandbox)
            return self._sandboxes[key]

    @contextmanager
    def _model(
        self,
        settings: Settings,
        spec: str,
        job_id: str | None,
        cursor: str,
        cache_dir: Path | None,
    ) -> Iterator[ChatModel]:
        kind, value = parse_model_spec(spec)
        if kind != "scripted" or not self._keep_models:
            # The job id goes along with every request, so a model server shared by many goals (the compose
            # stack's scripted-llm, a gateway) can tell their conversations apart.
            with open_model(spec, settings.model, job_id=job_id, cursor=cursor, cache_dir=cache_dir) as model:
                yield model
            return
        # Building an HTTP client costs more than a phase's bookkeeping: a worker keeps a few, per thread.
        # By value, as JSON: the model settings hold dicts (profiles), so the model itself is not hashable.
        key = (threading.get_ident(), spec, settings.model.model_dump_json(), Path(value).stat().st_mtime_ns,
               cache_dir)
        with self._lock:
            entry = self._models.pop(key, None)
            if entry is None:
                scenario = load_scenario(Path(value))
                server = start_scenario_server(scenario)
                model = OpenAIChatModel(
                    server.model_name, settings.model, api_key=SCRIPTED_API_KEY, base_url=server.base_url, name=spec,
                    cursor=START, cache=response_cache(cache_dir), cache_identity=scenario_identity(scenario),
                )
                entry = (model, server)
            self._models[key] = entry
            while len(self._models) > MAX_KEPT_MODELS:
                _close(self._models.popitem(last=False)[1])
        model, server = entry
        model.cursor = cursor  # where this goal's script stands: every request says so
        server.player.clear_records()
        try:
            yield model
        except BaseException:
            with self._lock:
                self._models.pop(key, None)
            _close(entry)  # a model that broke mid-phase is not reused
            raise

    def close(self) -> None:
        with self._lock:
            models, self._models = list(self._models.values()), OrderedDict()
            sandboxes, self._sandboxes = list(self._sandboxes.values()), {}
        for entry in models:
            _close(entry)
        for sandbox in sandboxes:
            with contextlib.suppress(Exception):
                sandbox.close()

    def __enter__(self) -> Runtimes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close(entry: tuple[OpenAIChatModel, ScenarioServer]) -> None:
    model, server = entry
    with contextlib.suppress(Exception):
        model.close()
    server.close()
