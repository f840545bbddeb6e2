"""OpenTelemetry: one trace per goal, spans for the goal, plan, each act, each tool call and each container.

Code everywhere uses :func:`tracer` (the OpenTelemetry API: a no-op until a provider is configured). A worker
process calls :func:`configure_tracing` once: finished spans then go to a sink (the job ledger, so ``jobs ID
--trace`` needs no collector) and, only when the standard ``OTEL_EXPORTER_OTLP_*`` variables are set, to an OTLP
collector. A goal's phases run in different tasks, maybe on different workers: each phase span is parented on the
goal span whose ids the ledger holds, and the goal span itself is emitted once, at the end, with those same ids.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

SpanSink = Callable[[str, dict[str, Any]], None]
"""``sink(trace_id_hex, span_dict)`` for every finished span."""

_OTLP_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_preset_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("orch_preset_ids", default=None)
_configured = threading.Lock()
_state: dict[str, Any] = {}


def tracer() -> trace.Tracer:
    return trace.get_tracer("orchestrator")


def new_ids() -> tuple[str, str]:
    """A fresh ``(trace_id, span_id)`` in hex, for a goal span that is emitted later."""
    rng = random.SystemRandom()
    return f"{rng.getrandbits(128) or 1:032x}", f"{rng.getrandbits(64) or 1:016x}"


def configure_tracing(service_name: str, sink: SpanSink | None = None) -> bool:
    """Install the SDK provider once per process; later calls only replace the sink. True if newly installed."""
    with _configured:
        _state["sink"] = sink
        if _state.get("provider") is not None:
            return False
        # Deferred: the OpenTelemetry SDK is loaded only by processes that install tracing (workers).
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(
            resource=Resource.create({"service.name": service_name}), id_generator=_PresetIdGenerator()
        )
        provider.add_span_processor(_SinkProcessor())
        if any(os.environ.get(v) for v in _OTLP_VARS):
            # Deferred: the OTLP exporter (and its HTTP stack) loads only when an endpoint is configured.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _state["provider"] = provider
        return True


def flush(timeout_ms: int = 5000) -> None:
    provider = _state.get("provider")
    if provider is not None:
        provider.force_flush(timeout_ms)


@contextmanager
def under_goal(trace_id: str, goal_span_id: str) -> Iterator[None]:
    """Make the (not yet emitted) goal span the parent of spans started inside."""
    parent = SpanContext(
        trace_id=int(trace_id, 16), span_id=int(goal_span_id, 16), is_remote=True, trace_flags=TraceFlags(1)
    )
    token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        yield
    finally:
        otel_context.detach(token)


def emit_goal_span(
    trace_id: str, span_id: str, *, start_s: float, end_s: float, attributes: dict[str, Any]
) -> None:
    """Emit the goal's root span with the ids its phases already point at."""
    token = _preset_ids.set((int(trace_id, 16), int(span_id, 16)))
    try:
        span = tracer().start_span(
            "goal", context=otel_context.Context(), start_time=int(start_s * 1e9), attributes=attributes
        )
    finally:
        _preset_ids.reset(token)
    span.end(end_time=int(end_s * 1e9))


class _PresetIdGenerator(RandomIdGenerator):
    """Random ids, except for the goal span, whose ids were chosen when the job was submitted."""

    def generate_span_id(self) -> int:
        preset = _preset_ids.get()
        return preset[1] if preset else super().generate_span_id()

    def generate_trace_id(self) -> int:
        preset = _preset_ids.get()
        return preset[0] if preset else super().generate_trace_id()


class _SinkProcessor(SpanProcessor):
    """Hands every finished span, as a small dict, to the configured sink (errors never reach the traced code)."""

    def on_end(self, span: Any) -> None:
        sink: SpanSink | None = _state.get("sink")
        if sink is None:
            return
        ctx = span.context
        parent = span.parent
        data = {
            "name": span.name,
            "span_id": f"{ctx.span_id:016x}",
            "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
            "start": (span.start_time or 0) / 1e9,
            "end": (span.end_time or 0) / 1e9,
            "status": span.status.status_code.name.lower(),
            "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
        }
        with contextlib.suppress(Exception):  # a lost span must not break the goal
            sink(f"{ctx.trace_id:032x}", data)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
