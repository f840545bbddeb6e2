"""A sloppy model: answers each request the way a small instruct model behind a server without a tool parser does.

What it *means* to do comes from intents: the scenario files of the bundled goals say what a capable model would call
(the plan, each skill's calls, the verdict). *How* it says it is generic and applies to whatever it means to do:

- no ``tool_calls`` ever: every call is text (bare JSON, a ```json fence with prose, ``<tool_call>`` tags, a
  ``[TOOL_CALLS]`` list, the arguments as a JSON string, trailing chatter, several calls in one reply);
- mistakes before the right call: an invented path (sent twice, the same failing call), an unknown tool name, a
  required argument left out, an argument of the wrong type, single quotes instead of JSON, a runaway reply cut at
  ``max_tokens`` (``finish_reason: length``), a turn of prose or an empty one, a ``<think>`` block that runs away or
  considers a wrong call, a ``finish`` before the outputs exist, build/ written as the sandbox mounts it;
- what a 1.5B model writes after its call: a fenced result it made up (whose keys include ``name``), the tool's
  response echoed in ``<tool_response>`` tags, an empty fence;
- plans and verdicts wrapped in prose or fences, with trailing notes, as Python dicts, after thinking, naming skills
  by their catalog name, or running away; plans with a slide count on every output (``0`` or ``[]`` where it cannot
  apply), and a plan without skills answered, once told, by a no-fit that repeats the complaint.

The policy is stateless: it reads where the conversation stands from the request itself (the calls already made and
their results), so retried Acts, re-plans and context packing do not throw it off. Which habit a step shows is fixed
by a hash of the goal, skill and step, so a run is reproducible. A goal without an intent (work the bundled skills
cannot do) is answered by flailing: invented references, repeats and rambling, never a made-up success.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.llm.scenario import Scenario, load_scenario
from orchestrator.tokens import cut_to_tokens, estimate_tokens

HABITS = (
    "invented_path",
    "unknown_tool",
    "missing_argument",
    "wrong_type",
    "single_quotes",
    "runaway",
    "prose_only",
    "string_arguments",
    "trailing_junk",
    "tags",
    "fence",
    "several",
    "mistral",
    "early_finish",
    "mount_path",
    "empty",
    "thinking",
    "invented_result",
    "echoed_response",
    "empty_fence",
)
"""How an Act step may be said; each step shows one (by hash), the right call always comes in the end."""
PLAN_HABITS = ("runaway", "prose_fence", "trailing_junk", "single_quotes", "skill_names", "thinking", "clean",
               "slides_everywhere", "slip_then_echo")
VERDICT_HABITS = ("prose_fence", "trailing_junk", "python_dict", "clean")
WRONG_NAMES = {
    "write_artifact": "write_file",
    "read_ref": "read_reference",
    "read_file": "open_file",
    "run_script": "execute_script",
    "validate": "validate_json",
    "template_expand": "render_template",
    "finish": "complete_task",
}
RAMBLE = (
    "To make sure the result is complete, compliant and good, I will carefully follow every rule of the skill and "
    "check each requirement of the goal again before I continue with the next step. "
)
_GOAL = re.compile(r"^Goal: (.+)$", re.MULTILINE)
_SKILL = re.compile(r"^Skill: (\S+) — ", re.MULTILINE)
_POINTS = re.compile(r"^\d+\. (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Intent:
    """What a capable model would do for one goal."""

    goal: str
    plan: str
    acts: dict[str, list[list[dict[str, Any]]]]
    """Per skill id, its steps; each step is the calls of one reply (``{"name", "arguments"}``)."""
    verdict: str
    inputs: tuple[Path, ...] = ()


def intent_of(scenario: Scenario) -> Intent:
    """The intent a scenario file scripts: its plan, each skill's calls up to its ``finish``, its verdict."""
    plan = next(s.reply.content or "" for s in scenario.steps if s.purpose == "plan")
    skills = [step["skill"] for step in json.loads(plan)["steps"]]
    segments: list[list[list[dict[str, Any]]]] = [[]]
    for step in scenario.steps:
        if step.purpose != "act" or not step.reply.tool_calls:
            continue
        calls = [{"name": c.name, "arguments": json.loads(c.arguments_text())} for c in step.reply.tool_calls]
        segments[-1].append(calls)
        if any(c["name"] == "finish" for c in calls):
            segments.append([])
    verdict = next((s.reply.content or "" for s in scenario.steps if s.purpose == "semantic"), "")
    base = Path(scenario.source).parent
    return Intent(
        goal=scenario.goal.strip(),
        plan=plan,
        acts=dict(zip(skills, segments, strict=False)),
        verdict=verdict,
        inputs=tuple(base / entry for entry in scenario.inputs),
    )


