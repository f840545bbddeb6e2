"""Explicit invocation: a goal that names a skill always gets it.

A goal names a skill in any of the ways people were seen to write it:

- ``$skill-name`` anywhere (not ``$HOME`` nor ``$5``: all capitals and digits is a shell variable or a price), or
  ``/skill-name`` at the start of the goal (a slash command);
- "use the X skill", "usa la skill X", "X スキル", "X 技能", "X 스킬": the name beside the word *skill* ("the X
  skill" without a verb of use, and "X スキル", only for a name that reads as an identifier, below, or a plain word
  on the same terms as after a verb of use: "my research skill", "my problem-solving skill", "front-end skills" and
  "python 技能" name nothing);
- "use X to ...", "run X on ...", "usa X per ...", "nutze X": a verb of use before a name that reads as an
  identifier (a hyphen, an underscore, a dot or a digit inside it, as in ``spark-video-director``), or before a
  plain word that is a skill's name and that at most :data:`RARE_NAME_MENTIONS` other skills' descriptions use
  ("use himalaya to ..."), so that "use python to ..." does not name a skill called ``python``;
- in Chinese or Japanese text, a Latin name after 用 or 使用, or before で or を使 ("Nexusで", "用 luban-cli"), on the
  same terms as after a verb of use.

A name the goal says not to use ("don't use X", "without X", "ne pas utiliser X", "benutze X nicht", "不要用 X",
"Xを使わないで", "X 스킬은 쓰지 마") names nothing. A skill that asks not to be
picked (``disable-model-invocation: true``) is named only by the first two kinds, which can mean nothing else.
Only names of skills in the library count (unknown ones are ignored), and a name is ASCII, not cut short by an
invisible or a look-alike letter glued to it (``$danger``, a zero-width space, ``-deploy`` does not name ``danger``).
A name matches a skill's ``name`` or its id, case-insensitively; when several skills share a name, all of them are
invoked (the planner orders or drops among them, but cannot lose them: see :mod:`orchestrator.workflow.plan`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from orchestrator.skills.parsed import SkillSummary

_NAME = r"[A-Za-z0-9][A-Za-z0-9_./:-]*"
_OPEN = r"[`\"'“‘]?"
_CLOSE = r"[`\"'”’]?"
#: A name that reads as an identifier: something joins or numbers its parts.
_IDENTIFIER = r"[A-Za-z0-9]+(?:[_.-][A-Za-z0-9]+)+|[A-Za-z]+[0-9][A-Za-z0-9]*"
_CJK_SKILL_WORD = r"(?:スキル|技能|스킬)"
#: The word skill in Japanese, Chinese or Korean, unless what follows says not to use it ("スキルは使わないで").
_CJK_SKILL_WORD_USED = (
    rf"{_CJK_SKILL_WORD}(?!\s*(?:[はをも은는을를도]\s*)?(?:使わ|使用しない|使用せず|使うな|不要|别|쓰지|사용하지|안\s*쓰))"
)
_CJK_USE = r"(?:用|使用|调用)"
#: "を使わないで" is "without using": not a way of naming.
_CJK_WITH = r"(?:で|を使(?!わ))"
_ARTICLE_SKILL = r"(?:(?:the|la|el|il|lo|le|a|o|der|den|die|das|une?|uma?)\s+)?skill\b"
_USE_VERB = (
    r"\b(?:use|using|run|invoke|apply|usa|usar|usando|utiliza|utilizar|utilise|utilisez|utiliser|nutze|nutz|"
    r"benutze|verwende)"
)
_SKILL_BEFORE_NAME = rf"(?:{_USE_VERB}\s+{_ARTICLE_SKILL}|{_CJK_SKILL_WORD})"
#: Not inside a name. A match may start only where a name can start, so that no two tries read the same
#: characters (a long run of "a:a:a:..." would be read from each colon again, taking time quadratic in its length).
_NOT_INSIDE_NAME = r"(?<![A-Za-z0-9_/.:$-])"
_ARTICLE = r"(?:(?:the|my|our|la|el|le|il|lo|a|o|den|die|das|dem)\s+)?"
_NOT_AFTER_NAME_CHAR = r"(?<![A-Za-z0-9_/.$-])"
_NOT_AFTER_POSSESSIVE = r"(?<!\bmy\s)(?<!\bour\s)(?<!\byour\s)(?<!\bhis\s)(?<!\bher\s)(?<!\btheir\s)"
#: Other skills whose description may use a plain word for it still to name a skill after a verb of use.
RARE_NAME_MENTIONS = 1
_PLAIN = r"[A-Za-z][A-Za-z0-9]*"


def _cjk_use(name: str) -> tuple[re.Pattern[str], ...]:
    """A Latin ``name`` used in Chinese or Japanese text: after 用/使用/调用, or before で/を使."""
    return (
        re.compile(rf"{_CJK_USE}\s*{_OPEN}({name}){_CLOSE}(?![A-Za-z0-9_/-])"),
        re.compile(rf"{_NOT_AFTER_NAME_CHAR}{_OPEN}({name}){_CLOSE}\s*{_CJK_WITH}"),
    )


_PLAIN_AFTER_USE = (
    re.compile(
        rf"{_USE_VERB}\s+{_ARTICLE}{_OPEN}({_PLAIN}){_CLOSE}\s+(?:to|on|for|and|so|with|per|para|pour|um|zu)\b",
        re.IGNORECASE,
    ),
    *_cjk_use(_PLAIN),
)

#: Forms that can only mean the skill ($name, a slash command, the name beside the word "skill").
_NAMED = (
    # All capitals, digits and dots is a shell variable or a price ($HOME, $5.00), not a skill's name.
    re.compile(rf"(?<![\w$])\$(?![A-Z0-9_.,]+(?![A-Za-z0-9_./:-]))({_NAME})"),
    re.compile(rf"^\s*/({_NAME})"),
    re.compile(
        rf"\b(?:use|using|with|via|run|apply|invoke)\s+(?:the\s+|my\s+|our\s+)?{_OPEN}({_NAME}){_CLOSE}\s+skill\b",
        re.IGNORECASE,
    ),
    # Not "my problem-solving skill" nor "front-end skills": an ability, not a skill of the library.
    re.compile(
        rf"{_NOT_AFTER_NAME_CHAR}{_NOT_AFTER_POSSESSIVE}{_OPEN}({_IDENTIFIER}){_CLOSE}\s+skill\b", re.IGNORECASE
    ),
    re.compile(rf"{_NOT_INSIDE_NAME}{_OPEN}({_IDENTIFIER}){_CLOSE}\s*{_CJK_SKILL_WORD_USED}"),
    # One run of spaces, not two in a row: "\\s*:?\\s*" splits a long run of spaces in quadratically many ways.
    re.compile(rf"{_SKILL_BEFORE_NAME}\s*(?:[:：]\s*)?{_OPEN}({_NAME}){_CLOSE}", re.IGNORECASE),
)
#: A plain word beside スキル, 技能 or 스킬, which names a skill on the same terms as after a verb of use ("python 技能"
#: is someone's Python skills).
_PLAIN_BESIDE_SKILL_WORD = re.compile(rf"{_NOT_AFTER_NAME_CHAR}{_OPEN}({_PLAIN}){_CLOSE}\s*{_CJK_SKILL_WORD_USED}")
#: Forms that name a tool the goal uses, which is a skill when the library has one by that name.
_USED = (
    re.compile(rf"{_USE_VERB}\s+{_ARTICLE}{_OPEN}({_IDENTIFIER}){_CLOSE}(?![A-Za-z0-9_/-])", re.IGNORECASE),
    *_cjk_use(_IDENTIFIER),
)
#: A name right after one of these (at most two words between) is one the goal says not to use.
_NEGATED = re.compile(
    r"(?:\b(?:\w+n['’]t|dont|do\s+not|never|not|without|instead\s+of|rather\s+than|avoid|skip|sin|sans|"
    r"pas(?!\s+(?:[àa]\s|d['’]|de\s))|ohne|nicht|senza|sem|n[aã]o|kein\w*)\b"
    r"|不要|别|別|不用|不使用|禁止|勿|無しで|なしで)\W*(?:\w+\W+){0,2}$",
    re.IGNORECASE,
)


#: German says not to use a name after it ("benutze X nicht", "verwende X bitte nicht."): "nicht" within two words,
#: then the end of the clause or a word that continues the refusal; not "nicht nur" (not only) nor "und nicht Y".
_NEGATED_AFTER = re.compile(
    r"(?:\s+\w+){0,2}?\s+nicht(?=\s*(?:$|[.!?;,)]|(?:mehr|für|fuer|bei|zum|zur|dafür|hierfür|um|wenn|weil)\b))",
    re.IGNORECASE,
)


def _found(goal: str, patterns: Iterable[re.Pattern[str]]) -> list[tuple[int, str]]:
    """``(position, name)`` of each match that the goal does not say to avoid (trailing punctuation dropped)."""
    found = []
    for pattern in patterns:
        for m in pattern.finditer(goal):
            name = m.group(1).rstrip(".,:;/")
            # Case-insensitive matching lets a look-alike through ("\u212a", the Kelvin sign, for "k"): names are ASCII.
            if (
                name
                and name.isascii()
                and not _glued(goal[m.start(1) - 1 : m.start(1)])
                and not _glued(goal[m.end(1) : m.end(1) + 1])
                and not _NEGATED.search(goal[max(0, m.start(1) - 40) : m.start(1)])
                and not _NEGATED_AFTER.match(goal[m.end() : m.end() + 40])
            ):
                found.append((m.start(1), name))
    return found


def _glued(char: str) -> bool:
    """Whether ``char``, next to a name, makes it part of something longer that only looks like a name: an invisible
    character ("danger\u200b-deploy") or a letter of an alphabet like Latin's ("Сdanger", Cyrillic С). Kana, hangul
    and Chinese characters are not glued: "Nexusで" is how Japanese writes a name."""
    if not char:
        return False
    return unicodedata.category(char) == "Cf" or (char.isalpha() and not char.isascii() and char < "\u2e80")


def _distinct(found: list[tuple[int, str]]) -> list[str]:
    names: dict[str, str] = {}
    for _, name in sorted(found):
        names.setdefault(name.lower(), name)
    return list(names.values())


def named_in(goal: str) -> list[str]:
    """The skill names or ids a goal may name, in the order they appear; which of them are skills is for
    :func:`explicit_skills` to say."""
    return _distinct(_found(goal, _NAMED) + _found(goal, _USED))


def explicit_skills(goal: str, skills: Iterable[SkillSummary]) -> list[str]:
    """Ids of every skill the goal names, by ``name`` or by id; unknown names are ignored. A skill that asks not to
    be picked (``disable-model-invocation``) counts only in the forms that can mean nothing else (``$name``, a slash
    command, the name beside the word "skill"), never from "use X to ..."."""
    pool = list(skills)
    by_name: dict[str, list[SkillSummary]] = {}
    for s in pool:
        for key in {(s.name or "").lower(), s.id.lower()}:
            by_name.setdefault(key, []).append(s)
    named = [n.lower() for n in _distinct(_found(goal, _NAMED))]
    used = [n.lower() for n in _distinct(_found(goal, _USED))]
    beside = [w.lower() for w in _distinct(_found(goal, [_PLAIN_BESIDE_SKILL_WORD]))]
    plain = [w.lower() for w in _distinct(_found(goal, _PLAIN_AFTER_USE))]
    rare = _rare_names(plain + beside, pool)
    named += [w for w in beside if w in rare]
    used += [w for w in plain if w in rare]
    ids: dict[str, None] = {}
    for names, shy_too in ((named, True), (used, False)):
        for name in names:
            for s in by_name.get(name, []):
                if shy_too or not s.disable_model_invocation:
                    ids.setdefault(s.id)
    return list(ids)


def _rare_names(words: list[str], pool: list[SkillSummary]) -> set[str]:
    """Those of ``words`` (lower case) that are a skill's name and that few other skills' descriptions use (a brand,
    not a common word). The descriptions are read once, however many words the goal has."""
    wanted = set(words) & {(s.name or "").lower() for s in pool}
    mentions = dict.fromkeys(wanted, 0)
    for s in pool if wanted else ():
        own = (s.name or "").lower()
        for word in wanted & set(re.findall(r"\w+", (s.description or "").lower())):
            mentions[word] += word != own
    return {word for word, n in mentions.items() if n <= RARE_NAME_MENTIONS}
