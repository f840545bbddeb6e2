"""CLI: run a goal end to end in this process (Plan → Act → Reflect), no Celery or Redis needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from orchestrator.cli.common import emit_json, fail, state
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.llm.scenario import load_scenario, scenario_inputs
from orchestrator.logs import mask_value
from orchestrator.workflow.models import GoalRequest
from orchestrator.workflow.run import bundle_zip
from orchestrator.workflow.run import run_goal as run_workflow
from orchestrator.workflow.runtime import build_runtime

_PROGRESS = {
    "plan.started": "planning: choosing skills for the goal",
    "plan.done": "plan: {steps}",
    "act.started": "skill {step}: {skill} …",
    "act.done": "skill {step}: {skill} → {status} ({exit_reason}, {tool_calls} tool calls)",
    "reflect.retry": "reflect: retrying skill {step} ({skill}) once",
    "validate.done": "validation: {stage} {verdict}",
}


def _progress_printer(console: Console) -> Any:
    def on_event(name: str, data: dict[str, Any]) -> None:
        template = _PROGRESS.get(name)
        if template:
            data = {**data, "verdict": "pass" if data.get("passed") else "FAIL"}
            console.print(f"[dim]›[/dim] {template.format(**data)}", highlight=False)

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
    zip_path: Annotated[
        Path | None, typer.Option("--zip", help="Also bundle the outputs into this ZIP file.")
    ] = None,
    no_memo: Annotated[
        bool, typer.Option("--no-memo", help="Ignore and do not update the read cache/memo.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the overall result as JSON.")] = False,
) -> None:
    overrides: dict[str, Any] = {}
    if qa_mode is not None:
        overrides["qa"] = {"mode": qa_mode}
    try:
        settings = state(ctx).settings(**overrides)
        model_spec = model or settings.model.name
        goal_text = _goal_text(goal, model_spec)
        if not skills.is_dir():
            raise ConfigError(
                f"skills folder not found: {skills}",
                where="cli",
                next_step="pass --skills DIR pointing at a folder of skills",
            )
        console = Console(stderr=True, soft_wrap=True)
        request = GoalRequest(
            goal=goal_text, inputs=inputs or _scenario_inputs(model_spec), constraints=constraints or []
        )
        with build_runtime(
            settings, skills, model_spec, use_memo=not no_memo, on_event=_progress_printer(console)
        ) as rt:
            result = run_workflow(request, out, rt)
        if zip_path is not None:
            result.bundle = str(bundle_zip(result, zip_path))
        result.evidence_path = _save_evidence(result, settings.cache_dir)
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=2)
    if as_json:
        emit_json(result)
    else:
        _print_human(result)
    raise typer.Exit(0 if result.status == "done" else 1)


def _goal_text(goal: str | None, model_spec: str) -> str:
    if goal:
        return goal
    if model_spec.startswith("scripted:"):
        return load_scenario(Path(model_spec.split(":", 1)[1])).goal
    raise ConfigError("no goal given", where="cli", next_step='pass the goal: python -m orchestrator run "…"')


def _scenario_inputs(model_spec: str) -> list[Path]:
    """A scripted model's scenario may name the goal's input files; ``--input`` replaces them."""
    if not model_spec.startswith("scripted:"):
        return []
    return scenario_inputs(load_scenario(Path(model_spec.split(":", 1)[1])))


def _save_evidence(result: Any, cache_dir: Path) -> str:
    path = cache_dir / "jobs" / result.job_id / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # The evidence file is a log: secrets and personal data in the goal or outputs are masked before writing.
    path.write_text(json.dumps(mask_value(result.model_dump(mode="json", by_alias=True)), indent=2), encoding="utf-8")
    return str(path)


def _print_human(result: Any) -> None:
    console = Console(soft_wrap=True)
    colour = {"done": "green", "unmet": "yellow", "failed": "red"}[result.status]
    console.print(f"[bold {colour}]{result.status}[/] — {result.goal}")
    for item in result.stdout:
        sys.stdout.write(json.dumps(item, ensure_ascii=False, indent=2) + "\n")
    for a in result.artifacts:
        console.print(
            f"  {result.out_dir}/{a.path}  {a.size} bytes  {a.mime}  sha256:{a.sha256[:12]}"
            + ("  (partial)" if a.partial else ""),
            highlight=False,
        )
    if result.error:
        console.print(
            f"[red]{result.error.where}: {result.error.message}[/] — next: {result.error.next_step}"
        )
    for u in result.unmet:
        console.print(
            f"[yellow]unmet[/] {u.what}: {u.why}" + (f" — next: {u.next_step}" if u.next_step else "")
        )
    m = result.metrics
    console.print(
        f"tokens in/out {m.tokens_in}/{m.tokens_out}, tool calls {m.tool_calls}, "
        f"{m.duration_ms} ms; evidence: {result.evidence_path}",
        highlight=False,
    )
