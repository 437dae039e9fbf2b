"""Building jobs and waiting on the API server, for the controller tests."""

from __future__ import annotations

import time

from trainctl.frameworks import by_kind
from trainctl.kube import job_resource
from trainctl.kube.client import PODS, SERVICES, Client

WAIT_S = 20


def job(kind: str, name: str, namespace: str, replicas: dict[str, int], *, container: str | None = None,
        restart_policy: str | None = None, run_policy: dict | None = None, **spec) -> dict:
    framework = by_kind(kind)
    specs = {}
    for rtype, count in replicas.items():
        replica = {"replicas": count, "template": {"spec": {"containers": [
            {"name": container or framework.container, "image": "busybox", "command": ["train"]}]}}}
        if restart_policy:
            replica["restartPolicy"] = restart_policy
        specs[rtype] = replica
    body = {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {framework.replica_spec_field: specs, **spec}}
    if run_policy:
        body["spec"]["runPolicy"] = run_policy
    return body


def create(rest: Client, body: dict) -> dict:
    return rest.create(job_resource(by_kind(body["kind"])), body, body["metadata"]["namespace"])


def get_job(rest: Client, kind: str, namespace: str, name: str) -> dict:
    return rest.get(job_resource(by_kind(kind)), name, namespace)


def wait_for(predicate, timeout: float = WAIT_S, what: str = "condition", interval: float = 0.1):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def pods(rest: Client, namespace: str, job_name: str | None = None) -> dict[str, dict]:
    selector = f"training.kubeflow.org/job-name={job_name}" if job_name else "training.kubeflow.org/job-name"
    return {p["metadata"]["name"]: p for p in rest.list(PODS, namespace, selector)["items"]}


def services(rest: Client, namespace: str, job_name: str | None = None) -> dict[str, dict]:
    selector = f"training.kubeflow.org/job-name={job_name}" if job_name else "training.kubeflow.org/job-name"
    return {s["metadata"]["name"]: s for s in rest.list(SERVICES, namespace, selector)["items"]}


def conditions(rest: Client, kind: str, namespace: str, name: str) -> list[tuple[str, str]]:
    status = get_job(rest, kind, namespace, name).get("status") or {}
    return [(c["type"], c["status"]) for c in status.get("conditions") or []]


def state(rest: Client, kind: str, namespace: str, name: str) -> str | None:
    """The job's last True condition type (what `trainctl list` shows)."""
    true = [ctype for ctype, status in conditions(rest, kind, namespace, name) if status == "True"]
    return true[-1] if true else None


def wait_state(rest: Client, kind: str, namespace: str, name: str, expected: str, timeout: float = WAIT_S) -> None:
    wait_for(lambda: state(rest, kind, namespace, name) == expected, timeout, f"{kind} {name} to be {expected}")


def env_of(pod: dict, container: str | None = None) -> dict[str, str]:
    chosen = next(c for c in pod["spec"]["containers"] if container is None or c["name"] == container)
    return {e["name"]: e.get("value", "") for e in chosen.get("env") or []}
