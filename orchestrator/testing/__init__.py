"""Fakes shipped with the package: in-memory scripted models and the OpenAI-compatible scenario server."""

from orchestrator.testing.scenario_server import ScenarioServer, start_scenario_server
from orchestrator.testing.scripted_model import (
    FunctionModel,
    RecordedCall,
    ResponseFn,
    ScriptedModel,
    ScriptMismatch,
    json_response,
    raw_tool_call_response,
    text_response,
    tool_call,
    tool_call_response,
    tool_calls_response,
)

__all__ = [
    "FunctionModel",
    "RecordedCall",
    "ResponseFn",
    "ScenarioServer",
    "ScriptMismatch",
    "ScriptedModel",
    "json_response",
    "raw_tool_call_response",
    "start_scenario_server",
    "text_response",
    "tool_call",
    "tool_call_response",
    "tool_calls_response",
]
