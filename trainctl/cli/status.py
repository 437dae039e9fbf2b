"""``status`` and ``list``: what became of jobs, as tables or as resources."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, Output, console, dump, make_client, print_failure
from trainctl.cli.formatting import Name, colored_state, replica_specs, since


def status(name: Name, namespace: Namespace = None, output: Output = None, local: Local = False,
           context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from trainctl.api import TERMINAL, state_of

    client = make_client(local, context, kubeconfig)
    details = client.get(name, namespace)
    resource = details.resource
    if output:
        typer.echo(dump(resource, output), nl=False)
        return
    out = console()
    job_status = resource.get("status") or {}
    out.print(f"[bold]{resource['kind'].lower()}/{name}[/] in {resource['metadata'].get('namespace')} "
              f"on {client.backend.description}: {colored_state(state_of(resource))} "
              f"(age {since(resource['metadata'].get('creationTimestamp'))}, "
              f"ran {since(job_status.get('startTime'), job_status.get('completionTime'))})")
    for condition in job_status.get("conditions") or []:
        out.print(f"  {condition['type']:<11} {condition['status']:<5} {escape(condition.get('reason', ''))}: "
                  f"{escape(condition.get('message', ''))}", soft_wrap=True)
    table = Table("REPLICA", "STATE", "RESTARTS", "EXIT", "REASON", "NODE", "DURATION", box=None)
    for row in details.replicas:
        table.add_row(row.name, colored_state(row.state), str(row.restarts),
                      exit_cell(row), escape(reason_cell(row)), row.node,
                      since(row.started, row.finished))
    out.print(table if details.replicas else "  no replicas")
    for event in details.events[-8:]:
        out.print(f"  [dim]{event.get('time', '')}[/] {event.get('type', '')} {escape(event.get('reason', ''))}: "
                  f"{escape(event.get('message', ''))}", soft_wrap=True)
    if state_of(resource) in TERMINAL:  # why it failed, or which replica failed although it succeeded
        summary = client.failure_summary(name, namespace, details=details)
        if summary is not None:
            print_failure(summary, out)


def exit_cell(row) -> str:
    """The current run's exit code; for a restarted replica still going, the last run's, marked so."""
    if row.exit_code is not None:
        return str(row.exit_code)
    return "" if row.last_exit_code is None else f"{row.last_exit_code} (last run)"


def reason_cell(row) -> str:
    return row.reason or (f"last: {row.last_reason}" if row.last_reason else "")


def list_jobs(namespace: Namespace = None,
              all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Jobs of every namespace.")] = False,
              selector: Annotated[str | None, typer.Option("--selector", "-l", help="Label selector, e.g. team=nlp.")] = None,
              output: Output = None, local: Local = False, context: Context = None,
              kubeconfig: Kubeconfig = None) -> None:
    from rich.table import Table

    from trainctl.api import state_of

    client = make_client(local, context, kubeconfig)
    jobs = client.list(namespace, all_namespaces=all_namespaces, selector=selector)
    if output:
        typer.echo(dump({"apiVersion": "v1", "kind": "List", "items": jobs}, output), nl=False)
        return
    if not jobs:
        console().print(f"no jobs ({client.backend.description})")
        return
    table = Table("NAMESPACE", "NAME", "KIND", "STATE", "REPLICAS", "AGE", "DURATION", box=None)
    for resource in jobs:
        replicas = sum((s or {}).get("replicas", 1) for s in replica_specs(resource).values())
        job_status = resource.get("status") or {}
        table.add_row(resource["metadata"].get("namespace", ""), resource["metadata"]["name"], resource["kind"],
                      colored_state(state_of(resource)), str(replicas),
                      since(resource["metadata"].get("creationTimestamp")),
                      since(job_status.get("startTime"), job_status.get("completionTime")))
    console().print(table)
    console(stderr=True).print(f"[dim]{len(jobs)} job(s) on {client.backend.description}[/]")


def register(app: typer.Typer) -> None:
    app.command(help="Show a job's conditions, replicas and events. Example: trainctl status mnist")(status)
    app.command("list", help="List jobs of every kind. Example: trainctl list -A")(list_jobs)
