"""The Typer app, built from the command modules: every command line cli/fast.py does not take.

Each command module exposes ``register(app)``; this file only wires them, makes the options they
declare with cli/params.py typer's own (:func:`typer_callback`), and turns
:class:`trainctl.errors.UserError` into a one-line message with exit status 2. Keep imports here
light: this runs for every ``trainctl --help``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from typing import Annotated, get_args, get_type_hints

import typer

from trainctl import __version__
from trainctl.cli import arguments, coercion
from trainctl.cli.common import finish
from trainctl.cli.params import Argument, declared
from trainctl.frameworks import ALL, DEFAULT

coercion.install()

COMMAND_MODULES = ("submit", "apply", "convert", "status", "logs", "export", "wait", "plot", "lifecycle", "templates",
                   "recipes", "crds", "runtimes", "controller", "completion")

app = typer.Typer(
    name="trainctl",
    help=(
        f"Run distributed training jobs ({', '.join(framework.title for framework in ALL)}) "
        "locally or on Kubernetes, as Kubeflow kubeflow.org/v1 jobs.\n\n"
        f"Example: trainctl submit {DEFAULT.name} --workers 4 -- python train.py"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: Rich help formatting costs ~130 ms at start-up
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trainctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version and exit."),
) -> None:
    """Run distributed training jobs locally or on Kubernetes."""


def typer_callback(callback):
    """``callback`` as typer reads it: the Option and Argument records of cli/params.py in its annotations made
    typer's own (those of typer itself pass as they are). The function itself keeps the records, which
    cli/fast.py reads; typer gets a wrapper with the converted signature."""
    hints = get_type_hints(callback, include_extras=True)
    converted = {name: typer_annotation(hint) for name, hint in hints.items()}
    if all(converted[name] is hints[name] for name in hints):
        return callback

    @functools.wraps(callback)
    def command(*args, **kwargs):
        return callback(*args, **kwargs)

    del command.__wrapped__  # typer reads the signature below, not the function's own
    signature = inspect.signature(callback)
    command.__signature__ = signature.replace(
        parameters=[p.replace(annotation=converted.get(p.name, p.annotation)) for p in signature.parameters.values()],
        return_annotation=converted.get("return", signature.return_annotation))
    command.__annotations__ = converted
    return command


def typer_annotation(hint):
    record = declared(hint)
    if record is None:
        return hint
    made = typer.Argument(**record.settings) if isinstance(record, Argument) else \
        typer.Option(*record.names, **record.settings)
    return Annotated[get_args(hint)[0], made]


def with_typer_callbacks(typer_app: typer.Typer) -> None:
    """Every command of ``typer_app`` and of its groups through :func:`typer_callback`."""
    for command in typer_app.registered_commands:
        command.callback = typer_callback(command.callback)
    for group in typer_app.registered_groups:
        with_typer_callbacks(group.typer_instance)


for _name in COMMAND_MODULES:
    importlib.import_module(f"trainctl.cli.{_name}").register(app)
with_typer_callbacks(app)


def main() -> None:
    """Run the CLI through the Typer app (cli/fast.py's ``main`` is the installed entry point, which comes here
    for every line it does not take); every user error ends as one line on stderr with exit status 2."""
    from trainctl.errors import CLI, speaking

    with speaking(CLI):
        run_app()


def run_app() -> None:
    if os.environ.get("_TRAINCTL_COMPLETE"):
        from typer._completion_classes import completion_init

        completion_init()  # register bash/zsh/fish: the app is built with add_completion=False
    raise SystemExit(finish(invoke_app))


def invoke_app() -> int | None:
    """The Typer app on this command line; click's usage errors as one line each (errors of the command
    itself are :func:`trainctl.cli.common.finish`'s)."""
    from typer._click import exceptions as click_errors  # typer >= 0.29 vendors click

    try:
        arguments.check_utf8(sys.argv[1:])
        return click_app()(prog_name="trainctl", complete_var="_TRAINCTL_COMPLETE", standalone_mode=False)
    except click_errors.UsageError as err:
        return report(usage_message(err), 2)
    except click_errors.ClickException as err:
        return report(err.format_message(), err.exit_code or 2)
    except typer.Abort:
        return report("aborted", 130)


@functools.cache
def click_app():
    """The click command Typer makes of the app, made once a process (what ``app()`` would make anew on every
    call, some 15 ms: the fuzz tier runs thousands of command lines in one process). The app's pretty
    exceptions are off, so Typer's exception hook, which ``app()`` would install, would change nothing."""
    return typer.main.get_command(app)


def usage_message(err) -> str:
    """Click's usage error squeezed into one line, with the command to get help."""
    command = err.ctx.command_path if err.ctx else "trainctl"
    message = " ".join(err.format_message().split())
    return f"{message} (see: {command} --help)"


def report(message: str, code: int) -> int:
    from trainctl.cli.common import print_error

    print_error(message)
    return code
