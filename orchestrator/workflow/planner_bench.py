"""``bench selection``: how often the planner's shortlist holds the skill a goal needs, and what it costs.

Goals are JSON lines ``{"goal", "expect": [skill ids], "kind"}``. A goal is a hit at ``k`` when any expected id is
among the first ``k`` skills of its shortlist ranking (explicitly named skills first, then retrieval). Goals with
``expect: []`` (no skill fits) or ``kind: none`` (no skill needed) have no right answer to rank: they are counted in
``no_fit_goals`` / ``no_skill_goals`` and left out of every recall figure. With a model (``--model``), every goal is
also planned as the runtime plans it, and ``planned`` says how often the plan used an expected skill and how often
it loaded skills for a goal that needs none (over-loading).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from orchestrator.config import SelectionSettings
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.llm.interface import ChatModel
from orchestrator.select import european, translation
from orchestrator.select.index import SkillIndex
from orchestrator.select.restate import restated_goal, should_restate
from orchestrator.select.routing import RouteReport, route_check
from orchestrator.select.routing import read_goals as read_route_goals
from orchestrator.select.shortlist import Catalog, catalog_text, make_shortlist, model_invocable
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.parsed import SkillSummary
from orchestrator.tokens import estimate_tokens
from orchestrator.workflow.plan import SEARCH_SKILLS, make_plan, plan_request

DEFAULT_KS = (5, 10, 20)


class BenchGoal(BaseModel):
    goal: str = Field(min_length=1)
    expect: list[str] = []
    kind: str = "default"

    @property
    def needs_no_skill(self) -> bool:
        """No skill fits (``expect: []``) or none is needed (``kind: none``): any skill loaded is over-loading."""
        return not self.expect or self.kind == "none"


class PlannedSelection(BaseModel):
    """What the planner made of the goals (``bench selection --model``)."""

    model: str
    goals: int
    recall: float
    """Goals that need a skill whose plan used one of the expected skills."""
    by_kind: dict[str, float]
    no_skill_goals: int
    overloading: float
    """Share of the goals that need no skill whose plan still loaded at least one skill."""
    skills_per_no_skill_goal: float
    """Skills planned on average for a goal that needs none."""
    answered_without_skills: int
    """Plans that answered the goal with no skill (``no_skill_needed``)."""
    no_fit: int
    """Plans that said no skill fits."""
    plan_errors: int
    """Goals the model gave no usable plan for (counted as misses, and as not over-loaded)."""
    overloaded: list[dict[str, object]] = []


class RestatedSelection(BaseModel):
    """The shortlist ranking with each goal restated by the model first, as the runtime ranks it
    (``selection.restate``; ``bench selection --model``)."""

    model: str
    mode: str
    """``selection.restate``: which goals were restated (``other-languages`` or ``always``)."""
    recall_at: dict[str, float]
    by_kind: dict[str, dict[str, float]]
    restated_goals: int
    """Goals the model gave a restatement for (the others were ranked by their own words)."""
    misses_at_10: list[dict[str, object]] = []


class SelectionBench(BaseModel):
    skills: int
    goals: int
    recall_at: dict[str, float]
    by_kind: dict[str, dict[str, float]]
    no_fit_goals: int
    no_skill_goals: int = 0
    """Goals with ``expect: []`` or ``kind: none``: they need no skill (left out of recall)."""
    planner_prompt_tokens_max: int
    planner_prompt_tokens_median: int
    index_ms: int
    """Building the index in an empty cache: terms of every skill, and vectors when ``semantic``."""
    index_cpu_ms: int = 0
    """CPU time of that build (all threads): what it costs on an idle machine, whatever else is running."""
    index_ms_cached: int
    index_memory_mb: float = 0.0
    """Resident memory the built index (and the embedding model) added to the process."""
    index_peak_memory_mb: float = 0.0
    """The process's peak resident memory during the build, above what it held before."""
    semantic: bool = False
    """Whether the ranking fused sentence-embedding similarity (the embedder's package is installed and on)."""
    goal_adapter: bool = False
    """Whether goals were read with the shipped goal adapter (``selection.goal_adapter``, its file matching its pin)."""
    query_ms_median: float
    query_cpu_ms_median: float = 0.0
    """CPU time of ranking one goal (this thread: the goal is embedded in it): its cost on an idle core."""
    translated_goals: int = 0
    """Goals in Spanish, Portuguese, French or Italian with an installed translation (``select/translation.py``)."""
    translation_cpu_ms_per_goal: float = 0.0
    """CPU time of the translation pipelines (other processes) per translated goal, on top of ``query_cpu_ms``."""
    index_translation_cpu_ms: int = 0
    """CPU time of the translation pipelines during the cold build (skills in those languages), on top of
    ``index_cpu_ms``."""
    misses_at_10: list[dict[str, object]] = []
    unlisted_expected: list[str] = []
    """Expected skills that are in the folder but not listed (a SKILL.md without a readable name and description):
    no ranking can find them, so their goals count as misses unless another expected skill is found."""
    unpickable_expected: list[str] = []
    """Expected skills that ask not to be picked by a model (``disable-model-invocation: true``): only a goal that
    names them puts them on the shortlist, so other goals expecting only them count as misses."""
    restated: RestatedSelection | None = None
    """With a model and ``selection.restate`` on a library retrieval cuts: the same recall with every goal restated
    by the model first."""
    planned: PlannedSelection | None = None
    """With a model and ``plan``: recall of the plans and over-loading on goals that need no skill."""


