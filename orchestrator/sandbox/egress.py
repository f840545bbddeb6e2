"""Which network a skill's sandbox calls get: its declaration (``metadata.network``/``metadata.secrets``) checked
against the operator's grants (the ``egress`` settings), before any model call.

The outcome is an :class:`EgressPlan` (what the job's egress proxy lets through and injects) or a
:class:`EgressShortfall` (everything missing, and the setting that would grant it). Pure: no engine, no files but
the operator's ``secrets_dir``. The proxy itself is in ``egress_proxy.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from orchestrator.config import Settings
from orchestrator.egress import SECRET_ENV_PREFIX, EgressGrant, EgressSettings, SecretGrant, parse_host

MAX_SECRET_BYTES = 16 * 1024


class Injection(BaseModel):
    """One header the proxy sets on each request to ``host:port`` (the value is never shown or logged)."""

    model_config = ConfigDict(frozen=True)

    name: str
    host: str
    port: int
    header: str
    value: SecretStr
    """The header's whole value (``format`` with the secret in it)."""
    secret: SecretStr
    """The secret alone (what a result is scrubbed of, should an upstream hand it back)."""


class EgressPlan(BaseModel):
    """What one skill's calls may reach: HTTPS to ``hosts`` only, through the job's proxy, with ``injections``."""

    model_config = ConfigDict(frozen=True)

    hosts: tuple[tuple[str, int], ...]
    injections: tuple[Injection, ...] = ()
    settings: EgressSettings = EgressSettings()

    def summary(self) -> dict[str, object]:
        """What may be shown (evidence, logs): hosts and secret names, never values."""
        return {
            "hosts": [f"{h}:{p}" for h, p in self.hosts],
            "secrets": sorted({i.name for i in self.injections}),
        }


class EgressShortfall(BaseModel):
    """What a skill declares that the operator has not granted (or whose secret has no value here)."""

    model_config = ConfigDict(frozen=True)

    hosts: list[str] = []
    secrets: list[str] = []
    unset: list[str] = []
    """Secrets granted but without a value in this process (``ORCH_SECRET_<NAME>`` or ``secrets_dir/NAME``)."""
    bad_values: list[str] = []
    hint: str = ""

    def problems(self) -> list[str]:
        found = []
        if self.hosts:
            found.append(f"network hosts not granted: {', '.join(self.hosts)}")
        if self.secrets:
            found.append(f"secrets not granted: {', '.join(self.secrets)}")
        if self.unset:
            found.append(f"secrets granted but not set: {', '.join(SECRET_ENV_PREFIX + n for n in self.unset)}")
        if self.bad_values:
            found.append(f"secret values holding line breaks or NUL: {', '.join(self.bad_values)}")
        return found


def _same_folder(path: Path | str, root: Path) -> bool:
    try:
        return Path(path).expanduser().resolve() == root
    except (OSError, RuntimeError):
        return False


def library_matches(library: str, settings: Settings, root: Path) -> bool:
    """Whether a grant's ``library`` names the library at ``root``: a registered name of it, ``default`` for
    ``skills_dir``, its folder, or (for a folder that is not registered, as ``run --skills DIR``) its folder name."""
    root = root.resolve()
    registered = {name for name, path in settings.libraries.items() if _same_folder(path, root)}
    if _same_folder(settings.skills_dir, root):
        registered.add("default")
    if library in registered:
        return True
    if ("/" in library or library in (".", "..")) and _same_folder(library, root):
        return True
    return not registered and library == root.name


def library_label(settings: Settings, root: Path) -> str:
    """The name a grant would best use for the library at ``root``."""
    root = root.resolve()
    for name, path in settings.libraries.items():
        if _same_folder(path, root):
            return name
    return "default" if _same_folder(settings.skills_dir, root) else str(root)


