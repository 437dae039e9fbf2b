"""``trainctl submit KIND [OPTIONS] -- COMMAND [ARGS...]``: one command line -> one job.

The options are trainctl.submit.options.OPTIONS, each defined there once: this module makes them
typer parameters (:func:`option_parameters`), gathers what was given into ``SubmitOptions``
(with ``-f`` values beneath the flags) and hands it to the submission pipeline that
``Client.run`` uses too (trainctl.submit.pipeline). What it adds is the command line's own:
``--dry-run`` views, the summary, ``--wait`` and ``--follow``.
"""

from __future__ import annotations

import builtins
import copy
import inspect
import keyword
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand

from trainctl import errors
from trainctl.cli.common import (Context, Kubeconfig, Local, Namespace, Output, console, dump, echo_all, make_client,
                                 with_parameters)
from trainctl.cli.completers import job_kinds
from trainctl.errors import UserError
from trainctl.frameworks import ALL, CLI_NAMES, DEFAULT
from trainctl.submit.options import OPTIONS, Option, unenforced

WORKERS_TABLE = "\n".join(f"  {fw.name + ':':12} {fw.workers_help}" for fw in ALL)
# options every command declares alike keep that shared declaration (its check runs as the flag is read)
SHARED = {"namespace": Namespace}
ALIASES = ", ".join(f"{alias} = {fw.name}" for fw in ALL for alias in fw.aliases if alias != fw.singular)
LAUNCHED = "".join(f" ({fw.title} runs it under {fw.launchers[0]})" for fw in ALL if fw.launchers)
V2_WORKERS = "the TrainJob's nodes (numNodes), each running the command as its runtime's policy says"
KIND_EXAMPLES = "".join(f"  trainctl submit {fw.name} {fw.cli_example}\n" for fw in ALL if fw.cli_example)

HELP = f"""Submit a distributed training job: KIND is one of {", ".join(CLI_NAMES)} (also {ALIASES}).

Everything after -- is the command every replica runs{LAUNCHED}.

\b
--workers N means:
{WORKERS_TABLE}

\b
Examples:
  trainctl submit {DEFAULT.name} --workers 4 --gpus 1 -- python train.py --epochs 3
{KIND_EXAMPLES}  trainctl submit {DEFAULT.name} --backoff-limit 0 -- python train.py   # fail on the first crash, no restart
  trainctl submit {DEFAULT.name} --pip einops -- python train.py        # on Kubernetes ./ travels with the job
  trainctl submit --api v2 {DEFAULT.name} --workers 4 -- python train.py   # a Trainer v2 TrainJob (docs/trainer-v2.md)
"""


def submit(
    kind: Annotated[str, typer.Argument(help=f"Job kind: {', '.join(CLI_NAMES)}.", show_default=False,
                                        autocompletion=job_kinds)],
    command: Annotated[list[str] | None, typer.Argument(help="The command after --.", show_default=False)] = None,
    *,
    values: Annotated[Path | None, typer.Option("--values", "-f", help="YAML file of option values (keys as the long options).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Make every check the submit would and print the resource; "
                                          "create nothing.")] = False,
    output: Output = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a job of the same name.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the job ends; exit 1 if it failed.")] = False,
    follow: Annotated[bool, typer.Option("--follow", help="Stream every replica's logs until the job ends.")] = False,
    no_preflight: Annotated[bool, typer.Option(
        "--no-preflight", help="Skip the checks that the job can start (local: its executable and script exist).")] = False,
    local: Local = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
    **given: object,
) -> None:
    from trainctl.frameworks import by_name
    from trainctl.submit.options import SubmitOptions
    from trainctl.submit.pipeline import prepare

    framework = by_name(kind)
    options = SubmitOptions(command=command or [], **{option.name: given_value(option, given) for option in OPTIONS})
    if values is not None:
        options = options.merged_with(load_values(values), str(values))
    client = make_client(local, context, kubeconfig)  # which backend decides what code travels
    submission = prepare(framework, options, client.backend_name)
    code = submission.code
    snapshot = code.snapshot if code else None
    if snapshot is not None:  # once the options are all good: a refusal stays one line
        warn_about(snapshot)
    if dry_run:  # every check the real submit makes, on the same backend: what it refuses, so does this
        client.submit(copy.deepcopy(submission.resource), replace=replace, preflight=not no_preflight, code=code,
                      dry_run=True)
        show_dry_run(submission, output)
        return
    if snapshot is not None:  # before the upload, beside the summary: stderr keeps only an error's one line
        console(stderr=bool(output)).print(snapshot.summary(), soft_wrap=True, markup=False)
    stored = client.submit(submission.resource, replace=replace, preflight=not no_preflight, code=code)
    if output:  # like kubectl create -o yaml: the created resource on stdout, the summary aside
        typer.echo(dump(stored, output), nl=False)
    print_summary(client, stored, framework, same_target_flags(given["namespace"], local, context, kubeconfig),
                  console(stderr=bool(output)), unenforced(submission.options), snapshot)
    if follow or wait:
        watch(client, stored, follow)


