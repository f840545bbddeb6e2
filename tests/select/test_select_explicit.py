"""A goal that names a skill gets it, in the ways people write a name: beside a verb of use, as a slash command,
beside the word "skill" in several languages, and inside Chinese or Japanese text."""

from __future__ import annotations

import time

import pytest

from orchestrator.select.explicit import explicit_skills, named_in
from orchestrator.skills.parsed import SkillSummary


def _skill(name: str, description: str = "Does things.") -> SkillSummary:
    return SkillSummary(id=f"owner/{name}", name=name, description=description, path="/x")


@pytest.mark.parametrize(
    ("goal", "names"),
    [
        ("use spark-video-director to turn scene 3 into a storyboard", ["spark-video-director"]),
        ("run the dual-axis-skill-reviewer on the skills/ folder", ["dual-axis-skill-reviewer"]),
        ("use xai-plus: ask grok about this chart", ["xai-plus"]),
        ("/gridclash join the next battle", ["gridclash"]),
        ("/stp このDB移行をステップに分けて", ["stp"]),
        ("usa la skill openclaw-russian, voglio la verità", ["openclaw-russian"]),
        ("usa a skill trains: proximas partidas", ["trains"]),
        ("usa bun-test-coverage: quiero que el CI falle", ["bun-test-coverage"]),
        ("minimax-mcp 스킬로 오늘 뉴스 좀 찾아줘", ["minimax-mcp"]),
        ("用 zhihu-assistant 抓一下今天的热榜", ["zhihu-assistant"]),
        ("用luban-cli提交一个训练任务", ["luban-cli"]),
        ("project-kickoff-bootstrapper で CLAUDE.md を作って", ["project-kickoff-bootstrapper"]),
        ("please use gstd-a2a to get an API key", ["gstd-a2a"]),
    ],
)
def test_a_name_beside_a_verb_of_use_a_slash_or_the_word_skill_is_read_as_named(goal, names):
    assert named_in(goal) == names


@pytest.mark.parametrize(
    "goal",
    [
        "improve my research skill before the interview",
        "find a skill that handles invoices",
        "the files live in /tmp and under docs/setup-guide.md",
        "we use e-mail a lot",
        "use python to add up these numbers",
    ],
)
def test_ordinary_words_near_skill_or_use_name_no_skill(goal):
    skills = [_skill("research"), _skill("that"), _skill("tmp"), _skill("python"), _skill("setup-guide.md")]
    skills += [_skill(f"py-{n}", "Python helpers for data.") for n in range(3)]
    assert explicit_skills(goal, skills) == []


def test_a_plain_word_names_a_skill_only_when_few_other_skills_use_it():
    skills = [_skill("himalaya", "Read mail from the terminal."), _skill("sqlite", "Query SQLite databases.")]
    skills += [_skill(f"db-{n}", "Store rows in SQLite.") for n in range(2)]
    assert explicit_skills("use himalaya to show me unread mail", skills) == ["owner/himalaya"]
    assert explicit_skills("Himalayaで未読メールを見せて", skills) == ["owner/himalaya"]
    # "sqlite" is a tool two other skills work with: using it names no skill.
    assert explicit_skills("个人知识库用sqlite存，字段老在变", skills) == []
    assert explicit_skills("use sqlite to store the notes", skills) == []
    assert explicit_skills("use the sqlite skill to store the notes", skills) == ["owner/sqlite"]


def test_an_identifier_after_a_verb_of_use_names_a_skill_even_when_other_skills_mention_it():
    skills = [_skill("check-tools", "Validate tool installations.")]
    skills += [_skill(f"env-{n}", "Like check-tools, but for other stacks.") for n in range(4)]
    assert explicit_skills("use check-tools on this new laptop", skills) == ["owner/check-tools"]


@pytest.mark.parametrize(
    "goal",
    [
        "don't use danger-deploy, just check the build",
        "check the build without $danger-deploy",
        "do not run the danger-deploy skill today",
        "不要用 danger-deploy，先检查构建",
        "don’t use danger-deploy, just check the build",
        "you shouldn't run the danger-deploy skill today",
        "不使用 danger-deploy，先检查构建",
        "danger-deployを使わないでビルドだけ確認して",
        "ne pas utiliser danger-deploy, vérifie seulement le build",
        "n'utilise pas danger-deploy pour ça",
        "benutze danger-deploy nicht",
        "verwende danger-deploy bitte nicht.",
        "nutze danger-deploy nicht für den Build",
        "benutze den danger-deploy skill nicht, prüf nur den Build",
    ],
)
def test_a_name_the_goal_says_not_to_use_names_nothing(goal):
    assert explicit_skills(goal, [_skill("danger-deploy")]) == []


def test_a_skill_that_asks_not_to_be_picked_is_named_only_in_the_forms_that_mean_nothing_else():
    shy = SkillSummary(
        id="owner/danger-deploy", name="danger-deploy", description="Deploys.", path="/x", disable_model_invocation=True
    )
    assert explicit_skills("use danger-deploy to ship the build", [shy]) == []
    assert explicit_skills("用 danger-deploy 发布", [shy]) == []
    assert explicit_skills("$danger-deploy ship the build", [shy]) == ["owner/danger-deploy"]
    assert explicit_skills("/danger-deploy ship it", [shy]) == ["owner/danger-deploy"]
    assert explicit_skills("use the danger-deploy skill to ship the build", [shy]) == ["owner/danger-deploy"]


