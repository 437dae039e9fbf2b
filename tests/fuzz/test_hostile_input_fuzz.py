"""Fuzzing YAML as attackers write it and ``--checkpoints host:`` paths (issue 54, classes 4 and 5): alias bombs of
every shape are refused in one line within a CPU-time and memory bound, a key twice in one mapping at any depth is
refused naming it and its line, and a host path holding a character that does not print, or leading into a system
directory as written or (locally) through a symbolic link, is refused in one line."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz, run
from trainctl import yamlsafe
from trainctl.core.checkpoint_volume import SYSTEM_DIRECTORIES
from trainctl.errors import UserError

pytestmark = pytest.mark.fuzz
CPU_SECONDS = 3  # a refusal or a load of any document below, on one busy core
PEAK_BYTES = 64 * 2**20  # what loading may allocate in Python objects: the expansion would be far more

# ---- alias bombs -----------------------------------------------------------------------------------------------


def bomb(leaf: str, width: int, fan: int, levels: int, kind: str) -> tuple[str, int]:
    """A document whose anchor ``l0`` (a string, a list or a mapping of ``width`` strings ``leaf``) is named ``fan``
    times by ``l1``, which ``l2`` names ``fan`` times, and so on; with the characters of its strings expanded."""
    items = ", ".join([leaf] * width)
    anchor = {"scalar": leaf, "list": f"[{items}]", "map": "{" + ", ".join(f"k{i}: {leaf}" for i in range(width)) + "}"}
    lines = [f"l0: &l0 {anchor[kind]}"]
    lines += [f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fan)}]" for level in range(1, levels + 1)]
    leaves = 1 if kind == "scalar" else width
    expanded = sum(leaves * len(leaf) * fan ** level for level in range(levels + 1))
    return "\n".join(lines) + "\n", expanded


@fuzz(60)
@given(leaf_size=st.integers(1, 200_000), width=st.integers(1, 20), fan=st.integers(1, 60),
       levels=st.integers(1, 6), kind=st.sampled_from(["scalar", "list", "map"]))
def test_any_alias_bomb_is_refused_in_one_line_within_a_time_and_memory_bound(leaf_size, width, fan, levels, kind):
    text, expanded = bomb("x" * leaf_size, width, fan, levels, kind)
    if len(text) > yamlsafe.MAX_INPUT_BYTES:
        return
    tracemalloc.start()
    started = time.process_time()
    try:
        yamlsafe.load_all(text, "-f bomb.yaml")
        refused = None
    except UserError as error:
        refused = error.message
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.process_time() - started < CPU_SECONDS and peak < PEAK_BYTES, (len(text), expanded, peak)
    event("refused" if refused else "loaded")
    if expanded > yamlsafe.MAX_EXPANDED_CHARS:
        assert refused is not None and "once aliases are expanded at line " in refused and "\n" not in refused
        result = run("apply", "--dry-run", "-f", "-", stdin=text.encode())  # one line, exit 2 (the harness asserts)
        assert result.code == 2 and "once aliases are expanded" in result.stderr
    elif expanded < yamlsafe.MAX_EXPANDED_CHARS // 2 and fan ** levels * max(width, 1) < yamlsafe.MAX_NODES // 4:
        assert refused is None


# ---- duplicate keys -----------------------------------------------------------------------------------------------

KEYS = ["a", "b", "replicas", "name"]
keys = st.tuples(st.sampled_from(KEYS), st.booleans())  # (key, written quoted)
trees = st.recursive(
    st.just(None),
    lambda children: st.one_of(
        st.lists(st.tuples(keys, children), min_size=1, max_size=4).map(lambda pairs: ("map", pairs)),
        st.lists(st.lists(st.tuples(keys, children), min_size=1, max_size=3), min_size=1, max_size=2)
        .map(lambda items: ("list", items))),
    max_leaves=12)


def emitted(pairs: list, indent: int, lines: list[str], first: list, dash: bool = False) -> None:
    """``pairs`` as a block mapping into ``lines``; the first key repeated in its own mapping, in document order, into
    ``first`` as (key, its line, the line it first appeared on)."""
    seen: dict[str, int] = {}
    for index, ((key, quoted), child) in enumerate(pairs):
        prefix = " " * (indent - 2) + "- " if dash and index == 0 else " " * indent
        lines.append(f"{prefix}{repr(key) if quoted else key}:" + (" 1" if child is None else ""))
        if key in seen and not first:
            first.append((key, len(lines), seen[key]))
        seen.setdefault(key, len(lines))
        if child is not None and child[0] == "map":
            emitted(child[1], indent + 2, lines, first)
        elif child is not None:
            for item in child[1]:
                emitted(item, indent + 4, lines, first, dash=True)


@fuzz(150)
@given(root=st.lists(st.tuples(keys, trees), min_size=1, max_size=4))
def test_any_duplicate_key_at_any_depth_is_refused_naming_the_key_and_its_line(root):
    lines: list[str] = []
    first: list = []
    emitted(root, 0, lines, first)
    text = "\n".join(lines) + "\n"
    try:
        yamlsafe.load_all(text, "-f job.yaml")
        refused = None
    except UserError as error:
        refused = error.message
    event("duplicate" if first else "none")
    if not first:
        assert refused is None, text
        return
    key, line, earlier = first[0]
    assert refused == (f"-f job.yaml: key {key!r} at line {line} appears twice in one mapping (first at line "
                       f"{earlier}): keep one"), text


# ---- --checkpoints host: paths -------------------------------------------------------------------------------

segments = st.lists(st.text("abc-_.é ", min_size=1, max_size=6).filter(lambda s: s not in (".", "..")), max_size=3)
hidden = st.one_of(st.characters(categories=["Cc", "Cf", "Zl", "Zp", "Cs"]), st.sampled_from(["\n", "\x1b", "\x85"]))


@fuzz(100)
@given(root=st.sampled_from(SYSTEM_DIRECTORIES), tail=segments, control=st.one_of(st.none(), hidden),
       position=st.integers(0, 40), through=st.sampled_from(["written", "link"]))
def test_a_host_path_with_a_control_or_leading_into_a_system_directory_is_refused(root, tail, control, position,
                                                                                   through):
    base = Path.cwd() / "safe" if control is not None else Path(root)
    if through == "link" and control is None:  # locally the node is this machine: its links are followed
        base = Path.cwd() / f"link{root.replace('/', '-')}"
        if not base.is_symlink():
            base.symlink_to(root)
    path = "/".join([str(base), *tail])
    if control is not None:
        cut = 1 + position % len(path)
        path = path[:cut] + control + path[cut:]
    result = run("submit", "pytorch", "--dry-run", "--no-preflight", "--checkpoints", f"host:{path}", "--",
                 "python", "t.py")
    assert result.code == 2, (path, result.stdout[-300:])
    expected = "does not print" if control is not None else "a system directory of the node"
    assert expected in result.stderr and not any(char in result.stderr[:-1] for char in "\x1b\x85\u2028"), result.stderr
