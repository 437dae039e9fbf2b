"""``delete``, ``suspend``, ``resume``: change what runs."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, console, make_client
from trainctl.cli.formatting import Name
from trainctl.errors import UserError


def delete(names: Annotated[list[str] | None, typer.Argument(help="Job names.", show_default=False)] = None,
           all_: Annotated[bool, typer.Option("--all", help="Every job in the namespace (narrow with -l).")] = False,
           selector: Annotated[str | None, typer.Option("--selector", "-l", help="With --all: only jobs with these labels.")] = None,
           namespace: Namespace = None, local: Local = False, context: Context = None,
           kubeconfig: Kubeconfig = None) -> None:
    if bool(names) == all_:
        raise UserError("delete: name the jobs, or use --all (optionally with -l team=x), not both")
    if selector and not all_:
        raise UserError("-l/--selector works with --all: trainctl delete --all -l team=x")
    client = make_client(local, context, kubeconfig)
    if all_:
        names = [job["metadata"]["name"] for job in client.list(namespace, selector=selector)]
        if not names:
            console().print(f"no jobs to delete ({client.backend.description})")
    for name in names:
        client.delete(name, namespace)
        console().print(f"[green]deleted[/] {name} and every replica of it ({client.backend.description})")


def suspend(name: Name, namespace: Namespace = None, local: Local = False, context: Context = None,
            kubeconfig: Kubeconfig = None) -> None:
    client = make_client(local, context, kubeconfig)
    client.suspend(name, namespace)
    console().print(f"suspended {name}: its replicas stop; trainctl resume {name} starts them again "
                    f"({client.backend.description})")


def resume(name: Name, namespace: Namespace = None, local: Local = False, context: Context = None,
           kubeconfig: Kubeconfig = None) -> None:
    client = make_client(local, context, kubeconfig)
    client.resume(name, namespace)
    console().print(f"resumed {name} ({client.backend.description})")


def register(app: typer.Typer) -> None:
    app.command(help="Delete jobs and stop all their replicas. "
                     "Example: trainctl delete mnist, or trainctl delete --all -l team=nlp")(delete)
    app.command(help="Stop a job's replicas but keep the job. Example: trainctl suspend mnist")(suspend)
    app.command(help="Start a suspended job again. Example: trainctl resume mnist")(resume)
