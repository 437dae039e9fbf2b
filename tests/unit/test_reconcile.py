"""Transitions of the pure reconcile core (contract 1.3-1.9), with the upstream quirks fixed."""

from datetime import datetime, timedelta, timezone

import pytest

from trainctl.core.actions import CreateReplica, CreateService, DeleteJob, DeleteReplica
from trainctl.core.network import ClusterNetwork, LocalNetwork
from trainctl.core.observed import ObservedReplica
from trainctl.core.reconcile import MAX_REQUEUE_S, reconcile, rfc3339
from trainctl.core.restarts import DEFAULT_SUCCESS_WAIT_S as SUCCESS_WAIT_S, SUCCESS_WAIT_ANNOTATION, Record
from tests.unit.test_env_contract import job

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


class Run:
    """Drive a job through reconciles the way a runtime would: apply status, keep observed replicas."""

    def __init__(self, resource, network=None):
        self.resource, self.network = resource, network or LocalNetwork()
        self.replicas: dict[str, ObservedReplica] = {}
        self.now = T0

    def step(self, seconds=0.0):
        self.now += timedelta(seconds=seconds)
        plan = reconcile(self.resource, list(self.replicas.values()), self.now, self.network)
        self.resource = {**self.resource, "status": plan.status}
        if plan.annotations is not None:  # written first, as the runtimes do
            metadata = self.resource["metadata"]
            self.resource["metadata"] = {**metadata, "annotations": {**(metadata.get("annotations") or {}),
                                                                     **plan.annotations}}
        for action in plan.actions:
            if isinstance(action, CreateReplica):
                self.replicas[action.name] = ObservedReplica(action.rtype, action.index, action.name, "Running")
            elif isinstance(action, DeleteReplica):
                self.replicas.pop(action.name, None)
        return plan

    def exit(self, name, code):
        replica = self.replicas[name]
        phase = "Succeeded" if code == 0 else "Failed"
        self.replicas[name] = ObservedReplica(replica.rtype, replica.index, name, phase, code)

    def record(self):
        return Record.of(self.resource)

    def conditions(self):
        return [(c["type"], c["status"]) for c in self.resource["status"]["conditions"]]

    def state(self):
        true = [c["type"] for c in self.resource["status"]["conditions"] if c["status"] == "True"]
        return true[-1]

    def reason(self, ctype):
        return next(c["reason"] for c in self.resource["status"]["conditions"] if c["type"] == ctype)


def pytorch(restart="OnFailure", workers=1, **run_policy):
    resource = job("PyTorchJob", "pt", {"Master": 1, "Worker": workers})
    for spec in resource["spec"]["pytorchReplicaSpecs"].values():
        spec["restartPolicy"] = restart
    resource["spec"]["runPolicy"] = run_policy
    return resource


def test_creates_every_replica_once_and_is_idempotent():
    run = Run(pytorch(workers=2))
    first = run.step()
    assert [a.name for a in first.actions if isinstance(a, CreateReplica)] == ["pt-master-0", "pt-worker-0", "pt-worker-1"]
    again = run.step()
    assert not [a for a in again.actions if isinstance(a, CreateReplica)]
    assert run.conditions() == [("Created", "True"), ("Running", "True")]


def test_services_only_in_a_cluster():
    plan = reconcile(pytorch(), [], T0, ClusterNetwork())
    assert [a.name for a in plan.actions if isinstance(a, CreateService)] == ["pt-master-0", "pt-worker-0"]
    assert not [a for a in reconcile(pytorch(), [], T0, LocalNetwork()).actions if isinstance(a, CreateService)]


def test_master_success_ends_the_job():
    run = Run(pytorch())
    run.step()
    run.step()  # the replicas are observed running
    run.exit("pt-master-0", 0)
    run.step()
    assert run.state() == "Succeeded" and run.resource["status"]["completionTime"] == rfc3339(T0)
    assert ("Running", "False") in run.conditions()
    assert run.resource["status"]["replicaStatuses"]["Worker"]["succeeded"] == 1  # active folded into succeeded


