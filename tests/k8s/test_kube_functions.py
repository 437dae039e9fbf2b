"""Client.run(func) against the real API server: the function travels in the code snapshot, and its
result comes back through the pod's log, whatever the function printed before it (here: a progress bar's
``\r`` on stderr and a line without its newline, issue 23).

There is no kubelet here, so the test plays it for the job's pod, for real: it joins the chunks of
the ConfigMaps the pod's projected volume names, runs the pod's init container command (trainctl's
unpack script) into a scratch workspace, then runs the main container's command there with the
pod's env and no other Python path, and serves what it printed as the pod's log. The function's
sibling module exists only in the snapshot: if it did not travel, the import fails.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest

from tests.k8s.test_kube_backend import kube, play_operator, set_job_condition  # noqa: F401  (the fixture)
from trainctl import Client

pytestmark = pytest.mark.k8s

TRAIN = '''
import os


def train(x):
    import sys

    import scales  # a sibling module: only the snapshot has it in the pod

    print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}, local_rank {os.environ['LOCAL_RANK']}")
    sys.stderr.write("\\rstep 1/2\\rstep 2/2\\r")
    print("epoch done", end="")
    return {"value": x * scales.FACTOR, "cwd": os.getcwd()}
'''


def play_kubelet(k8s_cluster, kube_node, namespace: str, pod_name: str, workspace) -> str:  # noqa: F811
    """Run the pod's init and main containers as local processes; returns what the main one printed (stdout and
    stderr in one log, as the kubelet keeps it)."""
    from kubernetes import client

    core = client.CoreV1Api(k8s_cluster.api_client())
    pod = core.read_namespaced_pod(pod_name, namespace).spec
    chunks = workspace.parent / "chunks"
    chunks.mkdir()
    projected = next(volume.projected for volume in pod.volumes if volume.projected)
    for source in projected.sources:
        data = core.read_namespaced_config_map(source.config_map.name, namespace).binary_data["chunk"]
        (chunks / source.config_map.items[0].path).write_bytes(base64.b64decode(data))
    init, main = pod.init_containers[0], pod.containers[0]
    paths = {main.working_dir: str(workspace), "/trainctl/code-chunks": str(chunks)}
    unpacked = subprocess.run([paths.get(word, word) for word in init.command], capture_output=True, text=True,
                              timeout=60)
    assert unpacked.returncode == 0, unpacked.stderr
    env = {variable.name: variable.value for variable in main.env} | {"PATH": os.environ["PATH"]}
    ran = subprocess.run([sys.executable if main.command[0] == "python3" else main.command[0], *main.command[1:]],
                         cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    printed = ran.stdout.decode()  # bytes first: text mode would turn each \r into a newline
    assert ran.returncode == 0, printed
    kube_node.bind(namespace, pod_name)
    kube_node.write_log(namespace, pod_name, main.name, printed)
    kube_node.set_phase(namespace, pod_name, "Succeeded", exit_code=0)
    return printed


def function_project(tmp_path, monkeypatch, module: str, source: str):
    """The working directory a notebook runs in: ``<module>.py`` holding ``source`` and its sibling ``scales.py``
    (FACTOR = 7), which only the code snapshot brings to the pods; the module, imported from there."""
    import importlib

    project = tmp_path / "project"
    project.mkdir()
    (project / f"{module}.py").write_text(source)
    (project / "scales.py").write_text("FACTOR = 7\n")
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    return importlib.import_module(module)


def test_a_function_runs_from_the_snapshot_and_returns_through_the_log(  # noqa: F811  (kube: the fixture)
        k8s_cluster, kube_node, kube, tmp_path, monkeypatch):
    trainfn = function_project(tmp_path, monkeypatch, "trainfn", TRAIN)
    client = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    job = client.run(trainfn.train, args={"x": 3}, workers=1, name="fn-kube", namespace=kube.namespace)
    assert job.status in ("Pending", "Created")

    [pod] = play_operator(k8s_cluster, kube, "fn-kube", "pytorchjobs")
    workspace = tmp_path / "pod" / "workspace"
    workspace.mkdir(parents=True)
    printed = play_kubelet(k8s_cluster, kube_node, kube.namespace, pod, workspace)
    assert "rank 0 of 1, local_rank 0" in printed and "trainctl-result:v2 " in printed
    set_job_condition(k8s_cluster, kube, "fn-kube", "pytorchjobs", "Succeeded")

    assert job.result(timeout=30) == {"value": 21, "cwd": str(workspace)}
    assert [str(line) for line in job.logs()] == ["master-0 | rank 0 of 1, local_rank 0",
                                                  "master-0 | \rstep 1/2\rstep 2/2\repoch done"]
    job.delete()


def test_compat_queue_name_writes_what_submit_local_queue_writes(k8s_cluster, kube, tmp_path, monkeypatch):
    """Upstream's queue_name= and trainctl's --local-queue: one piece of code, the same two fields on the stored
    job (Kueue's queue label, runPolicy.suspend: true), so neither starts before Kueue admits it."""
    from trainctl.compat import TrainingClient

    (tmp_path / "queuedfn.py").write_text("def train(parameters):\n    print(parameters)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import queuedfn

    compat = TrainingClient(config_file=str(k8s_cluster.kubeconfig("admin")), namespace=kube.namespace)
    compat.create_job(name="compat-queued", train_func=queuedfn.train, parameters={"lr": 1}, queue_name="team-a")
    flag = kube("submit", "pytorch", "--name", "flag-queued", "-n", kube.namespace, "--no-workdir", "--local-queue",
                "team-a", "--", "python", "t.py")
    assert flag.returncode == 0, flag.stderr
    for name in ("compat-queued", "flag-queued"):
        stored = compat.get_job(name)
        assert stored.metadata.labels["kueue.x-k8s.io/queue-name"] == "team-a", name
        assert stored.spec.run_policy.suspend is True, name
