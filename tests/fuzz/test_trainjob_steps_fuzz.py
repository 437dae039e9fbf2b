"""Fuzzing a TrainJob runtime's ``dependsOn`` (trainctl/core/trainjob.py): whatever a runtime writes there, planning
it either keeps JobSet's rule (each step names steps listed before it, Ready or Complete) or refuses it in one line;
and whatever became of the steps, the core never creates a step's first pod before what it depends on is reached."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import bounded, fuzz
from trainctl.core.actions import CreateReplica
from trainctl.core.network import ClusterNetwork
from trainctl.core.observed import ObservedReplica
from trainctl.core.reconcile import reconcile
from trainctl.core.trainjob import TrainJob, plan, with_runtime_snapshot
from trainctl.errors import UserError

pytestmark = pytest.mark.fuzz
STEPS = ("first", "second", "node")
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12), st.sampled_from(STEPS),
                    st.sampled_from(["Ready", "Complete"]))
entries = st.one_of(scalars, st.fixed_dictionaries({"name": scalars, "status": scalars}),
                    st.dictionaries(st.text(max_size=6), scalars, max_size=3))
depends_ons = st.one_of(st.none(), scalars, st.lists(entries, max_size=3))
good = st.lists(st.tuples(st.sampled_from(STEPS), st.sampled_from(["Ready", "Complete"])), max_size=2)


def runtime(depends: list) -> dict:
    jobs = []
    for name, given_depends in zip(STEPS, depends):
        job = {"name": name, "template": {"metadata": {"labels": {ANCESTOR: "trainer" if name == "node" else name}},
                                          "spec": {"template": {"spec": {"containers": [
                                              {"name": name, "image": "i", "command": ["true"]}]}}}}}
        if given_depends is not None:
            job["dependsOn"] = given_depends
        jobs.append(job)
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "rt"},
            "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": jobs}}}}


def trainjob() -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "ns", "uid": "u"},
            "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "rt"}}}


@fuzz(150)
@given(depends=st.lists(depends_ons, min_size=3, max_size=3))
def test_any_depends_on_keeps_jobsets_rule_or_is_refused_in_one_line(depends):
    with bounded():
        try:
            found = plan(TrainJob(trainjob()), runtime(depends)).depends_on
        except UserError as refused:
            assert "\n" not in str(refused) and "dependsOn" in str(refused)
            return
    for name, pairs in found.items():
        for depended, status in pairs:
            assert STEPS.index(depended) < STEPS.index(name) and status in ("Ready", "Complete")


@fuzz(100)
@given(depends=st.lists(good, min_size=3, max_size=3),
       phases=st.lists(st.sampled_from(["Pending", "Running", "Succeeded", "Failed", None]), min_size=3, max_size=3),
       ready=st.lists(st.sampled_from([True, False, None]), min_size=3, max_size=3))
def test_no_step_starts_before_what_it_depends_on_is_reached(depends, phases, ready):
    order = [[(name, status) for name, status in pairs if STEPS.index(name) < position]
             for position, pairs in enumerate(depends)]
    resource, written = trainjob(), runtime([[{"name": n, "status": s} for n, s in pairs] for pairs in order])
    if any(len(dict(pairs)) < len(pairs) for pairs in order):  # a step named twice: JobSet's list-map refuses it
        with pytest.raises(UserError):
            with_runtime_snapshot(resource, written)
        return
    with_runtime_snapshot(resource, written)
    observed = [ObservedReplica(name, 0, f"tj-{name}-0-0", phase, exit_code={"Succeeded": 0, "Failed": 1}.get(phase),
                                pod_ready=pod_ready)
                for name, phase, pod_ready in zip(STEPS, phases, ready) if phase is not None]
    by_name = {replica.rtype: replica for replica in observed}
    plan_now = reconcile(resource, observed, datetime(2026, 1, 1, tzinfo=timezone.utc), ClusterNetwork())
    for action in plan_now.actions:
        if isinstance(action, CreateReplica) and action.rtype not in by_name:  # a step's first pod
            for name, status in dict(order[STEPS.index(action.rtype)]).items():
                depended = by_name.get(name)
                assert depended is not None and (depended.phase == "Succeeded" or (
                    status == "Ready" and depended.phase == "Running" and depended.pod_ready is not False))
