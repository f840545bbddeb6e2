"""CLI: bench commands."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.common import emit_json, fail, notice, state
from orchestrator.cli.startup import bench_cli
from orchestrator.errors import OrchestratorError

if TYPE_CHECKING:
    from orchestrator.sandbox.docker import Prewarm
    from orchestrator.workflow.planner_bench import SelectionBench

app = typer.Typer(no_args_is_help=True)
_PREWARM: dict[str, Prewarm] = {"started": "started", "created": "created", "off": "off"}


@app.command("sandbox", help="Runner calls of one job vs `docker run --rm --network none`, alternating.")
def sandbox_bench(
    ctx: typer.Context,
    pairs: Annotated[int, typer.Option("--pairs", min=1, help="Measured pairs (after 2 warm-up pairs).")] = 20,
    prewarm: Annotated[
        str,
        typer.Option("--prewarm", help="started (default) | created | off: how the next container waits."),
    ] = "started",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    if prewarm not in _PREWARM:
        raise typer.BadParameter("--prewarm must be started, created or off")
    # Deferred: what a benchmark measures (the sandbox, the model client, Celery) is not for `bench --help`.
    from orchestrator.sandbox.call_bench import bench_sandbox
    from orchestrator.sandbox.docker import SandboxRunner

    try:
        settings = state(ctx).settings()
        runner = SandboxRunner(settings.sandbox, work_dir=settings.cache_dir / "sandbox", prewarm=_PREWARM[prewarm])
        try:
            result = bench_sandbox(runner, pairs=pairs)
        finally:
            runner.close()
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        typer.echo(
            f"runner median {result.runner_median_ms} ms (p95 {result.runner_p95_ms}), docker run median "
            f"{result.docker_run_median_ms} ms, ratio {result.ratio_vs_docker_run}, job setup {result.job_setup_ms} ms"
        )


@app.command("throughput", help="Goals per minute with 1 and W workers (own Redis, scripted model with think time).")
def throughput_bench(
    ctx: typer.Context,
    goals: Annotated[int, typer.Option("--goals", min=1, help="Goals per run.")] = 20,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Workers of the second run (the first has 1).")] = 2,
    think_ms: Annotated[int, typer.Option("--think-ms", min=0, help="Model think time per reply.")] = 1000,
    scenario: Annotated[
        Path, typer.Option("--scenario", help="Scenario played for every goal.")
    ] = Path("ops/scenarios/brand-json.yaml"),
    skills: Annotated[Path, typer.Option("--skills", help="Skills folder.")] = Path("skills"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    # Deferred: what a benchmark measures (the sandbox, the model client, Celery) is not for `bench --help`.
    from orchestrator.worker.throughput_bench import bench_throughput

    try:
        state(ctx).settings()
        report = bench_throughput(goals=goals, workers=workers, think_ms=think_ms, scenario=scenario, skills=skills)
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(report)
    else:
        for run in report.runs:
            typer.echo(
                f"{run.workers} worker(s): {run.goals_per_min} goals/min, overhead median {run.overhead_s_median} s "
                f"(p95 {run.overhead_s_p95}), {run.done}/{run.goals} done"
            )
        typer.echo(f"ratio {report.ratio}; ok={report.ok}")


@app.command("selection", help="Recall of the planner's skill shortlist on a goals file, and the prompt it costs.")
def selection_bench(
    ctx: typer.Context,
    skills_dir: Annotated[Path, typer.Option("--skills", help="Skills root folder.")],
    goals: Annotated[
        Path, typer.Option("--goals", help='JSON lines {"goal", "expect": [skill ids], "kind"}; expect [] = no fit.')
    ],
    k: Annotated[int | None, typer.Option("--k", min=1, help="Also report recall at this K.")] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Also rank with every goal restated by this model first, as runs do (openai:NAME | "
            "scripted:PATH), and plan every goal with it: recall of the plans and over-loading (skills planned for "
            "goals with expect [] or kind none).",
        ),
    ] = None,
    plan: Annotated[
        bool,
        typer.Option("--plan/--no-plan", help="With --model: plan every goal (slow with a local model)."),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    # Deferred: what a benchmark measures (the sandbox, the model client, Celery) is not for `bench --help`.
    from orchestrator.llm.factory import open_model
    from orchestrator.workflow.planner_bench import DEFAULT_KS, bench_selection

    ks = tuple(sorted({*DEFAULT_KS, *([k] if k else [])}))
    try:
        settings = state(ctx).settings()
        if model is None:
            result = bench_selection(skills_dir, goals, ks=ks, selection=settings.selection)
        else:
            started = time.monotonic()

            done_word = "planned" if plan else "restated"

            def show(done: int, total: int) -> None:  # a model may take minutes a plan: show it moving
                elapsed = time.monotonic() - started
                notice("bench.planned", f"{done_word} {done}/{total} goals in {elapsed:.0f} s", done=done, total=total)

            with open_model(model, settings.model) as chat:
                result = bench_selection(
                    skills_dir, goals, ks=ks, selection=settings.selection, model=chat, plan=plan, on_planned=show
                )
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        _print_selection(result)


def _print_selection(result: SelectionBench) -> None:
    """The bench's figures as lines for a person (``--json`` prints all of them)."""
    recall = ", ".join(f"@{key} {value}" for key, value in result.recall_at.items())
    kinds = "; ".join(f"{kind} @10 {values.get('10', 0.0)}" for kind, values in result.by_kind.items())
    typer.echo(
        f"{result.goals} goals over {result.skills} skills: recall {recall} ({kinds}); planner prompt max "
        f"{result.planner_prompt_tokens_max} tokens; index {result.index_ms} ms (cached {result.index_ms_cached}"
        f" ms, +{result.index_memory_mb} MB), query median {result.query_ms_median} ms "
        f"({result.query_cpu_ms_median} ms CPU"
        + (
            f"; {result.translated_goals} goals translated, +{result.translation_cpu_ms_per_goal} ms CPU each"
            if result.translated_goals
            else ""
        )
        + "); "
        f"ranking {'lexical + semantic' if result.semantic else 'lexical only'}"
    )
    if result.unlisted_expected or result.unpickable_expected:
        typer.echo(
            "expected skills the ranking cannot offer: "
            + "; ".join(
                f"{label}: {', '.join(ids)}"
                for label, ids in (
                    ("not listed (SKILL.md unreadable)", result.unlisted_expected),
                    ("asking not to be picked (offered only when a goal names them)", result.unpickable_expected),
                )
                if ids
            )
        )
    if result.restated is not None:
        restated = result.restated
        recall = ", ".join(f"@{key} {value}" for key, value in restated.recall_at.items())
        kinds = "; ".join(f"{kind} @10 {values.get('10', 0.0)}" for kind, values in restated.by_kind.items())
        typer.echo(
            f"restated by {restated.model} ({restated.restated_goals} goals): recall {recall} ({kinds})"
        )
    if result.planned is not None:
        planned = result.planned
        typer.echo(
            f"planned by {planned.model}: recall {planned.recall}; over-loading {planned.overloading} on "
            f"{planned.no_skill_goals} goals that need no skill ({planned.skills_per_no_skill_goal} skills "
            f"each); {planned.answered_without_skills} answered without skills, {planned.no_fit} no fit, "
            f"{planned.plan_errors} without a usable plan"
        )


