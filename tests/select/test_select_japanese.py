"""Japanese goals find English skills: Japanese (kana and kanji alike) is read as the English JMdict gives for its
words, which SudachiPy cuts out and puts in dictionary form."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from select_corpus import write_skill

from orchestrator.select import japanese
from orchestrator.select.gloss import english_reading, english_terms
from orchestrator.select.index import SkillIndex, skill_docs
from orchestrator.select.lexical import tokenize
from orchestrator.select.semantic import shipped_embedder
from orchestrator.select.shortlist import model_invocable
from orchestrator.skills.loader import SkillLibrary

SKILLS = {
    "minutes-writer": "Write the minutes of a meeting from its transcript: decisions, owners, deadlines.",
    "flaky-tests": "Find the cause of a test that fails only sometimes and fix it.",
    "seo-audit": "Improve how a website ranks in search engines: titles, links, sitemap.",
    "audio-extractor": "Extract the sound track of a video file.",
    "quote-request": "Draft an email asking a supplier for a price estimate.",
}
# Goals as people write them, sharing no word and no character with the skill they need (the skills have no kanji).
GOALS = {
    "昨日の役員会議の文字起こしから議事録を作って": "minutes-writer",
    "テストがたまに落ちる。原因を探して直してほしい": "flaky-tests",
    "取引先に見積もりをお願いするメールを書いて": "quote-request",
}
# Found by meaning only: "site", "retrieval" and "come out" are not the skill's words.
BY_MEANING = {**GOALS, "うちのサイト、検索で全然出てこないんだけど": "seo-audit"}


def _library(root: Path) -> list:
    for skill_id, description in SKILLS.items():
        write_skill(root, skill_id, name=skill_id, description=description, body="Follow the steps.")
    library = SkillLibrary(root)
    return skill_docs(library, model_invocable(library.l1_index()))


@pytest.mark.parametrize(("goal", "skill"), GOALS.items())
def test_a_japanese_goal_finds_its_english_skill_by_its_words_alone(tmp_path, goal, skill):
    docs = _library(tmp_path / "skills")
    assert not set(tokenize(goal)) & set(tokenize(SKILLS[skill]))
    assert SkillIndex.build(docs).search(goal, k=3)[0].id == skill


@pytest.mark.parametrize(("goal", "skill"), BY_MEANING.items())
def test_a_japanese_goal_finds_its_english_skill_by_words_and_meaning(tmp_path, goal, skill):
    index = SkillIndex.build(_library(tmp_path / "skills"), embedder=shipped_embedder())
    assert index.search(goal, k=3)[0].id == skill


def test_kana_words_are_read_in_their_dictionary_form_and_compounds_the_dictionary_knows_are_joined():
    reading = english_reading("テストがたまに落ちて、文字起こしも議事録もない")
    # 落ちて -> 落ちる (to fall); 文字 + 起こし -> 文字起こし (transcription); 議事 + 録 -> 議事録 (minutes)
    assert {"fall", "transcription", "minutes"} <= set(reading.split())
    assert {"fall", "transcription", "minutes"} <= set(english_terms("テストがたまに落ちて、文字起こしも議事録もない"))
    # Particles, auxiliaries and punctuation carry nothing: no Japanese is left in the reading.
    assert not japanese.has_kana(reading) and "、" not in reading


def test_latin_words_inside_a_japanese_goal_stay_where_they_are():
    assert english_reading("pandasでメモリが足りなくて落ちる").split()[:2] == ["pandas", "memory"]


@pytest.mark.parametrize(
    "hostile",
    [
        "テストがたまに落ちる。原因を探して直して" * 50_000,  # a megabyte of sentences
        "字の" * 500_000,  # one run of a megabyte without a break
        "あa" * 500_000,  # half a million runs of one character
    ],
)
def test_a_hostile_megabyte_of_japanese_is_read_only_up_to_the_limit(monkeypatch, hostile):
    read = japanese.reader()
    assert read is not None
    analyzed: list[int] = []
    morphemes = read.morphemes

    def counting(text: str) -> list[tuple[str, str, str, str]]:
        analyzed.append(len(text))
        return morphemes(text)

    monkeypatch.setattr(read, "morphemes", counting)
    started = time.process_time()
    reading, terms = english_reading(hostile), english_terms(hostile)
    # The bound is on the work (characters given to the analyzer), not on this machine's speed; the CPU time is a
    # backstop far above the measured 0.1-0.5 s per call.
    assert sum(analyzed) <= 2 * japanese.MAX_CHARS
    assert time.process_time() - started < 20
    # Japanese past the limit is dropped from the reading, not passed on; the English added is bounded too.
    assert not japanese.has_kana(reading) and "字" not in reading
    assert len(terms) <= japanese.MAX_ENGLISH * japanese.MAX_CHARS


def test_english_text_never_loads_the_japanese_dictionaries():
    code = (
        "import sys\n"
        "from orchestrator.select.gloss import english_reading, english_terms\n"
        "english_reading('Write the minutes of the board meeting'); english_terms('Find the flaky test')\n"
        "english_reading('帮我把会议录音转成文字')\n"  # Chinese (no kana) uses CC-CEDICT only
        "loaded = {'sudachipy', 'jamdict_data'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_without_the_japanese_dictionaries_kanji_are_read_as_chinese_and_nothing_fails():
    code = (
        "import sys\n"
        "sys.modules['sudachipy'] = None\n"  # as if the `ja` extra were not installed
        "from orchestrator.select.gloss import english_reading\n"
        "print(english_reading('今月の売上を計算して'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    reading = done.stdout.splitlines()[-1].split()
    assert "count" in reading and "して" in reading  # 計算 through CC-CEDICT; the kana stay unread
    assert "select.japanese_unavailable" in done.stdout + done.stderr


def test_japanese_is_read_here_as_the_app_images_build_requires():
    # The app image's build runs the same check (ops/images/app/Dockerfile); `.[dev]` installs the `ja` extra here.
    assert japanese.unavailable() is None


def test_the_check_names_a_package_of_the_ja_extra_that_is_missing():
    code = (
        "import sys\n"
        "sys.modules['jamdict_data'] = None\n"  # as if the image's wheelhouse lacked JMdict
        "from orchestrator.select.japanese import unavailable\n"
        "print(unavailable())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.splitlines()[-1] == "not installed: jamdict_data (the `ja` extra of pyproject.toml)"


def test_the_check_fails_when_the_sample_goal_does_not_come_out_in_the_english_it_must(monkeypatch):
    goal, _ = japanese.SAMPLE
    monkeypatch.setattr(japanese, "SAMPLE", (goal, ("fall", "submarine")))
    reason = japanese.unavailable()
    assert reason is not None and reason.endswith("without submarine")


_JAPANESE_ISH = st.text(
    alphabet=st.sampled_from(list("あいうえおのをにはがてしたいるテストーメモリ字落起議録、。「」々〆 aZ09\n\t")),
    max_size=300,
)


@settings(max_examples=200, deadline=None)
@given(_JAPANESE_ISH)
def test_any_mix_of_kana_kanji_marks_and_latin_reads_as_lower_case_english_words_without_japanese(text):
    # Hostile or odd input (lone marks, kana runs the dictionary lacks, Latin between kanji) never raises.
    reading = english_reading(text)
    terms = english_terms(text)
    assert isinstance(reading, str)
    assert not japanese.is_japanese(text) or not japanese.has_kana(reading)
    assert all(t.isascii() and t == t.lower() and t.strip() == t and t for t in terms)


def test_a_chinese_text_quoting_a_japanese_word_is_still_read_as_chinese():
    chinese = "本工具可以分析社交媒体上的用户评论和情绪，例如日语评论里的“いい”和“ダメ”，并生成每日的舆情报告。"
    assert japanese.has_kana(chinese) and not japanese.is_japanese(chinese)
    assert {"analysis", "report"} & set(english_terms(chinese))  # CC-CEDICT's words: 分析, 报告
    assert japanese.is_japanese("営業日報の自動作成")  # kanji compounds and one particle are Japanese still