def test_on_failure_restarts_until_success_and_counts_restarts():
    run = Run(pytorch("OnFailure"))
    run.step()
    for _ in range(3):
        run.exit("pt-worker-0", 1)
        plan = run.step()
        assert any(isinstance(a, DeleteReplica) and a.reason == "Restart" for a in plan.actions)
        assert run.state() == "Restarting"
        run.step()  # recreated
        assert "pt-worker-0" in run.replicas
    assert run.record().counted == 3  # in the annotation, not in a status field upstream's CRD would prune
    assert "restarts" not in run.resource["status"]["replicaStatuses"]["Worker"]
    run.exit("pt-master-0", 0)
    run.step()
    assert run.state() == "Succeeded"


def test_never_fails_the_job():
    run = Run(pytorch("Never"))
    run.step()
    run.exit("pt-worker-0", 1)
    run.step()
    assert run.state() == "Failed" and run.reason("Failed") == "PyTorchJobFailed"
    message = run.resource["status"]["conditions"][-1]["message"]
    assert "1 Worker replica(s) failed" in message and "worker-0" in message, message


def test_exit_code_retries_137_and_fails_at_once_on_1_with_completion_time():
    run = Run(pytorch("ExitCode"))
    run.step()
    run.exit("pt-worker-0", 137)
    run.step()
    assert run.state() == "Restarting"
    run.step()
    run.exit("pt-worker-0", 1)
    run.step()
    assert run.state() == "Failed"
    assert "completionTime" in run.resource["status"]  # upstream leaves it nil [quirk]


def test_backoff_limit_counts_recreations_too():
    run = Run(pytorch("ExitCode", backoffLimit=2))
    run.step()
    for attempt in range(3):
        run.exit("pt-worker-0", 255)  # retryable under ExitCode, and no signal (those are disruptions)
        run.step()
        if attempt < 2:
            assert run.state() == "Restarting"
            run.step()
    assert run.state() == "Failed"
    assert "backoff limit" in run.resource["status"]["conditions"][-1]["message"]
    assert "pt-master-0" not in run.replicas  # running replicas are stopped


def test_backoff_failure_keeps_finished_replicas_unless_clean_pod_policy_all():
    run = Run(pytorch("OnFailure", workers=2, backoffLimit=0))
    run.step()
    run.exit("pt-worker-1", 0)
    run.exit("pt-worker-0", 1)
    plan = run.step()
    deleted = {a.name for a in plan.actions if isinstance(a, DeleteReplica)}
    assert deleted == {"pt-master-0"}  # the running one stops; finished ones stay for inspection


def test_active_deadline_requeues_on_time_and_then_fails():
    run = Run(pytorch(activeDeadlineSeconds=10))
    plan = run.step()
    assert plan.requeue_after == pytest.approx(10)
    plan = run.step(4)
    assert plan.requeue_after == pytest.approx(6)
    run.step(6)
    assert run.state() == "Failed"
    assert "deadline" in run.resource["status"]["conditions"][-1]["message"]
    assert not run.replicas


def test_ttl_deletes_the_job_after_it_finished():
    run = Run(pytorch(ttlSecondsAfterFinished=30))
    run.step()
    run.exit("pt-master-0", 0)
    plan = run.step()
    assert plan.requeue_after == pytest.approx(30)
    assert any(isinstance(a, DeleteJob) for a in run.step(31).actions)


@pytest.mark.parametrize("field", ["activeDeadlineSeconds", "ttlSecondsAfterFinished"])
@pytest.mark.parametrize("seconds", [300000000000, 2**63 - 1])
def test_deadlines_past_year_9999_neither_overflow_nor_end_the_job(field, seconds):
    """int64 allows them; ``start + timedelta(seconds)`` raised OverflowError and killed the runtime."""
    run = Run(pytorch(**{field: seconds}))
    plan = run.step()
    assert run.state() == "Created" and len(run.replicas) == 2
    run.exit("pt-master-0", 0)
    plan = run.step(3600)
    assert run.state() == "Succeeded"
    assert not any(isinstance(a, DeleteJob) for a in plan.actions)
    # requeued no later than a day: every runtime's timer takes that (time.sleep(3e11) raises)
    assert plan.requeue_after == MAX_REQUEUE_S