@app.command(
    "tokens",
    help="Planner prompt tokens vs a prompt holding every SKILL.md, at 10/100/1000 skills; "
    "tokens of a first and a second run of a shipped scenario.",
)
def tokens_bench(
    ctx: typer.Context,
    skills_dir: Annotated[Path, typer.Option("--skills", help="Bundled skills to start each library from.")] = Path(
        "skills"
    ),
    scenario: Annotated[
        Path, typer.Option("--scenario", help="Shipped scenario whose goal and plan are measured.")
    ] = Path("ops/scenarios/brand-json.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    # Deferred: what a benchmark measures (the sandbox, the model client, Celery) is not for `bench --help`.
    from orchestrator.workflow.tokens_bench import bench_tokens

    try:
        result = bench_tokens(skills_dir, scenario, state(ctx).settings())
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        for run in result.runs:
            typer.echo(
                f"{run.skills} skills: planner {run.planner_prompt_tokens} tokens vs naive {run.naive_prompt_tokens};"
                f" target on the shortlist: {run.shortlist_contains_target}"
            )
        typer.echo(
            f"first run {result.first_run_tokens} tokens, second run {result.second_run_tokens} "
            f"({result.second_run_saving:.0%} fewer; {result.second_run_response_cache_hits} replies from the cache)"
        )


@app.command(
    "cli",
    help="How fast the CLI starts: each command from a fresh interpreter, lazily (as it runs now) and eagerly (every "
    "command module imported first), medians side by side, and the heavy libraries each still loads. Prints JSON.",
)
def cli_bench(
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Runs of each command in each mode.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout (always).")] = True,
) -> None:
    emit_json(bench_cli(repeats))