def intents_in(folder: Path) -> dict[str, Intent]:
    """Every scenario file of ``folder`` as an intent, by goal."""
    intents = [intent_of(load_scenario(path)) for path in sorted(folder.glob("*.yaml"))]
    return {i.goal: i for i in intents}


@dataclass(frozen=True)
class SloppyReply:
    content: str
    finish_reason: str = "stop"
    habit: str = ""
    mistake: bool = False
    """A wrong call the model sends before the right one (the runtime should answer it with an error)."""


@dataclass
class SloppyPolicy:
    """``answer(body)``: the reply to one chat completion request body."""

    intents: Mapping[str, Intent]
    habits: Sequence[str] = HABITS
    salt: str = ""
    """Another salt gives every step another habit (a sweep over salts covers more combinations)."""

    def answer(self, body: Mapping[str, Any]) -> SloppyReply:
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        limit = int(body.get("max_tokens") or body.get("max_completion_tokens") or 4096)
        goal = _goal(messages)
        intent = self.intents.get(goal)
        goal = goal + self.salt
        purpose = _purpose(messages, _offered(body))
        if purpose == "act":
            reply = self._act(messages, intent, goal)
        elif purpose == "plan":
            reply = _plan(messages, intent, goal)
        elif purpose == "reflect":
            reply = _reflect(goal)
        elif purpose == "scored":
            reply = _scores(messages)
        elif purpose == "semantic":
            reply = _verdict(messages, intent, goal)
        else:
            reply = SloppyReply("OK.")
        return _capped(reply, limit)

    # --- Act ------------------------------------------------------------------------------------

    def _act(self, messages: list[Mapping[str, Any]], intent: Intent | None, goal: str) -> SloppyReply:
        skill = next((m[1] for m in (_SKILL.search(_text(x)) for x in messages) if m), "")
        steps = intent.acts.get(skill) if intent is not None else None
        turns = _assistant_turns(messages)
        if not steps:
            wandering = _hash(goal, "flail") % 2 == 1
            return _wander(skill, len(turns)) if wandering else _flail(skill, len(turns))
        made = [call for turn in turns for call in turn]
        index = next((j for j, step in enumerate(steps) if not all(_made(c, made) for c in step)), len(steps) - 1)
        since = 0  # turns spent on this step: since the last one that made an earlier step's call
        for turn in reversed(turns):
            if any(_made(c, turn) for step in steps[:index] for c in step):
                break
            since += 1
        habit = self.habits[_hash(goal, skill, str(index)) % len(self.habits)]
        following = steps[index + 1] if index + 1 < len(steps) else None
        attempts = _attempts(habit, steps[index], following, skill, steps[-1])
        reply = attempts[min(since, len(attempts) - 1)]
        return reply


