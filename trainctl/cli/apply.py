"""``trainctl apply -f FILE``: submit kubeflow.org/v1 job YAML written by hand or by any tool, and Trainer v2
TrainJobs with their runtime beside them in the file."""

from __future__ import annotations

import copy
from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, Output, console, dump_all, make_client
from trainctl.errors import UserError
from trainctl.frameworks import DEFAULT

HELP = f"""Submit every job in a YAML file (multi-document files and - for stdin work).

A Trainer v2 TrainJob runs on the runtime given beside it in the file (a second document), else on the
runtime it names: locally one of trainctl's defaults, on a cluster one installed there (trainctl runtimes install).
On a cluster a runtime given in the file is created (or updated) there first, as kubectl apply would. A TrainJob's
own trainctl.io/runtime-snapshot annotation is ignored (a note says so): trainctl snapshots the runtime it resolves.

Every document is checked first, as the backend would check it (locally: that its commands can
start here; on a cluster: its CRD, namespace and the API server's own validation): if one is
wrong, none is applied. --dry-run makes the same checks and prints the documents. The code
snapshot ConfigMaps that submit --dry-run prints are uploaded with the jobs that use them.

Examples:

  trainctl apply -f {DEFAULT.singular}.yaml

  cat jobs.yaml | trainctl apply -f - --dry-run

  trainctl apply -f job.yaml --entrypoint 'python dist_train.py'   # YAML that relies on its image
"""


