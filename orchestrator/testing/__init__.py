"""Test fakes shipped with the package: in-memory scripted models, an in-memory sandbox backend, and a sloppy model
served over HTTP (``sloppy_server.SloppyServer``) that answers any request the way a small real model does.

Nothing in the package imports this folder; ``scripted:`` runs use ``orchestrator.llm.scenario_server``.
"""

from orchestrator.llm.scenario import ScriptMismatch
from orchestrator.testing.memory_sandbox import FakeScript, InMemoryJob, InMemorySandbox
from orchestrator.testing.scripted_model import (
    FunctionModel,
    RecordedCall,
    ResponseFn,
    ScriptedModel,
    json_response,
    raw_tool_call_response,
    text_response,
    tool_call,
    tool_call_response,
    tool_calls_response,
)

__all__ = [
    "FakeScript",
    "InMemoryJob",
    "InMemorySandbox",
    "FunctionModel",
    "RecordedCall",
    "ResponseFn",
    "ScriptMismatch",
    "ScriptedModel",
    "json_response",
    "raw_tool_call_response",
    "text_response",
    "tool_call",
    "tool_call_response",
    "tool_calls_response",
]
