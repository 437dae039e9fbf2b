"""``trainctl submit KIND [OPTIONS] -- COMMAND [ARGS...]``: one command line -> one job."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand

from trainctl.cli.completers import job_kinds
from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, Output, console, dump, echo_all, make_client
from trainctl.errors import UserError
from trainctl.frameworks import ALL, CLI_NAMES

WORKERS_HELP = "; ".join(f"{fw.name}: {fw.workers_help}" for fw in ALL)
WORKERS_TABLE = "\n".join(f"  {fw.name + ':':12} {fw.workers_help}" for fw in ALL)
REPEAT = "(repeatable)"

HELP = f"""Submit a distributed training job: KIND is one of {", ".join(CLI_NAMES)} (tf = tensorflow).

Everything after -- is the command every replica runs (an MPI launcher runs it under mpirun).

\b
--workers N means:
{WORKERS_TABLE}

\b
Examples:
  trainctl submit pytorch --workers 4 --gpus 1 -- python train.py --epochs 3
  trainctl submit tf --workers 2 --ps 1 --dry-run -o yaml -- python train.py
  trainctl submit mpi --workers 2 --slots-per-worker 2 -- python allreduce.py
  trainctl submit pytorch --backoff-limit 0 -- python train.py   # fail on the first crash, no restart
  trainctl submit pytorch --pip einops -- python train.py        # on Kubernetes ./ travels with the job
