"""``delete``, ``suspend``, ``resume``: change what runs."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli import completers
from trainctl.cli.common import (Context, Kubeconfig, Local, Namespace, console, make_client, print_error,
                                 selector_option)
from trainctl.cli.formatting import Name
from trainctl.errors import NotFound, UserError


def delete(names: Annotated[list[str] | None, typer.Argument(help="Job names.", show_default=False,
                                                            autocompletion=completers.job_names)] = None,
           all_: Annotated[bool, typer.Option("--all", help="Every job in the namespace (narrow with -l).")] = False,
           selector: Annotated[str | None, selector_option("With --all: only jobs with these labels.")] = None,
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
    failures = [name for name in names if not delete_one(client, name, namespace, ignore_not_found=all_)]
    if failures:
        raise typer.Exit(UserError.exit_code)


def delete_one(client, name: str, namespace: str | None, *, ignore_not_found: bool) -> bool:
    """Delete one job; a failure is one line on stderr and False, so that the other names are
    still deleted, as kubectl does. With --all a job gone since the listing was deleted by
    someone else: kubectl counts that as done too."""
    try:
        client.delete(name, namespace)
    except UserError as error:
        if ignore_not_found and isinstance(error, NotFound):
            return True
        print_error(error.message)
        return False
    console().print(f"[green]deleted[/] {name} and every replica of it ({client.backend.description})")
    return True


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
    app.command(help="Delete jobs and stop all their replicas. A name that cannot be deleted is reported "
                     "on one line and the others are still deleted (exit status 2 if any failed). "
                     "Example: trainctl delete mnist bert, or trainctl delete --all -l team=nlp")(delete)
    app.command(help="Stop a job's replicas but keep the job. Example: trainctl suspend mnist")(suspend)
    app.command(help="Start a suspended job again. Example: trainctl resume mnist")(resume)
