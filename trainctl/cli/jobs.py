"""Commands on existing jobs: status, list, logs, wait, delete, suspend, resume.

They work the same on every backend; each names the backend it used.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, Output, console, dump, make_client
from trainctl.errors import UserError

Name = Annotated[str, typer.Argument(help="Job name (see trainctl list).", show_default=False)]
PREFIX_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
STATE_COLORS = {"Succeeded": "green", "Failed": "red", "Running": "cyan", "Restarting": "yellow",
                "Suspended": "yellow", "Created": "white", "Pending": "white"}
DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str | None, flag: str) -> int | None:
    """``90``, ``90s``, ``5m``, ``1h30m`` -> seconds."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    match = DURATION.fullmatch(text)
    if not text or not match or not any(match.groups()):
        raise UserError(f"{flag} {text!r}: expected a duration such as 30s, 5m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def since(timestamp: str | None, until: str | None = None) -> str:
    """Human duration between two RFC 3339 times (until: now)."""
    if not timestamp:
        return "-"
    start = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    end = datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) if until \
        else datetime.now(timezone.utc)
    seconds = max(0, int((end - start).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def colored_state(state: str) -> str:
    return f"[{STATE_COLORS.get(state, 'white')}]{state}[/]"


# ---- status -------------------------------------------------------------------------

def status(name: Name, namespace: Namespace = None, output: Output = None, local: Local = False,
           context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from trainctl.api import state_of

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
                      "" if row.exit_code is None else str(row.exit_code), escape(row.reason), row.node,
                      since(row.started, row.finished))
    out.print(table if details.replicas else "  no replicas")
    for event in details.events[-8:]:
        out.print(f"  [dim]{event.get('time', '')}[/] {event.get('type', '')} {escape(event.get('reason', ''))}: "
                  f"{escape(event.get('message', ''))}", soft_wrap=True)


# ---- list -----------------------------------------------------------------------------

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


def replica_specs(resource: dict) -> dict:
    return next((v for k, v in (resource.get("spec") or {}).items() if k.endswith("ReplicaSpecs")), {}) or {}


# ---- logs --------------------------------------------------------------------------------

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


# ---- wait -------------------------------------------------------------------------------------

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


# ---- delete, suspend, resume ------------------------------------------------------------------

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
    app.command(help="Show a job's conditions, replicas and events. Example: trainctl status mnist")(status)
    app.command("list", help="List jobs of every kind. Example: trainctl list -A")(list_jobs)
    app.command(help="Print every replica's logs, prefixed. Example: trainctl logs -f mnist --replica worker-1")(logs)
    app.command(help="Wait for a job's state; exit 0 when reached, 1 otherwise. "
                     "Example: trainctl wait mnist --for Succeeded --timeout 30m")(wait)
    app.command(help="Delete jobs and stop all their replicas. "
                     "Example: trainctl delete mnist, or trainctl delete --all -l team=nlp")(delete)
    app.command(help="Stop a job's replicas but keep the job. Example: trainctl suspend mnist")(suspend)
    app.command(help="Start a suspended job again. Example: trainctl resume mnist")(resume)