def _shy(name: str) -> SkillSummary:
    return SkillSummary(id=f"owner/{name}", name=name, description="Does.", path="/x", disable_model_invocation=True)


def test_a_name_is_written_in_ascii_so_a_look_alike_letter_names_nothing():
    # "\u212a" is the Kelvin sign, which case-insensitive matching takes for a "k" and lower() turns into one.
    assert explicit_skills("use the \u212aubectl skill on the cluster", [_shy("kubectl")]) == []
    assert explicit_skills("use the kubectl skill on the cluster", [_shy("kubectl")]) == ["owner/kubectl"]


@pytest.mark.timeout(60)  # a hang guard: before the fix 20,000 characters of these took 0.5 to 4 s, growing as n²
@pytest.mark.parametrize(
    "goal",
    [
        "a:" * 100_000,
        "スキル" + " " * 200_000 + "!",
        "use the skill" + " " * 200_000 + "!",
        "a1 スキル" + " " * 200_000 + "!",
        " ".join(f"$n{i}" for i in range(25_000)),
        "use himalaya to " * 12_500,
    ],
    ids=[
        "colons", "spaces-after-skill-word", "spaces-after-use-the-skill", "spaces-after-name-skill-word", "many-names",
        "one-name-repeated",
    ],
)
def test_a_long_hostile_goal_is_read_in_well_under_a_second(goal):
    skills = [_skill(f"s{n}", "Does things with himalaya.") for n in range(1000)] + [_skill("himalaya")]
    started = time.perf_counter()
    explicit_skills(goal, skills)
    assert time.perf_counter() - started < 1.0


@pytest.mark.timeout(60)
def test_a_goal_naming_every_skill_of_a_large_library_reads_the_descriptions_once():
    letters = "abcdefghijklmnopqrstuvwxyz"
    description = "Does things with " + ", ".join(f"tool{n}" for n in range(40))
    names = [f"word{letters[n % 26]}{letters[n // 26 % 26]}{letters[n // 676]}" for n in range(1000)]
    skills = [_skill(name, description) for name in names]
    goal = " ".join(f"use {s.name} to" for s in skills)
    started = time.perf_counter()
    assert len(explicit_skills(goal, skills)) == 1000
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("goal", "skill"),
    [
        ("write a cover letter that highlights my problem-solving skills", "problem-solving"),
        ("rate each candidate's front-end skills", "front-end"),
        ("my problem-solving skill is rusty", "problem-solving"),
        ("提高我的 python 技能", "python"),
        ("Python スキルを上げたい", "python"),
        ("echo $DEPLOY in the CI script", "deploy"),
        ("$HOME is wrong, fix my bashrc", "home"),
        ("the licence costs $5.", "5"),
        ("danger-deploy スキルは使わないで", "danger-deploy"),
        ("danger-deploy 스킬은 쓰지 마", "danger-deploy"),
    ],
)
def test_skills_as_abilities_shell_variables_prices_and_a_skill_word_said_not_to_use_name_nothing(goal, skill):
    others = [_skill(f"py-{n}", "Python helpers for data.") for n in range(3)]
    assert explicit_skills(goal, [_shy(skill), *others]) == []


def test_a_plain_word_beside_a_cjk_skill_word_names_a_skill_only_when_few_other_skills_use_it():
    assert explicit_skills("himalaya スキルで未読メールを見せて", [_shy("himalaya")]) == ["owner/himalaya"]
    assert explicit_skills("minimax-mcp 스킬로 오늘 뉴스 좀 찾아줘", [_shy("minimax-mcp")]) == ["owner/minimax-mcp"]
    assert explicit_skills("$Himalaya show unread mail", [_shy("himalaya")]) == ["owner/himalaya"]


@pytest.mark.parametrize(
    "goal",
    [
        "$danger\u200b-deploy ship the build",  # a zero-width space inside the name
        "$danger\u00addeploy ship the build",  # a soft hyphen
        "$dangerдеплой ship the build",  # the name runs on in Cyrillic
        "Сdanger スキルで出荷して",  # a Cyrillic С glued in front
    ],
)
def test_a_name_cut_short_by_an_invisible_or_look_alike_character_names_nothing(goal):
    assert explicit_skills(goal, [_shy("danger")]) == []


@pytest.mark.parametrize(
    "goal",
    [
        "benutze danger-deploy nicht nur für den Build",
        "benutze danger-deploy und nicht das alte Skript",
        "n'hésite pas à utiliser danger-deploy",
        "n'oublie pas d'utiliser danger-deploy pour la mise en prod",
    ],
)
def test_a_negation_about_something_else_still_names_the_skill(goal):
    assert explicit_skills(goal, [_skill("danger-deploy")]) == ["owner/danger-deploy"]
