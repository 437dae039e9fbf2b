"""The failure summary's pure parts: which run caused the failure and which followed it, how exit codes read, how
pods become rows, and the Failed condition's message naming the cause."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from trainctl.backends.base import JobDetails, ReplicaRow
from trainctl.backends.kube.backend import podless_rows, replica_row
from trainctl.core.attribution import Run, judge, last_exception, raised_records, signatures
from trainctl.core.job import Job
from trainctl.errors import JobFailed, UserError
from trainctl.frameworks import by_name
from trainctl.sdk.client import condition_type
from trainctl.sdk.failures import signal_name, summarize


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


def logs(by_replica: dict[str, list[str]]):
    """``summarize``'s log reader over fixed logs: each run gets its replica's lines."""
    return lambda runs: [by_replica.get(run.replica, []) for run in runs]


GLOO_VICTIM = ["[rank0]: Traceback (most recent call last):", '[rank0]:   File "train.py", line 9, in <module>',
               "[rank0]:     dist.all_reduce(t)",
               "[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
               "by peer [127.0.0.1]:28344. This is typically caused by a remote worker crashing."]
RAISER = ["[rank1]: Traceback (most recent call last):", '[rank1]:   File "train.py", line 8, in <module>',
          '[rank1]:     raise RuntimeError("deliberate failure on rank 1")',
          "[rank1]: RuntimeError: deliberate failure on rank 1"]


def test_the_replica_that_raised_is_named_and_its_gloo_victim_in_the_same_second_is_a_consequence():
    details = JobDetails(job(), [
        row("master-0", "Failed", 1, "2026-01-01T00:00:05Z", reason="Error"),  # the same second, its own code
        row("worker-0", "Failed", 1, "2026-01-01T00:00:05Z", reason="Error", restarts=1),
    ])
    summary = summarize(details, logs({"master-0": GLOO_VICTIM, "worker-0": ["step 1", *RAISER]}))
    lines = summary.lines()
    assert lines[0] == "worker-0 raised RuntimeError: deliberate failure on rank 1; exit code 1 (Error), restarted 1 time"
    assert lines[1] == "  master-0: stopped after its peer was lost (gloo)"
    assert summary.first.replica == "worker-0" and summary.log_tail == ["step 1", *RAISER]
    assert lines[-1] == "  more: trainctl logs demo -n ml --replica worker-0"


def test_failures_in_one_second_with_no_evidence_are_said_to_be_indistinguishable():
    details = JobDetails(job(), [row("master-0", "Failed", 1, "2026-01-01T00:00:05Z", reason="Error"),
                                 row("worker-0", "Failed", 1, "2026-01-01T00:00:05Z", reason="Error")])
    summary = summarize(details, logs({}))
    assert summary.headline() == "master-0 and worker-0 failed within 1 s; no exception found"
    assert "  master-0 exited with code 1; exit code 1 (Error), restarted 0 times" in summary.lines()
    local = JobDetails(job(), [row("master-0", "Failed", 1, exit_window=(100.0, 100.1)),
                               row("worker-0", "Failed", 1, exit_window=(100.0, 100.1)),
                               row("worker-1", "Failed", 3, exit_window=(104.0, 104.1))])
    assert summarize(local).headline() == "master-0 and worker-0 failed within 0.1 s; no exception found"
    assert "  also failed: worker-1 exited with code 3" in summarize(local).lines()


def test_of_two_replicas_that_raised_the_earlier_by_the_function_runners_record_is_named():
    def record(time_ns: int, exception: str) -> str:
        return f'trainctl-raised:v1 {{"time_ns": {time_ns}, "exception": "{exception}", "rank": null}}'

    second = 1_767_225_605_000_000_000  # 2026-01-01T00:00:05Z: both exits fall in that second
    details = JobDetails(job(), [
        row("master-0", "Failed", 1, "2026-01-01T00:00:05Z", message=record(second + 40_000_000, "KeyError: 'lr'")),
        row("worker-0", "Failed", 1, "2026-01-01T00:00:05Z", message=record(second + 5_000_000, "ValueError: bad")),
    ])
    summary = summarize(details)
    assert summary.headline() == "worker-0 raised ValueError: bad; exit code 1, restarted 0 times"
    assert "  also failed: master-0 raised KeyError: 'lr'" in summary.lines()


def test_a_signal_and_an_oom_kill_are_named_as_such():
    killed = summarize(JobDetails(job(), [row("master-0", "Failed", 137, "2026-01-01T00:00:05Z", reason="Killed"),
                                          row("worker-0", "Failed", 1, "2026-01-01T00:00:05Z")]),
                       logs({"worker-0": GLOO_VICTIM}))
    assert killed.headline() == "master-0 was killed by signal 9 (SIGKILL); exit code 137 (Killed, SIGKILL), restarted 0 times"
    assert "  worker-0: stopped after its peer was lost (gloo)" in killed.lines()


def test_replicas_the_job_stopped_are_consequences_and_many_are_counted_not_listed():
    rows = [row("worker-0", "Failed", 3, "2026-01-01T00:00:05Z")]
    rows += [row(f"worker-{index}", "Failed", 143, "2026-01-01T00:00:06Z", reason="Terminated", stopped=True)
             for index in range(1, 64)]
    lines = summarize(JobDetails(job(), rows), logs({})).lines()
    assert lines[0] == "worker-0 failed first: exit code 3, restarted 0 times"
    assert lines[1] == "  worker-1, worker-2, worker-3, worker-4, worker-5 and 58 more: each stopped when the job failed"


def test_a_stopped_replica_is_a_cause_only_by_what_it_raised_before_the_stop():
    record = 'trainctl-raised:v1 {"time_ns": 1767225605000000000, "exception": "ValueError: first", "rank": null}'
    raised_then_hung = row("worker-0", "Failed", 143, "2026-01-01T00:00:07Z", reason="Terminated", stopped=True)
    survived = ["Traceback (most recent call last):", '  File "t.py", line 3', "OSError: retrying the download",
                "epoch 1", "epoch 2", "epoch 3", "epoch 4"]
    details = JobDetails(job(), [row("master-0", "Failed", 1, "2026-01-01T00:00:06Z"), raised_then_hung,
                                 row("worker-1", "Failed", 143, "2026-01-01T00:00:07Z", reason="Terminated",
                                     stopped=True)])
    summary = summarize(details, logs({"master-0": GLOO_VICTIM, "worker-0": RAISER + ["terminate called without an "
                                                                                     "active exception"],
                                       "worker-1": survived}))
    assert summary.headline() == ("worker-0 raised RuntimeError: deliberate failure on rank 1; stopped when the job "
                                  "failed: exit code 143 (Terminated, SIGTERM), restarted 0 times")
    assert "  worker-1: stopped when the job failed" in summary.lines()
    by_record = summarize(JobDetails(job(), [raised_then_hung._replace(message=record)]), logs({}))
    assert by_record.headline().startswith("worker-0 raised ValueError: first; stopped when the job failed")


def test_only_consequences_say_that_no_replicas_own_failure_was_found():
    summary = summarize(JobDetails(job(), [row("master-0", "Failed", 1, "2026-01-01T00:00:05Z", reason="Error")]),
                        logs({"master-0": GLOO_VICTIM}))
    assert summary.headline() == ("master-0 stopped after its peer was lost (gloo): exit code 1 (Error), restarted 0 "
                                  "times; no replica's own failure was found")
    assert summary.first.replica == "master-0"


@pytest.mark.parametrize(("kind", "tail", "label"), [
    ("PyTorchJob", ["terminate called after throwing an instance of 'gloo::IoException'",
                    "  what():  [../gloo/transport/tcp/pair.cc:589] Read error [10.0.0.2]:3456: Connection reset by peer"],
     "gloo"),
    ("PyTorchJob", ["[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
                    "WorkNCCL(SeqNum=4, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."], "NCCL"),
    ("PyTorchJob", ["torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process "
                    "exited or there was a network error, NCCL version 2.21.5"], "NCCL"),
    ("PyTorchJob", ["Traceback (most recent call last):", "  File \"train.py\", line 3, in <module>",
                    "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. "
                    "Did the remote server shutdown or crash?"], "c10d store"),
    ("TFJob", ["tensorflow.python.framework.errors_impl.AbortedError: Collective ops is aborted by: Error reported "
               "from /job:worker/task:1: /job:worker/replica:0/task:1 unexpectedly tried to connect"], "TensorFlow"),
    ("TFJob", ["tensorflow.python.framework.errors_impl.UnavailableError: Graph execution error:"], "TensorFlow"),
    ("MPIJob", ["--------------------------------------------------------------------------",
                "prterun noticed that process rank 1 with PID 30895 on node vm exited on",
                "signal 9 (Killed)."], "MPI"),
    ("XGBoostJob", ["xgboost.core.XGBoostError: [10:01:02] /src/collective/socket.h:150: Failed to recv: Connection "
                    "reset by peer"], "XGBoost"),
    ("PaddleJob", ["ExternalError: Nccl error, remote process exited or there was a network error"], "Paddle"),
    ("JAXJob", ["Terminating process because the JAX distributed service detected fatal errors."], "JAX"),
])
def test_each_frameworks_peer_loss_signature_marks_a_consequence(kind, tail, label):
    assert judge(Run("worker-0", 1, log=tuple(tail)), signatures(kind)).peer_loss == label


@pytest.mark.parametrize("tail", [
    ["Traceback (most recent call last):", '  File "data.py", line 4, in fetch',
     "ConnectionResetError: [Errno 104] Connection reset by peer"],  # the user's download, not a collective
    ["Traceback (most recent call last):", '  File "train.py", line 7, in <module>', "KeyboardInterrupt"],
])
def test_a_users_own_exception_is_a_cause_even_when_it_mentions_a_peer(tail):
    judged = judge(Run("worker-0", 1, log=tuple(tail)), signatures("PyTorchJob"))
    assert judged.is_cause and judged.exception == tail[-1]


def test_the_exception_is_read_from_the_runner_line_the_record_or_the_childs_traceback_under_torchrun():
    child = ["[rank1]: Traceback (most recent call last):", "[rank1]:   File \"t.py\", line 2", "[rank1]: OSError: disk"]
    torchrun = ["Traceback (most recent call last):", '  File "/bin/torchrun", line 8, in <module>',
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "====", "t.py FAILED"]
    assert last_exception(child + torchrun) == "OSError: disk"
    assert last_exception(["noise", "trainctl: train() raised ValueError: x", "more noise"]) == "ValueError: x"
    assert last_exception(["Traceback (most recent call last):", "  (truncated)"]) is None
    record = 'trainctl-raised:v1 {"time_ns": 5, "exception": "ValueError: from the record", "rank": "3"}'
    judged = judge(Run("launcher", 1, message=record, log=tuple(child)), signatures("MPIJob"))
    assert (judged.exception, judged.rank, judged.sentence()) == \
        ("ValueError: from the record", "3", "launcher (rank 3) raised ValueError: from the record")


@pytest.mark.parametrize("line", [
    "trainctl-raised:v1 not json", 'trainctl-raised:v1 {"time_ns": "5", "exception": "X"}',
    'trainctl-raised:v1 {"time_ns": 5, "exception": ["X"]}', 'trainctl-raised:v1 {"time_ns": 5, "exception": "X", '
    '"rank": 1}', "trainctl-raised:v1 [1, 2]"])
def test_a_record_that_does_not_parse_as_one_is_ignored(line):
    assert raised_records([line]) == []


def test_function_runner_records_what_it_raised_with_a_nanosecond_time(tmp_path, monkeypatch):
    from trainctl.functions import runner as function_runner

    monkeypatch.setenv(function_runner.TERMINATION_LOG_ENV, str(tmp_path / "termination"))
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    before = time.time_ns()
    mpi, pytorch = (by_name(name).function_launch.as_call() for name in ("mpi", "pytorch"))  # call.json's launch
    function_runner.record_raise(ValueError("first line\nsecond line"), mpi)
    function_runner.record_raise(KeyError(), mpi)
    first, second = raised_records((tmp_path / "termination").read_text().splitlines())
    assert first["exception"] == "ValueError: first line" and first["rank"] == "2" and first["time_ns"] >= before
    assert second["exception"] == "KeyError"
    assert function_runner.shared_rank(pytorch, {"RANK": "5", "LOCAL_WORLD_SIZE": "1"}) is None


def test_the_failed_condition_names_the_cause_among_observed_and_waiting_replicas():
    from trainctl.core.network import LocalNetwork
    from trainctl.core.observed import ObservedReplica
    from trainctl.core.reconcile import reconcile

    resource = job("Running", "")
    resource["spec"]["pytorchReplicaSpecs"] = {"Master": {"replicas": 1, "restartPolicy": "Never"},
                                               "Worker": {"replicas": 1, "restartPolicy": "Never"}}
    victim = ObservedReplica("Master", 0, "demo-master-0", "Failed", 1, reason="Error",
                             finished_at="2026-01-01T00:00:05Z", message="\n".join(GLOO_VICTIM))
    now = datetime(2026, 1, 1, 0, 0, 6, tzinfo=timezone.utc)
    alone = reconcile(resource, [victim], now, LocalNetwork()).status["conditions"][-1]["message"]
    assert alone == ("PyTorchJob demo is failed because 1 Master replica(s) failed: master-0 stopped after its peer "
                     "was lost (gloo); no replica's own failure was found.")
    waiting = Run("worker-0", 1, "Error", "2026-01-01T00:00:05Z", previous=True, message="\n".join(RAISER))
    named = reconcile(resource, [victim], now, LocalNetwork(), unobserved_failures=(waiting,))
    assert named.status["conditions"][-1]["message"].endswith(
        "failed: worker-0 raised RuntimeError: deliberate failure on rank 1.")
    record = 'trainctl-raised:v1 {"time_ns": 1767225604000000000, "exception": "ValueError: x", "rank": null}'
    shutting_down = ObservedReplica("Worker", 0, "demo-worker-0", "Running", message=record)  # raised, not yet exited
    named = reconcile(resource, [victim, shutting_down], now, LocalNetwork())
    assert named.status["conditions"][-1]["message"].endswith("failed: worker-0 raised ValueError: x.")


def test_a_failure_seen_only_as_a_consequence_stops_the_rest_before_the_failed_condition_is_written():
    """Issue 31's one miss: rank 1 printed its traceback but hung in its process group's shutdown, so with
    backoffLimit 0 the first pass saw only rank 0's peer loss. The core waits CAUSE_WAIT_S for the cause to show,
    then stops the running replicas, starts nothing in their place, and writes the Failed condition once the
    stopped run is evidence."""
    from trainctl.core.actions import CreateReplica, DeleteReplica
    from trainctl.core.network import LocalNetwork
    from trainctl.core.observed import ObservedReplica
    from trainctl.core.reconcile import STOP_REQUEUE_S, reconcile

    resource = job("Running", "")
    resource["spec"]["pytorchReplicaSpecs"] = {"Master": {"replicas": 1, "restartPolicy": "Never"},
                                               "Worker": {"replicas": 1, "restartPolicy": "Never"}}
    victim = ObservedReplica("Master", 0, "demo-master-0", "Failed", 1, reason="Error",
                             finished_at="2026-01-01T00:00:05Z", message="\n".join(GLOO_VICTIM))
    hung = ObservedReplica("Worker", 0, "demo-worker-0", "Running")
    soon = reconcile(resource, [victim, hung], datetime(2026, 1, 1, 0, 0, 6, tzinfo=timezone.utc), LocalNetwork())
    assert soon.requeue_after == 4.0 and not [a for a in soon.actions if isinstance(a, (CreateReplica, DeleteReplica))]
    assert not [c for c in soon.status["conditions"] if c["type"] == "Failed"]  # its cause may show yet
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=timezone.utc)
    first = reconcile(resource, [victim, hung], now, LocalNetwork())
    assert not [c for c in first.status["conditions"] if c["type"] == "Failed"]
    assert [(type(a), a.name, a.reason) for a in first.actions if isinstance(a, (CreateReplica, DeleteReplica))] == [
        (DeleteReplica, "demo-worker-0", "Cleanup")]
    assert first.requeue_after == STOP_REQUEUE_S
    stopped = Run("worker-0", 143, "Error", "2026-01-01T00:00:06Z", stopped=True,
                  message="\n".join([*RAISER, "terminate called without an active exception"]))
    second = reconcile(resource, [victim], now, LocalNetwork(), unobserved_failures=(stopped,))
    assert not [a for a in second.actions if isinstance(a, CreateReplica)]
    assert second.status["conditions"][-1]["type"] == "Failed"
    assert second.status["conditions"][-1]["message"].endswith(
        "failed: worker-0 raised RuntimeError: deliberate failure on rank 1.")


def test_a_pods_termination_message_reaches_the_row_and_the_core():
    from trainctl.controller.pods import observe

    record = 'trainctl-raised:v1 {"time_ns": 5, "exception": "ValueError: x", "rank": null}'
    looping = pod("demo-worker-0", {"restartCount": 1, "state": {"running": {}}, "lastState": {"terminated": {
        "exitCode": 1, "reason": "Error", "finishedAt": "2026-01-01T00:00:07Z", "message": record}}})
    assert replica_row(looping, ["Master", "Worker"]).last_message == record
    looping["metadata"]["labels"]["training.kubeflow.org/operator-name"] = "pytorchjob-controller"
    looping["spec"]["containers"] = [{"name": "pytorch"}]
    observed = observe(Job(job("Running", "")), looping)
    assert (observed.last_exit_code, observed.last_message) == (1, record)


def test_a_success_with_a_failed_worker_is_a_note_and_a_clean_success_is_none():
    failed_worker = [row("master-0", "Succeeded", 0), row("worker-0", "Failed", 2, "2026-01-01T00:00:01Z")]
    note = summarize(JobDetails(job("Succeeded", "done"), failed_worker))
    assert note.state == "Succeeded" and note.headline() == "pytorchjob/demo succeeded, but worker-0 failed: exit code 2"
    assert summarize(JobDetails(job("Succeeded", "done"), [row("master-0", "Succeeded", 0)])) is None
    assert summarize(JobDetails(job("Running", "running"), failed_worker)) is None  # still going: status says it
    retried = [row("master-0", "Succeeded", 0, restarts=2, last_exit_code=1, last_reason="Error")]
    assert summarize(JobDetails(job("Succeeded", "done"), retried)) is None  # the retry that worked clears it
    # an idle host (an MPI worker, a TrainJob's MPI node) the job stopped when it succeeded did not fail
    stopped = [row("master-0", "Succeeded", 0), row("worker-0", "Failed", 143, "2026-01-01T00:00:01Z", stopped=True)]
    assert summarize(JobDetails(job("Succeeded", "done"), stopped)) is None
    assert summarize(JobDetails(job("Failed", "master failed"), stopped)).first.replica == "worker-0"


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


def test_a_local_replica_left_waiting_to_restart_when_its_job_ended_is_not_restarted_with_its_failure_kept():
    from trainctl.backends.local.backend import replica_row as local_row

    waiting = {"name": "demo-worker-0", "rtype": "Worker", "index": 0, "pid": None, "state": "CrashLoopBackOff",
               "restarts": 2, "last_exit_code": 137, "last_reason": "Killed", "last_finished": "2026-01-01T00:00:04Z"}
    assert local_row(waiting, {}, job_finished=False).state == "CrashLoopBackOff"
    ended = local_row(waiting, {}, job_finished=True)
    assert ended.state == "Not restarted (job ended)" and ended.last_exit_code == 137
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


@pytest.mark.parametrize("exception, kind, expected", [
    ("KeyError: 'TF_CONFIG'", "pytorchjob",
     "TF_CONFIG is not set: a PyTorchJob's replicas get MASTER_PORT, MASTER_ADDR, WORLD_SIZE, RANK; "
     "TF_CONFIG is what a TFJob gets"),
    ("KeyError: 'RANK'", "tfjob", "RANK is not set: a TFJob's replicas get TF_CONFIG; RANK is what a PyTorchJob or "
                                  "XGBoostJob gets"),
    ("KeyError: 'LOCAL_RANK'", "pytorchjob", "torchrun sets LOCAL_RANK for the processes it starts"),
    ("KeyError: 'RANK'", "pytorchjob", None),  # it was set: the KeyError is about something else
    ("KeyError: 'weights'", "pytorchjob", None),  # a dict key, not an environment variable
    ("ValueError: bad", "pytorchjob", None),
])
def test_a_missing_environment_variable_is_explained_by_what_the_kind_sets(exception, kind, expected):
    from trainctl.sdk.failures import env_hint

    hint = env_hint(exception, kind)
    assert hint == expected if expected is None else expected in hint


def test_a_just_started_supervisor_has_its_grace_which_a_test_may_shorten(monkeypatch):
    """10 s before a job without a recorded supervisor is called lost; $TRAINCTL_SUPERVISOR_START_GRACE (seconds)
    shortens it, so that a test need not wait the 10 s out; anything but a number is a one-line error."""
    from datetime import timedelta

    from trainctl.backends.local import backend

    created = (datetime.now(timezone.utc) - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    resource = {"metadata": {"creationTimestamp": created}}
    monkeypatch.delenv(backend.SUPERVISOR_START_GRACE_ENV, raising=False)
    assert backend.supervisor_starting(resource, {})
    assert not backend.supervisor_starting(resource, {"supervisor_pid": 4242})  # recorded: no grace needed
    monkeypatch.setenv(backend.SUPERVISOR_START_GRACE_ENV, "1")
    assert not backend.supervisor_starting(resource, {})
    monkeypatch.setenv(backend.SUPERVISOR_START_GRACE_ENV, "soon")
    with pytest.raises(UserError, match="TRAINCTL_SUPERVISOR_START_GRACE='soon' is not a number of seconds"):
        backend.supervisor_starting(resource, {})
