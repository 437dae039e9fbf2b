"""``trainctl controller``: the in-cluster operator (run) and its deployment (install)."""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from trainctl.cli.common import Context, Kubeconfig, Output, console, with_parameters
from trainctl.frameworks import ALL, CLI_NAMES, DEFAULT, HELPER_IMAGES

controller_app = typer.Typer(
    help="The operator that turns kubeflow.org/v1 jobs into pods. Example: trainctl controller install",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: Rich help formatting costs ~130 ms at start-up
)

def _check_namespaces(values: list[str] | None) -> list[str] | None:
    """Each -n is a DNS-1123 label, as on every other command (it becomes part of API paths)."""
    from trainctl.kube.names import check_namespace

    for value in values or []:
        check_namespace(value, "-n/--namespace")
    return values


# upstream's flag, with 'yunikorn' a value of trainctl's own
GangSchedulerName = Annotated[str, typer.Option("--gang-scheduler-name", help=(
    "Gang scheduling: 'volcano', 'yunikorn' (task groups on the pods, no CRD), or the scheduler-plugins "
    "scheduler's name (PodGroups are created only when that PodGroup CRD is installed). See docs/schedulers.md."))]
# upstream's flags and defaults (20/30); negative QPS: no client-side limit, as client-go reads it
KubeApiQps = Annotated[float | None, typer.Option("--kube-api-qps", help=(
    "Requests a second the controller may average to the API server (default 20, as upstream; 0: client-go's "
    "default of 5; negative: no limit). Each client waits its turn for a token."))]
KubeApiBurst = Annotated[int | None, typer.Option("--kube-api-burst", help=(
    "Requests the controller may send at once after a quiet spell (default 30, as upstream; 0: client-go's 10)."))]
ProgressInterval = Annotated[str | None, typer.Option("--progress-interval", help=(
    "How often running jobs' logs are read for progress and stalls, e.g. 10s (the default)."))]
ProgressWriteInterval = Annotated[str | None, typer.Option("--progress-write-interval", help=(
    "The least time between two writes of one job's progress annotation, e.g. 30s (the default); "
    "see docs/progress.md."))]
LeaseDuration = Annotated[str | None, typer.Option("--leader-elect-lease-duration", help=(
    "How long a standby waits after the leader's last renewal before it takes the Lease, e.g. 15s (the default)."))]
RenewDeadline = Annotated[str | None, typer.Option("--leader-elect-renew-deadline", help=(
    "How long the leader keeps trying to renew before it gives up and exits, e.g. 10s (the default)."))]
RetryPeriod = Annotated[str | None, typer.Option("--leader-elect-retry-period", help=(
    "How often candidates try to take, and the leader to renew, the Lease, e.g. 2s (the default)."))]
KINDS_HELP = (f"Job kinds to reconcile, comma-separated or repeated (default: all {len(ALL)}: "
              f"{', '.join(CLI_NAMES)}). Example: --kinds {DEFAULT.name}")


def helper_image_parameters() -> list[inspect.Parameter]:
    """An option for each image the kinds' frameworks run beside their replicas (upstream's flag names)."""
    return [inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=Annotated[str | None, typer.Option(helper.flag, help=helper.help)])
            for key, helper in HELPER_IMAGES.items()]


