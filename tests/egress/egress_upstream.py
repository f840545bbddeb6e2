"""The outside world for the egress tests, run in a container of its own: an HTTPS server (its certificate signed by a
test CA, names given on the command line), the same server over plain HTTP, and a UDP echo.

``python3 egress_upstream.py CERT_AND_KEY.pem`` serves HTTPS on 8443, HTTP on 8080 and UDP echo on 5353.
Each request is answered with JSON: the method, path, header names and the sha256 of the Authorization header
(so a test can check the injected secret without the upstream handing it back). ``/redirect?to=URL`` answers 302.
Every request line is written to stderr (``docker logs``), so a test can tell what reached the outside.
"""

import hashlib
import http.server
import json
import socket
import ssl
import sys
import threading
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", urllib.parse.parse_qs(url.query).get("to", [""])[0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        auth = self.headers.get("Authorization")
        if url.path == "/echo-auth":  # a careless service that hands the credential back
            data = json.dumps({"you_sent": auth}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        data = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "host": self.headers.get("Host"),
                "header_names": sorted(self.headers.keys()),
                "auth_sha256": hashlib.sha256(auth.encode()).hexdigest() if auth else None,
                "body_bytes": len(body),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args: object) -> None:
        sys.stderr.write(json.dumps({"seen": self.requestline, "port": self.server.server_address[1]}) + "\n")
        sys.stderr.flush()


def _udp_echo() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", 5353))
    while True:
        data, peer = sock.recvfrom(2048)
        sys.stderr.write(json.dumps({"seen": "udp", "bytes": len(data)}) + "\n")
        sys.stderr.flush()
        sock.sendto(data, peer)


def main() -> None:
    plain = http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Handler)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    threading.Thread(target=_udp_echo, daemon=True).start()
    secure = http.server.ThreadingHTTPServer(("0.0.0.0", 8443), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1])
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    sys.stderr.write(json.dumps({"ready": True}) + "\n")
    sys.stderr.flush()
    secure.serve_forever()


if __name__ == "__main__":
    main()
