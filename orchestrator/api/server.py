"""The producers' HTTP API (FastAPI): submit goal lines, follow, cancel, re-run and download one's own jobs.

Every route but ``/healthz`` and ``/openapi.json`` needs ``Authorization: Bearer KEY``; what a key may see is decided
in :mod:`orchestrator.api.access` only. Producers hold no Redis credentials: this server is their only way in.
"""


import base64
import mimetypes
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Annotated, Any, Literal

import redis
from fastapi import Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from orchestrator.api import files
from orchestrator.api.access import ApiRefusal, Caller, find_batch, find_job, visible_jobs
from orchestrator.api.intake import Intake, read_intake
from orchestrator.api.keys import ApiKey, KeyStore
from orchestrator.api.quotas import check_quotas
from orchestrator.api.views import batch_view, job_view
from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError
from orchestrator.worker import control
from orchestrator.worker.dispatch import enqueue_phase
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import TERMINAL, JobRecord
from orchestrator.worker.submit import SubmitReport, check_batch_id, parse_lines, submit_lines
from orchestrator.worker.views import no_worker_note, shown_state, summary, workers_view
from orchestrator.workflow.steps import new_job_id

ShownState = Literal["queued", "planning", "acting", "reflecting", "stalled", "done", "unmet", "failed", "cancelled"]
RenderReport = Callable[[str, list[JobRecord]], str]
"""``render(batch, records)`` → the batch's HTML report (the CLI's, handed in: the API sits below the CLI)."""
CHUNK = 1 << 16


class Problem(BaseModel):
    """Every refusal: what is wrong, in words, and the data a program needs (a quota's ``left``, a job's state)."""

    detail: str
    quota: str | None = None
    limit: int | None = None
    used: int | None = None
    left: int | None = None
    state: str | None = None


class Health(BaseModel):
    ok: bool
    redis: bool


class Worker(BaseModel):
    """What a producer may know of a worker: whether it takes work, and what it lacks."""

    name: str = "?"
    ready: bool = False
    queues: list[str] = []
    missing: list[str] = []


class BatchOutcome(BaseModel):
    batch: str
    jobs: list[control.Outcome]


