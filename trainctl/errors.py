"""Errors that end a command with a one-line message instead of a traceback, in the words of the caller.

Every problem caused by the user's input (a flag, a YAML file, a name, a
missing cluster) is raised as :class:`UserError`. The CLI prints its message
on one line and exits with status 2; nothing else is caught, so a real bug
still shows its traceback. In IPython (a notebook) a UserError shows as that
one line too.

The same checks serve two front-ends that name the same option differently:
``trainctl submit --backoff-limit -1`` and ``client.run(..., backoff_limit=-1)``.
A message names an option with :func:`option` or :func:`setting`, which spell it
for the front-end the call came through: flags once the CLI declared itself
(:func:`speaking`, in ``trainctl.cli.app.main``), the Python keyword otherwise.

What trainctl shows of a replica's or the API's text (log lines in a failure summary, metric names, termination,
condition and event messages, names read back from a cluster) goes through :func:`visible` first, in the CLI,
the notebook displays and ``export``'s summary alike: a replica must not be able to set the title of the
terminal that runs ``trainctl status``, clear it, or paint a line that reads as trainctl's own (as kubectl
neutralizes control sequences since CVE-2021-25743). So does the message of every :class:`UserError`, which may
quote what the API server or a file said.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

CLI, PYTHON = "cli", "python"
FRONT_END: ContextVar[str] = ContextVar("trainctl_front_end", default=PYTHON)
# Where the CLI's flag is not --<keyword with - for _> (the Python keyword is the option's name)
CLI_FLAGS = {"selector": "-l/--selector", "until": "--for", "namespace": "-n/--namespace", "metrics": "--metric"}
CLI_SETTINGS = {("backend", "local"): "--local"}  # a setting that is a flag of its own
# Where the Python API's keyword is not the option's name: pip= is packages= by its data-science name
PYTHON_KEYWORDS = {"pip": "packages"}


@contextmanager
def speaking(front_end: str) -> Iterator[None]:
    """Messages raised inside name options as ``front_end`` (:data:`CLI` or :data:`PYTHON`) spells them."""
    token = FRONT_END.set(front_end)
    try:
        yield
    finally:
        FRONT_END.reset(token)


def spelled(cli: str, python: str) -> str:
    """The words of the front-end the call came through: ``cli`` on the command line, else ``python``."""
    return cli if FRONT_END.get() == CLI else python


def option(name: str) -> str:
    """Option ``name`` (the Python keyword, ``backoff_limit``) as the caller knows it: ``--backoff-limit`` on
    the command line, ``backoff_limit`` in Python."""
    return spelled(CLI_FLAGS.get(name, f"--{name.replace('_', '-')}"), PYTHON_KEYWORDS.get(name, name))


def setting(name: str, value: object = True) -> str:
    """Option ``name`` given ``value``, as the caller would write it: ``--replace`` and ``replace=True``,
    ``--volume host:/d:/d`` and ``volume=['host:/d:/d']`` (a list is the flag repeated)."""
    if FRONT_END.get() != CLI:
        return f"{PYTHON_KEYWORDS.get(name, name)}={value!r}"
    if isinstance(value, str) and (name, value) in CLI_SETTINGS:
        return CLI_SETTINGS[name, value]
    flag, values = option(name), value if isinstance(value, list) else [value]
    return " ".join(flag if item is True else f"{flag} {item}" for item in values)


#: what a terminal acts on, as it is shown instead: the C0 controls but the tab in caret notation (ESC as ``^[``,
#: BEL as ``^G``: what ``cat -v`` shows), DEL as ``^?``, the C1 controls (U+0080 to U+009F) as ``\x80``..``\x9f``
SHOWN_CONTROLS = {**{code: f"^{chr(code ^ 0x40)}" for code in (*range(0x20), 0x7F) if code != 0x09},
                  **{code: f"\\x{code:02x}" for code in range(0x80, 0xA0)}}


#: what changes how a line reads without showing itself, shown as ``<U+202E>``: the format characters (the bidi
#: controls U+202A..U+202E and U+2066..U+2069 that reorder the rest of a line, as in "Trojan Source", zero-width
#: spaces and joiners, the soft hyphen), the line and paragraph separators, and lone surrogates (unprintable)
HIDDEN_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cs"})
CACHED_CHARACTERS = 1 << 16  # of the characters looked up, the most whose spelling is kept


class _Shown(dict):
    """:data:`SHOWN_CONTROLS`, and each character of :data:`HIDDEN_CATEGORIES` as ``<U+XXXX>``, looked up as
    ``str.translate`` meets them: the escaping stays one pass in C, and a character's category is asked once."""

    def __missing__(self, code: int) -> str:
        from unicodedata import category  # a C module, but only text that is not printable needs it

        character = chr(code)
        shown = f"<U+{code:04X}>" if category(character) in HIDDEN_CATEGORIES else character
        if len(self) < CACHED_CHARACTERS:
            self[code] = shown
        return shown


_SHOWN = _Shown(SHOWN_CONTROLS)


