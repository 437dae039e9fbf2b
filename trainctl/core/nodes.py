"""Lost nodes: when a replica's node counts as lost, and how that is said.

A kubelet that stops (its machine died, its network is cut) stops updating its Node: the node lifecycle
controller sets the Node's ``Ready`` condition to ``Unknown`` after the cluster's node-monitor-grace-period, and
evicts the node's pods only minutes later (the default ``unreachable`` toleration is 300 s), through a graceful
delete that never completes, since the kubelet that would confirm it is gone. Meanwhile the pods still read
``Running``. So the runtime (the in-cluster controller, trainctl/controller/pods.py) tells each observed replica
its node and, when that node's ``Ready`` condition is not ``True``, since when (the condition's
``lastTransitionTime``), or that the Node object no longer exists; the core decides from that and the time now:

* a node not Ready for the job's ``trainctl.io/node-lost-after`` seconds (default 60, :class:`Rules`), or a Node
  that no longer exists, is *lost*: each replica still starting or running on it is a run lost to a disruption
  (trainctl/core/restarts.py: it spends none of ``backoffLimit``), and its pod is deleted with no grace period;
* a node not Ready for less than that is looked at again when it would be lost (``requeue_after``); a node Ready
  again before then changes nothing;
* in job scope, the replicas the restart stops on healthy nodes (the survivors) are deleted with a short grace period
  (:func:`survivor_grace`), on whatever pass deletes them: the record's entry of the attempt names the lost node.

docs/fault-tolerance.md, "Node loss", has the whole story and what upstream does instead.
"""

from __future__ import annotations

from datetime import datetime

from trainctl.core.observed import ObservedReplica
from trainctl.core.restarts import Rules, clock
from trainctl.core.times import parse_time

NOT_READY = "NotReady"  # what kubectl says of a node whose Ready condition is False or Unknown
GONE = "gone"  # the Node object no longer exists while a pod is still bound to it
#: [deviation] the grace period (seconds) of the survivors of a node loss: they hang in a collective with the ranks
#: that are gone, so their SIGTERM handler never runs (Python runs handlers between bytecodes; the collective blocks
#: in C) and the pod's own grace (30 s by default) only delays the next attempt; it can save nothing
SURVIVOR_GRACE_S = 5


def lost_in(replica: ObservedReplica, rules: Rules, now: datetime) -> float | None:
    """Seconds until the replica's node counts as lost (0 or less: lost now); None while its node is Ready, or
    the replica is on none. A node not Ready since a time that does not read is lost now."""
    if not replica.node or not replica.node_down:
        return None
    try:
        since = parse_time(replica.node_down_since)
    except ValueError:
        since = None
    if replica.node_down == GONE or since is None:
        return 0.0
    return rules.node_lost_after - (now - since).total_seconds()


def survivor_grace(own: object) -> int:
    """The grace period of a survivor of a node loss: :data:`SURVIVOR_GRACE_S`, or the pod template's own
    ``terminationGracePeriodSeconds`` (``own``) when that is shorter."""
    return own if type(own) is int and 0 <= own < SURVIVOR_GRACE_S else SURVIVOR_GRACE_S


def what_befell(replica: ObservedReplica) -> str:
    """``node trainctl-node-2 became NotReady at 14:02``, or ``node trainctl-node-2 is gone``."""
    if replica.node_down == GONE or not replica.node_down_since:
        return f"node {replica.node} is gone"
    return f"node {replica.node} became {NOT_READY} at {clock(replica.node_down_since)}"


def lost_cause(what: str, replicas: list[str]) -> str:
    """``node trainctl-node-2 became NotReady at 14:02: master-0, worker-1 lost``: the record's cause."""
    return f"{what}: {', '.join(replicas)} lost"
