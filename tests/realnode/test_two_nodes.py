"""Issue 42 on two real nodes (the ``second_node`` fixture, tests/cluster/second_node.py): collectives sent from
one node to the other, and a job that loses a node mid-run and comes back on the survivor from its last checkpoint.

The replicas are spread over the nodes by a topologySpreadConstraints rule the test sets in the job
(``--set``; topologyKey kubernetes.io/hostname, maxSkew 1). Both nodes are on this machine, so a ``host:``
directory is storage every replica reaches from either node, as shared storage (an NFS volume, a bucket) would
be on a real cluster.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from tests.checkpointed import saved
from tests.cluster import realnode
from tests.cluster.images import EXAMPLES_IN_IMAGE
from tests.cluster.second_node import NODE_NAME as SECOND
from tests.cluster.second_node import spread
from tests.realnode.conftest import JOB_TIMEOUT_S
from tests.realnode.test_restarts import assert_resumed_from_the_last_complete_checkpoint, events, finished, wait_until
from tests.realnode.test_training import results
from trainctl.core.restarts import Record
from trainctl.frameworks.base import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE

pytestmark = pytest.mark.realnode

def pods(real_node, namespace: str) -> list[dict]:
    return json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]


def nodes_of(listed: list[dict], prefix: str = "") -> Counter:
    return Counter(pod["spec"].get("nodeName") for pod in listed if pod["metadata"]["name"].startswith(prefix))


def both_nodes(node_counts: Counter, each: int) -> bool:
    return node_counts == Counter({realnode.NODE_NAME: each, SECOND: each})


def test_pytorch_job_of_four_replicas_on_two_nodes_all_reduces_across_them(real_node, second_node, trainctl,
                                                                           namespace, python_image):
    script = EXAMPLES_IN_IMAGE / "pytorch" / "train_ddp.py"
    submitted = trainctl("submit", "pytorch", "--name", "ddp", "-n", namespace, "--workers", "4",
                         "--image", python_image, *spread("ddp", {"Master": "master", "Worker": "worker"},
                                                          "DoNotSchedule"),
                         "--", "python3", str(script), "--epochs", "1", "--samples", "512")
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "ddp", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    logs = trainctl("logs", "ddp", "-n", namespace)
    assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
    found = results(logs.stdout)
    assert sorted(record["rank"] for record in found) == [0, 1, 2, 3], logs.stdout
    assert [record["allreduce_sum"] for record in found] == [10.0] * 4  # 1 + 2 + 3 + 4, over both nodes
    assert len({record["model_hash"] for record in found}) == 1  # DDP kept the four replicas in step
    assert both_nodes(nodes_of(pods(real_node, namespace)), 2)


def test_mpijob_with_a_worker_on_each_node_all_reduces_across_them(real_node, second_node, trainctl, namespace,
                                                                   python_image):
    script = EXAMPLES_IN_IMAGE / "mpi" / "allreduce.py"
    submitted = trainctl("submit", "mpi", "--name", "mpi", "-n", namespace, "--workers", "2", "--image", python_image,
                         *spread("mpi", {"Worker": "worker"}, "DoNotSchedule"), "--", "python3", str(script))
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "mpi", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    logs = trainctl("logs", "mpi", "-n", namespace)
    assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
    found = results(logs.stdout)  # every rank's line, back through mpirun on the launcher
    assert sorted(record["rank"] for record in found) == [0, 1], logs.stdout
    assert [record["allreduce_sum"] for record in found] == [3.0, 3.0]
    assert len({record["model_hash"] for record in found}) == 1
    assert both_nodes(nodes_of(pods(real_node, namespace), "mpi-worker-"), 1)


@pytest.fixture
def live_second_node(real_node, second_node):
    """The module's second node, or a new one in its place when a test before this one lost it."""
    from tests.cluster import second_node as joining

    return second_node if second_node.alive() else joining.join(real_node)


