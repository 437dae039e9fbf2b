"""The ``trainctl`` entry point: builds the Typer app from the command modules.

Each command module exposes ``register(app)``; this file only wires them and
turns :class:`trainctl.errors.UserError` into a one-line message with exit
status 2. Keep imports here light: this runs for every ``trainctl --help``.
"""

from __future__ import annotations

import importlib

import typer

from trainctl import __version__

COMMAND_MODULES = ("submit", "apply", "jobs", "templates", "crds", "completion")

app = typer.Typer(
    name="trainctl",
    help=(
        "Run distributed training jobs (PyTorch, TensorFlow, XGBoost, MPI, Paddle, JAX) "
        "locally or on Kubernetes, as Kubeflow kubeflow.org/v1 jobs.\n\n"
        "Example: trainctl submit pytorch --workers 4 -- python train.py"
    ),
    no_args_is_help=True,
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
    from trainctl.errors import UserError

    try:
        app()
    except UserError as err:
        from trainctl.cli.common import fail

        try:
            fail(err.message, err.exit_code)
        except typer.Exit as exit_:
            raise SystemExit(exit_.exit_code) from None
