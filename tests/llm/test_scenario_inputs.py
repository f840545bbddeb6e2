"""A scenario may name its goal's input files, relative to the scenario file (so `run` finds them from anywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.llm.scenario import load_scenario, scenario_inputs

STEP = "steps: [{reply: {content: ok}}]\n"


def test_inputs_resolve_from_the_scenario_files_folder(tmp_path: Path):
    folder = tmp_path / "scenarios"
    (folder / "data").mkdir(parents=True)
    (folder / "s.yaml").write_text("goal: g\ninputs: [data/a.csv, b.txt]\n" + STEP)
    assert scenario_inputs(load_scenario(folder / "s.yaml")) == [folder / "data" / "a.csv", folder / "b.txt"]


def test_a_single_input_may_be_written_as_a_string_and_none_means_no_inputs(tmp_path: Path):
    (tmp_path / "one.yaml").write_text("goal: g\ninputs: a.csv\n" + STEP)
    (tmp_path / "none.yaml").write_text("goal: g\n" + STEP)
    assert scenario_inputs(load_scenario(tmp_path / "one.yaml")) == [tmp_path / "a.csv"]
    assert scenario_inputs(load_scenario(tmp_path / "none.yaml")) == []


def test_inputs_that_are_not_text_are_reported_with_the_field(tmp_path: Path):
    (tmp_path / "bad.yaml").write_text("goal: g\ninputs: [{path: a.csv}]\n" + STEP)
    with pytest.raises(ConfigError, match=r"inputs\[0\]"):
        load_scenario(tmp_path / "bad.yaml")