def _attempts(
    habit: str,
    calls: list[dict[str, Any]],
    following: list[dict[str, Any]] | None,
    skill: str,
    last: list[dict[str, Any]],
) -> list[SloppyReply]:
    """The replies for one step: its mistakes first, then the right call(s) (always readable in the end)."""
    right = SloppyReply(_bare(calls), habit=habit)
    first = calls[0]
    if habit == "invented_path" and (invented := _invented(first, skill)) is not None:
        wrong = SloppyReply(_bare([invented]), habit=habit, mistake=True)
        return [wrong, wrong, right]
    if habit == "unknown_tool" and first["name"] in WRONG_NAMES:
        wrong_call = {**first, "name": WRONG_NAMES[first["name"]]}
        return [SloppyReply(_fenced([wrong_call]), habit=habit, mistake=True), right]
    if habit == "missing_argument" and (partial := _without_required(first)) is not None:
        return [SloppyReply(_bare([partial]), habit=habit, mistake=True), right]
    if habit == "wrong_type" and (typed := _wrong_type(first)) is not None:
        return [SloppyReply(_bare([typed]), habit=habit), right]
    if habit == "single_quotes":
        return [SloppyReply(repr({"name": first["name"], "arguments": first["arguments"]}), habit=habit), right]
    if habit == "runaway":
        text = "Let me think about this step by step. " + RAMBLE * 400 + _bare(calls)
        return [SloppyReply(text, habit=habit), right]
    if habit == "prose_only":
        return [SloppyReply(f"Next I will use {first['name']} to continue with the skill.", habit=habit), right]
    if habit == "string_arguments":
        text = json.dumps({"name": first["name"], "arguments": json.dumps(first["arguments"])})
        return [SloppyReply(text, habit=habit)] if len(calls) == 1 else [right]
    if habit == "trailing_junk":
        return [SloppyReply(_bare(calls) + "\n\nThis should do it. Let me know if you need more!", habit=habit)]
    if habit == "tags":
        return [SloppyReply("".join(f"<tool_call>\n{_one(c)}\n</tool_call>\n" for c in calls), habit=habit)]
    if habit == "fence":
        return [SloppyReply(_fenced(calls), habit=habit)]
    if habit == "several" and following is not None:
        return [SloppyReply(_bare(calls + following), habit=habit)]
    if habit == "mistral":
        return [SloppyReply("[TOOL_CALLS]" + json.dumps([_call_obj(c) for c in calls]), habit=habit)]
    if habit == "early_finish" and following is not None:  # claims the outputs before making them
        return [SloppyReply(_bare(last), habit=habit), right]
    if habit == "mount_path" and (mounted := _mounted(first)) is not None:
        return [SloppyReply(_bare([mounted, *calls[1:]]), habit=habit)]
    if habit == "empty":
        return [SloppyReply("", habit=habit), right]
    if habit == "invented_result":  # the call, then the result it imagines, in a fence whose keys include "name"
        made_up = {"name": "result", "columns": [{"name": "date", "type": "str"}], "rows": 3}
        return [SloppyReply(_bare(calls) + f"\n```json\n{json.dumps(made_up)}\n```", habit=habit)]
    if habit == "echoed_response":  # the call, then the tool's answer as its chat template would show it
        echoed = {"name": first["name"], "content": "ok"}
        return [SloppyReply(_bare(calls) + f"\n<tool_response>\n{json.dumps(echoed)}\n</tool_response>", habit=habit)]
    if habit == "empty_fence":
        return [SloppyReply(_bare(calls) + "\n```\n```", habit=habit)]
    if habit == "thinking":  # a reasoning model: thinks past the cap once, then thinks of a wrong call first
        considered = _invented(first, skill) or {"name": WRONG_NAMES.get(first["name"], "guess"), "arguments": {}}
        thought = f"<think>\nShould I call {_one(considered)}? No, the skill says otherwise.\n</think>\n"
        return [SloppyReply("<think>\n" + RAMBLE * 400, habit=habit), SloppyReply(thought + _bare(calls), habit=habit)]
    return [right]


