"""A model's plan read as it was meant: one normalisation of any plan-shaped JSON before anything checks it.

Models fill a plan's fields in ways that are clear but not our shape: a bare list of steps, ids as strings,
``"slides": 0`` on a json output, a ``kind`` that disagrees with the file name, ``./build/x.json``. This module turns
any JSON value into the plan's shape where the intent is clear, and *drops and notes* what cannot apply (a slide count
on something that is not a deck, an impossible value, an output path that leaves the output folder) instead of
rejecting the whole plan. Whatever it keeps, the contract accepts: slide counts and kinds are checked with the
contract's own rules (:func:`~orchestrator.validate.rules.slide_counts_apply`,
:func:`~orchestrator.validate.rules.kind_conflict`).

What it cannot read as meant (no step names a skill, a top level that is not an object) is left for the plan model
to reject, with a message saying the field, the values allowed and an example (:func:`shape_problem`).
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any, get_args

from pydantic import ValidationError

from orchestrator.act.text import repeats as repeats
from orchestrator.validate.rules import Kind, kind_conflict, kind_of_extension, slide_counts_apply

MAX_STEPS = 12
MAX_OUTPUTS = 20
MAX_EVALUATION = 12
MAX_TEXT_CHARS = 1000
MAX_PATH_CHARS = 240
MAX_SLIDES = 500
_SKILL_KEYS = ("skill", "id", "skill_id", "name")
_PATH_KEYS = ("path", "file", "filename", "name")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_KIND_ALIASES = {"md": "markdown", "txt": "text", "yml": "yaml", "jpg": "jpeg", "ppt": "pptx", "doc": "docx"}

PLAN_EXAMPLE = (
    '{"steps": [{"skill": "<skill id from the catalog>", "why": "<short>", "expected": "<what it makes>", '
    '"outputs": [{"path": "result.json", "kind": "json"}]}], "evaluation": ["<what makes it good>"]}'
)
ANSWER_EXAMPLE = '{"steps": [], "no_skill_needed": {"reason": "<why no skill is needed>", "answer": "<the answer>"}}'
NO_FIT_EXAMPLE = '{"steps": [], "no_fit": {"reason": "<why no skill fits>", "missing": ["<what a skill would do>"]}}'


def as_kind(kind: str) -> str:
    """A planner's free-form kind as a rules ``Kind`` (unknown kinds are not checked: ``any``)."""
    kind = kind.lower().strip().strip(".")
    kind = _KIND_ALIASES.get(kind, kind)
    return kind if kind in get_args(Kind) else "any"


def normalise_plan(data: Any) -> tuple[Any, list[str]]:
    """``data`` (any JSON value a model gave as its plan) in the plan's shape, and a note for everything dropped or
    changed. Never raises; what stays unreadable is left for validation to name."""
    notes: list[str] = []
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict):
        return data, notes
    data = dict(data)
    answer = data.get("answer")
    if not data.get("steps") and "no_fit" not in data and "no_skill_needed" not in data and isinstance(answer, str) \
            and answer.strip():  # the goal needs no skill: the planner answered it
        data["no_skill_needed"] = {"reason": _text(data.get("reason")), "answer": answer}
        data["steps"] = []
    if (not data.get("steps") and "no_fit" not in data and "no_skill_needed" not in data
            and (data.get("unmet") or data.get("reason"))):
        data["no_fit"] = {"reason": data.get("unmet") or data.get("reason"), "missing": data.get("missing", [])}
        data["steps"] = []
    if "steps" not in data and "skills" in data:
        data["steps"] = data.pop("skills")
    steps = data.get("steps")
    if steps is None:
        steps = []
    elif isinstance(steps, (str, dict)):
        steps = [steps]
    elif not isinstance(steps, list):
        notes.append(f"steps: {_show(steps)} is not a list of steps; ignored")
        steps = []
    if len(steps) > MAX_STEPS:
        notes.append(f"steps: {len(steps)} steps, only the first {MAX_STEPS} are kept")
        steps = steps[:MAX_STEPS]
    data["steps"] = [s for i, raw in enumerate(steps) if (s := _step(raw, i, notes)) is not None]
    data["evaluation"] = _texts(data.get("evaluation"), "evaluation", notes)[:MAX_EVALUATION]
    if "no_fit" in data:
        data["no_fit"] = _no_fit(data["no_fit"], notes)
    return data, notes


