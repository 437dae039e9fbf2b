"""``Client.run(func, api="v2")`` on a cluster under trainctl's controller (issue 41, point 4): the function travels
in the code snapshot, which reaches the TrainJob's pods through a runtime patch (its ConfigMaps' volume and the
workspace, mounted into the ``node`` container, whose command unpacks it before it runs the function), and
``result()`` reads rank 0's value back from the pods' logs.

There is no kubelet here, so the test plays it for each pod, for real (as tests/k8s/test_kube_functions.py does
for a v1 job): it joins the chunks of the ConfigMaps the pod's projected volume names, runs the node container's
command with the pod's env (its field references resolved) in a scratch workspace, and serves what it printed as
the pod's log. The function's sibling module exists only in the snapshot: if it did not travel, the import fails."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest

from tests.controller.test_trainjobs import TRAINJOBS, condition, job_pods, ns  # noqa: F401  (ns: a fixture)
from tests.controller.jobs import wait_for
from tests.k8s.test_kube_functions import function_project
from trainctl import Client
from trainctl.backends.kube.code import config_map_names
from trainctl.code import pods as code_pods
from trainctl.kube.client import CONFIGMAPS, PODS
from trainctl.kube.envvars import resolved

pytestmark = pytest.mark.k8s

TRAIN = '''
import os


def train(x):
    import scales  # a sibling module: only the snapshot has it in the pod

    print(f"process {os.environ['JAX_PROCESS_ID']} of {os.environ['JAX_NUM_PROCESSES']}")
    if x < 0:
        raise ValueError(f"negative x on process {os.environ['JAX_PROCESS_ID']}")
    return {"value": x * scales.FACTOR, "process": os.environ["JAX_PROCESS_ID"], "cwd": os.getcwd()}
'''


def run_node(rest, namespace: str, pod: dict, scratch) -> tuple[int, str, str]:
    """Run the pod's node container as a local process: its exit code, what it printed (which becomes its log) and
    its termination message (what it wrote to kubelet's /dev/termination-log)."""
    chunks, workspace, termination = scratch / "chunks", scratch / "workspace", scratch / "termination-log"
    chunks.mkdir(parents=True)
    projected = next(v["projected"] for v in pod["spec"]["volumes"] if v["name"] == code_pods.CHUNKS_VOLUME)
    for source in projected["sources"]:
        data = rest.get(CONFIGMAPS, source["configMap"]["name"], namespace)["binaryData"]["chunk"]
        (chunks / source["configMap"]["items"][0]["path"]).write_bytes(base64.b64decode(data))
    node = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
    mounts = {m["name"]: m["mountPath"] for m in node["volumeMounts"]}
    swap = {mounts[code_pods.CHUNKS_VOLUME]: str(chunks), mounts[code_pods.WORKSPACE_VOLUME]: str(workspace),
            "python3": sys.executable}
    env = resolved(node["env"], pod["metadata"])
    env = {name: value.replace(mounts[code_pods.WORKSPACE_VOLUME], str(workspace)) for name, value in env.items()}
    env.update(PATH=os.environ["PATH"], TRAINCTL_TERMINATION_LOG=str(termination))
    ran = subprocess.run([swap.get(word, word) for word in node["command"]], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    return ran.returncode, ran.stdout.decode(), termination.read_text() if termination.exists() else ""


def play_kubelet(rest, kube_node, namespace: str, pod: dict, scratch) -> str:
    """Run the pod's node container to its success; returns what it printed, now its log."""
    code, printed, _ = run_node(rest, namespace, pod, scratch)
    assert code == 0, printed
    kube_node.write_log(namespace, pod["metadata"]["name"], "node", printed)
    kube_node.set_phase(namespace, pod["metadata"]["name"], "Succeeded", exit_code=0)
    return printed


@pytest.fixture
def run_v2(k8s_cluster, ns, trainctl, tmp_path, monkeypatch):  # noqa: F811  (ns: the fixture)
    """``run_v2(x, name)``: Client.run(train, framework="jax", api="v2", workers=2) on the cluster, from a project
    directory holding the function's module and its sibling."""
    installed = trainctl("runtimes", "install", "jax-distributed")
    assert installed.returncode == 0, installed.stderr
    trainfn2 = function_project(tmp_path, monkeypatch, "trainfn2", TRAIN)
    client = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    return lambda x, name: client.run(trainfn2.train, framework="jax", api="v2", workers=2, args={"x": x},
                                      name=name, namespace=ns)


def test_a_function_runs_from_the_snapshot_in_a_trainjobs_pods_and_returns_rank_0s_value(
        rest, kube_node, ns, run_v2, tmp_path):  # noqa: F811  (ns: the fixture)
    job = run_v2(3, "fnv2")
    assert job.kind == "TrainJob"
    stored = rest.get(TRAINJOBS, "fnv2", ns)
    assert [patch["manager"] for patch in stored["spec"]["runtimePatches"]] == [code_pods.CODE_MANAGER]
    names = config_map_names(stored)
    assert names
    for name in names:  # uploaded before the TrainJob, and owned by it: collected with it
        owners = rest.get(CONFIGMAPS, name, ns)["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"]) for o in owners] == [("TrainJob", "fnv2")]

    found = wait_for(lambda: (pods := job_pods(rest, ns, "fnv2")) and len(pods) == 2 and pods,
                     what="the 2 pods of TrainJob fnv2")
    printed = {}
    for name in sorted(found):
        pod = rest.get(PODS, name, ns)
        assert {code_pods.CHUNKS_VOLUME, code_pods.WORKSPACE_VOLUME} <= {v["name"] for v in pod["spec"]["volumes"]}
        printed[name] = play_kubelet(rest, kube_node, ns, pod, tmp_path / name)
    assert "process 1 of 2" in printed["fnv2-node-0-1"] and "trainctl-result" not in printed["fnv2-node-0-1"]
    result = job.result(timeout=30)
    assert (result["value"], result["process"]) == (21, "0") and result["cwd"].endswith("workspace")

    job.delete()
    wait_for(lambda: rest.list(CONFIGMAPS, ns, code_pods.LABEL_SNAPSHOT)["items"] == [],
             what="the snapshot's ConfigMaps deleted with the TrainJob")


