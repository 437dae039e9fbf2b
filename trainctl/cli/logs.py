"""``logs``: every replica's output, prefixed by replica, as it comes."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, console, make_client
from trainctl.cli.formatting import PREFIX_COLORS, Name, parse_duration
from trainctl.errors import UserError


def logs(name: Name, namespace: Namespace = None,
         replica: Annotated[str | None, typer.Option(help="Only this replica, e.g. worker-1.")] = None,
         follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
         tail: Annotated[int | None, typer.Option(help="Only the last N lines of each replica.")] = None,
         since_: Annotated[str | None, typer.Option("--since", help="Only lines newer than this (e.g. 5m).")] = None,
         previous: Annotated[bool, typer.Option("--previous", "-p", help="Logs of the replica's previous run.")] = False,
         local: Local = False, context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    if tail is not None and tail < 0:
        raise UserError(f"--tail {tail}: must be 0 or more")
    client = make_client(local, context, kubeconfig)
    lines = client.logs(name, namespace, replica=replica, follow=follow, tail=tail,
                        since_seconds=parse_duration(since_, "--since"), previous=previous)
    count = print_lines(lines)
    console(stderr=True).print(f"[dim]{count} line(s) of {name} on {client.backend.description}[/]")


def print_lines(lines) -> int:
    """Print each line behind its replica's colored prefix; returns how many were printed."""
    from rich.markup import escape

    out = console()
    colors: dict[str, str] = {}
    width = count = 0
    for count, line in enumerate(lines, start=1):
        color = colors.setdefault(line.replica, PREFIX_COLORS[len(colors) % len(PREFIX_COLORS)])
        width = max(width, len(line.replica))
        out.print(f"[{color}]{line.replica:<{width}} |[/] {escape(line.text)}", soft_wrap=True, highlight=False)
    return count


def follow_logs(client, name: str, namespace: str | None) -> None:
    print_lines(client.logs(name, namespace, follow=True))


def register(app: typer.Typer) -> None:
    app.command(help="Print every replica's logs, prefixed. Example: trainctl logs -f mnist --replica worker-1")(logs)