def _grants(settings: Settings, root: Path, skill_id: str, skill_name: str | None) -> list[EgressGrant]:
    return [
        g
        for g in settings.egress.grants
        if library_matches(g.library, settings, root) and (g.skill is None or g.skill in (skill_id, skill_name))
    ]


def secret_value(name: str, egress: EgressSettings, environ: Mapping[str, str]) -> str | None:
    """The value of secret ``name``: ``ORCH_SECRET_<NAME>``, else the file ``secrets_dir/NAME``; None if neither."""
    value = environ.get(SECRET_ENV_PREFIX + name)
    if value is None and egress.secrets_dir is not None:
        path = egress.secrets_dir / name
        try:
            with path.open("rb") as f:
                data = f.read(MAX_SECRET_BYTES + 1)
        except OSError:
            return None
        if len(data) > MAX_SECRET_BYTES:
            return None
        value = data.decode("utf-8", "replace").rstrip("\r\n")
    return value or None


def resolve_egress(
    settings: Settings,
    *,
    library_root: Path,
    skill_id: str,
    skill_name: str | None,
    network: list[str],
    secrets: list[str],
    environ: Mapping[str, str] | None = None,
) -> EgressPlan | EgressShortfall | None:
    """The plan for a skill's declaration; None when it declares nothing (its calls have no network at all)."""
    if not network and not secrets:
        return None
    environ = os.environ if environ is None else environ
    grants = _grants(settings, library_root, skill_id, skill_name)
    granted = {parse_host(h) for g in grants for h in g.reachable()}
    declared = [parse_host(h) for h in network]
    missing_hosts = [h for h, key in zip(network, declared, strict=True) if key not in granted]
    injections: list[Injection] = []
    missing, unset, bad = [], [], []
    for name in secrets:
        grant = next((g.secrets[name] for g in grants if name in g.secrets), None)
        if grant is None:
            missing.append(name)
            continue
        value = secret_value(name, settings.egress, environ)
        if value is None:
            unset.append(name)
        elif any(ch in value for ch in "\r\n\0"):
            bad.append(name)
        else:
            host, port = parse_host(grant.host)
            text = grant.format.replace("{value}", value)
            injections.append(
                Injection(
                    name=name, host=host, port=port, header=grant.header, value=SecretStr(text), secret=SecretStr(value)
                )
            )
    if missing_hosts or missing or unset or bad:
        return EgressShortfall(
            hosts=missing_hosts,
            secrets=missing,
            unset=unset,
            bad_values=bad,
            hint=grant_hint(settings, library_root, skill_id, network, secrets, missing_hosts, missing, unset),
        )
    hosts = tuple(dict.fromkeys([*declared, *((i.host, i.port) for i in injections)]))
    return EgressPlan(hosts=hosts, injections=tuple(injections), settings=settings.egress)


def grant_hint(
    settings: Settings,
    root: Path,
    skill_id: str,
    network: list[str],
    secrets: list[str],
    missing_hosts: list[str],
    missing_secrets: list[str],
    unset: list[str],
) -> str:
    """The setting that would let the skill run: an ``ORCH_EGRESS`` grant and the secrets' variables."""
    steps = []
    if missing_hosts or missing_secrets:
        host = network[0] if network else "HOST"
        grant: dict[str, object] = {"library": library_label(settings, root), "skill": skill_id, "hosts": network}
        if secrets:
            default = SecretGrant(host=host)
            grant["secrets"] = {n: default.model_dump() for n in secrets}
        steps.append(
            "grant it in the settings' egress section, e.g. ORCH_EGRESS="
            + json.dumps({"grants": [grant]}, ensure_ascii=False)
            + " (set header and format as the service expects; grants made for other skills stay)"
        )
    names = [*missing_secrets, *unset]
    if names:
        where = ", ".join(SECRET_ENV_PREFIX + n for n in names)
        steps.append(f"set {where} in the worker's environment (or files named by secret in egress.secrets_dir)")
    return "; ".join(steps)
