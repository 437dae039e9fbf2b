"""The Kubeflow SDK v2's side of tests/k8s/test_sdk_v2.py, run in .venv-upstream-sdk: a notebook's kernel.

The SDK (``kubeflow``, pinned in requirements/upstream-sdk.txt) needs kubernetes<36 and trainctl's tests pin 37,
so this script runs in a virtualenv of its own. Like a notebook it makes one ``TrainerClient`` (Kubernetes backend)
and then runs cells: each line on stdin is a JSON list ``[STEP, ARG...]``, answered by one JSON line on stdout with
what the SDK saw; the test asserts on it. Each step calls the SDK unchanged:

    ["runtimes", NAME]               list_runtimes(), get_runtime(NAME)
    ["train", RUNTIME...]            train(CustomTrainer(...)) on each runtime, then get_job of each and list_jobs()
    ["run", FUNCTION, RUNTIME]       train(CustomTrainer(func=FUNCTION, num_nodes=2)): a function of FUNCTIONS below
    ["job", NAME]                    get_job(NAME)
    ["jobs"]                         list_jobs()
    ["wait", NAME, STATUS, TIMEOUT]  wait_for_job_status(NAME, {STATUS}, TIMEOUT)
    ["finish", NAME, TIMEOUT]        wait_for_job_status(NAME, {"Complete"}), get_job_logs(NAME, step) of each node
                                     step (default step: node-0), delete_job(NAME)
    ["delete", NAME]                 delete_job(NAME)

    python sdk_v2_e2e.py KUBECONFIG NAMESPACE
"""

from __future__ import annotations

import json
import sys

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, TrainerClient

def train_mnist(lr: float, epochs: int) -> None:
    """The notebook's function: the SDK ships its source as the TrainJob's command."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    print(f"rank {dist.get_rank()} lr {lr} epochs {epochs}")


def allreduce_ranks() -> None:
    """A torch all-reduce over every rank (gloo, CPU): each rank prints the sum, 1 + 2 + ... + world size."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    print(f"rank {dist.get_rank()} of {dist.get_world_size()} total {total.item()}", flush=True)
    dist.destroy_process_group()


def raise_on_rank_1() -> None:
    """Rank 1 gives up after joining; rank 0's all-reduce then fails on the connection rank 1's end closed."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        raise ValueError("rank 1 found no shard to train on")
    dist.all_reduce(torch.zeros(1))


FUNCTIONS = {function.__name__: function for function in (allreduce_ranks, raise_on_rank_1)}


def runtime_seen(runtime) -> dict:
    trainer = runtime.trainer
    return {"name": runtime.name, "kind": str(runtime.kind.value), "framework": trainer.framework,
            "type": str(trainer.trainer_type.value), "image": trainer.image, "num_nodes": trainer.num_nodes,
            "device": trainer.device, "device_count": trainer.device_count, "command": list(trainer.command)}


def job_seen(job) -> dict:
    return {"name": job.name, "status": job.status, "num_nodes": job.num_nodes, "runtime": job.runtime.name,
            "steps": [{"name": step.name, "status": step.status, "pod": step.pod_name, "device": step.device,
                       "device_count": step.device_count} for step in job.steps]}


def runtimes(client: TrainerClient, name: str) -> dict:
    return {"listed": sorted((runtime_seen(runtime) for runtime in client.list_runtimes()), key=lambda r: r["name"]),
            "got": runtime_seen(client.get_runtime(name))}


def train(client: TrainerClient, *runtimes: str) -> dict:
    trainer = CustomTrainer(func=train_mnist, func_args={"lr": 0.01, "epochs": 2}, num_nodes=2,
                            resources_per_node={"cpu": 2})
    names = {runtime: client.train(runtime=runtime, trainer=trainer) for runtime in runtimes}
    return {"names": names, "got": [job(client, name) for name in names.values()], "listed": jobs(client)}


def job(client: TrainerClient, name: str) -> dict:
    return job_seen(client.get_job(name))


def jobs(client: TrainerClient) -> list[dict]:
    return sorted((job_seen(job) for job in client.list_jobs()), key=lambda job: job["runtime"])


def run(client: TrainerClient, function: str, runtime: str) -> dict:
    return {"name": client.train(runtime=runtime, trainer=CustomTrainer(func=FUNCTIONS[function], num_nodes=2))}


def wait(client: TrainerClient, name: str, status: str, timeout: int) -> dict:
    return job_seen(client.wait_for_job_status(name, {status}, timeout=timeout, polling_interval=1))


def finish(client: TrainerClient, name: str, timeout: int = 30) -> dict:
    done = wait(client, name, "Complete", timeout)
    logs = list(client.get_job_logs(name))  # the default step, node-0
    steps = {step["name"]: list(client.get_job_logs(name, step=step["name"])) for step in done["steps"]}
    client.delete_job(name)
    return {"status": done["status"], "logs": logs, "steps": steps}


def delete(client: TrainerClient, name: str) -> dict:
    client.delete_job(name)
    return {"deleted": name}


def main(kubeconfig: str, namespace: str) -> None:
    client = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace=namespace))
    steps = {"runtimes": runtimes, "train": train, "run": run, "job": job, "jobs": jobs, "wait": wait,
             "finish": finish, "delete": delete}
    for line in sys.stdin:
        step, *args = json.loads(line)
        print(json.dumps(steps[step](client, *args)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
