"""The failure summary's pure parts: which run failed first, how exit codes read, how pods become rows."""

from __future__ import annotations

import pytest

from trainctl.api import condition_type
from trainctl.backends.base import JobDetails, ReplicaRow
from trainctl.backends.kube.backend import podless_rows, replica_row
from trainctl.errors import JobFailed, UserError
from trainctl.failures import failed_runs, signal_name, summarize
from trainctl.job import Job


def job(state: str | None = "Failed", message: str = "PyTorchJob demo is failed because 1 Worker replica(s) failed.",
        clean_pod_policy: str | None = None) -> dict:
    conditions = [{"type": state, "status": "True", "message": message}] if state else []
    spec = {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}}}
    if clean_pod_policy:
        spec["runPolicy"] = {"cleanPodPolicy": clean_pod_policy}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "demo", "namespace": "ml"},
            "spec": spec, "status": {"conditions": conditions}}


def row(name: str, state: str, exit_code=None, finished=None, **extra) -> ReplicaRow:
    rtype, index = name.split("-")
    return ReplicaRow(name=f"demo-{name}", replica_type=rtype.capitalize(), index=int(index), state=state,
                      exit_code=exit_code, finished=finished, **extra)


@pytest.mark.parametrize(("code", "name"), [(137, "SIGKILL"), (143, "SIGTERM"), (-11, "SIGSEGV"), (139, "SIGSEGV"),
                                            (1, ""), (0, ""), (None, ""), (128, ""), (255, "")])
def test_signal_names_of_container_and_python_exit_codes(code, name):
    assert signal_name(code) == name


def test_the_earliest_failure_is_first_and_a_signalled_victim_loses_a_tie():
    details = JobDetails(job(), [
        row("master-0", "Failed", 143, "2026-01-01T00:00:05Z", reason="Terminated"),
        row("worker-0", "Failed", 1, "2026-01-01T00:00:05Z", reason="Error"),
        row("worker-1", "Failed", 2, "2026-01-01T00:00:09Z", reason="Error"),
    ])
    assert [run.replica for run in failed_runs(details)] == ["worker-0", "master-0", "worker-1"]


def test_a_restarted_replicas_failure_is_its_previous_run():
    details = JobDetails(job(), [
        row("master-0", "Running"),
        row("worker-0", "CrashLoopBackOff", restarts=3, last_exit_code=137, last_reason="OOMKilled",
            last_finished="2026-01-01T00:00:03Z"),
    ])
    summary = summarize(details, ["loading shard 7"])
    assert summary.first.replica == "worker-0" and summary.first.previous
    assert summary.headline() == "worker-0 failed first: exit code 137 (OOMKilled, SIGKILL), restarted 3 times"
    assert "trainctl logs demo -n ml --replica worker-0 --previous" in summary.lines()[-1]


def test_the_summary_names_the_replica_its_code_and_ends_with_the_traceback():
    tail = ["Traceback (most recent call last):", '  File "train.py", line 3', "ValueError: bad shape"]
    summary = summarize(JobDetails(job(), [row("master-0", "Running"), row("worker-1", "Failed", 1, "2026-01-01T00:00:01Z",
                                                                            reason="Error")]), tail)
    text = str(JobFailed(summary))
    assert text.splitlines()[0] == "worker-1 failed first: exit code 1 (Error), restarted 0 times"
    assert "Failed: PyTorchJob demo is failed because 1 Worker replica(s) failed." in text
    assert text.splitlines()[-2].endswith("| ValueError: bad shape")
    assert JobFailed(summary).summary is summary and JobFailed.exit_code == 1


def test_a_success_with_a_failed_worker_is_a_note_and_a_clean_success_is_none():
    failed_worker = [row("master-0", "Succeeded", 0), row("worker-0", "Failed", 2, "2026-01-01T00:00:01Z")]
    note = summarize(JobDetails(job("Succeeded", "done"), failed_worker))
    assert note.state == "Succeeded" and note.headline() == "pytorchjob/demo succeeded, but worker-0 failed: exit code 2"
    assert summarize(JobDetails(job("Succeeded", "done"), [row("master-0", "Succeeded", 0)])) is None
    assert summarize(JobDetails(job("Running", "running"), failed_worker)) is None  # still going: status says it
    retried = [row("master-0", "Succeeded", 0, restarts=2, last_exit_code=1, last_reason="Error")]
    assert summarize(JobDetails(job("Succeeded", "done"), retried)) is None  # the retry that worked clears it


