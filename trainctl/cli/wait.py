"""``wait``: block until a job reaches a state, with progress on stderr."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, console, make_client
from trainctl.cli.formatting import Name, colored_state, parse_duration


def wait(name: Name, namespace: Namespace = None,
         for_: Annotated[str, typer.Option("--for", help="Succeeded, Failed, Running or Suspended.")] = "Succeeded",
         timeout: Annotated[str | None, typer.Option(help="Give up after this long (e.g. 10m); exit 1.")] = None,
         local: Local = False, context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    client = make_client(local, context, kubeconfig)
    raise typer.Exit(wait_for(client, name, namespace, for_, parse_duration(timeout, "--timeout")))


def wait_for(client, name: str, namespace: str | None, until: str = "Succeeded", timeout: float | None = None) -> int:
    """Wait with a progress line on stderr; 0 when ``until`` is reached, 1 otherwise."""
    from trainctl.api import reached, state_of

    err = console(stderr=True)
    started = time.monotonic()
    with err.status(f"waiting for {name} to reach {until}") as spinner:
        def progress(resource: dict) -> None:
            spinner.update(f"waiting for {name} to reach {until}: {state_of(resource)} "
                           f"({time.monotonic() - started:.0f}s)")
        try:
            resource = client.wait(name, namespace, until=until, timeout=timeout, on_progress=progress)
        except TimeoutError as timed_out:
            err.print(f"[red]timed out:[/] {timed_out}")
            return 1
    final = state_of(resource)
    ok = reached(resource, until)
    err.print(f"{name}: {colored_state(final)} on {client.backend.description}"
              f"{'' if ok else f' (waited for {until})'}")
    return 0 if ok else 1


def register(app: typer.Typer) -> None:
    app.command(help="Wait for a job's state; exit 0 when reached, 1 otherwise. "
                     "Example: trainctl wait mnist --for Succeeded --timeout 30m")(wait)
