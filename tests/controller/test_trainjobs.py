"""TrainJobs under trainctl's controller (issue 41, point 2): the body the Kubeflow SDK v2 posts, on trainctl's
installed ``torch-distributed`` runtime, becomes the pods and the headless Service upstream's JobSet path gives
(docs/trainer-v2.md, "The controller"); its status is upstream's form (contract §1.3): no condition while it runs,
``Complete`` or ``Failed`` as full metav1.Conditions when it ends. The node fixture plays kubelet."""

from __future__ import annotations

import pytest

from tests.controller.jobs import wait_for
from trainctl.core.trainer_crds import TRAINJOB
from trainctl.kube import trainer_resource
from trainctl.kube.client import EVENTS, PODS, SERVICES

pytestmark = pytest.mark.k8s
TRAINJOBS = trainer_resource(TRAINJOB)
CLUSTER_RUNTIMES = trainer_resource("ClusterTrainingRuntime", namespaced=False)
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RANK_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


@pytest.fixture
def ns(start_controller, managed_namespace, trainctl):
    result = trainctl("runtimes", "install", "torch-distributed")
    assert result.returncode == 0, result.stderr
    start_controller(managed_namespace)
    return managed_namespace


def sdk_body(name: str, namespace: str, runtime: str = "torch-distributed") -> dict:
    """What ``TrainerClient().train(runtime=..., trainer=CustomTrainer(func, num_nodes=2, resources_per_node=
    {"cpu": 2}))`` posts (contract §7.1): integral numbers as floats, no image."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"kind": "ClusterTrainingRuntime", "name": runtime},
                     "trainer": {"command": ["bash", "-c", "printf '%s' 'print(1)' > train.py && torchrun train.py"],
                                 "numNodes": 2.0,
                                 "resourcesPerNode": {"limits": {"cpu": 2.0}, "requests": {"cpu": 2.0}}}}}


def torch_runtime(trainctl) -> dict:
    """trainctl's torch-distributed ClusterTrainingRuntime as ``trainctl runtimes print`` gives it."""
    import yaml

    printed = trainctl("runtimes", "print", "torch-distributed")
    assert printed.returncode == 0, printed.stderr
    return next(doc for doc in yaml.safe_load_all(printed.stdout) if doc)


def job_pods(rest, namespace: str, name: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in rest.list(PODS, namespace, f"{JOBSET_NAME}={name}")["items"]}


def running(rest, namespace: str, name: str) -> dict[str, dict]:
    return wait_for(lambda: (found := job_pods(rest, namespace, name)) and len(found) == 2 and all(
        (p.get("status") or {}).get("phase") == "Running" for p in found.values()) and found,
        what=f"2 running pods of TrainJob {name}")


def status(rest, namespace: str, name: str) -> dict:
    return rest.get(TRAINJOBS, name, namespace).get("status") or {}


def condition(rest, namespace: str, name: str, ctype: str) -> dict | None:
    return next((c for c in status(rest, namespace, name).get("conditions") or [] if c["type"] == ctype), None)


