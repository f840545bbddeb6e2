"""CLI: run a goal end to end in this process (Plan → Act → Reflect), no Celery or Redis needed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from orchestrator.cli.common import emit_json, fail, notice, plain, state
from orchestrator.config import Settings
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.logs import dumps_safe, mask_value
from orchestrator.workflow.folders import published_folder
from orchestrator.workflow.outputs import check_input_files, check_output_dir, check_zip_target
from orchestrator.workflow.request import GoalRequest, budgeted, default_inputs, parse_budgets, scenario_of

if TYPE_CHECKING:
    from orchestrator.workflow.goal import GoalResult

_PROGRESS = {
    "plan.started": "planning: choosing skills for the goal",
    "plan.restated": "searching skills for: {restated}",
    "plan.done": "plan: {steps}",
    "act.started": "skill {step}: {skill} …",
    "act.done": "skill {step}: {skill} → {status} ({exit_reason}, {tool_calls} tool calls)",
    "reflect.retry": "reflect: retrying skill {step} ({skill}) once",
    "validate.done": "validation: {stage} {verdict}",
}


def _progress_printer(console: Console) -> Any:
    """Progress lines for a person: only on a terminal (otherwise stderr carries JSON log lines only)."""

    def on_event(name: str, data: dict[str, Any]) -> None:
        template = _PROGRESS.get(name)
        if template and console.is_terminal:
            data = {**data, "verdict": "pass" if data.get("passed") else "FAIL"}
            console.print(Text("› ", style="dim") + Text(plain(template.format(**data))), highlight=False)

    return on_event


def run_goal(
    ctx: typer.Context,
    goal: Annotated[
        str | None,
        typer.Argument(help="What you want; with a scripted model the scenario's goal is used when omitted."),
    ] = None,
    skills: Annotated[Path, typer.Option("--skills", help="Folder of skills (any depth).")] = Path("skills"),
    out: Annotated[
        Path, typer.Option("--out", help="Output folder: results land here under their own names.")
    ] = Path("out"),
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar="ORCH_MODEL",
            help="openai:NAME (OPENAI_API_KEY, OPENAI_BASE_URL) or scripted:PATH.",
        ),
    ] = None,
    inputs: Annotated[
        list[Path] | None,
        typer.Option("--input", help="Input file for the skills (repeatable); default: a scripted scenario's inputs."),
    ] = None,
    constraints: Annotated[
        list[str] | None, typer.Option("--constraint", help="Extra constraint (repeatable).")
    ] = None,
    qa_mode: Annotated[str | None, typer.Option("--qa-mode", help="final (default) | step | off")] = None,
    response: Annotated[
        str | None,
        typer.Option(
            "--response",
            help="What the result answers with: SUMMARY (default: a short account of what was made) | SCORED "
            "(a 0-1 score and a reason for each evaluation point of the plan).",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="Model profile: hosted (default) | local (a slow server on this machine)."),
    ] = None,
    zip_path: Annotated[
        Path | None, typer.Option("--zip", help="Also bundle the outputs into this ZIP file.")
    ] = None,
    no_memo: Annotated[
        bool, typer.Option(
            "--no-memo", help="Ignore and do not update the caches: memo, read cache and response cache."
        )
    ] = False,
    budget: Annotated[
        list[str] | None,
        typer.Option(
            "--budget",
            help="A budget for this goal, KEY=VALUE (repeatable), within the operator's ceilings: per skill "
            "max_tool_calls, time_budget_ms, token_budget, script_timeout_s, disk_write_limit_mb; for the whole goal "
            "(plan, every Act, retries, re-plans, the final check and scoring) goal_token_budget, goal_model_calls — "
            "spent, the goal ends unmet with what was done, at most one request over.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the overall result as JSON.")] = False,
) -> None:
    try:
        settings = state(ctx).settings(**_setting_overrides(qa_mode, profile, response))
        model_spec = model or settings.model.name
        request = _request(goal, model_spec, inputs, constraints, budget or [])
        settings = budgeted(settings, request.budgets)
        _check_inputs(skills, out, request.inputs, zip_path)
        if model is None:
            notice("cli.model", f"using model {model_spec} (the default; choose one with --model or ORCH_MODEL)",
                   model=model_spec)
        result = _run_in_process(request, settings, skills, out, model_spec, use_memo=not no_memo)
        # Deferred: the goal's machinery (model client, Docker SDK, templates, images) is not for `run --help`.
        from orchestrator.workflow.embedded import bundle_zip
        from orchestrator.workflow.evidence import run_evidence_dir, save_evidence

        if zip_path is not None:
            job_copy = published_folder(settings.cache_dir, result.job_id)
            result.bundle = str(bundle_zip(result, zip_path, job_copy if job_copy.is_dir() else None))
        result.evidence_path = save_evidence(result, run_evidence_dir(settings.cache_dir, result.job_id))
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    if as_json:
        emit_json(mask_value(result.model_dump(mode="json", by_alias=True)))  # like the evidence file
    else:
        _print_human(result)
    raise typer.Exit(0 if result.status == "done" else 1)


def _setting_overrides(qa_mode: str | None, profile: str | None, response: str | None) -> dict[str, Any]:
    """The settings ``run``'s options change (over the file and the environment)."""
    overrides: dict[str, Any] = {}
    if qa_mode is not None:
        overrides["qa"] = {"mode": qa_mode}
    if profile is not None:
        overrides["model"] = {"profile": profile}
    if response is not None:
        overrides["supervisor"] = {"response": response.upper()}
    return overrides


