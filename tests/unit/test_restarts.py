"""Every rule of restarts (trainctl/core/restarts.py, docs/fault-tolerance.md), on the pure reconcile core.

The scope (one replica, or the whole job as its next attempt), the budget (``backoffLimit`` counts restarts
whatever the policy; disruptions do not spend it, up to their own limit; listed exit codes are retried
whatever the policy), the classes (a signal, OOM, eviction, a deleted pod: disruptions; an exception in job
scope: not retried), preemption (a resume after a suspend is the next attempt), and the record kept in the
job's annotation, which the status and list show.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from trainctl.core import checkpoint_volume
from trainctl.core.actions import CreateReplica, DeleteReplica
from trainctl.core.network import ClusterNetwork, LocalNetwork
from trainctl.core.observed import ObservedReplica
from trainctl.core.reconcile import CAUSE_WAIT_S, reconcile
from trainctl.core.restarts import (ATTEMPT_LABEL, COUNTED, DEFAULT_MAX_DISRUPTIONS, DISRUPTION, HISTORY,
                                    PERMANENT, PREEMPTION, RECORD_ANNOTATION, Record, Rules, cause_text,
                                    exit_codes, failure_class)
from tests.unit.test_env_contract import job

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
GLOO_LOSS = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
             "[127.0.0.1]:1234")
TRACEBACK = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nValueError: bad batch"


class Runtime:
    """Drives a job through the core as a runtime does: annotations written first, then the actions, then the
    status; a created replica runs with the attempt its labels name; in a cluster a deleted pod lingers,
    terminating, until :meth:`gone`."""

    def __init__(self, resource, network=None):
        self.resource, self.network = resource, network or LocalNetwork()
        self.replicas: dict[str, ObservedReplica] = {}
        self.now = T0
        self.created: list[CreateReplica] = []
        self.evidence = None  # what the runtime read of the job's output while a node is suspect (core/nodes.py)

    def step(self, seconds: float = 0.0):
        self.now += timedelta(seconds=seconds)
        plan = reconcile(self.resource, list(self.replicas.values()), self.now, self.network, evidence=self.evidence)
        if plan.annotations is not None:
            metadata = self.resource["metadata"]
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **plan.annotations}
        for action in plan.actions:
            if isinstance(action, CreateReplica):
                self.created.append(action)
                self.replicas[action.name] = ObservedReplica(action.rtype, action.index, action.name, "Running",
                                                             attempt=int(action.labels.get(ATTEMPT_LABEL, 0)))
            elif isinstance(action, DeleteReplica):
                if self.network.cluster and action.name in self.replicas:
                    self.replicas[action.name] = self.with_(action.name, deleting=True)
                else:
                    self.replicas.pop(action.name, None)
        self.resource["status"] = plan.status
        return plan

    def with_(self, name, **changes):
        replica = self.replicas[name]
        return ObservedReplica(**{**replica.__dict__, **changes})

    def exit(self, name, code, **changes):
        phase = "Succeeded" if code == 0 else "Failed"
        self.replicas[name] = self.with_(name, phase=phase, exit_code=code, finished_at=stamp(self.now), **changes)

    def gone(self, name):
        self.replicas.pop(name)

    def record(self) -> Record:
        return Record.of(self.resource)

    def state(self):
        true = [c["type"] for c in self.resource["status"]["conditions"] if c["status"] == "True"]
        return next((t for t in ("Succeeded", "Failed") if t in true), true[-1])

    def message(self, ctype):
        return next(c["message"] for c in self.resource["status"]["conditions"] if c["type"] == ctype)

    def starts(self, name):
        return [action for action in self.created if action.name == name]


def stamp(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pytorch(restart="OnFailure", workers=1, scope=None, retry=None, max_disruptions=None, **run_policy):
    resource = job("PyTorchJob", "pt", {"Master": 1, "Worker": workers})
    for spec in resource["spec"]["pytorchReplicaSpecs"].values():
        spec["restartPolicy"] = restart
    resource["spec"]["runPolicy"] = run_policy
    annotations = {"trainctl.io/restart-scope": scope, "trainctl.io/retry-on-exit-codes": retry,
                   "trainctl.io/max-disruptions": max_disruptions}
    resource["metadata"]["annotations"] = {key: value for key, value in annotations.items() if value is not None}
    return resource


# ---- the rules, read from annotations ----------------------------------------------------------------

def test_rules_come_from_annotations_and_a_garbled_one_is_the_default():
    assert Rules.of(pytorch(scope="job", retry="42,3", max_disruptions="2")) == Rules("job", frozenset({3, 42}), 2)
    assert Rules.of(pytorch(scope="everything", retry="3,x", max_disruptions="-1")) == \
        Rules("replica", frozenset(), DEFAULT_MAX_DISRUPTIONS)
    assert Rules.of({"metadata": {"annotations": None}}) == Rules()


@pytest.mark.parametrize("text, codes", [("3", [3]), (" 3, 42 ,3", [3, 42]), ("255", [255]), ("0", None),
                                         ("256", None), ("", None), ("3,", None), ("-1", None), (3, None)])
def test_exit_codes(text, codes):
    assert exit_codes(text) == codes


@pytest.mark.parametrize("code, reason, disruption, policy, raised, scope, expected", [
    (137, "Error", "", "OnFailure", False, "replica", DISRUPTION),  # a signal
    (143, "", "", "ExitCode", False, "job", DISRUPTION),
    (1, "OOMKilled", "", "OnFailure", False, "replica", DISRUPTION),
    (None, "", "evicted", "ExitCode", False, "job", DISRUPTION),
    (137, "", "", "Never", False, "job", PERMANENT),  # Never restarts nothing ...
    (3, "", "", "Never", False, "job", COUNTED),  # ... but a listed code
    (3, "", "", "ExitCode", False, "replica", COUNTED),  # listed: whatever the policy
    (3, "", "", "OnFailure", True, "job", COUNTED),  # listed wins over an exception too
    (1, "", "", "OnFailure", True, "job", PERMANENT),  # an exception is not retried in job scope
    (1, "", "", "OnFailure", True, "replica", COUNTED),  # in replica scope the policy decides, as upstream
    (1, "", "", "OnFailure", False, "job", COUNTED),
    (1, "", "", "Always", False, "job", COUNTED),
    (1, "", "", "ExitCode", False, "job", PERMANENT),
    (255, "", "", "ExitCode", False, "job", COUNTED),  # retryable, no signal
    (None, "", "", "ExitCode", False, "job", COUNTED),  # no exit code: upstream's sentinel is retryable
])
def test_failure_classes(code, reason, disruption, policy, raised, scope, expected):
    rules = Rules(scope, frozenset({3}))
    assert failure_class(code, reason, disruption, policy, rules, raised=raised) == expected


def test_cause_text_names_the_replica_and_what_befell_it():
    assert cause_text("worker-1", 137, "OOMKilled") == "worker-1: exit 137, OOMKilled"
    assert cause_text("worker-1", 137, "Killed") == "worker-1: exit 137, SIGKILL"
    assert cause_text("worker-1", 3, "Error") == "worker-1: exit 3"
    assert cause_text("worker-1", None, "", "its pod was deleted") == "worker-1: its pod was deleted"


# ---- the record -----------------------------------------------------------------------------------------

def test_the_record_round_trips_and_keeps_the_last_attempts_only():
    record = Record()
    for attempt in range(HISTORY + 5):
        record.restarted(COUNTED if attempt % 2 else DISRUPTION, f"worker-0: exit {attempt}", stamp(T0))
    record.preempted(stamp(T0), stamp(T0 + timedelta(minutes=18)))
    again = Record.of({"metadata": {"annotations": {RECORD_ANNOTATION: record.text()}}})
    assert again == record and len(again.history) == HISTORY
    assert (again.attempt, again.counted, again.disruptions, again.preemptions) == (HISTORY + 6, 7, 8, 1)
    assert again.history[-1]["class"] == PREEMPTION


@pytest.mark.parametrize("text", ["{", "[]", '{"attempt": -3, "counted": "9", "history": [1, {"attempt": "x"}]}',
                                  json.dumps({"attempt": 2**40}), "x" * 100_000])
def test_a_damaged_record_reads_as_counts_it_can_trust(text):
    record = Record.of({"metadata": {"annotations": {RECORD_ANNOTATION: text}}})
    assert record.attempt == 0 and record.counted == 0 and record.history == []


def test_restarts_counted_in_status_before_the_record_existed_carry_over():
    resource = {"metadata": {}, "status": {"replicaStatuses": {"Worker": {"restarts": 2}, "Master": {"restarts": 1}}}}
    assert Record.of(resource).counted == 3


def test_status_lines_say_each_attempt_and_the_budgets():
    record = Record()
    record.restarted(DISRUPTION, "worker-1: exit 137, OOMKilled", stamp(T0))
    record.restarted(COUNTED, "worker-1: exit 3", stamp(T0))
    record.preempted("2026-11-22T14:02:00Z", "2026-11-22T14:20:00Z")
    lines = record.lines(3, Rules("job"))
    assert lines[0].startswith("attempt 2 (restarted after worker-1: exit 137, OOMKilled) at ")
    assert lines[0].endswith("a disruption, not counted") and lines[1].endswith(": counted")
    assert lines[2].startswith("preempted at ") and lines[2].endswith(", attempt 4")
    assert ", resumed at " in lines[2]
    assert lines[3] == ("restarts: 1 counted (backoffLimit 3), 1 after disruptions (at most 10), 1 after "
                        "preemptions; job scope")
    assert Record().lines(3, Rules()) == []


# ---- replica scope: upstream's behaviour, with a budget that counts what it should ------------------------

def test_a_signal_restarts_a_replica_without_spending_the_budget():
    run = Runtime(pytorch("OnFailure", backoffLimit=0))
    run.step()
    run.exit("pt-worker-0", 137)
    plan = run.step()
    assert [a.name for a in plan.actions if isinstance(a, DeleteReplica) and a.reason == "Restart"] == ["pt-worker-0"]
    assert run.state() == "Restarting" and (run.record().counted, run.record().disruptions) == (0, 1)
    assert run.record().attempt == 0  # one replica restarted: the job's attempt is the same


@pytest.mark.parametrize("policy, retry", [("OnFailure", None), ("Always", None), ("ExitCode", "3"), ("Never", "3")])
@pytest.mark.parametrize("scope", ["replica", "job"])
def test_backoff_limit_1_and_exit_3_every_time_fails_after_exactly_two_runs(policy, retry, scope):
    run = Runtime(pytorch(policy, scope=scope, retry=retry, backoffLimit=1))
    for _ in range(10):
        run.step()
        if run.state() == "Failed":
            break
        if run.replicas["pt-worker-0"].phase == "Running":
            run.exit("pt-worker-0", 3)
    assert run.state() == "Failed" and "backoff limit" in run.message("Failed")
    assert len(run.starts("pt-worker-0")) == 2 and run.record().counted == 1


def test_exit_code_without_the_code_listed_fails_at_once():
    run = Runtime(pytorch("ExitCode", backoffLimit=3, retry="4"))
    run.step()
    run.exit("pt-worker-0", 3)
    run.step()
    assert run.state() == "Failed" and len(run.starts("pt-worker-0")) == 1


def test_disruptions_have_their_own_limit():
    run = Runtime(pytorch("OnFailure", backoffLimit=0, max_disruptions="2"))
    states = []
    for _ in range(3):
        run.step()
        run.exit("pt-worker-0", 137)
        run.step()
        states.append(run.state())
    assert states == ["Restarting", "Restarting", "Failed"] and "disrupted 2 times" in run.message("Failed")


def test_an_evicted_pod_is_a_disruption():
    run = Runtime(pytorch("ExitCode", backoffLimit=0), ClusterNetwork())
    run.step()
    run.replicas["pt-worker-0"] = run.with_("pt-worker-0", phase="Failed", disruption="Evicted")
    run.step()
    assert run.state() == "Restarting" and run.record().disruptions == 1


def test_kubelets_restarts_in_place_are_counted_by_their_class_once():
    run = Runtime(pytorch("OnFailure", backoffLimit=1), ClusterNetwork())
    run.step()
    run.replicas["pt-worker-0"] = run.with_("pt-worker-0", restart_count=2, last_exit_code=137)
    run.step()
    run.step()  # seen already: not counted again
    assert (run.record().counted, run.record().disruptions) == (0, 2)
    run.replicas["pt-worker-0"] = run.with_("pt-worker-0", restart_count=3, last_exit_code=1)
    run.step()
    assert run.record().counted == 1 and run.state() != "Failed"
    run.replicas["pt-worker-0"] = run.with_("pt-worker-0", restart_count=4, last_exit_code=1)
    run.step()
    assert run.state() == "Failed" and "backoff limit" in run.message("Failed")


def test_the_record_is_written_only_when_it_changed():
    run = Runtime(pytorch("OnFailure"))
    assert run.step().annotations is None and run.step().annotations is None
    run.exit("pt-worker-0", 1)
    assert RECORD_ANNOTATION in run.step().annotations
    assert run.step().annotations is None


# ---- job scope: every replica restarts together as the next attempt ---------------------------------------

def test_job_scope_restarts_every_replica_as_the_next_attempt_with_its_number_in_the_env():
    run = Runtime(pytorch("OnFailure", scope="job", backoffLimit=0))
    run.step()
    assert all(a.pod["spec"]["restartPolicy"] == "Never" for a in run.created)  # the core decides each restart
    assert [a.env["TRAINCTL_RESTART_ATTEMPT"] for a in run.created] == ["0", "0"]
    run.exit("pt-worker-0", 137)
    plan = run.step()
    restarted = {a.name for a in plan.actions if isinstance(a, DeleteReplica) and a.reason == "Restart"}
    assert restarted == {"pt-master-0", "pt-worker-0"}  # the healthy master too
    assert run.record().attempt == 1 and (run.record().counted, run.record().disruptions) == (0, 1)
    assert run.record().history[0]["cause"] == "worker-0: exit 137, SIGKILL"
    second = run.created[2:]
    assert {a.name for a in second} == {"pt-master-0", "pt-worker-0"}  # locally at once
    assert {(a.labels[ATTEMPT_LABEL], a.env["TRAINCTL_RESTART_ATTEMPT"], a.env["TORCHELASTIC_RESTART_COUNT"])
            for a in second} == {("1", "1", "1")}
    assert "attempt 2 (restarted after worker-0: exit 137, SIGKILL)" in run.message("Restarting")
    run.step()
    assert run.state() == "Running"
    run.exit("pt-worker-0", 0)
    run.exit("pt-master-0", 0)
    run.step()
    assert run.state() == "Succeeded"


def test_in_a_cluster_the_next_attempt_starts_once_every_old_pod_is_gone():
    run = Runtime(pytorch("OnFailure", scope="job", workers=2), ClusterNetwork())
    run.step()
    run.exit("pt-worker-1", 137)
    run.step()
    assert all(r.deleting for r in run.replicas.values() if r.name != "pt-worker-1")
    run.gone("pt-worker-1")
    run.gone("pt-worker-0")
    plan = run.step()
    assert not [a for a in plan.actions if isinstance(a, CreateReplica)]  # the master still terminates
    assert run.record().attempt == 1  # decided once, however many passes it takes
    run.gone("pt-master-0")
    plan = run.step()
    assert {a.name for a in plan.actions if isinstance(a, CreateReplica)} == {"pt-master-0", "pt-worker-0",
                                                                               "pt-worker-1"}
    assert run.record().attempt == 1 and run.record().disruptions == 1


def test_a_replica_of_an_older_attempt_is_stopped_whichever_pass_finds_it():
    resource = pytorch("OnFailure", scope="job")
    resource["metadata"]["annotations"][RECORD_ANNOTATION] = json.dumps({"attempt": 2})
    old = ObservedReplica("Worker", 0, "pt-worker-0", "Running", attempt=1)
    plan = reconcile(resource, [old], T0, ClusterNetwork())
    assert [(a.name, a.reason) for a in plan.actions if isinstance(a, DeleteReplica)] == [("pt-worker-0", "Restart")]
    assert not [a for a in plan.actions if isinstance(a, CreateReplica)]


def test_a_raised_exception_is_not_retried_in_job_scope():
    run = Runtime(pytorch("OnFailure", scope="job", backoffLimit=5))
    run.step()
    run.exit("pt-worker-0", 1, message=TRACEBACK)
    run.step()
    assert run.state() == "Failed" and "worker-0 raised ValueError: bad batch" in run.message("Failed")
    assert len(run.starts("pt-worker-0")) == 1 and run.record().attempt == 0


def test_a_listed_exit_code_is_retried_in_job_scope_even_under_exit_code():
    run = Runtime(pytorch("ExitCode", scope="job", retry="42", backoffLimit=5))
    run.step()
    run.exit("pt-worker-0", 42)
    run.step()
    assert run.record().attempt == 1 and run.record().counted == 1 and len(run.starts("pt-master-0")) == 2


def test_a_peer_that_lost_its_peer_is_no_cause_the_one_that_died_is():
    run = Runtime(pytorch("OnFailure", scope="job", workers=2, backoffLimit=0))
    run.step()
    run.exit("pt-master-0", 1, message=GLOO_LOSS)
    run.exit("pt-worker-1", 137)
    run.step()
    assert run.record().attempt == 1 and run.record().history[0]["cause"].startswith("worker-1: exit 137")


def test_a_lost_peer_waits_for_its_cause_then_counts_as_a_disruption():
    run = Runtime(pytorch("OnFailure", scope="job", workers=2, backoffLimit=0))
    run.step()
    run.exit("pt-master-0", 1, message=GLOO_LOSS)
    plan = run.step()
    assert run.record().attempt == 0 and plan.requeue_after == pytest.approx(CAUSE_WAIT_S)
    assert run.state() != "Failed"
    run.step(CAUSE_WAIT_S)
    assert run.record().attempt == 1 and run.record().disruptions == 1
    assert run.record().history[0]["cause"] == "master-0: lost its peer (gloo)"


def test_a_pod_deleted_by_hand_restarts_the_job_as_a_disruption():
    run = Runtime(pytorch("OnFailure", scope="job", backoffLimit=0), ClusterNetwork())
    run.step()
    run.replicas["pt-worker-0"] = run.with_("pt-worker-0", deleting=True)
    run.step()
    assert run.record().attempt == 1 and run.record().disruptions == 1 and run.record().counted == 0
    assert run.record().history[0]["cause"] == "worker-0: its pod was deleted"
    assert run.replicas["pt-master-0"].deleting


def test_a_pod_gone_before_any_pass_saw_it_terminating_is_a_disruption_too():
    run = Runtime(pytorch("OnFailure", scope="job", workers=2, backoffLimit=0), ClusterNetwork())
    run.step()
    run.step()  # every replica seen together: from now on, one missing is gone, not yet to be created
    assert run.record().seen == {"Master": 1, "Worker": 2}
    run.gone("pt-worker-1")  # deleted with no grace, or its node's pods removed
    run.step()
    assert run.record().attempt == 1 and run.record().disruptions == 1
    assert run.record().history[0]["cause"] == "worker-1: its pod is gone" and run.record().seen == {}


def test_scaling_up_in_job_scope_adds_replicas_without_a_restart():
    run = Runtime(pytorch("OnFailure", scope="job", workers=1), ClusterNetwork())
    run.step()
    run.step()
    run.resource["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    plan = run.step()
    assert [a.name for a in plan.actions if isinstance(a, CreateReplica)] == ["pt-worker-1"]
    run.step()
    assert run.record().attempt == 0 and run.record().seen == {"Master": 1, "Worker": 2}


def test_job_scope_with_never_fails_on_any_failure():
    run = Runtime(pytorch("Never", scope="job"))
    run.step()
    run.exit("pt-worker-0", 137)
    run.step()
    assert run.state() == "Failed" and run.record().attempt == 0


# ---- preemption: suspend and resume ------------------------------------------------------------------------

def test_a_resume_after_running_is_the_next_attempt_and_spends_nothing():
    run = Runtime(pytorch("OnFailure", backoffLimit=0))
    run.step()
    run.resource["spec"]["runPolicy"]["suspend"] = True
    run.step(60)
    run.resource["spec"]["runPolicy"]["suspend"] = False
    run.step(18 * 60)
    record = run.record()
    assert (record.attempt, record.preemptions, record.counted, record.disruptions) == (1, 1, 0, 0)
    assert record.history == [{"attempt": 1, "class": PREEMPTION, "at": stamp(T0 + timedelta(minutes=1)),
                               "resumed": stamp(T0 + timedelta(minutes=19))}]
    assert {a.env["TRAINCTL_RESTART_ATTEMPT"] for a in run.created[2:]} == {"1"}


def test_a_job_created_suspended_starts_as_its_first_attempt():
    run = Runtime(pytorch("OnFailure", suspend=True))
    run.step()
    run.resource["spec"]["runPolicy"]["suspend"] = False
    run.step(30)
    assert run.record().attempt == 0 and "TRAINCTL_RESTART_ATTEMPT" not in run.created[0].env


# ---- checkpoint storage -----------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, volume, sub_path", [
    ("10Gi", {"persistentVolumeClaim": {"claimName": "pt-checkpoints"}}, None),
    ("pvc:shared", {"persistentVolumeClaim": {"claimName": "shared"}}, "pt"),
    ("host:/data/ckpt", {"hostPath": {"path": "/data/ckpt/default/pt", "type": "DirectoryOrCreate"}}, None),
])
def test_every_replica_mounts_the_jobs_checkpoint_storage(spec, volume, sub_path):
    resource = pytorch()
    resource["metadata"]["annotations"][checkpoint_volume.ANNOTATION] = spec
    for action in reconcile(resource, [], T0, ClusterNetwork()).actions:
        if isinstance(action, CreateReplica):
            assert {"name": checkpoint_volume.VOLUME, **volume} in action.pod["spec"]["volumes"]
            (mount,) = [m for m in action.pod["spec"]["containers"][0]["volumeMounts"]
                        if m["name"] == checkpoint_volume.VOLUME]
            assert mount.get("subPath") == sub_path and mount["mountPath"] == checkpoint_volume.MOUNT_PATH
            assert action.env["TRAINCTL_CHECKPOINT_DIR"] == checkpoint_volume.MOUNT_PATH
    claim = checkpoint_volume.claim(resource)
    assert (claim is not None) == (spec == "10Gi")


@pytest.mark.parametrize("text", ["10", "10Gi", "pvc:my-claim", "host:/x/y", "host:/mnt/checkpoints", "host:/var/tmp/c",
                                  "host:/var/lib/checkpoints", "host:/opt/ckpt", "host:/etcetera", "host:/home/me/c"])
def test_checkpoint_forms(text):
    assert checkpoint_volume.problem(text) is None


# a node's system directories, what lies in them, and what holds them (host:/var: namespace lib, job kubelet)
SYSTEM_PATHS = ["host:/etc", "host:/etc/kubernetes", "host:/proc", "host:/sys/fs", "host:/usr", "host:/usr/local/c",
                "host:/var/lib/kubelet", "host:/var/lib/kubelet/pods", "host:/root", "host:/boot", "host:/dev",
                "host:/bin", "host:/sbin", "host:/lib64", "host:/run", "host:/var/run", "host:/var/lib/containerd",
                "host:/var/lib/docker", "host:/var/log", "host:/var", "host:/var/lib", "host:/opt"]


@pytest.mark.parametrize("text", ["", "0Gi", "ten", "pvc:", "pvc:Bad_Name", "host:relative", "host:/", "host:/a/../b",
                                  "host://x", "nfs:/x", *SYSTEM_PATHS])
def test_checkpoint_forms_refused(text):
    assert checkpoint_volume.problem(text)
    resource = pytorch()
    resource["metadata"]["annotations"][checkpoint_volume.ANNOTATION] = text
    pods = [a.pod for a in reconcile(resource, [], T0, ClusterNetwork()).actions if isinstance(a, CreateReplica)]
    assert all("volumes" not in pod["spec"] for pod in pods)  # a hand-edited annotation wires nothing


def test_no_checkpoint_storage_no_volume():
    pods = [a for a in reconcile(pytorch(), [], T0, ClusterNetwork()).actions if isinstance(a, CreateReplica)]
    assert all("TRAINCTL_CHECKPOINT_DIR" not in a.env for a in pods)


def test_a_job_with_counts_in_status_from_before_the_record_moves_them_into_it():
    resource = pytorch()
    resource["status"] = {"replicaStatuses": {"Worker": {"restarts": 2}}}
    plan = reconcile(resource, [], T0, LocalNetwork())
    assert Record.of({"metadata": {"annotations": plan.annotations}}).counted == 2
    assert "restarts" not in plan.status["replicaStatuses"]["Worker"]
