"""`trainctl status` says how to fix a replica that waits for an image it cannot get."""

from __future__ import annotations

from trainctl.backends.base import ReplicaRow
from trainctl.cli.status import image_hints


def resource(master_image: str, worker_image: str) -> dict:
    def spec(image: str) -> dict:
        return {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": image}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
            "spec": {"pytorchReplicaSpecs": {"Master": spec(master_image), "Worker": spec(worker_image)}}}


def row(name: str, replica_type: str, state: str) -> ReplicaRow:
    return ReplicaRow(name=name, replica_type=replica_type, index=0, state=state)


def test_one_line_per_image_naming_the_replicas_and_the_fix():
    hints = image_hints(resource("repo/missing:1", "repo/missing:1"),
                        [row("j-master-0", "Master", "ImagePullBackOff"), row("j-worker-0", "Worker", "ImagePullBackOff")])
    assert len(hints) == 1
    assert "j-master-0, j-worker-0" in hints[0] and "'repo/missing:1'" in hints[0]
    assert "ImagePullBackOff" in hints[0] and "--image" in hints[0]


def test_running_and_crash_looping_replicas_get_no_image_hint():
    rows = [row("j-master-0", "Master", "Running"), row("j-worker-0", "Worker", "CrashLoopBackOff")]
    assert image_hints(resource("a:1", "a:1"), rows) == []


def test_each_stuck_image_gets_its_own_line():
    rows = [row("j-master-0", "Master", "ErrImagePull"), row("j-worker-0", "Worker", "InvalidImageName")]
    hints = image_hints(resource("a:1", "b c"), rows)
    assert [("'a:1'" in hint, "'b c'" in hint) for hint in hints] == [(True, False), (False, True)]


def test_an_init_container_that_cannot_pull_shows_as_kubectl_shows_it_and_gets_the_hint():
    from trainctl.backends.kube.backend import replica_row

    pod = {"metadata": {"name": "j-master-0", "labels": {"training.kubeflow.org/replica-type": "master",
                                                         "training.kubeflow.org/replica-index": "0"}},
           "status": {"phase": "Pending",
                      "initContainerStatuses": [{"name": "trainctl-code", "state": {"waiting": {
                          "reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}],
                      "containerStatuses": [{"name": "pytorch", "state": {"waiting": {"reason": "PodInitializing"}}}]}}
    shown = replica_row(pod, ["Master", "Worker"])
    assert shown.state == "Init:ImagePullBackOff"
    assert "'repo/missing:1'" in image_hints(resource("repo/missing:1", "x:1"), [shown])[0]


def test_a_failing_init_container_is_named_and_a_finished_one_is_not():
    from trainctl.backends.kube.backend import replica_row

    def pod(init_state: dict) -> dict:
        return {"metadata": {"name": "j-worker-0", "labels": {}},
                "status": {"phase": "Pending", "initContainerStatuses": [{"name": "init", "state": init_state}],
                           "containerStatuses": [{"name": "pytorch",
                                                  "state": {"waiting": {"reason": "PodInitializing"}}}]}}

    assert replica_row(pod({"waiting": {"reason": "CrashLoopBackOff"}}), ["Worker"]).state == "Init:CrashLoopBackOff"
    assert replica_row(pod({"terminated": {"exitCode": 0}}), ["Worker"]).state == "PodInitializing"