def option_parameters() -> list[inspect.Parameter]:
    """Every submit option as a typer parameter, declared as OPTIONS defines it."""
    return [inspect.Parameter(parameter_name(option), inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=SHARED.get(option.name) or Annotated[
                                  parameter_type(option), typer.Option(*option.cli_flags, help=option.cli_help)])
            for option in OPTIONS]


def parameter_name(option: Option) -> str:
    """The Python parameter of an option: its name, with a trailing _ where that would shadow a builtin (set)."""
    return f"{option.name}_" if keyword.iskeyword(option.name) or hasattr(builtins, option.name) else option.name


def given_value(option: Option, given: dict) -> object:
    """What typer parsed for ``option`` (None, or no list, when the flag is absent)."""
    value = given[parameter_name(option)]
    return option.empty if value is None else value


def parameter_type(option: Option) -> object:
    return (list[str] if option.type is list else option.type) | None


def with_options(command):
    """``command`` with the submit options among its parameters, before the front-end's own keywords."""
    return with_parameters(command, option_parameters())


def show_dry_run(submission, output: str | None) -> None:
    """What would be created: every document whole (with -o, or when nothing of trainctl's travels), else the
    abridged view of a job with code or packages."""
    code = submission.code
    if code is not None and code.snapshot is not None:
        console(stderr=True).print(code.snapshot.summary(), soft_wrap=True, markup=False)
    if output or code is None:  # asked for, or nothing of trainctl's in it: every document, whole
        echo_all(dry_run_documents(submission.resource, code), output or "yaml")
    else:
        typer.echo(abridged_view(submission.resource, submission.framework, submission.options, code), nl=False)


def watch(client, stored: dict, follow: bool) -> None:
    """``--follow`` and ``--wait``: the logs as they come, then the wait; the exit status is the job's."""
    from trainctl.cli.common import watching
    from trainctl.cli.logs import follow_logs
    from trainctl.cli.wait import wait_for

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
    from trainctl.code.sizes import human

    kind = "trainjob" if resource["kind"] != framework.kind else framework.singular  # --api v2
    lines = [f"dry run, nothing created: {kind}/{resource['metadata']['name']} ({topology_text(resource, framework)})",
             f"  runs      {shlex.join(options.command)}, in {', '.join(images_of(resource, framework))}"]
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


def images_of(resource: dict, framework) -> list[str]:
    """The job's images; a TrainJob's: its trainer's, else its runtime's (the cluster holds the runtime)."""
    if resource["kind"] != framework.kind:
        spec = resource["spec"]
        return [spec["trainer"].get("image") or f"the image of runtime {spec['runtimeRef']['name']}"]
    from trainctl.core.job import Job

    return sorted(set(Job(resource).images.values()))


def topology_text(resource: dict, framework) -> str:
    if resource["kind"] != framework.kind:  # --api v2: a TrainJob, its nodes
        trainer = resource["spec"]["trainer"]
        procs = trainer.get("numProcPerNode")
        return f"{trainer['numNodes']} node{'s' if trainer['numNodes'] > 1 else ''}" + (
            f" x {procs} process{'es' if procs > 1 else ''}" if procs else "")
    specs = resource["spec"][framework.replica_spec_field]
    return " + ".join(f"{rtype} {spec.get('replicas', 1)}" for rtype, spec in specs.items())


def same_target_flags(namespace: str | None, local: bool, context: str | None, kubeconfig: str | None) -> str:
    """The flags the user gave to pick the job's place, repeated in every suggested command."""
    import shlex

    flags = [("-n", namespace), ("--context", context), ("--kubeconfig", kubeconfig)]
    words = [f"{flag} {shlex.quote(value)}" for flag, value in flags if value] + (["--local"] if local else [])
    return "".join(f" {word}" for word in words)


def print_summary(client, resource: dict, framework, flags: str, out, unenforced: list[str],
                  snapshot=None) -> None:
    """What was submitted and the commands to follow it, one per line so they fit 80 columns."""
    from rich.markup import escape

    from trainctl.core.job import Job

    name, v2 = resource["metadata"]["name"], resource["kind"] != framework.kind
    out.print(f"[green]submitted[/] {resource['kind'].lower()}/[bold]{name}[/] "
              f"([dim]{topology_text(resource, framework)}[/]) on {client.backend.description}")
    out.print(f"  --workers means {V2_WORKERS if v2 else framework.workers_help}")
    if client.backend_name == "local":
        images = sorted(set(Job(resource).images.values()) - {""}) or ["the runtime's"]
        where = f"a snapshot of {snapshot.source} (the job's own copy)" if snapshot else os.getcwd()
        # the images and the directory are the user's (a values file's image may hold an ESC): shown as a terminal
        # shows them (errors.visible; this module's visible() escapes for a YAML comment)
        out.print(escape(errors.visible(f"  note: replicas run as processes in {where};")), soft_wrap=True)
        out.print(escape(errors.visible(f"        the image ({', '.join(images)}) is not used")), soft_wrap=True)
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
    app.command(help=HELP, cls=SubmitCommand)(with_options(submit))