def test_a_failure_without_a_replica_to_blame_says_the_jobs_own_message():
    summary = summarize(JobDetails(job(message="active longer than specified deadline"), []))
    assert summary.first is None and summary.lines() == ["pytorchjob/demo failed: active longer than specified deadline"]


def pod(name: str, container_status: dict, phase: str = "Running", rtype: str = "worker", index: str = "0") -> dict:
    return {"metadata": {"name": name, "labels": {"training.kubeflow.org/replica-type": rtype,
                                                  "training.kubeflow.org/replica-index": index}},
            "spec": {"nodeName": "n1"},
            "status": {"phase": phase, "containerStatuses": [{"name": "pytorch", **container_status}]}}


def test_a_crash_looping_pod_shows_kubectls_state_and_its_last_exit_code():
    looping = pod("demo-worker-0", {"restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                                                 "finishedAt": "2026-01-01T00:00:07Z"}}})
    shown = replica_row(looping, ["Master", "Worker"])
    assert (shown.state, shown.restarts, shown.exit_code, shown.last_exit_code, shown.last_reason) == \
        ("CrashLoopBackOff", 4, None, 1, "Error")
    assert shown.replica_type == "Worker" and shown.last_finished == "2026-01-01T00:00:07Z"


def test_a_pod_row_keeps_the_specs_spelling_of_its_type_and_the_failed_containers_code():
    ended = pod("tf-ps-0", {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}, "Failed", "ps")
    shown = replica_row(ended, ["Chief", "PS", "Worker"])
    assert (shown.replica_type, shown.state, shown.exit_code, shown.reason) == ("PS", "Failed", 137, "OOMKilled")


def test_replicas_without_a_pod_are_listed_as_pending_or_deleted():
    present = [pod("demo-master-0", {}, rtype="master")]
    assert [(r.name, r.state) for r in podless_rows(Job(job("Running", "")), present)] == \
        [("demo-worker-0", "Pending"), ("demo-worker-1", "Pending")]
    gone = podless_rows(Job(job("Failed", "", clean_pod_policy="All")), present)
    assert {r.state for r in gone} == {"Deleted"} and "cleanPodPolicy All" in gone[0].reason


@pytest.mark.parametrize("text", ["Succeeded", "succeeded", "SUCCEEDED", "condition=Succeeded", "condition=succeeded"])
def test_wait_conditions_in_any_case_and_kubectls_spelling(text):
    assert condition_type(text) == "Succeeded"


def test_an_unknown_wait_condition_names_the_choices():
    with pytest.raises(UserError, match="use one of Succeeded, Failed, Running, Suspended"):
        condition_type("complete")


def test_a_local_replica_left_waiting_to_restart_when_its_job_ended_is_deleted_with_its_failure_kept():
    from trainctl.backends.local.backend import replica_row as local_row

    waiting = {"name": "demo-worker-0", "rtype": "Worker", "index": 0, "pid": None, "state": "CrashLoopBackOff",
               "restarts": 2, "last_exit_code": 137, "last_reason": "Killed", "last_finished": "2026-01-01T00:00:04Z"}
    assert local_row(waiting, {}, job_finished=False).state == "CrashLoopBackOff"
    ended = local_row(waiting, {}, job_finished=True)
    assert ended.state == "Deleted" and ended.last_exit_code == 137
    summary = summarize(JobDetails(job(), [ended]))
    assert summary.first.replica == "worker-0" and summary.first.previous


def test_a_pod_whose_init_container_fails_shows_kubectls_init_state_and_its_code():
    """The code snapshot's init container (docs/code-shipping.md) failing its hash check, then waiting to rerun."""
    failed = pod("demo-worker-0", {"state": {"waiting": {"reason": "PodInitializing"}}}, "Pending")
    failed["status"]["initContainerStatuses"] = [
        {"name": "trainctl-code", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
    shown = replica_row(failed, ["Master", "Worker"])
    assert (shown.state, shown.exit_code, shown.reason) == ("Init:Error", 1, "Error")
    failed["status"]["initContainerStatuses"] = [
        {"name": "trainctl-code", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
    assert (replica_row(failed, ["Master", "Worker"]).state, replica_row(failed, ["Master", "Worker"]).exit_code) == \
        ("Init:CrashLoopBackOff", 1)
    failed["status"]["initContainerStatuses"][0] = {"name": "trainctl-code", "state": {"terminated": {"exitCode": 0}}}
    assert replica_row(failed, ["Master", "Worker"]).state == "PodInitializing"
