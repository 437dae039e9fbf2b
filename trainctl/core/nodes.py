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

**The job's own evidence (issue 56).** A node's Ready condition leaves True only after the node controller's grace
period (40 s upstream), and the wait above comes on top. A training job knows sooner: its ranks meet in collectives,
so when a node dies the ranks elsewhere stop at their next one. The runtime also tells each replica when its node's
kubelet last renewed its Lease (``node_heard_at``: renewed every quarter of the lease's duration, 10 s by default),
and hands the core :class:`Evidence`: when each replica on another node last wrote a line, read just now, and the
job's cadence (the longest recent gap between two lines of output). Then a node whose kubelet went *silent* (two
renewals missed) or that left Ready is judged by the job (:func:`judge`):

* the replicas elsewhere (the survivors) have been silent for :func:`stall_bound` (3 cadences, 10 s to 5 min) as
  read after the node went silent: the node is lost for this job at once, whatever ``node-lost-after`` says, and the
  cause names both facts (``node n2's lease not renewed for 22 s; master-0, worker-0 on n1 stalled since 14:02:05``);
* the survivors still write: the job is *held* (never lost, however long the node stays NotReady: a kubelet that
  merely stopped talking to the API server costs a healthy job nothing), looked at again within seconds, and the
  record says so for ``status`` (:meth:`trainctl.core.restarts.Record.hold`);
* no evidence (the job never wrote a line, every replica is on that node, the read failed or is stale, the job's
  ranks do not meet in collectives (a parameter server's), or ``trainctl.io/node-loss-evidence: "off"``): the
  ``node-lost-after`` rule above.

docs/fault-tolerance.md, "Node loss", has the whole story and what upstream does instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from trainctl.core.observed import ObservedReplica
from trainctl.core.restarts import Rules, clock
from trainctl.core.times import readable_time, rfc3339

NOT_READY = "NotReady"  # what kubectl says of a node whose Ready condition is False or Unknown
GONE = "gone"  # the Node object no longer exists while a pod is still bound to it
#: [deviation] the grace period (seconds) of the survivors of a node loss: they hang in a collective with the ranks
#: that are gone, so their SIGTERM handler never runs (Python runs handlers between bytecodes; the collective blocks
#: in C) and the pod's own grace (30 s by default) only delays the next attempt; it can save nothing
SURVIVOR_GRACE_S = 5
#: a kubelet renews its node's Lease every quarter of the lease's duration; silent once two renewals are missed
SILENT_LEASE_FRACTION = 0.5
DEFAULT_LEASE_S = 40  # the kubelet's nodeLeaseDurationSeconds, when a Lease says none
#: how long the survivors may go without a line before the job is stalled with the node: STALL_CADENCES times the
#: job's own cadence, within these bounds (a job printing every 0.1 s is not stalled by a 1 s pause; one that
#: prints once a minute is given minutes)
STALL_CADENCES, MIN_STALL_S, MAX_STALL_S = 3, 10.0, 300.0
#: evidence read longer ago than this is none: the runtime reads afresh on every pass while a node is suspect, and
#: the core looks again within :data:`RECHECK_S`
FRESH_EVIDENCE_S, RECHECK_S = 15.0, 5.0


@dataclass(frozen=True)
class Evidence:
    """What the runtime read of a job's output while one of its nodes was suspect: when each replica's log last had a
    line (replica (pod) name -> time; only replicas whose node answers), read at ``read_at``, and the job's cadence,
    the longest recent gap between two of its lines (seconds; None: not known yet)."""

    read_at: datetime
    last_output: Mapping[str, datetime] = field(default_factory=dict)
    cadence_s: float | None = None


@dataclass(frozen=True)
class Verdict:
    """What the core makes of one suspect node for one job: ``lost`` (its replicas are runs lost to a disruption),
    ``why`` (the cause's first part), ``recheck`` (look again in that many seconds; None: no need), ``held`` (the
    node is suspect but the job progresses: what the record keeps, :meth:`Record.hold`)."""

    lost: bool
    why: str
    recheck: float | None = None
    held: dict | None = None


def down_since(replica: ObservedReplica) -> datetime | None:
    """Since when the replica's node is NotReady (None: it is Ready, gone, or says no time that reads)."""
    if not replica.node_down or replica.node_down == GONE:
        return None
    return readable_time(replica.node_down_since)


def silent_since(replica: ObservedReplica, now: datetime) -> datetime | None:
    """When the replica's node's kubelet was last heard, once it has missed two renewals of its Lease; else None."""
    heard = readable_time(replica.node_heard_at)
    lease = replica.node_lease_s if replica.node_lease_s and replica.node_lease_s > 0 else DEFAULT_LEASE_S
    if heard is None or (now - heard).total_seconds() < lease * SILENT_LEASE_FRACTION:
        return None
    return heard


def suspect(replica: ObservedReplica, now: datetime) -> bool:
    """Whether the replica's node is gone, NotReady or silent."""
    return bool(replica.node) and (bool(replica.node_down) or silent_since(replica, now) is not None)


def stall_bound(cadence_s: float) -> float:
    """How long a job with this cadence may be silent before it counts as stalled."""
    return min(MAX_STALL_S, max(MIN_STALL_S, STALL_CADENCES * cadence_s))


def judge(observed: list[ObservedReplica], rules: Rules, now: datetime, evidence: Evidence | None,
          lockstep: bool, name_of: Callable[[ObservedReplica], str] = lambda replica: replica.name) \
        -> dict[str, Verdict]:
    """A verdict for each suspect node of the job's replicas (see the module docstring). ``lockstep``: the job's ranks
    meet in collectives, so the survivors' progress speaks for every rank; ``name_of``: a replica as the cause names
    it (``worker-1``)."""
    nodes = sorted({r.node for r in observed if suspect(r, now)})
    survivors = [r for r in observed if r.node and r.node not in nodes and r.phase == "Running" and r.active]
    usable = evidence if lockstep and rules.use_evidence and fresh(evidence, now) else None
    return {node: judged(node, [r for r in observed if r.node == node], survivors, rules, now, usable, name_of)
            for node in nodes}


def fresh(evidence: Evidence | None, now: datetime) -> bool:
    return evidence is not None and evidence.cadence_s is not None and \
        abs((now - evidence.read_at).total_seconds()) <= FRESH_EVIDENCE_S


def judged(node: str, on_node: list[ObservedReplica], survivors: list[ObservedReplica], rules: Rules, now: datetime,
           evidence: Evidence | None, name_of: Callable[[ObservedReplica], str]) -> Verdict:
    first = on_node[0]
    down, silent = down_since(first), silent_since(first, now)
    if first.node_down == GONE or (first.node_down and down is None):
        return Verdict(True, what_befell(first))  # gone, or NotReady since a time that does not read: lost now
    since = min(moment for moment in (down, silent) if moment is not None)
    heard = [r for r in survivors if evidence and r.name in evidence.last_output]
    verdict = by_evidence(node, first, since, heard, evidence, now, name_of) if evidence and heard else None
    return verdict or by_time(first, rules, now)


def by_evidence(node: str, first: ObservedReplica, since: datetime, heard: list[ObservedReplica], evidence: Evidence,
                now: datetime, name_of: Callable[[ObservedReplica], str]) -> Verdict | None:
    """The verdict the survivors' output (``heard``: those whose last line was read) gives; None when it gives none
    yet (read before the node went quiet)."""
    bound = stall_bound(evidence.cadence_s or 0.0)
    latest = max(evidence.last_output[r.name] for r in heard)
    quiet = (evidence.read_at - latest).total_seconds()
    if quiet < bound:
        what = NOT_READY if first.node_down else "silent"
        return Verdict(False, "", recheck=min(RECHECK_S, max(1.0, bound - quiet)),
                       held={"node": node, "since": rfc3339(since), "as": what})
    if evidence.read_at < since:
        return None
    where = sorted({r.node for r in heard})
    return Verdict(True, f"{what_is_wrong(first, now)}; {', '.join(name_of(r) for r in heard)} on {', '.join(where)} "
                         f"stalled since {latest.astimezone().strftime('%H:%M:%S')}")


def by_time(first: ObservedReplica, rules: Rules, now: datetime) -> Verdict:
    """``node-lost-after``'s verdict: lost once the node has been NotReady that long; a silent node that is still Ready
    waits for its Ready condition."""
    since = down_since(first)
    if since is None:
        return Verdict(False, "", recheck=RECHECK_S)
    left = rules.node_lost_after - (now - since).total_seconds()
    return Verdict(True, what_befell(first)) if left <= 0 else Verdict(False, "", recheck=left)


def what_is_wrong(replica: ObservedReplica, now: datetime) -> str:
    """``node n2's lease not renewed for 22 s``, or ``node n2 became NotReady at 14:02``."""
    heard = silent_since(replica, now)
    if heard is not None:
        return f"node {replica.node}'s lease not renewed for {int((now - heard).total_seconds())} s"
    return what_befell(replica)


def avoid_node(spec: dict, node: str) -> None:
    """The pod asks the scheduler for any node but ``node`` (a required node affinity on the Node's name, added to
    each of the pod's own terms): a node lost by the job's evidence is still Ready for the scheduler until the node
    controller's grace period is over, and the next attempt's pods went back to it, to wait there for ever. A spec
    whose affinity is not the API's shape is left as it is (the API server refuses it, naming the field)."""
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {}) if isinstance(affinity, dict) else None
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {}) \
        if isinstance(node_affinity, dict) else None
    terms = (required.get("nodeSelectorTerms") or [{}]) if isinstance(required, dict) else None
    if not isinstance(terms, list) or not all(isinstance(term, dict) for term in terms):
        return
    not_there = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    required["nodeSelectorTerms"] = [{**term, "matchFields": [*(term.get("matchFields") or []), not_there]}
                                     for term in terms]


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