def test_submit_api_v2_sends_the_working_directory_and_its_dry_run_says_so(rest, ns, trainctl, tmp_path):  # noqa: F811
    project = tmp_path / "project"  # not tmp_path itself: the controller's log is there
    project.mkdir()
    (project / "train.py").write_text("print('hi')\n")
    shown = trainctl("submit", "--api", "v2", "pytorch", "--workers", "2", "--workdir", str(project), "--name", "wd",
                     "-n", ns, "--dry-run", "--", "python", "train.py")  # the API server's own dry run
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "# dry run, nothing created: trainjob/wd (2 nodes x 1 process)", lines[:3]
    assert lines[2].startswith("#   travels   1 file, ") and "unpacked into /workspace before the command" in lines[2]
    assert rest.list(TRAINJOBS, ns)["items"] == []
    assert rest.list(CONFIGMAPS, ns, code_pods.LABEL_SNAPSHOT)["items"] == []


def test_a_function_that_raises_fails_the_trainjob_and_the_summary_names_the_rank_and_exception(
        rest, kube_node, ns, run_v2, trainctl, tmp_path):  # noqa: F811  (ns: the fixture)
    job = run_v2(-1, "fnbad")
    wait_for(lambda: len(job_pods(rest, ns, "fnbad")) == 2, what="the 2 pods of TrainJob fnbad")
    pod = rest.get(PODS, "fnbad-node-0-1", ns)
    code, printed, message = run_node(rest, ns, pod, tmp_path / "rank1")
    assert code != 0 and "ValueError: negative x on process 1" in printed, printed
    kube_node.write_log(ns, "fnbad-node-0-1", "node", printed)
    for _ in range(7):  # kubelet restarts it in place (OnFailure, JobSet's default) past the Job's backoffLimit 6
        kube_node.restart(ns, "fnbad-node-0-1", exit_code=code, message=message)
    wait_for(lambda: condition(rest, ns, "fnbad", "Failed"), what="TrainJob fnbad Failed")
    shown = trainctl("status", "fnbad", "-n", ns)
    assert "node-0-1" in shown.stdout and "ValueError: negative x on process 1" in shown.stdout, shown.stdout
