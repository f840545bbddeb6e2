"""One error root for everything the orchestrator raises to its caller.

Errors a model can fix (bad tool arguments, a failing script, a missing file) are *not* raised: they go back to the
model as tool results. What is raised here is misuse, bad configuration or infrastructure failure. Every error carries
the data a person needs to act (``where`` it happened and ``next_step``), and constructors never log.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class OrchestratorError(Exception):
    """Root of every error raised by the orchestrator.

    ``where`` names the step that failed (``plan``, ``skill:document-skills/pptx``, ``tool:run_script``,
    ``container:...``); ``next_step`` says what to do about it; ``data`` holds machine-readable fields.
    """

    retryable: bool = False
    code: StrEnum | None = None
    """Which failure it is, for callers to branch on; each error class with kinds has its own enum."""

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        next_step: str | None = None,
        retryable: bool | None = None,
        **data: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.next_step = next_step
        if retryable is not None:
            self.retryable = retryable
        self.data: dict[str, Any] = data

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": type(self).__name__,
            "message": self.message,
            "where": self.where,
            "next_step": self.next_step,
            "retryable": self.retryable,
            **({"data": self.data} if self.data else {}),
            **({"code": self.code.value} if self.code is not None else {}),
        }

    def __str__(self) -> str:
        text = self.message
        if self.where:
            text = f"[{self.where}] {text}"
        if self.next_step:
            text = f"{text} (next: {self.next_step})"
        return text


class ConfigError(OrchestratorError):
    """Settings, a rules file, a scenario file or a goal line that cannot be used as given."""


class SkillError(OrchestratorError):
    """A skill that cannot be found or loaded."""


class PathEscapeError(SkillError):
    """A path that would leave its root (``..``, absolute path, or a symlink pointing out)."""


class SandboxErrorCode(StrEnum):
    """What went wrong in the sandbox, for callers to branch on (never the message text)."""

    UNSPECIFIED = "unspecified"
    ENGINE_UNREACHABLE = "engine_unreachable"
    ENGINE_ERROR = "engine_error"
    IMAGE_MISSING = "image_missing"
    IMAGE_BUILD_FAILED = "image_build_failed"
    NO_TOOL_LIST = "no_tool_list"
    TOOL_MISSING = "tool_missing"
    BAD_SKILL_ROOT = "bad_skill_root"
    BAD_INPUTS = "bad_inputs"
    SETUP_FAILED = "setup_failed"
    CONTAINER_FAILED = "container_failed"
    JOB_CLOSED = "job_closed"
    NO_SANDBOX = "no_sandbox"
    REFUSED = "refused"
    DISK_FULL = "disk_full"
    NOT_FOUND = "not_found"
    NOT_A_FILE = "not_a_file"
    TOO_LARGE = "too_large"
    UNSAFE_DESTINATION = "unsafe_destination"
    PRUNE_FAILED = "prune_failed"
    DISK_LIMIT = "disk_limit"


class SandboxError(OrchestratorError):
    """The sandbox could not run a script (engine unreachable, image missing, container failure).

    A script that fails, times out or is OOM-killed is *not* an error: it is a ``ScriptResult`` field.
    ``code`` says which failure it is; ``retryable`` whether trying again may help.
    """

    default_code = SandboxErrorCode.UNSPECIFIED

    def __init__(self, message: str, *, code: SandboxErrorCode | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.code: SandboxErrorCode = code or self.default_code


class SandboxRefused(SandboxError):
    """A script was refused before any container started (extension, path outside the skill root).

    ``violation`` names the rule that refused it.
    """

    default_code = SandboxErrorCode.REFUSED

    def __init__(self, message: str, *, violation: str = "", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.violation = violation


class ImageToolMissing(SandboxError):
    """A skill declares a tool the sandbox image does not provide."""

    default_code = SandboxErrorCode.TOOL_MISSING


class BudgetExceeded(OrchestratorError):
    """A budget ran out; ``budget``, ``limit`` and ``used`` say which and by how much."""


class ModelErrorCode(StrEnum):
    """What went wrong with the model, for callers to branch on (never the message text)."""

    UNSPECIFIED = "unspecified"
    NO_API_KEY = "no_api_key"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    CLIENT_ERROR = "client_error"
    MODEL_NOT_FOUND = "model_not_found"
    AUTH_REJECTED = "auth_rejected"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXCEEDED = "quota_exceeded"
    SERVER_ERROR = "server_error"
    REQUEST_REJECTED = "request_rejected"
    HTTP_ERROR = "http_error"
    EMPTY_ANSWER = "empty_answer"
    SCRIPT_MISMATCH = "script_mismatch"


class ModelError(OrchestratorError):
    """The model could not be reached, is unknown, or answered with something unusable.

    ``code`` says which failure it is; ``retryable`` whether trying again may help. What the server itself said
    (its HTTP status and error code) stays in ``data`` as ``status`` and ``server_code``.
    """

    default_code = ModelErrorCode.UNSPECIFIED

    def __init__(self, message: str, *, code: ModelErrorCode | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.code: ModelErrorCode = code or self.default_code


class ValidationRulesError(ConfigError):
    """A rules file or expected-outputs declaration that is malformed (never treated as a pass)."""


class WorkflowError(OrchestratorError):
    """The Plan / Act / Reflect workflow could not go on."""


class DeployError(OrchestratorError):
    """The compose stack's images or host folders could not be prepared."""
