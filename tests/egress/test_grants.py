"""Declaring grants nothing: a skill's metadata.network/secrets against the operator's egress grants, the settings'
syntax (ORCH_EGRESS as JSON), where secret values come from, and that a goal line cannot grant itself anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.config import load_settings
from orchestrator.egress import parse_host
from orchestrator.errors import ConfigError
from orchestrator.sandbox.egress import EgressPlan, EgressShortfall, resolve_egress
from orchestrator.skills.frontmatter import parse_skill_md
from orchestrator.worker.submit import parse_lines

GRANT = {
    "library": "default",
    "hosts": ["api.example.test", "files.example.test:8443"],
    "secrets": {"API_KEY": {"host": "api.example.test", "header": "X-Api-Key", "format": "{value}"}},
}


def _settings(tmp_path: Path, **egress: object):  # noqa: ANN202
    library = tmp_path / "skills"
    library.mkdir(exist_ok=True)
    return load_settings(skills_dir=library, egress=egress), library


def _resolve(settings, library, network, secrets=(), environ=None, skill="caller"):  # noqa: ANN001, ANN202
    return resolve_egress(
        settings,
        library_root=library,
        skill_id=skill,
        skill_name=skill,
        network=list(network),
        secrets=list(secrets),
        environ=environ or {},
    )


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [("API.Example.test", ("api.example.test", 443)), ("x.test:8443", ("x.test", 8443)),
     ("10.0.0.5:80", ("10.0.0.5", 80)), ("example.test.", ("example.test", 443))],
)
def test_a_host_is_a_name_with_an_optional_port(spec, parsed):
    assert parse_host(spec) == parsed


@pytest.mark.parametrize(
    "spec",
    ["https://x.test", "*.x.test", "x.test:0", "x.test:99999", "x.test:abc", "user@x.test", "x.test/path", "[::1]:443",
     "", "-x.test", "x..test", "a" * 300, "x.test:443:1", "x test"],
)
def test_anything_else_is_not_a_host(spec):
    with pytest.raises(ValueError):
        parse_host(spec)


@given(st.text(max_size=80))
def test_any_text_parses_to_a_plain_name_or_is_refused(text):
    try:
        host, port = parse_host(text)
    except ValueError:
        return
    assert all(ch.isalnum() or ch in ".-" for ch in host) and 0 < port < 65536


def test_orch_egress_is_read_as_json(monkeypatch, tmp_path):
    egress = {"grants": [GRANT], "extra_hosts": {"api.example.test": "host-gateway"}}
    monkeypatch.setenv("ORCH_EGRESS", json.dumps(egress))
    settings = load_settings()
    assert settings.egress.grants[0].secrets["API_KEY"].header == "X-Api-Key"
    assert settings.egress.extra_hosts == {"api.example.test": "host-gateway"}


@pytest.mark.parametrize(
    "egress",
    [
        {"grants": [{"library": "default", "hosts": ["http://x.test"]}]},
        {"grants": [{"library": "default", "secrets": {"A-B": {"host": "x.test"}}}]},
        {"grants": [{"library": "default", "secrets": {"A": {"host": "x.test", "format": "Bearer"}}}]},
        {"grants": [{"library": "default", "secrets": {"A": {"host": "x.test", "header": "X: y"}}}]},
        {"grants": [{"library": "default", "secrets": {"A": {"host": "x.test", "format": "{value}\r\nX: y"}}}]},
        {"grants": [{"hosts": ["x.test"]}]},
        {"extra_hosts": {"x.test": "not an address"}},
        {"grants": [], "unknown": 1},
    ],
)
def test_a_bad_grant_is_a_settings_error(egress, tmp_path):
    with pytest.raises(ConfigError):
        load_settings(egress=egress)


def test_a_skill_that_declares_nothing_gets_no_network(tmp_path):
    settings, library = _settings(tmp_path, grants=[GRANT])
    assert _resolve(settings, library, []) is None


def test_nothing_is_granted_by_default_and_the_refusal_names_everything_and_the_setting(tmp_path):
    settings, library = _settings(tmp_path)
    found = _resolve(settings, library, ["api.example.test", "b.test:8443"], ["API_KEY"])
    assert isinstance(found, EgressShortfall)
    assert found.hosts == ["api.example.test", "b.test:8443"] and found.secrets == ["API_KEY"]
    text = " ".join(found.problems()) + " " + found.hint
    assert "api.example.test" in text and "b.test:8443" in text and "API_KEY" in text
    assert "ORCH_EGRESS=" in found.hint and "ORCH_SECRET_API_KEY" in found.hint
    suggested = json.loads(found.hint.split("ORCH_EGRESS=", 1)[1].split(" (", 1)[0])
    assert suggested["grants"][0]["library"] == "default" and suggested["grants"][0]["skill"] == "caller"


def test_a_granted_declaration_becomes_a_plan_with_the_secret_as_the_named_header(tmp_path):
    settings, library = _settings(tmp_path, grants=[GRANT])
    plan = _resolve(settings, library, ["api.example.test"], ["API_KEY"], {"ORCH_SECRET_API_KEY": "k-123"})
    assert isinstance(plan, EgressPlan)
    assert plan.hosts == (("api.example.test", 443),)
    [injection] = plan.injections
    assert (injection.host, injection.port, injection.header) == ("api.example.test", 443, "X-Api-Key")
    assert injection.value.get_secret_value() == "k-123"
    assert "k-123" not in repr(plan) and "k-123" not in json.dumps(plan.summary())
    assert "k-123" not in plan.model_dump_json()


def test_a_skill_gets_only_what_it_declares_not_all_the_grant_allows(tmp_path):
    settings, library = _settings(tmp_path, grants=[GRANT])
    plan = _resolve(settings, library, ["files.example.test:8443"])
    assert isinstance(plan, EgressPlan) and plan.hosts == (("files.example.test", 8443),) and plan.injections == ()


def test_a_declared_port_must_be_the_granted_one(tmp_path):
    settings, library = _settings(tmp_path, grants=[GRANT])
    found = _resolve(settings, library, ["api.example.test:8443"])
    assert isinstance(found, EgressShortfall) and found.hosts == ["api.example.test:8443"]


def test_a_grant_for_one_skill_or_another_library_does_not_cover_others(tmp_path):
    settings, library = _settings(tmp_path, grants=[{**GRANT, "skill": "weather"}, {**GRANT, "library": "acme"}])
    assert isinstance(_resolve(settings, library, ["api.example.test"], skill="weather"), EgressPlan)
    assert isinstance(_resolve(settings, library, ["api.example.test"], skill="caller"), EgressShortfall)


def test_a_grant_names_a_library_by_its_registered_name_or_its_folder(tmp_path):
    acme = tmp_path / "acme-skills"
    acme.mkdir()
    settings = load_settings(libraries={"acme": str(acme)}, egress={"grants": [{**GRANT, "library": "acme"}]})
    assert isinstance(_resolve(settings, acme, ["api.example.test"]), EgressPlan)
    by_folder = load_settings(egress={"grants": [{**GRANT, "library": str(acme)}]})
    assert isinstance(_resolve(by_folder, acme, ["api.example.test"]), EgressPlan)
    by_name = load_settings(egress={"grants": [{**GRANT, "library": "acme-skills"}]})  # `run --skills DIR`
    assert isinstance(_resolve(by_name, acme, ["api.example.test"]), EgressPlan)


def test_a_granted_secret_without_a_value_is_named_with_its_variable(tmp_path):
    settings, library = _settings(tmp_path, grants=[GRANT])
    found = _resolve(settings, library, ["api.example.test"], ["API_KEY"])
    assert isinstance(found, EgressShortfall) and found.unset == ["API_KEY"] and found.hosts == []
    assert "ORCH_SECRET_API_KEY" in " ".join(found.problems())


def test_a_secret_value_may_come_from_a_file_but_never_with_a_line_break(tmp_path):
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "API_KEY").write_text("from-file\n")
    settings, library = _settings(tmp_path, grants=[GRANT], secrets_dir=str(folder))
    plan = _resolve(settings, library, ["api.example.test"], ["API_KEY"])
    assert isinstance(plan, EgressPlan) and plan.injections[0].value.get_secret_value() == "from-file"
    found = _resolve(settings, library, ["api.example.test"], ["API_KEY"], {"ORCH_SECRET_API_KEY": "a\r\nX-Evil: 1"})
    assert isinstance(found, EgressShortfall) and found.bad_values == ["API_KEY"]


def test_the_frontmatter_declares_hosts_and_secrets_under_metadata():
    parsed = parse_skill_md(
        b"---\nname: caller\ndescription: d\nmetadata:\n  network: [api.example.test, 'b.test:8443']\n"
        b"  secrets: [API_KEY]\n---\nbody\n",
        folder_name="caller",
    )
    assert parsed.declarations.network == ["api.example.test", "b.test:8443"]
    assert parsed.declarations.secrets == ["API_KEY"] and parsed.problems == []


@pytest.mark.parametrize(
    "metadata",
    ["  network: ['https://x.test/']", "  network: ['*.x.test']", "  secrets: ['A-B']", "  network: {a: 1}",
     "  network: [" + ", ".join(f"h{i}.test" for i in range(40)) + "]"],
)
def test_a_declaration_that_cannot_be_read_whole_is_an_error_and_declares_nothing(metadata):
    parsed = parse_skill_md(
        f"---\nname: caller\ndescription: d\nmetadata:\n{metadata}\n---\nbody\n".encode(), folder_name="caller"
    )
    assert parsed.declarations.network == [] and parsed.declarations.secrets == []
    assert any(p.code == "declaration_invalid" and p.severity == "error" for p in parsed.problems)


@pytest.mark.parametrize(
    "field",
    [{"egress": {"grants": [GRANT]}}, {"grants": [GRANT]}, {"secrets": {"API_KEY": "x"}}, {"network": ["x.test"]},
     {"Hosts": ["x.test"]}, {"extra_hosts": {"x.test": "1.2.3.4"}}],
)
def test_a_goal_line_cannot_grant_itself_anything(field):
    good, bad = parse_lines([json.dumps({"goal": "call the service", **field})], load_settings())
    assert good == [] and len(bad) == 1
    assert "cannot grant" in bad[0].reason and "egress" in bad[0].reason


def test_a_result_is_scrubbed_of_the_granted_secrets_it_carries():
    from pydantic import SecretStr

    from orchestrator.sandbox.egress import Injection
    from orchestrator.sandbox.egress_proxy import scrub_result
    from orchestrator.sandbox.models import ScriptResult

    injection = Injection(name="API_KEY", host="h.test", port=443, header="Authorization",
                          value=SecretStr('Bearer k"ey-123456'), secret=SecretStr('k"ey-123456'))
    echoed = {"echo": 'Bearer k"ey-123456', "raw": 'k"ey-123456'}
    result = ScriptResult(
        ok=True, exit_code=0, script="x.py", stdout_json=echoed, stderr_summary='token k"ey-123456 seen'
    )
    scrubbed = scrub_result(result, (injection,))
    assert scrubbed.stdout_json == {"echo": "[secret API_KEY]", "raw": "[secret API_KEY]"}
    assert scrubbed.stderr_summary == "token [secret API_KEY] seen"
    short = injection.model_copy(update={"value": SecretStr("Bearer ab"), "secret": SecretStr("ab")})
    plain = ScriptResult(ok=True, exit_code=0, script="x.py", stdout_text="ab cab")
    assert scrub_result(plain, (short,)).stdout_text == "ab cab"
