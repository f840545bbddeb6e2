"""Goals and skills in German, Spanish, French, Portuguese, Italian and Dutch are read as the English FreeDict gives
for their words; English text is never touched."""

from __future__ import annotations

import gzip
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from select_corpus import write_skill

from orchestrator.select import european, gloss
from orchestrator.select.gloss import english_reading, english_terms
from orchestrator.select.index import SkillIndex, skill_docs
from orchestrator.select.lexical import tokenize
from orchestrator.select.semantic import shipped_embedder
from orchestrator.select.shortlist import model_invocable
from orchestrator.skills.loader import SkillLibrary

ENGLISH_SKILLS = {
    "todo-list": "Add, complete and list tasks on the user's to-do list.",
    "meeting-minutes": "Write the minutes of a meeting from its transcript: decisions, owners, deadlines.",
    "stock-quotes": "Look up the current share price and market value of a listed company.",
    "sleep-coach": "Help with insomnia: track sleep, find why someone wakes at night, suggest habits.",
    "expense-report": "Summarise monthly expenses from receipts into a spending report.",
    "translate-doc": "Translate a document into another language, keeping its layout.",
}
# The same skills as a library of Chinese descriptions (most public skills in library D are written in Chinese).
CHINESE_SKILLS = {
    "todo-list": "待办事项清单：添加、完成和列出任务。",
    "meeting-minutes": "根据会议记录稿撰写会议纪要：决定、负责人、截止日期。",
    "stock-quotes": "查询上市公司的当前股价和市值。",
    "sleep-coach": "帮助改善失眠：记录睡眠，找出夜里醒来的原因。",
    "expense-report": "把每月的收据汇总成支出报告。",
    "translate-doc": "把文件翻译成另一种语言，保留排版。",
}
# Goals as people write them, sharing no word with the skill they need.
GOALS = {
    "Setz 'Zahnarzt anrufen' auf meine Aufgabenliste": "todo-list",
    "Erstelle ein Protokoll aus dieser Besprechungsabschrift": "meeting-minutes",
    "¿Cuánto dinero gastamos el mes pasado? Quiero un resumen de los gastos": "expense-report",
    "Je me réveille toutes les nuits à 3h et je suis épuisé": "sleep-coach",
    "Quero um resumo das minhas despesas do mês passado": "expense-report",
    "Traduci questo documento in tedesco": "translate-doc",
    "Hoeveel kost een aandeel van Philips vandaag?": "stock-quotes",
}
ENGLISH_GOALS = [
    "Convert 72 degrees Fahrenheit to Celsius",
    "Write the minutes of the board meeting",
    "Plan a team offsite in São Paulo and Zürich next spring",
    "Summarise the Müller GmbH contract for the café owners",
    "die roll simulator: was it a fair die?",
    "$pdf merge a.pdf and b.pdf",
    "whats 15% of 240",
    "Deploy the API to production and roll back if the health check fails",
]


def _docs(root: Path, skills: dict[str, str]) -> list:
    for skill_id, description in skills.items():
        write_skill(root, skill_id, name=skill_id, description=description, body="Follow the steps.")
    library = SkillLibrary(root)
    return skill_docs(library, model_invocable(library.l1_index()))


@pytest.fixture(scope="module")
def english_index(tmp_path_factory) -> SkillIndex:
    return SkillIndex.build(_docs(tmp_path_factory.mktemp("en"), ENGLISH_SKILLS), embedder=shipped_embedder())


@pytest.fixture(scope="module")
def chinese_index(tmp_path_factory) -> SkillIndex:
    return SkillIndex.build(_docs(tmp_path_factory.mktemp("zh"), CHINESE_SKILLS), embedder=shipped_embedder())


@pytest.mark.parametrize(("goal", "skill"), GOALS.items())
def test_a_european_goal_finds_its_english_skill(english_index, goal, skill):
    assert not set(tokenize(goal)) & set(tokenize(ENGLISH_SKILLS[skill])) - {"a", "s"}
    assert english_index.search(goal, k=3)[0].id == skill


@pytest.mark.parametrize(("goal", "skill"), GOALS.items())
def test_a_european_goal_finds_its_skill_written_in_chinese(chinese_index, goal, skill):
    assert chinese_index.search(goal, k=3)[0].id == skill


