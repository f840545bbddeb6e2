"""One time model: the ceilings, each phase's time limits and the broker's visibility timeout agree. Every budget
the ceilings allow is accepted (and its phases end before Redis would hand them to a second worker); the visibility
timeout the Celery app uses is the one derived from the ceilings."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from worker_helpers import REPO, Cluster, goal_line

from orchestrator.config import load_settings
from orchestrator.worker.celery_app import create_app
from orchestrator.worker.submit import parse_lines
from orchestrator.worker.time_limits import hard_limit_s, soft_limit_s, visibility_timeout_s
from orchestrator.workflow.phases import PhaseKind
from orchestrator.workflow.request import BudgetOverrides, budgeted


def _settings(tmp_path: Path, **overrides: object):
    return load_settings(skills_dir=REPO / "skills", output_root=tmp_path / "out", scenario_dirs=[REPO], **overrides)


def test_the_budgets_refused_last_round_are_accepted(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    lines = [
        goal_line("t1", budgets={"time_budget_ms": 300_000}),
        goal_line("t2", budgets={"script_timeout_s": 120}),
        goal_line("t3", budgets={"time_budget_ms": settings.ceilings.time_budget_ms,
                                 "script_timeout_s": settings.ceilings.script_timeout_s}),
    ]
    good, bad = parse_lines(lines, settings)
    assert bad == [] and [g.line for g in good] == [1, 2, 3]
    over = goal_line("t4", budgets={"time_budget_ms": settings.ceilings.time_budget_ms + 1})
    _, refused = parse_lines([over], settings)
    assert "over the ceiling" in refused[0].reason  # what still refuses a budget is the ceiling, named as such


@hypothesis_settings(max_examples=60, deadline=None)
@given(
    ceiling_ms=st.integers(1_000, 20_000_000),
    ceiling_script_s=st.floats(1, 10_000),
    asked_share=st.floats(0.001, 1.0),
    request_timeout_s=st.floats(1, 3_600),
    retries=st.integers(0, 5),
    margin_s=st.floats(0, 2_000),
)
def test_every_phase_of_a_budget_within_the_ceilings_ends_before_the_visibility_timeout(
    ceiling_ms: int, ceiling_script_s: float, asked_share: float, request_timeout_s: float, retries: int,
    margin_s: float,
) -> None:
    settings = load_settings(
        ceilings={"time_budget_ms": ceiling_ms, "script_timeout_s": ceiling_script_s},
        model={"request_timeout_s": request_timeout_s, "max_retries": retries},
        worker={"time_limit_margin_s": margin_s},
    )
    asked = BudgetOverrides(time_budget_ms=max(1, int(ceiling_ms * asked_share)),
                            script_timeout_s=ceiling_script_s * asked_share)
    job = budgeted(settings, asked)
    visibility = visibility_timeout_s(settings)
    for phase in (PhaseKind.PLAN, PhaseKind.ACT, PhaseKind.REFLECT):
        assert hard_limit_s(job, phase) < visibility
    assert create_app(settings).conf.broker_transport_options["visibility_timeout"] == visibility


def test_a_goal_with_budgets_at_the_ceilings_runs_on_a_worker(shared_cluster: Cluster) -> None:
    line = goal_line("at-the-ceilings", budgets={"time_budget_ms": 600_000, "script_timeout_s": 120})
    done = shared_cluster.cli("submit", "-", "--wait", "--timeout", "300", "--json", stdin=line, timeout=360)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [j["state"] for j in json.loads(done.stdout)["jobs"]] == ["done"]


def test_each_phase_is_limited_for_its_one_unit_of_work_as_the_operator_guide_says() -> None:
    """A retry is an Act phase and a re-plan a Plan phase of their own: no phase's limit covers several Acts, and
    the numbers the operator guide gives are the ones the workers use."""
    settings = load_settings()
    soft = {kind: soft_limit_s(settings, kind) for kind in (PhaseKind.PLAN, PhaseKind.ACT, PhaseKind.REFLECT)}
    assert max(soft.values()) < 2 * soft[PhaseKind.ACT]
    guide = " ".join((REPO / "docs" / "guides" / "operator.md").read_text(encoding="utf-8").split())
    shown = ", ".join(f"{kind.value.capitalize()} {soft[kind]:.0f} s" for kind in soft)
    assert f"With the defaults: {shown}." in guide
    assert f"{visibility_timeout_s(settings):,.0f} s with the default ceilings" in guide