def refusal(description: str, model: type[BaseModel] = Problem) -> dict[str, Any]:
    """A refusal's documentation: JSON, whatever the route answers when it succeeds (a zip, a page)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"model": model, "description": description, "content": {"application/json": {"schema": ref}}}


REFUSALS: dict[int | str, dict[str, Any]] = {
    400: refusal("a request that cannot be used as sent (a bad batch id, a bad body)"),
    401: refusal("no key, a wrong key or a revoked key"),
    404: refusal("no such job or batch (another producer's answers the same)"),
    503: refusal("the job ledger (Redis) cannot be reached now"),
}
GOAL_LINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["goal"],
    "properties": {
        "goal": {"type": "string"}, "skills": {"type": "string"}, "model": {"type": "string"},
        "job_id": {"type": "string"}, "inputs": {"type": "array", "items": {"type": "string"}},
        "constraints": {"type": "array", "items": {"type": "string"}}, "budgets": {"type": "object"},
        "out": {"type": "string"}, "response": {"type": "string", "enum": ["SUMMARY", "SCORED"]},
    },
}
"""How a goal line looks (the body is read and checked line by line, so a bad line is rejected with its number
rather than refusing the request)."""
SUBMIT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {"schema": {"type": "array", "items": GOAL_LINE_SCHEMA}},
            "application/x-ndjson": {"schema": {"type": "string", "description": "one goal line per line"}},
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["goals"],
                "properties": {"goals": {"type": "string", "format": "binary",
                                         "description": "the goal lines (JSONL or a JSON array); every other part "
                                         "is an input file, named as a line's inputs names it"}},
                "additionalProperties": {"type": "string", "format": "binary"},
            }},
        },
    }
}


def _iterate(handle: IO[bytes]) -> Iterator[bytes]:
    try:
        while chunk := handle.read(CHUNK):
            yield chunk
    finally:
        handle.close()


@dataclass(frozen=True)
class Door:
    """What every route works with."""

    settings: Settings
    ledger: Ledger
    celery_app: Any
    render_report: RenderReport | None


def create_api(
    settings: Settings, ledger: Ledger, celery_app: Any, *, render_report: RenderReport | None = None
) -> FastAPI:
    """The API on ``ledger``; tasks are sent with ``celery_app``; keys are kept in the same Redis."""
    keys = KeyStore(ledger.r)
    api = FastAPI(
        title="skills orchestrator: producers' API",
        version="1",
        description="Submit goal lines, follow, cancel, re-run and download your own jobs. "
        "Authenticate with `Authorization: Bearer KEY` (`python -m orchestrator keys create NAME`).",
    )
    bearer = HTTPBearer(auto_error=False, description="a producer's key from `keys create NAME`")

    @api.exception_handler(ApiRefusal)
    async def _refused(_request: Request, error: ApiRefusal) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
        return JSONResponse({"detail": error.message, **error.data}, status_code=error.status, headers=headers)

    @api.exception_handler(OrchestratorError)
    async def _bad(_request: Request, error: OrchestratorError) -> JSONResponse:
        return JSONResponse({"detail": error.message}, status_code=400)

    @api.exception_handler(redis.RedisError)
    async def _redis_down(_request: Request, error: redis.RedisError) -> JSONResponse:
        return JSONResponse({"detail": "the job ledger cannot be reached; try again shortly"}, status_code=503)

    def authenticated(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> ApiKey:
        key = keys.authenticate(creds.credentials) if creds is not None else None
        if key is None:
            raise ApiRefusal(401, "a valid API key is needed: Authorization: Bearer KEY")
        return key

    @api.exception_handler(StarletteHTTPException)
    async def _unrouted(request: Request, error: StarletteHTTPException) -> Response:
        """A URL under /v1 that no route serves (a path parameter holding a newline) is "not found" only for a caller
        with a key; without one it answers 401 like every other /v1 URL, so no URL is probed without a key."""
        if error.status_code == 404 and request.url.path.startswith("/v1/"):
            try:
                await run_in_threadpool(authenticated, await bearer(request))
            except ApiRefusal as refusal:
                return await _refused(request, refusal)
            except redis.RedisError as e:
                return await _redis_down(request, e)
        return await http_exception_handler(request, error)

    def caller(key: Annotated[ApiKey, Depends(authenticated)]) -> Caller:
        return Caller(name=key.name, admin=key.admin)

    door = Door(settings, ledger, celery_app, render_report)
    _service_routes(api, door)
    _job_routes(api, door, authenticated, caller)
    _file_routes(api, door, caller)
    _batch_routes(api, door, caller)
    return api


def _service_routes(api: FastAPI, door: Door) -> None:
    ledger = door.ledger

    @api.get("/healthz", response_model=Health, tags=["service"])
    def healthz() -> JSONResponse:
        try:
            up = bool(ledger.r.ping())
        except redis.RedisError:
            up = False
        return JSONResponse({"ok": up, "redis": up}, status_code=200 if up else 503)


def _job_routes(api: FastAPI, door: Door, authenticated: Callable[..., ApiKey], caller: Callable[..., Caller]) -> None:
    settings, ledger, celery_app = door.settings, door.ledger, door.celery_app
    locks: dict[str, threading.Lock] = {}

    def send(record: JobRecord, phase: str) -> None:
        enqueue_phase(celery_app, settings, ledger, record, phase)

    def submit_now(intake: Intake, key: ApiKey, batch: str | None, rerun: bool) -> SubmitReport:
        good, rejected = parse_lines(intake.lines, settings, intake.reader(settings))
        with locks.setdefault(key.name, threading.Lock()):  # one producer's quota is checked and used at once
            check_quotas(ledger, settings, key, good)
            return submit_lines([], settings, ledger, send, new_job_id=new_job_id, batch=batch, rerun=rerun,
                                owner=key.name, parsed=(good, rejected))

    @api.post("/v1/jobs", response_model=SubmitReport, tags=["jobs"], openapi_extra=SUBMIT_BODY,
              responses={**REFUSALS, 413: refusal("over a cap on the request"),
                         429: refusal("over a quota: what is left is in the answer")})
    async def post_jobs(
        request: Request,
        key: Annotated[ApiKey, Depends(authenticated)],
        batch: Annotated[str | None, Query(max_length=100, description="batch id (default: a new one)")] = None,
        rerun: Annotated[bool, Query(description="run again lines whose job ended failed, unmet or cancelled")] = False,
    ) -> SubmitReport:
        """Goal lines as a JSON array, JSONL, or multipart (part ``goals`` plus one part per input file, named as
        the line's ``inputs`` names it). Answered per line, as ``submit --json`` answers."""
        check_batch_id(batch)
        intake = await read_intake(request, settings)
        return await run_in_threadpool(submit_now, intake, key, batch, rerun)

    @api.get("/v1/jobs", response_model=list[dict[str, Any]], tags=["jobs"], responses=REFUSALS)
    def list_jobs(
        who: Annotated[Caller, Depends(caller)],
        state: ShownState | None = None,
        batch: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=settings.api.list_max)] = 50,
        full: Annotated[bool, Query(description="each job's whole record, as GET /v1/jobs/{id} answers")] = False,
    ) -> list[dict[str, Any]]:
        """Your jobs, newest first (an admin key: everyone's), as ``jobs --json`` lists them."""
        found = []
        for record in visible_jobs(ledger, who):
            if batch is not None and record.batch != batch:
                continue
            if state is not None and shown_state(record, settings)[0] != state:
                continue
            note = no_worker_note(ledger) if record.state == "queued" else None
            found.append(job_view(ledger, settings, record) if full else summary(record, settings, note=note))
            if len(found) >= limit:
                break
        return found

    @api.get("/v1/jobs/{job_id}", response_model=dict[str, Any], tags=["jobs"], responses=REFUSALS)
    def get_job(job_id: str, who: Annotated[Caller, Depends(caller)]) -> dict[str, Any]:
        """The record ``jobs ID --json`` prints."""
        return job_view(ledger, settings, find_job(ledger, who, job_id))

    @api.get("/v1/jobs/{job_id}/trace", response_model=dict[str, Any], tags=["jobs"], responses=REFUSALS)
    def get_trace(job_id: str, who: Annotated[Caller, Depends(caller)]) -> dict[str, Any]:
        """The job's finished spans (``jobs ID --trace --json``)."""
        record = find_job(ledger, who, job_id)
        spans = ledger.spans(record.trace_id) if record.trace_id else []
        return {"job_id": record.job_id, "trace_id": record.trace_id, "spans": spans}

    @api.get("/v1/workers", response_model=list[Worker], tags=["service"], responses=REFUSALS)
    def get_workers(who: Annotated[Caller, Depends(caller)]) -> list[Worker]:
        """Workers alive now, ready or not and what they lack (whether queued jobs will be taken)."""
        shown = []
        for w in ledger.workers():
            try:
                shown.append(Worker.model_validate(w))
            except ValidationError:  # an announcement altered in Redis: left out
                continue
        return shown

    @api.post("/v1/jobs/{job_id}/cancel", response_model=control.Outcome, tags=["jobs"],
              responses={**REFUSALS, 409: refusal("nothing changed (see outcome)", control.Outcome)})
    def cancel_job(job_id: str, who: Annotated[Caller, Depends(caller)]) -> JSONResponse:
        """Cancel a job that has not ended (409: it had ended; nothing changed)."""
        outcome = control.cancel(ledger, celery_app, find_job(ledger, who, job_id).job_id)
        return JSONResponse(outcome.model_dump(mode="json"), status_code=200 if outcome.ok else 409)

    @api.post("/v1/jobs/{job_id}/rerun", response_model=control.Outcome, tags=["jobs"],
              responses={**REFUSALS, 409: refusal("nothing changed (see outcome)", control.Outcome)})
    def rerun_job(job_id: str, who: Annotated[Caller, Depends(caller)]) -> JSONResponse:
        """Run a failed, unmet or cancelled job again (409: it is in another state; nothing changed)."""
        outcome = control.rerun(ledger, settings, celery_app, find_job(ledger, who, job_id))
        return JSONResponse(outcome.model_dump(mode="json"), status_code=200 if outcome.ok else 409)


