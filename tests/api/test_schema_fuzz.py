"""A property-based fuzz of the API's OpenAPI schema (schemathesis): every operation, with generated paths, queries
and goal lines, under a producer's key and with none, answers with no 5xx and within what its schema says. Bounded:
a dozen examples per operation, about two hundred requests in all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from api_helpers import RedisServer, door_settings, goal
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from orchestrator.api.keys import KeyStore
from orchestrator.api.server import create_api
from orchestrator.worker.celery_app import create_app
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.submit import submit_lines

EXAMPLES_PER_OPERATION = 12
KEYS: dict[str, str] = {}


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("fuzz")
    server = RedisServer(root / "redis").start()
    door = door_settings(root, server.url)
    ledger = Ledger.from_url(server.url)
    KEYS["producer"] = KeyStore(ledger.r).create("fuzzer")[1]
    import json

    submit_lines([json.dumps(goal("fuzz-1"))], door, ledger, lambda r, p: None, new_job_id=lambda: "x",
                 batch="fuzz-batch", owner="fuzzer")
    app = create_api(door, ledger, create_app(door), render_report=lambda batch, records: "<html></html>")
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    server.stop()


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much,
         HealthCheck.data_too_large]


def _operations(schema: Any) -> list[Any]:
    found = [result.ok() for result in schema.get_all_operations()]
    assert len(found) >= 15, [op.label for op in found]
    return found


def test_every_operation_answers_without_5xx_and_within_its_schema(api_schema: Any) -> None:
    calls: list[str] = []
    for operation in _operations(api_schema):

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=QUIET, database=None)
        def fuzz(case: Any) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {KEYS['producer']}"}, checks=CHECKS)
            calls.append(case.path)

        fuzz()
    assert len(calls) >= 100 and len(set(calls)) >= 14, (len(calls), sorted(set(calls)))  # 16 operations, 14 paths


def test_with_a_wrong_key_every_operation_but_health_is_refused(api_schema: Any) -> None:
    for operation in _operations(api_schema):

        @given(case=operation.as_strategy())
        @settings(max_examples=3, deadline=None, suppress_health_check=QUIET, database=None)
        def fuzz(case: Any) -> None:
            answer = case.call(headers={"Authorization": "Bearer orch-wrong"})
            assert answer.status_code < 500
            if case.path != "/healthz":
                assert answer.status_code in (401, 422), (case.path, answer.status_code, answer.text[:200])

        fuzz()
