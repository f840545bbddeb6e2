"""The egress proxy of one sandbox job whose skill was granted network (see ``egress.py`` for the grant).

Per job: an ``internal`` Docker network that holds the job's call containers and the proxy, and nothing else (no
route out, no outside DNS); the proxy is also on ``egress.upstream_network`` to reach upstreams. The proxy is
mitmproxy (``ops/images/egress/``): HTTPS to the granted hosts only, TLS terminated with a CA it makes at its start
(its key never leaves the proxy container), granted secrets set as headers there. The call containers trust that
CA through a read-only mount and the usual variables, and reach the proxy only by its address on the internal
network. Every request becomes a JSON line on the proxy's stdout, read back as :class:`EgressRecord` evidence.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable
from contextlib import suppress
from importlib import resources
from typing import Any

import docker
import docker.errors
from docker.types import LogConfig, Ulimit

from orchestrator.errors import SandboxError, SandboxErrorCode
from orchestrator.logs import get_logger
from orchestrator.sandbox.egress import EgressPlan, Injection
from orchestrator.sandbox.models import EgressRecord, ScriptResult

log = get_logger(__name__)

PROXY_PORT = 3128
CA_MOUNT = "/etc/orchestrator-egress"
HOLDER_CA = "/egress-ca"  # the same volume in the job's holder, which writes it
CA_FILE = f"{CA_MOUNT}/proxy-ca.pem"
BUNDLE_FILE = f"{CA_MOUNT}/ca-bundle.pem"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
NODE_PRELOAD = "node-preload.js"  # beside the CA: routes Node's fetch and https through the proxy (Node 18)
IMAGE_HINT = "python -m orchestrator compose build-images --only egress"
_READY = b'{"egress_ready": '
_RECORD = b'{"egress_request": '
LOG_SETTLE_S = 0.15  # the engine copies the proxy's stdout asynchronously: a call's last line may lag a little


def ca_archive(files: dict[str, bytes]) -> bytes:
    """A tar of ``files`` (public: the certificates and the Node preload; mode 0644, owned by root) for
    ``put_archive``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


MIN_SCRUBBED = 6  # a shorter secret would match ordinary text; such a secret is no secret either


def scrub_result(result: ScriptResult, injections: tuple[Injection, ...]) -> ScriptResult:
    """``result`` with every granted secret (and header value) written as ``[secret NAME]``: an upstream that hands
    a credential back must not carry it into the evidence, the logs or the model's prompt."""
    pairs = [(i.value.get_secret_value(), i.name) for i in injections]
    pairs += [(i.secret.get_secret_value(), i.name) for i in injections]
    pairs = sorted({(v, n) for v, n in pairs if len(v) >= MIN_SCRUBBED}, key=lambda p: -len(p[0]))
    text = result.model_dump_json()
    changed = text
    for value, name in pairs:
        changed = changed.replace(json.dumps(value, ensure_ascii=False)[1:-1], f"[secret {name}]")
    return result if changed == text else ScriptResult.model_validate_json(changed)


