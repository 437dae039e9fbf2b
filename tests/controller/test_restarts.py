"""Restarts under the controller, against the real API server with the node fixture as kubelet: the whole job
restarted as its next attempt (old pods gone first), a pod deleted by hand or a DisruptionTarget spending no
budget, the record patched on the job, and a job's checkpoint claim (docs/fault-tolerance.md)."""

from __future__ import annotations

import pytest

from tests.controller.jobs import create, get_job, job, pods, state, wait_for, wait_state
from trainctl.core.restarts import ATTEMPT_LABEL, Record
from trainctl.kube.client import PODS, ApiError, Resource

pytestmark = pytest.mark.k8s
CLAIMS = Resource("", "v1", "persistentvolumeclaims", kind="PersistentVolumeClaim")


@pytest.fixture
def ns(start_controller, managed_namespace):
    start_controller(managed_namespace)
    return managed_namespace


def scoped(name: str, namespace: str, **annotations: str) -> dict:
    body = job("PyTorchJob", name, namespace, {"Master": 1, "Worker": 1}, restart_policy="OnFailure",
               run_policy={"backoffLimit": 0})
    body["metadata"]["annotations"] = {"trainctl.io/restart-scope": "job", **annotations}
    return body


def attempt_pods(rest, namespace: str, name: str, attempt: int) -> dict | None:
    found = pods(rest, namespace, name)
    live = {n: p for n, p in found.items() if not p["metadata"].get("deletionTimestamp")}
    return live if len(found) == 2 and len(live) == 2 and all(
        p["metadata"]["labels"].get(ATTEMPT_LABEL) == str(attempt) and (p.get("status") or {}).get("phase") ==
        "Running" for p in live.values()) else None


def found(rest, name: str, namespace: str) -> dict | None:
    try:
        return rest.get(CLAIMS, name, namespace)
    except ApiError as error:
        assert error.status == 404, error
        return None


def env_of(pod: dict) -> dict:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}


def test_a_killed_replica_restarts_every_pod_as_the_next_attempt(rest, kube_node, ns):
    create(rest, scoped("whole", ns))
    first = wait_for(lambda: attempt_pods(rest, ns, "whole", 0), what="attempt 0")
    assert {p["spec"]["restartPolicy"] for p in first.values()} == {"Never"}  # kubelet restarts nothing in place
    uids = {p["metadata"]["uid"] for p in first.values()}
    kube_node.set_phase(ns, "whole-worker-0", "Failed", exit_code=137, reason="OOMKilled")
    second = wait_for(lambda: attempt_pods(rest, ns, "whole", 1), what="attempt 1")
    assert not uids & {p["metadata"]["uid"] for p in second.values()}  # the healthy master was replaced too
    assert {(env_of(p)["TRAINCTL_RESTART_ATTEMPT"], env_of(p)["TORCHELASTIC_RESTART_COUNT"])
            for p in second.values()} == {("1", "1")}
    resource = get_job(rest, "PyTorchJob", ns, "whole")
    record = Record.of(resource)
    assert (record.attempt, record.counted, record.disruptions) == (1, 0, 1)  # backoffLimit 0 and still running
    assert record.history[0]["cause"] == "worker-0: exit 137, OOMKilled"
    wait_state(rest, "PyTorchJob", ns, "whole", "Running")


def test_a_pod_deleted_by_hand_is_a_disruption(rest, kube_node, ns):
    create(rest, scoped("deleted", ns))
    wait_for(lambda: attempt_pods(rest, ns, "deleted", 0), what="attempt 0")
    rest.delete(PODS, "deleted-worker-0", ns)
    wait_for(lambda: attempt_pods(rest, ns, "deleted", 1), what="attempt 1")
    record = Record.of(get_job(rest, "PyTorchJob", ns, "deleted"))
    assert (record.attempt, record.counted, record.disruptions) == (1, 0, 1)
    # seen terminating, or only once gone (the node fixture confirms a deletion at once)
    assert record.history[0]["cause"] in ("worker-0: its pod was deleted", "worker-0: its pod is gone")


def test_an_exit_the_policy_retries_spends_the_budget(rest, kube_node, ns):
    create(rest, scoped("spent", ns))
    wait_for(lambda: attempt_pods(rest, ns, "spent", 0), what="attempt 0")
    kube_node.set_phase(ns, "spent-worker-0", "Failed", exit_code=3)
    wait_state(rest, "PyTorchJob", ns, "spent", "Failed")  # backoffLimit 0: no restart allowed
    assert "backoff limit" in get_job(rest, "PyTorchJob", ns, "spent")["status"]["conditions"][-1]["message"]
    assert Record.of(get_job(rest, "PyTorchJob", ns, "spent")).attempt == 0


def test_a_job_owns_its_checkpoint_claim_and_every_pod_mounts_it(rest, kube_node, ns):
    create(rest, scoped("claims", ns, **{"trainctl.io/checkpoints": "5Gi"}))
    first = wait_for(lambda: attempt_pods(rest, ns, "claims", 0), what="attempt 0")
    claim = wait_for(lambda: found(rest, "claims-checkpoints", ns), what="the claim")
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("PyTorchJob", "claims", True)
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    for pod in first.values():
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["trainctl-checkpoints"]["persistentVolumeClaim"]["claimName"] == "claims-checkpoints"
        assert env_of(pod)["TRAINCTL_CHECKPOINT_DIR"] == "/trainctl/checkpoints"
    kube_node.set_phase(ns, "claims-worker-0", "Failed", exit_code=143)
    wait_for(lambda: attempt_pods(rest, ns, "claims", 1), what="attempt 1")  # the claim does not stand in the way
    assert state(rest, "PyTorchJob", ns, "claims") in ("Running", "Restarting")