def _step(raw: Any, index: int, notes: list[str]) -> dict[str, Any] | None:
    where = f"steps[{index}]"
    if isinstance(raw, str):
        raw = {"skill": raw}
    if not isinstance(raw, dict):
        notes.append(f"{where}: {_show(raw)} is not a step (an object naming a skill); dropped")
        return None
    skill = next((raw[k] for k in _SKILL_KEYS if k in raw), None)
    if isinstance(skill, (int, float)) and not isinstance(skill, bool):
        skill = str(skill)
    if skill is not None and not isinstance(skill, str):
        notes.append(f"{where}.skill: {_show(skill)} is not a skill id; the step is dropped")
        return None
    step: dict[str, Any] = {"why": _text(raw.get("why")), "expected": _text(raw.get("expected"))}
    if skill is not None:
        step["skill"] = skill.strip()[:MAX_PATH_CHARS]
    outputs = raw.get("outputs", [])
    if isinstance(outputs, (str, dict)):
        outputs = [outputs]
    elif not isinstance(outputs, list):
        notes.append(f"{where}.outputs: {_show(outputs)} is not a list of files; ignored")
        outputs = []
    if len(outputs) > MAX_OUTPUTS:
        notes.append(f"{where}.outputs: only the first {MAX_OUTPUTS} of {len(outputs)} are kept")
    kept = [_output(o, f"{where}.outputs[{i}]", notes) for i, o in enumerate(outputs[:MAX_OUTPUTS])]
    step["outputs"] = [o for o in kept if o is not None]
    return step


def _output(raw: Any, where: str, notes: list[str]) -> dict[str, Any] | None:
    if isinstance(raw, str):
        raw = {"path": raw}
    if not isinstance(raw, dict):
        notes.append(f"{where}: {_show(raw)} is not a file (a name or {{\"path\", \"kind\"}}); dropped")
        return None
    given = next((raw[k] for k in _PATH_KEYS if k in raw), None)
    path = _clean_path(given) if isinstance(given, str) else None
    if path is None:
        notes.append(f"{where}.path: {_show(given)} is not a file name inside the output folder; output dropped")
        return None
    by_extension = kind_of_extension(path)
    stated = raw.get("kind")
    kind = as_kind(stated) if isinstance(stated, str) else (by_extension or "any")
    if stated is not None and not isinstance(stated, str):
        notes.append(f"{where}.kind: {_show(stated)} is not a kind; taken from the file name ({kind})")
    if kind == "any" and by_extension is not None:
        kind = by_extension
    elif (conflict := kind_conflict(kind, path)) is not None:
        notes.append(f"{where}.kind: {kind} does not fit the name {path}; taken as {conflict}")
        kind = conflict
    output: dict[str, Any] = {"path": path, "kind": kind}
    slides = _slides(raw.get("slides"))
    if slides is not None and slide_counts_apply(kind, path):
        output["slides"] = slides
    elif raw.get("slides") is not None:
        why = "a slide count only applies to a pptx" if slides is not None else "not a number of slides from 1 up"
        notes.append(f"{where}.slides: {_show(raw.get('slides'))} dropped ({why})")
    return output


def _clean_path(value: str) -> str | None:
    """A planned output's path relative to the output folder (``./``, ``/`` and ``build/`` in front removed), or
    None when it cannot name a file there (empty, ``..``, control characters, too long)."""
    text = value.strip().replace("\\", "/")
    if not text or len(text) > MAX_PATH_CHARS or _CONTROL.search(text):
        return None
    parts = [p for p in PurePosixPath(text).parts if p not in ("/", ".")]
    while parts and parts[0] == "build":
        parts = parts[1:]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _slides(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and 1 <= value <= MAX_SLIDES else None


def _no_fit(raw: Any, notes: list[str]) -> dict[str, Any] | None:
    if raw is None or raw is False:
        return None
    if isinstance(raw, dict):
        reason = raw.get("reason", "")
        missing = raw.get("missing", [])
    else:
        reason, missing = raw, []
    return {"reason": _text(reason), "missing": _texts(missing, "no_fit.missing", notes)[:MAX_EVALUATION]}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value[:MAX_TEXT_CHARS]
    if isinstance(value, list):
        return "; ".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value)[:MAX_TEXT_CHARS]
    return json.dumps(value, ensure_ascii=False)[:MAX_TEXT_CHARS]


def _texts(value: Any, where: str, notes: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        notes.append(f"{where}: {_show(value)} is not a list of texts; taken as one")
        value = [value]
    return [t for t in (_text(v)[:MAX_TEXT_CHARS] for v in value) if t.strip()]


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def shape_problem(error: ValidationError, known: list[str]) -> str:
    """What is wrong with a plan that still failed validation after normalisation, said so a model can fix it: the
    field, the values allowed, and an example."""
    first = error.errors()[0]
    loc = first["loc"]
    ids = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
    if loc and loc[-1] == "skill":
        return (
            f"step {loc[1] if len(loc) > 1 else 0} has no skill: every step needs \"skill\" set to one of "
            f"the catalog's ids ({ids}); for example {PLAN_EXAMPLE}"
        )
    if not loc and first["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return f"the answer is not a JSON object; answer with an object like {PLAN_EXAMPLE}"
    if not loc and "needs the answer" in first["msg"]:  # a no_skill_needed without its answer
        return f"{first['msg'].removeprefix('Value error, ')}; for example {ANSWER_EXAMPLE}"
    if not loc:
        return (
            "the plan has no step and no no_fit: give at least one step whose \"skill\" is one of the catalog's ids "
            f"({ids}), for example {PLAN_EXAMPLE}; or, only if none of them can serve the goal, {NO_FIT_EXAMPLE}"
        )
    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    return f"{field}: {first['msg']}; for example {PLAN_EXAMPLE}"

