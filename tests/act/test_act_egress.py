"""An Act of a skill that declares network or secrets: refused before any model call unless the operator granted
all of it (one message naming every missing host, secret and tool, and the setting); granted, its sandbox job is
opened with the egress plan."""

from __future__ import annotations

from act_helpers import act

from orchestrator.config import load_settings
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.testing import ScriptedModel, tool_call_response
from orchestrator.testing.memory_sandbox import InMemorySandbox

DECLARES = "metadata:\n  network: [api.example.test]\n  secrets: [API_KEY]\n  requires-tools: [ffmpeg]\n"


def test_an_ungranted_declaration_is_refused_before_the_model_is_called(write_skill, skills_root, tmp_path):
    write_skill("caller", "Calls the service.", frontmatter=DECLARES)
    settings = load_settings(cache_dir=tmp_path / "cache", skills_dir=skills_root)
    model = ScriptedModel([])
    sandbox = InMemorySandbox(tools={"python3": "3.11"})
    result = act(
        "caller", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", sandbox=sandbox
    )
    assert model.calls == [] and sandbox.jobs == []
    assert result.status == "failed" and result.exit_reason == "not_granted"
    why = result.unmet[0].why
    assert "api.example.test" in why and "API_KEY" in why and "ffmpeg" in why
    assert "ORCH_EGRESS=" in result.next_step and "ORCH_SECRET_API_KEY" in result.next_step


def test_a_granted_skill_opens_its_sandbox_job_with_the_egress_plan(write_skill, skills_root, tmp_path, monkeypatch):
    declares = "metadata:\n  network: [api.example.test]\n  secrets: [API_KEY]\n"
    write_skill("caller", "Run `call.py`.", frontmatter=declares, files={"call.py": "print('{}')\n"})
    monkeypatch.setenv("ORCH_SECRET_API_KEY", "value-from-the-worker")
    grant = {"library": "default", "skill": "caller", "hosts": ["api.example.test"],
             "secrets": {"API_KEY": {"host": "api.example.test"}}}
    settings = load_settings(cache_dir=tmp_path / "cache", skills_dir=skills_root, egress={"grants": [grant]})
    model = ScriptedModel([tool_call_response("run_script", path="call.py"), tool_call_response("finish", summary="k")])
    sandbox = InMemorySandbox({"call.py": lambda args, files: {"called": True}})
    result = act("caller", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out",
                 sandbox=sandbox, qa_mode="off")
    assert result.status == "done", result.unmet
    [plan] = sandbox.egress
    assert isinstance(plan, EgressPlan) and plan.hosts == (("api.example.test", 443),)
    assert plan.injections[0].header == "Authorization"
    assert plan.injections[0].value.get_secret_value() == "Bearer value-from-the-worker"
    assert "value-from-the-worker" not in " ".join(m.model_dump_json() for call in model.calls for m in call.messages)


def test_a_skill_that_declares_nothing_opens_its_job_without_network(write_skill, skills_root, tmp_path):
    write_skill("plain", "Run `call.py`.", files={"call.py": "print('{}')\n"})
    settings = load_settings(cache_dir=tmp_path / "cache", skills_dir=skills_root)
    model = ScriptedModel([tool_call_response("run_script", path="call.py"), tool_call_response("finish", summary="k")])
    sandbox = InMemorySandbox({"call.py": lambda args, files: {}})
    act("plain", model, skills_root=skills_root, settings=settings, out_dir=tmp_path / "out", sandbox=sandbox,
        qa_mode="off")
    assert sandbox.egress == [None]
