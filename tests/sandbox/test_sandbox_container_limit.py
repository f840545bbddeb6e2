"""The wall-clock limit is enforced inside the container too, so a script cannot outlive it if its caller dies."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from orchestrator.sandbox.limits import LAUNCHER, ScriptCommand


def test_the_launcher_kills_a_script_at_its_limit_without_any_host_watchdog(sandbox_image: str, tmp_path: Path):
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "slow.sh").write_text("sleep 60\necho never\n")
    skill.chmod(0o755)
    (skill / "slow.sh").chmod(0o644)
    header = ScriptCommand(script="slow.sh", target="slow.sh", interpreter="bash").launcher_header(1)
    assert header.startswith(b"3\n")
    started = time.monotonic()
    # Plain `docker run` with no timeout of ours: only the launcher inside the container can stop the script.
    proc = subprocess.run(
        ["docker", "run", "-i", "--rm", "--network", "none", "--label", "orchtest=container-limit",
         "-v", f"{skill}:/skill:ro", "-w", "/skill", "--user", "65534:65534", sandbox_image, *LAUNCHER],
        input=header + b"{}", capture_output=True, timeout=50,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"the script ran {elapsed:.1f}s past a 1 s limit (+2 s grace)"
    assert proc.returncode == 137 and b"never" not in proc.stdout
