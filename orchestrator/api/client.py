"""The CLI's client of the producers' API (``ORCH_API_URL`` and ``ORCH_API_KEY``): what ``submit`` and ``jobs`` do
through the front door, with no Redis credentials. :class:`RemoteLedger` reads jobs the way the CLI reads the ledger,
so both paths print the same."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis

from orchestrator.api.files import unpack_checked
from orchestrator.errors import ConfigError, OrchestratorError
from orchestrator.worker.export import MAX_FILES, MAX_TOTAL_BYTES
from orchestrator.worker.records import JobRecord
from orchestrator.worker.submit import SubmitReport

URL_ENV = "ORCH_API_URL"  # the CLI checks the same two names before it loads this module (cli/remote.py)
KEY_ENV = "ORCH_API_KEY"
TIMEOUT_S = 60.0
LIST_MAX = 1000


class ApiUnreachable(ConfigError):
    """The API did not answer (not started, a dropped connection) or answered that its ledger is unreachable."""


class ApiAnswer(OrchestratorError):
    """A refusal of the API (401, 404, 409, 413, 429…), with its status and body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(str(body.get("detail") or f"HTTP {status}"), where="api", status=status)
        self.status = status
        self.body = body


def from_environment() -> ApiClient | None:
    """A client when both ``ORCH_API_URL`` and ``ORCH_API_KEY`` are set, else None (the CLI then uses Redis)."""
    url, key = os.environ.get(URL_ENV, "").strip(), os.environ.get(KEY_ENV, "").strip()
    return ApiClient(url, key) if url and key else None


