"""Stage 2, the semantic check: the model judges the artifacts index against the expected outputs.

The model sees metadata and ≤400-character previews only (never whole bodies) and answers one JSON verdict,
parsed with pydantic. A malformed answer is sent back once with what was wrong; a second malformed answer is a
failed verdict, not an exception. Model errors (unreachable, refused) raise :class:`ModelError` to the caller.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.llm.cutjson import close_cut_json
from orchestrator.llm.image_input import ViewedImage
from orchestrator.llm.interface import ChatModel, ImagePart, Message
from orchestrator.llm.jsonreply import json_in_reply
from orchestrator.llm.usage_ledger import Spending, metered
from orchestrator.prompts import load_prompt, render_prompt
from orchestrator.validate.report import FileEntry
from orchestrator.validate.rules import TEXT_KINDS, ExpectedOutputs

MAX_INDEX_ENTRIES = 100
MAX_REPAIRS = 1


class SemanticVerdict(BaseModel):
    """The model's answer. Extra keys (e.g. a ``stage`` it echoes back) are ignored."""

    model_config = ConfigDict(
        extra="ignore", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    pass_: bool = Field(alias="pass", strict=True)
    missing: list[str] = []
    violations: list[str] = []
    rationale: str = Field(min_length=1)


class SemanticOutcome(BaseModel):
    verdict: SemanticVerdict | None
    """``None`` when the model's answers stayed malformed; ``problem`` then says why."""
    problem: str = ""
    attempts: int = 0
    spent: Spending = Spending()
    """What the check's requests spent (read from the ledger they were recorded in)."""
    latency_ms: int = 0


@cache
def system_prompt() -> str:
    return load_prompt("semantic_validator")


@cache
def prompt_fingerprint() -> str:
    """sha256 of every text the semantic check sends besides the index: a changed prompt is a new judge."""
    texts = [load_prompt(name) for name in ("semantic_validator", "semantic_request", "semantic_repair")]
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()


def index_lines(files: Sequence[FileEntry], limit: int = MAX_INDEX_ENTRIES) -> str:
    """The artifacts index, one JSON object per line: previews for text, sha256 for binaries, never bodies."""
    lines = []
    for entry in files[:limit]:
        item: dict[str, Any] = {
            "name": entry.name,
            "path": entry.path,
            "size": entry.size,
            "kind": entry.kind,
        }
        if entry.kind in TEXT_KINDS and entry.preview is not None:
            item["preview"] = entry.preview
            item["preview_is_whole_file"] = len(entry.preview.encode("utf-8")) >= entry.size
        else:
            item["sha256"] = entry.sha256
        lines.append(json.dumps(item, ensure_ascii=False))
    if len(files) > limit:
        lines.append(json.dumps({"omitted_entries": len(files) - limit}))
    return "\n".join(lines)


def user_message(
    expected: ExpectedOutputs, files: Sequence[FileEntry], images: Sequence[ViewedImage] = ()
) -> str:
    required = [
        {
            k: v
            for k, v in r.model_dump(exclude={"schema_"}, exclude_none=True).items()
            if k != "kind" or v != "any"
        }
        for r in expected.rules.required
    ]
    return render_prompt(
        "semantic_request",
        description=expected.description.strip(),
        required=json.dumps(required, ensure_ascii=False) if required else "",
        index=index_lines(files),
        images=[image.path for image in images],
    )


def parse_verdict(content: str | None) -> SemanticVerdict:
    """The verdict in a model answer (prose around it or a fence is tolerated); ``ValueError`` says what is wrong."""
    if not content or not content.strip():
        raise ValueError("the answer was empty")
    try:
        data = json_in_reply(content)
    except json.JSONDecodeError as e:
        raise ValueError(f"the answer is not JSON ({e.msg} at line {e.lineno} column {e.colno})") from e
    except ValueError as e:
        raise ValueError(f"the answer is not JSON ({e})") from e
    if not isinstance(data, dict):
        raise ValueError(f"the answer is JSON {type(data).__name__}, not an object")
    try:
        verdict = SemanticVerdict.model_validate(data)
    except ValidationError as e:
        fields = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'answer'}: {err['msg']}" for err in e.errors()
        )
        raise ValueError(f"the verdict does not fit the schema ({fields})") from e
    if verdict.pass_ and verdict.missing:
        raise ValueError('"pass" is true but "missing" is not empty')
    return verdict


def semantic_check(
    model: ChatModel, expected: ExpectedOutputs, files: Sequence[FileEntry], images: Sequence[ViewedImage] = ()
) -> SemanticOutcome:
    """Ask ``model`` for a verdict; one repair round for a malformed answer.

    ``images`` (checked contact sheets of the Office outputs) follow the request's text as image parts.
    """
    parts = tuple(ImagePart(url=image.data_url, detail="auto") for image in images)
    messages = [
        Message(role="system", content=system_prompt()),
        Message(role="user", content=user_message(expected, files, images), images=parts),
    ]
    outcome = SemanticOutcome(verdict=None)
    started = time.perf_counter()
    recorded = metered(model)
    mark = recorded.ledger.mark()
    try:
        for attempt in range(1 + MAX_REPAIRS):
            response = recorded.complete(messages, purpose="semantic", json_response=True)
            outcome.attempts = attempt + 1
            outcome.spent = recorded.ledger.since(mark)
            try:
                outcome.verdict = parse_verdict(response.content)
                outcome.problem = ""
                return outcome
            except ValueError as e:
                outcome.problem = str(e)[:500]
                if response.cut and (salvaged := _salvaged(response.content or "")) is not None:
                    outcome.verdict, outcome.problem = salvaged, ""  # a rationale cut short is still a verdict
                    return outcome
            messages += [
                Message(role="assistant", content=response.content or ""),
                Message(role="user", content=_repair_request(outcome.problem)),
            ]
        return outcome
    finally:
        outcome.latency_ms = int((time.perf_counter() - started) * 1000)


def _salvaged(content: str) -> SemanticVerdict | None:
    """The verdict in a reply cut at ``max_tokens`` (a rationale that ran long), when its fields are whole."""
    data = close_cut_json(content)
    if not isinstance(data, dict):
        return None
    try:
        return parse_verdict(json.dumps(data))
    except ValueError:
        return None


def _repair_request(problem: str) -> str:
    return render_prompt("semantic_repair", problem=problem)
