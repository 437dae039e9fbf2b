"""trainctl.compat's job objects read as the Kubeflow SDK's own models read (kubeflow-training 1.9).

The same resource, every job kind with most options set and a status, is deserialized by the
upstream SDK (in .venv-upstream-sdk, as its ApiClient does in get_job) and read through
:mod:`trainctl.sdk.compat_models`; every attribute path upstream's objects have must read the same here:
nested objects as objects, maps and lists as such, timestamps as the same datetimes, absent fields as None.
"""

from __future__ import annotations

import datetime
import inspect
import json
import subprocess

import pytest

from tests.compat.test_upstream import OPTION_MATRIX
from tests.conftest import REPO
from trainctl.frameworks import ALL
from trainctl.sdk.compat_models import job_model
from trainctl.submit.options import SubmitOptions
from trainctl.submit.render import render

SDK_PYTHON = REPO / ".venv-upstream-sdk" / "bin" / "python"
# V1PodSpec's alpha workloadRef is in kubernetes 35, the client kubeflow-training 1.9 runs with, and no longer
# in 37, the client trainctl's pod schema is generated from (tools/gen_pod_schema.py)
ONLY_IN_KUBERNETES_35 = {"workload_ref"}

def walk(value, path: str, out: dict) -> None:
    """Every attribute path of a job object into ``out``: a model (upstream's, or trainctl's: both have
    openapi_types) as its sorted attribute names, a datetime as ISO text, anything else as it is.
    Its source also runs in the upstream SDK's interpreter (UPSTREAM_WALK)."""
    if hasattr(value, "openapi_types"):
        out[path] = sorted(value.openapi_types)
        for name in value.openapi_types:
            walk(getattr(value, name), f"{path}.{name}", out)
    elif isinstance(value, dict):
        out[path] = {"map": sorted(value)}
        for key, item in value.items():
            walk(item, f"{path}[{key}]", out)
    elif isinstance(value, list):
        out[path] = {"list": len(value)}
        for index, item in enumerate(value):
            walk(item, f"{path}[{index}]", out)
    elif isinstance(value, datetime.datetime):
        out[path] = {"datetime": value.isoformat()}
    else:
        out[path] = {"value": value}


# Deserializes each resource with upstream's ApiClient into its model class, as get_job does, and walks it.
UPSTREAM_WALK = "import datetime, json, sys\n" + inspect.getsource(walk) + r'''
from kubeflow.training.api_client import ApiClient

class Response:
    def __init__(self, data): self.data = json.dumps(data)

result = {}
for resource in json.load(sys.stdin):
    out = {}
    walk(ApiClient().deserialize(Response(resource), "KubeflowOrgV1" + resource["kind"]), "job", out)
    result[resource["kind"]] = out
print(json.dumps(result))
'''


def sample_jobs() -> list[dict]:
    """Every kind rendered with most options, plus what the API server and the operator add."""
    jobs = []
    for framework, options in zip(ALL, OPTION_MATRIX):
        resource = render(framework, SubmitOptions(command=["python", "train.py"], name="job", workers=2, **{
            key: value for key, value in options.items() if key != "workers"}))
        resource["metadata"].update(namespace="default", uid="0b6e", resourceVersion="7", generation=1,
                                    creationTimestamp="2026-01-02T03:04:05Z", labels={"team": "nlp"})
        resource["status"] = {
            "conditions": [{"type": "Created", "status": "True", "reason": "Created", "message": "made",
                            "lastUpdateTime": "2026-01-02T03:04:05Z", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
            "replicaStatuses": {"Worker": {"active": 1, "selector": "x=y"}}, "startTime": "2026-01-02T03:04:06Z"}
        jobs.append(resource)
    return jobs


def test_every_attribute_path_upstreams_models_have_reads_the_same_here():
    assert SDK_PYTHON.exists(), "no .venv-upstream-sdk: run bash scripts/test.sh (or see requirements/upstream-sdk.txt)"
    jobs = sample_jobs()
    done = subprocess.run([str(SDK_PYTHON), "-c", UPSTREAM_WALK], input=json.dumps(jobs), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    upstream = json.loads(done.stdout)
    assert sorted(upstream) == sorted(job["kind"] for job in jobs)
    for resource in jobs:
        theirs, here = upstream[resource["kind"]], {}
        walk(job_model(resource), "job", here)
        assert len(theirs) > 100, resource["kind"]  # the pod template's fields were walked too
        for path, reading in theirs.items():
            if path.rpartition(".")[2] in ONLY_IN_KUBERNETES_35:
                continue
            if isinstance(reading, list):  # a model: trainctl's may know more fields (status.replica_statuses'
                assert set(reading) - ONLY_IN_KUBERNETES_35 <= set(here.get(path, [])), path  # restarts), never fewer
            else:
                assert here.get(path) == reading, path


@pytest.mark.parametrize("resource", sample_jobs()[:1], ids=["PyTorchJob"])
def test_to_dict_and_sanitize_for_serialization_give_the_resource_back(resource):
    job = job_model(resource)
    assert job.to_dict()["metadata"]["creation_timestamp"] == datetime.datetime(2026, 1, 2, 3, 4, 5,
                                                                                tzinfo=datetime.timezone.utc)
    assert job.to_dict()["spec"]["run_policy"]["backoff_limit"] == resource["spec"]["runPolicy"]["backoffLimit"]
    assert job == job_model(json.loads(json.dumps(resource))) and "'name': 'job'" in repr(job)
    assert sanitized(job) == resource  # as kubernetes.client.ApiClient().sanitize_for_serialization walks it


def sanitized(value):
    """What the Kubernetes client's sanitize_for_serialization does with a model (its code, minus six)."""
    if isinstance(value, list):
        return [sanitized(item) for item in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dict):
        return {key: sanitized(item) for key, item in value.items()}
    if hasattr(value, "openapi_types"):
        return {value.attribute_map[name]: sanitized(getattr(value, name)) for name in value.openapi_types
                if getattr(value, name) is not None}
    return value
