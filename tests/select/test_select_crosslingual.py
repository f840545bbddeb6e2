"""Cross-language retrieval: an English goal finds a skill written in Chinese, and a Chinese goal an English skill."""

from __future__ import annotations

from pathlib import Path

from select_corpus import write_skill

from orchestrator.select.gloss import dictionary, english_terms, segment
from orchestrator.select.index import SkillIndex, skill_docs
from orchestrator.select.lexical import bilingual_terms, tokenize
from orchestrator.select.shortlist import model_invocable
from orchestrator.skills.loader import SkillLibrary


def _index(root: Path) -> SkillIndex:
    library = SkillLibrary(root)
    return SkillIndex.build(skill_docs(library, model_invocable(library.l1_index())), None)


def _library(root: Path) -> Path:
    write_skill(
        root,
        "dingyue",  # its name is pinyin: only its Chinese says what it does
        name="dingyue",
        description="为销售咖啡豆和宠物食品的商店设计订阅服务及自动续费管理。",
        body="## 适用场景\n当用户提及订阅、自动续费、客户流失率或支付失败时使用。",
    )
    write_skill(
        root,
        "cafe-menu",
        name="cafe-menu",
        description="Write a cafe menu: coffee drinks, pastries and their prices.",
        body="Lay out the menu by section and keep the prices aligned.",
    )
    write_skill(
        root,
        "pet-portraits",
        name="pet-portraits",
        description="Draw stylised portraits of pets from photos.",
        body="Ask for a clear photo of the pet.",
    )
    write_skill(
        root,
        "meeting-transcripts",
        name="meeting-transcripts",
        description="Transcribe meeting recordings into text with speakers and timestamps.",
        body="Split the audio by speaker, then write the transcript.",
    )
    return root


def test_an_english_goal_finds_a_skill_written_only_in_chinese(tmp_path):
    index = _index(_library(tmp_path / "s"))
    hits = index.search("Our coffee shop wants a subscription with automatic renewal and fewer failed payments")
    assert hits[0].id == "dingyue"


def test_a_chinese_goal_finds_a_skill_written_only_in_english(tmp_path):
    index = _index(_library(tmp_path / "s"))
    assert index.search("帮我把会议录音转成文字")[0].id == "meeting-transcripts"


def test_without_its_english_words_the_chinese_skill_shares_nothing_with_the_goal():
    # What the specifications above rely on: the plain terms of the two languages never meet.
    goal = set(tokenize("a subscription with automatic renewal"))
    skill = "设计订阅服务及自动续费管理"
    assert not goal & set(tokenize(skill))
    assert goal & set(bilingual_terms(skill)) >= set(tokenize("subscription automatic"))


def test_chinese_runs_are_cut_into_dictionary_words_longest_first():
    words = dictionary()
    assert segment("自动续费", words) == ["自动", "续费"]
    assert segment("咖啡豆", words) == ["咖啡豆"]
    assert {"coffee", "beans"} <= set(english_terms("咖啡豆"))


def test_text_without_chinese_adds_no_english_words():
    assert english_terms("plain English text") == []
    assert bilingual_terms("Invoices for customers") == tokenize("Invoices for customers")


def test_a_chinese_goal_is_read_as_dictionary_english_by_the_embedder_too(tmp_path):
    from orchestrator.select.semantic import shipped_embedder

    root = tmp_path / "s"
    write_skill(
        root,
        "marine-forecast",
        name="marine-forecast",
        description="Swell and wind at any spot offshore, hour by hour.",
        body="None.",
    )
    write_skill(
        root,
        "pet-portraits",
        name="pet-portraits",
        description="Draw stylised portraits of pets from photos.",
        body="None.",
    )
    write_skill(
        root,
        "cafe-menu",
        name="cafe-menu",
        description="Write a cafe menu with coffee drinks, pastries and prices.",
        body="None.",
    )
    write_skill(
        root,
        "meeting-minutes",
        name="meeting-minutes",
        description="Turn a meeting recording into minutes with action items.",
        body="None.",
    )
    library = SkillLibrary(root)
    docs = skill_docs(library, model_invocable(library.l1_index()))
    goal = "明天开船出去会不会有危险"  # will taking the boat out tomorrow be dangerous: no word of the skill's
    assert not SkillIndex.build(docs).search(goal, k=1)  # words alone find nothing...
    hits = SkillIndex.build(docs, embedder=shipped_embedder()).search(goal, k=1)
    assert hits[0].id == "marine-forecast"  # ...its dictionary English does (the Chinese itself ranked minutes first)


def test_hiragana_pairs_are_grammar_and_not_index_terms():
    terms = tokenize("テストがたまに落ちるので直してほしい")
    assert {"テス", "スト", "落ち"} <= set(terms)
    assert not {"して", "ほし", "たま", "ので"} & set(terms)
    assert tokenize("ひらがな") == []  # a run of hiragana alone says nothing a skill could be found by


def test_a_japanese_goal_is_not_pulled_to_a_skill_sharing_only_its_grammar(tmp_path):
    root = tmp_path / "s"
    write_skill(root, "flaky-tests", name="flaky-tests", description="不安定なテストを見つけて原因を直す。", body="無")
    write_skill(
        root,
        "minutes",
        name="minutes",
        description="会議の内容をまとめてから、してほしいことを一覧にしてください。",
        body="無",
    )
    hits = _index(root).search("テストがたまに落ちるのでなんとかしてほしい", k=2)
    assert [h.id for h in hits] == ["flaky-tests"]
