"""``trainctl templates list|show``: find the template each kind renders with, to copy and change it."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.errors import UserError
from trainctl.frameworks import CLI_NAMES, DEFAULT

SHARED_LAYOUT = "_job"  # the KIND that show takes for the layout every kind's template extends
TRAINJOB = "trainjob"  # the KIND that show takes for the TrainJob submit --api v2 renders, whatever the kind

templates_app = typer.Typer(
    help=f"""The Jinja templates submit renders (built-in < ~/.config/trainctl/templates < ./.trainctl/templates < --template).

Example: trainctl templates show {DEFAULT.name} > .trainctl/templates/{DEFAULT.singular}.yaml.j2
(show skips the file it is writing to, so this also starts over from the template below it)
""",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: Rich help formatting costs ~130 ms at start-up
)


def winning_template(filename: str, skip_stdout: bool = False):
    """The template file that renders: the first found (with ``skip_stdout``: bar the one ``show``
    is writing to, which ``show KIND > .trainctl/templates/FILE`` has just truncated)."""
    from trainctl.submit.render import template_dirs

    for origin, directory in template_dirs():
        path = directory / filename
        if path.is_file() and not (skip_stdout and is_stdout(path)):
            return origin, path
    raise UserError(f"no template {filename!r} found: reinstall trainctl or add it to .trainctl/templates/")


@templates_app.command("list", help="Show which file each kind renders with. Example: trainctl templates list")
def list_templates() -> None:
    from trainctl.cli.formatting import print_table
    from trainctl.frameworks import ALL
    from trainctl.submit.render import V2_TEMPLATE, template_name

    kinds = [(framework.name, template_name(framework)) for framework in ALL] + [(SHARED_LAYOUT, "_job.yaml.j2"),
                                                                                  (TRAINJOB, V2_TEMPLATE)]
    rows = [[kind, *(str(part) for part in winning_template(filename))] for kind, filename in kinds]
    print_table(["KIND", "FROM", "FILE"], rows, whole=("KIND", "FILE"))


@templates_app.command("show", help=f"Print a kind's template. Example: trainctl templates show {DEFAULT.name}")
def show_template(
    kind: Annotated[str, typer.Argument(help=f"Job kind ({', '.join(CLI_NAMES)}), _job for the shared layout, or "
                                             f"{TRAINJOB} for the TrainJob of submit --api v2.")],
) -> None:
    from trainctl.frameworks import by_name
    from trainctl.submit.render import V2_TEMPLATE, template_name

    special = {SHARED_LAYOUT: "_job.yaml.j2", "job": "_job.yaml.j2", TRAINJOB: V2_TEMPLATE}
    filename = special.get(kind.lower()) or template_name(by_name(kind))
    _, path = winning_template(filename, skip_stdout=True)
    typer.echo(path.read_text(), nl=False)


def is_stdout(path) -> bool:
    import os
    import sys

    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError):  # stdout closed or not a file
        return False


def register(app: typer.Typer) -> None:
    app.add_typer(templates_app, name="templates")