def test_requeue_after_is_the_nearest_of_deadline_and_day():
    assert Run(pytorch(activeDeadlineSeconds=MAX_REQUEUE_S * 3)).step().requeue_after == MAX_REQUEUE_S
    assert Run(pytorch(activeDeadlineSeconds=90)).step().requeue_after == pytest.approx(90)


@pytest.mark.parametrize("policy, expected", [("None", set()), ("Running", {"pt-worker-0"}),
                                              ("All", {"pt-master-0", "pt-worker-0"})])
def test_clean_pod_policy_on_success(policy, expected):
    run = Run(pytorch(cleanPodPolicy=policy))
    run.step()
    run.exit("pt-master-0", 0)
    plan = run.step()
    assert {a.name for a in plan.actions if isinstance(a, DeleteReplica)} == expected


def test_suspend_stops_everything_and_resume_restarts_with_a_new_start_time():
    run = Run(pytorch())
    run.step()
    run.step()
    run.resource["spec"]["runPolicy"]["suspend"] = True
    run.step(5)
    assert not run.replicas and run.state() == "Suspended"
    assert ("Running", "False") in run.conditions()
    assert run.resource["status"]["startTime"] == rfc3339(T0)  # not reset on suspend
    run.resource["spec"]["runPolicy"]["suspend"] = False
    run.step(5)
    run.step()
    assert set(run.replicas) == {"pt-master-0", "pt-worker-0"}
    assert run.conditions() == [("Created", "True"), ("Suspended", "False"), ("Running", "True")]
    assert run.resource["status"]["startTime"] == rfc3339(T0 + timedelta(seconds=10))


def test_created_suspended_never_starts_anything():
    resource = pytorch(suspend=True)
    plan = reconcile(resource, [], T0, LocalNetwork())
    assert not [a for a in plan.actions if isinstance(a, CreateReplica)]


