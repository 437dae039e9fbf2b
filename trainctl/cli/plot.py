"""``plot``: a job's reported metrics as curves in an image file (matplotlib, the optional extra ``plot``).

The points are those ``job.metrics()`` returns (trainctl.backends.reported): one replica's, the leading one's
unless ``--replica`` names another; one panel per metric, at most 16 (trainctl.sdk.plotting).
"""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli import completers
from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, make_client
from trainctl.cli.formatting import Name
from trainctl.errors import visible


def plot(name: Name, namespace: Namespace = None,
         metric: Annotated[list[str] | None, typer.Option(
             "--metric", help="A metric to draw (repeatable, at most 16); default: every one reported, "
                              "the first 16 past that.")] = None,
         output: Annotated[str | None, typer.Option(
             "--output", "-o", help="The image to write: .png, .svg or .pdf (default: NAME.png).")] = None,
         replica: Annotated[str | None, typer.Option(
             help="Whose reports: worker-1 (default: the leading replica's).",
             autocompletion=completers.replica_names)] = None,
         local: Local = False, context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    from trainctl.cli.logs import note
    from trainctl.sdk.plotting import MAX_PANELS
    from trainctl.sdk.plotting import plot as draw

    client = make_client(local, context, kubeconfig)
    series = client.metrics(name, namespace, replica=replica)
    path = output or f"{name}.png"
    drawn = draw(series, metric or None, name, path)
    # the path is the user's and the metrics' names the replica's: shown as visible, as every text of theirs
    note(visible(f"wrote {len(series)} point(s) of {name} to {path}"))
    if drawn.left_out:
        note(visible(f"{len(drawn.left_out)} more metric(s) not drawn ({', '.join(drawn.left_out[:3])}"
                     f"{', ...' if len(drawn.left_out) > 3 else ''}): one image draws at most {MAX_PANELS}; "
                     "choose with --metric NAME"))


def register(app: typer.Typer) -> None:
    app.command(help="Draw a job's reported metrics (trainctl.report) as curves; needs pip install 'trainctl[plot]'. "
                     "Example: trainctl plot mnist --metric loss -o loss.png")(plot)
