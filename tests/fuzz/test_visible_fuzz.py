"""Fuzzing what reaches a terminal (issue 54): whatever a replica or a user wrote, ``errors.visible`` leaves no
character in it that a terminal acts on or that changes how the line reads without showing itself, and no error
message is longer than its bound, whatever value it quotes."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz, run
from trainctl.errors import MAX_MESSAGE_CHARS, UserError, visible

pytestmark = pytest.mark.fuzz

HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}  # controls, format characters (bidi, zero-width), separators, surrogates
# every code point, and more often those of the categories that matter, in runs of them (a bidi override's text)
characters = st.one_of(st.characters(), st.characters(categories=sorted(HIDDEN)), st.sampled_from("\r\n\t\x1b"))
texts = st.lists(characters, max_size=60).map("".join)
values = st.one_of(texts, st.integers(1, 200_000).map(lambda size: "v " * (size // 2)),
                   st.integers(1, 200_000).map(lambda size: "x" * size))


@fuzz(600)
@given(texts)
def test_visible_leaves_no_control_or_hidden_character_but_the_tab(text):
    shown = visible(text)
    assert all(char == "\t" or unicodedata.category(char) not in HIDDEN for char in shown), repr(shown)
    assert visible(shown) == shown  # shown is what it shows


@fuzz(300)
@given(values, texts)
def test_no_error_message_is_longer_than_its_bound_whatever_it_quotes(value, fix):
    message = UserError(f"--label a={value!r}: the value is bad: {fix}").message
    assert len(message) <= MAX_MESSAGE_CHARS and "\n" not in message
    assert all(char == "\t" or unicodedata.category(char) not in HIDDEN for char in message), repr(message)


@fuzz(40)
@given(st.sampled_from(["--label", "--annotation", "--env", "--volume", "--node-selector"]), values)
def test_submit_echoes_a_value_of_any_length_in_a_bounded_line(flag, value):
    result = run("submit", "pytorch", "--dry-run", flag, f"{value}=1", "--", "python", "train.py")
    assert result.code in (0, 2)
    if result.code == 2:
        assert len(result.stderr) <= MAX_MESSAGE_CHARS + 100, result.stderr[:300]
