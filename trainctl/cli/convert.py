"""``trainctl convert -f FILE``: a kubeflow.org/v1 job as a Trainer v2 TrainJob (+ its runtime), and back."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Output, dump_all, stderr_line
from trainctl.frameworks import DEFAULT

HELP = f"""Convert jobs between kubeflow.org/v1 and Trainer v2 TrainJobs.

A kubeflow.org/v1 job becomes a Trainer v2 TrainJob (trainer.kubeflow.org) on the default runtime
of its kind, or, when none fits, a TrainJob and the TrainingRuntime it needs; a TrainJob (with its
runtime in the same file, unless it is a default one) becomes the v1 job of its kind. Nothing is
applied: the documents are printed.

A field the other API cannot express is never dropped silently: they are named in one line and
nothing is printed (exit 2), unless --allow-lossy is given, which drops them and lists each on
stderr. What the job's command gets from the operator that the other side does not set is noted on
stderr (docs/trainer-v2.md, "Converting between v1 and v2").

Examples:

  trainctl convert -f {DEFAULT.singular}.yaml > trainjob.yaml

  trainctl convert -f trainjob.yaml --to v1 -o json
"""


def convert(
    filename: Annotated[str, typer.Option("--filename", "-f", help="YAML file with the jobs (and runtimes); - "
                                                                    "reads stdin.")],
    to: Annotated[str | None, typer.Option(
        "--to", metavar="v2|v1", help="The API to convert to; a document already in it is an error (default: each "
                                      "document to the other one).")] = None,
    allow_lossy: Annotated[bool, typer.Option(
        "--allow-lossy", help="Drop the fields the other API cannot express, listing each on stderr.")] = False,
    output: Output = None,
) -> None:
    from trainctl.cli.apply import load_documents
    from trainctl.core.convert import convert as converted

    result = converted(load_documents(filename), to, allow_lossy=allow_lossy, source=f"-f {filename}")
    for dropped in result.dropped:
        stderr_line(dropped, "dim", prefix="dropped:")
    for note in result.notes:
        stderr_line(note, "dim", prefix="note:")
    typer.echo(dump_all(result.documents, output or "yaml"), nl=False)


def register(app: typer.Typer) -> None:
    app.command(help=HELP)(convert)
