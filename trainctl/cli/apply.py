"""``trainctl apply -f FILE``: submit kubeflow.org/v1 job YAML written by hand or by any tool."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, Output, console, dump_all, make_client
from trainctl.errors import UserError

HELP = """Submit every job in a YAML file (multi-document files and - for stdin work).

All documents are validated first: if one is wrong, none is applied. The code snapshot
ConfigMaps that submit --dry-run prints are uploaded with the jobs that use them.

Examples:

  trainctl apply -f pytorchjob.yaml

  cat jobs.yaml | trainctl apply -f - --dry-run
"""


def apply(
    filename: Annotated[str, typer.Option("--filename", "-f", help="YAML file with one or more jobs; - reads stdin.")],
    namespace: Namespace = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print; apply nothing.")] = False,
    output: Output = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace jobs that already exist.")] = False,
    no_preflight: Annotated[bool, typer.Option(
        "--no-preflight", help="Skip the checks that each job can start (local: its executable and script exist).")] = False,
    local: Local = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.code import documents as code_documents
    from trainctl.code.pods import abridged_programs
    from trainctl.validation import validate

    printed = load_documents(filename)
    documents, archives = code_documents.split(printed, f"-f {filename}")  # submit --dry-run's code snapshots
    for index, document in enumerate(documents):
        source = filename if len(documents) == 1 else f"{filename} (document {index + 1})"
        validate(document, source=source)
        left_out = abridged_programs(document)
        if left_out:
            raise UserError(f"{source}: submit --dry-run's abridged view, without {' and '.join(left_out)}: print "
                            "the job to apply with submit ... --dry-run -o yaml")
        if namespace:
            document["metadata"]["namespace"] = namespace
    codes = [code_documents.code_for(document, archives) for document in documents]  # all checked before one applies
    if dry_run:
        typer.echo(dump_all(printed, output or "yaml"), nl=False)
        return
    client = make_client(local, context, kubeconfig)
    for document, code in zip(documents, codes):
        stored = client.submit(document, replace=replace, preflight=not no_preflight, code=code)
        console().print(f"[green]applied[/] {stored['kind'].lower()}/[bold]{stored['metadata']['name']}[/] "
                        f"on {client.backend.description}")


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
