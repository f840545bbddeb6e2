"""Building a ``Runtime`` from settings: the sandbox (connected on first use), the memo store, the model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.act.memo import MemoStore
from orchestrator.config import Settings
from orchestrator.llm.factory import open_model
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.skills.cache import ReadCache
from orchestrator.skills.loader import RUNTIME_WORK_DIRS, SkillLibrary
from orchestrator.workflow.run import EventSink, Runtime


@contextmanager
def build_runtime(
    settings: Settings,
    skills_root: Path,
    model_spec: str,
    *,
    use_memo: bool = True,
    on_event: EventSink | None = None,
) -> Iterator[Runtime]:
    """A ready ``Runtime``; the model (and a scripted server) and the sandbox runner are closed on exit.

    The runner connects to the Docker engine on first use, so a goal whose skills run no script needs no engine.
    """
    library = SkillLibrary(
        skills_root,
        l2_max_tokens=settings.disclosure.l2_max_tokens,
        cache=ReadCache(),
        work_dirs=RUNTIME_WORK_DIRS,
    )
    sandbox = SandboxRunner(settings.sandbox)
    store = MemoStore(settings.cache_dir / "store") if use_memo else None
    try:
        with open_model(model_spec, settings.model, cache_dir=settings.cache_dir if use_memo else None) as model:
            yield Runtime(
                settings=settings,
                model=model,
                library=library,
                sandbox=sandbox,
                store=store,
                on_event=on_event or (lambda name, data: None),
            )
    finally:
        sandbox.close()
