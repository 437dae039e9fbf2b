"""A lost node, on the pure reconcile core (trainctl/core/nodes.py, docs/fault-tolerance.md "Node loss").

The runtime tells each replica its node and since when that node is not Ready (or that it is gone); the core
waits ``trainctl.io/node-lost-after`` seconds (default 60), then treats the replicas still running there as runs
lost to a disruption: in job scope the whole job restarts as its next attempt, in replica scope the lost one is
replaced; their pods are deleted with no grace period, backoffLimit is not spent. In job scope the replicas the
restart stops on healthy nodes get a short grace period (SURVIVOR_GRACE_S): stuck in a collective with the lost
ranks, they can save nothing in the pod's own (30 s by default).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from trainctl.core.actions import DeleteReplica, RecordEvent
from trainctl.core.network import ClusterNetwork
from trainctl.core.nodes import SURVIVOR_GRACE_S
from trainctl.core.restarts import (DEFAULT_NODE_LOST_AFTER_S, DISRUPTION, NODE_LOST_AFTER_ANNOTATION,
                                    RECORD_ANNOTATION, Record, Rules, clock)
from tests.unit.test_restarts import Runtime, pytorch, stamp


def started(scope=None, lost_after=None, **run_policy):
    """pt-master-0 and pt-worker-0 on node n1, pt-worker-1 on node n2, all running."""
    resource = pytorch("OnFailure", workers=2, scope=scope, **run_policy)
    if lost_after is not None:
        resource["metadata"]["annotations"][NODE_LOST_AFTER_ANNOTATION] = lost_after
    run = Runtime(resource, ClusterNetwork())
    run.step()
    for name, node in (("pt-master-0", "n1"), ("pt-worker-0", "n1"), ("pt-worker-1", "n2")):
        run.replicas[name] = run.with_(name, node=node)
    return run


def node_down(run, node, seconds_ago, down="NotReady"):
    since = stamp(run.now - timedelta(seconds=seconds_ago))
    for name, replica in run.replicas.items():
        if replica.node == node:
            run.replicas[name] = run.with_(name, node_down=down, node_down_since=since if down != "gone" else None)
    return since


def deletes(plan):
    return {action.name: action.grace_period for action in plan.actions if isinstance(action, DeleteReplica)}


def events(plan, reason="NodeLost"):
    return [action.message for action in plan.actions if isinstance(action, RecordEvent) and action.reason == reason]


@pytest.mark.parametrize("text, seconds", [("2", 2), ("0", 0), ("86400", 86400), ("86401", DEFAULT_NODE_LOST_AFTER_S),
                                           ("-1", DEFAULT_NODE_LOST_AFTER_S), ("1.5", DEFAULT_NODE_LOST_AFTER_S),
                                           ("²", DEFAULT_NODE_LOST_AFTER_S), ("", DEFAULT_NODE_LOST_AFTER_S),
                                           (None, DEFAULT_NODE_LOST_AFTER_S)])
def test_node_lost_after_is_read_from_its_annotation_and_a_bad_value_is_the_default(text, seconds):
    annotations = {} if text is None else {NODE_LOST_AFTER_ANNOTATION: text}
    assert Rules.of({"metadata": {"annotations": annotations}}).node_lost_after == seconds


@pytest.mark.parametrize("scope", ["job", "replica"])
def test_a_node_not_ready_within_its_grace_changes_nothing_and_looks_again_when_it_would_be_lost(scope):
    run = started(scope)
    node_down(run, "n2", 10)
    plan = run.step()
    assert deletes(plan) == {} and events(plan) == []
    assert plan.requeue_after == pytest.approx(DEFAULT_NODE_LOST_AFTER_S - 10)
    assert run.record().disruptions == 0


def test_a_node_ready_again_before_its_deadline_changes_nothing():
    run = started("job")
    node_down(run, "n2", 50)
    run.step()
    for name in run.replicas:
        run.replicas[name] = run.with_(name, node_down="", node_down_since=None)
    plan = run.step(30)  # past the deadline it had
    assert deletes(plan) == {} and plan.requeue_after is None and run.record().attempt == 0


def test_job_scope_restarts_the_whole_job_as_its_next_attempt_and_force_deletes_the_lost_pods():
    run = started("job", backoffLimit=0)
    run.replicas["pt-master-0"] = run.with_("pt-master-0", node="n2")
    since = node_down(run, "n2", 61)
    plan = run.step()
    # every replica stopped; those on the lost node with no grace period (their kubelet is gone), the survivor with a
    # short one
    assert deletes(plan) == {"pt-master-0": 0, "pt-worker-0": SURVIVOR_GRACE_S, "pt-worker-1": 0}
    cause = f"node n2 became NotReady at {clock(since)}: master-0, worker-1 lost"
    assert events(plan) == [cause]
    record = run.record()
    assert (record.attempt, record.counted, record.disruptions) == (1, 0, 1)  # backoffLimit 0, unspent
    assert record.history[-1]["cause"] == cause
    assert f"attempt 2 (restarted after {cause}) at {clock(stamp(run.now))}: a disruption, not counted" in \
        record.lines(0, Rules.of(run.resource))
    assert run.state() == "Restarting"
    # the next attempt starts whole once the old one is gone: every replica created again, with its own name
    for name in ("pt-master-0", "pt-worker-1"):
        run.gone(name)
    assert [a for a in run.step(1).actions if not isinstance(a, RecordEvent)] == []  # pt-worker-0 still stops
    run.gone("pt-worker-0")
    run.step(1)
    assert [(action.name, action.labels["trainctl.io/restart-attempt"]) for action in run.created[-3:]] == [
        ("pt-master-0", "1"), ("pt-worker-0", "1"), ("pt-worker-1", "1")]
    assert run.record().disruptions == 1


def test_replica_scope_replaces_only_the_lost_replica_and_says_the_others_may_be_stuck():
    run = started(lost_after="2", backoffLimit=0)
    since = node_down(run, "n2", 2)
    plan = run.step()
    assert deletes(plan) == {"pt-worker-1": 0}
    cause = f"node n2 became NotReady at {clock(since)}: worker-1 lost"
    assert events(plan) == [cause]
    record = run.record()
    assert (record.attempt, record.counted, record.disruptions) == (0, 0, 1)
    lines = record.lines(0, Rules.of(run.resource))
    assert any(line.startswith(f"{cause}: replaced at") and "may be stuck in a collective" in line
               and "--restart-scope job" in line for line in lines), lines
    assert "--restart-scope job" in run.message("Restarting")
    run.gone("pt-worker-1")
    run.step(1)
    assert [action.name for action in run.created[3:]] == ["pt-worker-1"]


def test_in_replica_scope_too_the_job_fails_once_its_disruptions_are_spent_naming_the_node():
    run = started(max_disruptions="0")
    node_down(run, "n2", 0, down="gone")
    run.step()
    assert run.message("Failed").endswith("allows (0): node n2 is gone: worker-1 lost.")


def test_a_node_that_is_gone_loses_its_replicas_at_once():
    run = started("job")
    node_down(run, "n2", 0, down="gone")
    plan = run.step()
    assert deletes(plan)["pt-worker-1"] == 0
    assert events(plan) == ["node n2 is gone: worker-1 lost"]


def test_a_finished_replica_on_a_lost_node_is_no_lost_run():
    run = started("job")
    run.exit("pt-worker-1", 0)
    node_down(run, "n2", 120)
    plan = run.step()
    assert events(plan) == [] and run.record().attempt == 0


def test_the_job_fails_once_its_disruptions_are_spent():
    run = started("job", max_disruptions="1")
    node_down(run, "n2", 61)
    run.step()
    for name in list(run.replicas):
        run.gone(name)
    run.step(1)
    for name, node in (("pt-master-0", "n1"), ("pt-worker-0", "n1"), ("pt-worker-1", "n2")):
        run.replicas[name] = run.with_(name, node=node)
    node_down(run, "n2", 61)
    plan = run.step(1)
    assert run.state() == "Failed"
    assert run.message("Failed") == ("Job pt has failed because it was disrupted 1 time, as many as "
                                     "trainctl.io/max-disruptions allows (1): node n2 became NotReady at "
                                     f"{clock(stamp(run.now - timedelta(seconds=61)))}: worker-1 lost.")
    assert deletes(plan)["pt-worker-1"] == 0  # a lost pod is deleted for good, with no grace period


def survivors_left(run):
    """A pass that restarted the job and died after writing the record: the survivors' pods were never deleted."""
    for name in ("pt-master-0", "pt-worker-0"):
        run.replicas[name] = run.with_(name, deleting=False)


