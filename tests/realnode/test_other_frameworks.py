"""XGBoostJob, PaddleJob and JAXJob train in real pods (issue 33): the part of the contract only pods
exercise, where replicas find each other through the services' DNS names and the kind's env
(XGBoost's MASTER_ADDR/PORT for the tracker, Paddle's PADDLE_MASTER for paddle.distributed.launch,
JAX's COORDINATOR_ADDRESS for jax.distributed.initialize).

Two tests per kind, in the ``python-frameworks`` image (tests/cluster/images.py), which the node
imports only when these tests first ask for it:

* trainctl's training, on a pod of each of the kind's replica types where it has two (XGBoost and
  Paddle: Master and Worker; JAX: two Workers): the training script ships with the job (trainctl's
  code snapshot, not the copy in the image) and each rank reports its collective's result; every rank
  must agree.
* the upstream example from ../shared/kubeflow-v1/examples, as a user applies it with kubectl, with
  only what a local image needs changed: the image, its pull policy (nothing can be pulled here),
  the command, and the namespace (each test has its own).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.controller.jobs import wait_for
from tests.realnode.conftest import JOB_TIMEOUT_S
from tests.realnode.test_training import results

pytestmark = pytest.mark.realnode


def submit_shipped_example(trainctl, tmp_path, kind: str, name: str, namespace: str, image: str,
                           script: str, launcher: tuple[str, ...] = ()) -> list[dict]:
    """Submit examples/``script`` from a project directory holding it and examples/result.py (so the
    code travels with the job) on 2 workers; wait for success and return the ranks' result lines."""
    (tmp_path / script).parent.mkdir(parents=True)
    shutil.copy(REPO / "examples" / script, tmp_path / script)
    shutil.copy(REPO / "examples" / "result.py", tmp_path / "result.py")
    project = dataclasses.replace(trainctl, cwd=tmp_path)
    submitted = project("submit", kind, "--name", name, "-n", namespace, "--workers", "2", "--image", image,
                        "--", "python3", *launcher, script)
    assert submitted.returncode == 0, submitted.stderr
    return agreed_results(project, name, namespace)