def test_sdk_trainjob_runs_as_upstreams_pods_and_completes(rest, kube_node, ns, trainctl):
    rest.create(TRAINJOBS, sdk_body("tj", ns), ns)
    found = running(rest, ns, "tj")
    assert set(found) == {"tj-node-0-0", "tj-node-0-1"}
    for index in (0, 1):
        pod = found[f"tj-node-0-{index}"]
        labels = pod["metadata"]["labels"]
        assert (labels[JOBSET_NAME], labels["jobset.sigs.k8s.io/replicatedjob-name"],
                labels["batch.kubernetes.io/job-completion-index"]) == ("tj", "node", str(index))
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"tj-node-0-{index}", "tj")
        node = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
        env = {e["name"]: e for e in node["env"]}
        assert {name: env[name].get("value") for name in ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR",
                                                          "PET_MASTER_PORT")} == {
            "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_MASTER_ADDR": "tj-node-0-0.tj", "PET_MASTER_PORT": "29500"}
        assert env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == RANK_ANNOTATION
        assert node["command"][:2] == ["bash", "-c"] and node["resources"]["limits"]["cpu"] == "2"
    service = wait_for(lambda: {s["metadata"]["name"]: s for s in rest.list(SERVICES, ns)["items"]}.get("tj"),
                       what="the headless Service tj")
    assert (service["spec"]["clusterIP"], service["spec"]["selector"], service["spec"]["publishNotReadyAddresses"]) \
        == ("None", {JOBSET_NAME: "tj"}, True)
    # running: no condition at all (the SDK derives Running from the pods only then), the Job active in jobsStatus
    wait_for(lambda: status(rest, ns, "tj").get("jobsStatus") == [
        {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}],
        what="jobsStatus with the node Job active")
    assert "conditions" not in status(rest, ns, "tj")
    for index in (0, 1):
        kube_node.set_phase(ns, f"tj-node-0-{index}", "Succeeded", exit_code=0)
    complete = wait_for(lambda: condition(rest, ns, "tj", "Complete"), what="TrainJob tj Complete")
    assert complete["status"] == "True" and complete["reason"] == "AllJobsCompleted" and complete["lastTransitionTime"]
    assert [c["type"] for c in status(rest, ns, "tj")["conditions"]] == ["Complete"]
    shown = trainctl("status", "tj", "-n", ns)
    assert shown.returncode == 0 and "Succeeded" in shown.stdout, shown.stdout + shown.stderr
    waited = trainctl("wait", "tj", "-n", ns, "--timeout", "30s")
    assert waited.returncode == 0, waited.stdout + waited.stderr


def test_the_sdk_v2_notebook_trains_deletes_and_reads_every_steps_log_under_the_controller(
        rest, kube_node, ns, k8s_cluster, tmp_path):
    """The notebook cells tests/realnode/test_sdk_v2.py runs against the real node, here with the node fixture as
    kubelet: the SDK's TrainJob becomes the controller's pods, its Complete the SDK's, delete_job takes the pods."""
    from tests.k8s.test_sdk_v2 import Notebook

    notebook = Notebook(k8s_cluster.kubeconfig("admin"), ns, tmp_path / "sdk.log")
    try:
        name = notebook("run", "allreduce_ranks", "torch-distributed")["name"]
        running(rest, ns, name)
        for index in (0, 1):
            kube_node.write_log(ns, f"{name}-node-0-{index}", "node", f"rank {index} of 2 total 3.0\n")
            kube_node.set_phase(ns, f"{name}-node-0-{index}", "Succeeded", exit_code=0)
        finished = notebook("finish", name, 30)
    finally:
        notebook.close()
    assert finished == {"status": "Complete", "logs": ["rank 0 of 2 total 3.0"],
                        "steps": {f"node-{rank}": [f"rank {rank} of 2 total 3.0"] for rank in (0, 1)}}, finished
    wait_for(lambda: not job_pods(rest, ns, name), what=f"the pods of TrainJob {name} gone")


def test_a_rank_over_its_backoff_limit_fails_the_trainjob_naming_it(rest, kube_node, ns, trainctl):
    rest.create(TRAINJOBS, sdk_body("bad", ns), ns)
    running(rest, ns, "bad")
    for _ in range(7):  # kubelet restarts it in place (OnFailure, JobSet's default) past the Job's backoffLimit 6
        kube_node.restart(ns, "bad-node-0-1", exit_code=1)
    failed = wait_for(lambda: condition(rest, ns, "bad", "Failed"), what="TrainJob bad Failed")
    assert failed["status"] == "True" and failed["lastTransitionTime"] and "node-0-1" in failed["message"], failed
    assert [c["type"] for c in status(rest, ns, "bad")["conditions"]] == ["Failed"]
    waited = trainctl("wait", "bad", "-n", ns, "--timeout", "30s")  # a failed job: exit 1, its summary says why
    assert waited.returncode == 1 and "node-0-1" in waited.stdout + waited.stderr, waited.stdout + waited.stderr


