"""``api``: serve the producers' HTTP API (keys from ``keys create``), the only door producers need."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import fail, notice, state
from orchestrator.cli.ledger_access import open_ledger
from orchestrator.errors import OrchestratorError
from orchestrator.worker.records import JobRecord
from orchestrator.worker.views import batch_report, workers_view


def serve(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option("--host", help="Address to listen on (setting api.host).")] = None,
    port: Annotated[int | None, typer.Option("--port", min=1, max=65535, help="Port (setting api.port).")] = None,
) -> None:
    """Serve the API until stopped: POST /v1/jobs, GET /v1/jobs…, /v1/batches…; schema at /openapi.json."""
    try:
        settings = state(ctx).settings()
        ledger = open_ledger(settings)
    except OrchestratorError as e:
        fail(e, as_json=False, code=2)
    # Deferred: the web framework, the server and the Celery app load only for this command (a fast CLI).
    import uvicorn

    # Deferred: FastAPI, plotly (the batch report) and Celery load with the server only.
    from orchestrator.api.server import create_api
    from orchestrator.cli.batch_report import write_report
    from orchestrator.worker.celery_app import create_app

    def render(batch: str, records: list[JobRecord]) -> str:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "report.html"
            write_report(path, batch, records, batch_report(records, settings), settings,
                         workers=workers_view(ledger))
            return path.read_text(encoding="utf-8")

    api = create_api(settings, ledger, create_app(settings), render_report=render)
    where_host, where_port = host or settings.api.host, port or settings.api.port
    notice("api.start", f"producers' API on http://{where_host}:{where_port} (schema: /openapi.json)")
    uvicorn.run(api, host=where_host, port=where_port, log_level="warning", proxy_headers=False)
