"""mlPolicy.torch: torchrun's PET_* variables (upstream pkg/runtime/framework/plugins/torch/torch.go).

Every node pod runs the TrainJob's command (torchrun reads the rest from PET_*): the node count, the processes per
node (the TrainJob's numProcPerNode, else "auto" where a node has GPUs, else its CPUs rounded up, at least 1), the
node's rank (its completion index) and where rank 0 listens (``<job>-node-0-0.<job>:29500``); the same into the
containers the runtime's ``torch.envInjection`` names (sidecars, init containers).
torchtune's command rewriting (``tune run``) is not mirrored: trainctl runs no torchtune runtime.
"""

from __future__ import annotations

from trainctl.frameworks.policies.base import TRAINER_PORT, Info, Policy, cpus, gpus, index_env, upsert_env
from trainctl.frameworks.policies.base import upsert_port, value_env

NNODES, NPROC_PER_NODE, NODE_RANK = "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK"
MASTER_ADDR, MASTER_PORT = "PET_MASTER_ADDR", "PET_MASTER_PORT"


def processes_per_node(info: Info) -> str:
    """numProcPerNode: the TrainJob's, else "auto" on GPU nodes, else the node's CPUs (at least 1)."""
    asked = (info.trainer or {}).get("numProcPerNode")
    if asked is not None:
        return str(asked)
    resources = info.resources_per_node()
    return "auto" if gpus(resources) else str(max(1, cpus(resources)))


class Torch(Policy):
    key = "torch"
    reserved_env = frozenset({NNODES, NPROC_PER_NODE, NODE_RANK, MASTER_ADDR, MASTER_PORT})

    def problems(self, info: Info) -> list[str]:
        return super().problems(info) + [f"the runtime's torch.envInjection names container {name!r} of "
                                         f"replicatedJob {job!r}, which its template lacks"
                                         for job, name in injection_targets(info.section) if not target(info, job, name)]

    def enforce(self, info: Info) -> None:
        info.set_trainer_count()
        pet = [value_env(NNODES, info.trainer_count()), value_env(NPROC_PER_NODE, processes_per_node(info)),
               index_env(NODE_RANK)]
        rendezvous = [value_env(MASTER_ADDR, info.addresses.rank0()),
                      value_env(MASTER_PORT, info.addresses.rank0_port())]
        container = info.trainer_container()
        if container is not None:
            info.upsert_trainer_env()
            upsert_env(container.setdefault("env", []), *pet)
            upsert_env(container["env"], *rendezvous)
            upsert_port(container.setdefault("ports", []), TRAINER_PORT)
        for job, name in injection_targets(info.section):  # envInjection (v2.3): sidecars and init containers too
            upsert_env(target(info, job, name).setdefault("env", []), *pet, *rendezvous)


def injection_targets(section: dict) -> list[tuple[str, str]]:
    """torch.envInjection.targets as (replicatedJob, container) pairs."""
    return [(entry.get("jobName", ""), name) for entry in (section.get("envInjection") or {}).get("targets") or []
            for name in entry.get("containerNames") or []]


def target(info: Info, job: str, name: str) -> dict | None:
    pod_set = info.by_name(job)
    return pod_set.any_container(name) if pod_set else None


POLICY = Torch()