def _file_routes(api: FastAPI, door: Door, caller: Callable[..., Caller]) -> None:
    settings, ledger = door.settings, door.ledger

    @api.get("/v1/jobs/{job_id}/files", tags=["files"], response_class=StreamingResponse,
             responses={**REFUSALS, 409: refusal("the job has not ended"), 200: {"content": {"application/zip": {}}}})
    def job_files(job_id: str, who: Annotated[Caller, Depends(caller)]) -> StreamingResponse:
        """A zip of an ended job: ``files/…``, ``evidence/…`` and ``manifest.json`` (sizes and sha256)."""
        record = find_job(ledger, who, job_id)
        handle = files.job_archive(ledger, settings, record)
        return StreamingResponse(_iterate(handle), media_type="application/zip",
                                 headers={"Content-Disposition": f'attachment; filename="{record.job_id}.zip"'})

    @api.get("/v1/jobs/{job_id}/files/{path:path}", tags=["files"], response_class=Response,
             responses={**REFUSALS, 409: refusal("the job has not ended"),
                        200: {"content": {"application/octet-stream": {}}}})
    def job_file(job_id: str, path: str, who: Annotated[Caller, Depends(caller)]) -> Response:
        """One output file of an ended job; its sha256 in ``X-Content-Sha256`` (hex) and ``Repr-Digest``."""
        record = find_job(ledger, who, job_id)
        data, digest = files.one_file(settings, record, path)
        kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
        b64 = base64.b64encode(bytes.fromhex(digest)).decode()
        return Response(data, media_type=kind, headers={
            "X-Content-Sha256": digest, "Repr-Digest": f"sha-256=:{b64}:", "ETag": f'"{digest}"',
        })


