"""The operator's egress settings (the ``egress`` section, ``ORCH_EGRESS`` as JSON) and the ``HOST[:PORT]`` syntax.

A skill *declares* the hosts and secrets it needs (``metadata.network``, ``metadata.secrets``); declaring grants
nothing. Only these settings grant, per registered library and optionally per skill. The sandbox enforces a grant
with an egress proxy (``orchestrator/sandbox/egress*.py``); docs/security.md "Who is trusted" says what that means.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_PORT = 443
SECRET_ENV_PREFIX = "ORCH_SECRET_"
SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
"""A secret's name: its value is read from ``ORCH_SECRET_<NAME>``, so it is an environment variable's tail."""
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
_ADDRESS = re.compile(r"^(host-gateway|[0-9a-fA-F.:]{2,45})$")


def parse_host(spec: str) -> tuple[str, int]:
    """``HOST[:PORT]`` as (lower-case host, port), port 443 unless given; ``ValueError`` saying what is wrong.

    A host is a DNS name or an IPv4 address: no wildcard, scheme, path, user info or IPv6 brackets.
    """
    if not isinstance(spec, str) or not spec.strip() or len(spec) > 260:
        raise ValueError(f"{str(spec)[:80]!r} is not HOST[:PORT]")
    if any(ch in spec for ch in "/@[]*?#") or spec.count(":") > 1:
        raise ValueError(f"{spec[:80]!r} is not HOST[:PORT] (no scheme, path, user, wildcard or IPv6 address)")
    host, sep, port_text = spec.strip().lower().partition(":")
    host = host.rstrip(".")
    port = DEFAULT_PORT
    if sep:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"{spec[:80]!r}: the port must be a number from 1 to 65535")
        port = int(port_text)
    if not host or len(host) > 253 or not all(_HOST_LABEL.match(label) for label in host.split(".")):
        raise ValueError(f"{spec[:80]!r} is not HOST[:PORT] (a DNS name or IPv4 address, no wildcard or scheme)")
    return host, port


def host_text(host: str, port: int) -> str:
    """``host`` or ``host:port`` (the port only when it is not 443)."""
    return host if port == DEFAULT_PORT else f"{host}:{port}"


def normal_host(spec: str) -> str:
    return host_text(*parse_host(spec))


def declaration_problem(kind: str, value: str) -> str | None:
    """What is wrong with one entry of a skill's ``metadata.network`` (kind ``network``) or ``metadata.secrets``."""
    if kind == "secrets":
        return None if SECRET_NAME.match(value) else f"{value[:80]!r} is not a secret name (letters, digits, '_')"
    try:
        parse_host(value)
    except ValueError as e:
        return str(e)
    return None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SecretGrant(_Section):
    """Where a granted secret goes: the egress proxy sets ``header`` to ``format`` (``{value}`` replaced by the
    secret) on each request to ``host``. The sandbox never holds it."""

    host: str
    header: str = "Authorization"
    format: str = "Bearer {value}"

    @field_validator("host")
    @classmethod
    def _host_spec(cls, host: str) -> str:
        return normal_host(host)

    @field_validator("header")
    @classmethod
    def _header_name(cls, header: str) -> str:
        if not _HEADER_NAME.match(header):
            raise ValueError(f"{header[:80]!r} is not an HTTP header name")
        return header

    @field_validator("format")
    @classmethod
    def _format_holds_value(cls, text: str) -> str:
        if "{value}" not in text or any(ch in text for ch in "\r\n\0") or len(text) > 1000:
            raise ValueError("format must hold {value}, no line breaks, at most 1000 characters")
        return text


class EgressGrant(_Section):
    """What the operator lets the skills of one library (or one skill of it) reach and use."""

    library: str = Field(..., min_length=1, description="a registered library's name, 'default', or its folder")
    skill: str | None = Field(None, description="a skill's id or name; none: every skill of the library")
    hosts: list[str] = Field(default_factory=list, description="HOST[:PORT], HTTPS only, port 443 unless given")
    secrets: dict[str, SecretGrant] = Field(default_factory=dict, description="NAME -> where the proxy injects it")

    @field_validator("hosts")
    @classmethod
    def _host_specs(cls, hosts: list[str]) -> list[str]:
        return [normal_host(h) for h in hosts]

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, secrets: dict[str, SecretGrant]) -> dict[str, SecretGrant]:
        bad = [name for name in secrets if not SECRET_NAME.match(name)]
        if bad:
            raise ValueError(f"secret names are letters, digits and '_' (an environment variable's tail): {bad}")
        return secrets

    def reachable(self) -> set[str]:
        """The hosts this grant lets through: its ``hosts`` and the host of each of its secrets."""
        return {*self.hosts, *(s.host for s in self.secrets.values())}


class EgressSettings(_Section):
    """Network for skills that declare it, through a per-job egress proxy. Nothing is granted by default."""

    grants: list[EgressGrant] = Field(default_factory=list)
    extra_hosts: dict[str, str] = Field(
        default_factory=dict, description="HOST -> ADDRESS for the proxy (Docker's extra_hosts; host-gateway too)"
    )
    upstream_ca_file: Path | None = Field(
        None, description="a PEM CA the proxy trusts for upstreams, besides the system CAs"
    )
    secrets_dir: Path | None = Field(None, description="a folder of files named by secret, e.g. /run/secrets")
    image: str = "orchestrator-egress:latest"
    upstream_network: str = Field(
        "bridge", description="the Docker network through which the proxy (never the sandbox) reaches upstreams"
    )
    proxy_memory_mb: int = Field(256, ge=64)
    ready_timeout_s: float = Field(30.0, gt=0)

    @field_validator("extra_hosts")
    @classmethod
    def _extra_hosts(cls, extra: dict[str, str]) -> dict[str, str]:
        checked = {}
        for host, address in extra.items():
            name, _port = parse_host(host)
            if ":" in host:
                raise ValueError(f"extra_hosts key {host!r} is a host name, without a port")
            if not _ADDRESS.match(address):
                raise ValueError(f"extra_hosts[{host!r}] = {address[:80]!r} is not an IP address or host-gateway")
            checked[name] = address
        return checked
