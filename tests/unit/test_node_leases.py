"""trainctl/controller/leases.py: when each node's kubelet was last heard, by the controller's own clock, and which
nodes went silent (two renewals of their Lease missed) or spoke again (issue 56)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from trainctl.controller.leases import NodeLeases, cached_lease
from trainctl.core.times import rfc3339


def lease(node: str, renewed: datetime | str | None, seconds: object = 40, version: str = "1") -> dict:
    spec = {"leaseDurationSeconds": seconds, "holderIdentity": node, "acquireTime": "x"}
    if renewed is not None:
        spec["renewTime"] = renewed if isinstance(renewed, str) else renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"metadata": {"name": node, "namespace": "kube-node-lease", "resourceVersion": version,
                         "managedFields": [{"manager": "kubelet"}]}, "spec": spec}


def test_a_lease_unrenewed_for_half_its_duration_is_a_silent_node_until_it_is_renewed():
    told: list[str] = []
    leases = NodeLeases(None, told.append)
    now = datetime.now(timezone.utc)
    leases.on_lease("ADDED", cached_lease(lease("n1", now)))
    leases.on_lease("ADDED", cached_lease(lease("n2", now - timedelta(seconds=25))))  # seen first: its renewal time
    assert leases.silent == {"n2"} and told == ["n2"]
    heard, seconds = leases.heard_at("n2")
    assert seconds == 40 and abs((now - timedelta(seconds=25)) - datetime.fromisoformat(heard)).total_seconds() < 1
    leases.on_lease("MODIFIED", cached_lease(lease("n2", now - timedelta(seconds=24), version="2")))
    assert leases.silent == set() and told == ["n2", "n2"]  # renewed: heard now, whatever time the node wrote
    assert abs((datetime.now(timezone.utc) - datetime.fromisoformat(leases.heard_at("n2")[0])).total_seconds()) < 2
    leases.look()
    assert told == ["n2", "n2"]  # nothing changed since: nothing said


def test_a_node_clock_ahead_a_short_lease_and_what_does_not_read():
    leases = NodeLeases(None, lambda node: None)
    ahead = datetime.now(timezone.utc) + timedelta(hours=1)
    leases.on_lease("ADDED", cached_lease(lease("ahead", ahead)))
    assert datetime.fromisoformat(leases.heard_at("ahead")[0]) <= datetime.now(timezone.utc)  # never in the future
    leases.on_lease("ADDED", cached_lease(lease("short", datetime.now(timezone.utc) - timedelta(seconds=6), 10)))
    leases.on_lease("ADDED", cached_lease(lease("odd", "yesterday", seconds="40")))
    leases.on_lease("ADDED", cached_lease(lease("none", None)))
    leases.look()
    assert leases.silent == {"short"}  # 10 s lease: silent after 5 s
    assert leases.heard_at("odd")[1] == 40 and leases.heard_at("none") == (None, None)
    leases.on_lease("DELETED", cached_lease(lease("short", None)))
    assert leases.heard_at("short") == (None, None)
    assert cached_lease(lease("n", ahead)) == {
        "metadata": {"name": "n", "namespace": "kube-node-lease", "resourceVersion": "1"},
        "spec": {"renewTime": rfc3339(ahead).replace("Z", ahead.strftime(".%fZ")), "leaseDurationSeconds": 40}}