def _batch_routes(api: FastAPI, door: Door, caller: Callable[..., Caller]) -> None:
    settings, ledger, celery_app, render_report = door.settings, door.ledger, door.celery_app, door.render_report

    @api.get("/v1/batches/{batch}", response_model=dict[str, Any], tags=["batches"], responses=REFUSALS)
    def get_batch(batch: str, who: Annotated[Caller, Depends(caller)]) -> dict[str, Any]:
        """Your jobs of the batch: counts by state, durations, failures and each job (``jobs --batch B --json``)."""
        return {**batch_view(settings, batch, find_batch(ledger, who, batch)), "workers": workers_view(ledger)}

    @api.get("/v1/batches/{batch}/report", response_class=HTMLResponse, tags=["batches"], responses=REFUSALS)
    def batch_report(batch: str, who: Annotated[Caller, Depends(caller)]) -> HTMLResponse:
        """The batch's self-contained HTML report (its timeline), of your jobs in it."""
        records = find_batch(ledger, who, batch)
        if render_report is None:
            raise ApiRefusal(501, "this server was started without the report renderer")
        return HTMLResponse(render_report(batch, records))

    @api.post("/v1/batches/{batch}/cancel", response_model=BatchOutcome, tags=["batches"], responses=REFUSALS)
    def cancel_batch(batch: str, who: Annotated[Caller, Depends(caller)]) -> BatchOutcome:
        """Cancel every job of the batch that has not ended."""
        records = find_batch(ledger, who, batch)
        done = [control.cancel(ledger, celery_app, r.job_id) for r in records if r.state not in TERMINAL]
        return BatchOutcome(batch=batch, jobs=done)

    @api.post("/v1/batches/{batch}/rerun", response_model=BatchOutcome, tags=["batches"], responses=REFUSALS)
    def rerun_batch(batch: str, who: Annotated[Caller, Depends(caller)]) -> BatchOutcome:
        """Run the batch's failed and unmet jobs again (nothing else)."""
        records = find_batch(ledger, who, batch)
        again = [control.rerun(ledger, settings, celery_app, r) for r in records
                 if r.state in control.BATCH_RERUNNABLE]
        return BatchOutcome(batch=batch, jobs=again)

    @api.get("/v1/batches/{batch}/files", tags=["batches"], response_class=StreamingResponse,
             responses={**REFUSALS, 200: {"content": {"application/zip": {}}}})
    def batch_files(batch: str, who: Annotated[Caller, Depends(caller)]) -> StreamingResponse:
        """A zip of the batch's ended jobs (``<job id>/files/…``, ``<job id>/evidence/…``, ``manifest.json``)."""
        records = find_batch(ledger, who, batch)
        handle = files.batch_archive(ledger, settings, batch, records)
        return StreamingResponse(_iterate(handle), media_type="application/zip",
                                 headers={"Content-Disposition": f'attachment; filename="{batch}.zip"'})
