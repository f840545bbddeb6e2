"""CI smoke suite on the compose stack: what a producer and an operator do, end to end, on the real images.

Builds the images (skipped when up to date), brings the stack up under a project name of its own with free
loopback ports (only the API and Flower are published: Redis stays on the stack's network), makes a producer key as
an operator does (``docker-compose exec api python -m orchestrator keys create``), submits a small batch of goals
through the API (``submit --wait`` with the key, no Redis credentials), requires every job ``done`` with its
artifacts on disk, submits the first goal once more and requires
it ``done`` with its model replies from the response cache, checks that Flower's API lists the tasks
and that Flower's tasks page, loaded in headless Chromium, shows their names; Redis and Flower run with a fresh
password and login (as ``compose env --write`` generates them) and refuse clients without; then ``down -v``, always.
The workers' cache folder is the run's own (a fresh response cache, memo and job folders), so one run never answers
another's model requests.
Prints one line ``compose smoke: PASS ...`` or ``compose smoke: FAIL ...`` and exits 0 or 1.

Run from the repository root after ``bash ops/setup.sh``: ``.venv/bin/python ops/ci/compose_smoke.py``.
Options (environment): ``SMOKE_MODEL=server`` (default: the compose scripted-llm server, one scenario per model
name, ``openai:NAME``) or ``SMOKE_MODEL=inprocess`` (``scripted:PATH``, a scenario server inside the worker);
``SMOKE_KEEP=1`` leaves the stack up for a look.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pptx import Presentation

from orchestrator.logs import mask_secrets

ROOT = Path(__file__).resolve().parents[2]
PY = str(ROOT / ".venv" / "bin" / "python")
TASK_NAMES = ("orchestrator.plan", "orchestrator.act", "orchestrator.reflect")
# (scenario, goal line text, files the job must produce)
GOALS = [
    ("brand-json", "Give me our brand rules as a machine-readable brand.json", ["brand.json"]),
    ("brand-deck", "Make a 5-slide deck on Q3 results that follows our brand guidelines", ["brand.json", "deck.pptx"]),
    ("brand-json", "Give me our brand rules as a machine-readable brand.json", ["brand.json"]),
    ("brand-deck", "Make a 5-slide deck on Q3 results that follows our brand guidelines", ["brand.json", "deck.pptx"]),
]
WAIT_S = 900
FAILING_GOAL = "Give me our brand rules as a machine-readable brand.json"


class SmokeFailure(Exception):
    pass


_HIDDEN: set[str] = set()
"""This run's secrets (the Redis password, Flower's login): never printed, not even inside a command line."""


def hide(*secret: str) -> None:
    _HIDDEN.update(s for s in secret if s)


def masked(text: str) -> str:
    """``text`` with this run's secrets, credentials in URLs and API keys replaced by ``***``."""
    for secret in sorted(_HIDDEN, key=len, reverse=True):
        text = text.replace(secret, "***")
    return mask_secrets(text)


def say(text: str) -> None:
    print(masked(f"[smoke {time.strftime('%H:%M:%S')}] {text}"), flush=True)


def run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 900, check: bool = True) -> str:
    say("$ " + " ".join(argv))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise SmokeFailure(
            f"{argv[0]} {argv[1] if len(argv) > 1 else ''} exited {done.returncode}: "
            f"{done.stderr.strip()[-3000:]}\n{done.stdout.strip()[-2000:]}"
        )
    return done.stdout


