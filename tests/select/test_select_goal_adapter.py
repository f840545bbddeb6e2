"""Goals are read with the shipped goal adapter: a low-rank update of the bundled model, pinned by sha256, merged
into a second copy of the weights; skills keep the published model's vectors (so cached libraries stay valid)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from orchestrator.config import SelectionSettings
from orchestrator.select.encoder import LOW_RANK_TARGETS, BertEncoder
from orchestrator.select.semantic import (
    GOAL_ADAPTER,
    MINILM,
    GoalAdapter,
    file_sha256,
    load_embedder,
    shipped_embedder,
)

GOALS = ["nobody finds our site on Google and traffic has been flat for a year", "my boss wants the numbers nicer"]


@pytest.fixture(scope="module")
def encoder() -> BertEncoder:
    directory = MINILM.directory()
    assert directory is not None, "the bundled model must be installed (ops/setup.sh)"
    return BertEncoder.load(directory)


def _ids(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids, mask = np.zeros((len(rows), width), np.int64), np.zeros((len(rows), width), np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return ids, mask


def test_the_shipped_adapter_matches_its_pin_and_fits_every_dense_weight_of_the_model(encoder):
    assert file_sha256(GOAL_ADAPTER.path) == GOAL_ADAPTER.sha256
    deltas = GOAL_ADAPTER.load()
    assert set(deltas) == {f"{i}.{t}" for i in range(len(encoder.layers)) for t in LOW_RANK_TARGETS}
    merged = encoder.with_low_rank(deltas)
    assert merged.layers[0].qkv.shape == encoder.layers[0].qkv.shape
    assert not np.array_equal(merged.layers[0].qkv, encoder.layers[0].qkv)
    # The published weights are not touched: the skills' encoder stays as it was.
    assert np.array_equal(encoder.layers[0].qkv, BertEncoder.load(MINILM.directory()).layers[0].qkv)  # type: ignore[arg-type]


def test_a_low_rank_update_adds_b_times_a_to_the_weight_it_names(encoder):
    rng = np.random.default_rng(0)
    hidden = encoder.hidden
    a, b = rng.normal(size=(2, hidden)).astype(np.float32), rng.normal(size=(hidden, 2)).astype(np.float32)
    merged = encoder.with_low_rank({"1.key": (a, b)})
    keys = slice(hidden, 2 * hidden)
    assert np.allclose(merged.layers[1].qkv[:, keys], encoder.layers[1].qkv[:, keys] + (b @ a).T, atol=1e-5)
    assert np.array_equal(merged.layers[1].qkv[:, :hidden], encoder.layers[1].qkv[:, :hidden])
    assert np.array_equal(merged.layers[0].qkv, encoder.layers[0].qkv)
    wide = rng.normal(size=(2, hidden)).astype(np.float32), rng.normal(size=(4 * hidden, 2)).astype(np.float32)
    grown = encoder.with_low_rank({"2.intermediate": wide})
    assert np.allclose(grown.layers[2].intermediate, encoder.layers[2].intermediate + (wide[1] @ wide[0]).T, atol=1e-5)


def test_a_zero_update_changes_nothing_and_a_wrong_one_is_refused(encoder):
    hidden = encoder.hidden
    nothing = (np.zeros((4, hidden), np.float32), np.zeros((hidden, 4), np.float32))
    zero = {f"{i}.{t}": nothing for i in (0, 5) for t in ("query", "value")}
    ids, mask = _ids([[101, 7592, 2088, 102], [101, 2054, 102]])
    assert np.allclose(encoder.with_low_rank(zero).hidden_states(ids, mask), encoder.hidden_states(ids, mask))
    with pytest.raises(ValueError, match="no dense weight"):
        encoder.with_low_rank({"9.query": zero["0.query"]})
    with pytest.raises(ValueError, match="no dense weight"):
        encoder.with_low_rank({"0.embeddings": zero["0.query"]})
    with pytest.raises(ValueError, match="shape"):
        encoder.with_low_rank({"0.output": zero["0.query"]})


def test_goals_are_read_with_the_adapter_and_skills_with_the_published_weights():
    adapted = shipped_embedder()
    plain = shipped_embedder(goal_adapter=False)
    assert adapted is not None and plain is not None
    assert adapted.goal_adapter_in_use and not plain.goal_adapter_in_use
    assert adapted.model_id == plain.model_id  # the skills' cached vectors are shared
    assert np.allclose(adapted.embed(GOALS), plain.embed(GOALS), atol=1e-6)
    assert np.allclose(plain.embed(GOALS, goal=True), plain.embed(GOALS), atol=1e-6)
    moved = np.sum(adapted.embed(GOALS, goal=True) * plain.embed(GOALS, goal=True), axis=1)
    assert np.all(moved < 0.999) and np.all(moved > 0.5)  # moved, not replaced


def test_settings_turn_the_adapter_off():
    assert SelectionSettings().goal_adapter is True
    assert SelectionSettings(goal_adapter=False).goal_adapter is False


@pytest.mark.parametrize("damage", ["flip a byte", "missing", "not an npz"])
def test_an_adapter_file_that_differs_from_its_pin_is_refused_and_goals_are_read_plainly(tmp_path, damage):
    path = tmp_path / "adapter.npz"
    shutil.copy(GOAL_ADAPTER.path, path)
    if damage == "flip a byte":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"hello")
    embedder = load_embedder(MINILM, goal_adapter=GoalAdapter(path=path, sha256=GOAL_ADAPTER.sha256))
    assert embedder is not None
    with capture_logs() as logs:
        in_use = embedder.goal_adapter_in_use
    assert not in_use
    assert [e["event"] for e in logs] == ["select.goal_adapter_refused"]
    plain = shipped_embedder(goal_adapter=False)
    assert plain is not None
    assert np.allclose(embedder.embed(GOALS, goal=True), plain.embed(GOALS), atol=1e-6)


def test_an_adapter_that_matches_its_pin_but_not_the_model_is_refused(tmp_path):
    path = tmp_path / "adapter.npz"
    np.savez(path, **{"0.query.A": np.zeros((2, 7), np.float16), "0.query.B": np.zeros((384, 2), np.float16)})
    embedder = load_embedder(MINILM, goal_adapter=GoalAdapter(path=path, sha256=file_sha256(path)))
    assert embedder is not None
    with capture_logs() as logs:
        assert not embedder.goal_adapter_in_use
    assert "shape" in logs[0]["problem"]


def test_the_adapter_ships_as_package_data():
    root = Path(__file__).resolve().parents[2]
    assert GOAL_ADAPTER.path.parent == root / "orchestrator" / "select" / "data"
    package_data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "select/data/*.npz" in package_data["orchestrator"]