def apply(
    filename: Annotated[str, typer.Option("--filename", "-f", help="YAML file with one or more jobs; - reads stdin.")],
    namespace: Namespace = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print; apply nothing.")] = False,
    output: Output = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace jobs that already exist.")] = False,
    no_preflight: Annotated[bool, typer.Option(
        "--no-preflight", help="Skip the checks that each job can start (local: its executable and script exist).")] = False,
    entrypoint: Annotated[str | None, typer.Option(
        "--entrypoint", help="The command of every container that names none and relies on its image's entrypoint "
        "(the local backend runs no image), e.g. 'python train.py'; the container's args follow it.")] = None,
    local: Local = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.cli.plain import stderr_line
    from trainctl.code import documents as code_documents

    printed = load_documents(filename)
    documents, archives = code_documents.split(printed, f"-f {filename}")  # submit --dry-run's code snapshots
    documents, runtimes, given = checked(documents, filename, namespace, entrypoint)
    codes = [code_documents.code_for(document, archives) for document in documents]  # all checked before one applies
    client = make_client(local, context, kubeconfig)
    install = getattr(client.backend, "install_runtimes", None)  # a cluster's: the runtimes become objects there
    placed = in_namespaces(runtimes, documents, client) if install is not None else []
    for document, code, runtime in zip(documents, codes, given):  # the real apply's checks, before any job goes
        client.submit(copy.deepcopy(document), replace=replace, preflight=not no_preflight, code=code, dry_run=True,
                      runtime=runtime)
    from trainctl.core.trainjob_apply import notes

    local_run = client.backend.description == "local"
    for note in [note for document, runtime in zip(documents, given) for note in notes(document, local_run, runtime)]:
        stderr_line(note, "dim", prefix="note:")
    if dry_run:
        typer.echo(dump_all(printed, output or "yaml"), nl=False)
        return
    if placed:  # first, as kubectl apply -f would create them; trainctl's controller snapshots them as any runtime
        for runtime, outcome in zip(placed, install(placed)):
            console().print(applied_runtime_line(runtime, outcome))
        given = [None] * len(documents)
    for document, code, runtime in zip(documents, codes, given):
        stored = client.submit(document, replace=replace, preflight=not no_preflight, code=code, runtime=runtime)
        console().print(applied_line(stored, client))


def checked(documents: list, filename: str, namespace: str | None,
            entrypoint: str | None) -> tuple[list[dict], list[dict], list[dict | None]]:
    """The file's jobs, each checked and made ready to submit, its runtimes, and the runtime each job was given."""
    from trainctl.cli.plain import stderr_line
    from trainctl.code.pods import abridged_programs
    from trainctl.core.trainjob import (ignored_snapshot, is_runtime, is_trainjob, runtime_given, with_runtimes_given,
                                        without_snapshot)
    from trainctl.core.validation import check_runtime_document, validate

    sources = {id(document): filename if len(documents) == 1 else f"{filename} (document {index + 1})"
               for index, document in enumerate(documents)}  # where each is in the file, runtimes counted
    for document in documents:  # every document checked from its numbers alone, before anything is planned
        if is_runtime(document):
            check_runtime_document(document, source=sources[id(document)])
            continue
        if without_snapshot(document):  # trainctl's to take, never the file's
            stderr_line(f"-f {sources[id(document)]}: {ignored_snapshot(document)}", "dim", prefix="note:")
        validate(document, source=sources[id(document)])
    documents, runtimes = with_runtimes_given(documents, f"-f {filename}")  # each named by a TrainJob of the file
    given = [runtime_given(document, runtimes) if is_trainjob(document) else None for document in documents]
    for document, runtime in zip(documents, given):
        source = sources[id(document)]
        left_out = abridged_programs(document)
        if left_out:
            raise UserError(f"{source}: submit --dry-run's abridged view, without {' and '.join(left_out)}: print "
                            "the job to apply with submit ... --dry-run -o yaml")
        if namespace:
            document["metadata"]["namespace"] = namespace
        if entrypoint is not None:
            supply_entrypoint(document, entrypoint_words(entrypoint), runtime)
    return documents, runtimes, given


def in_namespaces(runtimes: list[dict], documents: list[dict], client) -> list[dict]:
    """The runtimes as a cluster gets them: a TrainingRuntime in the namespace of the TrainJobs that name it (where
    they look for it), refused where it names another."""
    from trainctl.core.trainer_crds import RUNTIME
    from trainctl.core.trainjob import is_trainjob, runtime_given

    placed = []
    for runtime in map(copy.deepcopy, runtimes):
        if runtime["kind"] == RUNTIME:
            users = {job["metadata"].get("namespace") or client.default_namespace() for job in documents
                     if is_trainjob(job) and runtime_given(job, [runtime]) is not None}
            own = runtime["metadata"].get("namespace")
            if len(users) > 1 or (own and own not in users):
                raise UserError(f"TrainingRuntime {runtime['metadata']['name']!r} is in namespace {own!r}, the "
                                f"TrainJobs that name it in {', '.join(sorted(users))}: a TrainJob finds its "
                                "TrainingRuntime in its own namespace: give them one (-n)")
            runtime["metadata"]["namespace"] = users.pop()
        placed.append(runtime)
    return placed


def applied_runtime_line(runtime: dict, outcome: str) -> str:
    """``trainingruntime/mine created in namespace ml``, as kubectl apply says it."""
    namespace = runtime["metadata"].get("namespace")
    where = f" in namespace {namespace}" if namespace else ""
    return f"[green]{runtime['kind'].lower()}/[bold]{runtime['metadata']['name']}[/] {outcome}{where}[/]"


def entrypoint_words(text: str) -> list[str]:
    """--entrypoint as words, split as a shell would split them, never run by one."""
    import shlex

    try:
        words = shlex.split(text)
    except ValueError as err:
        raise UserError(f"--entrypoint {text!r}: {err}: quote it as a shell would, e.g. 'python train.py'") from None
    if not words:
        raise UserError("--entrypoint '': give the program to run, e.g. 'python train.py'")
    return words


def supply_entrypoint(document: dict, words: list[str], runtime: dict | None = None) -> None:
    """What the image's ENTRYPOINT would have run, for each container that names no command (an MPI
    worker that only hosts ranks keeps idling; a TrainJob's trainer, where neither it nor its runtime ``runtime``,
    given beside it, names one)."""
    from trainctl.core.job import Job
    from trainctl.core.trainjob import is_trainjob

    if is_trainjob(document):
        from trainctl.core.trainjob_apply import with_entrypoint

        with_entrypoint(document, words, runtime)
        return
    job = Job(document)
    for rtype, spec in job.replica_specs.items():  # the document's own templates, not Job.template's copies
        container = job.main_container(((spec.get("template") or {}).get("spec") or {}).get("containers") or []) or {}
        if not container.get("command") and (container.get("args") or not job.framework.idle_command(rtype)):
            container["command"] = list(words)


def applied_line(stored: dict, client) -> str:
    """Where the job went, so that the next command finds it: upstream YAML often names its own namespace."""
    kind, name = stored["kind"].lower(), stored["metadata"]["name"]
    namespace = stored["metadata"]["namespace"]
    line = f"[green]applied[/] {kind}/[bold]{name}[/] in namespace {namespace} on {client.backend.description}"
    if namespace != client.default_namespace():
        line += f": trainctl status {name} -n {namespace}"
    return line


def load_documents(filename: str) -> list[dict]:
    from trainctl.yamlsafe import load_all, read_text

    where = f"-f {filename}"
    documents = []
    for document in load_all(read_text(filename), where):
        is_list = isinstance(document, dict) and document.get("kind") == "List" and document.get("apiVersion") == "v1"
        items = document.get("items") if is_list else [document]  # a v1 List, as -o json prints several
        if not isinstance(items, list):
            raise UserError(f"{where}: a List's items must be a list of resources")
        documents += [item for item in items if item is not None]
    if not documents:
        raise UserError(f"{where}: no job in the file")
    return documents


def register(app: typer.Typer) -> None:
    app.command(help=HELP)(apply)