@pytest.mark.parametrize("own, grace", [(None, SURVIVOR_GRACE_S), (30, SURVIVOR_GRACE_S), (2, 2), (0, 0)])
def test_the_survivors_of_a_node_loss_restart_stop_with_a_short_grace_on_that_pass_and_any_later_one(own, grace):
    run = started("job")
    if own is not None:
        for spec in run.resource["spec"]["pytorchReplicaSpecs"].values():
            spec["template"]["spec"]["terminationGracePeriodSeconds"] = own
    node_down(run, "n2", 61)
    plan = run.step()
    assert deletes(plan) == {"pt-master-0": grace, "pt-worker-0": grace, "pt-worker-1": 0}
    assert run.record().history[-1]["node"] == "n2"  # said by the record, not read from its cause's text
    run.gone("pt-worker-1")
    survivors_left(run)
    assert deletes(run.step(1)) == {"pt-master-0": grace, "pt-worker-0": grace}


def test_the_survivors_of_any_other_job_scope_restart_keep_their_pods_own_grace():
    run = started("job")
    run.exit("pt-worker-1", 137)  # SIGKILLed: a disruption too, but no node was lost
    plan = run.step()
    assert deletes(plan) == {"pt-master-0": None, "pt-worker-0": None, "pt-worker-1": None}
    assert "node" not in run.record().history[-1]
    run.gone("pt-worker-1")
    survivors_left(run)
    assert deletes(run.step(1)) == {"pt-master-0": None, "pt-worker-0": None}


def test_the_record_keeps_the_lost_node_and_drops_an_entry_whose_node_is_damaged():
    record = Record()
    record.restarted(DISRUPTION, "node n2 is gone: worker-1 lost", "2026-11-29T10:00:00Z", node="n2")
    kept = Record.of({"metadata": {"annotations": {RECORD_ANNOTATION: record.text()}}})
    assert kept.history == record.history and kept.history[-1]["node"] == "n2"
    damaged = record.text().replace('"node":"n2"', '"node":42')
    assert Record.of({"metadata": {"annotations": {RECORD_ANNOTATION: damaged}}}).history == []