def compose_command() -> list[str]:
    """``docker compose`` (v2 plugin) when present, else Debian's ``docker-compose`` 1.29."""
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, check=False)
    if probe.returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise SmokeFailure("neither `docker compose` nor `docker-compose` is installed (bash ops/setup.sh installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    say("installing Debian's chromium (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    run([*sudo, "apt-get", "update", "-qq"], env=env)
    run([*sudo, "apt-get", "install", "-y", "-qq", "chromium"], env=env)
    path = shutil.which("chromium")
    if not path:
        raise SmokeFailure("chromium is still missing after apt-get install")
    return path


def http_get(url: str, auth: str | None, timeout: float = 10) -> tuple[int, bytes]:
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_for(what: str, probe: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except (OSError, ValueError) as e:
            last = e
        time.sleep(1)
    raise SmokeFailure(f"{what} not ready after {timeout_s:.0f} s (last: {last!r})")


# -- the checks ----------------------------------------------------------------------------------------------------


def goal_lines(run_id: str, mode: str) -> list[dict[str, Any]]:
    lines = []
    for i, (scenario, goal, _files) in enumerate(GOALS, 1):
        model = f"openai:{scenario}" if mode == "server" else f"scripted:{ROOT / 'ops' / 'scenarios' / scenario}.yaml"
        lines.append({"goal": goal, "model": model, "job_id": f"{run_id}-{i}"})
    return lines


def failing_line(run_id: str) -> dict[str, Any]:
    """A goal whose model the scripted server does not serve: the job must end failed, and Flower must say so."""
    return {"goal": FAILING_GOAL, "model": "openai:no-such-scenario", "job_id": f"{run_id}-fails"}


def check_jobs(
    env: dict[str, str], lines: list[dict[str, Any]], summary: dict[str, Any], output_root: Path
) -> list[str]:
    """Every job done with its files on disk; ``summary`` is ``submit --wait --json``'s, one job read with ``jobs``."""
    problems = []
    if summary.get("rejected"):
        problems.append(f"submit rejected lines: {summary['rejected']}")
    by_id = {job["job_id"]: job for job in summary.get("jobs") or []}
    for line, (_scenario, _goal, files) in zip(lines, GOALS, strict=True):
        job_id = line["job_id"]
        job = by_id.get(job_id) or {}
        if job.get("state") != "done":
            problems.append(f"job {job_id} is {job.get('state')!r}, not done: {str(job.get('reason'))[:600]}")
            continue
        folder = output_root / job_id
        for name in files:
            path = folder / name
            if not path.is_file() or path.stat().st_size == 0:
                problems.append(f"job {job_id}: {path} is missing or empty")
        listed = {Path(str(path)).name for path in job.get("artifacts") or []}
        if missing := [n for n in files if n not in listed]:
            problems.append(f"job {job_id}: the ledger lists no artifact {missing} (it lists {sorted(listed)})")
        if "deck.pptx" in files and (folder / "deck.pptx").is_file():
            slides = len(Presentation(str(folder / "deck.pptx")).slides)
            if slides != 5:
                problems.append(f"job {job_id}: deck.pptx has {slides} slides, not 5")
    last = lines[-1]["job_id"]
    record = json.loads(run([PY, "-m", "orchestrator", "jobs", last, "--json"], env=env))
    if record.get("job_id") != last or record.get("state") != "done" or "result" not in record:
        problems.append(f"`jobs {last} --json` does not show the job done with its result: {str(record)[:400]}")
    return problems


def operator(compose: list[str], env: dict[str, str], *argv: str, service: str = "api", check: bool = True) -> str:
    """An operator's command inside the stack (Redis is not published): ``docker-compose exec SERVICE ...``."""
    return run([*compose, "exec", "-T", service, *argv], env=env, check=check)


def producer_env(compose: list[str], env: dict[str, str], api_port: int) -> dict[str, str]:
    """A producer's environment: the API's URL and a key of its own from ``keys create``, no Redis credentials."""
    base = f"http://127.0.0.1:{api_port}"
    wait_for("the API", lambda: http_get(f"{base}/healthz", None)[0] == 200, 120)
    created = json.loads(operator(compose, env, "python", "-m", "orchestrator", "keys", "create", "smoke-producer",
                                  "--json"))
    key = str(created["key"])
    hide(key)
    producer = {k: v for k, v in env.items() if k not in {"ORCH_BROKER_URL", "ORCH_REDIS_PASSWORD"}}
    producer.update({"ORCH_API_URL": base, "ORCH_API_KEY": key})
    return producer


def check_download(producer: dict[str, str], job_id: str, output_root: Path, into: Path) -> list[str]:
    """``jobs ID --download DIR`` through the API brings back the job's files, byte for byte as the worker wrote."""
    run([PY, "-m", "orchestrator", "jobs", job_id, "--download", str(into)], env=producer)
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    written = [p for p in (output_root / job_id).rglob("*") if p.is_file()]
    fetched = [p for p in into.rglob("*") if p.is_file()]
    got = {digest(p) for p in fetched}
    problems = [
        f"download of {job_id} through the API lacks {p.relative_to(output_root)} (or its bytes differ)"
        for p in written
        if digest(p) not in got
    ]
    if not written:
        problems.append(f"job {job_id} wrote no files to download")
    say(f"downloaded {len(fetched)} files of {job_id} through the API with a producer key")
    return problems


def check_repeat(env: dict[str, str], line: dict[str, Any], job_id: str) -> list[str]:
    """The goal of ``line`` submitted again ends done, its model replies answered from the response cache."""
    again = {**line, "job_id": job_id}
    goals = Path(env["ORCH_OUTPUT_ROOT"]).parent / "again.jsonl"
    goals.write_text(json.dumps(again) + "\n", encoding="utf-8")
    summary = json.loads(
        run([PY, "-m", "orchestrator", "submit", str(goals), "--wait", "--json"], env=env, timeout=WAIT_S, check=False)
    )
    job = next((j for j in summary.get("jobs") or [] if j["job_id"] == job_id), {})
    if job.get("state") != "done":
        return [f"job {job_id} (a goal submitted again) is {job.get('state')!r}, not done: {job.get('reason')}"]
    record = json.loads(run([PY, "-m", "orchestrator", "jobs", job_id, "--json"], env=env))
    metrics = (record.get("result") or {}).get("metrics") or {}
    say(f"the goal submitted again: {metrics.get('response_cache_hits')} replies from the response cache, "
        f"{metrics.get('model_calls')} model calls")
    if not metrics.get("response_cache_hits"):
        return [f"job {job_id} (a goal submitted again) took no reply from the response cache: {metrics}"]
    return []


def check_redis_closed(compose: list[str], env: dict[str, str]) -> list[str]:
    """The stack's Redis is published nowhere, and inside the stack answers only with its password."""
    problems = []
    container = run([*compose, "ps", "-q", "redis"], env=env).strip()
    ports = json.loads(run(["docker", "inspect", "--format", "{{json .NetworkSettings.Ports}}", container]))
    if any(bindings for bindings in (ports or {}).values()):
        problems.append(f"the stack's Redis is published on the host: {ports}")
    attempts = {
        "no password": ["env", "-u", "REDISCLI_AUTH", "redis-cli", "set", "smoke:intruder", "1"],
        "a wrong password": ["env", "REDISCLI_AUTH=wrong-password-of-the-smoke", "redis-cli", "set", "smoke:intruder",
                             "1"],
    }
    for label, argv in attempts.items():
        answer = operator(compose, env, *argv, service="redis", check=False)
        if "NOAUTH" not in answer and "WRONGPASS" not in answer:
            problems.append(f"the stack's Redis answered a write with {label}: {answer.strip()[:200]}")
    if operator(compose, env, "redis-cli", "ping", service="redis").strip() != "PONG":
        problems.append("the stack's Redis does not answer with its password")
    return problems


def check_flower_api(base: str, auth: str, job_ids: list[str]) -> tuple[list[str], dict[str, Any]]:
    status, body = http_get(f"{base}/api/tasks", "nobody:wrong")
    problems = [] if status == 401 else [f"Flower's API answered {status} without the right basic auth (want 401)"]
    status, _body = http_get(f"{base}/api/tasks", None)
    if status != 401:
        problems.append(f"Flower's API answered {status} without any login (want 401)")
    status, body = http_get(f"{base}/api/tasks", auth)
    if status != 200:
        return [*problems, f"Flower's /api/tasks answered {status}: {body[:300]!r}"], {}
    tasks: dict[str, Any] = json.loads(body)
    names = {t.get("name") for t in tasks.values()}
    if missing := [n for n in TASK_NAMES if n not in names]:
        problems.append(f"Flower lists no {missing} task (names seen: {sorted(map(str, names))})")
    for job_id in job_ids:
        mine = [t for t in tasks.values() if names_job(t, job_id)]
        if not mine:
            problems.append(f"Flower lists no task whose arguments name job {job_id}")
        elif bad := [t for t in mine if t.get("state") != "SUCCESS"]:
            problems.append(
                f"job {job_id}: Flower shows tasks not in SUCCESS: {[(t['name'], t['state']) for t in bad]}"
            )
    return problems, tasks


def names_job(task: dict[str, Any], job_id: str) -> bool:
    """The task's readable arguments (``job=ID step=N skill=S``) name this job."""
    return re.search(rf"job={re.escape(job_id)}(\s|$)", str(task.get("args"))) is not None


def check_flower_failure(tasks: dict[str, Any], failed_job: str, reason: str) -> tuple[list[str], str]:
    """The failed job's last phase is a FAILURE whose exception carries the job's reason."""
    mine = [(uuid, t) for uuid, t in tasks.items() if names_job(t, failed_job)]
    failures = [(uuid, t) for uuid, t in mine if t.get("state") == "FAILURE"]
    if len(failures) != 1:
        return [f"failed job {failed_job}: Flower shows {[(t['name'], t['state']) for _, t in mine]}, "
                f"not one FAILURE"], ""
    uuid, task = failures[0]
    if reason[:80] not in str(task.get("exception")):
        return [f"failed job {failed_job}: its FAILURE's exception {str(task.get('exception'))[:300]!r} does not "
                f"carry the job's reason {reason[:200]!r}"], uuid
    return [], uuid


def dump_dom(chromium: str, url: str) -> str:
    profile = tempfile.mkdtemp(prefix="smoke-chromium-")
    argv = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        # Flower's tasks table is filled by JavaScript from its API: let the page's scripts and requests finish.
        "--virtual-time-budget=15000",
        "--dump-dom",
        url,
    ]
    try:
        return run(argv, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def check_flower_page(chromium: str, base: str, auth: str, tasks: dict[str, Any], job_ids: list[str]) -> list[str]:
    """The tasks page lists every task of the batch by name; a task's page shows its readable arguments."""
    credentials_base = base.replace("http://", f"http://{auth}@", 1)
    dom = dump_dom(chromium, f"{credentials_base}/tasks")
    problems = []
    if missing := [n for n in TASK_NAMES if n not in dom]:
        problems.append(f"Flower's tasks page in Chromium shows no {missing} ({len(dom)} characters of DOM)")
    mine = {
        uuid: t for uuid, t in tasks.items() if any(j in json.dumps([t.get("args"), t.get("kwargs")]) for j in job_ids)
    }
    if absent := [uuid for uuid in mine if uuid not in dom]:
        problems.append(f"Flower's tasks page in Chromium lacks {len(absent)} of the batch's {len(mine)} tasks")
    # the list's own columns say which job, phase, step and skill each row is, and how the job ended
    if absent := [j for j in job_ids if not re.search(rf"job={re.escape(j)}(\s|<|$)", dom)]:
        problems.append(f"Flower's tasks list shows no job=… argument for {absent} (tasks_columns without args?)")
    if "skill=" not in dom or "job_state" not in dom:
        problems.append("Flower's tasks list shows no skill= argument or job_state result")
    acts = [(uuid, t) for uuid, t in mine.items() if t.get("name") == "orchestrator.act"]
    if acts:
        uuid, task = acts[0]
        page = dump_dom(chromium, f"{credentials_base}/task/{uuid}")
        job = next(j for j in job_ids if j in json.dumps([task.get("args"), task.get("kwargs")]))
        if f"job={job}" not in page or "skill=" not in page:
            problems.append(f"Flower's page of task {uuid} does not show its arguments as job=... step=... skill=...")
        if "progress" not in page or "act.started" not in page:
            problems.append(f"Flower's page of task {uuid} shows no progress lines in its result")
    return problems


def check_flower_failed_pages(chromium: str, base: str, auth: str, uuid: str, reason: str, failed: int) -> list[str]:
    """A failed task's page shows FAILURE and the reason; the Workers page's Failed column counts failed jobs."""
    credentials_base = base.replace("http://", f"http://{auth}@", 1)
    problems = []
    page = dump_dom(chromium, f"{credentials_base}/task/{uuid}")
    if "FAILURE" not in page or html.escape(reason[:80], quote=False) not in page:
        problems.append(f"Flower's page of failed task {uuid} does not show FAILURE with the job's reason")
    workers = dump_dom(chromium, f"{credentials_base}/workers")
    table = workers[workers.find('id="workers-table"'):]
    body = table[table.find("<tbody"):table.find("</tbody>")]
    counted = 0
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        if len(cells) >= 5 and cells[4].replace(",", "").isdigit():
            counted += int(cells[4].replace(",", ""))
    if counted != failed:
        problems.append(f"Flower's Workers page counts {counted} failed tasks; the ledger has {failed} failed job(s) "
                        f"(its table: {re.sub(r'<[^>]+>', ' ', body)[:600]!r})")
    return problems


# -- the run --------------------------------------------------------------------------------------------------------


def main() -> int:
    started = time.monotonic()
    mode = os.environ.get("SMOKE_MODEL", "server")
    run_id = f"smoke-{int(time.time())}-{secrets.token_hex(2)}"
    workdir = Path(tempfile.mkdtemp(prefix="compose-smoke-", dir=os.environ.get("SMOKE_TMP")))
    compose = compose_command()
    flower_port, api_port = free_port(), free_port()
    output_root = workdir / "out"
    cache_dir = workdir / "cache"
    cache_dir.mkdir(mode=0o700)
    worker_env = workdir / "worker.env"  # the worker's own settings (no grants here): the checkout's is not read
    worker_env.touch(mode=0o600)
    # The host settings and a fresh Redis password and Flower login, as `compose env --write` puts them in .env
    host_env = json.loads(
        run([PY, "-m", "orchestrator", "compose", "env", "--output-root", str(output_root), "--json"])
    )
    auth = f"smoke:{secrets.token_urlsafe(16)}"
    password = secrets.token_urlsafe(24)
    hide(password, auth, auth.partition(":")[2], base64.b64encode(auth.encode()).decode())
    env = {
        **os.environ,
        **{k: str(v) for k, v in host_env.items()},
        "COMPOSE_PROJECT_NAME": run_id.replace("-", ""),
        "ORCH_FLOWER_PORT": str(flower_port),
        "ORCH_API_PORT": str(api_port),
        "ORCH_FLOWER_AUTH": auth,
        "ORCH_REDIS_PASSWORD": password,
        "ORCH_OUTPUT_ROOT": str(output_root),
        "ORCH_CACHE_DIR": str(cache_dir),
        "ORCH_WORKER_ENV_FILE": str(worker_env),
    }
    stack_up = False
    try:
        chromium = ensure_chromium()
        run([PY, "-m", "orchestrator", "sandbox", "build-image"], timeout=1800)
        built = time.monotonic()
        run([PY, "-m", "orchestrator", "compose", "build-images"], timeout=1800)
        say(f"images ready in {time.monotonic() - built:.0f} s")
        stack_up = True
        run([*compose, "up", "-d"], env=env, timeout=300)
        base = f"http://127.0.0.1:{flower_port}"
        wait_for("Flower", lambda: http_get(f"{base}/api/workers", auth)[0] == 200, 120)
        if problems := check_redis_closed(compose, env):
            raise SmokeFailure("; ".join(problems))
        # The producer's path: a key made by the operator, then submit, jobs and --download through the API only
        # (no Redis URL in the producer's environment).
        producer = producer_env(compose, env, api_port)
        lines = goal_lines(run_id, mode)
        failing = failing_line(run_id)
        goals = workdir / "goals.jsonl"
        goals.write_text("".join(json.dumps(line) + "\n" for line in [*lines, failing]), encoding="utf-8")
        submitted = time.monotonic()
        summary = json.loads(
            run(
                [PY, "-m", "orchestrator", "submit", str(goals), "--wait", "--json"],
                env=producer,
                timeout=WAIT_S,
                check=False,
            )
        )
        say(f"batch of {len(lines)} goals finished in {time.monotonic() - submitted:.1f} s")
        job_ids = [line["job_id"] for line in lines]
        problems = check_jobs(producer, lines, summary, output_root)
        problems += check_download(producer, lines[0]["job_id"], output_root, workdir / "download")
        failed = next((j for j in summary.get("jobs") or [] if j["job_id"] == failing["job_id"]), {})
        if failed.get("state") != "failed" or not failed.get("reason"):
            problems.append(f"job {failing['job_id']} did not end failed with a reason: {failed}")
        api_problems, tasks = check_flower_api(base, auth, job_ids)
        problems += api_problems
        failure_problems, failed_uuid = check_flower_failure(tasks, failing["job_id"], str(failed.get("reason")))
        problems += failure_problems
        problems += check_flower_page(chromium, base, auth, tasks, job_ids)
        if failed_uuid:
            problems += check_flower_failed_pages(chromium, base, auth, failed_uuid, str(failed.get("reason")), 1)
        # Last: its tasks would take rows of Flower's first tasks page (15) from the batch's.
        problems += check_repeat(producer, lines[0], f"{run_id}-again")
        if problems:
            raise SmokeFailure("; ".join(problems))
        elapsed = time.monotonic() - started
        print(
            f"compose smoke: PASS ({len(lines)} jobs done with their artifacts and one failed, the first goal done "
            f"again from the response cache, Flower lists "
            f"{len(tasks)} tasks in its API and its tasks page, the failure as FAILURE with its reason and in the "
            f"Workers page's count, {' '.join(compose)}, model {mode}) in {elapsed:.0f} s",
            flush=True,
        )
        return 0
    except Exception as e:  # noqa: BLE001 - any failure is reported as the one FAIL line
        if stack_up:
            logs = subprocess.run([*compose, "logs", "--tail", "60"], cwd=ROOT, env=env, capture_output=True, text=True)
            print(masked(logs.stdout[-12000:]), file=sys.stderr)
        print(masked(f"compose smoke: FAIL after {time.monotonic() - started:.0f} s: {e}"), flush=True)
        return 1
    finally:
        if stack_up and not os.environ.get("SMOKE_KEEP"):
            subprocess.run(
                [*compose, "down", "-v", "--remove-orphans"], cwd=ROOT, env=env, capture_output=True, timeout=300
            )
        if not os.environ.get("SMOKE_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    sys.exit(main())
