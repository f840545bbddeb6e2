"""Run each public skill's workflow as its SKILL.md tells a model to, step by step, in our sandbox.

    .venv/bin/python ops/public_skills/check.py --skills /path/to/anthropic-skills/skills [--only pdf,pptx] [--json]

The public ``anthropics/skills`` collection is not part of this repository: clone it anywhere and pass its
``skills/`` folder. Each skill gets one sandbox job with the production limits and no declarations (the public
skills declare none), its steps run in order (code the model would write goes to ``build/`` first), and a step
counts as done when its call is ok and the files it must leave are in ``build/``. Prints one line per skill (or one
JSON object) and exits 0 when at least ``--need`` skills (16 of 17) work. Nothing here runs in CI: it needs the
collection and takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from workflows import EXPECTED_TO_FAIL, WORKFLOWS, Step

from orchestrator.config import load_settings
from orchestrator.errors import OrchestratorError
from orchestrator.sandbox.docker import SandboxRunner


@dataclass
class SkillOutcome:
    skill: str
    ok: bool
    steps: list[dict[str, object]] = field(default_factory=list)
    seconds: float = 0.0
    expected_failure: str | None = None


def run_step(job, step: Step) -> dict[str, object]:
    started = time.monotonic()
    record: dict[str, object] = {"step": step.label}
    try:
        if step.kind == "write":
            job.write_file(step.path, step.text.encode())
            record["ok"] = True
        else:
            if step.kind == "script":
                result = job.run_script(step.path, argv=step.argv, timeout_s=step.timeout_s)
            else:
                result = job.run_command(step.argv, timeout_s=step.timeout_s)
            # a step is judged by its exit code and files: code a model writes may print plain text or nothing
            done = result.ok or (result.exit_code == 0 and not result.violations)
            record.update(ok=done, exit_code=result.exit_code, reason=result.reason, limit=result.limit)
            if not result.ok:
                record["stderr"] = result.stderr_summary[-1500:]
                record["stdout"] = result.stdout_text[-500:]
    except OrchestratorError as e:
        record.update(ok=False, reason=str(e))
    if record["ok"] and step.expect:
        present = {f.path: f.size for f in job.list_files()}
        missing = [path for path in step.expect if present.get(path, 0) == 0]
        if missing:
            record.update(ok=False, reason=f"missing or empty in build/: {', '.join(missing)}")
    record["ms"] = int((time.monotonic() - started) * 1000)
    return record


def check_skill(runner: SandboxRunner, root: Path, name: str) -> SkillOutcome:
    outcome = SkillOutcome(skill=name, ok=True, expected_failure=EXPECTED_TO_FAIL.get(name))
    started = time.monotonic()
    try:
        with runner.open_job(f"public-{name}", root / name, disk_mb=200) as job:
            for step in WORKFLOWS[name]:
                record = run_step(job, step)
                outcome.steps.append(record)
                if not record["ok"]:
                    outcome.ok = False
                    break
    except OrchestratorError as e:
        outcome.ok = False
        outcome.steps.append({"step": "open job", "ok": False, "reason": str(e)})
    outcome.seconds = round(time.monotonic() - started, 1)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=Path, required=True, help="the collection's skills/ folder")
    parser.add_argument("--only", default="", help="comma-separated skill names")
    parser.add_argument("--need", type=int, default=16, help="skills that must work for exit 0")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or sorted(p.name for p in args.skills.iterdir() if p.is_dir())
    unknown = [n for n in names if n not in WORKFLOWS]
    if unknown:
        parser.error(f"no workflow for {', '.join(unknown)} (known: {', '.join(sorted(WORKFLOWS))})")
    settings = load_settings()
    runner = SandboxRunner(settings.sandbox, work_dir=settings.cache_dir / "sandbox")
    outcomes = []
    try:
        for name in names:
            outcome = check_skill(runner, args.skills, name)
            outcomes.append(outcome)
            if not args.json:
                done = sum(1 for s in outcome.steps if s["ok"])
                status = "ok" if outcome.ok else "FAILED"
                note = f" (expected: {outcome.expected_failure})" if outcome.expected_failure and not outcome.ok else ""
                print(f"{name:22} {status:7} {done}/{len(WORKFLOWS[name])} steps {outcome.seconds:6.1f} s{note}")
                if not outcome.ok:
                    last = outcome.steps[-1]
                    print(f"    {last['step']}: {last.get('reason')}")
                    print(f"    {str(last.get('stdout', ''))[-400:]}\n    {str(last.get('stderr', ''))[-600:]}")
    finally:
        runner.close()
    working = sum(1 for o in outcomes if o.ok)
    if args.json:
        print(json.dumps({"working": working, "of": len(outcomes),
                          "skills": [o.__dict__ for o in outcomes]}, indent=1, default=str))
    else:
        print(f"{working} of {len(outcomes)} skills work")
    return 0 if working >= min(args.need, len(outcomes)) else 1


if __name__ == "__main__":
    sys.exit(main())
