"""Attacks against the sandbox, on the real engine. Each is an attempt that must fail, contained by the kernel."""

from __future__ import annotations

import ipaddress
import resource
import time
from pathlib import Path

import pytest
from sandbox_helpers import tree_digest

from orchestrator.errors import SandboxRefused
from orchestrator.sandbox.docker import SandboxRunner

PROBE_ERRORS = """
import errno, json, sys

def attempt(fn):
    try:
        fn()
        return "succeeded"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__
    except Exception as e:
        return type(e).__name__
"""


def run_probe(job, args=None, timeout_s: float = 10):
    result = job.run_script("probe.py", args or {}, timeout_s=timeout_s)
    assert result.ok, (result.reason, result.stderr_summary)
    return result.stdout_json


@pytest.fixture
def probe_job(make_skill, open_job):
    """A job whose skill holds one probe script; the body is written per test."""

    def make(body: str, **job_kwargs):
        root = make_skill({"probe.py": PROBE_ERRORS + body})
        return open_job(root, **job_kwargs)

    return make


def bridge_gateway(docker_client) -> str:
    """The host's address on the default bridge (the engine may record only the subnet: then its first host)."""
    config = docker_client.api.inspect_network("bridge")["IPAM"]["Config"][0]
    if config.get("Gateway"):
        return str(config["Gateway"])
    return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


# -- network ------------------------------------------------------------------------------------------------------


def test_tcp_egress_is_impossible(probe_job):
    job = probe_job("""
import socket
def tcp(host, port):
    with socket.create_connection((host, port), timeout=2):
        pass
out = {f"{h}:{p}": attempt(lambda h=h, p=p: tcp(h, p)) for h, p in [("1.1.1.1", 80), ("8.8.8.8", 443)]}
out["interfaces"] = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
json.dump(out, sys.stdout)
""")
    out = run_probe(job)
    assert out.pop("interfaces") == ["lo"]
    assert set(out.values()) == {"ENETUNREACH"}


def test_udp_egress_is_impossible(probe_job):
    job = probe_job("""
import socket
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x" * 32, ("8.8.8.8", 53))
json.dump({"udp": attempt(udp)}, sys.stdout)
""")
    assert run_probe(job) == {"udp": "ENETUNREACH"}


def test_dns_resolution_is_impossible(probe_job):
    job = probe_job("""
import socket
json.dump({"dns": attempt(lambda: socket.getaddrinfo("example.com", 443))}, sys.stdout)
""")
    assert run_probe(job)["dns"] == "gaierror"


def test_the_docker_bridge_gateway_is_unreachable(probe_job, docker_client):
    gateway = bridge_gateway(docker_client)
    job = probe_job("""
import socket
gw = json.load(sys.stdin)["gateway"]
def tcp(port):
    with socket.create_connection((gw, port), timeout=2):
        pass
json.dump({str(p): attempt(lambda p=p: tcp(p)) for p in (22, 80, 2375, 6379)}, sys.stdout)
""")
    out = job.run_script("probe.py", {"gateway": gateway}, timeout_s=15).stdout_json
    # ENETUNREACH, not ECONNREFUSED: no route at all, so no host service can even refuse
    assert set(out.values()) == {"ENETUNREACH"}, out


# -- files --------------------------------------------------------------------------------------------------------


def test_writes_outside_build_are_refused_by_the_kernel(probe_job, tmp_path):
    job = probe_job("""
def write(path):
    with open(path, "w") as fh:
        fh.write("pwned")
targets = ["probe.py", "new-file.txt", "/pwned", "/etc/pwned", "/etc/passwd", "../pwned", "/usr/bin/pwned",
           "/inputs-pwned", "/var/pwned"]
json.dump({t: attempt(lambda t=t: write(t)) for t in targets}, sys.stdout)
""")
    skill_root = tmp_path / "skill"
    before = tree_digest(tmp_path)
    out = run_probe(job)
    assert all(v in {"EROFS", "EACCES"} for v in out.values()), out
    assert tree_digest(tmp_path) == before
    assert not (skill_root / "build").exists()