def test_a_european_goal_finds_its_english_skill_by_words_alone(tmp_path):
    index = SkillIndex.build(_docs(tmp_path / "s", ENGLISH_SKILLS))
    assert index.search("Setz 'Zahnarzt anrufen' auf meine Aufgabenliste", k=3)[0].id == "todo-list"


def test_a_skill_written_in_german_is_found_by_an_english_goal(tmp_path):
    skills = {**ENGLISH_SKILLS, "rechnungen": "Erstellt Rechnungen für Kunden und verschickt sie per E-Mail."}
    del skills["expense-report"]
    index = SkillIndex.build(_docs(tmp_path / "s", skills), embedder=shipped_embedder())
    assert index.search("Make an invoice for my customer", k=3)[0].id == "rechnungen"


@pytest.mark.parametrize("goal", ENGLISH_GOALS)
def test_an_english_goal_is_never_read_as_another_language(goal):
    assert european.language(goal) is None
    assert english_reading(goal) == goal
    assert english_terms(goal) == []


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("¿A cuánto cotiza Apple hoy?", "es"),
        ("Setz 'Zahnarzt anrufen' auf meine Aufgabenliste", "de"),
        ("Je veux commencer une nouvelle fonctionnalité sans toucher à mon travail en cours", "fr"),
        ("Quero um resumo das minhas despesas do mês passado", "pt"),
        ("Traduci questo documento in tedesco e fammi un riassunto", "it"),
        ("Maak een samenvatting van deze vergadering voor het team", "nl"),
    ],
)
def test_short_goals_are_recognised(text, language):
    assert european.language(text) == language


def test_a_german_compound_the_dictionary_lacks_is_read_as_its_parts():
    assert european.dictionary("de") is not None
    assert european.headwords("Besprechungsabschrift", "de") is not None
    words = {
        w
        for english in european.english_words("Erstelle ein Protokoll aus dieser Besprechungsabschrift")
        for w in english
    }
    assert {"minutes", "transcript"} <= words
    # Grammar words carry nothing ("ein", "aus", "dieser").
    assert european.headwords("dieser", "de") == []


def test_a_verb_reads_as_its_common_sense_and_a_noun_as_a_noun():
    assert {"phone", "call"} & {w for e in european.english_words("Bitte den Zahnarzt anrufen und fragen") for w in e}


def test_the_dictzip_reader_returns_the_bytes_gzip_does():
    spanish = european.dictionary("es")
    assert spanish is not None
    with gzip.open(european.DICTIONARY_DIR / "freedict-spa-eng.dict.dz") as compressed:
        whole = compressed.read()
    for headword in random.Random(7).sample(sorted(spanish.index), 100):
        for offset, length in spanish.entries(headword):
            assert spanish.data.read(offset, length) == whole[offset : offset + length]


def test_the_cache_tag_names_the_european_reading():
    assert f"-eu{european.READING_VERSION}" in gloss.reading_tag()
    assert "de" in gloss.reading_tag().split("-eu")[1]


@pytest.mark.parametrize(
    "hostile",
    [
        "Bitte erstelle eine Liste aller Aufgaben für morgen. " * 20_000,  # a megabyte of German
        "Donaudampfschifffahrtsgesellschaftskapitän" * 25_000 + " und die Aufgaben",  # one megabyte-long word
        "¿Qué\x00\x1b[31m es\u202e esto?\x07 " * 30_000,  # control characters and bidi overrides in Spanish
        "Le résumé 会议 der Sitzung \u0627\u0644\u0639\u0631\u0628\u064a\u0629 and the café " * 10_000,  # scripts mixed
    ],
)
def test_hostile_text_is_read_only_up_to_the_limit(hostile):
    started = time.process_time()
    reading, terms = english_reading(hostile), english_terms(hostile)
    # A backstop far above the measured time; the bound is on the characters read (MAX_CHARS).
    assert time.process_time() - started < 20
    assert isinstance(reading, str) and len(terms) <= european.MAX_ENGLISH * european.MAX_CHARS
    if european.language(hostile) is not None:
        assert len(reading) <= 10 * european.MAX_CHARS


_LATIN_ISH = st.text(
    alphabet=st.sampled_from(list("aeiouäöüßéèçñãõ¿¡'’-. ,\n\tZdrstnlmkgbpwhjAEIOU019\x00\u202e")), max_size=300
)


@settings(max_examples=200, deadline=None)
@given(_LATIN_ISH)
def test_any_latin_text_reads_as_text_and_lower_case_english_terms(text):
    reading = english_reading(text)
    terms = english_terms(text)
    assert isinstance(reading, str)
    assert all(t.isascii() and t == t.lower() and t.strip() == t and t for t in terms)


