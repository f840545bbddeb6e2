"""CLI: ``skills list`` (the L1 view of a folder of skills), ``skills show ID`` (one skill) and ``skills route-check``
(how a library routes goals)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.cli.common import EXIT_USAGE, emit_json, fail, plain, state
from orchestrator.errors import OrchestratorError, SkillError
from orchestrator.skills import Problem, Skill, SkillLibrary, SkillSummary
from orchestrator.skills.confine import display_text

app = typer.Typer(no_args_is_help=True)

RootOption = Annotated[
    Path,
    typer.Option("--root", envvar="ORCH_SKILLS_ROOT", help="Folder holding skill folders (any depth)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def _library(ctx: typer.Context, root: Path, as_json: bool) -> SkillLibrary:
    settings = state(ctx).settings()
    if not root.is_dir():
        fail(
            SkillError(
                f"skills root {str(root)!r} does not exist or is not a folder",
                where="skills",
                next_step="pass --root with a folder that contains skill folders (each with a SKILL.md)",
                root=str(root),
            ),
            as_json=as_json,
            code=EXIT_USAGE,
        )
    return SkillLibrary(root, l2_max_tokens=settings.disclosure.l2_max_tokens)


def _problem_json(problem: Problem) -> dict[str, Any]:
    return problem.model_dump(mode="json", exclude_none=True)


def summary_json(summary: SkillSummary) -> dict[str, Any]:
    return {
        "id": summary.id,
        "name": summary.name,
        "description": summary.description,
        "path": summary.path,
        "l1_tokens": summary.l1_tokens,
        "problems": [_problem_json(p) for p in summary.problems],
    }


def skill_json(skill: Skill, *, l2_truncated: bool, l2_tokens: int) -> dict[str, Any]:
    return {
        "id": skill.id,
        "name": skill.name,
        "description": skill.description,
        "path": display_text(str(skill.root)),
        "license": skill.license,
        "compatibility": skill.compatibility,
        "allowed_tools": skill.allowed_tools,
        "metadata": skill.metadata,
        "declarations": skill.declarations.model_dump(mode="json"),
        "body_tokens": skill.body_tokens,
        "l2": {"tokens": l2_tokens, "truncated": l2_truncated},
        "skill_md_sha256": skill.skill_md_sha256,
        "references": [r.model_dump(mode="json") for r in skill.references],
        "problems": [_problem_json(p) for p in skill.problems],
    }


def _problem_text(problems: list[Problem]) -> str:
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    parts = ([f"[red]{errors} error(s)[/red]"] if errors else []) + (
        [f"[yellow]{warnings} warning(s)[/yellow]"] if warnings else []
    )
    return ", ".join(parts) or "[green]ok[/green]"


@app.command("list")
def list_skills(ctx: typer.Context, root: RootOption = Path("skills"), as_json: JsonOption = False) -> None:
    """List every skill under ROOT (the L1 view) with its problems; broken skills are listed, never fatal."""
    library = _library(ctx, root, as_json)
    summaries = library.list()
    # Folders that could not be searched hold no listable skill: say so on stderr (stdout stays the JSON array).
    warn = Console(stderr=True, soft_wrap=True)
    for problem in library.scan_problems:
        if problem.code != "duplicate_id":  # those are listed on the skill itself
            text = escape(plain(f"{problem.code}: {problem.message}"))
            warn.print(f"[yellow]warning[/yellow] {text}", highlight=False)
    if as_json:
        emit_json([summary_json(s) for s in summaries])
        return
    table = Table(title=f"Skills under {library.root}", show_lines=False)
    for column in ("id", "name", "description", "L1 tokens", "problems"):
        table.add_column(column, overflow="fold")
    for s in summaries:
        description = s.description or ""
        if len(description) > 120:
            description = description[:117] + "..."
        table.add_row(
            escape(plain(s.id)),
            escape(plain(s.name)) if s.name else "[red]-[/red]",
            escape(plain(description)),
            str(s.l1_tokens),
            _problem_text(s.problems),
        )
    console = Console()
    console.print(table)
    for s in summaries:
        for p in s.problems:
            if p.severity == "error":
                console.print(f"[red]error[/red] {escape(plain(f'{s.id}: {_where(p)}{p.message}'))}", highlight=False)


@app.command("show")
def show_skill(
    ctx: typer.Context,
    skill_id: Annotated[str, typer.Argument(metavar="ID", help="Skill id: its folder's path under ROOT.")],
    root: RootOption = Path("skills"),
    as_json: JsonOption = False,
    body: Annotated[bool, typer.Option("--body", help="Also print the L2 text (the body as a model sees it).")] = False,
) -> None:
    """Show one skill: frontmatter, body size, L2 cut, references (link -> path -> glob) and problems."""
    library = _library(ctx, root, as_json)
    try:
        skill = library.get(skill_id)
        l2 = library.l2(skill_id)
    except SkillError as e:
        fail(e, as_json=as_json, code=1)
    if as_json:
        data = skill_json(skill, l2_truncated=l2.truncated, l2_tokens=l2.tokens)
        if body:
            data["l2"]["text"] = l2.text
        emit_json(data)
        return
    console = Console()
    console.print(f"[bold]{escape(skill.id)}[/bold]  ({escape(display_text(str(skill.root)))})", highlight=False)
    console.print(plain(f"name: {skill.name!s}\ndescription: {skill.description!s}"), markup=False, highlight=False)
    for label, value in (("license", skill.license), ("compatibility", skill.compatibility)):
        if value:
            console.print(plain(f"{label}: {value}"), markup=False, highlight=False)
    d = skill.declarations
    if d.requires_tools or d.operations or d.input_schema:
        console.print(
            f"declares: tools={d.requires_tools} operations={d.operations} "
            f"input-schema={'yes' if d.input_schema else 'no'}",
            markup=False,
        )
    cut = f", L2 cut by {l2.cut_tokens} tokens" if l2.truncated else ""
    console.print(f"body: {skill.body_tokens} tokens{cut}", highlight=False)
    table = Table(title="References")
    for column in ("via", "ref", "path", "exists", "source"):
        table.add_column(column, overflow="fold")
    for r in skill.references:
        exists = "[green]yes[/green]" if r.exists else "[red]no[/red]"
        path = escape(r.path) if r.path is not None else "[red](refused or no match)[/red]"
        table.add_row(r.via, escape(plain(r.ref)), plain(path), exists, escape(plain(r.source)))
    console.print(table)
    for p in skill.problems:
        colour = "red" if p.severity == "error" else "yellow"
        line = f"[{colour}]{p.severity}[/{colour}] {p.code}: {escape(plain(_where(p) + p.message))}"
        console.print(line, highlight=False)
    if body:
        console.rule("L2")
        console.print(plain(l2.text), markup=False, highlight=False)


def _where(problem: Problem) -> str:
    if problem.path and problem.line:
        return f"{problem.path}:{problem.line}: "
    return f"{problem.path}: " if problem.path else ""


@app.command("route-check")
def route_check_command(
    ctx: typer.Context,
    root: RootOption = Path("skills"),
    goals: Annotated[
        Path | None,
        typer.Option("--goals", help='Goals, one a line (text, or JSON {"goal": ...}): report skills none reaches.'),
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="A goal reaches the first K skills it ranks.")] = 10,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=1.0,
            help="Similarity from which two skills overlap (default: "
            "0.8 embedding cosine, 0.6 word Jaccard when ranking by words only).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check how a library routes: pairs of skills whose descriptions overlap (a router would confuse them) and,
    with --goals, skills no goal ranks among its first K. Ranks as the planner's shortlist does."""
    library = _library(ctx, root, as_json)
    settings = state(ctx).settings()
    try:
        # Deferred: ranking loads the index and the embedder; skills list and show must not pay for it.
        from orchestrator.workflow.planner_bench import check_routes

        report = check_routes(library, settings.selection, settings.cache_dir, goals, k=k, threshold=threshold)
    except OrchestratorError as e:
        fail(e, as_json=as_json)
    if as_json:
        emit_json(report)
        return
    console = Console(soft_wrap=True)
    measure = "meaning (embedding cosine)" if report.measure == "embedding-cosine" else "words (Jaccard)"
    console.print(f"{report.skills} skills; overlap by {measure} >= {report.threshold}", highlight=False)
    if report.overlaps:
        console.print(
            f"{len(report.overlaps)} overlapping pair(s): make their descriptions say how they differ", highlight=False
        )
        for pair in report.overlaps:
            console.print(f"  {pair.similarity:.3f}  {plain(pair.a)}  <->  {plain(pair.b)}", highlight=False)
    else:
        console.print("no overlapping descriptions", highlight=False)
    if goals is not None:
        console.print(
            f"{report.goals} goals, top {report.k}: {len(report.unreached)} skill(s) no goal reaches", highlight=False
        )
        for skill in report.unreached:
            console.print(f"  {plain(skill.id)}: {plain(skill.description[:100])}", highlight=False)