def rss_mb() -> float:
    """This process's resident memory now (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """This process's peak resident memory so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_goals(path: Path) -> list[BenchGoal]:
    goals = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read goals file {path}: {e.strerror or e}", where="bench", path=str(path)) from e
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            goals.append(BenchGoal.model_validate_json(line))
        except ValidationError as e:
            raise ConfigError(
                f"{path}:{number}: not a goal line ({e.errors()[0]['msg']})",
                where="bench",
                next_step='each line is {"goal": TEXT, "expect": [SKILL IDS], "kind": TEXT}',
            ) from e
    return goals


def planner_prompt_tokens(
    goal: str, catalog: Catalog, selection: SelectionSettings, *, searchable: bool, library_size: int = 0
) -> int:
    """Estimated size of the first plan request for ``goal`` (system prompt, goal, catalog, search tool)."""
    messages = plan_request(goal, catalog, searchable=searchable, library_size=library_size)
    tokens = sum(estimate_tokens(m.content or "") for m in messages)
    if searchable and selection.search_tool:
        tokens += estimate_tokens(json.dumps(SEARCH_SKILLS.to_openai()))
    return tokens


def _unlisted_expected(goals: list[BenchGoal], listing: list[SkillSummary]) -> list[str]:
    """The expected skills that are in the folder (``listing``: every skill found) but not usable at L1; an expected
    id not in the folder is refused.

    A skill on disk that is not listed (its SKILL.md cannot be read to a name and a description) is what a user of
    this library meets: its goals stay in, and miss unless another skill they expect is found."""
    on_disk = {s.id: s for s in listing}
    for g in goals:
        unknown = [i for i in g.expect if i not in on_disk]
        if unknown:
            raise ConfigError(f"goal {g.goal[:60]!r} expects unknown skill ids {unknown}", where="bench")
    return sorted({i for g in goals for i in g.expect if not on_disk[i].usable_at_l1})


