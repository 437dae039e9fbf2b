"""A TrainJob's runtime is the one its ``runtimeRef`` names, never one its author wrote in (issue 55, Trust): the
controller keeps the runtime it found in a ConfigMap it owns, runs on that, and puts back a
``trainctl.io/runtime-snapshot`` annotation someone else wrote, with a Warning event. The node fixture plays kubelet."""

from __future__ import annotations

import json

import pytest

from tests.controller.jobs import wait_for
from tests.controller.test_trainjobs import TRAINJOBS, ns, running, sdk_body, torch_runtime  # noqa: F401  (ns: a fixture)
from trainctl.kube.client import CONFIGMAPS, EVENTS

pytestmark = pytest.mark.k8s
SNAPSHOT = "trainctl.io/runtime-snapshot"


def node_container(runtime_or_pod: dict) -> dict:
    spec = runtime_or_pod["spec"]
    if "template" in spec:  # a runtime: its first replicatedJob's pod template
        spec = spec["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "node")


def forged(trainctl) -> str:
    """The admin's torch-distributed with another image and an env of its own, as a TrainJob's author could write it."""
    runtime = torch_runtime(trainctl)
    node_container(runtime).update(image="forged.example/evil:1", env=[{"name": "FORGED", "value": "yes"}])
    return json.dumps(runtime)


def test_a_trainjob_runs_on_the_admins_runtime_whatever_snapshot_annotation_it_carries(rest, kube_node, ns, trainctl):
    admin_image = node_container(torch_runtime(trainctl))["image"]
    body = sdk_body("forged", ns)
    body["metadata"]["annotations"] = {SNAPSHOT: forged(trainctl)}
    uid = rest.create(TRAINJOBS, body, ns)["metadata"]["uid"]
    for pod in running(rest, ns, "forged").values():
        node = node_container(pod)
        assert node["image"] == admin_image and "FORGED" not in {e["name"] for e in node["env"]}, node
    kept = rest.get(CONFIGMAPS, "forged-runtime-snapshot", ns)  # the controller's own copy, owned by the TrainJob
    owner = kept["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainJob", uid, True)
    assert json.loads(kept["data"]["runtime"])["metadata"]["name"] == "torch-distributed"
    annotations = rest.get(TRAINJOBS, "forged", ns)["metadata"]["annotations"]
    assert annotations[SNAPSHOT] == kept["data"]["runtime"]  # the forged one was replaced
    warnings = wait_for(lambda: [e for e in rest.list(EVENTS, ns, field_selector="involvedObject.name=forged")["items"]
                                 if e["reason"] == "RuntimeSnapshotReplaced"], what="the Warning event")
    assert warnings[0]["type"] == "Warning" and "torch-distributed" in warnings[0]["message"], warnings

    # written again once the job runs: put back again, and the pods stay the admin's
    rest.patch(TRAINJOBS, "forged", {"metadata": {"annotations": {SNAPSHOT: forged(trainctl)}}}, ns)
    wait_for(lambda: rest.get(TRAINJOBS, "forged", ns)["metadata"]["annotations"][SNAPSHOT] == kept["data"]["runtime"],
             what="the controller's snapshot put back")
    assert rest.get(CONFIGMAPS, "forged-runtime-snapshot", ns)["data"] == kept["data"]
