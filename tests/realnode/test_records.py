"""Kept records on a real node (issue 26's "done when"): real pods on a real kubelet, the controller running as its
Deployment, the real garbage collector. Logs, results and failure summaries outlive the pods."""

from __future__ import annotations

import importlib
import json

import pytest

from tests.controller.jobs import wait_for
from tests.realnode.conftest import JOB_TIMEOUT_S
from tests.realnode.test_lifecycle import AFTER_THE_WORKER_RAN, objects, pods

pytestmark = pytest.mark.realnode

MODULE = '''\
import os
import time


def both_ranks(scale):
    import torch.distributed as dist

    dist.init_process_group("gloo")  # both ranks run to the end: the job cannot succeed without the worker
    rank = dist.get_rank()
    print("rank", rank, "says hello", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return {"scale": scale, "rank": rank}


def worker_raises():
    if os.environ["RANK"] == "1":
        time.sleep(2)
        raise RuntimeError("worker gave up on purpose")
    time.sleep(120)
'''

# prints while it runs, and says so when it is stopped: its last words are what a delete by hand loses
STOPPABLE = ("import signal, sys, time\n"
             "def stop(*_):\n"
             "    print('got SIGTERM, last words', flush=True)\n"
             "    sys.exit(143)\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             "for step in range(600):\n"
             "    print('step', step, flush=True)\n"
             "    time.sleep(0.5)\n")


def records(real_node, namespace: str) -> list[str]:
    return real_node.kubectl("get", "configmaps", "-n", namespace, "-l", "trainctl.io/record=v1",
                             "-o", "name").stdout.split()


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "realnode_records_module.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)  # the user's project directory: what travels with the functions
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("realnode_records_module")


def test_a_function_jobs_logs_and_result_outlive_its_cleaned_up_pods(real_node, in_cluster_controller, trainctl,
                                                                      namespace, python_image, module):
    from trainctl import Client

    client = Client("kubernetes", kubeconfig=str(real_node.kubeconfig))
    job = client.run(module.both_ranks, args={"scale": 3}, workers=2, image=python_image, namespace=namespace,
                     name="kept", clean_pod_policy="All")
    job.wait(timeout=JOB_TIMEOUT_S, progress=False)
    wait_for(lambda: not objects(real_node, namespace, "pods"), 120, "cleanPodPolicy All to remove the pods")

    logs = trainctl("logs", "kept", "-n", namespace)
    assert logs.returncode == 0, logs.stderr
    assert "master-0 | rank 0 says hello" in logs.stdout and "worker-0 | rank 1 says hello" in logs.stdout, logs.stdout
    assert "(kept record: pod kept-master-0 removed" in logs.stdout, logs.stdout
    assert job.result() == {"scale": 3, "rank": 0}
    status = trainctl("status", "kept", "-n", namespace).stdout
    assert "Completed (pod removed; from the kept record)" in status, status


def test_a_failed_function_jobs_summary_outlives_its_cleaned_up_pods(real_node, in_cluster_controller, trainctl,
                                                                     namespace, python_image, module):
    from trainctl import Client, JobFailed

    client = Client("kubernetes", kubeconfig=str(real_node.kubeconfig))
    job = client.run(module.worker_raises, workers=2, image=python_image, namespace=namespace, name="raised",
                     clean_pod_policy="All")
    with pytest.raises(JobFailed):
        job.wait(timeout=JOB_TIMEOUT_S, progress=False)
    wait_for(lambda: not objects(real_node, namespace, "pods"), 120, "cleanPodPolicy All to remove the pods")

    status = trainctl("status", "raised", "-n", namespace)
    assert status.returncode == 0, status.stderr
    assert "worker-0 raised RuntimeError: worker gave up on purpose" in status.stdout, status.stdout
    assert "| RuntimeError: worker gave up on purpose" in status.stdout, status.stdout  # the traceback's last line
    assert "pod removed; from the kept record" in status.stdout, status.stdout


def test_a_pod_deleted_by_hand_mid_run_keeps_its_log_and_last_words_in_previous(real_node, trainctl, namespace,
                                                                                python_image):
    submitted = trainctl("submit", "pytorch", "--name", "hand", "-n", namespace, "--workers", "1",
                         "--image", python_image, "--", "python3", "-c", STOPPABLE)
    assert submitted.returncode == 0, submitted.stderr
    wait_for(lambda: "step 4" in trainctl("logs", "hand", "-n", namespace).stdout, 180, "the pod to print")
    first = next(p for p in pods(real_node, namespace))["metadata"]["uid"]
    assert real_node.kubectl("delete", "pod", "hand-master-0", "-n", namespace, "--wait=false").returncode == 0

    def replaced_and_running():
        return [p for p in pods(real_node, namespace) if p["metadata"]["uid"] != first
                and (p.get("status") or {}).get("phase") == "Running"]

    wait_for(replaced_and_running, 180, "the controller to replace the deleted pod")
    previous = wait_for(lambda: (out := trainctl("logs", "hand", "-n", namespace, "--previous").stdout)
                        and "kept record" in out and out, 60, "the deleted pod's run in --previous")
    assert "master-0 | step 4" in previous and "master-0 | got SIGTERM, last words" in previous, previous
    assert "as its pod was deleted" in previous, previous


def test_kubectl_delete_of_the_job_leaves_none_of_its_kept_records(real_node, trainctl, namespace, python_image):
    # the master outlives the worker's run (a PyTorchJob ends with its master): both runs end, and are kept
    code = "import os\nprint('rank', os.environ['RANK'], 'done', flush=True)\n" + AFTER_THE_WORKER_RAN
    submitted = trainctl("submit", "pytorch", "--name", "collected", "-n", namespace, "--workers", "2",
                         "--image", python_image, "--", "python3", "-c", code)
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "collected", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    wait_for(lambda: len(records(real_node, namespace)) == 2, 60, "both replicas' runs kept")
    kept = json.loads(real_node.kubectl("get", "configmap", "collected-master-0.trainctl-record", "-n", namespace,
                                        "-o", "json").stdout)
    assert kept["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    assert real_node.kubectl("delete", "pytorchjob", "collected", "-n", namespace).returncode == 0
    wait_for(lambda: not records(real_node, namespace) and not objects(real_node, namespace), 120,
             "the garbage collector to remove the job's pods, services and records")
