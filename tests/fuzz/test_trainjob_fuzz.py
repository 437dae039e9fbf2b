"""Fuzzing the TrainJob plan (trainctl/core/trainjob.py): whatever the node count, processes per node, resources
and env a TrainJob asks for, its pods are one per rank with distinct names, every rank 0..n-1 exactly once, and
the same rendezvous for all; on an MPI runtime the hostfile names every node pod once."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.fuzz.harness import fuzz
from trainctl.core.trainjob import TrainJob, plan

pytestmark = pytest.mark.fuzz

RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"
TORCH = yaml.safe_load((RUNTIMES / "torch_distributed.yaml").read_text())
MPI = yaml.safe_load((RUNTIMES / "deepspeed_distributed.yaml").read_text())
RESERVED = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
            "JOB_COMPLETION_INDEX"}

names = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
env_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,12}", fullmatch=True).filter(lambda name: name not in RESERVED)
values = st.text(st.characters(blacklist_characters="$"), max_size=10)  # $(VAR) expansion has its own unit test
envs = st.dictionaries(env_names, values, max_size=5).map(
    lambda found: [{"name": name, "value": value} for name, value in found.items()])
cpus = st.one_of(st.none(), st.integers(1, 64), st.floats(0.001, 64).map(lambda cpu: round(cpu, 3)),
                 st.sampled_from(["250m", "1", "1500m", "3"]))


def trainjob(name: str, runtime: str, trainer: dict) -> TrainJob:
    return TrainJob({"metadata": {"name": name}, "spec": {"runtimeRef": {"name": runtime}, "trainer": trainer}})


@fuzz(150)
@given(name=names, nodes=st.integers(1, 24), procs=st.one_of(st.none(), st.integers(1, 16)), cpu=cpus, env=envs,
       as_float=st.booleans())
def test_every_node_rank_once(name, nodes, procs, cpu, env, as_float):
    trainer = {"numNodes": float(nodes) if as_float else nodes, "env": env}
    if procs is not None:
        trainer["numProcPerNode"] = procs
    if cpu is not None:
        trainer["resourcesPerNode"] = {"requests": {"cpu": cpu}}
    pods = plan(trainjob(name, "torch-distributed", trainer), TORCH).pods
    environments = [pod.environment() for pod in pods]
    assert len({pod.name for pod in pods}) == len(pods) == nodes
    assert sorted(int(found["PET_NODE_RANK"]) for found in environments) == list(range(nodes))
    assert {found["PET_MASTER_ADDR"] for found in environments} == {f"{pods[0].name}.{name}"}
    assert {found["PET_NNODES"] for found in environments} == {str(nodes)}
    per_node = {found["PET_NPROC_PER_NODE"] for found in environments}
    assert len(per_node) == 1 and int(per_node.pop()) >= 1
    if procs is not None:
        assert environments[0]["PET_NPROC_PER_NODE"] == str(procs)
    for found in environments:
        assert {item["name"]: item["value"] for item in env}.items() <= found.items()


@fuzz(100)
@given(name=names, nodes=st.integers(1, 24), procs=st.one_of(st.none(), st.integers(1, 16)),
       gpus=st.one_of(st.none(), st.integers(1, 8)))
def test_the_hostfile_names_every_node_pod_once(name, nodes, procs, gpus):
    trainer = {"numNodes": nodes}
    if procs is not None:
        trainer["numProcPerNode"] = procs
    if gpus is not None:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": gpus}}
    job_plan = plan(trainjob(name, "deepspeed-distributed", trainer), MPI)
    lines = job_plan.files["launcher"]["/etc/mpi/hostfile"].splitlines()
    hosts = [line.split()[0] for line in lines]
    assert sorted(hosts) == sorted(f"{pod.name}.{name}" for pod in job_plan.pods)  # every pod, launcher too
    assert len(job_plan.pods) == max(nodes - 1, 1) + 1
    slots = procs or (gpus if gpus and gpus > 1 else 1)
    assert {line.split()[1] for line in lines} == {f"slots={slots}"}
