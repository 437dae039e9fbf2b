"""Which files of a working directory stay home: git's ignore rules, plus trainctl's own.

A snapshot honours every ``.gitignore`` and ``.trainctlignore`` in the tree, each for its own
directory and below, with git's semantics (last matching pattern wins, ``!`` re-includes,
a trailing ``/`` matches directories only, a pattern with an inner ``/`` is anchored to its
file's directory, ``**`` spans directories). Whatever those say, :data:`ALWAYS_SKIPPED`
never travels: version-control data, virtualenvs, caches and trainctl's own state are
large, machine-specific and useless in a pod. There is no dependency on git itself: a
directory that is not a repository is snapshotted by the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

IGNORE_FILES = (".gitignore", ".trainctlignore")
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", ".trainctl", ".pytest_cache",
                            ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints", ".tox", ".DS_Store"})
VIRTUALENV_MARKER = "pyvenv.cfg"  # a virtualenv of any name (venv/, env/, .direnv/python-3.11/)


@dataclass(frozen=True)
class Rule:
    base: str  # directory of the ignore file, relative to the root ("" for the root)
    pattern: re.Pattern
    negated: bool
    directories_only: bool


def always_skipped(path: Path) -> bool:
    return path.name in ALWAYS_SKIPPED or path.suffix == ".pyc" or (path / VIRTUALENV_MARKER).is_file()


def read_rules(directory: Path, base: str) -> list[Rule]:
    """The rules of ``directory``'s ignore files, .gitignore's first so .trainctlignore can override them."""
    rules = []
    for name in IGNORE_FILES:
        try:
            text = (directory / name).read_text(encoding="utf-8", errors="replace")
        except OSError:  # absent, or unreadable: nothing to honour
            continue
        rules += [rule for line in text.splitlines() if (rule := parse_line(line, base))]
    return rules


def parse_line(line: str, base: str) -> Rule | None:
    line = line.rstrip("\n\r")
    if not line.strip() or line.startswith("#"):
        return None
    line = re.sub(r"(?<!\\) +$", "", line)  # trailing spaces do not count unless escaped
    negated = line.startswith("!")
    if negated or line.startswith(("\\!", "\\#")):
        line = line[1:]
    directories_only = line.endswith("/")
    line = line[:-1] if directories_only else line  # one slash each end, as git: "//x" matches nothing
    if not line:
        return None
    anchored = "/" in line
    try:
        pattern = re.compile(translate(line[1:] if line.startswith("/") else line, anchored))
    except re.error:  # [z-a] and the like: git matches nothing with it, and neither does trainctl
        return None
    return Rule(base, pattern, negated, directories_only)


def translate(pattern: str, anchored: bool) -> str:
    """A gitignore glob as a regular expression over a '/'-separated path relative to its base."""
    parts, i = [], 0
    while i < len(pattern):
        whole = i == 0 or pattern[i - 1] == "/"  # ** spans directories only as a whole segment
        if pattern.startswith("**/", i) and whole:
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            parts.append("/.*")
            i += 3
        elif pattern.startswith("**", i) and whole and i + 2 == len(pattern):
            parts.append(".*")
            i += 2
        elif pattern.startswith("**", i):  # not a whole segment: git reads it as one *
            parts.append("[^/]*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            body, i = bracket(pattern, i)
            parts.append(body)
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            parts.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return ("" if anchored else "(?:.*/)?") + "".join(parts)


def bracket(pattern: str, start: int) -> tuple[str, int]:
    """The class ``[...]`` at ``start`` as a regex class, and where the pattern goes on. As in git, ``!``
    or ``^`` first negates, a ``]`` first is a member, a backslash escapes; unclosed, it matches nothing."""
    i, members = start + 1, ["^"] if pattern[start + 1:start + 2] in ("!", "^") else []
    i += len(members)
    if pattern[i:i + 1] == "]":
        members.append("\\]")
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        escaped = pattern[i] == "\\" and i + 1 < len(pattern)
        character = pattern[i + 1] if escaped else pattern[i]
        members.append("-" if character == "-" and not escaped else re.escape(character))
        i += 2 if escaped else 1
    if i >= len(pattern):
        raise re.error("unclosed [")
    return "[" + "".join(members) + "]", i + 1


def ignored(rules: list[Rule], relative: str, is_dir: bool) -> bool:
    """Whether ``relative`` (to the snapshot root) is ignored: the last rule that matches decides."""
    verdict = False
    for rule in rules:
        if rule.directories_only and not is_dir:
            continue
        if rule.base and not relative.startswith(rule.base + "/"):
            continue
        if rule.pattern.fullmatch(relative[len(rule.base) + 1:] if rule.base else relative):
            verdict = not rule.negated
    return verdict
