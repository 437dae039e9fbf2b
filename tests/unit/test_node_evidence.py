"""A suspect node judged by the job's own evidence (issue 56; trainctl/core/nodes.py, docs/fault-tolerance.md).

The runtime tells each replica when its node's kubelet last renewed its Lease and, while a node is suspect (its
kubelet silent for two renewals, or NotReady), when each replica elsewhere last wrote a line and the job's cadence.
Survivors silent for the stall bound: the node is lost for the job at once, whatever node-lost-after says. Survivors
still writing: the job is held however long the node stays NotReady, and the record says so. No evidence: the
node-lost-after rule as before.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.unit.test_node_loss import deletes, events, node_down, started
from tests.unit.test_restarts import Runtime, pytorch, stamp
from trainctl.core.network import ClusterNetwork
from trainctl.core.nodes import (FRESH_EVIDENCE_S, MAX_STALL_S, MIN_STALL_S, RECHECK_S, SURVIVOR_GRACE_S, Evidence,
                                 stall_bound)
from trainctl.core.restarts import (DEFAULT_NODE_LOST_AFTER_S, NODE_LOSS_EVIDENCE_ANNOTATION, RECORD_ANNOTATION,
                                    Record, Rules, clock)

LEASE_S = 40  # the kubelet's default: renewed every 10 s, silent after 20 s


def silent(run, node, seconds_ago):
    """The node's kubelet last renewed its Lease ``seconds_ago``; the others just now."""
    for name, replica in run.replicas.items():
        heard = seconds_ago if replica.node == node else 0
        run.replicas[name] = run.with_(name, node_heard_at=stamp(run.now - timedelta(seconds=heard)),
                                       node_lease_s=LEASE_S)


def read(run, quiet_s, cadence_s=1.0, names=("pt-master-0", "pt-worker-0"), read_ago=0.0):
    """The survivors' last lines ``quiet_s`` before a read made ``read_ago`` seconds ago."""
    read_at = run.now - timedelta(seconds=read_ago)
    run.evidence = Evidence(read_at, {name: read_at - timedelta(seconds=quiet_s) for name in names}, cadence_s)


@pytest.mark.parametrize("scope", ["job", "replica"])
def test_a_silent_kubelet_whose_survivors_stalled_is_lost_at_once_and_the_cause_names_both(scope):
    run = started(scope, backoffLimit=0)
    silent(run, "n2", 22)
    read(run, quiet_s=MIN_STALL_S + 1)
    plan = run.step()
    assert deletes(plan)["pt-worker-1"] == 0  # no node-lost-after wait, no NotReady needed
    cause = events(plan)[0]
    latest = (run.evidence.read_at - timedelta(seconds=MIN_STALL_S + 1)).astimezone().strftime("%H:%M:%S")
    assert cause == f"node n2's lease not renewed for 22 s; master-0, worker-0 on n1 stalled since {latest}: " \
                    "worker-1 lost"
    assert run.record().disruptions == 1
    if scope == "job":
        assert deletes(plan) == {"pt-master-0": SURVIVOR_GRACE_S, "pt-worker-0": SURVIVOR_GRACE_S, "pt-worker-1": 0}
        assert run.record().history[-1]["cause"] == cause


def test_a_silent_kubelet_whose_survivors_still_write_is_held_and_looked_at_again_within_seconds():
    run = started("job")
    silent(run, "n2", 25)
    read(run, quiet_s=2)
    plan = run.step()
    assert deletes(plan) == {} and events(plan) == []
    assert plan.requeue_after <= RECHECK_S
    record = run.record()
    assert record.held == {"node": "n2", "since": stamp(run.now - timedelta(seconds=25)), "as": "silent"}
    assert record.lines(None, Rules.of(run.resource)) == [
        f"node n2 silent (its kubelet's lease not renewed) since {clock(record.held['since'])}; the job is still "
        "progressing, not restarted"]