class ApiClient:
    def __init__(self, url: str, key: str) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT_S)

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise ApiUnreachable(f"cannot reach the API at {self.url}: {e}", where="api",
                                 next_step=f"start it (python -m orchestrator api) or fix {URL_ENV}") from e
        if answer.status_code == 503:
            raise ApiUnreachable(f"the API at {self.url} cannot reach its job ledger now", where="api",
                                 next_step="try again shortly")
        if answer.status_code == 401:
            raise ConfigError(f"the API at {self.url} refused the key", where="api",
                              next_step=f"set {KEY_ENV} to a key from `keys create NAME` that was not revoked")
        return answer

    def _json(self, method: str, path: str, *, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        answer = self._call(method, path, **kwargs)
        try:
            body = answer.json()
        except ValueError:
            body = {"detail": answer.text[:500]}
        if answer.status_code not in ok:
            raise ApiAnswer(answer.status_code, body if isinstance(body, dict) else {"detail": str(body)})
        return body

    def submit(self, lines: list[str], *, batch: str | None, rerun: bool) -> SubmitReport:
        """Send the lines as they are (their numbers stay) with every input file they name, read here."""
        parts: list[tuple[str, tuple[str, bytes]]] = [("goals", ("goals.jsonl", "\n".join(lines).encode()))]
        for name in _input_names(lines):
            path = Path(name)
            if path.is_file():  # a missing or unreadable one is named by the API on its line
                try:
                    parts.append((name, (path.name, path.read_bytes())))
                except OSError:
                    continue
        params: dict[str, Any] = {"rerun": rerun}
        if batch is not None:
            params["batch"] = batch
        return SubmitReport.model_validate(self._json("POST", "/v1/jobs", files=parts, params=params))

    def job(self, job_id: str) -> dict[str, Any] | None:
        try:
            return dict(self._json("GET", f"/v1/jobs/{job_id}"))
        except ApiAnswer as e:
            if e.status == 404:
                return None
            raise

    def jobs(
        self, *, limit: int, state: str | None = None, batch: str | None = None, full: bool = True
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit, "full": full}
        if state:
            params["state"] = state
        if batch:
            params["batch"] = batch
        return list(self._json("GET", "/v1/jobs", params=params))

    def control(self, path: str) -> tuple[int, dict[str, Any]]:
        """``POST`` a cancel or re-run: ``(status, answer)`` (409 is an answer too: nothing changed)."""
        answer = self._call("POST", path)
        try:
            body = answer.json()
        except ValueError:
            body = {"detail": answer.text[:500]}
        if answer.status_code not in (200, 409):
            raise ApiAnswer(answer.status_code, body if isinstance(body, dict) else {"detail": str(body)})
        return answer.status_code, dict(body)

    def batch(self, batch: str) -> dict[str, Any] | None:
        try:
            return dict(self._json("GET", f"/v1/batches/{batch}"))
        except ApiAnswer as e:
            if e.status == 404:
                return None
            raise

    def report(self, batch: str) -> str:
        answer = self._call("GET", f"/v1/batches/{batch}/report")
        if answer.status_code != 200:
            raise ApiAnswer(answer.status_code, {"detail": answer.text[:500]})
        return answer.text

    def trace(self, job_id: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/jobs/{job_id}/trace"))

    def workers(self) -> list[dict[str, Any]]:
        return list(self._json("GET", "/v1/workers"))

    def download(self, path: str, dest: Path) -> tuple[list[str], list[str]]:
        """Fetch a zip (``/v1/jobs/ID/files`` or ``/v1/batches/B/files``) and unpack it into ``dest`` with every
        check and cap on this side too: ``(written names, problems)``."""
        with tempfile.TemporaryFile() as spool:
            try:
                with self.http.stream("GET", path) as answer:
                    if answer.status_code == 401:
                        self._call("GET", path)  # raises the key's refusal
                    if answer.status_code != 200:
                        answer.read()
                        body = answer.json() if answer.headers.get("content-type", "").startswith(
                            "application/json") else {"detail": answer.text[:500]}
                        raise ApiAnswer(answer.status_code, body)
                    size = 0
                    for chunk in answer.iter_bytes():
                        size += len(chunk)
                        if size > MAX_TOTAL_BYTES * 2:
                            return [], [f"the download is larger than {MAX_TOTAL_BYTES * 2} bytes: stopped"]
                        spool.write(chunk)
            except httpx.HTTPError as e:
                raise ApiUnreachable(f"cannot reach the API at {self.url}: {e}", where="api") from e
            spool.seek(0)
            dest.mkdir(parents=True, exist_ok=True)
            return unpack_checked(spool, dest, max_files=MAX_FILES + 10, max_bytes=MAX_TOTAL_BYTES)


def _input_names(lines: list[str]) -> list[str]:
    names: list[str] = []
    for text in lines:
        try:
            data = json.loads(text)
        except ValueError:
            continue
        items = data.get("inputs") if isinstance(data, dict) else None
        if isinstance(items, list):
            names += [str(Path(item)) for item in items if isinstance(item, str) and str(Path(item)) not in names]
    return names


@contextmanager
def _as_outage() -> Iterator[None]:
    """An API that cannot be reached is to the waiting commands what an unreachable Redis is: an outage they ride
    out with a notice (``submit --wait``, ``jobs --watch``)."""
    try:
        yield
    except ApiUnreachable as e:
        raise redis.ConnectionError(e.message) from e


class RemoteLedger:
    """The reads ``jobs`` and ``submit --wait`` make of the ledger, answered by the API (only the caller's jobs)."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.views: dict[str, dict[str, Any]] = {}

    def _record(self, view: dict[str, Any]) -> JobRecord:
        self.views[str(view.get("job_id"))] = view
        return JobRecord.model_validate({**view, "state": view.get("ledger_state", view.get("state"))})

    def get(self, job_id: str) -> JobRecord | None:
        with _as_outage():
            view = self.client.job(job_id)
        return self._record(view) if view is not None else None

    def listing(self, *, limit: int, state: str | None = None, batch: str | None = None) -> list[JobRecord]:
        with _as_outage():
            return [self._record(v) for v in self.client.jobs(limit=limit, state=state, batch=batch)]

    def all(self, *, limit: int = 0) -> list[JobRecord]:
        return self.listing(limit=limit or LIST_MAX)

    def job_ids(self, *, limit: int = 0) -> list[str]:
        return [r.job_id for r in self.all(limit=limit)]

    def earlier_runs(self, job_id: str, current: int) -> list[JobRecord]:
        view = self.views.get(job_id) or self.client.job(job_id) or {}
        runs = []
        for item in view.get("earlier_runs") or []:
            state = item.get("state") if item.get("state") != "stalled" else "failed"
            runs.append(JobRecord(job_id=job_id, goal=str(item.get("goal") or ""), state=state,
                                  run=int(item.get("run") or 1), reason=item.get("reason")))
        return runs

    def workers(self) -> list[dict[str, Any]]:
        with _as_outage():
            return self.client.workers()

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        for view in self.views.values():
            if view.get("trace_id") == trace_id:
                return list(self.client.trace(str(view["job_id"])).get("spans") or [])
        return []
