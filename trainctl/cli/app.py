"""The ``trainctl`` entry point: builds the Typer app from the command modules.

Each command module exposes ``register(app)``; this file only wires them and
turns :class:`trainctl.errors.UserError` into a one-line message with exit
status 2. Keep imports here light: this runs for every ``trainctl --help``.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from trainctl import __version__
from trainctl.cli import arguments, coercion
from trainctl.frameworks import ALL, DEFAULT

coercion.install()

COMMAND_MODULES = ("submit", "apply", "status", "logs", "wait", "plot", "lifecycle", "templates", "recipes", "crds",
                   "controller", "completion")

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


for _name in COMMAND_MODULES:
    importlib.import_module(f"trainctl.cli.{_name}").register(app)


def main() -> None:
    """Run the CLI; every user error ends as one line on stderr with exit status 2, naming flags (errors.speaking)."""
    from trainctl.errors import CLI, speaking

    with speaking(CLI):
        run_app()


def run_app() -> None:
    from typer._click import exceptions as click_errors  # typer >= 0.29 vendors click

    from trainctl.errors import UserError

    if os.environ.get("_TRAINCTL_COMPLETE"):
        from typer._completion_classes import completion_init

        completion_init()  # register bash/zsh/fish: the app is built with add_completion=False
    try:
        arguments.check_utf8(sys.argv[1:])
        code = app(prog_name="trainctl", complete_var="_TRAINCTL_COMPLETE", standalone_mode=False)
    except UserError as err:
        code = report(err.message, err.exit_code)
    except click_errors.UsageError as err:
        code = report(usage_message(err), 2)
    except click_errors.ClickException as err:
        code = report(err.format_message(), err.exit_code or 2)
    except typer.Abort:
        code = report("aborted", 130)
    except KeyboardInterrupt:
        code = report("interrupted", 130)
    except BrokenPipeError:
        code = 0
    raise SystemExit(code if isinstance(code, int) else 0)


def usage_message(err) -> str:
    """Click's usage error squeezed into one line, with the command to get help."""
    command = err.ctx.command_path if err.ctx else "trainctl"
    message = " ".join(err.format_message().split())
    return f"{message} (see: {command} --help)"


def report(message: str, code: int) -> int:
    from trainctl.cli.common import print_error

    print_error(message)
    return code
