"""``status`` (alias ``get``) and ``list``: what became of jobs, as tables, names or resources.

Both keep kubectl's habits: ``status KIND/NAME``; ``-o name`` (``pytorchjob.kubeflow.org/NAME``),
``-o wide`` (more columns), ``-o yaml|json``; ``list -w`` prints a line per change until Ctrl-C;
``-l`` takes set-based selectors (trainctl/kube/selectors.py). Tables are plain, whole columns when
piped (formatting.print_table).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

from trainctl.cli.common import (OUTPUT_FORMATS, Context, Kubeconfig, ListingOutput, Local, Namespace, Selector,
                                 console, dump, make_client, print_failure)
from trainctl.cli.completers import job_names
from trainctl.cli.formatting import colored_state, print_table, resource_name, split_kind
from trainctl.cli.params import Argument, Option
from trainctl.cli.plain import echo, shown, stderr_line
from trainctl.errors import visible
from trainctl.frameworks import DEFAULT
from trainctl.sdk.display import (column_widths, job_row, list_columns, plain_lines, progress_cell, replica_images,
                              since, unscheduled)

if TYPE_CHECKING:
    import typer

JobReference = Annotated[str, Argument(metavar="[KIND/]NAME", show_default=False, autocompletion=job_names,
                                       help=f"Job name, or KIND/NAME such as {DEFAULT.singular}/mnist "
                                            "(see trainctl list).")]
REPLICA_COLUMNS = ["REPLICA", "STATE", "RESTARTS", "EXIT", "REASON", "NODE", "DURATION"]
WIDE_REPLICA_COLUMNS = ["IMAGE", "STARTED", "FINISHED"]
WATCH_POLL_S = 1.0
WATCH_MIN_WIDTHS = {"NAMESPACE": 12, "NAME": 24, "KIND": 11, "STATE": 10}  # rows printed later still line up
CHANGING_COLUMNS = ("AGE", "DURATION", "PROGRESS")  # a clock tick or a step is no change worth a line in list -w


# Waiting reasons of a container whose image the node does not have and cannot get.
IMAGE_PULL_STATES = ("ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName")
STOPPED = "Stopped (job ended)"
MAX_NAMESPACES_NAMED = 3  # when the namespace asked about has no jobs, those that have some, by name
KUEUE_WORKLOAD_GRACE_S = 60  # Kueue makes a Workload within seconds of seeing a queued job


def status(name: JobReference, namespace: Namespace = None, output: ListingOutput = None, local: Local = False,
           context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    from trainctl.core.conditions import TERMINAL, conditions_of, state_of, status_of

    kind, name = split_kind(name)
    client = make_client(local, context, kubeconfig)
    details = client.get(name, namespace, kind)
    resource = details.resource
    if output == "name":
        echo(resource_name(resource))
        return
    if output in OUTPUT_FORMATS:
        echo(dump(resource, output), nl=False)
        return
    out = console()
    job_status = status_of(resource)
    waiting = unscheduled(resource, details.replicas)  # a Running condition is no promise that every replica runs
    out.print(f"[bold]{resource['kind'].lower()}/{name}[/] in {resource['metadata'].get('namespace')} "
              f"on {client.backend.description}: {colored_state(state_of(resource))} "
              + (f"[yellow]({shown(waiting.text())})[/] " if waiting else "") +
              f"(age {since(resource['metadata'].get('creationTimestamp'))}, "
              f"ran {since(job_status.get('startTime'), job_status.get('completionTime'))})")
    from trainctl.code.pods import describe

    if code := describe(resource["metadata"].get("annotations") or {}):
        out.print(f"  {shown(code)}", soft_wrap=True)
    for line in kueue_lines(client, resource):
        out.print(f"  [yellow]{shown(line)}[/]", soft_wrap=True)
    for condition in conditions_of(resource):  # what the API holds: anyone's to write
        out.print(f"  {shown(condition.get('type')):<11} {shown(condition.get('status')):<5} "
                  f"{shown(condition.get('reason'))}: {shown(condition.get('message'))}", soft_wrap=True)
    for line in restart_lines(resource):
        out.print(f"  {shown(line)}", soft_wrap=True)
    progress = client.progress(name, namespace, details=details)
    for line in progress.lines():
        out.print(f"  [yellow]{shown(line)}[/]" if line == progress.stall_text() else f"  {shown(line)}",
                  soft_wrap=True)
    if details.replicas:
        print_replicas(resource, details.replicas, wide=output == "wide")
        for hint in (image_hints(resource, details.replicas) + unscheduled_hints(details.replicas)
                     + still_running(resource, details.replicas)):
            out.print(f"  [yellow]{shown(hint)}[/]", soft_wrap=True)
    else:
        out.print("  no replicas")
    for event in details.events[-8:]:
        out.print(f"  [dim]{shown(event.get('time'))}[/] {shown(event.get('type'))} {shown(event.get('reason'))}: "
                  f"{shown(event.get('message'))}", soft_wrap=True)
    if state_of(resource) in TERMINAL:  # why it failed, or which replica failed although it succeeded
        summary = client.failure_summary(name, namespace, details=details)
        if summary is not None:
            print_failure(summary, out)


def restart_lines(resource: dict) -> list[str]:
    """The job's attempts and what its restart budgets have left (trainctl.core.restarts)."""
    from trainctl.core.job import Job, has_restart_record

    if not has_restart_record(resource):  # the first attempt, nothing spent: nothing to show
        return []
    from trainctl.core.restarts import Record, Rules

    return Record.of(resource).lines(Job(resource).run_policy.get("backoffLimit"), Rules.of(resource))