def _mounted(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """The call with its build/ path written as the sandbox mounts it (``/skill/build/x``) or as models guess it
    (``/build/x``)."""
    key, mount = {"write_artifact": ("path", "/skill/build/"), "template_expand": ("output_path", "/build/")}.get(
        call["name"], ("", ""))
    path = call["arguments"].get(key) if key else None
    if not isinstance(path, str):
        return None
    return {"name": call["name"], "arguments": {**call["arguments"], key: mount + path.removeprefix("build/")}}


def _flail(skill: str, turns: int) -> SloppyReply:
    """An Act the model cannot do: it invents references, repeats itself and rambles; it never claims success."""
    leaf = skill.rsplit("/", 1)[-1] or "skill"
    invented = {"name": "read_ref", "arguments": {"path": f"{leaf}/{leaf}.md"}}
    sequence = [
        SloppyReply(_bare([invented]), habit="flail_invented"),
        SloppyReply(_bare([invented]), habit="flail_invented"),
        SloppyReply(_bare([{"name": "list_files", "arguments": {"glob": "**/*"}}]), habit="flail_list"),
        SloppyReply("I need to read the guidelines first. " + RAMBLE * 400, habit="flail_runaway"),
    ]
    return sequence[turns] if turns < len(sequence) else SloppyReply(_bare([invented]), habit="flail_repeat")


def _wander(skill: str, turns: int) -> SloppyReply:
    """An Act the model cannot do, without ever repeating itself: a new invented path each turn, and now and then a
    file nobody asked for (each one is progress, so only the budgets stop it)."""
    leaf = skill.rsplit("/", 1)[-1] or "skill"
    if turns % 3 == 2:
        call = {"name": "write_artifact", "arguments": {"path": f"draft-{turns}.txt", "text": f"Draft {turns}."}}
    else:
        call = {"name": "read_ref", "arguments": {"path": f"docs/{leaf}-part-{turns}.md"}}
    return SloppyReply(_bare([call]), habit="wander")


# --- Plan, reflect, verdicts -------------------------------------------------------------------------


def _plan(messages: list[Mapping[str, Any]], intent: Intent | None, goal: str) -> SloppyReply:
    answered = sum(1 for m in messages if m.get("role") == "assistant")
    catalog = re.findall(r"^- ([\w./-]+): ", _text(messages[-1]) if messages else "", re.MULTILINE)
    if intent is not None:
        plan = json.loads(intent.plan)
    elif _hash(goal, "no_fit") % 3 == 0:
        plan = {"steps": [], "no_fit": {"reason": "none of the skills can do this", "missing": ["a skill for it"]}}
    else:
        words = set(re.findall(r"[a-z]+", goal.lower()))
        best = max(catalog, key=lambda s: len(words & set(re.findall(r"[a-z]+", s.lower()))), default="")
        plan = {"steps": [{"skill": best, "why": "it seems closest to the goal", "expected": "the result",
                           "outputs": [{"path": "result.txt", "kind": "text"}]}],
                "evaluation": ["the goal is met"]}
    habit = PLAN_HABITS[_hash(goal, "plan") % len(PLAN_HABITS)]
    if habit == "slip_then_echo" and answered < 2 and plan["steps"]:
        if answered == 0:  # the steps say what they make but name no skill
            steps = [{k: v for k, v in step.items() if k != "skill"} for step in plan["steps"]]
            return SloppyReply(json.dumps({**plan, "steps": steps}), habit=habit)
        complaint = _text(messages[-1])[:200]  # the runtime's complaint, given back as the reason
        return SloppyReply(json.dumps({"steps": [], "no_fit": {"reason": complaint}}), habit="plan_echo")
    if answered:
        return SloppyReply(json.dumps(plan), habit="plan_again")
    if habit == "slides_everywhere":  # the prompt's slide count filled in on every output
        steps = [{**step, "outputs": [_slides_filled_in(o, i) for i, o in enumerate(step.get("outputs") or [])]}
                 for step in plan["steps"]]
        return SloppyReply(json.dumps({**plan, "steps": steps}), habit=habit)
    if habit == "runaway":
        plan = {**plan, "evaluation": [RAMBLE * 300]}
        return SloppyReply(json.dumps(plan, indent=2), habit=habit)
    if habit == "prose_fence":
        text = f"Sure! Here is the plan for the goal:\n\n```json\n{json.dumps(plan, indent=2)}\n```\n\nThe plan uses"
        return SloppyReply(text + " the skills in the order given.", habit=habit)
    if habit == "trailing_junk":
        return SloppyReply(json.dumps(plan) + "\n\nNote: this plan follows the catalog.", habit=habit)
    if habit == "single_quotes":
        return SloppyReply(repr(plan), habit=habit)
    if habit == "thinking":
        thought = '<think>\nMaybe {"steps": [{"skill": "guess"}]}? No.\n</think>\n'
        return SloppyReply(thought + json.dumps(plan), habit=habit)
    if habit == "skill_names":  # the name on the catalog line, not the id
        steps = [{**step, "skill": step["skill"].rsplit("/", 1)[-1].replace("-", "_")} for step in plan["steps"]]
        return SloppyReply(json.dumps({**plan, "steps": steps}), habit=habit)
    return SloppyReply(json.dumps(plan), habit=habit)


def _slides_filled_in(output: Any, index: int) -> Any:
    """An output with a slide count whatever its kind: ``1`` on a pdf, ``0`` or ``[]`` on the others."""
    if not isinstance(output, dict) or output.get("slides"):
        return output
    path = str(output.get("path", ""))
    return {**output, "slides": 1 if path.endswith(".pdf") else 0 if index % 2 else []}


def _reflect(goal: str) -> SloppyReply:
    if _hash(goal, "reflect") % 2:
        return SloppyReply("1. The expected outputs are still missing. " + RAMBLE * 300, habit="runaway")
    return SloppyReply("Still missing: the expected outputs.\nNext: call the skill's main tool.", habit="short")


def _verdict(messages: list[Mapping[str, Any]], intent: Intent | None, goal: str) -> SloppyReply:
    if intent is not None and intent.verdict:
        verdict = json.loads(intent.verdict)
    else:
        verdict = {"pass": False, "missing": ["the goal's result"], "violations": [],
                   "rationale": "The files do not do what the goal asks."}
    answered = sum(1 for m in messages if m.get("role") == "assistant")
    habit = VERDICT_HABITS[_hash(goal, "verdict") % len(VERDICT_HABITS)]
    if answered or habit == "clean":
        return SloppyReply(json.dumps(verdict), habit="clean")
    if habit == "prose_fence":
        return SloppyReply(f"Here is my verdict:\n```json\n{json.dumps(verdict, indent=2)}\n```", habit=habit)
    if habit == "python_dict":
        return SloppyReply(repr(verdict), habit=habit)
    return SloppyReply(json.dumps(verdict) + "\nI checked every file in the index.", habit=habit)


def _scores(messages: list[Mapping[str, Any]]) -> SloppyReply:
    points = _POINTS.findall(_text(messages[-1]) if messages else "")
    scores = [{"point": p, "score": 1.0, "reason": "it is there"} for p in points]
    return SloppyReply(f"```json\n{json.dumps({'scores': scores})}\n```", habit="scores")


# --- reading a request ---------------------------------------------------------------------------------


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def _goal(messages: Iterable[Mapping[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user" and (match := _GOAL.search(_text(message))):
            return match[1].strip()
    return ""


def _offered(body: Mapping[str, Any]) -> set[str]:
    tools = body.get("tools") or []
    return {str((t.get("function") or {}).get("name", "")) for t in tools if isinstance(t, Mapping)}


def _purpose(messages: list[Mapping[str, Any]], offered: set[str]) -> str:
    last = _text(messages[-1]) if messages else ""
    if last.startswith("Micro-Reflect:"):
        return "reflect"
    if "finish" in offered:
        return "act"
    everything = "\n".join(_text(m) for m in messages)
    if "Skills catalog" in everything:
        return "plan"
    if "Evaluation points:" in everything and '"scores"' in everything:
        return "scored"
    if '"pass"' in everything:
        return "semantic"
    return "other"


def _assistant_turns(messages: list[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each assistant turn's calls as the runtime sent them back (``[]`` for a turn of text only)."""
    turns = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = None
            calls.append({"name": function.get("name", ""), "arguments": arguments})
        turns.append(calls)
    return turns


def _made(call: Mapping[str, Any], made: Iterable[Mapping[str, Any]]) -> bool:
    wanted = _comparable(call["arguments"])
    return any(m["name"] == call["name"] and _comparable(m["arguments"]) == wanted for m in made)


def _comparable(arguments: Any) -> Any:
    """Arguments as the runtime takes them (a variant it accepted counts as the call made)."""
    if not isinstance(arguments, dict):
        return arguments
    return {k: _taken(k, v) for k, v in arguments.items() if k != "reason"}


def _taken(key: str, value: Any) -> Any:
    if key == "outputs":
        items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
        return [_unmounted(str(item).strip()) for item in items]
    if not isinstance(value, str):
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        decoded = None
    return decoded if isinstance(decoded, dict | list) and key != "text" else _unmounted(value)


def _unmounted(path: str) -> str:
    for mount in ("/skill/build/", "/build/", "build/"):
        path = path.removeprefix(mount)
    return path


# --- writing a reply -----------------------------------------------------------------------------------


def _call_obj(call: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": call["name"], "arguments": call["arguments"]}


def _one(call: Mapping[str, Any]) -> str:
    return json.dumps(_call_obj(call), ensure_ascii=False)


def _bare(calls: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(_one(c) for c in calls)


def _fenced(calls: Sequence[Mapping[str, Any]]) -> str:
    blocks = "\n".join(f"```json\n{json.dumps(_call_obj(c), indent=2, ensure_ascii=False)}\n```" for c in calls)
    return f"I will call {calls[0]['name']} now.\n\n{blocks}\n"


SKILL_PATHS = {"read_ref": "path", "read_file": "path", "run_script": "path", "validate": "schema",
               "template_expand": "template_path"}
"""The argument of each tool that names a file of the skill (where a small model invents one)."""


def _invented(call: Mapping[str, Any], skill: str) -> dict[str, Any] | None:
    """The call on a path the skill never links, the way a small model guesses one (``brand-guidelines/
    brand-guidelines.md``, ``resources/build_deck.py``)."""
    key = SKILL_PATHS.get(call["name"])
    value = call["arguments"].get(key) if key else None
    if key is None or not isinstance(value, str) or value.startswith(("build/", "/inputs/", "inputs/")):
        return None
    leaf = skill.rsplit("/", 1)[-1] or "skill"
    invented = f"{leaf}/{leaf}.md" if call["name"] == "read_ref" else f"resources/{Path(value).name}"
    return {"name": call["name"], "arguments": {**call["arguments"], key: invented}}


def _without_required(call: Mapping[str, Any]) -> dict[str, Any] | None:
    arguments = dict(call["arguments"])
    for key in ("path", "text", "template_path", "argv"):
        if key in arguments:
            del arguments[key]
            return {"name": call["name"], "arguments": arguments}
    return None


def _wrong_type(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """One argument in the type small models often give it: an object where JSON text goes, text where a list or an
    object goes."""
    arguments = dict(call["arguments"])
    if isinstance(arguments.get("text"), str):
        try:
            arguments["text"] = json.loads(arguments["text"])
        except ValueError:
            arguments["text"] = [arguments["text"]]
    elif isinstance(arguments.get("outputs"), list):
        arguments["outputs"] = ", ".join(map(str, arguments["outputs"]))
    elif isinstance(arguments.get("args"), dict):
        arguments["args"] = json.dumps(arguments["args"])
    elif isinstance(arguments.get("data"), dict):
        arguments["data"] = json.dumps(arguments["data"])
    else:
        return None
    return {"name": call["name"], "arguments": arguments}


def _capped(reply: SloppyReply, max_tokens: int) -> SloppyReply:
    """A reply longer than ``max_tokens`` is cut there, as a server does (``finish_reason: length``)."""
    if estimate_tokens(reply.content) <= max_tokens:
        return reply
    cut, _ = cut_to_tokens(reply.content, max_tokens)
    return SloppyReply(cut, "length", reply.habit, reply.mistake)


def _hash(*parts: str) -> int:
    return int(hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:8], 16)
