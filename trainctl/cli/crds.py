"""``trainctl crds``: the project's own CustomResourceDefinitions for the six job kinds."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Output, console, dump
from trainctl.frameworks import ALL, DEFAULT

crds_app = typer.Typer(
    help="The kubeflow.org/v1 CRDs trainctl generates. Example: trainctl crds print > crds.yaml",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: Rich help formatting costs ~130 ms at start-up
)


@crds_app.command("print", help="Print the CRDs (all kinds, or the ones named). "
                                f"Example: trainctl crds print {DEFAULT.name}")
def print_crds(
    kinds: Annotated[list[str] | None, typer.Argument(help=f"Job kinds to print (default: all {len(ALL)}).")] = None,
    output: Output = None,
) -> None:
    from trainctl.core.crds import all_crds, crd
    from trainctl.frameworks import by_name

    documents = [crd(by_name(kind)) for kind in kinds] if kinds else all_crds()
    typer.echo("---\n".join(dump(document, output or "yaml") for document in documents), nl=False)


@crds_app.command("install", help="Create or update the CRDs in the cluster. Example: trainctl crds install --context prod")
def install_crds(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be installed; change nothing.")] = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.sdk.client import Client

    client = Client("kubernetes", context=context, kubeconfig=kubeconfig)
    names = client.backend.install_crds(dry_run=dry_run)
    verb = "would install" if dry_run else "installed"
    console().print(f"{verb} {len(names)} CRDs on {client.backend.description}: {', '.join(names)}")


def register(app: typer.Typer) -> None:
    app.add_typer(crds_app, name="crds")