def kueue_lines(client, resource: dict) -> list[str]:
    """For a job held for Kueue: which LocalQueue, and what Kueue's Workload says (or that there is none:
    Kueue absent, or its kubeflow.org integration off, see docs/schedulers.md)."""
    from trainctl.core.conditions import conditions_of
    from trainctl.core.job import KUEUE_QUEUE_LABEL

    queue = (resource["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    if not queue or not ((resource.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
        return []
    lines = [f"waiting for admission by Kueue (LocalQueue {queue})"]
    workload = client.backend.kueue_workload(resource)
    if workload is None:
        if age_seconds(resource["metadata"].get("creationTimestamp")) > KUEUE_WORKLOAD_GRACE_S:
            lines.append("no Kueue Workload after a minute: is Kueue installed, with its kubeflow.org integration "
                         "enabled? (docs/schedulers.md)")
        return lines
    for condition in conditions_of(workload):
        if condition.get("status") == "True" or condition.get("type") == "QuotaReserved":
            lines.append(f"Kueue Workload {workload['metadata']['name']}: {condition.get('type')} "
                         f"{condition.get('reason', '')}: {condition.get('message', '')}")
    return lines


def age_seconds(timestamp: str | None) -> float:
    from datetime import datetime, timezone

    if not timestamp:
        return 0.0
    created = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return (datetime.now(timezone.utc) - created).total_seconds()


def print_replicas(resource: dict, replicas: list, wide: bool) -> None:
    images = {rtype.lower(): image for rtype, image in replica_images(resource).items()}
    rows = []
    for row in replicas:
        state = STOPPED if row.stopped else row.state  # its exit code is the stop's signal, not its own failure
        cells = [row.name, state, str(row.restarts), exit_cell(row), reason_cell(row), row.node,
                 since(row.started, row.finished)]
        if wide:
            cells += [images.get(row.replica_type.lower(), ""), row.started or "", row.finished or ""]
        rows.append([visible(cell) for cell in cells])  # a pod's reason and node are anyone's to write
    print_table(REPLICA_COLUMNS + (WIDE_REPLICA_COLUMNS if wide else []), rows)


def image_hints(resource: dict, replicas: list) -> list[str]:
    """One line per image the node cannot get (ImagePullBackOff and its kin), saying how to fix it:
    such a replica waits for ever, and the pod's events are one ``kubectl describe`` away."""
    images = {rtype.lower(): image for rtype, image in replica_images(resource).items()}
    stuck: dict[tuple[str, str], list[str]] = {}
    for row in replicas:
        if row.state.removeprefix("Init:") in IMAGE_PULL_STATES:
            stuck.setdefault((images.get(row.replica_type.lower(), ""), row.state), []).append(row.name)
    return [f"{', '.join(names)}: image {image!r} cannot be pulled ({state}): check its name and tag, that the "
            f"cluster can reach its registry (imagePullSecrets for a private one); then delete the job and "
            f"submit again with --image" for (image, state), names in stuck.items()]


def unscheduled_hints(replicas: list) -> list[str]:
    """One line per thing the scheduler says of the replicas it cannot place: such a replica waits, Pending, until
    a node fits it (a lost node's pods often cannot meet their topology spread on the nodes left)."""
    from trainctl.sdk.failures import listed

    stuck: dict[str, list[str]] = {}
    for row in replicas:
        if row.unscheduled:
            stuck.setdefault(row.unscheduled, []).append(row.name)
    return [f"{listed(names)}: cannot be scheduled ({why}); they wait until a node fits them: free or add nodes, "
            f"or relax the pods' constraints (topology spread, affinity, node selector, resources)"
            for why, names in stuck.items()]


def still_running(resource: dict, replicas: list) -> list[str]:
    """Replicas that outlive their finished job: cleanPodPolicy None (upstream's default, kept) leaves a
    TFJob's parameter servers and workers running after its chief succeeded, which is easy to miss."""
    from trainctl.core.conditions import TERMINAL, state_of
    from trainctl.core.job import Job

    running = [row.name for row in replicas if row.state == "Running"]
    if not running or state_of(resource) not in TERMINAL:
        return []
    policy = Job(resource).run_policy["cleanPodPolicy"]
    name = resource["metadata"]["name"]
    them = "them" if len(running) > 1 else "it"
    return [f"{', '.join(running)} still running after the job ended (cleanPodPolicy {policy} keeps {them}): "
            f"trainctl delete {name} stops {them}; runPolicy.cleanPodPolicy: Running stops such replicas when a "
            "job ends"]


def exit_cell(row) -> str:
    """The current run's exit code; for a restarted replica still going, the last run's, marked so."""
    if row.exit_code is not None:
        return str(row.exit_code)
    return "" if row.last_exit_code is None else f"{row.last_exit_code} (last run)"


def reason_cell(row) -> str:
    reason = row.reason or (f"last: {row.last_reason}" if row.last_reason else "")
    if row.unscheduled and row.unscheduled_since:  # the scheduler's message is the hint below the table
        reason = f"{reason} for {since(row.unscheduled_since)}"
    return f"{reason} ({row.kept})" if row.kept else reason


def list_jobs(namespace: Namespace = None,
              all_namespaces: Annotated[bool, Option("--all-namespaces", "-A", help="Jobs of every namespace.")] = False,
              selector: Selector = None, output: ListingOutput = None,
              watch: Annotated[bool, Option("--watch", "-w", help="After the list, print a line per change "
                                            "until Ctrl-C.")] = False,
              local: Local = False, context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    client = make_client(local, context, kubeconfig)

    def fetch() -> list[dict]:
        return client.list(namespace, all_namespaces=all_namespaces, selector=selector)

    jobs = fetch()
    if watch:
        watch_jobs(fetch, jobs, output, lambda resource: progress_cell(client, resource))
    elif output == "name":
        for resource in jobs:
            echo(resource_name(resource))
    elif output in OUTPUT_FORMATS:
        echo(dump({"apiVersion": "v1", "kind": "List", "items": jobs}, output), nl=False)
    elif not jobs:
        console().print(no_jobs_line(client, None if all_namespaces else namespace or client.default_namespace(),
                                     selector))
    else:
        print_table(list_columns(output == "wide"), [job_row(resource, output == "wide", progress_cell(client, resource))
                                                     for resource in jobs])
        stderr_line(f"{len(jobs)} job(s) on {client.backend.description}", "dim")


def no_jobs_line(client, namespace: str | None, selector: str | None) -> str:
    """``no jobs``, and where there are some when ``namespace`` has none: upstream YAML often names a namespace of
    its own (``kubeflow``), where a plain ``list`` does not look."""
    from collections import Counter

    from trainctl.errors import UserError

    where = client.backend.description
    if namespace is None:
        return f"no jobs ({where})"
    try:
        elsewhere = Counter(job["metadata"].get("namespace", "") for job in client.list(all_namespaces=True,
                                                                                          selector=selector))
    except UserError:  # listing every namespace may be forbidden on a cluster: no hint then
        elsewhere = Counter()
    line = f"no jobs in namespace {namespace} ({where})"
    if not elsewhere:
        return line
    shown = sorted(elsewhere.items())[:MAX_NAMESPACES_NAMED]
    counts = ", ".join(f"{count} in {other}" for other, count in shown)
    if len(elsewhere) > len(shown):
        counts += f" and more in {len(elsewhere) - len(shown)} other namespaces"
    flag = f"-n {shown[0][0]}" if len(elsewhere) == 1 else "-n NAMESPACE"
    return f"{line}; {counts}: use {flag} or -A"


def watch_jobs(fetch, jobs: list[dict], output: str | None, cell) -> None:
    """Print the jobs, then each change (new, changed state, deleted) as it is seen, like kubectl get -w.

    Polls the backend every WATCH_POLL_S; Ctrl-C ends it with exit status 0. ``cell``: a job's PROGRESS.
    """
    columns = list_columns(output == "wide")
    changing = [columns.index(c) for c in CHANGING_COLUMNS]
    minimum = [WATCH_MIN_WIDTHS.get(c, len(c)) for c in columns]
    widths = column_widths(columns, [job_row(job, output == "wide", cell(job)) for job in jobs], minimum)
    seen: dict[tuple, tuple] = {}

    def emit(resource: dict, deleted: bool = False) -> None:
        row = job_row(resource, output == "wide", "-" if deleted else cell(resource))
        if deleted:
            row[columns.index("STATE")] = "Deleted"
        key = (row[0], row[2], row[1])
        fingerprint = tuple(cell for i, cell in enumerate(row) if i not in changing)
        if seen.get(key) == fingerprint:
            return
        seen[key] = fingerprint
        if output == "name":
            echo(resource_name(resource))
        elif output in OUTPUT_FORMATS:
            echo(("---\n" if output == "yaml" else "") + dump(resource, output), nl=False)
        else:
            echo(plain_lines(None, [row], widths)[0])

    try:
        if output not in (*OUTPUT_FORMATS, "name"):
            echo(plain_lines(columns, [], widths)[0])
        current = {}
        while True:
            previous, current = current, {(j["metadata"].get("namespace"), j["kind"], j["metadata"]["name"]): j
                                          for j in jobs}
            for resource in current.values():
                emit(resource)
            for key in previous.keys() - current.keys():
                emit(previous[key], deleted=True)
            time.sleep(WATCH_POLL_S)
            jobs = fetch()
    except KeyboardInterrupt:
        return  # the way to end a watch, not an error


def register(app: typer.Typer) -> None:
    app.command(help="Show a job's conditions, replicas and events. "
                     f"Example: trainctl status mnist, or trainctl status {DEFAULT.singular}/mnist -o wide")(status)
    app.command("get", help="The same as status (kubectl habit). "
                            f"Example: trainctl get {DEFAULT.singular}/mnist -o yaml")(status)
    app.command("list", help="List jobs of every kind. "
                             "Example: trainctl list -A -l 'team in (nlp,cv)' -o wide; trainctl list -w")(list_jobs)
