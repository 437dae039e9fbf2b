"""Run policies and deletion with the real garbage collector, and logs through the real kubelet."""

from __future__ import annotations

import json

import pytest

from tests.controller.jobs import wait_for
from tests.realnode.conftest import JOB_TIMEOUT_S
from trainctl.core.restarts import SUCCESS_WAIT_ANNOTATION

pytestmark = pytest.mark.realnode

# Ends on SIGTERM as a well-behaved program does: as a container's PID 1 a Python without a handler ignores it,
# and every deletion waited out the 30 s grace period for the kubelet's SIGKILL
SLEEPER = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)); "
           "print('started', flush=True); time.sleep(600)")


# Appended to a Master + 1 Worker PyTorchJob's code: the master ends only once the worker has run (a PyTorchJob ends
# with its master, and a worker whose master ended first may never start: its init container waits for the master's
# name). The worker connects to MASTER_PORT as its last act; the master waits for that connection to close. It
# replaced a fixed sleep of the master (20 s, 30 s) that was only meant to outlast the worker's run.
AFTER_THE_WORKER_RAN = """
import os, socket, time
address = (os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']))
if os.environ['RANK'] == '0':
    with socket.create_server(('', address[1])) as server:
        server.settimeout(300)
        connection = server.accept()[0]
        connection.settimeout(300)
        connection.recv(1)
else:
    deadline = time.monotonic() + 300
    while True:
        try:
            socket.create_connection(address, timeout=5).close()
            break
        except OSError:  # the master is not listening yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
"""


def objects(real_node, namespace: str, kinds: str = "pods,services,configmaps") -> list[str]:
    """The job's objects left in ``namespace`` (the namespace's own kube-root-ca.crt ConfigMap aside)."""
    listed = real_node.kubectl("get", kinds, "-n", namespace, "-o", "name").stdout.split()
    return [name for name in listed if name != "configmap/kube-root-ca.crt"]


def pods(real_node, namespace: str) -> list[dict]:
    return json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]


def running(real_node, namespace: str, count: int):
    return lambda: [p for p in pods(real_node, namespace) if (p.get("status") or {}).get("phase") == "Running"
                    and not p["metadata"].get("deletionTimestamp")][count - 1:] and True


def test_delete_leaves_no_pod_service_or_configmap(real_node, trainctl, namespace, python_image):
    submitted = trainctl("submit", "pytorch", "--name", "gone", "-n", namespace, "--workers", "2",
                         "--image", python_image, "--", "python3", "-c", SLEEPER)
    assert submitted.returncode == 0, submitted.stderr
    wait_for(running(real_node, namespace, 2), 120, "both replicas Running")
    assert any(name.startswith("service/") for name in objects(real_node, namespace))
    deleted = trainctl("delete", "gone", "-n", namespace)
    assert deleted.returncode == 0, deleted.stderr
    wait_for(lambda: not objects(real_node, namespace), 120, "the garbage collector to remove the job's objects")


def test_clean_pod_policy_all_removes_pods_when_the_job_ends(real_node, trainctl, namespace, python_image):
    # success-wait 0: the worker's pod waits for the master's Service, which resolves no more once the master is
    # done, so the job's success would wait its 60 s for a worker that never runs (docs/fault-tolerance.md)
    submitted = trainctl("submit", "pytorch", "--name", "clean", "-n", namespace, "--workers", "2",
                         "--clean-pod-policy", "All", "--annotation", f"{SUCCESS_WAIT_ANNOTATION}=0",
                         "--image", python_image, "--", "python3", "-c", "print('done')")
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "clean", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    wait_for(lambda: not objects(real_node, namespace, "pods"), 120, "cleanPodPolicy All to remove the pods")
    assert trainctl("status", "clean", "-n", namespace).returncode == 0  # the job itself stays


