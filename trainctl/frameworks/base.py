"""The common shape of a framework: the facts that differ between job kinds.

A framework module subclasses :class:`Framework` and sets class attributes
(kind, replica types, default container, port, restart policy) and overrides
the few methods whose behaviour differs (``topology`` for ``--workers``, the
per-replica environment, the success rule). Everything else - names, labels,
defaults, validation, the reconcile loop - is written once, against this
interface, so adding a framework means one module here plus one template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from trainctl.core.network import Network
    from trainctl.job import Job

OPERATOR_GROUP = "training.kubeflow.org"
LABEL_OPERATOR = f"{OPERATOR_GROUP}/operator-name"
LABEL_JOB_NAME = f"{OPERATOR_GROUP}/job-name"
LABEL_REPLICA_TYPE = f"{OPERATOR_GROUP}/replica-type"
LABEL_REPLICA_INDEX = f"{OPERATOR_GROUP}/replica-index"
LABEL_JOB_ROLE = f"{OPERATOR_GROUP}/job-role"

PYTHONUNBUFFERED = {"name": "PYTHONUNBUFFERED", "value": "1"}


def env_var(name: str, value: object) -> dict:
    return {"name": name, "value": str(value)}


@dataclass(frozen=True)
class PeerLoss:
    """What a replica writes when it fails because another one did (trainctl/core/attribution.py):
    ``label`` names it in the failure summary ("stopped after its peer was lost (gloo)")."""

    label: str
    pattern: re.Pattern[str]


def peer_loss(label: str, *phrases: str) -> PeerLoss:
    """A signature matching any of ``phrases`` (regular expressions, searched anywhere in a line)."""
    return PeerLoss(label, re.compile("|".join(f"(?:{phrase})" for phrase in phrases)))


RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("All", "Running", "None")


class Framework:
    """Facts about one kubeflow.org/v1 job kind. Subclasses are singletons."""

    #: ``PyTorchJob``
    kind: ClassVar[str]
    #: CLI name: ``trainctl submit pytorch``
    name: ClassVar[str]
    #: other accepted CLI names
    aliases: ClassVar[tuple[str, ...]] = ()
    #: ``pytorchReplicaSpecs``
    replica_spec_field: ClassVar[str]
    #: canonical replica types, in the fixed order status rules evaluate them
    #: (the master role first; upstream iterates a Go map at random [quirk])
    replica_types: ClassVar[tuple[str, ...]]
    #: name of the container the operator wires (env, ports, exit code)
    container: ClassVar[str]
    #: default port name and number appended to that container if missing
    port_name: ClassVar[str | None]
    port: ClassVar[int | None]
    #: replica restartPolicy when the spec sets none
    restart_policy: ClassVar[str]
    #: replicas when a replica spec sets none
    default_replicas: ClassVar[dict[str, int]] = {}
    #: whether the CRD has a scale subresource on the Worker replicas
    scalable: ClassVar[bool] = False
    #: kind-specific spec properties (structural OpenAPI fragments) for the CRD
    spec_properties: ClassVar[dict[str, dict]] = {}
    #: one-line meaning of --workers N, shown in --help and the submit summary
    workers_help: ClassVar[str]
    #: image used by ``submit`` when --image is not given (the local backend ignores images)
    default_image: ClassVar[str]
    #: how this framework's processes fail when a peer failed first: such a replica is named as a
    #: consequence, not the cause, in the failure summary and the Failed condition
    peer_loss_signatures: ClassVar[tuple[PeerLoss, ...]] = ()
    #: exceptions a launcher raises to report a child's failure (torchrun's ChildFailedError): the
    #: child's own traceback, earlier in the log, names what went wrong
    launcher_reports: ClassVar[tuple[str, ...]] = ()

    # ---- derived names -------------------------------------------------
    @property
    def plural(self) -> str:
        return self.kind.lower() + "s"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def operator_name(self) -> str:
        return f"{self.kind.lower()}-controller"

    @property
    def cli_names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def replicas_default(self, rtype: str) -> int:
        return self.default_replicas.get(rtype, 1)

    def canonical_replica_type(self, key: str) -> str | None:
        """The canonical spelling of a replica-type key, matched case-insensitively."""
        for rtype in self.replica_types:
            if rtype.lower() == key.lower():
                return rtype
        return None

    # ---- behaviour that differs -----------------------------------------
    def topology(self, workers: int, **options: int) -> dict[str, int]:
        """Replica counts for ``--workers N`` (and kind options such as --ps)."""
        return {"Worker": workers}

    def master_role(self, replica_types: list[str]) -> str | None:
        """Replica type whose pods get the ``job-role: master`` label (None: index 0 of any type)."""
        return "Master"

    def status_role(self, replica_types: list[str]) -> str:
        """Replica type whose progress is the job's: Running when it runs, Succeeded when it is done."""
        return "Master" if "Master" in replica_types else "Worker"

    def env(self, job: Job, rtype: str, index: int, network: Network) -> list[dict]:
        """The env the operator appends to the wired containers of one replica (contract section 2)."""
        return [PYTHONUNBUFFERED]

    def wired_containers(self, job: Job, rtype: str, containers: list[dict]) -> list[dict]:
        """Containers that receive :meth:`env`: all of them, unless the kind says otherwise."""
        return containers

    def idle_command(self, rtype: str) -> dict | None:
        """For a replica type that only hosts what another replica starts in it, the command (and args)
        its container idles with when its template gives none; None: every replica runs its own."""
        return None

    def succeeded(self, job: Job, rtype: str, counts: dict, observed: list) -> bool:
        """Whether the status role's replicas are done (``expected == 0``)."""
        return job.replicas(rtype) - counts.get("succeeded", 0) <= 0

    # ---- cluster-only wiring (the in-cluster controller; the local backend has no cluster) ----
    #: kinds among :meth:`cluster_objects` that the controller deletes once they are no longer wanted
    pruned_kinds: ClassVar[tuple[str, ...]] = ()

    def cluster_objects(self, job: Job, pods: list[dict]) -> list[dict]:
        """Objects besides pods and services this kind needs in a cluster (created or updated each pass)."""
        return []

    def decorate_pod(self, job: Job, rtype: str, pod: dict, network: Network) -> None:
        """Cluster-only changes to a replica's pod before it is created (volumes, service account)."""

    def __repr__(self) -> str:
        return f"<Framework {self.kind}>"