def submit_spread(trainctl, name: str, namespace: str, image: str, project, storage, when_unsatisfiable: str,
                  *options: str):
    """A 4-replica DDP job of tests/checkpointed.py in job scope, 2 and 2 over the nodes, checkpoints in ``storage``."""
    submitted = trainctl("submit", "pytorch", "--name", name, "-n", namespace, "--workers", "4", "--image", image,
                         "--workdir", str(project), "--restart-scope", "job", "--checkpoints", f"host:{storage}",
                         "-e", "STEP_SECONDS=0.4", "--cpu", "250m", *options,
                         *spread(name, {"Master": "master", "Worker": "worker"}, when_unsatisfiable),
                         "--", "python3", "ddp.py")
    assert submitted.returncode == 0, submitted.stderr
    return storage / namespace / name


def held_record(real_node, namespace: str, name: str) -> Record:
    got = real_node.kubectl("get", "pytorchjob", name, "-n", namespace, "-o", "json")
    return Record.of(json.loads(got.stdout)) if got.returncode == 0 else Record()


FROZEN_S = 180


def test_a_kubelet_frozen_for_three_minutes_while_its_pods_train_restarts_nothing(
        real_node, live_second_node, trainctl, namespace, python_image, project, tmp_path):
    """Issue 56: node 2's kubelet is stopped (SIGSTOP) for three minutes while its pods train on. Its Lease goes
    unrenewed and the node NotReady, for longer than node-lost-after (60 s); the ranks on node 1 keep writing, which
    they could not if the ranks on node 2 had stopped (every step is an all-reduce of all four), so the job is held,
    not restarted, and status says why. The kubelet comes back, the job finishes as its first attempt."""
    directory = submit_spread(trainctl, "frozen", namespace, python_image, project, tmp_path / "ckpt",
                              "DoNotSchedule", "-e", "STEPS=520")  # 0.4 s a step: it runs well past the thaw
    wait_until(lambda: saved(events(directory), 0).count(10) == 4, "checkpoint of step 10 by all four ranks")
    before = pods(real_node, namespace)
    assert both_nodes(nodes_of(before), 2)
    frozen_ranks = sorted(int(pod["metadata"]["labels"][LABEL_REPLICA_INDEX]) +  # master-0 is rank 0, worker-i i+1
                          (pod["metadata"]["labels"][LABEL_REPLICA_TYPE] == "worker")
                          for pod in before if pod["spec"]["nodeName"] == SECOND)
    live_second_node.freeze()
    frozen = time.monotonic()
    try:
        held = told(real_node, lambda: wait_until(
            lambda: (record := held_record(real_node, namespace, "frozen")).held.get("as") == "NotReady" and record,
            "the record's hold of the NotReady node", timeout=FROZEN_S))
        status = trainctl("status", "frozen", "-n", namespace).stdout
        assert f"node {SECOND} NotReady since" in status and "still progressing, not restarted" in status, status
        saved_while_frozen = {rank: saved(events_of(directory, rank), 0) for rank in frozen_ranks}
        while time.monotonic() - frozen < FROZEN_S:  # the kubelet stays frozen for three minutes, whatever happens
            now = pods(real_node, namespace)
            assert {pod["metadata"]["uid"] for pod in now} == {pod["metadata"]["uid"] for pod in before}, now
            assert not any(pod["metadata"].get("deletionTimestamp") for pod in now), now
            time.sleep(2)
        assert held_record(real_node, namespace, "frozen").attempt == 0
    finally:
        live_second_node.thaw()
    for rank in frozen_ranks:  # the frozen node's ranks trained on: they saved steps while it was frozen
        assert len(saved(events_of(directory, rank), 0)) > len(saved_while_frozen[rank]) + 10, events(directory)
    resource = finished(trainctl, namespace, "frozen", directory)
    assert all(f"rank {rank} attempt 0 done step 520" in events(directory) for rank in range(4)), events(directory)
    record = Record.of(resource)
    assert (record.attempt, record.counted, record.disruptions) == (0, 0, 0), record
    assert held.held["node"] == SECOND and record.held.get("until"), record
    assert "NodeLost" not in [event["reason"] for event in job_events(real_node, namespace, "frozen")]
    status = trainctl("status", "frozen", "-n", namespace).stdout
    assert f"node {SECOND} was NotReady from " in status and "kept progressing, not restarted" in status, status


def events_of(directory, rank: int) -> str:
    path = directory / f"events-rank{rank}.log"
    return path.read_text() if path.exists() else ""


