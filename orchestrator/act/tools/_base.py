"""The shape every Act tool shares: typed arguments in, a typed outcome (with at most one effect) out."""

from __future__ import annotations

import inspect
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import UnionType
from typing import Any, Generic, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

from orchestrator.act.context import ActContext
from orchestrator.llm.image_input import ViewedImage
from orchestrator.llm.interface import ToolSpec
from orchestrator.prompts import tool_text

MAX_VALUE_BYTES = 64 * 1024
MAX_SCRIPT_FAILURES = 2  # the first failure plus exactly one informed retry


class ToolArgs(BaseModel):
    """Base of every tool's argument model: unknown fields are refused, ``reason`` is kept as evidence.

    Values in the shape small models often send are taken as they meant them (see :func:`_as_meant`): an object or
    a list written as JSON text, and a list of strings written as one string (``"a.json, b.png"``,
    ``"soffice --headless"``). Anything else that does not fit is the model's error to fix.
    """

    model_config = ConfigDict(extra="forbid")

    reason: str = Field("", description=tool_text("args.reason"))

    @model_validator(mode="before")
    @classmethod
    def _as_meant(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fixed = dict(data)
        for name, field_info in cls.model_fields.items():
            keys = [name, *_aliases(field_info)]
            key = next((k for k in keys if k in data), None)
            if key is not None and isinstance(data[key], str):
                fixed[key] = _decoded(data[key], _kinds(field_info.annotation))
        return fixed


def _aliases(field_info: FieldInfo) -> list[str]:
    alias = field_info.validation_alias
    if isinstance(alias, str):
        return [alias]
    if isinstance(alias, AliasChoices):
        return [c for c in alias.choices if isinstance(c, str)]
    return []


def _kinds(annotation: Any) -> set[Any]:
    """The outer types a field accepts (``dict``, ``list``, ``str``, ``Any``, …), unions unpacked."""
    if annotation is Any:
        return {Any}
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return set().union(*(_kinds(a) for a in get_args(annotation)))
    if origin is list and get_args(annotation) == (str,):
        return {"list[str]"}
    return {origin or annotation}


def _decoded(value: str, kinds: set[Any]) -> Any:
    """``value`` as the container the field wants, when it does not take text itself; else ``value`` unchanged."""
    if str in kinds or Any in kinds or not kinds & {dict, list, "list[str]"}:
        return value
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        decoded = None
    if isinstance(decoded, dict) and dict in kinds or isinstance(decoded, list) and kinds & {list, "list[str]"}:
        return decoded
    if "list[str]" not in kinds or not value.strip():
        return value
    if re.search(r"[,\n]", value):
        return [part.strip() for part in re.split(r"[,\n]", value) if part.strip()]
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


# --- effects: what a tool asks of the loop (at most one per outcome) -------------------------------------------


@dataclass(frozen=True)
class Finish:
    """The model declares its outputs done; the loop validates them."""

    summary: str
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Violation:
    """A sandbox or confinement rule was broken: the Act ends."""

    what: str


@dataclass(frozen=True)
class RepeatedRead:
    """Content already sent was asked for again; ``path`` is the document (empty when not a skill document)."""

    path: str = ""


Effect = Finish | Violation | RepeatedRead
Disclosure = Literal["L2", "L3"]


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call gave: the model sees ``ok``/``data``/``error``; the rest becomes the step's record."""

    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    changed_files: tuple[str, ...] = ()
    disclosure: Disclosure | None = None
    memo_hit: bool = False
    container: dict[str, Any] | None = None
    effect: Effect | None = None
    image: ViewedImage | None = None  # view_image: sent to the model after this turn's tool results

    def content(self) -> str:
        payload = {"ok": self.ok, **self.data}
        if self.error:
            payload["error"] = self.error
        return json.dumps(payload, ensure_ascii=False, default=str)


A = TypeVar("A", bound=ToolArgs)
ToolFn = Callable[[ActContext, A], ToolOutcome]


@dataclass(frozen=True)
class PreparedCall:
    """A call whose arguments validated: the model object and the function to apply to a context."""

    name: str
    args: ToolArgs
    run: Callable[[ActContext], ToolOutcome]


@dataclass(frozen=True)
class Tool(Generic[A]):
    """A typed tool: its argument model (from the function's signature) gives the JSON schema the model sees."""

    name: str
    description: str
    args_model: type[A]
    fn: ToolFn[A]

    def __call__(self, ctx: ActContext, args: A) -> ToolOutcome:
        return self.fn(ctx, args)

    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def prepare(self, arguments: str | None) -> PreparedCall:
        """Parse and validate the raw JSON arguments, once.

        Raises ``json.JSONDecodeError`` or ``pydantic.ValidationError`` when they do not fit (the model is told).
        """
        raw = json.loads(arguments or "{}")
        if isinstance(raw, str) and raw.strip().startswith("{"):  # arguments encoded twice (JSON text in JSON)
            raw = json.loads(raw)
        args = self.args_model.model_validate({} if raw is None else raw)
        return PreparedCall(self.name, args, lambda ctx: self.fn(ctx, args))


def tool(*, name: str | None = None) -> Callable[[ToolFn[A]], Tool[A]]:
    """Make ``fn(ctx, args: SomeArgs) -> ToolOutcome`` a :class:`Tool`; ``SomeArgs`` comes from its signature and
    the description the model sees from ``orchestrator/prompts/tools/<name>.md``."""

    def wrap(fn: ToolFn[A]) -> Tool[A]:
        params = list(inspect.signature(fn).parameters)
        args_model = get_type_hints(fn).get(params[1]) if len(params) == 2 else None
        if not (isinstance(args_model, type) and issubclass(args_model, ToolArgs)):
            raise TypeError(f"tool {fn.__name__} must be fn(ctx: ActContext, args: <ToolArgs subclass>)")
        tool_name = name or fn.__name__
        return Tool(tool_name, tool_text(tool_name), cast("type[A]", args_model), fn)

    return wrap


def fail(error: str, **data: Any) -> ToolOutcome:
    return ToolOutcome(ok=False, error=error, data=data)


def violation(error: str, what: str) -> ToolOutcome:
    """A refused call that also ends the Act (path escape, script outside the skill root, sandbox refusal)."""
    return ToolOutcome(ok=False, error=error, effect=Violation(what))


def is_script(ctx: ActContext, rel_path: str) -> bool:
    return PurePosixPath(rel_path).suffix.lower() in ctx.deps.settings.sandbox.allowed_extensions
