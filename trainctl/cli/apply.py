"""``trainctl apply -f FILE``: submit kubeflow.org/v1 job YAML written by hand or by any tool."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, Output, console, dump, make_client
from trainctl.errors import UserError

HELP = """Submit every job in a YAML file (multi-document files and - for stdin work).

All documents are validated first: if one is wrong, none is applied.

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
    local: Local = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.validation import validate

    documents = load_documents(filename)
    for index, document in enumerate(documents):
        source = filename if len(documents) == 1 else f"{filename} (document {index + 1})"
        validate(document, source=source)
        if namespace:
            document["metadata"]["namespace"] = namespace
    if dry_run:
        typer.echo(dump_all(documents, output or "yaml"), nl=False)
        return
    client = make_client(local, context, kubeconfig)
    for document in documents:
        stored = client.submit(document, replace=replace)
        console().print(f"[green]applied[/] {stored['kind'].lower()}/[bold]{stored['metadata']['name']}[/] "
                        f"on {client.backend.description}")


def load_documents(filename: str) -> list[dict]:
    import yaml

    try:
        text = sys.stdin.read() if filename == "-" else open(filename, encoding="utf-8").read()
    except OSError as err:
        raise UserError(f"-f {filename}: cannot read ({err.strerror})") from None
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"-f {filename}: not valid YAML{where}: {problem}") from None
    if not documents:
        raise UserError(f"-f {filename}: no job in the file")
    return documents


def dump_all(documents: list[dict], fmt: str) -> str:
    if fmt == "json" and len(documents) > 1:
        return dump({"apiVersion": "v1", "kind": "List", "items": documents}, fmt)
    return "---\n".join(dump(document, fmt) for document in documents)


def register(app: typer.Typer) -> None:
    app.command(help=HELP)(apply)
