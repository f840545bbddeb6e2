"""Building a ``Runtime`` from settings: the lazily connected sandbox, the memo store, the model."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orchestrator.act.memo import MemoStore
from orchestrator.config import Settings
from orchestrator.skills.cache import ReadCache
from orchestrator.skills.loader import RUNTIME_WORK_DIRS, SkillLibrary
from orchestrator.workflow.run import EventSink, Runtime


class LazySandbox:
    """A ``SandboxRunner`` connected on first use, so a goal whose skills run no script needs no Docker engine."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._runner: Any = None
        self._lock = threading.Lock()

    @property
    def runner(self) -> Any:
        with self._lock:
            if self._runner is None:
                from orchestrator.sandbox.docker import SandboxRunner

                self._runner = SandboxRunner(self._settings.sandbox)
            return self._runner

    def open_job(self, job_id: str, skill_root: Path, **kwargs: Any) -> Any:
        return self.runner.open_job(job_id, skill_root, **kwargs)

    def image_tools(self) -> dict[str, str]:
        from orchestrator.sandbox.image import image_tools

        return image_tools(self.runner.client, self._settings.sandbox.image)


@contextmanager
def build_runtime(
    settings: Settings,
    skills_root: Path,
    model_spec: str,
    *,
    use_memo: bool = True,
    on_event: EventSink | None = None,
) -> Iterator[Runtime]:
    """A ready ``Runtime``; the model (and a scripted server) is closed on exit."""
    from orchestrator.llm.factory import open_model

    library = SkillLibrary(
        skills_root,
        l2_max_tokens=settings.disclosure.l2_max_tokens,
        cache=ReadCache(),
        work_dirs=RUNTIME_WORK_DIRS,
    )
    sandbox = LazySandbox(settings)
    store = MemoStore(settings.cache_dir / "store") if use_memo else None
    with open_model(model_spec, settings.model) as model:
        yield Runtime(
            settings=settings,
            model=model,
            library=library,
            sandbox=sandbox,
            store=store,
            available_tools=sandbox.image_tools,
            on_event=on_event or (lambda name, data: None),
        )
