"""Fuzzing ``trainctl convert``: random v1 jobs of every kind either become TrainJobs that convert back to the
same job (after the operator's defaults), or are refused in one line that names a field; told to drop what v2
cannot say, the command drops exactly the fields it named, each listed on stderr."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from hypothesis import event, given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz, json_documents, run
from tests.unit.test_convert import defaulted
from trainctl.frameworks import ALL

pytestmark = pytest.mark.fuzz

CONVERTIBLE = [framework for framework in ALL if framework.trainer_v2]
COMMANDS = [None, ["python", "train.py"], ["python3", "-m", "pkg.train"], ["python"], ["torchrun", "train.py"],
            ["python", "-m", "torch.distributed.run", "t.py"], ["bash", "-c", "python train.py"],
            ["python", "-c", "print(1)"], ["mpirun", "python", "a.py"]]
NAMES_A_FIELD = re.compile(r"(?:^|[ (:])(?:spec|metadata)[.\[:]|replicated job|TrainingRuntime ")


@st.composite
def containers(draw, framework) -> dict:
    container = {"name": framework.container, "image": draw(st.sampled_from(["train:1", "example.com/t:2"]))}
    optional = {"command": st.sampled_from(COMMANDS),
                "args": st.sampled_from([["--lr", "0.1"], ["t.py"]]),
                "env": st.sampled_from([[{"name": "A", "value": "1"}], [{"name": "B", "value": ""}]]),
                "resources": st.sampled_from([{"limits": {"cpu": "1"}}, {"requests": {"memory": "1Gi"}}]),
                "imagePullPolicy": st.just("Always"), "ports": st.just([{"containerPort": 8080, "name": "http"}])}
    for key, values in optional.items():
        value = draw(st.none() | values)
        if value is not None:
            container[key] = copy.deepcopy(value)
    return container


@st.composite
def replica_specs(draw, framework) -> dict:
    shape = framework.trainer_v2
    # mostly the types v2 has a role for (the nodes', a launcher), sometimes any
    roles = [*shape.node_types, *([shape.launcher_type] if shape.launcher_type else [])]
    types = draw(st.lists(st.sampled_from(roles if draw(st.integers(0, 3)) else framework.replica_types),
                          min_size=1, max_size=3, unique=True))
    shared = draw(containers(framework))
    specs = {}
    for rtype in types:
        single = rtype in framework.leader_types or rtype in framework.unindexed_types
        container = copy.deepcopy(shared) if draw(st.integers(0, 3)) else draw(containers(framework))
        spec = {"replicas": 1 if single else draw(st.integers(1, 4)),
                "template": {"spec": {"containers": [container]}}}
        restart = draw(st.sampled_from([None, "OnFailure", "OnFailure", "OnFailure", "Never", "ExitCode"]))
        if restart:
            spec["restartPolicy"] = restart
        specs[rtype] = spec
    return specs


RUN_POLICY = st.fixed_dictionaries({}, optional={
    "suspend": st.booleans(), "activeDeadlineSeconds": st.integers(1, 10**6),
    "cleanPodPolicy": st.sampled_from(["None", "All", "Running"]), "ttlSecondsAfterFinished": st.integers(0, 100),
    "backoffLimit": st.integers(0, 5), "managedBy": st.sampled_from(["kubeflow.org/training-operator",
                                                                      "kueue.x-k8s.io/multikueue"])})
PROCS = {"nprocPerNode": st.sampled_from(["auto", "1", "2", "cpu"]), "slotsPerWorker": st.integers(1, 3)}


@st.composite
def v1_jobs(draw) -> dict:
    framework = draw(st.sampled_from(CONVERTIBLE))
    spec = {framework.replica_spec_field: draw(replica_specs(framework))}
    run_policy = draw(RUN_POLICY) if not draw(st.integers(0, 2)) else None
    if run_policy:
        spec["runPolicy"] = run_policy
    proc_field = framework.trainer_v2.proc_field
    if proc_field and draw(st.booleans()):
        spec[proc_field] = draw(PROCS[proc_field])
    if "elasticPolicy" in framework.spec_properties and not draw(st.integers(0, 5)):
        spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2}
    metadata = {"name": draw(st.sampled_from(["job", "mnist-2"]))}
    for key, value in (("namespace", "ml"), ("labels", {"team": "nlp"}), ("annotations", {"note": "x"})):
        if draw(st.booleans()):
            metadata[key] = value
    return {"apiVersion": "kubeflow.org/v1", "kind": framework.kind, "metadata": metadata, "spec": spec}


@fuzz(300)
@given(job=v1_jobs())
def test_a_v1_job_converts_and_comes_back_or_a_field_is_named(job):
    with open("job.yaml", "w") as file:
        yaml.safe_dump(job, file)
    there = run("convert", "-f", "job.yaml", "-o", "json")
    if there.code == 2:
        assert NAMES_A_FIELD.search(there.stderr), there.stderr
        if "cannot convert without losing" in there.stderr:
            named = there.stderr.split("without losing ", 1)[1].count("; ") + 1
            lossy = run("convert", "-f", "job.yaml", "--allow-lossy", "-o", "json")
            assert lossy.code == 0 and lossy.stdout, lossy.stderr
            assert sum(line.startswith("dropped: ") for line in lossy.stderr.splitlines()) == named, lossy.stderr
        return
    with open("v2.json", "w") as file:
        file.write(there.stdout)
    assert [document["kind"] for document in json_documents(there)][-1] == "TrainJob"
    back = run("convert", "-f", "v2.json", "--to", "v1", "-o", "json")
    assert back.code == 0, back.stderr
    assert defaulted(json_documents(back)[0]) == defaulted(job)
    event(f"round trip: {job['kind']} on {json_documents(there)[-1]['spec']['runtimeRef']['kind']}")


# ---- v2 documents, damaged ---------------------------------------------------------------------------------

V2_SEEDS = []  # TrainJobs (and runtimes) made by converting a few v1 jobs, filled on first use
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2, 2**40) | st.floats(allow_nan=False)
                      | st.sampled_from(["", "node", "launcher", "trainer", "torch-distributed", "TrainingRuntime",
                                         "OnFailure", "x" * 70, "2.0"]),
                      lambda children: st.lists(children, max_size=2) | st.dictionaries(
                          st.sampled_from(["name", "image", "command", "limits", "numNodes", "templates", "volumeMounts", "x"]), children,
                          max_size=2), max_leaves=4)


def v2_seeds() -> list[list[dict]]:
    if not V2_SEEDS:
        from trainctl.core.convert import convert

        for path in ("mpi", "plain", "wrapped"):
            V2_SEEDS.append(convert([seed_job(path)], "v2", allow_lossy=True).documents)
        V2_SEEDS.append(claiming_seed())
    return V2_SEEDS


def claiming_seed() -> list[dict]:
    """A TrainJob on a runtime whose volume JobSet claims per job (volumeClaimPolicies), mounted by name."""
    from tests.unit.test_convert import sdk_trainjob, tune_runtime

    trainjob = sdk_trainjob(image="i")
    trainjob["spec"]["runtimeRef"]["name"] = "tune-small"
    return [tune_runtime(), trainjob]


def seed_job(which: str) -> dict:
    """A v1 job of each route: an MPI one (launcher and nodes), one on a default runtime, one put under torchrun
    with a TrainingRuntime."""
    from tests.unit.test_convert import plain_job

    if which == "mpi":
        template = {"spec": {"containers": [{"name": "mpi", "image": "i", "command": ["mpirun", "a"]}]}}
        return {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": "m"}, "spec": {
            "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template},
                                "Worker": {"replicas": 2, "template": copy.deepcopy(template)}}}}
    job = plain_job()
    if which == "wrapped":
        for spec in job["spec"]["pytorchReplicaSpecs"].values():
            spec["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Always"
    return job


def paths(node, path=()) -> list[tuple]:
    """Every key path and list position in ``node``."""
    found = [path]
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in children:
        found += paths(value, (*path, key))
    return found


@fuzz(200)
@given(data=st.data())
def test_a_damaged_trainjob_or_runtime_converts_or_is_one_line(data):
    documents = copy.deepcopy(data.draw(st.sampled_from(v2_seeds())))
    target = data.draw(st.sampled_from(paths(documents)[1:]))
    parent = documents
    for key in target[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[target[-1]]
    else:
        parent[target[-1]] = data.draw(VALUES)
    with open("v2.yaml", "w") as file:
        yaml.safe_dump_all(documents, file)
    run("convert", "-f", "v2.yaml", "--allow-lossy", "-o", "json")  # the harness holds it to exit 0, or 2 in one line