def bench_selection(
    skills_dir: Path,
    goals_file: Path,
    *,
    ks: tuple[int, ...] = DEFAULT_KS,
    selection: SelectionSettings | None = None,
    model: ChatModel | None = None,
    plan: bool = True,
    on_planned: Callable[[int, int], None] | None = None,
) -> SelectionBench:
    """Recall of the shortlist ranking on ``goals_file`` over the skills in ``skills_dir``; the index is built cold
    in a temporary cache, then again from that cache (``index_ms_cached``). With ``model``: see :func:`_with_model`
    (``on_planned(done, total)`` after each goal the model handled)."""
    selection = selection or SelectionSettings()
    goals = read_goals(goals_file)
    library = SkillLibrary(skills_dir)
    listing = library.list()  # scanned once: every skill found, and the ones usable at L1
    l1 = [s for s in listing if s.usable_at_l1]
    invocable = model_invocable(l1)
    unlisted = _unlisted_expected(goals, listing)
    unpickable = sorted({s.id for s in l1 if s.disable_model_invocation} & {i for g in goals for i in g.expect})
    memory_before = rss_mb()
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as cache_dir:
        started, cpu_started, translation_started = time.perf_counter(), time.process_time(), translation.cpu_seconds()
        index = SkillIndex.for_library(library, invocable, Path(cache_dir), selection)
        index_ms = int((time.perf_counter() - started) * 1000)
        index_cpu_ms = int((time.process_time() - cpu_started) * 1000)
        index_translation_cpu_ms = int((translation.cpu_seconds() - translation_started) * 1000)
        memory_after = rss_mb()
        started = time.perf_counter()
        SkillIndex.for_library(library, invocable, Path(cache_dir), selection)
        index_ms_cached = int((time.perf_counter() - started) * 1000)
    depth = max(ks)
    hits: dict[str, dict[int, list[bool]]] = {}
    query_ms: list[float] = []
    query_cpu_ms: list[float] = []
    prompt_tokens: list[int] = []
    misses: list[dict[str, object]] = []
    searchable = len(invocable) > selection.shortlist_threshold
    translated = sum(1 for g in goals if translation.route(european.language(g.goal) or "") is not None)
    translation_started = translation.cpu_seconds()
    for g in goals:
        started, cpu_started = time.perf_counter(), time.thread_time()
        ranked = make_shortlist(g.goal, l1, index, threshold=0, size=depth)
        query_cpu_ms.append((time.thread_time() - cpu_started) * 1000)
        query_ms.append((time.perf_counter() - started) * 1000)
        shown = make_shortlist(
            g.goal, l1, index, threshold=selection.shortlist_threshold, size=selection.shortlist_size
        )
        catalog = catalog_text(shown.skills, max_tokens=selection.catalog_max_tokens, keep=shown.explicit)
        prompt_tokens.append(
            planner_prompt_tokens(g.goal, catalog, selection, searchable=searchable, library_size=len(invocable))
        )
        if g.needs_no_skill:
            continue
        for k in ks:
            hit = any(i in ranked.ids[:k] for i in g.expect)
            hits.setdefault(g.kind, {}).setdefault(k, []).append(hit)
        if not any(i in ranked.ids[:10] for i in g.expect):
            misses.append({"goal": g.goal[:200], "expect": g.expect, "top": ranked.ids[:3]})

    translation_cpu_ms = (translation.cpu_seconds() - translation_started) * 1000
    restated, planned = _with_model(goals, l1, index, selection, model, ks, plan=plan, on_done=on_planned)
    return SelectionBench(
        skills=len(l1),
        goals=len(goals),
        recall_at={str(k): _rate([h for kind in hits.values() for h in kind[k]]) for k in ks},
        by_kind={kind: {str(k): _rate(v[k]) for k in ks} for kind, v in sorted(hits.items())},
        no_fit_goals=sum(1 for g in goals if not g.expect and g.kind != "none"),
        no_skill_goals=sum(1 for g in goals if g.needs_no_skill),
        planner_prompt_tokens_max=max(prompt_tokens, default=0),
        planner_prompt_tokens_median=int(statistics.median(prompt_tokens)) if prompt_tokens else 0,
        index_ms=index_ms,
        index_cpu_ms=index_cpu_ms,
        index_ms_cached=index_ms_cached,
        index_memory_mb=round(memory_after - memory_before, 1),
        index_peak_memory_mb=round(peak_rss_mb() - memory_before, 1),
        semantic=index.semantic,
        goal_adapter=index.goal_adapter,
        query_ms_median=round(statistics.median(query_ms), 2) if query_ms else 0.0,
        query_cpu_ms_median=round(statistics.median(query_cpu_ms), 2) if query_cpu_ms else 0.0,
        translated_goals=translated,
        translation_cpu_ms_per_goal=round(translation_cpu_ms / translated, 2) if translated else 0.0,
        index_translation_cpu_ms=index_translation_cpu_ms,
        misses_at_10=misses,
        unlisted_expected=unlisted,
        unpickable_expected=unpickable,
        restated=restated,
        planned=planned,
    )


def _with_model(
    goals: list[BenchGoal],
    l1: list[SkillSummary],
    index: SkillIndex,
    selection: SelectionSettings,
    model: ChatModel | None,
    ks: tuple[int, ...],
    *,
    plan: bool,
    on_done: Callable[[int, int], None] | None,
) -> tuple[RestatedSelection | None, PlannedSelection | None]:
    """With a model: the ranking with every goal restated first, as the runtime does (when ``selection.restate`` and
    the library is above the shortlist threshold), and with ``plan`` every goal planned too."""
    if model is None:
        return None, None
    restated: RestatedSelection | None = None
    restatements: dict[str, str | None] = {}
    if selection.restate != "off" and len(model_invocable(l1)) > selection.shortlist_threshold:
        restated, restatements = restated_selection(
            goals, l1, index, model, ks, mode=selection.restate, on_restated=None if plan else on_done
        )
    if not plan:
        return restated, None
    return restated, plan_goals(goals, l1, index, selection, model, restatements=restatements, on_planned=on_done)