def test_ttl_after_finished_deletes_the_job_and_everything_it_owns(real_node, trainctl, namespace, python_image):
    submitted = trainctl("submit", "pytorch", "--name", "ttl", "-n", namespace, "--workers", "2",
                         "--ttl-after-finished", "2", "--annotation", f"{SUCCESS_WAIT_ANNOTATION}=0",  # as above
                         "--image", python_image, "--", "python3", "-c", "print('done')")
    assert submitted.returncode == 0, submitted.stderr
    wait_for(lambda: real_node.kubectl("get", "pytorchjob", "ttl", "-n", namespace).returncode != 0, 180,
             "the TTL to delete the job")
    wait_for(lambda: not objects(real_node, namespace), 120, "the garbage collector to remove the job's objects")


def test_suspend_stops_the_pods_and_resume_starts_them_again(real_node, trainctl, namespace, python_image):
    submitted = trainctl("submit", "pytorch", "--name", "pause", "-n", namespace, "--workers", "2",
                         "--image", python_image, "--", "python3", "-c", SLEEPER)
    assert submitted.returncode == 0, submitted.stderr
    wait_for(running(real_node, namespace, 2), 120, "both replicas Running")
    assert trainctl("suspend", "pause", "-n", namespace).returncode == 0
    wait_for(lambda: not objects(real_node, namespace, "pods"), 120, "suspend to remove the pods")
    assert "Suspended" in trainctl("status", "pause", "-n", namespace).stdout
    assert trainctl("resume", "pause", "-n", namespace).returncode == 0
    wait_for(running(real_node, namespace, 2), 120, "both replicas Running again after resume")


def test_logs_follow_started_before_the_pods_exist(real_node, trainctl, namespace, python_image):
    code = ("import os\nfor step in range(3): print('rank', os.environ['RANK'], 'step', step, flush=True)\n"
            + AFTER_THE_WORKER_RAN)
    submitted = trainctl("submit", "pytorch", "--name", "follow", "-n", namespace, "--workers", "2", "--suspend",
                         "--image", python_image, "--", "python3", "-c", code)
    assert submitted.returncode == 0, submitted.stderr
    follower = trainctl.popen("logs", "-f", "follow", "-n", namespace)
    try:
        assert not objects(real_node, namespace, "pods")  # it starts following a job without pods
        assert trainctl("resume", "follow", "-n", namespace).returncode == 0
        stdout, stderr = follower.communicate(timeout=JOB_TIMEOUT_S)
    finally:
        follower.kill()
    assert follower.returncode == 0, stderr
    for rank in ("0", "1"):
        assert f"rank {rank} step 2" in stdout, stdout


def test_logs_previous_after_a_real_restart(real_node, trainctl, namespace, python_image):
    # the first run fails after a second; the next runs long enough to be read while it runs (a 1 s run could end
    # between the two reads on a busy machine, and both would then show it). /dev/shm is the pod's emptyDir
    # (--shm-size): it outlives the container's restarts.
    code = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
            "first = not os.path.exists('/dev/shm/ran')\n"
            "open('/dev/shm/ran', 'w').close()\n"
            "print('run started at', time.time_ns(), flush=True)\n"
            "time.sleep(1 if first else 120)\n"
            "sys.exit(5)\n")
    submitted = trainctl("submit", "pytorch", "--name", "again", "-n", namespace, "--workers", "1",
                         "--restart-policy", "OnFailure", "--backoff-limit", "5", "--image", python_image,
                         "--shm-size", "16Mi", "--", "python3", "-c", code)
    assert submitted.returncode == 0, submitted.stderr

    def restarted_and_running():
        return any(s.get("restartCount", 0) >= 1 and "running" in (s.get("state") or {})
                   for p in pods(real_node, namespace) for s in (p.get("status") or {}).get("containerStatuses") or [])

    wait_for(restarted_and_running, 120, "the kubelet to restart the container", interval=0.2)

    def started_at(output: str) -> int:
        return int(next(line for line in output.splitlines() if "run started at" in line).split()[-1])

    previous = trainctl("logs", "again", "-n", namespace, "--previous")
    current = trainctl("logs", "again", "-n", namespace)
    assert previous.returncode == 0 and current.returncode == 0, previous.stderr + current.stderr
    assert started_at(previous.stdout) < started_at(current.stdout), (previous.stdout, current.stdout)
