"""Options and helpers shared by every command group.

Options are declared once here as ``Annotated`` aliases so every command spells
``--namespace`` or ``--context`` the same way and documents it the same way.
Nothing heavy is imported at module level: this module is loaded for --help.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from trainctl.sdk.client import Client
    from trainctl.sdk.failures import FailureSummary

def _check_namespace(value: str | None) -> str | None:
    """Every command's -n is a DNS-1123 label (it also names a directory of the local store)."""
    if value is not None:
        from trainctl.core.validation import check_namespace

        check_namespace(value, "-n/--namespace")
    return value


Namespace = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="Namespace of the job (default: the kubeconfig's, else 'default').",
                 callback=_check_namespace),
]
def _check_selector(value: str | None) -> str | None:
    """-l is parsed before the client is made, so a bad one fails first."""
    if value is not None:
        from trainctl.kube import selectors

        selectors.parse(value)
    return value


def selector_option(help: str):
    return typer.Option("--selector", "-l", help=help, callback=_check_selector)


Selector = Annotated[str | None, selector_option(
    "Label selector, e.g. team=nlp or 'team in (nlp,cv),!spot' (Kubernetes syntax).")]
Context = Annotated[
    str | None,
    typer.Option("--context", help="Kubernetes context to use; implies the Kubernetes backend."),
]
Kubeconfig = Annotated[
    str | None,
    typer.Option("--kubeconfig", help="Path of the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)."),
]
Local = Annotated[
    bool,
    typer.Option("--local", help="Use the local backend (processes on this machine) even if a cluster is configured."),
]
OUTPUT_FORMATS = ("yaml", "json")
LISTING_FORMATS = (*OUTPUT_FORMATS, "name", "wide")  # list and status also print names or wider tables


def output_option(formats: tuple[str, ...], help: str):
    """``-o/--output`` accepting only ``formats``: anything else is a one-line error listing them."""
    def check(value: str | None) -> str | None:
        if value is not None and value not in formats:
            from trainctl.errors import UserError

            raise UserError(f"unknown output format {value!r} for -o/--output: use "
                            f"{', '.join(formats[:-1])} or {formats[-1]}")
        return value

    return typer.Option("--output", "-o", help=help, callback=check)


Output = Annotated[str | None, output_option(OUTPUT_FORMATS, "Print the full resource as yaml or json.")]
ListingOutput = Annotated[str | None, output_option(
    LISTING_FORMATS, "yaml or json: the full resources; name: kind.kubeflow.org/NAME only; wide: more columns.")]

_consoles: dict[bool, Console] = {}


def console(stderr: bool = False) -> Console:
    """The shared Rich console (imported on first use, not at start-up)."""
    if stderr not in _consoles:
        from rich.console import Console

        # piped output is not wrapped at 80 columns: scripts get whole lines
        stream = sys.stderr if stderr else sys.stdout
        _consoles[stderr] = Console(stderr=stderr, highlight=False, soft_wrap=not stream.isatty())
    return _consoles[stderr]


def print_error(message: str) -> None:
    """One line on stderr; the message is escaped so user values never act as Rich markup."""
    from rich.markup import escape

    console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error and exit; used for every user error."""
    print_error(message)
    raise typer.Exit(code)


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
        typer.echo(piece, nl=False)


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
        from rich.markup import escape

        from trainctl.errors import watching_stopped

        console(stderr=True).print(f"\n{escape(watching_stopped(name, namespace))}", soft_wrap=True)
        raise typer.Exit(130) from None  # 128 + SIGINT, as shells report it


def print_failure(summary: FailureSummary, out: Console) -> None:
    """A job's failure summary (trainctl/sdk/failures.py), log lines escaped so they never act as markup."""
    from rich.markup import escape

    headline, *rest = summary.lines()
    color = "red" if summary.state == "Failed" else "yellow"
    out.print(f"[{color}]{'note: ' if summary.state != 'Failed' else ''}{escape(headline)}[/]", soft_wrap=True)
    for line in rest:
        out.print(escape(line), soft_wrap=True, highlight=False)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