def test_english_text_never_loads_the_language_model_or_a_dictionary():
    code = (
        "import sys\n"
        "from orchestrator.select.gloss import english_reading, english_terms\n"
        "english_reading('Write the minutes of the board meeting'); english_terms('Find the flaky test in CI')\n"
        "english_reading('Plan a trip to Zurich and Geneva with the team')\n"
        "loaded = {'py3langid'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_goal_read_for_its_words_and_for_its_meaning_has_its_language_told_once(monkeypatch):
    identifier = european._identifier()
    calls: list[str] = []

    class Counting:
        def classify(self, text: str) -> tuple[str, float]:
            calls.append(text)
            return identifier.classify(text)

    monkeypatch.setattr(european, "_identifier", Counting)
    goal = "Pourrais-tu résumer la réunion de ce matin pour l'équipe ?"
    european._language.cache_clear()
    try:
        english_terms(goal)
        english_reading(goal)
        english_terms(goal)
    finally:
        european._language.cache_clear()
    assert calls == [goal]


def test_without_the_dictionaries_a_text_is_left_as_it_is_with_a_warning(tmp_path):
    (tmp_path / "freedict-deu-eng.index").write_text("zahnarzt\tA\tB\n", encoding="utf-8")
    (tmp_path / "freedict-deu-eng.dict.dz").write_bytes(gzip.compress(b"not a dictzip file"))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from orchestrator.select import european\n"
        f"european.DICTIONARY_DIR = Path({str(tmp_path)!r})\n"
        "from orchestrator.select.gloss import english_reading, english_terms\n"
        "goal = 'Setz Zahnarzt anrufen auf meine Aufgabenliste'\n"
        "assert english_reading(goal) == goal and english_terms(goal) == []\n"
        "spanish = '¿Cuánto dinero gastamos el mes pasado?'\n"
        "assert english_reading(spanish) == spanish and english_terms(spanish) == []\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "select.european_unavailable" in done.stdout + done.stderr


def test_without_the_language_model_nothing_is_read_and_nothing_fails():
    code = (
        "import sys\n"
        "sys.modules['py3langid'] = None\n"
        "from orchestrator.select.gloss import english_reading, reading_tag\n"
        "goal = 'Setz Zahnarzt anrufen auf meine Aufgabenliste'\n"
        "assert english_reading(goal) == goal\n"
        "assert '-eu' not in reading_tag()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_every_language_of_the_app_images_check_is_read_here():
    # The app image's build runs the same check (ops/images/app/Dockerfile); ops/setup.sh installs all six here.
    assert european.unread_languages() == []


_CACHED = (european.available_languages, european.installed, european.dictionary, european.senses, european._language)


def test_the_check_names_a_language_whose_dictionary_is_missing(monkeypatch, tmp_path):
    for code in ("deu", "spa"):
        for suffix in ("index", "dict.dz"):
            (tmp_path / f"freedict-{code}-eng.{suffix}").symlink_to(
                european.DICTIONARY_DIR / f"freedict-{code}-eng.{suffix}"
            )
    monkeypatch.setattr(european, "DICTIONARY_DIR", tmp_path)
    for cached in _CACHED:
        cached.cache_clear()
    try:
        assert european.unread_languages() == ["fr", "pt", "it", "nl"]
    finally:
        monkeypatch.undo()
        for cached in _CACHED:
            cached.cache_clear()


def test_the_app_image_and_the_host_set_up_install_every_dictionary_the_reader_knows():
    root = Path(__file__).resolve().parents[2]
    dockerfile = (root / "ops/images/app/Dockerfile").read_text(encoding="utf-8")
    setup = (root / "ops/setup.sh").read_text(encoding="utf-8")
    for code, _, _ in european.LANGUAGES.values():
        assert f"dict-freedict-{code}-eng" in dockerfile
        assert code in setup.split("for code in ", 1)[1].split(";", 1)[0]
    assert "unread_languages" in dockerfile  # the build fails unless all six are read


@pytest.mark.parametrize(("typed", "written"), [("laedt", "lädt"), ("groesse", "größe"), ("fuer", "für")])
def test_a_german_word_typed_without_umlauts_reads_as_the_word(typed, written):
    assert european.headwords(written, "de") is not None
    assert european.headwords(typed, "de") == european.headwords(written, "de")