"""


def submit(
    kind: Annotated[str, typer.Argument(help=f"Job kind: {', '.join(CLI_NAMES)}.", show_default=False,
                                        autocompletion=job_kinds)],
    command: Annotated[list[str] | None, typer.Argument(help="The command after --.", show_default=False)] = None,
    name: Annotated[str | None, typer.Option("--name", help="Job name (DNS-1035); default <kind>-<random>.")] = None,
    namespace: Namespace = None,
    image: Annotated[str | None, typer.Option(help="Container image (default per kind; ignored by the local backend).")] = None,
    workers: Annotated[int | None, typer.Option(help=f"Number of nodes. {WORKERS_HELP}.")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs per replica (nvidia.com/gpu).")] = None,
    cpu: Annotated[str | None, typer.Option(help="CPU per replica, e.g. 4 or 500m.")] = None,
    memory: Annotated[str | None, typer.Option(help="Memory per replica, e.g. 16Gi.")] = None,
    nproc_per_node: Annotated[str | None, typer.Option(help="pytorch: processes per node (int, auto, cpu, gpu).")] = None,
    ps: Annotated[int | None, typer.Option(help="tensorflow: parameter servers.")] = None,
    chief: Annotated[int | None, typer.Option(help="tensorflow: 1 for a Chief replica.")] = None,
    evaluator: Annotated[int | None, typer.Option(help="tensorflow: evaluator replicas.")] = None,
    slots_per_worker: Annotated[int | None, typer.Option(help="mpi: MPI slots (ranks) per worker.")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help=f"Environment variable K=V {REPEAT}.")] = None,
    label: Annotated[list[str] | None, typer.Option(help=f"Label K=V on the job and its pods {REPEAT}.")] = None,
    annotation: Annotated[list[str] | None, typer.Option(help=f"Annotation K=V on the job {REPEAT}.")] = None,
    volume: Annotated[list[str] | None, typer.Option(help=f"pvc:CLAIM:/path[:ro] or host:/src:/path[:ro] {REPEAT}.")] = None,
    shm_size: Annotated[str | None, typer.Option(help="Size of a memory-backed /dev/shm, e.g. 8Gi.")] = None,
    node_selector: Annotated[list[str] | None, typer.Option(help=f"Node label K=V the pods need {REPEAT}.")] = None,
    toleration: Annotated[list[str] | None, typer.Option(help=f"key[=value]:NoSchedule|PreferNoSchedule|NoExecute {REPEAT}.")] = None,
    priority_class: Annotated[str | None, typer.Option(help="PriorityClass of the pods.")] = None,
    queue: Annotated[str | None, typer.Option(help="Scheduling queue (runPolicy.schedulingPolicy.queue).")] = None,
    local_queue: Annotated[str | None, typer.Option(help=(
        "Kueue LocalQueue: label the job kueue.x-k8s.io/queue-name and create it suspended until Kueue "
        "admits it (docs/schedulers.md)."))] = None,
    gang: Annotated[bool | None, typer.Option("--gang", help="Gang-schedule: all replicas start together or none.")] = None,
    restart_policy: Annotated[str | None, typer.Option(help="Always, OnFailure, Never or ExitCode (default per kind).")] = None,
    backoff_limit: Annotated[int | None, typer.Option(help="Restarts allowed before the job fails (default 3).")] = None,
    active_deadline: Annotated[int | None, typer.Option(help="Fail the job after this many seconds running.")] = None,
    stall_after: Annotated[str | None, typer.Option(
        help="Call the running job stalled when no replica wrote output or a report for this long (default 10m).")] = None,
    stall_timeout: Annotated[str | None, typer.Option(
        help="Fail the job once no replica wrote output or a report for this long (e.g. 30m; a hung all-reduce).")] = None,
    ttl_after_finished: Annotated[int | None, typer.Option(help="Delete the job this many seconds after it ends.")] = None,
    clean_pod_policy: Annotated[str | None, typer.Option(help="What to stop when the job ends: All, Running, None.")] = None,
    suspend: Annotated[bool | None, typer.Option("--suspend", help="Create the job suspended (start with resume).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help=f"PATH=VALUE: set any field of the resource {REPEAT}.")] = None,
    values: Annotated[Path | None, typer.Option("--values", "-f", help="YAML file of option values (keys as the long options).")] = None,
    template: Annotated[str | None, typer.Option(help="Jinja template file to render instead of the kind's.")] = None,
    workdir: Annotated[str | None, typer.Option(
        help="Directory whose files travel with the job (default: on Kubernetes the current one; locally none, "
             "the replicas run in the current one). See docs/code-shipping.md.")] = None,
    no_workdir: Annotated[bool | None, typer.Option("--no-workdir", help="Ship no code: the image has it.")] = None,
    workdir_limit: Annotated[str | None, typer.Option(
        help="Largest code snapshot, compressed, e.g. 64Mi (default 32Mi).")] = None,
    workdir_mount: Annotated[str | None, typer.Option(
        help="Where the code is unpacked in the container, its working directory (default /workspace).")] = None,
    ship_secret: Annotated[list[str] | None, typer.Option(
        "--ship-secret", help=f"A credential-like file of the workdir (.env, a key; held back by default) to ship "
                              f"anyway, by its path in the workdir {REPEAT}. See docs/code-shipping.md.")] = None,
    pip: Annotated[list[str] | None, typer.Option("--pip", help=f"Package to pip install before the command {REPEAT}.")] = None,
    requirements: Annotated[str | None, typer.Option(help="requirements.txt to pip install before the command.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resource; apply nothing.")] = False,
    output: Output = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a job of the same name.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the job ends; exit 1 if it failed.")] = False,
    follow: Annotated[bool, typer.Option("--follow", help="Stream every replica's logs until the job ends.")] = False,
    no_preflight: Annotated[bool, typer.Option(
        "--no-preflight", help="Skip the checks that the job can start (local: its executable and script exist).")] = False,
    local: Local = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.code import plan
    from trainctl.frameworks import by_name
    from trainctl.render import render
    from trainctl.submit_options import SubmitOptions

    framework = by_name(kind)
    options = SubmitOptions(
        command=command or [], name=name, namespace=namespace, image=image, workers=workers, gpus=gpus,
        cpu=cpu, memory=memory, nproc_per_node=nproc_per_node, ps=ps, chief=chief, evaluator=evaluator,
        slots_per_worker=slots_per_worker, env=env or [], label=label or [], annotation=annotation or [],
        volume=volume or [], shm_size=shm_size, node_selector=node_selector or [], toleration=toleration or [],
        priority_class=priority_class, queue=queue, local_queue=local_queue, gang=gang, restart_policy=restart_policy,
        backoff_limit=backoff_limit, active_deadline=active_deadline, stall_after=stall_after,
        stall_timeout=stall_timeout, ttl_after_finished=ttl_after_finished,
        clean_pod_policy=clean_pod_policy, suspend=suspend, set=set_ or [], template=template,
        workdir=workdir, no_workdir=no_workdir, workdir_limit=workdir_limit, workdir_mount=workdir_mount,
        ship_secret=ship_secret or [], pip=pip or [], requirements=requirements,
    )
    if values is not None:
        options = options.merged_with(load_values(values), str(values))
    client = make_client(local, context, kubeconfig)  # which backend decides what code travels
    code = plan.request(options, client.backend_name, framework.kind)
    snapshot = code.snapshot if code else None
    resource = render(framework, options, code)
    if snapshot is not None:  # once the options are all good: a refusal stays one line
        warn_about(snapshot)
    if dry_run:
        if snapshot is not None:
            console(stderr=True).print(snapshot.summary(), soft_wrap=True, markup=False)
        if output or code is None:  # asked for, or nothing of trainctl's in it: every document, whole
            echo_all(dry_run_documents(resource, code), output or "yaml")
        else:
            typer.echo(abridged_view(resource, framework, options, code), nl=False)
        return
    if snapshot is not None:  # before the upload, beside the summary: stderr keeps only an error's one line
        console(stderr=bool(output)).print(snapshot.summary(), soft_wrap=True, markup=False)
    stored = client.submit(resource, replace=replace, preflight=not no_preflight, code=code)
    if output:  # like kubectl create -o yaml: the created resource on stdout, the summary aside
        typer.echo(dump(stored, output), nl=False)
    print_summary(client, stored, framework, same_target_flags(namespace, local, context, kubeconfig),
                  console(stderr=bool(output)), unenforced_options(options), snapshot)
    if follow or wait:
        from trainctl.cli.logs import follow_logs
        from trainctl.cli.wait import wait_for

        from trainctl.cli.common import watching

        job_name, job_namespace = stored["metadata"]["name"], stored["metadata"].get("namespace")
        with watching(job_name, job_namespace):  # Ctrl-C leaves the job running, and says so
            if follow:
                follow_logs(client, job_name, job_namespace)
            raise typer.Exit(wait_for(client, job_name, job_namespace))  # a failure ends with its summary


def warn_about(snapshot) -> None:
    """What the snapshot skipped or should not hold, said before anything is uploaded."""
    from rich.markup import escape

    out = console(stderr=True)
    for warning in snapshot.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)


def dry_run_documents(resource: dict, code) -> Iterator[dict]:
    """The job, after the snapshot's ConfigMaps when code travels: what ``kubectl apply -f`` (or
    ``trainctl apply -f``) creates, in order."""
    if code is not None and code.snapshot is not None:
        from trainctl.code.pods import config_maps

        yield from config_maps(code.snapshot, resource["metadata"].get("namespace"))
    yield resource


def abridged_view(resource: dict, framework, options, code) -> str:
    """What the dry run of a job with code or packages shows unless -o asks for all of it: what it runs, what
    travels and what gets installed, then the job's YAML without the snapshot's ConfigMaps and with trainctl's
    programs (hundreds of lines each, in every replica) left out. Comment lines: still one YAML document."""
    import shlex

    from trainctl.code.pods import abridged, config_map_names
    from trainctl.code.snapshot import human
    from trainctl.job import Job, main_container

    job = Job(resource)
    images = sorted({str((main_container(framework, job.template(rtype)["spec"]["containers"]) or {}).get("image"))
                     for rtype in job.replica_types})
    lines = [f"dry run, nothing created: {framework.singular}/{job.name} ({topology_text(resource, framework)})",
             f"  runs      {shlex.join(options.command)}, in {', '.join(images)}"]
    if code.snapshot is not None:
        count = len(config_map_names(code.snapshot))
        files = f"{code.snapshot.files} file{'' if code.snapshot.files == 1 else 's'}"
        lines.append(f"  travels   {files}, {human(code.snapshot.unpacked_bytes)} "
                     f"({human(len(code.snapshot.archive))} compressed) from {code.snapshot.source}, in {count} "
                     f"ConfigMap{'s' if count > 1 else ''}, unpacked into {code.mount} before the command")
    if code.pip or code.requirements is not None:
        packages = [*code.pip, *([f"-r {options.requirements}"] if code.requirements is not None else [])]
        lines.append(f"  installs  {' '.join(packages)}, with pip in each replica before the command")
    lines += ["abridged below: the ConfigMaps and trainctl's programs are left out; add -o yaml for the whole",
              "YAML, to apply or keep (trainctl apply -f takes that back)"]
    return "".join(f"# {visible(line)}\n" for line in lines) + dump(abridged(resource), "yaml")


def visible(text: str) -> str:
    """``text`` with each character that is not printable as its escape: a user's value (a command word, a
    pip spec, a path) must not end the comment line it is in (YAML breaks lines at NEL and U+2028 too)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def load_values(path: Path) -> dict:
    from trainctl.yamlsafe import load_one, read_text

    values = load_one(read_text(str(path)), f"-f {path}")
    if not isinstance(values, dict):
        raise UserError(f"-f {path}: expected a mapping of option names to values")
    return values


