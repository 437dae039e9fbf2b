"""Kept records (issue 26): the controller keeps what a replica's ended runs printed, how they ended and what they
reported, in ConfigMaps owned by the job, so ``logs``, ``status``, the failure summary, ``job.logs()``,
``job.result()`` and ``job.metrics()`` still answer once the pods are gone.

The node fixture plays kubelet (tests/cluster/kubelet.py): what the pods "write" is its log, stamped as kubelet
stamps; a pod it deletes stops its containers first, which ends the log streams that follow it.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.controller.jobs import get_job, pods, wait_for
from tests.controller.test_failures import TRACEBACK, submit_running
from trainctl import reporting
from trainctl.backends.kube import records as fmt
from trainctl.frameworks import by_kind
from trainctl.kube import job_resource
from trainctl.kube.client import CONFIGMAPS, EVENTS, PODS, ApiError
from trainctl.sdk.client import Client

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(240)]
PYTORCH = job_resource(by_kind("PyTorchJob"))


def kept(rest, ns: str, job: str | None = None) -> dict[str, dict]:
    selector = fmt.selector(job) if job else f"{fmt.RECORD_LABEL}={fmt.FORMAT}"
    return {item["metadata"]["name"]: item for item in rest.list(CONFIGMAPS, ns, selector)["items"]}


def runs_of(config_map: dict) -> list[dict]:
    return json.loads(config_map["metadata"]["annotations"][fmt.RECORD_ANNOTATION])["runs"]


def report_lines(steps: range) -> str:
    points = [(time.time(), step, len(steps), {"loss": 1 / step}) for step in steps]
    return "".join(line.decode() for line in reporting.encoded_lines(points))


def client_of(k8s_cluster) -> Client:
    return Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))


def test_pods_cleaned_up_keep_their_logs_rows_metrics_and_result_in_records(
        k8s_cluster, kube_node, start_controller, managed_namespace, trainctl, rest, tmp_path):
    ns = managed_namespace
    controller = start_controller(ns)
    submit_running(trainctl, ns, "gone", "--clean-pod-policy", "All", "--restart-policy", "Never")
    kube_node.write_log(ns, "gone-master-0", "pytorch", "master says hello\n" + report_lines(range(1, 41))
                        + '\ntrainctl-result:v2 {"$tuple": [42, "answer"]}\n')
    kube_node.write_log(ns, "gone-worker-0", "pytorch", "worker says hello\n")
    kube_node.set_phase(ns, "gone-worker-0", "Succeeded", exit_code=0)
    kube_node.set_phase(ns, "gone-master-0", "Succeeded", exit_code=0)
    wait_for(lambda: not pods(rest, ns, "gone"), timeout=60, what="cleanPodPolicy All to remove the pods")

    records = kept(rest, ns, "gone")
    assert set(records) == {"gone-master-0.trainctl-record", "gone-worker-0.trainctl-record"}
    job = get_job(rest, "PyTorchJob", ns, "gone")
    for record in records.values():
        assert record["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        assert [run["exitCode"] for run in runs_of(record)] == [0]

    logs = trainctl("logs", "gone", "-n", ns)
    assert logs.returncode == 0, logs.stderr
    assert "master-0 | master says hello" in logs.stdout and "worker-0 | worker says hello" in logs.stdout
    assert re.search(r"master-0 \| \(kept record: pod gone-master-0 removed; run 0 ended \S+, exit code 0 "
                     r"\(Completed\); whole log, [\d.]+ KiB\)", logs.stdout), logs.stdout
    status = trainctl("status", "gone", "-n", ns).stdout
    assert re.search(r"gone-master-0 +Succeeded +0 +0 +Completed \(pod removed; from the kept record\)", status), status

    client = client_of(k8s_cluster)
    handle = client.job("gone", ns)
    assert [point.step for point in handle.metrics()] == list(range(1, 41))
    assert handle.progress().step == 40
    assert [line.text for line in handle.logs(replica="worker-0")][1:] == ["worker says hello"]
    from trainctl.functions.results import value_in

    assert value_in((line.text for line in client.logs("gone", ns, replica="master-0")), False, "gone") == \
        ((42, "answer"),)
    assert controller.metric("trainctl_records_written_total") == 2
    assert controller.metric("trainctl_record_log_reads_total") == 2

    exported = client.export("gone", tmp_path / "export", ns)
    assert (exported / "logs" / "worker-0.log").read_text().endswith("worker says hello\n")
    assert json.loads((exported / "result.json").read_text()) == {"$tuple": [42, "answer"]}
    assert len((exported / "metrics" / "master-0.jsonl").read_text().splitlines()) == 40

    deleted = trainctl("delete", "gone", "-n", ns)
    assert deleted.returncode == 0, deleted.stderr
    assert kept(rest, ns) == {}  # trainctl delete takes them with the job, no garbage collector needed


def test_fifty_mebibytes_keep_their_last_mebibyte_in_full_and_say_the_cut(
        kube_node, start_controller, managed_namespace, trainctl, rest):
    ns = managed_namespace
    start_controller(ns)
    submit_running(trainctl, ns, "loud", "--clean-pod-policy", "All", "--restart-policy", "Never")
    line = "x" * 99 + "\n"
    kube_node.write_log(ns, "loud-worker-0", "pytorch", "the very first line\n" + line * (50 * 10_486)
                        + "".join(f"last line {i}\n" for i in range(100)))
    kube_node.set_phase(ns, "loud-worker-0", "Succeeded", exit_code=0)
    kube_node.set_phase(ns, "loud-master-0", "Succeeded", exit_code=0)
    wait_for(lambda: not pods(rest, ns, "loud"), timeout=120, what="the pods to be removed")

    record = kept(rest, ns, "loud")["loud-worker-0.trainctl-record"]
    run = runs_of(record)[0]
    assert run["read"] > 50 << 20 and (1 << 20) - 100 <= run["kept"] <= 1 << 20, run
    stored = sum(len(value) for value in (record.get("binaryData") or {}).values()) * 3 // 4
    assert stored < fmt.CONFIGMAP_BYTES - fmt.RESERVED_BYTES  # what etcd holds: far under the object limit
    logs = trainctl("logs", "loud", "-n", ns, "--replica", "worker-0").stdout
    assert "(kept record: pod loud-worker-0 removed; run 0 ended" in logs and "last 1.0 MiB of 50.0 MiB" in logs
    assert "the very first line" not in logs and logs.rstrip().endswith("worker-0 | last line 99")
    assert logs.count("x" * 99) >= 10_000  # all of the last MiB, in whole lines


def test_a_restarted_run_and_a_suspended_run_are_kept_and_read_back_as_previous_runs(
        kube_node, start_controller, managed_namespace, trainctl, rest):
    ns = managed_namespace
    start_controller(ns)
    submit_running(trainctl, ns, "again", "--restart-policy", "OnFailure")
    kube_node.write_log(ns, "again-worker-0", "pytorch", "first run\n" + TRACEBACK)
    kube_node.restart(ns, "again-worker-0", exit_code=1)  # kubelet restarts it in place
    kube_node.write_log(ns, "again-worker-0", "pytorch", "second run, last words before suspend\n")
    wait_for(lambda: kept(rest, ns, "again"), what="the first run kept")
    assert [(r["restart"], r["exitCode"]) for r in runs_of(kept(rest, ns, "again")["again-worker-0.trainctl-record"])] \
        == [(0, 1)]

    assert trainctl("suspend", "again", "-n", ns).returncode == 0  # the controller deletes the running pods
    wait_for(lambda: not pods(rest, ns, "again"), what="suspend to remove the pods")
    record = wait_for(lambda: (found := kept(rest, ns, "again").get("again-worker-0.trainctl-record"))
                      and len(runs_of(found)) == 2 and found, what="the suspended run kept")
    assert [(run["restart"], run["deleted"]) for run in runs_of(record)] == [(1, True), (0, False)]
    logs = trainctl("logs", "again", "-n", ns, "--replica", "worker-0").stdout
    assert "second run, last words before suspend" in logs and "as its pod was deleted" in logs, logs
    previous = trainctl("logs", "again", "-n", ns, "--replica", "worker-0", "--previous").stdout
    assert "first run" in previous and "ValueError: expected input" in previous, previous

    assert trainctl("resume", "again", "-n", ns).returncode == 0
    wait_for(lambda: (p := pods(rest, ns, "again").get("again-worker-0")) and p["status"].get("phase") == "Running",
             what="the worker to run again")
    previous = trainctl("logs", "again", "-n", ns, "--replica", "worker-0", "--previous").stdout
    assert "second run, last words before suspend" in previous, previous  # the run before the new pod's


def test_a_controller_restart_reads_no_kept_run_again_and_keeps_what_it_missed(
        k8s_cluster, kube_node, start_controller, managed_namespace, trainctl, rest):
    ns = managed_namespace
    first = start_controller(ns)
    submit_running(trainctl, ns, "twice", "--restart-policy", "Never")
    kube_node.write_log(ns, "twice-worker-0", "pytorch", "worker done\n")
    kube_node.set_phase(ns, "twice-worker-0", "Succeeded", exit_code=0)
    wait_for(lambda: kept(rest, ns, "twice"), what="the worker's run kept")
    version = kept(rest, ns, "twice")["twice-worker-0.trainctl-record"]["metadata"]["resourceVersion"]
    first.stop()

    kube_node.write_log(ns, "twice-master-0", "pytorch", "master done while no controller ran\n")
    kube_node.set_phase(ns, "twice-master-0", "Succeeded", exit_code=0)
    second = start_controller(ns)
    wait_for(lambda: "twice-master-0.trainctl-record" in kept(rest, ns, "twice"), what="the missed run kept")
    time.sleep(3)
    assert kept(rest, ns, "twice")["twice-worker-0.trainctl-record"]["metadata"]["resourceVersion"] == version
    assert second.metric("trainctl_record_log_reads_total") == 1  # the master's only


def test_only_the_jobs_own_record_is_read_and_a_foreign_config_map_is_left_alone(
        k8s_cluster, kube_node, start_controller, managed_namespace, trainctl, rest):
    ns = managed_namespace
    submitted = trainctl("submit", "pytorch", "--workers", "2", "--name", "owned", "-n", ns, "--image", "busybox",
                         "--restart-policy", "Never", "--clean-pod-policy", "All", "--suspend", "--", "python", "x")
    assert submitted.returncode == 0, submitted.stderr
    uid = get_job(rest, "PyTorchJob", ns, "owned")["metadata"]["uid"]
    planted = fmt.body(fmt.Record("master-0", (fmt.KeptRun("owned-master-0", "p", 0, exit_code=0, read=7, kept=7),),
                                  (fmt.packed(b"2026-01-02T03:04:05.000000000Z planted\n"),)),
                       {"kind": "PyTorchJob", "metadata": {"name": "owned", "namespace": ns, "uid": "another-uid"}},
                       "owned-master-0")
    rest.create(CONFIGMAPS, planted, ns)  # a record of another job's uid: an earlier job of that name, or a forgery
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned-worker-0.trainctl-record"},
               "data": {"mine": "not a record"}}
    rest.create(CONFIGMAPS, foreign, ns)
    assert "planted" not in trainctl("logs", "owned", "-n", ns).stdout

    start_controller(ns)
    assert trainctl("resume", "owned", "-n", ns).returncode == 0
    wait_for(lambda: len([p for p in pods(rest, ns, "owned").values() if p["status"].get("phase") == "Running"]) == 2,
             what="running pods")
    kube_node.write_log(ns, "owned-master-0", "pytorch", "the real master\n")
    kube_node.set_phase(ns, "owned-worker-0", "Succeeded", exit_code=0)
    kube_node.set_phase(ns, "owned-master-0", "Succeeded", exit_code=0)
    wait_for(lambda: not pods(rest, ns, "owned"), timeout=60, what="the pods removed")
    replaced = rest.get(CONFIGMAPS, "owned-master-0.trainctl-record", ns)
    assert replaced["metadata"]["ownerReferences"][0]["uid"] == uid  # the stale record replaced by this job's
    assert rest.get(CONFIGMAPS, "owned-worker-0.trainctl-record", ns)["data"] == {"mine": "not a record"}
    events = rest.list(EVENTS, ns, field_selector="involvedObject.name=owned")["items"]
    assert any(e["reason"] == "RecordNotKept" and "owned-worker-0.trainctl-record" in e["message"] for e in events)
    logs = trainctl("logs", "owned", "-n", ns).stdout
    assert "master-0 | the real master" in logs and "planted" not in logs and "not a record" not in logs


def test_a_run_whose_log_cannot_be_read_keeps_how_it_ended_and_a_deleted_job_takes_its_records(
        kube_node, start_controller, managed_namespace, trainctl, rest):
    ns = managed_namespace
    start_controller(ns)
    submit_running(trainctl, ns, "lost", "--restart-policy", "Never")
    kube_node.unreachable.add((ns, "lost-worker-0"))  # its node is lost: its log cannot be read any more
    kube_node.set_phase(ns, "lost-worker-0", "Failed", exit_code=137, reason="OOMKilled")
    record = wait_for(lambda: kept(rest, ns, "lost").get("lost-worker-0.trainctl-record"), what="the run kept")
    run = runs_of(record)[0]
    assert (run["exitCode"], run["reason"], run["kept"]) == (137, "OOMKilled", 0)
    assert "its log could not be read" in run["lost"], run
    rest.delete(PODS, "lost-worker-0", ns, grace_period=0)  # as the pod garbage collector does for a lost node
    wait_for(lambda: "lost-worker-0" not in pods(rest, ns, "lost"), what="the pod gone")
    status = trainctl("status", "lost", "-n", ns).stdout
    assert re.search(r"lost-worker-0 +Failed +0 +137 +OOMKilled \(pod removed; from the kept record\)", status), status
    logs = trainctl("logs", "lost", "-n", ns, "--replica", "worker-0").stdout
    assert "its log was not kept: its log could not be read" in logs, logs

    rest.delete(PYTORCH, "lost", ns)  # as kubectl delete does; this cluster has no garbage collector
    wait_for(lambda: not kept(rest, ns, "lost"), what="the controller to remove a deleted job's records")
    with pytest.raises(ApiError):
        rest.get(CONFIGMAPS, "lost-worker-0.trainctl-record", ns)