def test_the_skill_root_parent_folder_is_not_visible(probe_job, tmp_path):
    (tmp_path / "secret.txt").write_text("host secret next to the skill")
    job = probe_job("""
import os
host_secret = json.load(sys.stdin)["path"]
def read(path):
    open(path).read()
out = {p: attempt(lambda p=p: read(p)) for p in ["../secret.txt", host_secret, "/skill/../secret.txt"]}
out["parent_listing"] = sorted(os.listdir(".."))
json.dump(out, sys.stdout)
""")
    out = job.run_script("probe.py", {"path": str(tmp_path / "secret.txt")}).stdout_json
    listing = out.pop("parent_listing")
    assert set(out.values()) == {"ENOENT"}
    assert "secret.txt" not in listing


def test_a_symlink_in_the_skill_pointing_at_a_host_file_does_not_leak_it(make_skill, open_job, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("TOP-SECRET-HOST-DATA")
    root = make_skill(
        {
            "probe.py": PROBE_ERRORS
            + """
def read(path):
    return open(path).read()
json.dump({"via_link": attempt(lambda: read("leak.txt")), "via_dir": attempt(lambda: read("up/host-secret.txt"))},
          sys.stdout)
"""
        }
    )
    (root / "leak.txt").symlink_to(secret)
    (root / "up").symlink_to(tmp_path)
    assert run_probe(open_job(root)) == {"via_link": "ENOENT", "via_dir": "ENOENT"}


def test_a_script_symlinked_to_a_host_file_is_refused(make_skill, open_job, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("print('{}')")
    root = make_skill({"ok.py": "print('{}')"})
    (root / "evil.py").symlink_to(outside)
    job = open_job(root)
    with pytest.raises(SandboxRefused) as caught:
        job.run_script("evil.py")
    assert caught.value.violation == "path_escape"


# -- processes, memory, time ------------------------------------------------------------------------------------


def test_a_fork_bomb_is_contained_and_leaves_nothing_running(make_skill, open_job):
    root = make_skill({"bomb.sh": "bomb() { bomb | bomb & }\nbomb\nsleep 271.5\n"})
    job = open_job(root)
    started = time.monotonic()
    result = job.run_script("bomb.sh", timeout_s=3)
    assert time.monotonic() - started < 15
    assert result.timed_out and not result.ok
    assert not _host_processes_with("271.5")


def test_forking_stops_at_the_pids_limit(probe_job, sandbox_settings):
    job = probe_job("""
import os, time
children = 0
error = None
while children < 1000:
    try:
        pid = os.fork()
    except OSError as e:
        error = errno.errorcode.get(e.errno)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
json.dump({"children": children, "error": error}, sys.stdout)
""")
    out = run_probe(job)
    assert out["error"] == "EAGAIN"
    assert out["children"] < sandbox_settings.pids_limit


def test_a_memory_bomb_is_oom_killed_and_reported(make_skill, open_job, sandbox_settings):
    root = make_skill({"hog.py": "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"})
    result = open_job(root).run_script("hog.py", timeout_s=20)
    assert result.oom_killed and not result.ok and not result.timed_out
    assert result.reason == f"out of memory ({sandbox_settings.memory_mb} MiB)"
    assert any(v.startswith("memory_limit") for v in result.violations)


def test_a_cpu_spin_is_killed_at_the_timeout(make_skill, open_job):
    root = make_skill({"spin.py": "while True:\n    pass\n"})
    started = time.monotonic()
    result = open_job(root).run_script("spin.py", timeout_s=1.5)
    assert time.monotonic() - started < 6
    assert result.timed_out and not result.ok and result.reason == "timed out after 1.5s"


def test_a_sleep_past_the_timeout_is_killed(make_skill, open_job):
    root = make_skill({"nap.sh": "sleep 60\n"})
    result = open_job(root).run_script("nap.sh", timeout_s=1)
    assert result.timed_out and 900 <= result.duration_ms < 4000


def test_closing_stdout_and_lingering_is_still_killed_at_the_timeout(make_skill, open_job):
    root = make_skill({"linger.sh": "exec >&- 2>&-\nsleep 60\n"})
    started = time.monotonic()
    result = open_job(root).run_script("linger.sh", timeout_s=1)
    assert time.monotonic() - started < 5
    assert result.timed_out and result.reason == "timed out after 1s"


def test_a_script_that_never_reads_a_large_stdin_still_times_out(make_skill, open_job):
    root = make_skill({"deaf.sh": "sleep 60\n"})
    started = time.monotonic()
    result = open_job(root).run_script("deaf.sh", {"blob": "x" * (8 * 1024 * 1024)}, timeout_s=1)
    assert time.monotonic() - started < 6
    assert result.timed_out


def test_the_cpu_quota_is_enforced(make_skill, sandbox_settings, docker_client, tmp_path):
    half = sandbox_settings.model_copy(update={"cpus": 0.5})
    runner = SandboxRunner(half, docker_client, work_dir=tmp_path / "work", reap_on_start=False)
    root = make_skill(
        {
            "burn.py": """
        import json, sys, time
        start = time.monotonic()
        while time.monotonic() - start < 2.0:
            pass
        json.dump({"cpu": time.process_time(), "wall": time.monotonic() - start}, sys.stdout)
        """
        }
    )
    try:
        with runner.open_job("cpu", root) as job:
            out = job.run_script("burn.py", timeout_s=10).stdout_json
    finally:
        runner.close()
    assert out["cpu"] / out["wall"] < 0.7


def test_a_background_process_does_not_outlive_its_call(make_skill, open_job, docker_client):
    marker = "313.25"
    root = make_skill(
        {
            "daemon.py": f"""
        import json, os, subprocess, sys
        subprocess.Popen(["sleep", "{marker}"], start_new_session=True, stdout=subprocess.DEVNULL)
        if os.fork() == 0:          # a double-forked daemon as well
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "{marker}"])
            os._exit(0)
        json.dump({{"spawned": True}}, sys.stdout)
        """
        }
    )
    job = open_job(root)
    result = job.run_script("daemon.py")
    assert result.ok
    assert not _still_running(docker_client, result.container)
    assert not _host_processes_with(marker)


def _still_running(docker_client, name: str) -> bool:
    """The call's container is gone or stopped (its removal may race with this look, which counts as gone)."""
    import docker.errors

    try:
        return bool(docker_client.api.inspect_container(name)["State"]["Running"])
    except docker.errors.NotFound:
        return False


def _host_processes_with(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found


# -- disk and output ----------------------------------------------------------------------------------------------


def test_filling_build_stops_with_enospc_at_the_limit(probe_job, tmp_path):
    job = probe_job(
        """
written = 0
code = None
try:
    with open("build/fill.bin", "wb") as fh:
        while written < 64 * 1024 * 1024:
            fh.write(b"x" * 65536)
            fh.flush()
            written += 65536
except OSError as e:
    code = errno.errorcode.get(e.errno)
json.dump({"written": written, "error": code}, sys.stdout)
""",
        disk_mb=4,
    )
    before = tree_digest(tmp_path)
    out = run_probe(job)
    assert out["error"] == "ENOSPC"
    assert out["written"] <= 4 * 1024 * 1024
    assert tree_digest(tmp_path) == before  # nothing landed on the host


def test_a_200_mb_stdout_flood_is_cut_at_the_cap_without_buffering(make_skill, open_job):
    root = make_skill(
        {
            "flood.py": """
        import sys
        block = b"A" * 65536
        for _ in range(200 * 16):
            sys.stdout.buffer.write(block)
        """
        }
    )
    job = open_job(root)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    result = job.run_script("flood.py", timeout_s=30)
    elapsed = time.monotonic() - started
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert not result.ok and result.reason == "stdout exceeded 1 MiB"
    assert any(v.startswith("stdout_limit") for v in result.violations)
    assert elapsed < 10
    assert (peak_after - peak_before) < 64 * 1024  # KiB: far below the 200 MB that buffering would take
    assert len(result.stdout_text) <= 4096


def test_a_stderr_flood_keeps_only_the_last_lines(make_skill, open_job, sandbox_settings):
    root = make_skill(
        {
            "noisy.py": """
        import sys
        for i in range(50000):
            print(f"line {i}", file=sys.stderr)
        print("x" * 100000, file=sys.stderr)
        print('{"done": true}')
        """
        }
    )
    result = open_job(root).run_script("noisy.py", timeout_s=30)
    assert result.ok
    assert result.stderr_lines == 50001
    assert len(result.stderr_tail) == sandbox_settings.stderr_max_lines
    assert result.stderr_tail[-2] == "line 49999"
    assert result.stderr_tail[-1].endswith("[line cut]") and len(result.stderr_tail[-1]) < 600
    assert len(result.stderr_summary) <= 2100


# -- identity and secrets -----------------------------------------------------------------------------------------


def test_host_variables_and_api_keys_are_not_visible(probe_job, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-should-never-leak-123456")
    monkeypatch.setenv("ORCH_SECRET_THING", "hunter2")
    job = probe_job("""
import os
init_env = open("/proc/1/environ", "rb").read().decode()
json.dump({"env": dict(os.environ), "init_env": init_env}, sys.stdout)
""")
    out = run_probe(job)
    allowed = {"HOME", "TMPDIR", "PATH", "LANG", "PYTHONDONTWRITEBYTECODE", "NODE_PATH", "PYTHONPATH", "HOSTNAME",
               "PWD"}
    assert set(out["env"]) <= allowed
    everything = repr(out)
    assert "sk-host-secret" not in everything and "hunter2" not in everything and "OPENAI" not in everything


def test_there_is_no_docker_socket(probe_job):
    job = probe_job("""
import os
paths = ["/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/containerd"]
json.dump({p: os.path.exists(p) for p in paths}, sys.stdout)
""")
    assert not any(run_probe(job).values())


def test_the_script_runs_unprivileged(probe_job, sandbox_settings):
    job = probe_job("""
import os
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
json.dump({"uid": os.getuid(), "euid": os.geteuid(), "cap_eff": status["CapEff"].strip(),
           "no_new_privs": status["NoNewPrivs"].strip(), "setuid0": attempt(lambda: os.setuid(0))}, sys.stdout)
""")
    out = run_probe(job)
    assert out["uid"] == out["euid"] == sandbox_settings.uid != 0
    assert int(out["cap_eff"], 16) == 0
    assert out["no_new_privs"] == "1"
    assert out["setuid0"] == "EPERM"


# -- refused before any container ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "violation"),
    [
        ("tool.rb", "extension_not_allowed"),
        ("../outside.py", "path_escape"),
        ("scripts/../../outside.py", "path_escape"),
        ("/etc/passwd.py", "path_escape"),
        ("missing.py", "not_found"),
        ("build/made-by-a-script.py", "not_found"),  # checked in the job: build/ is not on the host
    ],
)
def test_scripts_outside_the_policy_are_refused_before_any_container_starts(
    make_skill, open_job, docker_client, script, violation
):
    root = make_skill({"tool.rb": "puts 1", "ok.py": "print('{}')"})
    (root.parent / "outside.py").write_text("print('{}')")
    job = open_job(root)
    job.wait_ready()

    def containers_of_job() -> set[str]:  # only this job's: other test processes share the label prefix
        found = docker_client.api.containers(all=True, filters={"label": "orchtest.managed"})
        return {c["Id"] for c in found if c["Names"][0].lstrip("/").startswith(f"{job.name}-")}

    before = containers_of_job()
    with pytest.raises(SandboxRefused) as caught:
        job.run_script(script)
    after = containers_of_job()
    assert caught.value.violation == violation
    assert after == before
    assert job.run_script("ok.py").ok  # the job is still usable