def topology_text(resource: dict, framework) -> str:
    specs = resource["spec"][framework.replica_spec_field]
    return " + ".join(f"{rtype} {spec.get('replicas', 1)}" for rtype, spec in specs.items())


def same_target_flags(namespace: str | None, local: bool, context: str | None, kubeconfig: str | None) -> str:
    """The flags the user gave to pick the job's place, repeated in every suggested command."""
    import shlex

    flags = [("-n", namespace), ("--context", context), ("--kubeconfig", kubeconfig)]
    words = [f"{flag} {shlex.quote(value)}" for flag, value in flags if value] + (["--local"] if local else [])
    return "".join(f" {word}" for word in words)


def unenforced_options(options) -> list[str]:
    """The given options a local run cannot honour: processes share this machine, its scheduler and its /dev/shm."""
    given = {"--cpu": options.cpu, "--memory": options.memory, "--gang": options.gang,
             "--priority-class": options.priority_class, "--queue": options.queue,
             "--node-selector": options.node_selector, "--toleration": options.toleration,
             "--shm-size": options.shm_size, "--workdir-mount": options.workdir_mount}
    return [flag for flag, value in given.items() if value]


def print_summary(client, resource: dict, framework, flags: str, out, unenforced: list[str],
                  snapshot=None) -> None:
    """What was submitted and the commands to follow it, one per line so they fit 80 columns."""
    from rich.markup import escape

    name = resource["metadata"]["name"]
    out.print(f"[green]submitted[/] {framework.singular}/[bold]{name}[/] "
              f"([dim]{topology_text(resource, framework)}[/]) on {client.backend.description}")
    out.print(f"  --workers means {framework.workers_help}")
    if client.backend_name == "local":
        images = sorted({c.get("image") for spec in resource["spec"][framework.replica_spec_field].values()
                         for c in spec["template"]["spec"]["containers"]} - {None})
        where = f"a snapshot of {snapshot.source} (the job's own copy)" if snapshot else os.getcwd()
        out.print(escape(f"  note: replicas run as processes in {where};"), soft_wrap=True)
        out.print(escape(f"        the image ({', '.join(images)}) is not used"), soft_wrap=True)
        if unenforced:
            out.print(escape(f"  note: the local backend does not enforce {', '.join(unenforced)} "
                             "(they apply on Kubernetes)"), soft_wrap=True)
    out.print("  next:")
    for command in ("logs -f", "status", "wait"):
        out.print(escape(f"    trainctl {command} {name}{flags}"), soft_wrap=True)


class SubmitCommand(TyperCommand):
    """``submit`` as click parses it, plus the one mistake everyone makes once: no ``--`` before the command.

    Without ``--``, click takes the command's options for trainctl's (``--epochs``: no such
    option; ``--workers``: silently trainctl's), so the command must follow ``--``.
    """

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        from typer._click.exceptions import NoSuchOption, UsageError

        separated = "--" in args  # before parsing: the parser consumes the list
        try:
            rest = super().parse_args(ctx, args)
        except NoSuchOption as error:
            if separated:
                raise
            raise UsageError(f"{error.message}; if {error.option_name} is an option of the job's command, "
                             "put -- before the command: trainctl submit KIND [OPTIONS] -- COMMAND [ARGS...]",
                             ctx) from None
        if ctx.params.get("command") and not separated:
            import shlex

            raise UsageError(f"the job's command goes after --, so that its options are not taken for trainctl's: "
                             f"trainctl submit {ctx.params.get('kind')} [OPTIONS] -- {shlex.join(ctx.params['command'])}",
                             ctx)
        return rest


def register(app: typer.Typer) -> None:
    app.command(help=HELP, cls=SubmitCommand)(submit)
