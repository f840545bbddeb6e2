"""The plumbing of our loopback HTTP services (the scenario servers, ``record-llm``'s proxy): a standard library
``ThreadingHTTPServer`` served from a background thread, started and closed as a context, and which hosts are this
machine (no proxy from the environment may capture them)."""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: Any
    """The service its handlers answer for (a :class:`BackgroundHTTP`)."""


class _IPv6Server(HTTPServer):
    address_family = socket.AF_INET6


class BackgroundHTTP:
    """Serves ``handler`` on ``host:port`` (port 0: a free one) from a daemon thread once started; the handler
    reaches this object as ``self.server.owner``. ``close`` stops serving and frees the port (idempotent)."""

    def __init__(self, host: str, port: int, handler: type[BaseHTTPRequestHandler], *, name: str) -> None:
        self._httpd = (_IPv6Server if ":" in host else HTTPServer)((host, port), handler)
        self._httpd.owner = self
        self._name = name
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"{self._name}:{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client as ``base_url`` (ends with ``/v1``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"


def is_loopback(host: str) -> bool:
    """``host`` (a name or an address) is this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
