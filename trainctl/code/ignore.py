"""Which files of a working directory stay home: git's ignore rules, plus trainctl's own.

A snapshot honours the rules git applies to the directory, with git's semantics (last matching
pattern wins, ``!`` re-includes, a trailing ``/`` matches directories only, a pattern with an inner
``/`` is anchored to its file's directory, ``**`` spans directories): every ``.gitignore`` in the
tree, each for its own directory and below, and, when the directory lies inside a git repository,
the ``.gitignore`` files of the directories above it up to the repository's top and the
repository's ``.git/info/exclude`` (so ``--workdir sub`` leaves out what ``git status`` in ``sub``
leaves out). Paths are therefore matched from the repository's top (:class:`Scope`). A UTF-8 BOM
that opens a file is skipped, as git skips it. ``.trainctlignore`` files are read the same way,
each after its directory's ``.gitignore``, so they can re-include what git ignores. A personal
``core.excludesFile`` is not read: the snapshot depends on the tree and its repository only.

An ignore file that is not a regular file (a FIFO would block, a link to ``/dev/zero`` never ends),
is larger than :data:`MAX_IGNORE_FILE` or cannot be read is refused in one line: what it excludes
must not travel because it could not be read. Whatever the rules say, :data:`ALWAYS_SKIPPED` never
travels: version-control data, virtualenvs, caches and trainctl's own state are large,
machine-specific and useless in a pod. There is no dependency on git itself: a directory that is
not a repository is snapshotted by the same rules.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from trainctl.code import regular
from trainctl.errors import UserError, option

IGNORE_FILES = (".gitignore", ".trainctlignore")
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", ".trainctl", ".pytest_cache",
                            ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints", ".tox", ".DS_Store"})
VIRTUALENV_MARKER = "pyvenv.cfg"  # a virtualenv of any name (venv/, env/, .direnv/python-3.11/)
MAX_IGNORE_FILE = 1 << 20  # far above any real one; every pattern is a regular expression tried on every path
BOM = "\ufeff"


@dataclass(frozen=True)
class Rule:
    base: str  # directory of the ignore file, relative to the root ("" for the root)
    pattern: re.Pattern
    negated: bool
    directories_only: bool


def always_skipped(path: Path) -> bool:
    return path.name in ALWAYS_SKIPPED or path.suffix == ".pyc" or (path / VIRTUALENV_MARKER).is_file()


@dataclass(frozen=True)
class Scope:
    """Where a snapshot's root lies in its git repository, and the repository's rules from outside the root."""

    prefix: str  # the root's path from the repository's top, ending in "/"; "" at the top or outside any repository
    rules: list[Rule]  # info/exclude first (git ranks it below every .gitignore), then the directories above the root


def scope(root: Path) -> Scope:
    top = repository_top(root)
    if top is None:
        return Scope("", [])
    exclude = info_exclude(top)
    rules = parse(read_ignore_file(exclude), "") if exclude else []
    parts = root.relative_to(top).parts
    for depth in range(len(parts)):  # the top, then each directory down to the root's parent
        rules += read_rules(top.joinpath(*parts[:depth]), "/".join(parts[:depth]))
    return Scope("".join(f"{part}/" for part in parts), rules)


def repository_top(root: Path) -> Path | None:
    """The nearest directory at or above ``root`` holding ``.git`` (a directory, or a worktree's file)."""
    return next((directory for directory in (root, *root.parents) if os.path.lexists(directory / ".git")), None)


def info_exclude(top: Path) -> Path | None:
    """The repository's info/exclude. A worktree's or submodule's ``.git`` is a file naming its git
    directory, and a worktree's git directory names the shared one in ``commondir``."""
    git = top / ".git"
    if not git.is_dir():
        pointer = small_text(git)
        if not pointer.startswith("gitdir:"):
            return None
        git = top / pointer.removeprefix("gitdir:").strip()
        common = small_text(git / "commondir").strip()
        git = git / common if common else git
    return git / "info" / "exclude"


def small_text(path: Path) -> str:
    """The start of a file git writes (a pointer of one line); '' when it cannot be read."""
    try:
        return regular.read_prefix(path, 4096).decode("utf-8", errors="replace")
    except OSError:
        return ""


def read_rules(directory: Path, base: str) -> list[Rule]:
    """The rules of ``directory``'s ignore files, .gitignore's first so .trainctlignore can override them."""
    return [rule for name in IGNORE_FILES for rule in parse(read_ignore_file(directory / name), base)]


def read_ignore_file(path: Path) -> str:
    """An ignore file's text, '' when there is none; one line when it cannot be honoured (see the module)."""
    try:
        data = regular.read_prefix(path, MAX_IGNORE_FILE + 1)
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except regular.NotRegular as err:
        raise UserError(f"{option('workdir')}: the ignore file {path} is {err}: make it a plain text file or "
                        "remove it") from None
    except OSError as err:
        raise UserError(f"{option('workdir')}: cannot read the ignore file {path} ({err.strerror or err}): what it "
                        "leaves out would travel; make it readable or remove it") from None
    if len(data) > MAX_IGNORE_FILE:
        raise UserError(f"{option('workdir')}: the ignore file {path} is larger than {MAX_IGNORE_FILE >> 20} MiB: "
                        "an ignore file lists patterns, not data")
    return data.decode("utf-8", errors="replace")


def parse(text: str, base: str) -> list[Rule]:
    return [rule for line in text.removeprefix(BOM).splitlines() if (rule := parse_line(line, base))]


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
    """Whether ``relative`` (to the rules' common root: the repository's top) is ignored: the last rule
    that matches decides."""
    verdict = False
    for rule in rules:
        if rule.directories_only and not is_dir:
            continue
        if rule.base and not relative.startswith(rule.base + "/"):
            continue
        if rule.pattern.fullmatch(relative[len(rule.base) + 1:] if rule.base else relative):
            verdict = not rule.negated
    return verdict