def told(real_node, wait):
    """``wait()``; when it fails, with what the controller said of nodes."""
    try:
        return wait()
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{controller_log(real_node)}") from None


def controller_log(real_node) -> str:
    """What the controller said of nodes and node loss (a failed timing assertion's evidence)."""
    text = real_node.kubectl("logs", "deployment/trainctl-controller", "-n", "trainctl-system", "--tail=400").stdout
    return "\n".join(line for line in text.splitlines() if "node" in line.lower())[-6000:]


def job_events(real_node, namespace: str, name: str) -> list[dict]:
    listed = json.loads(real_node.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [event for event in listed if event["involvedObject"].get("name") == name]


@pytest.mark.parametrize("grace_period", ["20s", "40s"])
def test_a_node_lost_mid_run_is_back_on_the_survivor_within_a_minute_with_the_defaults(
        grace_period, real_node, live_second_node, trainctl, namespace, python_image, project, tmp_path):
    """Issue 56, with trainctl's defaults (only --restart-scope job and checkpoints set) and the node controller's grace
    period of this node (20 s) and of upstream (40 s): the second node's kubelet, containerd and pods are killed (its
    link cut first, as a dead machine sends nothing) once a checkpoint exists. Its kubelet's Lease goes unrenewed and
    the ranks on the first node stop at their next all-reduce: the node is lost for the job at once, without waiting
    for its Ready condition or node-lost-after, and every replica runs again on the survivor within 60 s, from the
    last checkpoint every rank completed. ScheduleAnyway: a NotReady node still counts as a topology domain
    (Kubernetes 1.20), so DoNotSchedule would keep the restarted pods Pending; the 2/2 spread before the loss is
    asserted instead."""
    name = f"lost-{grace_period}"
    with real_node.node_monitor_grace_period(grace_period):
        directory = submit_spread(trainctl, name, namespace, python_image, project, tmp_path / "ckpt",
                                  "ScheduleAnyway", "--backoff-limit", "0")
        wait_until(lambda: saved(events(directory), 0).count(20) == 4, "checkpoint of step 20 by all four ranks")
        before = pods(real_node, namespace)
        assert both_nodes(nodes_of(before), 2), [(pod["metadata"]["name"], pod["spec"].get("nodeName"))
                                                 for pod in before]
        first_uids = {pod["metadata"]["uid"] for pod in before}

        lost = live_second_node.lose()

        def running_again() -> list[dict]:
            listed = [pod for pod in pods(real_node, namespace) if pod["metadata"]["uid"] not in first_uids]
            # Succeeded too: the restarted attempt (tests/checkpointed.py) may finish between two looks
            back = len(listed) == 4 and all(pod["status"].get("phase") in ("Running", "Succeeded") for pod in listed)
            return listed if back else []

        placed = told(real_node, lambda: wait_until(running_again, "four replicas running again"))
        back_running = time.time() - lost
        decided = [(event.get("lastTimestamp") or event.get("eventTime"), event["message"])
                   for event in job_events(real_node, namespace, name) if event["reason"] == "NodeLost"]
        print(f"\nnode lost (grace period {grace_period}) at {time.strftime('%H:%M:%S', time.gmtime(lost))} -> "
              f"every replica Running again: {back_running:.1f} s; the controller decided: {decided}")
        assert back_running < 60, controller_log(real_node)
        assert set(nodes_of(placed)) == {realnode.NODE_NAME}  # the survivor took them all

        resource = finished(trainctl, namespace, name, directory)
    step = assert_resumed_from_the_last_complete_checkpoint(directory, ranks=4, every=10)
    assert step >= 20
    record = Record.of(resource)
    assert (record.attempt, record.counted, record.disruptions) == (1, 0, 1), record
    cause = record.history[-1]["cause"]
    assert f"node {SECOND}'s lease not renewed for " in cause and f"on {realnode.NODE_NAME} stalled since" in cause, cause
    assert any(cause in event["message"] for event in job_events(real_node, namespace, name)
               if event["reason"] == "NodeLost")
    status = trainctl("status", name, "-n", namespace).stdout
    assert "attempt 2 (restarted after " in status and SECOND in status, status
    assert "restarts: 0 counted (backoffLimit 0), 1 after disruptions" in status, status
