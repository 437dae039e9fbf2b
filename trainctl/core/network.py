"""How replicas address each other: pod DNS names in a cluster, 127.0.0.1 locally.

The per-kind env (MASTER_ADDR, TF_CONFIG, ...) is written once, against a small
interface (:class:`trainctl.frameworks.base.Network`), and these are its two
implementations: the same code yields the operator's exact values in a cluster and
working loopback values for local processes, where every replica listens on its own
free port because they share one host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainctl.core.job import Job
    from trainctl.frameworks.base import HelperImage


@dataclass(frozen=True)
class ClusterNetwork:
    """What the Kubeflow operator writes: pod/service names and the spec's container ports."""

    cluster_domain: str | None = None
    cluster: bool = True
    #: the controller's helper images by HelperImage.key (``--pytorch-init-container-image`` ...); a kind's
    #: default for any not given
    helper_images: Mapping[str, str] = field(default_factory=dict)

    def image(self, helper: HelperImage) -> str:
        return self.helper_images.get(helper.key) or helper.default

    def host(self, job: Job, rtype: str, index: int) -> str:
        return job.pod_name(rtype, index)

    def qualified_host(self, job: Job, rtype: str, index: int) -> str:
        suffix = f".{self.cluster_domain}" if self.cluster_domain else ""
        return f"{job.pod_name(rtype, index)}.{job.namespace}.svc{suffix}"

    def port(self, job: Job, rtype: str, index: int) -> int | None:
        return job.container_port(rtype)

    def pod_ip(self) -> str | None:
        return None


@dataclass(frozen=True)
class LocalNetwork:
    """Every replica on one host: the same address, a distinct allocated port each."""

    ports: dict[tuple[str, int], int] = field(default_factory=dict)
    address: str = "127.0.0.1"
    #: the job's directory: where the files a framework's local replicas read are (Framework.local_files)
    files_dir: str = ""
    cluster: bool = False

    def image(self, helper: HelperImage) -> str:
        return ""  # processes need no init containers: they start in order, and mpirun starts local ranks itself

    def host(self, job: Job, rtype: str, index: int) -> str:
        return self.address

    def qualified_host(self, job: Job, rtype: str, index: int) -> str:
        return self.address

    def port(self, job: Job, rtype: str, index: int) -> int | None:
        return self.ports.get((rtype, index))

    def pod_ip(self) -> str | None:
        return self.address
