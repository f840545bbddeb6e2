"""Attacks on the egress path of a granted skill, against the real engine, the real proxy and a local upstream.

The skill is granted HTTPS to ``api.granted.test:8443`` (and ``:8080``) with a secret injected as a bearer token.
Its script tries everything else: another host, a raw IP, DNS, UDP, a connection that ignores the proxy, plain HTTP
to the granted name, a redirect to another host, a Host header or TLS name that lies, and reading the secret.
Everything but the granted request must fail, and the upstream must see only what was let through.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from egress_world import (
    EGRESS_PREFIX,
    GRANTED,
    OTHER,
    SECRET_NAME,
    SECRET_VALUE,
    Upstream,
    injected_digest,
)

from orchestrator.config import load_settings
from orchestrator.sandbox.docker import SandboxJob, SandboxRunner
from orchestrator.sandbox.egress import EgressPlan

PROBE = r'''
import json, os, socket, ssl, sys, urllib.request, urllib.error, http.client

args = json.load(sys.stdin)
attack = args["attack"]


def fetch(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=8) as response:
            return {"status": response.status, "body": response.read(4000).decode("utf-8", "replace")}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read(400).decode("utf-8", "replace")}
    except Exception as e:
        return {"error": type(e).__name__ + ": " + str(e)[:300]}


def raw_connect(host, port):
    try:
        socket.create_connection((host, port), timeout=4).close()
        return {"connected": True}
    except OSError as e:
        return {"error": type(e).__name__ + ": " + str(e)[:200]}


if attack == "fetch":
    out = fetch(args["url"], args.get("headers"))
elif attack == "resolve":
    import threading
    out = {name: "error: no answer in 6 s" for name in args["names"]}

    def resolve(name):
        try:
            out[name] = sorted({a[4][0] for a in socket.getaddrinfo(name, 443, socket.AF_INET)})
        except OSError as e:
            out[name] = "error: " + str(e)[:100]

    threads = [threading.Thread(target=resolve, args=(n,), daemon=True) for n in args["names"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(6)
    out = dict(out)
elif attack == "udp":
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(3)
    try:
        sock.sendto(b"ping", (args["host"], args["port"]))
        out = {"reply": sock.recvfrom(100)[0].decode()}
    except OSError as e:
        out = {"error": type(e).__name__ + ": " + str(e)[:200]}
elif attack == "direct":
    out = {target: raw_connect(*target.rsplit(":", 1)) for target in args["targets"]}
elif attack == "tunnel_lie":
    # CONNECT to the granted name by hand, then TLS with another server name, or a Host header naming another host
    host, port = os.environ["HTTPS_PROXY"].split("//", 1)[1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=8)
    sock.sendall(f"CONNECT {args['connect']}:8443 HTTP/1.1\r\nHost: {args['connect']}:8443\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1000)
        if not chunk:
            break
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        out = {"connect": head[:200].decode("utf-8", "replace")}
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        try:
            tls = context.wrap_socket(sock, server_hostname=args["sni"])
            tls.sendall(f"GET /lie HTTP/1.1\r\nHost: {args['host_header']}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := tls.recv(4000):
                answer += chunk
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else None
            out = {"status": status, "body": answer[:600].decode("utf-8", "replace")}
        except Exception as e:
            out = {"error": type(e).__name__ + ": " + str(e)[:300]}
elif attack == "find_secret":
    needle = args["needle"].encode()
    found = []
    if needle in repr(dict(os.environ)).encode():
        found.append("environ")
    for pid in os.listdir("/proc"):
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as fh:
                    if needle in fh.read():
                        found.append(f"/proc/{pid}/{part}")
            except OSError:
                pass
    for top in ("/etc", "/tmp", "/run", "/skill", "/var", "/home", "/root", "/opt/egress"):
        for folder, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    if os.path.islink(path) or os.path.getsize(path) > 2_000_000:
                        continue
                    with open(path, "rb") as fh:
                        if needle in fh.read():
                            found.append(path)
                except OSError:
                    pass
    out = {"found": found, "proxy_env": sorted(k for k in os.environ if "PROXY" in k.upper())}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def granted_job(egress_runner: SandboxRunner, plan: EgressPlan, tmp_path_factory) -> Iterator[SandboxJob]:
    root = tmp_path_factory.mktemp("caller")
    (root / "probe.py").write_text(PROBE)
    with egress_runner.open_job("egress", root, egress=plan) as job:
        yield job


def probe(job: SandboxJob, **args: Any) -> tuple[dict[str, Any], Any]:
    result = job.run_script("probe.py", args, timeout_s=40)
    assert result.ok, (result.reason, result.stderr_summary)
    return result.stdout_json, result


def _seen_paths(upstream: Upstream, docker_client) -> list[str]:  # noqa: ANN001
    return [entry["seen"] for entry in upstream.seen(docker_client)]


def test_the_granted_host_is_reached_with_the_injected_header_and_logged(granted_job, upstream, docker_client):
    out, result = probe(granted_job, attack="fetch", url=f"https://{GRANTED}:8443/v1/hello?q=1")
    assert out["status"] == 200, out
    answer = json.loads(out["body"])
    assert answer["auth_sha256"] == injected_digest() and answer["host"] == f"{GRANTED}:8443"
    assert "GET /v1/hello?q=1 HTTP/1.1" in _seen_paths(upstream, docker_client)
    [record] = result.egress
    assert (record.host, record.port, record.method, record.path, record.status) == (
        GRANTED, 8443, "GET", "/v1/hello?q=1", 200
    )
    assert record.allowed and record.bytes == len(out["body"].encode())
    assert SECRET_VALUE not in result.model_dump_json()


def test_a_header_the_script_sets_cannot_replace_the_injected_secret(granted_job):
    out, _ = probe(
        granted_job, attack="fetch", url=f"https://{GRANTED}:8443/mine", headers={"Authorization": "Bearer forged"}
    )
    assert json.loads(out["body"])["auth_sha256"] == injected_digest()


@pytest.mark.parametrize(
    ("target", "why"),
    [
        (f"https://{OTHER}:8443/", "another host (same server, valid certificate)"),
        (f"https://{GRANTED}:9443/", "the granted name on another port"),
        (f"http://{GRANTED}:8080/", "plain HTTP to a granted name and port"),
        (f"http://{GRANTED}:8443/", "plain HTTP to the granted HTTPS port"),
        ("https://UPSTREAM:8443/", "the upstream's raw IP"),
        ("https://1.1.1.1/", "a public raw IP"),
    ],
)
def test_everything_but_the_granted_https_name_is_refused(granted_job, upstream, docker_client, target, why):
    before = len(upstream.seen(docker_client))
    out, result = probe(granted_job, attack="fetch", url=target.replace("UPSTREAM", upstream.address))
    assert out.get("status") != 200, (why, out)
    assert upstream.seen(docker_client)[before:] == [], why
    assert result.egress and not any(r.allowed for r in result.egress), (why, result.egress)


def test_a_redirect_to_an_ungranted_host_is_not_followed_out(granted_job, upstream, docker_client):
    out, result = probe(
        granted_job, attack="fetch", url=f"https://{GRANTED}:8443/redirect?to=https://{OTHER}:8443/stolen"
    )
    assert "error" in out or out.get("status") == 403, out
    assert not any(seen.startswith("GET /stolen") for seen in _seen_paths(upstream, docker_client))
    assert [(r.host, r.allowed) for r in result.egress] == [(GRANTED, True), (OTHER, False)]


@pytest.mark.parametrize(("connect", "sni", "host_header"), [(GRANTED, GRANTED, OTHER), (GRANTED, OTHER, GRANTED)])
def test_a_host_header_or_tls_name_that_names_another_host_is_refused(granted_job, connect, sni, host_header):
    out, _ = probe(granted_job, attack="tunnel_lie", connect=connect, sni=sni, host_header=host_header)
    assert out.get("status") != 200, out


def test_the_sandbox_resolves_no_outside_name(granted_job, upstream):
    out, _ = probe(granted_job, attack="resolve", names=[OTHER, GRANTED, "example.com", "deb.debian.org"])
    assert all(isinstance(v, str) and v.startswith("error") for v in out.values()), out


def test_udp_and_connections_that_ignore_the_proxy_go_nowhere(granted_job, upstream, docker_client):
    before = len(upstream.seen(docker_client))
    udp, _ = probe(granted_job, attack="udp", host=upstream.address, port=5353)
    assert "error" in udp, udp
    dns, _ = probe(granted_job, attack="udp", host="1.1.1.1", port=53)
    assert "error" in dns, dns
    targets = [f"{upstream.address}:8443", f"{upstream.address}:8080", "1.1.1.1:443", "172.17.0.1:22"]
    direct, _ = probe(granted_job, attack="direct", targets=targets)
    assert all("error" in v for v in direct.values()), direct
    assert upstream.seen(docker_client)[before:] == []


def test_the_secret_cannot_be_read_inside_the_container(granted_job):
    out, result = probe(granted_job, attack="find_secret", needle=SECRET_VALUE)
    assert out["found"] == [] and "HTTPS_PROXY" in out["proxy_env"]
    assert SECRET_VALUE not in result.model_dump_json()
    inspected = granted_job.runner.api.inspect_container(f"{granted_job.name}-holder")
    assert SECRET_VALUE not in json.dumps(inspected)


def test_a_service_that_hands_the_secret_back_cannot_carry_it_into_the_result(granted_job):
    out, result = probe(granted_job, attack="fetch", url=f"https://{GRANTED}:8443/echo-auth")
    assert out["status"] == 200 and f"[secret {SECRET_NAME}]" in out["body"]
    assert SECRET_VALUE not in result.model_dump_json()


def test_a_container_outside_the_job_cannot_use_its_proxy(granted_job, upstream, docker_client, sandbox_image):
    assert granted_job.egress is not None and granted_job.egress.container is not None
    networks = docker_client.api.inspect_container(granted_job.egress.container)["NetworkSettings"]["Networks"]
    proxy_on_bridge = networks["bridge"]["IPAddress"]
    script = (
        "import urllib.request,sys\n"
        "try:\n"
        f"    print(urllib.request.urlopen('https://{GRANTED}:8443/foreign', timeout=8).status)\n"
        "except Exception as e:\n"
        "    print('refused', type(e).__name__)\n"
    )
    output = docker_client.containers.run(
        sandbox_image,
        ["python3", "-c", script],
        environment={"HTTPS_PROXY": f"http://{proxy_on_bridge}:3128"},
        labels={"orchtest-egress-upstream": "1"},
        remove=True,
        network="bridge",
    ).decode()
    assert output.startswith("refused"), output
    assert not any("/foreign" in seen for seen in _seen_paths(upstream, docker_client))


def _probe_skill(tmp_path: Path) -> Path:
    root = tmp_path / "caller"
    root.mkdir()
    (root / "probe.py").write_text(PROBE)
    return root


def test_closing_the_job_removes_the_proxy_and_its_network(egress_runner, plan, docker_client, tmp_path):
    job = egress_runner.open_job("egress-close", _probe_skill(tmp_path), egress=plan)
    assert job.egress is not None
    proxy, network = job.egress.container, job.egress.network
    job.close()
    assert not docker_client.api.containers(all=True, filters={"id": proxy})
    assert not docker_client.api.networks(names=[network])


def test_a_job_without_a_grant_still_has_no_network(egress_runner, tmp_path):
    with egress_runner.open_job("plain", _probe_skill(tmp_path)) as job:
        result = job.run_script("probe.py", {"attack": "fetch", "url": f"https://{GRANTED}:8443/"}, timeout_s=30)
    assert "error" in result.stdout_json and result.egress == []


def test_the_reaper_removes_the_network_of_a_dead_owner(egress_runner, docker_client):
    dead = f"{socket.gethostname()}:999999999:1"  # this host, a process long gone
    labels = {f"{EGRESS_PREFIX}.managed": "1", f"{EGRESS_PREFIX}.owner": dead, f"{EGRESS_PREFIX}.created": "1"}
    created = docker_client.api.create_network("orchtestegress-orphan-egress", internal=True, labels=labels)
    try:
        egress_runner.reap()
        assert not docker_client.api.networks(ids=[created["Id"]])
    finally:
        for net in docker_client.api.networks(ids=[created["Id"]]):
            docker_client.api.remove_network(net["Id"])


def test_a_worker_with_grants_is_not_ready_without_the_proxy_image(docker_client, sandbox_image, tmp_path):
    from orchestrator.worker.readiness import _docker_problems

    grant = {"library": "default", "hosts": [GRANTED]}
    settings = load_settings(
        sandbox={"image": sandbox_image}, egress={"grants": [grant], "image": "orchestrator-egress:no-such-tag"}
    )
    assert any("egress proxy image" in p and "build-images --only egress" in p for p in _docker_problems(settings))
    assert _docker_problems(settings.model_copy(update={"egress": settings.egress.model_copy(
        update={"grants": []})})) == []