def test_a_node_notready_far_past_node_lost_after_is_never_lost_while_the_survivors_progress_then_the_record_says():
    run = started("job")
    since = node_down(run, "n2", DEFAULT_NODE_LOST_AFTER_S * 3)
    silent(run, "n2", DEFAULT_NODE_LOST_AFTER_S * 3)
    read(run, quiet_s=0.5)
    plan = run.step()
    assert deletes(plan) == {} and run.record().attempt == 0
    assert events(plan, "NodeSuspectJobProgressing") == [
        f"node n2 NotReady since {clock(since)}; the job is still progressing, not restarted"]
    assert events(run.step(1), "NodeSuspectJobProgressing") == []  # said once, not on every pass
    for name in run.replicas:  # the kubelet is back
        run.replicas[name] = run.with_(name, node_down="", node_down_since=None, node_heard_at=stamp(run.now))
    run.evidence = None
    run.step(1)
    record = run.record()
    assert record.held["until"] == stamp(run.now)
    assert record.held_line() == f"node n2 was NotReady from {clock(since)} to {clock(stamp(run.now))}; the job kept " \
                                 "progressing, not restarted"
    assert Record.of(run.resource).held == record.held  # what the annotation keeps reads back


@pytest.mark.parametrize("case", ["no evidence", "stale evidence", "no cadence", "turned off", "parameter server",
                                  "no survivor read"])
def test_without_usable_evidence_node_lost_after_decides_as_before(case):
    resource_changes = {"turned off": {NODE_LOSS_EVIDENCE_ANNOTATION: "off"}}.get(case, {})
    run = started("job")
    run.resource["metadata"]["annotations"].update(resource_changes)
    node_down(run, "n2", 10)
    silent(run, "n2", 30)
    read(run, quiet_s=0.5, read_ago=FRESH_EVIDENCE_S + 1 if case == "stale evidence" else 0.0,
         cadence_s=None if case == "no cadence" else 1.0, names=() if case == "no survivor read" else
         ("pt-master-0", "pt-worker-0"))
    if case == "no evidence":
        run.evidence = None
    if case == "parameter server":
        run = tfjob_with_ps(run.evidence)
    plan = run.step()
    assert deletes(plan) == {} and not run.record().held  # neither held nor lost: it waits
    assert plan.requeue_after == pytest.approx(DEFAULT_NODE_LOST_AFTER_S - 10)
    plan = run.step(DEFAULT_NODE_LOST_AFTER_S - 10)
    assert "pt-worker-1" in deletes(plan) or "tf-worker-1" in deletes(plan)  # lost by time, the evidence unused


