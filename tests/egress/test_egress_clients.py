"""The usual HTTP clients of a granted skill reach its host through the job's egress proxy and trust the proxy's CA
with nothing but the variables the job sets: Python (urllib, requests, httpx), Node 18 (fetch and https, through
the preload NODE_OPTIONS names) and curl. Every one of them is refused another host, and a client that ignores
the proxy settings (or drops the preload) reaches nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from egress_world import GRANTED, OTHER, SECRET_VALUE, Upstream, injected_digest

from orchestrator.sandbox.docker import SandboxJob, SandboxRunner
from orchestrator.sandbox.egress import EgressPlan

PYTHON_CLIENT = r'''
import json, sys

args = json.load(sys.stdin)
client, url = args["client"], args["url"]
try:
    if client == "urllib":
        import urllib.error, urllib.request
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                status, body = response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode("utf-8", "replace")
    elif client == "requests":
        import requests
        response = requests.get(url, timeout=10)
        status, body = response.status_code, response.text
    elif client == "httpx":
        import httpx
        response = httpx.get(url, timeout=10, trust_env=args.get("trust_env", True))
        status, body = response.status_code, response.text
    out = {"status": status, "body": body[:2000]}
except Exception as e:
    out = {"error": type(e).__name__ + ": " + str(e)[:300]}
print(json.dumps(out))
'''

NODE_CLIENT = r'''
const args = JSON.parse(require("fs").readFileSync(0, "utf8"));
const done = (out) => console.log(JSON.stringify(out));
const failed = (e) => done({ error: `${e.name}: ${e.message} ${e.cause ? e.cause.message || e.cause.code : ""}` });
if (args.client === "fetch") {
  fetch(args.url, { signal: AbortSignal.timeout(10000) })
    .then(async (r) => done({ status: r.status, body: (await r.text()).slice(0, 2000) }), failed);
} else if (args.client === "https") {
  const request = require("https").get(args.url, { timeout: 10000 }, (response) => {
    let body = "";
    response.on("data", (chunk) => { body += chunk; });
    response.on("end", () => done({ status: response.statusCode, body: body.slice(0, 2000) }));
  });
  request.on("timeout", () => request.destroy(new Error("timed out")));
  request.on("error", failed);
} else if (args.client === "tls-direct") {
  // Ignores every proxy setting: a TLS connection straight to the address given.
  const socket = require("tls").connect({ host: args.host, port: args.port, servername: args.name, timeout: 6000 });
  socket.on("secureConnect", () => { done({ connected: true }); socket.destroy(); });
  socket.on("timeout", () => { done({ error: "timed out" }); socket.destroy(); });
  socket.on("error", failed);
}
'''

CURL_CLIENT = r'''#!/bin/sh
# curl URL [more curl options]: the body and then the status on the last line, or the error and curl's exit code
out=$(curl -sS --max-time 10 -w '\n%{http_code}' "$@" 2>&1)
code=$?
printf '%s\n' "$out" | python3 -c '
import json, sys
lines = sys.stdin.read().rstrip("\n").split("\n")
code = int(sys.argv[1])
if code:
    print(json.dumps({"error": "curl exit %d: %s" % (code, " ".join(lines)[:300])}))
else:
    print(json.dumps({"status": int(lines[-1]), "body": "\n".join(lines[:-1])[:2000]}))
' "$code"
'''

SHOW_PRELOAD = "console.log(JSON.stringify({ preload: process.env.NODE_OPTIONS || '' }));\n"
NO_PRELOAD = r'''
// A child Node without NODE_OPTIONS: its fetch ignores the proxy and goes straight out (where there is no route).
const url = JSON.parse(require("fs").readFileSync(0, "utf8")).url;
const env = { ...process.env };
delete env.NODE_OPTIONS;
const child = "fetch(process.argv[1], { signal: AbortSignal.timeout(8000) })"
  + ".then((r) => console.log(r.status),"
  + " (e) => console.log('error', e.cause ? e.cause.code || e.cause.message : e.name))";
const out = require("child_process").execFileSync("node", ["-e", child, url], { env }).toString().trim();
console.log(JSON.stringify({ child: out }));
'''

CLIENTS = ["urllib", "requests", "httpx", "fetch", "https", "curl"]


@pytest.fixture(scope="module")
def client_job(egress_runner: SandboxRunner, plan: EgressPlan, tmp_path_factory) -> Iterator[SandboxJob]:
    root = tmp_path_factory.mktemp("clients")
    (root / "client.py").write_text(PYTHON_CLIENT)
    (root / "client.js").write_text(NODE_CLIENT)
    (root / "client.sh").write_text(CURL_CLIENT)
    (root / "show_preload.js").write_text(SHOW_PRELOAD)
    (root / "no_preload.js").write_text(NO_PRELOAD)
    with egress_runner.open_job("egress-clients", root, egress=plan) as job:
        yield job


def call(job: SandboxJob, client: str, url: str, **extra: Any) -> tuple[dict[str, Any], Any]:
    if client == "curl":
        result = job.run_script("client.sh", {}, argv=[url, *extra.get("curl_options", [])], timeout_s=40)
    else:
        script = "client.js" if client in ("fetch", "https", "tls-direct") else "client.py"
        result = job.run_script(script, {"client": client, "url": url, **extra}, timeout_s=40)
    assert result.ok and isinstance(result.stdout_json, dict), (client, result.reason, result.stderr_summary)
    assert SECRET_VALUE not in result.model_dump_json()
    return result.stdout_json, result


def call_js(job: SandboxJob, script: str, **args: Any) -> tuple[dict[str, Any], Any]:
    result = job.run_script(script, args, timeout_s=40)
    assert result.ok and isinstance(result.stdout_json, dict), (script, result.reason, result.stderr_summary)
    return result.stdout_json, result


def seen_paths(upstream: Upstream, docker_client) -> list[str]:  # noqa: ANN001
    return [entry["seen"] for entry in upstream.seen(docker_client)]


@pytest.mark.parametrize("client", CLIENTS)
def test_each_usual_client_reaches_the_granted_host_through_the_proxy_and_trusts_its_ca(
    client_job, upstream, docker_client, client
):
    out, result = call(client_job, client, f"https://{GRANTED}:8443/v1/{client}?q=1")
    assert out.get("status") == 200, (client, out, result.stderr_summary)
    answer = json.loads(out["body"])
    assert answer["auth_sha256"] == injected_digest(), client  # the proxy added the secret on the way
    assert f"GET /v1/{client}?q=1 HTTP/1.1" in seen_paths(upstream, docker_client)
    assert [(r.host, r.path, r.allowed) for r in result.egress] == [(GRANTED, f"/v1/{client}?q=1", True)]


@pytest.mark.parametrize("client", CLIENTS)
def test_each_usual_client_is_refused_another_host(client_job, upstream, docker_client, client):
    before = len(upstream.seen(docker_client))
    out, result = call(client_job, client, f"https://{OTHER}:8443/v1/stolen-{client}")
    assert out.get("status") != 200, (client, out)
    assert upstream.seen(docker_client)[before:] == [], client
    assert result.egress and not any(r.allowed for r in result.egress), (client, result.egress)


def test_clients_that_ignore_the_proxy_settings_reach_nothing(client_job, upstream, docker_client):
    before = len(upstream.seen(docker_client))
    url = f"https://{GRANTED}:8443/v1/bypass"
    attempts = {
        "httpx without the environment": call(client_job, "httpx", url, trust_env=False)[0],
        "curl --noproxy": call(client_job, "curl", url, curl_options=["--noproxy", "*"])[0],
        "curl to the upstream's address": call(
            client_job, "curl", url, curl_options=["--noproxy", "*", "--resolve", f"{GRANTED}:8443:{upstream.address}"]
        )[0],
        "node tls straight to the upstream": call(
            client_job, "tls-direct", url, host=upstream.address, port=8443, name=GRANTED
        )[0],
    }
    for what, out in attempts.items():
        assert "error" in out and out.get("status") is None, (what, out)
    assert upstream.seen(docker_client)[before:] == []


def test_node_without_the_preload_is_not_proxied_and_reaches_nothing(client_job, upstream, docker_client):
    out, _ = call_js(client_job, "no_preload.js", url=f"https://{GRANTED}:8443/v1/no-preload")
    assert out["child"].startswith("error"), out
    assert not any("/v1/no-preload" in seen for seen in seen_paths(upstream, docker_client))


def test_only_granted_calls_preload_the_proxy_routing(egress_runner, client_job, tmp_path):
    granted, _ = call_js(client_job, "show_preload.js")
    assert granted["preload"] == "--require /etc/orchestrator-egress/node-preload.js", granted
    (tmp_path / "show_preload.js").write_text(SHOW_PRELOAD)
    with egress_runner.open_job("egress-plain", tmp_path) as job:
        plain, _ = call_js(job, "show_preload.js")
    assert plain == {"preload": ""}, plain