def agreed_results(project, name: str, namespace: str) -> list[dict]:
    """Once the job succeeded, the result lines of its two ranks, which must agree."""
    waited = project("wait", name, "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    logs = project("logs", name, "-n", namespace)
    assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
    found = results(logs.stdout)
    assert sorted(record["rank"] for record in found) == [0, 1], logs.stdout
    assert {record["world_size"] for record in found} == {2}
    assert {record["allreduce_sum"] for record in found} == {3.0}  # 1 + 2, summed across the two pods
    assert len({record["model_hash"] for record in found}) == 1  # the collective kept the replicas equal
    return found


def pod_env(real_node, namespace: str) -> dict[str, dict[str, str]]:
    """Each pod's main-container env, by pod name."""
    pods = json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    return {pod["metadata"]["name"]: {env["name"]: env.get("value", "") for env in pod["spec"]["containers"][0]["env"]}
            for pod in pods}


def test_xgboost_job_trains_collectively_with_the_tracker_on_the_master(real_node, trainctl, namespace,
                                                                        frameworks_image, tmp_path):
    submit_shipped_example(trainctl, tmp_path, "xgboost", "xgb", namespace, frameworks_image,
                           "xgboost/train_collective.py")
    env = pod_env(real_node, namespace)
    assert sorted(env) == ["xgb-master-0", "xgb-worker-0"]
    # both reached the tracker through the Master's Service name
    assert {pod["MASTER_ADDR"] for pod in env.values()} == {"xgb-master-0"}
    assert {pod["RANK"] for pod in env.values()} == {"0", "1"}


def test_paddle_job_of_a_master_and_a_worker_trains_through_paddle_distributed_launch(
        real_node, trainctl, namespace, frameworks_image, tmp_path):
    """Both of PaddleJob's replica types, as a user adds a Master: render the job with submit --dry-run, give it
    the Worker's template as its Master, apply it (the code snapshot's ConfigMaps with it). With a Master the
    operator's env is parameter-server mode, from which paddle's launcher starts a server and a trainer in each
    pod; the trainers, one per pod, train together (tests/realnode/paddle_with_master.py says why not the
    parameter server itself)."""
    for source in (REPO / "examples" / "result.py", Path(__file__).with_name("paddle_with_master.py")):
        shutil.copy(source, tmp_path / source.name)
    project = dataclasses.replace(trainctl, cwd=tmp_path)
    rendered = project("submit", "paddle", "--name", "pdl", "-n", namespace, "--workers", "1", "--image",
                       frameworks_image, "--dry-run", "-o", "yaml", "--", "python3", "-m", "paddle.distributed.launch",
                       "paddle_with_master.py")
    assert rendered.returncode == 0, rendered.stderr
    *config_maps, job = yaml.safe_load_all(rendered.stdout)
    assert config_maps, "the code travels with the job"
    specs = job["spec"]["paddleReplicaSpecs"]
    specs["Master"] = copy.deepcopy(specs["Worker"])
    (tmp_path / "pdl.yaml").write_text(yaml.safe_dump_all([*config_maps, job]))
    applied = project("apply", "-f", "pdl.yaml")
    assert applied.returncode == 0, applied.stderr
    found = agreed_results(project, "pdl", namespace)
    assert sorted(record["pod"] for record in found) == ["master", "worker"]  # one trainer in each pod
    env = pod_env(real_node, namespace)
    assert sorted(env) == ["pdl-master-0", "pdl-worker-0"]
    # the Master hosts paddle's rendezvous on its own pod IP, the Worker reaches it through its Service name
    assert env["pdl-master-0"]["PADDLE_MASTER"].startswith("$(POD_IP_DUMMY):")
    assert env["pdl-worker-0"]["PADDLE_MASTER"].partition(":")[0] == "pdl-master-0"
    assert (env["pdl-master-0"]["PADDLE_SERVER_NUM"], env["pdl-worker-0"]["PADDLE_TRAINER_NUM"]) == ("1", "1")


def test_jax_job_trains_with_jax_distributed_initialize(real_node, trainctl, namespace, frameworks_image,
                                                        tmp_path):
    submit_shipped_example(trainctl, tmp_path, "jax", "jx", namespace, frameworks_image,
                           "jax/train_distributed.py")
    env = pod_env(real_node, namespace)
    assert sorted(env) == ["jx-worker-0", "jx-worker-1"]
    assert {pod["COORDINATOR_ADDRESS"] for pod in env.values()} == {"jx-worker-0"}
    assert sorted(pod["PROCESS_ID"] for pod in env.values()) == ["0", "1"]


# --- the upstream examples --------------------------------------------------------------------

UPSTREAM_EXAMPLES = {
    # lightgbm-dist's image runs LightGBM from its arguments; ours runs the XGBoost collective example
    # (which reads only the env, so the upstream arguments stay as they are)
    "xgboost": ("xgboost__lightgbm-dist__xgboostjob_v1_lightgbm_dist_training.yaml",
                ["python3", "/opt/trainctl/examples/xgboost/train_collective.py"]),
    # Debian's python is python3; the arguments (-m paddle.distributed.launch run_check) stay
    "paddle": ("paddlepaddle__simple-cpu.yaml", ["python3"]),
    "jax": ("jax__cpu-demo__demo.yaml", ["python3", "/opt/trainctl/examples/jax/train_distributed.py"]),
}


def localized_upstream_example(upstream, kind: str, namespace: str, image: str) -> dict:
    file_name, command = UPSTREAM_EXAMPLES[kind]
    job = yaml.safe_load((upstream / "examples" / file_name).read_text())
    job["metadata"]["namespace"] = namespace
    for replica in next(iter(job["spec"].values())).values():
        for container in replica["template"]["spec"]["containers"]:
            container.update(image=image, imagePullPolicy="Never", command=command)
    return job


def job_state(real_node, kind: str, name: str, namespace: str) -> str | None:
    got = real_node.kubectl("get", kind, name, "-n", namespace, "-o", "json")
    conditions = json.loads(got.stdout).get("status", {}).get("conditions", []) if got.returncode == 0 else []
    finished = [c["type"] for c in conditions if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"]
    return finished[0] if finished else None


@pytest.mark.parametrize("kind", sorted(UPSTREAM_EXAMPLES))
def test_upstream_example_of_xgboost_paddle_and_jax_reaches_succeeded(real_node, trainctl, upstream, namespace,
                                                                      frameworks_image, tmp_path, kind):
    job = localized_upstream_example(upstream, kind, namespace, frameworks_image)
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    applied = real_node.kubectl("apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    name = job["metadata"]["name"]
    state = wait_for(lambda: job_state(real_node, job["kind"], name, namespace), JOB_TIMEOUT_S, f"{name} to finish",
                     interval=2)
    logs = trainctl("logs", name, "-n", namespace)
    assert state == "Succeeded", logs.stdout + logs.stderr
    pods = json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    replicas = sum(replica["replicas"] for replica in next(iter(job["spec"].values())).values())
    assert len(pods) == replicas and {pod["status"]["phase"] for pod in pods} == {"Succeeded"}
    if kind != "paddle":  # run_check checks the install on each worker; the other two report a collective
        found = results(logs.stdout)
        assert len(found) == replicas and len({record["model_hash"] for record in found}) == 1, logs.stdout
        assert {record["allreduce_sum"] for record in found} == {replicas * (replicas + 1) / 2}
