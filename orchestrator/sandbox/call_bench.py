"""``bench sandbox``: calls of one job through the runner against ``docker run --rm`` of the same image."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.sandbox.models import SandboxBench

TRIVIAL_SCRIPT = 'import json, sys\njson.dump({"echo": json.load(sys.stdin)}, sys.stdout)\n'


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _docker_run(image: str, skill: Path, payload: bytes) -> float:
    argv = [
        "docker",
        "run",
        "--rm",
        "-i",
        "--network",
        "none",
        "-v",
        f"{skill}:/skill:ro",
        "-w",
        "/skill",
        image,
        "python3",
        "noop.py",
    ]
    started = time.perf_counter()
    done = subprocess.run(argv, input=payload, capture_output=True, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0 or b"echo" not in done.stdout:
        raise SandboxError(f"docker run failed: {done.stderr.decode(errors='replace')[-500:]}", where="bench")
    return elapsed


def bench_sandbox(runner: SandboxRunner, *, pairs: int = 20, warmup: int = 2) -> SandboxBench:
    """Alternate one runner call and one ``docker run --rm --network none`` per pair; report medians and ratio.

    Before each timed call the job's next container is ready (``wait_ready``), as it is when a model turn sits
    between calls; the pre-creation is thus not counted against the ``docker run`` it would otherwise overlap.
    """
    image = runner.settings.image
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as folder:
        skill = Path(folder)
        (skill / "noop.py").write_text(TRIVIAL_SCRIPT)
        skill.chmod(0o755)
        started = time.perf_counter()
        job = runner.open_job("bench", skill)
        setup_ms = (time.perf_counter() - started) * 1000
        runner_ms: list[float] = []
        docker_ms: list[float] = []
        with job:
            for i in range(warmup + pairs):
                job.wait_ready()
                t0 = time.perf_counter()
                result = job.run_script("noop.py", {"i": i})
                elapsed = (time.perf_counter() - t0) * 1000
                if not result.ok:
                    raise SandboxError(f"benchmark call failed: {result.reason}", where="bench")
                job.wait_ready()
                baseline = _docker_run(image, skill, json.dumps({"i": i}).encode())
                if i >= warmup:
                    runner_ms.append(elapsed)
                    docker_ms.append(baseline)
            view = job.skill_view
    runner_median = statistics.median(runner_ms)
    docker_median = statistics.median(docker_ms)
    return SandboxBench(
        runner_median_ms=round(runner_median, 1),
        runner_p95_ms=round(_p95(runner_ms), 1),
        docker_run_median_ms=round(docker_median, 1),
        docker_run_p95_ms=round(_p95(docker_ms), 1),
        ratio_vs_docker_run=round(runner_median / docker_median, 3),
        job_setup_ms=round(setup_ms, 1),
        pairs=pairs,
        image=image,
        skill_view=view,
    )
