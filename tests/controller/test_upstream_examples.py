"""Each of the Training Operator's own examples (../shared/kubeflow-v1/examples), created on the real API
server as it is (only its namespace is the test's), and what trainctl's controller makes of it: a pod per
replica with the example's own image, command and arguments, as the operator would, so that on a cluster
the image supplies what the local backend cannot (docs/compatibility.md, the table's cluster column).
Which of them also run to Succeeded in real pods: tests/realnode/test_other_frameworks.py."""

from __future__ import annotations

import pytest
import yaml

from tests.controller.jobs import create, get_job, pods, wait_for
from trainctl.core.job import Job

pytestmark = pytest.mark.k8s


def example_names(upstream_dir) -> list[str]:
    return sorted(path.name for path in (upstream_dir / "examples").glob("*.yaml"))


@pytest.fixture
def examples(upstream):
    return {name: yaml.safe_load((upstream / "examples" / name).read_text()) for name in example_names(upstream)}


def test_every_upstream_example_is_stored_and_gets_its_pods_with_its_own_image_and_command(
        rest, start_controller, namespace, examples):
    start_controller(namespace)
    for example in examples.values():
        example["metadata"]["namespace"] = namespace
        create(rest, example)  # the API server's own validation against trainctl's CRDs
    for name, example in examples.items():
        job = Job(get_job(rest, example["kind"], namespace, example["metadata"]["name"]))
        expected = {job.pod_name(rtype, index): main_container(job.template(rtype)["spec"]["containers"], job)
                    for rtype in job.replica_types for index in range(job.replicas(rtype))}
        found = wait_for(lambda: (made := pods(rest, namespace, job.name)) and set(made) == set(expected) and made,
                         what=f"the pods of {name}")
        for pod_name, wanted in expected.items():
            made = main_container(found[pod_name]["spec"]["containers"], job)
            assert made["image"] == wanted["image"], (name, pod_name)
            if wanted.get("command"):  # else the image's entrypoint (an MPI worker idles instead)
                assert (made["command"], made.get("args")) == (wanted["command"], wanted.get("args")), (name, pod_name)


def main_container(containers: list[dict], job: Job) -> dict:
    return job.main_container(containers) or {}
