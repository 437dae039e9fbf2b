"""``trainctl crds``: the project's own CustomResourceDefinitions: the six kubeflow.org/v1 job kinds and Kubeflow
Trainer v2's three kinds (trainer.kubeflow.org/v1alpha1)."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Output, console, echo_all
from trainctl.cli.params import Option
from trainctl.frameworks import ALL, DEFAULT

APIS = ("v1", "v2", "all")
TRAINER_KINDS = "trainjob, trainingruntime, clustertrainingruntime"


def _check_api(value: str) -> str:
    if value not in APIS:
        from trainctl.errors import UserError

        raise UserError(f"unknown API {value!r} for --api: use v1, v2 or all")
    return value


Api = Annotated[str, Option("--api", callback=_check_api, help=(
    f"Which CRDs: v1 (kubeflow.org/v1: the {len(ALL)} job kinds), v2 (Kubeflow Trainer v2, "
    "trainer.kubeflow.org/v1alpha1: TrainJob, TrainingRuntime, ClusterTrainingRuntime) or all. Example: --api v2"))]

crds_app = typer.Typer(
    help=("The CRDs trainctl generates: the kubeflow.org/v1 job kinds and Kubeflow Trainer v2's TrainJob, "
          "TrainingRuntime and ClusterTrainingRuntime. Example: trainctl crds install --api v2"),
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: Rich help formatting costs ~130 ms at start-up
)


@crds_app.command("print", help="Print the CRDs (those of --api, or the kinds named) as YAML documents or a JSON List. "
                                f"Example: trainctl crds print {DEFAULT.name} trainjob")
def print_crds(
    kinds: Annotated[list[str] | None, typer.Argument(help=(
        f"Kinds to print: job kinds ({DEFAULT.name}, ...) or Trainer v2 kinds ({TRAINER_KINDS}). "
        "Default: every kind of --api."))] = None,
    api: Api = "all",
    output: Output = None,
) -> None:
    from trainctl.core.trainer_crds import crd_named, project_crds

    echo_all([crd_named(kind) for kind in kinds] if kinds else project_crds(api), output or "yaml")


@crds_app.command("install", help="Create or update the CRDs in the cluster. "
                                  "Example: trainctl crds install --api v2 --context prod")
def install_crds(
    api: Api = "all",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be installed; change nothing.")] = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.sdk.client import Client

    client = Client("kubernetes", context=context, kubeconfig=kubeconfig)
    names = client.backend.install_crds(dry_run=dry_run, api=api)
    verb = "would install" if dry_run else "installed"
    console().print(f"{verb} {len(names)} CRDs on {client.backend.description}: {', '.join(names)}")


def register(app: typer.Typer) -> None:
    app.add_typer(crds_app, name="crds")
