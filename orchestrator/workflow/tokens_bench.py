"""``bench tokens``: the planner's prompt beside a prompt holding every SKILL.md, at growing library sizes, and the
tokens of a first and a second run of a shipped scenario (the second one reads the response cache)."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel

from orchestrator.config import Settings
from orchestrator.errors import ConfigError
from orchestrator.llm.scenario import load_scenario
from orchestrator.prompts import load_prompt
from orchestrator.select.index import SkillIndex
from orchestrator.select.shortlist import catalog_text, make_shortlist, model_invocable
from orchestrator.skills.loader import SkillLibrary
from orchestrator.tokens import estimate_tokens
from orchestrator.workflow.embedded import run_goal
from orchestrator.workflow.goal import GoalResult
from orchestrator.workflow.planner_bench import planner_prompt_tokens
from orchestrator.workflow.request import GoalRequest
from orchestrator.workflow.runtime import Runtimes, RuntimeSpec

_VERBS = (
    "convert",
    "audit",
    "summarise",
    "translate",
    "schedule",
    "forecast",
    "clean",
    "validate",
    "compare",
    "archive",
    "tag",
    "score",
    "merge",
    "monitor",
    "draft",
    "index",
    "migrate",
    "label",
    "estimate",
    "redact",
)
_OBJECTS = (
    "invoices",
    "server logs",
    "recipes",
    "podcast episodes",
    "tax forms",
    "sensor readings",
    "contracts",
    "playlists",
    "lab results",
    "shipping manifests",
    "support tickets",
    "floor plans",
    "survey answers",
    "git histories",
    "bird sightings",
    "wine lists",
    "payroll runs",
    "satellite images",
    "subtitles",
    "timesheets",
    "chess games",
    "menus",
    "insurance claims",
    "bus timetables",
    "museum catalogues",
)
_FORMATS = ("CSV", "JSON", "YAML", "Markdown", "SQLite", "XML", "plain text", "HTML")


class TokenRun(BaseModel):
    skills: int
    planner_prompt_tokens: int
    naive_prompt_tokens: int
    shortlist_contains_target: bool


class TokenBench(BaseModel):
    goal: str
    target: list[str]
    runs: list[TokenRun]
    first_run_tokens: int
    second_run_tokens: int
    first_run_tool_calls: int
    second_run_tool_calls: int
    second_run_saving: float
    """The share of the first run's tokens the second run did not send (1.0: nothing sent)."""
    second_run_response_cache_hits: int
    """Model replies of the second run answered from the response cache."""


def write_distractors(root: Path, count: int, *, seed: int = 7) -> None:
    """``count`` generated skills (deterministic) that do everyday data chores unrelated to any bundled skill."""
    rng = random.Random(seed)
    for i in range(count):
        verb, obj, fmt = rng.choice(_VERBS), rng.choice(_OBJECTS), rng.choice(_FORMATS)
        name = f"{verb}-{obj.replace(' ', '-')}-{i:04d}"
        description = (
            f"{verb.capitalize()} {obj} stored as {fmt}. Use when someone needs their {obj} handled in bulk, "
            f"with a short report of what changed and a {fmt} copy of the result."
        )
        body = "\n".join(
            [
                f"# {name}",
                "",
                f"Read the {obj} from the {fmt} input, {verb} each record and keep an audit trail.",
                *(f"{n}. Step {n}: check the {rng.choice(_OBJECTS)} fields and log anomalies." for n in range(1, 12)),
            ]
        )
        folder = root / "generated" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")


def _naive_prompt_tokens(goal: str, library: SkillLibrary) -> int:
    """The prompt of a runtime that puts every SKILL.md in front of the planner."""

    total = estimate_tokens(load_prompt("plan_system")) + estimate_tokens(f"Goal: {goal}")
    for s in library.list():
        parsed, _ = library.parsed(s.id)
        total += estimate_tokens(f"{s.id}: {s.name} — {s.description}\n{parsed.body}")
    return total


def _scenario_target(scenario: Path) -> tuple[str, list[str]]:
    """The goal of a scenario and the skills its first plan reply uses."""

    loaded = load_scenario(scenario)
    for step in loaded.steps:
        if step.purpose == "plan" and step.reply.content:
            plan = json.loads(step.reply.content)
            return loaded.goal, [s["skill"] for s in plan.get("steps", [])]
    raise ConfigError(f"{scenario} has no plan reply to take the target skills from", where="bench")


def bench_tokens(
    skills_dir: Path, scenario: Path, settings: Settings, *, sizes: tuple[int, ...] = (10, 100, 1000)
) -> TokenBench:
    """Planner prompt vs every-SKILL.md prompt at each library size, and tokens of a first and second run."""
    goal, target = _scenario_target(scenario)
    selection = settings.selection
    runs = []
    with tempfile.TemporaryDirectory(prefix="orch-bench-tokens-") as tmp:
        for size in sizes:
            root = Path(tmp) / f"lib-{size}"
            shutil.copytree(skills_dir, root / "bundled")
            bundled = len(SkillLibrary(root).l1_index())
            write_distractors(root, max(0, size - bundled))
            library = SkillLibrary(root)
            l1 = library.l1_index()
            invocable = model_invocable(l1)
            ids = {s.id for s in l1}
            wanted = [f"bundled/{t}" for t in target]
            searchable = len(invocable) > selection.shortlist_threshold
            index = SkillIndex.for_library(library, invocable, Path(tmp) / "cache", selection) if searchable else None
            shown = make_shortlist(
                goal, l1, index, threshold=selection.shortlist_threshold, size=selection.shortlist_size
            )
            catalog = catalog_text(shown.skills, max_tokens=selection.catalog_max_tokens, keep=shown.explicit)
            runs.append(
                TokenRun(
                    skills=len(l1),
                    planner_prompt_tokens=planner_prompt_tokens(
                        goal, catalog, selection, searchable=searchable, library_size=len(invocable)
                    ),
                    naive_prompt_tokens=_naive_prompt_tokens(goal, library),
                    shortlist_contains_target=all(t in ids and t in catalog.ids for t in wanted),
                )
            )
        first, second = (_scenario_run(skills_dir, scenario, settings, Path(tmp), n) for n in (1, 2))
    first_tokens = first.metrics.tokens_in + first.metrics.tokens_out
    second_tokens = second.metrics.tokens_in + second.metrics.tokens_out
    return TokenBench(
        goal=goal,
        target=target,
        runs=runs,
        first_run_tokens=first_tokens,
        second_run_tokens=second_tokens,
        first_run_tool_calls=first.metrics.tool_calls,
        second_run_tool_calls=second.metrics.tool_calls,
        second_run_saving=round(1 - second_tokens / first_tokens, 3) if first_tokens else 0.0,
        second_run_response_cache_hits=second.metrics.response_cache_hits,
    )


def _scenario_run(skills_dir: Path, scenario: Path, settings: Settings, tmp: Path, n: int) -> GoalResult:
    """One run of the scenario's goal; both runs share one cache folder (read cache, memo and response cache)."""

    settings = settings.model_copy(update={"cache_dir": tmp / "run-cache"})
    goal, _ = _scenario_target(scenario)
    with Runtimes() as runtimes, runtimes.open(RuntimeSpec(settings, skills_dir, f"scripted:{scenario}")) as rt:
        return run_goal(GoalRequest(goal=goal), tmp / f"out-{n}", rt)
