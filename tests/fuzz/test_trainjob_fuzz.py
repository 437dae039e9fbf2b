"""Fuzzing the TrainJob plan (trainctl/core/trainjob.py): whatever the node count, processes per node, resources
and env a TrainJob asks for, its pods are one per rank with distinct names, every rank 0..n-1 exactly once, and
the same rendezvous for all; on an MPI runtime the hostfile names every node pod once, and the launcher's Open MPI
slots are the hostfile's; on JAX and XGBoost the counts are upstream's (nodes; nodes x GPUs)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.fuzz.harness import bounded, fuzz
from trainctl.core.trainjob import TrainJob, plan

pytestmark = pytest.mark.fuzz

RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"
TORCH = yaml.safe_load((RUNTIMES / "torch_distributed.yaml").read_text())
MPI = yaml.safe_load((RUNTIMES / "deepspeed_distributed.yaml").read_text())
JAX = yaml.safe_load((RUNTIMES / "jax_distributed.yaml").read_text())
XGBOOST = yaml.safe_load((RUNTIMES / "xgboost_distributed.yaml").read_text())
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


def mpi_plan(name: str, nodes: int, procs: int | None, gpus: int | None):
    """The plan of a TrainJob on upstream's deepspeed-distributed runtime."""
    trainer = {"numNodes": nodes}
    if procs is not None:
        trainer["numProcPerNode"] = procs
    if gpus is not None:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": gpus}}
    return plan(trainjob(name, "deepspeed-distributed", trainer), MPI)


@fuzz(100)
@given(name=names, nodes=st.integers(1, 24), procs=st.one_of(st.none(), st.integers(1, 16)),
       gpus=st.one_of(st.none(), st.integers(1, 8)))
def test_the_hostfile_names_every_node_pod_once(name, nodes, procs, gpus):
    job_plan = mpi_plan(name, nodes, procs, gpus)
    lines = job_plan.files["launcher"]["/etc/mpi/hostfile"].splitlines()
    hosts = [line.split()[0] for line in lines]
    assert sorted(hosts) == sorted(f"{pod.name}.{name}" for pod in job_plan.pods)  # every pod, launcher too
    assert len(job_plan.pods) == max(nodes - 1, 1) + 1
    slots = procs or (gpus if gpus and gpus > 1 else 1)
    assert {line.split()[1] for line in lines} == {f"slots={slots}"}


@fuzz(100)
@given(name=names, nodes=st.integers(1, 24), gpus=st.one_of(st.none(), st.integers(1, 8)), env=envs,
       as_float=st.booleans())
def test_jax_and_xgboost_count_what_the_trainjob_asks_for(name, nodes, gpus, env, as_float):
    """jax.go: JAX_NUM_PROCESSES the nodes, JAX_PROCESS_ID each rank once, one coordinator; xgboost.go:
    DMLC_NUM_WORKER nodes x GPUs per node (1 without GPUs), DMLC_TASK_ID each rank once, one tracker."""
    trainer = {"numNodes": float(nodes) if as_float else nodes, "env": env}
    if gpus is not None:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": gpus}}
    jax = [pod.environment() for pod in plan(trainjob(name, "jax-distributed", trainer), JAX).pods]
    xgb = [pod.environment() for pod in plan(trainjob(name, "xgboost-distributed", trainer), XGBOOST).pods]
    assert {found["JAX_NUM_PROCESSES"] for found in jax} == {str(nodes)}
    assert sorted(int(found["JAX_PROCESS_ID"]) for found in jax) == list(range(nodes))
    assert {found["JAX_COORDINATOR_ADDRESS"] for found in jax} == {f"{name}-node-0-0.{name}:29500"}
    assert {found["DMLC_NUM_WORKER"] for found in xgb} == {str(nodes * (gpus or 1))}
    assert sorted(int(found["DMLC_TASK_ID"]) for found in xgb) == list(range(nodes))
    assert {(found["DMLC_TRACKER_URI"], found["DMLC_TRACKER_PORT"]) for found in xgb} == {
        (f"{name}-node-0-0.{name}", "29500")}
    for found in jax + xgb:
        assert {item["name"]: item["value"] for item in env}.items() <= found.items()


