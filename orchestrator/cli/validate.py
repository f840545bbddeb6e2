"""CLI: validate an output folder (``python -m orchestrator validate OUT_DIR [--rules RULES.yaml] --json``).

Exit codes: 0 the report passed, 1 it did not (or the model failed), 2 bad usage or malformed rules.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from orchestrator.cli.common import EXIT_USAGE, emit_json, fail, plain, state
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.llm.factory import open_model
from orchestrator.llm.image_input import ImageLimits
from orchestrator.validate.report import ValidationReport
from orchestrator.validate.rules import ContractRules, ExpectedOutputs
from orchestrator.validate.validator import validate_outputs


class QAModeOption(StrEnum):
    final = "final"
    step = "step"
    off = "off"


def validate_cmd(
    ctx: typer.Context,
    out_dir: Annotated[Path, typer.Argument(help="The output folder to validate.", show_default=False)],
    rules: Annotated[
        Path | None,
        typer.Option("--rules", help="Contract rules YAML (seed appendix B format, see docs/validation.md)."),
    ] = None,
    expected: Annotated[
        str | None,
        typer.Option("--expected", help="Expected outputs in plain words, for the semantic check."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="openai:NAME or scripted:PATH. Without it only the contract is checked."
        ),
    ] = None,
    brand: Annotated[
        Path | None,
        typer.Option("--brand", help="A brand.json whose fonts and colours Office files must keep to (layout check)."),
    ] = None,
    qa_mode: Annotated[
        QAModeOption | None,
        typer.Option("--qa-mode", help="final | step | off (off: contract only). Default: settings qa.mode."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check OUT_DIR against the contract rules, then (with --model) ask the model for a semantic verdict."""
    try:
        settings = state(ctx).settings()
        if not out_dir.is_dir():
            raise ConfigError(
                f"output folder not found: {out_dir}",
                where="validate",
                next_step="pass the folder holding the produced files",
            )
        contract = ContractRules.from_yaml(rules) if rules is not None else ContractRules()
        expectations = ExpectedOutputs(description=expected or "", rules=contract)
        if brand is not None and not brand.is_file():
            raise ConfigError(f"brand file not found: {brand}", where="validate", next_step="pass a brand.json file")
        mode = qa_mode.value if qa_mode is not None else settings.qa.mode
        layout = settings.qa.layout
        if model is None or mode == "off":
            report = validate_outputs(out_dir, expectations, qa_mode=mode, layout=layout, brand=brand)
        else:
            images = ImageLimits(max_bytes=settings.disclosure.image_max_bytes,
                                 max_side_px=settings.disclosure.image_max_side_px)
            with open_model(model, settings.model) as chat:
                report = validate_outputs(out_dir, expectations, model=chat, qa_mode=mode, layout=layout,
                                          brand=brand, images=images if settings.qa.semantic_images else None)
    except ConfigError as e:
        fail(e, as_json=as_json, code=EXIT_USAGE)
    except OrchestratorError as e:
        fail(e, as_json=as_json, code=1)
    if as_json:
        emit_json(report.model_dump(mode="json", by_alias=True))
    else:
        _print_summary(report)
    raise typer.Exit(0 if report.pass_ else 1)


def _print_summary(report: ValidationReport) -> None:
    console = Console()
    verdict = "[bold green]PASS[/]" if report.pass_ else "[bold red]FAIL[/]"
    sizes = f"{report.metrics.files} files, {report.metrics.bytes} bytes"
    usage = f", tokens {report.tokens_in} in / {report.tokens_out} out" if report.stage == "semantic" else ""
    console.print(f"{verdict} at stage [bold]{report.stage}[/]: {sizes}{usage}")
    console.print(plain(report.rationale), markup=False)
    for path in report.missing:
        console.print(plain(f"  missing: {path}"), style="red", markup=False)
    for violation in report.violations:
        console.print(plain(f"  violation: {violation}"), style="red", markup=False)
    for warning in report.warnings:
        console.print(plain(f"  warning: {warning}"), style="yellow", markup=False)
    if report.files:
        table = Table("path", "kind", "bytes", "sha256", box=None, pad_edge=False)
        for entry in report.files:
            table.add_row(entry.path, entry.kind, str(entry.size), entry.sha256[:12])
        console.print(table)
