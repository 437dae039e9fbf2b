"""``export``: a job's whole record (logs of every run, result, metrics, events, the resource) as files."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, console, make_client
from trainctl.cli.formatting import Name
from trainctl.errors import visible


def export(name: Name,
           output: Annotated[str, typer.Option("--output", "-o", metavar="DIR", show_default=False,
                                               help="The directory to write (created; an existing one must be "
                                                    "empty).")],
           namespace: Namespace = None, local: Local = False, context: Context = None,
           kubeconfig: Kubeconfig = None) -> None:
    from rich.markup import escape

    client = make_client(local, context, kubeconfig)
    written = client.export(name, output, namespace)
    files = sorted(path.relative_to(written).as_posix() for path in written.rglob("*") if path.is_file())
    # the path is the user's, which may hold an ESC: shown as visible, as every text of theirs
    console().print(escape(visible(f"exported {name} to {written} ({client.backend.description}): "
                                   f"{', '.join(files)}")), soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command(help="Write a job's logs (every replica, and its run before), result, metrics, events and resource "
                     "into a new directory; on a cluster, also what the controller kept of pods now gone. "
                     "Example: trainctl export mnist -o mnist-record/")(export)
