"""The finished spans of a goal's trace (``orch:spans:<trace id>``): ``jobs ID --trace`` reads them, no collector
needed."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.worker.store import PREFIX, Store


class Spans(Store):
    def add_span(self, trace_id: str, span: dict[str, Any]) -> None:
        """Keep a finished span of a goal's trace."""
        self.r.rpush(f"{PREFIX}:spans:{trace_id}", json.dumps(span))

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(f"{PREFIX}:spans:{trace_id}", 0, -1)]