def tfjob_with_ps(evidence):
    """A TFJob with a parameter server: its workers train on while another is gone, so their progress says nothing."""
    resource = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
                "metadata": {"name": "tf", "namespace": "default", "uid": "u1", "annotations": {
                    "trainctl.io/restart-scope": "job"}},
                "spec": {"tfReplicaSpecs": {rtype: {"replicas": count, "restartPolicy": "OnFailure", "template": {
                    "spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}}}
                    for rtype, count in (("PS", 1), ("Worker", 2))}}}
    run = Runtime(resource, ClusterNetwork())
    run.step()
    since = stamp(run.now - timedelta(seconds=10))
    for name, node in (("tf-ps-0", "n1"), ("tf-worker-0", "n1"), ("tf-worker-1", "n2")):
        run.replicas[name] = run.with_(name, node=node, node_down="NotReady" if node == "n2" else "",
                                       node_down_since=since if node == "n2" else None)
    run.evidence = Evidence(run.now, {"tf-ps-0": run.now, "tf-worker-0": run.now}, 1.0)
    return run


def test_a_silent_kubelet_of_a_node_still_ready_without_evidence_waits_for_its_ready_condition():
    run = started("job")
    silent(run, "n2", 30)
    plan = run.step()
    assert deletes(plan) == {} and plan.requeue_after == RECHECK_S


def test_survivors_read_before_they_could_have_stalled_decide_nothing_yet():
    """The read is older than the kubelet's silence (a read taken before it, reused): no verdict from it."""
    run = started("job")
    silent(run, "n2", 21)
    run.evidence = Evidence(run.now - timedelta(seconds=22), {"pt-master-0": run.now - timedelta(seconds=40)}, 1.0)
    assert deletes(run.step()) == {}


@pytest.mark.parametrize("cadence, bound", [(0.0, MIN_STALL_S), (1.0, MIN_STALL_S), (4.0, 12.0), (60.0, 180.0),
                                            (3600.0, MAX_STALL_S)])
def test_the_stall_bound_is_three_cadences_within_its_limits(cadence, bound):
    assert stall_bound(cadence) == bound


@pytest.mark.parametrize("held", [{"node": 1, "since": "x", "as": "NotReady"}, "text", {"node": "n2"}, [1],
                                  {"node": "n2", "since": "s", "as": "x" * 5000, "until": 3}])
def test_a_damaged_hold_in_the_annotation_reads_as_none_or_bounded(held):
    """Anyone who may edit the job may write the annotation: what does not read is no hold, a long text is cut."""
    data = {**json.loads(Record().text()), "held": held}
    record = Record.of({"metadata": {"annotations": {RECORD_ANNOTATION: json.dumps(data)}}})
    assert record.held == ({"node": "n2", "since": "s", "as": "x" * 300} if isinstance(held, dict) and
                           held.get("node") == "n2" and "as" in held else {})
    assert Record.of({"metadata": {"annotations": {RECORD_ANNOTATION: record.text()}}}).held == record.held


def test_the_next_attempt_after_a_node_loss_avoids_that_node_and_keeps_the_pods_own_terms():
    """The lost node is still Ready for the scheduler until the node controller's grace period is over: the restarted
    pods went back to it and waited there (seen on two real nodes with upstream's 40 s grace). A required node
    affinity on the Node's name keeps them off, added to each of the template's own terms (they are ORed)."""
    run = started("job", backoffLimit=0)
    own = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}
    template = run.resource["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    template["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [own]}}}
    silent(run, "n2", 22)
    read(run, quiet_s=MIN_STALL_S + 1)
    run.step()
    run.evidence = None
    for name in list(run.replicas):
        run.gone(name)
    run.step(1)
    not_n2 = {"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}
    terms = {action.name: action.pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] for action in run.created[-3:]}
    assert terms == {"pt-master-0": [{"matchFields": [not_n2]}], "pt-worker-0": [{**own, "matchFields": [not_n2]}],
                     "pt-worker-1": [{**own, "matchFields": [not_n2]}]}
    assert "affinity" not in run.resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]  # a copy


def test_a_job_that_ends_while_held_closes_the_hold():
    """Status of a job that finished while its node was still NotReady says the hold was, not that it is."""
    run = started("job")
    node_down(run, "n2", 30)
    read(run, quiet_s=0.5)
    run.step()
    assert "until" not in run.record().held
    for name in list(run.replicas):
        run.exit(name, 0)
    run.step(5)
    assert run.state() == "Succeeded" and run.record().held["until"] == stamp(run.now)
    assert "kept progressing, not restarted" in run.record().held_line()


def test_a_survivor_whose_containers_ended_is_removed_at_once_for_the_next_attempt():
    """After a node-loss restart the kubelet kept a stopped survivor's pod object 10 s (once 57 s) after its
    processes ended, and the next attempt waits for its name: a survivor that has ended is force-deleted; one still
    running keeps its short grace; after a restart for any other cause nothing changes."""
    run = started("job", backoffLimit=0)
    silent(run, "n2", 22)
    read(run, quiet_s=MIN_STALL_S + 1)
    run.step()
    run.evidence = None
    run.gone("pt-worker-1")
    assert deletes(run.step(1)) == {}  # terminating with their grace: nothing more yet
    run.replicas["pt-worker-0"] = run.with_("pt-worker-0", phase="Failed", exit_code=137)
    assert deletes(run.step(1)) == {"pt-worker-0": 0}
    run.gone("pt-worker-0")
    run.replicas["pt-master-0"] = run.with_("pt-master-0", phase="Failed", exit_code=137)
    assert deletes(run.step(1)) == {"pt-master-0": 0}


def test_after_a_restart_for_another_cause_an_ended_pod_waits_for_the_kubelet():
    run = started("job", backoffLimit=3)
    run.exit("pt-worker-1", 1)
    run.step()
    assert run.record().attempt == 1
    run.replicas["pt-worker-0"] = run.with_("pt-worker-0", phase="Failed", exit_code=143)
    assert "pt-worker-0" not in deletes(run.step(1))
