"""A node lost under the controller (issue 42), against the real API server: a second Node with no kubelet, some of
the jobs' pods bound to it, then its Ready condition set to Unknown, as the node lifecycle controller does when a
kubelet stops heartbeating. With ``trainctl.io/node-lost-after: "2"`` the controller treats those replicas as lost
two seconds later: the job-scope job restarts whole as its next attempt, the replica-scope job replaces the lost
replica alone; the lost pods are deleted with no grace period (nothing would ever confirm a graceful delete: the fake
kubelet confirms only its own node's pods), and backoffLimit 0 is not spent.

One test, one controller, both jobs at once: the controller tier is over its time budget (docs/test-cluster.md)."""

from __future__ import annotations

import json

import pytest

from tests.cluster.kubelet import now
from tests.controller.jobs import create, get_job, job, pods, wait_for
from tests.controller.test_records import kept, runs_of
from trainctl.core.restarts import ATTEMPT_LABEL, Record
from trainctl.kube.client import EVENTS, NODES

pytestmark = pytest.mark.k8s
WAIT_S = 30


def body(name: str, namespace: str, workers: int, scope: str) -> dict:
    resource = job("PyTorchJob", name, namespace, {"Master": 1, "Worker": workers}, restart_policy="OnFailure",
                   run_policy={"backoffLimit": 0})
    resource["metadata"]["annotations"] = {"trainctl.io/restart-scope": scope, "trainctl.io/node-lost-after": "2"}
    return resource


def ready(status: str) -> dict:
    return {"status": {"conditions": [{"type": "Ready", "status": status, "reason": "Test", "message": "test node",
                                       "lastHeartbeatTime": now(), "lastTransitionTime": now()}]}}


def bind(rest, namespace: str, pod: str, node: str) -> None:
    from trainctl.kube.client import PODS

    rest.request("POST", PODS.path(namespace, pod, "binding"),
                 {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                  "target": {"apiVersion": "v1", "kind": "Node", "name": node}})


@pytest.fixture
def second_node(rest, namespace):
    name = f"trainctl-node-2-{namespace}"
    rest.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    rest.patch(NODES, name, ready("True"), subresource="status")
    yield name
    rest.delete(NODES, name)


@pytest.fixture
def released(kube_node, namespace):
    """The fake kubelet stops playing for the namespace before it is deleted (it manages it from mid-test on)."""
    yield namespace
    kube_node.release(namespace)


def live(rest, namespace: str, name: str, count: int) -> dict | None:
    found = pods(rest, namespace, name)
    running = {n: p for n, p in found.items() if not p["metadata"].get("deletionTimestamp")
               and (p.get("status") or {}).get("phase") == "Running"}
    return running if len(found) == count == len(running) else None


def test_a_lost_node_restarts_a_job_scope_job_whole_and_replaces_a_replica_scope_replica(
        rest, kube_node, namespace, released, second_node, start_controller, trainctl):
    start_controller(namespace)
    create(rest, body("whole", namespace, 2, "job"))
    create(rest, body("one", namespace, 1, "replica"))
    lost = {("whole", "whole-master-0"), ("whole", "whole-worker-1"), ("one", "one-worker-0")}
    wait_for(lambda: len(pods(rest, namespace)) == 5, what="the jobs' five pods")
    for _, pod in lost:  # on the second node, before the fake kubelet binds the rest to its own
        bind(rest, namespace, pod, second_node)
        kube_node.set_phase(namespace, pod, "Running")
    kube_node.manage(namespace)
    first = {**wait_for(lambda: live(rest, namespace, "whole", 3), what="whole running"),
             **wait_for(lambda: live(rest, namespace, "one", 2), what="one running")}
    uids = {name: pod["metadata"]["uid"] for name, pod in first.items()}
    assert {name for name, pod in first.items() if pod["spec"]["nodeName"] == second_node} == {p for _, p in lost}

    rest.patch(NODES, second_node, ready("Unknown"), subresource="status")  # its kubelet stopped heartbeating

    # job scope: every replica created again as attempt 1, on the node that is left
    def next_attempt():
        found = live(rest, namespace, "whole", 3)
        return found if found and {p["metadata"]["labels"].get(ATTEMPT_LABEL) for p in found.values()} == {"1"} \
            else None
    second = wait_for(next_attempt, timeout=WAIT_S, what="whole's attempt 1")
    assert not set(uids.values()) & {p["metadata"]["uid"] for p in second.values()}
    assert {p["spec"]["nodeName"] for p in second.values()} == {kube_node.name}
    record = Record.of(get_job(rest, "PyTorchJob", namespace, "whole"))
    assert (record.attempt, record.counted, record.disruptions) == (1, 0, 1)  # backoffLimit 0, unspent
    cause = record.history[-1]["cause"]
    assert cause.startswith(f"node {second_node} became NotReady at ") and cause.endswith(": master-0, worker-1 lost")

    # replica scope: the lost worker alone replaced, the master left running
    replaced = wait_for(lambda: (found := live(rest, namespace, "one", 2)) and
                        found["one-worker-0"]["metadata"]["uid"] != uids["one-worker-0"] and found,
                        timeout=WAIT_S, what="one's worker replaced")
    assert replaced["one-master-0"]["metadata"]["uid"] == uids["one-master-0"]
    record = Record.of(get_job(rest, "PyTorchJob", namespace, "one"))
    assert (record.attempt, record.counted, record.disruptions) == (0, 0, 1)

    events = [e for e in rest.list(EVENTS, namespace)["items"] if e["reason"] == "NodeLost"]
    assert {(e["involvedObject"]["name"], e["message"]) for e in events} == {
        ("whole", cause), ("one", f"{cause.split(': ')[0]}: worker-0 lost")}

    whole = trainctl("status", "whole", "-n", namespace)
    assert whole.returncode == 0, whole.stderr
    assert f"attempt 2 (restarted after {cause}) at " in whole.stdout and ": a disruption, not counted" in whole.stdout
    # the kept record of a lost replica says its last lines could not be kept (its kubelet is gone), and how it was
    record = wait_for(lambda: kept(rest, namespace, "whole").get("whole-worker-1.trainctl-record"),
                      what="whole-worker-1's run kept")
    assert [run["lost"] for run in runs_of(record)] == [
        f"node {second_node} unreachable (NotReady): its last lines not kept"]
    as_json = json.loads(trainctl("status", "whole", "-n", namespace, "-o", "json").stdout)
    assert Record.of(as_json).history[-1]["cause"] == cause  # the record, in the job's trainctl.io/restarts
    one = trainctl("status", "one", "-n", namespace).stdout
    assert f"node {second_node} became NotReady at " in one and "may be stuck in a collective" in one, one
    assert "--restart-scope job" in one
