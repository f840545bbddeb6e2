"""Spanish, Portuguese, French and Italian goals and skills are read as English sentences (Apertium, installed by
ops/setup.sh); a pipeline that fails leaves the dictionary reading in place."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.select import accents, european, gloss, translation
from orchestrator.select.index import SkillDoc, SkillIndex


def _reset() -> None:
    translation.stop_all()
    translation._pipelines.clear()
    translation._translated.cache_clear()
    translation.route.cache_clear()
    translation._analyser_command.cache_clear()
    accents.restored.cache_clear()
    if hasattr(translation._pipeline_command, "cache_clear"):  # a test may have replaced it
        translation._pipeline_command.cache_clear()


@pytest.fixture(autouse=True)
def fresh_pipelines() -> Iterator[None]:
    _reset()
    yield
    _reset()


def _running_pipeline(mode_name: str) -> translation._Pipeline:
    return next(p for mode, p in translation._pipelines.items() if mode.stem == mode_name)


def test_each_language_comes_out_in_english():
    # The app image's build runs the same check (ops/images/app/Dockerfile); ops/setup.sh installs the pairs here.
    assert translation.available_languages() == ("es", "pt", "fr", "it")
    assert translation.untranslated_languages() == []


def test_a_goal_typed_without_accents_is_read_as_its_language_and_translated():
    goal = "quero parar de perder horas no celular"
    assert european.language(goal) == "pt"
    assert "hours" in gloss.english_reading(goal).lower().split()


def test_the_translation_adds_the_words_a_small_dictionary_lacks():
    goal = "la gente se registra y a la semana desaparece"
    assert "week" not in (european.dictionary_reading(goal, "es") or "")
    assert "week" in gloss.english_reading(goal).lower().split()
    assert "week" in gloss.english_terms(goal)


def test_english_never_starts_a_pipeline():
    gloss.english_reading("the login test fails every other run since Tuesday")
    gloss.english_terms("please convert these invoices to a spreadsheet")
    assert translation._pipelines == {}


def test_reserved_characters_and_nul_do_not_put_the_pipeline_out_of_step():
    hostile = "hola ^mundo$ [x] {y} \\ @z <b> / \x00 fin\n\n\x07 \udcff \u202e adios"
    first = translation.to_english(hostile, "es")
    assert first is not None and "\x00" not in first and "hello" in first.lower()
    # The next text gets its own answer, not the rest of the previous one.
    assert translation.to_english("la semana pasada", "es") == "The past week"


def test_a_megabyte_is_cut_and_answered_in_time():
    started = time.monotonic()
    answer = translation.to_english("la gente se da de alta en la app y desaparece. " * 25_000, "es")
    assert answer is not None and len(answer) < 3 * translation.MAX_CHARS
    assert time.monotonic() - started < translation.DEADLINE_S * 2


def test_a_killed_pipeline_is_started_again():
    assert translation.to_english("buenos dias", "es")
    pipeline = _running_pipeline("spa-eng")
    assert pipeline.process is not None
    os.killpg(pipeline.process.pid, signal.SIGKILL)
    pipeline.process.wait(timeout=5)
    assert translation.to_english("la semana pasada", "es") == "The past week"


def test_a_pipeline_that_never_answers_is_killed_and_the_dictionary_reads_the_text(monkeypatch):
    monkeypatch.setattr(translation, "DEADLINE_S", 0.5)
    monkeypatch.setattr(translation, "_pipeline_command", lambda mode: "cat > /dev/null")
    goal = "la gente se registra y a la semana desaparece"
    assert translation.to_english(goal, "es") is None
    pipeline = _running_pipeline("spa-eng")
    assert pipeline.process is None and pipeline.failures == 1
    reading = european.english_reading(goal)
    assert reading is not None and reading.startswith(goal + " (")  # the dictionary's reading
    # After MAX_FAILURES the pipeline is not started again: no more waiting out deadlines.
    for _ in range(translation.MAX_FAILURES):
        translation.to_english(goal + " otra vez", "es")
    started = time.monotonic()
    assert translation.to_english(goal + " y nada", "es") is None
    assert time.monotonic() - started < 0.2


def _translate_in_child(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    answer = translation.to_english("la semana pasada", "es")
    pipeline = _running_pipeline("spa-eng")
    queue.put((answer, pipeline.process.pid if pipeline.process else None))


def test_a_forked_child_starts_its_own_pipeline_and_leaves_the_parents_alone():
    assert translation.to_english("buenos dias", "es")
    parent = _running_pipeline("spa-eng").process
    assert parent is not None
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_translate_in_child, args=(queue,))
    child.start()
    answer, child_pid = queue.get(timeout=60)
    child.join(timeout=30)
    assert answer == "The past week"
    assert child_pid is not None and child_pid != parent.pid
    assert parent.poll() is None
    assert translation.to_english("la semana pasada", "es") == "The past week"


def test_an_idle_pipeline_is_stopped_and_started_again_when_needed(monkeypatch):
    monkeypatch.setattr(translation, "IDLE_S", 0.2)
    assert translation.to_english("buenos dias", "es")
    process = _running_pipeline("spa-eng").process
    assert process is not None
    process.wait(timeout=10)  # stopped by the idle timer
    assert translation.to_english("la semana pasada", "es") == "The past week"


def test_without_the_pairs_the_dictionary_reads_and_the_cache_key_says_so(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(translation, "MODES_DIR", tmp_path)
    goal = "la gente se registra y a la semana desaparece"
    assert translation.available_languages() == ()
    assert european.english_reading(goal) == european.dictionary_reading(goal, "es")
    assert "-mt" not in gloss.reading_tag()


def test_the_app_image_and_the_host_set_up_install_every_pair_a_route_takes():
    root = Path(__file__).resolve().parents[2]
    dockerfile = (root / "ops/images/app/Dockerfile").read_text(encoding="utf-8")
    setup = (root / "ops/setup.sh").read_text(encoding="utf-8")
    modes = {step[0] for steps in translation.ROUTES.values() for step in steps}
    packages = {"spa-eng": "eng-spa", "pt-es": "es-pt", "fr-es": "fr-es", "ita-spa": "spa-ita"}
    assert modes == set(packages)
    for mode, package in packages.items():
        assert f"apertium-{package}" in dockerfile
        assert f"{package}:{mode}" in setup
    assert "cg3" in dockerfile and "cg3" in setup  # the Italian pair's grammar
    assert "untranslated_languages" in dockerfile  # the build fails unless all four come out in English


def test_a_cold_index_translates_a_skills_description_and_leaves_its_body_to_the_dictionary(tmp_path: Path):
    description = "Prepara los informes mensuales de gastos del equipo y los envia a la direccion"
    body = "Cuando el usuario pide el cierre del mes, junta las facturas pendientes y calcula los totales por proyecto."
    doc = SkillDoc(id="gastos", name="gastos", description=description, body=body, sha256="cd" * 32)
    index = SkillIndex.build([doc], tmp_path / "cache")
    translated = translation._translated.cache_info().currsize
    assert translated == 1  # the description (read for words and for meaning), not the body
    assert index.search("monthly expense reports")[0].id == "gastos"


@pytest.mark.parametrize(
    ("typed", "language", "meant"),
    [
        ("tenemos el almacen lleno de productos", "es", "tenemos el almacén lleno de productos"),
        ("o usuario clica e nao acontece nada", "pt", "o usuário clica e não acontece nada"),
        ("quero ver as informacoes do pedido", "pt", "quero ver as informações do pedido"),  # two marks
        ("je m'inquiete pour mon poste", "fr", "je m'inquiète pour mon poste"),
        ("voglio che tu sia piu diretto", "it", "voglio che tu sia più diretto"),
        ("Almacen y telefono", "es", "Almacén y teléfono"),  # a capital stays
    ],
)
def test_a_word_typed_without_its_accents_is_written_with_them(typed, language, meant):
    assert accents.restored(typed, language) == meant


def test_a_word_the_language_knows_as_typed_is_never_changed():
    # "mas" (but) is a word as typed; "más" (more) would be another.
    assert accents.restored("no se mas", "es") == "no se mas"
    assert accents.restored("the warehouse is full", "en") == "the warehouse is full"


def test_the_restored_word_is_read_as_english():
    goal = "tenemos el almacen lleno de productos que no se mueven"
    assert "warehouse" in gloss.english_reading(goal).lower().split()
    assert "warehouse" in gloss.english_terms(goal)


def test_hostile_text_costs_a_bounded_number_of_spellings_and_keeps_the_analyser_in_step():
    words = " ".join(f"palabr{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}xq" for i in range(600))
    hostile = f"^$ /<x> \x00 {words} \udcff " + "almacen " * 50
    started = time.monotonic()
    out = accents.restored(hostile, "es")
    assert time.monotonic() - started < translation.DEADLINE_S * 2
    assert len(out) == len(hostile)  # one letter for one letter: nothing added or cut
    # The next text gets its own answer.
    assert accents.restored("el almacen", "es") == "el almacén"


def test_without_the_analyser_the_text_is_left_as_typed(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(translation, "MODES_DIR", tmp_path)
    assert accents.restored("tenemos el almacen lleno", "es") == "tenemos el almacen lleno"