def _run_in_process(
    request: GoalRequest, settings: Settings, skills: Path, out: Path, model_spec: str, *, use_memo: bool
) -> GoalResult:
    """The goal run by the embedded driver; an interrupted run keeps its evidence and exits 130/143."""
    # Deferred: the goal's machinery (model client, Docker SDK, templates, images) is not for `run --help`.
    from orchestrator.workflow.embedded import GoalInterrupted
    from orchestrator.workflow.embedded import run_goal as run_workflow
    from orchestrator.workflow.runtime import Runtimes, RuntimeSpec

    console = Console(stderr=True, soft_wrap=True)
    spec = RuntimeSpec(settings, skills, model_spec, use_memo=use_memo, on_event=_progress_printer(console))
    with Runtimes() as runtimes, runtimes.open(spec) as rt:
        if not rt.library.l1_index():
            raise ConfigError(
                f"no skills found in {skills}",
                where="cli",
                next_step="pass --skills DIR holding skill folders (each with a SKILL.md)",
            )
        try:
            return run_workflow(request, out, rt)
        except GoalInterrupted as stopped:
            _kept(stopped.result, settings.cache_dir)
            raise typer.Exit(stopped.exit_code) from None


def _request(
    goal: str | None, model_spec: str, inputs: list[Path] | None, constraints: list[str] | None, budgets: list[str]
) -> GoalRequest:
    """The goal request the options make, checked by the rules every goal follows (``workflow.request``)."""
    scenario = scenario_of(model_spec)
    if goal is None and scenario is not None:
        goal = scenario.goal
    say = 'say what you want: python -m orchestrator run "Make a 5-slide deck on …"'
    if goal is None:
        raise ConfigError("no goal given", where="cli", next_step=say)
    try:
        return GoalRequest(
            goal=goal,
            inputs=inputs or default_inputs(model_spec),
            constraints=constraints or [],
            budgets=parse_budgets(budgets),
        )
    except ValidationError as e:
        why = "; ".join(str(err["msg"]).removeprefix("Value error, ") for err in e.errors())
        shorter = "state the goal in fewer words and pass long material as a file with --input PATH"
        raise ConfigError(why, where="cli", next_step=say if "empty" in why else shorter) from e


def _check_inputs(skills: Path, out: Path, inputs: list[Path], zip_path: Path | None) -> None:
    """Everything about the command line that can be checked before anything is created."""
    if not skills.is_dir():
        raise ConfigError(
            f"skills folder not found: {skills}",
            where="cli",
            next_step="pass --skills DIR pointing at a folder of skills",
        )
    check_input_files(inputs)
    check_output_dir(out)
    if zip_path is not None:
        check_zip_target(zip_path)


def _kept(result: Any, cache_dir: Path) -> None:
    """After a stop: write the evidence and say in one line what was kept."""
    # Deferred: as in _run_in_process.
    from orchestrator.workflow.evidence import run_evidence_dir, save_evidence

    try:
        result.evidence_path = save_evidence(result, run_evidence_dir(cache_dir, result.job_id))
    except OSError as e:
        result.evidence_path = f"(not written: {e})"
    files = len(result.artifacts)
    notice(
        "run.interrupted",
        f"{result.error.message if result.error else 'stopped'}: kept {files} file{'s' if files != 1 else ''} in "
        f"{result.out_dir} (marked partial); evidence: {result.evidence_path}",
        level="warning",
        job_id=result.job_id,
        artifacts=[a.path for a in result.artifacts],
        evidence_path=result.evidence_path,
    )


def print_answer(console: Console, result: Any) -> None:
    """The goal's answer: SUMMARY's account, or SCORED's score per evaluation point and overall."""
    if result.answer:
        console.print(Text("answer: ", style="bold") + Text(plain(result.answer)), highlight=False)
    for s in result.scores:
        console.print(Text(plain(f"  {s.score:.2f}  {s.point} — {s.reason}")), highlight=False)
    if result.score is not None:
        console.print(Text("score: ", style="bold") + Text(f"{result.score:.2f}"), highlight=False)


def _print_human(result: Any) -> None:
    # Everything shown here may come from a goal, a skill, a script or a model: printed as plain Text, never as
    # markup, with control characters escaped and secrets masked.
    result = type(result).model_validate(mask_value(result.model_dump(mode="json", by_alias=True)))
    console = Console(soft_wrap=True)
    colour = {"done": "green", "unmet": "yellow", "failed": "red"}[result.status]
    console.print(Text(result.status, style=f"bold {colour}") + Text(f" — {plain(result.goal)}"))
    for item in result.stdout:
        sys.stdout.write(dumps_safe(item) + "\n")
    for a in result.artifacts:
        console.print(
            Text(
                plain(f"  {result.out_dir}/{a.path}  {a.size} bytes  {a.mime}  sha256:{a.sha256[:12]}")
                + ("  (partial)" if a.partial else "")
            ),
            highlight=False,
        )
    for note in result.notes:
        console.print(Text(plain(f"  note: {note}"), style="yellow"), highlight=False)
    print_answer(console, result)
    if result.error:
        console.print(
            Text(plain(f"{result.error.where}: {result.error.message}"), style="red")
            + Text(plain(f" — next: {result.error.next_step}"))
        )
    for u in result.unmet:
        console.print(
            Text("unmet ", style="yellow")
            + Text(plain(f"{u.what}: {u.why}" + (f" — next: {u.next_step}" if u.next_step else "")))
        )
    m = result.metrics
    console.print(
        Text(
            f"tokens in/out {m.tokens_in}/{m.tokens_out}, tool calls {m.tool_calls}, "
            f"{m.duration_ms} ms; evidence: {plain(str(result.evidence_path))}"
        ),
        highlight=False,
    )
