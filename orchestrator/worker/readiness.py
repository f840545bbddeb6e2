"""Is this worker able to run phases? Checked at start, before it consumes the queue, and again after a phase met
an error of the worker's own environment (model unreachable, API key rejected, engine down, image missing).

Each check is cheap: a Docker ping and an image lookup, one ``GET /models`` on the configured model server, the
skills folder's L1 listing. A worker that is not ready says what is missing (log line, and the ledger's worker
record that ``jobs`` and ``submit --wait`` read) and leaves the jobs to the workers that are.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import Settings
from orchestrator.errors import ModelErrorCode, OrchestratorError, SandboxErrorCode
from orchestrator.llm.factory import parse_model_spec
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.sandbox.egress_proxy import IMAGE_HINT as EGRESS_IMAGE_HINT
from orchestrator.sandbox.engine import connect
from orchestrator.skills.loader import SkillLibrary

ENVIRONMENT_MODEL_CODES = frozenset(
    {ModelErrorCode.UNREACHABLE, ModelErrorCode.AUTH_REJECTED, ModelErrorCode.NO_API_KEY, ModelErrorCode.TIMEOUT}
)
ENVIRONMENT_SANDBOX_CODES = frozenset(
    {SandboxErrorCode.ENGINE_UNREACHABLE, SandboxErrorCode.IMAGE_MISSING, SandboxErrorCode.NO_SANDBOX}
)


def is_environment_error(error: OrchestratorError) -> bool:
    """True for what another worker may not suffer from: this worker's model server, key, engine or image."""
    return error.code in ENVIRONMENT_MODEL_CODES or error.code in ENVIRONMENT_SANDBOX_CODES


def missing(settings: Settings) -> list[str]:
    """What this worker lacks to run phases, one sentence each (empty: ready)."""
    problems = _docker_problems(settings)
    problems += _model_problems(settings)
    problems += _skills_problems(settings.skills_dir)
    return problems


def _docker_problems(settings: Settings) -> list[str]:
    try:
        client = connect(timeout_s=10)
    except Exception as e:  # noqa: BLE001 - any failure to reach the engine is the answer
        return [f"Docker engine unreachable: {e}"]
    try:
        client.ping()
        try:
            client.images.get(settings.sandbox.image)
        except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound, or the engine went away
            return [f"sandbox image {settings.sandbox.image} missing (python -m orchestrator sandbox build-image)"]
        if settings.egress.grants:  # granted skills need their proxy's image
            try:
                client.images.get(settings.egress.image)
            except Exception:  # noqa: BLE001
                return [f"egress proxy image {settings.egress.image} missing ({EGRESS_IMAGE_HINT})"]
        return []
    except Exception as e:  # noqa: BLE001
        return [f"Docker engine unreachable: {e}"]
    finally:
        client.close()


def _model_problems(settings: Settings) -> list[str]:
    try:
        kind, value = parse_model_spec(settings.model.name)
    except OrchestratorError as e:
        return [f"model setting: {e.message}"]
    if kind == "scripted":
        return [] if Path(value).is_file() else [f"model: scenario file not found: {value}"]
    if not settings.worker.check_model:
        return []
    quick = settings.model.model_copy(update={"request_timeout_s": 10.0, "max_retries": 0})
    try:
        with OpenAIChatModel(value, quick, name=settings.model.name) as model:
            served = model.list_models()
    except OrchestratorError as e:
        return [f"model {settings.model.name}: {e.message}"]
    if served and value not in served:
        return [f"model {value!r} is not served at {model.base_url} (it serves: {', '.join(served[:10])})"]
    return []


def _skills_problems(skills_dir: Path) -> list[str]:
    if not skills_dir.is_dir():
        return [f"skills folder not found: {skills_dir}"]
    try:
        count = len(SkillLibrary(skills_dir).list())
    except OrchestratorError as e:
        return [f"skills folder {skills_dir}: {e.message}"]
    return [] if count else [f"skills folder {skills_dir} holds no skill (no SKILL.md)"]
