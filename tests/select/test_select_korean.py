"""Korean goals find English skills: Korean is read as the English words that the Korean gettext catalogs of free
software pair with its words (ops/setup.sh takes them out of Debian's packages), and Sino-Korean words as the Chinese
of their Hanja spelling."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from select_corpus import write_skill

from orchestrator.select import gloss, korean
from orchestrator.select.index import SkillIndex, skill_docs
from orchestrator.select.lexical import tokenize
from orchestrator.select.semantic import shipped_embedder
from orchestrator.select.shortlist import model_invocable
from orchestrator.skills.loader import SkillLibrary

SKILLS = {
    "nightly-backup": "Back up a Linux laptop's home directory every night, encrypted, and prove the restore works.",
    "signup-form-ux": "Make sign-up forms shorter and friendlier so fewer new members give up half way.",
    "sales-charts": "Turn a spreadsheet of sales figures into charts.",
    "slide-polish": "Tidy the slides of a presentation: layout, fonts, one idea per slide.",
    "sql-tuning": "Find why a database query is slow and rewrite it.",
}
# Goals as Korean speakers type them: no word and no letter shared with the skill they need.
GOALS = {
    "리눅스 노트북 홈 폴더를 매일 밤 암호화해서 백업하고 싶어": "nightly-backup",
    "지난달 매출 스프레드시트로 차트 좀 만들어줘": "sales-charts",
    "내일 발표할 프레젠테이션 슬라이드 좀 정리해줘": "slide-polish",
    "데이터베이스 쿼리가 너무 느려요": "sql-tuning",
    "회원 가입 양식이 너무 길어서 사람들이 중간에 포기해요": "signup-form-ux",
}


def _library(root: Path) -> list:
    for skill_id, description in SKILLS.items():
        write_skill(root, skill_id, name=skill_id, description=description, body="Follow the steps.")
    library = SkillLibrary(root)
    return skill_docs(library, model_invocable(library.l1_index()))


@pytest.fixture
def fresh_reader():
    yield
    korean.lexicon.cache_clear()
    korean.sino_korean_words.cache_clear()


@pytest.mark.parametrize(("goal", "skill"), GOALS.items())
def test_a_korean_goal_finds_its_english_skill_by_its_words_alone(tmp_path, goal, skill):
    docs = _library(tmp_path / "skills")
    assert not set(tokenize(goal)) & set(tokenize(SKILLS[skill]))
    assert SkillIndex.build(docs).search(goal, k=3)[0].id == skill


@pytest.mark.parametrize(("goal", "skill"), GOALS.items())
def test_a_korean_goal_finds_its_english_skill_by_words_and_meaning(tmp_path, goal, skill):
    index = SkillIndex.build(_library(tmp_path / "skills"), embedder=shipped_embedder())
    assert index.search(goal, k=3)[0].id == skill


def test_a_particle_ends_the_word_and_a_sino_korean_word_reads_as_its_chinese():
    assert gloss.english_terms("폴더를")[0] == "folder"  # 폴더 + the object particle
    assert "member" in gloss.english_terms("회원")  # 會員, from the Hanja table and CC-CEDICT
    # The encoder reads English in place of the Hangul; what is not Hangul stays.
    reading = gloss.english_reading("계약서 PDF에서 서명 페이지만 빼줘")
    assert reading.startswith("agreement PDF signature page")
    assert not korean.has_hangul(reading)


def test_a_korean_skill_is_found_by_an_english_goal(tmp_path):
    korean_only = "노트북 폴더를 매일 밤 암호화해서 백업합니다"
    write_skill(tmp_path, "kr-backup", name="kr-backup", description=korean_only, body="")
    write_skill(tmp_path, "weather", name="weather", description="Tell the weather forecast for a city", body="")
    library = SkillLibrary(tmp_path)
    index = SkillIndex.build(skill_docs(library, model_invocable(library.l1_index())))
    assert index.search("encrypted backup of my folders", k=1)[0].id == "kr-backup"


def _write_catalog(path: Path, messages: dict[str, str]) -> None:
    """A gettext .mo file (GNU format, little-endian) of ``messages``."""
    keys = sorted(messages)
    ids = [k.encode() for k in keys]
    strs = [messages[k].encode() for k in keys]
    header = 7 * 4
    ids_table, strs_table = header, header + 8 * len(keys)
    data_start = strs_table + 8 * len(keys)
    blob, id_entries, str_entries = b"", [], []
    for encoded, entries in ((ids, id_entries), (strs, str_entries)):
        for item in encoded:
            entries.append((len(item), data_start + len(blob)))
            blob += item + b"\0"
    out = struct.pack("<7I", 0x950412DE, 0, len(keys), ids_table, strs_table, 0, 0)
    out += b"".join(struct.pack("<2I", *e) for e in id_entries) + b"".join(struct.pack("<2I", *e) for e in str_entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out + blob)


def test_words_that_keep_appearing_together_in_short_messages_are_paired(monkeypatch, tmp_path, fresh_reader):
    _write_catalog(
        tmp_path / "some-package" / "some.mo",
        {
            "": "Content-Type: text/plain; charset=UTF-8\n",
            "_Folder": "폴더(_F)",
            "Open Folder…": "폴더 열기…",
            "Delete the folder %s": "%s 폴더를 삭제",
            "Open %1": "%1 열기",
            "O~pen File": "파일 열기",
            "Delete": "삭제",
            "Delete File": "파일 삭제",
            "A long message whose many words pair with everything it holds": "긴 메시지 하나 둘 셋 넷 다섯 여섯 일곱",
        },
    )
    monkeypatch.setattr(korean, "CATALOG_DIR", tmp_path)
    korean.lexicon.cache_clear()
    words = korean.lexicon()
    assert words["폴더"][0] == "folder"  # "폴더를" counted as 폴더; the accelerator mark left no "older"
    assert words["열기"][0] == "open"  # "O~pen": the mark inside a word is no word break
    assert words["삭제"][0] == "delete"
    assert "메시지" not in words  # too long a message to pair its words
    assert all("s" not in english for english in words.values())  # placeholders are no words


def test_a_megabyte_of_hangul_is_read_in_bounded_time():
    hostile = ("가" * 50_000 + " 폴더를 ") * 20
    started = time.monotonic()
    gloss.english_terms(hostile)
    gloss.english_reading(hostile)
    assert time.monotonic() - started < 10


def test_without_catalogs_and_table_a_korean_text_is_left_as_it_is(monkeypatch, tmp_path, fresh_reader):
    monkeypatch.setattr(korean, "CATALOG_DIR", tmp_path / "none")
    monkeypatch.setattr(korean, "HANJA_TABLE", tmp_path / "hanja.txt")
    korean.lexicon.cache_clear()
    korean.sino_korean_words.cache_clear()
    goal = "리눅스 노트북 폴더를 매일 밤 백업하고 싶어"
    assert gloss.english_terms(goal) == []
    assert gloss.english_reading(goal) == goal
    assert "no Korean catalogs" in (gloss.korean_unavailable() or "")
    assert "-ko" not in gloss.reading_tag()


def test_here_a_korean_goal_is_read_and_the_cache_tag_names_the_reading():
    assert gloss.korean_unavailable() is None
    assert f"-ko{korean.READING_VERSION}." in gloss.reading_tag()


def test_the_app_image_and_the_host_set_up_install_the_catalogs_and_the_table():
    root = Path(__file__).resolve().parents[2]
    dockerfile = (root / "ops/images/app/Dockerfile").read_text(encoding="utf-8")
    setup = (root / "ops/setup.sh").read_text(encoding="utf-8")
    for package in korean.CATALOG_PACKAGES:
        assert f" {package} " in dockerfile.split("apt-get download", 1)[1].split("&&", 1)[0].replace("\\\n", " ") + " "
        assert f" {package} " in " " + setup.split("korean_packages=(", 1)[1].split(")", 1)[0].replace("\n", " ") + " "
    assert "libhangul-data" in dockerfile and "libhangul-data" in setup
    assert str(korean.CATALOG_DIR) in dockerfile and str(korean.CATALOG_DIR) in setup
    assert "korean_unavailable" in dockerfile  # the build fails unless a Korean goal is read


def test_a_particle_alone_is_no_word_and_particles_come_off_one_after_another():
    assert gloss.english_terms("VLOOKUP이랑 XLOOKUP") == []  # 이랑 ("and") is not 伊朗 (Iran)
    assert korean._without_particle("서버에서는", {"서버", "서버에서"}) == "서버"


def test_a_truncated_or_foreign_catalog_is_skipped_with_a_warning(monkeypatch, tmp_path, fresh_reader):
    messages = {f"Open Folder {n}": f"폴더 열기 {n}" for n in "abc"}
    _write_catalog(tmp_path / "good" / "good.mo", {"": "Content-Type: text/plain; charset=UTF-8\n", **messages})
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "cut.mo").write_bytes((tmp_path / "good" / "good.mo").read_bytes()[:30])
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "junk.mo").write_bytes(b"not a catalog at all")
    monkeypatch.setattr(korean, "CATALOG_DIR", tmp_path)
    korean.lexicon.cache_clear()
    assert korean.lexicon()["폴더"][0] == "folder"  # the good catalog is still read