def run(
    namespace: Annotated[list[str] | None, typer.Option(
        "--namespace", "-n", help="Watch only this namespace (repeatable; default: every namespace).",
        callback=_check_namespaces)] = None,
    kinds: Annotated[list[str] | None, typer.Option("--kinds", help=KINDS_HELP)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256,
                                             help="Jobs reconciled in parallel.")] = 8,
    leader_elect: Annotated[bool, typer.Option("--leader-elect", help=(
        "Act only while holding the coordination.k8s.io Lease (run several replicas for availability)."))] = False,
    lease_namespace: Annotated[str | None, typer.Option("--lease-namespace", help=(
        "Namespace of the Lease (default: the controller's own namespace)."))] = None,
    lease_name: Annotated[str, typer.Option("--lease-name", help="Name of the Lease.")] = "trainctl-controller",
    leader_elect_lease_duration: LeaseDuration = None,
    leader_elect_renew_deadline: RenewDeadline = None,
    leader_elect_retry_period: RetryPeriod = None,
    metrics_addr: Annotated[str, typer.Option("--metrics-addr", help=(
        "Serve Prometheus /metrics here (host:port; '0' turns it off)."))] = ":8080",
    health_addr: Annotated[str, typer.Option("--health-addr", help=(
        "Serve /healthz and /readyz here (host:port; '0' turns it off)."))] = ":8081",
    gang_scheduler_name: GangSchedulerName = "",
    cluster_domain: Annotated[str | None, typer.Option("--cluster-domain", envvar="CUSTOM_CLUSTER_DOMAIN", help=(
        "Cluster domain appended to the fully qualified replica addresses a kind's env carries, as the Kubeflow "
        "operator's CUSTOM_CLUSTER_DOMAIN."))] = None,
    log_format: Annotated[str, typer.Option("--log-format", help="text or json.")] = "text",
    keep_records: Annotated[bool, typer.Option("--keep-records/--no-keep-records", help=(
        "Keep each replica's ended runs (log tail, exit code, result, reports) in ConfigMaps owned by the job, "
        "so they outlive the pods (docs/records.md)."))] = True,
    kube_api_qps: KubeApiQps = None,
    kube_api_burst: KubeApiBurst = None,
    progress_interval: ProgressInterval = None,
    progress_write_interval: ProgressWriteInterval = None,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
    **helper_images: str | None,
) -> None:
    from trainctl.controller.manager import KUBE_API_BURST, KUBE_API_QPS, Options, run_controller
    from trainctl.submit.durations import parse_duration

    options = Options.from_flags(namespaces=namespace or [], kinds=kinds or [], concurrency=concurrency,
                                 leader_elect=leader_elect, lease_namespace=lease_namespace, lease_name=lease_name,
                                 metrics_addr=metrics_addr, health_addr=health_addr,
                                 gang_scheduler_name=gang_scheduler_name, cluster_domain=cluster_domain,
                                 helper_images=helper_images, log_format=log_format, keep_records=keep_records,
                                 context=context, kubeconfig=kubeconfig,
                                 kube_api_qps=KUBE_API_QPS if kube_api_qps is None else kube_api_qps,
                                 kube_api_burst=KUBE_API_BURST if kube_api_burst is None else kube_api_burst,
                                 progress_interval_s=parse_duration(progress_interval, "--progress-interval"),
                                 progress_write_interval_s=parse_duration(progress_write_interval,
                                                                          "--progress-write-interval"),
                                 lease_timing=lease_timing(leader_elect_lease_duration, leader_elect_renew_deadline,
                                                           leader_elect_retry_period))
    raise typer.Exit(run_controller(options))


def lease_timing(duration: str | None, renew_deadline: str | None,
                 retry_period: str | None) -> tuple[int, int, int] | None:
    """The --leader-elect-* durations in seconds, the defaults for those not given; None when none is given."""
    from trainctl.controller.leader import LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_S
    from trainctl.submit.durations import parse_duration

    given = (duration, renew_deadline, retry_period)
    if given == (None, None, None):
        return None
    flags = ("--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period")
    return tuple(default if text is None else parse_duration(text, flag)
                 for text, flag, default in zip(given, flags, (LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_S)))


def install(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the manifests; change nothing.")] = False,
    image: Annotated[str | None, typer.Option("--image", help=(
        "Controller image, built from controller/Dockerfile (default: ghcr.io/trainctl/trainctl:<version>)."))] = None,
    install_namespace: Annotated[str, typer.Option("--install-namespace", help=(
        "Namespace the controller and its Lease live in."))] = "trainctl-system",
    gang_scheduler_name: GangSchedulerName = "",
    kube_api_qps: KubeApiQps = None,
    kube_api_burst: KubeApiBurst = None,
    output: Output = None,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
    **helper_images: str | None,
) -> None:
    from trainctl.cli.apply import dump_all
    from trainctl.controller.install import apply_manifests, manifests

    documents = manifests(namespace=install_namespace, image=image, gang_scheduler_name=gang_scheduler_name,
                          kube_api_qps=kube_api_qps, kube_api_burst=kube_api_burst, **helper_images)
    if dry_run:
        typer.echo(dump_all(documents, output or "yaml"), nl=False)
        return
    for line in apply_manifests(documents, context=context, kubeconfig=kubeconfig):
        console().print(line)


controller_app.command("run", help="Reconcile jobs into pods and services until stopped (SIGTERM drains). "
                                  "Example: trainctl controller run --leader-elect --namespace team-a")(
    with_parameters(run, helper_image_parameters()))
controller_app.command("install", help=(
    "Install the controller in a cluster: namespace, CRDs, ServiceAccount, least-privilege RBAC, "
    "Deployment and metrics Service (running it again updates them in place). "
    "Example: trainctl controller install --dry-run > trainctl.yaml"))(
    with_parameters(install, helper_image_parameters()))


def register(app: typer.Typer) -> None:
    app.add_typer(controller_app, name="controller")