def visible(text: str) -> str:
    """``text``, one line of it, as a terminal shows it, with nothing left in it that a terminal would act on.

    A carriage return is taken as a terminal takes it: of the text between two, only the last that shows
    anything is left (a progress bar's final state, a line that ended in ``\\r\\n`` as it read). Every other
    control character is shown as :data:`SHOWN_CONTROLS` spells it, a newline too (``^J``: a multi-line text is
    printed a line at a time, each through this); a tab stays. A character that changes how the line reads without
    showing itself (:data:`HIDDEN_CATEGORIES`: a right-to-left override) is shown as ``<U+202E>``. Other characters
    are left as they are.
    """
    if text.isprintable():  # nearly every line: one pass in C (format characters are not printable)
        return text
    if "\r" in text:
        text = "\n".join(drawn(line) for line in text.split("\n"))
    return text.translate(_SHOWN)


def drawn(line: str) -> str:
    """What a terminal shows of a line rewritten by carriage returns: its last piece that is not blank."""
    return next((piece for piece in reversed(line.split("\r")) if piece.strip()), "")


#: of a message, the most shown of one word (a value it quotes, cut as :func:`shortened` cuts it) and of the whole
#: (its start, which names the culprit, and its end, which says the fix, kept): a 100 KB value stays readable
MAX_WORD_CHARS, MAX_MESSAGE_CHARS = 200, 2000


def shortened(text: str, limit: int = 80, end: int = 0) -> str:
    """``text``, or in ``limit`` characters its start, ``...`` and its last ``end`` characters: how a message quotes
    a value of any length (a ``--name``, a label's value)."""
    return text if len(text) <= limit else f"{text[:limit - 3 - end]}...{text[len(text) - end:]}"


def one_bounded_line(message: str) -> str:
    """``message`` on one line that drives no terminal, its words and itself cut to their bounds
    (:data:`MAX_WORD_CHARS`, :data:`MAX_MESSAGE_CHARS`), saying how much was cut."""
    words = visible(" ".join(message.split())).split(" ")
    text = " ".join(shortened(word, MAX_WORD_CHARS, end=10) for word in words)
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    head, tail = MAX_MESSAGE_CHARS // 2, MAX_MESSAGE_CHARS // 4
    return f"{text[:head]} ... [{len(text) - head - tail} characters cut] ... {text[-tail:]}"


class UserError(Exception):
    """Bad input: the message names the culprit and how to fix it."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(one_bounded_line(message))  # always one line, of bounded length, which drives no terminal

    @property
    def message(self) -> str:
        return self.args[0]

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback through trainctl's insides: the one line."""
        return [f"{type(self).__name__}: {self.message}"]


class NotFound(UserError):
    """The named job (or other object) does not exist."""

    @classmethod
    def job(cls, name: str, namespace: str, backend: str, elsewhere: list[str] = ()) -> "NotFound":
        """No job ``name`` in ``namespace``; ``elsewhere``: the namespaces that have one, which the
        message names (YAML written for the Training Operator often says ``namespace: kubeflow``)."""
        others = sorted(set(elsewhere) - {namespace})
        if len(others) == 1:
            hint = f'there is one in namespace "{others[0]}": add -n {others[0]}'
        elif others:
            hint = f"namespaces {', '.join(others)} have one: add -n NAMESPACE"
        else:
            hint = "see trainctl list"
        return cls(f'job "{name}" not found in namespace "{namespace}" ({backend}): {hint}')


class InvalidArgument(UserError):
    """A Python API call's argument is unknown or bad (``Client.run(workers=0)``); nothing was created."""


class JobFailed(Exception):
    """A job the caller waited for failed; ``summary`` says which replica, how, and its last log lines.

    Not a :class:`UserError`: the input was fine, the training was not. ``str()`` is the whole
    multi-line summary (:class:`trainctl.sdk.failures.FailureSummary`), ready to print.
    """

    exit_code = 1

    def __init__(self, summary) -> None:
        super().__init__(str(summary))
        self.summary = summary


class StoppedWatching(KeyboardInterrupt):
    """Ctrl-C (a notebook's stop button) while waiting for a job or following its logs: the waiting stopped,
    the job did not. Still a KeyboardInterrupt, so a script stops as it would; the message says so."""

    def __init__(self, name: str, namespace: str | None = None) -> None:
        super().__init__(watching_stopped(name, namespace))

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def watching_stopped(name: str, namespace: str | None = None) -> str:
    """What Ctrl-C while a job is watched says, on either front-end: only the watching stopped, and how to
    check or stop the job. One text for every command and method that watches a job, so users learn it once."""
    flag = f" -n {namespace}" if namespace else ""
    handle = f"client.job({name!r}{f', {namespace!r}' if namespace else ''})"
    how = spelled(f"trainctl status {name}{flag} to check, trainctl delete {name}{flag} to stop it",
                  f"{handle}.status to check, {handle}.delete() to stop it")
    return f"stopped watching {name}; the job keeps running: {how}"
