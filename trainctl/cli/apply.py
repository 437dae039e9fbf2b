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
    from trainctl.code import documents as code_documents
    from trainctl.code.pods import abridged_programs
    from trainctl.core.trainjob import with_runtimes_given
    from trainctl.core.validation import validate

    printed = load_documents(filename)
    documents, archives = code_documents.split(printed, f"-f {filename}")  # submit --dry-run's code snapshots
    documents = with_runtimes_given(documents, f"-f {filename}")  # a TrainJob's runtime given beside it travels in it
    for index, document in enumerate(documents):
        source = filename if len(documents) == 1 else f"{filename} (document {index + 1})"
        validate(document, source=source)
        left_out = abridged_programs(document)
        if left_out:
            raise UserError(f"{source}: submit --dry-run's abridged view, without {' and '.join(left_out)}: print "
                            "the job to apply with submit ... --dry-run -o yaml")
        if namespace:
            document["metadata"]["namespace"] = namespace
        if entrypoint is not None:
            supply_entrypoint(document, entrypoint_words(entrypoint))
    codes = [code_documents.code_for(document, archives) for document in documents]  # all checked before one applies
    client = make_client(local, context, kubeconfig)
    for document, code in zip(documents, codes):  # the real apply's checks, for the dry run and before any job goes
        client.submit(copy.deepcopy(document), replace=replace, preflight=not no_preflight, code=code, dry_run=True)
    if dry_run:
        typer.echo(dump_all(printed, output or "yaml"), nl=False)
        return
    for document, code in zip(documents, codes):
        stored = client.submit(document, replace=replace, preflight=not no_preflight, code=code)
        console().print(applied_line(stored, client))


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


def supply_entrypoint(document: dict, words: list[str]) -> None:
    """What the image's ENTRYPOINT would have run, for each container that names no command (an MPI
    worker that only hosts ranks keeps idling; a TrainJob's trainer, where neither it nor its runtime names one)."""
    from trainctl.core.job import Job

    job = Job(document)
    if job.node_plan is not None:
        container = job.main_container(job.template(job.node_plan.trainer)["spec"]["containers"]) or {}
        if not container.get("command"):
            document["spec"]["trainer"] = {**(document["spec"].get("trainer") or {}), "command": list(words)}
        return
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