@fuzz(100)
@given(name=names, nodes=st.integers(1, 24), procs=st.one_of(st.none(), st.integers(1, 16)),
       gpus=st.one_of(st.none(), st.integers(1, 8)))
def test_mpi_slots_agree_between_the_launchers_env_and_the_hostfile(name, nodes, procs, gpus):
    """mpi.go: only the launcher gets OMPI_MCA_*; its default slots are each hostfile line's."""
    job_plan = mpi_plan(name, nodes, procs, gpus)
    slots = {line.split()[1] for line in job_plan.files["launcher"]["/etc/mpi/hostfile"].splitlines()}
    for pod in job_plan.pods:
        found = pod.environment()
        ompi = {key for key in found if key.startswith("OMPI_MCA_")}
        if pod.replicated_job == "launcher":
            assert {f"slots={found['OMPI_MCA_orte_set_default_slots']}"} == slots
            assert found["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        else:
            assert ompi == set()


# ---- a TrainJob document of any shape: refused in one line, in bounded time and memory, or planned -------------

DOCUMENT_PATHS = ["apiVersion", "kind", "metadata", "metadata.name", "metadata.namespace", "metadata.labels",
                  "metadata.annotations", "spec", "spec.runtimeRef", "spec.runtimeRef.name", "spec.runtimeRef.kind",
                  "spec.trainer", "spec.trainer.numNodes", "spec.trainer.numNode", "spec.trainer.numProcPerNode",
                  "spec.trainer.image", "spec.trainer.command", "spec.trainer.args", "spec.trainer.env",
                  "spec.trainer.resourcesPerNode", "spec.trainer.resourcesPerNode.limits", "spec.initializer",
                  "spec.initializer.dataset", "spec.runtimePatches", "spec.managedBy", "spec.suspend",
                  "spec.activeDeadlineSeconds"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from([0, -1, 1, 2, 255, 257, 10**9, 2**31, 2**63]),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
                    st.sampled_from(["\x00", "\x1b[2J", "A=B", "1X", "$(whoami)", "500m", "lots", "-1", "auto",
                                     "kueue.x-k8s.io/multikueue", "torch-distributed", "python"]),
                    st.integers(0, 300_000).map(lambda size: "x" * size))
any_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=8) | st.sampled_from(
                                                               ["name", "value", "cpu", "limits", "nvidia.com/gpu"]),
                                                               inner, max_size=4)), max_leaves=12)
MEGABYTE = 1 << 20


def valid_trainjob() -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 2, "command": ["python", "train.py"]}}}


def change(document: dict, path: str, value) -> None:
    """``document`` with ``value`` at ``path``, each mapping on the way made where a value of another type was."""
    node = document
    *parents, last = path.split(".")
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[last] = value


@fuzz(150)
@given(changes=st.lists(st.tuples(st.sampled_from(DOCUMENT_PATHS), any_values), min_size=1, max_size=3))
def test_no_trainjob_document_takes_more_than_a_second_or_200_mb_before_its_refusal(changes):
    """validate() and then the local backend's dry run (what apply, submit and Client.submit do): a TrainJob is
    refused in one line, or planned; either within a second of CPU and 200 MB, whatever its types and sizes."""
    import time
    import tracemalloc

    from trainctl.core.validation import validate
    from trainctl.errors import UserError
    from trainctl.sdk.client import Client

    document = valid_trainjob()
    for path, value in changes:
        change(document, path, value)
    tracemalloc.start()
    started = time.process_time()
    try:
        with bounded(cpu_seconds=5):  # a hang fails here, not after it
            Client(backend="local").submit(validate(document), preflight=False, dry_run=True)
    except UserError as refused:
        assert len(refused.message.splitlines()) == 1, refused.message
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.process_time() - started < 1 and peak < 200 * MEGABYTE, (time.process_time() - started, peak)

