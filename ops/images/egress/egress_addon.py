"""mitmproxy addon of the orchestrator's egress proxy (runs inside the egress image, with mitmproxy's Python).

The policy comes from EGRESS_POLICY (JSON, written by orchestrator/sandbox/egress_proxy.py):
  {"allow": [[HOST, PORT], ...], "inject": [{"host", "port", "header", "value"}, ...], "clients": [CIDR, ...]}
Only clients from the job's internal network are served; only HTTPS (TLS terminated here) to an allowed HOST:PORT
passes, by the name the client asked for, with the Host header and the TLS server name agreeing with it. Each
granted secret is set as its header on requests to its host. One JSON line per request goes to stdout:
  {"egress_request": {"host", "port", "method", "path", "status", "bytes", "request_bytes", "allowed", "reason"}}
Header values are never printed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from pathlib import Path

from mitmproxy import ctx, http

PATH_MAX = 300


def _emit(kind: str, data: dict) -> None:
    sys.stdout.write(json.dumps({kind: data}, ensure_ascii=True) + "\n")
    sys.stdout.flush()


def _name(text: str | None) -> str:
    return (text or "").strip().lower().rstrip(".")


def _host_of(authority: str) -> str:
    """The host of a Host header value (``name`` or ``name:port``)."""
    if authority.startswith("["):
        return _name(authority.split("]", 1)[0] + "]")
    return _name(authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority)


class EgressPolicy:
    def __init__(self) -> None:
        policy = json.loads(os.environ.get("EGRESS_POLICY") or "{}")
        self.allowed = {(_name(host), int(port)) for host, port in policy.get("allow", [])}
        self.inject = [
            ((_name(i["host"]), int(i["port"])), str(i["header"]), str(i["value"])) for i in policy.get("inject", [])
        ]
        self.clients = [ipaddress.ip_network(c, strict=False) for c in policy.get("clients", [])]

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def running(self) -> None:
        ca = Path(os.path.expanduser(ctx.options.confdir)) / "mitmproxy-ca-cert.pem"
        _emit("egress_ready", {"ca_pem": ca.read_text(encoding="ascii")})

    def client_connected(self, client) -> None:  # noqa: ANN001 - mitmproxy's connection.Client
        try:
            address = ipaddress.ip_address(client.peername[0].rsplit("%", 1)[0])
        except ValueError:
            address = None
        if address is None or not any(address in net for net in self.clients):
            client.error = "egress proxy: client not on the job's network"
            _emit("egress_request", {"client": str(client.peername[0]), "allowed": False, "reason": "foreign client"})

    # -- requests -----------------------------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        host, port = _name(flow.request.host), flow.request.port
        if (host, port) not in self.allowed:
            self._deny(flow, f"{host}:{port} is not granted to this skill")

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None:
            return
        req = flow.request
        host, port = _name(req.host), req.port
        sni = _name(flow.client_conn.sni) if flow.client_conn.sni else ""
        header_host = _host_of(req.host_header or host)
        if req.scheme != "https":
            self._deny(flow, "plain HTTP is never let through (use https://)")
        elif (host, port) not in self.allowed:
            self._deny(flow, f"{host}:{port} is not granted to this skill")
        elif header_host != host:
            self._deny(flow, f"the Host header names {header_host}, the connection {host}")
        elif sni and sni != host:
            self._deny(flow, f"the TLS server name {sni} is not the connection's host {host}")
        else:
            for (inject_host, inject_port), header, value in self.inject:
                if (inject_host, inject_port) == (host, port):
                    req.headers[header] = value

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.request.method != "CONNECT" and not flow.metadata.get("egress_denied"):
            self._record(flow, allowed=True, reason=None)

    def error(self, flow: http.HTTPFlow) -> None:
        if not flow.metadata.get("egress_denied"):
            self._record(flow, allowed=True, reason=str(flow.error.msg if flow.error else "error")[:300])

    # -- helpers ------------------------------------------------------------------------------------------------

    def _deny(self, flow: http.HTTPFlow, reason: str) -> None:
        flow.metadata["egress_denied"] = True
        flow.response = http.Response.make(
            403, f"egress proxy: {reason}\n".encode(), {"Content-Type": "text/plain; charset=utf-8"}
        )
        self._record(flow, allowed=False, reason=reason)

    def _record(self, flow: http.HTTPFlow, *, allowed: bool, reason: str | None) -> None:
        req, resp = flow.request, flow.response
        _emit(
            "egress_request",
            {
                "host": _name(req.host),
                "port": req.port,
                "scheme": req.scheme,
                "method": req.method[:20],
                "path": req.path[:PATH_MAX],
                "status": resp.status_code if resp is not None else None,
                "bytes": len(resp.raw_content or b"") if resp is not None else 0,
                "request_bytes": len(req.raw_content or b""),
                "allowed": allowed,
                "reason": reason,
            },
        )


addons = [EgressPolicy()]
