"""Output without Rich or typer: what a command prints into a pipe, a file or a script's capture.

The commands that people run in loops (``status``, ``list``, ``logs``, ``wait``) must not pay for
Rich (about 20 ms to import) when nothing will show its colors. Their code writes Rich console
markup once (``[bold]name[/] ...``, user text passed through :func:`escape`, a replica's or the
API's through :func:`shown`); :func:`console` hands them Rich's console where the stream is a
terminal, and :class:`PlainConsole` where it is not, which prints the same text Rich would print
there: the markup's tags taken out, escaped brackets restored, the control codes Rich drops
dropped, tabs expanded. :func:`echo` is ``typer.echo`` for the same streams.
tests/fuzz/test_plain_fuzz.py holds both to Rich's and click's own output.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING

from trainctl.errors import visible

if TYPE_CHECKING:
    from collections.abc import Iterator

# Rich's own patterns (rich/markup.py), compiled on first use (re's cache) as every pattern on the fast path: a tag is [ followed by a lower-case letter, #, / or @ up to the next ]
TAG = r"((\\*)\[([a-z#/@][^[]*?)])"
ESCAPABLE = r"(\\*)(\[[a-z#/@][^[]*?])"
# what Rich's Text drops from any string (rich/control.py): bell, backspace, vertical tab, form feed, CR
DROPPED_CONTROLS = dict.fromkeys((7, 8, 11, 12, 13))
ANSI_SEQUENCE = r"\033\[[;?0-9]*[a-zA-Z]"  # what click.echo strips from output that is not a terminal
SGR = {"dim": "2", "error": "1;31"}  # the only styles written to a terminal here (stderr_line)


def is_plain(stream: IO) -> bool:
    """Whether Rich would treat ``stream`` as no terminal (no colors, no live display): Rich's own test,
    TTY_COMPATIBLE and FORCE_COLOR first, then isatty."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "0"
    if os.environ.get("FORCE_COLOR") is not None:
        return os.environ["FORCE_COLOR"] == ""
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return True


def escape(text: str) -> str:
    """``rich.markup.escape``: ``text`` inside markup prints as it is (the same result, without importing Rich)."""
    escaped = re.sub(ESCAPABLE, lambda match: f"{match[1]}{match[1]}\\{match[2]}", text)
    return escaped + "\\" if escaped.endswith("\\") and not escaped.endswith("\\\\") else escaped


def shown(text: str | None) -> str:
    """Text a replica or the API wrote, for markup: its control characters made visible (trainctl.errors.visible:
    it never acts on the terminal), then escaped (it never reads as markup). None shows as nothing."""
    return escape(visible(text or ""))


def strip_markup(markup: str) -> str:
    """The text Rich prints for ``markup`` where it shows no style: tags out, escapes undone (rich.markup.render)."""
    pieces, position = [], 0
    for match in re.finditer(TAG, markup):
        start, end = match.span()
        if start > position:
            pieces.append(markup[position:start].replace("\\[", "["))
        backslashes, escaped = divmod(len(match[2]), 2)
        pieces.append("\\" * backslashes)
        if escaped:  # an escaped tag is text
            pieces.append(match[1][len(match[2]):])
        position = end
    pieces.append(markup[position:].replace("\\[", "["))
    return "".join(pieces)


def plain_text(markup: str, is_markup: bool = True) -> str:
    """What Rich prints for ``markup`` on a stream that is no terminal, soft-wrapped (one line per line);
    ``is_markup=False``: a text printed with ``markup=False``, brackets and all."""
    text = (strip_markup(markup) if is_markup else markup).translate(DROPPED_CONTROLS)
    return "\n".join(map(expand_tabs, text.split("\n"))) if "\t" in text else text


def expand_tabs(line: str, tab_size: int = 8) -> str:
    """Rich's tab stops (rich.text.Text.expand_tabs): columns counted in terminal cells, so a wide character
    counts two and a control character none (Rich's own cell widths, loaded only for such a line)."""
    if "\t" not in line:
        return line
    if line.isascii() and line.replace("\t", " ").isprintable():
        width = len
    else:
        from rich.cells import cell_len as width
    pieces, column = [], 0
    *tabbed, last = line.split("\t")
    for part in tabbed:
        column += width(part) + 1  # the tab itself is a space at least
        pad = -column % tab_size
        pieces.append(part + " " * (1 + pad))
        column += pad
    return "".join(pieces) + last


class PlainConsole:
    """The part of ``rich.console.Console`` the commands use, for a stream that is no terminal."""

    is_terminal = False

    def __init__(self, stream: IO) -> None:
        self.stream = stream

    def print(self, text: str = "", *, markup: bool | None = None, soft_wrap: bool = True, highlight: bool = False,
              crop: bool = True) -> None:
        """Rich's ``print`` of one string; of its options only ``markup=False`` (``text`` is no markup) changes
        what is printed where there is no terminal."""
        self.stream.write(plain_text(text, markup is not False) + "\n")
        self.stream.flush()

    @contextmanager
    def status(self, markup: str) -> Iterator[PlainStatus]:
        """Rich shows a spinner only on a terminal; elsewhere its status prints nothing, so neither does this."""
        yield PlainStatus()


class PlainStatus:
    def update(self, markup: str) -> None:
        """A spinner's new text: nothing to show without a terminal."""


def echo(message: str = "", nl: bool = True, err: bool = False) -> None:
    """``typer.echo`` of a string: written and flushed, escape sequences stripped where the stream is no terminal."""
    stream = sys.stderr if err else sys.stdout
    text = f"{message}\n" if nl else message
    if "\033" in text and not _isatty(stream):
        text = re.sub(ANSI_SEQUENCE, "", text)
    stream.write(text)
    stream.flush()


def _isatty(stream: IO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def stderr_line(message: str, style: str | None = None, prefix: str = "") -> None:
    """One line on stderr: ``prefix`` (``error:``) then ``message``, as they are; on a terminal that takes colors
    (not NO_COLOR, not TERM=dumb) the prefix, or the whole line when there is none, in ``style`` (:data:`SGR`)."""
    message = plain_text(escape(message))  # what Rich made of it: the same controls dropped, tabs expanded
    styled = style is not None and not is_plain(sys.stderr) and "NO_COLOR" not in os.environ \
        and os.environ.get("TERM") != "dumb"
    if styled and prefix:
        line = f"\x1b[{SGR[style]}m{prefix}\x1b[0m {message}"
    elif styled:
        line = f"\x1b[{SGR[style]}m{message}\x1b[0m"
    else:
        line = f"{prefix} {message}" if prefix else message
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
