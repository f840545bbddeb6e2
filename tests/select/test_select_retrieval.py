"""Retrieval: the right skill ranks near the top from name, description and body; the index is cached by content."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from select_corpus import GOALS, write_skill

from orchestrator.select.index import SkillDoc, SkillIndex, skill_docs
from orchestrator.select.lexical import tokenize
from orchestrator.select.shortlist import model_invocable
from orchestrator.skills.loader import SkillLibrary


def _index(root: Path, cache: Path | None = None) -> SkillIndex:
    library = SkillLibrary(root)
    return SkillIndex.build(skill_docs(library, model_invocable(library.l1_index())), cache)


def test_paraphrased_goals_find_their_skill_in_the_top_three(skills_root):
    index = _index(skills_root)
    goals = [json.loads(line) for line in GOALS.read_text().splitlines()]
    misses = []
    for g in goals:
        if g["kind"] == "explicit" or not g["expect"]:
            continue
        top = [h.id for h in index.search(g["goal"], k=3)]
        if not set(g["expect"]) & set(top):
            misses.append((g["goal"], top))
    # Lexical retrieval misses goals that share no word with the skill ("agreement" vs "contract"): 2 of 15 here.
    assert len(misses) <= 2, misses


def test_a_word_only_in_the_body_still_finds_the_skill(skills_root):
    # "XLOOKUP" appears only in spreadsheet-formulas' body, never in a name or description.
    assert _index(skills_root).search("an XLOOKUP across two sheets", k=1)[0].id == "spreadsheet-formulas"


def test_the_description_outweighs_a_passing_mention_in_another_body(tmp_path):
    root = tmp_path / "s"
    write_skill(root, "invoices", name="invoices", description="Create invoices for customers.", body="Totals.")
    write_skill(
        root, "notes", name="notes", description="Take notes.", body="Notes can mention an invoice or invoices."
    )
    assert [h.id for h in _index(root).search("create invoices")][0] == "invoices"


def test_chinese_text_is_matched_by_character_pairs():
    assert "会议" in tokenize("帮我整理会议纪要")
    assert tokenize("") == [] and tokenize("the and of") == []


def test_a_query_with_no_known_word_finds_nothing(skills_root):
    assert _index(skills_root).search("zzqx wvvk") == []


def test_an_empty_library_finds_nothing():
    assert SkillIndex.build([], None).search("anything") == []


def test_disable_model_invocation_skills_are_not_indexed(skills_root):
    ids = {d.id for d in _index(skills_root).docs}
    assert "danger-deploy" not in ids and "slide-deck" in ids


def test_the_index_is_cached_by_content_and_only_changed_skills_are_rederived(skills_root, tmp_path):
    cache = tmp_path / "cache"
    first = _index(skills_root, cache)
    assert first.stats.built == first.stats.skills and first.stats.reused == 0
    second = _index(skills_root, cache)
    assert second.stats.reused == second.stats.skills and second.stats.built == 0
    skill_md = skills_root / "recipe-scaler" / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "\nAlso bakes sourdough bread.\n")
    third = _index(skills_root, cache)
    assert (third.stats.built, third.stats.reused) == (1, third.stats.skills - 1)
    assert third.search("sourdough", k=1)[0].id == "recipe-scaler"


def test_the_same_bytes_read_to_another_name_are_not_served_stale_terms_from_the_cache(tmp_path):
    # A root skill ('.') without a name takes the root folder's name: same bytes and id, another name.
    cache = tmp_path / "cache"
    hits = {}
    for folder in ("invoice-parser", "weather-report"):
        root = tmp_path / folder
        write_skill(root, "zz-filler", name="zz-filler", description="Keeps a filler entry.", body="Filler.")
        (root / "SKILL.md").write_text("---\ndescription: Reads documents.\n---\nbody\n", encoding="utf-8")
        hits[folder] = [h.id for h in _index(root, cache).search("weather", k=1)]
    assert hits == {"invoice-parser": [], "weather-report": ["."]}


def test_a_corrupt_cache_entry_is_rebuilt_not_trusted(tmp_path):
    doc = SkillDoc(id="a", name="a", description="alpha skill", body="body", sha256="ab" * 32)
    cache = tmp_path / "cache"
    SkillIndex.build([doc], cache)
    [entry] = list(cache.rglob("*.json"))
    entry.write_text('{"name": ["poison"]}')
    index = SkillIndex.build([doc], cache)
    assert index.stats.built == 1 and index.search("poison") == [] and index.search("alpha")[0].id == "a"


def test_bench_selection_prints_recall_by_kind_and_prompt_size(skills_root):
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "bench", "selection", "--skills", str(skills_root), "--goals",
         str(GOALS), "--k", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert set(result) >= {"skills", "goals", "recall_at", "by_kind", "planner_prompt_tokens_max", "index_ms",
                           "query_ms_median", "query_cpu_ms_median", "index_cpu_ms"}
    assert set(result["recall_at"]) == {"3", "5", "10", "20"}
    assert result["goals"] == 18 and result["no_fit_goals"] == 1 and "no-fit" not in result["by_kind"]
    assert result["by_kind"]["explicit"] == {"3": 1.0, "5": 1.0, "10": 1.0, "20": 1.0}
    assert result["recall_at"]["10"] >= 0.9
    assert 0 < result["planner_prompt_tokens_max"] < 4000
    # CPU time of one ranking can't exceed its wall time by much (it runs in one thread) and is never zero
    assert 0 < result["query_cpu_ms_median"] <= result["query_ms_median"] * 1.2 + 1


def _bench_selection(skills_root: Path, goals: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "bench", "selection", "--skills", str(skills_root), "--goals",
         str(goals), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_bench_selection_counts_the_translation_pipelines_cpu_apart(skills_root, tmp_path):
    goals = tmp_path / "g.jsonl"
    goals.write_text(
        '{"goal": "la gente se registra y a la semana desaparece", "expect": []}\n'
        '{"goal": "quero parar de perder horas no celular", "expect": []}\n'
        '{"goal": "fix the flaky login test", "expect": []}\n'
    )
    proc = _bench_selection(skills_root, goals)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # The pipelines are other processes: their CPU (starting them included) is reported beside the query's own.
    assert result["translated_goals"] == 2
    assert result["translation_cpu_ms_per_goal"] > 0


def test_a_goal_whose_skill_is_on_disk_but_not_listed_counts_as_a_miss_and_a_typo_is_refused(skills_root, tmp_path):
    unreadable = skills_root / "upload-debris"
    unreadable.mkdir()
    (unreadable / "SKILL.md").write_text("--boundary\nContent-Type: text/plain\n\n---\nname: upload-debris\n---\n")
    goals = tmp_path / "g.jsonl"
    goals.write_text('{"goal": "turn the quarterly numbers into slides", "expect": ["upload-debris"]}\n')
    proc = _bench_selection(skills_root, goals)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["unlisted_expected"] == ["upload-debris"]
    assert result["recall_at"]["10"] == 0.0 and result["misses_at_10"][0]["expect"] == ["upload-debris"]
    goals.write_text('{"goal": "turn the quarterly numbers into slides", "expect": ["upload-debri"]}\n')
    proc = _bench_selection(skills_root, goals)
    assert proc.returncode == 1 and "unknown skill ids ['upload-debri']" in proc.stdout


def test_a_skill_that_asks_not_to_be_picked_is_found_only_when_named_and_the_bench_says_so(skills_root, tmp_path):
    shy = skills_root / "quarterly-slides"
    shy.mkdir()
    (shy / "SKILL.md").write_text(
        "---\nname: quarterly-slides\ndescription: Turn quarterly numbers into a slide deck.\n"
        "disable-model-invocation: true\n---\nSteps.\n"
    )
    goals = tmp_path / "g.jsonl"
    goals.write_text(
        '{"goal": "turn the quarterly numbers into slides", "expect": ["quarterly-slides"]}\n'
        '{"goal": "use the quarterly-slides skill on these numbers", "expect": ["quarterly-slides"]}\n'
    )
    proc = _bench_selection(skills_root, goals)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["unpickable_expected"] == ["quarterly-slides"]
    assert result["recall_at"]["10"] == 0.5
    assert [m["goal"] for m in result["misses_at_10"]] == ["turn the quarterly numbers into slides"]


def test_bench_selection_names_the_bad_goal_line(skills_root, tmp_path):
    goals = tmp_path / "g.jsonl"
    goals.write_text('{"goal": "ok", "expect": []}\n{"expect": []}\n')
    proc = _bench_selection(skills_root, goals)
    assert proc.returncode == 1 and "g.jsonl:2" in proc.stdout


def test_words_are_matched_by_their_stems(tmp_path):
    # "deploying" and "deployment" meet only through the stemmer; plural folding alone would keep them apart.
    root = tmp_path / "s"
    write_skill(root, "rollout", name="rollout", description="Plans a deployment of a web service.", body="Steps.")
    write_skill(root, "deploy-notes", name="notes", description="Write release notes.", body="Deploy notes.")
    assert tokenize("deploying") == tokenize("deployment") == tokenize("deploy")
    assert {h.id for h in _index(root).search("deploying")} == {"rollout", "deploy-notes"}


def test_bench_selection_with_a_model_reports_the_plans_recall_and_over_loading(skills_root, tmp_path):
    goals = tmp_path / "goals.jsonl"
    goals.write_text(
        "\n".join(
            json.dumps(g)
            for g in [
                {"goal": "Bill my client for last week's orders", "expect": ["invoice-builder"], "kind": "direct"},
                {"goal": "Make a 6-slide presentation of the Q3 numbers", "expect": ["slide-deck"], "kind": "direct"},
                {"goal": "Sing happy birthday to my grandmother over the phone", "expect": [], "kind": "no-fit"},
                {"goal": "What is the capital of Portugal?", "expect": [], "kind": "none"},
            ]
        )
        + "\n"
    )
    plans = [
        {"steps": [{"skill": "invoice-builder"}]},
        {"steps": [{"skill": "invoice-builder"}]},  # the wrong skill: a miss
        {"steps": [{"skill": "slide-deck"}, {"skill": "invoice-builder"}]},  # skills for a goal none fits
        {"steps": [], "no_skill_needed": {"reason": "a question", "answer": "Lisbon."}},
    ]
    scenario = tmp_path / "plans.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "goal": "bench",
                "model": "scripted-bench",
                "steps": [{"purpose": "plan", "reply": {"content": json.dumps(p)}} for p in plans],
            }
        )
    )
    # The whole library in the catalog, so that the scripted plans' skills are always on offer.
    env = {**os.environ, "ORCH_SELECTION__SHORTLIST_THRESHOLD": "100"}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "bench", "selection", "--skills", str(skills_root), "--goals",
         str(goals), "--model", f"scripted:{scenario}", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    shown = [json.loads(line) for line in proc.stderr.splitlines() if '"bench.planned"' in line]
    assert [(e["done"], e["total"]) for e in shown] == [(1, 4), (2, 4), (3, 4), (4, 4)]  # a line per planned goal
    result = json.loads(proc.stdout)
    assert result["no_skill_goals"] == 2 and result["no_fit_goals"] == 1 and set(result["by_kind"]) == {"direct"}
    planned = result["planned"]
    assert planned["recall"] == 0.5 and planned["by_kind"] == {"direct": 0.5}
    assert planned["no_skill_goals"] == 2 and planned["overloading"] == 0.5, planned
    assert planned["skills_per_no_skill_goal"] == 1.0 and planned["answered_without_skills"] == 1
    assert planned["plan_errors"] == 0
    assert planned["overloaded"] == [
        {"goal": "Sing happy birthday to my grandmother over the phone", "planned": ["slide-deck", "invoice-builder"]}
    ]
    human = subprocess.run(
        [sys.executable, "-m", "orchestrator", "bench", "selection", "--skills", str(skills_root), "--goals",
         str(goals), "--model", f"scripted:{scenario}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert human.returncode == 0 and "over-loading 0.5 on 2 goals that need no skill" in human.stdout


def test_bench_selection_with_a_local_model_asks_first_and_counts_a_chat_answer_as_no_skill_loaded(
    skills_root, tmp_path
):
    goals = tmp_path / "goals.jsonl"
    goals.write_text(
        json.dumps({"goal": "Bill my client for last week's orders", "expect": ["invoice-builder"], "kind": "direct"})
        + "\n"
        + json.dumps({"goal": "thanks, that fixed it!", "expect": [], "kind": "none"})
        + "\n"
    )
    replies = ["TOOL", json.dumps({"steps": [{"skill": "invoice-builder"}]}), "CHAT", "Glad it helped!"]
    purposes = ["plan", "plan", "plan", "answer"]
    scenario = tmp_path / "triage.yaml"
    scenario.write_text(yaml.safe_dump({
        "goal": "bench", "model": "scripted-bench",
        "steps": [{"purpose": p, "reply": {"content": r}} for p, r in zip(purposes, replies, strict=True)],
    }))
    env = {**os.environ, "ORCH_SELECTION__SHORTLIST_THRESHOLD": "100", "ORCH_MODEL__PROFILE": "local"}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "bench", "selection", "--skills", str(skills_root), "--goals",
         str(goals), "--model", f"scripted:{scenario}", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    planned = json.loads(proc.stdout)["planned"]
    assert planned["recall"] == 1.0 and planned["overloading"] == 0.0, planned
    assert planned["answered_without_skills"] == 1 and planned["plan_errors"] == 0


def test_bench_selection_with_a_model_and_no_plans_reports_the_ranking_of_the_restated_goals(skills_root, tmp_path):
    goals = tmp_path / "goals.jsonl"
    rows = [
        {"goal": "выставь счёт клиенту за заказы прошлой недели", "expect": ["invoice-builder"], "kind": "direct"},
        {"goal": "Make a 6-slide presentation of the Q3 numbers", "expect": ["slide-deck"], "kind": "direct"},
        {"goal": "What is the capital of Portugal?", "expect": [], "kind": "none"},
    ]
    goals.write_text("\n".join(json.dumps(g, ensure_ascii=False) for g in rows) + "\n", encoding="utf-8")
    restatements = ["create an invoice for a client's orders", "build a slide deck presentation", "a quiz"]
    scenario = tmp_path / "restate.yaml"
    scenario.write_text(yaml.safe_dump({
        "goal": "bench", "model": "scripted-bench",
        "steps": [{"purpose": "select", "reply": {"content": text}} for text in restatements],
    }))
    # Words only: the Russian goal then finds nothing by itself (the index reads no Russian).
    env = {**os.environ, "ORCH_SELECTION__SHORTLIST_THRESHOLD": "3", "ORCH_SELECTION__SEMANTIC": "false"}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "bench", "selection", "--skills", str(skills_root), "--goals",
         str(goals), "--model", f"scripted:{scenario}", "--no-plan", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    shown = [json.loads(line) for line in proc.stderr.splitlines() if '"bench.planned"' in line]
    assert [(e["done"], e["total"]) for e in shown] == [(1, 3), (2, 3), (3, 3)]
    result = json.loads(proc.stdout)
    assert result["recall_at"]["10"] == 0.5 and result["planned"] is None
    restated = result["restated"]
    assert restated["mode"] == "always" and restated["restated_goals"] == 3
    assert restated["recall_at"]["10"] == 1.0 and restated["misses_at_10"] == []
