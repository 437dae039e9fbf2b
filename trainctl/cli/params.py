"""Commands' options and arguments, declared once and read by two parsers: typer's and cli/fast.py's.

A command declares a parameter as it would for typer, ``Annotated[str | None, Option("--namespace",
"-n", help=...)]``, with this module's :class:`Option` and :class:`Argument`: records of typer's
arguments that need no typer to make. cli/app.py turns them into typer's own when it builds the
app (:func:`trainctl.cli.app.typer_callback`); cli/fast.py reads the same records to parse a line
of the commands people run in loops without importing typer (:func:`parameters`). The options
every command shares are declared here once.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple, get_args, get_origin, get_type_hints


class Option:
    """``typer.Option(*names, **settings)``, made only when the Typer app is built."""

    def __init__(self, *names: str, **settings) -> None:
        self.names, self.settings = names, settings

    def __repr__(self) -> str:
        return f"Option{self.names}"


class Argument:
    """``typer.Argument(**settings)``, made only when the Typer app is built."""

    def __init__(self, **settings) -> None:
        self.names, self.settings = (), settings


class Parameter(NamedTuple):
    """One parameter of a command as cli/fast.py parses it."""

    name: str  # the Python parameter
    kind: type  # str, int, bool or list (of strings)
    declared: Option | Argument
    default: object


def declared(annotation) -> Option | Argument | None:
    """The Option or Argument in an ``Annotated`` annotation (None: undeclared, or typer's own)."""
    if get_origin(annotation) is not Annotated:
        return None
    return next((meta for meta in get_args(annotation)[1:] if isinstance(meta, (Option, Argument))), None)


def value_type(annotation) -> type:
    """``str | None`` -> str, ``list[str] | None`` -> list, ``int`` -> int, ``bool`` -> bool."""
    base = get_args(annotation)[0]
    if get_origin(base) is list:
        return list
    choices = [arg for arg in get_args(base) if arg is not type(None)] or [base]
    return list if get_origin(choices[0]) is list else choices[0]


def parameters(command) -> list[Parameter] | None:
    """Every parameter of ``command`` as this module declares it, in order; None when one is declared some
    other way (typer's own Option, **kwargs): such a command is left to typer."""
    code = command.__code__
    if code.co_flags & 0x08:  # **kwargs: parameters made at run time (submit's)
        return None
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    defaults = dict(zip(names[code.co_argcount - len(command.__defaults__ or ()):], command.__defaults__ or ()))
    defaults.update(command.__kwdefaults__ or {})
    hints = get_type_hints(command, include_extras=True)
    found = []
    for name in names:
        record = declared(hints.get(name))
        if record is None:
            return None
        found.append(Parameter(name, value_type(hints[name]), record, defaults.get(name, ...)))
    return found


def _check_namespace(value: str | None) -> str | None:
    """Every command's -n is a DNS-1123 label (it also names a directory of the local store)."""
    if value is not None:
        from trainctl.kube.names import check_namespace

        check_namespace(value, "-n/--namespace")
    return value


def _check_selector(value: str | None) -> str | None:
    """-l is parsed before the client is made, so a bad one fails first."""
    if value is not None:
        from trainctl.kube import selectors

        selectors.parse(value)
    return value


def selector_option(help: str) -> Option:
    return Option("--selector", "-l", help=help, callback=_check_selector)


OUTPUT_FORMATS = ("yaml", "json")
LISTING_FORMATS = (*OUTPUT_FORMATS, "name", "wide")  # list and status also print names or wider tables


def output_option(formats: tuple[str, ...], help: str) -> Option:
    """``-o/--output`` accepting only ``formats``: anything else is a one-line error listing them."""
    def check(value: str | None) -> str | None:
        if value is not None and value not in formats:
            from trainctl.errors import UserError

            raise UserError(f"unknown output format {value!r} for -o/--output: use "
                            f"{', '.join(formats[:-1])} or {formats[-1]}")
        return value

    return Option("--output", "-o", help=help, callback=check)


Namespace = Annotated[str | None, Option(
    "--namespace", "-n", help="Namespace of the job (default: the kubeconfig's, else 'default').",
    callback=_check_namespace)]
Selector = Annotated[str | None, selector_option(
    "Label selector, e.g. team=nlp or 'team in (nlp,cv),!spot' (Kubernetes syntax).")]
Context = Annotated[str | None, Option(
    "--context", help="Kubernetes context to use; implies the Kubernetes backend.")]
Kubeconfig = Annotated[str | None, Option(
    "--kubeconfig", help="Path of the kubeconfig file (default: $KUBECONFIG, ~/.kube/config).")]
Local = Annotated[bool, Option(
    "--local", help="Use the local backend (processes on this machine) even if a cluster is configured.")]
Output = Annotated[str | None, output_option(OUTPUT_FORMATS, "Print the full resource as yaml or json.")]
ListingOutput = Annotated[str | None, output_option(
    LISTING_FORMATS, "yaml or json: the full resources; name: kind.kubeflow.org/NAME only; wide: more columns.")]
