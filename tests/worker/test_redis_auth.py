"""The Redis of docs/operations/several-machines.md, for real: TLS only (``rediss://``), ACL users per role.

A private ``redis-server`` with a throwaway CA, no plain-text port and the ACL file that page shows; a real worker
connects as ``worker``, the producers' API's user ``api`` submits and waits (what the API server does; producers
hold no Redis user). What the api user may not do (read or forge a checkpoint, take a lease, reconfigure or flush
Redis) is refused by Redis itself.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import redis
from worker_helpers import REPO, Cluster, RedisServer, free_port, goal_line, wait_for

from orchestrator.deploy.redis_acl import acl_file

CERT_DAYS = "2"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(folder: Path) -> Path:
    """A CA and a server certificate for 127.0.0.1 signed by it (the CA file clients trust)."""
    folder.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", CERT_DAYS, "-subj", "/CN=orchestrator-test-ca", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "redis.key", "-out", "redis.csr",
             "-subj", "/CN=127.0.0.1", cwd=folder)
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "redis.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "redis.crt", "-days", CERT_DAYS, "-extfile", "san.ext", cwd=folder)
    return folder


class TlsAclRedis(RedisServer):
    """redis-server with TLS on its port (no plain-text port) and that page's ACL users."""

    def __init__(self, folder: Path, certs: Path, passwords: dict[str, str]) -> None:
        super().__init__(folder)
        self.certs = certs
        self.passwords = passwords

    def url_for(self, user: str) -> str:
        query = f"ssl_cert_reqs=required&ssl_ca_certs={self.certs / 'ca.crt'}"
        return f"rediss://{user}:{self.passwords[user]}@127.0.0.1:{self.port}/0?{query}"

    @property
    def url(self) -> str:
        return self.url_for("admin")

    def start(self) -> TlsAclRedis:
        self.folder.mkdir(parents=True, exist_ok=True)
        acl = self.folder / "users.acl"
        acl.write_text(acl_file(self.passwords["api"], self.passwords["worker"], self.passwords["admin"]))
        exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen(
            [exe, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--tls-cert-file", str(self.certs / "redis.crt"), "--tls-key-file", str(self.certs / "redis.key"),
             "--tls-ca-cert-file", str(self.certs / "ca.crt"), "--tls-auth-clients", "no",
             "--aclfile", str(acl), "--save", "", "--appendonly", "yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: self._ping(), 10, "redis-server with TLS to answer")
        return self


@pytest.fixture
def secured(tmp_path: Path):  # noqa: ANN201
    passwords = {user: secrets.token_urlsafe(24) for user in ("api", "worker", "admin")}
    server = TlsAclRedis(tmp_path / "redis", make_certificates(tmp_path / "certs"), passwords).start()
    cluster = Cluster(root=tmp_path, redis=server)
    yield cluster, server
    cluster.stop_all()
    server.stop()


def test_producers_and_workers_run_a_job_over_tls_as_their_own_acl_users(secured) -> None:
    cluster, server = secured
    cluster.settings_env["ORCH_BROKER_URL"] = server.url_for("worker")
    cluster.start_worker("w1")
    cluster.settings_env["ORCH_BROKER_URL"] = server.url_for("api")
    done = cluster.cli("submit", "-", "--wait", "--timeout", "240", "--json", stdin=goal_line("tls-1") + "\n",
                       timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + cluster.log("w1")[-3000:]
    assert json.loads(done.stdout)["jobs"][0]["state"] == "done"
    assert (cluster.output_root / "tls-1" / "brand.json").is_file()
    assert cluster.job("tls-1")["state"] == "done"  # `jobs` works as the producer too

    producer = redis.Redis.from_url(server.url_for("api"))
    for forbidden in (
        lambda: producer.get("orch:checkpoint:tls-1"),
        lambda: producer.set("orch:checkpoint:tls-1", "{}"),
        lambda: producer.set("orch:lease:tls-1", "mine"),
        lambda: producer.config_get("requirepass"),
        lambda: producer.flushall(),
        lambda: producer.keys("*"),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            forbidden()


def test_plain_text_and_anonymous_clients_are_refused(secured) -> None:
    _cluster, server = secured
    with pytest.raises(redis.ConnectionError):  # the port speaks TLS only
        redis.Redis(port=server.port, socket_connect_timeout=3).ping()
    anonymous = f"rediss://127.0.0.1:{server.port}/0?ssl_cert_reqs=required&ssl_ca_certs={server.certs / 'ca.crt'}"
    with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
        redis.Redis.from_url(anonymous).set("x", "1")
    wrong = server.url_for("api").replace(server.passwords["api"], "wrong-password-0123456789")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(wrong).ping()


def test_the_several_machines_page_shows_the_same_acl_file(tmp_path: Path) -> None:
    page = (REPO / "docs" / "operations" / "several-machines.md").read_text()
    for line in acl_file("API_PASSWORD", "WORKER_PASSWORD", "ADMIN_PASSWORD").splitlines():
        assert line in page, f"docs/operations/several-machines.md lacks the ACL line: {line}"
    assert free_port() > 0