def restated_selection(
    goals: list[BenchGoal],
    l1: list[SkillSummary],
    index: SkillIndex,
    model: ChatModel,
    ks: tuple[int, ...],
    *,
    mode: str = "always",
    on_restated: Callable[[int, int], None] | None = None,
) -> tuple[RestatedSelection, dict[str, str | None]]:
    """Recall of the shortlist ranking with the goals ``mode`` (``selection.restate``) asks for restated by ``model``
    first, and the restatements."""
    restatements: dict[str, str | None] = {}
    hits: dict[str, dict[int, list[bool]]] = {}
    misses: list[dict[str, object]] = []
    for done, g in enumerate(goals, 1):
        if g.goal not in restatements:
            restatements[g.goal] = restated_goal(g.goal, model) if should_restate(g.goal, mode) else None
        if on_restated is not None:
            on_restated(done, len(goals))
        if g.needs_no_skill:
            continue
        restated = restatements[g.goal]
        ranked = make_shortlist(g.goal, l1, index, threshold=0, size=max(ks), restated=restated)
        for k in ks:
            hits.setdefault(g.kind, {}).setdefault(k, []).append(any(i in ranked.ids[:k] for i in g.expect))
        if not any(i in ranked.ids[:10] for i in g.expect):
            misses.append({"goal": g.goal[:200], "restated": restated or "", "expect": g.expect, "top": ranked.ids[:3]})
    result = RestatedSelection(
        model=model.name,
        mode=mode,
        recall_at={str(k): _rate([h for kind in hits.values() for h in kind[k]]) for k in ks},
        by_kind={kind: {str(k): _rate(v[k]) for k in ks} for kind, v in sorted(hits.items())},
        restated_goals=sum(1 for text in restatements.values() if text),
        misses_at_10=misses,
    )
    return result, restatements


def check_routes(
    library: SkillLibrary,
    selection: SelectionSettings,
    cache_dir: Path,
    goals_file: Path | None = None,
    *,
    k: int = 10,
    threshold: float | None = None,
) -> RouteReport:
    """``skills route-check``: the library's overlapping skills and, with goals, the skills none reaches, ranked
    as the planner's shortlist ranks them."""
    goals = read_route_goals(goals_file) if goals_file is not None else []
    l1 = library.l1_index()
    index = SkillIndex.for_library(library, model_invocable(l1), cache_dir, selection)
    return route_check(l1, index, goals, k=k, threshold=threshold)


def _rate(values: list[bool]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def plan_goals(
    goals: list[BenchGoal],
    l1: list[SkillSummary],
    index: SkillIndex,
    selection: SelectionSettings,
    model: ChatModel,
    *,
    restatements: dict[str, str | None] | None = None,
    on_planned: Callable[[int, int], None] | None = None,
) -> PlannedSelection:
    """Plan every goal as the runtime does (shortlist, named skills, ``search_skills``) and score the plans; a
    goal's shortlist is ranked with its restatement from ``restatements`` when there is one."""
    invocable = model_invocable(l1)
    by_id = {s.id: s for s in invocable}
    searchable = len(invocable) > selection.shortlist_threshold and selection.search_tool

    def search(query: str, exclude: Sequence[str]) -> list[SkillSummary]:
        return [by_id[h.id] for h in index.search(query, k=8, exclude=exclude) if h.id in by_id]

    hits: dict[str, list[bool]] = {}
    loaded: list[int] = []
    answered = no_fit = errors = 0
    overloaded: list[dict[str, object]] = []
    for done, g in enumerate(goals, 1):
        shown = make_shortlist(
            g.goal,
            l1,
            index,
            threshold=selection.shortlist_threshold,
            size=selection.shortlist_size,
            restated=(restatements or {}).get(g.goal),
        )
        try:
            plan = make_plan(
                g.goal,
                shown.skills,
                model,
                explicit=shown.explicit,
                catalog_max_tokens=selection.catalog_max_tokens,
                search=search if searchable else None,
                max_searches=selection.max_searches,
                max_calls=selection.max_plan_calls,
                library_size=shown.library_size,
                triage=selection.triage,
            ).plan
        except OrchestratorError:
            errors += 1
            plan = None
        chosen = [s.skill for s in plan.steps] if plan is not None else []
        answered += plan is not None and plan.answered_without_skills
        no_fit += plan is not None and not plan.steps and plan.no_fit is not None
        if g.needs_no_skill:
            loaded.append(len(chosen))
            if chosen:
                overloaded.append({"goal": g.goal[:200], "planned": chosen})
        else:
            hits.setdefault(g.kind, []).append(any(i in chosen for i in g.expect))
        if on_planned is not None:
            on_planned(done, len(goals))
    return PlannedSelection(
        model=model.name,
        goals=len(goals),
        recall=_rate([h for kind in hits.values() for h in kind]),
        by_kind={kind: _rate(v) for kind, v in sorted(hits.items())},
        no_skill_goals=len(loaded),
        overloading=_rate([n > 0 for n in loaded]),
        skills_per_no_skill_goal=round(sum(loaded) / len(loaded), 2) if loaded else 0.0,
        answered_without_skills=answered,
        no_fit=no_fit,
        plan_errors=errors,
        overloaded=overloaded,
    )