def test_the_runtimes_job_backoff_limit_bounds_a_ranks_restarts(rest, kube_node, ns, trainctl):
    """A TrainingRuntime whose Job template sets ``backoffLimit: 0`` (JobSet copies it into each Job): the first
    in-place restart of a rank fails the TrainJob, not the seventh."""
    strict = torch_runtime(trainctl)
    strict["kind"], strict["metadata"] = "TrainingRuntime", {"name": "torch-strict", "namespace": ns,
                                                              "labels": strict["metadata"]["labels"]}
    strict["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 0
    rest.create(trainer_resource("TrainingRuntime"), strict, ns)
    body = sdk_body("strict", ns, runtime="torch-strict")
    body["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    rest.create(TRAINJOBS, body, ns)
    running(rest, ns, "strict")
    kube_node.restart(ns, "strict-node-0-1", exit_code=1)
    failed = wait_for(lambda: condition(rest, ns, "strict", "Failed"), what="TrainJob strict Failed")
    assert "backoff limit" in failed["message"] and "node-0-1" in failed["message"], failed


def test_a_trainjob_whose_runtime_is_missing_fails_in_one_line_until_it_appears(rest, ns, trainctl):
    runtime = f"gone-{ns}"  # cluster-wide: a name no other test's namespace shares
    rest.create(TRAINJOBS, sdk_body("lost", ns, runtime=runtime), ns)
    failed = wait_for(lambda: condition(rest, ns, "lost", "Failed"), what="TrainJob lost Failed")
    assert failed["reason"] == "TrainingRuntimeNotSupported" and failed["lastTransitionTime"]
    assert f"ClusterTrainingRuntime '{runtime}' not found" in failed["message"]
    assert "\n" not in failed["message"]
    warnings = wait_for(lambda: [e for e in rest.list(EVENTS, ns, field_selector="involvedObject.name=lost")["items"]
                                 if e["reason"] == "TrainingRuntimeNotSupported"], what="the Warning event")
    assert len(warnings) == 1 and warnings[0]["involvedObject"]["kind"] == "TrainJob"
    assert job_pods(rest, ns, "lost") == {}
    shown = trainctl("status", "lost", "-n", ns)  # the reason, in one line
    assert shown.returncode == 2 and shown.stderr.startswith(
        f"error: TrainJob lost failed: ClusterTrainingRuntime '{runtime}' not found: create it") \
        and shown.stderr.count("\n") == 1, shown.stderr
    # the runtime appears (trainctl runtimes install): the TrainJob runs on it, its Failed condition gone
    rest.create(CLUSTER_RUNTIMES, {**torch_runtime(trainctl), "metadata": {"name": runtime}})
    rest.patch(TRAINJOBS, "lost", {"metadata": {"labels": {"touched": "yes"}}}, ns)  # else within RUNTIME_RETRY_S
    running(rest, ns, "lost")
    wait_for(lambda: "conditions" not in status(rest, ns, "lost"), what="the Failed condition gone")


def test_suspend_and_resume_give_upstreams_suspended_condition_only(rest, kube_node, ns):
    rest.create(TRAINJOBS, sdk_body("sus", ns), ns)
    running(rest, ns, "sus")
    rest.patch(TRAINJOBS, "sus", {"spec": {"suspend": True}}, ns)
    suspended = wait_for(lambda: condition(rest, ns, "sus", "Suspended"), what="TrainJob sus Suspended")
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "True", "Suspended", "TrainJob is suspended") and suspended["lastTransitionTime"]
    wait_for(lambda: not job_pods(rest, ns, "sus"), what="the pods of the suspended TrainJob gone")
    assert status(rest, ns, "sus")["jobsStatus"][0]["suspended"] == 1
    rest.patch(TRAINJOBS, "sus", {"spec": {"suspend": False}}, ns)
    running(rest, ns, "sus")
    resumed = wait_for(lambda: (c := condition(rest, ns, "sus", "Suspended")) and c["status"] == "False" and c,
                       what="TrainJob sus resumed")
    assert (resumed["reason"], resumed["message"]) == ("Resumed", "TrainJob is resumed")
    assert [c["type"] for c in status(rest, ns, "sus")["conditions"]] == ["Suspended"]


def test_list_shows_trainjobs_beside_the_v1_jobs_with_their_state(rest, ns, trainctl):
    import json

    rest.create(TRAINJOBS, sdk_body("listed", ns), ns)
    running(rest, ns, "listed")
    assert trainctl("submit", "pytorch", "--name", "v1job", "-n", ns, "--", "python", "t.py").returncode == 0

    def listed_rows() -> set[tuple[str, ...]]:  # (name, kind, state): after the NAMESPACE column
        return {tuple(line.split()[1:4]) for line in trainctl("list", "-n", ns).stdout.splitlines()}

    shown = wait_for(lambda: (found := listed_rows()) and ("listed", "TrainJob", "Running") in found and found,
                     what="TrainJob listed Running in trainctl list")
    assert ("v1job", "PyTorchJob") in {row[:2] for row in shown}, shown
    jobs = json.loads(trainctl("list", "-n", ns, "-o", "json").stdout)["items"]
    assert sorted((job["kind"], job["metadata"]["name"]) for job in jobs) == [
        ("PyTorchJob", "v1job"), ("TrainJob", "listed")]


def test_logs_read_the_node_container_of_a_trainjobs_pods(rest, kube_node, ns, trainctl):
    rest.create(TRAINJOBS, sdk_body("talks", ns), ns)
    running(rest, ns, "talks")
    for index in (0, 1):
        kube_node.write_log(ns, f"talks-node-0-{index}", "node", f"hello from rank {index}\n")
    shown = trainctl("logs", "talks", "-n", ns)
    assert shown.returncode == 0 and sorted(shown.stdout.splitlines()) == [
        "node-0-0 | hello from rank 0", "node-0-1 | hello from rank 1"], shown.stdout + shown.stderr
    one = trainctl("logs", "talks", "-n", ns, "--replica", "node-0-1")
    assert one.stdout == "node-0-1 | hello from rank 1\n", one.stdout + one.stderr


def test_delete_removes_a_trainjob_and_an_unknown_name_is_one_line(rest, ns, trainctl):
    rest.create(TRAINJOBS, sdk_body("doomed", ns), ns)
    running(rest, ns, "doomed")
    deleted = trainctl("delete", "doomed", "-n", ns)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    wait_for(lambda: "doomed" not in {t["metadata"]["name"] for t in rest.list(TRAINJOBS, ns)["items"]},
             what="TrainJob doomed gone")
    assert not job_pods(rest, ns, "doomed") and "doomed" not in {
        s["metadata"]["name"] for s in rest.list(SERVICES, ns)["items"]}  # no garbage collector here: trainctl's own
    again = trainctl("delete", "doomed", "-n", ns)
    assert again.returncode == 2 and again.stderr.startswith("error: ") and again.stderr.count("\n") == 1, again.stderr


def test_suspend_and_resume_set_a_trainjobs_own_spec_suspend_and_get_shows_it(rest, ns, trainctl):
    import yaml

    rest.create(TRAINJOBS, sdk_body("paused", ns), ns)
    running(rest, ns, "paused")
    suspended = trainctl("suspend", "paused", "-n", ns)
    assert suspended.returncode == 0, suspended.stdout + suspended.stderr
    wait_for(lambda: not job_pods(rest, ns, "paused"), what="the pods of the suspended TrainJob gone")
    stored = yaml.safe_load(trainctl("get", "paused", "-n", ns, "-o", "yaml").stdout)
    assert stored["kind"] == "TrainJob" and stored["spec"]["suspend"] is True and "runPolicy" not in stored["spec"]
    resumed = trainctl("resume", "paused", "-n", ns)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    running(rest, ns, "paused")
    assert rest.get(TRAINJOBS, "paused", ns)["spec"]["suspend"] is False
