"""``trainctl status``'s Kueue lines for a queued job, as pure functions of the job and its Workload."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from trainctl.cli.status import kueue_lines


def queued(age: timedelta, suspend: bool = True) -> dict:
    created = (datetime.now(timezone.utc) - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": "j", "namespace": "n", "uid": "u", "creationTimestamp": created,
                         "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
            "spec": {"runPolicy": {"suspend": suspend}}}


def client_with(workload: dict | None):
    return SimpleNamespace(backend=SimpleNamespace(kueue_workload=lambda resource: workload))


def test_a_fresh_queued_job_without_workload_only_waits():
    assert kueue_lines(client_with(None), queued(timedelta(seconds=5))) == [
        "waiting for admission by Kueue (LocalQueue team-a)"]


def test_no_workload_after_a_minute_points_at_the_integration():
    lines = kueue_lines(client_with(None), queued(timedelta(minutes=2)))
    assert len(lines) == 2 and "no Kueue Workload after a minute" in lines[1] and "schedulers.md" in lines[1]


def test_an_admitted_or_unqueued_job_has_no_kueue_lines():
    assert kueue_lines(client_with(None), queued(timedelta(minutes=2), suspend=False)) == []
    plain = queued(timedelta(minutes=2))
    plain["metadata"]["labels"] = {}
    assert kueue_lines(client_with(None), plain) == []
