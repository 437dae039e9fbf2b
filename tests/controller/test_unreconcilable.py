"""Specs that pass the CRD schema but that the controller cannot reconcile, and numbers at the edge of
their format: the job fails once with a Warning event, or runs; the controller never loops on it."""

from __future__ import annotations

import time

import pytest

from tests.controller.jobs import create, get_job, job, pods, wait_for, wait_state
from trainctl.kube.client import EVENTS, ApiError

pytestmark = pytest.mark.k8s
QUIET_S = 3  # time a retry loop (50 ms back-off, doubling) would have to show itself


@pytest.fixture
def controller(start_controller, managed_namespace):
    return start_controller(managed_namespace)


def warnings(rest, namespace, name):
    items = rest.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")["items"]
    return [(e["reason"], e["message"]) for e in items if e["type"] == "Warning"]


def launcher_without_containers(namespace):
    body = job("MPIJob", "no-launcher", namespace, {"Launcher": 1, "Worker": 1})
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"] = []
    return body


def port_out_of_range(namespace):  # the pod API rejects it (422) on every create
    body = job("PyTorchJob", "bad-port", namespace, {"Master": 1, "Worker": 1})
    for spec in body["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["ports"] = [{"name": "pytorchjob-port", "containerPort": 70000}]
    return body


@pytest.mark.parametrize("make", [launcher_without_containers, port_out_of_range])
def test_a_spec_it_cannot_reconcile_fails_the_job_once_with_a_warning(rest, controller, managed_namespace, make):
    ns, body = managed_namespace, make(managed_namespace)
    kind, name = body["kind"], body["metadata"]["name"]
    create(rest, body)  # straight to the API server, as kubectl apply would: no trainctl validation
    wait_state(rest, kind, ns, name, "Failed")
    failed = next(c for c in get_job(rest, kind, ns, name)["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == f"{kind}FailedValidation"
    assert f"{kind} {name} cannot be reconciled: " in failed["message"]
    wait_for(lambda: any(r == f"{kind}FailedValidation" for r, _ in warnings(rest, ns, name)), what="the event")
    time.sleep(QUIET_S)
    assert [r for r, _ in warnings(rest, ns, name)].count(f"{kind}FailedValidation") == 1
    assert controller.log().count("cannot reconcile the job") == 1, controller.log()
    assert controller.log().count("Traceback") <= 1
    assert not [p for p in pods(rest, ns, name).values() if p["status"].get("phase") == "Running"]


def test_a_deadline_past_year_9999_is_reconciled_like_any_other(rest, controller, managed_namespace):
    """activeDeadlineSeconds is an int64: 300000000000 is valid (9500 years) and overflowed datetime."""
    ns = managed_namespace
    create(rest, job("PyTorchJob", "patient", ns, {"Master": 1, "Worker": 1},
                     run_policy={"activeDeadlineSeconds": 300000000000}))
    wait_state(rest, "PyTorchJob", ns, "patient", "Running")
    assert set(pods(rest, ns, "patient")) == {"patient-master-0", "patient-worker-0"}
    assert "Traceback" not in controller.log() and "cannot reconcile" not in controller.log()


@pytest.mark.parametrize("run_policy, problem", [
    ({"ttlSecondsAfterFinished": 300000000000}, "less than or equal to 2147483647"),
    ({"backoffLimit": -2**31 - 1}, "greater than or equal to -2147483648"),
    ({"activeDeadlineSeconds": 2**63}, "must be of type integer"),
    ({"managedBy": "kueue.x-k8s.io/other-controller"}, 'Unsupported value: "kueue.x-k8s.io/other-controller"'),
])
def test_the_crds_reject_what_upstreams_formats_and_webhooks_reject(rest, kubeflow_crds, namespace, run_policy,
                                                                     problem):
    with pytest.raises(ApiError) as rejected:
        create(rest, job("PyTorchJob", "edge", namespace, {"Master": 1}, run_policy=run_policy))
    assert rejected.value.status == 422 and problem in rejected.value.message