def test_replicas_zero_creates_nothing_instead_of_looping():
    resource = pytorch()
    resource["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 0
    run = Run(resource)
    for _ in range(3):
        plan = run.step()
        assert not [a for a in plan.actions if isinstance(a, DeleteReplica)]
    assert set(run.replicas) == {"pt-master-0"}


def test_scale_down_deletes_extra_replicas():
    run = Run(pytorch(workers=3))
    run.step()
    run.resource["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    plan = run.step()
    assert {a.name for a in plan.actions if isinstance(a, DeleteReplica) and a.reason == "ScaleDown"} == \
        {"pt-worker-1", "pt-worker-2"}


def test_mpi_failure_reason_is_not_doubled_and_idle_workers_stop_at_the_end():
    resource = job("MPIJob", "m", {"Launcher": 1, "Worker": 2})
    run = Run(resource)
    run.step()
    run.exit("m-launcher", 0)
    plan = run.step()
    assert run.state() == "Succeeded"
    assert {a.name for a in plan.actions if isinstance(a, DeleteReplica)} == {"m-worker-0", "m-worker-1"}
    failing = Run(job("MPIJob", "m", {"Launcher": 1, "Worker": 1}))
    failing.step()
    failing.exit("m-launcher", 1)
    failing.step()
    assert failing.reason("Failed") == "MPIJobFailed"


def test_tf_without_chief_succeeds_when_worker_0_succeeds_unless_all_workers():
    run = Run(job("TFJob", "t", {"Worker": 2}))
    run.step()
    run.exit("t-worker-0", 0)
    run.step()
    assert run.state() == "Succeeded"
    strict = Run(job("TFJob", "t", {"Worker": 2}, successPolicy="AllWorkers"))
    strict.step()
    strict.exit("t-worker-0", 0)
    strict.step()
    assert strict.state() == "Running"


def test_managed_by_another_controller_is_left_alone():
    resource = pytorch(managedBy="kueue.x-k8s.io/multikueue")
    plan = reconcile(resource, [], T0, ClusterNetwork())
    assert plan.actions == [] and plan.status == {}


def test_observed_replicas_are_handled_in_replica_type_order():
    observed = [ObservedReplica("Worker", 0, "pt-worker-0", "Running"),
                ObservedReplica("Master", 0, "pt-master-0", "Running")]
    plan = reconcile(pytorch(cleanPodPolicy="All", suspend=True), observed, T0, LocalNetwork())
    assert [a.name for a in plan.actions if isinstance(a, DeleteReplica)] == ["pt-master-0", "pt-worker-0"]


def test_a_restarted_pod_is_recreated_on_a_later_pass_in_a_cluster():
    failed = [ObservedReplica("Master", 0, "pt-master-0", "Running"),
              ObservedReplica("Worker", 0, "pt-worker-0", "Failed", 1)]
    plan = reconcile(pytorch(), failed, T0, ClusterNetwork())
    assert [type(a).__name__ for a in plan.actions if not type(a).__name__ == "RecordEvent"] == \
        ["DeleteReplica", "DeleteService"]
    terminating = [failed[0], ObservedReplica("Worker", 0, "pt-worker-0", "Failed", 1, deleting=True)]
    assert not [a for a in reconcile(pytorch(), terminating, T0, ClusterNetwork()).actions
                if isinstance(a, CreateReplica)]
    gone = reconcile(pytorch(), failed[:1], T0, ClusterNetwork())
    assert [a.name for a in gone.actions if isinstance(a, CreateReplica)] == ["pt-worker-0"]


def test_tf_replica_killed_by_a_signal_restarts_instead_of_failing_the_job():
    resource = job("TFJob", "tf", {"PS": 1, "Worker": 2})
    for spec in resource["spec"]["tfReplicaSpecs"].values():
        spec["restartPolicy"] = "ExitCode"
    run = Run(resource)
    run.step()
    run.exit("tf-worker-1", 137)  # upstream fails the TFJob here (#1560)
    run.step()
    assert run.state() == "Restarting" and "tf-worker-1" in run.replicas
    run.exit("tf-ps-0", 2)
    run.step()
    assert run.state() == "Failed"


def test_a_stall_timeout_fails_a_running_job_heard_from_too_long_ago_and_requeues_on_time():
    resource = pytorch()
    resource["metadata"]["annotations"] = {"trainctl.io/stall-timeout": "60"}
    run = Run(resource)
    run.step()
    run.step()  # Running now: the timeout applies from here on
    heard = run.now
    plan = reconcile(run.resource, list(run.replicas.values()), heard + timedelta(seconds=20), run.network,
                     last_activity=heard)
    assert plan.requeue_after == pytest.approx(40) and not any(isinstance(a, DeleteReplica) for a in plan.actions)
    assert reconcile(run.resource, list(run.replicas.values()), heard + timedelta(seconds=600), run.network
                     ).status == plan.status  # activity unknown: never a stall
    plan = reconcile(run.resource, list(run.replicas.values()), heard + timedelta(seconds=61), run.network,
                     last_activity=heard)
    failed = plan.status["conditions"][-1]
    assert (failed["type"], failed["status"]) == ("Failed", "True")
    assert failed["message"] == ("Job pt has failed because it stalled: no replica wrote output or progress for 61s "
                                 "(stall timeout 60s)")
    assert {a.name for a in plan.actions if isinstance(a, DeleteReplica)} == {"pt-master-0", "pt-worker-0"}


# ---- a failure for good is not overtaken by a success (issue 40) -------------------------------------------------

#: the tail of a rank's log whose all-reduce lost its peer: a consequence, whose Failed condition waits up to
#: CAUSE_WAIT_S for the cause to show (cause_pending)
PEER_LOST = ("[rank1]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
             "peer [10.88.0.7]:28344. This is typically caused by a remote worker crashing.")


def worker_fails_and_master_succeeds(network, message: str, master_after: float | None, passes_between: int) -> Run:
    """A worker failed under Never (with ``message`` as its termination message) and the master ending well
    ``master_after`` seconds later (None: in the same pass), with ``passes_between`` reconciles seeing the first
    before the second; then passes until nothing changes."""
    run = Run(pytorch("Never"), network)
    run.step()
    run.replicas["pt-worker-0"] = ObservedReplica("Worker", 0, "pt-worker-0", "Failed", 1, reason="Error",
                                                  finished_at=rfc3339(run.now), message=message)
    for _ in range(passes_between):
        run.step((master_after or 0) / passes_between)
    if "pt-master-0" in run.replicas:  # not yet stopped by the core
        run.replicas["pt-master-0"] = ObservedReplica("Master", 0, "pt-master-0", "Succeeded", 0,
                                                      reason="Completed", finished_at=rfc3339(run.now))
    for _ in range(4):
        run.step(1)
    return run


@pytest.mark.parametrize("network", [LocalNetwork(), ClusterNetwork()], ids=["local", "cluster"])
@pytest.mark.parametrize("message", ["", "trainctl-raised:v1 ValueError: rank 1 raised", PEER_LOST],
                         ids=["no-message", "raised", "peer-lost"])
@pytest.mark.parametrize(("master_after", "passes_between"), [(None, 0), (0.5, 1), (3, 1), (3, 3), (30, 5)],
                         ids=["same-pass", "next-pass", "3s-later", "3s-three-passes", "30s-later"])
def test_a_worker_failed_under_never_fails_the_job_whenever_the_master_succeeds(network, message, master_after,
                                                                                passes_between):
    """The cluster's order of pod statuses (the worker's failure and the master's success in one pass, or the
    master ending while the Failed condition waits for its cause) gave Succeeded; the answer is Failed, as the
    local backend's, naming worker-0."""
    run = worker_fails_and_master_succeeds(network, message, master_after, passes_between)
    assert run.state() == "Failed", run.conditions()
    assert not any(c["type"] == "Succeeded" for c in run.resource["status"]["conditions"]), run.conditions()
    message = run.resource["status"]["conditions"][-1]["message"]
    assert "1 Worker replica(s) failed" in message and "worker-0" in message, message


def master_succeeds_while_the_worker_starts(network, worker_phase: str) -> Run:
    """The cluster's other order: the master ends well before the worker's pod (which waited for the master's
    Service) has run, the worker being ``worker_phase`` then."""
    run = Run(pytorch("Never"), network)
    run.step()
    run.replicas["pt-worker-0"] = ObservedReplica("Worker", 0, "pt-worker-0", worker_phase)
    run.replicas["pt-master-0"] = ObservedReplica("Master", 0, "pt-master-0", "Succeeded", 0, reason="Completed",
                                                  finished_at=rfc3339(run.now))
    return run


@pytest.mark.parametrize("network", [LocalNetwork(), ClusterNetwork()], ids=["local", "cluster"])
@pytest.mark.parametrize("worker_phase", ["Pending", "Running"])
@pytest.mark.parametrize("worker_fails_after", [0.5, 3, 30, 59])
def test_a_worker_that_fails_after_the_master_succeeded_still_fails_the_job(network, worker_phase,
                                                                            worker_fails_after):
    """Seen on the real node: the master of a function job ended in 3 s, before the worker's pod ran, and the
    job was Succeeded although the worker then raised. Its success now waits for the worker's run."""
    run = master_succeeds_while_the_worker_starts(network, worker_phase)
    plan = run.step()
    assert not any(c["type"] == "Succeeded" for c in run.resource["status"]["conditions"]), run.conditions()
    assert plan.requeue_after == pytest.approx(SUCCESS_WAIT_S)  # looks again when the wait ends, at the latest
    run.step(worker_fails_after)
    run.replicas["pt-worker-0"] = ObservedReplica("Worker", 0, "pt-worker-0", "Failed", 1, reason="Error",
                                                  finished_at=rfc3339(run.now),
                                                  message="trainctl-raised:v1 ValueError: rank 1 raised")
    for _ in range(3):
        run.step(1)
    assert run.state() == "Failed", run.conditions()
    assert not any(c["type"] == "Succeeded" for c in run.resource["status"]["conditions"]), run.conditions()
    assert "worker-0" in run.resource["status"]["conditions"][-1]["message"]


def test_a_worker_that_ends_well_after_the_master_makes_the_job_succeed_at_once():
    run = master_succeeds_while_the_worker_starts(ClusterNetwork(), "Running")
    run.step()
    run.step(2)
    assert run.state() != "Succeeded"
    run.exit("pt-worker-0", 0)
    run.step(1)
    assert run.state() == "Succeeded"


def test_a_worker_still_running_when_the_wait_ends_leaves_the_job_succeeded():
    """The wait is bounded: a worker that never ends does not keep a finished master's job running."""
    run = master_succeeds_while_the_worker_starts(ClusterNetwork(), "Running")
    plan = run.step(0)
    assert run.state() != "Succeeded"
    plan = run.step(SUCCESS_WAIT_S - 1)
    assert run.state() != "Succeeded" and plan.requeue_after == pytest.approx(1)
    run.step(1)
    assert run.state() == "Succeeded"


@pytest.mark.parametrize(("annotation", "waits"), [("0", 0), ("5", 5), ("600", 600), ("-1", 60), ("x", 60),
                                                   ("99999", 60)])
def test_the_wait_for_workers_is_the_jobs_annotation(annotation, waits):
    resource = pytorch("Never")
    resource["metadata"]["annotations"] = {SUCCESS_WAIT_ANNOTATION: annotation}
    run = master_succeeds_while_the_worker_starts(ClusterNetwork(), "Running")
    run.resource = {**run.resource, "metadata": resource["metadata"]}
    if waits:
        assert run.step().requeue_after == pytest.approx(waits)
        run.step(waits - 0.5)
        assert run.state() != "Succeeded"
        run.step(0.5)
    else:
        run.step()
    assert run.state() == "Succeeded"


def test_a_chief_success_does_not_wait_for_parameter_servers():
    """Kinds with replicas that never end by themselves (TF's parameter servers) succeed as before."""
    resource = job("TFJob", "tf", {"Chief": 1, "PS": 1, "Worker": 1})
    run = Run(resource, ClusterNetwork())
    run.step()
    run.step()
    run.replicas["tf-chief-0"] = ObservedReplica("Chief", 0, "tf-chief-0", "Succeeded", 0,
                                                 finished_at=rfc3339(run.now))
    run.step()
    assert run.state() == "Succeeded"


# ---- exit 2, "the arguments are wrong", fails the job at once (issue 40) -----------------------------------------

@pytest.mark.parametrize("policy", ["OnFailure", "Always", "ExitCode", "Never"])
def test_a_usage_error_exit_2_fails_the_job_at_once_whatever_the_policy(policy):
    run = Run(pytorch(policy, backoffLimit=3))
    run.step()
    run.exit("pt-worker-0", 2)
    plan = run.step()
    assert run.state() == "Failed", run.conditions()
    assert not any(isinstance(action, CreateReplica) for action in plan.actions)
    assert run.record().counted == 0


def test_a_usage_error_listed_as_retryable_is_retried():
    resource = pytorch("OnFailure", backoffLimit=3)
    resource["metadata"]["annotations"] = {"trainctl.io/retry-on-exit-codes": "2"}
    run = Run(resource)
    run.step()
    run.exit("pt-worker-0", 2)
    run.step()
    assert run.state() != "Failed" and run.record().counted == 1, run.conditions()


def test_a_kubelet_restart_after_exit_2_fails_the_job_and_stops_its_pods():
    """On a cluster OnFailure's pods restart in place: the kubelet has restarted the container by the time the
    controller sees the run that exited 2; the job fails then, and its pods are stopped."""
    run = Run(pytorch("OnFailure", backoffLimit=3), ClusterNetwork())
    run.step()
    run.replicas["pt-worker-0"] = ObservedReplica("Worker", 0, "pt-worker-0", "Running", restart_count=1,
                                                  last_exit_code=2, last_reason="Error")
    plan = run.step()
    assert run.state() == "Failed", run.conditions()
    assert {action.name for action in plan.actions if isinstance(action, DeleteReplica)} >= {"pt-worker-0"}