class EgressProxy:
    """The network and proxy container of one job; ``open()`` them, ``close()`` after the job's containers."""

    def __init__(
        self,
        api: docker.APIClient,
        plan: EgressPlan,
        *,
        name: str,
        labels: Callable[[str], dict[str, str]],
    ) -> None:
        self._api = api
        self.plan = plan
        self.name = name
        self.network = f"{name}-egress"
        self._labels = labels
        self.container: str | None = None
        self.address = ""
        self._network_id: str | None = None
        self._seen = 0

    # -- setup --------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Create the internal network and start the proxy (:meth:`wait_ready` before the first call)."""
        settings = self.plan.settings
        where = f"sandbox:egress:{self.name}"
        try:
            self._api.inspect_image(settings.image)
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"egress proxy image {settings.image} is missing",
                where=where,
                next_step=f"build it: {IMAGE_HINT}",
                retryable=False,
                code=SandboxErrorCode.IMAGE_MISSING,
            ) from e
        created = self._api.create_network(
            self.network, driver="bridge", internal=True, labels=self._labels("network"), check_duplicate=True
        )
        self._network_id = created["Id"]
        subnets = [c["Subnet"] for c in self._api.inspect_network(self._network_id)["IPAM"]["Config"] or []]
        container = self._api.create_container(
            settings.image,
            name=f"{self.name}-egress",
            user="65534:65534",
            environment=self._environment(subnets),
            labels=self._labels("egress"),
            host_config=self._api.create_host_config(**self._host_config()),
            networking_config=self._api.create_networking_config(
                {self.network: self._api.create_endpoint_config()}
            ),
            use_config_proxy=False,
        )
        self.container = container["Id"]
        self._api.connect_container_to_network(self.container, settings.upstream_network)
        self._api.start(self.container)

    def wait_ready(self, system_bundle: bytes = b"") -> dict[str, bytes]:
        """Wait until the proxy listens; the CA files the calls trust, by name (for :data:`CA_MOUNT`).

        ``system_bundle``: the sandbox image's own CA bundle, kept in the combined bundle.
        """
        assert self.container is not None
        ca_pem = self._wait_ready(self.plan.settings.ready_timeout_s, f"sandbox:egress:{self.name}")
        networks = self._api.inspect_container(self.container)["NetworkSettings"]["Networks"]
        self.address = networks[self.network]["IPAddress"]
        log.info("sandbox.egress_open", job=self.name, **self.plan.summary())
        ours = ca_pem.encode("ascii")
        bundle = system_bundle.rstrip(b"\n") + b"\n" + ours if system_bundle.strip() else ours
        preload = resources.files("orchestrator.sandbox").joinpath("egress_node_preload.js").read_bytes()
        return {"proxy-ca.pem": ours, "ca-bundle.pem": bundle, NODE_PRELOAD: preload}

    def _environment(self, subnets: list[str]) -> dict[str, str]:
        plan = self.plan
        policy = {
            "allow": [[host, port] for host, port in plan.hosts],
            "inject": [
                {"host": i.host, "port": i.port, "header": i.header, "value": i.value.get_secret_value()}
                for i in plan.injections
            ],
            "clients": subnets,
        }
        env = {"EGRESS_POLICY": json.dumps(policy)}
        if plan.settings.upstream_ca_file is not None:
            try:
                env["EGRESS_UPSTREAM_CA"] = plan.settings.upstream_ca_file.read_text(encoding="ascii")
            except (OSError, UnicodeDecodeError) as e:
                raise SandboxError(
                    f"egress.upstream_ca_file {plan.settings.upstream_ca_file} cannot be read: {e}",
                    where=f"sandbox:egress:{self.name}",
                    next_step="point egress.upstream_ca_file at a readable PEM file",
                    retryable=False,
                ) from e
        return env

    def _host_config(self) -> dict[str, Any]:
        memory = f"{self.plan.settings.proxy_memory_mb}m"
        return {
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "read_only": True,
            "tmpfs": {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"},
            "mem_limit": memory,
            "memswap_limit": memory,
            "nano_cpus": 1_000_000_000,
            "pids_limit": 128,
            "ulimits": [Ulimit(name="nofile", soft=4096, hard=4096)],
            "extra_hosts": dict(self.plan.settings.extra_hosts),
            # json-file, bounded: the request log is read back from it
            "log_config": LogConfig(type=LogConfig.types.JSON, config={"max-size": "10m", "max-file": "1"}),
        }

    def _wait_ready(self, timeout_s: float, where: str) -> str:
        assert self.container is not None
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self._lines():
                if line.startswith(_READY):
                    return str(json.loads(line)["egress_ready"]["ca_pem"])
            state = self._api.inspect_container(self.container)["State"]
            if not state.get("Running") or time.monotonic() > deadline:
                tail = self._api.logs(self.container, stdout=True, stderr=True, tail=20).decode("utf-8", "replace")
                raise SandboxError(
                    f"the egress proxy did not start ({'exited' if not state.get('Running') else 'timed out'}): "
                    f"{tail[-1500:]}",
                    where=where,
                    next_step=f"check the egress image ({IMAGE_HINT}) and egress.extra_hosts",
                    retryable=True,
                )
            time.sleep(0.1)

    # -- what the call containers get -----------------------------------------------------------------------------

    def call_environment(self) -> dict[str, str]:
        """Proxy and trust variables for Python (requests, urllib, httpx), curl, Node and most other clients.

        Node 18 reads no proxy variable: ``NODE_OPTIONS`` preloads :data:`NODE_PRELOAD` (undici for fetch,
        global-agent for http/https); later Node versions also read ``NODE_USE_ENV_PROXY``."""
        proxy = f"http://{self.address}:{PROXY_PORT}"
        return {
            "NODE_OPTIONS": f"--require {CA_MOUNT}/{NODE_PRELOAD}",
            **{name: proxy for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")},
            "NO_PROXY": "",
            "no_proxy": "",
            "SSL_CERT_FILE": BUNDLE_FILE,
            "REQUESTS_CA_BUNDLE": BUNDLE_FILE,
            "CURL_CA_BUNDLE": BUNDLE_FILE,
            "NODE_EXTRA_CA_CERTS": CA_FILE,
            "NODE_USE_ENV_PROXY": "1",
        }

    # -- evidence -----------------------------------------------------------------------------------------------

    def _lines(self) -> list[bytes]:
        assert self.container is not None
        raw: bytes = self._api.logs(self.container, stdout=True, stderr=False)
        return raw.splitlines()

    def take_records(self) -> list[EgressRecord]:
        """The requests the proxy saw since the last call of this method (host, method, path, status, bytes)."""
        if self.container is None:
            return []
        time.sleep(LOG_SETTLE_S)
        try:
            lines = [line for line in self._lines() if line.startswith(_RECORD)]
        except docker.errors.APIError as e:
            log.warning("sandbox.egress_log_failed", job=self.name, error=str(e))
            return []
        fresh, self._seen = lines[self._seen :], len(lines)
        records = []
        for line in fresh:
            with suppress(ValueError, TypeError):
                records.append(EgressRecord.model_validate(json.loads(line)["egress_request"]))
        return records

    # -- teardown -----------------------------------------------------------------------------------------------

    def close(self, remove_container: Callable[[str], None]) -> None:
        """Remove the proxy (through the job's ``remove_container``) and then the network; safe to call twice."""
        if self.container is not None:
            remove_container(self.container)
            self.container = None
        if self._network_id is not None:
            for attempt in range(20):
                try:
                    self._api.remove_network(self._network_id)
                    break
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError as e:
                    if attempt == 19:
                        log.warning("sandbox.egress_network_remove_failed", network=self.network, error=str(e))
                        return
                    time.sleep(0.1)  # a just-removed container may still hold an endpoint
            self._network_id = None
