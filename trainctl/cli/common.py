"""Options and helpers shared by every command group.

The options every command shares (``--namespace``, ``--context`` ...) are declared once in
cli/params.py and named here too. Nothing heavy is imported at module level, neither typer nor
Rich: the commands people run in loops import this module on cli/fast.py's path, which prints
without Rich where the output is no terminal (cli/plain.py).
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

from trainctl.cli.params import (LISTING_FORMATS, OUTPUT_FORMATS, Context, Kubeconfig, ListingOutput, Local,  # noqa: F401
                                 Namespace, Output, Selector, output_option, selector_option)
from trainctl.cli.plain import PlainConsole, echo, escape, is_plain, stderr_line

if TYPE_CHECKING:
    from rich.console import Console

    from trainctl.sdk.client import Client
    from trainctl.sdk.failures import FailureSummary

_consoles: dict[bool, Console | PlainConsole] = {}


def console(stderr: bool = False) -> Console | PlainConsole:
    """The shared console for stdout (or stderr): Rich's on a terminal (imported on first use), else a
    :class:`~trainctl.cli.plain.PlainConsole` printing the same text without loading Rich."""
    if stderr not in _consoles:
        stream = sys.stderr if stderr else sys.stdout
        if is_plain(stream):
            _consoles[stderr] = PlainConsole(stream)
        else:
            from rich.console import Console

            # emoji off: a job's text such as ":100:" is printed as written, not as a picture
            _consoles[stderr] = Console(stderr=stderr, highlight=False, emoji=False, soft_wrap=not stream.isatty())
    return _consoles[stderr]


def print_error(message: str) -> None:
    """One line on stderr, ``error:`` in bold red on a terminal; the message as it is."""
    stderr_line(message, "error", prefix="error:")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error and exit; used for every user error."""
    print_error(message)
    raise SystemExit(code)


def finish(command: Callable[[], object]) -> int:
    """The exit status of running ``command``: a UserError is one line on stderr and its exit status (2),
    Ctrl-C is 130, a reader that went away (``| head``) is no failure."""
    from trainctl.errors import UserError

    try:
        code = command()
        sys.stdout.flush()  # a full disk shows here, as one line, rather than at the interpreter's exit
    except UserError as err:
        print_error(err.message)
        code = err.exit_code
    except KeyboardInterrupt:
        print_error("interrupted")
        code = 130
    except BrokenPipeError:
        code = 0
    except OSError as err:
        if err.filename is not None or err.errno not in OUTPUT_ERRNOS:
            raise  # a file's (the store names its own), not the output's
        code = output_failed(err)
    return code if isinstance(code, int) else 0


#: what writing the output raises on a full disk, past a quota or a size limit, or on a failing device
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def output_failed(err: OSError) -> int:
    """``trainctl list > /dev/full``: one line on stderr and exit status 1. What is left in stdout's buffer goes to
    /dev/null, so the interpreter's own flush at exit does not fail on it a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    try:
        print_error(f"could not write the output: {err.strerror} (errno {err.errno})")
    except OSError:  # stderr on the same full disk: the exit status still says it
        pass
    return 1


def make_client(local: bool = False, context: str | None = None, kubeconfig: str | None = None) -> Client:
    from trainctl.sdk.client import Client, choose_backend

    # chosen here, so the Client is told and says nothing: every command's summary names the backend
    return Client(choose_backend("local" if local else None, context, kubeconfig), context=context,
                  kubeconfig=kubeconfig)


def dump(resource: object, fmt: str) -> str:
    """Render a resource as yaml or json for ``-o``."""
    if fmt == "json":
        import json

        return json.dumps(resource, indent=2, sort_keys=False)
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(resource, sort_keys=False, default_flow_style=False)
    fail(f"unknown output format {fmt!r} for -o/--output: use {' or '.join(OUTPUT_FORMATS)}")


def dump_all(documents: Iterable[dict], fmt: str) -> str:
    """Several resources for ``-o``: YAML documents, or one JSON ``v1`` ``List`` (as kubectl prints them)."""
    return "".join(dumped_pieces(documents, fmt))


def echo_all(documents: Iterable[dict], fmt: str) -> None:
    """:func:`dump_all`, printed a document at a time: a code snapshot's ConfigMaps may be megabytes each."""
    for piece in dumped_pieces(documents, fmt):
        echo(piece, nl=False)


def dumped_pieces(documents: Iterable[dict], fmt: str) -> Iterator[str]:
    """The text of :func:`dump_all` in pieces, one per document, made as ``documents`` yields them."""
    import itertools
    import textwrap

    documents = iter(documents)
    first = list(itertools.islice(documents, 2))
    if fmt != "json" or len(first) < 2:
        for index, document in enumerate(itertools.chain(first, documents)):
            yield ("---\n" if index else "") + dump(document, fmt)
        return
    # json.dumps of the whole List, item by item: each item indented as that List would indent it
    yield '{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [\n'
    for index, document in enumerate(itertools.chain(first, documents)):
        yield ("" if index == 0 else ",\n") + textwrap.indent(dump(document, fmt), "    ")
    yield "\n  ]\n}"



def with_parameters(command, added: list):
    """``command`` with ``added`` (keyword-only :class:`inspect.Parameter` objects made from a registry: the
    submit options, the kinds' helper images) among its parameters, after its positional ones and before its own
    keywords; its ``**given`` receives them."""
    import inspect

    signature = inspect.signature(command, eval_str=True)
    fixed = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    positional = [p for p in fixed if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    own = [p for p in fixed if p.kind is inspect.Parameter.KEYWORD_ONLY]
    parameters = [*positional, *added, *own]
    command.__signature__ = signature.replace(parameters=parameters)
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    return command

@contextmanager
def watching(name: str, namespace: str | None = None) -> Iterator[None]:
    """Around ``--wait``/``--follow``: Ctrl-C ends the watching with errors.watching_stopped's words, exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        from trainctl.errors import watching_stopped

        stderr_line(f"\n{watching_stopped(name, namespace)}")
        raise SystemExit(130) from None  # 128 + SIGINT, as shells report it


def print_failure(summary: FailureSummary, out: Console) -> None:
    """A job's failure summary (trainctl/sdk/failures.py), log lines escaped so they never act as markup."""
    headline, *rest = summary.lines()
    color = "red" if summary.state == "Failed" else "yellow"
    out.print(f"[{color}]{'note: ' if summary.state != 'Failed' else ''}{escape(headline)}[/]", soft_wrap=True)
    for line in rest:
        out.print(escape(line), soft_wrap=True, highlight=False)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
