"""``trainctl runtimes``: Kubeflow Trainer v2's default ClusterTrainingRuntimes as trainctl builds them (print,
install, each image replaceable), and the training runtimes a cluster has (list; on the local backend, the ones it
runs: trainctl's defaults)."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, Output, console, dump, echo_all
from trainctl.cli.params import Argument, Option
from trainctl.frameworks import TRAINER_RUNTIMES

NAMES = list(TRAINER_RUNTIMES)
EXAMPLE = f"--image {NAMES[0]}=registry.local/team/trainer:1.0"

Names = Annotated[list[str] | None, Argument(help=f"Runtimes (default: all {len(NAMES)}: {', '.join(NAMES)}).")]
Images = Annotated[list[str] | None, Option("--image", metavar="RUNTIME=IMAGE", help=(
    "The image of one runtime's containers instead of upstream's, for a cluster that pulls from its own registry "
    f"(repeatable). Example: {EXAMPLE}"))]

runtimes_app = typer.Typer(
    help=("Kubeflow Trainer v2's default ClusterTrainingRuntimes (the runtimes a TrainJob names), built by trainctl "
          f"in upstream's shape; install them after trainctl crds install --api v2. Example: trainctl runtimes install "
          f"{EXAMPLE}"),
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: Rich help formatting costs ~130 ms at start-up
)


def built(names: list[str] | None, images: list[str] | None) -> list[dict]:
    from trainctl.core.trainer_runtimes import default_runtimes, parse_images

    return default_runtimes(names, parse_images(images))


@runtimes_app.command("print", help=f"Print the runtimes as YAML documents (or a JSON List). Example: trainctl runtimes print {EXAMPLE}")
def print_runtimes(names: Names = None, image: Images = None, output: Output = None) -> None:
    echo_all(built(names, image), output or "yaml")


@runtimes_app.command("install", help=f"Create or update the runtimes in the cluster. "
                                      f"Example: trainctl runtimes install {EXAMPLE} --context prod")
def install_runtimes(
    names: Names = None,
    image: Images = None,
    dry_run: Annotated[bool, Option("--dry-run", help="Say what would be installed; change nothing.")] = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.core.trainer_runtimes import node_image
    from trainctl.sdk.client import Client

    runtimes = built(names, image)
    client = Client("kubernetes", context=context, kubeconfig=kubeconfig)
    if not dry_run:
        client.backend.install_runtimes(runtimes)
    shown = ", ".join(f"{runtime['metadata']['name']} ({node_image(runtime)})" for runtime in runtimes)
    verb = "would install" if dry_run else "installed"
    console().print(f"{verb} {len(runtimes)} ClusterTrainingRuntimes on {client.backend.description}: {shown}")


@runtimes_app.command("list", help="The ClusterTrainingRuntimes and a namespace's TrainingRuntimes on the cluster; "
                                   "on the local backend (--local, TRAINCTL_BACKEND=local, or no kubeconfig) the "
                                   "runtimes it runs, trainctl's defaults. Example: trainctl runtimes list -A")
def list_runtimes(
    namespace: Namespace = None,
    all_namespaces: Annotated[bool, Option("--all-namespaces", "-A", help=(
        "TrainingRuntimes of every namespace."))] = False,
    output: Output = None,
    local: Local = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    from trainctl.cli.formatting import print_table
    from trainctl.cli.plain import stderr_line
    from trainctl.core.trainer_runtimes import default_runtimes, node_image
    from trainctl.frameworks.base import LABEL_TRAINER_FRAMEWORK
    from trainctl.sdk.client import Client, choose_backend

    if choose_backend("local" if local else None, context, kubeconfig) == "local":
        # no cluster holds runtimes: a TrainJob runs on one of these, or on one given beside it in its file
        runtimes, where = default_runtimes(), "local"
        stderr_line("the local backend runs trainctl's default ClusterTrainingRuntimes (trainctl runtimes print shows "
                    "them whole), or a runtime given beside the TrainJob in its apply -f file", "dim", prefix="note:")
    else:
        client = Client("kubernetes", context=context, kubeconfig=kubeconfig)
        runtimes = client.backend.list_runtimes(None if all_namespaces else namespace or client.default_namespace())
        where = client.backend.description
    if output:
        typer.echo(dump({"apiVersion": "v1", "kind": "List", "items": runtimes}, output), nl=False)
        return
    if not runtimes:
        console().print(f"no training runtimes ({where})")
        return
    rows = [[runtime["metadata"]["name"], runtime["kind"], runtime["metadata"].get("namespace", ""),
             runtime["metadata"].get("labels", {}).get(LABEL_TRAINER_FRAMEWORK, ""), node_image(runtime) or ""]
            for runtime in runtimes]
    print_table(["NAME", "KIND", "NAMESPACE", "FRAMEWORK", "IMAGE"], rows)


def register(app: typer.Typer) -> None:
    app.add_typer(runtimes_app, name="runtimes")
