"""`bench tokens`: the planner's prompt stays small as the library grows, and a second run costs less."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_tokens_compares_the_shortlist_prompt_with_every_skill_md_at_three_sizes(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "bench", "tokens", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
        env={**os.environ, "ORCH_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    runs = result["runs"]
    assert [r["skills"] for r in runs] == [10, 100, 1000]
    assert all(r["shortlist_contains_target"] for r in runs)
    assert all(r["planner_prompt_tokens"] < 4000 for r in runs)
    assert runs[-1]["naive_prompt_tokens"] > 50 * runs[-1]["planner_prompt_tokens"]
    assert result["first_run_tokens"] > 0
    assert result["second_run_tokens"] <= result["first_run_tokens"] * 0.5  # identical requests: the response cache
    assert result["second_run_saving"] >= 0.5 and result["second_run_response_cache_hits"] > 0
