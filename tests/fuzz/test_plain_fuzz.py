"""Fuzzing cli/plain.py against Rich and click: without a terminal, the commands print the same text
whether Rich (the Typer app on a terminal's neighbours) or cli/plain.py (cli/fast.py's path) prints it.

Any text a job can hold (names, messages, log lines with brackets, backslashes, tabs, control codes)
is escaped into markup the way the commands write it, and rendered both ways.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz
from trainctl.cli import plain

pytestmark = pytest.mark.fuzz

# what makes markup interesting: brackets, tag names, backslashes, tabs and the control codes Rich drops
pieces = st.sampled_from(["[", "]", "[/]", "[bold]", "[/bold]", "[a]", "\\", "\\\\", "\t", "\r", "\x07", "\x0b",
                          "\n", "x", " ", "é", "漢", "[#ff0000]", "[@click]", "\x1b[31m", "[1]"])
texts = st.lists(st.one_of(pieces, st.text(max_size=6)), max_size=12).map("".join)
STYLES = ["", "bold", "red", "yellow", "dim", "bold red"]


def rich_prints(text: str, **options) -> str:
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, highlight=False, emoji=False, soft_wrap=True, force_terminal=False).print(text, **options)
    return out.getvalue()


def plain_prints(text: str, **options) -> str:
    out = io.StringIO()
    plain.PlainConsole(out).print(text, **options)
    return out.getvalue()


@fuzz(400)
@given(texts, st.sampled_from(STYLES), texts)
def test_escaped_text_in_markup_prints_as_rich_prints_it(text, style, more):
    from rich.markup import escape

    assert plain.escape(text) == escape(text)
    markup = f"[{style}]{plain.escape(text)}[/] {plain.escape(more)}" if style else plain.escape(text + more)
    assert plain_prints(markup) == rich_prints(markup)


@fuzz(200)
@given(texts)
def test_text_printed_with_markup_off_prints_as_rich_prints_it(text):
    assert plain_prints(text, markup=False, soft_wrap=True) == rich_prints(text, markup=False, soft_wrap=True)


@fuzz(200)
@given(texts)
def test_echo_writes_what_typer_echo_writes_into_a_pipe(text):
    import contextlib

    import typer

    ours, theirs = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(ours):
        plain.echo(text)
    with contextlib.redirect_stdout(theirs):
        typer.echo(text)
    assert ours.getvalue() == theirs.getvalue()
