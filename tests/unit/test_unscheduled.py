"""A Pending pod the scheduler cannot place, as trainctl reads it (its PodScheduled condition) and shows it: the
replica's reason and for how long, the job's summary beside its state, the wait's line (issue 54, 6)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from trainctl.backends.base import ReplicaRow
from trainctl.kube.pods import PodStatus

SAYS = "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints."


def ago(minutes: int) -> str:
    return (datetime.now(timezone.utc) - timedelta(minutes=minutes, seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, status: dict) -> dict:
    return {"metadata": {"name": name, "labels": {"training.kubeflow.org/replica-type": "worker",
                                                  "training.kubeflow.org/replica-index": name[-1]}},
            "spec": {}, "status": status}


def unplaced(minutes: int = 8, message: str = SAYS) -> dict:
    return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                "message": message, "lastTransitionTime": ago(minutes)}]}


def job(workers: int) -> dict:
    spec = {"template": {"spec": {"containers": [{"name": "pytorch", "image": "a:1"}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
            "spec": {"pytorchReplicaSpecs": {"Master": {**spec, "replicas": 1}, "Worker": {**spec, "replicas": workers}}}}


def rows(waiting: int, minutes: int = 8) -> list[ReplicaRow]:
    from trainctl.backends.kube.backend import replica_row

    running = pod("j-master-0", {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}],
                                 "containerStatuses": [{"name": "pytorch", "state": {"running": {}}}]})
    return [replica_row(running, ["Master", "Worker"])] + [
        replica_row(pod(f"j-worker-{index}", unplaced(minutes)), ["Master", "Worker"]) for index in range(waiting)]


def test_a_pending_pods_false_podscheduled_condition_is_the_schedulers_word():
    condition = PodStatus(unplaced()).unscheduled()
    assert condition["reason"] == "Unschedulable" and condition["message"] == SAYS
    assert PodStatus({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}).unscheduled() == {}
    assert PodStatus({"phase": "Pending"}).unscheduled() == {}  # the scheduler has not looked yet
    assert PodStatus({**unplaced(), "phase": "Running"}).unscheduled() == {}  # a stale condition of a placed pod


def test_the_replica_row_carries_the_reason_the_message_and_since_when():
    row = rows(1)[1]
    assert (row.state, row.reason, row.unscheduled) == ("Pending", "Unschedulable", f"Unschedulable: {SAYS}")
    assert row.unscheduled_since is not None and rows(1)[0].unscheduled == ""


def test_the_job_summary_counts_the_replicas_running_and_those_unscheduled_for_how_long():
    from trainctl.sdk.display import unscheduled

    waiting = unscheduled(job(3), rows(3))
    assert waiting.text() == "1/4 replicas running; 3 unschedulable for 8m"
    assert waiting.text(why=True) == f"1/4 replicas running; 3 unschedulable for 8m: Unschedulable: {SAYS}"
    assert unscheduled(job(3), rows(0)) is None


def test_status_shows_for_how_long_in_the_reason_and_the_message_once_for_the_replicas_it_names():
    from trainctl.cli.status import reason_cell, unscheduled_hints

    assert reason_cell(rows(1, minutes=12)[1]) == "Unschedulable for 12m"
    hints = unscheduled_hints(rows(3))
    assert len(hints) == 1 and hints[0].startswith("j-worker-0, j-worker-1, j-worker-2: cannot be scheduled ")
    assert SAYS in hints[0]


def running(active: int) -> dict:
    return {**job(3), "status": {"conditions": [{"type": "Running", "status": "True"}],
                                 "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": active - 1}}}}


def test_the_waits_plain_lines_say_it_once_per_change_not_per_minute(capsys, monkeypatch):
    from trainctl.sdk import progress
    from trainctl.sdk.display import unscheduled
    from trainctl.sdk.progress import ProgressPeek, UnscheduledPeek, plain_lines

    monkeypatch.setattr(progress, "UNSCHEDULED_PEEK_SECONDS", 0.0)  # read at every poll
    minutes = [8]
    peek = UnscheduledPeek(lambda: unscheduled(job(3), rows(3, minutes[0])))
    report = plain_lines("pytorchjob/j", ProgressPeek(None), peek)
    report(running(1))
    minutes[0] = 9  # a minute on: the same replicas, the same reason
    report(running(1))
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["pytorchjob/j: Running (Master 1 active)",
                     f"pytorchjob/j: 1/4 replicas running; 3 unschedulable for 8m: Unschedulable: {SAYS}"]


def test_the_replicas_are_read_only_while_fewer_are_active_than_the_job_has_and_not_at_every_poll():
    from trainctl.sdk.progress import ProgressPeek, UnscheduledPeek, live_line

    reads = []
    peek = UnscheduledPeek(lambda: reads.append(1))
    text = live_line("pytorchjob/j", None, ProgressPeek(None), peek)
    text(running(4))
    assert reads == []  # every replica active: nothing to look for
    for _ in range(3):
        text(running(1))
    assert reads == [1]  # then once per UNSCHEDULED_PEEK_SECONDS


def test_the_live_line_says_why_beside_the_state():
    from trainctl.sdk.display import unscheduled
    from trainctl.sdk.progress import ProgressPeek, UnscheduledPeek, live_line

    text = live_line("pytorchjob/j", None, ProgressPeek(None),
                     UnscheduledPeek(lambda: unscheduled(job(3), rows(3))))
    line = text(running(1))
    assert line.startswith("pytorchjob/j: Running (Master 1 active) 0s | 1/4 replicas running; 3 unschedulable "
                           f"for 8m: Unschedulable: {SAYS}")
